/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The GC heap of a gcdump session, built from the runtime's bulk events as dotnet-gcdump builds it, and
 * its type table (gcdump-heap.h); its graph is what gcdump-file.c writes as a .gcdump (gcdump-graph.h),
 * in the containers of gcdump-chunks.h. Pure: dsctl reads the stream and writes the file */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "common/array.h"
#include "eventpipe/cursor.h"
#include "eventpipe/gcdump-graph.h"
#include "eventpipe/hash-map.h"
#include "eventpipe/varint.h"

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN_PROVIDER "Microsoft-Windows-DotNETRuntimeRundown"

/* Event ids of the runtime's provider (ClrEtwAll.man) */
#define EV_GC_START 1
#define EV_GC_END 2
#define EV_BULK_TYPE 15
#define EV_BULK_ROOT_EDGE 16
#define EV_BULK_ROOT_CWT 17
#define EV_BULK_NODE 18
#define EV_BULK_EDGE 19
#define EV_BULK_ROOT_STATIC_VAR 38
#define EV_MODULE_DC_START_V2 149
#define EV_MODULE_DC_END_V2 150
#define EV_MODULE_LOAD 152
#define EV_MODULE_UNLOAD 153
#define EV_GEN_AWARE_BEGIN 206
#define EV_GEN_AWARE_END 207
/* and of its rundown provider */
#define EV_RUNDOWN_MODULE_DC_START 153
#define EV_RUNDOWN_MODULE_DC_END 154

#define GC_REASON_INDUCED 1
#define GC_TYPE_NON_CONCURRENT 0
#define TYPE_FLAG_COM_OBJECT 0x4
#define TYPE_FLAG_ARRAY 0x8
#define TYPE_FLAG_MODULE_BASE_ADDRESS 0x10
#define ROOT_KIND_STACK 0
#define ROOT_KIND_FINALIZER 1
#define ROOT_KIND_HANDLE 2
#define ROOT_FLAG_PINNING 0x1
#define ROOT_FLAG_WEAK 0x2
#define ROOT_FLAG_REF_COUNTED 0x8
#define STATIC_FLAG_THREAD_LOCAL 0x1
#define MODULE_FLAG_NATIVE 0x2
/* objects bigger than this get a type of their own, named by their size's decade */
#define BIG_OBJECT 1000

/* ---- what the events say, kept until the end ---- */

typedef struct TypeDef {
        uint64_t id, module_id;
        uint32_t name_id, flags;
        char *name;              /* as the runtime names it */
} TypeDef;

/*
 * Nodes come by increasing address within each heap region: a run of them is kept as offsets from
 * its first address (4 bytes a node), so that an address is found by binary search, with no table
 * of all of them (graph_find_node()).
 */
typedef struct AddressRun {
        uint64_t base, last;     /* its first and last address */
        uint32_t first, count;   /* its nodes */
} AddressRun;

/* A run's nodes that no other run's address falls between: all of them, unless runs interleave (a
 * run may pass over a gap that a later region fills). In address order, the pieces are disjoint. */
typedef struct AddressPiece {
        uint64_t low, high;      /* its first and last address */
        uint64_t base;           /* its run's: the offsets are from it */
        uint32_t first, count;   /* its nodes */
} AddressPiece;

typedef struct StaticVar {
        uint64_t object, type_id;
        uint32_t flags;
        char *field;
} StaticVar;

/* dotnet-gcdump's pseudo-nodes for the roots: "[.NET Roots]" and the groups under it */
typedef struct Builder {
        uint32_t parent;         /* UINT32_MAX: the root */
        char *name;
} Builder;

typedef struct GraphType {
        char *name;       /* NULL: a type without one (the report leaves it out) */
        char *module;     /* the module's path, or NULL */
        int32_t size;     /* of its first node; -1 before */
        uint32_t count;
        int64_t total;    /* of all its nodes */
} GraphType;

typedef struct Graph {
        GraphType *types;
        size_t n_types, cap_types;
        StrMap interned;  /* "MODULE!NAME" or "NAME" -> type */
        StrMap big;       /* "NAME (Bytes > 1K)" -> type */
        U64Map by_id;     /* TypeID -> type */
} Graph;

/* A root's reference: pseudo-node @builder references the object at @address. */
typedef struct RootRef {
        uint32_t builder;
        uint64_t address;
} RootRef;

struct GcdumpHeap {
        unsigned pointer_size;
        uint64_t seed;           /* of every hash table (gcdump_heap_set_seed()) */
        /* the reader's state: which GC is the dump, and whether its events are being taken */
        bool seen_start, taking;
        bool process_known;      /* a GCStart came: the stock reader takes types and modules only after one */
        uint32_t gc_id;
        uint64_t node_blocks, edge_blocks, type_blocks;

        TypeDef *types;
        size_t n_types, cap_types;
        /* the nodes in the order they came: addresses in runs, the rest of each in node_info */
        uint32_t *node_offsets;  /* a node's address less its run's base */
        size_t n_nodes, cap_nodes;
        AddressRun *runs;        /* in the nodes' order */
        size_t n_runs, cap_runs;
        Chunks node_info;        /* each node: its TypeID's index in type_ids, its size (zigzag), its references */
        U64Map type_ids;         /* TypeID -> index in type_id_values */
        uint64_t *type_id_values;
        size_t n_type_ids, cap_type_ids;
        bool nodes_cut;          /* nodes past GCDUMP_NODES_MAX: never looked at */
        Chunks edge_targets;     /* each reference's address less the one before it (zigzag) */
        uint64_t last_target;
        size_t n_edges;
        uint32_t *edge_block_sizes;
        size_t n_edge_block_sizes, cap_edge_block_sizes;
        StaticVar *statics;
        size_t n_statics, cap_statics;
        size_t roots;            /* root references kept, for GCDUMP_ROOTS_MAX */
        size_t name_bytes;

        U64Map modules;          /* module id -> index in module_paths */
        char **module_paths;
        size_t n_module_paths, cap_module_paths;

        /* the roots' pseudo-nodes */
        Builder *builders;
        size_t n_builders, cap_builders;
        StrMap builder_names;    /* "PARENT NAME" -> builder */
        RootRef *root_refs;
        size_t n_root_refs, cap_root_refs;
        uint64_t references;

        /* the graph, built once from all of the above (gcdump_graph_build()) */
        bool built;
        int build_error;
        Graph graph;
        /* each address seen gets the next index (MemoryGraph.GetNodeIndex()); the pseudo-nodes follow */
        size_t n_indexes;
        bool by_map;             /* the runs overlap: node addresses are looked up in `addresses` instead */
        AddressPiece *pieces;    /* every node's address, in pieces of runs, in address order */
        size_t n_pieces, cap_pieces;
        U64Map addresses;        /* by_map: a node's address -> the last node with it */
        uint32_t *index_of;      /* during the build, a node (the last with its address) -> its index, or UINT32_MAX */
        U64Map others;           /* an address no node has -> its place in other_addresses */
        uint64_t *other_addresses;
        uint32_t *other_indexes;
        size_t n_others, cap_others, cap_other_indexes;
        uint32_t *node_at;       /* after the build, an index -> its node, or n_nodes + its place in other_addresses */
        Chunks blob;             /* the nodes' definitions, as the .gcdump keeps them */
        size_t n_defined;        /* nodes defined, from the first (fewer when truncated) */
        uint32_t *definitions;   /* blob offset of node k * DEFINITION_STRIDE's definition */
        uint32_t *labels;        /* by_map: index -> offset of its (last) definition; 0: undefined */
        size_t cap_labels;
        uint32_t *builder_labels; /* pseudo-node -> offset of its definition */
        int64_t total_size;
        bool truncated;
};

static void graph_done(Graph *g);

int gcdump_heap_new(GcdumpHeap **ret) {
        GcdumpHeap *h = calloc(1, sizeof(*h));

        if (!h)
                return -ENOMEM;
        h->pointer_size = 8;
        *ret = h;
        return 0;
}

