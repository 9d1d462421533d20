/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The words and numbers of dsctl counters' rows and Prometheus names (counter-format.h): pure; the
 * sink and the view call it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <time.h>

#include "common/cleanup.h"
#include "eventpipe/counter-format.h"
#include "common/text.h"

/* The fewest significant digits (1..17) that read back as @v, as printf's %.*e writes them. */
static int shortest_precision(double v, char *buf, size_t size) {
        for (int p = 1; p < 17; p++) {
                snprintf(buf, size, "%.*e", p - 1, v);
                if (strtod(buf, NULL) == v)
                        return p;
        }
        snprintf(buf, size, "%.16e", v);
        return 17;
}

/*
 * The shortest digits of @v, in fixed form for exponents in [-4, @sci_from),
 * else as d.dddE+XX with @e for the letter and at least two exponent digits.
 */
static void format_shortest(double v, char *buf, int sci_from, char e) {
        char sci[COUNTER_FORMAT_DOUBLE_MAX], digits[20];
        size_t n = 0;
        int exponent;
        char *out = buf;

        /* "-1.2345e+17": the digits without the point, and the exponent */
        (void)shortest_precision(v, sci, sizeof(sci));
        for (const char *p = sci[0] == '-' ? sci + 1 : sci; *p && *p != 'e'; p++)
                if (*p != '.')
                        digits[n++] = *p;
        digits[n] = '\0';
        exponent = atoi(strchr(sci, 'e') + 1);
        if (sci[0] == '-')
                *out++ = '-';

        if (exponent >= sci_from || exponent < -4) {
                *out++ = digits[0];
                if (n > 1)
                        out += sprintf(out, ".%s", digits + 1);
                sprintf(out, "%c%c%02d", e, exponent < 0 ? '-' : '+', abs(exponent));
        } else if (exponent < 0) {
                out += sprintf(out, "0.");
                for (int i = 0; i < -exponent - 1; i++)
                        *out++ = '0';
                strcpy(out, digits);
        } else {
                for (int i = 0; i <= exponent; i++)
                        *out++ = (size_t)i < n ? digits[i] : '0';
                *out = '\0';
                if ((size_t)exponent + 1 < n)
                        sprintf(out, ".%s", digits + exponent + 1);
        }
}

/* @v, or the words for what is not a number: "NaN" in both .NET and Prometheus, infinities their own. */
static void format_number(double v, char *buf, int sci_from, char e, const char *infinity, const char *minus) {
        if (isnan(v))
                strcpy(buf, "NaN");
        else if (isinf(v))
                strcpy(buf, v > 0 ? infinity : minus);
        else
                format_shortest(v, buf, sci_from, e);
}

void counter_format_double(double v, char buf[static COUNTER_FORMAT_DOUBLE_MAX]) {
        /* .NET's "G" switches to scientific form at its precision for doubles, 15 */
        format_number(v, buf, 15, 'E', "Infinity", "-Infinity");
}

static bool local_time(int64_t sec, struct tm *tm) {
        time_t t = (time_t)sec;

        return localtime_r(&t, tm) != NULL;
}

