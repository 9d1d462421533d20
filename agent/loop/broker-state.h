/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the agent holds while it runs, that its modules read and charge: the event loop, the
 * configuration, the policy in force, the budgets, and the services each module owns. broker.c
 * makes it and runs the loop on it; a module includes this, not the loop.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "agent/loop/admission.h"
#include "agent/audit/audit.h"
#include "policy/policy.h"
#include "agent/loop/ratelimit.h"
#include "agent/loop/request-budget.h"

typedef struct Connection Connection;
typedef struct Request Request;
typedef struct WireMessage WireMessage;

/* Worker jobs one owner (a user, or the agent's startup traces) may have running at once. */
#define BROKER_WORKERS_PER_USER 2

typedef struct BrokerConfig {
        AuditSink audit_sink;
        const char *policy_path;
        bool policy_must_exist;        /* false: a missing file means the built-in policy */
        uint64_t request_timeout_usec; /* for a client to send its whole request */
        uint64_t runtime_timeout_usec; /* for a runtime to answer */
        uint64_t reply_timeout_usec;   /* for a client to read its reply */
        uint64_t idle_exit_usec;       /* 0: never exit when idle */
        uint64_t dump_timeout_usec;    /* for a runtime to finish a dump */
        uint64_t dump_start_timeout_usec; /* for its first byte: a runtime that writes nothing frees the slot */
        /* after it: a runtime that writes no byte for this long, or fewer than dump_min_rate bytes a
         * second over any such stretch, has its dump cut (a trickle would hold its slot) */
        uint64_t dump_stall_timeout_usec;
        uint64_t dump_min_rate;        /* bytes per second; 0: only stalls are cut */
        const char *runtime_dir;       /* notes of staging directories in use, for clean-up after a crash */
        unsigned max_connections;
        unsigned max_connections_per_uid;
} BrokerConfig;

#define BROKER_CONFIG_DEFAULT                                   \
        {                                                       \
                .audit_sink = AUDIT_SINK_AUTO,                  \
                .request_timeout_usec = 5 * 1000000ULL,         \
                .runtime_timeout_usec = 10 * 1000000ULL,        \
                .reply_timeout_usec = 30 * 1000000ULL,          \
                .dump_timeout_usec = 300 * 1000000ULL,          \
                .dump_start_timeout_usec = 30 * 1000000ULL,     \
                .dump_stall_timeout_usec = 30 * 1000000ULL,     \
                .dump_min_rate = 1024 * 1024,                   \
                .runtime_dir = "/run/dsagent",                  \
                .max_connections = 512,                         \
                .max_connections_per_uid = 32,                  \
        }

typedef struct Broker {
        sd_event *event;
        int listen_fd;
        sd_event_source *listen_source;
        sd_event_source *idle_timer;
        sd_event_source *fds_timer;    /* the listener rests while the agent is out of fds */
        bool out_of_fds;
        unsigned root_slots;           /* connections root may hold past max_connections (0 when fds are short) */
        bool may_renice;               /* workers may lower their priority and raise it back (RLIMIT_NICE) */
        bool fds_exhausted;            /* said so on stderr; cleared, and said, at the next accept */
        uint64_t next_request_id;
        BrokerConfig config;
        Connection *connections;
        unsigned n_connections;
        struct Holders *holders;       /* the connections of each charge, and which are idle (holders.h) */
        /* Refusing without reading the peer (broker.c): until when (a peer refused over its request
         * budget opens it for a second), whose namespaces' charges are known (userns.h), the
         * refusal's frame, and what was refused since the last count (for test hooks) */
        uint64_t refuse_unread_until;
        struct UsernsCache *userns_cache;
        struct Park *park;             /* refused connections held a while before their answer (park.h) */
        unsigned park_max;             /* as many as the open files limit leaves, PARK_MAX at most */
        struct WireWriter *refusal;
        uint64_t refused_unread, refused_read;
        Policy *policy;                /* replaced whole on reload; requests hold their own reference */
        char *policy_problem;          /* NULL, or why no policy file has loaded since start: then
                                        * policy is policy_new_fallback() and only root is served */
        RateLimiter *rate_limiter;     /* survives reloads: a reload does not reset anyone's budget */
        RequestBudget *request_budget; /* requests each user may have decided and recorded; survives reloads too */
        sd_event_source *suppressed_timer; /* records what the budget refused, once a second */
        struct PamChecker *pam;        /* NULL: PAM checks cannot be made, and a policy asking for them denies */
        struct EgressClient *egress;   /* the egress process (egress-client.h), started with the agent when its
                                        * policy had an [egress.NAME] store; NULL: none, uploads fail recorded */
        struct EgressUpload *egress_waiting; /* uploads waiting to be handed over again (egress-upload.c) */
        unsigned n_egress_waiting;     /* how many: each holds two fds, so their number is bounded */
        char *egress_missing;          /* NULL, or why none runs though that policy had a store (its user is
                                        * missing), which each upload's failure record says */
        Admission *admission;          /* dumps and sessions running now */
        struct WorkerPool *workers;    /* where what can block runs (jobs.h) */
        struct DumpSlots *dump_slots;  /* dumps' bytes so far, shared with the workers */
        struct Ports *ports;           /* runtimes that connect in, and the sockets they connect to (ports.h) */
        struct StartupTraces *startup_traces; /* [[on_start]] traces running (on-start.h) */
        struct Collector *collector;   /* the [[collect]] tables' watches (collect.h) */
        struct CrashCollector *crash_collector; /* the [[collect]] tables with when.crash (crash-collect.h) */
        struct TargetCache *targets;   /* targets opened lately, reused for a while (target-cache.h) */
        struct CandidateWalks *walks;  /* ps's one walk of /proc at a time, shared (candidate-walk.h) */
        struct Retention *retention;   /* what of dump_dir goes, and when (retention.h) */
        uint64_t fds_for_ports;        /* of RLIMIT_NOFILE, what the ports may hold (PORTS_FDS_MAX at most) */
        uint64_t dump_bytes_in_flight; /* written by dumps in progress, which dump_dir does not list yet */
        /* The loop's own (broker.c), which a connection calls as it opens (0, or a negative errno: the
         * connection is not served) and, once opened, as it is destroyed: the loop keeps the list of
         * connections and of each charge's, and accepts, or rests, by their number. */
        int (*connection_opened)(struct Broker *b, Connection *c);
        void (*connection_closed)(struct Broker *b, Connection *c);
        /* What carries out a connection's request (commands_dispatch()), set by the loop. */
        void (*dispatch)(Request *req, const WireMessage *m);
} Broker;

/*
 * Whether a request of @uid is refused without being looked at, because
 * the policy files are broken. Root is still served, under the built-in
 * rules alone: the operator who must fix the policy may need the agent.
 */
bool broker_policy_refuses(const Broker *b, uid_t uid);

/*
 * broker_admit_request() - may @uid have one more request decided and recorded now?
 *
 * The [agent] request budget, for everyone. A refused request gets no
 * record of its own: the refusals of each user are counted and recorded
 * once a second (b->suppressed_timer, whose callback is the loop's).
 */
bool broker_admit_request(Broker *b, uid_t uid);
