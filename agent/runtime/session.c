/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Trace, counters, stacks, exceptions and logs sessions (session.h): owns each session's runtime
 * connection and relay pipe, and a trace's or gcdump's copy for its rule's egress store (session-copy.h);
 * commands.c and proxy.c start them.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/loop/broker-state.h"
#include "agent/runtime/command-steps.h"
#include "agent/decide/decision.h"
#include "common/dotnet-ipc.h"
#include "policy/ipc-policy.h"
#include "common/ipc-request.h"
#include "eventpipe/monitor-config.h"
#include "agent/runtime/runtime-call.h"
#include "eventpipe/session-config.h"
#include "agent/ports/ports.h"
#include "agent/runtime/session.h"
#include "agent/runtime/session-copy.h"
#include "agent/dumps/dump.h"
#include "agent/dumps/dump-publish.h"
#include "agent/ports/startup.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"
#include "common/unaligned.h"

#define USEC_PER_SEC 1000000ULL
/* A pipe this large lets one splice move a whole runtime block (about 100 KiB) and more. */
#define SESSION_PIPE_SIZE (1 << 20)
#define SESSION_SPLICE_MAX (1 << 20)
/* Then the loop serves others: a busy session must not starve the agent. */
#define SESSION_SPLICES_PER_WAKEUP 16
/* After StopTracing the runtime writes its rundown, then ends the stream. */
#define SESSION_STOP_GRACE_USEC (60 * USEC_PER_SEC)
/*
 * How long the client's pipe may stay full. While the session runs, the
 * runtime only drops events behind a slow reader; after a stop its
 * diagnostics thread blocks in the rundown write, so there the wait is short.
 * A client that stalls longer is cut: the agent stops the session and drains
 * the rest of the stream itself.
 */
#define SESSION_CLIENT_STALL_USEC (10 * USEC_PER_SEC)
#define SESSION_CLIENT_STALL_STOPPING_USEC (1 * USEC_PER_SEC)
/* A gcdump's copy: once its stream has ended, the worker has this long more to write the .gcdump. */
#define SESSION_GCDUMP_WRITE_USEC (120 * USEC_PER_SEC)
/* The reply waits this long at most for the copy's worker once the stream has ended: dsctl waits 60 s for the
 * session's last word. A trace's worker only drains its pipe; a gcdump's writes the .gcdump of the heap. */
#define SESSION_COPY_FINISH_USEC (30 * USEC_PER_SEC)

typedef struct Session {
        Request *request;
        const char *kind; /* "trace" or "counters", as the policy names the command */
        EventPipeConfig config;
        PolicyProvider *policy_providers;
        char *providers_text;
        char *profile;
        uint32_t buffer_mb;
        uint32_t buffer_asked_mb;     /* 0: not asked, the default applies */
        uint64_t duration_asked_usec;
        uint64_t duration_limit_usec;
        uint64_t size_limit;

        RuntimeCall *start_call, *stop_call;
        PortWaiter *stop_waiter;      /* StopTracing waits for the runtime's next connection to its port */
        uint64_t runtime_session_id; /* never leaves the agent */
        bool started;
        int stream_fd;
        int pipe_fd; /* write end; the client holds the read end */
        sd_event_source *stream_source, *pipe_source, *timer;
        sd_event_source *stall_timer; /* armed while the client's pipe is full */
        uint64_t started_usec;
        uint64_t bytes;
        const char *how;
        bool stopping, stop_ok, stream_ended, client_gone, cut;
        bool client_stalled;    /* cut for not reading: the rest of the stream was discarded */
        bool admitted;          /* counted as running (admission.h) */
        bool end_recorded;      /* its end record is written: once */
        AdmissionKey key;
        PolicyCommand command;
        size_t n_policy_providers;
        uint8_t *collect;       /* the CollectTracing request, encoded once decided */
        size_t collect_size;
        bool proxied;           /* a tool's session (dsctl port): its stream starts with the tool's reply */
        IpcTracingShape shape;  /* and what it is by its shape */
        size_t n_trace_providers;  /* a shape that may be a trace too: policy_providers as a trace's */
        uint32_t proxy_buffer_asked_mb; /* the buffer the tool asked for, before a gcdump's is bounded */
        uint64_t proxy_session_id; /* the id the tool is told; the runtime's stays here */
        const char *ipc_command;   /* and its CollectTracing version, for the records */
        char *ipc_options;         /* what it asked for besides providers and buffer, for the records */

        /* A trace or gcdump under a rule with egress: dump_dir keeps a copy for the store (session-copy.h). The
         * stream goes through the relay pipe: teed into the copy's pipe, then moved into the client's, so the
         * client gets what the copy got, and neither buffers more than its pipe. */
        SessionCopy *copy;
        int copy_fd;            /* the copy's pipe, write end; -EBADF once closed (the stream ended, or the
                                 * copy was dropped: the client's stream goes on) */
        int relay_read, relay_write;
        size_t relay_bytes;     /* in the relay pipe */
        size_t copy_ahead;      /* of them, at its head, already teed into the copy's pipe */
        sd_event_source *copy_source;
        sd_event_source *copy_stall_timer; /* armed while the copy's pipe is full */
        bool finish_waiting;    /* the stream is over; the reply waits for the copy's worker */
        char copy_text[PATH_MAX + 128]; /* what became of the copy, for the request's record */
} Session;

/* The session no longer runs in the runtime, or never did: it stops counting against the limits. */
static void session_release_slot(Session *s) {
        if (s->admitted)
                admission_end(s->request->broker->admission, ADMISSION_SESSION, &s->key);
        s->admitted = false;
}

static void session_finish(Session *s);
static void session_pump(Session *s);
static int session_audit(Session *s, bool ended);

/*
 * A connection to the runtime right now, for a StopTracing sent without
 * waiting: its socket, or the connection its port holds idle (none waits
 * for the next one here). Return: 0, or non-zero when there is none.
 */
static int session_connect_now(Session *s, int *ret_fd, const char **ret_why) {
        Request *req = s->request;
        PortRuntime *rt = ports_find(req->broker->ports, req->target);
        PortWaiter *w = NULL;
        int r;

        if (!rt)
                return target_connect(req->target, ret_fd, ret_why);
        r = ports_connect(rt, NULL, NULL, ret_fd, &w);
        if (r == PORTS_WAITING)
                ports_waiter_cancel(w);
        return r;
}

/* Stops a session nobody will see the end of (the agent is shutting down):
 * without its reader the runtime's next write fails, and the StopTracing
 * sent without waiting ends it even when nothing more is written. */
