/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * eventpipe/counter-rows.h, which dsctl counters and a [[collect]] table's then.counters share:
 * the session's own samples only, EventCounters given way to a Meter of their provider, and the
 * CSV rows dotnet-counters collect writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/counter-rows.h"
#include "tests/unit/tap.h"

#define SECOND 1000000000LL
#define PROVIDERS "System.Runtime:0x0:4:EventCounterIntervalSec=1,System.Diagnostics.Metrics:0x2:4:" \
                  "SessionId=ours;Metrics=System.Runtime;RefreshInterval=1;MaxTimeSeries=1000;MaxHistograms=10;ClientId=ours"

typedef struct Out {
        FILE *f;
        CounterRows *rows;
} Out;

static void emit(const NettraceCounter *c, const CounterInstrument *in, int64_t when_nsec, int64_t now_nsec,
                 void *userdata) {
        Out *o = userdata;

        counter_csv_sample(o->f, c, in, counter_rows_interval(o->rows), when_nsec);
}

static NettraceCounter sample(NettraceCounterKind kind, const char *provider, const char *name, const char *session,
                              double value) {
        return (NettraceCounter){ .kind = kind, .provider = strdup(provider), .name = strdup(name),
                                  .session_id = session ? strdup(session) : NULL, .has_value = true, .value = value,
                                  .interval_ms = 1000 };
}

/* The rows (without their times) of @n samples fed at one a second. */
static char *rows_of(NettraceCounter *samples, size_t n) {
        static const CounterRowsCallbacks callbacks = { .emit = emit };
        char *text = NULL;
        size_t size = 0;
        Out o = { .f = open_memstream(&text, &size) };

        check(o.f && counter_rows_new(&callbacks, &o, &o.rows) == 0);
        counter_rows_begin(o.rows, PROVIDERS);
        check(counter_rows_interval(o.rows) == 1);
        for (size_t i = 0; i < n; i++) {
                counter_rows_tick(o.rows, (int64_t)i * SECOND);
                counter_rows_add(o.rows, &samples[i], (int64_t)i * SECOND, (int64_t)i * SECOND);
        }
        counter_rows_end(o.rows);
        counter_rows_free(o.rows);
        fclose(o.f);
        return text;
}

/* Another session's Meter values come through the stream too: they are not this one's. */
static void test_other_sessions_meters_are_left_out(void) {
        NettraceCounter s[] = {
                sample(NETTRACE_COUNTER_GAUGE, "App.Meter", "queue", "theirs", 7),
                sample(NETTRACE_COUNTER_GAUGE, "App.Meter", "queue", "ours", 8),
                sample(NETTRACE_COUNTER_GAUGE, "App.Meter", "queue", NULL, 9),
        };
        char *text = rows_of(s, 3);

        check(text && strstr(text, ",App.Meter,queue,Metric,8\n") && !strstr(text, ",7\n") && !strstr(text, ",9\n"));
        free(text);
}

/* EventCounters of another interval are another session's; of a provider whose Meter reports, duplicates. */
static void test_eventcounters_give_way(void) {
        NettraceCounter s[] = {
                sample(NETTRACE_COUNTER_MEAN, "System.Runtime", "cpu-usage", NULL, 3),
                sample(NETTRACE_COUNTER_GAUGE, "System.Runtime", "dotnet.gc.heap", "ours", 5),
                sample(NETTRACE_COUNTER_MEAN, "Other.Source", "depth", NULL, 4),
                sample(NETTRACE_COUNTER_MEAN, "Other.Source", "depth", NULL, 6),
        };
        char *text;

        s[3].interval_ms = 5000;
        s[2].display_name = strdup("Queue, depth");
        text = rows_of(s, 4);
        /* the Meter came within the second System.Runtime's EventCounter was held: that one is a duplicate */
        check(text && !strstr(text, "cpu-usage") && strstr(text, ",System.Runtime,dotnet.gc.heap,Metric,5\n"));
        /* a display name with a comma is quoted as CSV quotes it; another interval's sample is not ours */
        check(text && strstr(text, ",Other.Source,\"Queue, depth\",Metric,4\n") && !strstr(text, ",6\n"));
        free(text);
}

/* The head dotnet-counters collect writes, and a row whose tags are bracketed with semicolons. */
static void test_csv_rows(void) {
        static const char head[] = "Timestamp,Provider,Counter Name,Counter Type,Mean/Increment\n";
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        NettraceCounter c = sample(NETTRACE_COUNTER_GAUGE, "App.Meter", "=cmd", "ours", 1.5);

        c.tags = strdup("queue=q1,region=eu");
        counter_csv_header(f);
        counter_csv_sample(f, &c, NULL, 1, 0);
        fclose(f);
        check(text && strncmp(text, head, strlen(head)) == 0);
        /* a name a spreadsheet would take for a formula is made text */
        check(text && strstr(text, ",App.Meter,\"'=cmd[queue=q1;region=eu]\",Metric,1.5\n"));
        nettrace_counter_done(&c);
        free(text);
}

int main(void) {
        run_test(test_other_sessions_meters_are_left_out);
        run_test(test_eventcounters_give_way);
        run_test(test_csv_rows);
        return tap_finish();
}
