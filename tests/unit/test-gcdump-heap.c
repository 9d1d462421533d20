/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl gcdump's type table (eventpipe/gcdump-heap.c): on a heap session
 * captured from the real runtime, the text must be what the stock
 * dotnet-gcdump convert + report printed for the same bytes
 * (tests/data/nettrace/gcdump.report); on made-up events, the reader's rules
 * one by one (the dump's GC only, names, big objects, unknown types, roots,
 * references that do not add up, payloads cut short); and the .gcdump
 * written of the capture, read back: its framing, and the same objects per
 * type as the table (the integration test has the stock report read it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/gcdump-heap.h"
#include "client/gcdump-view.h"
#include "eventpipe/nettrace.h"
#include "tests/unit/tap.h"

static char *load(const char *name, size_t *ret_size) {
        char path[4096];
        char *data = NULL;
        size_t size = 0, cap = 0, n;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", NETTRACE_DATA_DIR, name);
        f = fopen(path, "re");
        if (!f)
                return NULL;
        do {
                if (size + 1 >= cap) {
                        cap = cap ? cap * 2 : 65536;
                        data = realloc(data, cap);
                        if (!data)
                                break;
                }
                n = fread(data + size, 1, cap - size - 1, f);
                size += n;
        } while (n > 0);
        fclose(f);
        if (data)
                data[size] = 0;
        *ret_size = size;
        return data;
}

typedef struct Capture {
        GcdumpHeap *heap;
        unsigned errors, taken;
} Capture;

static int on_header(const NettraceHeader *h, void *userdata) {
        gcdump_heap_set_pointer_size(((Capture *)userdata)->heap, h->pointer_size);
        return 0;
}

static int on_event(const NettraceEvent *e, void *userdata) {
        Capture *c = userdata;
        int r = gcdump_heap_add(c->heap, e);

        if (r == 0)
                c->taken++;
        else if (r != GCDUMP_E_OTHER)
                c->errors++;
        return 0;
}

static uint32_t get_le32(const uint8_t *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static char *report_text(const GcdumpReport *r) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return NULL;
        check(gcdump_report_print(f, r, GCDUMP_SORT_STOCK) == 0);
        fclose(f);
        return text;
}

/* The same rows by dumpheap -stat's order: none lost or added, total bytes ascending, each type's at least
 * its first object's and at most its count times the biggest one's; the heap's bytes the rows' and the rest. */
static void check_sorted_by_total(GcdumpReport *r) {
        int64_t first_sizes = 0, sizes = 0, counts = 0, totals = 0, sorted_counts = 0, sorted_totals = 0;

        for (size_t i = 0; i < r->n_types; i++) {
                first_sizes += r->types[i].size;
                counts += r->types[i].count;
                totals += r->types[i].total_size;
                check(r->types[i].total_size >= r->types[i].size);
        }
        check(gcdump_report_sort(r, GCDUMP_SORT_SIZE) == 0);
        for (size_t i = 0; i < r->n_types; i++) {
                sizes += r->types[i].size;
                sorted_counts += r->types[i].count;
                sorted_totals += r->types[i].total_size;
                check(i == 0 || r->types[i - 1].total_size <= r->types[i].total_size);
        }
        check(sizes == first_sizes && sorted_counts == counts && sorted_totals == totals);
        check(totals <= r->total_size);
}

/* A stream, and what the stock dotnet-gcdump convert + report printed of it: the same text. */
static void check_as_the_stock_tool(const char *name, unsigned min_events, size_t min_types) {
        NettraceCallbacks callbacks = { .header = on_header, .event = on_event };
        _cleanup_free_ char *stream = NULL, *expected = NULL, *text = NULL, *stream_name = NULL, *report_name = NULL;
        _cleanup_(nettrace_parser_freep) NettraceParser *p = NULL;
        Capture c = {};
        GcdumpReport r = {};
        size_t size, expected_size;

        check(asprintf(&stream_name, "%s.nettrace", name) > 0 && asprintf(&report_name, "%s.report", name) > 0);
        stream = load(stream_name, &size);
        expected = load(report_name, &expected_size);
        check(stream && expected);
        if (!stream || !expected)
                return;
        check(gcdump_heap_new(&c.heap) == 0);
        gcdump_heap_set_seed(c.heap, 0x9e3779b97f4a7c15ULL); /* as dsctl, which draws one: the same table */
        check(nettrace_parser_new(&callbacks, &c, &p) == 0);
        check(nettrace_feed(p, stream, size) == 0);
        check(nettrace_finish(p) == 0);
        check(c.errors == 0);
        check(c.taken >= min_events);
        printf("# %s: %u events taken, %u errors\n", name, c.taken, c.errors);
        check(gcdump_heap_dumped(c.heap));
        check(gcdump_heap_report(c.heap, &r) == 0);
        check(r.n_types >= min_types && !r.truncated);
        text = report_text(&r);
        check(text && strcmp(text, expected) == 0);
        if (text && strcmp(text, expected) != 0)
                printf("# got:\n%s", text);
        check_sorted_by_total(&r);
        gcdump_report_done(&r);
        gcdump_heap_free(c.heap);
}

/* The real runtime's heap session (tests/data/nettrace/README.md). */
static void test_real_capture_reports_as_the_stock_tool(void) {
        check_as_the_stock_tool("gcdump", 20, 50);
}

/* A made-up one of every event read, roots of each kind, a static variable, a dependent handle, a type
 * without a name, an unknown type, a big object, and a module named before any GC (not taken). */
static void test_made_up_session_reports_as_the_stock_tool(void) {
        check_as_the_stock_tool("gcdump-made-up", 10, 2);
}

/* ---- the .gcdump, read back ---- */

typedef struct Bytes {
        uint8_t *p;
        size_t n, cap;
} Bytes;

static int collect(const void *data, size_t size, void *userdata) {
        Bytes *b = userdata;

        if (b->n + size > b->cap) {
                b->cap = (b->n + size) * 2;
                b->p = realloc(b->p, b->cap);
                if (!b->p)
                        return -ENOMEM;
        }
        memcpy(b->p + b->n, data, size);
        b->n += size;
        return 0;
}

typedef struct Reader {
        const uint8_t *p;
        size_t n, at;
        bool bad;
} Reader;

static uint64_t rd(Reader *r, unsigned size) {
        uint64_t v = 0;

        if (r->at + size > r->n) {
                r->bad = true;
                return 0;
        }
        for (unsigned i = 0; i < size; i++)
                v |= (uint64_t)r->p[r->at + i] << (8 * i);
        r->at += size;
        return v;
}

/* A string as the writer wrote it (a count of UTF-16 units, each 1 to 3 bytes); kept when ASCII. */
static char *rd_string(Reader *r) {
        int32_t units = (int32_t)rd(r, 4);
        char *s;

        if (units < 0 || r->bad)
                return NULL;
        s = calloc((size_t)units + 1, 1);
        for (int32_t i = 0; s && i < units && !r->bad; i++) {
                uint8_t b = (uint8_t)rd(r, 1);
                s[i] = (char)b;
                if (b >= 0xe0)
                        rd(r, 2);
                else if (b >= 0xc0)
                        rd(r, 1);
        }
        return s;
}

static bool rd_expect(Reader *r, const char *bytes, size_t n) {
        bool ok = r->at + n <= r->n && memcmp(r->p + r->at, bytes, n) == 0;

        r->at += n;
        return ok;
}

static int32_t rd_compressed(const uint8_t *p, size_t n, size_t at) {
        uint32_t v = 0;

        for (int k = 0; k < 5 && at + k < n; k++) {
                v = v << 7 | (p[at + k] & 0x7f);
                if (!(p[at + k] & 0x80))
                        return (int32_t)(v << (32 - 7 * (k + 1))) >> (32 - 7 * (k + 1));
        }
        return -1;
}

static void test_written_file_reads_back(void) {
        NettraceCallbacks callbacks = { .header = on_header, .event = on_event };
        _cleanup_free_ char *stream = NULL;
        _cleanup_(nettrace_parser_freep) NettraceParser *p = NULL;
        Capture c = {};
        GcdumpReport report = {};
        Bytes file = {};
        Reader r;
        size_t size;
        int32_t n_types, n_nodes, blob_size, root;
        char **names = NULL;
        uint32_t *counts = NULL, trailer, table;
        const uint8_t *blob;

        stream = load("gcdump.nettrace", &size);
        check(stream && gcdump_heap_new(&c.heap) == 0 && nettrace_parser_new(&callbacks, &c, &p) == 0);
        if (!stream)
                return;
        check(nettrace_feed(p, stream, size) == 0);
        check(gcdump_heap_write(c.heap, "dsctl", collect, &file) == 0);
        check(gcdump_heap_report(c.heap, &report) == 0);
        r = (Reader){ .p = file.p, .n = file.n };
        check(rd_expect(&r, "\x14\0\0\0!FastSerialization.1", 24));
        check(rd_expect(&r, "\x04\x04\x01\x0a\0\0\0\x08\0\0\0\x0a\0\0\0GCHeapDump\x06", 26));
        check(rd_expect(&r, "\x04\x04\x01\x01\0\0\0\0\0\0\0\x12\0\0\0Graphs.MemoryGraph\x06", 34));
        check((int64_t)rd(&r, 8) == report.total_size);
        root = (int32_t)rd(&r, 4);
        n_types = (int32_t)rd(&r, 4);
        check(n_types > 100 && n_types < 100000);
        names = calloc((size_t)n_types, sizeof(char *));
        counts = calloc((size_t)n_types, sizeof(uint32_t));
        for (int32_t i = 0; names && i < n_types && !r.bad; i++) {
                names[i] = rd_string(&r);
                rd(&r, 4);
                free(rd_string(&r));
        }
        check(names && names[0] && strcmp(names[0], "UNDEFINED") == 0);
        n_nodes = (int32_t)rd(&r, 4);
        check(n_nodes == (int32_t)report.objects && root >= 0 && root < n_nodes);
        size_t labels_at = r.at;
        r.at += 4 * (size_t)n_nodes;
        blob_size = (int32_t)rd(&r, 4);
        blob = r.p + r.at;
        check(!r.bad && blob_size > 0 && r.at + (size_t)blob_size < r.n);
        r.at += (size_t)blob_size;
        /* every node's definition: its type, counted */
        for (int32_t i = 0; counts && i < n_nodes && !r.bad; i++) {
                Reader l = { .p = file.p, .n = file.n, .at = labels_at + 4 * (size_t)i };
                uint32_t label = (uint32_t)rd(&l, 4);
                int32_t type = label < (uint32_t)blob_size ? rd_compressed(blob, (size_t)blob_size, label) >> 1 : -1;
                check(type >= 0 && type < n_types);
                if (type >= 0 && type < n_types)
                        counts[type]++;
        }
        /* the table's rows are types of the file with as many nodes */
        for (size_t i = 0; names && counts && i < report.n_types; i++) {
                bool found = false;
                for (int32_t t = 0; t < n_types && !found; t++)
                        found = names[t] && strcmp(names[t], report.types[i].name) == 0 && counts[t] == report.types[i].count;
                check(found);
        }
        check((int32_t)rd(&r, 4) == n_nodes);
        r.at += 8 * (size_t)n_nodes;
        check(rd_expect(&r, "\x08\x01\x06", 3));
        /* the trailer: the last 4 bytes say where it is; it says where the forward references are */
        trailer = get_le32(file.p + file.n - 4);
        check(trailer + 8 == file.n);
        table = get_le32(file.p + trailer);
        check(table + 8 == trailer && get_le32(file.p + table) == 1);
        check(file.p[get_le32(file.p + table + 4)] == 0x0d); /* the skip region ends at CreationTool's tag */
        for (int32_t i = 0; names && i < n_types; i++)
                free(names[i]);
        free(names);
        free(counts);
        free(file.p);
        gcdump_report_done(&report);
        gcdump_heap_free(c.heap);
}

/* ---- made-up events ---- */

typedef struct Payload {
        uint8_t bytes[4096];
        size_t n;
} Payload;

static void put(Payload *p, uint64_t v, unsigned size) {
        for (unsigned i = 0; i < size; i++)
                p->bytes[p->n++] = (uint8_t)(v >> (8 * i));
}

static void put_name(Payload *p, const char *s) {
        for (; *s; s++)
                put(p, (uint8_t)*s, 2);
        put(p, 0, 2);
}

static int add(GcdumpHeap *h, uint32_t event_id, const Payload *p) {
        NettraceMetadata m = { .provider = (char *)"Microsoft-Windows-DotNETRuntime", .event_id = event_id };
        NettraceEvent e = { .metadata = &m, .payload = p->bytes, .payload_size = p->n };

        return gcdump_heap_add(h, &e);
}

static int gc(GcdumpHeap *h, uint32_t event_id, uint32_t count, uint32_t depth, uint32_t reason, uint32_t type) {
        Payload p = {};

        put(&p, count, 4);
        put(&p, depth, 4);
        put(&p, reason, 4);
        put(&p, type, 4);
        put(&p, 0, 2);
        return add(h, event_id, &p);
}

static void type_value(Payload *p, uint64_t id, uint64_t module, uint32_t flags, const char *name) {
        put(p, id, 8);
        put(p, module, 8);
        put(p, 0x20, 4);     /* TypeNameID */
        put(p, flags, 4);
        put(p, 0x12, 1);     /* CorElementType */
        put_name(p, name);
        put(p, 1, 4);        /* a type parameter */
        put(p, 0x9999, 8);
}

static void node_value(Payload *p, uint64_t address, uint64_t size, uint64_t type, uint64_t edges) {
        put(p, address, 8);
        put(p, size, 8);
        put(p, type, 8);
        put(p, edges, 8);
}

static void block_header(Payload *p, uint32_t count) {
        put(p, 0, 4);        /* Index */
        put(p, count, 4);
        put(p, 0, 2);        /* ClrInstanceID */
}

static int module(GcdumpHeap *h, uint64_t id, uint32_t flags, const char *path) {
        Payload p = {};

        put(&p, id, 8);
        put(&p, 0x77, 8);
        put(&p, flags, 4);
        put(&p, 0, 4);
        put_name(&p, path);
        put_name(&p, "");
        return add(h, 152, &p);
}

/* Types 0x100 (List`1[System.Int32]), 0x200 (Byte[]); nodes: 0x1000 List (32 B, 2 references),
 * 0x2000 and 0x3000 arrays (24 B, and 5000 B: a big one), 0x4000 of a type never defined (16 B);
 * one stack root, one weak one. */
static int heap_of_four(GcdumpHeap *h, unsigned edges) {
        Payload types = {}, nodes = {}, refs = {}, roots = {};
        int r;

        put(&types, 2, 4);
        put(&types, 0, 2);
        type_value(&types, 0x100, 0xa0, 0, "System.Collections.Generic.List`1[System.Int32]");
        type_value(&types, 0x200, 0xa0, 0x8, "System.Byte[]");
        block_header(&nodes, 4);
        node_value(&nodes, 0x1000, 32, 0x100, 2);
        node_value(&nodes, 0x2000, 24, 0x200, 0);
        node_value(&nodes, 0x3000, 5000, 0x200, 0);
        node_value(&nodes, 0x4000, 16, 0x999, 0);
        block_header(&refs, edges);
        for (unsigned i = 0; i < edges; i++) {
                put(&refs, i == 1 ? 0x5000 : 0x2000, 8); /* 0x5000: an object no node describes */
                put(&refs, 0, 4);
        }
        block_header(&roots, 2);
        put(&roots, 0x1000, 8);
        put(&roots, 0, 1);   /* Stack */
        put(&roots, 0, 4);
        put(&roots, 0, 8);
        put(&roots, 0x4000, 8);
        put(&roots, 2, 1);   /* Handle */
        put(&roots, 0x2, 4); /* WeakRef: not a root */
        put(&roots, 0, 8);

        if ((r = add(h, 15, &types)) != 0 || (r = add(h, 18, &nodes)) != 0 || (r = add(h, 19, &refs)) != 0 ||
            (r = add(h, 16, &roots)) != 0)
                return r;
        return 0;
}

static void test_made_up_heap(void) {
        _cleanup_(gcdump_heap_freep) GcdumpHeap *h = NULL;
        _cleanup_free_ char *text = NULL;
        GcdumpReport r = {};

        check(gcdump_heap_new(&h) == 0);
        /* before any GC the stock reader knows no process, and takes no module of it */
        check(module(h, 0xa0, 0, "/early/Wrong.dll") == 0);
        /* a background GC and a GC not induced are not the dump; nodes before its start are left out */
        check(gc(h, 1, 7, 2, 1, 1) == 0);
        check(module(h, 0xa0, 0x2, "/usr/share/dotnet/System.Private.CoreLib.ni.dll") == 0); /* native: no name */
        check(module(h, 0xa0, 0, "/usr/share/dotnet/System.Private.CoreLib.dll") == 0);
        check(module(h, 0xa0, 0, "/usr/share/dotnet/Later.dll") == 0); /* the first name stays */
        check(gc(h, 1, 8, 2, 0, 0) == 0);
        check(heap_of_four(h, 2) == 0);
        check(!gcdump_heap_dumped(h));
        check(gcdump_heap_report(h, &r) == GCDUMP_E_NO_DUMP);
        check(gc(h, 1, 9, 2, 1, 0) == 0);
        check(!gcdump_heap_dumped(h));
        check(heap_of_four(h, 2) == 0);
        check(gc(h, 2, 8, 2, 0, 0) == 0);  /* another GC's end */
        check(!gcdump_heap_dumped(h));
        check(gc(h, 2, 9, 2, 0, 0) == 0);
        check(gcdump_heap_dumped(h));
        check(gcdump_heap_report(h, &r) == 0);
        check(r.references == 6); /* 2 references, 3 groups under the root, 1 stack root */
        text = report_text(&r);
        check(text && strcmp(text,
                "          5,072  GC Heap bytes\n"
                /* 0x1000..0x5000, and [.NET Roots], [static vars], [local vars], [COM/WinRT Objects] */
                "              9  GC Heap objects\n"
                "\n"
                "   Object Bytes     Count  Type\n"
                "          5,000         1  System.Byte[] (Bytes > 1K)  [System.Private.CoreLib.dll]\n"
                "             32         1  System.Collections.Generic.List<System.Int32>  [System.Private.CoreLib.dll]\n"
                "             24         1  System.Byte[]  [System.Private.CoreLib.dll]\n"
                "             16         1  UNKNOWN 0x999\n") == 0);
        gcdump_report_done(&r);
}

/* Types of several objects, whose first object's size, total bytes, count and name order them
 * differently: Zeta.Small 3 x 16 B, Alpha.Big 1 x 100 B, System.Byte[] 24 + 500 B, Beta.Tie 2 x 24 B
 * (as many bytes as Zeta.Small, fewer objects). One stack root. */
static int heap_of_four_types(GcdumpHeap *h) {
        static const struct { uint64_t address, size, type; } objects[] = {
                { 0x1000, 16, 0x100 }, { 0x2000, 100, 0x200 }, { 0x3000, 24, 0x300 }, { 0x4000, 16, 0x100 },
                { 0x5000, 500, 0x300 }, { 0x6000, 24, 0x400 }, { 0x7000, 16, 0x100 }, { 0x8000, 24, 0x400 },
        };
        Payload types = {}, nodes = {}, roots = {};
        int r;

        put(&types, 4, 4);
        put(&types, 0, 2);
        type_value(&types, 0x100, 0xa0, 0, "Zeta.Small");
        type_value(&types, 0x200, 0xa0, 0, "Alpha.Big");
        type_value(&types, 0x300, 0xa0, 0x8, "System.Byte[]");
        type_value(&types, 0x400, 0xa0, 0, "Beta.Tie");
        block_header(&nodes, 8);
        for (size_t i = 0; i < 8; i++)
                node_value(&nodes, objects[i].address, objects[i].size, objects[i].type, 0);
        block_header(&roots, 1);
        put(&roots, 0x1000, 8);
        put(&roots, 0, 1);   /* Stack */
        put(&roots, 0, 4);
        put(&roots, 0, 8);
        if ((r = add(h, 15, &types)) != 0 || (r = add(h, 18, &nodes)) != 0 || (r = add(h, 16, &roots)) != 0)
                return r;
        return 0;
}

/* The names of @r's rows, in order, joined by spaces. */
static void row_names(const GcdumpReport *r, char *buf, size_t size) {
        size_t at = 0;

        buf[0] = 0;
        for (size_t i = 0; i < r->n_types && at < size; i++)
                at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? " " : "", r->types[i].name);
}