static void session_abandon(Session *s) {
        uint8_t request[DOTNET_IPC_HEADER_SIZE + 8];
        const char *why;
        size_t size;
        int fd;

        s->stream_fd = safe_close(s->stream_fd);
        if (!s->request->target || session_connect_now(s, &fd, &why) != 0)
                return;
        if (dotnet_ipc_stop_tracing_encode(s->runtime_session_id, request, sizeof(request), &size) == 0)
                (void)send(fd, request, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        safe_close(fd);
}

static void session_free(void *p) {
        Session *s = p;

        if (!s)
                return;
        if (s->started && !s->stream_ended)
                session_abandon(s);
        if (s->started && !s->end_recorded) {
                /* the agent stops, or the request's backstop came: its start was recorded, so is its end */
                s->how = "cancelled";
                s->cut = true;
                (void)session_audit(s, true);
        }
        session_release_slot(s);
        runtime_call_free(s->start_call);
        runtime_call_free(s->stop_call);
        ports_waiter_cancel(s->stop_waiter);
        sd_event_source_disable_unref(s->stream_source);
        sd_event_source_disable_unref(s->pipe_source);
        sd_event_source_disable_unref(s->timer);
        sd_event_source_disable_unref(s->stall_timer);
        sd_event_source_disable_unref(s->copy_source);
        sd_event_source_disable_unref(s->copy_stall_timer);
        safe_close(s->stream_fd);
        safe_close(s->pipe_fd);
        safe_close(s->copy_fd);
        safe_close(s->relay_read);
        safe_close(s->relay_write);
        session_copy_free(s->copy);
        eventpipe_config_done(&s->config);
        free(s->policy_providers);
        free(s->providers_text);
        free(s->profile);
        free(s->collect);
        free(s->ipc_options);
        free(s);
}

static Session *session_new(Request *req, const char *kind) {
        Session *s = calloc(1, sizeof(*s));

        if (!s) {
                request_reply_oom(req);
                return NULL;
        }
        s->request = req;
        s->kind = kind;
        s->stream_fd = -EBADF;
        s->pipe_fd = -EBADF;
        s->copy_fd = -EBADF;
        s->relay_read = -EBADF;
        s->relay_write = -EBADF;
        req->work = s;
        req->work_free = session_free;
        req->audit_records = 3; /* the session's start and end, then the request's */
        return s;
}

static int arm_oneshot(sd_event_source *timer, sd_event *event, uint64_t usec_from_now) {
        uint64_t now;
        int r;

        r = sd_event_now(event, CLOCK_MONOTONIC, &now);
        if (r >= 0)
                r = sd_event_source_set_time(timer, now + usec_from_now);
        if (r >= 0)
                r = sd_event_source_set_enabled(timer, SD_EVENT_ONESHOT);
        return r < 0 ? r : 0;
}

static void session_arm_timer(Session *s, uint64_t usec_from_now) {
        if (arm_oneshot(s->timer, s->request->broker->event, usec_from_now) < 0)
                s->cut = true; /* without a deadline the session could run forever: end it */
}

/* The client's pipe is full: from now on it has this long to read. */
static void session_arm_stall(Session *s, bool restart) {
        int enabled = SD_EVENT_OFF;

        (void)sd_event_source_get_enabled(s->stall_timer, &enabled);
        if (enabled != SD_EVENT_OFF && !restart)
                return;
        if (arm_oneshot(s->stall_timer, s->request->broker->event,
                        s->stopping ? SESSION_CLIENT_STALL_STOPPING_USEC : SESSION_CLIENT_STALL_USEC) < 0)
                s->cut = true;
}

static void session_stop_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        Session *s = userdata;

        s->stop_ok = error == 0 && reply->ok;
        s->stop_call = runtime_call_free(call);
        if (s->stream_ended)
                session_finish(s);
}

/*
 * Asks the runtime, on a second connection, to end the session. The runtime
 * then writes its rundown and the end of the stream before it answers, so
 * the relay keeps draining meanwhile; the grace timer bounds the wait.
 */
static void session_send_stop(Session *s, int fd) {
        Request *req = s->request;
        uint8_t request[DOTNET_IPC_HEADER_SIZE + 8];
        size_t size;
        int r;

        r = dotnet_ipc_stop_tracing_encode(s->runtime_session_id, request, sizeof(request), &size);
        if (r == 0)
                r = runtime_call_start(req->broker->event, fd, request, size, req->broker->config.runtime_timeout_usec,
                                       session_stop_done, s, &s->stop_call);
        else
                safe_close(fd);
        if (r != 0)
                s->stop_call = NULL;
}

/* The runtime's next connection to its port, for StopTracing; none: the grace timer ends the session. */
static void session_stop_port_connected(int fd, int error, void *userdata) {
        Session *s = userdata;

        s->stop_waiter = NULL;
        if (fd >= 0)
                session_send_stop(s, fd);
}

static void session_stop(Session *s, const char *how) {
        Request *req = s->request;
        PortRuntime *rt;
        const char *why;
        int fd = -EBADF, r;

        if (s->stopping)
                return;
        s->stopping = true;
        s->how = how;
        session_arm_timer(s, SESSION_STOP_GRACE_USEC);
        if (!s->client_gone && sd_event_source_get_enabled(s->stall_timer, NULL) > 0)
                session_arm_stall(s, true); /* the runtime now blocks on the client: shorten the wait */
        rt = ports_find(req->broker->ports, req->target);
        if (rt)
                r = ports_connect(rt, session_stop_port_connected, s, &fd, &s->stop_waiter);
        else
                r = target_connect(req->target, &fd, &why);
        if (r != 0)
                return; /* waiting for the port's next connection, or the process is going away */
        session_send_stop(s, fd);
}

static void session_end_stream(Session *s) {
        s->stream_ended = true;
        s->stall_timer = sd_event_source_disable_unref(s->stall_timer);
        s->stream_source = sd_event_source_disable_unref(s->stream_source);
        s->pipe_source = sd_event_source_disable_unref(s->pipe_source);
        s->stream_fd = safe_close(s->stream_fd);
        s->pipe_fd = safe_close(s->pipe_fd); /* the client reads to the end of the pipe, then sees EOF */
        s->copy_source = sd_event_source_disable_unref(s->copy_source);
        s->copy_stall_timer = sd_event_source_disable_unref(s->copy_stall_timer);
        s->copy_fd = safe_close(s->copy_fd); /* and the copy's worker, to the end of its own */
        s->relay_read = safe_close(s->relay_read);
        s->relay_write = safe_close(s->relay_write);
}

static void session_stream_ended(Session *s) {
        if (!s->stopping) {
                /* the runtime ended it: the process is exiting, or the session failed */
                s->stopping = true;
                s->how = "target-ended";
        }
        session_end_stream(s);
        if (!s->stop_call)
                session_finish(s);
}

/* Closing the stream makes the runtime's next write fail, which ends its session. */
static void session_cut(Session *s, const char *how) {
        s->cut = true;
        s->how = how;
        s->stop_call = runtime_call_free(s->stop_call);
        session_end_stream(s);
        session_finish(s);
}

static void session_client_gone(Session *s) {
        s->client_gone = true;
        s->stall_timer = sd_event_source_disable_unref(s->stall_timer);
        s->pipe_source = sd_event_source_disable_unref(s->pipe_source);
        s->pipe_fd = safe_close(s->pipe_fd);
        (void)connection_watch_client(s->request->connection, 0, NULL);
        (void)sd_event_source_set_enabled(s->stream_source, SD_EVENT_ON);
        session_stop(s, "client-gone");
}

/*
 * A client that leaves its pipe full too long is cut, and audited so: the
 * pipe is closed (it reads what is in it, then the end), the session is
 * stopped, and the rest of the stream is read and discarded here, so that the
 * runtime's rundown never waits on this client.
 */
static void session_client_stalled(Session *s) {
        s->client_stalled = true;
        session_client_gone(s);
        s->how = "client-stalled";
}

static int session_on_stall(sd_event_source *source, uint64_t usec, void *userdata) {
        Session *s = userdata;

        session_client_stalled(s);
        session_pump(s);
        return 0;
}