GcdumpHeap *gcdump_heap_free(GcdumpHeap *h) {
        if (!h)
                return NULL;
        for (size_t i = 0; i < h->n_types; i++)
                free(h->types[i].name);
        free(h->types);
        free(h->node_offsets);
        free(h->runs);
        chunks_done(&h->node_info);
        u64map_done(&h->type_ids);
        free(h->type_id_values);
        chunks_done(&h->edge_targets);
        free(h->edge_block_sizes);
        for (size_t i = 0; i < h->n_statics; i++)
                free(h->statics[i].field);
        free(h->statics);
        for (size_t i = 0; i < h->n_module_paths; i++)
                free(h->module_paths[i]);
        free(h->module_paths);
        u64map_done(&h->modules);
        for (size_t i = 0; i < h->n_builders; i++)
                free(h->builders[i].name);
        free(h->builders);
        strmap_done(&h->builder_names);
        free(h->root_refs);
        graph_done(&h->graph);
        free(h->pieces);
        u64map_done(&h->addresses);
        free(h->index_of);
        u64map_done(&h->others);
        free(h->other_addresses);
        free(h->other_indexes);
        free(h->node_at);
        chunks_done(&h->blob);
        free(h->definitions);
        free(h->labels);
        free(h->builder_labels);
        free(h);
        return NULL;
}

void gcdump_heap_set_seed(GcdumpHeap *h, uint64_t seed) {
        h->seed = h->modules.seed = h->addresses.seed = h->others.seed = h->type_ids.seed = h->builder_names.seed = seed;
        h->graph.interned.seed = h->graph.big.seed = h->graph.by_id.seed = seed;
}

void gcdump_heap_set_pointer_size(GcdumpHeap *h, unsigned pointer_size) {
        if (pointer_size == 4 || pointer_size == 8)
                h->pointer_size = pointer_size;
}

uint64_t gcdump_heap_address_probes(const GcdumpHeap *h) {
        return h->addresses.probes + h->others.probes + h->type_ids.probes;
}

uint64_t gcdump_heap_objects(const GcdumpHeap *h) {
        return h->n_nodes;
}

bool gcdump_heap_dumped(const GcdumpHeap *h) {
        return h->seen_start && !h->taking;
}

static bool take_pointer(const GcdumpHeap *h, Cursor *c, uint64_t *ret) {
        uint32_t v;

        if (h->pointer_size == 8)
                return take_u64(c, ret);
        if (!take_u32(c, &v))
                return false;
        *ret = v;
        return true;
}

static int take_name(GcdumpHeap *h, Cursor *c, char **ret) {
        char *s;
        int r = take_utf16z(c, &s);

        if (r == CURSOR_E_TOO_LONG)
                return GCDUMP_E_LIMIT;
        if (r != 0)
                return r < 0 ? r : GCDUMP_E_MALFORMED;
        if (strlen(s) > GCDUMP_NAME_BYTES_MAX - h->name_bytes) {
                free(s);
                return GCDUMP_E_LIMIT;
        }
        h->name_bytes += strlen(s);
        *ret = s;
        return 0;
}

/* MemoryNodeBuilder.FindOrCreateChild(): the pseudo-node @name under @parent (UINT32_MAX: the root). */
static int builder(GcdumpHeap *h, uint32_t parent, const char *name, uint32_t *ret) {
        _cleanup_free_ char *key = NULL;
        uint32_t found;
        int r;

        if (h->n_builders == 0) {
                /* "[.NET Roots]" itself, made with the graph */
                if (array_reserve((void **)&h->builders, &h->cap_builders, 0, sizeof(Builder)) < 0 ||
                    !(h->builders[0].name = strdup("[.NET Roots]")))
                        return -ENOMEM;
                h->builders[0].parent = UINT32_MAX;
                h->n_builders = 1;
        }
        if (parent == UINT32_MAX) {
                *ret = 0;
                if (!name)
                        return 0;
                parent = 0;
        }
        if (asprintf(&key, "%" PRIu32 " %s", parent, name) < 0)
                return -ENOMEM;
        found = strmap_get(&h->builder_names, key);
        if (found != UINT32_MAX) {
                *ret = found;
                return 0;
        }
        if (h->n_builders >= GCDUMP_ROOTS_MAX)
                return GCDUMP_E_LIMIT;
        if (array_reserve((void **)&h->builders, &h->cap_builders, h->n_builders, sizeof(Builder)) < 0)
                return -ENOMEM;
        h->builders[h->n_builders] = (Builder){ .parent = parent, .name = strdup(name) };
        if (!h->builders[h->n_builders].name)
                return -ENOMEM;
        r = strmap_put(&h->builder_names, key, (uint32_t)h->n_builders);
        if (r < 0) {
                free(h->builders[h->n_builders].name);
                return r;
        }
        *ret = (uint32_t)h->n_builders++;
        h->references++; /* the parent's reference to it */
        return 0;
}

/* A root's reference to the object at @address, under the pseudo-node @parent/@name. Its address gets
 * its index when the graph is built, before the nodes', in the order of the roots (graph_see_roots()). */
static int add_root(GcdumpHeap *h, uint32_t parent, const char *name, uint64_t address) {
        uint32_t b;
        int r;

        if (h->roots >= GCDUMP_ROOTS_MAX)
                return GCDUMP_E_LIMIT;
        r = builder(h, parent, name, &b);
        if (r != 0)
                return r;
        if (array_reserve((void **)&h->root_refs, &h->cap_root_refs, h->n_root_refs, sizeof(RootRef)) < 0)
                return -ENOMEM;
        h->root_refs[h->n_root_refs++] = (RootRef){ .builder = b, .address = address };
        h->roots++;
        h->references++;
        return 0;
}

static int root_group(GcdumpHeap *h, const char *name, uint32_t *ret) {
        return builder(h, UINT32_MAX, name, ret);
}

/* ---- the events ---- */

/* Count, Depth, Reason, Type (u32 each), ... */
static int on_gc_start(GcdumpHeap *h, Cursor *c) {
        uint32_t count, depth, reason, type;

        /* dotnet-gcdump convert learns the process from the first GCStart of all, and until then takes
         * no event of it (it matches events to a process id that is still 0) */
        h->process_known = true;
        if (!take_u32(c, &count) || !take_u32(c, &depth) || !take_u32(c, &reason) || !take_u32(c, &type))
                return GCDUMP_E_MALFORMED;
        if (depth < 2 || type != GC_TYPE_NON_CONCURRENT || reason != GC_REASON_INDUCED || h->seen_start)
                return 0;
        h->gc_id = count;
        h->seen_start = h->taking = true;
        return 0;
}

/* The dump ends with its GC; a GC that reported nothing is not it, and the next one may be. */
static void end_dump(GcdumpHeap *h) {
        h->taking = false;
        if (h->node_blocks == 0 && h->type_blocks == 0 && h->edge_blocks == 0)
                h->seen_start = false;
}

/* Count, Depth (u32 each), ... */
static int on_gc_end(GcdumpHeap *h, Cursor *c) {
        uint32_t count;

        if (!take_u32(c, &count))
                return GCDUMP_E_MALFORMED;
        if (h->taking && count == h->gc_id)
                end_dump(h);
        return 0;
}

/* Count (u32), ClrInstanceID (u16), then each: TypeID, ModuleID (u64), TypeNameID, Flags (u32),
 * CorElementType (u8), TypeName, TypeParameterCount (u32), that many u64. Taken at any time. */
static int on_bulk_type(GcdumpHeap *h, Cursor *c) {
        uint32_t count, params;
        uint16_t instance;
        uint8_t element;
        int r;

        if (!take_u32(c, &count) || !take_u16(c, &instance))
                return GCDUMP_E_MALFORMED;
        h->type_blocks++;
        for (uint32_t i = 0; i < count; i++) {
                TypeDef t = {};
                const uint8_t *skip;

                if (h->n_types >= GCDUMP_TYPES_MAX)
                        return GCDUMP_E_LIMIT;
                if (!take_u64(c, &t.id) || !take_u64(c, &t.module_id) || !take_u32(c, &t.name_id) ||
                    !take_u32(c, &t.flags) || !take_u8(c, &element))
                        return GCDUMP_E_MALFORMED;
                r = take_name(h, c, &t.name);
                if (r != 0)
                        return r;
                if (!take_u32(c, &params) || params > c->left / 8 || !take(c, (size_t)params * 8, &skip)) {
                        free(t.name);
                        return GCDUMP_E_MALFORMED;
                }
                if (array_reserve((void **)&h->types, &h->cap_types, h->n_types, sizeof(TypeDef)) < 0) {
                        free(t.name);
                        return -ENOMEM;
                }
                h->types[h->n_types++] = t;
        }
        return 0;
}