static void check_order(GcdumpHeap *h, GcdumpSort sort, const char *want) {
        GcdumpReport r = {};
        char names[256];

        check(gcdump_heap_report(h, &r) == 0);
        check(gcdump_report_sort(&r, sort) == 0);
        row_names(&r, names, sizeof(names));
        check(strcmp(names, want) == 0);
        if (strcmp(names, want) != 0)
                printf("# --sort %s: got '%s', want '%s'\n", gcdump_sort_to_string(sort), names, want);
        gcdump_report_done(&r);
}

/* dsctl gcdump --sort: dumpheap -stat's order by default (total bytes, the biggest last), count, name, and
 * dotnet-gcdump report's own (the first object's size, the biggest first) */
static void test_report_orders(void) {
        _cleanup_(gcdump_heap_freep) GcdumpHeap *h = NULL;
        _cleanup_free_ char *text = NULL;
        GcdumpReport r = {};

        check(gcdump_heap_new(&h) == 0);
        check(gc(h, 1, 9, 2, 1, 0) == 0);
        check(heap_of_four_types(h) == 0);
        check(gc(h, 2, 9, 2, 0, 0) == 0);
        check(gcdump_heap_dumped(h));

        check_order(h, GCDUMP_SORT_STOCK, "Alpha.Big System.Byte[] Beta.Tie Zeta.Small");
        check_order(h, GCDUMP_SORT_SIZE, "Beta.Tie Zeta.Small Alpha.Big System.Byte[]");
        check_order(h, GCDUMP_SORT_COUNT, "Alpha.Big Beta.Tie System.Byte[] Zeta.Small");
        check_order(h, GCDUMP_SORT_NAME, "Alpha.Big Beta.Tie System.Byte[] Zeta.Small");

        /* dsctl's own orders print the bytes of all of a type's objects */
        check(gcdump_heap_report(h, &r) == 0);
        check(r.n_types == 4);
        for (size_t i = 0; i < r.n_types; i++)
                if (strcmp(r.types[i].name, "System.Byte[]") == 0)
                        check(r.types[i].size == 24 && r.types[i].count == 2 && r.types[i].total_size == 524);
        check(gcdump_report_sort(&r, GCDUMP_SORT_SIZE) == 0);
        {
                char *buf = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&buf, &size);

                check(f && gcdump_report_print(f, &r, GCDUMP_SORT_SIZE) == 0);
                if (f)
                        fclose(f);
                text = buf;
        }
        check(text && strcmp(text,
                "            720  GC Heap bytes\n"
                /* the 8 objects, and [.NET Roots], [static vars], [local vars], [COM/WinRT Objects] */
                "             12  GC Heap objects\n"
                "\n"
                "    Total Bytes     Count  Type\n"
                /* as many bytes as Zeta.Small, fewer objects: before it */
                "             48         2  Beta.Tie  [Module(0xa0)]\n"
                "             48         3  Zeta.Small  [Module(0xa0)]\n"
                "            100         1  Alpha.Big  [Module(0xa0)]\n"
                "            524         2  System.Byte[]  [Module(0xa0)]\n") == 0);
        gcdump_report_done(&r);

        check(gcdump_sort_from_string("size") == GCDUMP_SORT_SIZE);
        check(gcdump_sort_from_string("stock") == GCDUMP_SORT_STOCK);
        check(gcdump_sort_from_string("Size") == _GCDUMP_SORT_INVALID);
        check(gcdump_sort_from_string("") == _GCDUMP_SORT_INVALID);
}

