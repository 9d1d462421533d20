/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Durations as people write them, parsed and printed (duration.h). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/duration.h"

static const struct {
        const char *suffix;
        uint64_t usec;
} duration_units[] = {
        { "ms", USEC_PER_MSEC }, /* before "m", which is its prefix */
        { "s", USEC_PER_SEC },
        { "m", 60 * USEC_PER_SEC },
        { "h", 3600 * USEC_PER_SEC },
        { "d", 86400 * USEC_PER_SEC },
};

/* Microseconds per unit of the suffix at @s, its length in *@ret_len; 0 if there is none. */
static uint64_t unit_at(const char *s, size_t *ret_len) {
        for (size_t i = 0; i < ELEMENTSOF(duration_units); i++) {
                size_t len = strlen(duration_units[i].suffix);

                if (strncmp(s, duration_units[i].suffix, len) == 0) {
                        *ret_len = len;
                        return duration_units[i].usec;
                }
        }
        return 0;
}

int duration_parse(const char *s, uint64_t *ret_usec) {
        const char *begin = s;
        uint64_t total = 0;
        bool overflow = false; /* reported once the whole string is known to be a duration */

        if (!s || !*s)
                return -EINVAL;
        while (*s) {
                const char *digits = s;
                uint64_t n = 0, unit = USEC_PER_SEC;
                size_t len;

                for (; *s >= '0' && *s <= '9'; s++) {
                        if (n > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
                                overflow = true;
                        else
                                n = n * 10 + (uint64_t)(*s - '0');
                }
                if (s == digits)
                        return -EINVAL;
                if (*s) {
                        unit = unit_at(s, &len);
                        if (unit == 0)
                                return -EINVAL;
                        s += len;
                } else if (digits != begin)
                        return -EINVAL; /* "1h30": only a number alone goes without a unit */

                if (n > UINT64_MAX / unit || n * unit > UINT64_MAX - total)
                        overflow = true;
                else
                        total += n * unit;
        }
        if (overflow)
                return -ERANGE;
        *ret_usec = total;
        return 0;
}