/* The index of @type_id among the TypeIDs nodes named, made the first time: a node keeps that (a byte or two). */
static int type_id_index(GcdumpHeap *h, uint64_t type_id, uint32_t *ret) {
        uint32_t i = u64map_get(&h->type_ids, type_id);
        int r;

        if (i == UINT32_MAX) {
                if (array_reserve((void **)&h->type_id_values, &h->cap_type_ids, h->n_type_ids, sizeof(uint64_t)) < 0)
                        return -ENOMEM;
                i = (uint32_t)h->n_type_ids;
                r = u64map_put(&h->type_ids, type_id, i, false);
                if (r < 0)
                        return r;
                h->type_id_values[h->n_type_ids++] = type_id;
        }
        *ret = i;
        return 0;
}

/* A node, as compact as it comes: its address in a run (a new run where addresses stop increasing or
 * leave 32 bits of the run's base), its type, size and reference count in node_info. */
static int keep_node(GcdumpHeap *h, uint64_t address, int32_t size, uint64_t type_id, uint32_t edges) {
        AddressRun *run = h->n_runs > 0 ? &h->runs[h->n_runs - 1] : NULL;
        uint32_t type;
        int r;

        r = type_id_index(h, type_id, &type);
        if (r < 0)
                return r;
        if (array_reserve((void **)&h->node_offsets, &h->cap_nodes, h->n_nodes, sizeof(uint32_t)) < 0)
                return -ENOMEM;
        if (!run || address <= run->last || address - run->base > UINT32_MAX) {
                if (array_reserve((void **)&h->runs, &h->cap_runs, h->n_runs, sizeof(AddressRun)) < 0)
                        return -ENOMEM;
                run = &h->runs[h->n_runs++];
                *run = (AddressRun){ .base = address, .first = (uint32_t)h->n_nodes };
        }
        if (chunks_put_varint(&h->node_info, type) < 0 || chunks_put_varint(&h->node_info, zigzag(size)) < 0 ||
            chunks_put_varint(&h->node_info, edges) < 0)
                return -ENOMEM;
        h->node_offsets[h->n_nodes++] = (uint32_t)(address - run->base);
        run->last = address;
        run->count++;
        return 0;
}

