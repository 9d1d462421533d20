/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The containers the heap graph is built in (gcdump-heap.c): arrays of u32 that grow zeroed, and
 * bytes in chunks of one size (streams read once, in order, and freed as they are read; the
 * .gcdump's blob). Pure: no I/O. The hot paths are inline: every byte of every node goes through them.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* Room for element @n of *@array (capacity *@cap), the elements added zeroed. Return: 0 or -ENOMEM. */
int u32_array_reserve_zeroed(uint32_t **array, size_t *cap, size_t n);
/* A copy of the @n elements at @p, or NULL for want of memory. */
uint32_t *u32_memdup(const uint32_t *p, size_t n);

/* One size for all: a chunk a stream frees is the next one the blob takes, so memory does not grow
 * with both at once (and none is big enough to be mapped apart, which malloc would not reuse). */
#define CHUNK_SHIFT 16
#define CHUNK_SIZE ((size_t)1 << CHUNK_SHIFT)

typedef struct Chunks {
        uint8_t **chunks;
        size_t n_chunks, cap_chunks;
        size_t released;         /* chunks freed from the start (chunks_release()) */
        uint64_t size;           /* bytes put */
} Chunks;

/* Frees every chunk and resets *@c to {}. */
void chunks_done(Chunks *c);
/* A new chunk at the end, for the byte at c->size. Return: 0 or -ENOMEM. */
int chunks_grow(Chunks *c);
/* Frees the chunks wholly before byte @at: a stream read that far needs them no more. */
void chunks_release(Chunks *c, uint64_t at);

/* Appends @b. Return: 0 or -ENOMEM. */
static inline int chunks_put(Chunks *c, uint8_t b) {
        size_t at = (size_t)(c->size & (CHUNK_SIZE - 1));

        if (at == 0 && chunks_grow(c) < 0)
                return -ENOMEM;
        c->chunks[c->size >> CHUNK_SHIFT][at] = b;
        c->size++;
        return 0;
}

/* The byte at @at, which must be below c->size and not released. */
static inline uint8_t chunks_at(const Chunks *c, uint64_t at) {
        return c->chunks[at >> CHUNK_SHIFT][at & (CHUNK_SIZE - 1)];
}

/* A stream's numbers: 7 bits a byte, least significant first (what gcdump-heap.c writes, read by it alone). */
static inline int chunks_put_varint(Chunks *c, uint64_t v) {
        for (; v >= 0x80; v >>= 7)
                if (chunks_put(c, (uint8_t)(v | 0x80)) < 0)
                        return -ENOMEM;
        return chunks_put(c, (uint8_t)v);
}

/* The number at *@at, which moves past it. */
static inline uint64_t chunks_read_varint(const Chunks *c, uint64_t *at) {
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b;

        do {
                b = chunks_at(c, (*at)++);
                if (shift < 64)
                        v |= (uint64_t)(b & 0x7f) << shift;
                shift += 7;
        } while (b & 0x80);
        return v;
}
