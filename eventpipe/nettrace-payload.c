/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Decoding of self-describing event payloads, and counter samples from them */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "eventpipe/nettrace.h"
#include "common/text.h"

typedef struct Reader {
        const uint8_t *p;
        size_t left;
        size_t values;  /* decoded so far, against NETTRACE_VALUES_MAX */
} Reader;

static uint64_t get_le(const uint8_t *p, size_t n) {
        uint64_t v = 0;

        for (size_t i = 0; i < n; i++)
                v |= (uint64_t)p[i] << (8 * i);
        return v;
}

static bool read_le(Reader *r, size_t n, uint64_t *ret) {
        if (r->left < n)
                return false;
        *ret = get_le(r->p, n);
        r->p += n;
        r->left -= n;
        return true;
}

/* Sign-extends the low @n bytes of @v. */
static int64_t sign_extend(uint64_t v, size_t n) {
        unsigned shift = (unsigned)(64 - 8 * n);

        return (int64_t)(v << shift) >> shift;
}

/* UTF-16LE up to a NUL unit, as UTF-8. */
static int read_string(Reader *r, char **ret) {
        size_t units = 0;
        char *s;
        int k;

        while (2 * units + 1 < r->left && get_le(r->p + 2 * units, 2) != 0) {
                units++;
                if (units > NETTRACE_STRING_MAX)
                        return NETTRACE_E_LIMIT;
        }
        if (2 * units + 1 >= r->left)
                return NETTRACE_E_MALFORMED;

        k = utf16le_to_utf8(r->p, units, &s);
        if (k < 0)
                return k;
        r->p += 2 * (units + 1);
        r->left -= 2 * (units + 1);
        *ret = s;
        return 0;
}

/* Size in bytes of the fixed-size types; 0 for the others. */
static size_t fixed_size(NettraceType type) {
        switch (type) {
        case NETTRACE_TYPE_SBYTE:
        case NETTRACE_TYPE_BYTE:
                return 1;
        case NETTRACE_TYPE_CHAR:
        case NETTRACE_TYPE_INT16:
        case NETTRACE_TYPE_UINT16:
                return 2;
        /* EventSource writes bool as a 4-byte Win32 BOOL */
        case NETTRACE_TYPE_BOOLEAN:
        case NETTRACE_TYPE_INT32:
        case NETTRACE_TYPE_UINT32:
        case NETTRACE_TYPE_SINGLE:
                return 4;
        case NETTRACE_TYPE_INT64:
        case NETTRACE_TYPE_UINT64:
        case NETTRACE_TYPE_DOUBLE:
        case NETTRACE_TYPE_DATETIME:
                return 8;
        case NETTRACE_TYPE_DECIMAL:
        case NETTRACE_TYPE_GUID:
                return 16;
        default:
                return 0;
        }
}

static void scalar_store(NettraceValue *v, const uint8_t *p, size_t n) {
        /* GUID and DECIMAL (16 bytes) are copied, never shifted into an integer */
        uint64_t raw = n <= 8 ? get_le(p, n) : 0;

        switch (v->type) {
        case NETTRACE_TYPE_SBYTE:
        case NETTRACE_TYPE_INT16:
        case NETTRACE_TYPE_INT32:
        case NETTRACE_TYPE_INT64:
                v->i = sign_extend(raw, n);
                break;
        case NETTRACE_TYPE_BOOLEAN:
                v->i = raw != 0;
                break;
        case NETTRACE_TYPE_SINGLE: {
                float f;
                uint32_t bits = (uint32_t)raw;

                memcpy(&f, &bits, sizeof(f));
                v->d = f;
                break;
        }
        case NETTRACE_TYPE_DOUBLE:
                memcpy(&v->d, &raw, sizeof(v->d));
                break;
        case NETTRACE_TYPE_DECIMAL:
        case NETTRACE_TYPE_GUID:
                memcpy(v->bytes, p, 16);
                break;
        default:
                v->u = raw;
        }
}

static void value_clear(NettraceValue *v) {
        if (v->type == NETTRACE_TYPE_STRING)
                free(v->string);
        nettrace_values_free(v->items, v->n_items);
}

