/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Trace, counters, stacks, exceptions and logs sessions: start an EventPipe session in the target's
 * runtime for a client, relay its nettrace stream into a pipe the client
 * holds, and always stop it in the runtime. Under a rule with egress, dsctl's trace and gcdump
 * also leave a copy in dump_dir for the rule's store (session-copy.h, docs/egress.md).
 */
#pragma once

#include "agent/loop/connection.h"
#include "common/ipc-request.h"
#include "agent/targets/target.h"
#include "common/wire.h"

void session_start_trace(Request *req, const WireMessage *m);
void session_start_counters(Request *req, const WireMessage *m);
/* stacks, exceptions, logs: the agent chooses the providers (monitor-config.h); dsctl reads the stream */
void session_start_stacks(Request *req, const WireMessage *m);
void session_start_gcdump(Request *req, const WireMessage *m);
void session_start_exceptions(Request *req, const WireMessage *m);
void session_start_logs(Request *req, const WireMessage *m);
/* A tool's CollectTracing through dsctl port; takes @ipc's providers. */
void session_start_proxy(Request *req, const WireMessage *m, IpcRequest *ipc);
