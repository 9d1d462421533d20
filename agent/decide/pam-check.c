/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * PAM account checks in a helper process forked at start-up (pam-check.h); decision.c asks, the
 * broker owns the checker.
 */
#include <errno.h>
#include <pwd.h>
#include <security/pam_appl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/decide/pam-check.h"
#include "agent/workers/sandbox.h"

#define PAM_CHECK_QUEUE_MAX 1024

/* What crosses the socketpair: fixed size, both ends are this program. */
typedef struct PamRequest {
        uint32_t uid;
        char service[PAM_CHECK_SERVICE_MAX];
} PamRequest;

typedef struct PamReply {
        uint32_t uid;
        int32_t result;
        char message[PAM_CHECK_MESSAGE_MAX];
} PamReply;

struct PamQuery {
        PamQuery *next;
        uid_t uid;
        PamCheckDone done; /* NULL once cancelled: the answer is still read, then dropped */
        void *userdata;
};

struct PamChecker {
        int fd;
        pid_t helper;
        sd_event_source *io;
        PamQuery *head, *tail; /* answers come in the order questions were sent */
        unsigned n_queued;
        bool broken;
};

/* --- the helper process --- */

/* No prompts: an account check never needs one; a module that asks gets nothing. */
static int no_conversation(int n, const struct pam_message **msg, struct pam_response **resp, void *data) {
        return PAM_CONV_ERR;
}

static void helper_answer(const PamRequest *q, PamReply *a) {
        struct pam_conv conv = { .conv = no_conversation };
        struct passwd pw, *found = NULL;
        pam_handle_t *h = NULL;
        char buf[4096];
        int r;

        *a = (PamReply){ .uid = q->uid, .result = PAM_CHECK_E_DENIED };
        if (getpwuid_r((uid_t)q->uid, &pw, buf, sizeof(buf), &found) != 0 || !found) {
                snprintf(a->message, sizeof(a->message), "uid %u has no user name", q->uid);
                return;
        }
        r = pam_start(q->service, found->pw_name, &conv, &h);
        if (r == PAM_SUCCESS)
                r = pam_acct_mgmt(h, PAM_SILENT);
        if (r == PAM_SUCCESS)
                a->result = 0;
        else
                snprintf(a->message, sizeof(a->message), "PAM account check of service '%s' failed: %s",
                         q->service, pam_strerror(h, r));
        if (h)
                pam_end(h, r);
}

static bool service_name_is_valid(const char *s) {
        if (!*s || *s == '.')
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      *s == '-' || *s == '_' || *s == '.'))
                        return false;
        return true;
}

static _Noreturn void helper_main(int fd) {
        for (;;) {
                PamRequest q;
                PamReply a;
                ssize_t n = recv(fd, &q, sizeof(q), 0);

                if (n == 0)
                        _exit(0);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                q.service[sizeof(q.service) - 1] = '\0';
                if (n != sizeof(q) || !service_name_is_valid(q.service)) {
                        a = (PamReply){ .uid = q.uid, .result = PAM_CHECK_E_UNAVAILABLE };
                        snprintf(a.message, sizeof(a.message), "malformed PAM query");
                } else
                        helper_answer(&q, &a);
                if (send(fd, &a, sizeof(a), MSG_NOSIGNAL) != sizeof(a))
                        _exit(1);
        }
}

/* --- the agent's side --- */

static PamQuery *pam_checker_pop(PamChecker *pc) {
        PamQuery *q = pc->head;

        if (q) {
                pc->head = q->next;
                if (!pc->head)
                        pc->tail = NULL;
                pc->n_queued--;
        }
        return q;
}

static void pam_query_finish(PamQuery *q, int result, const char *message) {
        if (q->done)
                q->done(result, message, q->userdata);
        free(q);
}

/* The helper is gone: every open question is answered "unavailable", and so is every later one. */
static void pam_checker_break(PamChecker *pc) {
        PamQuery *q;

        pc->broken = true;
        sd_event_source_set_enabled(pc->io, SD_EVENT_OFF);
        while ((q = pam_checker_pop(pc)))
                pam_query_finish(q, PAM_CHECK_E_UNAVAILABLE, "the PAM helper is not running");
}

