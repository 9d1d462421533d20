/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A minimal TAP producer for the unit tests: one "ok"/"not ok" line per test function */
#pragma once

#undef NDEBUG
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_count, tap_failures;
static bool tap_current_failed;

/* Checks record a failure and carry on, so one run reports every broken assertion. */
#define check(cond)                                                                          \
        do {                                                                                 \
                if (!(cond)) {                                                               \
                        printf("# %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
                        tap_current_failed = true;                                           \
                }                                                                            \
        } while (0)

#define run_test(fn)                                                                         \
        do {                                                                                 \
                tap_current_failed = false;                                                  \
                fn();                                                                        \
                tap_count++;                                                                 \
                if (tap_current_failed)                                                      \
                        tap_failures++;                                                      \
                printf("%sok %d - %s\n", tap_current_failed ? "not " : "", tap_count, #fn);  \
                fflush(stdout);                                                              \
        } while (0)

static inline int tap_finish(void) {
        printf("1..%d\n", tap_count);
        return tap_failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
