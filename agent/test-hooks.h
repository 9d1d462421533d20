/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test-only pause points (-Dtest_hooks=true); in any other build they compile to nothing */
#pragma once

#if DSAGENT_TEST_HOOKS
void test_hook_pause(const char *point);
#else
static inline void test_hook_pause(const char *point) {
}
#endif
