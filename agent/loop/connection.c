/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One client connection (connection.h): reads its one request frame, hands it to the commands,
 * writes the reply frames out; the broker makes and frees them.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "agent/loop/broker-state.h"
#include "common/cleanup.h"
#include "agent/loop/connection.h"
#include "agent/support/test-hooks.h"

/* What a client sent past its request is discarded before closing, up to this. */
#define CONNECTION_DISCARD_MAX (256 * 1024)

static int connection_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int connection_on_timeout(sd_event_source *s, uint64_t usec, void *userdata);
static void connection_compact(Connection *c);

Connection *connection_destroy(Connection *c) {
        if (!c)
                return NULL;
        request_done(&c->request);
        if (c->opened)
                c->broker->connection_closed(c->broker, c);
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timer);
        sd_event_source_disable_unref(c->release);
        safe_close(c->fd);
        safe_close(c->out_fd);
        peer_creds_done(&c->peer);
        free(c->in);
        free(c->out);
        free(c);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(Connection *, connection_destroy);

/* No more events of the client's socket (there are none before it is first watched). */
static void connection_unwatch(Connection *c) {
        if (c->io)
                (void)sd_event_source_set_enabled(c->io, SD_EVENT_OFF);
}

/*
 * Wait for @events on the client's socket. The source is made on first need:
 * a request that is in the socket by the time it is accepted is read at once
 * (connection_start()) and never costs adding the socket to epoll and
 * removing it again.
 */
static int connection_watch(Connection *c, uint32_t events) {
        int r;

        if (!c->io)
                return sd_event_add_io(c->broker->event, &c->io, c->fd, events, connection_on_io, c);
        r = sd_event_source_set_io_events(c->io, events);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(c->io, SD_EVENT_ON);
}

/* While working: the events the command asked for, and room to send when the rest of a frame is owed. */
static int connection_rewatch(Connection *c) {
        if (!c->on_client_event && !c->owing) {
                connection_unwatch(c);
                return 0;
        }
        /* with no events asked for, a command still hears of errors and hang-ups */
        return connection_watch(c, c->client_events | (c->owing ? EPOLLOUT : 0));
}

/* The one place a connection is freed: at the top of this callback, after whatever released it returned. */
static int connection_on_release(sd_event_source *s, void *userdata) {
        connection_destroy(userdata);
        return 0;
}

void connection_release(Connection *c) {
        if (c->state == CONNECTION_RELEASED)
                return;
        c->state = CONNECTION_RELEASED;
        c->on_client_event = NULL;
        connection_unwatch(c);
        (void)sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
        (void)sd_event_source_set_enabled(c->release, SD_EVENT_ONESHOT);
}

void connection_evict(Connection *c, const char *reason, const char *message) {
        if (c->state != CONNECTION_READING)
                return;
        c->state = CONNECTION_WORKING;
        connection_unwatch(c);
        request_reply_error_as(&c->request, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY, reason, message);
}

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

int connection_new(Broker *b, int fd, uint64_t request_id, Connection **ret) {
        _cleanup_(connection_destroyp) Connection *c = NULL;
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
        c->broker = b;
        request_init(&c->request, c, request_id);

        r = sockopt_get_peer_creds(fd, &c->peer);
        if (r < 0)
                return r;

        r = sd_event_add_time(b->event, &c->timer, CLOCK_MONOTONIC, 0, 0, connection_on_timeout, c);
        if (r < 0)
                return r;
        r = sd_event_add_defer(b->event, &c->release, connection_on_release, c);
        if (r < 0)
                return r;
        /* before anything else that is pending: nothing of a released connection runs again */
        r = sd_event_source_set_priority(c->release, SD_EVENT_PRIORITY_IMPORTANT);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->release, SD_EVENT_OFF);
        if (r < 0)
                return r;

        r = b->connection_opened(b, c);
        if (r < 0)
                return r;
        c->opened = true;
        r = connection_set_deadline(c, b->config.request_timeout_usec);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}

