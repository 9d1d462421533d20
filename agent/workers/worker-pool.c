/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The worker processes (worker-pool.h): forked from the agent, one job at a time each, killed at
 * their deadline; jobs.c hands them work, the broker owns the pool.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/workers/worker-pool.h"
#include "agent/support/test-hooks.h"

typedef struct Worker Worker;

struct Worker {
        WorkerPool *pool;
        Worker *prev, *next;
        int pidfd;
        int fd;                 /* our end of the socketpair */
        sd_event_source *io;    /* the reply, or the end of the worker */
        sd_event_source *exit_source; /* the pidfd: reaps the process once it is gone */
        WorkerJob *job;         /* running now; NULL when idle */
        unsigned generation;
        bool dead;              /* killed or broken: takes no job, waits to be reaped */
};

struct WorkerJob {
        WorkerPool *pool;
        WorkerJob *prev, *next; /* in the queue, while waiting */
        uint32_t owner;
        uint8_t *data;
        size_t size;
        int fds[WORKER_FDS_MAX];
        size_t n_fds;
        bool fds_borrowed;      /* the submitter's, open until the job ends: never closed here */
        uint64_t timeout_usec;
        sd_event_source *timer;
        Worker *worker;         /* while running */
        WorkerJobDone done;
        void *userdata;
};

typedef struct OwnerCount {
        uint32_t owner;
        unsigned running, queued;
} OwnerCount;

struct WorkerPool {
        sd_event *event;
        WorkerPoolConfig config;
        Worker *workers;
        unsigned n_workers;
        WorkerJob *queue_head, *queue_tail;
        OwnerCount *owners;
        size_t n_owners, allocated_owners;
        unsigned generation;
        _Alignas(max_align_t) uint8_t buf[WORKER_MESSAGE_MAX]; /* handlers read their structs in place */
};

static void pool_schedule(WorkerPool *p);

/* --- the worker process --- */

static void close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}

static ssize_t recv_with_fds(int fd, void *buf, size_t size, int *fds, size_t *n_fds, int flags) {
        char control[CMSG_SPACE(sizeof(int) * WORKER_FDS_MAX)];
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        ssize_t n;

        *n_fds = 0;
        n = recvmsg(fd, &mh, flags | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                        memcpy(fds + *n_fds, CMSG_DATA(cm), k * sizeof(int));
                        *n_fds += k;
                }
        if (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
                close_fds(fds, *n_fds);
                *n_fds = 0;
                return -EMSGSIZE;
        }
        return n;
}

static int send_with_fds(int fd, const void *data, size_t size, const int *fds, size_t n_fds, int flags) {
        char control[CMSG_SPACE(sizeof(int) * WORKER_FDS_MAX)] = {};
        struct iovec iov = { .iov_base = (void *)data, .iov_len = size };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (n_fds > 0) {
                struct cmsghdr *cm;

                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        }
        n = sendmsg(fd, &mh, flags | MSG_NOSIGNAL);
        if (n < 0)
                return -errno;
        return (size_t)n == size ? 0 : -EIO;
}

#if DSAGENT_TEST_HOOKS
/* Test builds only: a worker, inside the agent's sandbox it inherited, makes the IPv4 socket
 * DSAGENT_TEST_WORKER_INET_SOCKET asks for; surviving it is said, and is a failure of the sandbox. */
static void test_hook_worker_inet_socket(void) {
        if (!getenv("DSAGENT_TEST_WORKER_INET_SOCKET"))
                return;
        (void)socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        test_hook_note("a worker survived socket(AF_INET)");
        _exit(99);
}
#endif

static _Noreturn void worker_main(int fd, WorkerHandler handler) {
        static _Alignas(max_align_t) uint8_t request[WORKER_MESSAGE_MAX], reply[WORKER_MESSAGE_MAX];
        for (;;) {
                WorkerMessage q = { .data = request }, a = { .data = reply };
                ssize_t n = recv_with_fds(fd, request, sizeof(request), q.fds, &q.n_fds, 0);

                if (n == 0)
                        _exit(0); /* the agent closed its end: retired */
                if (n == -EINTR)
                        continue;
                if (n < 0)
                        _exit(1);
                q.size = (size_t)n;
#if DSAGENT_TEST_HOOKS
                test_hook_worker_inet_socket(); /* at a job: a worker that is only started idles */
#endif
                if (handler(&q, &a) < 0 || a.size > WORKER_MESSAGE_MAX || a.n_fds > WORKER_FDS_MAX)
                        _exit(1);
                close_fds(q.fds, q.n_fds);
                if (send_with_fds(fd, reply, a.size, a.fds, a.n_fds, 0) < 0)
                        _exit(1);
                close_fds(a.fds, a.n_fds);
        }
}

