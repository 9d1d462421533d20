/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes what dsctl counters --format prometheus makes of a runtime's words (client/counter-format.h):
 * prometheus_write_help() and prometheus_write_label_value()/_text() (a counter's display name or
 * description, its tags' values), prometheus_metric_name() (its name and unit) and
 * prometheus_label_name() (its tags' keys). The runtime chooses every one of these strings.
 *
 * Input: a type byte (% 3: gauge, counter, summary), then a name, a NUL and a unit (absent when
 * there is no NUL). The name is also the text written.
 *
 * Invariants: a HELP line and a sample line with the text as a label value are lines of the
 * text format (tests/unit/property.h: only \\, \n and \" escapes, no raw newline) and valid UTF-8
 * without control characters; read back, the text is the input exactly when it is plain text,
 * and through text_unescape() when it held controls, format characters or bytes that are not
 * UTF-8 (and no backslash of its own); a metric name and a label name made of a name that is
 * not empty are names Prometheus takes; the scale is positive.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/property.h"
#include "eventpipe/counter-format.h"
#include "tests/fuzz/fuzz.h"

#define TEXT_MAX 4096

static char *written(void (*write)(FILE *, const char *), const char *head, const char *s, const char *tail,
                     size_t *ret_size) {
        char *text = NULL;
        FILE *f = open_memstream(&text, ret_size);

        fuzz_assert(f);
        fputs(head, f);
        write(f, s);
        fputs(tail, f);
        fuzz_assert(fclose(f) == 0);
        return text;
}

static void check_read_back(const char *s, size_t n, const char *in) {
        static char plain[4 * TEXT_MAX + 16], back[4 * TEXT_MAX + 16];
        size_t plain_n = prom_unescape(s, n, plain), back_n = 0;

        if (text_is_clean(in, strlen(in), "\n")) {
                fuzz_assert(plain_n == strlen(in) && memcmp(plain, in, plain_n) == 0);
                return;
        }
        if (strchr(in, '\\'))
                return; /* "\x41" as it was and an escaped 'A' read the same */
        fuzz_assert(text_unescape(plain, plain_n, back, &back_n));
        fuzz_assert(back_n == strlen(in) && memcmp(back, in, back_n) == 0);
}

static void check_name(const char *name, bool colon) {
        const char *p = name;

        fuzz_assert(name);
        fuzz_assert(prom_name(&p, name + strlen(name), colon) && *p == '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const PrometheusType types[] = { PROMETHEUS_GAUGE, PROMETHEUS_COUNTER, PROMETHEUS_SUMMARY };
        char *name, *help, *label, *metric, *label_name;
        const char *unit = NULL;
        size_t help_size = 0, label_size = 0;
        const char *v, *end;
        double scale = 0;

        if (size == 0 || size > TEXT_MAX)
                return 0;
        name = malloc(size);
        fuzz_assert(name);
        memcpy(name, data + 1, size - 1);
        name[size - 1] = '\0';
        if (strlen(name) + 1 < size)
                unit = name + strlen(name) + 1;

        help = written(prometheus_write_help, "# HELP x ", name, "", &help_size);
        fuzz_assert(text_is_clean(help, help_size, NULL) && prom_line(help, help_size));
        check_read_back(help + 9, help_size - 9, name);

        label = written(prometheus_write_label_value, "x{a=", name, ",b=\"\"} 1", &label_size);
        fuzz_assert(text_is_clean(label, label_size, NULL) && prom_line(label, label_size));
        v = label + strlen("x{a=\"");
        for (end = v; *end != '"'; end += *end == '\\' ? 2 : 1)
                ;
        check_read_back(v, (size_t)(end - v), name);

        metric = prometheus_metric_name(name, unit, types[data[0] % 3], &scale);
        label_name = prometheus_label_name(name);
        fuzz_assert(metric && label_name && scale > 0);
        if (*name) {
                check_name(metric, true);
                check_name(label_name, false);
        }

        free(metric);
        free(label_name);
        free(label);
        free(help);
        free(name);
        return 0;
}
