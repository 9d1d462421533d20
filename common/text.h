/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Text helpers shared by the agent and the client: UTF-8, escaping, numbers */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
bool utf8_is_valid(const char *s, size_t n);

/* Appends the UTF-8 encoding of @cp (which must be a valid scalar value) to
 * @buf and returns the number of bytes written (1..4). @buf needs 4 bytes. */
size_t utf8_encode(uint32_t cp, char *buf);

/*
 * text_escape() - copy of @s that is safe to print on a terminal and in a log line
 *
 * C0 and C1 controls, DEL, backslash and bytes that are not valid UTF-8 become
 * \xNN (backslash as \\), so a hostile string can neither forge a new line or field
 * nor drive a terminal. Returns NULL only on allocation failure.
 */
char *text_escape(const char *s, size_t n);

/* Strict decimal parsers: no sign, no spaces, no trailing bytes, no overflow.
 * Return 0, or -EINVAL / -ERANGE. */
int parse_u64(const char *s, uint64_t *ret);
int parse_pid(const char *s, pid_t *ret);
