/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The nettrace parser: byte-exact framing vectors, and streams captured from the real runtime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/nettrace.h"
#include "tests/unit/tap.h"

/* The values tests/target-app/Program.cs writes (TestTargetSource) */
#define MARKER_INT 0x5A5A1234
#define MARKER_LONG 0x0123456789ABCDEFLL
#define MARKER_TEXT "dsagent-marker \xc3\xa9\xe2\x82\xac"
#define MARKER_DOUBLE 2.5
#define METER_VALUE 42.5

/* What the callbacks saw. */
typedef struct Seen {
        NettraceHeader header;
        unsigned headers, metadata, events, markers, bad_markers;
        unsigned counters, cpu_usage, working_set, test_counter, test_gauge, runtime_metrics;
        unsigned instruments, tagged, totals, rates; /* counters: what dsctl counters needs beyond values */
        unsigned rundown_metadata;
        int counter_errors;
        uint64_t payload_sum; /* over every payload byte, to compare chunkings */
} Seen;

typedef struct Buf {
        uint8_t data[1024];
        size_t n;
} Buf;

static void put(Buf *b, const void *p, size_t n) {
        memcpy(b->data + b->n, p, n);
        b->n += n;
}

static void put_u8(Buf *b, uint8_t v) {
        put(b, &v, 1);
}

static void put_u16(Buf *b, uint16_t v) {
        put_u8(b, (uint8_t)v);
        put_u8(b, (uint8_t)(v >> 8));
}

static void put_u32(Buf *b, uint32_t v) {
        put_u16(b, (uint16_t)v);
        put_u16(b, (uint16_t)(v >> 16));
}

static void put_u64(Buf *b, uint64_t v) {
        put_u32(b, (uint32_t)v);
        put_u32(b, (uint32_t)(v >> 32));
}

/* ASCII as NUL-terminated UTF-16LE */
static void put_utf16z(Buf *b, const char *s) {
        for (; *s; s++)
                put_u16(b, (uint8_t)*s);
        put_u16(b, 0);
}

static void put_object_type(Buf *b, const char *name, uint32_t version) {
        put_u8(b, 0x05); /* BeginPrivateObject: the object */
        put_u8(b, 0x05); /* BeginPrivateObject: its type */
        put_u8(b, 0x01); /* NullReference: the type of a type */
        put_u32(b, version);
        put_u32(b, version);
        put_u32(b, (uint32_t)strlen(name));
        put(b, name, strlen(name));
        put_u8(b, 0x06);
}

static void put_stream_start(Buf *b, uint32_t pid) {
        put(b, "Nettrace", 8);
        put_u32(b, 20);
        put(b, "!FastSerialization.1", 20);
        put_object_type(b, "Trace", 4);
        for (int i = 0; i < 8; i++)
                put_u16(b, (uint16_t)(i == 0 ? 2026 : 1));
        put_u64(b, 1000);       /* sync QPC */
        put_u64(b, 1000000000); /* QPC frequency */
        put_u32(b, 8);
        put_u32(b, pid);
        put_u32(b, 2);
        put_u32(b, 1000000);
        put_u8(b, 0x06);
}

/* A block: type, size, zero padding to a 4-byte file offset, body, EndObject. */
static void put_block(Buf *b, const char *type, const Buf *body) {
        put_object_type(b, type, 2);
        put_u32(b, (uint32_t)body->n);
        while (b->n % 4)
                put_u8(b, 0);
        put(b, body->data, body->n);
        put_u8(b, 0x06);
}

/* EventBlock/MetadataBlock header: size 20, flags, min and max timestamp */
static void put_block_header(Buf *b, uint16_t flags) {
        put_u16(b, 20);
        put_u16(b, flags);
        put_u64(b, 0);
        put_u64(b, 0);
}

