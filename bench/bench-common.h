/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What bench-load and bench-ps share: one timed exchange on a fresh
 * connection (info or ps through the agent, ProcessInfo3 straight to the
 * runtime), samples gathered from forked client processes in shared memory,
 * nearest-rank statistics, and readings of the agent's memory and CPU time
 * from /proc. Nothing here asserts timing.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_IO_TIMEOUT_SEC 10

/* Why one exchange failed. @busy: the agent answered WIRE_ERROR_BUSY (a limit, not a fault). */
typedef struct BenchFailure {
        char what[512];
        bool busy;
} BenchFailure;

uint64_t bench_now_nsec(void);
int bench_parse_list(const char *s, unsigned *out, size_t max, size_t *ret_n);
/* comma-separated names, split in place */
int bench_split_names(char *s, const char **out, size_t max, size_t *ret_n);

/* ---- one exchange, timed from socket() to the last reply byte ---- */

typedef struct BenchTarget {
        const char *agent_socket;
        const char *runtime_socket; /* NULL: no direct path */
        pid_t pid;
} BenchTarget;

/* info PID through the agent: exactly one PROCESS frame for the pid, then DONE. */
int bench_agent_info(const BenchTarget *t, uint64_t *ret_nsec, BenchFailure *f);
/* ps through the agent, reading every frame: PROCESS frames counted (*@ret_n), DONE at the end. */
int bench_agent_ps(const BenchTarget *t, unsigned *ret_n, uint64_t *ret_nsec, BenchFailure *f);
/* ProcessInfo3 to the runtime's socket, decoded with the agent's codec. */
int bench_direct_info(const BenchTarget *t, uint64_t *ret_nsec, BenchFailure *f);
/*
 * ps through the agent by a client that never reads: connect, send, then
 * wait (without reading) until the agent closes its side or @deadline_nsec.
 * *@ret_nsec: from socket() to the agent's close (0 when it did not close in time).
 */
int bench_agent_ps_noread(const BenchTarget *t, uint64_t deadline_nsec, uint64_t *ret_nsec, BenchFailure *f);

/* ---- samples from many client processes ---- */

typedef struct SampleSet {
        uint64_t capacity;
        uint64_t n;            /* samples taken (may exceed capacity: the rest are counted, not kept) */
        uint64_t busy;         /* WIRE_ERROR_BUSY replies in the window */
        uint64_t failed;       /* other failures in the window */
        uint64_t frames;       /* ps: PROCESS frames over all samples */
        uint64_t all;          /* successful exchanges, in the window or not (for CPU per exchange) */
        uint32_t have_error;
        char first_error[512];
        uint64_t v[];          /* nanoseconds */
} SampleSet;

SampleSet *sample_set_new(size_t capacity); /* shared memory: forked clients add to it */
void sample_set_free(SampleSet *s);
void sample_set_reset(SampleSet *s);
void sample_set_add(SampleSet *s, uint64_t nsec);
void sample_set_fail(SampleSet *s, const BenchFailure *f);
size_t sample_set_kept(const SampleSet *s);

typedef struct Stats {
        size_t n;
        double min, median, mean, p90, p99, max; /* microseconds */
} Stats;

/* Sorts @v. The median of an even count is the mean of the middle two; the others are nearest-rank. */
Stats bench_stats(uint64_t *v, size_t n);

/* ---- users the clients run as ---- */

typedef struct BenchUser {
        const char *name;
        uid_t uid;
        gid_t gid;
        gid_t groups[64];
        int n_groups;
} BenchUser;

int bench_user_resolve(const char *name, BenchUser *ret);
/* In a forked child: become @u (groups, gid, uid); NULL stays as is. Return 0 or -errno.
 * A change of uid clears PR_SET_PDEATHSIG: set it afterwards. */
int bench_user_become(const BenchUser *u);

/* ---- the agent's memory and CPU time ---- */

typedef struct ProcReading {
        uint64_t rss_kb, hwm_kb;
        uint64_t cpu_ticks; /* utime + stime, all threads */
        uint64_t start_time;
} ProcReading;

int bench_proc_read(pid_t pid, ProcReading *ret);
/* @pid's children (of its main thread), at most @max. */
size_t bench_proc_children(pid_t pid, pid_t *out, size_t max);

/*
 * The agent and its worker processes as seen by one reading; the PAM
 * helper (the agent's first child, forked before the workers) apart.
 */
typedef struct AgentMemory {
        uint64_t agent_rss_kb, agent_hwm_kb;
        unsigned n_workers;
        uint64_t workers_rss_sum_kb, workers_rss_max_kb, workers_hwm_max_kb;
        uint64_t helper_rss_kb;
        uint64_t pss_kb;       /* Pss of the agent and its workers together: shared pages counted once */
} AgentMemory;

typedef struct AgentWatch {
        pid_t agent;
        pid_t pam_helper; /* 0: none found */
        pid_t target;     /* the runtime, for its CPU time; 0: none */
} AgentWatch;

int bench_watch_init(AgentWatch *w, pid_t agent, pid_t target);
void bench_watch_memory(const AgentWatch *w, AgentMemory *ret);
/* element-wise maximum into @acc */
void bench_memory_max(AgentMemory *acc, const AgentMemory *m);
void bench_memory_print(const char *label, const AgentMemory *m);

/* CPU time (clock ticks) of the agent, of each worker alive (PAM helper excluded), and of the target. */
#define BENCH_WORKERS_MAX 64
typedef struct CpuSnapshot {
        uint64_t agent, target;
        size_t n;
        pid_t pids[BENCH_WORKERS_MAX];
        uint64_t ticks[BENCH_WORKERS_MAX];
} CpuSnapshot;

void bench_cpu_snapshot(const AgentWatch *w, CpuSnapshot *ret);
/* seconds from @a to @b; a worker new in @b counts with all of its time */
void bench_cpu_delta(const CpuSnapshot *a, const CpuSnapshot *b, double *agent, double *workers, double *target);

/* ---- a slice: groups of client processes looping until a deadline ---- */

typedef enum ClientKind {
        CLIENT_AGENT_INFO,
        CLIENT_DIRECT_INFO,
        CLIENT_AGENT_PS,
        CLIENT_AGENT_PS_NOREAD,
} ClientKind;

typedef struct ClientGroup {
        ClientKind kind;
        unsigned n;
        const BenchUser *users; /* client i runs as users[i % n_users]; NULL: as the caller (root) */
        size_t n_users;
        SampleSet *set;
} ClientGroup;

typedef struct SliceResult {
        double window_sec;
        AgentMemory peak;      /* maxima over readings every 50 ms during the slice */
        double agent_cpu_sec, workers_cpu_sec, target_cpu_sec, clients_cpu_sec;
} SliceResult;

/*
 * Forks the clients of every group; each loops its exchange from now until
 * now + @warm_sec + @run_sec. Exchanges that end inside the last @run_sec
 * are counted in the group's set (which is reset first). Waits for all of
 * them; meanwhile reads the agent's memory (when @watch is not NULL).
 *
 * Return: 0, or -1 when a client could not be started or did not exit cleanly.
 */
int bench_run_slice(const BenchTarget *t, ClientGroup *groups, size_t n_groups, double warm_sec, double run_sec,
                    const AgentWatch *watch, SliceResult *ret);
