/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One request to a .NET runtime and its one reply, driven by sd-event with a deadline */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "common/dotnet-ipc.h"

enum {
        _RUNTIME_CALL_E_SUCCESS,
        RUNTIME_CALL_E_TIMEOUT,   /* no complete reply before the deadline */
        RUNTIME_CALL_E_CLOSED,    /* the runtime closed the connection early */
        RUNTIME_CALL_E_MALFORMED, /* the reply is not a valid server message */
};

typedef struct RuntimeCall RuntimeCall;

/*
 * Called once. @error is 0 with @reply set, a RUNTIME_CALL_E_* code, or a
 * negative errno. @reply points into the call's buffer and lives until the
 * call is freed. The callback may free the call.
 */
typedef void (*RuntimeCallDone)(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata);

int runtime_call_start(sd_event *event, int fd, const uint8_t *request, size_t request_size,
                       uint64_t timeout_usec, RuntimeCallDone done, void *userdata, RuntimeCall **ret);
RuntimeCall *runtime_call_free(RuntimeCall *call);
int runtime_call_take_fd(RuntimeCall *call);
/* What a failed call's @error means, for people: "the runtime did not answer in time", ... */
const char *runtime_call_error_text(int error);

/*
 * Called once, with @error 0 and the @size bytes read, or a RUNTIME_CALL_E_* code, or a
 * negative errno. @block lives until the call is freed. The callback may free the call.
 */
typedef void (*RuntimeCallBlockDone)(RuntimeCall *call, int error, const uint8_t *block, size_t size,
                                     void *userdata);

/*
 * runtime_call_read_block() - after a reply that announces @size more bytes (ProcessEnvironment's
 * block), read exactly those from the same connection, with a deadline of the call's own
 * timeout from now. Only from the call's RuntimeCallDone, for a successful reply.
 *
 * Return: 0, -EINVAL for a @size of 0, or another negative errno (@done is then not called).
 */
int runtime_call_read_block(RuntimeCall *call, size_t size, RuntimeCallBlockDone done, void *userdata);
