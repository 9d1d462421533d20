/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The audit queue: never waits for its reader, keeps order, refuses past its bound, keeps the shared fd as it was */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/audit/audit-queue.h"
#include "common/cleanup.h"
#include "tests/unit/tap.h"

#define RECORD 1000

/* Record @i: RECORD bytes of its number, so that order and wholeness show. */
static char *record(unsigned i) {
        char *r = malloc(RECORD);

        if (r) {
                memset(r, 'a' + i % 26, RECORD);
                snprintf(r, RECORD, "%06u", i);
                r[RECORD - 1] = '\n';
        }
        return r;
}

/* The reader comes back: reads @rfd until the @pushed records came, each whole and in order; returns how many did. */
static unsigned read_in_order(AuditQueue *q, int rfd, unsigned pushed) {
        unsigned next = 0;
        char buf[RECORD];
        size_t have = 0;

        check(fcntl(rfd, F_SETFL, O_NONBLOCK) == 0);
        for (unsigned round = 0; round < 100000 && next < pushed; round++) {
                ssize_t n = read(rfd, buf + have, RECORD - have);

                if (n > 0)
                        have += (size_t)n;
                if (have == RECORD) {
                        char want[16];
                        snprintf(want, sizeof(want), "%06u", next);
                        check(memcmp(buf, want, 6) == 0 && buf[RECORD - 1] == '\n');
                        next++;
                        have = 0;
                }
                if (n <= 0)
                        (void)audit_queue_flush(q, 10 * 1000);
        }
        return next;
}

/*
 * A stream nobody reads (@rfd, @wfd: a pipe, or a stream socket as journald's stdout stream is):
 * the queue takes what the stream does not, then refuses decisions, then everything comes out
 * in order once it is read.
 */
static void stalled_stream(int rfd, int wfd, unsigned min_pushed) {
        int flags, r;
        AuditQueue *q = NULL;
        unsigned pushed = 0, refused = 0;

        check(audit_queue_open_stream(NULL, wfd, 4, NULL, NULL, &q) == 0);
        if (!q)
                return;
        /* never waits: a pipe 4 records long, 4 more queued, then decisions are refused */
        for (unsigned i = 0; i < 20; i++) {
                r = audit_queue_push(q, AUDIT_QUEUE_DECISION, record(pushed), RECORD);
                check(r == 0 || r == -ENOBUFS);
                if (r == 0)
                        pushed++;
                else
                        refused++;
        }
        check(pushed >= min_pushed && refused > 0 && refused == 20 - pushed);
        /* what happened already still has the reserve */
        check(audit_queue_push(q, AUDIT_QUEUE_EVENT, record(pushed), RECORD) == 0);
        pushed++;
        /* the descriptor others share is as it was */
        flags = fcntl(wfd, F_GETFL);
        check(flags >= 0 && !(flags & O_NONBLOCK));

        /* the reader comes back: every record, whole and in order */
        check(read_in_order(q, rfd, pushed) == pushed);
        check(audit_queue_flush(q, 0) == 0);
        audit_queue_free(q);
}

static void test_stalled_pipe(void) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        int fds[2];

        check(pipe2(fds, O_CLOEXEC) == 0);
        rfd = fds[0];
        wfd = fds[1];
        check(fcntl(wfd, F_SETPIPE_SZ, 4096) >= 0);
        stalled_stream(rfd, wfd, 4);
}

static void test_stalled_stream_socket(void) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        int fds[2], size = 4096;

        check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        rfd = fds[0];
        wfd = fds[1];
        check(setsockopt(wfd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) == 0);
        check(setsockopt(rfd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) == 0);
        stalled_stream(rfd, wfd, 1);
}

/* A journald that reads nothing yet: a datagram socket bound in a new directory @dir of /tmp, at @sa. */
static int journal_socket(char *dir, struct sockaddr_un *sa) {
        int s;

        check(mkdtemp(dir) != NULL);
        snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/socket", dir);
        s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        check(s >= 0 && bind(s, (struct sockaddr *)sa, sizeof(*sa)) == 0);
        return s;
}

