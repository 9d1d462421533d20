/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * How many requests of each uid the agent decides (request-budget.h): a token bucket per uid, pure;
 * the broker owns it.
 */
#include <stdlib.h>

#include "agent/loop/request-budget.h"

#define USEC_PER_SEC 1000000ULL

typedef struct Bucket {
        uid_t uid;
        bool used;
        uint64_t tokens_usec;   /* tokens in microseconds of earning: a token is USEC_PER_SEC / rate of them */
        uint64_t updated_usec;
        uint64_t suppressed;
} Bucket;

struct RequestBudget {
        Bucket buckets[REQUEST_BUDGET_USERS_MAX];
        unsigned n_suppressing; /* buckets with suppressed > 0 */
        uint64_t untracked;     /* refused because no bucket could be kept for their user */
};

RequestBudget *request_budget_new(void) {
        return calloc(1, sizeof(RequestBudget));
}

RequestBudget *request_budget_free(RequestBudget *b) {
        free(b);
        return NULL;
}

/* Earns back what the time since the last look is worth, up to @burst tokens. */
static void refill(Bucket *k, unsigned rate, unsigned burst, uint64_t now_usec) {
        uint64_t cap = (uint64_t)burst * USEC_PER_SEC, room = k->tokens_usec < cap ? cap - k->tokens_usec : 0;

        if (now_usec > k->updated_usec) {
                uint64_t earned = (now_usec - k->updated_usec) * rate;
                k->tokens_usec = earned >= room ? cap : k->tokens_usec + earned;
        }
        k->updated_usec = now_usec;
}

/* The bucket of @uid, or a new full one; NULL when every slot holds a user still over budget. */
static Bucket *bucket_of(RequestBudget *b, uid_t uid, unsigned rate, unsigned burst, uint64_t now_usec) {
        Bucket *free_slot = NULL, *full = NULL;
        unsigned slot = uid % REQUEST_BUDGET_USERS_MAX;

        for (unsigned i = 0; i < REQUEST_BUDGET_USERS_MAX; i++) {
                Bucket *k = &b->buckets[(slot + i) % REQUEST_BUDGET_USERS_MAX];

                if (k->used && k->uid == uid)
                        return k;
                if (!k->used) {
                        free_slot = free_slot ? free_slot : k;
                        break; /* open addressing without deletion holes: the uid is not further on */
                }
                if (!full && k->suppressed == 0) {
                        refill(k, rate, burst, now_usec);
                        if (k->tokens_usec >= (uint64_t)burst * USEC_PER_SEC)
                                full = k; /* a user back to a full budget is no different from a new one */
                }
        }
        if (!free_slot)
                free_slot = full;
        if (!free_slot)
                return NULL;
        *free_slot = (Bucket){ .uid = uid, .used = true, .tokens_usec = (uint64_t)burst * USEC_PER_SEC,
                               .updated_usec = now_usec };
        return free_slot;
}

/* @uid's bucket, if it has one: never a new one. */
static Bucket *bucket_find(RequestBudget *b, uid_t uid) {
        unsigned slot = uid % REQUEST_BUDGET_USERS_MAX;

        for (unsigned i = 0; i < REQUEST_BUDGET_USERS_MAX; i++) {
                Bucket *k = &b->buckets[(slot + i) % REQUEST_BUDGET_USERS_MAX];
                if (!k->used)
                        return NULL; /* no deletion holes: the uid is not further on */
                if (k->uid == uid)
                        return k;
        }
        return NULL;
}

bool request_budget_spent(RequestBudget *b, uid_t uid, unsigned rate, unsigned burst, uint64_t now_usec) {
        Bucket *k = bucket_find(b, uid);

        if (!k)
                return false; /* a full budget; or no room to keep one, which request_budget_take() tells */
        refill(k, rate, burst, now_usec);
        return k->tokens_usec < USEC_PER_SEC;
}

bool request_budget_take(RequestBudget *b, uid_t uid, unsigned rate, unsigned burst, uint64_t now_usec) {
        Bucket *k = bucket_of(b, uid, rate, burst, now_usec);

        if (!k) {
                b->untracked++;
                return false;
        }
        refill(k, rate, burst, now_usec);
        if (k->tokens_usec >= USEC_PER_SEC) {
                k->tokens_usec -= USEC_PER_SEC;
                return true;
        }
        if (k->suppressed++ == 0)
                b->n_suppressing++;
        return false;
}

bool request_budget_has_suppressed(const RequestBudget *b) {
        return b->n_suppressing > 0 || b->untracked > 0;
}

void request_budget_flush(RequestBudget *b, void (*report)(uid_t uid, uint64_t suppressed, void *userdata),
                          void *userdata) {
        for (unsigned i = 0; i < REQUEST_BUDGET_USERS_MAX && b->n_suppressing > 0; i++) {
                Bucket *k = &b->buckets[i];
                if (!k->used || k->suppressed == 0)
                        continue;
                report(k->uid, k->suppressed, userdata);
                k->suppressed = 0;
                b->n_suppressing--;
        }
        if (b->untracked > 0) {
                report((uid_t)-1, b->untracked, userdata);
                b->untracked = 0;
        }
}