/* Definition 7: provider "P", event 3 "E", fields: int32 "a", struct "s" { string "t" } */
static void put_metadata_payload(Buf *b) {
        put_u32(b, 7);
        put_utf16z(b, "P");
        put_u32(b, 3);
        put_utf16z(b, "E");
        put_u64(b, 0x10);
        put_u32(b, 1);
        put_u32(b, 4);
        put_u32(b, 2);
        put_u32(b, NETTRACE_TYPE_INT32);
        put_utf16z(b, "a");
        put_u32(b, NETTRACE_TYPE_OBJECT);
        put_u32(b, 1);
        put_u32(b, NETTRACE_TYPE_STRING);
        put_utf16z(b, "t");
        put_utf16z(b, "s");
        /* v5 OpCode tag */
        put_u32(b, 1);
        put_u8(b, 1);
        put_u8(b, 9);
}

/* A whole small stream: metadata uncompressed, two events compressed, an
 * SPBlock and a StackBlock, the end marker. */
static void build_stream(Buf *b) {
        Buf meta = {}, payload = {}, events = {}, sp = {}, stack = {};

        put_stream_start(b, 4242);

        put_metadata_payload(&payload);
        put_block_header(&meta, 0);
        put_u32(&meta, 76 + (uint32_t)payload.n);
        put_u32(&meta, 0);             /* metadata id 0: a definition */
        for (int i = 0; i < 4 + 8 + 8 + 4 + 4 + 8 + 32; i++)
                put_u8(&meta, 0);
        put_u32(&meta, (uint32_t)payload.n);
        put(&meta, payload.data, payload.n);
        while (meta.n % 4)
                put_u8(&meta, 0);
        put_block(b, "MetadataBlock", &meta);

        put_block_header(&events, 1);  /* header compression */
        /* flags: metadata id, capture thread+sequence, thread, payload size; sorted */
        put_u8(&events, 0x01 | 0x02 | 0x04 | 0x40 | 0x80);
        put_u8(&events, 7);            /* metadata id */
        put_u8(&events, 4);            /* sequence delta: 0 + 4, then +1 */
        put_u8(&events, 0x80);         /* capture thread 128 as a varint */
        put_u8(&events, 0x01);
        put_u8(&events, 1);            /* processor */
        put_u8(&events, 99);           /* thread */
        put_u8(&events, 10);           /* timestamp delta */
        put_u8(&events, 8);            /* payload size */
        put_u32(&events, 0xFFFFFFFE);  /* a = -2 */
        put_utf16z(&events, "x");
        /* the second event repeats everything but its timestamp */
        put_u8(&events, 0x00);
        put_u8(&events, 5);
        put_u32(&events, 1);
        put_utf16z(&events, "y");
        put_block(b, "EventBlock", &events);

        put_u64(&sp, 1234);
        put_u32(&sp, 1);
        put_u64(&sp, 99);
        put_u32(&sp, 6);
        put_block(b, "SPBlock", &sp);

        put_u32(&stack, 1);
        put_u32(&stack, 1);
        put_u32(&stack, 8);
        put_u64(&stack, 0xDEADBEEF);
        put_block(b, "StackBlock", &stack);

        put_u8(b, 0x01);
}

static int on_header(const NettraceHeader *h, void *userdata) {
        Seen *s = userdata;

        s->header = *h;
        s->headers++;
        return 0;
}

static int on_metadata(const NettraceMetadata *m, void *userdata) {
        Seen *s = userdata;

        s->metadata++;
        if (strcmp(m->provider, "Microsoft-Windows-DotNETRuntimeRundown") == 0)
                s->rundown_metadata++;
        return 0;
}

static void check_marker(const NettraceEvent *e, Seen *s) {
        NettraceValue *v = NULL;
        size_t n = 0;

        if (nettrace_payload_decode(e->metadata, e->payload, e->payload_size, &v, &n) != 0 || n != 5 ||
            strcmp(v[0].name, "number") != 0 || v[0].type != NETTRACE_TYPE_INT32 || v[0].i != MARKER_INT ||
            v[1].type != NETTRACE_TYPE_INT64 || v[1].i != MARKER_LONG ||
            v[2].type != NETTRACE_TYPE_STRING || strcmp(v[2].string, MARKER_TEXT) != 0 ||
            v[3].type != NETTRACE_TYPE_DOUBLE || v[3].d != MARKER_DOUBLE || v[4].i < 0)
                s->bad_markers++;
        else
                s->markers++;
        nettrace_values_free(v, n);
}

