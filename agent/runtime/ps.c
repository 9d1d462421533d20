/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The ps command (ps.h): the .NET processes the caller may act on, one frame each; commands.c
 * dispatches to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "agent/loop/broker-state.h"
#include "agent/targets/candidate-walk.h"
#include "common/cleanup.h"
#include "agent/runtime/command-steps.h"
#include "agent/loop/connection.h"
#include "agent/decide/decision.h"
#include "agent/workers/jobs.h"
#include "agent/decide/pam-check.h"
#include "policy/policy.h"
#include "agent/ports/ports.h"
#include "agent/runtime/ps.h"
#include "agent/support/test-hooks.h"

/* A listing's probe of one process gets this long: one stuck process must not hold up the rest. */
#define PS_PROBE_TIMEOUT_USEC (2 * 1000000ULL)
/* Past this much queued for a client, a listing waits until the client has read some. */
#define PS_QUEUE_HIGH (64 * 1024)
/* Runtimes that connected in and that a listing adds: as many as the agent registers (ports.h). */
#define PS_PORT_RUNTIMES_MAX PORTS_RUNTIMES_MAX
#define PS_VISIBLE_UIDS_MAX 256

/*
 * A listing costs what the caller may see: a worker finds the processes that
 * may run a runtime among those whose owner the caller could see at all
 * (discover.h); each of those is then opened, decided, and its socket found
 * in a worker of its own, one after the other, each frame sent as it is
 * made. When the client does not read, the listing waits; at its deadline it
 * ends.
 */
typedef struct PsWork {
        Request *request;        /* the listing; while a probe runs, its target is the process probed */
        CandidateWaiter *waiter; /* while it waits for a walk of /proc */
        pid_t *pids;
        size_t n, next;
        unsigned count;
        uint32_t held;           /* the commands the requester holds on the process probed */
} PsWork;

static void ps_work_free(void *p) {
        PsWork *work = p;

        if (work) {
                candidate_waiter_cancel(work->waiter);
                free(work->pids);
                /* the work ends with its probe (at the listing's deadline, say): the process that
                 * probe looked at is not what the listing's record is about, nor one to forget */
                request_set_target(work->request, NULL);
        }
        free(work);
}

static void ps_next(Request *req);

/*
 * A probe that answers badly leaves its process out (ps_opened()); one that cannot even be
 * submitted (this user's worker queue is full) ends the listing with that error, since the
 * processes still to look at would otherwise be missing from it without a word. The error
 * replaces the listing: its record, like any listing's, is about no one process, and counts
 * none.
 */
static void ps_cut_short(Request *req, int r) {
        request_set_target(req, NULL);
        if (r == JOBS_E_WORKER)
                request_reply_error(req, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY,
                                    "no worker could look at the processes to list now; try again");
        else
                commands_reply_job_error(req, r, NULL);
}

/*
 * A listed process's frame: what the agent read of it in /proc (its ids, unit, name, executable,
 * cgroup) and the commands the requester holds on it; nothing its runtime says (command line,
 * environment), which needs info or env.
 */
static void ps_emit(Request *req) {
        _cleanup_free_ WireWriter *w = malloc(sizeof(*w));
        PsWork *work = req->work;
        char held[POLICY_COMMANDS_TEXT_MAX];

        if (!w)
                return;
        wire_writer_begin(w, WIRE_REPLY_PROCESS);
        commands_put_target_fields(w, req->target);
        commands_put_untrusted_string(w, WIRE_TAG_NAME, req->target->name);
        commands_put_port_fields(w, req);
        policy_commands_to_string(work->held, held);
        wire_writer_put_string(w, WIRE_TAG_COMMANDS, held);
        if (connection_queue_frame(req->connection, w) == 0)
                work->count++;
}

static void ps_socket_found(Request *req, int r, const char *why) {
        if (r == 0 || commands_port_serves(req, r))
                ps_emit(req);
        ps_next(req);
}

/*
 * A process is listed exactly when the requester holds a command on it, whichever (ps allowed,
 * policy.h), and shown with those commands. Listing is not rate limited: it shows what may be
 * done, it does nothing.
 */
static void ps_opened(Request *req, int r, const char *why) {
        PolicyRequester who = requester_of(req);
        PsWork *work = req->work;
        PolicyTarget pt;

        if (r != 0) {
                ps_next(req); /* gone, or not answering: not listed */
                return;
        }
        pt = policy_target_of(req->target);
        work->held = policy_commands_held(req->policy, &who, &pt);
        if (work->held == 0) {
                ps_next(req);
                return;
        }
        r = jobs_find_socket(req, ps_socket_found);
        if (r != 0)
                ps_cut_short(req, r);
}

static void ps_on_room(Request *req, uint32_t revents) {
        (void)connection_watch_client(req->connection, 0, NULL);
        if (revents & (EPOLLHUP | EPOLLERR)) {
                /* nobody will read the rest: else its socket, ready for ever, woke the loop for
                 * nothing until the listing's deadline */
                request_reply_errno(req, -ECONNRESET, "the client went away during the listing");
                return;
        }
        ps_next(req);
}

