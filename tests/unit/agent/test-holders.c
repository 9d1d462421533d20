/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Holders: whose connection a newcomer to a full table closes, and that everyone gets in */
#include <stdint.h>
#include <stdlib.h>

#include "agent/loop/holders.h"
#include "tests/unit/property.h"
#include "tests/unit/tap.h"

/* A connection of the tests: its place in the book, and whether it is still idle. */
typedef struct Conn {
        HoldNode node;
        uid_t charged;
        bool busy;     /* its request began: never idle again */
        bool open;
        unsigned asked; /* how often still_idle() was asked of it */
} Conn;

static bool still_idle(HoldNode *n, void *userdata) {
        Conn *c = (Conn *)n; /* the node comes first */

        c->asked++;
        return !c->busy;
}

static Conn *open_conn(Holders *h, Conn *c, uid_t charged) {
        *c = (Conn){ .charged = charged, .open = true };
        check(holders_add(h, &c->node, charged) == 0);
        return c;
}

static Conn *victim(Holders *h, uid_t charged) {
        return (Conn *)holders_victim(h, charged, holders_count(h, charged), still_idle, NULL);
}

static void test_counts(void) {
        Holders *h = holders_new();
        Conn c[4];

        open_conn(h, &c[0], 1000);
        open_conn(h, &c[1], 1000);
        open_conn(h, &c[2], 0xF0000010);
        check(holders_count(h, 1000) == 2 && holders_count(h, 0xF0000010) == 1 && holders_count(h, 7) == 0);
        holders_remove(h, &c[0].node);
        holders_remove(h, &c[0].node); /* again: nothing */
        check(holders_count(h, 1000) == 1);
        holders_remove(h, &c[1].node);
        check(holders_count(h, 1000) == 0);
        /* the charge holds nothing and is forgotten; it comes back counted from one */
        open_conn(h, &c[3], 1000);
        check(holders_count(h, 1000) == 1);
        holders_free(h);
}

/* 17 users holding 32 idle connections each: the 18th's connection closes the oldest of a largest holder. */
static void test_the_largest_holders_oldest_idle_connection(void) {
        Holders *h = holders_new();
        Conn held[17][32], newcomer;
        Conn *v;

        for (unsigned k = 0; k < 32; k++)
                for (unsigned u = 0; u < 17; u++)
                        open_conn(h, &held[u][k], 2000 + u);
        open_conn(h, &newcomer, 3000);
        v = victim(h, 3000);
        /* all hold 32: the one whose idle connection is the oldest, its oldest */
        check(v == &held[0][0]);
        holders_remove(h, &v->node);
        /* the next newcomer of the same user: now the largest are the 16 others */
        open_conn(h, &newcomer, 3000);
        check(victim(h, 3000) == &held[1][0]);
        holders_free(h);
}

static void test_never_root(void) {
        Holders *h = holders_new();
        Conn roots[10], hers[3], newcomer;

        for (unsigned k = 0; k < 10; k++)
                open_conn(h, &roots[k], 0);
        for (unsigned k = 0; k < 3; k++)
                open_conn(h, &hers[k], 1001);
        open_conn(h, &newcomer, 1002);
        check(victim(h, 1002) == &hers[0]);
        /* with hers gone, root's many idle ones are still not anyone's to close */
        for (unsigned k = 0; k < 3; k++)
                holders_remove(h, &hers[k].node);
        check(victim(h, 1002) == NULL);
        holders_free(h);
}

/* A connection that has begun its request, or waits on a runtime, is never closed, however much its user holds. */
static void test_never_a_connection_that_is_not_idle(void) {
        Holders *h = holders_new();
        Conn big[20], small[4], newcomer;

        for (unsigned k = 0; k < 20; k++) {
                open_conn(h, &big[k], 1001);
                big[k].busy = true; /* waiting on a runtime */
        }
        for (unsigned k = 0; k < 4; k++)
                open_conn(h, &small[k], 1002);
        holders_not_idle(h, &small[0].node); /* its first byte came: the broker says so */
        open_conn(h, &newcomer, 1003);
        check(victim(h, 1003) == &small[1]);
        /* the busy ones were looked at once and taken out of the idle list: never asked again */
        for (unsigned k = 0; k < 20; k++)
                check(big[k].asked == 1);
        check(victim(h, 1003) == &small[1]);
        for (unsigned k = 0; k < 20; k++)
                check(big[k].asked == 1);
        check(holders_count(h, 1001) == 20); /* still counted */
        holders_free(h);
}

