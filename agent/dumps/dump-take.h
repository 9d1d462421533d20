/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Taking a core dump of a process into an unnamed file of dump_dir, for whoever asked: a client's
 * dump request (dump.h) or a [[collect]] table's action (collect-dump.h). No Request, no reply:
 * the caller decides, counts (admission.h), names, labels and publishes; this does the rest.
 *
 * The steps: a retention pass over dump_dir (retention.h), which the dump waits for; the staging
 * directory and its FIFO made in the target's /tmp (a worker); dump_dir
 * opened, an unnamed file and a slot for its bytes (dump-writer.h); the bytes moved from the FIFO
 * into the file (a worker, for as long as the dump takes); the runtime asked (GenerateCoreDump3,
 * falling back to older versions), through the port the runtime connected in on when it did
 * (ports.h), else its socket. When the runtime says OK the stream is told to finish, and the file
 * is checked to be a whole core. A runtime that sends no byte within --dump-start-timeout, or
 * after it stalls or writes slower than --dump-min-rate, has its dump cut. Nothing blocks the loop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"
#include "common/wire.h"

typedef struct Broker Broker;
typedef struct Target Target;
typedef struct DumpTake DumpTake;

typedef enum DumpTakeFailure {
        DUMP_TAKE_OK,
        DUMP_TAKE_FAILED,  /* @error and @why say it */
        DUMP_TAKE_ERRNO,   /* the agent's own failure: @r, a negative errno, with @why */
        DUMP_TAKE_RUNTIME, /* the runtime refused or failed: @hresult, with @why */
        DUMP_TAKE_TARGET,  /* the process cannot be reached: @r, a target code (target.h), with @why (or NULL) */
} DumpTakeFailure;

/* How a dump ended. On DUMP_TAKE_OK the dump is in @file_fd, @bytes long, until dump_take_free(); @why
 * may be the DumpTake's own: it lasts until dump_take_free() too. */
typedef struct DumpTakeResult {
        DumpTakeFailure failure;
        WireError error;
        int r;
        uint32_t hresult;
        const char *why;
        int dir_fd, file_fd;   /* DUMP_TAKE_OK: dump_dir, and the unnamed file holding the dump */
        uint64_t bytes;
        bool changed;          /* DUMP_TAKE_OK: the process changed credentials; its memory is root's alone */
} DumpTakeResult;

typedef struct DumpTakeOps {
        /* the stream wrote @bytes so far (at most once a second); may be NULL */
        void (*progress)(void *userdata, uint64_t bytes);
        /* the end, exactly once, never from dump_take_start(); the caller frees the DumpTake then or later */
        void (*done)(void *userdata, const DumpTakeResult *result);
} DumpTakeOps;

typedef struct DumpTakeParams {
        Broker *broker;
        const Policy *policy;     /* dump_dir, max_use, keep_free; borrowed: it outlives the dump */
        Target *target;           /* pinned, its socket found; borrowed likewise */
        PolicyDumpType type;
        uint32_t owner;           /* whose jobs they are, for the worker pool (a uid) */
        uint64_t job_timeout_usec; /* the staging job's */
        /* a user's dump: when it would break max_use or keep_free, the artifacts of tables that yield
         * to dumps are removed to make room for it (retention.h), recorded as made for this request */
        bool make_room;
        uint64_t request_id;
        uid_t requester;
} DumpTakeParams;

/**
 * dump_take_start() - start taking the dump @p describes
 *
 * Return: 0 with *@ret (its end comes to @ops->done), or a JOBS_E_* code or a negative errno
 * (dump_take_job_error() maps it) with nothing started.
 */
int dump_take_start(const DumpTakeParams *p, const DumpTakeOps *ops, void *userdata, DumpTake **ret);

/* Stops whatever still runs (the runtime's createdump fails on its next write) and frees it all. */
DumpTake *dump_take_free(DumpTake *t);

/* What a staging job's end (jobs.h's codes) means to a client. */
WireError dump_take_job_error(int r);