/* Which end to wait for: the runtime's data, or room in the client's pipe. */
static void session_wait(Session *s) {
        struct pollfd p = { .fd = s->pipe_fd, .events = POLLOUT };
        bool pipe_full = !s->client_gone && poll(&p, 1, 0) == 0;

        (void)sd_event_source_set_enabled(s->stream_source, pipe_full ? SD_EVENT_OFF : SD_EVENT_ON);
        if (s->pipe_source)
                (void)sd_event_source_set_enabled(s->pipe_source, pipe_full ? SD_EVENT_ON : SD_EVENT_OFF);
        if (pipe_full)
                session_arm_stall(s, false);
        else if (s->stall_timer)
                (void)sd_event_source_set_enabled(s->stall_timer, SD_EVENT_OFF);
}

static void session_account(Session *s, size_t n) {
        s->bytes += n;
        if (!s->stopping && s->bytes >= s->size_limit)
                session_stop(s, "size-limit");
        if (s->bytes >= s->size_limit + EVENTPIPE_RUNDOWN_BYTES_MAX)
                session_cut(s, "size-exceeded");
}

/* Without a client the stream is still drained, so that the stop completes. */
static ssize_t session_discard(Session *s) {
        char buf[65536];
        return recv(s->stream_fd, buf, sizeof(buf), MSG_DONTWAIT);
}

/* ---- with a copy for the rule's egress store ---- */

typedef enum SessionWaitFor {
        SESSION_WAIT_STREAM,    /* the relay is empty: the runtime's next bytes */
        SESSION_WAIT_CLIENT,    /* room in the client's pipe */
        SESSION_WAIT_COPY,      /* room in the copy's pipe */
} SessionWaitFor;

/* The copy's worker stopped reading (dump_dir's guards, its deadline, a failure): the copy is dropped, its
 * outcome says why, and the client's stream goes on alone. */
static void session_copy_dropped(Session *s) {
        s->copy_source = sd_event_source_disable_unref(s->copy_source);
        s->copy_stall_timer = sd_event_source_disable_unref(s->copy_stall_timer);
        s->copy_fd = safe_close(s->copy_fd);
        s->copy_ahead = 0;
}

/* Which end to wait for, when the stream goes through the relay pipe. */
static void session_wait_relay(Session *s, SessionWaitFor what) {
        (void)sd_event_source_set_enabled(s->stream_source, what == SESSION_WAIT_STREAM ? SD_EVENT_ON : SD_EVENT_OFF);
        if (s->pipe_source)
                (void)sd_event_source_set_enabled(s->pipe_source, what == SESSION_WAIT_CLIENT ? SD_EVENT_ON : SD_EVENT_OFF);
        if (s->copy_source)
                (void)sd_event_source_set_enabled(s->copy_source, what == SESSION_WAIT_COPY ? SD_EVENT_ON : SD_EVENT_OFF);
        if (what == SESSION_WAIT_CLIENT && !s->client_gone)
                session_arm_stall(s, false);
        else if (s->stall_timer)
                (void)sd_event_source_set_enabled(s->stall_timer, SD_EVENT_OFF);
        if (what == SESSION_WAIT_COPY && s->copy_stall_timer &&
            sd_event_source_get_enabled(s->copy_stall_timer, NULL) == 0 &&
            arm_oneshot(s->copy_stall_timer, s->request->broker->event,
                        s->stopping ? SESSION_CLIENT_STALL_STOPPING_USEC : SESSION_CLIENT_STALL_USEC) < 0) {
                /* without a deadline a stuck worker could hold the session: no copy, and the stream wakes the relay */
                session_copy_dropped(s);
                (void)sd_event_source_set_enabled(s->stream_source, SD_EVENT_ON);
        }
}

/* The client is gone: the bytes it would have had are read and dropped. */
static ssize_t session_relay_discard(Session *s, size_t n) {
        char buf[65536];

        return read(s->relay_read, buf, n < sizeof(buf) ? n : sizeof(buf));
}

/*
 * As session_pump(), through the relay pipe: the runtime's bytes are spliced into it, teed into the copy's
 * pipe (the bytes are shared, not copied), then spliced into the client's. tee() always starts at the head
 * of the relay: so the client is given only what the copy has (copy_ahead), and the copy is teed again only
 * once the client has taken all of that. Neither end ever gets a byte twice or misses one; a full end holds
 * the stream back, as a slow client alone does.
 */
static void session_pump_relay(Session *s) {
        for (unsigned i = 0; i < SESSION_SPLICES_PER_WAKEUP && !s->stream_ended; i++) {
                size_t to_client;
                ssize_t n;

                if (s->relay_bytes == 0) {
                        n = splice(s->stream_fd, NULL, s->relay_write, NULL, SESSION_SPLICE_MAX,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                        if (n > 0) {
                                s->relay_bytes = (size_t)n;
                                session_account(s, (size_t)n);
                                continue;
                        }
                        if (n == 0) {
                                session_stream_ended(s);
                                return;
                        }
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                session_wait_relay(s, SESSION_WAIT_STREAM);
                                return;
                        }
                        session_stream_ended(s); /* the runtime reset the connection */
                        return;
                }
                if (s->copy_fd >= 0 && s->copy_ahead == 0) {
                        n = tee(s->relay_read, s->copy_fd, s->relay_bytes, SPLICE_F_NONBLOCK);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN) {
                                session_wait_relay(s, SESSION_WAIT_COPY);
                                return;
                        }
                        if (n > 0) {
                                s->copy_ahead = (size_t)n;
                                if (s->copy_stall_timer) /* it reads */
                                        (void)sd_event_source_set_enabled(s->copy_stall_timer, SD_EVENT_OFF);
                        } else
                                session_copy_dropped(s); /* EPIPE: its worker has stopped reading */
                }
                to_client = s->copy_fd >= 0 ? s->copy_ahead : s->relay_bytes;
                if (s->client_gone)
                        n = session_relay_discard(s, to_client);
                else
                        n = splice(s->relay_read, NULL, s->pipe_fd, NULL, to_client, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n > 0) {
                        if (!s->client_gone && s->stall_timer)
                                (void)sd_event_source_set_enabled(s->stall_timer, SD_EVENT_OFF); /* it reads */
                        s->relay_bytes -= (size_t)n;
                        s->copy_ahead = s->copy_ahead > (size_t)n ? s->copy_ahead - (size_t)n : 0;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN && !s->client_gone) {
                        session_wait_relay(s, SESSION_WAIT_CLIENT);
                        return;
                }
                if (n < 0 && errno == EPIPE && !s->client_gone) {
                        session_client_gone(s);
                        continue;
                }
                session_cut(s, "agent-error"); /* the relay pipe failed: never happens */
                return;
        }
}

/*
 * Moves the stream from the runtime's socket into the client's pipe with
 * splice(): the bytes never pass through the agent's memory. A full pipe
 * stops the reading, so a slow client slows the session down instead of
 * growing a buffer here; the runtime then drops events, as it does for any
 * slow reader.
 */