/* --- the agent's side --- */

static OwnerCount *owner_count(WorkerPool *p, uint32_t owner, bool create) {
        for (size_t i = 0; i < p->n_owners; i++)
                if (p->owners[i].owner == owner)
                        return &p->owners[i];
        if (!create)
                return NULL;
        if (p->n_owners == p->allocated_owners) {
                size_t n = p->allocated_owners ? p->allocated_owners * 2 : 16;
                OwnerCount *grown = realloc(p->owners, n * sizeof(*grown));
                if (!grown)
                        return NULL;
                p->owners = grown;
                p->allocated_owners = n;
        }
        p->owners[p->n_owners] = (OwnerCount){ .owner = owner };
        return &p->owners[p->n_owners++];
}

static void owner_forget_if_done(WorkerPool *p, OwnerCount *o) {
        if (o->running == 0 && o->queued == 0)
                *o = p->owners[--p->n_owners];
}

static void queue_remove(WorkerPool *p, WorkerJob *j) {
        if (j->prev)
                j->prev->next = j->next;
        else
                p->queue_head = j->next;
        if (j->next)
                j->next->prev = j->prev;
        else
                p->queue_tail = j->prev;
        j->prev = j->next = NULL;
}

static void job_free(WorkerJob *j) {
        sd_event_source_disable_unref(j->timer);
        if (!j->fds_borrowed)
                close_fds(j->fds, j->n_fds);
        free(j->data);
        free(j);
}

/* The job is over, one way or another: give the worker and the owner's share back. */
static void job_release(WorkerJob *j) {
        WorkerPool *p = j->pool;
        OwnerCount *o = owner_count(p, j->owner, false);

        if (j->worker) {
                j->worker->job = NULL;
                j->worker = NULL;
                if (o)
                        o->running--;
        } else {
                queue_remove(p, j);
                if (o)
                        o->queued--;
        }
        if (o)
                owner_forget_if_done(p, o);
}

static void job_finish(WorkerJob *j, int error, WorkerMessage *reply) {
        WorkerJobDone done = j->done;
        void *userdata = j->userdata;

        job_release(j);
        job_free(j);
        done(error, reply, userdata);
}

static void worker_unlink(Worker *w) {
        WorkerPool *p = w->pool;

        if (w->prev)
                w->prev->next = w->next;
        else
                p->workers = w->next;
        if (w->next)
                w->next->prev = w->prev;
        p->n_workers--;
}

static void worker_free(Worker *w) {
        sd_event_source_disable_unref(w->io);
        sd_event_source_disable_unref(w->exit_source);
        safe_close(w->fd);
        safe_close(w->pidfd);
        free(w);
}

/* Stops using a worker: killed (a job overran, or was cancelled) or retired (EOF makes it exit). */
static void worker_stop(Worker *w, bool kill) {
        w->dead = true;
        w->io = sd_event_source_disable_unref(w->io);
        w->fd = safe_close(w->fd);
        if (kill)
                (void)syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
}

/* The process is gone: reap it, and if a job was still on it, that job failed. */
static int worker_on_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Worker *w = userdata;
        WorkerPool *p = w->pool;
        siginfo_t si = {};
        WorkerJob *j = w->job;

        if (waitid(P_PIDFD, (id_t)w->pidfd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
                return 0;
        if (si.si_code == CLD_KILLED && si.si_status == SIGSYS)
                test_hook_note("a worker was killed by its system call filter");
        worker_unlink(w);
        if (j)
                job_finish(j, WORKER_E_DIED, NULL);
        worker_free(w);
        pool_schedule(p);
        return 0;
}

static int worker_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Worker *w = userdata;
        WorkerPool *p = w->pool;
        WorkerJob *j = w->job;
        WorkerMessage a = { .data = p->buf };
        ssize_t n;

        n = recv_with_fds(fd, p->buf, sizeof(p->buf), a.fds, &a.n_fds, MSG_DONTWAIT);
        if (n == -EAGAIN || n == -EINTR)
                return 0;
        if (n <= 0 || !j) {
                /* EOF, an error, or an answer nobody asked for: this worker is done */
                if (n > 0)
                        close_fds(a.fds, a.n_fds);
                worker_stop(w, true);
                return 0; /* the job, if any, fails once the process is reaped */
        }
        a.size = (size_t)n;
        job_finish(j, 0, &a);
        close_fds(a.fds, a.n_fds); /* what the callee did not take */
        if (w->generation != p->generation)
                worker_stop(w, false);
        pool_schedule(p);
        return 0;
}

