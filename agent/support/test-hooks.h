/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Test-only hooks (-Dtest_hooks=true); in any other build they compile to nothing */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#if DSAGENT_TEST_HOOKS
/*
 * DSAGENT_TEST_PAUSE=POINT:MILLISECONDS: the whole agent stops at @point for that long, or until the file
 * DSAGENT_TEST_PAUSE_END names exists, with "test-hook: paused at POINT" and "test-hook: resumed at POINT"
 * on stderr; a test changes the world meanwhile. Return: whether it stopped there.
 */
bool test_hook_pause(const char *point);
/*
 * Whether DSAGENT_TEST_TRUST_FS names @fs_type: a test then takes away the
 * refusal of unsafe file systems (target-view.c) to prove that what stands
 * behind it, a worker's deadline, holds a lookup that never returns.
 */
bool test_hook_fs_type_trusted(const char *fs_type);
/*
 * DSAGENT_TEST_WORKER_QUEUE=N, or @queue: how many jobs of one user may wait for a
 * worker. A test makes it small, to fill one user's queue with a few requests held in a
 * FUSE lookup, where the real bound takes more connections than a user may hold.
 */
unsigned test_hook_worker_queue(unsigned queue);
/*
 * DSAGENT_TEST_SNDBUF=BYTES: the send buffer of a client's socket, as a host whose
 * net.core.wmem_default is that small gives it (a test cannot change the host's default).
 */
void test_hook_client_socket(int fd);
/*
 * DSAGENT_TEST_REPLY_TIMEOUT_MS=N, or @usec: a listing's (and a reply's) deadline. A test
 * makes it shorter than a probe's own timeout, to end a listing while a probe runs, where
 * the real deadline (30 s) would take fifteen held probes.
 */
uint64_t test_hook_reply_timeout(uint64_t usec);
/*
 * DSAGENT_TEST_MAX_CONNECTIONS=N, or @max: the connections served at once. A test makes it
 * small, to fill it with the few users the machine has, where the real cap (512) would take
 * sixteen users' shares.
 */
unsigned test_hook_max_connections(unsigned max);
/*
 * DSAGENT_TEST_REQUEST_TIMEOUT_MS=N, or @usec: how long a client may take to send its request. A
 * test makes it long, so that connections it holds idle stay while it looks at whose are closed for
 * a newcomer, where the real deadline (5 s) would make the test a race against it.
 */
uint64_t test_hook_request_timeout(uint64_t usec);
/*
 * DSAGENT_TEST_AUDIT_QUEUE=N, or @records: how many audit records may wait for an output
 * that does not take them, for decisions. A test makes it small, to fill the queue with a
 * few requests where the real bound takes a thousand.
 */
unsigned test_hook_audit_queue(unsigned records);
/*
 * DSAGENT_TEST_EGRESS_WAITING_MAX=N, or @max: how many uploads may wait for their next hand-over.
 * A test makes it 1, to see the next one left pending for the agent's next start, where the real
 * bound would take hundreds of dumps.
 */
unsigned test_hook_egress_waiting_max(unsigned max);
/*
 * False when DSAGENT_TEST_NO_PEERPIDFD is set: the agent then finds a peer's pidfd as on a
 * kernel before 6.5 (Debian 12's 6.1), which has no SO_PEERPIDFD, where the test machine's has.
 * The SELinux guest boots that very kernel and proves the same path there.
 */
bool test_hook_kernel_has_peer_pidfd(void);
/*
 * False when DSAGENT_TEST_NO_PIDFD_USERNS is set (a kernel from 6.5 to 6.10: SO_PEERPIDFD
 * but no PIDFD_GET_USER_NAMESPACE), or DSAGENT_TEST_NO_PEERPIDFD (before 6.5, neither): the
 * agent then reads a peer's user namespace from /proc/PID/ns/user, checked against its pidfd.
 */
bool test_hook_kernel_has_pidfd_userns(void);
/*
 * DSAGENT_TEST_COLLECT_RETRY_MS=N, or @usec: how long a [[collect]] watch whose stream ended
 * waits before it watches its process again. A test makes it short, to see the second watch
 * of a runtime that ends every stream, where the real wait (30 s) is most of the test.
 */
uint64_t test_hook_collect_retry(uint64_t usec);
/*
 * DSAGENT_TEST_RETENTION_PERIOD_MS=N, or @usec: how long retention waits for its next pass when
 * nothing asks for one sooner. A test makes it an hour, to see that what asks for a pass (a
 * reload while one runs) gets one, where the real period (a minute) would come all the same.
 */
uint64_t test_hook_retention_period(uint64_t usec);
/*
 * True when DSAGENT_TEST_RETENTION_NOTES is set: each retention pass's end is a test-hook note ("retention: a
 * pass ended: N files removed"), which a test waits for. Only then: every agent runs passes, and the tests that
 * read the agent's stderr as its audit output alone must find nothing else there.
 */
bool test_hook_retention_notes(void);
/*
 * True when DSAGENT_TEST_DECOMPRESSOR_ESCAPE is set: the child that decompresses a stored core
 * (crash-core.c) then tries to open a file after it is confined, as an exploited decompressor
 * would, and a test sees it killed and the copy refused.
 */
bool test_hook_decompressor_escape(void);
/*
 * True when DSAGENT_TEST_ARTIFACT_RECORD_FAILS is set: the dump record of an artifact the agent makes on its
 * own ([[collect]], [[on_start]]) is not written and fails with -ENOMEM, as a record that cannot be formatted
 * for want of memory does (the room held for it rules out every other cause): a test sees the artifact
 * removed again.
 */
bool test_hook_artifact_record_fails(void);
/* "test-hook: " and the message, on stderr: a step a test waits for, or checks happened. */
void test_hook_note(const char *format, ...) __attribute__((format(printf, 1, 2)));
#else
static inline bool test_hook_pause(const char *point) {
        return false;
}
static inline bool test_hook_fs_type_trusted(const char *fs_type) {
        return false;
}
static inline unsigned test_hook_worker_queue(unsigned queue) {
        return queue;
}
static inline void test_hook_client_socket(int fd) {
}
static inline uint64_t test_hook_reply_timeout(uint64_t usec) {
        return usec;
}
static inline unsigned test_hook_max_connections(unsigned max) {
        return max;
}
static inline uint64_t test_hook_request_timeout(uint64_t usec) {
        return usec;
}
static inline unsigned test_hook_audit_queue(unsigned records) {
        return records;
}
static inline unsigned test_hook_egress_waiting_max(unsigned max) {
        return max;
}
static inline uint64_t test_hook_collect_retry(uint64_t usec) {
        return usec;
}
static inline bool test_hook_retention_notes(void) {
        return false;
}
static inline uint64_t test_hook_retention_period(uint64_t usec) {
        return usec;
}
static inline bool test_hook_kernel_has_peer_pidfd(void) {
        return true;
}
static inline bool test_hook_decompressor_escape(void) {
        return false;
}
static inline bool test_hook_kernel_has_pidfd_userns(void) {
        return true;
}
static inline bool test_hook_artifact_record_fails(void) {
        return false;
}
static inline __attribute__((format(printf, 1, 2))) void test_hook_note(const char *format, ...) {
}
#endif
