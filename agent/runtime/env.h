/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * env: a process's environment, as its runtime answers ProcessEnvironment, one
 * WIRE_REPLY_ENV frame per variable. Values are withheld unless known safe or the
 * verdict reveals them (policy_env_value_hidden(): an allow list of names, env_redact,
 * and names and values that look like secrets).
 * The reading of the block that follows the runtime's reply is shared with the
 * diagnostic-port proxy (agent/runtime/proxy.c), which relays it to a tool.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/audit/audit.h"
#include "agent/loop/connection.h"
#include "common/dotnet-ipc.h"
#include "agent/runtime/runtime-call.h"
#include "common/wire.h"

/* What the block read: the bytes as the runtime sent them, and their variables, decoded strictly. */
typedef void (*EnvBlockRead)(Request *req, const uint8_t *block, size_t size, const DotnetEnvironment *env);

typedef struct EnvReader {
        Request *request;
        size_t max;             /* the most of a block read; a larger one is refused */
        bool for_tool;          /* errors carry the HRESULT a proxied tool is answered with */
        EnvBlockRead done;
} EnvReader;

/*
 * env_read() - the environment that follows ProcessEnvironment's reply
 * @call, @error, @reply: as the call's RuntimeCallDone got them
 *
 * On an OK reply, reads the block it announces through @call (at most @r->max bytes, within
 * the call's timeout), decodes it and calls @r->done. Every failure is answered here.
 */
void env_read(EnvReader *r, RuntimeCall *call, int error, const DotnetIpcResponse *reply);

/* WIRE_REQUEST_ENV: PID or UNIT; decided as the policy command env. */
void env_start(Request *req, const WireMessage *m);
