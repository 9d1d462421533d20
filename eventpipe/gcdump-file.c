/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The .gcdump file (docs/gcdump.md): a FastSerialization stream of one GCHeapDump, written from the
 * graph gcdump-heap.c built (gcdump-graph.h), as dotnet-gcdump convert writes it. Pure: the bytes go
 * to the caller's writer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include "common/cleanup.h"
#include "eventpipe/gcdump-graph.h"

#define FS_NULL_REFERENCE 1
#define FS_BEGIN_OBJECT 4
#define FS_END_OBJECT 6
#define FS_TAG_BYTE 8
#define FS_SKIP_REGION 12
#define FS_TAG_STRING 13

typedef struct Out {
        GcdumpWrite write;
        void *userdata;
        uint64_t offset;         /* of the next byte, in the file */
        size_t n;
        int error;
        uint8_t buf[65536];
} Out;

static void out_flush(Out *o) {
        if (o->n > 0 && o->error == 0)
                o->error = o->write(o->buf, o->n, o->userdata);
        o->n = 0;
}

static void out_bytes(Out *o, const void *data, size_t size) {
        const uint8_t *p = data;

        o->offset += size;
        while (size > 0 && o->error == 0) {
                size_t k = MIN(size, sizeof(o->buf) - o->n);
                memcpy(o->buf + o->n, p, k);
                o->n += k;
                p += k;
                size -= k;
                if (o->n == sizeof(o->buf))
                        out_flush(o);
        }
}

static void out_le(Out *o, uint64_t v, unsigned size) {
        uint8_t b[8];

        for (unsigned i = 0; i < size; i++)
                b[i] = (uint8_t)(v >> (8 * i));
        out_bytes(o, b, size);
}

static void out_u8(Out *o, uint8_t v) {
        out_le(o, v, 1);
}

static void out_i32(Out *o, int32_t v) {
        out_le(o, (uint32_t)v, 4);
}

static void out_i64(Out *o, int64_t v) {
        out_le(o, (uint64_t)v, 8);
}

