/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The copy dump_dir keeps of a client's trace or gcdump session when its rule names an egress store
 * (docs/egress.md): the session (session.c) tees the runtime's stream into a pipe, and a worker writes
 * it into an unnamed file of dump_dir with the recorder's jobs (jobs_record_trace(): the nettrace as
 * it came; jobs_record_gcdump(): the .gcdump made of it, as for a [[collect]] table's then.gcdump),
 * counted in a dump slot and under dump_dir's guards (max_use, keep_free). A copy that would break
 * them is dropped, and the client's stream goes on. Once the session's stream has ended and the
 * worker is done, the session publishes the file as a dump is (dump_publish_session_copy()).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "policy/policy.h"

typedef struct Broker Broker;
typedef struct SessionCopy SessionCopy;

/* The worker is done with the copy: session_copy_result() says how it went. */
typedef void (*SessionCopyDone)(void *userdata);

typedef struct SessionCopyParams {
        Broker *broker;
        const Policy *policy;   /* dump_dir and its guards, read in the call */
        bool gcdump;            /* the .gcdump of the stream, else the stream itself (a .nettrace) */
        uint32_t owner;         /* whose job it counts as (the requester's charged uid) */
        uint64_t max_bytes;     /* of the stream: the worker reads no more */
        uint64_t timeout_usec;  /* the job's, all of it */
} SessionCopyParams;

/*
 * session_copy_start() - dump_dir, its unnamed file, a dump slot, and the worker that writes the copy
 *
 * Return: 0 with *@ret and, in *@ret_pipe_fd, the non-blocking write end of the pipe the worker reads
 * (the caller's: closing it is the stream's end); or a negative errno, or JOBS_E_WORKER, with *@ret_why
 * saying what failed, and nothing runs.
 */
int session_copy_start(const SessionCopyParams *p, SessionCopyDone done, void *userdata, SessionCopy **ret,
                       int *ret_pipe_fd, const char **ret_why);

/* The worker is done (done() was called). */
bool session_copy_ended(const SessionCopy *c);

/*
 * session_copy_result() - once ended: true with the file (its fd and dump_dir's, the copy's) and its size
 * when the copy is whole; false with *@ret_why (never NULL) saying why there is none to keep.
 */
bool session_copy_result(const SessionCopy *c, int *ret_dir_fd, int *ret_file_fd, uint64_t *ret_size,
                         const char **ret_why);

/* Cancels the worker if it still writes; NULL is fine. Return: NULL. */
SessionCopy *session_copy_free(SessionCopy *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(SessionCopy *, session_copy_free);