static void session_pump(Session *s) {
        if (s->relay_read >= 0) {
                session_pump_relay(s);
                return;
        }
        for (unsigned i = 0; i < SESSION_SPLICES_PER_WAKEUP && !s->stream_ended; i++) {
                ssize_t n;

                if (s->client_gone)
                        n = session_discard(s);
                else
                        n = splice(s->stream_fd, NULL, s->pipe_fd, NULL, SESSION_SPLICE_MAX,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (n > 0) {
                        if (!s->client_gone && s->stall_timer)
                                (void)sd_event_source_set_enabled(s->stall_timer, SD_EVENT_OFF); /* it reads */
                        session_account(s, (size_t)n);
                        continue;
                }
                if (n == 0) {
                        session_stream_ended(s);
                        return;
                }
                if (errno == EINTR)
                        continue;
                if (errno == EAGAIN) {
                        session_wait(s);
                        return;
                }
                if (errno == EPIPE && !s->client_gone) {
                        session_client_gone(s);
                        continue;
                }
                session_stream_ended(s); /* the runtime reset the connection */
                return;
        }
}

static int session_on_stream(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        session_pump(userdata);
        return 0;
}

static int session_on_pipe(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Session *s = userdata;

        if (revents & EPOLLERR) {
                session_client_gone(s);
                if (s->relay_read >= 0)
                        session_pump(s); /* what the relay holds still goes to the copy */
                return 0;
        }
        session_pump(s);
        return 0;
}

static int session_on_copy(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        session_pump(userdata);
        return 0;
}

/*
 * The copy's pipe stayed full as long as a client's may (a worker stuck on a slow disk, or stopped): the copy
 * is dropped, as one dump_dir cannot hold is, so that it never holds the client's session or the runtime's
 * rundown. What its worker wrote is not the whole stream, and a stopped worker would hold the reply: it goes.
 */
static int session_on_copy_stall(sd_event_source *source, uint64_t usec, void *userdata) {
        Session *s = userdata;

        session_copy_dropped(s);
        s->copy = session_copy_free(s->copy);
        snprintf(s->copy_text, sizeof(s->copy_text),
                 "; no copy kept for egress: its worker did not keep up with the stream");
        session_pump(s);
        return 0;
}

static int session_on_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Session *s = userdata;

        if (s->finish_waiting) {
                /* the copy's worker did not finish in time: the client is answered without it */
                s->finish_waiting = false;
                s->copy = session_copy_free(s->copy);
                snprintf(s->copy_text, sizeof(s->copy_text),
                         "; no copy kept for egress: its worker did not finish within %llu s of the stream's end",
                         (unsigned long long)(SESSION_COPY_FINISH_USEC / USEC_PER_SEC));
                session_finish(s);
                return 0;
        }
        if (!s->stopping)
                session_stop(s, s->duration_asked_usec > 0 ? "duration" : "duration-limit");
        else if (!s->stream_ended)
                session_cut(s, "stop-timeout");
        else
                session_finish(s); /* the stream ended; the stop's answer is not needed */
        return 0;
}

/*
 * The client ends a session by shutting down its side of the socket
 * (Ctrl-C in dsctl), and goes away by closing it. After the shutdown only a
 * hang-up still matters.
 */
static void session_on_client(Request *req, uint32_t revents) {
        Session *s = req->work;
        char b;
        ssize_t n;

        if (revents & (EPOLLHUP | EPOLLERR)) {
                session_client_gone(s);
                if (s->relay_read >= 0)
                        session_pump(s); /* what the relay holds still goes to the copy */
                return;
        }
        n = recv(req->connection->fd, &b, 1, MSG_DONTWAIT);
        if (n < 0 && errno == EAGAIN)
                return;
        if (n < 0) {
                session_client_gone(s);
                if (s->relay_read >= 0)
                        session_pump(s);
                return;
        }
        (void)connection_watch_client(req->connection, 0, session_on_client);
        session_stop(s, "stopped");
}

static int session_audit(Session *s, bool ended) {
        Request *req = s->request;
        uint64_t now = 0;
        AuditSessionEvent e = {
                .ended = ended,
                .request_id = req->id,
                .requester = req->peer->uid,
                .target_pid = req->target->pid,
                .target_uid = target_euid(req->target),
                .target_unit = req->target->unit,
                .target_exe = req->target->exe,
                .target_container_id = req->target->container_id,
                .target_pod_uid = req->target->pod_uid,
                .target_cgroup = req->target->cgroup,
                .target_cgroup_vouched = req->target->cgroup_vouched,
                .rule = req->verdict.rule_name,
                .kind = s->kind,
                .profile = s->profile,
                .providers = s->providers_text,
                .ipc_command = s->ipc_command,
                .ipc_options = s->ipc_options,
                .buffer_mb = s->buffer_asked_mb,
                .duration_limit_usec = s->duration_limit_usec,
                .size_limit = s->size_limit,
                .bytes = s->bytes,
                .how = s->how,
                .complete = s->stop_ok && !s->cut && !s->client_stalled,
                .reservation = &req->audit_room,
        };

        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &now);
        e.duration_usec = now - s->started_usec;
        if (ended) {
                if (s->end_recorded)
                        return 0;
                s->end_recorded = true;
        }
        return audit_log_session(req->broker->config.audit_sink, &e);
}

/* The copy's worker is done: published as a dump is, or s->copy_text says why there is none. */
static void session_keep_copy(Session *s) {
        const char *why = NULL;
        char path[PATH_MAX];
        uint64_t size;
        int dir_fd, file_fd, r;

        if (!session_copy_result(s->copy, &dir_fd, &file_fd, &size, &why)) {
                snprintf(s->copy_text, sizeof(s->copy_text), "; no copy kept for egress: %s", why);
                return;
        }
        r = dump_publish_session_copy(s->request, dir_fd, file_fd, s->kind,
                                      s->command == POLICY_COMMAND_GCDUMP ? ".gcdump" : ".nettrace", size, path,
                                      sizeof(path));
        if (r == 0)
                snprintf(s->copy_text, sizeof(s->copy_text), "; kept as %s for egress", path);
        else
                snprintf(s->copy_text, sizeof(s->copy_text), "; no copy kept for egress: %s",
                         r == DUMP_PUBLISH_E_NO_SPACE ? "dump_dir filled up as it was named"
                         : r < 0                      ? strerror(-r)
                                                      : "cannot publish it");
}

/* The copy's worker is done; a finished session waits for it, with its reply. */
static void session_copy_done(void *userdata) {
        Session *s = userdata;

        if (s->finish_waiting) {
                s->finish_waiting = false;
                session_finish(s);
        }
}

static void session_finish(Session *s) {
        Request *req = s->request;
        _cleanup_free_ WireWriter *w = NULL;
        char reason[160 + sizeof(s->copy_text)];
        bool complete = s->stop_ok && !s->cut && !s->client_stalled;

        session_release_slot(s);
        (void)connection_watch_client(req->connection, 0, NULL);
        (void)session_audit(s, true); /* a lost end record cannot undo the session; the request record says it */
        if (s->copy && !s->cut && !session_copy_ended(s->copy)) {
                /* the stream is over and its pipe closed: the worker writes what it has; the reply waits for it,
                 * within a deadline dsctl's wait for the session's last word outlasts */
                if (arm_oneshot(s->timer, req->broker->event, SESSION_COPY_FINISH_USEC) >= 0) {
                        s->finish_waiting = true;
                        return;
                }
                s->copy = session_copy_free(s->copy);
                snprintf(s->copy_text, sizeof(s->copy_text), "; no copy kept for egress: no deadline for its worker");
        }
        s->timer = sd_event_source_disable_unref(s->timer);
        if (s->copy && !s->cut)
                session_keep_copy(s);

        snprintf(reason, sizeof(reason), "%s session ended (%s) after %llu bytes%s%s", s->kind, s->how,
                 (unsigned long long)s->bytes, complete ? "" : ", incomplete", s->copy_text);
        if (s->cut) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_FAILED, reason);
                return;
        }
        w = malloc(sizeof(*w));
        if (w) {
                wire_writer_begin(w, WIRE_REPLY_SESSION_END);
                wire_writer_put_u64(w, WIRE_TAG_SIZE, s->bytes);
                wire_writer_put_string(w, WIRE_TAG_ENDED, s->how);
                wire_writer_put_u32(w, WIRE_TAG_COMPLETE, complete);
                (void)connection_queue_frame(req->connection, w);
        }
        request_reply_done(req, req->verdict.rule_name, reason);
}

