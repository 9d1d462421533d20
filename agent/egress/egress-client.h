/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The loop's half of the egress process (egress-client.c): the agent execs libexec/dsagent-egress at start-up,
 * before its sandbox (egress-check.c's egress_process_spawn()), and hands it uploads, each with the artifact's
 * fd. The loop never waits for it: a request that does not fit in the socket's buffer now is refused at once
 * (-EAGAIN, "busy"), and each answer comes back through the event loop.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "agent/egress/egress-protocol.h"

typedef struct EgressClient EgressClient;

/* The answer to one request; @reply is NULL when the egress process went away before it answered (the agent
 * stops, or the supervisor itself died: nothing starts it again), and its result EGRESS_E_LOST when its server
 * died and the supervisor starts another. */
typedef void (*EgressUploadDone)(const EgressReply *reply, void *userdata);

/* The egress process's server died (@message says how, and when it starts again), before the uploads it had taken
 * are answered EGRESS_E_LOST. */
typedef void (*EgressDied)(const char *message, void *userdata);

/**
 * egress_client_start() - exec @helper (egress_helper_path()) as @uid:@gid (egress_user_lookup()) and watch its
 * socket from @event
 *
 * Return: 0 with the client, or a negative errno (nothing started).
 */
int egress_client_start(sd_event *event, const char *helper, uid_t uid, gid_t gid, EgressClient **ret);

/* Closes the socket (the egress process sees its end and exits, killing its uploads) and answers every upload
 * still waiting with a NULL reply; the process is not waited for. */
EgressClient *egress_client_free(EgressClient *c);

/* The egress process's pid, for tests and messages; 0 once it is gone. */
int egress_client_pid(const EgressClient *c);

/**
 * egress_client_submit() - hand @q (its type set: UPLOAD with @fd, PRESIGN with -1; its id is set here) to the
 * egress process
 *
 * @fd is sent, not taken: the caller closes its own. @done runs from the event loop, never from inside this call,
 * exactly once unless egress_client_cancel() is called first.
 *
 * Return: 0 with the request's id in *@ret_id, -EAGAIN when the socket's buffer is full (the egress process is
 * far behind: busy), -ECONNRESET when it is gone, or a negative errno.
 */
int egress_client_submit(EgressClient *c, EgressRequest *q, int fd, EgressUploadDone done, void *userdata,
                         uint64_t *ret_id);

/* Call @on_died at each death of the egress process's server. */
void egress_client_on_died(EgressClient *c, EgressDied on_died, void *userdata);

/* Forget the upload @id: its answer, when it comes, is dropped. */
void egress_client_cancel(EgressClient *c, uint64_t id);
