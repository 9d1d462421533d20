/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The loop's half of the egress process (egress-client.h): one SOCK_SEQPACKET socket, fixed-size messages
 * (egress-protocol.h), the store's keys and CA and an upload's artifact open with each request (SCM_RIGHTS,
 * egress-check.c's egress_request_send()). Sends never wait (MSG_DONTWAIT); answers
 * are read when the socket is readable, and each goes to the upload it names.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/egress/egress-check.h"
#include "agent/egress/egress-client.h"
#include "common/cleanup.h"

typedef struct Pending {
        uint64_t id;
        bool upload, taken; /* an upload, and the server said it took it (EGRESS_REPLY_TAKEN) */
        EgressUploadDone done;
        void *userdata;
        struct Pending *next;
} Pending;

struct EgressClient {
        int fd;
        pid_t pid;
        int pidfd;      /* the egress process, readable once it has exited: then it is reaped */
        sd_event_source *io;
        sd_event_source *exit_watch; /* on pidfd, once its socket ended and it had not exited yet */
        sd_event *event;
        uint64_t next_id;
        Pending *pending;
        EgressDied on_died;
        void *on_died_userdata;
};

static Pending *take_pending(EgressClient *c, uint64_t id) {
        for (Pending **p = &c->pending; *p; p = &(*p)->next)
                if ((*p)->id == id) {
                        Pending *found = *p;
                        *p = found->next;
                        return found;
                }
        return NULL;
}

static void egress_client_reaped(EgressClient *c) {
        c->exit_watch = sd_event_source_disable_unref(c->exit_watch);
        c->pidfd = safe_close(c->pidfd);
        c->pid = 0;
}

static int egress_client_on_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EgressClient *c = userdata;

        if (waitpid(c->pid, NULL, WNOHANG) != 0)
                egress_client_reaped(c);
        return 0;
}

/*
 * The egress process is gone, or going: every upload waiting is answered so, and nothing more is sent. It runs
 * as its own user, which the agent (no CAP_KILL) cannot signal: its socket closed, it exits by itself, and is
 * reaped when its pidfd says it has, never waited for (one that closed its end and lingers must not hold the
 * loop in waitpid()). One that lingers lives until the unit's stop (nothing of the agent's may signal it).
 */
static void egress_client_lost(EgressClient *c) {
        c->io = sd_event_source_disable_unref(c->io);
        c->fd = safe_close(c->fd);
        if (c->pid > 0 && !c->exit_watch) {
                if (waitpid(c->pid, NULL, WNOHANG) != 0 || c->pidfd < 0 ||
                    sd_event_add_io(c->event, &c->exit_watch, c->pidfd, EPOLLIN, egress_client_on_exit, c) < 0)
                        egress_client_reaped(c); /* exited; or left to init once the agent exits */
        }
        while (c->pending) {
                Pending *p = c->pending;
                c->pending = p->next;
                p->done(NULL, p->userdata);
                free(p);
        }
}

/* The server died (EGRESS_REPLY_DIED): what it had taken or read (up to notice->id) is lost, and answered so; so
 * is every URL asked, which the next server may or may not answer (a late answer finds nothing waiting and is
 * dropped). What it had not read waits in the socket for the next server. */
static void egress_client_server_died(EgressClient *c, const EgressReply *notice) {
        EgressReply lost = { .version = EGRESS_PROTOCOL_VERSION, .result = EGRESS_E_LOST };
        Pending *answered = NULL;

        snprintf(lost.message, sizeof(lost.message), "%s", notice->message);
        if (c->on_died)
                c->on_died(notice->message, c->on_died_userdata);
        /* taken out first: an answer may hand an upload over again, which adds to c->pending */
        for (Pending **p = &c->pending; *p;) {
                Pending *q = *p;
                /* read by the dead server (notice->id: the last it read), whether it said so or died first */
                if (q->taken || !q->upload || q->id <= notice->id) {
                        *p = q->next;
                        q->next = answered;
                        answered = q;
                } else
                        p = &q->next;
        }
        while (answered) {
                Pending *q = answered;
                answered = q->next;
                lost.id = q->id;
                q->done(&lost, q->userdata);
                free(q);
        }
}

