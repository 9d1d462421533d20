/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Property tests of the outputs that carry what a process or a runtime chose (its paths, names,
 * counters' names and tags): deterministic random byte strings with the hostile cases mixed in,
 * and strict readers of each output format (text, JSON, CSV, Prometheus) to check the output with.
 * Header only, for the unit tests.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/text.h"

/* ---- random strings ---- */

typedef struct Rng {
        uint64_t state;
} Rng;

/* splitmix64: the same sequence on every run and every machine, so a failure can be replayed */
static inline uint64_t rng_next(Rng *r) {
        uint64_t z = (r->state += UINT64_C(0x9E3779B97F4A7C15));

        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        return z ^ (z >> 31);
}

static inline size_t rng_below(Rng *r, size_t n) {
        return n == 0 ? 0 : (size_t)(rng_next(r) % n);
}

/* What escaping gets wrong: the formats' own syntax, controls, bidi, and every kind of bad UTF-8. */
static const char *const property_pieces[] = {
        "\\", "\"", "'", "\n", "\r", "\t", "\r\n", "\x1b[2J", "\x1b]0;title\x07", "\x7f", "\x01", "\x1f",
        "\xc2\x85" /* NEL, a C1 control */, "\xc2\x9b" /* CSI */, "\xc2\xa0", "\xe2\x80\xae" /* RLO */,
        "\xe2\x81\xa6" /* LRI */, "\xe2\x80\x8b" /* ZWSP */, "\xef\xbb\xbf" /* BOM */, "\xef\xbf\xbd" /* U+FFFD */,
        "\xe2\x80\xa8" /* LINE SEPARATOR */, "\xf0\x9f\x98\x80", "\xc3\xa9", "\xe2\x82\xac",
        "\xff", "\xfe", "\x80", "\xbf", "\xc0\xaf" /* overlong '/' */, "\xe0\x80\xaf", "\xed\xa0\x80" /* surrogate */,
        "\xf4\x90\x80\x80" /* above U+10FFFF */, "\xe2\x82" /* cut short */, "\xf0\x9f\x98", "\xc3",
        ",", ";", "=", ":", "{", "}", "[", "]", "#", " ", "# HELP x y\n", "# TYPE x gauge\n", "x{a=\"b\"} 1\n",
        "\\x41", "\\u202e", "\\n", "\\\"", "\"\"", "\",\"", "DSAGENT_DECISION=\"allowed\"", "%s%n", "_", "0",
        "Interval=1000", "By", "ms", "{request}", "/",
};

/*
 * Up to @max - 1 bytes of hostile text into @buf, NUL-terminated; with @nul_free none of them a
 * NUL (a C string's contents). Pieces of the list above, random bytes, printable ASCII and random
 * code points (controls and format characters among them), in random order. Return: the length.
 */
static inline size_t random_text(Rng *r, char *buf, size_t max, bool nul_free) {
        size_t want = rng_below(r, 4) == 0 ? rng_below(r, max) : rng_below(r, max < 48 ? max : 48), n = 0;

        while (n < want) {
                char piece[8];
                const char *p = piece;
                size_t len;
                uint32_t cp;

                switch (rng_below(r, 5)) {
                case 0:
                case 1:
                        p = property_pieces[rng_below(r, sizeof(property_pieces) / sizeof(property_pieces[0]))];
                        len = strlen(p);
                        break;
                case 2:
                        piece[0] = (char)rng_below(r, 256);
                        len = 1;
                        break;
                case 3:
                        piece[0] = (char)(' ' + rng_below(r, 95));
                        len = 1;
                        break;
                default:
                        cp = (uint32_t)rng_below(r, rng_below(r, 2) ? 0x800 : 0x110000);
                        if (cp >= 0xD800 && cp <= 0xDFFF)
                                cp = 0xFFFD;
                        len = utf8_encode(cp, piece);
                }
                for (size_t i = 0; i < len && n < want; i++)
                        if (!nul_free || p[i] != '\0')
                                buf[n++] = p[i];
        }
        buf[n] = '\0';
        return n;
}

/* ---- text ---- */

/* Valid UTF-8 with no C0 control (but those in @allowed), no DEL, no C1 control, no format character. */
static inline bool text_is_clean(const char *s, size_t n, const char *allowed) {
        while (n > 0) {
                uint32_t cp;
                size_t len = utf8_decode(s, n, &cp);

                if (len == 0)
                        return false;
                if ((cp < 0x20 && !(cp != 0 && allowed && strchr(allowed, (int)cp))) || cp == 0x7F ||
                    (cp >= 0x80 && cp < 0xA0) || unicode_is_format_control(cp))
                        return false;
                s += len;
                n -= len;
        }
        return true;
}

static inline int property_hex(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/*
 * text_escape()'s inverse: \\ a backslash, \xNN a byte, \uNNNN a code point; any other backslash
 * is an error. @out needs as many bytes as @s has. Return: false on an escape text_escape() never writes.
 */
static inline bool text_unescape(const char *s, size_t n, char *out, size_t *ret_n) {
        size_t o = 0;

        for (size_t i = 0; i < n;) {
                if (s[i] != '\\') {
                        out[o++] = s[i++];
                        continue;
                }
                if (i + 1 < n && s[i + 1] == '\\') {
                        out[o++] = '\\';
                        i += 2;
                } else if (i + 3 < n && s[i + 1] == 'x' && property_hex(s[i + 2]) >= 0 && property_hex(s[i + 3]) >= 0) {
                        out[o++] = (char)(property_hex(s[i + 2]) << 4 | property_hex(s[i + 3]));
                        i += 4;
                } else if (i + 5 < n && s[i + 1] == 'u') {
                        uint32_t cp = 0;

                        for (int k = 2; k < 6; k++) {
                                if (property_hex(s[i + k]) < 0)
                                        return false;
                                cp = cp << 4 | (uint32_t)property_hex(s[i + k]);
                        }
                        o += utf8_encode(cp, out + o);
                        i += 6;
                } else
                        return false;
        }
        *ret_n = o;
        return true;
}

/* @s with U+FFFD for each byte that starts no UTF-8 sequence, as text_json_string() reads it. @out: 3 × @n. */
static inline size_t utf8_replace_invalid(const char *s, size_t n, char *out) {
        size_t o = 0;

        while (n > 0) {
                uint32_t cp;
                size_t len = utf8_decode(s, n, &cp);

                if (len == 0) {
                        memcpy(out + o, "\xef\xbf\xbd", 3);
                        o += 3;
                        len = 1;
                } else {
                        memcpy(out + o, s, len);
                        o += len;
                }
                s += len;
                n -= len;
        }
        return o;
}

/* ---- JSON (RFC 8259), strictly ---- */

typedef struct JsonCursor {
        const char *p, *end;
} JsonCursor;

static inline void json_space(JsonCursor *c) {
        while (c->p < c->end && strchr(" \t\r\n", *c->p) && *c->p)
                c->p++;
}

static inline bool json_eat(JsonCursor *c, char ch) {
        json_space(c);
        if (c->p < c->end && *c->p == ch) {
                c->p++;
                return true;
        }
        return false;
}

/* A string at the cursor, decoded into @out (NULL: only checked; else room for as many bytes as the text). */
static inline bool json_string(JsonCursor *c, char *out, size_t *ret_n) {
        size_t o = 0;

        json_space(c);
        if (c->p >= c->end || *c->p++ != '"')
                return false;
        for (;;) {
                uint32_t cp;
                size_t len;

                if (c->p >= c->end)
                        return false;
                if (*c->p == '"')
                        break;
                if ((unsigned char)*c->p < 0x20)
                        return false; /* a raw control character is no JSON */
                if (*c->p == '\\') {
                        const char *e = c->p + 1;

                        if (e >= c->end)
                                return false;
                        if (*e == 'u') {
                                cp = 0;
                                for (int k = 1; k <= 4; k++) {
                                        if (e + k >= c->end || property_hex(e[k]) < 0)
                                                return false;
                                        cp = cp << 4 | (uint32_t)property_hex(e[k]);
                                }
                                c->p = e + 5;
                                if (cp >= 0xDC00 && cp <= 0xDFFF)
                                        return false;
                                if (cp >= 0xD800 && cp <= 0xDBFF) {
                                        uint32_t low = 0;

                                        if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u')
                                                return false;
                                        for (int k = 2; k < 6; k++) {
                                                if (property_hex(c->p[k]) < 0)
                                                        return false;
                                                low = low << 4 | (uint32_t)property_hex(c->p[k]);
                                        }
                                        if (low < 0xDC00 || low > 0xDFFF)
                                                return false;
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                                        c->p += 6;
                                }
                        } else {
                                const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *at = strchr(from, *e);

                                if (!at || !*e)
                                        return false;
                                cp = (unsigned char)to[at - from];
                                c->p = e + 1;
                        }
                        if (out)
                                o += utf8_encode(cp, out + o);
                        continue;
                }
                len = utf8_decode(c->p, (size_t)(c->end - c->p), &cp);
                if (len == 0)
                        return false; /* JSON text is UTF-8 */
                if (out)
                        memcpy(out + o, c->p, len);
                o += len;
                c->p += len;
        }
        c->p++;
        if (ret_n)
                *ret_n = o;
        return true;
}

static inline bool json_number(JsonCursor *c) {
        const char *p = c->p;

        if (p < c->end && *p == '-')
                p++;
        if (p >= c->end || *p < '0' || *p > '9')
                return false;
        if (*p == '0')
                p++;
        else
                while (p < c->end && *p >= '0' && *p <= '9')
                        p++;
        if (p < c->end && *p == '.') {
                if (++p >= c->end || *p < '0' || *p > '9')
                        return false;
                while (p < c->end && *p >= '0' && *p <= '9')
                        p++;
        }
        if (p < c->end && (*p == 'e' || *p == 'E')) {
                p++;
                if (p < c->end && (*p == '+' || *p == '-'))
                        p++;
                if (p >= c->end || *p < '0' || *p > '9')
                        return false;
                while (p < c->end && *p >= '0' && *p <= '9')
                        p++;
        }
        c->p = p;
        return true;
}

static inline bool json_value(JsonCursor *c, unsigned depth) {
        json_space(c);
        if (c->p >= c->end || depth > 64)
                return false;
        if (*c->p == '"')
                return json_string(c, NULL, NULL);
        if (*c->p == '{' || *c->p == '[') {
                char close = *c->p == '{' ? '}' : ']';
                bool object = close == '}';

                c->p++;
                if (json_eat(c, close))
                        return true;
                do {
                        if (object && (!json_string(c, NULL, NULL) || !json_eat(c, ':')))
                                return false;
                        if (!json_value(c, depth + 1))
                                return false;
                } while (json_eat(c, ','));
                return json_eat(c, close);
        }
        for (const char *const *w = (const char *const[]){ "true", "false", "null", NULL }; *w; w++)
                if ((size_t)(c->end - c->p) >= strlen(*w) && memcmp(c->p, *w, strlen(*w)) == 0) {
                        c->p += strlen(*w);
                        return true;
                }
        return json_number(c);
}

/* @s (@n bytes) is one JSON value and nothing else, whitespace aside. */
static inline bool json_document_valid(const char *s, size_t n) {
        JsonCursor c = { s, s + n };

        if (!json_value(&c, 0))
                return false;
        json_space(&c);
        return c.p == c.end;
}

/* The value of the first member @key ("key":"...") of the JSON in @s, decoded into @out; false if none. */
static inline bool json_member_string(const char *s, size_t n, const char *key, char *out, size_t *ret_n) {
        char pattern[128];
        const char *at;
        JsonCursor c;

        snprintf(pattern, sizeof(pattern), "\"%s\":", key);
        at = memmem(s, n, pattern, strlen(pattern));
        if (!at)
                return false;
        c = (JsonCursor){ at + strlen(pattern), s + n };
        return json_string(&c, out, ret_n);
}

/* ---- CSV (RFC 4180) ---- */

/*
 * One record of @s from *@pos: fields unquoted (no quote, no CR, no LF in them) or quoted (""
 * for a quote), ended by LF or the end. Return: its number of fields, or -1 if it is not CSV.
 */
static inline int csv_record(const char *s, size_t n, size_t *pos) {
        size_t i = *pos;
        int fields = 0;

        for (;;) {
                fields++;
                if (i < n && s[i] == '"') {
                        for (i++;; i++) {
                                if (i >= n)
                                        return -1;
                                if (s[i] == '"') {
                                        if (i + 1 < n && s[i + 1] == '"')
                                                i++;
                                        else
                                                break;
                                }
                        }
                        i++;
                } else
                        while (i < n && s[i] != ',' && s[i] != '\n') {
                                if (s[i] == '"' || s[i] == '\r')
                                        return -1;
                                i++;
                        }
                if (i < n && s[i] == ',') {
                        i++;
                        continue;
                }
                if (i < n && s[i] != '\n')
                        return -1;
                *pos = i < n ? i + 1 : i;
                return fields;
        }
}

/* ---- the Prometheus text format (0.0.4) ---- */

static inline bool prom_name_char(char ch, bool first, bool colon) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || (colon && ch == ':') ||
               (!first && ch >= '0' && ch <= '9');
}

/* A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), or with !@colon a label name, at *@p. */
static inline bool prom_name(const char **p, const char *end, bool colon) {
        const char *s = *p;

        if (s >= end || !prom_name_char(*s, true, colon))
                return false;
        while (s < end && prom_name_char(*s, s == *p, colon))
                s++;
        *p = s;
        return true;
}

/* Escaped text up to @end or, with @quoted, up to an unescaped '"': only \\, \n (and \" when @quoted). */
static inline bool prom_text(const char **p, const char *end, bool quoted) {
        const char *s = *p;

        while (s < end && !(quoted && *s == '"')) {
                if (*s == '\n')
                        return false;
                if (*s == '\\') {
                        if (s + 1 >= end || !(s[1] == '\\' || s[1] == 'n' || (quoted && s[1] == '"')))
                                return false;
                        s++;
                }
                s++;
        }
        *p = s;
        return !quoted || s < end;
}

static inline bool prom_value(const char *s, const char *end) {
        static const char *const words[] = { "+Inf", "-Inf", "NaN" };
        JsonCursor c = { s, end };

        for (size_t i = 0; i < 3; i++)
                if ((size_t)(end - s) == strlen(words[i]) && memcmp(s, words[i], (size_t)(end - s)) == 0)
                        return true;
        return json_number(&c) && c.p == end;
}

/* One line (no newline in it) of the text format: a comment (HELP, TYPE), a sample, or empty. */
static inline bool prom_line(const char *s, size_t n) {
        const char *p = s, *end = s + n;

        if (n == 0)
                return true;
        if (n > 7 && (memcmp(s, "# HELP ", 7) == 0 || memcmp(s, "# TYPE ", 7) == 0)) {
                bool help = s[2] == 'H';

                p += 7;
                if (!prom_name(&p, end, true) || p >= end || *p++ != ' ')
                        return false;
                if (help)
                        return prom_text(&p, end, false);
                for (const char *const *t = (const char *const[]){ "counter", "gauge", "summary", "histogram",
                                                                   "untyped", NULL };
                     *t; t++)
                        if ((size_t)(end - p) == strlen(*t) && memcmp(p, *t, strlen(*t)) == 0)
                                return true;
                return false;
        }
        if (!prom_name(&p, end, true))
                return false;
        if (p < end && *p == '{') {
                p++;
                while (p < end && *p != '}') {
                        if (!prom_name(&p, end, false) || p + 1 >= end || p[0] != '=' || p[1] != '"')
                                return false;
                        p += 2;
                        if (!prom_text(&p, end, true))
                                return false;
                        p++; /* the closing quote */
                        if (p < end && *p == ',')
                                p++;
                }
                if (p >= end)
                        return false;
                p++;
        }
        if (p >= end || *p++ != ' ')
                return false;
        return prom_value(p, memchr(p, ' ', (size_t)(end - p)) ? (const char *)memchr(p, ' ', (size_t)(end - p)) : end);
}

/* Every line of @s is one of the text format; the whole is valid UTF-8 without a control character. */
static inline bool prom_document_valid(const char *s, size_t n) {
        if (!text_is_clean(s, n, "\n"))
                return false;
        for (size_t i = 0; i < n;) {
                const char *nl = memchr(s + i, '\n', n - i);
                size_t len = nl ? (size_t)(nl - (s + i)) : n - i;

                if (!prom_line(s + i, len))
                        return false;
                i += len + 1;
        }
        return true;
}

/* A HELP text or a label value (the text between its quotes) as Prometheus reads it back. */
static inline size_t prom_unescape(const char *s, size_t n, char *out) {
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                if (s[i] == '\\' && i + 1 < n) {
                        i++;
                        out[o++] = s[i] == 'n' ? '\n' : s[i];
                } else
                        out[o++] = s[i];
        }
        return o;
}