/**
 * nettrace_values_free() - free decoded values, their strings and children
 */
void nettrace_values_free(NettraceValue *values, size_t count) {
        for (size_t i = 0; i < count; i++)
                value_clear(&values[i]);
        free(values);
}

static int decode_list(Reader *r, const NettraceField *fields, size_t n, unsigned depth, NettraceValue **ret,
                       size_t *ret_count);

static int decode_value(Reader *r, const NettraceField *f, NettraceType type, unsigned depth, NettraceValue *v);

/* Arrays carry a u16 element count, as EventSource writes them. */
static int decode_array(Reader *r, const NettraceField *f, unsigned depth, NettraceValue *v) {
        NettraceValue *items;
        uint64_t count;
        int ret = 0;

        if (!read_le(r, 2, &count))
                return NETTRACE_E_MALFORMED;
        if (count > NETTRACE_VALUES_MAX - r->values)
                return NETTRACE_E_LIMIT;
        r->values += count;
        if (count == 0)
                return 0;

        items = calloc(count, sizeof(NettraceValue));
        if (!items)
                return -ENOMEM;
        for (size_t i = 0; i < count && ret == 0; i++) {
                items[i].name = f->name;
                ret = decode_value(r, f, f->element_type, depth + 1, &items[i]);
        }
        if (ret != 0) {
                nettrace_values_free(items, count);
                return ret;
        }
        v->items = items;
        v->n_items = count;
        return 0;
}

static int decode_value(Reader *r, const NettraceField *f, NettraceType type, unsigned depth, NettraceValue *v) {
        size_t n = fixed_size(type);

        if (depth > NETTRACE_DEPTH_MAX)
                return NETTRACE_E_LIMIT;
        v->type = type;
        if (n > 0) {
                if (r->left < n)
                        return NETTRACE_E_MALFORMED;
                scalar_store(v, r->p, n);
                r->p += n;
                r->left -= n;
                return 0;
        }
        switch (type) {
        case NETTRACE_TYPE_STRING:
                return read_string(r, &v->string);
        case NETTRACE_TYPE_OBJECT:
                return decode_list(r, f->children, f->n_children, depth + 1, &v->items, &v->n_items);
        case NETTRACE_TYPE_ARRAY:
                return decode_array(r, f, depth, v);
        default:
                return NETTRACE_E_MALFORMED;
        }
}

static int decode_list(Reader *r, const NettraceField *fields, size_t n, unsigned depth, NettraceValue **ret,
                       size_t *ret_count) {
        NettraceValue *values;
        int ret_code = 0;

        if (n > NETTRACE_VALUES_MAX - r->values)
                return NETTRACE_E_LIMIT;
        r->values += n;
        if (n == 0) {
                *ret = NULL;
                *ret_count = 0;
                return 0;
        }

        values = calloc(n, sizeof(NettraceValue));
        if (!values)
                return -ENOMEM;
        for (size_t i = 0; i < n && ret_code == 0; i++) {
                values[i].name = fields[i].name;
                ret_code = decode_value(r, &fields[i], fields[i].type, depth, &values[i]);
        }
        if (ret_code != 0) {
                nettrace_values_free(values, n);
                return ret_code;
        }
        *ret = values;
        *ret_count = n;
        return 0;
}

/**
 * nettrace_payload_decode() - decode an event's payload as its definition describes it
 *
 * Fields are packed in order without alignment. Bytes after the last field
 * are ignored: newer versions of an event may append fields.
 *
 * Return: 0 with the top-level values (free with nettrace_values_free()),
 * NETTRACE_E_MALFORMED if the payload is shorter than its fields,
 * NETTRACE_E_LIMIT, -ENOMEM. The value names point into @m.
 */
int nettrace_payload_decode(const NettraceMetadata *m, const uint8_t *payload, size_t size,
                            NettraceValue **ret_values, size_t *ret_count) {
        Reader r = { payload, size, 0 };

        return decode_list(&r, m->fields, m->n_fields, 0, ret_values, ret_count);
}

/**
 * nettrace_value_find() - the value named @name among @values (one level)
 */