static int64_t floor_div(int64_t a, int64_t b) {
        return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

void counter_format_time_invariant(int64_t usec, char *buf, size_t size) {
        struct tm tm;

        if (!local_time(floor_div(usec, 1000000), &tm) || strftime(buf, size, "%m/%d/%Y %H:%M:%S", &tm) == 0)
                snprintf(buf, size, "%lld", (long long)floor_div(usec, 1000000));
}

void counter_format_time_roundtrip(int64_t nsec, char *buf, size_t size) {
        int64_t sec = floor_div(nsec, 1000000000);
        unsigned ticks = (unsigned)((nsec - sec * 1000000000) / 100); /* .NET's 100 ns ticks */
        char date[32];
        struct tm tm;
        long off;

        if (!local_time(sec, &tm) || strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
                snprintf(buf, size, "%lld", (long long)sec);
                return;
        }
        off = tm.tm_gmtoff / 60;
        snprintf(buf, size, "%s.%07u%c%02ld:%02ld", date, ticks, off < 0 ? '-' : '+', labs(off) / 60, labs(off) % 60);
}

/* dotnet-counters writes the EventCounters' unit "count" as "Count". */
static const char *shown_unit(const char *unit) {
        return unit && strcmp(unit, "count") == 0 ? "Count" : unit;
}

static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *format(const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

char *counter_display_name(const NettraceCounter *c, const char *unit, unsigned interval_sec, CounterStyle style) {
        const char *name = c->name;

        switch (c->kind) {
        case NETTRACE_COUNTER_MEAN:
        case NETTRACE_COUNTER_SUM:
                if (c->display_name && *c->display_name)
                        name = c->display_name;
                if (c->kind == NETTRACE_COUNTER_SUM)
                        return format("%s (%s / %u sec)", name, shown_unit(c->units ? c->units : "count"),
                                      c->interval_ms / 1000);
                unit = shown_unit(c->units);
                break;
        case NETTRACE_COUNTER_COUNTER:
                if (style == COUNTER_STYLE_MONITOR && c->has_total)
                        return format("%s (%s)", name, unit && *unit ? unit : "Count");
                return format("%s (%s / %u sec)", name, unit && *unit ? unit : "Count", interval_sec);
        default:
                break;
        }
        return unit && *unit ? format("%s (%s)", name, unit) : strdup(name);
}

bool counter_is_rate(const NettraceCounter *c, CounterStyle style) {
        if (c->kind == NETTRACE_COUNTER_SUM)
                return true;
        return c->kind == NETTRACE_COUNTER_COUNTER && (style == COUNTER_STYLE_COLLECT || !c->has_total);
}

double counter_row_value(const NettraceCounter *c, CounterStyle style) {
        return c->kind == NETTRACE_COUNTER_COUNTER && !counter_is_rate(c, style) ? c->total : c->value;
}

char *counter_combine_tags(const char *meter_tags, const char *instrument_tags, const char *value_tags) {
        const char *parts[] = { meter_tags, instrument_tags, value_tags };
        char *s = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&s, &size);
        bool any = false;

        if (!f)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                if (!parts[i] || !*parts[i])
                        continue;
                fprintf(f, "%s%s", any ? "," : "", parts[i]);
                any = true;
        }
        if (fclose(f) != 0) {
                free(s);
                return NULL;
        }
        return s;
}

/* "1.50E+15" → "1.5E+15": %.2E's mantissa without its trailing zeros, at least two exponent digits kept. */
static void trim_mantissa(char *buf) {
        char *e = strchr(buf, 'E'), *end = e;

        if (!e)
                return;
        while (end > buf && end[-1] == '0')
                end--;
        if (end > buf && end[-1] == '.')
                end--;
        memmove(end, e, strlen(e) + 1);
}

void counter_format_rounded(double v, char buf[static COUNTER_FORMAT_DOUBLE_MAX]) {
        double magnitude = fabs(v);
        int integer_digits = 1;
        char *end;

        if (!isfinite(v)) {
                counter_format_double(v, buf);
                return;
        }
        if (magnitude >= 1e15 || (magnitude < 1e-4 && magnitude > 0)) {
                snprintf(buf, COUNTER_FORMAT_DOUBLE_MAX, "%.2E", v);
                trim_mantissa(buf);
                return;
        }
        if (magnitude < 1) {
                /* %g drops trailing zeros itself; below 1e-4 was taken above, so this is never scientific */
                snprintf(buf, COUNTER_FORMAT_DOUBLE_MAX, "%.3g", magnitude == 0 ? 0.0 : v);
                return;
        }
        /* no more than 15 significant digits, a double's own: past them %f shows the binary's noise */
        for (double power = 10; magnitude >= power; power *= 10)
                integer_digits++;
        snprintf(buf, COUNTER_FORMAT_DOUBLE_MAX, "%.*f", MIN(3, MAX(0, 15 - integer_digits)), v);
        if (!strchr(buf, '.'))
                return;
        end = buf + strlen(buf);
        while (end[-1] == '0')
                *--end = '\0';
        if (end[-1] == '.')
                end[-1] = '\0';
}