/* Only a holder with more than the newcomer's user will have: shares move toward equal and never swap. */
static void test_only_from_a_larger_holder(void) {
        Holders *h = holders_new();
        Conn a[3], b[2], n[3];

        for (unsigned k = 0; k < 3; k++)
                open_conn(h, &a[k], 1001);
        for (unsigned k = 0; k < 2; k++)
                open_conn(h, &b[k], 1002);
        open_conn(h, &n[0], 1003); /* 1 with it: a's 3 and b's 2 are more */
        check(victim(h, 1003) == &a[0]);
        holders_remove(h, &a[0].node);
        open_conn(h, &n[1], 1003); /* 2 with it: a's 2 and b's 2 are not more */
        check(victim(h, 1003) == NULL);
        /* a user as large as another cannot take its connections either */
        check(victim(h, 1001) == NULL && victim(h, 1002) == NULL);
        holders_free(h);
}

/*
 * Random arrivals at a table of CAP: while fewer users than CAP want in, every user who wants a connection
 * ends up holding one, no eviction ever leaves its victim with fewer than the newcomer's user, and root's
 * connections are never closed.
 */
static void test_everyone_gets_in_property(void) {
        enum { CAP = 64, USERS_MAX = 40, WANT_MAX = 32, CONNS = USERS_MAX * WANT_MAX + 8 };
        static Conn conns[CONNS];
        Rng rng = { 35 };

        for (unsigned round = 0; round < 200; round++) {
                Holders *h = holders_new();
                unsigned users = 1 + (unsigned)rng_below(&rng, USERS_MAX), want[USERS_MAX], held[USERS_MAX + 1] = {};
                unsigned open = 0, used = 0, roots = (unsigned)rng_below(&rng, 8);

                for (unsigned u = 0; u < users; u++)
                        want[u] = 1 + (unsigned)rng_below(&rng, WANT_MAX);
                for (unsigned k = 0; k < roots; k++)
                        open_conn(h, &conns[used++], 0);
                open = roots;
                /* each step: a random user who wants more asks for one more (and holds what it gets) */
                for (unsigned step = 0; step < 4 * CONNS; step++) {
                        unsigned u = (unsigned)rng_below(&rng, users);
                        Conn *c, *v;
                        if (used == CONNS)
                                break;
                        if (held[u] >= want[u])
                                continue;
                        c = open_conn(h, &conns[used++], 5000 + u);
                        if (open < CAP) {
                                open++;
                                held[u]++;
                                continue;
                        }
                        v = victim(h, 5000 + u);
                        if (!v) {
                                holders_remove(h, &c->node); /* refused busy */
                                c->open = false;
                                continue;
                        }
                        check(v->charged != 0 && v->charged != c->charged);
                        /* after it, the victim holds at least what the newcomer's user does */
                        check(holders_count(h, v->charged) - 1 >= holders_count(h, c->charged));
                        holders_remove(h, &v->node);
                        v->open = false;
                        held[v->charged - 5000]--;
                        held[u]++;
                }
                if (users + roots < CAP)
                        for (unsigned u = 0; u < users; u++)
                                check(held[u] >= 1);
                for (unsigned k = 0; k < roots; k++)
                        check(conns[k].open);
                holders_free(h);
        }
}

int main(void) {
        run_test(test_counts);
        run_test(test_the_largest_holders_oldest_idle_connection);
        run_test(test_never_root);
        run_test(test_never_a_connection_that_is_not_idle);
        run_test(test_only_from_a_larger_holder);
        run_test(test_everyone_gets_in_property);
        return tap_finish();
}