/* Index, Count (u32), ClrInstanceID (u16), then each: Address (pointer), Size, TypeID, EdgeCount (u64). */
static int on_bulk_node(GcdumpHeap *h, Cursor *c) {
        uint32_t index, count;
        uint16_t instance;
        int r;

        if (!take_u32(c, &index) || !take_u32(c, &count) || !take_u16(c, &instance) ||
            count > c->left / (h->pointer_size + 24))
                return GCDUMP_E_MALFORMED;
        h->node_blocks++;
        for (uint32_t i = 0; i < count; i++) {
                uint64_t address, edges, size, type_id;

                if (!take_pointer(h, c, &address) || !take_u64(c, &size) || !take_u64(c, &type_id) ||
                    !take_u64(c, &edges))
                        return GCDUMP_E_MALFORMED; /* not reached: the count was checked against the bytes */
                if (edges > GCDUMP_EDGES_MAX)
                        return GCDUMP_E_LIMIT;
                if (h->n_nodes >= GCDUMP_NODES_MAX) {
                        h->nodes_cut = true;
                        continue;
                }
                /* the size as the reader takes it: the low 32 bits, signed */
                r = keep_node(h, address, (int32_t)size, type_id, (uint32_t)edges);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Index, Count (u32), ClrInstanceID (u16), then each: Value (pointer), ReferencingFieldID (u32). */
static int on_bulk_edge(GcdumpHeap *h, Cursor *c) {
        uint32_t index, count, field;
        uint16_t instance;

        if (!take_u32(c, &index) || !take_u32(c, &count) || !take_u16(c, &instance) ||
            count > c->left / (h->pointer_size + 4))
                return GCDUMP_E_MALFORMED;
        if (count > GCDUMP_EDGES_MAX - h->n_edges)
                return GCDUMP_E_LIMIT;
        h->edge_blocks++;
        if (array_reserve((void **)&h->edge_block_sizes, &h->cap_edge_block_sizes, h->n_edge_block_sizes,
                          sizeof(uint32_t)) < 0)
                return -ENOMEM;
        h->edge_block_sizes[h->n_edge_block_sizes++] = count;
        for (uint32_t i = 0; i < count; i++) {
                uint64_t target;

                if (!take_pointer(h, c, &target) || !take_u32(c, &field))
                        return GCDUMP_E_MALFORMED;
                /* a reference is mostly near the one before it: a byte or two */
                if (chunks_put_varint(&h->edge_targets, zigzag((int64_t)(target - h->last_target))) < 0)
                        return -ENOMEM;
                h->last_target = target;
                h->n_edges++;
        }
        return 0;
}

/* The group a root is counted under, as dotnet-gcdump names them. */
static const char *root_name(uint8_t kind, uint32_t flags) {
        if (flags & ROOT_FLAG_REF_COUNTED)
                return "[COM/WinRT Objects]";
        if (kind == ROOT_KIND_FINALIZER)
                return "[finalizer Handles]";
        if (kind == ROOT_KIND_HANDLE)
                return flags == ROOT_FLAG_PINNING ? "[pinning Handles]" : "[strong Handles]";
        return "[other Handles]";
}

/* Index, Count (u32), ClrInstanceID (u16), then each: RootedNodeAddress (pointer), GCRootKind (u8),
 * GCRootFlag (u32), GCRootID (pointer). Weak references are no roots. */
static int on_bulk_root_edge(GcdumpHeap *h, Cursor *c) {
        uint32_t index, count, flags, other, group;
        uint16_t instance;
        int r;

        if (!take_u32(c, &index) || !take_u32(c, &count) || !take_u16(c, &instance) ||
            count > c->left / (2 * h->pointer_size + 5))
                return GCDUMP_E_MALFORMED;
        r = root_group(h, "[static vars]", &group);
        if (r != 0)
                return r;
        for (uint32_t i = 0; i < count; i++) {
                uint64_t address, id;
                uint8_t kind;

                if (!take_pointer(h, c, &address) || !take_u8(c, &kind) || !take_u32(c, &flags) ||
                    !take_pointer(h, c, &id))
                        return GCDUMP_E_MALFORMED;
                if (flags & ROOT_FLAG_WEAK)
                        continue;
                if (kind == ROOT_KIND_STACK)
                        r = add_root(h, UINT32_MAX, "[local vars]", address);
                else {
                        r = root_group(h, "[other roots]", &other);
                        if (r == 0)
                                r = add_root(h, other, root_name(kind, flags), address);
                }
                if (r != 0)
                        return r;
        }
        return 0;
}

/* Index, Count (u32), ClrInstanceID (u16), then each: GCKeyNodeID, GCValueNodeID, GCRootID (pointers). */
static int on_bulk_root_cwt(GcdumpHeap *h, Cursor *c) {
        uint32_t index, count, other, dependent;
        uint16_t instance;
        int r;

        if (!take_u32(c, &index) || !take_u32(c, &count) || !take_u16(c, &instance) ||
            count > c->left / (3 * h->pointer_size))
                return GCDUMP_E_MALFORMED;
        r = root_group(h, "[other roots]", &other);
        if (r == 0)
                r = builder(h, other, "[Dependent Handles]", &dependent);
        for (uint32_t i = 0; r == 0 && i < count; i++) {
                uint64_t key, value, id;

                if (!take_pointer(h, c, &key) || !take_pointer(h, c, &value) || !take_pointer(h, c, &id))
                        return GCDUMP_E_MALFORMED;
                if (key != 0)
                        r = add_root(h, other, "[Dependent Handles]", value);
        }
        return r;
}

/* Count (u32), AppDomainID (u64), ClrInstanceID (u16), then each: GCRootID, ObjectID, TypeID (u64),
 * Flags (u32), FieldName. Kept: their names need the types, which may come later. */
static int on_bulk_static_var(GcdumpHeap *h, Cursor *c) {
        uint64_t domain;
        uint32_t count;
        uint16_t instance;
        int r;

        if (!take_u32(c, &count) || !take_u64(c, &domain) || !take_u16(c, &instance))
                return GCDUMP_E_MALFORMED;
        for (uint32_t i = 0; i < count; i++) {
                StaticVar v = {};
                uint64_t id;

                if (h->n_statics >= GCDUMP_ROOTS_MAX)
                        return GCDUMP_E_LIMIT;
                if (!take_u64(c, &id) || !take_u64(c, &v.object) || !take_u64(c, &v.type_id) || !take_u32(c, &v.flags))
                        return GCDUMP_E_MALFORMED;
                r = take_name(h, c, &v.field);
                if (r != 0)
                        return r;
                if (array_reserve((void **)&h->statics, &h->cap_statics, h->n_statics, sizeof(StaticVar)) < 0) {
                        free(v.field);
                        return -ENOMEM;
                }
                h->statics[h->n_statics++] = v;
        }
        return 0;
}

/* ModuleID, AssemblyID (u64), ModuleFlags, Reserved1 (u32), ModuleILPath, ... The first name of an id stays;
 * native images name no types. */
static int on_module(GcdumpHeap *h, Cursor *c) {
        _cleanup_free_ char *path = NULL;
        uint64_t id, assembly;
        uint32_t flags, reserved;
        int r;

        if (!take_u64(c, &id) || !take_u64(c, &assembly) || !take_u32(c, &flags) || !take_u32(c, &reserved))
                return GCDUMP_E_MALFORMED;
        r = take_name(h, c, &path);
        if (r != 0)
                return r;
        if ((flags & MODULE_FLAG_NATIVE) || u64map_get(&h->modules, id) != UINT32_MAX)
                return 0;
        if (h->n_module_paths >= GCDUMP_TYPES_MAX)
                return GCDUMP_E_LIMIT;
        if (array_reserve((void **)&h->module_paths, &h->cap_module_paths, h->n_module_paths, sizeof(char *)) < 0)
                return -ENOMEM;
        r = u64map_put(&h->modules, id, (uint32_t)h->n_module_paths, false);
        if (r < 0)
                return r;
        h->module_paths[h->n_module_paths++] = TAKE_PTR(path);
        return 0;
}

static bool event_is(const NettraceEvent *e, const char *provider, uint32_t id) {
        return e->metadata->event_id == id && strcmp(e->metadata->provider, provider) == 0;
}

/**
 * gcdump_heap_add() - take one event of a gcdump session
 *
 * As dotnet-gcdump's reader: the types and module names (the rundown at the
 * end) whenever they come after the first GCStart; nodes, references and
 * roots only between the start and the end of the first induced, blocking
 * gen-2 GC.
 */
int gcdump_heap_add(GcdumpHeap *h, const NettraceEvent *e) {
        Cursor c = { e->payload, e->payload_size };

        if (!e->metadata)
                return GCDUMP_E_OTHER;
        if (event_is(e, RUNDOWN_PROVIDER, EV_RUNDOWN_MODULE_DC_START) ||
            event_is(e, RUNDOWN_PROVIDER, EV_RUNDOWN_MODULE_DC_END))
                return h->process_known ? on_module(h, &c) : 0;
        if (strcmp(e->metadata->provider, RUNTIME_PROVIDER) != 0)
                return GCDUMP_E_OTHER;
        switch (e->metadata->event_id) {
        case EV_GC_START:
                return on_gc_start(h, &c);
        case EV_GC_END:
                return on_gc_end(h, &c);
        case EV_GEN_AWARE_BEGIN:
                h->seen_start = h->taking = true;
                return 0;
        case EV_GEN_AWARE_END:
                end_dump(h);
                return 0;
        case EV_BULK_TYPE:
                return h->process_known ? on_bulk_type(h, &c) : 0;
        case EV_MODULE_DC_START_V2:
        case EV_MODULE_DC_END_V2:
        case EV_MODULE_LOAD:
        case EV_MODULE_UNLOAD:
                return h->process_known ? on_module(h, &c) : 0;
        default:
                break;
        }
        if (!h->taking)
                return e->metadata->event_id == EV_BULK_NODE || e->metadata->event_id == EV_BULK_EDGE ||
                                       e->metadata->event_id == EV_BULK_ROOT_EDGE ||
                                       e->metadata->event_id == EV_BULK_ROOT_CWT ||
                                       e->metadata->event_id == EV_BULK_ROOT_STATIC_VAR
                               ? 0
                               : GCDUMP_E_OTHER;
        switch (e->metadata->event_id) {
        case EV_BULK_NODE:
                return on_bulk_node(h, &c);
        case EV_BULK_EDGE:
                return on_bulk_edge(h, &c);
        case EV_BULK_ROOT_EDGE:
                return on_bulk_root_edge(h, &c);
        case EV_BULK_ROOT_CWT:
                return on_bulk_root_cwt(h, &c);
        case EV_BULK_ROOT_STATIC_VAR:
                return on_bulk_static_var(h, &c);
        default:
                return GCDUMP_E_OTHER;
        }
}

/* ---- the graph's types, and the table ---- */

static void graph_done(Graph *g) {
        for (size_t i = 0; i < g->n_types; i++) {
                free(g->types[i].name);
                free(g->types[i].module);
        }
        free(g->types);
        strmap_done(&g->interned);
        strmap_done(&g->big);
        u64map_done(&g->by_id);
}

/* Graph.CreateType(): a new type, of no size yet. Takes @name and @module. */
static int graph_new_type(Graph *g, char *name, char *module, uint32_t *ret) {
        if (g->n_types >= GCDUMP_TYPES_MAX * 2) {
                free(name);
                free(module);
                return GCDUMP_E_LIMIT;
        }
        if (array_reserve((void **)&g->types, &g->cap_types, g->n_types, sizeof(GraphType)) < 0) {
                free(name);
                free(module);
                return -ENOMEM;
        }
        g->types[g->n_types] = (GraphType){ .name = name, .module = module, .size = -1 };
        *ret = (uint32_t)g->n_types++;
        return 0;
}

/* The reader's CreateType(): one type per "MODULE!NAME" (or NAME without a module). */
static int graph_intern(Graph *g, const char *name, const char *module, uint32_t *ret) {
        _cleanup_free_ char *key = NULL;
        char *n, *m = NULL;
        uint32_t found;
        int r;

        if (module ? asprintf(&key, "%s!%s", module, name) < 0 : !(key = strdup(name)))
                return -ENOMEM;
        found = strmap_get(&g->interned, key);
        if (found != UINT32_MAX) {
                *ret = found;
                return 0;
        }
        n = strdup(name);
        if (!n || (module && !(m = strdup(module)))) {
                free(n);
                return -ENOMEM;
        }
        r = graph_new_type(g, n, m, &found);
        if (r != 0)
                return r;
        r = strmap_put(&g->interned, key, found);
        if (r < 0)
                return r;
        *ret = found;
        return 0;
}

/* A name as the reader shows it: no generic arity (`1), <> for generics' brackets, [] for arrays. */
static char *pretty_type_name(const char *raw) {
        size_t n = strlen(raw);
        char *s = malloc(n + 1), *out;
        size_t j = 0;

        if (!s)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (raw[i] == '`' && raw[i + 1] >= '0' && raw[i + 1] <= '9') {
                        while (raw[i + 1] >= '0' && raw[i + 1] <= '9')
                                i++;
                        continue;
                }
                s[j++] = raw[i] == '[' ? '<' : raw[i] == ']' ? '>' : raw[i];
        }
        s[j] = 0;
        /* "<>" (an array's brackets, turned) back to "[]" */
        out = s;
        for (char *p = strstr(out, "<>"); p; p = strstr(p + 2, "<>"))
                memcpy(p, "[]", 2);
        return out;
}

static const char *module_path(GcdumpHeap *h, uint64_t id) {
        uint32_t i = u64map_get(&h->modules, id);

        return i == UINT32_MAX ? NULL : h->module_paths[i];
}

/* The types of the GCBulkType events, in their order, each TypeID to its type (the last word stays). */
static int graph_add_types(Graph *g, GcdumpHeap *h) {
        int r;

        for (size_t i = 0; i < h->n_types; i++) {
                const TypeDef *t = &h->types[i];
                _cleanup_free_ char *name = NULL, *unknown_module = NULL;
                const char *module;
                uint32_t index;

                if (t->flags & TYPE_FLAG_MODULE_BASE_ADDRESS) {
                        /* a native image's type, named only by an id: a type without a name */
                        r = graph_new_type(g, NULL, NULL, &index);
                } else {
                        if (*t->name)
                                name = pretty_type_name(t->name);
                        else if (asprintf(&name, "%s(0x%" PRIx32 ")", t->flags & TYPE_FLAG_ARRAY ? "ArrayType" : "Type",
                                          t->name_id) < 0)
                                name = NULL;
                        if (name && (t->flags & TYPE_FLAG_COM_OBJECT)) {
                                char *rcw = NULL;
                                if (asprintf(&rcw, "[RCW %s]", name) < 0)
                                        rcw = NULL;
                                free(name);
                                name = rcw;
                        }
                        if (!name)
                                return -ENOMEM;
                        module = module_path(h, t->module_id);
                        if (!module && asprintf(&unknown_module, "Module(0x%" PRIx64 ")", t->module_id) < 0)
                                return -ENOMEM;
                        r = graph_intern(g, name, module ? module : unknown_module, &index);
                }
                if (r != 0)
                        return r;
                r = u64map_put(&g->by_id, t->id, index, true);
                if (r < 0)
                        return r;
        }
        return 0;
}

static const char *size_decade(int32_t size) {
        return size < 10000 ? "1K" : size < 100000 ? "10K" : size < 1000000 ? "100K" : size < 10000000 ? "1M"
             : size < 100000000 ? "10M" : "100M";
}

/* GetTypeIndex(): the node's type, "UNKNOWN 0x..." for an id never defined, and a type of its own
 * per name and size decade for objects over 1000 bytes. */
static int graph_node_type(Graph *g, uint64_t type_id, int32_t size, uint32_t *ret) {
        _cleanup_free_ char *name = NULL, *module = NULL;
        uint32_t t = u64map_get(&g->by_id, type_id), big;
        int r;

        if (t == UINT32_MAX) {
                if (asprintf(&name, "UNKNOWN 0x%" PRIx64, type_id) < 0)
                        return -ENOMEM;
                r = graph_intern(g, name, NULL, &t);
                if (r == 0)
                        r = u64map_put(&g->by_id, type_id, t, true);
                if (r < 0)
                        return r;
                free(TAKE_PTR(name));
        }
        if (size <= BIG_OBJECT) {
                *ret = t;
                return 0;
        }
        if (asprintf(&name, "%s (Bytes > %s)", g->types[t].name ? g->types[t].name : "", size_decade(size)) < 0)
                return -ENOMEM;
        big = strmap_get(&g->big, name);
        if (big == UINT32_MAX) {
                if (g->types[t].module && !(module = strdup(g->types[t].module)))
                        return -ENOMEM;
                r = graph_intern(g, name, module, &big);
                if (r == 0)
                        r = strmap_put(&g->big, name, big);
                if (r < 0)
                        return r;
        }
        *ret = big;
        return 0;
}

/* The static variables' roots: "[static vars]" (or "[thread static vars]"), then one per variable. */
static int graph_add_statics(Graph *g, GcdumpHeap *h) {
        uint32_t statics, thread_statics, group;
        int r;

        r = root_group(h, "[COM/WinRT Objects]", &group);
        if (r == 0)
                r = root_group(h, "[static vars]", &statics);
        for (size_t i = 0; r == 0 && i < h->n_statics; i++) {
                const StaticVar *v = &h->statics[i];
                _cleanup_free_ char *name = NULL, *type = NULL;
                uint32_t t = u64map_get(&g->by_id, v->type_id);

                if (t != UINT32_MAX && g->types[t].name)
                        type = strdup(g->types[t].name);
                else if (t == UINT32_MAX && asprintf(&type, "Type(0x%" PRIx64 ")", v->type_id) < 0)
                        type = NULL;
                else if (t != UINT32_MAX)
                        type = strdup("");
                if (!type || asprintf(&name, "[static var %s.%s]", type, v->field) < 0)
                        return -ENOMEM;
                group = statics;
                if (v->flags & STATIC_FLAG_THREAD_LOCAL) {
                        r = root_group(h, "[thread static vars]", &thread_statics);
                        group = thread_statics;
                }
                if (r == 0)
                        r = add_root(h, group, name, v->object);
        }
        return r;
}

/* ---- addresses to indexes: the graph's nodes ---- */

/* The address of node @node (< n_nodes): its run's base and its offset. */
static uint64_t node_address(const GcdumpHeap *h, uint32_t node) {
        size_t lo = 0, hi = h->n_runs;

        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                if (h->runs[mid].first <= node)
                        lo = mid;
                else
                        hi = mid;
        }
        return h->runs[lo].base + h->node_offsets[node];
}

