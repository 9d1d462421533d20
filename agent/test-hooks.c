/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test-hooks.h"

#if DSAGENT_TEST_HOOKS
/*
 * DSAGENT_TEST_PAUSE=POINT:MILLISECONDS stops the whole agent at POINT for
 * that long, announcing it on stderr, so a test can swap the world under a
 * request in flight (e.g. recycle the target's pid) at exactly that step.
 */
void test_hook_pause(const char *point) {
        const char *spec = getenv("DSAGENT_TEST_PAUSE");
        size_t n = strlen(point);
        struct timespec ts;
        long ms;

        if (!spec || strncmp(spec, point, n) != 0 || spec[n] != ':')
                return;
        ms = strtol(spec + n + 1, NULL, 10);
        fprintf(stderr, "test-hook: paused at %s\n", point);
        ts = (struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        while (nanosleep(&ts, &ts) < 0)
                ;
}

bool test_hook_fs_type_trusted(const char *fs_type) {
        const char *trusted = getenv("DSAGENT_TEST_TRUST_FS");

        return trusted && strcmp(trusted, fs_type) == 0;
}

unsigned test_hook_worker_queue(unsigned queue) {
        const char *n = getenv("DSAGENT_TEST_WORKER_QUEUE");

        return n ? (unsigned)strtoul(n, NULL, 10) : queue;
}
#endif