/* A datagram socket nobody reads (journald stopped): refused past the bound, then delivered in order. */
static void test_stalled_datagram(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/test-audit-queue-XXXXXX", buf[RECORD + 1];
        _cleanup_close_ int s = -EBADF;
        AuditQueue *q = NULL;
        unsigned pushed = 0, next = 0;
        int r = 0;

        s = journal_socket(dir, &sa);
        check(audit_queue_open_datagram(NULL, sa.sun_path, 4, NULL, NULL, &q) == 0);
        if (!q)
                goto out;
        /* the receiver's queue (net.unix.max_dgram_qlen) fills, then the agent's */
        for (unsigned i = 0; i < 5000 && r == 0; i++) {
                r = audit_queue_push(q, AUDIT_QUEUE_DECISION, record(pushed), RECORD);
                if (r == 0)
                        pushed++;
        }
        check(r == -ENOBUFS);
        for (unsigned round = 0; round < 100000 && next < pushed; round++) {
                ssize_t n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
                char want[16];

                if (n < 0) {
                        (void)audit_queue_flush(q, 10 * 1000);
                        continue;
                }
                snprintf(want, sizeof(want), "%06u", next);
                check(n == RECORD && memcmp(buf, want, 6) == 0);
                next++;
        }
        check(next == pushed);
        audit_queue_free(q);
out:
        (void)unlink(sa.sun_path);
        (void)rmdir(dir);
}

/*
 * Room held before an act: refused when decisions are, never taken from decisions, and a held
 * record is queued past every bound, in order.
 */
static void test_held_room(void) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        AuditQueue *q = NULL;
        unsigned pushed = 0, decisions = 0;
        int fds[2], r;

        check(pipe2(fds, O_CLOEXEC) == 0);
        rfd = fds[0];
        wfd = fds[1];
        check(fcntl(wfd, F_SETPIPE_SZ, 4096) >= 0);
        check(audit_queue_open_stream(NULL, wfd, 4, NULL, NULL, &q) == 0);
        if (!q)
                return;
        /* room for two, held while the reader reads */
        check(audit_queue_hold(q, 2) == 0);
        /* decisions are not refused any sooner for it: the pipe's 4 and the queue's 4 */
        for (r = 0; r == 0;) {
                r = audit_queue_push(q, AUDIT_QUEUE_DECISION, record(pushed), RECORD);
                pushed += r == 0;
                decisions += r == 0;
        }
        check(r == -ENOBUFS && decisions >= 8);
        /* the reader stopped: no more room is held, as no decision is taken */
        check(audit_queue_hold(q, 1) == -ENOBUFS);
        /* what happened fills the reserve */
        for (r = 0; r == 0;) {
                r = audit_queue_push(q, AUDIT_QUEUE_EVENT, record(pushed), RECORD);
                pushed += r == 0;
        }
        check(r == -ENOBUFS);
        check(!audit_queue_has_room(q, AUDIT_QUEUE_EVENT, RECORD));
        /* the two held records go all the same, after the rest */
        check(audit_queue_push(q, AUDIT_QUEUE_HELD, record(pushed), RECORD) == 0);
        pushed++;
        check(audit_queue_push(q, AUDIT_QUEUE_HELD, record(pushed), RECORD) == 0);
        pushed++;
        /* a third was not held: it is an event's, and refused */
        check(audit_queue_push(q, AUDIT_QUEUE_HELD, record(pushed), RECORD) == -ENOBUFS);
        check(read_in_order(q, rfd, pushed) == pushed);
        audit_queue_free(q);
}

