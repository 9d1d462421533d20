/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * [[collect]] tables with when.crash (docs/crashes.md): when systemd-coredump has stored the core of a
 * process a table covers, the core is decompressed into dump_dir for the table's readers, at most
 * limit.count times per limit.period for one unit (or, outside a unit, one executable), recorded.
 *
 * Every CRASH_COLLECT_POLL_USEC, while the policy in force has such tables, a worker reads the
 * journal's trusted crashes logged since the last read (the first read: since the watcher began, so
 * an agent that starts does not copy old crashes again), as dsctl crashes reads them; each crash is
 * judged against the tables by the crashed process's facts (crash_entry_policy_target(), as
 * policy_collect_covers() judges a live one's), and each copy is made by a worker (jobs_copy_crash()),
 * counted as a dump is, published as dump_publish_for_table() names a table's files
 * (crash.NAME.PID.collect-TABLE.TIME), with a dump record and the table's collect records ("fired",
 * then "collected" or "failed"). A reload keeps the place in the journal, and the limits (a
 * collect-ledger.h, by table name and limit, as the live tables'); a restart keeps neither (the
 * ledgers live in memory): it copies only crashes logged after it starts. Copies running go on under
 * the policy they started with. Kept apart from the watcher of live processes (agent/collect/), which
 * skips these tables.
 */
#pragma once

#include <stdint.h>

#include "policy/policy.h"

typedef struct Broker Broker;
typedef struct CrashCollector CrashCollector;

#define CRASH_COLLECT_POLL_USEC (5 * 1000000ULL)
/* Whose jobs and admission the copies are: a uid no user has (collect.h's are -3 and -5) */
#define CRASH_COLLECT_OWNER ((uint32_t)-7)
/* The copies the collector remembers (of all tables), and those dsctl collect shows per table */
#define CRASH_COLLECT_SHOWN_KEPT 64
#define CRASH_COLLECT_SHOWN_MAX 16

int crash_collector_new(Broker *b, CrashCollector **ret);
/* Copies running are cut (their files, never named, go with them), and the journal read is cancelled. */
CrashCollector *crash_collector_free(CrashCollector *c);
/* The policy in force changed: its tables decide from the next read on. */
void crash_collector_apply(CrashCollector *c);

/* One core a crash table stored, for dsctl collect. */
typedef struct CrashCollectView {
        uint32_t pid, uid;
        const char *unit;       /* NULL when none */
        const char *name;       /* NULL when unknown */
        uint64_t stored_usec;   /* CLOCK_REALTIME */
} CrashCollectView;

/* Calls @each for the cores @table stored lately, oldest first (at most CRASH_COLLECT_SHOWN_MAX). */
void crash_collector_visit(const CrashCollector *c, const PolicyCollect *table,
                           void (*each)(const CrashCollectView *v, void *userdata), void *userdata);
