/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The diagnostic-port proxy's agent side: one IPC request of a stock tool,
 * carried by `dsctl port` as a WIRE_REQUEST_IPC, decoded with the agent's own
 * codec (common/ipc-request.h), decided as the policy command it maps to,
 * encoded again for the runtime, and answered with bytes the tool reads as
 * the runtime's own (docs/proxy.md).
 */
#pragma once

#include "agent/loop/connection.h"
#include "common/wire.h"

/*
 * proxy_start() - serve one proxied IPC request
 * @m: the request: the target (PID or UNIT) and IPC_MESSAGE
 *
 * CollectTracing becomes a trace session (session_start_proxy()), a
 * GenerateCoreDump a dump taken through the agent's own staging whose fd the
 * reply carries (dump_start_as()); every other command is one call to the
 * runtime, relayed as WIRE_REPLY_IPC frames. What cannot be decoded, or is
 * denied, ends in an ERROR frame whose HRESULT is the one the tool is to be
 * answered with. StopTracing is dsctl port's to answer: it ends the session
 * it started over that session's own connection.
 */
void proxy_start(Request *req, const WireMessage *m);
