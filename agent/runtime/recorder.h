/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the agent records on its own behalf: a [[collect]] table's trace, stacks, counters, gcdump
 * or exceptions action (collect-trace.h) and an [[on_start]] trace (on-start.h), one EventPipe
 * session each, whose artifact is published in dump_dir for the table's or the rule's readers.
 *
 * A recorder owns everything such a session holds: its seat among the process's sessions
 * (max_sessions_per_target, and its owner's max_sessions_per_user: admission.h), the room for its
 * records (audit_reserve(), before the runtime is asked anything), dump_dir and the unnamed file, a
 * dump slot for the bytes in flight (dump-writer.h), the runtime call (CollectTracing, then
 * StopTracing when the duration is over, or when the worker says max_bytes came: the runtime's
 * closing rundown still comes, up to EVENTPIPE_RUNDOWN_BYTES_MAX more, as a client's session
 * stopped at its size gets), the worker job that moves the stream to disk
 * (jobs_record_trace(), jobs_record_gcdump()) and, for stacks, counters and exceptions, the one that
 * renders its nettrace (jobs_stacks_text(), ...), the timer, and publishing: root's, exactly the
 * readers' ACL, labelled with the origin and the table (dump-publish.h), named
 * KIND.NAME.PID.ORIGIN-TABLE.TIME.SUFFIX, recorded as a dump, and removed again when that record
 * cannot be written (unless audit_failure = "allow"). The session's start and end are recorded as
 * any trace's (AuditSessionEvent).
 *
 * A published trace may have a second artifact beside it (RecorderSpec.flame): its flame graph, drawn
 * by a worker of the published file (jobs_flame_svg()), published as the trace is and named as it is
 * but for the kind and the suffix (flame.NAME.PID.ORIGIN-TABLE.TIME.svg), and recorded as a dump of its
 * own. The trace stays whatever becomes of it; RecorderResult.flame says what did.
 *
 * The caller says only what differs: which session, how long, how large, for whom, how the agent
 * reaches the runtime (RecorderOps.connect: a target's socket, or a port's connection), and what it
 * tells of the outcome. The seat is free again once the stream is no longer read.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/dumps/acl.h"
#include "agent/audit/audit.h"
#include "eventpipe/monitor-view.h"
#include "policy/policy.h"
#include "eventpipe/session-config.h"

typedef struct Broker Broker;
typedef struct Recorder Recorder;
typedef struct Target Target;

/* What becomes of the session's stream. */
typedef enum RecorderOutput {
        RECORDER_NETTRACE,      /* the stream itself, published as .nettrace */
        RECORDER_GCDUMP,        /* a worker makes a .gcdump of it; the session stops once the dump is whole */
        RECORDER_STACKS,        /* its nettrace, rendered as dsctl stacks' text (.txt) */
        RECORDER_COUNTERS,      /* ... as dsctl counters --format csv's CSV (.csv) */
        RECORDER_EXCEPTIONS,    /* ... as dsctl exceptions' text (.txt) */
} RecorderOutput;

/* RecorderOps.connect()'s answers besides 0 and a negative errno. */
enum {
        RECORDER_CONNECT_LATER = 1,     /* recorder_connected() follows */
        RECORDER_CONNECT_RETRY,         /* not now (for a stop only): asked again a second later */
};

typedef struct RecorderResult RecorderResult;

typedef struct RecorderOps {
        /* A connection to the runtime for one command, the session's start and then its stop: 0 with
         * *@ret_fd (the recorder's), RECORDER_CONNECT_LATER, RECORDER_CONNECT_RETRY, or a negative errno
         * with *@ret_why (may stay NULL). */
        int (*connect)(void *userdata, int *ret_fd, const char **ret_why);
        /* The session runs, the worker reads it and its start is recorded. May be NULL. */
        void (*started)(void *userdata);
        /* The artifact was named, but its dump record could not be written (@r, a negative errno): it was
         * removed again. Before the session's end record. */
        void (*removed)(void *userdata, int r);
        /* The end, exactly once (never from recorder_start()): the caller frees the recorder then. */
        void (*done)(void *userdata, const RecorderResult *res);
} RecorderOps;

/* Strings point into the policy, or are literals: they live as long as the recorder's policy reference. */
typedef struct RecorderSpec {
        const char *origin;             /* "collect", "on_start": the records' origin, the file's label */
        const char *rule;               /* the table's or the rule's name */
        const char *kind;               /* "trace", "stacks", ...: the records' kind, the file's type and name */
        const char *profile;            /* the trace profile the session records name, or NULL */
        RecorderOutput output;
        Policy *policy;                 /* a reference is taken */
        Target *target;                 /* pinned; a reference is taken */
        uid_t owner;                    /* whose seat, session and jobs (the process's charged uid) */
        AclGrant readers;               /* the file's readers */
        const struct PolicyEgress *egress; /* the table's then.egress: the file is uploaded there too; NULL: not */
        const EventPipeConfig *config;  /* the session's providers (encoded at once) */
        uint64_t duration_usec;         /* StopTracing after this long */
        uint64_t max_bytes;             /* of the stream: the session is stopped there (its rundown on top) */
        unsigned audit_records;         /* the records whose room is held before the runtime is asked */
        const MonitorThrown *thrown;    /* RECORDER_EXCEPTIONS: shown first (copied); else NULL */
        bool flame;                     /* RECORDER_NETTRACE: its flame graph too, once the trace is published
                                         * (its dump record is one more of @audit_records) */
        const RecorderOps *ops;
        void *userdata;
} RecorderSpec;

/* recorder_start()'s codes: nothing runs, and *why says why. */
enum {
        RECORDER_E_NO_ROOM = 1,         /* the process's or its owner's sessions are all taken, or the audit
                                         * output takes no records now: nothing was asked of the runtime */
        RECORDER_E_FAILED,              /* dump_dir, the session's request or the runtime's socket failed */
};

/* How a recording ended (RecorderResult.end). */
typedef enum RecorderEnd {
        RECORDER_NOT_STARTED,   /* the runtime was not reached, or did not start the session (@text; @error) */
        RECORDER_COLLECTED,     /* published: @path, @bytes */
        RECORDER_EMPTY,         /* nothing came (@why, the worker's, may be NULL) */
        RECORDER_NOT_STORED,    /* what came could not be written or published (@text; @error: a negative
                                 * errno, or 0 for want of room) */
        RECORDER_REMOVED,       /* published, and removed again: RecorderOps.removed() said it */
} RecorderEnd;

/* The flame graph beside a published trace (RecorderSpec.flame). */
typedef struct RecorderFlame {
        bool asked;             /* the spec asked for it, and the trace was published: the rest says how it went */
        bool collected;         /* published: @path, @bytes; else @text says why there is none */
        const char *text;       /* a collect record's words: the path and size, or why not */
        const char *path;
        uint64_t bytes;
} RecorderFlame;

struct RecorderResult {
        RecorderEnd end;
        const char *text;       /* a collect record's words: the path and size, or why not */
        const char *path;       /* RECORDER_COLLECTED */
        uint64_t bytes;
        const char *how;        /* how the session ended, as its end record says; NULL before it began */
        const char *why;
        int error;
        RecorderFlame flame;    /* RECORDER_COLLECTED */
};

/*
 * recorder_start() - seat @spec's session, hold its records' room, open dump_dir and ask the runtime
 *
 * Return: 0 with *@ret (its end comes through @spec->ops->done); RECORDER_E_NO_ROOM or
 * RECORDER_E_FAILED, with the reason in @why, and nothing runs.
 */
int recorder_start(Broker *b, const RecorderSpec *spec, Recorder **ret, char *why, size_t why_size);

/* The connection RecorderOps.connect() said would come later: @fd (the recorder's), or -1 with @error. */
void recorder_connected(Recorder *r, int fd, int error);

/* The room held for the records (for the caller's own record of the outcome). */
AuditReservation *recorder_audit_room(Recorder *r);

/*
 * recorder_end_at_exit() - the agent exits: a recorder whose trace is published already, and whose flame graph a
 * worker still draws, ends now through done() (which frees it), with the trace's result and a flame graph text
 * that says why there is none, so that a published trace has its outcome told
 *
 * Return: true when done() was called; false when @r is not there yet (the caller frees it, recorder_free()).
 */
bool recorder_end_at_exit(Recorder *r);

/*
 * Frees @r; NULL is fine. A session still running is cut (its file, never named, goes with it) and its
 * end recorded ("agent-stopped"): only at the agent's exit does a caller free a recorder before done().
 * Return: NULL.
 */
Recorder *recorder_free(Recorder *r);
