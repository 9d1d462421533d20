/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "cleanup.h"
#include "commands.h"
#include "connection.h"
#include "dotnet-ipc.h"
#include "pam-check.h"

/* A listing of every .NET process on a large host stays far below this. */
#define CONNECTION_OUT_MAX (16 * 1024 * 1024)
#define CONNECTION_DISCARD_MAX (256 * 1024)

static int connection_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int connection_on_timeout(sd_event_source *s, uint64_t usec, void *userdata);

Connection *connection_free(Connection *c) {
        if (!c)
                return NULL;
        if (c->work_free)
                c->work_free(c->work);
        pam_query_cancel(c->pam_query);
        broker_connection_closed(c->broker, c);
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        safe_close(c->fd);
        safe_close(c->out_fd);
        peer_creds_done(&c->peer);
        policy_unref(c->policy);
        free(c->trace_profile);
        target_free(c->target);
        free(c->in);
        free(c->out);
        free(c);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(Connection *, connection_free);

int connection_set_deadline(Connection *c, uint64_t usec_from_now) {
        uint64_t now;
        int r;

        r = sd_event_now(c->broker->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return r;
        r = sd_event_source_set_time(c->timer, now + usec_from_now);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

/**
 * connection_new() - take over an accepted client socket
 *
 * The client's identity is read from the kernel here, once; nothing the
 * client sends later can change who it is.
 *
 * Return: 0 or a negative errno (the fd is closed on failure).
 */
int connection_new(Broker *b, int fd, Connection **ret) {
        _cleanup_(connection_freep) Connection *c = NULL;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        c->fd = fd;
        c->out_fd = -EBADF;
        c->peer = (PeerCreds)PEER_CREDS_NULL;
        c->state = CONNECTION_READING;

        r = sockopt_get_peer_creds(fd, &c->peer);
        if (r < 0)
                return r;
        if (getrandom(&c->request_id, sizeof(c->request_id), 0) != sizeof(c->request_id))
                return -errno;

        c->audit.request_id = c->request_id;
        c->audit.client_uid = c->peer.uid;
        c->audit.client_gid = c->peer.gid;
        c->audit.client_pid = c->peer.pid;

        r = sd_event_add_io(b->event, &c->io, fd, EPOLLIN, connection_on_io, c);
        if (r < 0)
                return r;
        r = sd_event_add_time(b->event, &c->timer, CLOCK_MONOTONIC, 0, 0, connection_on_timeout, c);
        if (r < 0)
                return r;

        c->broker = b;
        c->next = b->connections;
        if (b->connections)
                b->connections->prev = c;
        b->connections = c;
        b->n_connections++;

        r = connection_set_deadline(c, b->config.request_timeout_usec);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}

void connection_set_target(Connection *c, Target *t) {
        target_free(c->target);
        c->target = t;
}

int connection_queue_frame(Connection *c, WireWriter *w) {
        const uint8_t *frame;
        size_t size;
        uint8_t *p;
        int r;

        r = wire_writer_finish(w, &frame, &size);
        if (r != 0)
                return r > 0 ? -EBADMSG : r;
        if (c->out_size + size > CONNECTION_OUT_MAX)
                return -ENOBUFS;
        p = realloc(c->out, c->out_size + size);
        if (!p)
                return -ENOMEM;
        memcpy(p + c->out_size, frame, size);
        c->out = p;
        c->out_size += size;
        return 0;
}

/* @fd travels with the frame (SCM_RIGHTS on its first byte); the connection owns it now. */
int connection_queue_frame_with_fd(Connection *c, WireWriter *w, int fd) {
        size_t offset = c->out_size;
        int r;

        if (c->out_fd >= 0) {
                safe_close(fd);
                return -EBUSY;
        }
        r = connection_queue_frame(c, w);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        c->out_fd = fd;
        c->out_fd_offset = offset;
        return 0;
}

/* @fd goes with the message's first byte (SCM_RIGHTS); @control holds CMSG_SPACE(sizeof(int)). */
static void attach_fd(struct msghdr *mh, char *control, size_t control_size, int fd) {
        struct cmsghdr *cm;

        mh->msg_control = control;
        mh->msg_controllen = control_size;
        cm = CMSG_FIRSTHDR(mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
}

/*
 * Sends one frame at once, while the request is still being worked on (a
 * session's start, with its pipe). Nothing else was sent on the socket yet,
 * so a small frame fits its buffer; a client that does not take it is gone.
 * @fd (may be -EBADF) travels with it and stays the caller's.
 */
int connection_send_frame_now(Connection *c, WireWriter *w, int fd) {
        char control[CMSG_SPACE(sizeof(int))] = {};
        struct msghdr mh = {};
        struct iovec iov;
        const uint8_t *frame;
        size_t size;
        ssize_t n;
        int r;

        r = wire_writer_finish(w, &frame, &size);
        if (r != 0)
                return r > 0 ? -EBADMSG : r;
        iov = (struct iovec){ .iov_base = (void *)frame, .iov_len = size };
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        if (fd >= 0)
                attach_fd(&mh, control, sizeof(control), fd);
        n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
                return -errno;
        return (size_t)n == size ? 0 : -EPIPE;
}

/* Hands the client's socket events to a handler that works for long (a session). */
int connection_watch_client(Connection *c, uint32_t events, void (*on_event)(Connection *c, uint32_t revents)) {
        int r;

        c->on_client_event = on_event;
        r = sd_event_source_set_io_events(c->io, events);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(c->io, on_event ? SD_EVENT_ON : SD_EVENT_OFF);
}

static int connection_audit(Connection *c) {
        c->audited = true;
        if (c->target) {
                c->audit.have_target = true;
                c->audit.target_pid = c->target->pid;
                c->audit.target_uid = target_euid(c->target);
                c->audit.target_unit = c->target->unit;
                c->audit.target_exe = c->target->exe;
        }
        return audit_log_request(c->broker->config.audit_sink, &c->audit);
}

static void connection_start_writing(Connection *c) {
        c->state = CONNECTION_WRITING;
        c->on_client_event = NULL;
        if (sd_event_source_set_io_events(c->io, EPOLLOUT) < 0 ||
            sd_event_source_set_enabled(c->io, SD_EVENT_ON) < 0 ||
            connection_set_deadline(c, c->broker->config.reply_timeout_usec) < 0)
                connection_free(c);
}

static void connection_queue_error(Connection *c, WireError error, uint32_t hresult, const char *message) {
        WireWriter *w;

        w = malloc(sizeof(*w));
        if (!w)
                return;
        wire_writer_begin(w, WIRE_REPLY_ERROR);
        wire_writer_put_u32(w, WIRE_TAG_ERROR, error);
        wire_writer_put_string(w, WIRE_TAG_MESSAGE, message);
        if (hresult != 0)
                wire_writer_put_u32(w, WIRE_TAG_HRESULT, hresult);
        wire_writer_put_u64(w, WIRE_TAG_REQUEST_ID, c->request_id);
        (void)connection_queue_frame(c, w);
        free(w);
}

/* A decision nobody can audit is not carried out: the client gets an error instead. */
static void connection_fail_unaudited(Connection *c) {
        free(c->out);
        c->out = NULL;
        c->out_size = 0;
        c->out_fd = safe_close(c->out_fd);
        connection_queue_error(c, WIRE_ERROR_INTERNAL, 0, "the audit record could not be written");
}

void connection_reply_done(Connection *c, const char *rule, const char *reason) {
        WireWriter *w;

        c->audit.decision = AUDIT_DECISION_ALLOWED;
        c->audit.rule = rule;
        c->audit.reason = reason;
        if (connection_audit(c) < 0) {
                connection_fail_unaudited(c);
                connection_start_writing(c);
                return;
        }

        w = malloc(sizeof(*w));
        if (w) {
                wire_writer_begin(w, WIRE_REPLY_DONE);
                wire_writer_put_u64(w, WIRE_TAG_REQUEST_ID, c->request_id);
                (void)connection_queue_frame(c, w);
                free(w);
        }
        connection_start_writing(c);
}

/*
 * Every request, well-formed or not, first takes from its user's budget of
 * recorded decisions (broker_admit_request()); one over budget is refused
 * with no record of its own, and counted in a record that says how many.
 */
static bool connection_admit(Connection *c) {
        if (!c->admitted)
                c->admitted = broker_admit_request(c->broker, c->peer.uid);
        return c->admitted;
}

static void connection_reply_too_many(Connection *c) {
        connection_queue_error(c, WIRE_ERROR_BUSY, 0, "too many requests from this user; try again shortly");
        connection_start_writing(c);
}

/* @message is what the client reads; the record says @reason. */
static void connection_reply_error_full(Connection *c, AuditDecision decision, WireError error,
                                        uint32_t hresult, const char *reason, const char *message) {
        /* a partial listing must not look complete: the error replaces it */
        free(c->out);
        c->out = NULL;
        c->out_size = 0;
        c->out_fd = safe_close(c->out_fd);

        if (!connection_admit(c)) {
                connection_reply_too_many(c);
                return;
        }
        c->audit.decision = decision;
        c->audit.reason = reason;
        if (connection_audit(c) < 0)
                connection_fail_unaudited(c);
        else
                connection_queue_error(c, error, hresult, message);
        connection_start_writing(c);
}

void connection_reply_error(Connection *c, AuditDecision decision, WireError error, const char *reason) {
        connection_reply_error_full(c, decision, error, 0, reason, reason);
}

/*
 * The requester may not see the target: the reply is the very one a process
 * that does not exist gets, while the record tells the administrator what
 * was asked of which process, and that it was refused.
 */
void connection_reply_invisible(Connection *c) {
        connection_reply_error_full(c, AUDIT_DECISION_DENIED, WIRE_ERROR_NO_SUCH_PROCESS, 0,
                                    "the requester may not act on this process, which is answered as absent",
                                    COMMANDS_NO_SUCH_PROCESS);
}

void connection_reply_runtime_error(Connection *c, uint32_t hresult, const char *reason) {
        const char *name = dotnet_ipc_hresult_name(hresult);
        char buf[256];

        snprintf(buf, sizeof(buf), "%s: HRESULT 0x%08x%s%s%s", reason, hresult, name ? " (" : "",
                 name ? name : "", name ? ")" : "");
        connection_reply_error_full(c, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_FAILED, hresult, buf, buf);
}

/* Return: 1 when a whole frame is buffered, 0 to wait, -ECONNRESET on EOF, else -errno. */
static int connection_read_frame(Connection *c) {
        if (!c->in) {
                c->in = malloc(WIRE_FRAME_MAX);
                if (!c->in)
                        return -ENOMEM;
        }

        for (;;) {
                size_t frame_size;
                ssize_t n;
                int r;

                r = wire_frame_peek(c->in, c->in_size, &frame_size);
                if (r == 0)
                        return 1;
                if (r == WIRE_E_MALFORMED)
                        return -EBADMSG;

                /* read no further than the frame, so nothing of a second one is consumed */
                n = recv(c->fd, c->in + c->in_size, wire_frame_wanted(c->in, c->in_size) - c->in_size,
                         MSG_DONTWAIT);
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (n == 0)
                        return -ECONNRESET;
                c->in_size += (size_t)n;
        }
}

/* One request per connection: anything after the frame is an attempt to smuggle a second one. */
static bool connection_has_trailing_bytes(Connection *c) {
        char b;
        return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

static void connection_on_request(Connection *c) {
        WireMessage m;
        int r;

        c->state = CONNECTION_WORKING;
        (void)sd_event_source_set_enabled(c->io, SD_EVENT_OFF);

        if (!connection_admit(c)) {
                connection_reply_too_many(c);
                return;
        }
        if (connection_has_trailing_bytes(c)) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "bytes after the request");
                return;
        }
        r = wire_message_decode(c->in, c->in_size, &m);
        if (r == WIRE_E_VERSION) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_UNSUPPORTED_VERSION,
                                       "unsupported protocol version");
                return;
        }
        if (r != 0) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "malformed request");
                return;
        }
        c->policy = policy_ref(c->broker->policy);
        r = connection_set_deadline(c, c->broker->config.runtime_timeout_usec * 2);
        if (r < 0) {
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL, "timer failure");
                return;
        }
        commands_dispatch(c, &m);
}