/* The node at @address (the last one, when several are), or UINT32_MAX: the address is no node's. */
static uint32_t graph_find_node(GcdumpHeap *h, uint64_t address) {
        const AddressPiece *piece;
        size_t lo = 0, hi = h->n_pieces;
        uint32_t offset;

        if (h->by_map)
                return u64map_get(&h->addresses, address);
        while (lo < hi) { /* the last piece that begins at or below it */
                size_t mid = lo + (hi - lo) / 2;
                if (h->pieces[mid].low <= address)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0 || address > h->pieces[lo - 1].high)
                return UINT32_MAX;
        piece = &h->pieces[lo - 1];
        offset = (uint32_t)(address - piece->base);
        lo = piece->first;
        hi = (size_t)piece->first + piece->count;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (h->node_offsets[mid] < offset)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < (size_t)piece->first + piece->count && h->node_offsets[lo] == offset ? (uint32_t)lo : UINT32_MAX;
}

/* ---- merging the runs into address order ---- */

typedef struct RunMerge {
        const GcdumpHeap *h;
        uint32_t *next;          /* each run's next node */
        uint32_t *heap;          /* runs not yet merged whole, the one with the lowest next address on top */
        size_t n;
} RunMerge;

static uint64_t merge_address(const RunMerge *m, uint32_t run) {
        return m->h->runs[run].base + m->h->node_offsets[m->next[run]];
}

static void merge_sift_down(RunMerge *m, size_t i) {
        for (;;) {
                size_t least = i, l = 2 * i + 1, r = 2 * i + 2;
                uint32_t t;

                if (l < m->n && merge_address(m, m->heap[l]) < merge_address(m, m->heap[least]))
                        least = l;
                if (r < m->n && merge_address(m, m->heap[r]) < merge_address(m, m->heap[least]))
                        least = r;
                if (least == i)
                        return;
                t = m->heap[i];
                m->heap[i] = m->heap[least];
                m->heap[least] = t;
                i = least;
        }
}

/* The node with the lowest address not merged yet (its run in *@ret_run); the merge moves past it. */
static uint32_t merge_pop(RunMerge *m, uint32_t *ret_run) {
        uint32_t run = m->heap[0], node = m->next[run]++;

        if (m->next[run] == m->h->runs[run].first + m->h->runs[run].count)
                m->heap[0] = m->heap[--m->n];
        if (m->n > 0)
                merge_sift_down(m, 0);
        *ret_run = run;
        return node;
}

/* The pieces: the runs merged by address, a new piece wherever the next address is another run's.
 * Return: 0, 1 when two nodes have one address (they need the table), or -ENOMEM. */
static int graph_make_pieces(GcdumpHeap *h) {
        _cleanup_free_ uint32_t *next = malloc((h->n_runs ? h->n_runs : 1) * sizeof(uint32_t));
        _cleanup_free_ uint32_t *heap = malloc((h->n_runs ? h->n_runs : 1) * sizeof(uint32_t));
        RunMerge m = { .h = h, .next = next, .heap = heap, .n = h->n_runs };
        AddressPiece *piece = NULL;
        uint32_t previous_run = UINT32_MAX;

        if (!next || !heap)
                return -ENOMEM;
        for (size_t i = 0; i < h->n_runs; i++) {
                next[i] = h->runs[i].first;
                heap[i] = (uint32_t)i;
        }
        for (size_t i = h->n_runs / 2; i-- > 0;)
                merge_sift_down(&m, i);
        while (m.n > 0) {
                uint32_t run, node = merge_pop(&m, &run);
                uint64_t address = h->runs[run].base + h->node_offsets[node];

                if (piece && address == piece->high)
                        return 1;
                if (run == previous_run) {
                        piece->high = address;
                        piece->count++;
                        continue;
                }
                if (array_reserve((void **)&h->pieces, &h->cap_pieces, h->n_pieces, sizeof(AddressPiece)) < 0)
                        return -ENOMEM;
                piece = &h->pieces[h->n_pieces++];
                *piece = (AddressPiece){ .low = address, .high = address, .base = h->runs[run].base, .first = node,
                                         .count = 1 };
                previous_run = run;
        }
        return 0;
}

