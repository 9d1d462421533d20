/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Durations as people write them: "90", "90s", "5m", "1h30m", "2d", "500ms" */
#pragma once

#include <stdint.h>

#define USEC_PER_MSEC 1000ULL
#define USEC_PER_SEC 1000000ULL

/*
 * duration_parse() - the one parser of durations: options of dsagent and dsctl, and the policy
 *
 * Either a bare number, which is seconds ("90"), or one or more number-unit pairs
 * that add up ("90s", "5m", "1h30m", "2d", "1m30s500ms"). The units are ms, s, m, h
 * and d (24 hours), lower case; pairs may come in any order and repeat. Numbers are
 * decimal digits only (leading zeros are decimal too: "05m" is 5 minutes). Nothing
 * else is accepted: no sign, no space, no fraction, no number after the last unit
 * ("1h30" is refused, not read as 1h30s), no unit without a number.
 *
 * Zero is a duration ("0", "0s"); callers that need more than zero, or a limit of
 * their own, check the result. Pure: no I/O, no logging.
 *
 * Return: 0 with the duration in microseconds in *@ret_usec; -EINVAL if @s is not
 * a duration (NULL and "" included); -ERANGE if it is one but exceeds UINT64_MAX
 * microseconds (about 584,000 years). *@ret_usec is set on 0 only.
 */
int duration_parse(const char *s, uint64_t *ret_usec);
