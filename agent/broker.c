/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The agent's loop (broker.h): owns the listening socket, the connections, the worker pool, the
 * caches and the policy in force; main.c runs it. It wires the rooms of agent/ together, so it sits
 * beside main.c rather than inside one of them: loop/ is a client's socket and nothing above it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <systemd/sd-daemon.h>

#include "agent/broker.h"
#include "agent/targets/candidate-walk.h"
#include "agent/collect/collect.h"
#include "agent/crashes/crash-collect.h"
#include "agent/ports/on-start.h"
#include "agent/ports/ports.h"
#include "common/cleanup.h"
#include "agent/runtime/commands.h"
#include "agent/loop/connection.h"
#include "agent/dumps/dump-stage.h"
#include "agent/dumps/dump-writer.h"
#include "agent/loop/holders.h"
#include "agent/workers/jobs.h"
#include "agent/loop/park.h"
#include "agent/workers/worker-pool.h"
#include "agent/decide/pam-check.h"
#include "agent/egress/egress-client.h"
#include "agent/egress/egress-upload.h"
#include "agent/decide/policy-load.h"
#include "agent/dumps/retention.h"
#include "agent/targets/target-cache.h"
#include "agent/support/test-hooks.h"
#include "agent/loop/userns.h"

/* Accepting is bounded per wake-up so a flood on the listener cannot starve
 * the connections already being served. A request already in its socket is
 * taken up at once (connection_start()), up to where it waits: a worker's
 * job, the runtime's answer; so a wake-up does at most this many requests'
 * non-blocking first steps. */
#define BROKER_ACCEPT_BURST 16
/* Connections refused unread (broker_refuse_unread()) cost six system calls each and nothing after:
 * they count apart, so that a user's churn is drained from the backlog, where everyone else's
 * connections wait behind it, several at a time, while a wake-up holds the other connections'
 * events back for little (each of a request's steps waits for at most one wake-up of the
 * listener: at 32 a wake-up, others' requests took 3 to 9 times as long under churn, at 8 about
 * 1.5); and they are answered at the end of the wake-up, so that what waited behind them is
 * served first, holding their fds meanwhile. */
#define BROKER_REFUSE_UNREAD_BURST 8
/* Worker processes: at most, kept ready, and running for one user at once (its other jobs wait). */
#define BROKER_WORKERS_MAX 16
#define BROKER_WORKERS_IDLE 2
/*
 * The agent's own fds (policy, journal, listener, timers, PAM helper, the
 * dump directory), each worker's socket and pidfd, the targets kept for reuse,
 * the [[collect]] watches' (collect.h), the user namespaces whose charge is
 * known (userns.h) and the connections a wake-up refused unread, waiting for
 * their answer, whatever clients do;
 * then what one connection may hold at once: its socket, the target's pidfd,
 * /proc and socket directory fds, and a runtime connection or a session's
 * stream and pipe.
 */
#define BROKER_FDS_BASE \
        (32 + 2 * BROKER_WORKERS_MAX + TARGET_CACHE_FDS + COLLECT_FDS_MAX + USERNS_CACHE_MAX + BROKER_REFUSE_UNREAD_BURST)
#define BROKER_FDS_PER_CONNECTION 6
/* Out of fds, the listener rests this long, or until a connection closes. */
#define BROKER_FDS_RETRY_USEC (100 * 1000)
/* Connections root may hold past max_connections: the administrator gets in while a flood holds the rest. */
#define BROKER_ROOT_SLOTS 4

static unsigned broker_connections_of_uid(const Broker *b, uid_t uid) {
        return holders_count(b->holders, uid);
}

static void broker_update_idle(Broker *b) {
        uint64_t now;

        if (b->config.idle_exit_usec == 0 || !b->idle_timer)
                return;
        if (b->n_connections > 0 || sd_event_now(b->event, CLOCK_MONOTONIC, &now) < 0) {
                (void)sd_event_source_set_enabled(b->idle_timer, SD_EVENT_OFF);
                return;
        }
        (void)sd_event_source_set_time(b->idle_timer, now + b->config.idle_exit_usec);
        (void)sd_event_source_set_enabled(b->idle_timer, SD_EVENT_ONESHOT);
}