/* A UTF-8 sequence's code point and length; a broken one is U+FFFD of one byte. */
static uint32_t utf8_next(const uint8_t *s, size_t *ret_len) {
        uint32_t cp;
        size_t n;

        if (s[0] < 0x80)
                n = 1, cp = s[0];
        else if ((s[0] & 0xe0) == 0xc0 && (s[1] & 0xc0) == 0x80)
                n = 2, cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
        else if ((s[0] & 0xf0) == 0xe0 && (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80)
                n = 3, cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
        else if ((s[0] & 0xf8) == 0xf0 && (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80)
                n = 4, cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 | (uint32_t)(s[2] & 0x3f) << 6 |
                       (s[3] & 0x3f);
        else
                n = 1, cp = 0xfffd;
        *ret_len = n;
        return cp;
}

/* One UTF-16 unit as the writer encodes it: 1 to 3 bytes, surrogates each on their own. */
static void out_unit(Out *o, uint32_t u) {
        uint8_t b[3];

        if (u < 0x80) {
                out_u8(o, (uint8_t)u);
                return;
        }
        if (u < 0x800) {
                b[0] = (uint8_t)(0xc0 | u >> 6);
                b[1] = (uint8_t)(0x80 | (u & 0x3f));
                out_bytes(o, b, 2);
                return;
        }
        b[0] = (uint8_t)(0xe0 | (u >> 12 & 0xf));
        b[1] = (uint8_t)(0x80 | (u >> 6 & 0x3f));
        b[2] = (uint8_t)(0x80 | (u & 0x3f));
        out_bytes(o, b, 3);
}

/* A string: its length in UTF-16 units (-1: NULL), then each unit. */
static void out_string(Out *o, const char *s) {
        const uint8_t *p = (const uint8_t *)s;
        int32_t units = 0;
        size_t n;

        if (!s) {
                out_i32(o, -1);
                return;
        }
        for (size_t i = 0; p[i]; i += n)
                units += utf8_next(p + i, &n) > 0xffff ? 2 : 1;
        out_i32(o, units);
        for (size_t i = 0; p[i]; i += n) {
                uint32_t cp = utf8_next(p + i, &n);
                if (cp > 0xffff) {
                        out_unit(o, 0xd800 + ((cp - 0x10000) >> 10));
                        out_unit(o, 0xdc00 + ((cp - 0x10000) & 0x3ff));
                } else
                        out_unit(o, cp);
        }
}

/* An object's beginning: its tag and its type (a SerializationType, whose own type is null). */
static void out_begin_object(Out *o, int32_t version, int32_t minimum_reader_version, const char *type) {
        out_u8(o, FS_BEGIN_OBJECT);
        out_u8(o, FS_BEGIN_OBJECT);
        out_u8(o, FS_NULL_REFERENCE);
        out_i32(o, version);
        out_i32(o, minimum_reader_version);
        out_string(o, type);
        out_u8(o, FS_END_OBJECT);
}

/* Graph.ToStream() and MemoryGraph's: types, each node's definition's offset, the blob, the addresses. */
static int out_graph(Out *o, const GcdumpHeap *h) {
        size_t n_nodes = gcdump_graph_nodes(h), n_types = gcdump_graph_types(h);
        const Chunks *blob = gcdump_graph_blob(h);

        out_begin_object(o, 1, 0, "Graphs.MemoryGraph");
        out_i64(o, gcdump_graph_total_size(h));
        out_i32(o, (int32_t)gcdump_graph_root(h)); /* the root, "[.NET Roots]": the first pseudo-node */
        out_i32(o, (int32_t)n_types);
        for (size_t i = 0; i < n_types; i++) {
                const char *name, *module;
                int32_t size;

                gcdump_graph_type(h, i, &name, &size, &module);
                out_string(o, name);
                out_i32(o, size);
                out_string(o, module);
        }
        out_i32(o, (int32_t)n_nodes);
        for (size_t i = 0; i < n_nodes; i++)
                out_i32(o, (int32_t)gcdump_graph_node_label(h, i));
        out_i32(o, (int32_t)blob->size);
        for (uint64_t at = 0; at < blob->size; at += CHUNK_SIZE)
                out_bytes(o, blob->chunks[at >> CHUNK_SHIFT], (size_t)MIN((uint64_t)CHUNK_SIZE, blob->size - at));
        out_i32(o, (int32_t)n_nodes);
        for (size_t i = 0; i < n_nodes; i++)
                out_i64(o, (int64_t)gcdump_graph_node_address(h, i));
        out_u8(o, FS_TAG_BYTE);
        out_u8(o, gcdump_graph_pointer_size(h) == 8);
        out_u8(o, FS_END_OBJECT);
        return 0;
}

/**
 * gcdump_heap_write() - the heap as a .gcdump file
 *
 * What dotnet-gcdump convert writes of the same graph (GCHeapDump version
 * 10, MemoryGraph version 1), with @tool as its CreationTool; the bytes go
 * to @write in order.
 */
int gcdump_heap_write(GcdumpHeap *h, const char *tool, GcdumpWrite write, void *userdata) {
        _cleanup_free_ Out *o = calloc(1, sizeof(Out));
        uint64_t skip_end, table, trailer;
        int r;

        if (!o)
                return -ENOMEM;
        r = gcdump_graph_build(h);
        if (r != 0)
                return r;
        *o = (Out){ .write = write, .userdata = userdata };
        out_i32(o, 20);
        out_bytes(o, "!FastSerialization.1", 20);
        out_begin_object(o, 10, 8, "GCHeapDump");
        r = out_graph(o, h);
        if (r != 0)
                return r;
        out_u8(o, gcdump_graph_pointer_size(h) == 8); /* Is64Bit, again */
        out_i32(o, 0x3f800000);             /* AverageCountMultiplier, AverageSizeMultiplier: 1.0f */
        out_i32(o, 0x3f800000);
        out_u8(o, FS_NULL_REFERENCE);       /* JSHeapInfo */
        out_u8(o, FS_NULL_REFERENCE);       /* DotNetHeapInfo */
        out_string(o, NULL);                /* CollectionLog */
        out_i64(o, 0);                      /* TimeCollected */
        out_string(o, NULL);                /* MachineName */
        out_string(o, NULL);                /* ProcessName */
        out_i32(o, 0);                      /* ProcessID */
        out_i64(o, 0);                      /* TotalProcessCommit */
        out_i64(o, 0);                      /* TotalProcessWorkingSet */
        out_i32(o, 0);                      /* CountMultipliersByType */
        out_u8(o, FS_SKIP_REGION);          /* the interop information: none */
        out_i32(o, 0);                      /* ... skipped to forward reference 0 */
        out_u8(o, FS_NULL_REFERENCE);
        skip_end = o->offset;
        out_u8(o, FS_TAG_STRING);
        out_string(o, tool);
        out_u8(o, FS_END_OBJECT);           /* GCHeapDump */
        out_u8(o, FS_END_OBJECT);           /* the stream */
        table = o->offset;
        out_i32(o, 1);                      /* the forward references: where each is defined */
        out_i32(o, (int32_t)skip_end);
        trailer = o->offset;
        out_i32(o, (int32_t)table);
        out_i32(o, (int32_t)trailer);
        out_flush(o);
        if (o->error != 0)
                return o->error;
        return o->offset > INT32_MAX ? GCDUMP_E_LIMIT : 0;
}
