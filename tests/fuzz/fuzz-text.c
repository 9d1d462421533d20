/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the text helpers of common/text.h that see hostile bytes: text_escape()
 * (process names, units, runtime messages on their way to logs and terminals),
 * utf8_is_valid() (every string field of both protocols), utf16le_to_utf8() (every
 * string a runtime sends), text_json_string() (dsctl's --json, dsagent --audit json)
 * and the strict number parsers (/proc directory names, command-line arguments).
 *
 * Input: any bytes.
 *
 * Invariants: text_escape() output has no C0 control, no DEL, no C1 control,
 * no format character (bidi overrides and the like) and is valid UTF-8, and
 * unescaping it gives back the input exactly;
 * text_json_string() output is one JSON string of valid UTF-8 without a raw control
 * byte, and decodes to the input, U+FFFD for each byte that starts no UTF-8 sequence;
 * utf8_is_valid() agrees with a table-driven reference (Unicode 15, table 3-7);
 * utf16le_to_utf8() of the input's units is valid UTF-8 without NUL, at most 3 bytes a
 * unit, and walks back to the input: pairs joined, and U+FFFD exactly for NUL, lone
 * surrogates and U+FFFD itself;
 * parse_u64()/parse_pid() accept exactly the canonical decimal spellings.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "common/text.h"

/* Well-formed UTF-8 byte sequences, straight from the Unicode standard's table. */
static bool reference_utf8_is_valid(const uint8_t *s, size_t n) {
        size_t i = 0;

        while (i < n) {
                uint8_t b = s[i];
                uint8_t lo = 0x80, hi = 0xBF;
                size_t len;

                if (b <= 0x7F) {
                        i++;
                        continue;
                } else if (b >= 0xC2 && b <= 0xDF)
                        len = 2;
                else if (b == 0xE0) {
                        len = 3;
                        lo = 0xA0;
                } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF)
                        len = 3;
                else if (b == 0xED) {
                        len = 3;
                        hi = 0x9F;
                } else if (b == 0xF0) {
                        len = 4;
                        lo = 0x90;
                } else if (b >= 0xF1 && b <= 0xF3)
                        len = 4;
                else if (b == 0xF4) {
                        len = 4;
                        hi = 0x8F;
                } else
                        return false;

                if (n - i < len)
                        return false;
                if (s[i + 1] < lo || s[i + 1] > hi)
                        return false;
                for (size_t k = 2; k < len; k++)
                        if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                                return false;
                i += len;
        }
        return true;
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

static void fuzz_escape(const uint8_t *data, size_t size) {
        const uint8_t *o;
        uint8_t *back;
        size_t len, b = 0;
        char *out;

        out = text_escape((const char *)data, size);
        fuzz_assert(out); /* NULL only on allocation failure */
        len = strlen(out);
        fuzz_assert(len <= size * 4);
        o = (const uint8_t *)out;

        /* safe for a terminal and a log line */
        for (size_t i = 0; i < len; i++) {
                fuzz_assert(o[i] >= 0x20 && o[i] != 0x7F);
                fuzz_assert(!(o[i] == 0xC2 && i + 1 < len && o[i + 1] >= 0x80 && o[i + 1] <= 0x9F));
        }
        fuzz_assert(utf8_is_valid(out, len));
        fuzz_assert(reference_utf8_is_valid(o, len));

        /* nothing that reorders or hides text on a screen is left */
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                size_t k = utf8_decode(out + i, len - i, &cp);
                fuzz_assert(k > 0 && !unicode_is_format_control(cp));
                i += k;
        }

        /* unambiguous: \\, \xNN and \uNNNN are the only escapes, and undoing them is lossless */
        back = malloc(len + 1);
        fuzz_assert(back);
        for (size_t i = 0; i < len;) {
                if (out[i] != '\\') {
                        back[b++] = o[i++];
                        continue;
                }
                fuzz_assert(i + 1 < len);
                if (out[i + 1] == '\\') {
                        back[b++] = '\\';
                        i += 2;
                        continue;
                }
                if (out[i + 1] == 'u') {
                        uint32_t cp = 0;
                        fuzz_assert(i + 5 < len);
                        for (size_t k = 2; k < 6; k++) {
                                fuzz_assert(hex_value(out[i + k]) >= 0);
                                cp = cp << 4 | (uint32_t)hex_value(out[i + k]);
                        }
                        fuzz_assert(unicode_is_format_control(cp));
                        b += utf8_encode(cp, (char *)back + b);
                        i += 6;
                        continue;
                }
                fuzz_assert(out[i + 1] == 'x' && i + 3 < len);
                fuzz_assert(hex_value(out[i + 2]) >= 0 && hex_value(out[i + 3]) >= 0);
                back[b++] = (uint8_t)(hex_value(out[i + 2]) << 4 | hex_value(out[i + 3]));
                i += 4;
        }
        fuzz_assert(b == size);
        fuzz_assert(size == 0 || memcmp(back, data, size) == 0);

        free(back);
        free(out);
}

/* text_json_string(): a JSON string of valid UTF-8 with no raw control byte, which decodes to the input, each
 * byte that was not UTF-8 as U+FFFD */