/*
 * How node addresses will be found: by binary search in the pieces, which cost a few bytes per
 * region (a runtime sends each region's objects in increasing order). Two nodes of one address,
 * which a runtime could send, have every node address put in a table instead, seeded
 * (gcdump_heap_set_seed()).
 */
static int graph_prepare_nodes(GcdumpHeap *h) {
        int r;

        h->index_of = malloc((h->n_nodes ? h->n_nodes : 1) * sizeof(uint32_t));
        if (!h->index_of)
                return -ENOMEM;
        memset(h->index_of, 0xff, h->n_nodes * sizeof(uint32_t));
        r = graph_make_pieces(h);
        if (r <= 0)
                return r;
        h->by_map = true;
        free(h->pieces);
        h->pieces = NULL;
        h->n_pieces = 0;
        r = u64map_reserve(&h->addresses, h->n_nodes);
        for (size_t i = 0; r >= 0 && i < h->n_nodes; i++)
                r = u64map_put(&h->addresses, node_address(h, (uint32_t)i), (uint32_t)i, true);
        return r < 0 ? r : 0;
}

/* MemoryGraph.GetNodeIndex(): the index of @node (the last with its address), made the first time it is seen. */
static uint32_t see_node(GcdumpHeap *h, uint32_t node) {
        if (h->index_of[node] == UINT32_MAX)
                h->index_of[node] = (uint32_t)h->n_indexes++;
        return h->index_of[node];
}

/* The same for any address: a node's, or one no node has (an object only referenced). */
static int see_address(GcdumpHeap *h, uint64_t address, uint32_t *ret) {
        uint32_t node = graph_find_node(h, address), other;
        int r;

        if (node != UINT32_MAX) {
                *ret = see_node(h, node);
                return 0;
        }
        other = u64map_get(&h->others, address);
        if (other == UINT32_MAX) {
                if (array_reserve((void **)&h->other_addresses, &h->cap_others, h->n_others, sizeof(uint64_t)) < 0 ||
                    array_reserve((void **)&h->other_indexes, &h->cap_other_indexes, h->n_others, sizeof(uint32_t)) < 0)
                        return -ENOMEM;
                other = (uint32_t)h->n_others;
                r = u64map_put(&h->others, address, other, false);
                if (r < 0)
                        return r;
                h->other_addresses[h->n_others] = address;
                h->other_indexes[h->n_others++] = (uint32_t)h->n_indexes++;
        }
        *ret = h->other_indexes[other];
        return 0;
}

/* The roots' addresses, first, in the order the roots came (as the reader sees them as they come). */
static int graph_see_roots(GcdumpHeap *h) {
        uint32_t index;
        int r;

        for (size_t i = 0; i < h->n_root_refs; i++) {
                r = see_address(h, h->root_refs[i].address, &index);
                if (r != 0)
                        return r;
        }
        return 0;
}

/* Once every index is given: each index's node, for the file, in place of each node's index. */
static int graph_invert_indexes(GcdumpHeap *h) {
        h->node_at = malloc((h->n_indexes ? h->n_indexes : 1) * sizeof(uint32_t));
        if (!h->node_at)
                return -ENOMEM;
        for (size_t i = 0; i < h->n_nodes; i++)
                if (h->index_of[i] != UINT32_MAX)
                        h->node_at[h->index_of[i]] = (uint32_t)i;
        for (size_t i = 0; i < h->n_others; i++)
                h->node_at[h->other_indexes[i]] = (uint32_t)(h->n_nodes + i);
        free(h->index_of);
        h->index_of = NULL;
        return 0;
}

/* The address of index @i: a node's, one no node has, or 0 for a pseudo-node. */
static uint64_t index_address(const GcdumpHeap *h, size_t i) {
        uint32_t at;

        if (i >= h->n_indexes)
                return 0;
        at = h->node_at[i];
        return at < h->n_nodes ? node_address(h, at) : h->other_addresses[at - h->n_nodes];
}

/* The reader's GetNextEdge(): the edges in order, block by block; running out breaks the dump. */
typedef struct EdgeReader {
        size_t edge, block, block_end;
        bool in_block;
        uint64_t at, last;       /* in edge_targets */
} EdgeReader;

static int next_edge(const GcdumpHeap *h, EdgeReader *e, uint64_t *ret) {
        while (!e->in_block || e->edge == e->block_end) {
                if (e->block >= h->n_edge_block_sizes)
                        return GCDUMP_E_BROKEN; /* "not enough edge data" */
                e->block_end = e->edge + h->edge_block_sizes[e->block++];
                e->in_block = true;
        }
        e->last += (uint64_t)unzigzag(chunks_read_varint(&h->edge_targets, &e->at));
        e->edge++;
        *ret = e->last;
        return 0;
}

/* ---- the blob: each node's definition, as Graph.SetNode() writes it ---- */

static int blob_byte(GcdumpHeap *h, uint8_t b) {
        if (h->blob.size >= INT32_MAX)
                return GCDUMP_E_LIMIT; /* the file says its size in an int32 */
        return chunks_put(&h->blob, b);
}

/* Node.WriteCompressedInt(): 7 bits a byte, most significant first, 0x80 on all but the last; signed. */
static int blob_int(GcdumpHeap *h, int32_t value) {
        int bytes = 5, r = 0;

        for (int n = 1; n < 5; n++)
                if ((int32_t)((uint32_t)value << (32 - 7 * n)) >> (32 - 7 * n) == value) {
                        bytes = n;
                        break;
                }
        for (int k = bytes - 1; r == 0 && k > 0; k--)
                r = blob_byte(h, (uint8_t)(((uint32_t)value >> (7 * k)) | 0x80));
        return r == 0 ? blob_byte(h, (uint8_t)(value & 0x7f)) : r;
}

/* A compressed int of the blob at *@at, as its low 32 bits. */
static uint32_t blob_read_int(const GcdumpHeap *h, uint64_t *at) {
        uint32_t v = 0;
        uint8_t b;

        do {
                b = chunks_at(&h->blob, (*at)++);
                v = v << 7 | (b & 0x7f);
        } while (b & 0x80);
        return v;
}

/*
 * Where node @node's definition begins in the blob (node < n_defined). The definitions of the nodes
 * follow each other in their order; every DEFINITION_STRIDE-th one's offset is kept, and the rest
 * are found by reading past the ones before: a label (4 bytes a node) is not kept for each.
 */
#define DEFINITION_STRIDE 16

static uint32_t definition_offset(const GcdumpHeap *h, uint32_t node) {
        uint64_t at = h->definitions[node / DEFINITION_STRIDE];

        for (uint32_t k = node % DEFINITION_STRIDE; k > 0; k--) {
                uint32_t head = blob_read_int(h, &at), children;

                if (head & 1) /* a size of its own */
                        (void)blob_read_int(h, &at);
                children = blob_read_int(h, &at);
                for (uint32_t c = 0; c < children; c++)
                        (void)blob_read_int(h, &at);
        }
        return (uint32_t)at;
}

/* The offset of index @i's definition in the blob, as the file's table of them says; 0: undefined. */
static uint32_t index_label(const GcdumpHeap *h, size_t i) {
        uint32_t at;

        if (i >= h->n_indexes)
                return h->builder_labels[i - h->n_indexes];
        if (h->by_map)
                return i < h->cap_labels ? h->labels[i] : 0;
        at = h->node_at[i];
        return at < h->n_defined ? definition_offset(h, at) : 0;
}

/* SetNode(): the node's type, its size unless its type's size says it, its children. */
static int define_node(GcdumpHeap *h, uint32_t index, uint32_t type, int32_t size, const uint32_t *children,
                       size_t n_children) {
        GraphType *t = &h->graph.types[type];
        int r;

        if (size < 0)
                size = INT32_MAX;
        if (t->size < 0)
                t->size = size;
        t->count++;
        t->total += size;
        h->total_size += size;
        r = blob_int(h, (int32_t)(type << 1 | (t->size != size)));
        if (r == 0 && t->size != size)
                r = blob_int(h, size);
        if (r == 0)
                r = blob_int(h, (int32_t)n_children);
        for (size_t i = 0; r == 0 && i < n_children; i++)
                r = blob_int(h, (int32_t)(children[i] - index));
        return r;
}

