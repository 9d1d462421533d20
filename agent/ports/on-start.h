/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Collection from a runtime's first instruction: the policy's [[on_start]]
 * (dotnet-monitor's Startup trigger, under policy).
 *
 * A runtime that connects in on a port (ports.h) does so before it runs its
 * entry assembly. When the first [[on_start]] whose targets cover it (judged
 * on the process the worker pinned, as a rule's targets are) names it, the
 * agent starts that EventPipe session over the port, and only once the
 * runtime has answered resumes it: no managed code of the app runs before
 * the session. (Without `suspend` in DOTNET_DiagnosticPorts the runtime does
 * not wait, and the trace starts when it can.)
 *
 * The stream goes to an unnamed file of dump_dir, written by a worker
 * (recorder.h, as a [[collect]] table's trace), so disk I/O never runs in the loop. It ends when
 * the rule's duration is over (the agent sends StopTracing over the port),
 * at its max_size, or with the process; what arrived is then labelled, given
 * exactly the rule's readers in its ACL, and named in dump_dir, where
 * `dsctl dumps` lists it. Every step is recorded: the session's start and
 * end (as any trace), the file (as any dump), and refusals as port records.
 *
 * At most STARTUP_TRACES_MAX run at once, host-wide, and one of each
 * user's at a time: each holds a worker for its duration, one of its
 * owner's (the runtime's charged uid, userns.h). The session is also one of
 * the process's under max_sessions_per_target and one of its owner's under
 * max_sessions_per_user (admission.h), as the owner's own sessions are,
 * until it ends: the work is charged to the runtime's owner, never to root
 * or anyone else. They are counted
 * from the moment a trace is decided, not from the runtime's answer, which
 * a runtime can delay. A runtime that arrives while they run (or whose
 * sessions are all taken) is left to its
 * port untraced, with a record saying so: told suspended, resumed by a user
 * or after suspend_timeout. A process is traced once: registered again (a
 * second port, another advertise, an exec), it is resumed through that
 * registration too, untraced, with a record.
 */
#pragma once

#include <stdint.h>

typedef struct Broker Broker;
typedef struct PortRuntime PortRuntime;
typedef struct StartupTraces StartupTraces;

#define STARTUP_TRACES_MAX 2

int startup_traces_new(Broker *b, StartupTraces **ret);
/* At the agent's exit: the traces still running are cut; their files, never named, go with them. */
StartupTraces *startup_traces_free(StartupTraces *s);

/**
 * startup_trace_begin() - trace @rt from its first instruction, if an [[on_start]] covers it
 *
 * For a runtime just verified on its port and not yet running its entry
 * assembly. The agent pins the process, matches it against the policy in
 * force, starts the session and resumes the runtime, each step as the
 * runtime's connections come; then port_runtime_startup_done() tells the
 * port whether the runtime was resumed. The trace refers to @rt by its id
 * only, so @rt may go at any time.
 *
 * Return: 0 (port_runtime_startup_done() follows, unless @rt goes first);
 * 1 when the policy has no [[on_start]]; or a negative errno.
 */
int startup_trace_begin(StartupTraces *s, PortRuntime *rt);
