/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl counters' words and numbers: as dotnet-counters writes them, and as Prometheus reads them */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eventpipe/counter-format.h"
#include "client/counter-view.h"
#include "tests/unit/tap.h"

/* Whether @got, the text of @v, is @want; says what differs. */
static bool number_is(double v, const char *got, const char *want) {
        if (strcmp(got, want) == 0)
                return true;
        printf("# %.17g: got '%s', want '%s'\n", v, got, want);
        return false;
}

static bool double_is(double v, const char *want) {
        char buf[COUNTER_FORMAT_DOUBLE_MAX];

        counter_format_double(v, buf);
        return number_is(v, buf, want);
}

/* .NET's Double.ToString(CultureInfo.InvariantCulture), as dotnet-counters writes values */
static void test_double_as_dotnet(void) {
        check(double_is(0, "0"));
        check(double_is(-0.0, "-0"));
        check(double_is(42.5, "42.5"));
        check(double_is(41201664, "41201664"));
        check(double_is(0.1, "0.1"));
        check(double_is(1.0 / 3, "0.3333333333333333"));
        check(double_is(0.01968790000000009, "0.01968790000000009"));
        check(double_is(123.456, "123.456"));
        /* fixed up to an exponent of 14, scientific from 15 and below -4, two exponent digits at least */
        check(double_is(1e14, "100000000000000"));
        check(double_is(123456789012345, "123456789012345"));
        check(double_is(1e15, "1E+15"));
        check(double_is(1.2345678901234568e17, "1.2345678901234568E+17"));
        check(double_is(1e300, "1E+300"));
        check(double_is(0.0001, "0.0001"));
        check(double_is(0.00001, "1E-05"));
        check(double_is(4.599999999999049e-05, "4.599999999999049E-05"));
        check(double_is(-2.5e-7, "-2.5E-07"));
        check(double_is(NAN, "NaN"));
        check(double_is(INFINITY, "Infinity"));
        check(double_is(-INFINITY, "-Infinity"));
}

static bool rounded_is(double v, const char *want) {
        char buf[COUNTER_FORMAT_DOUBLE_MAX];

        counter_format_rounded(v, buf);
        return number_is(v, buf, want);
}

/* A record's value for people: three decimals, or three significant digits below 1 */
static void test_rounded_for_people(void) {
        char exact[COUNTER_FORMAT_DOUBLE_MAX];

        /* the value a fired record printed as 94.763704000000004 */
        check(rounded_is(94.763704000000004, "94.764"));
        counter_format_double(94.763704000000004, exact);
        check(strtod(exact, NULL) == 94.763704000000004);
        check(rounded_is(500, "500"));
        check(rounded_is(41201664, "41201664"));
        check(rounded_is(2.5, "2.5"));
        check(rounded_is(-2.5, "-2.5"));
        check(rounded_is(1.0 / 3, "0.333"));
        check(rounded_is(2.0 / 3, "0.667"));
        check(rounded_is(0.9996, "1"));
        check(rounded_is(12.0005, "12.001"));
        check(rounded_is(0.5, "0.5"));
        /* a small value keeps its digits rather than reading 0 */
        check(rounded_is(0.000123456, "0.000123"));
        check(rounded_is(0.0001, "0.0001"));
        check(rounded_is(0.00001234, "1.23E-05"));
        check(rounded_is(-2.5e-7, "-2.5E-07"));
        check(rounded_is(0, "0"));
        check(rounded_is(-0.0, "0"));
        /* 15 significant digits at most: no digits of the binary's noise */
        check(rounded_is(123456789012345.678, "123456789012346"));
        check(rounded_is(123456789012.3456, "123456789012.346"));
        check(rounded_is(1234567890123.456, "1234567890123.46"));
        check(rounded_is(1.5e15, "1.5E+15"));
        check(rounded_is(1e300, "1E+300"));
        check(rounded_is(NAN, "NaN"));
        check(rounded_is(-INFINITY, "-Infinity"));
}

