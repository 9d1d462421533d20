/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Deciding one request: the policy, the requester's PAM account check, the rule's rate limit */
#pragma once

#include <stdbool.h>

#include "agent/loop/connection.h"
#include "policy/policy.h"
#include "agent/targets/target.h"

PolicyRequester requester_of(const Request *req);
PolicyTarget policy_target_of(const Target *t);
void decide(Request *req, const Target *t, bool consume_rate, void (*decided)(Request *req));
/* As decide(), for the crash of @crashed (policy_crash_check()): the policy, PAM, the rule's rate limit. */
void decide_crash(Request *req, const PolicyTarget *crashed, bool consume_rate, void (*decided)(Request *req));
