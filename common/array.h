/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Growing arrays: room for one more element, doubling */
#pragma once

#include <errno.h>
#include <stdlib.h>

/**
 * array_reserve() - make room in *@array for element @n (of @size bytes)
 *
 * *@cap is the number of elements it has room for; it doubles, from 16.
 * Return: 0, or -ENOMEM with *@array and *@cap as they were.
 */
static inline int array_reserve(void **array, size_t *cap, size_t n, size_t size) {
        size_t want = *cap ? *cap * 2 : 16;
        void *grown;

        if (n < *cap)
                return 0;
        if (want <= n)
                want = n + 1;
        grown = reallocarray(*array, want, size);
        if (!grown)
                return -ENOMEM;
        *array = grown;
        *cap = want;
        return 0;
}
