/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl counters --watch (counter-view.h): the latest value of each counter, redrawn in place. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "common/cleanup.h"
#include "eventpipe/counter-format.h"
#include "client/counter-view.h"
#include "common/text.h"

#define COUNTER_VIEW_WIDTH 64
#define COUNTER_VIEW_VALUE_WIDTH 15
#define COUNTER_VIEW_INDENT 4

typedef struct CounterRow {
        char *provider, *label, *tags; /* escaped: safe on a terminal */
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

static void row_done(CounterRow *row) {
        free(row->provider);
        free(row->label);
        free(row->tags);
}

CounterView *counter_view_free(CounterView *v) {
        if (!v)
                return NULL;
        for (size_t i = 0; i < v->n; i++)
                row_done(&v->rows[i]);
        free(v->rows);
        free(v->title);
        free(v);
        return NULL;
}

static CounterRow *find_row(CounterView *v, const char *provider, const char *label, const char *tags) {
        for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->rows[i].provider, provider) == 0 && strcmp(v->rows[i].label, label) == 0 &&
                    strcmp(v->rows[i].tags, tags) == 0)
                        return &v->rows[i];
        return NULL;
}

int counter_view_set(CounterView *v, const char *provider, const char *label, const char *tags, double value) {
        _cleanup_free_ char *p = text_escape(provider, strlen(provider)), *l = text_escape(label, strlen(label)),
                            *t = text_escape(tags, strlen(tags));
        CounterRow *row, *rows;

        if (!p || !l || !t)
                return -ENOMEM;
        row = find_row(v, p, l, t);
        if (!row) {
                if (v->n >= COUNTER_VIEW_ROWS)
                        return 0;
                rows = realloc(v->rows, (v->n + 1) * sizeof(CounterRow));
                if (!rows)
                        return -ENOMEM;
                v->rows = rows;
                row = &v->rows[v->n++];
                *row = (CounterRow){ .provider = TAKE_PTR(p), .label = TAKE_PTR(l), .tags = TAKE_PTR(t) };
        }
        row->value = value;
        v->changed = true;
        return 0;
}

void counter_view_remove(CounterView *v, const char *provider, const char *label, const char *tags) {
        _cleanup_free_ char *p = text_escape(provider, strlen(provider)), *l = text_escape(label, strlen(label)),
                            *t = text_escape(tags, strlen(tags));
        CounterRow *row;

        if (!p || !l || !t || !(row = find_row(v, p, l, t)))
                return;
        row_done(row);
        memmove(row, row + 1, (size_t)(v->rows + v->n - row - 1) * sizeof(CounterRow));
        v->n--;
        v->changed = true;
}

/* Providers by name, then names, then tag sets: the order dotnet-counters monitor shows them in. */
static int row_compare(const void *a, const void *b) {
        const CounterRow *x = *(CounterRow *const *)a, *y = *(CounterRow *const *)b;
        int r = strcmp(x->provider, y->provider);

        if (r == 0)
                r = strcmp(x->label, y->label);
        return r != 0 ? r : strcmp(x->tags, y->tags);
}

static void draw_line(CounterView *v, int indent, const char *name, const char *value) {
        if (value)
                fprintf(v->f, "%*s%-*s %s\n", indent, "", COUNTER_VIEW_WIDTH - indent, name, value);
        else
                fprintf(v->f, "%*s%s\n", indent, "", name);
}

/* The @i-th "k=v" of @tags into @key and @value (cut to their buffers). Return: false past the last. */
static bool tag_at(const char *tags, size_t i, char *key, size_t key_size, char *value, size_t value_size) {
        const char *p = tags, *end, *eq;

        for (; i > 0 && p; i--)
                p = (p = strchr(p, ',')) ? p + 1 : NULL;
        if (!p || !*tags)
                return false;
        end = strchrnul(p, ',');
        eq = memchr(p, '=', (size_t)(end - p));
        snprintf(key, key_size, "%.*s", (int)((eq ? eq : end) - p), p);
        snprintf(value, value_size, "%.*s", eq ? (int)(end - eq - 1) : 0, eq ? eq + 1 : "");
        return true;
}

