/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Whatever bytes a process or a runtime chose (paths, names, command lines, environment, counters'
 * names, units and tags), every output of dsctl stays valid for its format and shows them escaped:
 * property tests over thousands of deterministic random byte strings (tests/unit/property.h).
 *   text:       valid UTF-8 without controls or format characters, one line per field, reversible;
 *   JSON:       one valid JSON document, decoding to the bytes (U+FFFD for bytes that are not UTF-8);
 *   CSV:        records of exactly their fields, quoted where they must be;
 *   Prometheus: every line of the text format (promtool's grammar), names sanitized.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/counter-format.h"
#include "client/counter-sink.h"
#include "client/output.h"
#include "tests/unit/property.h"
#include "tests/unit/tap.h"
#include "common/text.h"
#include "common/wire.h"

#define CASES 20000
#define TEXT_MAX 300

/* What @write wrote to a memory stream; the caller frees it. */
#define captured(text, size, write)                                                   \
        do {                                                                          \
                FILE *m_ = open_memstream(&(text), &(size));                          \
                if (m_) {                                                             \
                        write;                                                        \
                        fclose(m_);                                                   \
                }                                                                     \
        } while (0)

static void test_text_escape_any_bytes(void) {
        Rng rng = { 1 };
        unsigned bad = 0;

        for (unsigned i = 0; i < CASES && bad < 5; i++) {
                char in[TEXT_MAX], back[4 * TEXT_MAX];
                size_t n = random_text(&rng, in, sizeof(in), false), back_n = 0;
                char *out = text_escape(in, n);
                bool ok = out && text_is_clean(out, strlen(out), NULL) &&
                          text_unescape(out, strlen(out), back, &back_n) && back_n == n && memcmp(back, in, n) == 0;

                if (!ok && ++bad)
                        printf("# case %u: %s\n", i, out ? out : "(null)");
                free(out);
        }
        check(bad == 0);
}

static void test_json_string_any_bytes(void) {
        Rng rng = { 2 };
        unsigned bad = 0;

        for (unsigned i = 0; i < CASES && bad < 5; i++) {
                char in[TEXT_MAX], want[3 * TEXT_MAX], got[3 * TEXT_MAX];
                size_t n = random_text(&rng, in, sizeof(in), false), size = 0, got_n = 0;
                size_t want_n = utf8_replace_invalid(in, n, want);
                char *out = NULL;
                JsonCursor c;
                bool ok;

                captured(out, size, text_json_string(m_, in, n));
                c = (JsonCursor){ out, out + size };
                ok = out && json_document_valid(out, size) && text_is_clean(out, size, NULL) &&
                     json_string(&c, got, &got_n) && got_n == want_n && memcmp(got, want, want_n) == 0;
                if (!ok && ++bad)
                        printf("# case %u: %s\n", i, out ? out : "(null)");
                free(out);
        }
        check(bad == 0);
}

/* Is @s, read back from Prometheus, @in? Exactly, when @in is plain text; else through text_unescape(). */
static bool prom_reads_back(const char *s, size_t n, const char *in) {
        char plain[4 * TEXT_MAX], back[4 * TEXT_MAX];
        size_t plain_n = prom_unescape(s, n, plain), back_n = 0;

        if (text_is_clean(in, strlen(in), "\n"))
                return plain_n == strlen(in) && memcmp(plain, in, plain_n) == 0;
        if (strchr(in, '\\'))
                return true; /* "\x41" as it was and an escaped 'A' read the same: not reversible */
        return text_unescape(plain, plain_n, back, &back_n) && back_n == strlen(in) && memcmp(back, in, back_n) == 0;
}

static void test_prometheus_text_any_bytes(void) {
        Rng rng = { 3 };
        unsigned bad = 0;

        for (unsigned i = 0; i < CASES && bad < 5; i++) {
                char in[TEXT_MAX];
                char *help = NULL, *label = NULL;
                size_t help_size = 0, label_size = 0;
                bool ok;

                random_text(&rng, in, sizeof(in), true);
                captured(help, help_size, (fputs("# HELP x_total ", m_), prometheus_write_help(m_, in)));
                captured(label, label_size, (fputs("x_total{a=", m_), prometheus_write_label_value(m_, in),
                                             fputs(",b=\"", m_), prometheus_write_label_text(m_, in),
                                             fputs(";\"} 1", m_)));
                ok = help && label && text_is_clean(help, help_size, NULL) && prom_line(help, help_size) &&
                     text_is_clean(label, label_size, NULL) && prom_line(label, label_size) &&
                     prom_reads_back(help + 15, help_size - 15, in);
                if (ok) {
                        /* the first label's value, between its quotes */
                        const char *v = label + strlen("x_total{a=\""), *end = v;

                        while (*end != '"')
                                end += *end == '\\' ? 2 : 1;
                        ok = prom_reads_back(v, (size_t)(end - v), in);
                }
                if (!ok && ++bad)
                        printf("# case %u: %s | %s\n", i, help ? help : "(null)", label ? label : "(null)");
                free(help);
                free(label);
        }
        check(bad == 0);
}

static void test_prometheus_names_any_bytes(void) {
        static const PrometheusType types[] = { PROMETHEUS_GAUGE, PROMETHEUS_COUNTER, PROMETHEUS_SUMMARY };
        Rng rng = { 4 };
        unsigned bad = 0;

        for (unsigned i = 0; i < CASES && bad < 5; i++) {
                char name[TEXT_MAX], unit[64];
                double scale = 0;
                char *metric, *label;
                const char *p, *q;

                random_text(&rng, name, sizeof(name), true);
                random_text(&rng, unit, sizeof(unit), true);
                metric = prometheus_metric_name(name, rng_below(&rng, 3) ? unit : NULL, types[rng_below(&rng, 3)],
                                                &scale);
                label = prometheus_label_name(name);
                p = metric;
                q = label;
                /* a name of nothing is "" (the sink leaves it out); anything else a name Prometheus takes */
                if (!metric || !label ||
                    (*name && (!prom_name(&p, metric + strlen(metric), true) || *p != '\0')) ||
                    (*name && (!prom_name(&q, label + strlen(label), false) || *q != '\0')) || !(scale > 0)) {
                        bad++;
                        printf("# case %u: %s | %s\n", i, metric ? metric : "(null)", label ? label : "(null)");
                }
                free(metric);
                free(label);
        }
        check(bad == 0);
}

static char *random_dup(Rng *rng, size_t max) {
        char buf[TEXT_MAX];

        random_text(rng, buf, max < sizeof(buf) ? max : sizeof(buf), true);
        return strdup(buf);
}

/* A sample of a Meter (its description first, now and then) or of an EventCounter, every string random. */
static void add_random_counter(CounterSink *s, Rng *rng, int64_t when) {
        static const NettraceCounterKind meters[] = { NETTRACE_COUNTER_GAUGE, NETTRACE_COUNTER_COUNTER,
                                                      NETTRACE_COUNTER_UP_DOWN, NETTRACE_COUNTER_HISTOGRAM };
        NettraceCounter c = { .provider = random_dup(rng, 40), .name = random_dup(rng, 60), .has_value = true,
                              .value = (double)rng_below(rng, 1000) / 4, .units = random_dup(rng, 12),
                              .tags = random_dup(rng, 80) };

        switch (rng_below(rng, 3)) {
        case 0:
                c.kind = NETTRACE_COUNTER_INSTRUMENT;
                c.description = random_dup(rng, 80);
                c.meter_tags = random_dup(rng, 40);
                c.instrument_tags = random_dup(rng, 40);
                c.meter_version = random_dup(rng, 10);
                break;
        case 1:
                c.kind = meters[rng_below(rng, 4)];
                c.meter_version = random_dup(rng, 10);
                c.has_total = true;
                c.total = c.value * 2;
                if (c.kind == NETTRACE_COUNTER_HISTOGRAM) {
                        c.n_quantiles = 2;
                        c.quantiles[0] = (NettraceQuantile){ 0.5, c.value };
                        c.quantiles[1] = (NettraceQuantile){ 0.95, c.value + 1 };
                        c.has_count = true;
                        c.count = 3;
                        c.sum = c.value * 3;
                }
                break;
        default:
                c.kind = rng_below(rng, 2) ? NETTRACE_COUNTER_MEAN : NETTRACE_COUNTER_SUM;
                c.rate = c.kind == NETTRACE_COUNTER_SUM;
                c.display_name = random_dup(rng, 60);
                c.interval_ms = 1000;
        }
        counter_sink_add(s, &c, when, when);
        nettrace_counter_done(&c);
}

/* One session's output in @kind: a few random counters over a few intervals. */
static char *sink_output(SessionOutputKind kind, Rng *rng, size_t *ret_size) {
        SessionOptions o = { .kind = kind, .quiet = true };
        CounterSink *s = NULL;
        char *text = NULL;
        size_t size = 0;
        FILE *m = open_memstream(&text, &size);

        if (!m)
                return NULL;
        o.rows = m;
        if (counter_sink_new(&o, NULL, &s) == 0) {
                unsigned n = 1 + (unsigned)rng_below(rng, 6);

                counter_sink_begin(s, NULL, 0, 0);
                for (unsigned i = 0; i < n; i++) {
                        int64_t when = (int64_t)(i / 2 + 1) * 1000000000LL;

                        add_random_counter(s, rng, when);
                        counter_sink_tick(s, when + 500000000LL);
                }
                (void)counter_sink_end(s);
                counter_sink_free(s);
        }
        fclose(m);
        *ret_size = size;
        return text;
}

static bool csv_valid(const char *text, size_t size) {
        size_t pos = 0;

        if (!text_is_clean(text, size, "\n"))
                return false;
        while (pos < size)
                if (csv_record(text, size, &pos) != 5)
                        return false;
        return size > 0 && text[size - 1] == '\n';
}

static void test_counter_rows_any_names(void) {
        static const SessionOutputKind kinds[] = { SESSION_OUTPUT_CSV, SESSION_OUTPUT_JSON, SESSION_OUTPUT_PROMETHEUS };
        Rng rng = { 5 };
        unsigned bad = 0, nonempty = 0;

        for (unsigned i = 0; i < 3000 && bad < 5; i++) {
                SessionOutputKind kind = kinds[i % 3];
                size_t size = 0;
                char *text = sink_output(kind, &rng, &size);
                bool ok = text && (kind == SESSION_OUTPUT_CSV    ? csv_valid(text, size)
                                   : kind == SESSION_OUTPUT_JSON ? json_document_valid(text, size) &&
                                                                           text_is_clean(text, size, "\n")
                                                                 : prom_document_valid(text, size));

                nonempty += text && size > 80;
                if (!ok && ++bad)
                        printf("# case %u (kind %d): %s\n", i, (int)kind, text ? text : "(null)");
                free(text);
        }
        check(bad == 0);
        check(nonempty > 1000); /* rows were written, not only heads */
}

/* A PROCESS frame whose every text field is random, decoded as dsctl gets it. */
static const WireTag process_tags[] = { WIRE_TAG_NAME, WIRE_TAG_EXE, WIRE_TAG_COMMAND_LINE, WIRE_TAG_OS,
                                        WIRE_TAG_ARCH, WIRE_TAG_RUNTIME_VERSION, WIRE_TAG_ENTRY_ASSEMBLY,
                                        WIRE_TAG_RUNTIME_ID, WIRE_TAG_CGROUP };
static const char *const process_keys[] = { "name", "exe", "command_line", "os", "arch", "runtime_version",
                                            "entry_assembly", "runtime_identifier", "cgroup" };
#define N_PROCESS_TAGS (sizeof(process_tags) / sizeof(process_tags[0]))

static bool random_process(Rng *rng, WireWriter *w, WireMessage *m, char values[][TEXT_MAX]) {
        const uint8_t *frame;
        size_t size;

        wire_writer_begin(w, WIRE_REPLY_PROCESS);
        wire_writer_put_u32(w, WIRE_TAG_PID, 4242);
        wire_writer_put_u32(w, WIRE_TAG_UID, 4294967294u);
        for (size_t t = 0; t < N_PROCESS_TAGS; t++) {
                random_text(rng, values[t], TEXT_MAX, true);
                wire_writer_put_string(w, process_tags[t], values[t]);
        }
        return wire_writer_finish(w, &frame, &size) == 0 && wire_message_decode(frame, size, m) == 0;
}

/* The JSON's member @key is @value, U+FFFD for each byte that is not UTF-8. */
static bool json_member_is(const char *json, size_t size, const char *key, const char *value) {
        char want[3 * TEXT_MAX], got[3 * TEXT_MAX];
        size_t want_n = utf8_replace_invalid(value, strlen(value), want), got_n = 0;

        return json_member_string(json, size, key, got, &got_n) && got_n == want_n && memcmp(got, want, got_n) == 0;
}

/* The text line "@label   VALUE" of @text (the label padded to 17 columns) shows @value escaped, on that one line. */
static bool text_line_is(const char *text, const char *label, const char *value) {
        char back[TEXT_MAX], head[32];
        const char *at, *end;
        size_t back_n = 0;

        snprintf(head, sizeof(head), "\n%-17s ", label);
        at = strstr(text, head);
        if (!at)
                return false;
        at += strlen(head);
        end = strchr(at, '\n');
        return end && text_unescape(at, (size_t)(end - at), back, &back_n) && back_n == strlen(value) &&
               memcmp(back, value, back_n) == 0;
}

static void test_process_outputs_any_bytes(void) {
        static WireWriter w;
        Rng rng = { 6 };
        unsigned bad = 0;

        for (unsigned i = 0; i < CASES / 4 && bad < 5; i++) {
                static const char *const verbs[] = { "info", "ps", "resume" };
                char values[N_PROCESS_TAGS][TEXT_MAX];
                WireMessage m;
                char *text = NULL, *json = NULL;
                size_t text_size = 0, json_size = 0, lines = 0;
                const char *verb = verbs[i % 3];
                bool ok;

                if (!random_process(&rng, &w, &m, values)) {
                        bad++;
                        printf("# case %u: the frame was refused\n", i);
                        continue;
                }
                captured(text, text_size, (output_process(&(Output){ .verb = verb, .stream = m_ }, &m)));
                captured(json, json_size, ({
                                 Output o = { .json = true, .verb = verb, .stream = m_ };
                                 output_process(&o, &m);
                                 output_end(&o);
                         }));
                for (size_t k = 0; text && k < text_size; k++)
                        lines += text[k] == '\n';
                ok = text && json && text_is_clean(text, text_size, "\n") && json_document_valid(json, json_size) &&
                     text_is_clean(json, json_size, "\n");
                /* info: one line a field, PID and User too; ps: the head and one row; resume: one line */
                ok = ok && lines == (strcmp(verb, "info") == 0 ? N_PROCESS_TAGS + 2 : strcmp(verb, "ps") == 0 ? 2 : 1);
                for (size_t t = 0; ok && t < N_PROCESS_TAGS; t++)
                        ok = json_member_is(json, json_size, process_keys[t], values[t]);
                if (ok && strcmp(verb, "info") == 0)
                        ok = text_line_is(text, "Executable:", values[1]) && text_line_is(text, "Command line:", values[2]) &&
                             text_line_is(text, "Cgroup:", values[8]);
                if (!ok && ++bad)
                        printf("# case %u (%s): %s | %s\n", i, verb, text ? text : "(null)", json ? json : "(null)");
                free(text);
                free(json);
        }
        check(bad == 0);
}

static void test_env_outputs_any_bytes(void) {
        static WireWriter w;
        Rng rng = { 7 };
        unsigned bad = 0;

        for (unsigned i = 0; i < CASES / 4 && bad < 5; i++) {
                char name[TEXT_MAX], value[TEXT_MAX];
                const uint8_t *frame;
                size_t size, text_size = 0, json_size = 0;
                char *text = NULL, *json = NULL;
                WireMessage m;
                bool ok;

                random_text(&rng, name, sizeof(name), true);
                random_text(&rng, value, sizeof(value), true);
                if (!*name)
                        strcpy(name, "\xff");
                wire_writer_begin(&w, WIRE_REPLY_ENV);
                wire_writer_put_string(&w, WIRE_TAG_ENV_NAME, name);
                wire_writer_put_string(&w, WIRE_TAG_ENV_VALUE, value);
                if (wire_writer_finish(&w, &frame, &size) != 0 || wire_message_decode(frame, size, &m) != 0) {
                        bad++;
                        continue;
                }
                captured(text, text_size, output_env(&(Output){ .verb = "env", .stream = m_ }, &m));
                captured(json, json_size, ({
                                 Output o = { .json = true, .verb = "env", .stream = m_ };
                                 output_env(&o, &m);
                                 output_end(&o);
                         }));
                ok = text && json && text_is_clean(text, text_size, "\n") && text_size > 0 &&
                     memchr(text, '\n', text_size) == text + text_size - 1 && json_document_valid(json, json_size) &&
                     text_is_clean(json, json_size, "\n") && json_member_is(json, json_size, "name", name) &&
                     json_member_is(json, json_size, "value", value);
                if (!ok && ++bad)
                        printf("# case %u: %s | %s\n", i, text ? text : "(null)", json ? json : "(null)");
                free(text);
                free(json);
        }
        check(bad == 0);
}

int main(void) {
        run_test(test_text_escape_any_bytes);
        run_test(test_json_string_any_bytes);
        run_test(test_prometheus_text_any_bytes);
        run_test(test_prometheus_names_any_bytes);
        run_test(test_counter_rows_any_names);
        run_test(test_process_outputs_any_bytes);
        run_test(test_env_outputs_any_bytes);
        return tap_finish();
}