/* fork() that hands back a pidfd of the child with it: the agent never signals a bare pid */
static pid_t fork_with_pidfd(int *ret_pidfd) {
        return (pid_t)syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, ret_pidfd, NULL, NULL);
}

static int worker_spawn(WorkerPool *p, Worker **ret) {
        Worker *w;
        int sv[2], pidfd = -EBADF, r;
        pid_t parent = getpid(), pid;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                free(w);
                return -errno;
        }
        pid = fork_with_pidfd(&pidfd);
        if (pid < 0) {
                r = -errno;
                close(sv[0]);
                close(sv[1]);
                free(w);
                return r;
        }
        if (pid == 0) {
                /* keep stdio (the audit fallback is the agent's, not ours) and the socket, nothing else */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || dup2(sv[1], 3) < 0 ||
                    close_range(4, ~0U, 0) < 0)
                        _exit(1);
                worker_main(3, p->config.handler);
        }
        close(sv[1]);
        *w = (Worker){ .pool = p, .fd = sv[0], .pidfd = pidfd, .generation = p->generation };
        r = sd_event_add_io(p->event, &w->io, w->fd, EPOLLIN, worker_on_io, w);
        if (r >= 0)
                r = sd_event_add_io(p->event, &w->exit_source, w->pidfd, EPOLLIN, worker_on_exit, w);
        if (r < 0) {
                (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                (void)waitid(P_PIDFD, (id_t)pidfd, &(siginfo_t){}, WEXITED);
                worker_free(w);
                return r;
        }
        w->next = p->workers;
        if (p->workers)
                p->workers->prev = w;
        p->workers = w;
        p->n_workers++;
        *ret = w;
        return 0;
}

static Worker *pool_idle_worker(WorkerPool *p) {
        for (Worker *w = p->workers; w; w = w->next)
                if (!w->job && !w->dead)
                        return w;
        return NULL;
}

static unsigned pool_live_workers(const WorkerPool *p, bool idle_only) {
        unsigned n = 0;

        for (const Worker *w = p->workers; w; w = w->next)
                n += !w->dead && (!idle_only || !w->job);
        return n;
}

static int job_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        WorkerJob *j = userdata;
        WorkerPool *p = j->pool;

        if (j->worker)
                worker_stop(j->worker, true);
        job_finish(j, WORKER_E_TIMEOUT, NULL);
        pool_schedule(p);
        return 0;
}

/* Hands @j to @w. Return: false when @w could not take it (it is then stopped). */
static bool job_start(WorkerJob *j, Worker *w) {
        WorkerPool *p = j->pool;
        OwnerCount *o = owner_count(p, j->owner, false);

        /* queued → running: a waiting job, an idle live worker */
        assert(!j->worker && !w->job && !w->dead);
        if (send_with_fds(w->fd, j->data, j->size, j->fds, j->n_fds, MSG_DONTWAIT) < 0) {
                worker_stop(w, true);
                return false;
        }
        queue_remove(p, j);
        if (!j->fds_borrowed)
                close_fds(j->fds, j->n_fds);
        j->n_fds = 0;
        j->worker = w;
        w->job = j;
        if (o) {
                o->queued--;
                o->running++;
        }
        return true;
}

/* The first waiting job whose owner may run one more. */
static WorkerJob *pool_next_job(WorkerPool *p) {
        for (WorkerJob *j = p->queue_head; j; j = j->next) {
                OwnerCount *o = owner_count(p, j->owner, false);
                if (!o || o->running < p->config.per_owner)
                        return j;
        }
        return NULL;
}

