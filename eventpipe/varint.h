/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Numbers packed for the pure readers' own spools and streams (gcdump-heap.c, cpu-profile.c): base-128
 * varints, least significant group first, and zigzag for signed ones. Read back with
 * nettrace_varint_decode() or by their own writer alone. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define VARINT_MAX_BYTES 10

static inline uint64_t zigzag(int64_t v) {
        return (uint64_t)v << 1 ^ (uint64_t)(v >> 63);
}

static inline int64_t unzigzag(uint64_t v) {
        return (int64_t)(v >> 1 ^ -(v & 1));
}

/* Writes @v at @buf (room for VARINT_MAX_BYTES) and returns the bytes written. */
static inline size_t varint_put(uint8_t *buf, uint64_t v) {
        size_t n = 0;

        for (; v >= 0x80; v >>= 7)
                buf[n++] = (uint8_t)(v | 0x80);
        buf[n++] = (uint8_t)v;
        return n;
}