/*
 * Regions walked out of address order: 0x1000 and 0x3000 in one increasing run, which passes over
 * 0x2000, sent later. Each reference to a node's address is that node, whichever run holds it: no
 * address is counted twice (as a node and as an object only referenced).
 */
static void test_interleaved_regions_find_every_node(void) {
        _cleanup_(gcdump_heap_freep) GcdumpHeap *h = NULL;
        Payload types = {}, first = {}, second = {}, refs = {};
        GcdumpReport r = {};

        check(gcdump_heap_new(&h) == 0);
        check(gc(h, 1, 3, 2, 1, 0) == 0);
        put(&types, 1, 4);
        put(&types, 0, 2);
        type_value(&types, 0x100, 0xa0, 0, "T");
        block_header(&first, 3);
        node_value(&first, 0x1000, 24, 0x100, 2);
        node_value(&first, 0x3000, 24, 0x100, 1);
        node_value(&first, 0x3100, 24, 0x100, 0);
        block_header(&second, 2);
        node_value(&second, 0x2000, 24, 0x100, 1);
        node_value(&second, 0x2100, 24, 0x100, 0);
        block_header(&refs, 4);
        for (uint64_t target = 0x2100; target != 0; target = target == 0x2100 ? 0x3100 : target == 0x3100 ? 0x2000 :
                                                                 target == 0x2000 ? 0x3000 : 0) {
                put(&refs, target, 8);
                put(&refs, 0, 4);
        }
        check(add(h, 15, &types) == 0 && add(h, 18, &first) == 0 && add(h, 18, &second) == 0 && add(h, 19, &refs) == 0);
        check(gc(h, 2, 3, 2, 0, 0) == 0);
        check(gcdump_heap_report(h, &r) == 0);
        /* the five nodes, and [.NET Roots] with its two groups */
        check(r.objects == 5 + 3 && r.n_types == 1 && r.types[0].count == 5);
        check(gcdump_heap_address_probes(h) == 0); /* found in the runs, not in a table */
        gcdump_report_done(&r);
}