static void count_counter(const NettraceCounter *c, Seen *s) {
        s->counters++;
        if (strcmp(c->provider, "System.Runtime") == 0 && strcmp(c->name, "cpu-usage") == 0 &&
            c->value >= 0 && c->value <= 100)
                s->cpu_usage++;
        if (strcmp(c->provider, "System.Runtime") == 0 && strcmp(c->name, "working-set") == 0 &&
            c->value > 1 && c->value < 100000 && c->units && strcmp(c->units, "MB") == 0)
                s->working_set++;
        if (strcmp(c->provider, "Dsagent-TestTarget") == 0 && strcmp(c->name, "test-counter") == 0 &&
            c->value == METER_VALUE && !c->rate && strcmp(c->display_name, "Test counter") == 0)
                s->test_counter++;
        if (strcmp(c->provider, "Dsagent.TestTarget") == 0 && strcmp(c->name, "test-gauge") == 0 &&
            c->value == METER_VALUE && c->units && strcmp(c->units, "items") == 0)
                s->test_gauge++;
        if (strcmp(c->provider, "System.Runtime") == 0 && strncmp(c->name, "dotnet.", 7) == 0)
                s->runtime_metrics++;
        /* BeginInstrumentReporting: unit, description and .NET 9's id; values with tags, totals, intervals */
        if (c->kind == NETTRACE_COUNTER_INSTRUMENT && strcmp(c->name, "dotnet.gc.collections") == 0 &&
            c->units && strcmp(c->units, "{collection}") == 0 && c->description && c->instrument_id > 0 &&
            c->instrument_type && strcmp(c->instrument_type, "ObservableCounter`1") == 0 && c->session_id &&
            strcmp(c->session_id, "SHARED") == 0)
                s->instruments++;
        if (c->kind == NETTRACE_COUNTER_COUNTER && strcmp(c->name, "dotnet.gc.collections") == 0 && c->tags &&
            strncmp(c->tags, "gc.heap.generation=gen", 22) == 0 && c->has_total && c->instrument_id > 0)
                s->tagged++;
        if (c->kind == NETTRACE_COUNTER_COUNTER && strcmp(c->name, "dotnet.gc.heap.total_allocated") == 0 &&
            c->has_total && c->total > 0)
                s->totals++;
        if (c->kind == NETTRACE_COUNTER_SUM && c->interval_ms == 1000 && c->rate && c->has_value)
                s->rates++;
}

static int on_event(const NettraceEvent *e, void *userdata) {
        NettraceCounter c = {};
        Seen *s = userdata;
        int r;

        s->events++;
        for (size_t i = 0; i < e->payload_size; i++)
                s->payload_sum = s->payload_sum * 31 + e->payload[i];
        if (!e->metadata)
                return 0;
        if (strcmp(e->metadata->provider, "Dsagent-TestTarget") == 0 &&
            strcmp(e->metadata->event_name, "Marker") == 0)
                check_marker(e, s);

        r = nettrace_counter_extract(e, &c);
        if (r == 0)
                count_counter(&c, s);
        else if (r != NETTRACE_E_NO_COUNTER)
                s->counter_errors++;
        nettrace_counter_done(&c);
        return 0;
}

static const NettraceCallbacks callbacks = { .header = on_header, .metadata = on_metadata, .event = on_event };

/* Feeds @data in chunks of 1..@max_chunk bytes (0: all at once); returns feed's result. */
static int parse(const uint8_t *data, size_t size, size_t max_chunk, unsigned seed, Seen *s, int *ret_finish) {
        _cleanup_(nettrace_parser_freep) NettraceParser *p = NULL;
        int r = 0;

        *s = (Seen){};
        if (nettrace_parser_new(&callbacks, s, &p) != 0)
                return -ENOMEM;
        for (size_t pos = 0; pos < size && r == 0;) {
                size_t n = size - pos;

                if (max_chunk > 0) {
                        seed = seed * 1103515245u + 12345u;
                        n = 1 + (seed >> 8) % max_chunk;
                        if (n > size - pos)
                                n = size - pos;
                }
                r = nettrace_feed(p, data + pos, n);
                pos += n;
        }
        *ret_finish = nettrace_finish(p);
        return r;
}

