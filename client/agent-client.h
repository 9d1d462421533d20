/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Client side of the dsagent protocol: connect, send one request, read its reply frames */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"
#include "wire.h"

typedef struct AgentClient {
        int fd;
        int received_fd; /* a file descriptor that came with the last frame, or -EBADF */
        uint8_t frame[WIRE_FRAME_MAX];
        size_t frame_size;
} AgentClient;

int agent_client_connect(const char *socket_path, unsigned timeout_sec, AgentClient **ret);
int agent_client_send(AgentClient *client, WireWriter *w);
int agent_client_receive(AgentClient *client, WireMessage *ret);
AgentClient *agent_client_free(AgentClient *client);
DEFINE_TRIVIAL_CLEANUP_FUNC(AgentClient *, agent_client_free);
