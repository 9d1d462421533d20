/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Rate limits of policy rules: at most N requests per requester in any window of the period */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"

enum {
        _RATE_LIMIT_E_SUCCESS,
        RATE_LIMIT_E_EXCEEDED,
};

typedef struct RateLimiter RateLimiter;

RateLimiter *rate_limiter_new(void);
RateLimiter *rate_limiter_free(RateLimiter *rl);
int rate_limiter_check(RateLimiter *rl, const char *rule, uid_t uid, const PolicyRateLimit *limit,
                       uint64_t now_usec, bool consume, uint64_t *ret_wait_usec);
