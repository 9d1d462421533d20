/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Which counter samples dotnet-counters shows, and its CSV rows (counter-rows.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/param.h>

#include "common/cleanup.h"
#include "eventpipe/counter-rows.h"
#include "common/text.h"

/* dotnet-counters' ProviderEventState: when a provider was first seen, and whether it has Meter instruments. */
typedef struct ProviderState {
        char *name;
        int64_t first_nsec;
        bool instrument_seen;
} ProviderState;

typedef struct Held {
        NettraceCounter c;
        int64_t when_nsec;
} Held;

struct CounterRows {
        const CounterRowsCallbacks *cb;
        void *userdata;
        char *const *filter_providers, *const *filter_names;
        size_t n_filters;
        char *session_id;       /* our MetricsEventSource session; NULL: not known, every one is taken */
        unsigned interval_sec;  /* as asked for; 0: not known */
        CounterInstrument *instruments;
        size_t n_instruments;
        ProviderState *providers;
        size_t n_providers;
        Held *held;
        size_t n_held;
};

int counter_rows_new(const CounterRowsCallbacks *cb, void *userdata, CounterRows **ret) {
        CounterRows *r = calloc(1, sizeof(*r));

        if (!r)
                return -ENOMEM;
        r->cb = cb;
        r->userdata = userdata;
        *ret = r;
        return 0;
}

static void instrument_done(CounterInstrument *in) {
        free(in->provider);
        free(in->name);
        free(in->unit);
        free(in->description);
        free(in->meter_tags);
        free(in->instrument_tags);
}

CounterRows *counter_rows_free(CounterRows *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_instruments; i++)
                instrument_done(&r->instruments[i]);
        for (size_t i = 0; i < r->n_providers; i++)
                free(r->providers[i].name);
        for (size_t i = 0; i < r->n_held; i++)
                nettrace_counter_done(&r->held[i].c);
        free(r->instruments);
        free(r->providers);
        free(r->held);
        free(r->session_id);
        free(r);
        return NULL;
}

void counter_rows_filter(CounterRows *r, char *const *providers, char *const *names, size_t n) {
        r->filter_providers = providers;
        r->filter_names = names;
        r->n_filters = n;
}

/* ---- what the session is ---- */

/* The value of "@key=" in the providers' text, up to ';' or ','. */
static char *argument(const char *providers, const char *key) {
        const char *p = providers;
        size_t n = strlen(key);

        while ((p = strstr(p, key))) {
                if (p == providers || strchr(":;", p[-1])) {
                        p += n;
                        return strndup(p, strcspn(p, ";,"));
                }
                p += n;
        }
        return NULL;
}

void counter_rows_begin(CounterRows *r, const char *providers) {
        _cleanup_free_ char *interval = NULL;
        uint64_t n;

        if (!providers)
                return;
        free(r->session_id);
        r->session_id = argument(providers, "SessionId=");
        interval = argument(providers, "EventCounterIntervalSec=");
        if (!interval)
                interval = argument(providers, "RefreshInterval=");
        if (interval && parse_u64(interval, &n) == 0 && n > 0 && n <= 86400)
                r->interval_sec = (unsigned)n;
}

unsigned counter_rows_interval(const CounterRows *r) {
        return r->interval_sec;
}

/* ---- instruments and providers ---- */

static bool is_meter(const NettraceCounter *c) {
        return c->kind != NETTRACE_COUNTER_MEAN && c->kind != NETTRACE_COUNTER_SUM;
}

/* By id where MetricsEventSource gives one (.NET 9), else by name, as dotnet-counters looks them up. */
static CounterInstrument *instrument_find(CounterRows *r, const NettraceCounter *c) {
        if (c->instrument_id > 0)
                for (size_t i = 0; i < r->n_instruments; i++)
                        if (r->instruments[i].id == c->instrument_id)
                                return &r->instruments[i];
        for (size_t i = 0; i < r->n_instruments; i++)
                if (strcmp(r->instruments[i].provider, c->provider) == 0 && strcmp(r->instruments[i].name, c->name) == 0)
                        return &r->instruments[i];
        return NULL;
}

static void instrument_add(CounterRows *r, NettraceCounter *c) {
        CounterInstrument *in = instrument_find(r, c), *grown;

        if (in && (in->id == c->instrument_id || c->instrument_id == 0))
                return;
        if (r->n_instruments >= COUNTER_ROWS_INSTRUMENTS_MAX)
                return;
        grown = realloc(r->instruments, (r->n_instruments + 1) * sizeof(CounterInstrument));
        if (!grown)
                return;
        r->instruments = grown;
        r->instruments[r->n_instruments++] = (CounterInstrument){
                .provider = TAKE_PTR(c->provider), .name = TAKE_PTR(c->name), .id = c->instrument_id,
                .version = c->event_version, .unit = TAKE_PTR(c->units), .description = TAKE_PTR(c->description),
                .meter_tags = TAKE_PTR(c->meter_tags), .instrument_tags = TAKE_PTR(c->instrument_tags),
        };
}

