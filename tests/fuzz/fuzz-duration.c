/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes duration_parse() (common/duration.h): dsagent's and dsctl's duration
 * options, and every duration of the policy.
 *
 * Input: any bytes, read up to the first NUL as a C string.
 *
 * Invariants: the result is 0, -EINVAL or -ERANGE, and agrees with a reference
 * written from the grammar (a bare number, or number-unit pairs with the units
 * ms, s, m, h, d) that checks overflow with the compiler's builtins; *ret_usec
 * is untouched on failure; a parsed duration is whole milliseconds, and its
 * canonical spelling ("1d2h3m4s5ms", "0" for zero) parses to the same value.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/duration.h"
#include "tests/fuzz/fuzz.h"

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* Return: 0, -EINVAL or -ERANGE, as duration_parse() should. */
static int reference_parse(const char *s, uint64_t *ret) {
        size_t len = strlen(s), i = 0, pairs = 0;
        uint64_t total = 0;
        bool overflow = false;

        if (len == 0)
                return -EINVAL;
        /* the syntax first, on its own */
        while (i < len) {
                size_t start = i;

                while (i < len && is_digit(s[i]))
                        i++;
                if (i == start)
                        return -EINVAL;
                if (i == len) {
                        if (pairs > 0)
                                return -EINVAL;
                        break;
                }
                if (s[i] == 'm' && i + 1 < len && s[i + 1] == 's')
                        i += 2;
                else if (s[i] == 's' || s[i] == 'm' || s[i] == 'h' || s[i] == 'd')
                        i++;
                else
                        return -EINVAL;
                pairs++;
        }

        /* then the value */
        i = 0;
        while (i < len) {
                uint64_t n = 0, unit = USEC_PER_SEC, product;

                for (; i < len && is_digit(s[i]); i++)
                        if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, (uint64_t)(s[i] - '0'), &n))
                                overflow = true;
                if (i < len) {
                        if (s[i] == 'm' && i + 1 < len && s[i + 1] == 's') {
                                unit = USEC_PER_MSEC;
                                i++;
                        } else
                                unit = s[i] == 's' ? USEC_PER_SEC : s[i] == 'm' ? 60 * USEC_PER_SEC :
                                       s[i] == 'h' ? 3600 * USEC_PER_SEC : 86400 * USEC_PER_SEC;
                        i++;
                }
                if (__builtin_mul_overflow(n, unit, &product) || __builtin_add_overflow(total, product, &total))
                        overflow = true;
        }
        if (overflow)
                return -ERANGE;
        *ret = total;
        return 0;
}

/* The shortest spelling of @usec with the largest units first. */
static void canonical(uint64_t usec, char *buf, size_t size) {
        static const struct {
                uint64_t usec;
                const char *unit;
        } units[] = {
                { 86400 * USEC_PER_SEC, "d" }, { 3600 * USEC_PER_SEC, "h" }, { 60 * USEC_PER_SEC, "m" },
                { USEC_PER_SEC, "s" },         { USEC_PER_MSEC, "ms" },
        };
        size_t o = 0;

        buf[0] = '\0';
        if (usec == 0) {
                snprintf(buf, size, "0");
                return;
        }
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                uint64_t n = usec / units[i].usec;
                if (n == 0)
                        continue;
                o += (size_t)snprintf(buf + o, size - o, "%" PRIu64 "%s", n, units[i].unit);
                usec -= n * units[i].usec;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint64_t usec = UINT64_C(0x5a5a5a5a5a5a5a5a), expected = 0, again = 0;
        char *s, spelled[128];
        int r, want;

        s = strndup((const char *)data, size);
        fuzz_assert(s);

        r = duration_parse(s, &usec);
        want = reference_parse(s, &expected);
        fuzz_assert(r == want);
        if (r == 0) {
                fuzz_assert(usec == expected);
                fuzz_assert(usec % USEC_PER_MSEC == 0);
                canonical(usec, spelled, sizeof(spelled));
                fuzz_assert(duration_parse(spelled, &again) == 0 && again == usec);
        } else
                fuzz_assert(usec == UINT64_C(0x5a5a5a5a5a5a5a5a));

        free(s);
        return 0;
}