static void pool_schedule(WorkerPool *p) {
        WorkerJob *j;

        while ((j = pool_next_job(p))) {
                Worker *w = pool_idle_worker(p);

                if (!w && (pool_live_workers(p, false) >= p->config.max_workers || worker_spawn(p, &w) < 0))
                        break; /* its turn comes when a worker is free again */
                (void)job_start(j, w);
        }
        /* keep some ready for the next requests */
        while (pool_live_workers(p, false) < p->config.max_workers &&
               pool_live_workers(p, true) < p->config.idle_workers) {
                Worker *w;
                if (worker_spawn(p, &w) < 0)
                        break;
        }
}

int worker_pool_submit(WorkerPool *p, uint32_t owner, const WorkerMessage *request, uint64_t timeout_usec,
                       WorkerJobDone done, void *userdata, WorkerJob **ret) {
        OwnerCount *o;
        WorkerJob *j;
        uint64_t now;
        int r;

        if (request->size > WORKER_MESSAGE_MAX || request->n_fds > WORKER_FDS_MAX)
                return -EMSGSIZE;
        o = owner_count(p, owner, true);
        if (!o)
                return -ENOMEM;
        if (o->queued >= p->config.queue_per_owner) {
                owner_forget_if_done(p, o);
                return WORKER_E_FULL;
        }
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (WorkerJob){ .pool = p, .owner = owner, .timeout_usec = timeout_usec, .done = done,
                          .userdata = userdata };
        j->data = malloc(request->size ? request->size : 1);
        r = j->data ? 0 : -ENOMEM;
        j->fds_borrowed = request->fds_borrowed;
        for (size_t i = 0; r == 0 && i < request->n_fds; i++) {
                j->fds[i] = j->fds_borrowed ? request->fds[i] : fcntl(request->fds[i], F_DUPFD_CLOEXEC, 3);
                if (j->fds[i] < 0)
                        r = -errno;
                else
                        j->n_fds++;
        }
        if (r == 0)
                r = sd_event_now(p->event, CLOCK_MONOTONIC, &now); /* > 0 before the loop first ran: still now */
        /* the deadline runs from now: waiting for a worker is part of it */
        if (r >= 0)
                r = sd_event_add_time(p->event, &j->timer, CLOCK_MONOTONIC, now + timeout_usec, 0, job_timeout, j);
        if (r < 0) {
                job_free(j);
                owner_forget_if_done(p, o);
                return r;
        }
        memcpy(j->data, request->data, request->size);
        j->size = request->size;

        j->prev = p->queue_tail;
        if (p->queue_tail)
                p->queue_tail->next = j;
        else
                p->queue_head = j;
        p->queue_tail = j;
        o->queued++;
        pool_schedule(p);
        *ret = j;
        return 0;
}

void worker_job_cancel(WorkerJob *j) {
        WorkerPool *p;

        if (!j)
                return;
        p = j->pool;
        if (j->worker)
                worker_stop(j->worker, true);
        job_release(j);
        job_free(j);
        pool_schedule(p);
}

void worker_pool_recycle(WorkerPool *p) {
        p->generation++;
        for (Worker *w = p->workers; w; w = w->next)
                if (!w->job && !w->dead)
                        worker_stop(w, false);
        pool_schedule(p);
}

int worker_pool_new(sd_event *event, const WorkerPoolConfig *config, WorkerPool **ret) {
        WorkerPool *p;

        if (config->max_workers == 0 || config->per_owner == 0 || config->idle_workers > config->max_workers)
                return -EINVAL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->event = sd_event_ref(event);
        p->config = *config;
        for (unsigned i = 0; i < config->idle_workers; i++) {
                Worker *w;
                int r = worker_spawn(p, &w);
                if (r < 0) {
                        worker_pool_free(p);
                        return r;
                }
        }
        *ret = p;
        return 0;
}

WorkerPool *worker_pool_free(WorkerPool *p) {
        if (!p)
                return NULL;
        while (p->queue_head) {
                WorkerJob *j = p->queue_head;
                job_release(j);
                job_free(j);
        }
        while (p->workers) {
                Worker *w = p->workers;
                if (w->job) {
                        WorkerJob *j = w->job;
                        job_release(j);
                        job_free(j);
                }
                (void)syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
                (void)waitid(P_PIDFD, (id_t)w->pidfd, &(siginfo_t){}, WEXITED);
                worker_unlink(w);
                worker_free(w);
        }
        free(p->owners);
        sd_event_unref(p->event);
        free(p);
        return NULL;
}