char *counter_percentile_tags(const char *tags, double quantile) {
        char p[COUNTER_FORMAT_DOUBLE_MAX];

        counter_format_double(quantile * 100, p);
        return tags && *tags ? format("%s,Percentile=%s", tags, p) : format("Percentile=%s", p);
}

void counter_format_view_value(double v, int width, char *buf, size_t size) {
        char fixed[64], grouped[96], *point, *fraction;
        size_t n, digits, o = 0;

        if (!isfinite(v) || fabs(v) >= 100000000) {
                /* 0.####e+00 */
                char e[32], *x;
                snprintf(e, sizeof(e), "%.4e", v);
                x = strchr(e, 'e');
                if (x) {
                        int exponent = atoi(x + 1);
                        char *end = x;
                        *x = '\0';
                        while (end > e && end[-1] == '0')
                                *--end = '\0';
                        if (end > e && end[-1] == '.')
                                end[-1] = '\0';
                        snprintf(grouped, sizeof(grouped), "%se%c%02d", e, exponent < 0 ? '-' : '+', abs(exponent));
                } else
                        snprintf(grouped, sizeof(grouped), "%s", e);
                snprintf(buf, size, "%*s   ", width, grouped);
                return;
        }
        snprintf(fixed, sizeof(fixed), "%.3f", fabs(v));
        point = strchr(fixed, '.');
        *point = '\0';
        fraction = point + 1;
        for (char *end = fraction + strlen(fraction); end > fraction && end[-1] == '0';)
                *--end = '\0';
        if (v < 0 && (strcmp(fixed, "0") != 0 || *fraction))
                grouped[o++] = '-';
        digits = strlen(fixed);
        for (n = 0; n < digits; n++) {
                if (n > 0 && (digits - n) % 3 == 0)
                        grouped[o++] = ',';
                grouped[o++] = fixed[n];
        }
        /* the decimal points of a column line up: three places, or four spaces for none */
        if (*fraction)
                o += (size_t)snprintf(grouped + o, sizeof(grouped) - o, ".%-3s", fraction);
        else
                o += (size_t)snprintf(grouped + o, sizeof(grouped) - o, "    ");
        grouped[o] = '\0';
        snprintf(buf, size, "%*s", width, grouped);
}

/* ---- Prometheus ---- */

typedef struct UnitWord {
        const char *ucum, *word;
        double scale;           /* to the base unit Prometheus wants: values are multiplied by it */
} UnitWord;

static const UnitWord main_units[] = {
        { "d", "seconds", 86400 }, { "h", "seconds", 3600 }, { "min", "seconds", 60 }, { "s", "seconds", 1 },
        { "ms", "seconds", 1e-3 }, { "us", "seconds", 1e-6 }, { "ns", "seconds", 1e-9 },
        { "By", "bytes", 1 }, { "KiBy", "bytes", 1024.0 }, { "MiBy", "bytes", 1048576.0 },
        { "GiBy", "bytes", 1073741824.0 }, { "TiBy", "bytes", 1099511627776.0 }, { "KBy", "bytes", 1e3 },
        { "MBy", "bytes", 1e6 }, { "GBy", "bytes", 1e9 }, { "TBy", "bytes", 1e12 },
        { "m", "meters", 1 }, { "V", "volts", 1 }, { "A", "amperes", 1 }, { "J", "joules", 1 }, { "W", "watts", 1 },
        { "g", "grams", 1 }, { "Cel", "celsius", 1 }, { "Hz", "hertz", 1 }, { "%", "percent", 1 },
        /* EventCounters' display units, which are no UCUM; their MB is 1,000,000 bytes */
        { "B", "bytes", 1 }, { "KB", "bytes", 1e3 }, { "MB", "bytes", 1e6 }, { "GB", "bytes", 1e9 },
};

static const UnitWord per_units[] = {
        { "s", "second", 1 }, { "m", "minute", 1 }, { "h", "hour", 1 }, { "d", "day", 1 },
        { "w", "week", 1 }, { "mo", "month", 1 }, { "y", "year", 1 },
};

