/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the nettrace parser (agent/nettrace.h): the stream a runtime sends
 * after CollectTracing. The target process writes every byte of it.
 *
 * Input: one chunking byte, then the stream. The stream is parsed twice: in
 * one piece, and in chunks of 1 + (byte % 64) bytes (byte 0xFF: one byte at
 * a time too); bit 0x40 of the byte has both parses keep stacks
 * (NettraceCallbacks.stacks). Every event with a definition has its payload
 * decoded and is offered to nettrace_counter_extract() and to the readers of
 * monitor-events.h (exceptions, logs and their scopes, symbols, whose table
 * then names the event's frames).
 *
 * Invariants: both parses give the same result and see the same headers,
 * definitions and events (counted and hashed); a stream that ended returns 0
 * from nettrace_finish(), one that did not returns INCOMPLETE or its error;
 * errors are the documented codes; every string out of the parser is valid
 * UTF-8; decoded values respect NETTRACE_VALUES_MAX.
 */
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "eventpipe/monitor-events.h"
#include "eventpipe/nettrace.h"
#include "common/text.h"

typedef struct Seen {
        unsigned headers, metadata, events, values, counters, monitored;
        uint64_t hash;
        unsigned pointer_size;
        NettraceHeader header; /* the last one, to date events by */
        MonitorSymbols *symbols;
        MonitorScopes *scopes;
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
        s->pointer_size = h->pointer_size;
        s->header = *h;
        mix(s, h->pid);
        /* the clock sync is the target's: dating an event must hold for any (UBSan checks the arithmetic) */
        mix(s, (uint64_t)nettrace_time_nsec(h, 0));
        mix(s, (uint64_t)nettrace_time_usec(h, UINT64_MAX));
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
                const char *more[] = { c.tags, c.session_id, c.meter_version, c.description, c.instrument_type,
                                       c.instrument_tags, c.meter_tags };
                for (size_t i = 0; i < ELEMENTSOF(more); i++)
                        if (more[i])
                                check_utf8(more[i]);
                fuzz_assert(c.n_quantiles <= NETTRACE_QUANTILES_MAX);
                s->counters++;
        }
        nettrace_counter_done(&c);
}

static void monitor(const NettraceEvent *e, Seen *s) {
        const MonitorScope *around[8];
        MonitorException x = {};
        MonitorLogEntry l = {};
        int r;

        r = monitor_exception_extract(e, s->pointer_size, &x);
        fuzz_assert(r == 0 || r == MONITOR_E_OTHER || r == MONITOR_E_MALFORMED);
        if (r == 0) {
                check_utf8(x.type);
                check_utf8(x.message);
                s->monitored++;
        }
        monitor_exception_done(&x);

        r = monitor_log_extract(e, &l);
        fuzz_assert(r == 0 || r == MONITOR_E_OTHER || r == MONITOR_E_MALFORMED || r == NETTRACE_E_LIMIT);
        if (r == 0) {
                check_utf8(l.category);
                fuzz_assert(l.n_arguments <= MONITOR_SCOPE_ARGUMENTS_MAX);
                for (size_t i = 0; i < l.n_arguments; i++) {
                        check_utf8(l.keys[i]);
                        check_utf8(l.values[i]);
                }
                if (l.kind == MONITOR_LOG_MESSAGE) {
                        check_utf8(l.message);
                        fuzz_assert(monitor_scopes_of(s->scopes, e, around, ELEMENTSOF(around)) <= ELEMENTSOF(around));
                } else if (l.kind == MONITOR_LOG_SCOPE_START)
                        fuzz_assert(monitor_scopes_start(s->scopes, e, &l) == 0);
                else
                        monitor_scopes_stop(s->scopes, e);
                s->monitored++;
        }
        monitor_log_entry_done(&l);

        r = monitor_symbols_add(s->symbols, e);
        fuzz_assert(r == 0 || r == MONITOR_E_OTHER || r == MONITOR_E_MALFORMED);
        fuzz_assert(monitor_symbols_methods(s->symbols) <= MONITOR_METHODS_MAX);
        for (size_t i = 0; i < e->stack_depth; i++) {
                const MonitorMethod *m = monitor_symbols_lookup(s->symbols, e->stack[i]);

                if (m) {
                        fuzz_assert(e->stack[i] - m->start <= m->size);
                        check_utf8(m->name);
                        check_utf8(m->parameters);
                        fuzz_assert(m->parameters[0] == '\0' || m->parameters[0] == '(');
                        mix(s, m->start);
                }
        }
}

static int on_event(const NettraceEvent *e, void *userdata) {
        Seen *s = userdata;

        fuzz_assert(e->metadata_id != 0);
        fuzz_assert(e->payload_size <= NETTRACE_BLOCK_MAX);
        s->events++;
        fuzz_assert(!e->stack_depth == !e->stack);
        fuzz_assert(e->stack_depth <= NETTRACE_STACK_FRAMES_MAX);
        for (size_t i = 0; i < e->stack_depth; i++)
                mix(s, e->stack[i]);
        mix(s, e->metadata_id);
        mix(s, e->sequence);
        mix(s, e->timestamp);
        if (s->headers > 0)
                mix(s, (uint64_t)nettrace_time_nsec(&s->header, e->timestamp));
        for (size_t i = 0; i < e->payload_size; i++)
                mix(s, e->payload[i]);
        if (e->metadata) {
                fuzz_assert(e->metadata->id == e->metadata_id);
                decode_payload(e, s);
                monitor(e, s);
        }
        return 0;
}

static int parse(const uint8_t *data, size_t size, size_t chunk, bool stacks, Seen *s, int *ret_finish) {
        /* half the inputs under a small bound of kept frames, as the [[collect]] watch parses with */
        const NettraceCallbacks callbacks = { .header = on_header, .metadata = on_metadata, .event = on_event,
                                              .stacks = stacks, .stack_frames_max = size % 2 ? 64 : 0 };
        NettraceParser *p = NULL;
        int r = 0, again;

        fuzz_assert(monitor_symbols_new(&s->symbols) == 0 && monitor_scopes_new(&s->scopes) == 0);
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
        s->symbols = monitor_symbols_free(s->symbols);
        s->scopes = monitor_scopes_free(s->scopes);
        return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Seen whole = {}, chunked = {};
        int r_whole, r_chunked, finish_whole, finish_chunked;
        size_t chunk;
        bool stacks;

        if (size < 1)
                return 0;
        chunk = data[0] == 0xFF ? 1 : 1 + data[0] % 64;

        stacks = data[0] != 0xFF && (data[0] & 0x40);
        r_whole = parse(data + 1, size - 1, size, stacks, &whole, &finish_whole);
        r_chunked = parse(data + 1, size - 1, chunk, stacks, &chunked, &finish_chunked);

        fuzz_assert(r_whole == r_chunked && finish_whole == finish_chunked);
        fuzz_assert(whole.headers == chunked.headers && whole.metadata == chunked.metadata);
        fuzz_assert(whole.events == chunked.events && whole.hash == chunked.hash);
        fuzz_assert(whole.values == chunked.values && whole.counters == chunked.counters);
        fuzz_assert(whole.monitored == chunked.monitored);
        fuzz_assert(whole.headers <= 1);
        return 0;
}
