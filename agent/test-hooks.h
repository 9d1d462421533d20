/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test-only pause points (-Dtest_hooks=true); in any other build they compile to nothing */
#pragma once

#include <stdbool.h>

#if DSAGENT_TEST_HOOKS
void test_hook_pause(const char *point);
/*
 * Whether DSAGENT_TEST_TRUST_FS names @fs_type: a test then takes away the
 * refusal of unsafe file systems (target-view.c) to prove that what stands
 * behind it, a worker's deadline, holds a lookup that never returns.
 */
bool test_hook_fs_type_trusted(const char *fs_type);
#else
static inline void test_hook_pause(const char *point) {
}
static inline bool test_hook_fs_type_trusted(const char *fs_type) {
        return false;
}
#endif
