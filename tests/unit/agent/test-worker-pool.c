/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Worker processes: answers and fds come back, overruns are killed, owners wait their turn, nothing leaks */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/unit/tap.h"
#include "agent/workers/worker-pool.h"

/* What a test job asks: "echo TEXT", "sleep MS", "die", "fd" (write "hi" to the fd given, answer /dev/null's fd) */
static int handler(WorkerMessage *q, WorkerMessage *a) {
        char cmd[64] = "";

        memcpy(cmd, q->data, q->size < sizeof(cmd) - 1 ? q->size : sizeof(cmd) - 1);
        if (strncmp(cmd, "sleep ", 6) == 0) {
                struct timespec ts = { .tv_sec = atoi(cmd + 6) / 1000, .tv_nsec = (atoi(cmd + 6) % 1000) * 1000000L };
                nanosleep(&ts, NULL);
        } else if (strcmp(cmd, "die") == 0)
                _exit(3);
        else if (strcmp(cmd, "fd") == 0) {
                if (q->n_fds != 1 || write(q->fds[0], "hi", 2) != 2)
                        return -EINVAL;
                a->fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                a->n_fds = 1;
        }
        memcpy((void *)a->data, q->data, q->size);
        a->size = q->size;
        return 0;
}

typedef struct Result {
        int error;
        char text[64];
        int fd;
        bool called;
        struct timespec when;
} Result;

static unsigned pending;

static void done(int error, WorkerMessage *reply, void *userdata) {
        Result *r = userdata;

        r->called = true;
        r->error = error;
        r->fd = -1;
        clock_gettime(CLOCK_MONOTONIC, &r->when);
        if (error == 0) {
                memcpy(r->text, reply->data, reply->size < sizeof(r->text) - 1 ? reply->size : sizeof(r->text) - 1);
                if (reply->n_fds == 1) {
                        r->fd = reply->fds[0];
                        reply->n_fds = 0; /* taken */
                }
        }
        pending--;
}

static WorkerPool *pool_new(sd_event *e, unsigned max, unsigned per_owner) {
        WorkerPoolConfig c = { .handler = handler, .max_workers = max, .idle_workers = 1, .per_owner = per_owner,
                               .queue_per_owner = 8 };
        WorkerPool *p = NULL;

        check(worker_pool_new(e, &c, &p) == 0);
        return p;
}

static void submit(WorkerPool *p, uint32_t owner, const char *text, uint64_t timeout_ms, Result *r, int fd) {
        WorkerMessage m = { .data = text, .size = strlen(text) };
        WorkerJob *j;

        if (fd >= 0) {
                m.fds[0] = fd;
                m.n_fds = 1;
        }
        *r = (Result){};
        check(worker_pool_submit(p, owner, &m, timeout_ms * 1000, done, r, &j) == 0);
        pending++;
}

static void run_until_done(sd_event *e) {
        for (int i = 0; pending > 0 && i < 1000; i++)
                (void)sd_event_run(e, 100000);
}

