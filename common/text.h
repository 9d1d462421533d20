/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text helpers shared by the agent and the client: UTF-8, escaping, numbers */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
bool utf8_is_valid(const char *s, size_t n);

/* Length of the valid UTF-8 sequence at @s, with its code point in *@ret_cp; 0 when it is not one. */
size_t utf8_decode(const char *s, size_t n, uint32_t *ret_cp);

/* Bidirectional and other invisible format characters (U+202E and friends): they reorder or
 * hide text on a screen, so that what is shown is not what was sent (CVE-2021-42574). */
bool unicode_is_format_control(uint32_t cp);

/* Length of the character at @s, a NUL-terminated string: its UTF-8 sequence, or 1 for a byte that starts none. */
size_t utf8_char_length(const char *s);

/* Length of the longest valid UTF-8 prefix of @s: one pass, stopping at the first bad sequence. */
size_t utf8_valid_prefix(const char *s, size_t n);

/* Appends the UTF-8 encoding of @cp (which must be a valid scalar value) to
 * @buf and returns the number of bytes written (1..4). @buf needs 4 bytes. */
size_t utf8_encode(uint32_t cp, char *buf);

/* The most UTF-16 units utf16le_to_utf8() takes: each may become 3 bytes, plus the NUL. */
#define UTF16_UNITS_MAX ((SIZE_MAX - 1) / 3)

/*
 * utf16le_to_utf8() - @n_units UTF-16LE code units at @p as a NUL-terminated UTF-8 string
 *
 * The one UTF-16 decoder: for the strings of the .NET diagnostic IPC protocol and of
 * nettrace streams, which runtimes send without validating them. @p needs no alignment
 * and no terminator; exactly @n_units units (2 * @n_units bytes) are read.
 *
 * A high surrogate followed by a low one is one code point (U+10000..U+10FFFF). Every
 * unit that cannot be decoded becomes U+FFFD, one replacement per unit, and decoding
 * goes on with the next unit: a lone high surrogate (the last unit, or one followed by
 * anything but a low surrogate, which is then decoded on its own), a lone low surrogate,
 * and NUL (U+0000). So the result is always valid UTF-8 (utf8_is_valid()) with no NUL
 * inside it: the C string is the whole string, a hostile peer can neither truncate it
 * nor hide bytes behind a NUL. It holds at most 3 bytes per unit.
 *
 * Pure: no I/O, no logging. The caller frees *@ret_utf8.
 *
 * Return: 0; -ERANGE if @n_units > UTF16_UNITS_MAX; -ENOMEM. *@ret_utf8 is set on 0 only.
 */
int utf16le_to_utf8(const uint8_t *p, size_t n_units, char **ret_utf8);

/*
 * text_escape() - copy of @s that is safe to print on a terminal and in a log line
 *
 * C0 and C1 controls, DEL, backslash and bytes that are not valid UTF-8 become
 * \xNN (backslash as \\), and format characters (unicode_is_format_control())
 * \uNNNN, so a hostile string can neither forge a new line or field, nor drive a
 * terminal, nor reorder what is shown. Returns NULL only on allocation failure.
 */
char *text_escape(const char *s, size_t n);

/*
 * text_json_string() - @n bytes at @s as one JSON string, quotes included, written to @f
 *
 * '"' and '\\' are escaped with a backslash; C0 controls (NUL too: @n counts),
 * C1 controls, DEL and format characters (unicode_is_format_control()) as
 * \uNNNN, so that the JSON holds no control character and reads on a screen as
 * it is; a byte that starts no valid UTF-8 sequence becomes U+FFFD, as \ufffd.
 * Whatever @s holds, the output is a valid JSON string of valid UTF-8.
 */
void text_json_string(FILE *f, const char *s, size_t n);

/*
 * text_json_string_html() - as text_json_string(), and also safe inside HTML or XML
 *
 * '<', '>', '&', '\'' and U+2028, U+2029 become \uNNNN too, so that the string can stand in a
 * <script> element, an HTML attribute or an SVG's CDATA section without ending it ("</script>",
 * "]]>"), and in JavaScript source of any age. The value read back is the same.
 */
void text_json_string_html(FILE *f, const char *s, size_t n);

/*
 * text_xml() - @n bytes at @s as XML character data, fit for an element's text or an attribute's
 * value (in double or single quotes), written to @f
 *
 * '&', '<', '>', '"' and '\'' become entities. What XML 1.0 cannot hold even as a character
 * reference (C0 controls, tab and newlines too, U+FFFE, U+FFFF), C1 controls, DEL, format characters
 * (unicode_is_format_control()) and bytes that start no valid UTF-8 sequence become U+FFFD. Whatever
 * @s holds, the output is valid UTF-8 that ends no element, opens none, and ends no attribute.
 */
void text_xml(FILE *f, const char *s, size_t n);

/* Strict decimal parsers: no sign, no spaces, no trailing bytes, no overflow.
 * Return 0, or -EINVAL / -ERANGE. */
int parse_u64(const char *s, uint64_t *ret);
/* A size for people: "512 B", "1.5 MiB", "3.0 GiB" (powers of 1024). */
void text_format_size(uint64_t size, char *buf, size_t n);
/* A span of time for people, in its largest unit: "3 days", "1.5 hours", "40 seconds", "0.2 seconds". */
void text_format_span(uint64_t usec, char *buf, size_t n);
int parse_pid(const char *s, pid_t *ret);

/* The 16 bytes of an id (a runtime's cookie, an EventPipe session's id) as text: 32 lower-case hex digits and a NUL. */
#define TEXT_HEX_ID_SIZE 33
void text_hex_id(const uint8_t id[16], char ret[TEXT_HEX_ID_SIZE]);