/* Tells the client the session runs, and hands it the pipe's read end. */
static int session_announce(Session *s, int pipe_read_fd) {
        Request *req = s->request;
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));

        if (!w)
                return -ENOMEM;
        wire_writer_begin(w, WIRE_REPLY_STREAM);
        wire_writer_put_u64(w, WIRE_TAG_REQUEST_ID, req->id);
        /* cut to what a frame holds: long provider arguments must not fail the announcement */
        commands_put_untrusted_string(w, WIRE_TAG_PROVIDERS, s->providers_text);
        if (req->target) /* counters: the process dsctl names in its rows (TargetProcess) */
                wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)req->target->pid);
        wire_writer_put_u64(w, WIRE_TAG_DURATION, s->duration_limit_usec / USEC_PER_SEC);
        wire_writer_put_u64(w, WIRE_TAG_SIZE_LIMIT, s->size_limit);
        wire_writer_put_u32(w, WIRE_TAG_BUFFER_MB, s->buffer_mb);
        if (s->proxied) {
                uint8_t reply[DOTNET_IPC_HEADER_SIZE + 8], id[8];
                size_t size;
                int r;

                unaligned_write_le64(id, s->proxy_session_id);
                r = ipc_request_reply_ok_encode(id, sizeof(id), reply, sizeof(reply), &size);
                if (r != 0)
                        return r < 0 ? r : -EINVAL;
                wire_writer_put_bytes(w, WIRE_TAG_IPC_MESSAGE, reply, size);
        }
        return connection_send_frame_now(req->connection, w, pipe_read_fd);
}

static int session_setup_relay(Session *s, int pipe_read_fd) {
        Request *req = s->request;
        sd_event *event = req->broker->event;
        int r;

        r = sd_event_add_io(event, &s->stream_source, s->stream_fd, EPOLLIN, session_on_stream, s);
        if (r >= 0)
                r = sd_event_add_io(event, &s->pipe_source, s->pipe_fd, EPOLLOUT, session_on_pipe, s);
        if (r >= 0)
                r = sd_event_source_set_enabled(s->pipe_source, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_time(event, &s->timer, CLOCK_MONOTONIC, 0, 0, session_on_timer, s);
        if (r >= 0)
                r = sd_event_add_time(event, &s->stall_timer, CLOCK_MONOTONIC, 0, 0, session_on_stall, s);
        if (r >= 0)
                r = sd_event_source_set_enabled(s->stall_timer, SD_EVENT_OFF);
        if (r >= 0 && s->copy_fd >= 0)
                r = sd_event_add_io(event, &s->copy_source, s->copy_fd, EPOLLOUT, session_on_copy, s);
        if (r >= 0 && s->copy_source)
                r = sd_event_source_set_enabled(s->copy_source, SD_EVENT_OFF);
        if (r >= 0 && s->copy_source)
                r = sd_event_add_time(event, &s->copy_stall_timer, CLOCK_MONOTONIC, 0, 0, session_on_copy_stall, s);
        if (r >= 0 && s->copy_stall_timer)
                r = sd_event_source_set_enabled(s->copy_stall_timer, SD_EVENT_OFF);
        if (r < 0)
                return r;
        session_arm_timer(s, s->duration_limit_usec);
        /* the connection's own deadline is only a backstop behind the session's */
        r = connection_set_deadline(req->connection, s->duration_limit_usec + SESSION_STOP_GRACE_USEC +
                                               2 * req->broker->config.runtime_timeout_usec +
                                               (s->copy ? SESSION_COPY_FINISH_USEC : 0));
        if (r < 0)
                return r;
        if (session_announce(s, pipe_read_fd) < 0) {
                session_client_gone(s);
                return 0;
        }
        return connection_watch_client(req->connection, EPOLLIN | EPOLLRDHUP, session_on_client);
}

/* dsctl's trace or gcdump (not a tool's through the proxy) under a rule that names an egress store */
static bool session_wants_copy(const Session *s) {
        const PolicyRule *rule = s->request->verdict.rule;

        return !s->proxied && rule && rule->egress &&
               (s->command == POLICY_COMMAND_TRACE || s->command == POLICY_COMMAND_GCDUMP);
}

/*
 * A trace or a gcdump under a rule that names an egress store: the copy's worker, and the relay pipe the
 * stream goes through (session_pump_relay()). A copy that cannot start is not kept (s->copy_text says
 * why): the client's session goes on as without a store.
 */
static void session_start_copy(Session *s) {
        Request *req = s->request;
        const char *why = NULL;
        int fds[2], r;

        if (!session_wants_copy(s))
                return;
        r = session_copy_start(&(SessionCopyParams){
                        .broker = req->broker, .policy = req->policy, .gcdump = s->command == POLICY_COMMAND_GCDUMP,
                        .owner = req->peer->charged_uid,
                        /* a trace's worker reads the rundown's allowance past it itself; a gcdump's does not */
                        .max_bytes = s->command == POLICY_COMMAND_GCDUMP ? s->size_limit + EVENTPIPE_RUNDOWN_BYTES_MAX
                                                                         : s->size_limit,
                        .timeout_usec = s->duration_limit_usec + SESSION_STOP_GRACE_USEC +
                                        2 * req->broker->config.runtime_timeout_usec +
                                        (s->command == POLICY_COMMAND_GCDUMP ? SESSION_GCDUMP_WRITE_USEC : 0) },
                               session_copy_done, s, &s->copy, &s->copy_fd, &why);
        if (r != 0) {
                snprintf(s->copy_text, sizeof(s->copy_text), "; no copy kept for egress: %s (%s)", why,
                         r < 0 ? strerror(-r) : "no worker free");
                return;
        }
        if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
                snprintf(s->copy_text, sizeof(s->copy_text), "; no copy kept for egress: no relay pipe (%m)");
                s->copy = session_copy_free(s->copy);
                s->copy_fd = safe_close(s->copy_fd);
                return;
        }
        s->relay_read = fds[0];
        s->relay_write = fds[1];
        (void)fcntl(s->relay_write, F_SETPIPE_SZ, SESSION_PIPE_SIZE);
}

static void session_begin_relay(Session *s) {
        Request *req = s->request;
        _cleanup_close_ int pipe_read_fd = -EBADF;
        int fds[2], r;

        (void)sd_event_now(req->broker->event, CLOCK_MONOTONIC, &s->started_usec);
        if (pipe2(fds, O_CLOEXEC) < 0) {
                session_cut(s, "agent-error");
                return;
        }
        pipe_read_fd = fds[0];
        s->pipe_fd = fds[1];
        /* only the agent's end: the client gets an ordinary blocking pipe */
        if (fcntl(s->pipe_fd, F_SETFL, O_NONBLOCK) < 0) {
                session_cut(s, "agent-error");
                return;
        }
        (void)fcntl(s->pipe_fd, F_SETPIPE_SZ, SESSION_PIPE_SIZE);
        session_start_copy(s);

        if (session_audit(s, false) < 0) {
                session_cut(s, "audit-failed");
                return;
        }
        r = session_setup_relay(s, pipe_read_fd);
        if (r < 0 || s->cut)
                session_cut(s, "agent-error");
}

