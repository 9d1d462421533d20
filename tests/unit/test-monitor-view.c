/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What dsctl stacks, exceptions and logs write of what a hostile runtime
 * sends (eventpipe/monitor-view.h): scope keys are JSON strings like any other,
 * names and messages are cut, and a few bytes of stream cannot become
 * gigabytes of output or of memory (the streams of the review that found it:
 * one deep stack shared by every thread, every exception, and a scope that is
 * its own parent around every message).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/monitor-events.h"
#include "eventpipe/monitor-view.h"
#include "eventpipe/nettrace.h"
#include "tests/unit/tap.h"
#include "common/text.h"

#define must(x)                 \
        do {                    \
                if (!(x))       \
                        abort(); \
        } while (0)

static bool starts(const char *s, const char *prefix) {
        return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- what the view writes: counted whole, kept up to a bound ---- */

#define KEEP_MAX ((size_t)MONITOR_VIEW_OUTPUT_MAX + (8u << 20))

typedef struct Capture {
        char *data;
        size_t size, cap; /* kept */
        uint64_t total;   /* written */
} Capture;

static ssize_t capture_write(void *cookie, const char *buf, size_t n) {
        Capture *c = cookie;
        size_t keep = n < KEEP_MAX - c->size ? n : KEEP_MAX - c->size;

        if (keep > 0) {
                if (c->size + keep + 1 > c->cap) {
                        size_t cap = (c->size + keep + 1) * 2;
                        char *grown = realloc(c->data, cap);

                        if (!grown)
                                return -1;
                        c->data = grown;
                        c->cap = cap;
                }
                memcpy(c->data + c->size, buf, keep);
                c->size += keep;
                c->data[c->size] = '\0';
        }
        c->total += n;
        return (ssize_t)n;
}

static FILE *capture_open(Capture *c) {
        *c = (Capture){};
        return fopencookie(c, "w", (cookie_io_functions_t){ .write = capture_write });
}

/* ---- a JSON checker: one value, nothing else; control characters only escaped ---- */

static const char *json_ws(const char *p) {
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
                p++;
        return p;
}

static const char *json_value(const char *p, unsigned depth);

static const char *json_string(const char *p) {
        if (*p++ != '"')
                return NULL;
        for (;;) {
                unsigned char ch = (unsigned char)*p++;

                if (ch == '"')
                        return p;
                if (ch < 0x20)
                        return NULL;
                if (ch != '\\')
                        continue;
                ch = (unsigned char)*p++;
                if (ch == 'u') {
                        for (int i = 0; i < 4; i++)
                                if (!strchr("0123456789abcdefABCDEF", *p++) || !p[-1])
                                        return NULL;
                } else if (!ch || !strchr("\"\\/bfnrt", ch))
                        return NULL;
        }
}

static const char *json_members(const char *p, char close, bool keyed, unsigned depth) {
        p = json_ws(p + 1);
        if (*p == close)
                return p + 1;
        for (;;) {
                if (keyed) {
                        p = json_string(json_ws(p));
                        if (!p)
                                return NULL;
                        p = json_ws(p);
                        if (*p++ != ':')
                                return NULL;
                }
                p = json_value(p, depth + 1);
                if (!p)
                        return NULL;
                p = json_ws(p);
                if (*p == close)
                        return p + 1;
                if (*p++ != ',')
                        return NULL;
        }
}

static const char *json_value(const char *p, unsigned depth) {
        p = json_ws(p);
        if (depth > 32)
                return NULL;
        switch (*p) {
        case '{':
                return json_members(p, '}', true, depth);
        case '[':
                return json_members(p, ']', false, depth);
        case '"':
                return json_string(p);
        case 't':
                return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
        case 'f':
                return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
        case 'n':
                return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
        default: {
                const char *start = p;

                if (*p == '-')
                        p++;
                while (*p >= '0' && *p <= '9')
                        p++;
                if (*p == '.')
                        for (p++; *p >= '0' && *p <= '9'; p++)
                                ;
                if (*p == 'e' || *p == 'E') {
                        p++;
                        if (*p == '+' || *p == '-')
                                p++;
                        while (*p >= '0' && *p <= '9')
                                p++;
                }
                return p > start && p[-1] != '-' ? p : NULL;
        }
        }
}

static bool json_is_one_value(const char *text, size_t size) {
        const char *end = json_value(text, 0);

        return end && (size_t)(json_ws(end) - text) == size;
}

/* Each line is one JSON value; @ret_lines: how many there are. */
static bool json_lines(const char *text, size_t *ret_lines) {
        size_t lines = 0;

        for (const char *p = text; *p;) {
                const char *nl = strchr(p, '\n');
                _cleanup_free_ char *line = nl ? strndup(p, (size_t)(nl - p)) : NULL;

                if (!line || !json_is_one_value(line, strlen(line)))
                        return false;
                lines++;
                p = nl + 1;
        }
        *ret_lines = lines;
        return true;
}

/* No byte of a terminal's control sequences: nothing below 0x20 but newlines, no DEL, no C1. */
static bool no_controls(const char *text) {
        return !strpbrk(text, "\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15"
                              "\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x7f") &&
               !strstr(text, "\xc2\x9b") && utf8_is_valid(text, strlen(text));
}

/* Occurrences of @what in @text, not overlapping. Compared by hand, not by strstr(): under ASan each strstr()
 * call measures the rest of the text first, which made counting in the tests' outputs of many MiB quadratic
 * (the sanitizer pass spent a quarter of an hour here). */
static size_t count(const char *text, const char *what) {
        size_t n = 0, len = strlen(what);

        for (const char *p = text; *p;) {
                size_t i = 0;

                while (i < len && p[i] == what[i])
                        i++;
                if (i == len) {
                        n++;
                        p += len;
                } else
                        p++;
        }
        return n;
}

/* ---- events, as the parser gives them ---- */

typedef struct Buf {
        uint8_t *data;
        size_t size;
} Buf;

static void put(Buf *b, const void *p, size_t n) {
        b->data = realloc(b->data, b->size + n);
        must(b->data);
        memcpy(b->data + b->size, p, n);
        b->size += n;
}

static void put_u16(Buf *b, uint16_t v) {
        put(b, &v, 2); /* little endian, as every machine this runs on */
}

static void put_u32(Buf *b, uint32_t v) {
        put(b, &v, 4);
}

static void put_u64(Buf *b, uint64_t v) {
        put(b, &v, 8);
}

/* UTF-8 (of the Basic Multilingual Plane) as the runtime's NUL-terminated UTF-16. */
static void put_utf16z(Buf *b, const char *s) {
        size_t n = strlen(s);

        while (n > 0) {
                uint32_t cp;
                size_t len = utf8_decode(s, n, &cp);

                must(len > 0 && cp < 0x10000);
                put_u16(b, (uint16_t)cp);
                s += len;
                n -= len;
        }
        put_u16(b, 0);
}

static char *repeat(const char *unit, size_t times) {
        size_t n = strlen(unit);
        char *s = malloc(n * times + 1);

        must(s);
        for (size_t i = 0; i < times; i++)
                memcpy(s + i * n, unit, n);
        s[n * times] = '\0';
        return s;
}

static const NettraceHeader header = {
        .version = 4, .sync_time = { 2026, 1, 4, 1, 0, 0, 0, 0 }, .qpc_frequency = 1000000000,
        .pointer_size = 8, .pid = 4242, .processors = 2, .sampling_rate_ns = 1000000,
};

static NettraceMetadata sampler = { .id = 1, .provider = (char *)MONITOR_SAMPLE_PROFILER,
                                    .event_name = (char *)"ThreadSample" };
static NettraceMetadata method_dc = { .id = 2, .provider = (char *)MONITOR_RUNDOWN_PROVIDER, .event_id = 144,
                                      .event_name = (char *)"MethodDCEndVerbose", .version = 1 };
static NettraceMetadata module_dc = { .id = 6, .provider = (char *)MONITOR_RUNDOWN_PROVIDER, .event_id = 154,
                                      .event_name = (char *)"ModuleDCEnd", .version = 1 };
static NettraceMetadata thrown = { .id = 3, .provider = (char *)MONITOR_RUNTIME_PROVIDER, .event_id = 80,
                                   .event_name = (char *)"ExceptionThrown_V1", .version = 1 };

static NettraceField message_fields[] = {
        { .name = (char *)"Level", .type = NETTRACE_TYPE_INT32 },
        { .name = (char *)"FactoryID", .type = NETTRACE_TYPE_INT32 },
        { .name = (char *)"LoggerName", .type = NETTRACE_TYPE_STRING },
        { .name = (char *)"EventId", .type = NETTRACE_TYPE_INT32 },
        { .name = (char *)"EventName", .type = NETTRACE_TYPE_STRING },
        { .name = (char *)"FormattedMessage", .type = NETTRACE_TYPE_STRING },
};
static NettraceField pair_fields[] = {
        { .name = (char *)"Key", .type = NETTRACE_TYPE_STRING },
        { .name = (char *)"Value", .type = NETTRACE_TYPE_STRING },
};
static NettraceField start_fields[] = {
        { .name = (char *)"ID", .type = NETTRACE_TYPE_INT32 },
        { .name = (char *)"FactoryID", .type = NETTRACE_TYPE_INT32 },
        { .name = (char *)"LoggerName", .type = NETTRACE_TYPE_STRING },
        { .name = (char *)"Arguments", .type = NETTRACE_TYPE_ARRAY, .element_type = NETTRACE_TYPE_OBJECT,
          .n_children = 2, .children = pair_fields },
};
static NettraceMetadata formatted = { .id = 4, .provider = (char *)MONITOR_LOGGING_PROVIDER, .event_id = 2,
                                      .event_name = (char *)"FormattedMessage", .n_fields = 6,
                                      .fields = message_fields };
static NettraceMetadata activity_start = { .id = 5, .provider = (char *)MONITOR_LOGGING_PROVIDER, .event_id = 3,
                                           .event_name = (char *)"ActivityStart", .n_fields = 4,
                                           .fields = start_fields };

/* The rundown's name of the code at [start, start + size): Namespace.Type, Method. */
static void name_method(MonitorView *v, uint64_t start, uint32_t size, const char *type, const char *name) {
        Buf b = {};
        NettraceEvent e = { .metadata = &method_dc };

        put_u64(&b, 1);
        put_u64(&b, 0); /* no module: frames are shown without "Module!" */
        put_u64(&b, start);
        put_u32(&b, size);
        put_u32(&b, 0x06000001);
        put_u32(&b, 0);
        put_utf16z(&b, type);
        put_utf16z(&b, name);
        put_utf16z(&b, "sig");
        e.payload = b.data;
        e.payload_size = b.size;
        check(monitor_view_event(v, &e) == 0);
        free(b.data);
}

/* The rundown's method of @module at [start, start + size), with its signature, as the runtime writes it. */
static void name_method_of(MonitorView *v, uint64_t module, uint64_t start, uint32_t size, const char *type,
                           const char *name, const char *signature) {
        Buf b = {};
        NettraceEvent e = { .metadata = &method_dc };

        put_u64(&b, 1);
        put_u64(&b, module);
        put_u64(&b, start);
        put_u32(&b, size);
        put_u32(&b, 0x06000001);
        put_u32(&b, 0);
        put_utf16z(&b, type);
        put_utf16z(&b, name);
        put_utf16z(&b, signature);
        put_u16(&b, 0);
        put_u64(&b, 0);
        e.payload = b.data;
        e.payload_size = b.size;
        check(monitor_view_event(v, &e) == 0);
        free(b.data);
}

/* The rundown's module @id, loaded from @path. */
static void name_module(MonitorView *v, uint64_t id, const char *path) {
        Buf b = {};
        NettraceEvent e = { .metadata = &module_dc };

        put_u64(&b, id);
        put_u64(&b, 1);
        put_u32(&b, 0);
        put_u32(&b, 0);
        put_utf16z(&b, path);
        put_utf16z(&b, "");
        e.payload = b.data;
        e.payload_size = b.size;
        check(monitor_view_event(v, &e) == 0);
        free(b.data);
}

static NettraceEvent sample(uint64_t thread, uint64_t timestamp, const uint64_t *stack, size_t depth) {
        return (NettraceEvent){ .metadata = &sampler, .thread_id = thread, .timestamp = timestamp, .stack = stack,
                                .stack_depth = depth };
}

static Buf exception_payload(const char *type, const char *message, uint64_t ip) {
        Buf b = {};

        put_utf16z(&b, type);
        put_utf16z(&b, message);
        put_u64(&b, ip);
        put_u32(&b, 0x80131500);
        put_u16(&b, 0);
        put_u16(&b, 0);
        return b;
}

static Buf scope_payload(size_t n, const char *const *keys, const char *const *values) {
        Buf b = {};

        put_u32(&b, 1);
        put_u32(&b, 1);
        put_utf16z(&b, "Cat");
        put_u16(&b, (uint16_t)n);
        for (size_t i = 0; i < n; i++) {
                put_utf16z(&b, keys[i]);
                put_utf16z(&b, values[i]);
        }
        return b;
}

static Buf message_payload(const char *message) {
        Buf b = {};

        put_u32(&b, 3); /* Warning */
        put_u32(&b, 1);
        put_utf16z(&b, "Cat");
        put_u32(&b, 5);
        put_utf16z(&b, "");
        put_utf16z(&b, message);
        return b;
}

static void start_scope(MonitorView *v, uint8_t id, uint8_t parent, size_t n, const char *const *keys,
                        const char *const *values) {
        Buf b = scope_payload(n, keys, values);
        NettraceEvent e = { .metadata = &activity_start, .thread_id = 7, .payload = b.data, .payload_size = b.size };

        memset(e.activity_id, id, 16);
        memset(e.related_activity_id, parent, 16);
        check(monitor_view_event(v, &e) == 0);
        free(b.data);
}

static void log_message(MonitorView *v, uint8_t scope, const char *message) {
        Buf b = message_payload(message);
        NettraceEvent e = { .metadata = &formatted, .thread_id = 7, .payload = b.data, .payload_size = b.size };

        memset(e.activity_id, scope, 16);
        check(monitor_view_event(v, &e) == 0);
        free(b.data);
}

static MonitorView *view(MonitorViewKind kind, MonitorViewFormat format, FILE *out) {
        MonitorView *v = NULL;

        must(out && monitor_view_new(kind, format, out, &v) == 0);
        monitor_view_header(v, &header);
        return v;
}

/*
 * Ends the view of @n threads or exceptions: its output must end near MONITOR_VIEW_OUTPUT_MAX, with more
 * than @least of them shown and the rest counted. Return: whether the whole output was kept, to be read.
 */
static bool finish_bounded(MonitorView *v, FILE *f, Capture *c, unsigned long n, unsigned long least,
                           unsigned long *ret_shown) {
        unsigned long shown = monitor_view_finish(v);

        check(c->total <= MONITOR_VIEW_OUTPUT_MAX + (2u << 20));
        check(shown > least && shown < n && shown + monitor_view_not_shown(v) == n);
        check(monitor_view_left_out(v) == 0);
        monitor_view_free(v);
        fclose(f);
        *ret_shown = shown;
        if (c->total > c->size) {
                free(c->data);
                return false;
        }
        check(no_controls(c->data));
        return true;
}

/* ---- the tests ---- */

/* gen_logs.py of the review: a key that closes the JSON line and forges the next one, with terminal escapes */
#define FORGING_KEY                                                                                              \
        "x\":1,\"LogLevel\":\"Critical\",\"Message\":\"forged by the target\"}\n{\"Timestamp\":\"2030-01-01\","  \
        "\"LogLevel\":\"Critical\",\"Category\":\"Security\",\"Message\":\"\x1b]0;owned\x07\x1b[31mFAKE ALERT"

static void test_scope_keys_are_json_strings(void) {
        _cleanup_free_ char *long_key = repeat("K", 2000), *cut_key = NULL;
        const char *keys[] = { FORGING_KEY, "{OriginalFormat}", "plain", long_key },
                   *values[] = { "v\x1b[2J", "x", "\xc2\x9b" "1", "w" };

        /* a long key is cut once, like any name */
        must(asprintf(&cut_key, "%.1024s\xe2\x80\xa6[976 bytes left out]", long_key) > 0);

        for (int json = 0; json <= 1; json++) {
                Capture c;
                FILE *f = capture_open(&c);
                MonitorView *v = view(MONITOR_VIEW_LOGS, json ? MONITOR_VIEW_JSON : MONITOR_VIEW_TEXT, f);
                size_t lines = 0;

                start_scope(v, 0x11, 0, 4, keys, values);
                log_message(v, 0x11, "hello");
                check(monitor_view_finish(v) == 1);
                monitor_view_free(v);
                fclose(f);
                /* one message, one line, and not a byte of an escape sequence */
                check(count(c.data, "\n") == 1 && c.data[c.size - 1] == '\n');
                check(no_controls(c.data));
                check(count(c.data, "bytes left out") == 1 && strstr(c.data, cut_key));
                if (json) {
                        check(json_lines(c.data, &lines) && lines == 1);
                        check(strstr(c.data, ",\"Scopes\":{\"x\\\":1,\\\"LogLevel\\\":\\\"Critical\\\",") != NULL);
                        check(strstr(c.data, "\\u000a{\\\"Timestamp\\\"") && strstr(c.data, "\\u001b]0;owned\\u0007"));
                        check(strstr(c.data, "FAKE ALERT\":\"v\\u001b[2J\",\"plain\":\"\\u009b1\",\"KKK"));
                        check(strstr(c.data, " bytes left out]\":\"w\"},\"ThreadId\":7}\n"));
                } else
                        check(strstr(c.data, "] hello [x\"") && strstr(c.data, "FAKE ALERT=v\\x1b[2J, plain="));
                free(c.data);
        }
}

/* A name is cut at MONITOR_VIEW_NAME_MAX bytes, on a character's boundary, and says how much is missing. */
static void test_names_are_cut(void) {
        _cleanup_free_ char *ms = repeat("M", 4000), *euros = repeat("\xe2\x82\xac", 3000);
        const uint64_t stack[] = { 0x1000, 0x2000 };
        _cleanup_free_ char *first = NULL, *second = NULL;
        Capture c;
        FILE *f = capture_open(&c);
        MonitorView *v = view(MONITOR_VIEW_STACKS, MONITOR_VIEW_TEXT, f);
        NettraceEvent e = sample(1, 10, stack, 2);
        const char *line;

        check(monitor_view_event(v, &e) == 0);
        name_method(v, 0x1000, 0x10, "N", ms);
        name_method(v, 0x2000, 0x10, "", euros);
        check(monitor_view_finish(v) == 1);
        monitor_view_free(v);
        fclose(f);

        /* of no module ("?!"): "N." and 1022 of the Ms; "." (no type) and 1023 bytes of euros, 341 of them */
        first = repeat("M", 1022);
        second = repeat("\xe2\x82\xac", 341);
        line = strstr(c.data, "\n  ?!N.");
        check(line && strncmp(line + 7, first, 1022) == 0 &&
              starts(line + 7 + 1022, "\xe2\x80\xa6[2978 bytes left out]\n"));
        line = strstr(c.data, "\n  ?!.\xe2\x82\xac");
        check(line && strncmp(line + 6, second, strlen(second)) == 0 &&
              starts(line + 6 + strlen(second), "\xe2\x80\xa6[7977 bytes left out]\n"));
        check(no_controls(c.data));
        free(c.data);
}

/* gen_amp.py of the review: every thread's first sample is one 512-frame stack in a method of a 4000-byte name. */
static void test_one_deep_stack_on_every_thread(void) {
        static const MonitorViewFormat formats[] = { MONITOR_VIEW_TEXT, MONITOR_VIEW_JSON, MONITOR_VIEW_SPEEDSCOPE };
        _cleanup_free_ char *ms = repeat("M", 4000);
        uint64_t stack[512];
        const unsigned threads = 1024;

        for (size_t i = 0; i < 512; i++)
                stack[i] = 0x100000 + i;
        for (size_t k = 0; k < ELEMENTSOF(formats); k++) {
                Capture c;
                FILE *f = capture_open(&c);
                MonitorView *v = view(MONITOR_VIEW_STACKS, formats[k], f);
                unsigned long shown;

                for (unsigned t = 1; t <= threads; t++) {
                        NettraceEvent e = sample(t, 100 + t, stack, 512);
                        check(monitor_view_event(v, &e) == 0);
                }
                name_method(v, 0x100000, 0x10000, "N", ms);
                /* about 256 KiB a thread */
                if (!finish_bounded(v, f, &c, threads, 100, &shown))
                        continue;
                if (formats[k] == MONITOR_VIEW_TEXT) {
                        /* 256 frames and a line for the other 256 */
                        const char *second = strstr(c.data, "\nThread (0x2):\n");

                        check(starts(c.data, "Thread (0x1):\n  ?!N.MMM"));
                        check(second && count(c.data, "\xe2\x80\xa6[2978 bytes left out]\n") == 256 * shown);
                        check(strstr(c.data, "\n  [256 frames left out]\n\nThread (0x2):\n") != NULL);
                        check(count(c.data, "\nThread ") == shown - 1);
                } else {
                        check(json_is_one_value(c.data, c.size));
                        check(count(c.data, "[256 frames left out]") == shown);
                }
                free(c.data);
        }
}

/* gen_exc_amp.py of the review: exceptions with no type or message, each with the deep stack. */
static void test_exceptions_of_one_deep_stack(void) {
        _cleanup_free_ char *euros = repeat("\xe2\x82\xac", 3000);
        Buf b = exception_payload("", "", 0);
        uint64_t stack[512];
        const unsigned n = 300;

        for (size_t i = 0; i < 512; i++)
                stack[i] = 0x100000 + i;
        for (int json = 0; json <= 1; json++) {
                Capture c;
                FILE *f = capture_open(&c);
                MonitorView *v = view(MONITOR_VIEW_EXCEPTIONS, json ? MONITOR_VIEW_JSON : MONITOR_VIEW_TEXT, f);
                unsigned long shown;
                size_t lines = 0;

                for (unsigned i = 0; i < n; i++) {
                        NettraceEvent e = { .metadata = &thrown, .thread_id = 7, .timestamp = 100 + i, .stack = stack,
                                            .stack_depth = 512, .payload = b.data, .payload_size = b.size };
                        check(monitor_view_event(v, &e) == 0);
                }
                name_method(v, 0x100000, 0x10000, "N", euros);
                if (!finish_bounded(v, f, &c, n, 50, &shown))
                        continue;
                if (json) {
                        check(json_lines(c.data, &lines) && lines == shown);
                        check(starts(c.data, "{\"id\":1,\"timestamp\":\"2026-01-01T00:00:00.000000Z\","
                                             "\"typeName\":\"\",\"message\":\"\",\"hresult\":\"0x80131500\""));
                        check(count(c.data, "{\"methodName\":\"[256 frames left out]\",\"className\":null,"
                                            "\"moduleName\":null}]}}\n") == shown);
                } else {
                        check(strstr(c.data, " on thread 7\n: \n   at N.\xe2\x82\xac\xe2\x82\xac") != NULL);
                        check(count(c.data, "\n   [256 frames left out]\n") == shown);
                }
                free(c.data);
        }
        free(b.data);
}

/* What exceptions keep is bounded by bytes too: 10000 long messages do not take 10000 times their size. */
static void test_exceptions_kept_are_bounded_in_bytes(void) {
        _cleanup_free_ char *message = repeat("\xe2\x82\xac", 4000); /* near the parser's most, 4096 units */
        Buf b = exception_payload("T", message, 0);
        uint64_t stack[512];
        Capture c;
        FILE *f = capture_open(&c);
        MonitorView *v = view(MONITOR_VIEW_EXCEPTIONS, MONITOR_VIEW_TEXT, f);
        unsigned long kept, shown;

        for (size_t i = 0; i < 512; i++)
                stack[i] = 0x100000 + i;
        for (unsigned i = 0; i < MONITOR_VIEW_EXCEPTIONS_MAX; i++) {
                NettraceEvent e = { .metadata = &thrown, .thread_id = 7, .timestamp = 100 + i, .stack = stack,
                                    .stack_depth = 512, .payload = b.data, .payload_size = b.size };
                check(monitor_view_event(v, &e) == 0);
        }
        /* each keeps its message's first 8 KiB (of 12000 bytes) and its 4 KiB of frames: about 5400 fit in 64 MiB */
        kept = MONITOR_VIEW_EXCEPTIONS_MAX - monitor_view_left_out(v);
        check(kept > 4000 && kept < 6000);
        shown = monitor_view_finish(v);
        check(shown + monitor_view_not_shown(v) == kept);
        monitor_view_free(v);
        fclose(f);
        /* 512 frames no method holds: one "[Native Frames]" */
        check(starts(c.data, "First chance exception at ") && strstr(c.data, "\nT: \xe2\x82\xac") &&
              count(c.data, "\xe2\x82\xac\xe2\x80\xa6[3810 bytes left out]\n   at [Native Frames]\n") == shown);
        free(c.data);
        free(b.data);
}

/*
 * An exception seen in another session of the process (the [[collect]] watch's, without a rundown) is shown among
 * the stream's, in the order of their times, its frames named by this stream's rundown; it is copied.
 */
static void test_an_exception_seen_elsewhere_is_shown_with_its_frames_named(void) {
        Buf early = exception_payload("App.EarlyException", "thrown before the session", 0x200010),
            late = exception_payload("App.LateException", "thrown in it", 0x300020);
        const uint64_t early_stack[] = { 0x200010, 0x300010 }, late_stack[] = { 0x300020 };
        NettraceEvent seen = { .metadata = &thrown, .thread_id = 9, .timestamp = 50, .stack = early_stack,
                               .stack_depth = 2, .payload = early.data, .payload_size = early.size };
        NettraceEvent in_stream = { .metadata = &thrown, .thread_id = 7, .timestamp = 100, .stack = late_stack,
                                    .stack_depth = 1, .payload = late.data, .payload_size = late.size };
        MonitorException x = {};
        MonitorThrown t = {}, copy = {};
        Capture c;
        FILE *f = capture_open(&c);
        MonitorView *v = view(MONITOR_VIEW_EXCEPTIONS, MONITOR_VIEW_TEXT, f), *stacks = NULL;
        const char *second;

        must(monitor_exception_extract(&seen, 8, &x) == 0);
        must(monitor_thrown_take(&x, &seen, &t) == 0);
        check(!x.type && !x.message && t.depth == 2 && t.thread_id == 9 && t.timestamp == 50);
        /* a copy stands on its own (a [[collect]] action keeps one until its session ends) */
        must(monitor_thrown_copy(&t, &copy) == 0);
        monitor_thrown_done(&t);
        check(monitor_view_event(v, &in_stream) == 0);
        check(monitor_view_thrown(v, &copy) == 0);
        monitor_thrown_done(&copy); /* the view keeps its own copy */
        name_method(v, 0x200000, 0x100, "App.Probe", "ThrowEarly");
        name_method(v, 0x300000, 0x100, "App.Main", "Run");
        check(monitor_view_finish(v) == 2);
        monitor_view_free(v);
        fclose(f);
        check(starts(c.data, "First chance exception at "));
        check(strstr(c.data, " on thread 9\nApp.EarlyException: thrown before the session\n"
                             "   at App.Probe.ThrowEarly\n   at App.Main.Run\n\nFirst chance exception at ") != NULL);
        second = strstr(c.data, " on thread 7\n");
        check(second && strcmp(second, " on thread 7\nApp.LateException: thrown in it\n   at App.Main.Run\n") == 0);
        free(c.data);

        /* a view of anything but exceptions takes none */
        f = capture_open(&c);
        stacks = view(MONITOR_VIEW_STACKS, MONITOR_VIEW_TEXT, f);
        must(monitor_exception_extract(&seen, 8, &x) == 0 && monitor_thrown_take(&x, &seen, &t) == 0);
        check(monitor_view_thrown(stacks, &t) == 0);
        check(monitor_view_finish(stacks) == 0);
        monitor_thrown_done(&t);
        monitor_view_free(stacks);
        fclose(f);
        check(c.total == 0);
        free(c.data);
        free(early.data);
        free(late.data);
}

/* gen_logs_amp.py of the review: 64 long arguments in a scope that is its own parent, around every message. */
static void test_scope_of_its_own_around_every_message(void) {
        _cleanup_free_ char *big = repeat("\xe2\x82\xac", 100);
        char *keys[64], *values[64];
        const unsigned messages = 200;

        for (size_t i = 0; i < 64; i++) {
                must(asprintf(&keys[i], "k%zu%s", i, big) > 0);
                values[i] = big;
        }
        for (int json = 0; json <= 1; json++) {
                Capture c;
                FILE *f = capture_open(&c);
                MonitorView *v = view(MONITOR_VIEW_LOGS, json ? MONITOR_VIEW_JSON : MONITOR_VIEW_TEXT, f);
                size_t lines = 0;

                start_scope(v, 0x22, 0x22, 64, (const char *const *)keys, (const char *const *)values);
                for (unsigned i = 0; i < messages; i++)
                        log_message(v, 0x22, "m");
                check(monitor_view_finish(v) == messages);
                monitor_view_free(v);
                fclose(f);
                /* each line: the scope once, its first arguments up to 4 KiB of them, and the count of the rest */
                check(c.total <= messages * (MONITOR_VIEW_SCOPE_BYTES_MAX + 1024));
                check(c.total == c.size && no_controls(c.data));
                check(count(c.data, "k0\xe2\x82\xac") == messages && count(c.data, "k5\xe2\x82\xac") == messages &&
                      count(c.data, "k6\xe2\x82\xac") == 0);
                if (json) {
                        check(json_lines(c.data, &lines) && lines == messages);
                        check(count(c.data, "},\"ScopesLeftOut\":58,\"ThreadId\":7}\n") == messages);
                } else
                        check(count(c.data, "] [58 scope arguments left out]\n") == messages);
                free(c.data);
        }
        for (size_t i = 0; i < 64; i++)
                free(keys[i]);
}

/* Two scopes, each the other's parent: each is shown once around a message. */
static void test_scopes_in_a_cycle(void) {
        const char *a_key[] = { "A" }, *b_key[] = { "B" }, *value[] = { "1" };
        Capture c;
        FILE *f = capture_open(&c);
        MonitorView *v = view(MONITOR_VIEW_LOGS, MONITOR_VIEW_TEXT, f);

        start_scope(v, 0x0a, 0x0b, 1, a_key, value);
        start_scope(v, 0x0b, 0x0a, 1, b_key, value);
        log_message(v, 0x0a, "m");
        monitor_view_free(v);
        fclose(f);
        check(c.data && strstr(c.data, "[5] m [B=1] [A=1]\n"));
        free(c.data);
}

/* Each thread's earliest sample is the one shown, in order of the threads' first samples, however many. */
static void test_earliest_sample_of_many_threads(void) {
        const uint64_t late[] = { 0x1000 }, early[] = { 0x2000 };
        const unsigned threads = 20000;
        Capture c;
        FILE *f = capture_open(&c);
        MonitorView *v = view(MONITOR_VIEW_STACKS, MONITOR_VIEW_TEXT, f);
        char expect[64];

        for (unsigned t = 0; t < threads; t++) {
                NettraceEvent e = sample(1000003ULL * (t + 1), 100, late, 1);
                check(monitor_view_event(v, &e) == 0);
        }
        for (unsigned t = threads; t > 0; t--) {
                NettraceEvent e = sample(1000003ULL * t, 50, early, 1), again = sample(1000003ULL * t, 70, late, 1);
                check(monitor_view_event(v, &e) == 0 && monitor_view_event(v, &again) == 0);
        }
        name_method(v, 0x1000, 0x10, "Late", "M");
        name_method(v, 0x2000, 0x10, "Early", "M");
        check(monitor_view_finish(v) == threads);
        monitor_view_free(v);
        fclose(f);
        check(count(c.data, "\n  ?!Early.M\n") == threads && !strstr(c.data, "Late"));
        snprintf(expect, sizeof(expect), "Thread (0x%llX):", 1000003ULL);
        check(strncmp(c.data, expect, strlen(expect)) == 0);
        snprintf(expect, sizeof(expect), "\nThread (0x%llX):", 1000003ULL * threads);
        check(strstr(c.data, expect) && !strstr(strstr(c.data, expect) + 1, "\nThread "));
        free(c.data);
}

/*
 * Text is dotnet-stack report's: of each thread the first stack taken outside managed code, "[Native Frames]"
 * above it, frames named Module!Type.Method(parameters) as TraceEvent names them, an empty line after each
 * thread; JSON still shows each thread's earliest sample, named as dotnet-monitor names frames.
 */
static void test_text_is_dotnet_stack_report(void) {
        static const char expected[] =
                "Thread (0x10):\n"
                "  [Native Frames]\n"
                "  .dll!N.G.M()\n"
                "  System.Private.CoreLib!System.Threading.Monitor.Wait(class System.Object,int32)\n"
                "  App!.Main(class System.String[])\n"
                "\n"
                "Thread (0x20):\n"
                "  ?!?\n"
                "  ?!?\n"
                "  ?!N.D.Run(value class S)\n"
                "\n"
                "Thread (0x30):\n"
                "  App!.Main(class System.String[])\n"
                "\n";
        const uint64_t waiting[] = { 0x3000, 0x1000, 0x2000 }, running[] = { 0x1000, 0x2000 },
                       unnamed[] = { 0x9999, 0x9998, 0x4000 }, main_only[] = { 0x2000 };
        const uint8_t managed[] = { 2, 0, 0, 0 }, external[] = { 1, 0, 0, 0 }, short_external[] = { 1, 0 };
        struct {
                uint64_t thread, timestamp;
                const uint64_t *stack;
                size_t depth;
                const uint8_t *type;
                size_t type_size;
        } samples[] = {
                { 0x10, 10, running, 2, managed, 4 },          /* earliest, in managed code: JSON's */
                { 0x20, 15, unnamed, 3, managed, 4 },          /* never outside managed code: its earliest */
                { 0x10, 30, running, 2, external, 4 },
                { 0x10, 20, waiting, 3, external, 4 },         /* the first outside managed code, come late */
                { 0x30, 25, main_only, 1, short_external, 2 }, /* a Type cut short is not External */
        };

        for (int json = 0; json <= 1; json++) {
                Capture c;
                FILE *f = capture_open(&c);
                MonitorView *v = view(MONITOR_VIEW_STACKS, json ? MONITOR_VIEW_JSON : MONITOR_VIEW_TEXT, f);

                for (size_t i = 0; i < ELEMENTSOF(samples); i++) {
                        NettraceEvent e = sample(samples[i].thread, samples[i].timestamp, samples[i].stack,
                                                 samples[i].depth);

                        e.payload = samples[i].type;
                        e.payload_size = samples[i].type_size;
                        check(monitor_view_event(v, &e) == 0);
                }
                name_module(v, 1, "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.0/System.Private.CoreLib.dll");
                name_module(v, 2, "/app/App.EXE");
                name_module(v, 3, "/app/.dll");
                name_method_of(v, 1, 0x1000, 0x100, "System.Threading.Monitor", "Wait",
                               "bool  (class System.Object,int32)");
                name_method_of(v, 2, 0x2000, 0x100, "", "Main", "void  (class System.String[])");
                name_method_of(v, 3, 0x3000, 0x100, "N.G", "M", "instance void  ()");
                name_method_of(v, 99, 0x4000, 0x100, "N.D", "Run", "void  (value class S)");
                check(monitor_view_finish(v) == 3);
                monitor_view_free(v);
                fclose(f);
                if (json)
                        check(c.data && strstr(c.data, "{\"threadId\":16,\"threadName\":null,\"frames\":["
                                                       "{\"methodName\":\"Wait\",\"className\":\"System.Threading.Monitor\","
                                                       "\"moduleName\":\"System.Private.CoreLib.dll\"},"
                                                       "{\"methodName\":\"Main\",\"className\":\"\","
                                                       "\"moduleName\":\"App.EXE\"}]}"));
                else
                        check(c.data && strcmp(c.data, expected) == 0);
                free(c.data);
        }
}

int main(void) {
        run_test(test_scope_keys_are_json_strings);
        run_test(test_names_are_cut);
        run_test(test_one_deep_stack_on_every_thread);
        run_test(test_exceptions_of_one_deep_stack);
        run_test(test_exceptions_kept_are_bounded_in_bytes);
        run_test(test_an_exception_seen_elsewhere_is_shown_with_its_frames_named);
        run_test(test_scope_of_its_own_around_every_message);
        run_test(test_scopes_in_a_cycle);
        run_test(test_earliest_sample_of_many_threads);
        run_test(test_text_is_dotnet_stack_report);
        return tap_finish();
}