const NettraceValue *nettrace_value_find(const NettraceValue *values, size_t count, const char *name) {
        for (size_t i = 0; i < count; i++)
                if (values[i].name && strcmp(values[i].name, name) == 0)
                        return &values[i];
        return NULL;
}

static const char *value_string(const NettraceValue *values, size_t count, const char *name) {
        const NettraceValue *v = nettrace_value_find(values, count, name);

        return v && v->type == NETTRACE_TYPE_STRING ? v->string : NULL;
}

static bool value_int(const NettraceValue *values, size_t count, const char *name, int64_t *ret) {
        const NettraceValue *v = nettrace_value_find(values, count, name);

        if (!v)
                return false;
        switch (v->type) {
        case NETTRACE_TYPE_SBYTE:
        case NETTRACE_TYPE_INT16:
        case NETTRACE_TYPE_INT32:
        case NETTRACE_TYPE_INT64:
                *ret = v->i;
                return true;
        case NETTRACE_TYPE_BYTE:
        case NETTRACE_TYPE_UINT16:
        case NETTRACE_TYPE_UINT32:
                *ret = (int64_t)v->u;
                return true;
        default:
                return false;
        }
}

static bool value_double(const NettraceValue *values, size_t count, const char *name, double *ret) {
        const NettraceValue *v = nettrace_value_find(values, count, name);

        if (!v || (v->type != NETTRACE_TYPE_DOUBLE && v->type != NETTRACE_TYPE_SINGLE) || !isfinite(v->d))
                return false;
        *ret = v->d;
        return true;
}

void nettrace_counter_done(NettraceCounter *c) {
        free(c->provider);
        free(c->name);
        free(c->display_name);
        free(c->units);
        free(c->tags);
        free(c->session_id);
        free(c->meter_version);
        free(c->description);
        free(c->instrument_type);
        free(c->instrument_tags);
        free(c->meter_tags);
        *c = (NettraceCounter){};
}

