/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The trace action of a [[collect]] table (then.trace_profile, then.duration): a nettrace of the
 * process into dump_dir, as [[on_start]] traces are written (on-start.h).
 *
 * The agent connects to the process's runtime and starts the profile's session (recorder.h, as an
 * [[on_start]] trace's); a worker moves the stream into an unnamed file of dump_dir
 * (jobs_record_trace()), under max_use and keep_free, and at
 * most max_trace_size; when then.duration is over the agent sends StopTracing. What arrived is then
 * root's, readable by exactly the table's readers, labelled like a dump (dsctl dumps lists it for
 * its readers, type trace) and named trace.NAME.PID.collect-TABLE.TIME.nettrace. The file gets a
 * dump record (the table as its rule) and the table a collect record of the result ("collected",
 * with the path, or "failed", with why). At most COLLECT_TRACES_MAX run at once, host-wide, and one of
 * the processes of each owner at a time (the uid its work is charged to, userns.h): each holds a
 * worker for its duration, charged to that owner, so that one user's processes never hold them all.
 *
 * then.stacks runs the same way, with the session dsctl stacks asks for (monitor_stacks_config(),
 * for MONITOR_STACKS_SAMPLE_USEC, then the rundown): its nettrace, never named, becomes in a worker
 * the text dsctl stacks prints (jobs_stacks_text(), eventpipe/monitor-view.h), which is published
 * as stacks.NAME.PID.collect-TABLE.TIME.txt (type stacks).
 *
 * then.counters likewise, with the session dsctl counters asks for (eventpipe_counters_config() of
 * the table's providers, every second, a fresh SessionId) for then.duration: its nettrace becomes in
 * a worker the CSV dsctl counters --format csv prints (jobs_counters_csv(), eventpipe/counter-rows.h),
 * published as counters.NAME.PID.collect-TABLE.TIME.csv (type counters). Both count among the
 * COLLECT_TRACES_MAX.
 * then.gcdump runs the same way too, with the session dsctl gcdump asks for (monitor_gcdump_config(),
 * for dsctl gcdump's 30 s window at most): a worker reads its stream and makes of it the .gcdump
 * dsctl gcdump -o writes (jobs_record_gcdump(), eventpipe/gcdump-heap.h), never storing the nettrace;
 * it tells the agent when the dump's GC has ended, and the agent stops the session then, as dsctl
 * does, so that the rundown names the types' modules. The file is published as
 * gcdump.NAME.PID.collect-TABLE.TIME.gcdump (type gcdump).
 *
 * then.exceptions likewise, with the session dsctl exceptions asks for (monitor_exceptions_config(): the
 * runtime's exception events with their stacks, and the rundown) for then.duration: a worker turns its
 * nettrace into the text dsctl exceptions prints (jobs_exceptions_text()), with the exception that fired
 * the table first: the watch saw it, with its stack, before this session began, and the session's
 * rundown names its frames, so that the throw site is in the file. Published as
 * exceptions.NAME.PID.collect-TABLE.TIME.txt (type exceptions).
 */
#pragma once

#include <sys/types.h>

#include "eventpipe/monitor-view.h"
#include "policy/policy.h"

typedef struct Broker Broker;
typedef struct Target Target;
typedef struct CollectTraces CollectTraces;

#define COLLECT_TRACES_MAX 2

CollectTraces *collect_traces_new(Broker *b);
/* At the agent's exit: the traces still running are cut; their files, never named, go with them. */
CollectTraces *collect_traces_free(CollectTraces *s);

/**
 * collect_trace_start() - trace @target for @table of @policy, which just fired on it
 *
 * Takes references to @policy and @target; charged to @owner, the process's owner. @thrown (may be NULL):
 * the exception that fired the table, shown by then.exceptions (copied). The result is recorded, now or
 * when the trace ends.
 *
 * Return: 0 when the trace starts (its end is recorded later); else a positive reason was written
 * into @why (COLLECT_TRACES_MAX run already, or one of this owner's processes', the process has as
 * many sessions as max_sessions_per_target allows or the owner as max_sessions_per_user allows,
 * dump_dir cannot be used, the runtime cannot be reached) and nothing runs.
 *
 * The session is one of the process's under max_sessions_per_target, as a client's and the table's
 * watch are, and one of the owner's under max_sessions_per_user, as the owner's own are
 * (admission.h); its seat is free again when its stream ends, or when the trace ends otherwise
 * (failure, the agent's exit).
 */
int collect_trace_start(CollectTraces *s, Policy *policy, const PolicyCollect *table, Target *target, uid_t owner,
                        const MonitorThrown *thrown, char *why, size_t why_size);
