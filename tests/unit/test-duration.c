/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one duration parser: bare seconds and number-unit pairs */
#include <errno.h>
#include <string.h>

#include "common/duration.h"
#include "tests/unit/tap.h"

static void duration_is(const char *s, uint64_t expected) {
        uint64_t usec = 0;
        int r = duration_parse(s, &usec);

        check(r == 0 && usec == expected);
        if (r != 0 || usec != expected)
                printf("# '%s': %d, %llu\n", s, r, (unsigned long long)usec);
}

static void duration_fails(const char *s, int expected) {
        uint64_t usec = 4242;
        int r = duration_parse(s, &usec);

        check(r == expected && usec == 4242);
        if (r != expected)
                printf("# '%s': %d, expected %d\n", s, r, expected);
}

static void test_bare_seconds(void) {
        duration_is("0", 0);
        duration_is("1", USEC_PER_SEC);
        duration_is("90", 90 * USEC_PER_SEC);
        duration_is("007", 7 * USEC_PER_SEC); /* decimal, never octal */
        /* the largest whole number of seconds that fits, and one more */
        duration_is("18446744073709", 18446744073709ULL * USEC_PER_SEC);
        duration_fails("18446744073710", -ERANGE);
        duration_fails("18446744073709551616", -ERANGE);
}

static void test_units(void) {
        duration_is("0s", 0);
        duration_is("90s", 90 * USEC_PER_SEC);
        duration_is("5m", 300 * USEC_PER_SEC);
        duration_is("2h", 7200 * USEC_PER_SEC);
        duration_is("2d", 172800 * USEC_PER_SEC);
        duration_is("500ms", 500 * USEC_PER_MSEC);
        duration_is("1500ms", 1500 * USEC_PER_MSEC);
        /* pairs add up, in any order */
        duration_is("1h30m", 5400 * USEC_PER_SEC);
        duration_is("1d2h3m4s5ms", (93784 * USEC_PER_SEC) + 5 * USEC_PER_MSEC);
        duration_is("30m1h", 5400 * USEC_PER_SEC);
        duration_is("1m1m", 120 * USEC_PER_SEC);
        duration_is("1h05m", 3900 * USEC_PER_SEC);
        duration_is("1m30s", 90 * USEC_PER_SEC);
        duration_is("1ms1s", USEC_PER_SEC + USEC_PER_MSEC);
}

static void test_syntax_errors(void) {
        duration_fails(NULL, -EINVAL);
        duration_fails("", -EINVAL);
        duration_fails("-1", -EINVAL);
        duration_fails("-5m", -EINVAL);
        duration_fails("+1", -EINVAL);
        duration_fails(" 1", -EINVAL);
        duration_fails("1 ", -EINVAL);
        duration_fails("5m ", -EINVAL);
        duration_fails("1h 30m", -EINVAL);
        duration_fails("1.5s", -EINVAL);
        duration_fails("0x10", -EINVAL);
        duration_fails("s", -EINVAL);
        duration_fails("m5", -EINVAL);
        duration_fails("5M", -EINVAL);
        duration_fails("5S", -EINVAL);
        duration_fails("5sec", -EINVAL);
        duration_fails("5us", -EINVAL);
        duration_fails("5w", -EINVAL);
        duration_fails("5mss", -EINVAL);
        duration_fails("1h30", -EINVAL); /* not 1h30s: only a number alone goes without a unit */
        duration_fails("5s5", -EINVAL);
        duration_fails("12a", -EINVAL);
        duration_fails("1\n", -EINVAL);
}

static void test_overflow(void) {
        /* UINT64_MAX microseconds: 213503982 days and change */
        duration_is("213503982d", 213503982ULL * 86400 * USEC_PER_SEC);
        duration_fails("213503983d", -ERANGE);
        duration_fails("307445734562m", -ERANGE);
        duration_fails("5124095577h", -ERANGE);
        duration_is("18446744073709551ms", 18446744073709551ULL * USEC_PER_MSEC);
        duration_fails("18446744073709552ms", -ERANGE);
        /* each pair fits, the sum does not */
        duration_fails("213503982d213503982d", -ERANGE);
        duration_fails("18446744073709s1s", -ERANGE);
        /* digits beyond 64 bits */
        duration_fails("99999999999999999999999999s", -ERANGE);
        /* a string that is no duration is -EINVAL, however large its numbers */
        duration_fails("99999999999999999999999999x", -EINVAL);
        duration_fails("213503983d ", -EINVAL);
}

int main(void) {
        run_test(test_bare_seconds);
        run_test(test_units);
        run_test(test_syntax_errors);
        run_test(test_overflow);
        return tap_finish();
}