/* A node asks for more references than came, or fewer than a block holds: the dump is broken. */
static void test_references_must_add_up(void) {
        for (unsigned edges = 1; edges <= 3; edges += 2) {
                _cleanup_(gcdump_heap_freep) GcdumpHeap *h = NULL;
                GcdumpReport r = {};

                check(gcdump_heap_new(&h) == 0);
                check(gc(h, 1, 3, 2, 1, 0) == 0);
                check(heap_of_four(h, edges) == 0);
                check(gc(h, 2, 3, 2, 0, 0) == 0);
                check(gcdump_heap_report(h, &r) == GCDUMP_E_BROKEN);
        }
}

/* A GC that reported nothing is not the dump: the next induced one may be. */
static void test_empty_gc_is_not_the_dump(void) {
        _cleanup_(gcdump_heap_freep) GcdumpHeap *h = NULL;
        GcdumpReport r = {};

        check(gcdump_heap_new(&h) == 0);
        check(gc(h, 1, 3, 2, 1, 0) == 0);
        check(gc(h, 2, 3, 2, 0, 0) == 0);
        check(!gcdump_heap_dumped(h));
        check(gc(h, 1, 4, 2, 1, 0) == 0);
        check(heap_of_four(h, 2) == 0);
        check(gc(h, 2, 4, 2, 0, 0) == 0);
        check(gcdump_heap_dumped(h));
        check(gcdump_heap_report(h, &r) == 0 && r.n_types == 4);
        gcdump_report_done(&r);
}