static int64_t epoch_of(int year, int month, int day, int hour, int minute, int second) {
        struct tm tm = { .tm_year = year - 1900, .tm_mon = month - 1, .tm_mday = day, .tm_hour = hour,
                         .tm_min = minute, .tm_sec = second };
        return (int64_t)timegm(&tm);
}

static void with_tz(const char *tz) {
        setenv("TZ", tz, 1);
        tzset();
}

/* CSV: DateTime.ToString() under the invariant culture; JSON: DateTime.Now.ToString("O"), both local */
static void test_times(void) {
        int64_t sec = epoch_of(2026, 8, 7, 14, 37, 44);
        char buf[64];

        with_tz("UTC");
        counter_format_time_invariant(sec * 1000000 + 123456, buf, sizeof(buf));
        check(strcmp(buf, "08/07/2026 14:37:44") == 0);
        counter_format_time_roundtrip(sec * 1000000000 + 123456789, buf, sizeof(buf));
        check(strcmp(buf, "2026-08-07T14:37:44.1234567+00:00") == 0);

        with_tz("XYZ-2"); /* two hours east of UTC */
        counter_format_time_invariant(sec * 1000000, buf, sizeof(buf));
        check(strcmp(buf, "08/07/2026 16:37:44") == 0);
        counter_format_time_roundtrip(sec * 1000000000, buf, sizeof(buf));
        check(strcmp(buf, "2026-08-07T16:37:44.0000000+02:00") == 0);

        with_tz("XYZ+5:30");
        counter_format_time_roundtrip(sec * 1000000000 + 999999999, buf, sizeof(buf));
        check(strcmp(buf, "2026-08-07T09:07:44.9999999-05:30") == 0);
        with_tz("UTC");
}

static bool display_is(const NettraceCounter *c, const char *unit, unsigned interval, CounterStyle style,
                       const char *want) {
        char *got = counter_display_name(c, unit, interval, style);
        bool ok = got && strcmp(got, want) == 0;

        if (!ok)
                printf("# got '%s', want '%s'\n", got ? got : "(null)", want);
        free(got);
        return ok;
}

/* the samples' strings are the parser's to free; these are not freed */
#define S(text) ((char *)(text))

