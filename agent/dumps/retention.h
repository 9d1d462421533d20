/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Retention of dump_dir: the agent removes what it stored (dumps, traces, stacks, counters CSVs,
 * heap dumps, [[collect]] and [[on_start]] artifacts) by the policy's rules (retention-plan.h),
 * oldest first, each removal recorded before it is made (retention-pass.h).
 *
 * Where: the loop only schedules and records. Each pass is a worker's job (jobs_retain()): listing
 * dump_dir, reading every file's labels and unlinking waits on the disk (a large file's blocks are
 * freed at its unlink, a cold directory is read from disk), and a directory of many files would
 * hold the loop for as long; a worker blocks only itself, and a pass removes at most
 * RETENTION_PASS_REMOVALS_MAX files (another pass follows at once when more are due). One pass
 * runs at a time, so no two removals race.
 *
 * When: at start, every RETENTION_PERIOD_USEC, after a reload, before every dump is taken
 * (retention_ask() with no room: dump-take.c waits for it), and when a user's dump would break
 * max_use or keep_free: then the pass also removes, oldest first, the artifacts of tables that
 * yield to dumps, until the room asked for is there (retention_ask() with room).
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

typedef struct Broker Broker;
typedef struct Retention Retention;
typedef struct RetentionWaiter RetentionWaiter;

#define RETENTION_PERIOD_USEC (60 * 1000000ULL)

int retention_new(Broker *b, Retention **ret);
Retention *retention_free(Retention *r);

/* The policy changed: a pass soon, under it (after the one running, if one is: that one read the policy before). */
void retention_policy_changed(Retention *r);

typedef struct RetentionAsk {
        uint64_t room;          /* bytes a user's dump needs written beyond what the guards allow; 0: none */
        uint64_t request_id;    /* that dump's request, and its requester, for the records */
        uid_t requester;
} RetentionAsk;

/* @r: 0 when the pass ran (@removed bytes removed; @room_left of the room still refused), else why not. */
typedef void (*RetentionDone)(void *userdata, int r, uint64_t removed, uint64_t room_left);

/**
 * retention_ask() - have a pass run, and be told when it has
 *
 * A pass that runs now serves an ask without room; one with room waits for the next pass, which
 * starts as soon as the one running ends. @done never runs from inside this call.
 *
 * Return: 0 with *@ret (retention_waiter_cancel() it to be told nothing), or -ENOMEM.
 */
int retention_ask(Retention *r, const RetentionAsk *ask, RetentionDone done, void *userdata, RetentionWaiter **ret);

/* No longer wanted: @done will not be called. Return: NULL. */
RetentionWaiter *retention_waiter_cancel(RetentionWaiter *w);
