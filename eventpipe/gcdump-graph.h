/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The graph of a complete heap dump, as the file writer (gcdump-file.c) reads it: built once by
 * gcdump-heap.c from the events, then read here, never changed. Internal to the heap's files.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "eventpipe/gcdump-chunks.h"
#include "eventpipe/gcdump-heap.h"

/* Builds the graph, once; later calls return the first one's result. Return: 0, GCDUMP_E_NO_DUMP,
 * GCDUMP_E_BROKEN, GCDUMP_E_LIMIT, -ENOMEM. The functions below need it built (0). */
int gcdump_graph_build(GcdumpHeap *h);
/* The trace's pointer size: 4 or 8. */
unsigned gcdump_graph_pointer_size(const GcdumpHeap *h);
/* The bytes of every object, summed. */
int64_t gcdump_graph_total_size(const GcdumpHeap *h);
/* The nodes: the objects and other addresses by their index, then the roots' pseudo-nodes; the first
 * pseudo-node, "[.NET Roots]", is the root. */
size_t gcdump_graph_nodes(const GcdumpHeap *h);
size_t gcdump_graph_root(const GcdumpHeap *h);
/* The offset of node @i's definition in the blob; 0 for a node that has none. */
uint32_t gcdump_graph_node_label(const GcdumpHeap *h, size_t i);
/* The address of node @i (0 for a pseudo-node). */
uint64_t gcdump_graph_node_address(const GcdumpHeap *h, size_t i);
/* The nodes' definitions, as Graph.SetNode() writes them. */
const Chunks *gcdump_graph_blob(const GcdumpHeap *h);
/* The types: each one's name (NULL: none), size and module's path (NULL: none). */
size_t gcdump_graph_types(const GcdumpHeap *h);
void gcdump_graph_type(const GcdumpHeap *h, size_t i, const char **ret_name, int32_t *ret_size, const char **ret_module);
