/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The trigger of one [[collect]] table on one process: pure, no I/O, no clock of its own.
 *
 * A watcher (one EventPipe session per process, for all the tables that cover it) hands each
 * counter sample and each exception it decodes to the trigger of every table; the trigger says
 * when the table fires, and whether its limit lets the action run.
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

#include "nettrace.h"
#include "policy.h"

typedef enum CollectVerdict {
        COLLECT_QUIET,   /* nothing to do */
        COLLECT_FIRE,    /* the condition is met and the limit lets the action run: counted against it */
        COLLECT_LIMITED, /* the condition is met, but the limit has been reached */
} CollectVerdict;

/* A ring of times: the last @capacity at most, oldest at @head; grown as it fills. */
typedef struct CollectStamps {
        uint64_t *usec;
        unsigned capacity, allocated, n, head;
} CollectStamps;

typedef struct CollectTrigger {
        const PolicyCollect *table; /* borrowed: the policy in force outlives it */
        bool beyond;                /* counter: the last sample was beyond the line ... */
        uint64_t beyond_since_usec; /* ... since the first of a run of such samples */
        CollectStamps seen;         /* exception: the last exception_count matches */
        CollectStamps fired;        /* the last limit.count times it fired */
        uint64_t n_fired, n_limited;
        uint64_t last_fired_usec;   /* when it last fired (and its action ran); with n_fired > 0 */
} CollectTrigger;

/* What @table watches, for records: "Provider:name" of its counter, or its exception type. */
void collect_table_what(const PolicyCollect *table, char *buf, size_t size);

/* For @table, on a process just found. */
void collect_trigger_init(CollectTrigger *t, const PolicyCollect *table);
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
 *
 * Return: COLLECT_FIRE, COLLECT_LIMITED or COLLECT_QUIET.
 */
CollectVerdict collect_trigger_exception(CollectTrigger *t, const char *type_name, uint64_t now_usec);

/**
 * collect_trigger_take_limit() - what @from counted against its limit, taken over by @to
 *
 * @from is a trigger of the policy before a reload, @to one of the policy now in force, both about
 * the same process. When they are the same table (by name) with the same limit, @to takes the
 * firings @from counted (and when it last fired), and @from keeps none: a reload must not give a
 * process a fresh limit, or a configuration tool that reloads every few minutes would take an
 * artifact each time. A table whose limit changed starts afresh. Whether the condition held (a
 * run beyond the line, exceptions seen) is not taken: the watch starts over.
 *
 * Return: whether @to took it.
 */
bool collect_trigger_take_limit(CollectTrigger *to, CollectTrigger *from);
