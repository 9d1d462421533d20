/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl counters' samples turned into what dotnet-counters shows (counter-sink.h): CSV, JSON,
 * Prometheus or the view.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/param.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "eventpipe/counter-format.h"
#include "eventpipe/counter-rows.h"
#include "client/counter-sink.h"
#include "client/output.h"
#include "common/text.h"

typedef struct PromSeries {
        char *labels;           /* rendered, without braces; "" for none */
        bool present;           /* false once the instrument stopped reporting it */
        double value;           /* gauge; counter: the running total */
        size_t n_quantiles;     /* summary */
        NettraceQuantile quantiles[NETTRACE_QUANTILES_MAX];
        bool has_count;
        int64_t count;
        double sum;
} PromSeries;

typedef struct PromFamily {
        char *name, *help;
        PrometheusType type;
        PromSeries *series;
        size_t n_series;
} PromFamily;

enum {
        NOTE_OTHER_SESSION,
        NOTE_ERROR,
        NOTE_CALLBACK,
        NOTE_TIME_SERIES,
        NOTE_HISTOGRAMS,
        NOTE_SERIES_LIMIT,
        NOTE_TYPE_CLASH,
        NOTE_NAMELESS,
        NOTE_WRITE,
        _NOTE_MAX,
};

struct CounterSink {
        const SessionOptions *o;
        CounterView *view;
        CounterStyle style;
        CounterRows *rows;      /* which samples are shown (counter-rows.h) */
        bool begun;
        unsigned events;        /* JSON: rows written */
        /* prometheus */
        PromFamily *families;
        size_t n_families, n_series;
        bool dirty;
        int64_t changed_nsec, dirty_since_nsec;
        unsigned snapshots;
        bool noted[_NOTE_MAX];
        int error;              /* the first failure to write */
};