/*
 * Back-pressure: at the global cap, and while the agent has no fd to spare
 * (EMFILE), new clients wait in the kernel's backlog instead of being
 * accepted and dropped.
 */
static void broker_update_accepting(Broker *b) {
        (void)sd_event_source_set_enabled(b->listen_source,
                                          b->n_connections < b->config.max_connections + b->root_slots &&
                                                          !b->out_of_fds
                                                  ? SD_EVENT_ON
                                                  : SD_EVENT_OFF);
}

static int broker_connection_opened(Broker *b, Connection *c) {
        int r;

        r = holders_add(b->holders, &c->hold, c->peer.charged_uid);
        if (r < 0)
                return r;
        c->next = b->connections;
        if (b->connections)
                b->connections->prev = c;
        b->connections = c;
        b->n_connections++;
        broker_update_accepting(b);
        broker_update_idle(b);
        return 0;
}

static void broker_connection_closed(Broker *b, Connection *c) {
        holders_remove(b->holders, &c->hold); /* an evicted one was already */
        if (c->prev)
                c->prev->next = c->next;
        else
                b->connections = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
        b->n_connections--;
        b->out_of_fds = false; /* one fd came back */
        broker_update_accepting(b);
        broker_update_idle(b);
}

static void broker_report_suppressed(uid_t uid, uint64_t count, void *userdata) {
        Broker *b = userdata;

        if (audit_log_suppressed(b->config.audit_sink, uid, count) < 0)
                (void)sd_notifyf(false, "STATUS=Could not record %" PRIu64 " refused requests of uid %u", count,
                                 (unsigned)uid);
}

static int broker_on_suppressed_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Broker *b = userdata;

        request_budget_flush(b->request_budget, broker_report_suppressed, b);
        if (b->refused_unread + b->refused_read > 0)
                test_hook_note("connections refused past their budget: %" PRIu64 " unread, %" PRIu64 " after reading "
                               "the peer", b->refused_unread, b->refused_read);
        b->refused_unread = b->refused_read = 0;
        userns_cache_expire(b->userns_cache, usec);
        return 0;
}

/* A connection is idle while it has sent nothing: one that has begun its request, or works, is not. */
static bool broker_connection_idle(HoldNode *n, void *userdata) {
        const Connection *c = (const Connection *)((const char *)n - offsetof(Connection, hold));

        return c->state == CONNECTION_READING && c->in_size == 0;
}

/*
 * The table is full: @newcomer is served by closing the oldest idle connection of the largest
 * holder (holders.h), answered busy and recorded. One whose request is in its socket already, not
 * read yet, is not idle; one whose client has gone asked for nothing and is closed without a word.
 *
 * Return: whether room was made.
 */
static bool broker_make_room(Broker *b, Connection *newcomer) {
        for (;;) {
                HoldNode *n = holders_victim(b->holders, newcomer->peer.charged_uid,
                                     holders_count(b->holders, newcomer->peer.charged_uid), broker_connection_idle, NULL);
                Connection *v;
                char reason[192], b1;
                ssize_t peeked;

                if (!n)
                        return false;
                v = (Connection *)((char *)n - offsetof(Connection, hold));
                peeked = recv(v->fd, &b1, 1, MSG_PEEK | MSG_DONTWAIT);
                if (peeked > 0) {
                        holders_not_idle(b->holders, n); /* its request came: it is read in its turn */
                        continue;
                }
                holders_remove(b->holders, n); /* its room is the newcomer's from now on */
                if (peeked == 0 || errno != EAGAIN) {
                        connection_release(v);
                        return true;
                }
                snprintf(reason, sizeof(reason),
                         "closed unread to make room for request %016" PRIx64 " of a user holding fewer connections: "
                         "the agent serves as many connections as it may, and this user held the most",
                         newcomer->request.id);
                connection_evict(v, reason,
                                 "closed to make room for another user: the agent serves as many connections as it may, "
                                 "and you held the most; try again shortly");
                return true;
        }
}