/* Where node @node's definition is: every DEFINITION_STRIDE-th node's offset kept, or with a table by index. */
static int note_definition(GcdumpHeap *h, uint32_t node, uint32_t index) {
        if (node % DEFINITION_STRIDE == 0)
                h->definitions[node / DEFINITION_STRIDE] = (uint32_t)h->blob.size;
        if (!h->by_map)
                return 0;
        /* nodes of one address: the last definition is the label, as in the reader's table */
        if (u32_array_reserve_zeroed(&h->labels, &h->cap_labels, index) < 0)
                return -ENOMEM;
        h->labels[index] = (uint32_t)h->blob.size;
        return 0;
}

/* Each node's type and size, its references taken in order from the edges. What was read of the
 * streams is freed as the blob grows: the blob takes the chunks they leave. */
static int graph_add_nodes(GcdumpHeap *h) {
        _cleanup_free_ uint32_t *children = NULL;
        size_t cap_children = 0;
        EdgeReader edges = {};
        uint64_t info = 0;
        int r;

        h->definitions = malloc((h->n_nodes / DEFINITION_STRIDE + 1) * sizeof(uint32_t));
        if (!h->definitions)
                return -ENOMEM;
        for (size_t i = 0; i < h->n_nodes; i++) {
                uint32_t type_id = (uint32_t)chunks_read_varint(&h->node_info, &info);
                int32_t size = (int32_t)unzigzag(chunks_read_varint(&h->node_info, &info));
                uint32_t n_edges = (uint32_t)chunks_read_varint(&h->node_info, &info), t, index;

                r = graph_node_type(&h->graph, h->type_id_values[type_id], size, &t);
                if (r != 0)
                        return r;
                index = see_node(h, h->by_map ? graph_find_node(h, node_address(h, (uint32_t)i)) : (uint32_t)i);
                if (n_edges > cap_children) {
                        free(children);
                        cap_children = n_edges;
                        children = malloc(cap_children * sizeof(uint32_t));
                        if (!children)
                                return -ENOMEM;
                }
                for (uint32_t k = 0; r == 0 && k < n_edges; k++) {
                        uint64_t target;
                        r = next_edge(h, &edges, &target);
                        if (r == 0)
                                r = see_address(h, target, &children[k]);
                }
                if (r == 0)
                        r = note_definition(h, (uint32_t)i, index);
                if (r == 0)
                        r = define_node(h, index, t, size, children, n_edges);
                if (r != 0)
                        return r;
                h->n_defined = i + 1;
                h->references += n_edges;
                chunks_release(&h->node_info, info);
                chunks_release(&h->edge_targets, edges.at);
                if (h->n_indexes + h->n_builders >= GCDUMP_NODES_MAX) {
                        /* dotnet-gcdump stops here, and checks nothing more */
                        h->truncated = true;
                        return 0;
                }
        }
        /* the block of the last edge taken must have been taken whole ("extra edge data") */
        if (edges.in_block && edges.edge != edges.block_end)
                return GCDUMP_E_BROKEN;
        return 0;
}

/*
 * MemoryNodeBuilder.Build() of "[.NET Roots]": each pseudo-node, parents
 * first, children in the order they were made, gets a type per name and
 * references its groups and its objects. Its node index follows the
 * objects'.
 */
static int graph_add_builders(GcdumpHeap *h) {
        size_t n = h->n_builders, base = h->n_indexes;
        _cleanup_free_ uint32_t *first = calloc(n + 1, sizeof(uint32_t)), *next = calloc(n + 1, sizeof(uint32_t)),
                                *order = calloc(n + 1, sizeof(uint32_t)), *types = calloc(n + 1, sizeof(uint32_t)),
                                *ref_start = calloc(n + 2, sizeof(uint32_t)), *refs = NULL, *children = NULL,
                                *stack = calloc(n + 1, sizeof(uint32_t));
        _cleanup_(strmap_done) StrMap names = { .seed = h->seed };
        size_t n_order = 0, depth = 0, n_children;
        int r;

        h->builder_labels = calloc(n + 1, sizeof(uint32_t));
        if (!first || !next || !order || !types || !ref_start || !stack || !h->builder_labels)
                return -ENOMEM;
        /* each builder's children, in the order they were made (UINT32_MAX: none) */
        for (size_t i = 0; i < n; i++)
                first[i] = next[i] = UINT32_MAX;
        for (size_t i = n; i-- > 1;) {
                next[i] = first[h->builders[i].parent];
                first[h->builders[i].parent] = (uint32_t)i;
        }
        /* each builder's objects, grouped by builder in the order they were added */
        for (size_t i = 0; i < h->n_root_refs; i++)
                ref_start[h->root_refs[i].builder + 1]++;
        for (size_t i = 0; i < n; i++)
                ref_start[i + 1] += ref_start[i];
        refs = malloc((h->n_root_refs + 1) * sizeof(uint32_t));
        children = malloc((n + h->n_root_refs + 1) * sizeof(uint32_t));
        if (!refs || !children)
                return -ENOMEM;
        {
                _cleanup_free_ uint32_t *fill = u32_memdup(ref_start, n + 1);
                if (!fill)
                        return -ENOMEM;
                for (size_t i = 0; i < h->n_root_refs; i++) {
                        r = see_address(h, h->root_refs[i].address, &refs[fill[h->root_refs[i].builder]++]);
                        if (r != 0)
                                return r;
                }
        }
        /* depth first from the root, as AllocateTypeIndexes() and Build() go: the first child on top */
        stack[depth++] = 0;
        while (depth > 0) {
                uint32_t b = stack[--depth];
                size_t count = 0;

                order[n_order++] = b;
                for (uint32_t c = first[b]; c != UINT32_MAX; c = next[c])
                        count++;
                depth += count;
                for (uint32_t c = first[b]; c != UINT32_MAX; c = next[c])
                        stack[depth - count--] = c;
        }
        for (size_t i = 0; i < n_order; i++) {
                const Builder *b = &h->builders[order[i]];
                uint32_t t = strmap_get(&names, b->name);

                if (t == UINT32_MAX) {
                        char *name = strdup(b->name);
                        if (!name)
                                return -ENOMEM;
                        r = graph_new_type(&h->graph, name, NULL, &t);
                        if (r == 0)
                                r = strmap_put(&names, b->name, t);
                        if (r < 0)
                                return r;
                }
                types[order[i]] = t;
        }
        for (size_t i = 0; i < n_order; i++) {
                uint32_t b = order[i];

                n_children = 0;
                for (uint32_t c = first[b]; c != UINT32_MAX; c = next[c])
                        children[n_children++] = (uint32_t)(base + c);
                for (uint32_t k = ref_start[b]; k < ref_start[b + 1]; k++)
                        children[n_children++] = refs[k];
                h->builder_labels[b] = (uint32_t)h->blob.size;
                r = define_node(h, (uint32_t)(base + b), types[b], 0, children, n_children);
                if (r != 0)
                        return r;
        }
        return 0;
}

/*
 * What the stock reader's ConvertHeapDataToGraph() builds, in its order (the
 * graph's type order breaks the report's ties): the types of every
 * GCBulkType, the static variables' roots, each node with its references,
 * then the roots' pseudo-nodes. Once; its result is kept.
 */
int gcdump_graph_build(GcdumpHeap *h) {
        uint32_t undefined;
        int r;

        if (h->built)
                return h->build_error;
        if (!h->seen_start || h->taking)
                return GCDUMP_E_NO_DUMP; /* not yet: events may still come */
        h->built = true;
        /* the graph's first type, of its undefined nodes, whose one definition is the blob's first */
        r = graph_new_type(&h->graph, strdup("UNDEFINED"), NULL, &undefined);
        if (r == 0 && !h->graph.types[0].name)
                r = -ENOMEM;
        if (r == 0) {
                h->graph.types[0].size = 0;
                r = blob_int(h, 0);
        }
        if (r == 0)
                r = blob_int(h, 0);
        if (r == 0)
                r = graph_prepare_nodes(h);
        if (r == 0)
                r = graph_add_types(&h->graph, h);
        if (r == 0)
                r = graph_add_statics(&h->graph, h);
        if (r == 0)
                r = graph_see_roots(h);
        if (r == 0)
                r = graph_add_nodes(h);
        if (r == 0)
                r = graph_add_builders(h);
        if (r == 0)
                r = graph_invert_indexes(h);
        /* what only the build needed */
        chunks_done(&h->node_info);
        chunks_done(&h->edge_targets);
        u64map_done(&h->addresses);
        u64map_done(&h->others);
        free(h->pieces);
        h->pieces = NULL;
        return h->build_error = r;
}