static Pending *find_pending(EgressClient *c, uint64_t id) {
        for (Pending *p = c->pending; p; p = p->next)
                if (p->id == id)
                        return p;
        return NULL;
}

static int egress_client_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        EgressClient *c = userdata;

        for (;;) {
                EgressReply a;
                Pending *p;
                ssize_t n = recv(c->fd, &a, sizeof(a), MSG_DONTWAIT | MSG_TRUNC);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n <= 0) {
                        egress_client_lost(c);
                        return 0;
                }
                /* this build's other end; anything else is not an answer, and is dropped */
                if (n != sizeof(a) || a.version != EGRESS_PROTOCOL_VERSION || !memchr(a.s3_code, '\0', sizeof(a.s3_code)) ||
                    !memchr(a.message, '\0', sizeof(a.message)) || !memchr(a.sha256, '\0', sizeof(a.sha256)) ||
                    !memchr(a.etag, '\0', sizeof(a.etag)) || !memchr(a.url, '\0', sizeof(a.url)))
                        continue;
                if (a.kind == EGRESS_REPLY_DIED) {
                        egress_client_server_died(c, &a);
                        continue;
                }
                if (a.kind == EGRESS_REPLY_TAKEN) {
                        p = find_pending(c, a.id);
                        if (p)
                                p->taken = true;
                        continue;
                }
                if (a.kind != EGRESS_REPLY_ANSWER)
                        continue;
                p = take_pending(c, a.id);
                if (!p)
                        continue; /* cancelled */
                p->done(&a, p->userdata);
                free(p);
        }
}

int egress_client_start(sd_event *event, const char *helper, uid_t uid, gid_t gid, EgressClient **ret) {
        EgressClient *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->next_id = 1;
        c->pidfd = -EBADF;
        c->event = sd_event_ref(event);
        r = egress_process_spawn(helper, uid, gid, &c->pid, &c->fd);
        if (r < 0) {
                sd_event_unref(c->event);
                free(c);
                return r;
        }
        /* the child is not reaped, so the pid is still its own */
        c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
        if (c->pidfd < 0) {
                r = -errno;
                egress_client_free(c);
                return r;
        }
        r = sd_event_add_io(event, &c->io, c->fd, EPOLLIN, egress_client_on_io, c);
        if (r < 0) {
                egress_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

EgressClient *egress_client_free(EgressClient *c) {
        if (!c)
                return NULL;
        egress_client_lost(c);
        /* the agent is going: not waited for (it exits on its socket's end, which it watches) */
        c->exit_watch = sd_event_source_disable_unref(c->exit_watch);
        c->pidfd = safe_close(c->pidfd);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}

int egress_client_pid(const EgressClient *c) {
        return c ? c->pid : 0;
}

int egress_client_submit(EgressClient *c, EgressRequest *q, int fd, EgressUploadDone done, void *userdata,
                         uint64_t *ret_id) {
        Pending *p;
        int r;

        if (c->fd < 0)
                return -ECONNRESET;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        q->version = EGRESS_PROTOCOL_VERSION;
        q->id = c->next_id++;
        /* the keys and the CA go open with it: the egress process's user could open neither */
        r = egress_request_send(c->fd, q, fd, MSG_DONTWAIT);
        if (r < 0) {
                free(p);
                return r == -EAGAIN || r == -EWOULDBLOCK ? -EAGAIN : r == -EPIPE || r == -ECONNRESET ? -ECONNRESET : r;
        }
        *p = (Pending){ .id = q->id, .upload = fd >= 0, .done = done, .userdata = userdata, .next = c->pending };
        c->pending = p;
        *ret_id = q->id;
        return 0;
}

void egress_client_on_died(EgressClient *c, EgressDied on_died, void *userdata) {
        c->on_died = on_died;
        c->on_died_userdata = userdata;
}

void egress_client_cancel(EgressClient *c, uint64_t id) {
        free(take_pending(c, id));
}