static bool name_char(char ch, bool first) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (!first && ch >= '0' && ch <= '9');
}

/* Characters outside [a-zA-Z0-9_] (and ':' with @colon) become "_"; runs of "_" one. Appends to @f. */
static void sanitize_into(FILE *f, const char *s, size_t n, bool colon, char *last) {
        for (size_t i = 0; i < n; i++) {
                char ch = s[i];
                if (!name_char(ch, false) && !(colon && ch == ':'))
                        ch = '_';
                if (ch == '_' && *last == '_')
                        continue;
                fputc(ch, f);
                *last = ch;
        }
}

static const UnitWord *unit_word(const UnitWord *table, size_t n, const char *s, size_t len) {
        for (size_t i = 0; i < n; i++)
                if (strlen(table[i].ucum) == len && memcmp(table[i].ucum, s, len) == 0)
                        return &table[i];
        return NULL;
}

/* One side of a unit ("By", "s"): its word, or itself made a name. Return: the scale to its word. */
static double unit_part(FILE *f, const UnitWord *table, size_t n, const char *s, size_t len) {
        const UnitWord *word = unit_word(table, n, s, len);
        char last = '_';

        if (word) {
                fputs(word->word, f);
                return word->scale;
        }
        sanitize_into(f, s, len, false, &last);
        return 1;
}

/* The unit as Prometheus words, "" for none, and the factor from the unit to them in *@ret_scale. */
static char *unit_words(const char *unit, PrometheusType type, double *ret_scale) {
        _cleanup_free_ char *bare = NULL;
        char *s = NULL, *slash;
        size_t size = 0, o = 0;
        FILE *f;

        *ret_scale = 1;
        if (!unit)
                return strdup("");
        bare = strdup(unit);
        if (!bare)
                return NULL;
        /* annotations, "{packet}", are no unit */
        for (const char *p = unit; *p;) {
                if (*p == '{') {
                        const char *end = strchr(p, '}');
                        p = end ? end + 1 : p + strlen(p);
                        continue;
                }
                if (*p != ' ')
                        bare[o++] = *p;
                p++;
        }
        bare[o] = '\0';
        if (strcmp(bare, "1") == 0)
                return strdup(type == PROMETHEUS_GAUGE ? "ratio" : "");

        f = open_memstream(&s, &size);
        if (!f)
                return NULL;
        slash = strchr(bare, '/');
        if (slash) {
                if (slash > bare) {
                        *ret_scale = unit_part(f, main_units, ELEMENTSOF(main_units), bare, (size_t)(slash - bare));
                        fputc('_', f);
                }
                fputs("per_", f);
                unit_part(f, per_units, ELEMENTSOF(per_units), slash + 1, strlen(slash + 1));
        } else if (*bare)
                *ret_scale = unit_part(f, main_units, ELEMENTSOF(main_units), bare, strlen(bare));
        if (fclose(f) != 0) {
                free(s);
                return NULL;
        }
        return s;
}

/* Whether @words ("bytes_per_second") stand in @name as whole "_"-separated words. */
static bool holds_words(const char *name, const char *words) {
        size_t n = strlen(words);

        for (const char *p = name; (p = strstr(p, words)); p++)
                if ((p == name || p[-1] == '_') && (p[n] == '\0' || p[n] == '_'))
                        return true;
        return false;
}

char *prometheus_metric_name(const char *name, const char *unit, PrometheusType type, double *ret_scale) {
        _cleanup_free_ char *words = unit_words(unit, type, ret_scale), *base = NULL;
        char *s = NULL, last = '\0';
        size_t size = 0, len;
        FILE *f;

        if (!words)
                return NULL;
        f = open_memstream(&base, &size);
        if (!f)
                return NULL;
        if (*name >= '0' && *name <= '9') {
                fputc('_', f);
                last = '_';
        }
        sanitize_into(f, name, strlen(name), true, &last);
        if (fclose(f) != 0)
                return NULL;

        f = open_memstream(&s, &size);
        if (!f)
                return NULL;
        last = '\0';
        sanitize_into(f, base, strlen(base), true, &last);
        if (*words && !holds_words(base, words)) {
                if (last != '_')
                        fputc('_', f);
                fputs(words, f);
                last = 'x';
        }
        if (fclose(f) != 0) {
                free(s);
                return NULL;
        }
        len = strlen(s);
        if (type == PROMETHEUS_COUNTER && !(len >= 6 && strcmp(s + len - 6, "_total") == 0)) {
                char *t = format("%s%s", s, len > 0 && s[len - 1] == '_' ? "total" : "_total");
                free(s);
                s = t;
        }
        return s;
}