static void session_start_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        Session *s = userdata;
        Request *req = s->request;

        if (error != 0) {
                session_release_slot(s);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                       error == RUNTIME_CALL_E_TIMEOUT     ? "the runtime did not answer in time"
                                       : error == RUNTIME_CALL_E_MALFORMED ? "the runtime sent a malformed reply"
                                                                           : "the runtime closed the connection");
                return;
        }
        if (!reply->ok) {
                session_release_slot(s);
                request_reply_runtime_error(req, reply->hresult, "the runtime refused the session");
                return;
        }
        s->stream_fd = runtime_call_take_fd(call);
        if (dotnet_ipc_session_id_decode(reply, &s->runtime_session_id) != 0) {
                /* without its id the session can only be ended by closing its stream */
                s->start_call = runtime_call_free(call);
                session_release_slot(s);
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_RUNTIME_UNREACHABLE,
                                       "the runtime sent a malformed session reply");
                return;
        }
        s->start_call = runtime_call_free(call);
        s->started = true;
        session_begin_relay(s);
}

static void session_connected(Request *req, int fd) {
        Session *s = req->work;
        int r;

        r = runtime_call_start(req->broker->event, fd, s->collect, s->collect_size,
                               req->broker->config.runtime_timeout_usec, session_start_done, s, &s->start_call);
        if (r != 0) {
                session_release_slot(s);
                request_reply_errno(req, r < 0 ? r : -EINVAL, "cannot start the runtime call");
        }
}

/* What a session of this kind gives, for the words of an answer. */
static const char *session_what(const Session *s) {
        switch (s->command) {
        case POLICY_COMMAND_TRACE: return "a trace";
        case POLICY_COMMAND_STACKS: return "the stacks";
        case POLICY_COMMAND_GCDUMP: return "the heap dump";
        default: return s->kind; /* counters, exceptions, logs */
        }
}

static void session_decided(Request *req) {
        Session *s = req->work;
        const PolicyAgentSettings *a = &req->policy->agent;
        const char *why = NULL;
        int r;

        req->audit.rule = req->verdict.rule_name;
        if (!req->verdict.allowed) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED, req->verdict.reason);
                return;
        }
        /* a tool's trace, or one that named providers, is recorded as the profiles it was admitted as */
        if (s->command == POLICY_COMMAND_TRACE && !s->profile && req->verdict.trace_profiles[0]) {
                s->profile = strdup(req->verdict.trace_profiles);
                if (!s->profile) {
                        request_reply_oom(req);
                        return;
                }
        }
        s->key = (AdmissionKey){ .pid = req->target->pid, .start_time = req->target->start_time,
                                 .requester = req->peer->charged_uid };
        /* counted from now on, so that concurrent requests see it */
        r = admission_begin(req->broker->admission, ADMISSION_SESSION, &s->key,
                            &(AdmissionLimits){ .per_target = a->max_sessions_per_target,
                                                .per_requester = a->max_sessions_per_user },
                            &why);
        if (r != 0) {
                if (r == ADMISSION_E_BUSY)
                        request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY, why);
                else
                        request_reply_errno(req, r, "cannot count the session");
                return;
        }
        s->admitted = true;
        if (session_wants_copy(s))
                req->audit_records = 4; /* and the dump record of the copy kept for the rule's egress store */
        if (req->verdict.rule && req->verdict.rule->max_duration_usec > 0 &&
            req->verdict.rule->max_duration_usec < s->duration_limit_usec)
                s->duration_limit_usec = req->verdict.rule->max_duration_usec;
        test_hook_pause("after-decision");

        if (s->collect) { /* a tool's request, encoded from the values decided on */
                commands_connect_runtime(req, session_connected);
                return;
        }
        s->collect = malloc(DOTNET_IPC_MESSAGE_MAX);
        if (!s->collect) {
                request_reply_oom(req);
                return;
        }
        r = dotnet_ipc_collect_tracing_encode(&s->config, s->buffer_mb, s->collect, DOTNET_IPC_MESSAGE_MAX,
                                              &s->collect_size);
        if (r != 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "the session request is too large");
                return;
        }
        /* a session of a runtime suspended at startup carries nothing until it is resumed, and
         * dsctl's sessions would end empty; a tool through the proxy resumes it itself */
        startup_connect_runtime(req, session_what(s), session_connected);
}

/* Duration and buffer, common to both kinds. Replies and returns false when they are bad. */
static bool session_read_limits(Session *s, const WireMessage *m) {
        Request *req = s->request;
        const PolicyAgentSettings *a = &req->policy->agent;
        uint64_t seconds = 0;
        uint32_t mb = 0;

        if (wire_message_get_u64(m, WIRE_TAG_DURATION, &seconds) == 0 && (seconds == 0 || seconds > WIRE_DURATION_MAX_SEC)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "the duration must be 1 second to 30 days");
                return false;
        }
        if (wire_message_get_u32(m, WIRE_TAG_BUFFER_MB, &mb) == 0 && (mb == 0 || mb > EVENTPIPE_BUFFER_MB_MAX)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "the buffer must be 1 to 1024 MB");
                return false;
        }
        s->buffer_asked_mb = mb;
        s->buffer_mb = mb > 0 ? mb
                              : (a->max_trace_buffer_mb < EVENTPIPE_BUFFER_MB_DEFAULT ? a->max_trace_buffer_mb
                                                                                      : EVENTPIPE_BUFFER_MB_DEFAULT);
        s->duration_asked_usec = seconds * USEC_PER_SEC;
        s->duration_limit_usec = seconds > 0 ? s->duration_asked_usec : a->max_session_duration_usec;
        s->size_limit = a->max_trace_size;
        return true;
}

static bool session_describe(Session *s) {
        s->providers_text = eventpipe_config_to_string(&s->config);
        s->policy_providers = calloc(s->config.n_providers, sizeof(PolicyProvider));
        if (!s->providers_text || !s->policy_providers) {
                request_reply_oom(s->request);
                return false;
        }
        for (size_t i = 0; i < s->config.n_providers; i++)
                s->policy_providers[i] = (PolicyProvider){
                        .name = s->config.providers[i].name,
                        .keywords = s->config.providers[i].keywords,
                        .level = s->config.providers[i].level,
                        .arguments = s->config.providers[i].arguments,
                };
        return true;
}

static void session_proxy_settle(Session *s);

static void session_opened(Request *req) {
        Session *s = req->work;

        if (s->proxied)
                session_proxy_settle(s);

        req->ask = (PolicyRequest){
                .command = s->command,
                .trace_profile = s->profile,
                .providers = s->policy_providers,
                .n_providers = s->n_policy_providers,
                .buffer_mb = s->buffer_asked_mb,
                .duration_usec = s->duration_asked_usec,
        };
        decide(req, req->target, true, session_decided);
}

/* The session is well-formed: open its target, then decide. */
static void session_decide(Session *s, const WireMessage *m, PolicyCommand command, size_t n_policy_providers) {
        s->command = command;
        s->n_policy_providers = n_policy_providers;
        commands_open_target(s->request, m, session_opened);
}

static const char *providers_error(int r) {
        return r == EVENTPIPE_E_LIMIT ? "the provider list is too long"
                                      : "bad provider list (Provider[:Keywords[:Level[:Arguments]]],...)";
}

