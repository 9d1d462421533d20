/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "counter-view.h"
#include "text.h"

#define COUNTER_VIEW_WIDTH 64

typedef struct CounterRow {
        char *provider, *label; /* escaped: safe on a terminal */
        double value;
} CounterRow;

struct CounterView {
        FILE *f;
        char *title;
        CounterRow *rows;
        size_t n;
        bool changed;
};

CounterView *counter_view_new(FILE *f, const char *title) {
        CounterView *v = calloc(1, sizeof(*v));

        if (!v)
                return NULL;
        v->f = f;
        v->title = strdup(title);
        if (!v->title)
                return counter_view_free(v);
        return v;
}

CounterView *counter_view_free(CounterView *v) {
        if (!v)
                return NULL;
        for (size_t i = 0; i < v->n; i++) {
                free(v->rows[i].provider);
                free(v->rows[i].label);
        }
        free(v->rows);
        free(v->title);
        free(v);
        return NULL;
}

static CounterRow *find_row(CounterView *v, const char *provider, const char *label) {
        for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->rows[i].provider, provider) == 0 && strcmp(v->rows[i].label, label) == 0)
                        return &v->rows[i];
        return NULL;
}

int counter_view_set(CounterView *v, const char *provider, const char *label, double value) {
        _cleanup_free_ char *p = text_escape(provider, strlen(provider)), *l = text_escape(label, strlen(label));
        CounterRow *row, *rows;

        if (!p || !l)
                return -ENOMEM;
        row = find_row(v, p, l);
        if (!row) {
                if (v->n >= COUNTER_VIEW_ROWS)
                        return 0;
                rows = realloc(v->rows, (v->n + 1) * sizeof(CounterRow));
                if (!rows)
                        return -ENOMEM;
                v->rows = rows;
                row = &v->rows[v->n++];
                *row = (CounterRow){ .provider = TAKE_PTR(p), .label = TAKE_PTR(l) };
        }
        row->value = value;
        v->changed = true;
        return 0;
}

/* Whole numbers as such, others with three decimals, as dotnet-counters shows them. */
static void format_value(double value, char *buf, size_t size) {
        if (fabs(value) < 1e15 && value == trunc(value))
                snprintf(buf, size, "%.0f", value);
        else
                snprintf(buf, size, "%.3f", value);
}

/* Providers in the order they first appeared, each with its counters in theirs. */
static bool provider_seen_before(const CounterView *v, size_t i) {
        for (size_t j = 0; j < i; j++)
                if (strcmp(v->rows[j].provider, v->rows[i].provider) == 0)
                        return true;
        return false;
}

void counter_view_draw(CounterView *v) {
        char value[64];

        if (!v->changed)
                return;
        /* home, then erase to the end of the screen: redrawn in place, no scrolling */
        fprintf(v->f, "\033[H\033[J%s\n\n%-*s %16s\n", v->title, COUNTER_VIEW_WIDTH, "Name", "Current Value");
        for (size_t i = 0; i < v->n; i++) {
                if (provider_seen_before(v, i))
                        continue;
                fprintf(v->f, "[%s]\n", v->rows[i].provider);
                for (size_t j = i; j < v->n; j++) {
                        if (strcmp(v->rows[j].provider, v->rows[i].provider) != 0)
                                continue;
                        format_value(v->rows[j].value, value, sizeof(value));
                        fprintf(v->f, "    %-*s %16s\n", COUNTER_VIEW_WIDTH - 4, v->rows[j].label, value);
                }
        }
        fflush(v->f);
        v->changed = false;
}