static void ps_next(Request *req) {
        PsWork *work = req->work;

        /* the last probe is over: whatever ends the listing now, its record is about no one process */
        request_set_target(req, NULL);
        /* a client that reads slowly slows the listing down; one that does not read stops it */
        if (connection_flush(req->connection) > PS_QUEUE_HIGH) {
                int r = connection_watch_client(req->connection, EPOLLOUT, ps_on_room);
                if (r < 0)
                        request_reply_errno(req, r, "cannot wait for the client");
                else
                        test_hook_note("listing waits for its client to read");
                return;
        }
        if (work->next < work->n) {
                int r = jobs_open_target(req, work->pids[work->next++], false, ps_opened);
                if (r != 0)
                        ps_cut_short(req, r);
                return;
        }
        req->audit.have_result_count = true;
        req->audit.result_count = work->count;
        request_reply_done(req, NULL, "listed the processes the requester may act on");
}

/* Runtimes that connected in on a port may have no socket the candidates' search finds: they are added. */
/* Only those of users the requester could see at all: each costs a worker's look. */
static size_t ps_add_port_runtimes(Request *req, pid_t *pids, size_t n, size_t max) {
        PolicyRequester who = requester_of(req);
        pid_t port_pids[PS_PORT_RUNTIMES_MAX];
        uid_t uids[PS_VISIBLE_UIDS_MAX];
        size_t n_uids = 0, n_port;
        bool anybody;

        anybody = policy_visible_uids(req->policy, &who, uids, PS_VISIBLE_UIDS_MAX, &n_uids);
        n_port = ports_list_pids(req->broker->ports, anybody ? NULL : uids, n_uids, port_pids, PS_PORT_RUNTIMES_MAX);

        for (size_t i = 0; i < n_port && n < max; i++) {
                bool listed = false;

                for (size_t j = 0; j < n && !listed; j++)
                        listed = pids[j] == port_pids[i];
                if (!listed)
                        pids[n++] = port_pids[i];
        }
        return n;
}

static void ps_candidates_found(Request *req, int r, const pid_t *pids, size_t n) {
        PsWork *work = req->work;

        work->waiter = NULL; /* freed before this callback */
        if (r != 0) {
                commands_reply_job_error(req, r, NULL);
                return;
        }
        work->pids = malloc((n + PS_PORT_RUNTIMES_MAX) * sizeof(pid_t));
        if (!work->pids) {
                request_reply_oom(req);
                return;
        }
        if (n > 0)
                memcpy(work->pids, pids, n * sizeof(pid_t));
        work->n = ps_add_port_runtimes(req, work->pids, n, n + PS_PORT_RUNTIMES_MAX);
        req->job_timeout_usec = PS_PROBE_TIMEOUT_USEC;
        ps_next(req);
}

static void ps_walk(Request *req) {
        PsWork *work = req->work;
        int r = candidate_walks_join(req->broker->walks, req, ps_candidates_found, &work->waiter);

        if (r != 0)
                commands_reply_job_error(req, r, NULL);
}

static void ps_names_resolved(Request *req, int r, const char *why) {
        ps_walk(req); /* without them if need be: a record leaves out a name it does not hold */
}

/*
 * The names for the record are looked up in a job of the requester's own, not in the shared walk:
 * NSS may wait on a directory service, and that wait is this request's alone.
 */
static void ps_resolve_names(Request *req) {
        int r;

        if (audit_names_known(req->peer->uid, req->peer->gid, (uid_t)-1)) {
                ps_walk(req);
                return;
        }
        r = jobs_resolve_names(req, ps_names_resolved);
        if (r != 0)
                commands_reply_job_error(req, r, NULL);
}

static void ps_list(Request *req) {
        PsWork *work = calloc(1, sizeof(*work));
        char what[64];

        if (!work) {
                request_reply_oom(req);
                return;
        }
        work->request = req;
        req->work = work;
        req->work_free = ps_work_free;
        /* the whole listing gets the reply's deadline */
        snprintf(what, sizeof(what), "the agent's deadline for a listing (%llu s)",
                 (unsigned long long)(req->broker->config.reply_timeout_usec / 1000000));
        (void)commands_set_deadline(req, req->broker->config.reply_timeout_usec, what);
        ps_resolve_names(req);
}

static void ps_after_pam(int result, const char *message, void *userdata) {
        Request *req = userdata;

        req->pam_query = NULL;
        if (result != 0) {
                request_reply_error(req, AUDIT_DECISION_DENIED, WIRE_ERROR_DENIED,
                                    message && *message ? message : "the PAM account check could not be made");
                return;
        }
        ps_list(req);
}

/* A listing is decided per process, but the requester's PAM account check once. */
void ps_start(Request *req) {
        const char *service = req->policy->agent.pam_service;
        int r;

        if (!service) {
                ps_list(req);
                return;
        }
        r = req->broker->pam ? pam_checker_query(req->broker->pam, service, req->peer->uid, ps_after_pam, req,
                                                 &req->pam_query)
                             : PAM_CHECK_E_UNAVAILABLE;
        if (r != 0)
                ps_after_pam(PAM_CHECK_E_UNAVAILABLE, NULL, req);
}