/* Every payload cut short is malformed, never read past its end. */
static void test_cut_payloads_are_malformed(void) {
        static const uint32_t ids[] = { 15, 16, 18, 19 };
        Payload full = {};

        for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
                full.n = 0;
                if (ids[k] == 15) {
                        put(&full, 1, 4);
                        put(&full, 0, 2);
                        type_value(&full, 0x100, 0xa0, 0, "T");
                } else {
                        block_header(&full, 1);
                        node_value(&full, 0x1000, 32, 0x100, 0); /* long enough for any of them */
                }
                for (size_t cut = 0; cut + (ids[k] == 15 ? 0 : 11) < full.n; cut++) {
                        _cleanup_(gcdump_heap_freep) GcdumpHeap *h = NULL;
                        Payload p = full;
                        int r;

                        p.n = cut;
                        check(gcdump_heap_new(&h) == 0);
                        check(gc(h, 1, 3, 2, 1, 0) == 0);
                        r = add(h, ids[k], &p);
                        if (ids[k] == 15 || cut < 10 + (ids[k] == 18 ? 32 : ids[k] == 19 ? 12 : 21))
                                check(r == GCDUMP_E_MALFORMED);
                }
        }
}

/* ---- addresses chosen to collide ---- */

/* The inverse of gcdump-heap.c's mix64(): an address whose unseeded hash is @h. */
static uint64_t inverse_odd(uint64_t c) {
        uint64_t inv = c;

        for (int i = 0; i < 6; i++)
                inv *= 2 - c * inv;
        return inv;
}

