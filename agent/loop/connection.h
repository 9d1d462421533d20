/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One client connection: it reads one request frame, hands the request to
 * the commands, and writes the reply frames out. It is freed in one place
 * only: connection_release() marks it and the release source frees it, at
 * the top of its own callback, once whatever called into it has returned.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "agent/loop/holders.h"
#include "agent/loop/request.h"
#include "agent/loop/sockopt.h"
#include "common/wire.h"

typedef struct Broker Broker;

typedef enum ConnectionState {
        CONNECTION_READING,
        CONNECTION_WORKING,
        CONNECTION_WRITING,
        CONNECTION_RELEASED,   /* waiting to be freed; no event of its reaches a handler any more */
} ConnectionState;

/* The most reply bytes a connection queues. A ps listing stays far below it: the loop queues
 * its frames one process at a time and stops producing past PS_QUEUE_HIGH until the client reads. */
#define CONNECTION_OUT_MAX (256 * 1024)

/* What one connection buffers of its request before it knows the frame is larger. */
#define CONNECTION_HEAD_SIZE 256

struct Connection {
        Broker *broker;
        Connection *prev, *next;
        int fd;
        sd_event_source *io;
        sd_event_source *timer;
        sd_event_source *release;
        ConnectionState state;
        PeerCreds peer;
        bool opened;            /* counted by the broker (connection_opened): uncounted when destroyed */
        HoldNode hold;          /* its place among its charge's connections (holders.h), the broker's */

        /* the request frame: first read here (a small request arrives whole in one
         * read), then, for a larger one, into a buffer of exactly the frame's size */
        uint8_t head[CONNECTION_HEAD_SIZE];
        uint8_t *in;
        size_t in_size;
        bool trailing;          /* bytes came after the frame: a second request smuggled in */
        bool read_past;         /* the read that completed the frame asked for more than it */
        bool watched;           /* a command watched the client's socket (connection_watch_client) */

        uint8_t *out;
        size_t out_size, out_sent; /* between sends, out begins with a frame: a cut never splits one */
        int out_fd;             /* sent with the frame starting at out_fd_offset, then closed */
        size_t out_fd_offset;

        /* while working: events on the client's socket go to the command (a session) */
        void (*on_client_event)(Request *req, uint32_t revents);
        uint32_t client_events; /* those it asked for */
        bool owing;             /* the rest of a frame sent in part is queued (connection_send_frame_now()) */

        Request request;
};

/**
 * connection_new() - take over an accepted client socket
 *
 * The client's identity is read from the kernel here, once; nothing the
 * client sends later can change who it is.
 *
 * Return: 0 or a negative errno (the fd is closed on failure).
 */
int connection_new(Broker *b, int fd, uint64_t request_id, Connection **ret);

/*
 * connection_start() - read the request, or wait for it
 *
 * Most clients have sent their request by the time the agent accepts them:
 * it is read and dispatched at once. Otherwise the connection waits for it
 * under the request deadline connection_new() set.
 */
void connection_start(Connection *c);

/*
 * connection_evict() - close a connection that has sent nothing yet, to make room for another's
 *
 * The client is answered BUSY with @message, and its record says @reason. Only a connection still
 * reading its request is closed; one that has begun working is left alone.
 */
void connection_evict(Connection *c, const char *reason, const char *message);

/* Stops every event of the connection; it is freed at the top of its release source's callback. */
void connection_release(Connection *c);
/* Frees at once: only the release callback and the agent's shutdown call it. */
Connection *connection_destroy(Connection *c);

int connection_set_deadline(Connection *c, uint64_t usec_from_now);

/* Queue a reply frame (the request layer queues the last one and starts writing). */
int connection_queue_frame(Connection *c, WireWriter *w);
/* @fd travels with the frame (SCM_RIGHTS on its first byte); the connection owns it now. */
int connection_queue_frame_with_fd(Connection *c, WireWriter *w, int fd);
/*
 * What was queued is dropped: a partial listing must not look complete. A frame the client
 * has begun to receive is still sent whole, so that what is queued next is read as a frame.
 */
void connection_discard_output(Connection *c);
void connection_queue_error(Connection *c, WireError error, uint32_t hresult, const char *message, uint64_t request_id);

/*
 * Sends one frame at once, while the request is still being worked on (a
 * session's start, with its pipe), when nothing is queued. When the
 * socket takes only its head (a host with a small send buffer), the rest is
 * queued and sent as the socket takes it while the command works on, whatever
 * the command watches; frames queued later follow it. @fd (may be -EBADF)
 * travels with the first byte and stays the caller's.
 *
 * Return: 0 (all of it sent, or its rest queued); -EAGAIN when the socket took
 * none of it or something is queued (nothing was sent: queue it instead);
 * -EPIPE, -ECONNRESET or -ENOTCONN for a client that is gone; -EBADMSG for a
 * frame the writer could not finish; -ENOMEM or -ENOBUFS.
 */
int connection_send_frame_now(Connection *c, WireWriter *w, int fd);

/* Hands the client's socket events to the command while it works for long (a session). */
int connection_watch_client(Connection *c, uint32_t events, void (*on_event)(Request *req, uint32_t revents));

/* Sends what is queued as far as the socket takes it now. Return: the bytes still queued. */
size_t connection_flush(Connection *c);

/* The reply is complete: write it out, then close. */
void connection_start_writing(Connection *c);
