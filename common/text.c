/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text helpers shared by agent and client (text.h): UTF-8, escaping, numbers. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/unaligned.h"

/* Length of the valid UTF-8 sequence starting at @s (its code point in *@ret_cp), or 0 if it is not one. */
static size_t utf8_sequence_decode(const unsigned char *s, size_t n, uint32_t *ret_cp) {
        uint32_t cp;
        size_t len;

        if (n == 0)
                return 0;
        if (s[0] < 0x80) {
                *ret_cp = s[0];
                return 1;
        }
        if (s[0] >= 0xC2 && s[0] <= 0xDF) {
                len = 2;
                cp = s[0] & 0x1F;
        } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
                len = 3;
                cp = s[0] & 0x0F;
        } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
                len = 4;
                cp = s[0] & 0x07;
        } else
                return 0;

        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3F);
        }

        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000))
                return 0; /* overlong */
        if (cp >= 0xD800 && cp <= 0xDFFF)
                return 0; /* surrogates are not scalar values */
        if (cp > 0x10FFFF)
                return 0;
        *ret_cp = cp;
        return len;
}

size_t utf8_decode(const char *s, size_t n, uint32_t *ret_cp) {
        return utf8_sequence_decode((const unsigned char *)s, n, ret_cp);
}

bool unicode_is_format_control(uint32_t cp) {
        return cp == 0x061C ||                    /* arabic letter mark */
               (cp >= 0x200B && cp <= 0x200F) || /* zero widths, LRM, RLM */
               (cp >= 0x202A && cp <= 0x202E) || /* embeddings and overrides */
               (cp >= 0x2060 && cp <= 0x2064) || /* word joiner, invisible operators */
               (cp >= 0x2066 && cp <= 0x206F) || /* isolates, deprecated format controls */
               cp == 0xFEFF ||                    /* zero width no-break space */
               (cp >= 0xFFF9 && cp <= 0xFFFB);    /* interlinear annotations */
}

size_t utf8_char_length(const char *s) {
        uint32_t cp;
        size_t len = utf8_sequence_decode((const unsigned char *)s, strnlen(s, 4), &cp);

        return len > 0 ? len : 1;
}

size_t utf8_valid_prefix(const char *s, size_t n) {
        const unsigned char *p = (const unsigned char *)s;
        size_t done = 0;

        while (done < n) {
                uint32_t cp;
                size_t len = utf8_sequence_decode(p + done, n - done, &cp);
                if (len == 0)
                        break;
                done += len;
        }
        return done;
}

bool utf8_is_valid(const char *s, size_t n) {
        const unsigned char *p = (const unsigned char *)s;

        while (n > 0) {
                uint32_t cp;
                size_t len = utf8_sequence_decode(p, n, &cp);
                if (len == 0)
                        return false;
                p += len;
                n -= len;
        }
        return true;
}

size_t utf8_encode(uint32_t cp, char *buf) {
        if (cp < 0x80) {
                buf[0] = (char)cp;
                return 1;
        }
        if (cp < 0x800) {
                buf[0] = (char)(0xC0 | (cp >> 6));
                buf[1] = (char)(0x80 | (cp & 0x3F));
                return 2;
        }
        if (cp < 0x10000) {
                buf[0] = (char)(0xE0 | (cp >> 12));
                buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[2] = (char)(0x80 | (cp & 0x3F));
                return 3;
        }
        buf[0] = (char)(0xF0 | (cp >> 18));
        buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
}

int utf16le_to_utf8(const uint8_t *p, size_t n_units, char **ret_utf8) {
        char *s, *o;

        if (n_units > UTF16_UNITS_MAX)
                return -ERANGE;
        /* one unit is at most 3 bytes of UTF-8 (U+FFFD included); a pair (two units) is 4 */
        s = malloc(n_units * 3 + 1);
        if (!s)
                return -ENOMEM;

        o = s;
        for (size_t i = 0; i < n_units; i++) {
                uint32_t cp = unaligned_read_le16(p + 2 * i);

                if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < n_units) {
                        uint32_t low = unaligned_read_le16(p + 2 * (i + 1));

                        if (low >= 0xDC00 && low <= 0xDFFF) {
                                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                                i++;
                        }
                }
                if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
                        cp = 0xFFFD;
                o += utf8_encode(cp, o);
        }
        *o = '\0';

        *ret_utf8 = s;
        return 0;
}

static bool is_c1_control(const unsigned char *p, size_t len) {
        /* U+0080..U+009F are encoded as C2 80..C2 9F */
        return len == 2 && p[0] == 0xC2 && p[1] < 0xA0;
}

char *text_escape(const char *s, size_t n) {
        const unsigned char *p = (const unsigned char *)s;
        char *out, *o;

        /* Worst case: every byte becomes \xNN. */
        if (n > (SIZE_MAX - 1) / 4)
                return NULL;
        out = malloc(n * 4 + 1);
        if (!out)
                return NULL;

        o = out;
        while (n > 0) {
                uint32_t cp = 0;
                size_t len = utf8_sequence_decode(p, n, &cp);

                if (len == 1 && *p == '\\') {
                        *o++ = '\\';
                        *o++ = '\\';
                } else if (len == 1 && *p >= 0x20 && *p != 0x7F) {
                        *o++ = (char)*p;
                } else if (len > 1 && unicode_is_format_control(cp)) {
                        /* it would reorder or hide what follows it on the screen */
                        o += sprintf(o, "\\u%04x", (unsigned)cp);
                } else if (len > 1 && !is_c1_control(p, len)) {
                        memcpy(o, p, len);
                        o += len;
                } else {
                        /* control byte or invalid byte: escape exactly one byte */
                        if (len == 0)
                                len = 1;
                        for (size_t i = 0; i < len; i++)
                                o += sprintf(o, "\\x%02x", p[i]);
                }
                p += len;
                n -= len;
        }
        *o = '\0';
        return out;
}

