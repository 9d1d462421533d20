/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the nettrace parser (agent/nettrace.h): the stream a runtime sends
 * after CollectTracing. The target process writes every byte of it.
 *
 * Input: one chunking byte, then the stream. The stream is parsed twice: in
 * one piece, and in chunks of 1 + (byte % 64) bytes (byte 0xFF: one byte at
 * a time too). Every event with a definition has its payload decoded and is
 * offered to nettrace_counter_extract().
 *
 * Invariants: both parses give the same result and see the same headers,
 * definitions and events (counted and hashed); a stream that ended returns 0
 * from nettrace_finish(), one that did not returns INCOMPLETE or its error;
 * errors are the documented codes; every string out of the parser is valid
 * UTF-8; decoded values respect NETTRACE_VALUES_MAX.
 */
#include <string.h>

#include "fuzz.h"
#include "nettrace.h"
#include "text.h"

typedef struct Seen {
        unsigned headers, metadata, events, values, counters;
        uint64_t hash;
} Seen;

static void mix(Seen *s, uint64_t v) {
        s->hash = (s->hash ^ v) * 0x100000001B3ull;
}

static void check_utf8(const char *s) {
        fuzz_assert(s);
        fuzz_assert(utf8_is_valid(s, strlen(s)));
}

static bool code_is_known(int r) {
        return r == NETTRACE_E_INCOMPLETE || r == NETTRACE_E_MALFORMED || r == NETTRACE_E_UNSUPPORTED ||
               r == NETTRACE_E_LIMIT;
}

static void check_fields(const NettraceField *f, size_t n, unsigned depth) {
        fuzz_assert(depth <= NETTRACE_DEPTH_MAX + 1);
        for (size_t i = 0; i < n; i++) {
                check_utf8(f[i].name);
                check_fields(f[i].children, f[i].n_children, depth + 1);
        }
}

static size_t check_values(const NettraceValue *v, size_t n) {
        size_t total = n;

        for (size_t i = 0; i < n; i++) {
                if (v[i].type == NETTRACE_TYPE_STRING)
                        check_utf8(v[i].string);
                total += check_values(v[i].items, v[i].n_items);
        }
        return total;
}

static int on_header(const NettraceHeader *h, void *userdata) {
        Seen *s = userdata;

        fuzz_assert(h->pointer_size == 4 || h->pointer_size == 8);
        fuzz_assert(h->qpc_frequency > 0);
        s->headers++;
        mix(s, h->pid);
        return 0;
}

static int on_metadata(const NettraceMetadata *m, void *userdata) {
        Seen *s = userdata;

        check_utf8(m->provider);
        check_utf8(m->event_name);
        check_fields(m->fields, m->n_fields, 0);
        fuzz_assert(m->id != 0);
        s->metadata++;
        mix(s, m->id);
        return 0;
}

static void decode_payload(const NettraceEvent *e, Seen *s) {
        NettraceValue *values = NULL;
        NettraceCounter c = {};
        size_t n = 0;
        int r;

        r = nettrace_payload_decode(e->metadata, e->payload, e->payload_size, &values, &n);
        fuzz_assert(r == 0 || r == NETTRACE_E_MALFORMED || r == NETTRACE_E_LIMIT);
        if (r == 0) {
                fuzz_assert(check_values(values, n) <= NETTRACE_VALUES_MAX);
                s->values += (unsigned)n;
        } else
                fuzz_assert(!values && n == 0);
        nettrace_values_free(values, n);

        r = nettrace_counter_extract(e, &c);
        fuzz_assert(r == 0 || r == NETTRACE_E_NO_COUNTER || r == NETTRACE_E_MALFORMED || r == NETTRACE_E_LIMIT);
        if (r == 0) {
                check_utf8(c.provider);
                check_utf8(c.name);
                if (c.display_name)
                        check_utf8(c.display_name);
                if (c.units)
                        check_utf8(c.units);
                s->counters++;
        }
        nettrace_counter_done(&c);
}

static int on_event(const NettraceEvent *e, void *userdata) {
        Seen *s = userdata;

        fuzz_assert(e->metadata_id != 0);
        fuzz_assert(e->payload_size <= NETTRACE_BLOCK_MAX);
        s->events++;
        mix(s, e->metadata_id);
        mix(s, e->sequence);
        mix(s, e->timestamp);
        for (size_t i = 0; i < e->payload_size; i++)
                mix(s, e->payload[i]);
        if (e->metadata) {
                fuzz_assert(e->metadata->id == e->metadata_id);
                decode_payload(e, s);
        }
        return 0;
}

static const NettraceCallbacks callbacks = { on_header, on_metadata, on_event };

static int parse(const uint8_t *data, size_t size, size_t chunk, Seen *s, int *ret_finish) {
        NettraceParser *p = NULL;
        int r = 0, again;

        fuzz_assert(nettrace_parser_new(&callbacks, s, &p) == 0);
        for (size_t pos = 0; pos < size && r == 0; pos += chunk < size - pos ? chunk : size - pos)
                r = nettrace_feed(p, data + pos, chunk < size - pos ? chunk : size - pos);
        *ret_finish = nettrace_finish(p);
        if (r != 0) {
                fuzz_assert(code_is_known(r) && r != NETTRACE_E_INCOMPLETE);
                fuzz_assert(*ret_finish == r);
                /* a failure is final */
                again = nettrace_feed(p, data, size);
                fuzz_assert(again == r);
        } else {
                fuzz_assert(nettrace_offset(p) == size);
                fuzz_assert(*ret_finish == (nettrace_ended(p) ? 0 : NETTRACE_E_INCOMPLETE));
        }
        nettrace_parser_free(p);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Seen whole = {}, chunked = {};
        int r_whole, r_chunked, finish_whole, finish_chunked;
        size_t chunk;

        if (size < 1)
                return 0;
        chunk = data[0] == 0xFF ? 1 : 1 + data[0] % 64;

        r_whole = parse(data + 1, size - 1, size, &whole, &finish_whole);
        r_chunked = parse(data + 1, size - 1, chunk, &chunked, &finish_chunked);

        fuzz_assert(r_whole == r_chunked && finish_whole == finish_chunked);
        fuzz_assert(whole.headers == chunked.headers && whole.metadata == chunked.metadata);
        fuzz_assert(whole.events == chunked.events && whole.hash == chunked.hash);
        fuzz_assert(whole.values == chunked.values && whole.counters == chunked.counters);
        fuzz_assert(whole.headers <= 1);
        return 0;
}
