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
#include <unistd.h>

#include "agent/support/test-hooks.h"

#if DSAGENT_TEST_HOOKS
#define NSEC_PER_SEC 1000000000L
#define PAUSE_END_POLL_NSEC (10 * 1000000L)

static bool timespec_before(const struct timespec *a, const struct timespec *b) {
        return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static struct timespec timespec_after(struct timespec t, long nsec) {
        t.tv_sec += nsec / NSEC_PER_SEC;
        t.tv_nsec += nsec % NSEC_PER_SEC;
        if (t.tv_nsec >= NSEC_PER_SEC) {
                t.tv_sec++;
                t.tv_nsec -= NSEC_PER_SEC;
        }
        return t;
}

/*
 * DSAGENT_TEST_PAUSE=POINT:MILLISECONDS stops the whole agent at POINT for
 * that long, announcing it on stderr, so a test can swap the world under a
 * request in flight (e.g. recycle the target's pid) at exactly that step.
 * With DSAGENT_TEST_PAUSE_END=PATH the pause ends as soon as PATH exists: the
 * test says when it has swapped the world, however long a loaded machine took
 * over that, and MILLISECONDS only bounds a test that never says so. The end
 * of the pause is announced too.
 */
bool test_hook_pause(const char *point) {
        const char *spec = getenv("DSAGENT_TEST_PAUSE"), *end = getenv("DSAGENT_TEST_PAUSE_END");
        size_t n = strlen(point);
        struct timespec now, deadline;
        long ms;

        if (!spec || strncmp(spec, point, n) != 0 || spec[n] != ':')
                return false;
        ms = strtol(spec + n + 1, NULL, 10);
        fprintf(stderr, "test-hook: paused at %s\n", point);
        (void)clock_gettime(CLOCK_MONOTONIC, &now);
        deadline = timespec_after(now, ms * 1000000L);
        while (timespec_before(&now, &deadline) && !(end && access(end, F_OK) == 0)) {
                /* with an end file, a look at it every 10 ms; without, one sleep to the deadline */
                struct timespec wake = end ? timespec_after(now, PAUSE_END_POLL_NSEC) : deadline;

                if (timespec_before(&deadline, &wake))
                        wake = deadline;
                (void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, NULL);
                (void)clock_gettime(CLOCK_MONOTONIC, &now);
        }
        fprintf(stderr, "test-hook: resumed at %s\n", point);
        return true;
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

unsigned test_hook_egress_waiting_max(unsigned max) {
        unsigned long v = env_number("DSAGENT_TEST_EGRESS_WAITING_MAX", 1024);

        return v > 0 ? (unsigned)v : max;
}

bool test_hook_decompressor_escape(void) {
        return getenv("DSAGENT_TEST_DECOMPRESSOR_ESCAPE") != NULL;
}

bool test_hook_artifact_record_fails(void) {
        return getenv("DSAGENT_TEST_ARTIFACT_RECORD_FAILS") != NULL;
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

uint64_t test_hook_retention_period(uint64_t usec) {
        unsigned long ms = env_number("DSAGENT_TEST_RETENTION_PERIOD_MS", 24 * 3600 * 1000);

        return ms > 0 ? (uint64_t)ms * 1000 : usec;
}

bool test_hook_retention_notes(void) {
        return getenv("DSAGENT_TEST_RETENTION_NOTES") != NULL;
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