static void connection_on_readable(Connection *c) {
        int r;

        r = connection_read_frame(c);
        if (r == 0)
                return;
        if (r == 1) {
                connection_on_request(c);
                return;
        }
        /* a connection that closed without sending anything asked for nothing: no decision */
        if (r == -ECONNRESET && c->in_size == 0) {
                connection_free(c);
                return;
        }
        connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                               r == -EBADMSG ? "malformed request" : "incomplete request");
}

/*
 * Closing a socket with unread bytes makes the kernel reset the connection,
 * and the client would lose the reply it has not read yet. What a client sent
 * past its request is discarded first, up to a bound.
 */
static void connection_discard_input(Connection *c) {
        char buf[4096];

        for (size_t total = 0; total < CONNECTION_DISCARD_MAX; total += sizeof(buf))
                if (recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
                        break;
}

/* Sends from the current position: the fd goes with the byte at out_fd_offset, exactly once. */
static ssize_t connection_send_some(Connection *c) {
        size_t end = c->out_size;
        char control[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (c->out_fd >= 0 && c->out_sent < c->out_fd_offset)
                end = c->out_fd_offset;
        iov = (struct iovec){ .iov_base = c->out + c->out_sent, .iov_len = end - c->out_sent };
        if (c->out_fd >= 0 && c->out_sent == c->out_fd_offset)
                attach_fd(&mh, control, sizeof(control), c->out_fd);
        n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0 && mh.msg_control)
                c->out_fd = safe_close(c->out_fd);
        return n;
}

static void connection_on_writable(Connection *c) {
        while (c->out_sent < c->out_size) {
                ssize_t n = connection_send_some(c);
                if (n < 0) {
                        if (errno == EAGAIN)
                                return;
                        break; /* the client went away; its record is already written */
                }
                c->out_sent += (size_t)n;
        }
        connection_discard_input(c);
        connection_free(c);
}

static int connection_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;

        if (c->state == CONNECTION_READING)
                connection_on_readable(c);
        else if (c->state == CONNECTION_WRITING)
                connection_on_writable(c);
        else if (c->on_client_event)
                c->on_client_event(c, revents);
        return 0;
}

static int connection_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Connection *c = userdata;

        switch (c->state) {
        case CONNECTION_READING:
                if (c->in_size == 0) {
                        connection_free(c);
                        break;
                }
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "the request did not arrive in time");
                break;
        case CONNECTION_WORKING:
                /* backstop only: handlers give up on their own deadlines first */
                pam_query_cancel(c->pam_query);
                c->pam_query = NULL;
                if (c->work_free) {
                        c->work_free(c->work);
                        c->work_free = NULL;
                }
                connection_reply_error(c, AUDIT_DECISION_FAILED, WIRE_ERROR_INTERNAL,
                                       "the request did not finish in time");
                break;
        case CONNECTION_WRITING:
                connection_free(c);
                break;
        }
        return 0;
}