/* dotnet-counters' GetDisplay() and the payloads' DisplayName */
static void test_display_names(void) {
        NettraceCounter mean = { .kind = NETTRACE_COUNTER_MEAN, .name = S("cpu-usage"), .display_name = S("CPU Usage"),
                                 .units = S("%"), .has_value = true, .value = 3 };
        NettraceCounter polling = { .kind = NETTRACE_COUNTER_MEAN, .name = S("test-counter"),
                                    .display_name = S("Test counter"), .has_value = true };
        NettraceCounter rate = { .kind = NETTRACE_COUNTER_SUM, .name = S("alloc-rate"), .display_name = S("Allocation Rate"),
                                 .units = S("B"), .interval_ms = 1000, .rate = true, .has_value = true };
        NettraceCounter bare = { .kind = NETTRACE_COUNTER_SUM, .name = S("threadpool-completed-items-count"),
                                 .display_name = S("ThreadPool Completed Work Item Count"), .interval_ms = 5000,
                                 .rate = true, .has_value = true };
        NettraceCounter counted = { .kind = NETTRACE_COUNTER_SUM, .name = S("x"), .units = S("count"), .interval_ms = 2000 };
        NettraceCounter gauge = { .kind = NETTRACE_COUNTER_GAUGE, .name = S("test-gauge"), .has_value = true };
        NettraceCounter counter = { .kind = NETTRACE_COUNTER_COUNTER, .name = S("dotnet.gc.heap.total_allocated"),
                                    .rate = true, .has_value = true, .value = 10, .has_total = true, .total = 500 };
        NettraceCounter histogram = { .kind = NETTRACE_COUNTER_HISTOGRAM, .name = S("lat"), .has_value = true };

        check(display_is(&mean, NULL, 1, COUNTER_STYLE_COLLECT, "CPU Usage (%)"));
        check(display_is(&polling, NULL, 1, COUNTER_STYLE_COLLECT, "Test counter"));
        /* a rate names its interval: the one the EventCounters were asked for */
        check(display_is(&rate, NULL, 9, COUNTER_STYLE_COLLECT, "Allocation Rate (B / 1 sec)"));
        check(display_is(&bare, NULL, 1, COUNTER_STYLE_COLLECT, "ThreadPool Completed Work Item Count (Count / 5 sec)"));
        check(display_is(&counted, NULL, 1, COUNTER_STYLE_COLLECT, "x (Count / 2 sec)"));
        /* Meters: their unit from BeginInstrumentReporting */
        check(display_is(&gauge, "items", 1, COUNTER_STYLE_COLLECT, "test-gauge (items)"));
        check(display_is(&gauge, NULL, 1, COUNTER_STYLE_COLLECT, "test-gauge"));
        check(display_is(&counter, "By", 3, COUNTER_STYLE_COLLECT, "dotnet.gc.heap.total_allocated (By / 3 sec)"));
        check(display_is(&counter, NULL, 1, COUNTER_STYLE_COLLECT, "dotnet.gc.heap.total_allocated (Count / 1 sec)"));
        check(display_is(&counter, "By", 1, COUNTER_STYLE_MONITOR, "dotnet.gc.heap.total_allocated (By)"));
        check(display_is(&histogram, "ms", 1, COUNTER_STYLE_COLLECT, "lat (ms)"));

        check(counter_is_rate(&rate, COUNTER_STYLE_MONITOR) && !counter_is_rate(&mean, COUNTER_STYLE_COLLECT));
        check(counter_is_rate(&counter, COUNTER_STYLE_COLLECT) && !counter_is_rate(&counter, COUNTER_STYLE_MONITOR));
        check(counter_row_value(&counter, COUNTER_STYLE_COLLECT) == 10);
        check(counter_row_value(&counter, COUNTER_STYLE_MONITOR) == 500);
        counter.has_total = false; /* before .NET 8: the rate only, in both */
        check(counter_row_value(&counter, COUNTER_STYLE_MONITOR) == 10);
        check(display_is(&counter, "By", 1, COUNTER_STYLE_MONITOR, "dotnet.gc.heap.total_allocated (By / 1 sec)"));
}

static bool text_is(char *got, const char *want) {
        bool ok = got && strcmp(got, want) == 0;

        if (!ok)
                printf("# got '%s', want '%s'\n", got ? got : "(null)", want);
        free(got);
        return ok;
}

/* CombineTags(): the Meter's, the instrument's, the value's; a percentile appended to the value's */
static void test_tags(void) {
        check(text_is(counter_combine_tags("team=dsagent", "kind=test", "sensor=a"), "team=dsagent,kind=test,sensor=a"));
        check(text_is(counter_combine_tags(NULL, "", "gc.heap.generation=gen0"), "gc.heap.generation=gen0"));
        check(text_is(counter_combine_tags("m=1", NULL, ""), "m=1"));
        check(text_is(counter_combine_tags(NULL, NULL, NULL), ""));
        check(text_is(counter_percentile_tags(NULL, 0.5), "Percentile=50"));
        check(text_is(counter_percentile_tags("", 0.99), "Percentile=99"));
        check(text_is(counter_percentile_tags("route=/a", 0.95), "route=/a,Percentile=95"));
        check(text_is(counter_percentile_tags("a=b", 0.999), "a=b,Percentile=99.9"));
}

static bool view_is(double v, const char *want) {
        char buf[64];

        counter_format_view_value(v, 15, buf, sizeof(buf));
        return number_is(v, buf, want);
}

