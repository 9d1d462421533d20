/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl's test-only hooks (client-test-hooks.h): numbers read from the environment in a test build
 * only, so that an installed dsctl's waits cannot be changed by whoever sets its environment.
 */
#include <stdint.h>
#include <stdlib.h>

#include "client/client-test-hooks.h"
#include "common/text.h"

#if DSAGENT_TEST_HOOKS
/* The seconds in @name, when it holds a number from 1 to an hour; else @seconds: a typo must not make
 * a wait instant. */
static unsigned env_seconds(const char *name, unsigned seconds) {
        const char *s = getenv(name);
        uint64_t v;

        if (!s || parse_u64(s, &v) < 0 || v == 0 || v > 3600)
                return seconds;
        return (unsigned)v;
}
#else
static unsigned env_seconds(const char *name, unsigned seconds) {
        (void)name;
        return seconds;
}
#endif

unsigned client_test_hook_agent_wait(unsigned seconds) {
        return env_seconds("DSCTL_TEST_AGENT_WAIT_SEC", seconds);
}

unsigned client_test_hook_tool_wait(unsigned seconds) {
        return env_seconds("DSCTL_TEST_TOOL_WAIT_SEC", seconds);
}