/* A copy of @s in *@ret, or NULL for an absent or empty one. Return: 0 or -ENOMEM. */
static int dup_optional(const char *s, char **ret) {
        *ret = NULL;
        if (!s || !*s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* Payload strings copied into a sample's fields: each absent or empty one NULL. */
typedef struct FieldCopy {
        const char *field;
        char **to;
} FieldCopy;

static int copy_fields(const NettraceValue *values, size_t count, const FieldCopy *copies, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int r = dup_optional(value_string(values, count, copies[i].field), copies[i].to);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int counter_names(NettraceCounter *c, const char *provider, const char *name) {
        c->provider = strdup(provider);
        c->name = strdup(name);
        return c->provider && c->name ? 0 : -ENOMEM;
}

/* "Interval=1000", as EventCounters name their series; 0 if it is not that. */
static unsigned series_interval_ms(const char *series) {
        unsigned long ms;
        char *end;

        if (!series || strncmp(series, "Interval=", 9) != 0 || series[9] < '0' || series[9] > '9')
                return 0;
        errno = 0;
        ms = strtoul(series + 9, &end, 10);
        return *end == '\0' && errno == 0 && ms <= UINT32_MAX ? (unsigned)ms : 0;
}

/* "EventCounters": a struct field "Payload" with Name, DisplayName, and Mean
 * (EventCounter, PollingCounter) or Increment (the incrementing kinds), with
 * the Series they were asked for and their Metadata. The runtime writes it as
 * TraceLogging does: inside one unnamed struct. */
static int counter_from_event_counters(const char *provider, const NettraceValue *values, size_t count,
                                       NettraceCounter *c) {
        const NettraceValue *payload;
        const char *name;
        const NettraceValue *items;
        size_t n;
        int r;

        if (count == 1 && values[0].type == NETTRACE_TYPE_OBJECT && values[0].name && !*values[0].name) {
                count = values[0].n_items;
                values = values[0].items;
        }
        payload = nettrace_value_find(values, count, "Payload");
        if (!payload || payload->type != NETTRACE_TYPE_OBJECT)
                return NETTRACE_E_MALFORMED;
        items = payload->items;
        n = payload->n_items;
        name = value_string(items, n, "Name");
        c->kind = NETTRACE_COUNTER_MEAN;
        if (!value_double(items, n, "Mean", &c->value)) {
                if (!value_double(items, n, "Increment", &c->value))
                        return NETTRACE_E_MALFORMED;
                c->kind = NETTRACE_COUNTER_SUM;
                c->rate = true;
        }
        if (!name)
                return NETTRACE_E_MALFORMED;
        c->has_value = true;
        c->interval_ms = series_interval_ms(value_string(items, n, "Series"));
        r = counter_names(c, provider, name);
        if (r == 0)
                r = copy_fields(items, n, (const FieldCopy[]){ { "DisplayName", &c->display_name },
                                                               { "DisplayUnits", &c->units },
                                                               { "Metadata", &c->tags } }, 3);
        return r;
}

/* MetricsEventSource formats values as invariant-culture text; "" means no sample. */
static bool parse_double(const char *s, double *ret) {
        char *end;
        double v;

        if (!s || !*s)
                return false;
        errno = 0;
        v = strtod(s, &end);
        if (*end != '\0' || errno != 0 || !isfinite(v))
                return false;
        *ret = v;
        return true;
}

/* "0.5=12;0.95=30;0.99=31", as MetricsEventSource lists a histogram's quantiles; what does not parse is skipped. */
static void parse_quantiles(const char *s, NettraceCounter *c) {
        while (s && *s && c->n_quantiles < NETTRACE_QUANTILES_MAX) {
                const char *end = strchrnul(s, ';'), *eq = memchr(s, '=', (size_t)(end - s));
                char q[64], v[64];
                NettraceQuantile *out = &c->quantiles[c->n_quantiles];

                if (eq && (size_t)(eq - s) < sizeof(q) && (size_t)(end - eq - 1) < sizeof(v)) {
                        memcpy(q, s, (size_t)(eq - s));
                        q[eq - s] = '\0';
                        memcpy(v, eq + 1, (size_t)(end - eq - 1));
                        v[end - eq - 1] = '\0';
                        if (parse_double(q, &out->quantile) && parse_double(v, &out->value) && out->quantile >= 0 &&
                            out->quantile <= 1)
                                c->n_quantiles++;
                }
                s = *end ? end + 1 : end;
        }
}

/* The events MetricsEventSource sends about a problem: the message, or whose session it is about. */
static int metrics_notice(const char *event, const NettraceValue *values, size_t count, NettraceCounter *c) {
        static const char *const notices[] = {
                "Error", "ObservableInstrumentCallbackError", "TimeSeriesLimitReached", "HistogramLimitReached",
                "MultipleSessionsNotSupportedError", "MultipleSessionsConfiguredIncorrectlyError",
        };
        const char *session = value_string(values, count, "sessionId");
        bool known = false;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(notices); i++)
                known = known || strcmp(event, notices[i]) == 0;
        if (!known)
                return NETTRACE_E_NO_COUNTER;
        if (!session)
                session = value_string(values, count, "runningSessionId");
        if (!session)
                session = value_string(values, count, "sharedIdentifier");
        c->kind = NETTRACE_COUNTER_NOTICE;
        r = counter_names(c, "System.Diagnostics.Metrics", event);
        if (r == 0)
                r = dup_optional(session, &c->session_id);
        if (r == 0)
                r = copy_fields(values, count, (const FieldCopy[]){ { "errorMessage", &c->description } }, 1);
        return r;
}

static int counter_from_metrics(const NettraceMetadata *m, const NettraceValue *values, size_t count,
                                NettraceCounter *c) {
        const char *event = m->event_name;
        const char *meter = value_string(values, count, "meterName");
        const char *instrument = value_string(values, count, "instrumentName");
        const char *rate_text = value_string(values, count, "rate");
        const char *value_text = value_string(values, count, "value");
        int64_t id = 0, n = 0;
        int r;

        if (strcmp(event, "BeginInstrumentReporting") == 0)
                c->kind = NETTRACE_COUNTER_INSTRUMENT;
        else if (strcmp(event, "GaugeValuePublished") == 0) {
                c->kind = NETTRACE_COUNTER_GAUGE;
                c->has_value = parse_double(value_string(values, count, "lastValue"), &c->value);
        } else if (strcmp(event, "CounterRateValuePublished") == 0) {
                c->kind = NETTRACE_COUNTER_COUNTER;
                c->rate = true;
                c->has_value = parse_double(rate_text, &c->value);
                c->has_total = parse_double(value_text, &c->total);
        } else if (strcmp(event, "UpDownCounterRateValuePublished") == 0) {
                /* the value came in version 1 (.NET 8); before, only a rate that means little */
                if (!value_text)
                        return NETTRACE_E_NO_COUNTER;
                c->kind = NETTRACE_COUNTER_UP_DOWN;
                c->has_value = parse_double(value_text, &c->value) &&
                               (!rate_text || !*rate_text || parse_double(rate_text, &(double){ 0 }));
                c->has_total = c->has_value;
                c->total = c->value;
        } else if (strcmp(event, "HistogramValuePublished") == 0) {
                c->kind = NETTRACE_COUNTER_HISTOGRAM;
                c->has_value = true;
                parse_quantiles(value_string(values, count, "quantiles"), c);
                c->has_count = value_int(values, count, "count", &n) && value_double(values, count, "sum", &c->sum);
                c->count = c->has_count ? n : 0;
        } else
                return metrics_notice(event, values, count, c);

        if (!meter || !instrument)
                return NETTRACE_E_MALFORMED;
        c->event_version = m->version;
        /* 0 is MetricsEventSource's "no id": instruments it does not listen to all share it */
        if (value_int(values, count, "instrumentId", &id) && id > 0 && id <= INT32_MAX)
                c->instrument_id = (int32_t)id;
        r = counter_names(c, meter, instrument);
        if (r == 0)
                r = copy_fields(values, count, (const FieldCopy[]){ { "sessionId", &c->session_id },
                                                                    { "meterVersion", &c->meter_version },
                                                                    { "unit", &c->units },
                                                                    { "tags", &c->tags } }, 4);
        if (r != 0 || c->kind != NETTRACE_COUNTER_INSTRUMENT)
                return r;
        return copy_fields(values, count, (const FieldCopy[]){ { "description", &c->description },
                                                               { "instrumentType", &c->instrument_type },
                                                               { "instrumentTags", &c->instrument_tags },
                                                               { "meterTags", &c->meter_tags } }, 4);
}

/**
 * nettrace_counter_extract() - the counter sample an event carries, if any
 *
 * Knows the "EventCounters" events of any EventSource (provider = the
 * EventSource) and the events of System.Diagnostics.Metrics (provider = the
 * Meter): values, the instruments' descriptions (INSTRUMENT), and the
 * problems it reports (NOTICE). A value event without a value this interval
 * (an observable instrument whose callback failed, or the first interval of
 * an observable counter) comes with has_value false.
 *
 * Return: 0 with *@ret set (free with nettrace_counter_done()),
 * NETTRACE_E_NO_COUNTER if the event is none of these, NETTRACE_E_MALFORMED
 * if it should be one but does not decode as one, NETTRACE_E_LIMIT, -ENOMEM.
 * *@ret is cleared on every error.
 */
int nettrace_counter_extract(const NettraceEvent *event, NettraceCounter *ret) {
        _cleanup_(nettrace_counter_done) NettraceCounter c = {};
        const NettraceMetadata *m = event->metadata;
        NettraceValue *values = NULL;
        size_t count = 0;
        bool counters, metrics;
        int r;

        *ret = (NettraceCounter){};
        if (!m)
                return NETTRACE_E_NO_COUNTER;
        counters = strcmp(m->event_name, "EventCounters") == 0;
        metrics = strcmp(m->provider, "System.Diagnostics.Metrics") == 0;
        if (!counters && !metrics)
                return NETTRACE_E_NO_COUNTER;

        r = nettrace_payload_decode(m, event->payload, event->payload_size, &values, &count);
        if (r != 0)
                return r;
        if (counters)
                r = counter_from_event_counters(m->provider, values, count, &c);
        else
                r = counter_from_metrics(m, values, count, &c);
        nettrace_values_free(values, count);
        if (r != 0)
                return r;
        *ret = c;
        c = (NettraceCounter){};
        return 0;
}