static int compare_rows(const void *a, const void *b) {
        const GcdumpType *x = a, *y = b;

        if (x->size != y->size)
                return x->size < y->size ? 1 : -1;
        if (x->count != y->count)
                return x->count < y->count ? 1 : -1;
        return 0;
}

/* The report's rows: types with a name, a size and objects, by size and count; ties as in the graph
 * (qsort is not stable: each row's graph index breaks the tie). */
typedef struct Row {
        GcdumpType t;
        size_t index;
} Row;

static int compare_indexed_rows(const void *a, const void *b) {
        const Row *x = a, *y = b;
        int c = compare_rows(&x->t, &y->t);

        return c != 0 ? c : x->index < y->index ? -1 : x->index > y->index;
}

static int graph_rows(Graph *g, GcdumpReport *report) {
        _cleanup_free_ Row *rows = calloc(g->n_types ? g->n_types : 1, sizeof(Row));
        size_t n = 0;

        if (!rows)
                return -ENOMEM;
        for (size_t i = 0; i < g->n_types; i++) {
                GraphType *t = &g->types[i];
                const char *base;

                if (!t->name || !*t->name || t->size == 0 || t->count == 0)
                        continue;
                base = t->module ? strrchr(t->module, '/') : NULL;
                base = base ? base + 1 : t->module;
                rows[n] = (Row){ .t = { .name = strdup(t->name), .size = t->size, .count = t->count,
                                          .total_size = t->total }, .index = i };
                if (!rows[n].t.name || (base && *base && !(rows[n].t.module = strdup(base)))) {
                        free(rows[n].t.name);
                        goto fail;
                }
                n++;
        }
        qsort(rows, n, sizeof(Row), compare_indexed_rows);
        report->types = calloc(n ? n : 1, sizeof(GcdumpType));
        if (!report->types)
                goto fail;
        for (size_t i = 0; i < n; i++)
                report->types[i] = rows[i].t;
        report->n_types = n;
        return 0;
fail:
        for (size_t i = 0; i < n; i++) {
                free(rows[i].t.name);
                free(rows[i].t.module);
        }
        return -ENOMEM;
}

static const char *const sort_names[_GCDUMP_SORT_MAX] = {
        [GCDUMP_SORT_SIZE] = "size",
        [GCDUMP_SORT_COUNT] = "count",
        [GCDUMP_SORT_NAME] = "name",
        [GCDUMP_SORT_STOCK] = "stock",
};

GcdumpSort gcdump_sort_from_string(const char *s) {
        for (GcdumpSort i = 0; i < _GCDUMP_SORT_MAX; i++)
                if (s && strcmp(s, sort_names[i]) == 0)
                        return i;
        return _GCDUMP_SORT_INVALID;
}

const char *gcdump_sort_to_string(GcdumpSort sort) {
        return sort >= 0 && sort < _GCDUMP_SORT_MAX ? sort_names[sort] : NULL;
}

static int compare_numbers(int64_t a, int64_t b) {
        return a < b ? -1 : a > b;
}

static int compare_names(const GcdumpType *x, const GcdumpType *y) {
        int c = strcmp(x->name, y->name);

        if (c != 0 || x->module == y->module)
                return c;
        if (!x->module || !y->module)
                return x->module ? 1 : -1;
        return strcmp(x->module, y->module);
}

/* A row and its place in the report's order, which breaks ties (qsort is not stable). */
typedef struct SortedRow {
        const GcdumpType *t;
        size_t index;
        GcdumpSort sort;
} SortedRow;

static int compare_sorted_rows(const void *a, const void *b) {
        const SortedRow *x = a, *y = b;
        int c = 0;

        /* the order's key, then the other number, then the name; the report's order last */
        if (x->sort == GCDUMP_SORT_SIZE || x->sort == GCDUMP_SORT_COUNT) {
                int by_size = compare_numbers(x->t->total_size, y->t->total_size),
                    by_count = compare_numbers(x->t->count, y->t->count);

                c = x->sort == GCDUMP_SORT_SIZE ? (by_size ? by_size : by_count) : (by_count ? by_count : by_size);
        }
        if (c == 0 && x->sort != GCDUMP_SORT_STOCK)
                c = compare_names(x->t, y->t);
        return c != 0 ? c : compare_numbers((int64_t)x->index, (int64_t)y->index);
}

int gcdump_report_sort(GcdumpReport *r, GcdumpSort sort) {
        _cleanup_free_ SortedRow *rows = NULL;
        _cleanup_free_ GcdumpType *types = NULL;

        if (sort == GCDUMP_SORT_STOCK || r->n_types == 0)
                return 0; /* the report's own order */
        rows = calloc(r->n_types, sizeof(SortedRow));
        types = calloc(r->n_types, sizeof(GcdumpType));
        if (!rows || !types)
                return -ENOMEM;
        for (size_t i = 0; i < r->n_types; i++)
                rows[i] = (SortedRow){ .t = &r->types[i], .index = i, .sort = sort };
        qsort(rows, r->n_types, sizeof(SortedRow), compare_sorted_rows);
        for (size_t i = 0; i < r->n_types; i++)
                types[i] = *rows[i].t;
        free(r->types);
        r->types = TAKE_PTR(types);
        return 0;
}

/**
 * gcdump_heap_report() - the type table of the heap, as dotnet-gcdump report prints it
 */
int gcdump_heap_report(GcdumpHeap *h, GcdumpReport *ret) {
        GcdumpReport report = {};
        int r;

        r = gcdump_graph_build(h);
        if (r == 0)
                r = graph_rows(&h->graph, &report);
        if (r != 0)
                return r;
        report.total_size = h->total_size;
        report.truncated = h->truncated;
        /* every node: the objects, those only referenced, and the roots' pseudo-nodes */
        report.objects = h->n_indexes + h->n_builders;
        report.references = h->references;
        *ret = report;
        return 0;
}

void gcdump_report_done(GcdumpReport *r) {
        for (size_t i = 0; i < r->n_types; i++) {
                free(r->types[i].name);
                free(r->types[i].module);
        }
        free(r->types);
        *r = (GcdumpReport){};
}

/* The graph's readers come after gcdump_graph_build() returned 0 (gcdump-graph.h). */
static void assert_graph_built(const GcdumpHeap *h) {
        assert(h->built && h->build_error == 0);
}

unsigned gcdump_graph_pointer_size(const GcdumpHeap *h) {
        assert_graph_built(h);
        return h->pointer_size;
}

int64_t gcdump_graph_total_size(const GcdumpHeap *h) {
        assert_graph_built(h);
        return h->total_size;
}

size_t gcdump_graph_nodes(const GcdumpHeap *h) {
        assert_graph_built(h);
        return h->n_indexes + h->n_builders;
}

size_t gcdump_graph_root(const GcdumpHeap *h) {
        assert_graph_built(h);
        return h->n_indexes;
}

uint32_t gcdump_graph_node_label(const GcdumpHeap *h, size_t i) {
        assert_graph_built(h);
        return index_label(h, i);
}

uint64_t gcdump_graph_node_address(const GcdumpHeap *h, size_t i) {
        assert_graph_built(h);
        return index_address(h, i);
}

const Chunks *gcdump_graph_blob(const GcdumpHeap *h) {
        assert_graph_built(h);
        return &h->blob;
}

size_t gcdump_graph_types(const GcdumpHeap *h) {
        assert_graph_built(h);
        return h->graph.n_types;
}

void gcdump_graph_type(const GcdumpHeap *h, size_t i, const char **ret_name, int32_t *ret_size, const char **ret_module) {
        assert_graph_built(h);
        assert(i < h->graph.n_types);
        *ret_name = h->graph.types[i].name;
        *ret_size = h->graph.types[i].size;
        *ret_module = h->graph.types[i].module;
}

const char *gcdump_strerror(int r) {
        if (r < 0)
                return strerror(-r);
        switch (r) {
        case GCDUMP_E_NO_DUMP: return "the runtime sent no complete heap dump";
        case GCDUMP_E_BROKEN: return "the dump's objects ask for other references than the runtime sent (events lost?)";
        case GCDUMP_E_LIMIT: return "the heap is beyond the heap reader's limits";
        default: return "the runtime's heap events are malformed";
        }
}
