/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Who holds the agent's client connections: for each charge (userns.h), how
 * many, and which of them have sent nothing yet, oldest first. When every
 * connection the agent serves at once is taken, a newcomer is let in by
 * closing the oldest idle connection of the largest holder, so that as long
 * as fewer users than the cap want in, every user gets in:
 *
 * - only a connection that has sent nothing is closed: one that has begun its
 *   request, or waits on a runtime, or streams a session, never is;
 * - only a holder with more connections than the newcomer's user will have
 *   with the new one: the shares move toward equal and never swap, so two
 *   users cannot take turns closing each other's, and a user holding one or
 *   two is never closed for one holding as many;
 * - never root's (charge 0): root has slots of its own past the cap;
 * - among holders as large, the one whose idle connection is the oldest.
 *
 * Pure bookkeeping: the broker says what opens and closes and asks which to
 * close; whether a connection is still idle it is asked back (a connection
 * that stopped being idle never is again).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct Holder Holder;
typedef struct Holders Holders;

/* A connection's place in the book, embedded in it. */
typedef struct HoldNode {
        Holder *holder;                   /* NULL: not in the book (never added, or removed) */
        struct HoldNode *idle_prev, *idle_next;
        bool idle;                        /* in its holder's list of idle connections */
        uint64_t seq;                     /* order of arrival: the lower, the older */
} HoldNode;

Holders *holders_new(void);
Holders *holders_free(Holders *h);

/* Counts @n, a connection that has sent nothing yet, for @charged. Return: 0 or -ENOMEM. */
int holders_add(Holders *h, HoldNode *n, uid_t charged);
/* It is gone, or closed: not counted any more (again: nothing). */
void holders_remove(Holders *h, HoldNode *n);
/* Its request has begun: it is never a connection to close. */
void holders_not_idle(Holders *h, HoldNode *n);
unsigned holders_count(const Holders *h, uid_t charged);

/**
 * holders_victim() - the connection to close so that @charged's newest is served
 * @charged: whom the newcomer is charged to
 * @holding: what @charged holds with the newcomer's connection
 * @still_idle: asked of each idle connection considered; false moves it out of the idle list for good
 *
 * Return: the oldest idle connection of the largest holder but root and
 * @charged that holds more than @holding (see above), or NULL when there is
 * none. It is still counted: the caller removes it as it closes it.
 */
HoldNode *holders_victim(Holders *h, uid_t charged, unsigned holding, bool (*still_idle)(HoldNode *n, void *userdata),
                         void *userdata);
