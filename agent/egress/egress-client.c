/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The loop's half of the egress process (egress-client.h): one SOCK_SEQPACKET socket, fixed-size messages
 * (egress-protocol.h), the artifact's fd with each upload (SCM_RIGHTS). Sends never wait (MSG_DONTWAIT); answers
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
        int pidfd;      /* the egress process, to kill it: the agent's sandbox has no kill() */
        sd_event_source *io;
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

/* The egress process is gone: every upload waiting is answered so, and nothing more is sent. */
static void egress_client_lost(EgressClient *c) {
        c->io = sd_event_source_disable_unref(c->io);
        c->fd = safe_close(c->fd);
        /* killed before it is reaped: one that closed its end and lingers must not hold the loop in waitpid() */
        if (c->pid > 0) {
                if (c->pidfd >= 0)
                        (void)syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
                (void)waitpid(c->pid, NULL, 0);
        }
        c->pidfd = safe_close(c->pidfd);
        c->pid = 0;
        while (c->pending) {
                Pending *p = c->pending;
                c->pending = p->next;
                p->done(NULL, p->userdata);
                free(p);
        }
}

/* The server died (EGRESS_REPLY_DIED): what it had taken is lost, and answered so; so is every URL asked, which
 * the next server may or may not answer (a late answer finds nothing waiting and is dropped). What it had not
 * taken waits in the socket for the next server. */
static void egress_client_server_died(EgressClient *c, const EgressReply *notice) {
        EgressReply lost = { .version = EGRESS_PROTOCOL_VERSION, .result = EGRESS_E_LOST };
        Pending *answered = NULL;

        snprintf(lost.message, sizeof(lost.message), "%s", notice->message);
        if (c->on_died)
                c->on_died(notice->message, c->on_died_userdata);
        /* taken out first: an answer may hand an upload over again, which adds to c->pending */
        for (Pending **p = &c->pending; *p;) {
                Pending *q = *p;
                if (q->taken || !q->upload) {
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

int egress_client_start(sd_event *event, const char *helper, EgressClient **ret) {
        EgressClient *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->next_id = 1;
        c->pidfd = -EBADF;
        r = egress_process_spawn(helper, &c->pid, &c->fd);
        if (r < 0) {
                free(c);
                return r;
        }
        /* before the sandbox, which keeps pidfd_send_signal() and not kill(); the child is not reaped, so the pid
         * is still its own */
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
        free(c);
        return NULL;
}

int egress_client_pid(const EgressClient *c) {
        return c ? c->pid : 0;
}

int egress_client_submit(EgressClient *c, EgressRequest *q, int fd, EgressUploadDone done, void *userdata,
                         uint64_t *ret_id) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = q, .iov_len = sizeof(*q) };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                              .msg_controllen = sizeof(control) };
        struct cmsghdr *cm;
        Pending *p;

        if (c->fd < 0)
                return -ECONNRESET;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        if (fd >= 0) {
                cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        } else {
                msg.msg_control = NULL;
                msg.msg_controllen = 0;
        }
        q->version = EGRESS_PROTOCOL_VERSION;
        q->id = c->next_id++;
        if (sendmsg(c->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(*q)) {
                int r = errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN
                        : errno == EPIPE || errno == ECONNRESET  ? -ECONNRESET
                                                                 : -errno;
                free(p);
                return r;
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
