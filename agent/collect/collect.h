/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The watcher of the policy's [[collect]] tables (docs/collect.md): finds the processes they
 * cover and watches each with one EventPipe session for all the tables that cover it.
 *
 * Coverage is decided before any capacity is spent. Every COLLECT_WALK_USEC, while the policy in
 * force has tables, a worker walks /proc for candidates (jobs_walk_candidates(), the walk ps uses),
 * of the tables' targets.users when every table names some, else of anybody. The facts of the
 * candidates that can be read without their memory (owner, unit, cgroup, container:
 * jobs_process_facts()) are read in batches of JOBS_FACTS_MAX, a job at a time, the watcher's own;
 * a candidate no table can cover by them costs nothing more, and its facts are read again after
 * COLLECT_RETRY_USEC (its unit or cgroup may change). A candidate a table may cover waits in its
 * owner's lane (the uid its work is charged to, userns.h): the lanes are served in turn, at most
 * COLLECT_OPENS_PER_OWNER of an owner's processes opened at once and COLLECT_OPENS_MAX in all, and
 * the COLLECT_WATCHES_MAX watch slots are shared evenly between the owners who want them (a
 * newcomer takes one from the owner who holds the most, when that owner holds two more), so that no
 * owner's crowd delays another owner's processes. A watch begins by pinning the process and finding
 * its socket (jobs_open_runtime(), charged to the owner); the tables whose targets cover the pinned
 * process (judged as a rule's targets are: its name too) give its triggers (collect-trigger.h),
 * whose limits the ledger keeps for as long as the process lives (collect-ledger.h). One that a
 * table's name only seemed to cover is judged again when its facts change, or after
 * COLLECT_NAME_RECHECK_USEC.
 *
 * The session asks for the union of the tables' counter providers, every second, and the runtime's
 * exception events (with their stacks) if an exception table covers the process; its stream is read in the loop
 * without waiting, at most COLLECT_READ_MAX bytes a wake-up and COLLECT_BYTES_PER_SEC a second (a
 * runtime that sends more has its session cut, and is watched again only after
 * COLLECT_RETRY_USEC), and parsed by the fuzzed nettrace parser. Each counter sample and each
 * exception (monitor_exception_extract(), as dsctl exceptions reads them) goes to every trigger of
 * the process, timed by the loop's clock.
 *
 * A table that fires is recorded (AuditCollectEvent "fired": the table, the process, the value or
 * the exception type seen), and its action runs: then.trace_profile, then.stacks, then.counters,
 * then.gcdump and then.exceptions through collect-trace.h, then.dump through collect-dump.h. An exception
 * table whose action is then.exceptions has its watch's stream parsed with stacks (at most
 * COLLECT_STACK_FRAMES_MAX kept), and the exception that fired it goes to the action with its stack. A process the walk no
 * longer lists (it exited, or closed its socket) loses its watch; one whose runtime ends the
 * stream, cannot be reached or has its sessions all taken is watched again after
 * COLLECT_RETRY_USEC. A reload drops every watch: the next walk, at once, judges every process under
 * the new tables; actions running go on under the policy they started with.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "agent/audit/audit.h"
#include "agent/collect/collect-trigger.h"
#include "policy/policy.h"
#include "common/text.h"

typedef struct Broker Broker;
typedef struct Collector Collector;
typedef struct Target Target;

/*
 * Whom the watcher's own jobs (its walks, the batches of facts) are charged to in the worker pool: a uid
 * no user has, apart from every other charge the agent makes (userns.h's USERNS_CHARGE_UNKNOWN among
 * them), so that no peer shares its queue. Everything done for one process (its watch's jobs and
 * session, its tables' actions) is charged to the process's owner instead.
 */
#define COLLECT_WATCHER_CHARGE ((uid_t)-4)