/* dotnet-counters monitor's "##,###,##0.###", its decimal points lined up, and 0.####e+00 from 10^8 */
static void test_view_values(void) {
        check(view_is(1421893.21, "  1,421,893.21 "));
        check(view_is(7, "          7    "));
        check(view_is(0.123, "          0.123"));
        check(view_is(-675430.9, "   -675,430.9  "));
        check(view_is(99999999, " 99,999,999    "));
        check(view_is(4.9012e25, "     4.9012e+25   "));
        check(view_is(100000000, "          1e+08   "));
}

static bool name_is(const char *name, const char *unit, PrometheusType type, const char *want, double want_scale) {
        double scale = 0;
        char *got = prometheus_metric_name(name, unit, type, &scale);
        bool ok = got && strcmp(got, want) == 0 && scale == want_scale;

        if (!ok)
                printf("# %s (%s): got '%s' ×%g, want '%s' ×%g\n", name, unit ? unit : "-", got ? got : "(null)", scale,
                       want, want_scale);
        free(got);
        return ok;
}

/* OpenTelemetry's Prometheus names, and Prometheus's base units */
static void test_prometheus_names(void) {
        check(name_is("dotnet.gc.collections", "{collection}", PROMETHEUS_COUNTER, "dotnet_gc_collections_total", 1));
        check(name_is("dotnet.process.memory.working_set", "By", PROMETHEUS_GAUGE,
                      "dotnet_process_memory_working_set_bytes", 1));
        check(name_is("dotnet.gc.pause.time", "s", PROMETHEUS_COUNTER, "dotnet_gc_pause_time_seconds_total", 1));
        check(name_is("dotnet.assembly.count", "{assembly}", PROMETHEUS_GAUGE, "dotnet_assembly_count", 1));
        check(name_is("http.server.request.duration", "ms", PROMETHEUS_SUMMARY, "http_server_request_duration_seconds",
                      1e-3));
        check(name_is("cache.size", "MiBy", PROMETHEUS_GAUGE, "cache_size_bytes", 1048576));
        check(name_is("system.network.io", "By/s", PROMETHEUS_GAUGE, "system_network_io_bytes_per_second", 1));
        check(name_is("utilization", "1", PROMETHEUS_GAUGE, "utilization_ratio", 1));
        check(name_is("hits", "1", PROMETHEUS_COUNTER, "hits_total", 1));
        check(name_is("requests_total", NULL, PROMETHEUS_COUNTER, "requests_total", 1));
        check(name_is("disk.io.bytes", "By", PROMETHEUS_COUNTER, "disk_io_bytes_total", 1));
        check(name_is("a..b", "packets", PROMETHEUS_GAUGE, "a_b_packets", 1));
        check(name_is("2xx.count", NULL, PROMETHEUS_GAUGE, "_2xx_count", 1));
        check(name_is("temp", "Cel", PROMETHEUS_GAUGE, "temp_celsius", 1));
        /* EventCounters' units: free text, MB being a million bytes */
        check(name_is("cpu-usage", "%", PROMETHEUS_GAUGE, "cpu_usage_percent", 1));
        check(name_is("working-set", "MB", PROMETHEUS_GAUGE, "working_set_bytes", 1e6));
        check(name_is("alloc-rate", "B", PROMETHEUS_COUNTER, "alloc_rate_bytes_total", 1));

        check(prometheus_declared_type("dotnet_assembly_count", PROMETHEUS_GAUGE) == PROMETHEUS_UNTYPED);
        check(prometheus_declared_type("x_bucket", PROMETHEUS_GAUGE) == PROMETHEUS_UNTYPED);
        check(prometheus_declared_type("x_count_total", PROMETHEUS_COUNTER) == PROMETHEUS_COUNTER);
        check(prometheus_declared_type("x_seconds", PROMETHEUS_SUMMARY) == PROMETHEUS_SUMMARY);
        check(prometheus_declared_type("x_seconds", PROMETHEUS_GAUGE) == PROMETHEUS_GAUGE);
        check(strcmp(prometheus_type_to_string(PROMETHEUS_UNTYPED), "untyped") == 0);
}

