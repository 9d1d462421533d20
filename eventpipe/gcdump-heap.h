/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The GC heap a gcdump session's events describe, as dotnet-gcdump reads
 * them (DotNetHeapDumpGraphReader): the runtime's GCBulkType, GCBulkNode,
 * GCBulkEdge and root events between the start and the end of the induced
 * gen-2 GC the session asked for, and the module events that name the
 * types' modules. From them, the type table dotnet-gcdump report prints:
 * the same types, counts, sizes, totals and order. Pure, no I/O; the events
 * come from the target, so every count is checked against the bytes present
 * and against the limits below, and memory grows only with events that came.
 * docs/gcdump.md tells the format and how the stock reader builds its graph.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "eventpipe/nettrace.h"

/* dotnet-gcdump's own bound: past it, the rest of the heap is left out (and not checked). */
#define GCDUMP_NODES_MAX 10000000u
#define GCDUMP_EDGES_MAX (64u << 20)        /* references kept */
#define GCDUMP_ROOTS_MAX (8u << 20)         /* roots, static variables and dependent handles kept */
#define GCDUMP_TYPES_MAX (1u << 20)         /* type definitions kept (GCBulkType values) */
#define GCDUMP_NAME_BYTES_MAX (64u << 20)   /* bytes of type, module and field names, summed */

/* The keywords of the heap session: GC, GCHeapDump, Type, GCHeapCollect (the GC is induced), GCHeapAndTypeNames */
#define GCDUMP_KEYWORDS 0x1980001ULL

enum {
        _GCDUMP_E_SUCCESS,
        GCDUMP_E_OTHER,      /* gcdump_heap_add(): no event the heap is read from */
        GCDUMP_E_MALFORMED,  /* an event of the heap whose payload is not what its layout says */
        GCDUMP_E_LIMIT,      /* beyond one of the limits above */
        GCDUMP_E_NO_DUMP,    /* gcdump_heap_report(): the stream holds no heap dump, or not its end */
        GCDUMP_E_BROKEN,     /* gcdump_heap_report(): the nodes ask for other references than came */
};

/* One row of the table: a type, its objects, the size of the first of them (dotnet-gcdump
 * report's "Object Bytes" is the type's size as its graph keeps it: that of the first node), and
 * the bytes of all of them (dotnet-dump's dumpheap -stat "TotalSize"). */
typedef struct GcdumpType {
        char *name;          /* as dotnet-gcdump names it: generics with <>, arrays [], big objects " (Bytes > 1K)" */
        char *module;        /* the module's file name (System.Private.CoreLib.dll); NULL: none shown */
        int32_t size;
        uint32_t count;
        int64_t total_size;
} GcdumpType;

typedef struct GcdumpReport {
        int64_t total_size;  /* "GC Heap bytes" */
        uint64_t objects;    /* "GC Heap objects": every node of the graph, roots' and referenced ones included */
        uint64_t references; /* "Total references" */
        bool truncated;      /* past GCDUMP_NODES_MAX: the rest left out, as dotnet-gcdump does */
        size_t n_types;
        GcdumpType *types;   /* in report order: size, then count, descending; ties in the graph's order
                              * (gcdump_report_sort() orders them otherwise) */
} GcdumpReport;

/*
 * The orders of the table. dsctl's default is dotnet-dump's dumpheap -stat
 * order: by the bytes of all of a type's objects, ascending, so that the
 * biggest is last, where a terminal leaves the eye.
 */
typedef enum GcdumpSort {
        GCDUMP_SORT_SIZE,   /* total_size ascending, then count, then name */
        GCDUMP_SORT_COUNT,  /* count ascending, then total_size, then name */
        GCDUMP_SORT_NAME,   /* name (bytewise), then module */
        GCDUMP_SORT_STOCK,  /* dotnet-gcdump report's: the first object's size, then count, descending */
        _GCDUMP_SORT_MAX,
        _GCDUMP_SORT_INVALID = -EINVAL,
} GcdumpSort;

/* "size", "count", "name", "stock"; _GCDUMP_SORT_INVALID for anything else */
GcdumpSort gcdump_sort_from_string(const char *s);
const char *gcdump_sort_to_string(GcdumpSort sort);
/* Orders @r's rows by @sort; rows equal under it keep the report's order. Return: 0, -ENOMEM. */
int gcdump_report_sort(GcdumpReport *r, GcdumpSort sort);

typedef struct GcdumpHeap GcdumpHeap;

int gcdump_heap_new(GcdumpHeap **ret);
GcdumpHeap *gcdump_heap_free(GcdumpHeap *h);
/* A random seed for its hash tables, drawn by the caller before the first event: the target chooses the
 * addresses, ids and names they hold, and must not be able to make them collide (0 until told). */
void gcdump_heap_set_seed(GcdumpHeap *h, uint64_t seed);
/* The trace's pointer size (4 or 8), which the payloads' addresses have; 8 until told. */
void gcdump_heap_set_pointer_size(GcdumpHeap *h, unsigned pointer_size);

/*
 * Return: 0 (kept, or of no use to the heap: an event outside the dump),
 * GCDUMP_E_OTHER, GCDUMP_E_MALFORMED, GCDUMP_E_LIMIT, -ENOMEM. After an
 * error the heap is as before the event.
 */
int gcdump_heap_add(GcdumpHeap *h, const NettraceEvent *e);
/* For tests: how many slots its tables of addresses and TypeIDs looked at past the first one of a key, in all. */
uint64_t gcdump_heap_address_probes(const GcdumpHeap *h);
/* The objects (nodes) of the dump's GC described so far: what dsctl's progress line counts. */
uint64_t gcdump_heap_objects(const GcdumpHeap *h);
/* The dump's GC has ended with nodes in it: what follows is only the rundown (module names). */
bool gcdump_heap_dumped(const GcdumpHeap *h);

/*
 * The type table of everything added. Return: 0, GCDUMP_E_NO_DUMP,
 * GCDUMP_E_BROKEN, GCDUMP_E_LIMIT, -ENOMEM. @ret is the caller's
 * (gcdump_report_done()). The first of gcdump_heap_report() and
 * gcdump_heap_write() to find the dump complete builds its graph; events
 * added after that change nothing of it.
 */
int gcdump_heap_report(GcdumpHeap *h, GcdumpReport *ret);
void gcdump_report_done(GcdumpReport *r);

/* Takes @size bytes of the file; return 0, or a negative errno that ends the writing. */
typedef int (*GcdumpWrite)(const void *data, size_t size, void *userdata);

/*
 * The heap as a .gcdump file, as dotnet-gcdump convert writes it, which
 * dotnet-gcdump report (and PerfView) read; @tool names its writer. Return:
 * 0, GCDUMP_E_NO_DUMP, GCDUMP_E_BROKEN, GCDUMP_E_LIMIT (the file would pass
 * 2 GiB), -ENOMEM, or @write's error.
 */
int gcdump_heap_write(GcdumpHeap *h, const char *tool, GcdumpWrite write, void *userdata);

/*
 * gcdump_strerror() - why a heap gave no type table or .gcdump, as dsctl gcdump says it and the
 * agent records it: a GCDUMP_E_* code as its sentence (GCDUMP_E_OTHER as GCDUMP_E_MALFORMED's), a
 * negative errno as strerror() says it. Never NULL; the string is static, or strerror()'s.
 */
const char *gcdump_strerror(int r);

DEFINE_TRIVIAL_CLEANUP_FUNC(GcdumpHeap *, gcdump_heap_free);
