/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * How many requests of each user the agent decides and records: a token
 * bucket per uid (a rate and a burst). What is over is refused without a
 * record of its own and counted, so that one user cannot bury the audit
 * trail under thousands of records a second, and the count is recorded once
 * a second instead. Pure: the caller gives the time.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct RequestBudget RequestBudget;

/* Users with a bucket at once; past this the ones that are full again are forgotten first. */
#define REQUEST_BUDGET_USERS_MAX 4096

RequestBudget *request_budget_new(void);
RequestBudget *request_budget_free(RequestBudget *b);

/**
 * request_budget_take() - may @uid make one more request now?
 * @rate: requests a second a user earns back
 * @burst: the most a user may have saved up
 *
 * Return: true, taking one; false, counting the request as suppressed.
 * When no bucket can be kept for @uid (the table is full of users who are
 * all still over their budget), the answer is false as well, counted for
 * nobody in particular: fail closed, lose no count.
 */
bool request_budget_take(RequestBudget *b, uid_t uid, unsigned rate, unsigned burst, uint64_t now_usec);

/*
 * request_budget_spent() - whether @uid has no request left now, without taking one
 *
 * True only for a user the table keeps a bucket for, with less than one request in it: then
 * request_budget_take() would refuse (and count) the next one. A caller that would otherwise read
 * who a peer is before refusing it asks this first, and refuses at once.
 */
bool request_budget_spent(RequestBudget *b, uid_t uid, unsigned rate, unsigned burst, uint64_t now_usec);

/* Whether some request was suppressed since the last request_budget_flush(). */
bool request_budget_has_suppressed(const RequestBudget *b);

/*
 * Calls @report once for each uid that had requests suppressed, with their
 * number, and forgets them; (uid_t) -1 stands for users the table had no
 * room to tell apart.
 */
void request_budget_flush(RequestBudget *b, void (*report)(uid_t uid, uint64_t suppressed, void *userdata),
                          void *userdata);
