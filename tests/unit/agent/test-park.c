/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The park: refused connections held unanswered for PARK_USEC, then answered in the order they came */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "agent/loop/park.h"
#include "tests/unit/tap.h"

typedef struct Answers {
        int fds[8];
        unsigned n;
} Answers;

static void answer(int fd, void *userdata) {
        Answers *a = userdata;

        if (a->n < 8)
                a->fds[a->n++] = fd;
        close(fd);
}

static int pair_end(int *peer) {
        int sv[2];

        check(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        *peer = sv[1];
        return sv[0];
}

/* Held, none answered at once; a full park takes no more; their time up, answered oldest first, none lost. */
static void test_held_then_answered_in_order(void) {
        sd_event *e = NULL;
        Park *p = NULL;
        Answers a = {};
        int fds[4], peers[4];
        uint64_t start, now;

        check(sd_event_new(&e) >= 0);
        check(park_new(e, 3, answer, &a, &p) == 0);
        for (int i = 0; i < 4; i++)
                fds[i] = pair_end(&peers[i]);
        check(sd_event_now(e, CLOCK_MONOTONIC, &start) >= 0);
        for (int i = 0; i < 3; i++)
                check(park_hold(p, fds[i]));
        check(!park_hold(p, fds[3])); /* full: the caller's to answer */
        check(park_held(p) == 3 && a.n == 0);
        /* the loop until all three are answered: the timer is due PARK_USEC after they came, within 30 s in
         * any case (a loaded machine runs it late, never early) */
        while (park_held(p) > 0 && sd_event_now(e, CLOCK_MONOTONIC, &now) >= 0 && now < start + 30 * 1000000ULL)
                check(sd_event_run(e, 30 * 1000000ULL) >= 0);
        check(sd_event_now(e, CLOCK_MONOTONIC, &now) >= 0);
        check(now >= start + PARK_USEC); /* held their time: none was answered before it */
        check(a.n == 3 && a.fds[0] == fds[0] && a.fds[1] == fds[1] && a.fds[2] == fds[2]);
        /* room again */
        check(park_hold(p, fds[3]) && park_held(p) == 1);
        park_free(p); /* answers what it holds */
        check(a.n == 4 && a.fds[3] == fds[3]);
        for (int i = 0; i < 4; i++)
                close(peers[i]);
        sd_event_unref(e);
}

/* A park of none (the open files limit left no room) holds nothing. */
static void test_a_park_of_none(void) {
        sd_event *e = NULL;
        Park *p = NULL;
        Answers a = {};
        int peer, fd;

        check(sd_event_new(&e) >= 0);
        check(park_new(e, 0, answer, &a, &p) == 0);
        fd = pair_end(&peer);
        check(!park_hold(p, fd) && park_held(p) == 0);
        close(fd);
        close(peer);
        park_free(p);
        check(a.n == 0);
        sd_event_unref(e);
}

int main(void) {
        run_test(test_held_then_answered_in_order);
        run_test(test_a_park_of_none);
        return tap_finish();
}
