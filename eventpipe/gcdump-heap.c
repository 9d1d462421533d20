/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "cursor.h"
#include "gcdump-heap.h"

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

/* ---- hash maps: addresses and ids to indexes, names to indexes ---- */

/* Open addressing; a slot's value 0 is empty, so values are stored plus one. */
typedef struct U64Map {
        uint64_t *keys;
        uint32_t *values;
        size_t n, cap; /* cap: a power of two */
} U64Map;

static uint64_t mix64(uint64_t x) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ULL;
        return x ^ (x >> 33);
}

static void u64map_done(U64Map *m) {
        free(m->keys);
        free(m->values);
        *m = (U64Map){};
}

static uint32_t *u64map_slot(const U64Map *m, uint64_t key) {
        size_t i = mix64(key) & (m->cap - 1);

        while (m->values[i] != 0 && m->keys[i] != key)
                i = (i + 1) & (m->cap - 1);
        return &m->values[i];
}

static int u64map_grow(U64Map *m) {
        U64Map g = { .cap = m->cap ? m->cap * 2 : 1024 };

        g.keys = calloc(g.cap, sizeof(uint64_t));
        g.values = calloc(g.cap, sizeof(uint32_t));
        if (!g.keys || !g.values) {
                u64map_done(&g);
                return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
                if (m->values[i] != 0) {
                        uint32_t *v = u64map_slot(&g, m->keys[i]);
                        g.keys[v - g.values] = m->keys[i];
                        *v = m->values[i];
                }
        g.n = m->n;
        u64map_done(m);
        *m = g;
        return 0;
}

/* The value of @key, or UINT32_MAX. */
static uint32_t u64map_get(const U64Map *m, uint64_t key) {
        uint32_t v;

        if (m->cap == 0)
                return UINT32_MAX;
        v = *u64map_slot(m, key);
        return v == 0 ? UINT32_MAX : v - 1;
}

/* Sets @key to @value (< UINT32_MAX). Return: 1 if it was new, 0 if replaced, -ENOMEM. */
static int u64map_put(U64Map *m, uint64_t key, uint32_t value, bool replace) {
        uint32_t *v;

        if (2 * (m->n + 1) > m->cap && u64map_grow(m) < 0)
                return -ENOMEM;
        v = u64map_slot(m, key);
        if (*v != 0) {
                if (replace)
                        *v = value + 1;
                return 0;
        }
        m->keys[v - m->values] = key;
        *v = value + 1;
        m->n++;
        return 1;
}

typedef struct StrMap {
        char **keys;
        uint32_t *values;
        size_t n, cap;
} StrMap;

static uint64_t hash_str(const char *s) {
        uint64_t h = 0xcbf29ce484222325ULL;

        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
        return h;
}

static void strmap_done(StrMap *m) {
        for (size_t i = 0; i < m->cap; i++)
                free(m->keys[i]);
        free(m->keys);
        free(m->values);
        *m = (StrMap){};
}

static size_t strmap_index(const StrMap *m, const char *key) {
        size_t i = hash_str(key) & (m->cap - 1);

        while (m->keys[i] && strcmp(m->keys[i], key) != 0)
                i = (i + 1) & (m->cap - 1);
        return i;
}

static int strmap_grow(StrMap *m) {
        StrMap g = { .cap = m->cap ? m->cap * 2 : 256 };

        g.keys = calloc(g.cap, sizeof(char *));
        g.values = calloc(g.cap, sizeof(uint32_t));
        if (!g.keys || !g.values) {
                free(g.keys);
                free(g.values);
                return -ENOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
                if (m->keys[i]) {
                        size_t j = strmap_index(&g, m->keys[i]);
                        g.keys[j] = m->keys[i];
                        g.values[j] = m->values[i];
                }
        g.n = m->n;
        free(m->keys);
        free(m->values);
        *m = g;
        return 0;
}

static uint32_t strmap_get(const StrMap *m, const char *key) {
        size_t i;

        if (m->cap == 0)
                return UINT32_MAX;
        i = strmap_index(m, key);
        return m->keys[i] ? m->values[i] : UINT32_MAX;
}

/* Adds @key (copied) unless it is there. */
static int strmap_put(StrMap *m, const char *key, uint32_t value) {
        size_t i;

        if (2 * (m->n + 1) > m->cap && strmap_grow(m) < 0)
                return -ENOMEM;
        i = strmap_index(m, key);
        if (m->keys[i])
                return 0;
        m->keys[i] = strdup(key);
        if (!m->keys[i])
                return -ENOMEM;
        m->values[i] = value;
        m->n++;
        return 1;
}

/* ---- what the events say, kept until the end ---- */

typedef struct TypeDef {
        uint64_t id, module_id;
        uint32_t name_id, flags;
        char *name;              /* as the runtime names it */
} TypeDef;

typedef struct Node {
        uint64_t address, type_id;
        uint64_t size;
        uint32_t edges;
} Node;

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

struct GcdumpHeap {
        unsigned pointer_size;
        /* the reader's state: which GC is the dump, and whether its events are being taken */
        bool seen_start, taking;
        uint32_t gc_id;
        uint64_t node_blocks, edge_blocks, type_blocks;

        TypeDef *types;
        size_t n_types, cap_types;
        Node *nodes;
        size_t n_nodes, cap_nodes;
        bool nodes_cut;          /* nodes past GCDUMP_NODES_MAX: never looked at */
        uint64_t *edges;
        size_t n_edges, cap_edges;
        uint32_t *edge_block_sizes;
        size_t n_edge_block_sizes, cap_edge_block_sizes;
        StaticVar *statics;
        size_t n_statics, cap_statics;
        size_t roots;            /* root references kept, for GCDUMP_ROOTS_MAX */
        size_t name_bytes;

        U64Map modules;          /* module id -> index in module_paths */
        char **module_paths;
        size_t n_module_paths, cap_module_paths;

        /* the graph's nodes: every address seen, and the roots' pseudo-nodes */
        U64Map addresses;
        Builder *builders;
        size_t n_builders, cap_builders;
        StrMap builder_names;    /* "PARENT NAME" -> builder */
        uint64_t references;
};

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
        free(h->nodes);
        free(h->edges);
        free(h->edge_block_sizes);
        for (size_t i = 0; i < h->n_statics; i++)
                free(h->statics[i].field);
        free(h->statics);
        for (size_t i = 0; i < h->n_module_paths; i++)
                free(h->module_paths[i]);
        free(h->module_paths);
        u64map_done(&h->modules);
        u64map_done(&h->addresses);
        for (size_t i = 0; i < h->n_builders; i++)
                free(h->builders[i].name);
        free(h->builders);
        strmap_done(&h->builder_names);
        free(h);
        return NULL;
}

void gcdump_heap_set_pointer_size(GcdumpHeap *h, unsigned pointer_size) {
        if (pointer_size == 4 || pointer_size == 8)
                h->pointer_size = pointer_size;
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

        if (r == NETTRACE_E_LIMIT)
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

/* A node of the graph for @address, made the first time it is seen. */
static int see_address(GcdumpHeap *h, uint64_t address) {
        int r = u64map_put(&h->addresses, address, 0, false);

        return r < 0 ? r : 0;
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

/* A root's reference to the object at @address, under the pseudo-node @parent/@name. */
static int add_root(GcdumpHeap *h, uint32_t parent, const char *name, uint64_t address) {
        uint32_t b;
        int r;

        if (h->roots >= GCDUMP_ROOTS_MAX)
                return GCDUMP_E_LIMIT;
        r = builder(h, parent, name, &b);
        if (r != 0)
                return r;
        r = see_address(h, address);
        if (r < 0)
                return r;
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

/* Index, Count (u32), ClrInstanceID (u16), then each: Address (pointer), Size, TypeID, EdgeCount (u64). */
static int on_bulk_node(GcdumpHeap *h, Cursor *c) {
        uint32_t index, count;
        uint16_t instance;

        if (!take_u32(c, &index) || !take_u32(c, &count) || !take_u16(c, &instance) ||
            count > c->left / (h->pointer_size + 24))
                return GCDUMP_E_MALFORMED;
        h->node_blocks++;
        for (uint32_t i = 0; i < count; i++) {
                Node n;
                uint64_t edges;

                (void)(take_pointer(h, c, &n.address) && take_u64(c, &n.size) && take_u64(c, &n.type_id) &&
                       take_u64(c, &edges));
                if (edges > GCDUMP_EDGES_MAX)
                        return GCDUMP_E_LIMIT;
                n.edges = (uint32_t)edges;
                if (h->n_nodes >= GCDUMP_NODES_MAX) {
                        h->nodes_cut = true;
                        continue;
                }
                if (array_reserve((void **)&h->nodes, &h->cap_nodes, h->n_nodes, sizeof(Node)) < 0)
                        return -ENOMEM;
                h->nodes[h->n_nodes++] = n;
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

                (void)(take_pointer(h, c, &target) && take_u32(c, &field));
                if (array_reserve((void **)&h->edges, &h->cap_edges, h->n_edges, sizeof(uint64_t)) < 0)
                        return -ENOMEM;
                h->edges[h->n_edges++] = target;
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

                (void)(take_pointer(h, c, &address) && take_u8(c, &kind) && take_u32(c, &flags) &&
                       take_pointer(h, c, &id));
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

                (void)(take_pointer(h, c, &key) && take_pointer(h, c, &value) && take_pointer(h, c, &id));
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
 * As dotnet-gcdump's reader: the types whenever they come; nodes, references
 * and roots only between the start and the end of the first induced,
 * blocking gen-2 GC; module names whenever they come (the rundown at the end).
 */
int gcdump_heap_add(GcdumpHeap *h, const NettraceEvent *e) {
        Cursor c = { e->payload, e->payload_size };

        if (!e->metadata)
                return GCDUMP_E_OTHER;
        if (event_is(e, RUNDOWN_PROVIDER, EV_RUNDOWN_MODULE_DC_START) ||
            event_is(e, RUNDOWN_PROVIDER, EV_RUNDOWN_MODULE_DC_END))
                return on_module(h, &c);
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
                return on_bulk_type(h, &c);
        case EV_MODULE_DC_START_V2:
        case EV_MODULE_DC_END_V2:
        case EV_MODULE_LOAD:
        case EV_MODULE_UNLOAD:
                return on_module(h, &c);
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

typedef struct GraphType {
        char *name;       /* NULL: a type without one (the report leaves it out) */
        char *module;     /* the module's path, or NULL */
        int32_t size;     /* of its first node; -1 before */
        uint32_t count;
} GraphType;

typedef struct Graph {
        GraphType *types;
        size_t n_types, cap_types;
        StrMap interned;  /* "MODULE!NAME" or "NAME" -> type */
        StrMap big;       /* "NAME (Bytes > 1K)" -> type */
        U64Map by_id;     /* TypeID -> type */
} Graph;

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

static const char *module_path(const GcdumpHeap *h, uint64_t id) {
        uint32_t i = u64map_get(&h->modules, id);

        return i == UINT32_MAX ? NULL : h->module_paths[i];
}

/* The types of the GCBulkType events, in their order, each TypeID to its type (the last word stays). */
static int graph_add_types(Graph *g, const GcdumpHeap *h) {
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

/* The reader's GetNextEdge(): the edges in order, block by block; running out breaks the dump. */
typedef struct EdgeReader {
        size_t edge, block, block_end;
        bool in_block;
} EdgeReader;

static int next_edge(const GcdumpHeap *h, EdgeReader *e, uint64_t *ret) {
        while (!e->in_block || e->edge == e->block_end) {
                if (e->block >= h->n_edge_block_sizes)
                        return GCDUMP_E_BROKEN; /* "not enough edge data" */
                e->block_end = e->edge + h->edge_block_sizes[e->block++];
                e->in_block = true;
        }
        *ret = h->edges[e->edge++];
        return 0;
}

/* Each node's type and size, its references taken in order from the edges. */
static int graph_add_nodes(Graph *g, GcdumpHeap *h, GcdumpReport *report) {
        EdgeReader edges = {};
        int r;

        for (size_t i = 0; i < h->n_nodes; i++) {
                const Node *n = &h->nodes[i];
                int32_t size = (int32_t)n->size;
                uint32_t t;

                r = graph_node_type(g, n->type_id, size, &t);
                if (r != 0)
                        return r;
                r = see_address(h, n->address);
                for (uint32_t k = 0; r == 0 && k < n->edges; k++) {
                        uint64_t target;
                        r = next_edge(h, &edges, &target);
                        if (r == 0)
                                r = see_address(h, target);
                }
                if (r != 0)
                        return r;
                if (size < 0)
                        size = INT32_MAX;
                if (g->types[t].size < 0)
                        g->types[t].size = size;
                g->types[t].count++;
                report->total_size += size;
                h->references += n->edges;
                if (h->addresses.n + h->n_builders >= GCDUMP_NODES_MAX) {
                        /* dotnet-gcdump stops here, and checks nothing more */
                        report->truncated = true;
                        return 0;
                }
        }
        /* the block of the last edge taken must have been taken whole ("extra edge data") */
        if (edges.in_block && edges.edge != edges.block_end)
                return GCDUMP_E_BROKEN;
        return 0;
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
                rows[n] = (Row){ .t = { .name = TAKE_PTR(t->name), .size = t->size, .count = t->count }, .index = i };
                if (base && *base && !(rows[n].t.module = strdup(base))) {
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

/**
 * gcdump_heap_report() - the type table of the heap, as dotnet-gcdump report prints it
 *
 * Builds what the stock reader's ConvertHeapDataToGraph() builds, in its
 * order (the graph's type order breaks the report's ties): the types of
 * every GCBulkType, the static variables' roots, then each node with its
 * references. Call once.
 */
int gcdump_heap_report(GcdumpHeap *h, GcdumpReport *ret) {
        _cleanup_(graph_done) Graph g = {};
        GcdumpReport report = {};
        uint32_t undefined;
        int r;

        if (!h->seen_start || h->taking)
                return GCDUMP_E_NO_DUMP;
        /* the graph's first type: its undefined nodes' */
        r = graph_new_type(&g, strdup("UNDEFINED"), NULL, &undefined);
        if (r != 0)
                return r;
        if (!g.types[0].name)
                return -ENOMEM;
        g.types[0].size = 0;
        r = graph_add_types(&g, h);
        if (r == 0)
                r = graph_add_statics(&g, h);
        if (r == 0)
                r = graph_add_nodes(&g, h, &report);
        if (r == 0)
                r = graph_rows(&g, &report);
        if (r != 0)
                return r;
        /* every node: the objects, those only referenced, and the roots' pseudo-nodes */
        report.objects = h->addresses.n + h->n_builders;
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