static char *written(void (*write)(FILE *, const char *), const char *s) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        write(f, s);
        fclose(f);
        return buf;
}

static void test_prometheus_labels_and_values(void) {
        char buf[COUNTER_FORMAT_DOUBLE_MAX];

        check(text_is(prometheus_label_name("gc.heap.generation"), "gc_heap_generation"));
        check(text_is(prometheus_label_name("1abc"), "key_1abc"));
        check(text_is(prometheus_label_name("a--b"), "a_b"));
        check(text_is(prometheus_label_name(""), "key_"));
        check(text_is(written(prometheus_write_label_value, "a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\""));
        check(text_is(written(prometheus_write_help, "one\\two\nthree \"q\""), "one\\\\two\\nthree \"q\""));

        prometheus_format_value(44847104, buf);
        check(strcmp(buf, "44847104") == 0);
        prometheus_format_value(0.01, buf);
        check(strcmp(buf, "0.01") == 0);
        prometheus_format_value(1e21, buf);
        check(strcmp(buf, "1e+21") == 0);
        prometheus_format_value(1.5e-7, buf);
        check(strcmp(buf, "1.5e-07") == 0);
        prometheus_format_value(INFINITY, buf);
        check(strcmp(buf, "+Inf") == 0);
        prometheus_format_value(-INFINITY, buf);
        check(strcmp(buf, "-Inf") == 0);
        prometheus_format_value(NAN, buf);
        check(strcmp(buf, "NaN") == 0);
}

/* The last frame drawn on @f, whose text is in *@buf. */
static char *drawn(CounterView *v, char **buf, FILE *f) {
        char *frame, *next;

        counter_view_draw(v);
        fflush(f);
        for (frame = *buf; (next = strstr(frame + 1, "\033[H")); frame = next)
                ;
        return frame;
}

/* --watch: dotnet-counters monitor's layout, a column per tag and a row per tag set */
static void test_view_layout(void) {
        char *buf = NULL, *text;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        CounterView *v = counter_view_new(f, "title");

        check(counter_view_set(v, "P", "t (Cel)", "team=d,sensor=b", 23.5) == 0);
        check(counter_view_set(v, "P", "t (Cel)", "team=d,sensor=a", 21.5) == 0);
        check(counter_view_set(v, "P", "a (x)", "", 1) == 0);
        check(counter_view_set(v, "A\033]0;evil\a", "z", "", 2) == 0);
        text = drawn(v, &buf, f);
        check(strstr(text, "\033[H\033[Jtitle\n\nName ") != NULL);
        /* providers and names in order, control characters escaped */
        check(strstr(text, "[A\\x1b]0;evil\\x07]\n") != NULL && strstr(text, "[A\\x1b") < strstr(text, "[P]"));
        check(strstr(text, "    a (x)") < strstr(text, "    t (Cel)\n"));
        check(strstr(text, "        team sensor \n        ---- ------ \n") != NULL);
        check(strstr(text, "        d    a      ") < strstr(text, "        d    b      "));
        check(strstr(text, "21.5") && strstr(text, "23.5"));

        /* a tag set that stops reporting goes */
        counter_view_remove(v, "P", "t (Cel)", "team=d,sensor=b");
        text = drawn(v, &buf, f);
        check(strstr(text, "21.5") && !strstr(text, "23.5"));
        counter_view_free(v);
        fclose(f);
        free(buf);
}

int main(void) {
        run_test(test_double_as_dotnet);
        run_test(test_rounded_for_people);
        run_test(test_times);
        run_test(test_display_names);
        run_test(test_tags);
        run_test(test_view_values);
        run_test(test_prometheus_names);
        run_test(test_prometheus_labels_and_values);
        run_test(test_view_layout);
        return tap_finish();
}
