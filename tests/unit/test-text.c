/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 validation, UTF-16 decoding, escaping of untrusted text, strict number parsing */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/tap.h"
#include "common/text.h"

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

static void json_is_as(void (*writer)(FILE *, const char *, size_t), const char *in, size_t n,
                       const char *expected) {
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);

        check(f);
        if (!f)
                return;
        writer(f, in, n);
        check(fclose(f) == 0);
        check(out && strcmp(out, expected) == 0 && utf8_is_valid(out, size));
        if (out && strcmp(out, expected) != 0)
                printf("# got '%s', expected '%s'\n", out, expected);
        free(out);
}

static void json_is(const char *in, size_t n, const char *expected) {
        json_is_as(text_json_string, in, n, expected);
}

static void test_json_string(void) {
        json_is("", 0, "\"\"");
        json_is("Orders.Api", 10, "\"Orders.Api\"");
        /* a value cannot end its own string, nor add a key or a line */
        json_is("a\",\"MESSAGE\":\"forged", 20, "\"a\\\",\\\"MESSAGE\\\":\\\"forged\"");
        json_is("back\\slash\\x41", 14, "\"back\\\\slash\\\\x41\"");
        json_is("line\nMESSAGE=x\r\n", 16, "\"line\\u000aMESSAGE=x\\u000d\\u000a\"");
        json_is("tab\t\x1b[2J\x7f", 9, "\"tab\\u0009\\u001b[2J\\u007f\"");
        json_is("nul\0x", 5, "\"nul\\u0000x\"");
        /* valid UTF-8 stays, but C1 controls and what reorders text are escaped */
        json_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
        json_is("c1\xc2\x9b" "31m", 7, "\"c1\\u009b31m\"");
        json_is("abc\xe2\x80\xae" "cba", 9, "\"abc\\u202ecba\"");
        /* not UTF-8: each byte replaced, never passed on */
        json_is("bad\xff\xfe", 5, "\"bad\\ufffd\\ufffd\"");
        json_is("cut\xe2\x82", 5, "\"cut\\ufffd\\ufffd\"");
        json_is("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");               /* overlong '/' */
        json_is("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");     /* a surrogate */
        json_is("\x80" "x", 2, "\"\\ufffdx\"");                     /* lone continuation */
}

/* In HTML or an SVG's script: no markup, no end of a CDATA section, no JavaScript line break. */
static void test_json_string_html(void) {
        json_is_as(text_json_string_html, "</script><b>", 12, "\"\\u003c/script\\u003e\\u003cb\\u003e\"");
        json_is_as(text_json_string_html, "]]>&amp;'", 9, "\"]]\\u003e\\u0026amp;\\u0027\"");
        json_is_as(text_json_string_html, "a\xe2\x80\xa8" "b\xe2\x80\xa9", 8, "\"a\\u2028b\\u2029\"");
        json_is_as(text_json_string_html, "q\"\\\xff", 4, "\"q\\\"\\\\\\ufffd\"");
        /* without html, those stay as they are */
        json_is("</a>&'", 6, "\"</a>&'\"");
}

static void xml_is(const char *in, size_t n, const char *expected) {
        json_is_as(text_xml, in, n, expected);
}

