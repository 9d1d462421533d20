/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Seeded hash maps of the EventPipe readers (hash-map.h) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "eventpipe/hash-map.h"

static uint64_t mix64(uint64_t x) {
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ULL;
        return x ^ (x >> 33);
}

void u64map_done(U64Map *m) {
        free(m->keys);
        free(m->values);
        *m = (U64Map){ .seed = m->seed };
}

static uint32_t *u64map_slot(U64Map *m, uint64_t key) {
        size_t i = mix64(key ^ m->seed) & (m->cap - 1);

        while (m->values[i] != 0 && m->keys[i] != key) {
                i = (i + 1) & (m->cap - 1);
                m->probes++;
        }
        return &m->values[i];
}

static int u64map_grow(U64Map *m) {
        U64Map g = { .cap = m->cap ? m->cap * 2 : 1024, .seed = m->seed };

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

int u64map_reserve(U64Map *m, size_t n) {
        while (2 * n > m->cap)
                if (u64map_grow(m) < 0)
                        return -ENOMEM;
        return 0;
}

uint32_t u64map_get(U64Map *m, uint64_t key) {
        uint32_t v;

        if (m->cap == 0)
                return UINT32_MAX;
        v = *u64map_slot(m, key);
        return v == 0 ? UINT32_MAX : v - 1;
}

int u64map_put(U64Map *m, uint64_t key, uint32_t value, bool replace) {
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

static uint64_t hash_str(const char *s, uint64_t seed) {
        uint64_t h = 0xcbf29ce484222325ULL ^ seed;

        for (; *s; s++)
                h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
        return mix64(h);
}

void strmap_done(StrMap *m) {
        for (size_t i = 0; i < m->cap; i++)
                free(m->keys[i]);
        free(m->keys);
        free(m->values);
        *m = (StrMap){ .seed = m->seed };
}

static size_t strmap_index(const StrMap *m, const char *key) {
        size_t i = hash_str(key, m->seed) & (m->cap - 1);

        while (m->keys[i] && strcmp(m->keys[i], key) != 0)
                i = (i + 1) & (m->cap - 1);
        return i;
}

static int strmap_grow(StrMap *m) {
        StrMap g = { .cap = m->cap ? m->cap * 2 : 256, .seed = m->seed };

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

uint32_t strmap_get(const StrMap *m, const char *key) {
        size_t i;

        if (m->cap == 0)
                return UINT32_MAX;
        i = strmap_index(m, key);
        return m->keys[i] ? m->values[i] : UINT32_MAX;
}

int strmap_put(StrMap *m, const char *key, uint32_t value) {
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
