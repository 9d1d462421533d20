/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 validation, escaping of untrusted text, strict number parsing */
#include <errno.h>
#include <string.h>

#include "tap.h"
#include "text.h"

static void test_utf8(void) {
        check(utf8_is_valid("", 0));
        check(utf8_is_valid("plain ascii", 11));
        check(utf8_is_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9));
        check(!utf8_is_valid("\xc0\x80", 2));         /* overlong NUL */
        check(!utf8_is_valid("\xe0\x80\xaf", 3));     /* overlong '/' */
        check(!utf8_is_valid("\xed\xa0\x80", 3));     /* surrogate U+D800 */
        check(!utf8_is_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
        check(!utf8_is_valid("\xc3", 1));             /* truncated */
        check(!utf8_is_valid("\x80", 1));             /* lone continuation */
        /* the longest valid prefix: up to the first bad sequence, a cut character left out */
        check(utf8_valid_prefix("abc", 3) == 3);
        check(utf8_valid_prefix("ab\xc3\xa9", 3) == 2);      /* é cut in half */
        check(utf8_valid_prefix("ab\xff" "cd", 5) == 2);
        check(utf8_valid_prefix("\xe2\x82\xac\xe2\x82", 5) == 3);
        check(utf8_valid_prefix("", 0) == 0);
}

static void escape_is(const char *in, size_t n, const char *expected) {
        char *out = text_escape(in, n);
        check(out && strcmp(out, expected) == 0);
        if (out && strcmp(out, expected) != 0)
                printf("# got '%s', expected '%s'\n", out, expected);
        free(out);
}

static void test_escape(void) {
        escape_is("hello", 5, "hello");
        escape_is("a\nMESSAGE=forged", 16, "a\\x0aMESSAGE=forged");
        escape_is("tab\there", 8, "tab\\x09here");
        escape_is("back\\slash", 10, "back\\\\slash");
        escape_is("nul\0byte", 8, "nul\\x00byte");
        escape_is("\x1b[31mred", 8, "\\x1b[31mred");
        escape_is("del\x7f", 4, "del\\x7f");
        escape_is("caf\xc3\xa9", 5, "caf\xc3\xa9");           /* valid UTF-8 stays */
        escape_is("c1\xc2\x85", 4, "c1\\xc2\\x85");           /* U+0085 NEL is a control */
        escape_is("bad\xff\xfe", 5, "bad\\xff\\xfe");
        escape_is("cut\xe2\x82", 5, "cut\\xe2\\x82");
        /* what would reorder or hide text: "abc<RLO>cba" must not show as "abcabc" */
        escape_is("abc\xe2\x80\xae" "cba", 9, "abc\\u202ecba");
        escape_is("\xe2\x81\xa6iso\xe2\x81\xa9", 9, "\\u2066iso\\u2069");
        escape_is("lrm\xe2\x80\x8e", 6, "lrm\\u200e");
        escape_is("bom\xef\xbb\xbf", 6, "bom\\ufeff");
        escape_is("\xd8\x9c", 2, "\\u061c");
        /* neighbours of the format ranges are ordinary text */
        escape_is("\xe2\x80\x94" "dash", 7, "\xe2\x80\x94" "dash");
}

static void test_parse_numbers(void) {
        uint64_t v;
        pid_t pid;

        check(parse_u64("0", &v) == 0 && v == 0);
        check(parse_u64("18446744073709551615", &v) == 0 && v == UINT64_MAX);
        check(parse_u64("18446744073709551616", &v) == -ERANGE);
        check(parse_u64("", &v) == -EINVAL);
        check(parse_u64("-1", &v) == -EINVAL);
        check(parse_u64("+1", &v) == -EINVAL);
        check(parse_u64(" 1", &v) == -EINVAL);
        check(parse_u64("1 ", &v) == -EINVAL);
        check(parse_u64("012", &v) == -EINVAL);
        check(parse_pid("1234", &pid) == 0 && pid == 1234);
        check(parse_pid("0", &pid) == -ERANGE);
        check(parse_pid("2147483648", &pid) == -ERANGE);
        check(parse_pid("12a", &pid) == -EINVAL);
}

int main(void) {
        run_test(test_utf8);
        run_test(test_escape);
        run_test(test_parse_numbers);
        return tap_finish();
}
