/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The resolve request (resolve.h): the pid a unit stands for, so that dsctl exec can name it to a
 * tool that takes -p PID; commands.c dispatches to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/runtime/resolve.h"

static void resolve_opened(Request *req) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        char reason[TARGET_UNIT_MAX + 64];
        int r;

        if (!w) {
                request_reply_oom(req);
                return;
        }
        wire_writer_begin(w, WIRE_REPLY_PROCESS);
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)req->target->pid);
        wire_writer_put_string(w, WIRE_TAG_UNIT, req->target->unit);
        r = connection_queue_frame(req->connection, w);
        if (r < 0) {
                request_reply_errno(req, r, "cannot queue the reply");
                return;
        }
        snprintf(reason, sizeof(reason), "named its process to the requester%s%s", req->unit ? ": the one of " : "",
                 req->unit ? req->unit : "");
        request_reply_done(req, NULL, reason);
}

void resolve_start(Request *req, const WireMessage *m) {
        commands_open_target(req, m, resolve_opened);
}