static ProviderState *provider_state(CounterRows *r, const char *name, int64_t when_nsec) {
        ProviderState *grown;

        for (size_t i = 0; i < r->n_providers; i++)
                if (strcmp(r->providers[i].name, name) == 0)
                        return &r->providers[i];
        if (r->n_providers >= COUNTER_ROWS_PROVIDERS_MAX)
                return NULL;
        grown = realloc(r->providers, (r->n_providers + 1) * sizeof(ProviderState));
        if (!grown)
                return NULL;
        r->providers = grown;
        r->providers[r->n_providers] = (ProviderState){ .name = strdup(name), .first_nsec = when_nsec };
        if (!r->providers[r->n_providers].name)
                return NULL;
        return &r->providers[r->n_providers++];
}

/* --counters Provider[name,...]: provider names as dotnet-counters compares them, without case. */
static bool is_wanted(const CounterRows *r, const NettraceCounter *c) {
        bool provider_filtered = false;

        for (size_t i = 0; i < r->n_filters; i++) {
                if (strcasecmp(r->filter_providers[i], c->provider) != 0)
                        continue;
                provider_filtered = true;
                if (strcmp(r->filter_names[i], c->name) == 0)
                        return true;
        }
        return !provider_filtered;
}

/* ---- samples ---- */

static void emit(CounterRows *r, const NettraceCounter *c, int64_t when_nsec, int64_t now_nsec) {
        r->cb->emit(c, is_meter(c) ? instrument_find(r, c) : NULL, when_nsec, now_nsec, r->userdata);
}

static void hold(CounterRows *r, NettraceCounter *c, int64_t when_nsec, int64_t now_nsec) {
        Held *grown;

        if (r->n_held >= COUNTER_ROWS_HELD_MAX ||
            !(grown = realloc(r->held, (r->n_held + 1) * sizeof(Held)))) {
                emit(r, c, when_nsec, now_nsec);
                return;
        }
        r->held = grown;
        r->held[r->n_held++] = (Held){ .c = *c, .when_nsec = when_nsec };
        *c = (NettraceCounter){};
}

void counter_rows_add(CounterRows *r, NettraceCounter *c, int64_t when_nsec, int64_t now_nsec) {
        ProviderState *state;

        if (c->kind == NETTRACE_COUNTER_NOTICE) {
                if (r->cb->notice)
                        r->cb->notice(c, !r->session_id || (c->session_id && strcmp(c->session_id, r->session_id) == 0),
                                      r->userdata);
                goto done;
        }
        if (is_meter(c)) {
                /* another session's configuration, or an instrument not asked for */
                if (r->session_id && (!c->session_id || strcmp(c->session_id, r->session_id) != 0))
                        goto done;
                if (!is_wanted(r, c))
                        goto done;
                /* a Meter of this name reports: its EventCounters are duplicates from now on */
                state = provider_state(r, c->provider, when_nsec);
                if (state)
                        state->instrument_seen = true;
                if (c->kind == NETTRACE_COUNTER_INSTRUMENT)
                        instrument_add(r, c);
                else
                        emit(r, c, when_nsec, now_nsec);
                goto done;
        }
        /* EventCounters: of our interval only (another session's come too), those asked for */
        if (r->interval_sec && c->interval_ms != r->interval_sec * 1000)
                goto done;
        if (!is_wanted(r, c))
                goto done;
        state = provider_state(r, c->provider, when_nsec);
        if (state && state->instrument_seen)
                goto done;
        /* a Meter of the same name may still come: held a moment, as dotnet-counters holds them */
        if (state && when_nsec <= state->first_nsec + COUNTER_ROWS_HOLD_NSEC) {
                hold(r, c, when_nsec, now_nsec);
                return;
        }
        emit(r, c, when_nsec, now_nsec);
done:
        nettrace_counter_done(c);
}

/* The held EventCounters whose wait is over: emitted, or dropped for the Meter that came. */
static void release_held(CounterRows *r, int64_t now_nsec, bool all) {
        size_t kept = 0;

        for (size_t i = 0; i < r->n_held; i++) {
                Held *h = &r->held[i];
                ProviderState *state = provider_state(r, h->c.provider, h->when_nsec);

                if (state && state->instrument_seen)
                        nettrace_counter_done(&h->c);
                else if (all || !state || now_nsec > state->first_nsec + COUNTER_ROWS_HOLD_NSEC) {
                        emit(r, &h->c, h->when_nsec, now_nsec);
                        nettrace_counter_done(&h->c);
                } else
                        r->held[kept++] = *h;
        }
        r->n_held = kept;
}

