/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl gcdump --report: prints a heap's type table (gcdump_heap_report()), in dotnet-gcdump report's layout */
#include <errno.h>
#include <stdio.h>

#include "client/gcdump-view.h"
#include "client/output.h"

/* .NET's {value,WIDTH:N0}: digits grouped by commas, right-aligned in @width. */
static void put_grouped(FILE *f, int64_t value, int width) {
        char grouped[48];

        output_format_grouped(value, grouped, sizeof(grouped));
        fprintf(f, "%*s", width, grouped);
}

static void summary_row(FILE *f, int64_t value, const char *what) {
        put_grouped(f, value, 15);
        fprintf(f, "  %s\n", what);
}

int gcdump_report_print(FILE *f, const GcdumpReport *r, GcdumpSort sort) {
        /* the stock layout shows each type's first object's size; dsctl's own orders, the bytes of all */
        bool stock = sort == GCDUMP_SORT_STOCK;

        summary_row(f, r->total_size, "GC Heap bytes");
        summary_row(f, (int64_t)r->objects, "GC Heap objects");
        /* no "Total references": a .gcdump file does not keep the count, so the report of one never says it */
        fprintf(f, "\n%15s  %8s  Type\n", stock ? "Object Bytes" : "Total Bytes", "Count");
        for (size_t i = 0; i < r->n_types; i++) {
                const GcdumpType *t = &r->types[i];

                put_grouped(f, stock ? t->size : t->total_size, 15);
                fputs("  ", f);
                put_grouped(f, t->count, 8);
                fprintf(f, "  %s", t->name);
                if (t->module)
                        fprintf(f, "  [%s]", t->module);
                fputc('\n', f);
        }
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}
