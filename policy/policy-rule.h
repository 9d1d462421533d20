/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internals shared by the policy engine and the policy compiler */
#pragma once

#include "policy/policy.h"

#define POLICY_DEFAULT_DUMP_DIR "/var/lib/dsagent/dumps"
#define POLICY_MAX_CONCURRENT_DUMPS_MAX 64
/* a rate limit remembers one timestamp per allowed request in its window */
#define POLICY_RATE_COUNT_MAX 10000

void policy_string_list_done(PolicyStringList *l);
