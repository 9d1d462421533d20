/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Connections held, unanswered, for a while before their refusal is sent. A user who re-opens
 * connections as fast as they are refused keeps the listen backlog full, and everyone else's
 * connections wait behind hers in it, however little each refusal costs the loop once the
 * loop is slow to get the CPU: a refusal that is answered at once frees her to connect again.
 * Held here, a refused connection keeps its client waiting instead, at the cost of one fd and
 * no work of the loop until its time is up; then it is answered (by the owner's @answer) and
 * closed. At most @max at once, oldest first out; a connection that finds it full is the
 * caller's to answer at once.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

/* How long a refused connection is held: its client's next attempt waits this long. */
#define PARK_USEC (1000 * 1000ULL)
/* The most held at once, if the open files limit leaves that many (broker_fit_fd_limit()). */
#define PARK_MAX 2048

typedef struct Park Park;

/**
 * park_new() - a park for at most @max connections (0: none is ever held)
 * @answer: answers and closes one connection, when its time is up or the park is freed
 *
 * Return: 0 or a negative errno.
 */
int park_new(sd_event *event, unsigned max, void (*answer)(int fd, void *userdata), void *userdata, Park **ret);
/* Answers and closes every connection held. */
Park *park_free(Park *p);

/* Holds @fd (the park owns it then) until PARK_USEC from now. Return: false when the park is full. */
bool park_hold(Park *p, int fd);
unsigned park_held(const Park *p);