/*
 * A connection refused at accept: answered busy and recorded, as far as its charge's request budget
 * goes. Past it, it is only counted; and from then on, for a second, further connections of the
 * same charge that would be refused as well are refused without reading who the peer is
 * (broker_refuse_unread()): the charge of its namespace is learned here.
 */
static void broker_refuse(Broker *b, Connection *c, const char *reason) {
        uint64_t now = 0;

        c->state = CONNECTION_WORKING;
        request_reply_error(&c->request, AUDIT_DECISION_FAILED, WIRE_ERROR_BUSY, reason);
        if (c->request.admitted || c->peer.charged_uid == 0)
                return;
        b->refused_read++;
        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        b->refuse_unread_until = now + USERNS_CACHE_USEC;
        if (c->peer.userns_inode != 0)
                (void)userns_cache_learn(b->userns_cache, c->peer.pid, c->peer.userns_inode, c->peer.charged_uid, now);
}

/* Whether a newcomer of @charged, not counted yet, would be refused: its share is full, or the table
 * is and nobody holds more than it would (root is never refused here: it has slots past the cap). */
static bool broker_would_refuse(Broker *b, uid_t charged) {
        unsigned holding = holders_count(b->holders, charged) + 1;

        if (holding > b->config.max_connections_per_uid)
                return true;
        return b->n_connections + 1 > b->config.max_connections &&
               !holders_victim(b->holders, charged, holding, broker_connection_idle, NULL);
}

/*
 * A user re-opening connections as fast as they are refused made each refusal cost the loop what
 * reading a peer costs (its pidfd, its groups, the walk up its user namespaces, a record), and
 * everyone else waited behind thousands of them: root's info took 40 times its idle time. While a
 * charge is refused past its request budget, a connection whose peer SO_PEERCRED and the name of
 * its namespace show to be of that charge, and that would be refused, is answered "too many
 * requests" and closed, counted as the full path would count it (no record: it is over budget),
 * and nothing more is read. The answer waits until the accepts of the wake-up are done
 * (broker_answer_unread()): a connection that is taken up behind refused ones is served first.
 *
 * Return: whether @fd is refused (and counted): the caller answers it.
 */
static bool broker_refuse_unread(Broker *b, int fd) {
        const PolicyAgentSettings *a = &b->policy->agent;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        uint64_t now = 0;
        uid_t charged;

        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        if (now >= b->refuse_unread_until)
                return false;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
                return false;
        if (userns_cache_charge(b->userns_cache, cred.pid, cred.uid, now, &charged) < 0 || charged == 0)
                return false;
        if (!request_budget_spent(b->request_budget, charged, a->max_requests_per_second, a->max_request_burst, now) ||
            !broker_would_refuse(b, charged))
                return false;
        (void)broker_admit_request(b, charged); /* refused: counted in its charge's next suppressed record */
        b->refused_unread++;
        return true;
}

