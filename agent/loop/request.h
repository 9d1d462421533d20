/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One client request: what is asked, of which process, under which policy,
 * what was decided, the work carrying it out, and its audit record. Every
 * request ends with exactly one reply helper below, which writes the one
 * record of its decision and queues the last frame; the connection then
 * writes it out.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent/audit/audit.h"
#include "policy/policy.h"
#include "agent/loop/sockopt.h"
#include "agent/targets/target.h"
#include "common/wire.h"

typedef struct Broker Broker;
typedef struct Connection Connection;
typedef struct PamQuery PamQuery;
typedef struct WorkerJob WorkerJob;
typedef struct Request Request;
typedef struct StartupProbe StartupProbe;
typedef struct PortWaiter PortWaiter;

/* What a process that does not exist is answered with; an invisible one gets the very same. */
#define REQUEST_NO_SUCH_PROCESS "no such process"
/* What a request over its user's request budget is answered (request_reply_too_many()). */
#define REQUEST_TOO_MANY "too many requests from this user; try again shortly"
/* What everyone but root is answered while the policy files are broken; the details are root's to read. */
#define REQUEST_POLICY_BROKEN "the policy is broken, see journalctl -u dsagent; until it is fixed only root is served"

struct Request {
        Connection *connection; /* the transport: frames go out through it */
        Broker *broker;
        uint64_t id;            /* the audit record's id, told to the client */
        const PeerCreds *peer;  /* read from the kernel at accept, once */

        Policy *policy;         /* the policy the request started under, kept through a reload */
        PolicyRequest ask;      /* what is being decided */
        char *trace_profile;    /* owned storage for ask.trace_profile */
        PolicyVerdict verdict;  /* and the decision, once made */
        bool consume_rate;      /* whether the decision uses up the rule's rate limit */
        void (*decided)(Request *req);
        PamQuery *pam_query;
        Target *target;
        WorkerJob *job;         /* a worker is doing something for this request */
        void *job_callback;     /* what to call when it is done (jobs.h) */
        uint64_t job_timeout_usec; /* 0: the job's own default */
        /* the step a worker's answer continues with (command-steps.c) */
        void (*on_target)(Request *req);
        void (*on_runtime)(Request *req, int fd);
        PortWaiter *port_waiter; /* waits for the runtime's next connection to its port (ports.h) */
        PortWaiter *(*port_waiter_cancel)(PortWaiter *w); /* ports_waiter_cancel(), set with port_waiter */
        char *unit;             /* the unit the request named, for its answer */
        bool unit_pinned;       /* it named a pid too: that one, while it runs in the unit */
        StartupProbe *startup;  /* asking the runtime whether it is suspended at startup (startup.h) */
        StartupProbe *(*startup_free)(StartupProbe *p); /* startup_probe_free(), set with startup */
        void *work;             /* the command's own state */
        void (*work_free)(void *work);
        bool holds_session;     /* a trace or counters session of its target runs for it */
        bool want_progress;     /* the client asked for PROGRESS frames (commands_set_deadline()) */

        AuditRecord audit;
        /* room held for its records before anything is sent to a runtime (request_hold_audit()) */
        AuditReservation audit_room;
        unsigned audit_records; /* how many records its act writes: 1 (0 says so too), 2 for a dump, 3 for a session */
        bool admitted;          /* took one from its user's budget of recorded decisions */
        bool finished;          /* its reply and record are done */
};

void request_init(Request *req, Connection *c, uint64_t id);
/* Frees what the request holds; cancels its job and its PAM query. Only from connection_destroy(). */
void request_done(Request *req);

void request_set_target(Request *req, Target *t);

/* The loop's time (CLOCK_MONOTONIC, µs) as of the event being handled: one clock for every decision of a request. */
uint64_t request_now_usec(const Request *req);

/*
 * Every request, well-formed or not, first takes from its user's budget of
 * recorded decisions (broker_admit_request()). One over the budget is
 * refused with no record of its own and counted in a record that says how
 * many. Return: whether it was admitted (idempotent).
 */
bool request_admit(Request *req);

/*
 * request_hold_audit() - room for every record the request will write (req->audit_records: its
 * own, and a dump's or a session's start and end), held before anything is sent to the target's
 * runtime, so that what the runtime then does is recorded and the client told so whatever the
 * audit output's reader does meanwhile (audit_reserve()). The room is given back when the request
 * ends (request_done()); a request that ends before its reply, as when the agent stops, is
 * recorded then with it. Without room (the reader stopped and the queue is full) the request is
 * answered AUDIT_UNAVAILABLE here, and nothing may be sent.
 *
 * Return: whether the room is held (once held, true again at once).
 */
bool request_hold_audit(Request *req);

/* The reply helpers: each writes the request's audit record and queues its last frame. */
void request_reply_done(Request *req, const char *rule, const char *reason);
void request_reply_error(Request *req, AuditDecision decision, WireError error, const char *reason);
void request_reply_runtime_error(Request *req, uint32_t hresult, const char *reason);
/* An error that carries @hresult for a proxied tool (dsctl port answers the tool with it). */
void request_reply_error_hresult(Request *req, AuditDecision decision, WireError error, uint32_t hresult,
                                 const char *reason);
/* The record says @reason, the client reads @message: an answer that must not tell more than it may. */
void request_reply_error_as(Request *req, AuditDecision decision, WireError error, const char *reason,
                            const char *message);
/*
 * The agent itself failed (WIRE_ERROR_INTERNAL) with @error, a negative
 * errno: the words say "@what: strerror", the record carries ERRNO= too.
 */
void request_reply_errno(Request *req, int error, const char *what);
/* The agent ran out of memory serving the request: request_reply_errno() with -ENOMEM, in the words every command uses. */
void request_reply_oom(Request *req);
void request_reply_invisible(Request *req);
/* Refused before any decision, as too many: no record of its own (see request_admit()). */
void request_reply_too_many(Request *req);
/*
 * Refused because the policy files are broken (broker_policy_refuses()):
 * the client reads REQUEST_POLICY_BROKEN, the record names what is wrong
 * with the files (broker.policy_problem).
 */
void request_reply_policy_broken(Request *req);

/* Drops the pending PAM query, worker job and the command's work: the request is ending. */
void request_cancel_work(Request *req);
