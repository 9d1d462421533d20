/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Little-endian integers at any alignment: both wire formats dsagent speaks are little-endian */
#pragma once

#include <stdint.h>

static inline uint16_t unaligned_read_le16(const uint8_t *p) {
        return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t unaligned_read_le32(const uint8_t *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t unaligned_read_le64(const uint8_t *p) {
        return (uint64_t)unaligned_read_le32(p) | (uint64_t)unaligned_read_le32(p + 4) << 32;
}

static inline void unaligned_write_le16(uint8_t *p, uint16_t v) {
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
}

static inline void unaligned_write_le32(uint8_t *p, uint32_t v) {
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

static inline void unaligned_write_le64(uint8_t *p, uint64_t v) {
        unaligned_write_le32(p, (uint32_t)v);
        unaligned_write_le32(p + 4, (uint32_t)(v >> 32));
}