/* Appends a finished frame to the queue. */
static int connection_append(Connection *c, const uint8_t *frame, size_t size) {
        uint8_t *p;

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

int connection_queue_frame(Connection *c, WireWriter *w) {
        const uint8_t *frame;
        size_t size;
        int r;

        r = wire_writer_finish(w, &frame, &size);
        if (r != 0)
                return r > 0 ? -EBADMSG : r;
        return connection_append(c, frame, size);
}

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

/* The end of the frame that begins at @offset of the queue (queued frames are whole and well-formed). */
static size_t frame_end(const Connection *c, size_t offset) {
        size_t size;

        if (wire_frame_peek(c->out + offset, c->out_size - offset, &size) != 0)
                return c->out_size; /* not a frame of ours: nothing after it can be read as one anyway */
        return offset + size;
}

void connection_discard_output(Connection *c) {
        /* between sends the queue begins with a frame (connection_compact()): the one the client has begun */
        size_t keep = c->out_sent > 0 ? frame_end(c, 0) : 0;

        if (c->out_fd >= 0 && c->out_fd_offset >= keep)
                c->out_fd = safe_close(c->out_fd);
        if (keep > 0) {
                test_hook_note("the rest of a frame begun goes out before the error: %zu of %zu bytes",
                               keep - c->out_sent, keep);
                c->out_size = keep;
                return;
        }
        free(c->out);
        c->out = NULL;
        c->out_size = c->out_sent = 0;
}

void connection_queue_error(Connection *c, WireError error, uint32_t hresult, const char *message,
                            uint64_t request_id) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));

        if (!w)
                return;
        wire_writer_begin(w, WIRE_REPLY_ERROR);
        wire_writer_put_u32(w, WIRE_TAG_ERROR, error);
        wire_writer_put_string(w, WIRE_TAG_MESSAGE, message);
        if (hresult != 0)
                wire_writer_put_u32(w, WIRE_TAG_HRESULT, hresult);
        wire_writer_put_u64(w, WIRE_TAG_REQUEST_ID, request_id);
        (void)connection_queue_frame(c, w);
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

int connection_send_frame_now(Connection *c, WireWriter *w, int fd) {
        char control[CMSG_SPACE(sizeof(int))] = {};
        struct msghdr mh = {};
        struct iovec iov;
        const uint8_t *frame;
        size_t size, start = c->out_size;
        ssize_t n;
        int r;

        if (c->out_size > c->out_sent)
                return -EAGAIN; /* it would overtake what is queued */
        r = wire_writer_finish(w, &frame, &size);
        if (r != 0)
                return r > 0 ? -EBADMSG : r;
        /* queued first: once its head is out, nothing may keep its rest from following */
        r = connection_append(c, frame, size);
        if (r < 0)
                return r;
        iov = (struct iovec){ .iov_base = c->out + start, .iov_len = size };
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        if (fd >= 0)
                attach_fd(&mh, control, sizeof(control), fd);
        n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) {
                r = n < 0 ? -errno : -EAGAIN;
                c->out_size = start; /* none of it went: it is not the queue's */
                return r;
        }
        c->out_sent = start + (size_t)n;
        if (c->out_sent < c->out_size) {
                /* the socket took the frame's head (and the fd with it): the rest is owed, and goes
                 * out as the socket takes it while the request works on (connection_on_io()); were
                 * room not watched for, it would still go first when the reply is written */
                c->owing = true;
                test_hook_note("a frame went out in part: %zd of %zu bytes, the rest is owed", n, size);
                (void)connection_rewatch(c);
        }
        connection_compact(c);
        return 0;
}

int connection_watch_client(Connection *c, uint32_t events, void (*on_event)(Request *req, uint32_t revents)) {
        if (c->state == CONNECTION_RELEASED)
                return -ESHUTDOWN;
        c->on_client_event = on_event;
        c->client_events = on_event ? events : 0;
        c->watched = c->watched || on_event; /* the client may have sent more while watched: discard it at the end */
        return connection_rewatch(c);
}

