/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Hash maps of the pure EventPipe readers (gcdump-heap.c, cpu-profile.c): 64-bit keys to indexes,
 * and strings to indexes. Open addressing with linear probing; the keys (addresses, ids, names) are
 * the target's choice, so they are hashed with a seed it does not know (set .seed before the first
 * put), and it cannot make them collide. Values are indexes below UINT32_MAX.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A slot's value 0 is empty, so values are stored plus one. */
typedef struct U64Map {
        uint64_t *keys;
        uint32_t *values;
        size_t n, cap;   /* cap: a power of two */
        uint64_t seed;
        uint64_t probes; /* slots looked at past the first, for tests */
} U64Map;

void u64map_done(U64Map *m);
/* Room for @n keys without growing: the map's one copy made while it is small, not at its largest. */
int u64map_reserve(U64Map *m, size_t n);
/* The value of @key, or UINT32_MAX. */
uint32_t u64map_get(U64Map *m, uint64_t key);
/* Sets @key to @value (< UINT32_MAX). Return: 1 if it was new, 0 if it was there (replaced when @replace),
 * -ENOMEM. */
int u64map_put(U64Map *m, uint64_t key, uint32_t value, bool replace);

typedef struct StrMap {
        char **keys;     /* copies, freed with the map */
        uint32_t *values;
        size_t n, cap;
        uint64_t seed;
} StrMap;

void strmap_done(StrMap *m);
/* The value of @key, or UINT32_MAX. */
uint32_t strmap_get(const StrMap *m, const char *key);
/* Adds @key (copied) unless it is there. Return: 1 if added, 0 if it was there, -ENOMEM. */
int strmap_put(StrMap *m, const char *key, uint32_t value);