int64_t counter_rows_next_deadline(const CounterRows *r) {
        int64_t deadline = INT64_MAX;

        for (size_t i = 0; i < r->n_held; i++)
                for (size_t j = 0; j < r->n_providers; j++)
                        if (strcmp(r->providers[j].name, r->held[i].c.provider) == 0)
                                deadline = MIN(deadline, r->providers[j].first_nsec + COUNTER_ROWS_HOLD_NSEC + 1);
        return deadline;
}

void counter_rows_tick(CounterRows *r, int64_t now_nsec) {
        if (r->n_held > 0)
                release_held(r, now_nsec, false);
}

void counter_rows_end(CounterRows *r) {
        release_held(r, INT64_MAX, true);
}

/* ---- rows ---- */

void counter_rows_of(const NettraceCounter *c, const CounterInstrument *in, unsigned interval_sec, CounterStyle style,
                     CounterRowFn row, void *userdata) {
        /* dotnet-counters knows a Meter's unit from BeginInstrumentReporting (version 1 on), never from the value */
        const char *unit = in && in->version >= 1 ? in->unit : NULL;
        _cleanup_free_ char *display = counter_display_name(c, unit, interval_sec ? interval_sec : 1, style);

        if (!display)
                return;
        if (c->kind != NETTRACE_COUNTER_HISTOGRAM) {
                _cleanup_free_ char *tags = counter_combine_tags(in ? in->meter_tags : NULL,
                                                                 in ? in->instrument_tags : NULL, c->tags);
                if (tags)
                        row(c, display, c->tags, tags, counter_is_rate(c, style), counter_row_value(c, style),
                            !c->has_value, userdata);
                return;
        }
        /* a histogram: a row per percentile, as dotnet-counters splits it */
        for (size_t i = 0; i < c->n_quantiles; i++) {
                _cleanup_free_ char *value_tags = counter_percentile_tags(c->tags, c->quantiles[i].quantile), *tags = NULL;

                if (!value_tags)
                        continue;
                tags = counter_combine_tags(in ? in->meter_tags : NULL, in ? in->instrument_tags : NULL, value_tags);
                if (tags)
                        row(c, display, value_tags, tags, false, c->quantiles[i].value, false, userdata);
        }
}

void counter_csv_header(FILE *f) {
        fputs("Timestamp,Provider,Counter Name,Counter Type,Mean/Increment\n", f);
}

/*
 * A field as CSV quotes it. One that begins with =, +, - or @ a spreadsheet takes for a formula
 * (=HYPERLINK() sends the sheet's cells away): a quote before it makes it text, as OWASP advises.
 */
static void csv_field(FILE *f, const char *s) {
        bool formula = *s && strchr("=+-@", *s);

        if (!formula && !strpbrk(s, ",\"\n")) {
                fputs(s, f);
                return;
        }
        fputc('"', f);
        if (formula)
                fputc('\'', f);
        for (; *s; s++) {
                if (*s == '"')
                        fputc('"', f);
                fputc(*s, f);
        }
        fputc('"', f);
}

void counter_csv_row(FILE *f, const char *provider, const char *display, const char *tags, bool rate, double value,
                     int64_t when_nsec) {
        _cleanup_free_ char *escaped_provider = text_escape(provider, strlen(provider)), *name = NULL, *escaped = NULL;
        char when[64], number[COUNTER_FORMAT_DOUBLE_MAX];

        if (!escaped_provider || asprintf(&name, *tags ? "%s[%s]" : "%s", display, tags) < 0)
                return;
        for (char *p = name + strlen(display); *p; p++)
                if (*p == ',')
                        *p = ';';
        escaped = text_escape(name, strlen(name));
        if (!escaped)
                return;
        counter_format_time_invariant(when_nsec / 1000, when, sizeof(when));
        counter_format_double(value, number);
        fprintf(f, "%s,", when);
        csv_field(f, escaped_provider);
        fputc(',', f);
        csv_field(f, escaped);
        fprintf(f, ",%s,%s\n", rate ? "Rate" : "Metric", number);
}

typedef struct CsvSample {
        FILE *f;
        int64_t when_nsec;
} CsvSample;

static void csv_sample_row(const NettraceCounter *c, const char *display, const char *value_tags, const char *tags,
                           bool rate, double value, bool ended, void *userdata) {
        CsvSample *s = userdata;

        if (!ended)
                counter_csv_row(s->f, c->provider, display, tags, rate, value, s->when_nsec);
}

void counter_csv_sample(FILE *f, const NettraceCounter *c, const CounterInstrument *in, unsigned interval_sec,
                        int64_t when_nsec) {
        counter_rows_of(c, in, interval_sec, COUNTER_STYLE_COLLECT, csv_sample_row,
                        &(CsvSample){ .f = f, .when_nsec = when_nsec });
}
