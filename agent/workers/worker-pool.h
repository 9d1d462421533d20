/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Work that can block, done where it blocks only its own request: worker
 * processes forked from the agent (so as confined as it is), each doing one
 * job at a time. The event loop only hands jobs out and takes answers in.
 *
 * A job that outlives its deadline has its worker killed (the waits that a
 * lookup on a hung file system or a read of a process whose memory lock is
 * held can end in are killable, so the process goes) and a new worker takes
 * its place. Jobs of one owner (a requester's uid) run at most
 * WorkerPoolConfig.per_owner at once; the rest of that owner's jobs wait, so
 * one user's stuck lookups can occupy at most that many workers.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "common/cleanup.h"

/* One message each way, whole (SOCK_SEQPACKET), with at most this many fds. */
#define WORKER_MESSAGE_MAX (64 * 1024)
#define WORKER_FDS_MAX 4

enum {
        _WORKER_E_SUCCESS,
        WORKER_E_TIMEOUT,  /* the job outlived its deadline; its worker was killed */
        WORKER_E_DIED,     /* the worker died or broke the protocol */
        WORKER_E_FULL,     /* the owner has as many jobs waiting as it may */
};

typedef struct WorkerPool WorkerPool;
typedef struct WorkerJob WorkerJob;

/* A message and the fds that ride with it. In replies the receiver owns the fds. */
typedef struct WorkerMessage {
        const void *data;
        size_t size;
        int fds[WORKER_FDS_MAX];
        size_t n_fds;
        /* submit only: the caller keeps the fds open until the job is done or cancelled,
         * so the pool neither duplicates nor closes them */
        bool fds_borrowed;
} WorkerMessage;

/*
 * Runs in a worker process: answer @request into @reply (its data points to
 * a WORKER_MESSAGE_MAX buffer; set its size and fds). The request's fds are
 * closed after the handler returns, except those it took (set to -EBADF in
 * @request); fds put in the reply are closed after it
 * is sent. Return 0, or a negative errno for "no answer" (the job fails with
 * WORKER_E_DIED).
 */
typedef int (*WorkerHandler)(WorkerMessage *request, WorkerMessage *reply);

/*
 * Runs in the agent, once, from the event loop: @error is 0 with @reply, or
 * a WORKER_E_* code. The callee owns the reply's fds. The job is already
 * freed when it runs: nothing of it may be touched there.
 */
typedef void (*WorkerJobDone)(int error, WorkerMessage *reply, void *userdata);

typedef struct WorkerPoolConfig {
        WorkerHandler handler;
        unsigned max_workers;   /* processes at most */
        unsigned idle_workers;  /* kept ready, so that a job rarely waits for a fork */
        unsigned per_owner;     /* jobs one owner may have running at once */
        unsigned queue_per_owner; /* and waiting */
} WorkerPoolConfig;

/**
 * worker_pool_new() - a pool whose workers run @config->handler
 *
 * The idle workers are forked now. Call it after everything the workers
 * need is in memory (they inherit the agent's memory as it is when they are
 * forked) and after the sandbox (they inherit it too).
 *
 * Return: 0 or a negative errno.
 */
int worker_pool_new(sd_event *event, const WorkerPoolConfig *config, WorkerPool **ret);

WorkerPool *worker_pool_free(WorkerPool *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(WorkerPool *, worker_pool_free);

/**
 * worker_pool_submit() - have a worker answer @request within @timeout_usec
 * @owner: whose job it is (a uid): owners are limited apart
 * @request: copied, fds duplicated (unless borrowed); the caller keeps its own
 *
 * @done runs from the event loop, never from inside this call.
 *
 * Return: 0 with a handle for worker_job_cancel(), WORKER_E_FULL, or a negative errno.
 */
int worker_pool_submit(WorkerPool *p, uint32_t owner, const WorkerMessage *request, uint64_t timeout_usec,
                       WorkerJobDone done, void *userdata, WorkerJob **ret);

/*
 * The asker went away: @done will not be called. A job still waiting is
 * dropped; a running one has its worker killed, since nobody wants what it
 * is doing (a dump, a listing) any more.
 */
void worker_job_cancel(WorkerJob *job);

/*
 * The policy was reloaded: workers forked before hold the old one in their
 * memory. Idle ones are replaced now, busy ones once their job is done.
 */
void worker_pool_recycle(WorkerPool *p);