static void fuzz_json(const uint8_t *data, size_t size) {
        char *out = NULL;
        uint8_t *back, *expected;
        size_t len = 0, b = 0, e = 0;
        FILE *f = open_memstream(&out, &len);

        fuzz_assert(f);
        text_json_string(f, (const char *)data, size);
        fuzz_assert(fclose(f) == 0);
        fuzz_assert(len >= 2 && out[0] == '"' && out[len - 1] == '"');
        fuzz_assert(utf8_is_valid(out, len));

        back = malloc(3 * size + 1);
        expected = malloc(3 * size + 1);
        fuzz_assert(back && expected);
        for (size_t i = 1; i < len - 1;) {
                uint8_t c = (uint8_t)out[i];
                uint32_t cp = 0;

                fuzz_assert(c >= 0x20 && c != 0x7F && c != '"');
                if (c != '\\') {
                        back[b++] = c;
                        i++;
                        continue;
                }
                fuzz_assert(i + 1 < len - 1);
                if (out[i + 1] == '"' || out[i + 1] == '\\') {
                        back[b++] = (uint8_t)out[i + 1];
                        i += 2;
                        continue;
                }
                fuzz_assert(out[i + 1] == 'u' && i + 5 < len - 1);
                for (size_t k = 2; k < 6; k++) {
                        fuzz_assert(hex_value(out[i + k]) >= 0);
                        cp = cp << 4 | (uint32_t)hex_value(out[i + k]);
                }
                fuzz_assert(cp < 0xD800 || cp > 0xDFFF); /* no surrogate halves to pair up */
                b += utf8_encode(cp, (char *)back + b);
                i += 6;
        }
        for (size_t i = 0; i < size;) {
                uint32_t cp;
                size_t k = utf8_decode((const char *)data + i, size - i, &cp);

                if (k == 0) {
                        memcpy(expected + e, "\xef\xbf\xbd", 3);
                        e += 3;
                        i++;
                } else {
                        memcpy(expected + e, data + i, k);
                        e += k;
                        i += k;
                }
        }
        fuzz_assert(b == e && (e == 0 || memcmp(back, expected, e) == 0));
        free(back);
        free(expected);
        free(out);
}

static uint16_t unit_at(const uint8_t *data, size_t i) {
        return (uint16_t)(data[2 * i] | data[2 * i + 1] << 8);
}

static void fuzz_utf16(const uint8_t *data, size_t size) {
        size_t n = size / 2, i = 0, len;
        char *s = NULL;

        fuzz_assert(utf16le_to_utf8(data, n, &s) == 0);
        len = strlen(s);
        fuzz_assert(len <= 3 * n);
        fuzz_assert(utf8_is_valid(s, len));

        /* the output's code points, against the input's units */
        for (size_t k = 0; k < len;) {
                uint32_t cp;
                size_t m = utf8_decode(s + k, len - k, &cp);
                uint16_t u;

                fuzz_assert(m > 0 && i < n);
                u = unit_at(data, i);
                if (cp >= 0x10000) {
                        fuzz_assert(i + 1 < n);
                        fuzz_assert(u == 0xD800 + ((cp - 0x10000) >> 10));
                        fuzz_assert(unit_at(data, i + 1) == 0xDC00 + ((cp - 0x10000) & 0x3FF));
                        i += 2;
                } else if (cp == 0xFFFD) {
                        bool high = u >= 0xD800 && u <= 0xDBFF;
                        fuzz_assert(u == 0xFFFD || u == 0 || (u >= 0xD800 && u <= 0xDFFF));
                        /* a high surrogate is replaced only when no low one follows */
                        fuzz_assert(!(high && i + 1 < n && unit_at(data, i + 1) >= 0xDC00 &&
                                      unit_at(data, i + 1) <= 0xDFFF));
                        i++;
                } else {
                        fuzz_assert(cp == u);
                        i++;
                }
                k += m;
        }
        fuzz_assert(i == n);
        free(s);
}

static void fuzz_numbers(const uint8_t *data, size_t size) {
        char *s, canonical[32];
        uint64_t u = 0;
        pid_t pid = 0;
        int r;

        /* as from a NUL-terminated string: up to the first NUL */
        s = strndup((const char *)data, size);
        fuzz_assert(s);

        r = parse_u64(s, &u);
        fuzz_assert(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r == 0) {
                snprintf(canonical, sizeof(canonical), "%" PRIu64, u);
                fuzz_assert(strcmp(s, canonical) == 0);
        } else if (r == -ERANGE) {
                /* only a run of at least 20 digits overflows (the first 20 may be
                 * followed by anything: overflow is reported as soon as it happens) */
                fuzz_assert(strspn(s, "0123456789") >= 20);
        }

        r = parse_pid(s, &pid);
        fuzz_assert(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r == 0) {
                fuzz_assert(pid > 0);
                snprintf(canonical, sizeof(canonical), "%d", (int)pid);
                fuzz_assert(strcmp(s, canonical) == 0);
        }

        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        fuzz_assert(utf8_is_valid((const char *)data, size) == reference_utf8_is_valid(data, size));
        fuzz_escape(data, size);
        fuzz_json(data, size);
        fuzz_utf16(data, size);
        fuzz_numbers(data, size);
        return 0;
}
