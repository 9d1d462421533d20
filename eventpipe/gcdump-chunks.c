/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The heap graph's containers (gcdump-chunks.h): growing u32 arrays, and bytes in chunks of one size. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "eventpipe/gcdump-chunks.h"

int u32_array_reserve_zeroed(uint32_t **array, size_t *cap, size_t n) {
        size_t old = *cap;

        if (array_reserve((void **)array, cap, n, sizeof(uint32_t)) < 0)
                return -ENOMEM;
        if (*cap > old)
                memset(*array + old, 0, (*cap - old) * sizeof(uint32_t));
        return 0;
}

uint32_t *u32_memdup(const uint32_t *p, size_t n) {
        uint32_t *copy = malloc(n * sizeof(uint32_t));

        return copy ? memcpy(copy, p, n * sizeof(uint32_t)) : NULL;
}

void chunks_done(Chunks *c) {
        for (size_t i = 0; i < c->n_chunks; i++)
                free(c->chunks[i]);
        free(c->chunks);
        *c = (Chunks){};
}

int chunks_grow(Chunks *c) {
        if (array_reserve((void **)&c->chunks, &c->cap_chunks, c->n_chunks, sizeof(uint8_t *)) < 0)
                return -ENOMEM;
        c->chunks[c->n_chunks] = malloc(CHUNK_SIZE);
        if (!c->chunks[c->n_chunks])
                return -ENOMEM;
        c->n_chunks++;
        return 0;
}

void chunks_release(Chunks *c, uint64_t at) {
        assert(at <= c->size); /* a stream is read no further than it was written */
        for (; c->released < c->n_chunks && ((uint64_t)c->released + 1) << CHUNK_SHIFT <= at; c->released++) {
                free(c->chunks[c->released]);
                c->chunks[c->released] = NULL;
        }
}
