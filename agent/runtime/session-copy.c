/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The copy dump_dir keeps of a client's trace or gcdump session (session-copy.h): the file, the slot,
 * the worker's pipe and control socket, and the worker's outcome.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/dumps/dump-publish.h"
#include "agent/dumps/dump-writer.h"
#include "agent/loop/broker-state.h"
#include "agent/runtime/session-copy.h"
#include "agent/workers/jobs.h"
#include "common/cleanup.h"

/* The pipe the worker reads: as large as the client's, so that the copy rarely holds the stream back. */
#define SESSION_COPY_PIPE_SIZE (1 << 20)

struct SessionCopy {
        Broker *broker;
        bool gcdump;
        int dir_fd, file_fd;
        int control_fd;         /* the agent's end: closing it cancels a gcdump's worker, so it stays open */
        unsigned slot;
        bool have_slot;
        JobCall job;
        bool ended, whole;
        uint64_t bytes;
        char why[256];
        SessionCopyDone done;
        void *userdata;
};

static void copy_ended(SessionCopy *c, bool whole, uint64_t bytes, const char *why) {
        c->ended = true;
        c->whole = whole && bytes > 0;
        c->bytes = bytes;
        if (!c->whole)
                snprintf(c->why, sizeof(c->why), "%s", bytes == 0 && whole ? "nothing came" : why);
        if (c->have_slot) /* the file holds the bytes now; the slot counted them while they were written */
                dump_slots_release(c->broker->dump_slots, c->slot);
        c->have_slot = false;
        c->done(c->userdata);
}

/* A job's failure, in words: @r a JOBS_E_* code or a negative errno, @why the worker's own words or NULL. */
static void failure_text(int r, const char *why, char *buf, size_t size) {
        snprintf(buf, size, "%s",
                 r == JOBS_E_NO_SPACE ? (why ? why : "no room in dump_dir")
                 : r == JOBS_E_TIMEOUT ? "the worker did not finish in time"
                 : r == JOBS_E_NO_HEAP ? (why ? why : "the stream made no heap dump")
                 : r < 0               ? strerror(-r)
                                       : "the worker failed");
}

static void trace_copied(void *userdata, int r, bool ended, bool limited, const char *why) {
        SessionCopy *c = userdata;
        struct stat st;
        char text[256];

        if (r == 0 && !ended)
                snprintf(text, sizeof(text), "the stream passed max_trace_size and its rundown's allowance");
        else
                failure_text(r, why, text, sizeof(text));
        copy_ended(c, r == 0 && ended, fstat(c->file_fd, &st) == 0 ? (uint64_t)st.st_size : 0, text);
}

static void gcdump_copied(void *userdata, int r, const JobGcdumpResult *res, const char *why) {
        SessionCopy *c = userdata;
        char text[256];

        failure_text(r, why, text, sizeof(text));
        copy_ended(c, r == 0, r == 0 ? res->bytes : 0, text);
}

int session_copy_start(const SessionCopyParams *p, SessionCopyDone done, void *userdata, SessionCopy **ret,
                       int *ret_pipe_fd, const char **ret_why) {
        _cleanup_(session_copy_freep) SessionCopy *c = NULL;
        _cleanup_close_ int pipe_read = -EBADF, pipe_write = -EBADF, theirs = -EBADF;
        JobRecording rec;
        int fds[2], r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                *ret_why = "out of memory";
                return -ENOMEM;
        }
        *c = (SessionCopy){ .broker = p->broker, .gcdump = p->gcdump, .dir_fd = -EBADF, .file_fd = -EBADF,
                            .control_fd = -EBADF, .done = done, .userdata = userdata };
        r = dump_dir_open(p->policy->agent.dump_dir, &c->dir_fd, ret_why);
        if (r != 0) {
                if (!*ret_why)
                        *ret_why = "cannot open dump_dir";
                return r < 0 ? r : -EPERM;
        }
        c->file_fd = openat(c->dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (c->file_fd < 0) {
                *ret_why = "cannot make a file in dump_dir";
                return -errno;
        }
        r = dump_slots_claim(p->broker->dump_slots, &c->slot);
        if (r < 0) {
                *ret_why = "every dump slot is taken";
                return r;
        }
        c->have_slot = true;
        if (pipe2(fds, O_CLOEXEC) < 0 || (pipe_read = fds[0], pipe_write = fds[1],
                                          fcntl(pipe_write, F_SETFL, O_NONBLOCK) < 0)) {
                *ret_why = "cannot make the copy's pipe";
                return -errno;
        }
        (void)fcntl(pipe_write, F_SETPIPE_SZ, SESSION_COPY_PIPE_SIZE);
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0) {
                *ret_why = "cannot make the worker's control socket";
                return -errno;
        }
        c->control_fd = fds[0];
        theirs = fds[1];
        rec = (JobRecording){ .owner = p->owner, .stream_fd = pipe_read, .file_fd = c->file_fd, .dir_fd = c->dir_fd,
                              .control_fd = theirs, .slot = c->slot, .max_bytes = p->max_bytes,
                              .timeout_usec = p->timeout_usec,
                              .limits = { .max_use = p->policy->agent.max_use,
                                          .keep_free = p->policy->agent.keep_free } };
        r = p->gcdump ? jobs_record_gcdump(p->broker, &rec, gcdump_copied, c, &c->job)
                      : jobs_record_trace(p->broker, &rec, trace_copied, c, &c->job);
        if (r != 0) {
                *ret_why = r == JOBS_E_WORKER ? "no worker free" : "cannot start the worker";
                return r;
        }
        /* the worker holds its own copies of the pipe's read end and of its control socket's end */
        *ret_pipe_fd = TAKE_FD(pipe_write);
        *ret = TAKE_PTR(c);
        return 0;
}

bool session_copy_ended(const SessionCopy *c) {
        return c->ended;
}

bool session_copy_result(const SessionCopy *c, int *ret_dir_fd, int *ret_file_fd, uint64_t *ret_size,
                         const char **ret_why) {
        if (!c->ended || !c->whole) {
                *ret_why = c->ended ? c->why : "the worker is not done";
                return false;
        }
        *ret_dir_fd = c->dir_fd;
        *ret_file_fd = c->file_fd;
        *ret_size = c->bytes;
        return true;
}

SessionCopy *session_copy_free(SessionCopy *c) {
        if (!c)
                return NULL;
        if (c->job.job)
                worker_job_cancel(c->job.job);
        if (c->have_slot)
                dump_slots_release(c->broker->dump_slots, c->slot);
        safe_close(c->control_fd);
        safe_close(c->file_fd);
        safe_close(c->dir_fd);
        free(c);
        return NULL;
}
