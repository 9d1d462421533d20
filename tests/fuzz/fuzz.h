/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by the libFuzzer targets and the corpus replay driver */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The entry point libFuzzer calls; fuzz-replay.c calls it once per corpus file. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant the code under test broke: report where, then abort() so that
 * libFuzzer saves the input and the replay test fails. Never compiled out. */
#define fuzz_assert(cond)                                                                      \
        do {                                                                                   \
                if (!(cond)) {                                                                 \
                        fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, \
                                #cond);                                                        \
                        abort();                                                               \
                }                                                                              \
        } while (0)
