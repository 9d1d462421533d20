/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Requests each user may make: a burst, then the rate; the rest counted, per user */
#include "agent/loop/request-budget.h"
#include "tests/unit/tap.h"

#define SEC 1000000ULL

static uint64_t reported[4], reported_untracked;

static void report(uid_t uid, uint64_t suppressed, void *userdata) {
        if (uid < 4)
                reported[uid] += suppressed;
        if (uid == (uid_t)-1)
                reported_untracked += suppressed;
        (*(unsigned *)userdata)++;
}

static void test_burst_then_rate(void) {
        RequestBudget *b = request_budget_new();
        unsigned allowed = 0;

        /* a burst of 10 at once, then nothing until time passes */
        for (int i = 0; i < 25; i++)
                allowed += request_budget_take(b, 1, 5, 10, 100 * SEC);
        check(allowed == 10);
        check(request_budget_has_suppressed(b));
        /* 5 a second come back */
        allowed = 0;
        for (int i = 0; i < 20; i++)
                allowed += request_budget_take(b, 1, 5, 10, 101 * SEC);
        check(allowed == 5);
        /* never more than the burst saved up, however long the pause */
        allowed = 0;
        for (int i = 0; i < 50; i++)
                allowed += request_budget_take(b, 1, 5, 10, 10000 * SEC);
        check(allowed == 10);
        request_budget_free(b);
}

static void test_users_apart_and_flush(void) {
        RequestBudget *b = request_budget_new();
        unsigned calls = 0;

        for (int i = 0; i < 30; i++)
                (void)request_budget_take(b, 1, 1, 10, SEC);
        /* another user is untouched by the first one's flood */
        check(request_budget_take(b, 2, 1, 10, SEC));
        check(request_budget_take(b, 0, 1, 10, SEC));
        reported[1] = reported[2] = 0;
        request_budget_flush(b, report, &calls);
        check(calls == 1 && reported[1] == 20 && reported[2] == 0);
        check(!request_budget_has_suppressed(b));
        /* flushed counts are gone: nothing twice */
        calls = 0;
        request_budget_flush(b, report, &calls);
        check(calls == 0);
        request_budget_free(b);
}

/* Many users: those back at a full budget make room; those over it keep theirs. */
static void test_table_full(void) {
        RequestBudget *b = request_budget_new();
        unsigned allowed = 0;

        for (uid_t u = 0; u < REQUEST_BUDGET_USERS_MAX; u++)
                check(request_budget_take(b, 1000 + u, 1, 1, SEC));
        /* all of them spent their budget this instant: a new user finds no room, fail closed */
        check(!request_budget_take(b, 99999, 1, 1, SEC));
        check(request_budget_has_suppressed(b));
        reported_untracked = 0;
        request_budget_flush(b, report, &(unsigned){ 0 });
        check(reported_untracked == 1);
        /* a second later every one of them is full again: room for newcomers */
        for (uid_t u = 0; u < 100; u++)
                allowed += request_budget_take(b, 200000 + u, 1, 1, 3 * SEC);
        check(allowed == 100);
        request_budget_free(b);
}

/* Whether a user's budget is spent, asked without spending it: true exactly when the next take would fail. */
static void test_spent_is_asked_without_spending(void) {
        RequestBudget *b = request_budget_new();

        check(!request_budget_spent(b, 2, 5, 3, 100 * SEC)); /* no bucket yet: a full budget */
        for (int i = 0; i < 3; i++) {
                check(!request_budget_spent(b, 2, 5, 3, 100 * SEC));
                check(request_budget_take(b, 2, 5, 3, 100 * SEC));
        }
        check(request_budget_spent(b, 2, 5, 3, 100 * SEC));
        check(request_budget_spent(b, 2, 5, 3, 100 * SEC)); /* asking took nothing, and counted nothing */
        check(!request_budget_has_suppressed(b));
        check(!request_budget_take(b, 2, 5, 3, 100 * SEC));
        check(request_budget_has_suppressed(b));
        /* a fifth of a second later, one came back */
        check(!request_budget_spent(b, 2, 5, 3, 100 * SEC + SEC / 5));
        check(request_budget_take(b, 2, 5, 3, 100 * SEC + SEC / 5));
        check(request_budget_spent(b, 2, 5, 3, 100 * SEC + SEC / 5));
        /* another user's budget is its own */
        check(!request_budget_spent(b, 3, 5, 3, 100 * SEC + SEC / 5));
        request_budget_free(b);
}

int main(void) {
        run_test(test_burst_then_rate);
        run_test(test_users_apart_and_flush);
        run_test(test_table_full);
        run_test(test_spent_is_asked_without_spending);
        return tap_finish();
}
