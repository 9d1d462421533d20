/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The dump action of a [[collect]] table (then.dump = "mini"|"heap"|"triage"|"full"): a core of
 * the process into dump_dir, taken as dsctl dump takes it (dump-take.h: the same IPC command, the
 * same staging, stream, pace and checks), with nobody's request behind it.
 *
 * Charged to the process's owner (the uid its work is charged to, userns.h) and counted as that
 * owner's dump of its own process is (admission.h): one at a time per process, within the owner's
 * max_dumps_per_user and the users' own pool, max_concurrent_own_dumps, never the host's
 * max_concurrent_dumps that root's dumps and the rules' of other users' processes need (the owner
 * controls that runtime, which may write its dump as slowly as it likes); its jobs are the owner's
 * too, under the same pace deadlines (dump-take.h). Its bytes count against max_use and keep_free. A
 * whole core is root's, readable by exactly the table's readers (nobody but root when the
 * process changed credentials, as for dsctl dump), labelled as a dump of the process that nobody
 * asked for (dsctl dumps lists it for its readers) and named dump.NAME.PID.collect-TABLE.TIME.
 * The file gets a dump record (the table as its rule), and the table a collect record of the
 * result ("collected", with the path, or "failed", with why and the errno when the agent failed).
 *
 * No startup probe: the trigger fired on the runtime's own events, so the runtime runs managed
 * code and is not suspended at startup.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "policy/policy.h"

typedef struct Broker Broker;
typedef struct Target Target;
typedef struct CollectDumps CollectDumps;

CollectDumps *collect_dumps_new(Broker *b);
/* At the agent's exit: the dumps still being taken are cut; their files, never named, go with them. */
CollectDumps *collect_dumps_free(CollectDumps *s);

/**
 * collect_dump_start() - dump @target for @table of @policy, which just fired on it
 *
 * Takes references to @policy and @target; charged to @owner, the process's owner. The result is
 * recorded when the dump ends.
 *
 * Return: 0 when the dump starts; else 1 with the reason in @why (a dump of the process runs
 * already, the owner's max_dumps_per_user or max_concurrent_own_dumps run, no worker is free) and
 * nothing runs.
 */
int collect_dump_start(CollectDumps *s, Policy *policy, const PolicyCollect *table, Target *target, uid_t owner,
                       char *why, size_t why_size);
