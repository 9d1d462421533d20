/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Deciding one request: the policy, the requester's PAM account check, the rule's rate limit */
#pragma once

#include <stdbool.h>

#include "connection.h"
#include "policy.h"
#include "target.h"

PolicyRequester requester_of(const Request *req);
PolicyTarget policy_target_of(const Target *t);
void decide(Request *req, const Target *t, bool consume_rate, void (*decided)(Request *req));
