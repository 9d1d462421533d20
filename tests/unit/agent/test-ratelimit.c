/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Sliding-window rate limits: N per period, per rule and requester */
#include "agent/loop/ratelimit.h"
#include "tests/unit/tap.h"

#define SEC 1000000ULL

static void test_window(void) {
        RateLimiter *rl = rate_limiter_new();
        PolicyRateLimit limit = { .count = 3, .period_usec = 60 * SEC };
        uint64_t wait = 0;

        for (int i = 0; i < 3; i++)
                check(rate_limiter_check(rl, "r", 1001, &limit, (uint64_t)i * SEC, true, &wait) == 0);
        check(rate_limiter_check(rl, "r", 1001, &limit, 10 * SEC, true, &wait) == RATE_LIMIT_E_EXCEEDED);
        check(wait == 50 * SEC); /* until the first request leaves the window */
        /* others have their own budget: another user, another rule */
        check(rate_limiter_check(rl, "r", 1002, &limit, 10 * SEC, true, &wait) == 0);
        check(rate_limiter_check(rl, "s", 1001, &limit, 10 * SEC, true, &wait) == 0);
        /* the window slides */
        check(rate_limiter_check(rl, "r", 1001, &limit, 60 * SEC, true, &wait) == 0);
        check(rate_limiter_check(rl, "r", 1001, &limit, 60 * SEC, true, &wait) == RATE_LIMIT_E_EXCEEDED);
        rate_limiter_free(rl);
}

static void test_asking_does_not_consume(void) {
        RateLimiter *rl = rate_limiter_new();
        PolicyRateLimit limit = { .count = 1, .period_usec = 60 * SEC };
        uint64_t wait;

        for (int i = 0; i < 5; i++)
                check(rate_limiter_check(rl, "r", 1, &limit, 0, false, &wait) == 0);
        check(rate_limiter_check(rl, "r", 1, &limit, 0, true, &wait) == 0);
        check(rate_limiter_check(rl, "r", 1, &limit, 0, false, &wait) == RATE_LIMIT_E_EXCEEDED);
        rate_limiter_free(rl);
}

static void test_limit_changed_by_reload(void) {
        RateLimiter *rl = rate_limiter_new();
        PolicyRateLimit five = { .count = 5, .period_usec = 60 * SEC }, two = { .count = 2, .period_usec = 60 * SEC };
        uint64_t wait;

        for (int i = 0; i < 4; i++)
                check(rate_limiter_check(rl, "r", 1, &five, (uint64_t)i, true, &wait) == 0);
        /* a tighter limit after a reload counts what was already used */
        check(rate_limiter_check(rl, "r", 1, &two, 10, true, &wait) == RATE_LIMIT_E_EXCEEDED);
        rate_limiter_free(rl);
}

int main(void) {
        run_test(test_window);
        run_test(test_asking_does_not_consume);
        run_test(test_limit_changed_by_reload);
        return tap_finish();
}