/* @html: also '<', '>', '&', '\'' and U+2028, U+2029 as \uNNNN. Runs of bytes written as they are go out
 * in one write each. */
static void json_string(FILE *f, const char *s, size_t n, bool html) {
        const char *run = s;

        fputc('"', f);
        while (n > 0) {
                uint32_t cp = 0;
                size_t len = utf8_sequence_decode((const unsigned char *)s, n, &cp);
                bool quoted, coded;

                if (len == 0)
                        len = 1, cp = 0xFFFD; /* not UTF-8: replaced, one byte at a time */
                quoted = cp == '"' || cp == '\\';
                /* controls, and what would reorder or hide text where the JSON is shown */
                coded = cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || unicode_is_format_control(cp) ||
                        cp == 0xFFFD ||
                        (html && (cp == '<' || cp == '>' || cp == '&' || cp == '\'' || cp == 0x2028 || cp == 0x2029));
                if (quoted || coded) {
                        fwrite(run, 1, (size_t)(s - run), f);
                        if (quoted)
                                fprintf(f, "\\%c", (char)cp);
                        else
                                fprintf(f, "\\u%04x", (unsigned)cp);
                        run = s + len;
                }
                s += len;
                n -= len;
        }
        fwrite(run, 1, (size_t)(s - run), f);
        fputc('"', f);
}

void text_json_string(FILE *f, const char *s, size_t n) {
        json_string(f, s, n, false);
}

void text_json_string_html(FILE *f, const char *s, size_t n) {
        json_string(f, s, n, true);
}

void text_xml(FILE *f, const char *s, size_t n) {
        static const char replacement[] = "\xef\xbf\xbd";
        const char *run = s;

        while (n > 0) {
                uint32_t cp = 0;
                size_t len = utf8_sequence_decode((const unsigned char *)s, n, &cp);
                const char *entity = NULL;

                if (len == 0)
                        len = 1, cp = 0xFFFD;
                switch (cp) {
                case '&': entity = "&amp;"; break;
                case '<': entity = "&lt;"; break;
                case '>': entity = "&gt;"; break;
                case '"': entity = "&quot;"; break;
                case '\'': entity = "&#39;"; break;
                default:
                        /* what XML 1.0 cannot hold, even as a reference, and what would hide or reorder text */
                        if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || cp == 0xFFFE || cp == 0xFFFF ||
                            cp == 0xFFFD || unicode_is_format_control(cp))
                                entity = replacement;
                }
                if (entity) {
                        fwrite(run, 1, (size_t)(s - run), f);
                        fputs(entity, f);
                        run = s + len;
                }
                s += len;
                n -= len;
        }
        fwrite(run, 1, (size_t)(s - run), f);
}

int parse_u64(const char *s, uint64_t *ret) {
        uint64_t v = 0;

        if (!s || !*s)
                return -EINVAL;
        for (const char *c = s; *c; c++) {
                if (*c < '0' || *c > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t)(*c - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t)(*c - '0');
        }
        /* "007" is refused: one spelling per number keeps logs and policy unambiguous */
        if (s[0] == '0' && s[1] != '\0')
                return -EINVAL;
        *ret = v;
        return 0;
}

int parse_pid(const char *s, pid_t *ret) {
        uint64_t v;
        int r;

        r = parse_u64(s, &v);
        if (r < 0)
                return r;
        if (v == 0 || v > INT_MAX)
                return -ERANGE;
        *ret = (pid_t)v;
        return 0;
}

void text_hex_id(const uint8_t id[16], char ret[TEXT_HEX_ID_SIZE]) {
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < 16; i++) {
                ret[2 * i] = digits[id[i] >> 4];
                ret[2 * i + 1] = digits[id[i] & 0xf];
        }
        ret[32] = '\0';
}

void text_format_size(uint64_t size, char *buf, size_t n) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        double v = (double)size;
        int u = 0;

        while (v >= 1024 && u < 4) {
                v /= 1024;
                u++;
        }
        snprintf(buf, n, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

void text_format_span(uint64_t usec, char *buf, size_t n) {
        static const struct { uint64_t usec; const char *one, *many; } units[] = {
                { 24 * 3600 * 1000000ULL, "day", "days" },
                { 3600 * 1000000ULL, "hour", "hours" },
                { 60 * 1000000ULL, "minute", "minutes" },
                { 1000000ULL, "second", "seconds" },
        };

        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
                if (usec >= units[i].usec || i + 1 == sizeof(units) / sizeof(units[0])) {
                        if (usec % units[i].usec == 0)
                                snprintf(buf, n, "%llu %s", (unsigned long long)(usec / units[i].usec),
                                         usec == units[i].usec ? units[i].one : units[i].many);
                        else
                                snprintf(buf, n, "%.1f %s", (double)usec / (double)units[i].usec, units[i].many);
                        return;
                }
}