char *prometheus_label_name(const char *key) {
        char *s = NULL, last = '\0';
        size_t size = 0;
        FILE *f = open_memstream(&s, &size);

        if (!f)
                return NULL;
        if (!*key || (*key >= '0' && *key <= '9')) {
                fputs("key_", f);
                last = '_';
        }
        sanitize_into(f, key, strlen(key), false, &last);
        if (fclose(f) != 0) {
                free(s);
                return NULL;
        }
        return s;
}

/*
 * One character of @s (@n bytes left) for HELP text or, with @label, a label value: what Prometheus
 * escapes itself its way (backslash, newline, a label's double quote); controls, format characters
 * and bytes that start no UTF-8 character as text_escape() shows them ("\x1b", "\u202e"), their
 * backslash escaped for Prometheus; the rest as it is. A runtime names its counters, so nothing of
 * it may end a line, drive a terminal, or make the exposition invalid UTF-8. Return: bytes taken.
 */
static size_t prometheus_write_char(FILE *f, const char *s, size_t n, bool label) {
        const unsigned char *p = (const unsigned char *)s;
        uint32_t cp = 0;
        size_t len = utf8_decode(s, n, &cp);

        if (len == 1 && (*p == '\\' || (label && *p == '"')))
                fprintf(f, "\\%c", *p);
        else if (len == 1 && *p == '\n')
                fputs("\\n", f);
        else if (len == 0 || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
                len = len ? len : 1;
                for (size_t i = 0; i < len; i++)
                        fprintf(f, "\\\\x%02x", p[i]);
        } else if (unicode_is_format_control(cp))
                fprintf(f, "\\\\u%04x", (unsigned)cp);
        else
                fwrite(s, 1, len, f);
        return len;
}

static void prometheus_write_text(FILE *f, const char *s, bool label) {
        size_t n = strlen(s);

        while (n > 0) {
                size_t len = prometheus_write_char(f, s, n, label);
                s += len;
                n -= len;
        }
}

void prometheus_write_label_text(FILE *f, const char *s) {
        prometheus_write_text(f, s, true);
}

void prometheus_write_label_value(FILE *f, const char *s) {
        fputc('"', f);
        prometheus_write_label_text(f, s);
        fputc('"', f);
}

void prometheus_write_help(FILE *f, const char *s) {
        prometheus_write_text(f, s, false);
}

void prometheus_format_value(double v, char buf[static COUNTER_FORMAT_DOUBLE_MAX]) {
        /* Go's strconv reads any of these; fixed form as far as it writes it */
        format_number(v, buf, 21, 'e', "+Inf", "-Inf");
}

static bool has_suffix(const char *s, const char *suffix) {
        size_t n = strlen(s), m = strlen(suffix);

        return n >= m && strcmp(s + n - m, suffix) == 0;
}

PrometheusType prometheus_declared_type(const char *name, PrometheusType type) {
        if (type == PROMETHEUS_GAUGE &&
            (has_suffix(name, "_count") || has_suffix(name, "_sum") || has_suffix(name, "_bucket")))
                return PROMETHEUS_UNTYPED;
        return type;
}

const char *prometheus_type_to_string(PrometheusType t) {
        switch (t) {
        case PROMETHEUS_UNTYPED:
                return "untyped";
        case PROMETHEUS_COUNTER:
                return "counter";
        case PROMETHEUS_SUMMARY:
                return "summary";
        default:
                return "gauge";
        }
}
