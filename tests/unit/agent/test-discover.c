/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Which candidates a walk of /proc keeps when there are more than fit one
 * worker message (discover_take_fairly()): a walk is shared by the listings
 * of several users, and one user's thousands of sockets named like a
 * runtime's must not crowd out another user's processes.
 */
#include <string.h>

#include "agent/targets/discover.h"
#include "tests/unit/tap.h"

#define MAX_OUT 64

static size_t count_owner(const DiscoverCandidate *c, size_t n, uid_t owner) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                k += c[i].owner == owner;
        return k;
}

static void test_all_of_them_when_they_fit(void) {
        DiscoverCandidate in[3] = { { 30, 1000 }, { 10, 0 }, { 20, 1001 } }, out[MAX_OUT];
        ssize_t n = discover_take_fairly(in, 3, out, MAX_OUT);

        check(n == 3);
        check(out[0].pid == 30 && out[1].pid == 10 && out[2].pid == 20); /* as they came */
}

static void test_one_flooding_owner_leaves_room_for_the_others(void) {
        DiscoverCandidate in[1000], out[MAX_OUT];
        size_t n_in = 0;
        ssize_t n;

        for (int i = 0; i < 990; i++) /* a user's processes each naming a socket like a runtime's */
                in[n_in++] = (DiscoverCandidate){ .pid = 100 + i, .owner = 2000 };
        for (int i = 0; i < 7; i++)
                in[n_in++] = (DiscoverCandidate){ .pid = 5000 + i, .owner = 1001 };
        in[n_in++] = (DiscoverCandidate){ .pid = 7000, .owner = 0 };
        in[n_in++] = (DiscoverCandidate){ .pid = 8000, .owner = 1002 };
        in[n_in++] = (DiscoverCandidate){ .pid = 8001, .owner = 1002 };
        n = discover_take_fairly(in, n_in, out, MAX_OUT);

        check(n == MAX_OUT);
        check(count_owner(out, MAX_OUT, 1001) == 7);
        check(count_owner(out, MAX_OUT, 0) == 1);
        check(count_owner(out, MAX_OUT, 1002) == 2);
        check(count_owner(out, MAX_OUT, 2000) == MAX_OUT - 10);
        /* the flood's lowest pids, each once */
        for (ssize_t i = 0; i < n; i++)
                for (ssize_t k = i + 1; k < n; k++)
                        check(out[i].pid != out[k].pid);
        for (ssize_t i = 0; i < n; i++)
                check(out[i].owner != 2000 || out[i].pid < 100 + MAX_OUT - 10);
}

static void test_many_owners_of_one_each_and_two_floods(void) {
        static DiscoverCandidate in[30000], out[MAX_OUT];
        size_t n_in = 0;
        ssize_t n;

        for (int i = 0; i < 10000; i++)
                in[n_in++] = (DiscoverCandidate){ .pid = 1 + i, .owner = 3000 };
        for (int i = 0; i < 10000; i++)
                in[n_in++] = (DiscoverCandidate){ .pid = 20001 + i, .owner = 3001 };
        for (int i = 0; i < 40; i++)
                in[n_in++] = (DiscoverCandidate){ .pid = 40001 + i, .owner = 100 + i };
        n = discover_take_fairly(in, n_in, out, MAX_OUT);

        check(n == MAX_OUT);
        for (int i = 0; i < 40; i++)
                check(count_owner(out, MAX_OUT, 100 + i) == 1);
        check(count_owner(out, MAX_OUT, 3000) == 12 && count_owner(out, MAX_OUT, 3001) == 12);
}

static void test_nothing(void) {
        DiscoverCandidate out[1];

        check(discover_take_fairly(NULL, 0, out, 1) == 0);
}

int main(void) {
        run_test(test_all_of_them_when_they_fit);
        run_test(test_one_flooding_owner_leaves_room_for_the_others);
        run_test(test_many_owners_of_one_each_and_two_floods);
        run_test(test_nothing);
        return tap_finish();
}