/* "Too many requests" to a connection refused unread, and it is closed. */
static void broker_answer_unread(Broker *b, int fd) {
        char discard[CONNECTION_HEAD_SIZE];
        const uint8_t *frame;
        size_t size;

        wire_writer_begin(b->refusal, WIRE_REPLY_ERROR);
        wire_writer_put_u32(b->refusal, WIRE_TAG_ERROR, WIRE_ERROR_BUSY);
        wire_writer_put_string(b->refusal, WIRE_TAG_MESSAGE, REQUEST_TOO_MANY);
        wire_writer_put_u64(b->refusal, WIRE_TAG_REQUEST_ID, b->next_request_id++);
        if (wire_writer_finish(b->refusal, &frame, &size) == 0)
                (void)send(fd, frame, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        /* a request it sent is read before closing, so that the kernel does not reset the reply away */
        (void)recv(fd, discard, sizeof(discard), MSG_DONTWAIT);
        safe_close(fd);
}

static void broker_answer_parked(int fd, void *userdata) {
        broker_answer_unread(userdata, fd);
}

/* Return: false when @fd is refused unread (broker_refuse_unread()): the caller answers it; true when it
 * was taken up. */
static bool broker_accept_one(Broker *b, int fd) {
        Connection *c;
        int r;

        test_hook_client_socket(fd);
        if (broker_refuse_unread(b, fd))
                return false;
        r = connection_new(b, fd, b->next_request_id++, &c);
        if (r < 0)
                return true; /* a client we cannot even identify gets nothing */

        if (broker_connections_of_uid(b, c->peer.charged_uid) > b->config.max_connections_per_uid) {
                broker_refuse(b, c, "too many connections from this user");
                return true;
        }
        /* past the cap, only root's slots: anyone else makes room, or is told at once, so that root is
         * never stuck in the backlog behind them */
        if (b->n_connections > b->config.max_connections && c->peer.charged_uid != 0 && !broker_make_room(b, c)) {
                broker_refuse(b, c, "the agent serves as many connections as it may; try again shortly");
                return true;
        }
        connection_start(c);
        return true;
}

/* Out of fds: stop accepting for a moment (clients wait in the backlog), then try again. */
static int broker_on_fds_back(sd_event_source *s, uint64_t usec, void *userdata) {
        Broker *b = userdata;

        b->out_of_fds = false;
        broker_update_accepting(b);
        return 0;
}

static void broker_pause_for_fds(Broker *b, int error) {
        uint64_t now = 0;

        if (!b->fds_exhausted) /* once per episode: it retries every BROKER_FDS_RETRY_USEC */
                fprintf(stderr, "dsagent: out of file descriptors (%s, ERRNO=%d): not accepting; new clients wait in "
                                "the listen backlog\n", strerror(error), error);
        b->fds_exhausted = true;
        b->out_of_fds = true;
        broker_update_accepting(b);
        (void)sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        (void)sd_event_source_set_time(b->fds_timer, now + BROKER_FDS_RETRY_USEC);
        (void)sd_event_source_set_enabled(b->fds_timer, SD_EVENT_ONESHOT);
}

static int broker_on_listen(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Broker *b = userdata;
        int unread[BROKER_REFUSE_UNREAD_BURST];
        unsigned n_unread = 0;

        for (unsigned taken = 0, refused = 0; taken < BROKER_ACCEPT_BURST && refused < BROKER_REFUSE_UNREAD_BURST &&
                                              b->n_connections < b->config.max_connections + b->root_slots;) {
                int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (client < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                                broker_pause_for_fds(b, errno);
                        break; /* EAGAIN, or a transient error: the next wake-up retries */
                }
                if (b->fds_exhausted) {
                        fprintf(stderr, "dsagent: file descriptors available again: accepting\n");
                        b->fds_exhausted = false;
                }
                if (broker_accept_one(b, client)) {
                        taken++;
                        continue;
                }
                /* held a while, so that its client does not come back at once; or, the park full, answered
                 * at the end of the wake-up */
                refused++;
                if (!park_hold(b->park, client))
                        unread[n_unread++] = client;
        }
        for (unsigned i = 0; i < n_unread; i++)
                broker_answer_unread(b, unread[i]);
        return 0;
}

static int broker_on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        Broker *b = userdata;

        /* STOPPING first, so systemd queues new connections for the next instance */
        (void)sd_notify(false, "STOPPING=1\nSTATUS=Exiting after idle timeout");
        return sd_event_exit(b->event, 0);
}

