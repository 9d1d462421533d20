/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The watcher of the policy's [[collect]] tables (docs/collect.md): finds the processes they
 * cover and watches each with one EventPipe session for all the tables that cover it.
 *
 * Every COLLECT_WALK_USEC, while the policy in force has tables, a worker walks /proc for
 * candidates (jobs_walk_candidates(), the walk ps uses), of the tables' targets.users when every
 * table names some, else of anybody; a candidate not watched yet is pinned and
 * its socket found by another job (jobs_open_runtime()), and the tables whose targets cover it
 * (judged on the pinned process, as a rule's targets are) give its triggers (collect-trigger.h).
 * The session asks for the union of their counter providers, every second, and the runtime's
 * exception events if an exception table covers the process; its stream is read in
 * the loop without waiting, at most COLLECT_READ_MAX bytes a wake-up and COLLECT_BYTES_PER_SEC a
 * second (a runtime that sends more has its session cut, and is watched again only after
 * COLLECT_RETRY_USEC), and parsed by the fuzzed nettrace parser. Each counter sample and each
 * exception (monitor_exception_extract(), as dsctl exceptions reads them) goes to every trigger of
 * the process, timed by the loop's clock.
 *
 * A table that fires is recorded (AuditCollectEvent "fired": the table, the process, the value or
 * the exception type seen),
 * and its action runs: then.trace_profile, then.stacks and then.counters through collect-trace.h, then.dump through
 * collect-dump.h. A process that exits, or whose runtime ends the stream, is dropped
 * (and watched again, if it still runs, after COLLECT_RETRY_USEC); one that cannot be opened or
 * reached, or that no table covers (its name, unit or cgroup may change), is judged again after
 * COLLECT_RETRY_USEC. A reload drops every watch: the next walk, at once, watches under the new
 * tables; actions running go on under the policy they started with.
 */
#pragma once

#include <stdint.h>

#include "audit.h"
#include "policy.h"

typedef struct Broker Broker;
typedef struct Collector Collector;
typedef struct Target Target;

#define COLLECT_WALK_USEC (2 * 1000000ULL)
#define COLLECT_RETRY_USEC (30 * 1000000ULL)
#define COLLECT_WATCHES_MAX 1024
#define COLLECT_READ_MAX (64 * 1024)
#define COLLECT_BYTES_PER_SEC (1024 * 1024)

int collector_new(Broker *b, Collector **ret);
/* Every session is closed (the runtime ends it at its next write) and every job cancelled. */
Collector *collector_free(Collector *c);
/* The policy in force changed: drop every watch and walk again now. */
void collector_apply(Collector *c);

/*
 * collect_record_result() - the collect record of how @table's action on @target ended
 *
 * @action: "dump", "stacks", "trace" or "counters"; @event: "collected" (@result names the file) or "failed"
 * (@result says why). For the actions (collect-trace.h, collect-dump.h), whose end comes later; @room is the
 * room they held for their records before they began (audit_reserve()), or NULL.
 */
void collect_record_result(Broker *b, const PolicyCollect *table, const Target *target, const char *action,
                           const char *event, const char *result, AuditReservation *room);

/* A watched process, as dsctl collect lists it under one of its tables. */
typedef struct CollectWatchView {
        const Target *target;       /* pinned: its pid, user, unit and name */
        bool fired;                 /* the table fired on it (and its action ran) since it was watched */
        uint64_t last_fired_usec;   /* then: when, by CLOCK_MONOTONIC */
} CollectWatchView;

/* A fresh SessionId for a counters session (the Metrics provider tells sessions apart by it). Return: 0 or -EIO. */
int collect_session_id(char ret[33]);

/* The policy whose tables are watched; NULL before the first. */
const Policy *collector_policy(const Collector *c);
/* Calls @visit for each process whose runtime is watched now for @table (of collector_policy()). */
void collector_visit(const Collector *c, const PolicyCollect *table,
                     void (*visit)(const CollectWatchView *v, void *userdata), void *userdata);