static void test_varint_vectors(void) {
        uint64_t v = 0;
        size_t n = 0;

        check(nettrace_varint_decode((const uint8_t[]){ 0x00 }, 1, 32, &v, &n) == 0 && v == 0 && n == 1);
        check(nettrace_varint_decode((const uint8_t[]){ 0x7F }, 1, 32, &v, &n) == 0 && v == 127 && n == 1);
        check(nettrace_varint_decode((const uint8_t[]){ 0x80, 0x01 }, 2, 32, &v, &n) == 0 && v == 128 && n == 2);
        check(nettrace_varint_decode((const uint8_t[]){ 0xFF, 0xFF, 0xFF, 0xFF, 0x0F }, 5, 32, &v, &n) == 0 &&
              v == UINT32_MAX && n == 5);
        /* a 33rd bit, or a sixth byte, does not fit a 32-bit field */
        check(nettrace_varint_decode((const uint8_t[]){ 0xFF, 0xFF, 0xFF, 0xFF, 0x1F }, 5, 32, &v, &n) ==
              NETTRACE_E_MALFORMED);
        check(nettrace_varint_decode((const uint8_t[]){ 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 6, 32, &v, &n) ==
              NETTRACE_E_MALFORMED);
        check(nettrace_varint_decode((const uint8_t[]){ 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                                        0x01 }, 10, 64, &v, &n) == 0 && v == UINT64_MAX && n == 10);
        check(nettrace_varint_decode((const uint8_t[]){ 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
                                                        0x02 }, 10, 64, &v, &n) == NETTRACE_E_MALFORMED);
        check(nettrace_varint_decode((const uint8_t[]){ 0x80 }, 1, 64, &v, &n) == NETTRACE_E_INCOMPLETE);
        check(nettrace_varint_decode(NULL, 0, 64, &v, &n) == NETTRACE_E_INCOMPLETE);
}

/* Collects the events of the hand-made stream. */
typedef struct Small {
        Seen seen;
        NettraceEvent events[2];
        NettraceValue *values[2];
        size_t n_values[2];
        unsigned n;
} Small;

static int small_event(const NettraceEvent *e, void *userdata) {
        Small *s = userdata;

        if (s->n < 2) {
                s->events[s->n] = *e;
                check(nettrace_payload_decode(e->metadata, e->payload, e->payload_size, &s->values[s->n],
                                              &s->n_values[s->n]) == 0);
                s->events[s->n].payload = NULL;
        }
        s->n++;
        return 0;
}

static int small_header(const NettraceHeader *h, void *userdata) {
        return on_header(h, &((Small *)userdata)->seen);
}

static void test_hand_made_stream(void) {
        static const NettraceCallbacks cb = { .header = small_header, .event = small_event };
        _cleanup_(nettrace_parser_freep) NettraceParser *p = NULL;
        const NettraceMetadata *m;
        Small s = {};
        Buf b = {};

        build_stream(&b);
        check(nettrace_parser_new(&cb, &s, &p) == 0);
        check(nettrace_feed(p, b.data, b.n) == 0);
        check(nettrace_finish(p) == 0 && nettrace_ended(p));
        check(nettrace_offset(p) == b.n);

        check(s.seen.headers == 1 && s.seen.header.pid == 4242 && s.seen.header.pointer_size == 8);
        check(s.seen.header.qpc_frequency == 1000000000 && s.seen.header.sync_time[0] == 2026);

        m = nettrace_metadata_lookup(p, 7);
        check(m && strcmp(m->provider, "P") == 0 && strcmp(m->event_name, "E") == 0);
        check(m && m->event_id == 3 && m->keywords == 0x10 && m->version == 1 && m->level == 4);
        check(m && m->has_opcode && m->opcode == 9 && m->n_fields == 2);
        check(m && m->fields[1].type == NETTRACE_TYPE_OBJECT && m->fields[1].n_children == 1);
        check(!nettrace_metadata_lookup(p, 8));

        check(s.n == 2);
        check(s.events[0].metadata_id == 7 && s.events[0].sequence == 5 && s.events[0].capture_thread_id == 128);
        check(s.events[0].thread_id == 99 && s.events[0].processor == 1 && s.events[0].timestamp == 10);
        check(s.events[0].sorted && s.events[0].payload_size == 8);
        /* the second inherits, and its sequence counts on */
        check(s.events[1].metadata_id == 7 && s.events[1].sequence == 6 && s.events[1].thread_id == 99);
        check(s.events[1].timestamp == 15 && !s.events[1].sorted);
        check(s.n_values[0] == 2 && s.values[0][0].i == -2 && strcmp(s.values[0][1].items[0].string, "x") == 0);
        check(s.n_values[1] == 2 && s.values[1][0].i == 1 && strcmp(s.values[1][1].items[0].string, "y") == 0);
        for (int i = 0; i < 2; i++)
                nettrace_values_free(s.values[i], s.n_values[i]);
}

static int feed_whole(const uint8_t *data, size_t size) {
        _cleanup_(nettrace_parser_freep) NettraceParser *p = NULL;
        int r;

        if (nettrace_parser_new(NULL, NULL, &p) != 0)
                return -ENOMEM;
        r = nettrace_feed(p, data, size);
        return r != 0 ? r : nettrace_finish(p);
}

static void test_framing_errors(void) {
        Buf good = {}, b;
        size_t padding_at;

        build_stream(&good);
        check(feed_whole(good.data, good.n) == 0);

        /* v6: "Nettrace", then a reserved 0 and major version 6 */
        b = (Buf){};
        put(&b, "Nettrace", 8);
        put_u32(&b, 0);
        put_u32(&b, 6);
        put_u32(&b, 0);
        check(feed_whole(b.data, b.n) == NETTRACE_E_UNSUPPORTED);

        /* bytes after the end marker */
        b = good;
        put_u8(&b, 0x01);
        check(feed_whole(b.data, b.n) == NETTRACE_E_MALFORMED);

        /* the first metadata block's padding: signature (32), Trace object (21 + 49),
         * MetadataBlock type (29) and size (4) end at 135, so one zero byte follows */
        padding_at = 8 + 24 + 21 + 49 + 29 + 4;
        check(padding_at % 4 == 3);
        b = good;
        b.data[padding_at] = 0xAA;
        check(feed_whole(b.data, b.n) == NETTRACE_E_MALFORMED);

        /* a block larger than the limit is refused before its bytes arrive */
        b = good;
        memcpy(b.data + padding_at - 4, (const uint8_t[]){ 0x01, 0x00, 0x10, 0x00 }, 4);
        check(feed_whole(b.data, padding_at) == NETTRACE_E_LIMIT);

        /* an object type that cannot be skipped */
        b = (Buf){};
        put_stream_start(&b, 1);
        put_object_type(&b, "Unknown", 2);
        check(feed_whole(b.data, b.n) == NETTRACE_E_UNSUPPORTED);

        /* a block before the Trace object */
        b = (Buf){};
        put(&b, "Nettrace", 8);
        put_u32(&b, 20);
        put(&b, "!FastSerialization.1", 20);
        put_object_type(&b, "EventBlock", 2);
        check(feed_whole(b.data, b.n) == NETTRACE_E_MALFORMED);

        /* every proper prefix is incomplete, never an error */
        for (size_t n = 0; n < good.n; n++)
                check(feed_whole(good.data, n) == NETTRACE_E_INCOMPLETE);
}

static void test_payload_bounds(void) {
        NettraceMetadata m = {};
        NettraceValue *v = NULL;
        Buf meta = {};
        size_t n = 0;

        put_metadata_payload(&meta);
        check(nettrace_metadata_decode(meta.data, meta.n, &m) == 0);
        /* int32 then a string without its terminator */
        check(nettrace_payload_decode(&m, (const uint8_t[]){ 1, 0, 0, 0, 'x', 0 }, 6, &v, &n) ==
              NETTRACE_E_MALFORMED);
        check(nettrace_payload_decode(&m, (const uint8_t[]){ 1, 0, 0 }, 3, &v, &n) == NETTRACE_E_MALFORMED);
        check(!v && n == 0);
        nettrace_metadata_done(&m);

        /* a definition cut anywhere inside its strings or fields is malformed */
        for (size_t cut = 1; cut < meta.n - 6; cut++) {
                int r = nettrace_metadata_decode(meta.data, cut, &m);

                check(r == NETTRACE_E_MALFORMED || (r == 0 && m.n_fields == 0));
                nettrace_metadata_done(&m);
        }
}

static uint8_t *load(const char *name, size_t *ret_size) {
        char path[4096];
        uint8_t *data;
        FILE *f;
        long size;

        snprintf(path, sizeof(path), "%s/%s", NETTRACE_DATA_DIR, name);
        f = fopen(path, "rb");
        if (!f)
                return NULL;
        if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0) {
                fclose(f);
                return NULL;
        }
        data = malloc((size_t)size);
        if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
                free(data);
                data = NULL;
        }
        fclose(f);
        *ret_size = (size_t)size;
        return data;
}