static uint64_t unmix64(uint64_t x) {
        x ^= x >> 33;
        x *= inverse_odd(0xc4ceb9fe1a85ec53ULL);
        x ^= x >> 33;
        x *= inverse_odd(0xff51afd7ed558ccdULL);
        return x ^ (x >> 33);
}

/*
 * N nodes whose addresses all hash, unseeded, to slot 0 of any table up to 2^20 slots, and one
 * more at the first one's address: runs that overlap, so node addresses are looked up in a table.
 * Each node references an address of that kind that no node has (those are always in a table),
 * and the nodes' TypeIDs are such ids too.
 */
static uint64_t probes_for_colliding_nodes(uint64_t seed, unsigned n) {
        _cleanup_(gcdump_heap_freep) GcdumpHeap *h = NULL;
        GcdumpReport r = {};
        uint64_t probes;

        check(gcdump_heap_new(&h) == 0);
        gcdump_heap_set_seed(h, seed);
        check(gc(h, 1, 3, 2, 1, 0) == 0);
        for (unsigned done = 0; done <= n;) {
                Payload nodes = {}, refs = {};
                unsigned k = n + 1 - done < 100 ? n + 1 - done : 100;

                block_header(&nodes, k);
                block_header(&refs, k);
                for (unsigned i = 0; i < k; i++, done++) {
                        node_value(&nodes, unmix64((uint64_t)(done < n ? done + 1 : 1) << 20), 24,
                                   unmix64((uint64_t)(3 * n + done + 1) << 20), 1);
                        put(&refs, unmix64((uint64_t)(n + done + 1) << 20), 8);
                        put(&refs, 0, 4);
                }
                check(add(h, 18, &nodes) == 0);
                check(add(h, 19, &refs) == 0);
        }
        check(gc(h, 2, 3, 2, 0, 0) == 0);
        /* the n nodes, the n + 1 addresses only referenced, and [.NET Roots] with its two groups */
        check(gcdump_heap_report(h, &r) == 0 && r.objects == 2 * n + 1 + 3);
        probes = gcdump_heap_address_probes(h);
        gcdump_report_done(&r);
        return probes;
}

/* A target that knows the hash makes every address probe the whole table; with the seed dsctl draws,
 * the same addresses spread. The count of slots looked at, not time, says which. */
static void test_chosen_addresses_do_not_collide_under_a_seed(void) {
        const unsigned n = 3000;
        uint64_t unseeded = probes_for_colliding_nodes(0, n), seeded = probes_for_colliding_nodes(0x5eed5eed1234ULL, n);

        printf("# %u colliding addresses: %llu probes unseeded, %llu seeded\n", n, (unsigned long long)unseeded,
               (unsigned long long)seeded);
        check(unseeded > (uint64_t)n * n / 4); /* the attack is real */
        check(seeded < (uint64_t)n * 4);
}

int main(void) {
        run_test(test_real_capture_reports_as_the_stock_tool);
        run_test(test_made_up_session_reports_as_the_stock_tool);
        run_test(test_written_file_reads_back);
        run_test(test_made_up_heap);
        run_test(test_report_orders);
        run_test(test_interleaved_regions_find_every_node);
        run_test(test_references_must_add_up);
        run_test(test_empty_gc_is_not_the_dump);
        run_test(test_cut_payloads_are_malformed);
        run_test(test_chosen_addresses_do_not_collide_under_a_seed);
        return tap_finish();
}