/* trace: a profile, or providers in dotnet-trace's syntax. */
void session_start_trace(Request *req, const WireMessage *m) {
        _cleanup_free_ char *providers = NULL;
        Session *s = session_new(req, "trace");
        int r;

        if (!s)
                return;
        if (wire_message_get_string(m, WIRE_TAG_TRACE_PROFILE, &s->profile) < 0 ||
            wire_message_get_string(m, WIRE_TAG_PROVIDERS, &providers) < 0) {
                request_reply_oom(req);
                return;
        }
        if (!s->profile == !providers) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "a trace needs a profile or providers, not both");
                return;
        }
        r = s->profile ? eventpipe_profile_config(s->profile, &s->config) : eventpipe_providers_parse(providers, &s->config);
        if (r < 0) {
                request_reply_errno(req, r, "cannot read the provider list");
                return;
        }
        if (r > 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    r == EVENTPIPE_E_UNKNOWN ? "unknown trace profile" : providers_error(r));
                return;
        }
        if (!session_read_limits(s, m) || !session_describe(s))
                return;
        session_decide(s, m, POLICY_COMMAND_TRACE, s->profile ? 0 : s->config.n_providers);
}

/* Splits "System.Runtime,Name,..." into its names. */
static int split_names(const char *list, char ***ret, size_t *ret_count) {
        _cleanup_free_ char *copy = strdup(list);
        char **names = NULL, *save = NULL;
        size_t n = 0;

        if (!copy)
                return -ENOMEM;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                char **grown;

                if (n >= WIRE_COUNTER_PROVIDERS_MAX || !eventpipe_provider_name_is_valid(tok))
                        goto fail;
                grown = realloc(names, (n + 1) * sizeof(char *));
                if (!grown || !(grown[n] = strdup(tok))) {
                        names = grown ? grown : names;
                        goto fail;
                }
                names = grown;
                n++;
        }
        if (n == 0)
                goto fail;
        *ret = names;
        *ret_count = n;
        return 0;
fail:
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return -EINVAL;
}

static void free_names(char **names, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
}

/* A fresh id per session: the Metrics provider tells sessions apart by it. */
static int random_session_id(char ret[TEXT_HEX_ID_SIZE]) {
        uint8_t bytes[16];

        if (getrandom(bytes, sizeof(bytes), 0) != sizeof(bytes))
                return -errno;
        text_hex_id(bytes, ret);
        return 0;
}

/* counters: EventCounters and Meters of the named providers, every interval. */
void session_start_counters(Request *req, const WireMessage *m) {
        _cleanup_free_ char *list = NULL;
        char **names = NULL, session_id[TEXT_HEX_ID_SIZE];
        Session *s = session_new(req, "counters");
        uint32_t interval = 1;
        size_t n = 0;
        int r;

        if (!s)
                return;
        if (wire_message_get_string(m, WIRE_TAG_PROVIDERS, &list) < 0) {
                request_reply_oom(req);
                return;
        }
        if (wire_message_get_u32(m, WIRE_TAG_INTERVAL, &interval) == 0 &&
            (interval == 0 || interval > WIRE_INTERVAL_MAX_SEC)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "the interval must be 1 to 3600 seconds");
                return;
        }
        if (split_names(list ? list : "System.Runtime", &names, &n) < 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                       "bad counter providers (names of letters, digits, . - _, at most 16)");
                return;
        }
        r = random_session_id(session_id);
        if (r == 0)
                r = eventpipe_counters_config((const char *const *)names, n, interval, session_id, &s->config);
        free_names(names, n);
        if (r < 0) {
                request_reply_errno(req, r, "cannot set up the counters");
                return;
        }
        if (r > 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "bad counter providers");
                return;
        }
        if (!session_read_limits(s, m) || !session_describe(s))
                return;
        /* the Metrics provider the agent adds is not the requester's choice */
        session_decide(s, m, POLICY_COMMAND_COUNTERS, s->config.n_providers - 1);
}

/* ---- stacks, exceptions, logs: sessions whose providers the agent chooses ---- */

/* How long exceptions and logs watch when no duration was asked for, as dotnet-monitor's routes do. */
#define SESSION_EXCEPTIONS_DEFAULT_USEC (10 * USEC_PER_SEC)
#define SESSION_LOGS_DEFAULT_USEC (30 * USEC_PER_SEC)
/* How long a heap dump may take to come when no duration was asked for: dotnet-gcdump's own timeout. */
#define SESSION_GCDUMP_DEFAULT_USEC (30 * USEC_PER_SEC)

/* Limits as for every session, but no buffer size from the requester; and a window of its own
 * when no duration was asked (still within max_session_duration and, once decided, the rule's). */
static bool monitor_read_limits(Session *s, const WireMessage *m, uint64_t default_usec) {
        uint32_t mb;

        if (wire_message_get_u32(m, WIRE_TAG_BUFFER_MB, &mb) == 0) {
                request_reply_error(s->request, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "the agent chooses this session's buffer");
                return false;
        }
        if (!session_read_limits(s, m))
                return false;
        if (s->duration_asked_usec == 0 && default_usec < s->duration_limit_usec)
                s->duration_limit_usec = default_usec;
        return true;
}

/* Set up by the caller's config function; the rest is as for a trace. */
static void monitor_start(Session *s, const WireMessage *m, PolicyCommand command, int r) {
        if (r < 0) {
                request_reply_errno(s->request, r, "cannot set up the session");
                return;
        }
        if (r > 0) {
                request_reply_error(s->request, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "bad session parameters");
                return;
        }
        if (!session_describe(s))
                return;
        /* the providers are the agent's choice, not the requester's: the command alone is decided */
        session_decide(s, m, command, 0);
}

/*
 * stacks: every managed thread's stack now, as dotnet-stack report takes
 * it: the sample profiler for MONITOR_STACKS_SAMPLE_USEC, then the rundown
 * that names the methods. dsctl keeps the first sample of each thread.
 */
void session_start_stacks(Request *req, const WireMessage *m) {
        Session *s = session_new(req, "stacks");
        uint64_t seconds;

        if (!s)
                return;
        if (wire_message_get_u64(m, WIRE_TAG_DURATION, &seconds) == 0) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST, "stacks takes no duration");
                return;
        }
        if (!monitor_read_limits(s, m, MONITOR_STACKS_SAMPLE_USEC))
                return;
        monitor_start(s, m, POLICY_COMMAND_STACKS, monitor_stacks_config(&s->config));
}

/*
 * gcdump: the runtime's GC heap dump, as dotnet-gcdump collects it: the
 * heap-dump keywords make the runtime induce a blocking gen-2 GC and report
 * every object, reference, root and type during it; the rundown at the end
 * names the types' modules. dsctl stops the session once the dump's GC has
 * ended; the window (30 s unless asked) only bounds a dump that never comes.
 */
void session_start_gcdump(Request *req, const WireMessage *m) {
        Session *s = session_new(req, "gcdump");

        if (!s || !monitor_read_limits(s, m, SESSION_GCDUMP_DEFAULT_USEC))
                return;
        monitor_start(s, m, POLICY_COMMAND_GCDUMP, monitor_gcdump_config(&s->config));
}

/* exceptions: the runtime's first-chance exception events for a while, and a rundown to name the throwers. */
void session_start_exceptions(Request *req, const WireMessage *m) {
        Session *s = session_new(req, "exceptions");

        if (!s || !monitor_read_limits(s, m, SESSION_EXCEPTIONS_DEFAULT_USEC))
                return;
        monitor_start(s, m, POLICY_COMMAND_EXCEPTIONS, monitor_exceptions_config(&s->config));
}

