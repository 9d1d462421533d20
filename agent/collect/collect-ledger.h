/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the [[collect]] tables counted against their limits: each table's limit on each process,
 * and each table's limit_total over all of them; a crash table's limit on each unit (or executable)
 * it copied cores of. Pure bookkeeping, no I/O, no clock of its own.
 *
 * A table's limit on a process lives as long as the process: identified by its pid and start time
 * (the runtime's own key), it is kept apart from the watch, which a re-bound socket, a walk that
 * misses it or a reload ends, so that none of them gives the process a fresh limit. The watcher
 * says when a process is gone (collect_ledger_forget_process()). A table's limit_total bounds what
 * all the processes of one owner (the charge its watch is made to, userns.h) take together: a fresh
 * process brings no budget beyond its owner's, and one owner's processes, which cross a table's
 * line whenever their user likes, never spend another owner's.
 *
 * Limits are found by the table's name and the limit itself: a table that keeps both across a
 * reload keeps what it counted; one whose limit changed starts afresh. A limit that holds nothing
 * back any more (its last count has left its window) and that no trigger points at is dropped by
 * collect_ledger_prune(); so is one of a table the policy no longer has. At most
 * COLLECT_LEDGER_LIMITS_MAX limits are kept: past that, a process's limit cannot be made, and its
 * table does not fire on it (collect-trigger.h): fewer artifacts, never more.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/collect/collect-trigger.h"
#include "policy/policy.h"

#define COLLECT_LEDGER_LIMITS_MAX 8192

typedef struct CollectLedger CollectLedger;

CollectLedger *collect_ledger_new(void);
CollectLedger *collect_ledger_free(CollectLedger *l);

/*
 * collect_ledger_process_limit() - @table's limit on the process @pid started at @start_time
 *
 * Made when missing. The caller holds it (CollectLimit.users) until collect_ledger_release().
 * Return: the limit, or NULL (no memory, or COLLECT_LEDGER_LIMITS_MAX kept already).
 */
CollectLimit *collect_ledger_process_limit(CollectLedger *l, pid_t pid, uint64_t start_time,
                                           const PolicyCollect *table);
/* @table's limit on the process, when the ledger keeps one (not held, not made). Return: the limit, or NULL. */
CollectLimit *collect_ledger_find_process_limit(const CollectLedger *l, pid_t pid, uint64_t start_time,
                                                const PolicyCollect *table);
/* Whose processes a crash table's limit_total counts: everyone's, as one (a crash's uid may be one of its
 * user's subordinate uids, which a process that is gone no longer tells apart). */
#define COLLECT_LEDGER_EVERY_OWNER ((uid_t) -1)

/* @table's limit_total over the processes of @owner (a charge, or COLLECT_LEDGER_EVERY_OWNER), held
 * likewise. Return: the limit, or NULL. */
CollectLimit *collect_ledger_table_limit(CollectLedger *l, const PolicyCollect *table, uid_t owner);
/*
 * collect_ledger_key_limit() - @table's limit on what it counts by name: @key (a crash table's unit, or
 * executable outside one; crash-collect.h), for tables whose processes are gone when they fire
 *
 * Made when missing and held likewise; kept, as the others, while it holds something back and the
 * policy has the table (by name and limit), whatever else is counted: never dropped to make room.
 * Return: the limit, or NULL (no memory, or COLLECT_LEDGER_LIMITS_MAX kept already).
 */
CollectLimit *collect_ledger_key_limit(CollectLedger *l, const PolicyCollect *table, const char *key);
/* The caller no longer points at @limit (NULL: nothing). */
void collect_ledger_release(CollectLedger *l, CollectLimit *limit);

/* The process @pid started at @start_time has exited: its limits go (those still held stay until released). */
void collect_ledger_forget_process(CollectLedger *l, pid_t pid, uint64_t start_time);

/*
 * collect_ledger_prune() - drops what can no longer hold anything back
 *
 * Limits nobody holds whose table (by name and limit) @policy no longer has, or that hold
 * nothing back at @now_usec (collect_limit_holds()).
 */
void collect_ledger_prune(CollectLedger *l, const Policy *policy, uint64_t now_usec);

/* Calls @visit once for each process some limit is kept for. */
void collect_ledger_visit_processes(const CollectLedger *l, void (*visit)(pid_t pid, uint64_t start_time,
                                                                         void *userdata),
                                    void *userdata);
/* How many limits are kept (for tests and status). */
unsigned collect_ledger_size(const CollectLedger *l);
