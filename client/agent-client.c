/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl's side of the dsagent protocol (agent-client.h): connect, send one request, read its reply
 * frames; dsctl.c and port.c call it.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>

#include "client/agent-client.h"
#include "common/cleanup.h"
#include "common/io.h"

AgentClient *agent_client_free(AgentClient *client) {
        if (!client)
                return NULL;
        safe_close(client->fd);
        safe_close(client->received_fd);
        free(client);
        return NULL;
}

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

void agent_client_set_deadline(AgentClient *client, uint64_t usec, const char *what) {
        client->deadline_usec = now_usec() + usec;
        snprintf(client->deadline_what, sizeof(client->deadline_what), "%s", what);
}

int agent_client_connect(const char *socket_path, unsigned timeout_sec, AgentClient **ret) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = timeout_sec };
        char what[96];

        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, socket_path, strlen(socket_path));

        client = calloc(1, sizeof(*client));
        if (!client)
                return -ENOMEM;
        client->received_fd = -EBADF;
        client->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (client->fd < 0)
                return -errno;
        if (setsockopt(client->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(client->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
                return -errno;
        if (connect(client->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        snprintf(what, sizeof(what), "dsctl's wait for the agent's first answer (%u s)", timeout_sec);
        agent_client_set_deadline(client, timeout_sec * 1000000ULL, what);

        *ret = TAKE_PTR(client);
        return 0;
}

int agent_client_send(AgentClient *client, WireWriter *w) {
        const uint8_t *frame;
        size_t size;
        int r;

        r = wire_writer_finish(w, &frame, &size);
        if (r != 0)
                return r > 0 ? -EINVAL : r;
        return fd_write_all(client->fd, frame, size);
}

/*
 * Reads a frame's header, taking any fd that came with it: the agent sends
 * one with the first byte of a frame. Anything but exactly one fd is closed.
 */
static int read_header(AgentClient *client) {
        char control[CMSG_SPACE(sizeof(int) * 4)];
        struct iovec iov = { .iov_base = client->frame, .iov_len = WIRE_HEADER_SIZE };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        ssize_t n;

        do
                n = recvmsg(client->fd, &mh, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return errno == EAGAIN ? -ETIMEDOUT : -errno;
        if (n == 0)
                return -ECONNRESET;

        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                size_t n_fds;
                int fds[4];

                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                n_fds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                memcpy(fds, CMSG_DATA(cm), n_fds * sizeof(int));
                for (size_t i = 0; i < n_fds; i++) {
                        if (n_fds == 1 && client->received_fd < 0)
                                client->received_fd = fds[i];
                        else
                                close(fds[i]);
                }
        }
        return (size_t)n < WIRE_HEADER_SIZE
                       ? fd_read_exactly(client->fd, client->frame + n, WIRE_HEADER_SIZE - (size_t)n)
                       : 0;
}

/**
 * agent_client_receive() - read and decode the next reply frame
 *
 * The message's fields point into @client and stay valid until the next call.
 *
 * Return: 0, -ETIMEDOUT, -ECONNRESET (the agent closed early), -EBADMSG, or a
 * negative errno.
 */
int agent_client_receive(AgentClient *client, WireMessage *ret) {
        size_t frame_size;
        int r;

        r = read_header(client);
        if (r < 0)
                return r;
        r = wire_frame_peek(client->frame, WIRE_HEADER_SIZE, &frame_size);
        if (r == WIRE_E_TRUNCATED)
                r = fd_read_exactly(client->fd, client->frame + WIRE_HEADER_SIZE,
                                 wire_frame_wanted(client->frame, WIRE_HEADER_SIZE) - WIRE_HEADER_SIZE);
        else if (r != 0)
                return -EBADMSG;
        if (r < 0)
                return r;

        client->frame_size = wire_frame_wanted(client->frame, WIRE_HEADER_SIZE);
        if (wire_message_decode(client->frame, client->frame_size, ret) != 0)
                return -EBADMSG;
        return 0;
}

/* The agent's word on how long it will take: its deadline, and which one that is. */
static void take_deadline(AgentClient *client, const WireMessage *m) {
        _cleanup_free_ char *what = NULL;
        uint64_t usec;

        if (wire_message_get_u64(m, WIRE_TAG_DEADLINE, &usec) != 0 || usec > UINT64_MAX / 2)
                return;
        client->deadline_usec = now_usec() + usec + AGENT_CLIENT_GRACE_USEC;
        if (wire_message_get_string(m, WIRE_TAG_MESSAGE, &what) == 0)
                snprintf(client->deadline_what, sizeof(client->deadline_what), "%s", what);
}

int agent_client_next(AgentClient *client, WireMessage *ret, void (*tick)(void *userdata), void *userdata) {
        for (;;) {
                struct pollfd p = { .fd = client->fd, .events = POLLIN };
                uint64_t now = now_usec(), wait;
                int r;

                if (now >= client->deadline_usec)
                        return -ETIMEDOUT;
                wait = client->deadline_usec - now;
                if (tick && wait > 1000000ULL)
                        wait = 1000000ULL;
                r = poll(&p, 1, (int)((wait + 999) / 1000));
                if (r < 0 && errno != EINTR)
                        return -errno;
                if (r <= 0) {
                        if (tick)
                                tick(userdata);
                        continue;
                }
                r = agent_client_receive(client, ret);
                if (r == 0 && ret->type == WIRE_REPLY_PROGRESS)
                        take_deadline(client, ret);
                return r;
        }
}
