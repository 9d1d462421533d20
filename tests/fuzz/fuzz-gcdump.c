/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes what dsctl gcdump reads of a heap session (eventpipe/gcdump-heap.h):
 * the nettrace stream of the target, whose GCBulkType, GCBulkNode,
 * GCBulkEdge, root, GC and module events the heap is built from, then the
 * type table made of it (gcdump_heap_report()) and the .gcdump file
 * (gcdump_heap_write()).
 *
 * Input: the stream (as fuzz-nettrace's, without its chunking byte).
 * Invariants: gcdump_heap_add() and gcdump_heap_report() return only their
 * documented codes; a table has at most as many rows as objects counted, its
 * rows in report order (size, then count, descending), every name valid
 * UTF-8, every count > 0, every type's total bytes at least its first
 * object's; dsctl's orders (gcdump_report_sort(): total bytes, count,
 * name) keep the same rows, ascending by their key; the file, when the
 * table was made, is made too and ends with the offset of its trailer,
 * inside it; no read past a payload (ASan).
 */
#include <errno.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "eventpipe/gcdump-heap.h"
#include "eventpipe/nettrace.h"
#include "common/text.h"

static int on_header(const NettraceHeader *h, void *userdata) {
        gcdump_heap_set_pointer_size(userdata, h->pointer_size);
        return 0;
}

static int on_event(const NettraceEvent *e, void *userdata) {
        int r = gcdump_heap_add(userdata, e);

        fuzz_assert(r == 0 || r == GCDUMP_E_OTHER || r == GCDUMP_E_MALFORMED || r == GCDUMP_E_LIMIT || r == -ENOMEM);
        return 0;
}

typedef struct File {
        uint64_t size;
        uint8_t last[4];
} File;

static int take_bytes(const void *data, size_t size, void *userdata) {
        File *f = userdata;
        const uint8_t *p = data;

        for (size_t i = 0; i < size; i++) {
                memmove(f->last, f->last + 1, 3);
                f->last[3] = p[i];
        }
        f->size += size;
        return 0;
}

static void check_report(const GcdumpReport *r) {
        fuzz_assert(r->n_types <= r->objects);
        for (size_t i = 0; i < r->n_types; i++) {
                const GcdumpType *t = &r->types[i];

                fuzz_assert(t->name && utf8_is_valid(t->name, strlen(t->name)));
                fuzz_assert(!t->module || utf8_is_valid(t->module, strlen(t->module)));
                fuzz_assert(t->count > 0 && t->size != 0);
                fuzz_assert(t->total_size >= t->size);
                if (i > 0)
                        fuzz_assert(r->types[i - 1].size > t->size ||
                                    (r->types[i - 1].size == t->size && r->types[i - 1].count >= t->count));
        }
}

/* Each of dsctl's orders: the same number of rows and objects, each row's key not below the one before. */
static void check_orders(GcdumpReport *r) {
        for (GcdumpSort sort = GCDUMP_SORT_SIZE; sort <= GCDUMP_SORT_NAME; sort++) {
                uint64_t objects = 0, sorted = 0;
                size_t n = r->n_types;

                for (size_t i = 0; i < n; i++)
                        objects += r->types[i].count;
                if (gcdump_report_sort(r, sort) < 0)
                        return;
                fuzz_assert(r->n_types == n);
                for (size_t i = 0; i < n; i++) {
                        const GcdumpType *a = i > 0 ? &r->types[i - 1] : NULL, *t = &r->types[i];

                        sorted += t->count;
                        fuzz_assert(!a || sort != GCDUMP_SORT_SIZE || a->total_size <= t->total_size);
                        fuzz_assert(!a || sort != GCDUMP_SORT_COUNT || a->count <= t->count);
                        fuzz_assert(!a || sort != GCDUMP_SORT_NAME || strcmp(a->name, t->name) <= 0);
                }
                fuzz_assert(sorted == objects);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        NettraceCallbacks callbacks = { .header = on_header, .event = on_event };
        _cleanup_(gcdump_heap_freep) GcdumpHeap *heap = NULL;
        NettraceParser *p = NULL;
        GcdumpReport report = {};
        int r;

        if (gcdump_heap_new(&heap) < 0 || nettrace_parser_new(&callbacks, heap, &p) < 0)
                return 0;
        (void)nettrace_feed(p, data, size);
        (void)nettrace_finish(p);
        nettrace_parser_free(p);
        r = gcdump_heap_report(heap, &report);
        fuzz_assert(r == 0 || r == GCDUMP_E_NO_DUMP || r == GCDUMP_E_BROKEN || r == GCDUMP_E_LIMIT || r == -ENOMEM);
        if (r == 0) {
                File file = {};
                uint32_t trailer;

                check_report(&report);
                r = gcdump_heap_write(heap, "fuzz", take_bytes, &file);
                fuzz_assert(r == 0 || r == GCDUMP_E_LIMIT || r == -ENOMEM);
                trailer = (uint32_t)file.last[0] | (uint32_t)file.last[1] << 8 | (uint32_t)file.last[2] << 16 |
                          (uint32_t)file.last[3] << 24;
                fuzz_assert(r != 0 || (file.size > 64 && trailer + 8 == file.size));
                check_orders(&report);
        }
        gcdump_report_done(&report);
        return 0;
}