static int pam_checker_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        PamChecker *pc = userdata;

        for (;;) {
                PamReply a;
                PamQuery *q;
                ssize_t n = recv(fd, &a, sizeof(a), MSG_DONTWAIT);

                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n != sizeof(a) || !pc->head || a.uid != pc->head->uid) {
                        pam_checker_break(pc);
                        return 0;
                }
                a.message[sizeof(a.message) - 1] = '\0';
                q = pam_checker_pop(pc);
                pam_query_finish(q, a.result == 0 ? 0 : a.result == PAM_CHECK_E_DENIED ? PAM_CHECK_E_DENIED
                                                                                         : PAM_CHECK_E_UNAVAILABLE,
                                 a.message);
        }
}

/**
 * pam_checker_start() - fork the PAM helper
 *
 * Done at start-up, before the agent is sandboxed, so that a policy loaded
 * later can turn PAM checks on.
 *
 * Return: 0 or a negative errno.
 */
int pam_checker_start(sd_event *event, PamChecker **ret) {
        _cleanup_(pam_checker_freep) PamChecker *pc = NULL;
        int sv[2];
        int r;

        pc = calloc(1, sizeof(*pc));
        if (!pc)
                return -ENOMEM;
        pc->fd = -EBADF;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;

        pc->helper = fork();
        if (pc->helper < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                return r;
        }
        if (pc->helper == 0) {
                /* keep stdio and the socket, nothing else of the agent's */
                /* the helper lives and dies with the agent; then it is sandboxed, before any question */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || dup2(sv[1], 3) < 0 || close_range(4, ~0U, 0) < 0 ||
                    sandbox_enter(SANDBOX_PAM_HELPER) < 0)
                        _exit(1);
                helper_main(3);
        }
        close(sv[1]);
        pc->fd = sv[0];

        r = sd_event_add_io(event, &pc->io, pc->fd, EPOLLIN, pam_checker_on_io, pc);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(pc);
        return 0;
}

PamChecker *pam_checker_free(PamChecker *pc) {
        PamQuery *q;

        if (!pc)
                return NULL;
        while ((q = pam_checker_pop(pc)))
                free(q);
        sd_event_source_disable_unref(pc->io);
        safe_close(pc->fd); /* the helper sees EOF and exits */
        if (pc->helper > 0)
                (void)waitpid(pc->helper, NULL, 0);
        free(pc);
        return NULL;
}

/**
 * pam_checker_query() - ask whether @uid passes the account stack of @service
 *
 * @done runs from the event loop, never from inside this call.
 *
 * Return: 0 with a handle to cancel the query, PAM_CHECK_E_UNAVAILABLE when
 * no question can be asked now, or a negative errno.
 */
int pam_checker_query(PamChecker *pc, const char *service, uid_t uid, PamCheckDone done, void *userdata,
                      PamQuery **ret) {
        PamRequest req = { .uid = uid };
        PamQuery *q;

        if (pc->broken || pc->n_queued >= PAM_CHECK_QUEUE_MAX || strlen(service) >= sizeof(req.service))
                return PAM_CHECK_E_UNAVAILABLE;
        memcpy(req.service, service, strlen(service));

        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (PamQuery){ .uid = uid, .done = done, .userdata = userdata };
        /* a full socket buffer means the helper is far behind: refuse rather than wait */
        if (send(pc->fd, &req, sizeof(req), MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof(req)) {
                free(q);
                return PAM_CHECK_E_UNAVAILABLE;
        }
        if (pc->tail)
                pc->tail->next = q;
        else
                pc->head = q;
        pc->tail = q;
        pc->n_queued++;
        *ret = q;
        return 0;
}

/* The asker went away: its answer will be read and dropped. */
void pam_query_cancel(PamQuery *q) {
        if (q)
                q->done = NULL;
}