/* Room held is bounded in all (AUDIT_QUEUE_HELD_RECORDS), and what is given back can be held again. */
static void test_held_room_bound(void) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        AuditQueue *q = NULL;
        unsigned held = 0;
        int fds[2];

        check(pipe2(fds, O_CLOEXEC) == 0);
        rfd = fds[0];
        wfd = fds[1];
        check(audit_queue_open_stream(NULL, wfd, 4, NULL, NULL, &q) == 0);
        if (!q)
                return;
        while (audit_queue_hold(q, 3) == 0 && held < 2 * AUDIT_QUEUE_HELD_RECORDS)
                held += 3;
        check(held == AUDIT_QUEUE_HELD_RECORDS / 3 * 3);
        check(audit_queue_hold(q, AUDIT_QUEUE_HELD_RECORDS - held) == 0);
        check(audit_queue_hold(q, 1) == -ENOBUFS);
        audit_queue_unhold(q, 3);
        check(audit_queue_hold(q, 3) == 0);
        /* decisions were never refused for it */
        check(audit_queue_has_room(q, AUDIT_QUEUE_DECISION, RECORD));
        audit_queue_free(q);
}

/* An output that fails outright drops a record nobody held room for, and keeps a held one until it works. */
static void test_held_record_outlives_a_failed_output(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/test-audit-queue-XXXXXX", buf[RECORD + 1];
        _cleanup_close_ int s = -EBADF, again = -EBADF;
        AuditQueue *q = NULL;
        ssize_t n;

        s = journal_socket(dir, &sa);
        check(audit_queue_open_datagram(NULL, sa.sun_path, 4, NULL, NULL, &q) == 0);
        if (!q)
                goto out;
        /* journald goes away */
        s = safe_close(s);
        check(unlink(sa.sun_path) == 0);
        check(audit_queue_hold(q, 1) == 0);
        check(audit_queue_push(q, AUDIT_QUEUE_DECISION, record(0), RECORD) < 0);
        check(audit_queue_push(q, AUDIT_QUEUE_HELD, record(1), RECORD) == 0);
        check(audit_queue_flush(q, 0) == 1);
        /* and comes back: the held record arrives */
        again = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        check(again >= 0 && bind(again, (struct sockaddr *)&sa, sizeof(sa)) == 0);
        check(audit_queue_flush(q, 1000 * 1000) == 0);
        n = recv(again, buf, sizeof(buf), MSG_DONTWAIT);
        check(n == RECORD && memcmp(buf, "000001", 6) == 0);
        audit_queue_free(q);
out:
        (void)unlink(sa.sun_path);
        (void)rmdir(dir);
}

/* With another output to take it (--audit auto's stderr), a held record the output fails goes back to the caller. */
static void test_held_record_falls_back(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/test-audit-queue-XXXXXX";
        _cleanup_close_ int s = -EBADF;
        AuditQueue *q = NULL;

        s = journal_socket(dir, &sa);
        check(audit_queue_open_datagram(NULL, sa.sun_path, 4, NULL, NULL, &q) == 0);
        if (!q)
                goto out;
        audit_queue_set_fallback(q);
        s = safe_close(s);
        check(unlink(sa.sun_path) == 0);
        check(audit_queue_hold(q, 1) == 0);
        check(audit_queue_push(q, AUDIT_QUEUE_HELD, record(0), RECORD) < 0);
        check(audit_queue_flush(q, 0) == 0);
        audit_queue_free(q);
out:
        (void)unlink(sa.sun_path);
        (void)rmdir(dir);
}

/* No journald: the queue cannot be opened, and the journal sink fails closed. */
static void test_datagram_without_listener(void) {
        AuditQueue *q = NULL;

        check(audit_queue_open_datagram(NULL, "/nonexistent/journal/socket", 4, NULL, NULL, &q) == -ENOENT);
        check(q == NULL);
}

int main(void) {
        run_test(test_stalled_pipe);
        run_test(test_stalled_stream_socket);
        run_test(test_stalled_datagram);
        run_test(test_datagram_without_listener);
        run_test(test_held_room);
        run_test(test_held_room_bound);
        run_test(test_held_record_outlives_a_failed_output);
        run_test(test_held_record_falls_back);
        return tap_finish();
}