/* XML text and attributes: no markup, no end of the attribute, nothing XML cannot hold */
static void test_xml(void) {
        xml_is("", 0, "");
        xml_is("Orders!Api.Get()", 16, "Orders!Api.Get()");
        xml_is("<script>a&&b</script>", 21, "&lt;script&gt;a&amp;&amp;b&lt;/script&gt;");
        xml_is("\"x' onload='y", 13, "&quot;x&#39; onload=&#39;y");
        xml_is("]]><![CDATA[", 12, "]]&gt;&lt;![CDATA[");
        /* controls (newlines too), NUL, C1, DEL, U+FFFE, bidi overrides: U+FFFD */
        xml_is("a\nb\tc\0d", 7, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd" "d");
        xml_is("\x7f\xc2\x9b\xef\xbf\xbe\xe2\x80\xae", 9,
               "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        /* not UTF-8: each byte replaced */
        xml_is("\xff<\xed\xa0\x80", 5, "\xef\xbf\xbd&lt;\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        /* valid UTF-8 stays */
        xml_is("caf\xc3\xa9 \xf0\x9f\x94\xa5", 10, "caf\xc3\xa9 \xf0\x9f\x94\xa5");
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

/* Decodes @n units written as numbers, on an odd address so that alignment cannot matter. */
static char *utf16(const uint16_t *units, size_t n) {
        uint8_t *raw = malloc(2 * n + 1);
        char *s = NULL;

        if (!raw)
                abort();
        for (size_t i = 0; i < n; i++) {
                raw[1 + 2 * i] = (uint8_t)units[i];
                raw[2 + 2 * i] = (uint8_t)(units[i] >> 8);
        }
        if (utf16le_to_utf8(raw + 1, n, &s) != 0)
                s = NULL;
        free(raw);
        return s;
}

static void utf16_is(const uint16_t *units, size_t n, const char *expected) {
        char *s = utf16(units, n);

        check(s && strcmp(s, expected) == 0);
        check(s && utf8_is_valid(s, strlen(s)));
        if (s && strcmp(s, expected) != 0) {
                char *shown = text_escape(s, strlen(s));
                printf("# got '%s'\n", shown ? shown : "?");
                free(shown);
        }
        free(s);
}

#define UTF16_IS(expected, ...)                                                           \
        utf16_is((const uint16_t[]){ __VA_ARGS__ }, sizeof((const uint16_t[]){ __VA_ARGS__ }) / 2, expected)

static void test_utf16(void) {
        char *s = NULL;

        /* nothing at all is the empty string, not NULL */
        check(utf16le_to_utf8((const uint8_t *)"", 0, &s) == 0 && s && *s == '\0');
        free(s);

        UTF16_IS("hi", 'h', 'i');
        /* the edges of the 1, 2 and 3 byte forms */
        UTF16_IS("\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf", 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF);
        /* U+E000, just above the surrogates, and U+FFFD itself stay as they are */
        UTF16_IS("\xee\x80\x80\xef\xbf\xbd", 0xE000, 0xFFFD);

        /* pairs: U+1F600, and the first and the last code point above the BMP */
        UTF16_IS("\xf0\x9f\x98\x80", 0xD83D, 0xDE00);
        UTF16_IS("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 0xD800, 0xDC00, 0xDBFF, 0xDFFF);
        UTF16_IS("a\xf0\x9f\x98\x80" "b", 'a', 0xD83D, 0xDE00, 'b');

        /* lone high surrogates: last, before an ordinary unit (kept), before another high one */
        UTF16_IS("\xef\xbf\xbd", 0xD800);
        UTF16_IS("a\xef\xbf\xbd", 'a', 0xDBFF);
        UTF16_IS("\xef\xbf\xbdx", 0xD83D, 'x');
        UTF16_IS("\xef\xbf\xbd\xf0\x9f\x98\x80", 0xD83D, 0xD83D, 0xDE00);
        /* lone low surrogates: first, after an ordinary unit, and a pair in the wrong order */
        UTF16_IS("\xef\xbf\xbdx", 0xDC00, 'x');
        UTF16_IS("x\xef\xbf\xbd", 'x', 0xDFFF);
        UTF16_IS("\xef\xbf\xbd\xef\xbf\xbd", 0xDE00, 0xD83D);
        UTF16_IS("\xf0\x9f\x98\x80\xef\xbf\xbd", 0xD83D, 0xDE00, 0xDE00);

        /* NUL anywhere is U+FFFD: the C string is the whole string */
        UTF16_IS("a\xef\xbf\xbd" "b", 'a', 0, 'b');
        UTF16_IS("\xef\xbf\xbd\xef\xbf\xbd", 0, 0);
        /* a NUL between the halves of a pair breaks it */
        UTF16_IS("\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 0xD83D, 0, 0xDE00);
}

static void test_utf16_sizes(void) {
        const size_t n = 65536;
        uint16_t *units = malloc(n * sizeof(uint16_t));
        char *s;

        check(units);
        if (!units)
                return;

        /* the worst case: 3 bytes for every unit, surrogates and NULs included */
        for (size_t i = 0; i < n; i++)
                units[i] = (uint16_t[]){ 0xFFFF, 0xDC00, 0xD800, 0 }[i % 4];
        s = utf16(units, n);
        check(s && strlen(s) == 3 * n && utf8_is_valid(s, 3 * n));
        free(s);

        /* pairs: 4 bytes for 2 units */
        for (size_t i = 0; i < n; i++)
                units[i] = i % 2 ? 0xDFFF : 0xDBFF;
        s = utf16(units, n);
        check(s && strlen(s) == 2 * n && utf8_is_valid(s, 2 * n));
        free(s);

        /* a high surrogate cut off by the end of the units stays lone: nothing past @n_units is read */
        s = utf16(units, n - 1);
        check(s && strlen(s) == 2 * (n - 2) + 3);
        free(s);
        free(units);

        /* more units than the output could ever hold: refused before anything is read */
        s = (char *)"untouched";
        check(utf16le_to_utf8(NULL, UTF16_UNITS_MAX + 1, &s) == -ERANGE);
        check(utf16le_to_utf8(NULL, SIZE_MAX, &s) == -ERANGE);
        check(strcmp(s, "untouched") == 0);
}

static void test_format_size_and_span(void) {
        char buf[32];

        text_format_size(0, buf, sizeof(buf));
        check(strcmp(buf, "0 B") == 0);
        text_format_size(1536, buf, sizeof(buf));
        check(strcmp(buf, "1.5 KiB") == 0);
        text_format_size(3ULL << 30, buf, sizeof(buf));
        check(strcmp(buf, "3.0 GiB") == 0);
        text_format_span(3ULL * 24 * 3600 * 1000000, buf, sizeof(buf));
        check(strcmp(buf, "3 days") == 0);
        text_format_span(24ULL * 3600 * 1000000, buf, sizeof(buf));
        check(strcmp(buf, "1 day") == 0);
        text_format_span(5400ULL * 1000000, buf, sizeof(buf));
        check(strcmp(buf, "1.5 hours") == 0);
        text_format_span(40ULL * 1000000, buf, sizeof(buf));
        check(strcmp(buf, "40 seconds") == 0);
        text_format_span(200000, buf, sizeof(buf));
        check(strcmp(buf, "0.2 seconds") == 0);
        text_format_span(0, buf, sizeof(buf));
        check(strcmp(buf, "0 seconds") == 0);
}

int main(void) {
        run_test(test_utf8);
        run_test(test_escape);
        run_test(test_utf16);
        run_test(test_utf16_sizes);
        run_test(test_json_string);
        run_test(test_json_string_html);
        run_test(test_xml);
        run_test(test_parse_numbers);
        run_test(test_format_size_and_span);
        return tap_finish();
}