/*
 * Closing a socket with unread bytes makes the kernel reset the connection,
 * and the client would lose the reply it has not read yet. What a client sent
 * past its request is discarded first, up to a bound.
 */
static void connection_discard_input(Connection *c) {
        char buf[4096];

        /* the read that completed the request found nothing after it: an ordinary client sent no more */
        if (c->read_past && !c->trailing && !c->watched)
                return;

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

/*
 * What was sent is dropped from the front of the queue, so that a long listing queues no more
 * than its bound; but for the frame being sent, which stays whole (connection_discard_output()).
 */
static void connection_compact(Connection *c) {
        size_t whole = 0; /* the frames sent whole */

        while (whole < c->out_sent && frame_end(c, whole) <= c->out_sent)
                whole = frame_end(c, whole);
        if (whole == 0)
                return;
        memmove(c->out, c->out + whole, c->out_size - whole);
        c->out_size -= whole;
        c->out_sent -= whole;
        if (c->out_fd >= 0)
                c->out_fd_offset -= whole;
}

/* Return: true when everything queued is out (or the client is gone), false to wait for room. */
static bool connection_write_some(Connection *c) {
        while (c->out_sent < c->out_size) {
                ssize_t n = connection_send_some(c);
                if (n < 0) {
                        connection_compact(c);
                        return errno != EAGAIN; /* else the client went away; its record is written */
                }
                c->out_sent += (size_t)n;
        }
        connection_compact(c);
        return true;
}

size_t connection_flush(Connection *c) {
        if (c->state != CONNECTION_RELEASED)
                (void)connection_write_some(c);
        return c->out_size - c->out_sent;
}

void connection_start_writing(Connection *c) {
        if (c->state == CONNECTION_RELEASED)
                return;
        c->state = CONNECTION_WRITING;
        c->on_client_event = NULL;
        /* most replies fit the socket's buffer: try at once, and wait for room only when they do not */
        if (connection_write_some(c)) {
                connection_discard_input(c);
                connection_release(c);
                return;
        }
        if (connection_watch(c, EPOLLOUT) < 0 || connection_set_deadline(c, c->broker->config.reply_timeout_usec) < 0)
                connection_release(c);
}

/*
 * The first read takes at most CONNECTION_HEAD_SIZE bytes, which holds a
 * whole ordinary request; a larger frame then gets a buffer of exactly its
 * announced size and is read to its end and no further. An idle or
 * dribbling client thus holds at most the head, never the largest frame.
 *
 * Return: 1 when the whole frame is there, 0 to wait, -ECONNRESET on EOF,
 * -EBADMSG for bytes that can never be a frame, else a negative errno.
 */
static int connection_read_frame(Connection *c) {
        for (;;) {
                size_t frame_size, want;
                uint8_t *into;
                ssize_t n;

                if (!c->in) {
                        int r = wire_frame_peek(c->head, c->in_size, &frame_size);
                        if (r == WIRE_E_MALFORMED)
                                return -EBADMSG;
                        if (r == 0 || c->in_size >= WIRE_HEADER_SIZE) {
                                size_t size = r == 0 ? frame_size : wire_frame_wanted(c->head, c->in_size);
                                c->in = malloc(size);
                                if (!c->in)
                                        return -ENOMEM;
                                c->read_past = r == 0; /* what followed the frame, if anything, is in the head */
                                c->trailing = c->in_size > size;
                                if (c->trailing)
                                        c->in_size = size;
                                memcpy(c->in, c->head, c->in_size);
                                continue;
                        }
                        into = c->head + c->in_size;
                        want = sizeof(c->head) - c->in_size;
                } else {
                        if (wire_frame_peek(c->in, c->in_size, &frame_size) == 0)
                                return 1;
                        into = c->in + c->in_size;
                        want = wire_frame_wanted(c->in, c->in_size) - c->in_size;
                }
                n = recv(c->fd, into, want, MSG_DONTWAIT);
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

        if (c->trailing || c->read_past)
                return c->trailing;
        /* the frame was read to its end exactly: look past it */
        return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

static void connection_on_request(Connection *c) {
        Request *req = &c->request;
        WireMessage m;
        int r;

        c->state = CONNECTION_WORKING;
        connection_unwatch(c);

        if (!request_admit(req)) {
                request_reply_too_many(req);
                return;
        }
        if (connection_has_trailing_bytes(c)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "bytes after the request");
                return;
        }
        r = wire_message_decode(c->in, c->in_size, &m);
        if (r == WIRE_E_VERSION) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_UNSUPPORTED_VERSION,
                                    "unsupported protocol version");
                return;
        }
        if (r != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "malformed request");
                return;
        }
        req->policy = policy_ref(c->broker->policy);
        r = connection_set_deadline(c, c->broker->config.runtime_timeout_usec * 2);
        if (r < 0) {
                request_reply_errno(req, r, "cannot set the request's deadline");
                return;
        }
        c->broker->dispatch(req, &m);
}

