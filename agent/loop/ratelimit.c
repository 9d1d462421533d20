/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The rate limits of policy rules (ratelimit.h): the times of the last allowed requests,
 * per requester and rule; decision.c asks it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "agent/loop/ratelimit.h"

/* Requesters are bounded by the users of the host; past this, fail closed. */
#define RATE_LIMITER_BUCKETS_MAX 65536

typedef struct Bucket Bucket;
struct Bucket {
        Bucket *next;
        char *rule;
        uid_t uid;
        uint64_t *stamps; /* ring of the last allowed requests, oldest at head */
        unsigned capacity, n, head;
};

struct RateLimiter {
        Bucket *buckets;
        unsigned n_buckets;
};

RateLimiter *rate_limiter_new(void) {
        return calloc(1, sizeof(RateLimiter));
}

RateLimiter *rate_limiter_free(RateLimiter *rl) {
        if (!rl)
                return NULL;
        while (rl->buckets) {
                Bucket *b = rl->buckets;
                rl->buckets = b->next;
                free(b->rule);
                free(b->stamps);
                free(b);
        }
        free(rl);
        return NULL;
}

/* A rule's count may change with a reload: the bucket follows, keeping the newest stamps. */
static int bucket_resize(Bucket *b, unsigned capacity) {
        uint64_t *stamps = calloc(capacity, sizeof(uint64_t));
        unsigned keep = b->n < capacity ? b->n : capacity;

        if (!stamps)
                return -ENOMEM;
        for (unsigned i = 0; i < keep; i++)
                stamps[i] = b->stamps[(b->head + b->n - keep + i) % b->capacity];
        free(b->stamps);
        b->stamps = stamps;
        b->capacity = capacity;
        b->n = keep;
        b->head = 0;
        return 0;
}

static Bucket *bucket_get(RateLimiter *rl, const char *rule, uid_t uid, unsigned capacity) {
        Bucket *b;

        for (b = rl->buckets; b; b = b->next)
                if (b->uid == uid && strcmp(b->rule, rule) == 0)
                        break;
        if (!b) {
                if (rl->n_buckets >= RATE_LIMITER_BUCKETS_MAX)
                        return NULL;
                b = calloc(1, sizeof(*b));
                if (!b)
                        return NULL;
                b->rule = strdup(rule);
                b->uid = uid;
                if (!b->rule) {
                        free(b);
                        return NULL;
                }
                b->next = rl->buckets;
                rl->buckets = b;
                rl->n_buckets++;
        }
        if (b->capacity != capacity && bucket_resize(b, capacity) < 0)
                return NULL;
        return b;
}

/**
 * rate_limiter_check() - may @uid make one more request under @rule now?
 * @consume: record the request if it is allowed (false: only ask, as explain does)
 *
 * Return: 0; RATE_LIMIT_E_EXCEEDED with the time until the oldest request
 * leaves the window; -ENOMEM (callers deny: a limit that cannot be kept is
 * not lifted).
 */
int rate_limiter_check(RateLimiter *rl, const char *rule, uid_t uid, const PolicyRateLimit *limit,
                       uint64_t now_usec, bool consume, uint64_t *ret_wait_usec) {
        Bucket *b = bucket_get(rl, rule, uid, limit->count);

        if (!b)
                return -ENOMEM;
        while (b->n > 0 && b->stamps[b->head] + limit->period_usec <= now_usec) {
                b->head = (b->head + 1) % b->capacity;
                b->n--;
        }
        if (b->n >= limit->count) {
                *ret_wait_usec = b->stamps[b->head] + limit->period_usec - now_usec;
                return RATE_LIMIT_E_EXCEEDED;
        }
        if (consume) {
                b->stamps[(b->head + b->n) % b->capacity] = now_usec;
                b->n++;
        }
        return 0;
}
