/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Test-only hooks read from the environment (test-hooks.h), compiled only with -Dtest_hooks=true.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* The positive number, at most @max, in environment variable @name; 0 when unset or not such a number:
 * a test's typo must not make every job busy or every deadline instant. */
static unsigned long env_number(const char *name, unsigned long max) {
        const char *n = getenv(name);
        unsigned long v;
        char *end;

        if (!n)
                return 0;
        errno = 0;
        v = strtoul(n, &end, 10);
        return errno == 0 && end != n && *end == '\0' && v <= max ? v : 0;
}

unsigned test_hook_worker_queue(unsigned queue) {
        unsigned long v = env_number("DSAGENT_TEST_WORKER_QUEUE", 1024);

        return v > 0 ? (unsigned)v : queue;
}

unsigned test_hook_audit_queue(unsigned records) {
        unsigned long v = env_number("DSAGENT_TEST_AUDIT_QUEUE", 1024);

        return v > 0 ? (unsigned)v : records;
}

bool test_hook_kernel_has_peer_pidfd(void) {
        return !getenv("DSAGENT_TEST_NO_PEERPIDFD");
}

bool test_hook_kernel_has_pidfd_userns(void) {
        return !getenv("DSAGENT_TEST_NO_PIDFD_USERNS") && !getenv("DSAGENT_TEST_NO_PEERPIDFD");
}

void test_hook_client_socket(int fd) {
        const char *n = getenv("DSAGENT_TEST_SNDBUF");
        int bytes = n ? atoi(n) : 0;

        if (bytes > 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

unsigned test_hook_max_connections(unsigned max) {
        unsigned long v = env_number("DSAGENT_TEST_MAX_CONNECTIONS", 4096);

        return v > 0 ? (unsigned)v : max;
}

uint64_t test_hook_reply_timeout(uint64_t usec) {
        unsigned long ms = env_number("DSAGENT_TEST_REPLY_TIMEOUT_MS", 3600 * 1000);

        return ms > 0 ? (uint64_t)ms * 1000 : usec;
}

uint64_t test_hook_request_timeout(uint64_t usec) {
        unsigned long ms = env_number("DSAGENT_TEST_REQUEST_TIMEOUT_MS", 3600 * 1000);

        return ms > 0 ? (uint64_t)ms * 1000 : usec;
}

uint64_t test_hook_collect_retry(uint64_t usec) {
        unsigned long ms = env_number("DSAGENT_TEST_COLLECT_RETRY_MS", 3600 * 1000);

        return ms > 0 ? (uint64_t)ms * 1000 : usec;
}

void test_hook_note(const char *format, ...) {
        va_list ap;

        fputs("test-hook: ", stderr);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fputc('\n', stderr);
}
#endif
