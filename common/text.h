/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text helpers shared by the agent and the client: UTF-8, escaping, numbers */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
bool utf8_is_valid(const char *s, size_t n);

/* Length of the valid UTF-8 sequence at @s, with its code point in *@ret_cp; 0 when it is not one. */
size_t utf8_decode(const char *s, size_t n, uint32_t *ret_cp);

/* Bidirectional and other invisible format characters (U+202E and friends): they reorder or
 * hide text on a screen, so that what is shown is not what was sent (CVE-2021-42574). */
bool unicode_is_format_control(uint32_t cp);

/* Length of the longest valid UTF-8 prefix of @s: one pass, stopping at the first bad sequence. */
size_t utf8_valid_prefix(const char *s, size_t n);

/* Appends the UTF-8 encoding of @cp (which must be a valid scalar value) to
 * @buf and returns the number of bytes written (1..4). @buf needs 4 bytes. */
size_t utf8_encode(uint32_t cp, char *buf);

/*
 * text_escape() - copy of @s that is safe to print on a terminal and in a log line
 *
 * C0 and C1 controls, DEL, backslash and bytes that are not valid UTF-8 become
 * \xNN (backslash as \\), and format characters (unicode_is_format_control())
 * \uNNNN, so a hostile string can neither forge a new line or field, nor drive a
 * terminal, nor reorder what is shown. Returns NULL only on allocation failure.
 */
char *text_escape(const char *s, size_t n);

/* Strict decimal parsers: no sign, no spaces, no trailing bytes, no overflow.
 * Return 0, or -EINVAL / -ERANGE. */
int parse_u64(const char *s, uint64_t *ret);
int parse_pid(const char *s, pid_t *ret);