/* logs: ILogger's messages through Microsoft-Extensions-Logging, from a level and of a category. */
void session_start_logs(Request *req, const WireMessage *m) {
        _cleanup_free_ char *level = NULL, *category = NULL;
        Session *s = session_new(req, "logs");
        MonitorLogLevel l = _MONITOR_LOG_LEVEL_INVALID;

        if (!s)
                return;
        if (wire_message_get_string(m, WIRE_TAG_LOG_LEVEL, &level) < 0 ||
            wire_message_get_string(m, WIRE_TAG_LOG_CATEGORY, &category) < 0) {
                request_reply_oom(req);
                return;
        }
        if (level && (l = monitor_log_level_from_string(level)) == _MONITOR_LOG_LEVEL_INVALID) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "the level must be Trace, Debug, Information, Warning, Error or Critical");
                return;
        }
        if (category && !monitor_category_is_valid(category)) {
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                    "the category must be printable ASCII without spaces, ; : * = quotes or "
                                    "backslashes, at most 256 bytes");
                return;
        }
        if (!monitor_read_limits(s, m, SESSION_LOGS_DEFAULT_USEC))
                return;
        monitor_start(s, m, POLICY_COMMAND_LOGS, monitor_logs_config(l, category, &s->config));
}

/* How long a tool's stacks-shaped session may run: dotnet-stack and dotnet-gcdump stop theirs
 * at the first samples, and a grant of stacks or gcdump is not one of a CPU profile. */
#define SESSION_PROXY_SNAPSHOT_USEC (10 * USEC_PER_SEC)

/* The sample profiler alone: dotnet-stack's session and dotnet-gcdump's first one, and also what
 * dotnet-trace sends for its dotnet-sampled-thread-time profile. */
static bool shape_may_be_trace(IpcTracingShape shape) {
        return shape == IPC_TRACING_SHAPE_STACKS || shape == IPC_TRACING_SHAPE_GCDUMP_TYPES;
}

/*
 * What a tool's sample-profiler session is, now that its target is open. A trace when the
 * requester's trace grant admits it as the tool asked it (policy_check() alone, which uses no rate
 * limit, as explain asks): dotnet-trace's dotnet-sampled-thread-time under a rule that grants that
 * profile runs as long as the tool asks. Else the command of its shape, a moment's samples of at
 * most SESSION_PROXY_SNAPSHOT_USEC; unless that is denied too while a rule grants trace here, when
 * it is decided as the trace, so that the denial says what of it is outside that rule. dotnet-gcdump
 * asks for a buffer above the agent's bound (1024 MB), so its first session stays gcdump's.
 */
static void session_proxy_settle(Session *s) {
        Request *req = s->request;
        PolicyRequester who = requester_of(req);
        PolicyTarget target = policy_target_of(req->target);
        PolicyRequest as_trace = { .command = POLICY_COMMAND_TRACE, .providers = s->policy_providers,
                                   .n_providers = s->n_trace_providers, .buffer_mb = s->proxy_buffer_asked_mb };
        PolicyRequest as_shape = { .command = s->command, .buffer_mb = s->buffer_asked_mb };
        PolicyVerdict trace = {}, shape = {};

        if (!shape_may_be_trace(s->shape))
                return;
        policy_check(req->policy, &who, &target, &as_trace, &trace);
        if (!trace.allowed)
                policy_check(req->policy, &who, &target, &as_shape, &shape);
        if (trace.allowed || (!shape.allowed && trace.parameters_refused)) {
                s->command = POLICY_COMMAND_TRACE;
                s->kind = req->audit.command = policy_command_to_string(POLICY_COMMAND_TRACE);
                s->n_policy_providers = s->n_trace_providers;
                return;
        }
        if (SESSION_PROXY_SNAPSHOT_USEC < s->duration_limit_usec)
                s->duration_limit_usec = SESSION_PROXY_SNAPSHOT_USEC;
}

/*
 * A tool's CollectTracing (dsctl port): decided as the command of its shape
 * (ipc_policy_tracing_shape(): counters, gcdump, stacks, else trace) on its
 * providers and buffer, run and relayed like any trace session. The runtime gets the bytes
 * ipc_request_encode() makes of the decoded values; the tool is told an id of
 * the agent's own, never the runtime's.
 */
void session_start_proxy(Request *req, const WireMessage *m, IpcRequest *ipc) {
        const PolicyAgentSettings *a = &req->policy->agent;
        IpcTracingShape shape = ipc_policy_tracing_shape(&ipc->tracing);
        PolicyCommand command = ipc_policy_shape_command(shape);
        uint32_t buffer_asked_mb = ipc->tracing.buffer_mb;
        PolicyRequest ask, as_trace = {};
        Session *s = session_new(req, policy_command_to_string(command));
        int r;

        if (!s)
                return;
        req->audit.command = s->kind;
        /* dotnet-gcdump asks for 1024 MB whatever the heap; the runtime's buffer is a bound, not an
         * allocation, so its sessions get the agent's bound instead of a refusal */
        if (command == POLICY_COMMAND_GCDUMP && ipc->tracing.buffer_mb > a->max_trace_buffer_mb)
                ipc->tracing.buffer_mb = a->max_trace_buffer_mb;
        s->proxied = true;
        s->collect = malloc(DOTNET_IPC_MESSAGE_MAX);
        s->policy_providers = calloc(IPC_REQUEST_PROVIDERS_MAX, sizeof(PolicyProvider));
        if (!s->collect || !s->policy_providers) {
                request_reply_oom(req);
                return;
        }
        if (getrandom(&s->proxy_session_id, sizeof(s->proxy_session_id), 0) != sizeof(s->proxy_session_id)) {
                request_reply_errno(req, -errno, "cannot pick a session id");
                return;
        }
        r = ipc_request_encode(ipc, s->collect, DOTNET_IPC_MESSAGE_MAX, &s->collect_size);
        if (r == 0)
                r = ipc_policy_request(ipc, s->policy_providers, IPC_REQUEST_PROVIDERS_MAX, &ask);
        /* stacks and gcdump are decided without providers: the array holds them as a trace's */
        if (r == 0 && shape_may_be_trace(shape))
                r = ipc_policy_trace_request(ipc, s->policy_providers, IPC_REQUEST_PROVIDERS_MAX,
                                                     &as_trace);
        if (r != 0) {
                request_reply_error_hresult(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BAD_REQUEST,
                                            ipc_request_error_hresult(r), "the session request cannot be encoded");
                return;
        }
        /* the names the policy providers point to move with the config */
        s->config = ipc->tracing.config;
        ipc->tracing.config = (EventPipeConfig){};
        s->providers_text = eventpipe_config_to_string(&s->config);
        if (!s->providers_text) {
                request_reply_oom(req);
                return;
        }
        s->ipc_command = dotnet_ipc_command_lookup((uint8_t)(ipc->command >> 8), (uint8_t)ipc->command)->name;
        if (asprintf(&s->ipc_options, "rundown keywords 0x%" PRIx64 ", stacks %s, format %s, event filters %zu, "
                     "buffer asked %" PRIu32 " MB",
                     ipc->tracing.rundown_keyword, ipc->tracing.stackwalk ? "on" : "off",
                     ipc->tracing.format == DOTNET_IPC_FORMAT_NETTRACE ? "nettrace" : "netperf",
                     ipc->tracing.n_filters, buffer_asked_mb) < 0) {
                s->ipc_options = NULL;
                request_reply_oom(req);
                return;
        }
        s->buffer_asked_mb = s->buffer_mb = ipc->tracing.buffer_mb;
        s->proxy_buffer_asked_mb = buffer_asked_mb;
        s->shape = shape;
        s->n_trace_providers = as_trace.n_providers;
        /* stacks and gcdump's type-table flush are a moment's samples, not a profile of their own,
         * unless the trace grant admits them (session_proxy_settle()) */
        s->duration_limit_usec = a->max_session_duration_usec;
        s->size_limit = a->max_trace_size;
        session_decide(s, m, command, ask.n_providers);
}
