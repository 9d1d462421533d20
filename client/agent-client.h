/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Client side of the dsagent protocol: connect, send one request, read its reply frames */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "common/wire.h"

/* Past the agent's own deadline: its answer, an error that names the deadline, is on its way. */
#define AGENT_CLIENT_GRACE_USEC (5 * 1000000ULL)

typedef struct AgentClient {
        int fd;
        int received_fd; /* a file descriptor that came with the last frame, or -EBADF */
        uint64_t deadline_usec;          /* CLOCK_MONOTONIC: how long dsctl waits for the next frame */
        char deadline_what[160];         /* which deadline that is, in the agent's words */
        uint8_t frame[WIRE_FRAME_MAX];
        size_t frame_size;
} AgentClient;

/*
 * @timeout_sec bounds each read and write once started (the rest of a frame,
 * the request), connecting, and the wait for the first frame: the agent
 * answers at once, and says in that frame how long it may take.
 *
 * Return: 0 or a negative errno (-ECONNREFUSED, -ENOENT: no agent there;
 * -EACCES: not allowed to connect).
 */
int agent_client_connect(const char *socket_path, unsigned timeout_sec, AgentClient **ret);
int agent_client_send(AgentClient *client, WireWriter *w);
/* One frame, however long it takes; the agent ends every request, so the caller bounds the wait. */
int agent_client_receive(AgentClient *client, WireMessage *ret);

/* Waits at most @usec from now (no agent's deadline known), for the reason @what. */
void agent_client_set_deadline(AgentClient *client, uint64_t usec, const char *what);

/**
 * agent_client_next() - the next frame, within the request's deadline
 * @tick: called about once a second while nothing arrives (progress), may be NULL
 *
 * A PROGRESS frame moves the deadline to the agent's own, as it announces it
 * (DEADLINE, and MESSAGE naming it), plus AGENT_CLIENT_GRACE_USEC; it is
 * returned like any other frame. dsctl thus waits exactly as long as the
 * agent does for this request, and no longer.
 *
 * Return: 0, -ETIMEDOUT (the deadline passed; client->deadline_what names
 * it), or what agent_client_receive() returns.
 */
int agent_client_next(AgentClient *client, WireMessage *ret, void (*tick)(void *userdata), void *userdata);

AgentClient *agent_client_free(AgentClient *client);
DEFINE_TRIVIAL_CLEANUP_FUNC(AgentClient *, agent_client_free);