/* Parses @name whole and in random chunks; every chunking must see the same. */
static bool parse_capture(const char *name, Seen *ret) {
        static const size_t chunkings[] = { 1, 7, 100, 4096 };
        _cleanup_free_ uint8_t *data = NULL;
        size_t size = 0;
        int finish = -1;
        Seen s;

        data = load(name, &size);
        check(data);
        if (!data)
                return false;

        check(parse(data, size, 0, 0, ret, &finish) == 0);
        check(finish == 0);
        check(ret->headers == 1 && ret->header.pid > 1 && ret->header.pid < 4194304);
        check(ret->header.pointer_size == 8 && ret->header.qpc_frequency > 0);
        check(ret->counter_errors == 0);

        for (size_t i = 0; i < ELEMENTSOF(chunkings); i++) {
                check(parse(data, size, chunkings[i], (unsigned)(i + 1), &s, &finish) == 0 && finish == 0);
                check(s.events == ret->events && s.metadata == ret->metadata);
                check(s.payload_sum == ret->payload_sum && s.counters == ret->counters);
        }

        /* a cut stream is incomplete wherever it is cut; it never fails nor succeeds */
        for (size_t cut = 0; cut < size; cut += cut < 256 || size - cut < 256 ? 1 : 61) {
                check(parse(data, cut, 0, 0, &s, &finish) == 0);
                check(finish == NETTRACE_E_INCOMPLETE);
        }
        return true;
}