/* A counter's tag sets @rows[0..n): a column per tag key, a row per set, as dotnet-counters lays them out. */
static void draw_tag_sets(CounterView *v, CounterRow **rows, size_t n) {
        char keys[8][64], key[64], value[64], cell[COUNTER_VIEW_WIDTH + 1], shown[64];
        int widths[8] = {};
        size_t n_keys = 0;

        for (size_t r = 0; r < n; r++)
                for (size_t i = 0; tag_at(rows[r]->tags, i, key, sizeof(key), value, sizeof(value)); i++) {
                        size_t k = 0;
                        while (k < n_keys && strcmp(keys[k], key) != 0)
                                k++;
                        if (k == n_keys && n_keys < ELEMENTSOF(keys))
                                snprintf(keys[n_keys++], sizeof(keys[0]), "%s", key);
                        if (k < n_keys) {
                                widths[k] = MAX(widths[k], (int)strlen(keys[k]));
                                widths[k] = MAX(widths[k], (int)strlen(value));
                        }
                }
        for (int line = 0; line < 2; line++) {
                size_t o = 0;
                for (size_t k = 0; k < n_keys && o < sizeof(cell); k++) {
                        if (line == 0)
                                o += (size_t)snprintf(cell + o, sizeof(cell) - o, "%-*s ", widths[k], keys[k]);
                        else {
                                for (int w = 0; w < widths[k] && o + 2 < sizeof(cell); w++)
                                        cell[o++] = '-';
                                cell[o++] = ' ';
                        }
                }
                cell[MIN(o, sizeof(cell) - 1)] = '\0';
                draw_line(v, 2 * COUNTER_VIEW_INDENT, cell, NULL);
        }
        for (size_t r = 0; r < n; r++) {
                size_t o = 0;
                cell[0] = '\0';
                for (size_t k = 0; k < n_keys && o < sizeof(cell); k++) {
                        const char *found = "";
                        for (size_t i = 0; tag_at(rows[r]->tags, i, key, sizeof(key), value, sizeof(value)); i++)
                                if (strcmp(key, keys[k]) == 0) {
                                        found = value;
                                        break;
                                }
                        o += (size_t)snprintf(cell + o, sizeof(cell) - o, "%-*s ", widths[k], found);
                }
                counter_format_view_value(rows[r]->value, COUNTER_VIEW_VALUE_WIDTH, shown, sizeof(shown));
                draw_line(v, 2 * COUNTER_VIEW_INDENT, cell, shown);
        }
}

void counter_view_draw(CounterView *v) {
        _cleanup_free_ CounterRow **order = NULL;
        char shown[64];

        if (!v->changed)
                return;
        order = calloc(v->n ? v->n : 1, sizeof(CounterRow *));
        if (!order)
                return;
        for (size_t i = 0; i < v->n; i++)
                order[i] = &v->rows[i];
        qsort(order, v->n, sizeof(CounterRow *), row_compare);

        /* home, then erase to the end of the screen: redrawn in place, no scrolling */
        fprintf(v->f, "\033[H\033[J%s\n\n", v->title);
        draw_line(v, 0, "Name", "  Current Value");
        for (size_t i = 0; i < v->n;) {
                size_t j = i;

                if (i == 0 || strcmp(order[i]->provider, order[i - 1]->provider) != 0) {
                        char header[COUNTER_VIEW_WIDTH + 8];
                        snprintf(header, sizeof(header), "[%s]", order[i]->provider);
                        draw_line(v, 0, header, NULL);
                }
                while (j < v->n && strcmp(order[j]->provider, order[i]->provider) == 0 &&
                       strcmp(order[j]->label, order[i]->label) == 0)
                        j++;
                if (j - i == 1 && !*order[i]->tags) {
                        counter_format_view_value(order[i]->value, COUNTER_VIEW_VALUE_WIDTH, shown, sizeof(shown));
                        draw_line(v, COUNTER_VIEW_INDENT, order[i]->label, shown);
                } else {
                        draw_line(v, COUNTER_VIEW_INDENT, order[i]->label, NULL);
                        draw_tag_sets(v, order + i, j - i);
                }
                i = j;
        }
        fflush(v->f);
        v->changed = false;
}