#define COLLECT_WALK_USEC (2 * 1000000ULL)
#define COLLECT_RETRY_USEC (30 * 1000000ULL)
#define COLLECT_NAME_RECHECK_USEC (300 * 1000000ULL)
#define COLLECT_WATCHES_MAX 512
/* What the watches hold at most: each its process's pidfd, /proc and socket fds and its stream, and the
 * StopTracing of one that ended; budgeted in the agent's open files limit (broker.c) */
#define COLLECT_FDS_MAX (5 * COLLECT_WATCHES_MAX)
#define COLLECT_OPENS_MAX 4
#define COLLECT_OPENS_PER_OWNER 1
/* Frames (and stacks) a watch's parser keeps between two of the runtime's sequence points, when a table takes the
 * exception that fires it with its stack (then.exceptions): past them stacks are dropped, and such an exception comes
 * without its frames. Bounds what a runtime makes the agent hold per watch (16384 frames: 128 KiB, and as many
 * stacks' entries), COLLECT_WATCHES_MAX times at most. */
#define COLLECT_STACK_FRAMES_MAX 16384
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
 * @action: "dump", "stacks", "trace", "counters" or "gcdump"; @event: "collected" (@result names the file: @path,
 * of @size bytes) or "failed" (@result says why; @path NULL). For the actions (collect-trace.h, collect-dump.h),
 * whose end comes later; @room is the room they held for their records before they began (audit_reserve()), or
 * NULL. dsctl collect shows it as the table's last result, and the process's (collector_note_result()).
 */
void collect_record_result(Broker *b, const PolicyCollect *table, const Target *target, const char *action,
                           const char *event, const char *result, const char *path, uint64_t size,
                           AuditReservation *room);

/*
 * collector_note_result() - @table's action on the process @pid started at @start_time ended: collected @text
 * (the artifact's path) of @size bytes, or @failed for the reason @text
 *
 * Kept for dsctl collect, as the table's last result (for as long as the agent runs and the policy in force has a
 * table of that name) and the process's (with what the ledger keeps of the table on it: for as long as it lives,
 * while the table's limit holds or a watch points at it). @c may be NULL (nothing is kept).
 */
void collector_note_result(Collector *c, const PolicyCollect *table, pid_t pid, uint64_t start_time, bool failed,
                           const char *text, uint64_t size);
/* How @table's action last ended, on any process; NULL before the first result. */
const CollectResult *collector_last_result(const Collector *c, const char *table);


/*
 * collect_record_removed() - @table's @action on @target took an artifact whose record could not be written
 * (@r, a negative errno), and it was removed
 *
 * Told on stderr, in a collect record "failed" if that one can be written (in @room, what the action held, or
 * NULL), and counted for dsctl collect (collector_removed()), where the table's readers see it.
 */
void collect_record_removed(Broker *b, const PolicyCollect *table, const Target *target, const char *action, int r,
                            AuditReservation *room);

/* How many artifacts of the table named @table were removed since the agent started, for want of their record;
 * the last one's process in *@ret_pid. */
unsigned collector_removed(const Collector *c, const char *table, pid_t *ret_pid);

/* A watched process, as dsctl collect lists it under one of its tables. */
typedef struct CollectWatchView {
        const Target *target;       /* pinned: its pid, user, unit and name */
        bool fired;                 /* the table fired on it (and its action ran) since it was watched */
        uint64_t last_fired_usec;   /* then: when, by CLOCK_MONOTONIC */
        const CollectResult *last_result; /* how its action last ended on it; NULL: no result yet */
} CollectWatchView;

/* A fresh SessionId for a counters session (the Metrics provider tells sessions apart by it). Return: 0 or -EIO. */
int collect_session_id(char ret[TEXT_HEX_ID_SIZE]);

/* The policy whose tables are watched; NULL before the first. */
const Policy *collector_policy(const Collector *c);
/* Calls @visit for each process whose runtime is watched now for @table (of collector_policy()). */
void collector_visit(const Collector *c, const PolicyCollect *table,
                     void (*visit)(const CollectWatchView *v, void *userdata), void *userdata);