static void test_capture_eventsource(void) {
        Seen s;

        if (!parse_capture("eventsource.nettrace", &s))
                return;
        printf("# eventsource: %u events, %u markers\n", s.events, s.markers);
        check(s.markers >= 10 && s.bad_markers == 0);
}

static void test_capture_eventcounters(void) {
        Seen s;

        if (!parse_capture("eventcounters.nettrace", &s))
                return;
        printf("# eventcounters: %u events, %u counters\n", s.events, s.counters);
        check(s.cpu_usage >= 1 && s.working_set >= 1 && s.test_counter >= 1);
        check(s.rates >= 1); /* System.Runtime's alloc-rate and the like, with their Series */
}

static void test_capture_metrics(void) {
        Seen s;

        if (!parse_capture("metrics.nettrace", &s))
                return;
        printf("# metrics: %u events, %u counters\n", s.events, s.counters);
        check(s.test_gauge >= 1 && s.runtime_metrics >= 5);
        check(s.instruments == 1 && s.tagged >= 3 && s.totals >= 1);
}

static void test_capture_rundown(void) {
        Seen s;

        if (!parse_capture("rundown.nettrace", &s))
                return;
        printf("# rundown: %u events, %u metadata\n", s.events, s.metadata);
        check(s.rundown_metadata >= 1 && s.events >= 10);
}

int main(void) {
        run_test(test_varint_vectors);
        run_test(test_hand_made_stream);
        run_test(test_framing_errors);
        run_test(test_payload_bounds);
        run_test(test_capture_eventsource);
        run_test(test_capture_eventcounters);
        run_test(test_capture_metrics);
        run_test(test_capture_rundown);
        return tap_finish();
}
