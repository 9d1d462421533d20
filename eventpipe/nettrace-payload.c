/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Decoding of self-describing event payloads, and counter samples from them */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "nettrace.h"
#include "text.h"

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

void nettrace_counter_done(NettraceCounter *c) {
        free(c->provider);
        free(c->name);
        free(c->display_name);
        free(c->units);
        *c = (NettraceCounter){};
}

static int counter_fill(const char *provider, const char *name, const char *display_name, const char *units,
                        double value, bool rate, NettraceCounter *ret) {
        _cleanup_(nettrace_counter_done) NettraceCounter c = { .value = value, .rate = rate };

        c.provider = strdup(provider);
        c.name = strdup(name);
        if (!c.provider || !c.name)
                return -ENOMEM;
        if (display_name && *display_name && !(c.display_name = strdup(display_name)))
                return -ENOMEM;
        if (units && *units && !(c.units = strdup(units)))
                return -ENOMEM;
        *ret = c;
        c = (NettraceCounter){};
        return 0;
}

/* "EventCounters": a struct field "Payload" with Name, DisplayName, and Mean
 * (EventCounter, PollingCounter) or Increment (the incrementing kinds). The
 * runtime writes it as TraceLogging does: inside one unnamed struct. */
static int counter_from_event_counters(const char *provider, const NettraceValue *values, size_t count,
                                       NettraceCounter *ret) {
        const NettraceValue *payload, *v;
        const char *name;
        bool rate = false;

        if (count == 1 && values[0].type == NETTRACE_TYPE_OBJECT && values[0].name && !*values[0].name) {
                count = values[0].n_items;
                values = values[0].items;
        }
        payload = nettrace_value_find(values, count, "Payload");
        if (!payload || payload->type != NETTRACE_TYPE_OBJECT)
                return NETTRACE_E_MALFORMED;
        name = value_string(payload->items, payload->n_items, "Name");
        v = nettrace_value_find(payload->items, payload->n_items, "Mean");
        if (!v) {
                v = nettrace_value_find(payload->items, payload->n_items, "Increment");
                rate = true;
        }
        if (!name || !v || (v->type != NETTRACE_TYPE_DOUBLE && v->type != NETTRACE_TYPE_SINGLE))
                return NETTRACE_E_MALFORMED;
        return counter_fill(provider, name, value_string(payload->items, payload->n_items, "DisplayName"),
                            value_string(payload->items, payload->n_items, "DisplayUnits"), v->d, rate, ret);
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

static int counter_from_metrics(const char *event, const NettraceValue *values, size_t count,
                                NettraceCounter *ret) {
        const char *meter = value_string(values, count, "meterName");
        const char *instrument = value_string(values, count, "instrumentName");
        const char *text;
        bool rate = false;
        double value;

        if (strcmp(event, "GaugeValuePublished") == 0)
                text = value_string(values, count, "lastValue");
        else if (strcmp(event, "UpDownCounterRateValuePublished") == 0)
                text = value_string(values, count, "value");
        else if (strcmp(event, "CounterRateValuePublished") == 0) {
                text = value_string(values, count, "rate");
                rate = true;
        } else
                return NETTRACE_E_NO_COUNTER;
        if (!meter || !instrument)
                return NETTRACE_E_MALFORMED;
        if (!parse_double(text, &value))
                return NETTRACE_E_NO_COUNTER;
        return counter_fill(meter, instrument, NULL, value_string(values, count, "unit"), value, rate, ret);
}

/**
 * nettrace_counter_extract() - the counter sample an event carries, if any
 *
 * Knows the "EventCounters" events of any EventSource (provider = the
 * EventSource) and the value events of System.Diagnostics.Metrics (provider =
 * the Meter).
 *
 * Return: 0 with *@ret set (free with nettrace_counter_done()),
 * NETTRACE_E_NO_COUNTER if the event is not a sample, NETTRACE_E_MALFORMED
 * if it should be one but does not decode as one, NETTRACE_E_LIMIT, -ENOMEM.
 */
int nettrace_counter_extract(const NettraceEvent *event, NettraceCounter *ret) {
        const NettraceMetadata *m = event->metadata;
        NettraceValue *values = NULL;
        size_t count = 0;
        bool counters, metrics;
        int r;

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
                r = counter_from_event_counters(m->provider, values, count, ret);
        else
                r = counter_from_metrics(m->event_name, values, count, ret);
        nettrace_values_free(values, count);
        return r;
}
