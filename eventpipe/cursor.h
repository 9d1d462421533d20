/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Reading little-endian fields from bytes that came from a target: a cursor
 * that never moves past what is there. Shared by the nettrace parser and the
 * readers of the runtime's own events (monitor-events.c, cpu-profile.c,
 * gcdump-heap.c). Its codes are its own: each reader says what they mean in
 * its terms.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eventpipe/nettrace.h" /* NETTRACE_STRING_MAX: the runtime's strings are the stream's */
#include "common/text.h"

enum {
        _CURSOR_E_SUCCESS,
        CURSOR_E_UNTERMINATED, /* the bytes end before the string's NUL */
        CURSOR_E_TOO_LONG,     /* more than NETTRACE_STRING_MAX units before the NUL */
};

typedef struct Cursor {
        const uint8_t *p;
        size_t left;
} Cursor;

static inline uint16_t get_u16(const uint8_t *p) {
        return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t get_u32(const uint8_t *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t get_u64(const uint8_t *p) {
        return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static inline bool take(Cursor *c, size_t n, const uint8_t **ret) {
        if (c->left < n)
                return false;
        *ret = c->p;
        c->p += n;
        c->left -= n;
        return true;
}

static inline bool take_u8(Cursor *c, uint8_t *ret) {
        const uint8_t *p;

        if (!take(c, 1, &p))
                return false;
        *ret = p[0];
        return true;
}

static inline bool take_u16(Cursor *c, uint16_t *ret) {
        const uint8_t *p;

        if (!take(c, 2, &p))
                return false;
        *ret = get_u16(p);
        return true;
}

static inline bool take_u32(Cursor *c, uint32_t *ret) {
        const uint8_t *p;

        if (!take(c, 4, &p))
                return false;
        *ret = get_u32(p);
        return true;
}

static inline bool take_u64(Cursor *c, uint64_t *ret) {
        const uint8_t *p;

        if (!take(c, 8, &p))
                return false;
        *ret = get_u64(p);
        return true;
}

/*
 * A NUL-terminated UTF-16LE string, as metadata and payloads carry them, as UTF-8 (see
 * utf16le_to_utf8()). Return: 0 and *@ret set, the cursor past the NUL; CURSOR_E_TOO_LONG,
 * CURSOR_E_UNTERMINATED; -ENOMEM. The cursor moves on 0 only.
 */
static inline int take_utf16z(Cursor *c, char **ret) {
        size_t max = c->left / 2;
        char *s;
        int r;

        for (size_t i = 0; i < max; i++) {
                if (i > NETTRACE_STRING_MAX)
                        return CURSOR_E_TOO_LONG;
                if (get_u16(c->p + 2 * i) == 0) {
                        r = utf16le_to_utf8(c->p, i, &s);
                        if (r < 0)
                                return r;
                        c->p += 2 * (i + 1);
                        c->left -= 2 * (i + 1);
                        *ret = s;
                        return 0;
                }
        }
        return CURSOR_E_UNTERMINATED;
}