static double ms_between(const struct timespec *a, const struct timespec *b) {
        return (double)(b->tv_sec - a->tv_sec) * 1000 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

static void test_echo_and_fds(void) {
        sd_event *e = NULL;
        WorkerPool *p;
        Result r;
        int pipefd[2];
        char buf[4] = "";

        check(sd_event_new(&e) >= 0);
        p = pool_new(e, 2, 2);
        submit(p, 1, "echo hello", 5000, &r, -1);
        run_until_done(e);
        check(r.called && r.error == 0 && strcmp(r.text, "echo hello") == 0);

        check(pipe2(pipefd, O_CLOEXEC) == 0);
        submit(p, 1, "fd", 5000, &r, pipefd[1]);
        close(pipefd[1]); /* the pool keeps its own copy until the worker has it */
        run_until_done(e);
        check(r.called && r.error == 0 && r.fd >= 0);
        check(read(pipefd[0], buf, 2) == 2 && memcmp(buf, "hi", 2) == 0);
        if (r.fd >= 0)
                close(r.fd);
        close(pipefd[0]);
        worker_pool_free(p);
        sd_event_unref(e);
}

static void test_overrun_is_killed_and_replaced(void) {
        sd_event *e = NULL;
        WorkerPool *p;
        Result slow, after;

        check(sd_event_new(&e) >= 0);
        p = pool_new(e, 1, 1);
        submit(p, 1, "sleep 10000", 200, &slow, -1);
        submit(p, 1, "echo after", 5000, &after, -1);
        run_until_done(e);
        check(slow.called && slow.error == WORKER_E_TIMEOUT);
        if (slow.error != WORKER_E_TIMEOUT)
                printf("# slow: called %d error %d\n", slow.called, slow.error);
        /* the only worker was killed, and a new one served the next job */
        check(after.called && after.error == 0 && strcmp(after.text, "echo after") == 0);
        check(ms_between(&slow.when, &after.when) < 5000);
        worker_pool_free(p);
        sd_event_unref(e);
}

static void test_a_dying_worker_fails_its_job(void) {
        sd_event *e = NULL;
        WorkerPool *p;
        Result r, after;

        check(sd_event_new(&e) >= 0);
        p = pool_new(e, 2, 2);
        submit(p, 1, "die", 5000, &r, -1);
        run_until_done(e);
        check(r.called && r.error == WORKER_E_DIED);
        submit(p, 1, "echo still", 5000, &after, -1);
        run_until_done(e);
        check(after.called && after.error == 0);
        worker_pool_free(p);
        sd_event_unref(e);
}

/* One owner's slow jobs run one at a time; another owner's job does not wait behind them. */
static void test_owners_apart(void) {
        sd_event *e = NULL;
        WorkerPool *p;
        Result a1, a2, a3, b;

        check(sd_event_new(&e) >= 0);
        p = pool_new(e, 4, 1);
        submit(p, 1, "sleep 300", 5000, &a1, -1);
        submit(p, 1, "sleep 300", 5000, &a2, -1);
        submit(p, 1, "sleep 300", 5000, &a3, -1);
        submit(p, 2, "echo b", 5000, &b, -1);
        run_until_done(e);
        check(a1.called && a2.called && a3.called && b.called);
        check(a1.error == 0 && a2.error == 0 && a3.error == 0 && b.error == 0);
        /* b finished before even the first of a's; a's ran one after the other */
        check(ms_between(&b.when, &a1.when) > 100);
        check(ms_between(&a1.when, &a2.when) > 200 && ms_between(&a2.when, &a3.when) > 200);
        worker_pool_free(p);
        sd_event_unref(e);
}

static void test_queue_per_owner_is_bounded(void) {
        sd_event *e = NULL;
        WorkerPoolConfig c = { .handler = handler, .max_workers = 1, .idle_workers = 0, .per_owner = 1,
                               .queue_per_owner = 2 };
        WorkerMessage m = { .data = "sleep 100", .size = 9 };
        WorkerPool *p = NULL;
        WorkerJob *j;
        Result r[4];

        check(sd_event_new(&e) >= 0);
        check(worker_pool_new(e, &c, &p) == 0);
        /* the first runs on the one worker, the next two wait */
        for (int i = 0; i < 3; i++) {
                r[i] = (Result){};
                check(worker_pool_submit(p, 7, &m, 5000000, done, &r[i], &j) == 0);
                pending++;
        }
        check(worker_pool_submit(p, 7, &m, 5000000, done, &r[3], &j) == WORKER_E_FULL);
        /* another owner's queue is its own */
        check(worker_pool_submit(p, 8, &m, 5000000, done, &r[3], &j) == 0);
        pending++;
        run_until_done(e);
        check(r[0].error == 0 && r[1].error == 0 && r[2].error == 0 && r[3].error == 0);
        worker_pool_free(p);
        sd_event_unref(e);
}

static void test_cancel_kills_a_running_job(void) {
        sd_event *e = NULL;
        WorkerMessage m = { .data = "sleep 10000", .size = 11 };
        WorkerPool *p;
        WorkerJob *j = NULL;
        Result never = {}, after;

        check(sd_event_new(&e) >= 0);
        p = pool_new(e, 1, 1);
        check(worker_pool_submit(p, 1, &m, 60000000, done, &never, &j) == 0);
        for (int i = 0; i < 5; i++)
                (void)sd_event_run(e, 20000); /* it starts */
        worker_job_cancel(j);
        submit(p, 1, "echo next", 5000, &after, -1);
        run_until_done(e);
        check(!never.called);
        check(after.called && after.error == 0);
        worker_pool_free(p);
        sd_event_unref(e);
}

int main(void) {
        /* workers are children: nothing may reap them behind the pool's back */
        signal(SIGCHLD, SIG_DFL);
        run_test(test_echo_and_fds);
        run_test(test_overrun_is_killed_and_replaced);
        run_test(test_a_dying_worker_fails_its_job);
        run_test(test_owners_apart);
        run_test(test_queue_per_owner_is_bounded);
        run_test(test_cancel_kills_a_running_job);
        return tap_finish();
}