Broker *broker_free(Broker *b) {
        if (!b)
                return NULL;
        while (b->connections)
                connection_destroy(b->connections);
        park_free(b->park); /* answers what it holds: before the refusal's frame goes */
        holders_free(b->holders);
        userns_cache_free(b->userns_cache);
        free(b->refusal);
        sd_event_source_disable_unref(b->listen_source);
        sd_event_source_disable_unref(b->idle_timer);
        sd_event_source_disable_unref(b->fds_timer);
        if (b->suppressed_timer && request_budget_has_suppressed(b->request_budget))
                request_budget_flush(b->request_budget, broker_report_suppressed, b); /* nothing goes unrecorded */
        /* first: the uploads it answers as ended still record through the broker */
        egress_upload_forget_waiting(b);
        b->egress = egress_client_free(b->egress);
        free(b->egress_missing);
        sd_event_source_disable_unref(b->suppressed_timer);
        request_budget_free(b->request_budget);
        safe_close(b->listen_fd);
        policy_unref(b->policy);
        free(b->policy_problem);
        rate_limiter_free(b->rate_limiter);
        startup_traces_free(b->startup_traces); /* before the ports: a trace may wait on a runtime's */
        collector_free(b->collector);           /* before the workers: it cancels its jobs */
        retention_free(b->retention);           /* after what waits on it (the dumps), before the workers */
        crash_collector_free(b->crash_collector); /* before the workers: it cancels its jobs */
        admission_free(b->admission);           /* after both: their sessions and dumps end counted */
        ports_free(b->ports);
        target_cache_free(b->targets);
        candidate_walks_free(b->walks); /* before the workers: it cancels its walk's job */
        worker_pool_free(b->workers);
        dump_slots_free(b->dump_slots);
        pam_checker_free(b->pam);
        sd_event_unref(b->event);
        free(b);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(Broker *, broker_free);

/* Prints what is wrong where an operator starting the agent by hand looks first. */
static void broker_print_problems(const Broker *b, const PolicyDiagnostics *d) {
        for (size_t i = 0; i < d->n; i++)
                fprintf(stderr, "%s\n", d->messages[i]);
        fprintf(stderr, "dsagent: the policy in %s is broken: serving root alone, under the built-in rules, until a "
                        "reload loads a valid one\n", b->config.policy_path);
}

int broker_load_policy(Broker *b) {
        _cleanup_(policy_diagnostics_done) PolicyDiagnostics d = {};
        AuditPolicyEvent e = { .path = b->config.policy_path, .had_policy = b->policy && !b->policy_problem };
        bool starting = !b->policy;
        Policy *p = NULL;
        char *problem;
        int r;

        r = policy_load(b->config.policy_path, b->config.policy_must_exist, &p, &d);
        e.loaded = r == 0;
        e.errors = d.messages;
        e.n_errors = d.n;
        if (r == 0) {
                e.n_rules = p->n_rules;
                e.n_files = p->n_files;
                policy_unref(b->policy);
                b->policy = p;
                free(b->policy_problem);
                b->policy_problem = NULL;
                target_cache_clear(b->targets); /* facts are kept as long as the policy in force says */
                /* the workers hold the policy they were forked with: new ones from now on */
                if (b->workers)
                        worker_pool_recycle(b->workers);
        }
        if (r == 0) {
                (void)ports_apply(b->ports, b->policy);
                if (b->collector)
                        collector_apply(b->collector);
                retention_policy_changed(b->retention); /* its rules, and dump_dir, may be new */
                if (b->crash_collector)
                        crash_collector_apply(b->crash_collector);
        }
        /* after the ports and tables follow it: whoever reads the record finds the policy in force whole
         * (a port's file has the new ACL; a reader who then changes it is not undone by this reload) */
        (void)audit_log_policy(b->config.audit_sink, &e);
        if (r == 0)
                return 0;
        if (starting)
                broker_print_problems(b, &d);
        if (e.had_policy)
                return POLICY_LOAD_E_INVALID; /* the last good policy stays */

        /* nothing has loaded yet: the broken state starts, or says what is wrong now */
        problem = policy_load_problem(r, &d);
        if (problem) {
                free(b->policy_problem);
                b->policy_problem = problem;
        }
        if (starting) {
                b->policy = policy_new_fallback();
                if (!b->policy || !b->policy_problem)
                        return -ENOMEM;
                (void)ports_apply(b->ports, b->policy); /* ports the socket unit passed refuse, not hang */
        }
        return POLICY_LOAD_E_INVALID;
}

/**
 * broker_start_workers() - fork the worker processes, and have one clean up after an agent that died
 *
 * After the sandbox: the workers inherit it, and their memory is the agent's as it is now.
 *
 * Return: 0 or a negative errno.
 */
int broker_start_workers(Broker *b) {
        WorkerPoolConfig config = {
                .handler = jobs_handle,
                .max_workers = BROKER_WORKERS_MAX,
                .idle_workers = BROKER_WORKERS_IDLE,
                .per_owner = BROKER_WORKERS_PER_USER,
                .queue_per_owner = test_hook_worker_queue(b->config.max_connections_per_uid),
        };
        int r;

        r = worker_pool_new(b->event, &config, &b->workers);
        if (r < 0)
                return r;
        return jobs_clean_stale(b);
}

/*
 * Connections are admitted only as far as fds go: the soft limit is raised
 * toward the hard one, and if that is still short of max_connections, fewer
 * are served at a time and the rest wait in the listen backlog, instead of
 * requests failing halfway for want of an fd.
 */
/*
 * Workers list ps candidates at a lower priority, so that walking all of
 * /proc for one user's ps yields the CPU to others' short jobs, and go back
 * to normal after. Going back needs RLIMIT_NICE at 20 (nice 0 allowed); the
 * unit sets it (LimitNICE=+0), and root before the sandbox can too.
 */
static bool broker_allow_renice(void) {
        struct rlimit rl = { .rlim_cur = 20, .rlim_max = 20 };
        struct rlimit now;

        if (getrlimit(RLIMIT_NICE, &now) == 0 && now.rlim_cur >= 20)
                return true;
        /* without it, every job runs at normal priority */
        return setrlimit(RLIMIT_NICE, &rl) == 0;
}

/*
 * Then the ports (ports.h): connections still to advertise and registered
 * runtimes hold fds too. They get what the connections leave: clients first,
 * since a runtime refused a registration still runs, and says so in a record.
 */
static void broker_fit_fd_limit(Broker *b) {
        uint64_t need = BROKER_FDS_BASE +
                        (uint64_t)(b->config.max_connections + BROKER_ROOT_SLOTS) * BROKER_FDS_PER_CONNECTION +
                        PORTS_FDS_MAX;
        struct rlimit rl;
        unsigned fit;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        b->fds_for_ports = PORTS_FDS_MAX;
        b->root_slots = BROKER_ROOT_SLOTS;
        if (rl.rlim_cur < need + PARK_MAX && rl.rlim_max > rl.rlim_cur) {
                rl.rlim_cur = rl.rlim_max < need + PARK_MAX ? rl.rlim_max : need + PARK_MAX;
                (void)setrlimit(RLIMIT_NOFILE, &rl); /* on failure the old limit stays, and is fitted to below */
                (void)getrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur >= need) {
                /* refused connections held a while (park.h) get what is left, last: nobody needs them */
                b->park_max = rl.rlim_cur - need < PARK_MAX ? (unsigned)(rl.rlim_cur - need) : PARK_MAX;
                return;
        }
        need -= PORTS_FDS_MAX;
        if (rl.rlim_cur >= need) {
                b->fds_for_ports = rl.rlim_cur - need;
                fprintf(stderr, "dsagent: the open files limit (%llu) leaves room for %u registered runtimes on "
                                "ports, not %u (LimitNOFILE= of at least %llu lifts this)\n",
                        (unsigned long long)rl.rlim_cur, ports_runtimes_for_fds(b->fds_for_ports),
                        PORTS_RUNTIMES_MAX, (unsigned long long)(need + PORTS_FDS_MAX));
                return;
        }
        b->fds_for_ports = 0;
        /* short of fds, everyone waits in the backlog alike: a slot past the cap would need fds it has not */
        b->root_slots = 0;
        fit = rl.rlim_cur > BROKER_FDS_BASE + BROKER_FDS_PER_CONNECTION
                      ? (unsigned)((rl.rlim_cur - BROKER_FDS_BASE) / BROKER_FDS_PER_CONNECTION)
                      : 1;
        fprintf(stderr,
                "dsagent: the open files limit (%llu) allows %u connections at a time, not max_connections=%u; "
                "the others wait in the listen backlog (LimitNOFILE= of at least %llu lifts this)\n",
                (unsigned long long)rl.rlim_cur, fit, b->config.max_connections, (unsigned long long)need);
        b->config.max_connections = fit;
}

/**
 * broker_new() - serve clients on @listen_fd, once broker_load_policy() has put a policy in force
 *
 * The broker owns @listen_fd from now on.
 *
 * Return: 0 or a negative errno.
 */
int broker_new(sd_event *event, int listen_fd, const BrokerConfig *config, Broker **ret) {
        _cleanup_(broker_freep) Broker *b = NULL;
        int r;

        b = calloc(1, sizeof(*b));
        if (!b) {
                safe_close(listen_fd);
                return -ENOMEM;
        }
        b->listen_fd = listen_fd;
        b->event = sd_event_ref(event);
        b->config = *config;
        b->connection_opened = broker_connection_opened;
        b->connection_closed = broker_connection_closed;
        b->dispatch = commands_dispatch;
        b->config.reply_timeout_usec = test_hook_reply_timeout(config->reply_timeout_usec);
        b->config.request_timeout_usec = test_hook_request_timeout(config->request_timeout_usec);
        b->config.max_connections = test_hook_max_connections(config->max_connections);
        broker_fit_fd_limit(b);
        b->may_renice = broker_allow_renice();
        b->rate_limiter = rate_limiter_new();
        b->request_budget = request_budget_new();
        b->admission = admission_new();
        b->holders = holders_new();
        b->userns_cache = userns_cache_new();
        b->refusal = malloc(sizeof(WireWriter));
        if (!b->rate_limiter || !b->request_budget || !b->admission || !b->holders || !b->userns_cache || !b->refusal)
                return -ENOMEM;
        r = target_cache_new(event, &b->targets);
        if (r < 0)
                return r;
        r = park_new(event, b->park_max, broker_answer_parked, b, &b->park);
        if (r < 0)
                return r;
        r = candidate_walks_new(b, &b->walks);
        if (r < 0)
                return r;
        r = sd_event_add_time(event, &b->suppressed_timer, CLOCK_MONOTONIC, 0, 0, broker_on_suppressed_timer, b);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(b->suppressed_timer, SD_EVENT_OFF);
        r = pam_checker_start(event, &b->pam);
        if (r < 0)
                return r;
        if (mkdir(b->config.runtime_dir, 0711) < 0 && errno != EEXIST)
                return -errno;
        b->dump_slots = dump_slots_new();
        if (!b->dump_slots)
                return -ENOMEM;
        r = ports_new(b, &b->ports);
        if (r < 0)
                return r;
        ports_set_fd_budget(b->ports, b->fds_for_ports);
        r = startup_traces_new(b, &b->startup_traces);
        if (r < 0)
                return r;
        r = collector_new(b, &b->collector);
        if (r < 0)
                return r;
        r = retention_new(b, &b->retention);
        if (r < 0)
                return r;
        r = crash_collector_new(b, &b->crash_collector);
        if (r < 0)
                return r;
        jobs_set_broker(b);

        r = sd_event_add_io(event, &b->listen_source, listen_fd, EPOLLIN, broker_on_listen, b);
        if (r < 0)
                return r;
        r = sd_event_add_time(event, &b->fds_timer, CLOCK_MONOTONIC, 0, 0, broker_on_fds_back, b);
        if (r < 0)
                return r;
        (void)sd_event_source_set_enabled(b->fds_timer, SD_EVENT_OFF);
        /* request ids: unique for the agent's life, and unlike those of an agent before it */
        if (getrandom(&b->next_request_id, sizeof(b->next_request_id), 0) != sizeof(b->next_request_id))
                return -EIO;
        if (b->config.idle_exit_usec > 0) {
                r = sd_event_add_time_relative(event, &b->idle_timer, CLOCK_MONOTONIC,
                                               b->config.idle_exit_usec, 0, broker_on_idle, b);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(b);
        return 0;
}
