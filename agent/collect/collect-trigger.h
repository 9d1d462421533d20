/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The trigger of one [[collect]] table on one process: pure, no I/O, no clock of its own.
 *
 * A watcher (one EventPipe session per process, for all the tables that cover it) hands each
 * counter sample and each exception it decodes to the trigger of every table; the trigger says
 * when the table fires, and whether its limits let the action run: the table's limit on the
 * process and its limit_total over all processes (CollectLimit, which the watcher's ledger keeps
 * for as long as the process lives, whatever becomes of the watch).
 *
 * Times are the agent's (CLOCK_MONOTONIC when the event arrived), never the runtime's: the runtime
 * writes its timestamps, and a process must not make a condition seem to have held longer than it
 * did. A sample that carries no value (an instrument with nothing to report, a histogram, an
 * instrument's description) leaves the state as it was.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "eventpipe/nettrace.h"
#include "policy/policy.h"

typedef enum CollectVerdict {
        COLLECT_QUIET,   /* nothing to do */
        COLLECT_FIRE,    /* the condition is met and the limits let the action run: counted against them */
        COLLECT_LIMITED, /* the condition is met, but a limit has been reached */
} CollectVerdict;

/* A ring of times: the last @capacity at most, oldest at @head; grown as it fills. */
typedef struct CollectStamps {
        uint64_t *usec;
        unsigned capacity, allocated, n, head;
} CollectStamps;

/*
 * How a table's action last ended, in the words of its collect record ("collected" or "failed"), for
 * dsctl collect. A firing whose action did not begin counts as failed, with the reason its fired record says.
 */
typedef struct CollectResult {
        bool failed;                /* else collected */
        char *text;                 /* collected: the artifact's path; failed: why; NULL: no result yet */
        uint64_t size;              /* collected: its bytes */
        uint64_t usec;              /* when, by CLOCK_MONOTONIC */
        pid_t pid;                  /* of the process it was about */
} CollectResult;

/* Replaces *@r. Return: 0, or -ENOMEM (*@r is then empty: no result rather than a wrong one). */
int collect_result_set(CollectResult *r, bool failed, const char *text, uint64_t size, uint64_t usec, pid_t pid);
void collect_result_done(CollectResult *r);

/*
 * What a table counted against one of its limits: on one process (its limit), or over all of them
 * (its limit_total). Kept apart from the trigger, by the ledger (collect-ledger.h), so that the
 * watch ending (a re-bind, a walk that misses the socket, a reload) gives no fresh limit.
 */
typedef struct CollectLimit {
        PolicyRateLimit rate;       /* N in any window of the period */
        CollectStamps fired;        /* the last rate.count times it let the action run */
        uint64_t n_fired, n_limited;
        uint64_t last_fired_usec;   /* when it last let the action run; with n_fired > 0 */
        CollectResult last_result;  /* a process's limit: how the action it last let run ended (dsctl collect) */
        unsigned users;             /* the ledger's: triggers that point at it */
} CollectLimit;

void collect_limit_init(CollectLimit *l, const PolicyRateLimit *rate);
void collect_limit_done(CollectLimit *l);
/* Whether @l holds anything back at @now or later: a count still within its window. */
bool collect_limit_holds(const CollectLimit *l, uint64_t now_usec);
/* Whether @l would count one more artifact at @now_usec (collect_limit_take() would), counting nothing. */
bool collect_limit_has_room(const CollectLimit *l, uint64_t now_usec);
/*
 * collect_limit_take() - one artifact at @now_usec, when @l has room for it: counted as fired
 * Return: true when counted; false when its N are taken within the window, or no memory (counted
 * as limited: fewer artifacts, never more).
 */
bool collect_limit_take(CollectLimit *l, uint64_t now_usec);

typedef struct CollectTrigger {
        const PolicyCollect *table; /* borrowed: the policy in force outlives it */
        /* borrowed from the ledger: the table's limit on this process, and its limit_total; NULL when the
         * ledger had no room for it, and then the table never fires (fewer artifacts, never more) */
        CollectLimit *process_limit, *table_limit;
        bool beyond;                /* counter: the last sample was beyond the line ... */
        uint64_t beyond_since_usec; /* ... since the first of a run of such samples */
        CollectStamps seen;         /* exception: the last exception_count matches */
} CollectTrigger;

/* What @table watches, for records: "Provider:name" of its counter, or its exception type. */
void collect_table_what(const PolicyCollect *table, char *buf, size_t size);

/* For @table, on a process just found, counting against @process_limit and @table_limit (may be NULL). */
void collect_trigger_init(CollectTrigger *t, const PolicyCollect *table, CollectLimit *process_limit,
                          CollectLimit *table_limit);
void collect_trigger_done(CollectTrigger *t);

/**
 * collect_trigger_counter() - a counter sample of the process, arrived at @now_usec
 *
 * A sample of another instrument, or without the tags the table names, is QUIET and changes
 * nothing. One of the table's: beyond the line (strictly above, below, or between the two) starts a run, or
 * continues it; the table fires when a run has lasted when.for (at once when it is 0), and a run
 * that fired starts over, so that a condition that holds fires again only a whole when.for later.
 * A sample back within the line ends the run. The value compared is the mean of an EventCounter,
 * the increment over the interval of an incrementing one or a Meter counter, a gauge's or an
 * up-down counter's value.
 *
 * The condition met, the action may run when neither the process's limit nor the table's
 * limit_total has counted its N within its window; it is then counted in both. Otherwise it is
 * counted as held back in the process's (CollectLimit.n_limited), and in the table's when that is
 * the limit that held it.
 *
 * Return: COLLECT_FIRE with the sample's value in *@ret_value, COLLECT_LIMITED (likewise), or
 * COLLECT_QUIET.
 */
CollectVerdict collect_trigger_counter(CollectTrigger *t, const NettraceCounter *c, uint64_t now_usec,
                                       double *ret_value);

/**
 * collect_trigger_exception() - an exception of @type_name thrown in the process, seen at @now_usec
 *
 * The table fires when when.count exceptions of its type have been seen within when.within (each
 * at once when when.count is 1); they are then forgotten, so the next firing needs as many more.
 * The limits as collect_trigger_counter()'s.
 *
 * Return: COLLECT_FIRE, COLLECT_LIMITED or COLLECT_QUIET.
 */
CollectVerdict collect_trigger_exception(CollectTrigger *t, const char *type_name, uint64_t now_usec);