static void connection_on_readable(Connection *c) {
        int r;

        /* only a connection that still reads its request reads: connection_start() and connection_on_io() */
        assert(c->state == CONNECTION_READING);
        r = connection_read_frame(c);
        if (r == 0) {
                if (!c->io && connection_watch(c, EPOLLIN) < 0)
                        connection_release(c); /* as when it could not be watched from the start */
                return;
        }
        if (r == 1) {
                connection_on_request(c);
                return;
        }
        /* a connection that closed without sending anything asked for nothing: no decision */
        if (r == -ECONNRESET && c->in_size == 0) {
                connection_release(c);
                return;
        }
        c->state = CONNECTION_WORKING;
        connection_unwatch(c);
        request_reply_error(&c->request, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                            r == -EBADMSG ? "malformed request" : "incomplete request");
}

static int connection_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Connection *c = userdata;

        switch (c->state) {
        case CONNECTION_READING:
                connection_on_readable(c);
                break;
        case CONNECTION_WRITING:
                if (connection_write_some(c)) {
                        connection_discard_input(c);
                        connection_release(c);
                }
                break;
        case CONNECTION_WORKING:
                if (c->owing && (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                        /* done when it is out, or when the client is gone (the command learns that itself) */
                        c->owing = !connection_write_some(c);
                        if (!c->owing) {
                                test_hook_note("what was owed %s", c->out_size == c->out_sent
                                                                            ? "went out while the request worked"
                                                                            : "stays: the client is gone");
                                (void)connection_rewatch(c);
                        }
                }
                if (c->on_client_event && (revents & (c->client_events | EPOLLERR | EPOLLHUP)))
                        c->on_client_event(&c->request, revents);
                break;
        case CONNECTION_RELEASED:
                break;
        }
        return 0;
}

void connection_start(Connection *c) {
        connection_on_readable(c);
}

static int connection_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Connection *c = userdata;

        switch (c->state) {
        case CONNECTION_READING:
                if (c->in_size == 0) {
                        connection_release(c);
                        break;
                }
                c->state = CONNECTION_WORKING;
                connection_unwatch(c);
                request_reply_error(&c->request, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "the request did not arrive in time");
                break;
        case CONNECTION_WORKING:
                /* backstop only: commands give up on their own deadlines first */
                if (c->request.job)
                        test_hook_note("a request's deadline came while its job ran, about pid %d",
                                       c->request.target ? (int)c->request.target->pid : 0);
                request_cancel_work(&c->request);
                request_reply_errno(&c->request, -ETIMEDOUT, "the request did not finish in time");
                break;
        case CONNECTION_WRITING:
                connection_release(c);
                break;
        case CONNECTION_RELEASED:
                break;
        }
        return 0;
}