static void note(CounterSink *s, unsigned which, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(CounterSink *s, unsigned which, const char *fmt, ...) {
        va_list ap;

        if (s->noted[which] || s->o->quiet)
                return;
        s->noted[which] = true;
        va_start(ap, fmt);
        fputs("dsctl: counters: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

static void emit(const NettraceCounter *c, const CounterInstrument *in, int64_t when_nsec, int64_t now_nsec,
                 void *userdata);
static void notice(const NettraceCounter *c, bool ours, void *userdata);

int counter_sink_new(const SessionOptions *o, CounterView *view, CounterSink **ret) {
        static const CounterRowsCallbacks callbacks = { .emit = emit, .notice = notice };
        CounterSink *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        if (counter_rows_new(&callbacks, s, &s->rows) < 0) {
                free(s);
                return -ENOMEM;
        }
        counter_rows_filter(s->rows, o->counter_filter_providers, o->counter_names, o->n_counter_filters);
        s->o = o;
        s->view = view;
        s->style = view ? COUNTER_STYLE_MONITOR : COUNTER_STYLE_COLLECT;
        *ret = s;
        return 0;
}

CounterSink *counter_sink_free(CounterSink *s) {
        if (!s)
                return NULL;
        counter_rows_free(s->rows);
        for (size_t i = 0; i < s->n_families; i++) {
                for (size_t j = 0; j < s->families[i].n_series; j++)
                        free(s->families[i].series[j].labels);
                free(s->families[i].series);
                free(s->families[i].name);
                free(s->families[i].help);
        }
        free(s->families);
        free(s);
        return NULL;
}

/* ---- what the session is ---- */

/* The text dotnet-counters gives as TargetProcess: .NET's Process.ProcessName of @pid, "" if unknown. */
static char *counter_sink_process_name(pid_t pid) {
        char path[64], comm[64] = "", cmdline[4096];
        const char *base;
        ssize_t n;
        int fd;

        if (pid <= 0)
                return strdup("");
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return strdup("");
        n = read(fd, comm, sizeof(comm) - 1);
        safe_close(fd);
        comm[n > 0 ? n : 0] = '\0';
        comm[strcspn(comm, "\n")] = '\0';
        /* the kernel keeps 15 bytes of the name; .NET takes the whole one from argv[0] when it begins so */
        if (strlen(comm) < 15)
                return strdup(comm);
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return strdup(comm);
        n = read(fd, cmdline, sizeof(cmdline) - 1);
        safe_close(fd);
        cmdline[n > 0 ? n : 0] = '\0';
        base = strrchr(cmdline, '/') ? strrchr(cmdline, '/') + 1 : cmdline;
        return strdup(strncmp(base, comm, strlen(comm)) == 0 ? base : comm);
}

void counter_sink_begin(CounterSink *s, const char *providers, pid_t pid, int64_t now_nsec) {
        _cleanup_free_ char *name = NULL;
        char start[64];
        FILE *f = s->o->rows;

        counter_rows_begin(s->rows, providers);
        s->begun = true;
        if (s->view || !f)
                return;
        if (s->o->kind == SESSION_OUTPUT_CSV)
                counter_csv_header(f);
        else if (s->o->kind == SESSION_OUTPUT_JSON) {
                name = counter_sink_process_name(pid > 0 ? pid : s->o->target_pid);
                counter_format_time_roundtrip(now_nsec, start, sizeof(start));
                fputs("{ \"TargetProcess\": ", f);
                output_json_string(f, name ? name : "");
                fprintf(f, ", \"StartTime\": \"%s\", \"Events\": [", start);
        }
        fflush(f);
}

static void write_json(CounterSink *s, const NettraceCounter *c, const CounterInstrument *in, const char *display,
                       const char *value_tags, bool rate, double value, int64_t when_nsec) {
        char when[64], number[COUNTER_FORMAT_DOUBLE_MAX];
        FILE *f = s->o->rows;

        counter_format_time_roundtrip(when_nsec, when, sizeof(when));
        counter_format_double(value, number);
        fprintf(f, "%s\n{ \"timestamp\": \"%s\",  \"provider\": ", s->events > 0 ? "," : "", when);
        output_json_string(f, c->provider);
        fputs(",  \"name\": ", f);
        output_json_string(f, display);
        fputs(",  \"tags\": ", f);
        output_json_string(f, value_tags ? value_tags : "");
        fprintf(f, ",  \"counterType\": \"%s\",  \"meterTags\": ", rate ? "Rate" : "Metric");
        output_json_string(f, in && in->meter_tags ? in->meter_tags : "");
        fputs(",  \"instrumentTags\": ", f);
        output_json_string(f, in && in->instrument_tags ? in->instrument_tags : "");
        /* JSON has no NaN or Infinity */
        fprintf(f, ",  \"value\": %s }", isfinite(value) ? number : "null");
        s->events++;
}

/* What one emitted sample's rows need besides what counter_rows_of() gives. */
typedef struct RowContext {
        CounterSink *s;
        const CounterInstrument *in;
        int64_t when_nsec;
} RowContext;

/* One row: to the view, or as CSV or JSON. @value_tags: the value's own tags (a percentile's included). */
static void row(const NettraceCounter *c, const char *display, const char *value_tags, const char *tags, bool rate,
                double value, bool ended, void *userdata) {
        RowContext *x = userdata;
        CounterSink *s = x->s;

        if (s->view) {
                if (ended)
                        counter_view_remove(s->view, c->provider, display, tags);
                else
                        (void)counter_view_set(s->view, c->provider, display, tags, value);
                return;
        }
        if (ended || !s->o->rows)
                return;
        if (s->o->kind == SESSION_OUTPUT_CSV)
                counter_csv_row(s->o->rows, c->provider, display, tags, rate, value, x->when_nsec);
        else
                write_json(s, c, x->in, display, value_tags, rate, value, x->when_nsec);
        fflush(s->o->rows);
}

/* ---- Prometheus ---- */

typedef struct Label {
        char *key, *name, *value;
} Label;

static int label_compare(const void *a, const void *b) {
        return strcmp(((const Label *)a)->key, ((const Label *)b)->key);
}

/* The tags "k=v,k2=v2" (EventCounters' "k:v") as labels: by key, keys that became alike merged with ';'. */
static char *prom_labels(const NettraceCounter *c, const char *tags) {
        static const char *const reserved[] = { "otel_scope_name", "otel_scope_version", "quantile" };
        _cleanup_free_ char *copy = strdup(tags);
        Label labels[64];
        size_t n = 0;
        char *s = NULL, *save = NULL;
        size_t size = 0;
        FILE *f;

        if (!copy)
                return NULL;
        for (char *t = strtok_r(copy, ",", &save); t && n < ELEMENTSOF(labels); t = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(t, '=');
                if (!eq)
                        eq = strchr(t, ':');
                if (!eq || eq == t)
                        continue;
                *eq = '\0';
                labels[n] = (Label){ .key = t, .name = prometheus_label_name(t), .value = eq + 1 };
                if (labels[n].name)
                        n++;
        }
        qsort(labels, n, sizeof(Label), label_compare);

        f = open_memstream(&s, &size);
        if (f) {
                fputs("otel_scope_name=", f);
                prometheus_write_label_value(f, c->provider);
                if (c->meter_version) {
                        fputs(",otel_scope_version=", f);
                        prometheus_write_label_value(f, c->meter_version);
                }
                for (size_t i = 0; i < n; i++) {
                        bool seen = false, skip = false;
                        for (size_t r = 0; r < ELEMENTSOF(reserved); r++)
                                skip = skip || strcmp(labels[i].name, reserved[r]) == 0;
                        for (size_t j = 0; j < i; j++)
                                seen = seen || strcmp(labels[j].name, labels[i].name) == 0;
                        if (skip || seen)
                                continue;
                        fprintf(f, ",%s=\"", labels[i].name);
                        for (size_t j = i; j < n; j++) {
                                if (strcmp(labels[j].name, labels[i].name) != 0)
                                        continue;
                                if (j > i)
                                        fputc(';', f);
                                prometheus_write_label_text(f, labels[j].value);
                        }
                        fputc('"', f);
                }
                if (fclose(f) != 0) {
                        free(s);
                        s = NULL;
                }
        }
        for (size_t i = 0; i < n; i++)
                free(labels[i].name);
        return s;
}

static PromFamily *prom_family(CounterSink *s, const char *name, PrometheusType type, const char *help) {
        PromFamily *grown;

        for (size_t i = 0; i < s->n_families; i++)
                if (strcmp(s->families[i].name, name) == 0) {
                        if (s->families[i].type == type)
                                return &s->families[i];
                        /* one name, two types: the first stays, as OpenTelemetry's rules say */
                        note(s, NOTE_TYPE_CLASH, "'%s' is both a %s and a %s; the %s is left out", name,
                             prometheus_type_to_string(s->families[i].type), prometheus_type_to_string(type),
                             prometheus_type_to_string(type));
                        return NULL;
                }
        if (s->n_families >= COUNTER_SINK_SERIES_MAX)
                return NULL;
        grown = realloc(s->families, (s->n_families + 1) * sizeof(PromFamily));
        if (!grown)
                return NULL;
        s->families = grown;
        s->families[s->n_families] = (PromFamily){ .name = strdup(name), .help = strdup(help), .type = type };
        if (!s->families[s->n_families].name || !s->families[s->n_families].help) {
                free(s->families[s->n_families].name);
                free(s->families[s->n_families].help);
                return NULL;
        }
        return &s->families[s->n_families++];
}

static PromSeries *prom_series(CounterSink *s, PromFamily *family, char *labels) {
        PromSeries *grown;

        for (size_t i = 0; i < family->n_series; i++)
                if (strcmp(family->series[i].labels, labels) == 0) {
                        free(labels);
                        return &family->series[i];
                }
        if (s->n_series >= COUNTER_SINK_SERIES_MAX) {
                note(s, NOTE_SERIES_LIMIT, "more than %u series; the rest are left out", COUNTER_SINK_SERIES_MAX);
                free(labels);
                return NULL;
        }
        grown = realloc(family->series, (family->n_series + 1) * sizeof(PromSeries));
        if (!grown) {
                free(labels);
                return NULL;
        }
        family->series = grown;
        family->series[family->n_series] = (PromSeries){ .labels = labels };
        s->n_series++;
        return &family->series[family->n_series++];
}

static void prom_add(CounterSink *s, const NettraceCounter *c, const CounterInstrument *in, int64_t now_nsec) {
        _cleanup_free_ char *name = NULL, *tags = NULL;
        const char *unit = in && in->unit ? in->unit : c->units; /* in: a Meter's only */
        const char *help = in && in->description ? in->description : c->display_name ? c->display_name : c->name;
        PrometheusType type = PROMETHEUS_GAUGE;
        double scale = 1;
        PromFamily *family;
        PromSeries *series;
        char *labels;

        /* no Prometheus name can be made of none: "" is no metric name, and "_total" names nothing */
        if (!*c->name) {
                note(s, NOTE_NAMELESS, "an instrument without a name is left out");
                return;
        }
        if (c->kind == NETTRACE_COUNTER_SUM || c->kind == NETTRACE_COUNTER_COUNTER)
                type = PROMETHEUS_COUNTER;
        else if (c->kind == NETTRACE_COUNTER_HISTOGRAM)
                type = PROMETHEUS_SUMMARY;
        name = prometheus_metric_name(c->name, unit, type, &scale);
        tags = counter_combine_tags(in ? in->meter_tags : NULL, in ? in->instrument_tags : NULL, c->tags);
        if (!name || !tags || !(family = prom_family(s, name, prometheus_declared_type(name, type), help)))
                return;
        labels = prom_labels(c, tags);
        if (!labels || !(series = prom_series(s, family, labels)))
                return;

        switch (c->kind) {
        case NETTRACE_COUNTER_SUM:
                /* an increment per interval: counted up from the session's start */
                if (c->has_value)
                        series->value += c->value * scale;
                series->present = true;
                break;
        case NETTRACE_COUNTER_COUNTER:
                /* the runtime's own total from .NET 8 on, else the increments added up */
                if (c->has_total)
                        series->value = c->total * scale;
                else if (c->has_value)
                        series->value += c->value * scale;
                series->present = c->has_total || c->has_value;
                break;
        case NETTRACE_COUNTER_HISTOGRAM:
                /* quantiles of the interval; count and sum added up, as a summary's are */
                series->n_quantiles = c->n_quantiles;
                for (size_t i = 0; i < c->n_quantiles; i++)
                        series->quantiles[i] = (NettraceQuantile){ c->quantiles[i].quantile,
                                                                   c->quantiles[i].value * scale };
                if (c->has_count) {
                        series->has_count = true;
                        series->count += c->count;
                        series->sum += c->sum * scale;
                }
                series->present = true;
                break;
        default:
                series->value = c->value * scale;
                series->present = c->has_value;
        }
        if (!s->dirty)
                s->dirty_since_nsec = now_nsec;
        s->dirty = true;
        s->changed_nsec = now_nsec;
}

static int family_compare(const void *a, const void *b) {
        return strcmp((*(PromFamily *const *)a)->name, (*(PromFamily *const *)b)->name);
}

static void prom_sample(FILE *f, const char *name, const char *suffix, const char *labels, const char *extra,
                        double value) {
        char number[COUNTER_FORMAT_DOUBLE_MAX];

        prometheus_format_value(value, number);
        fprintf(f, "%s%s", name, suffix);
        if (*labels || extra)
                fprintf(f, "{%s%s%s}", labels, *labels && extra ? "," : "", extra ? extra : "");
        fprintf(f, " %s\n", number);
}

static void prom_write(CounterSink *s, FILE *f) {
        _cleanup_free_ PromFamily **order = calloc(s->n_families ? s->n_families : 1, sizeof(PromFamily *));

        if (!order)
                return;
        for (size_t i = 0; i < s->n_families; i++)
                order[i] = &s->families[i];
        qsort(order, s->n_families, sizeof(PromFamily *), family_compare);
        for (size_t i = 0; i < s->n_families; i++) {
                PromFamily *family = order[i];
                bool any = false;

                for (size_t j = 0; j < family->n_series; j++)
                        any = any || family->series[j].present;
                if (!any)
                        continue;
                fprintf(f, "# HELP %s ", family->name);
                prometheus_write_help(f, family->help);
                fprintf(f, "\n# TYPE %s %s\n", family->name, prometheus_type_to_string(family->type));
                for (size_t j = 0; j < family->n_series; j++) {
                        const PromSeries *series = &family->series[j];

                        if (!series->present)
                                continue;
                        if (family->type != PROMETHEUS_SUMMARY) {
                                prom_sample(f, family->name, "", series->labels, NULL, series->value);
                                continue;
                        }
                        for (size_t q = 0; q < series->n_quantiles; q++) {
                                char quantile[COUNTER_FORMAT_DOUBLE_MAX + 16], number[COUNTER_FORMAT_DOUBLE_MAX];
                                prometheus_format_value(series->quantiles[q].quantile, number);
                                snprintf(quantile, sizeof(quantile), "quantile=\"%s\"", number);
                                prom_sample(f, family->name, "", series->labels, quantile, series->quantiles[q].value);
                        }
                        if (series->has_count) {
                                prom_sample(f, family->name, "_sum", series->labels, NULL, series->sum);
                                prom_sample(f, family->name, "_count", series->labels, NULL, (double)series->count);
                        }
                }
        }
}

/*
 * node_exporter's textfile convention: a whole new file in the same directory, renamed over the old one.
 * The directory is the one pinned before the session began (counter_sink_check_file()): whoever may
 * rename a directory on the path cannot send the next interval's file elsewhere.
 */
static int prom_write_file(CounterSink *s, OutFile *file) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        mode_t mask;
        FILE *f = open_memstream(&text, &size);
        int r;

        if (!f)
                return -ENOMEM;
        prom_write(s, f);
        if (fclose(f) != 0)
                return -ENOMEM;
        r = out_file_open_replacement(file);
        if (r < 0)
                return r;
        /* readable as a file dsctl makes anywhere else: 0644 under the caller's umask */
        mask = umask(0);
        umask(mask);
        if (fchmod(file->fd, 0644 & ~mask) < 0)
                r = -errno;
        if (r == 0)
                r = out_file_write(file, text, size);
        if (r < 0) {
                out_file_drop(file);
                return r;
        }
        return out_file_replace(file);
}

int counter_sink_check_file(OutFile *file, const char *path) {
        struct stat st;
        int r;

        r = out_file_pin(file, path);
        if (r < 0)
                return r;
        if (fstatat(file->dir_fd, file->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) &&
            !S_ISLNK(st.st_mode))
                return S_ISDIR(st.st_mode) ? -EISDIR : -EEXIST;
        r = out_file_open_replacement(file);
        if (r < 0)
                return r;
        out_file_drop(file);
        return 0;
}

static void prom_publish(CounterSink *s) {
        int r = 0;

        if (s->o->output && !s->o->rows)
                r = s->o->prometheus_file ? prom_write_file(s, s->o->prometheus_file) : -EBADF;
        else if (s->o->rows) {
                /* on a stream, one snapshot after another, an empty line between them */
                if (s->snapshots > 0)
                        fputc('\n', s->o->rows);
                prom_write(s, s->o->rows);
                if (fflush(s->o->rows) != 0)
                        r = -errno;
        }
        s->snapshots++;
        s->dirty = false;
        if (r < 0) {
                if (s->error == 0)
                        s->error = r;
                note(s, NOTE_WRITE, "cannot write %s: %s", s->o->output ? s->o->output : "the values", strerror(-r));
        }
}

/* ---- samples ---- */

static void emit(const NettraceCounter *c, const CounterInstrument *in, int64_t when_nsec, int64_t now_nsec,
                 void *userdata) {
        CounterSink *s = userdata;

        if (s->o->kind == SESSION_OUTPUT_PROMETHEUS && !s->view) {
                prom_add(s, c, in, now_nsec);
                return;
        }
        counter_rows_of(c, in, counter_rows_interval(s->rows), s->style, row,
                        &(RowContext){ .s = s, .in = in, .when_nsec = when_nsec });
}

/* A problem MetricsEventSource reports: about our session, or about another one in the way of ours. */
static void notice(const NettraceCounter *c, bool ours, void *userdata) {
        CounterSink *s = userdata;
        const char *message = c->description ? c->description : "";
        int line = (int)strcspn(message, "\n");

        if (strcmp(c->name, "MultipleSessionsNotSupportedError") == 0) {
                if (!ours)
                        note(s, NOTE_OTHER_SESSION,
                             "another tool's metrics session runs in the process; its Meters are not shown, "
                             "only EventCounters");
        } else if (!ours)
                return;
        else if (strcmp(c->name, "Error") == 0)
                note(s, NOTE_ERROR, "the process reports an error: %.*s", line, message);
        else if (strcmp(c->name, "ObservableInstrumentCallbackError") == 0)
                note(s, NOTE_CALLBACK, "an instrument's callback failed in the process: %.*s", line, message);
        else if (strcmp(c->name, "TimeSeriesLimitReached") == 0)
                note(s, NOTE_TIME_SERIES, "the process reached its limit of time series (1000); not all are shown");
        else if (strcmp(c->name, "HistogramLimitReached") == 0)
                note(s, NOTE_HISTOGRAMS, "the process reached its limit of histograms (10); not all are shown");
}

void counter_sink_add(CounterSink *s, NettraceCounter *c, int64_t when_nsec, int64_t now_nsec) {
        counter_rows_add(s->rows, c, when_nsec, now_nsec);
}

int64_t counter_sink_next_deadline(const CounterSink *s) {
        int64_t deadline = counter_rows_next_deadline(s->rows);
        unsigned interval = counter_rows_interval(s->rows);

        if (s->dirty) {
                int64_t most = (int64_t)(interval ? interval : 1) * 1000000000LL;
                deadline = MIN(deadline, MIN(s->changed_nsec + COUNTER_SINK_SETTLE_NSEC, s->dirty_since_nsec + most));
        }
        return deadline;
}

void counter_sink_tick(CounterSink *s, int64_t now_nsec) {
        unsigned interval = counter_rows_interval(s->rows);

        counter_rows_tick(s->rows, now_nsec);
        if (s->dirty && now_nsec >= MIN(s->changed_nsec + COUNTER_SINK_SETTLE_NSEC,
                                        s->dirty_since_nsec + (int64_t)(interval ? interval : 1) * 1000000000LL))
                prom_publish(s);
}

int counter_sink_end(CounterSink *s) {
        if (!s->begun)
                return 0;
        counter_rows_end(s->rows);
        if (s->dirty)
                prom_publish(s);
        if (!s->view && s->o->rows && s->o->kind == SESSION_OUTPUT_JSON) {
                fputs("\n]}\n", s->o->rows);
                if (fflush(s->o->rows) != 0 && s->error == 0)
                        s->error = -errno;
        }
        return s->error;
}
