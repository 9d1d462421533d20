/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-ps: how a listing through dsagent scales with the processes on the
 * host, and what a busy listing costs somebody else's info.
 *
 * It adds cheap extra processes (forked copies of itself that only pause(),
 * each under the user it is for) up to each level (0, 1,000, 5,000, 10,000
 * by default), and at each level:
 *
 *  1. times ps, alternating request by request:
 *       root, agent:   WIRE_REQUEST_PS as root, every frame read
 *       root, direct:  the same listing done in this process as root, with the
 *                      agent's own code (discover_candidates(), then
 *                      target_open(), target_read_details() and
 *                      target_find_socket() for each candidate), without the
 *                      agent, its workers or its connections
 *       user, agent:   ps as --user, who owns the target and nine of the extra
 *                      processes: ten processes it may see, of all there are
 *       user, direct:  the in-process listing, filtered to that user's
 *                      processes as the agent filters them
 *       floor, readdir:        only reading /proc's directory, in this process
 *       floor, readdir + stat: that and one fstatat() of /proc/PID per process,
 *                      the least a walk that learns who owns each process can
 *                      do: no listing filtered by owner can be cheaper
 *  2. times info of the target by --user, with nothing else going on (idle)
 *     and while --ps-clients clients loop ps as root (loaded), in alternating
 *     slices, and reports the ratio of the p99s;
 *  3. reads the agent's memory while --noread-clients clients as root send
 *     ps and never read the reply.
 *
 * Every extra process is killed (by pid) before it exits, and each dies with
 * it anyway (PR_SET_PDEATHSIG). Nothing here asserts timing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench-common.h"
#include "common/cleanup.h"
#include "agent/targets/discover.h"
#include "agent/targets/target.h"
#include "common/text.h"

#define LEVELS_MAX 16
#define USERS_MAX 32
#define VISIBLE_EXTRA 9 /* the user's own extra processes; with the target, ten */
#define SAMPLES_PER_SLICE (1u << 20)

typedef struct Args {
        BenchTarget target;
        pid_t agent_pid;
        BenchUser user;
        BenchUser others[USERS_MAX];
        size_t n_others;
        unsigned levels[LEVELS_MAX];
        size_t n_levels;
        unsigned iterations, ps_clients, noread_clients, rounds;
        double seconds, warmup;
} Args;

/* ---- the extra processes ---- */

static pid_t *extra;
static size_t n_extra, allocated_extra;

static void extra_kill_all(void) {
        for (size_t i = 0; i < n_extra; i++)
                (void)kill(extra[i], SIGKILL);
        for (size_t i = 0; i < n_extra; i++)
                (void)waitpid(extra[i], NULL, 0);
        n_extra = 0;
}

static void on_signal(int sig) {
        extra_kill_all();
        signal(sig, SIG_DFL);
        raise(sig);
}

/* One more process of @u that does nothing, ever; it dies with us. */
static int extra_spawn(const BenchUser *u, int devnull) {
        pid_t parent = getpid(), pid;

        if (n_extra == allocated_extra) {
                size_t n = allocated_extra ? allocated_extra * 2 : 1024;
                pid_t *grown = realloc(extra, n * sizeof(pid_t));
                if (!grown)
                        return -ENOMEM;
                extra = grown;
                allocated_extra = n;
        }
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                signal(SIGINT, SIG_DFL);
                signal(SIGTERM, SIG_DFL);
                signal(SIGHUP, SIG_DFL);
                if (dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(devnull, 2) < 0)
                        _exit(1);
                (void)close_range(3, ~0U, 0);
                if (bench_user_become(u) < 0)
                        _exit(1);
                /* after the change of uid, which clears it */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(1);
                /* changing uids made it non-dumpable, which shows its /proc entry as root's:
                 * a process started as the user (exec) is dumpable */
                (void)prctl(PR_SET_DUMPABLE, 1);
                for (;;)
                        pause();
        }
        extra[n_extra++] = pid;
        return 0;
}

/* Up to @level extra processes in all: the first VISIBLE_EXTRA the user's, the rest the others' in turn. */
static int extra_grow(const Args *a, unsigned level) {
        _cleanup_close_ int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (devnull < 0)
                return -errno;
        fflush(stdout);
        fflush(stderr);
        while (n_extra < level) {
                const BenchUser *u = n_extra < VISIBLE_EXTRA ? &a->user : &a->others[n_extra % a->n_others];
                int r = extra_spawn(u, devnull);
                if (r < 0)
                        return r;
        }
        return 0;
}

static unsigned count_processes(void) {
        unsigned n = 0;
        DIR *d = opendir("/proc");
        struct dirent *de;
        pid_t pid;

        while (d && (de = readdir(d)))
                n += parse_pid(de->d_name, &pid) == 0;
        if (d)
                closedir(d);
        return n;
}

/* ---- the direct listing: the agent's code, in this process ---- */

static int direct_ps(const BenchUser *u, unsigned *ret_n, uint64_t *ret_nsec, BenchFailure *f) {
        static DiscoverCandidate found[DISCOVER_CANDIDATES_MAX];
        uid_t uids[1];
        DiscoverFilter filter = { .any_uid = !u, .uids = uids, .n_uids = u ? 1 : 0 };
        uint64_t start = bench_now_nsec();
        unsigned listed = 0;
        size_t n = 0;
        int r;

        if (u)
                uids[0] = u->uid;
        r = discover_candidates(&filter, found, DISCOVER_CANDIDATES_MAX, &n);
        if (r != 0) {
                snprintf(f->what, sizeof(f->what), "discover_candidates: %s", strerror(r < 0 ? -r : EIO));
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_(target_unrefp) Target *t = NULL;
                const char *why;

                if (target_open(found[i].pid, &t) != 0 || target_read_details(t) != 0)
                        continue;
                /* as the policy has it for a user without rules: its own processes (owner_access) */
                if (u && t->status.uid[0] != u->uid && t->status.uid[1] != u->uid && t->status.uid[2] != u->uid)
                        continue;
                if (target_find_socket(t, &why) == 0)
                        listed++;
        }
        *ret_nsec = bench_now_nsec() - start;
        *ret_n = listed;
        return 0;
}

/*
 * The least a walk of /proc can cost: its directory read, and with @u, one fstatat() of each
 * entry, counting those the agent's filter for @u would keep (@u's and root's: a process that
 * is not dumpable shows as root's, so the count is of entries, not of what direct_ps() lists).
 */
static int floor_walk(const BenchUser *u, unsigned *ret_n, uint64_t *ret_nsec, BenchFailure *f) {
        uid_t uids[1] = { u ? u->uid : 0 };
        DiscoverFilter filter = { .uids = uids, .n_uids = 1 };
        uint64_t start = bench_now_nsec();
        unsigned kept = 0;
        struct dirent *de;
        DIR *d = opendir("/proc");

        if (!d) {
                snprintf(f->what, sizeof(f->what), "opendir /proc: %s", strerror(errno));
                return -1;
        }
        while ((de = readdir(d))) {
                struct stat st;
                pid_t pid;

                if (parse_pid(de->d_name, &pid) < 0)
                        continue;
                if (!u)
                        kept++;
                else if (fstatat(dirfd(d), de->d_name, &st, 0) == 0 && discover_filter_allows(&filter, st.st_uid))
                        kept++;
        }
        closedir(d);
        *ret_nsec = bench_now_nsec() - start;
        *ret_n = kept;
        return 0;
}

/* ---- a client of another user, on call: one ps per request ---- */

typedef struct HelperReply {
        int32_t r;
        uint32_t n;
        uint64_t nsec;
        BenchFailure f;
} HelperReply;

typedef struct Helper {
        pid_t pid;
        int fd;
} Helper;

static int helper_start(const BenchTarget *t, const BenchUser *u, Helper *ret) {
        pid_t parent = getpid();
        int sv[2];

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        fflush(stdout);
        ret->pid = fork();
        if (ret->pid < 0)
                return -errno;
        if (ret->pid == 0) {
                char c;

                close(sv[0]);
                /* the death signal after the change of uid, which clears it */
                if (bench_user_become(u) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(1);
                while (read(sv[1], &c, 1) == 1) {
                        HelperReply rep = {};
                        unsigned n = 0;

                        rep.r = bench_agent_ps(t, &n, &rep.nsec, &rep.f);
                        rep.n = n;
                        if (write(sv[1], &rep, sizeof(rep)) != sizeof(rep))
                                _exit(1);
                }
                _exit(0);
        }
        close(sv[1]);
        ret->fd = sv[0];
        return 0;
}

static int helper_ps(Helper *h, unsigned *ret_n, uint64_t *ret_nsec, BenchFailure *f) {
        HelperReply rep;

        if (write(h->fd, "p", 1) != 1 || read(h->fd, &rep, sizeof(rep)) != sizeof(rep)) {
                snprintf(f->what, sizeof(f->what), "the user's client process is gone");
                return -1;
        }
        *f = rep.f;
        *ret_n = rep.n;
        *ret_nsec = rep.nsec;
        return rep.r;
}

static void helper_stop(Helper *h) {
        if (h->pid <= 0)
                return;
        close(h->fd);
        (void)waitpid(h->pid, NULL, 0);
        h->pid = 0;
}

/* ---- arguments ---- */

static void usage(FILE *out) {
        fprintf(out,
                "Usage: bench-ps --agent-socket PATH --pid PID --agent-pid PID --user USER --other-users USER,...\n"
                "                [--levels 0,1000,5000,10000] [--iterations N] [--ps-clients N]\n"
                "                [--noread-clients N] [--seconds S] [--rounds N] [--warmup S]\n"
                "ps through dsagent with many processes on the host. Run as root, with the agent running.\n\n"
                "  --agent-socket PATH    dsagent's socket\n"
                "  --pid PID              a .NET target of --user\n"
                "  --agent-pid PID        dsagent's process id (memory, CPU time)\n"
                "  --user USER            the unprivileged lister; owns the target and 9 extra processes\n"
                "  --other-users LIST     owners of the other extra processes, in turn\n"
                "  --levels LIST          extra processes on the host at each step [0,1000,5000,10000]\n"
                "  --iterations N         timed listings per kind and level [20]\n"
                "  --ps-clients N         root clients looping ps while --user's info is timed [8]\n"
                "  --noread-clients N     root clients that send ps and never read, for memory [8]\n"
                "  --seconds S            measured length of each slice [2]\n"
                "  --rounds N             idle/loaded slice pairs per level [3]\n"
                "  --warmup S             unmeasured start of each slice [0.3]\n");
}

static int parse_levels(const char *s, unsigned *out, size_t *ret_n) {
        _cleanup_free_ char *copy = strdup(s);
        char *save = NULL;
        size_t n = 0;

        if (!copy)
                return -ENOMEM;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                uint64_t v;

                if (n == LEVELS_MAX || parse_u64(tok, &v) < 0 || v > 30000 || (n > 0 && v < out[n - 1]))
                        return -EINVAL;
                out[n++] = (unsigned)v;
        }
        *ret_n = n;
        return n > 0 ? 0 : -EINVAL;
}

static int parse_count(const char *s, unsigned max, unsigned *ret) {
        uint64_t v;

        if (parse_u64(s, &v) < 0 || v > max)
                return -EINVAL;
        *ret = (unsigned)v;
        return 0;
}

static int parse_seconds_arg(const char *s, double *ret) {
        char *end;
        double v = strtod(s, &end);

        if (*s == '\0' || *end != '\0' || !(v > 0) || v > 3600)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_argv(int argc, char **argv, Args *a) {
        enum { ARG_AGENT = 0x100, ARG_PID, ARG_AGENT_PID, ARG_USER, ARG_OTHERS, ARG_LEVELS, ARG_ITERATIONS,
               ARG_PS_CLIENTS, ARG_NOREAD, ARG_SECONDS, ARG_ROUNDS, ARG_WARMUP, ARG_HELP };
        static const struct option options[] = {
                { "agent-socket", required_argument, NULL, ARG_AGENT },
                { "pid", required_argument, NULL, ARG_PID },
                { "agent-pid", required_argument, NULL, ARG_AGENT_PID },
                { "user", required_argument, NULL, ARG_USER },
                { "other-users", required_argument, NULL, ARG_OTHERS },
                { "levels", required_argument, NULL, ARG_LEVELS },
                { "iterations", required_argument, NULL, ARG_ITERATIONS },
                { "ps-clients", required_argument, NULL, ARG_PS_CLIENTS },
                { "noread-clients", required_argument, NULL, ARG_NOREAD },
                { "seconds", required_argument, NULL, ARG_SECONDS },
                { "rounds", required_argument, NULL, ARG_ROUNDS },
                { "warmup", required_argument, NULL, ARG_WARMUP },
                { "help", no_argument, NULL, ARG_HELP },
                {},
        };
        const char *names[USERS_MAX];
        bool have_user = false;
        int c;

        *a = (Args){ .levels = { 0, 1000, 5000, 10000 }, .n_levels = 4, .iterations = 20, .ps_clients = 8,
                     .noread_clients = 8, .rounds = 3, .seconds = 2, .warmup = 0.3 };
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                int r = 0;

                switch (c) {
                case ARG_AGENT:
                        a->target.agent_socket = optarg;
                        break;
                case ARG_PID:
                        r = parse_pid(optarg, &a->target.pid);
                        break;
                case ARG_AGENT_PID:
                        r = parse_pid(optarg, &a->agent_pid);
                        break;
                case ARG_USER:
                        r = bench_user_resolve(optarg, &a->user);
                        have_user = r == 0;
                        break;
                case ARG_OTHERS:
                        r = bench_split_names(optarg, names, USERS_MAX, &a->n_others);
                        for (size_t i = 0; r == 0 && i < a->n_others; i++)
                                r = bench_user_resolve(names[i], &a->others[i]);
                        break;
                case ARG_LEVELS:
                        r = parse_levels(optarg, a->levels, &a->n_levels);
                        break;
                case ARG_ITERATIONS:
                        r = parse_count(optarg, 100000, &a->iterations);
                        if (r == 0 && a->iterations == 0)
                                r = -EINVAL;
                        break;
                case ARG_PS_CLIENTS:
                        r = parse_count(optarg, 256, &a->ps_clients);
                        break;
                case ARG_NOREAD:
                        r = parse_count(optarg, 256, &a->noread_clients);
                        break;
                case ARG_ROUNDS:
                        r = parse_count(optarg, 1000, &a->rounds);
                        if (r == 0 && a->rounds == 0)
                                r = -EINVAL;
                        break;
                case ARG_SECONDS:
                        r = parse_seconds_arg(optarg, &a->seconds);
                        break;
                case ARG_WARMUP:
                        r = parse_seconds_arg(optarg, &a->warmup);
                        break;
                case ARG_HELP:
                        usage(stdout);
                        return 1;
                default:
                        usage(stderr);
                        return -EINVAL;
                }
                if (r < 0) {
                        fprintf(stderr, "bench-ps: bad value for option --%s: %s\n", options[c - ARG_AGENT].name,
                                optarg);
                        return -EINVAL;
                }
        }
        if (optind < argc || !a->target.agent_socket || a->target.pid <= 0 || a->agent_pid <= 0 || !have_user ||
            a->n_others == 0) {
                usage(stderr);
                return -EINVAL;
        }
        return 0;
}

/* ---- the run ---- */

typedef enum Kind {
        ROOT_AGENT,
        ROOT_DIRECT,
        USER_AGENT,
        USER_DIRECT,
        FLOOR_READDIR,
        FLOOR_STAT,
        _KIND_MAX,
} Kind;

static const char *const kind_name[_KIND_MAX] = { "root agent", "root direct", "user agent", "user direct",
                                                   "readdir",    "+ stat" };

typedef struct LevelResult {
        unsigned level, processes;
        Stats ps[_KIND_MAX];
        unsigned listed[_KIND_MAX];
        Stats info_idle, info_loaded;
        double ps_loaded_rate;
        Stats ps_loaded;
        uint64_t info_failed, ps_failed, ps_busy;
        AgentMemory mem_ps, mem_noread;
        double cpu_window[2], cpu_agent[2], cpu_workers[2]; /* [0] idle slices, [1] loaded */
        unsigned noread_done;
} LevelResult;

static int time_listings(const Args *a, Helper *h, LevelResult *res) {
        _cleanup_free_ uint64_t *v = calloc((size_t)a->iterations * _KIND_MAX, sizeof(uint64_t));

        if (!v)
                return -ENOMEM;
        /* one unmeasured round first: the caches warm alike for every kind */
        for (unsigned i = 0; i < a->iterations + 1; i++)
                for (Kind k = 0; k < _KIND_MAX; k++) {
                        BenchFailure f = {};
                        unsigned n = 0;
                        uint64_t nsec = 0;
                        int r;

                        switch (k) {
                        case ROOT_AGENT:
                                r = bench_agent_ps(&a->target, &n, &nsec, &f);
                                break;
                        case ROOT_DIRECT:
                                r = direct_ps(NULL, &n, &nsec, &f);
                                break;
                        case USER_AGENT:
                                r = helper_ps(h, &n, &nsec, &f);
                                break;
                        case USER_DIRECT:
                                r = direct_ps(&a->user, &n, &nsec, &f);
                                break;
                        case FLOOR_READDIR:
                                r = floor_walk(NULL, &n, &nsec, &f);
                                break;
                        default:
                                r = floor_walk(&a->user, &n, &nsec, &f);
                                break;
                        }
                        if (r < 0) {
                                fprintf(stderr, "bench-ps: %s ps failed at %u extra processes: %s\n", kind_name[k],
                                        res->level, f.what);
                                return -EIO;
                        }
                        if (i == 0)
                                continue;
                        v[k * a->iterations + i - 1] = nsec;
                        res->listed[k] = n;
                }
        for (Kind k = 0; k < _KIND_MAX; k++)
                res->ps[k] = bench_stats(v + k * a->iterations, a->iterations);
        return 0;
}

typedef struct Gathered {
        uint64_t *v;
        size_t n, allocated;
} Gathered;

static int gather(Gathered *g, const SampleSet *s) {
        size_t kept = sample_set_kept(s);

        if (g->n + kept > g->allocated) {
                size_t n = (g->n + kept) * 2;
                uint64_t *grown = realloc(g->v, n * sizeof(uint64_t));
                if (!grown)
                        return -ENOMEM;
                g->v = grown;
                g->allocated = n;
        }
        memcpy(g->v + g->n, s->v, kept * sizeof(uint64_t));
        g->n += kept;
        return 0;
}

static int info_under_load(const Args *a, const AgentWatch *watch, SampleSet *info_set, SampleSet *ps_set,
                           LevelResult *res) {
        Gathered idle = {}, loaded = {}, ps = {};
        double ps_window = 0;
        int r = 0;

        for (unsigned round = 0; round < a->rounds && r == 0; round++)
                for (unsigned k = 0; k < 2 && r == 0; k++) {
                        bool load = (k + round) % 2 == 1; /* idle, loaded, loaded, idle, ... */
                        ClientGroup g[2] = {
                                { .kind = CLIENT_AGENT_INFO, .n = 1, .users = &a->user, .n_users = 1, .set = info_set },
                                { .kind = CLIENT_AGENT_PS, .n = a->ps_clients, .set = ps_set },
                        };
                        SliceResult sr;

                        if (bench_run_slice(&a->target, g, load ? 2 : 1, a->warmup, a->seconds, watch, &sr) < 0) {
                                fprintf(stderr, "bench-ps: a client failed to run: %s %s\n", info_set->first_error,
                                        ps_set->first_error);
                                r = -EIO;
                                break;
                        }
                        res->cpu_window[load] += sr.window_sec;
                        res->cpu_agent[load] += sr.agent_cpu_sec;
                        res->cpu_workers[load] += sr.workers_cpu_sec;
                        res->info_failed += info_set->failed + info_set->busy;
                        r = gather(load ? &loaded : &idle, info_set);
                        if (load) {
                                res->ps_failed += ps_set->failed;
                                res->ps_busy += ps_set->busy;
                                ps_window += sr.window_sec;
                                bench_memory_max(&res->mem_ps, &sr.peak);
                                if (r == 0)
                                        r = gather(&ps, ps_set);
                        }
                        if (info_set->first_error[0])
                                fprintf(stderr, "bench-ps: info failed: %s\n", info_set->first_error);
                        if (load && ps_set->first_error[0])
                                fprintf(stderr, "bench-ps: ps (load) failed: %s\n", ps_set->first_error);
                }
        if (r == 0) {
                res->info_idle = bench_stats(idle.v, idle.n);
                res->info_loaded = bench_stats(loaded.v, loaded.n);
                res->ps_loaded = bench_stats(ps.v, ps.n);
                res->ps_loaded_rate = ps_window > 0 ? (double)ps.n / ps_window : 0;
        }
        free(idle.v);
        free(loaded.v);
        free(ps.v);
        return r;
}

static int noread_memory(const Args *a, const AgentWatch *watch, SampleSet *set, LevelResult *res) {
        ClientGroup g = { .kind = CLIENT_AGENT_PS_NOREAD, .n = a->noread_clients, .set = set };
        SliceResult sr;

        if (a->noread_clients == 0)
                return 0;
        if (bench_run_slice(&a->target, &g, 1, a->warmup, a->seconds, watch, &sr) < 0) {
                fprintf(stderr, "bench-ps: a client that does not read failed: %s\n", set->first_error);
                return -EIO;
        }
        res->mem_noread = sr.peak;
        res->noread_done = (unsigned)set->n;
        return 0;
}

static void print_level(const Args *a, const LevelResult *r) {
        printf("== %u extra processes (%u in /proc) ==\n", r->level, r->processes);
        printf("  %-12s %7s %9s %9s %9s %9s %9s %9s\n", "ps (ms)", "listed", "min", "median", "mean", "p90", "p99",
               "max");
        for (Kind k = 0; k < _KIND_MAX; k++) {
                if (k == FLOOR_READDIR)
                        printf("  the least a walk costs (%s's filter: entries kept):\n", a->user.name);
                printf("  %-12s %7u %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", kind_name[k], r->listed[k],
                       r->ps[k].min / 1000, r->ps[k].median / 1000, r->ps[k].mean / 1000, r->ps[k].p90 / 1000,
                       r->ps[k].p99 / 1000, r->ps[k].max / 1000);
        }
        printf("  agent/direct: root median %.2f, p99 %.2f; user median %.2f, p99 %.2f; "
               "user agent/(readdir + stat) median %.2f\n",
               r->ps[ROOT_AGENT].median / r->ps[ROOT_DIRECT].median, r->ps[ROOT_AGENT].p99 / r->ps[ROOT_DIRECT].p99,
               r->ps[USER_AGENT].median / r->ps[USER_DIRECT].median, r->ps[USER_AGENT].p99 / r->ps[USER_DIRECT].p99,
               r->ps[USER_AGENT].median / r->ps[FLOOR_STAT].median);
        printf("  info by %s (us): idle     n=%zu median %.1f p90 %.1f p99 %.1f max %.1f\n", a->user.name,
               r->info_idle.n, r->info_idle.median, r->info_idle.p90, r->info_idle.p99, r->info_idle.max);
        printf("  %*s  with %u root ps loops n=%zu median %.1f p90 %.1f p99 %.1f max %.1f\n",
               (int)strlen(a->user.name) + 12, "", a->ps_clients, r->info_loaded.n, r->info_loaded.median,
               r->info_loaded.p90, r->info_loaded.p99, r->info_loaded.max);
        printf("  info loaded/idle: median %.2f, p99 %.2f; the %u ps loops: %.1f listings/s, median %.2f ms, "
               "p99 %.2f ms; failures: info %" PRIu64 ", ps %" PRIu64 " (+%" PRIu64 " busy)\n",
               r->info_loaded.median / r->info_idle.median, r->info_loaded.p99 / r->info_idle.p99, a->ps_clients,
               r->ps_loaded_rate, r->ps_loaded.median / 1000, r->ps_loaded.p99 / 1000, r->info_failed, r->ps_failed,
               r->ps_busy);
        printf("  CPU in use (of the machine's %ld): idle slices: agent loop %.0f%%, workers %.0f%%; "
               "loaded slices: agent loop %.0f%%, workers %.0f%%\n",
               sysconf(_SC_NPROCESSORS_ONLN), 100 * r->cpu_agent[0] / r->cpu_window[0],
               100 * r->cpu_workers[0] / r->cpu_window[0], 100 * r->cpu_agent[1] / r->cpu_window[1],
               100 * r->cpu_workers[1] / r->cpu_window[1]);
        bench_memory_print("memory peak, ps loops + info:", &r->mem_ps);
        if (a->noread_clients) {
                char label[64];
                snprintf(label, sizeof(label), "memory peak, %u ps never read:", a->noread_clients);
                bench_memory_print(label, &r->mem_noread);
                printf("  (%u unread listings were answered and closed by the agent in %.1f s)\n", r->noread_done,
                       a->seconds);
        }
        printf("RESULT extra=%u root_agent_median_ms=%.2f root_agent_p99_ms=%.2f root_direct_median_ms=%.2f "
               "root_ratio=%.2f user_agent_median_ms=%.2f user_agent_p99_ms=%.2f user_direct_median_ms=%.2f "
               "user_ratio=%.2f user_listed=%u floor_readdir_median_ms=%.2f floor_stat_median_ms=%.2f "
               "info_idle_p99_us=%.1f info_loaded_p99_us=%.1f info_p99_ratio=%.2f "
               "noread_agent_rss_kb=%" PRIu64 " noread_workers_rss_max_kb=%" PRIu64 "\n\n",
               r->level, r->ps[ROOT_AGENT].median / 1000, r->ps[ROOT_AGENT].p99 / 1000,
               r->ps[ROOT_DIRECT].median / 1000, r->ps[ROOT_AGENT].median / r->ps[ROOT_DIRECT].median,
               r->ps[USER_AGENT].median / 1000, r->ps[USER_AGENT].p99 / 1000, r->ps[USER_DIRECT].median / 1000,
               r->ps[USER_AGENT].median / r->ps[USER_DIRECT].median, r->listed[USER_AGENT],
               r->ps[FLOOR_READDIR].median / 1000, r->ps[FLOOR_STAT].median / 1000, r->info_idle.p99,
               r->info_loaded.p99, r->info_loaded.p99 / r->info_idle.p99, r->mem_noread.agent_rss_kb,
               r->mem_noread.workers_rss_max_kb);
}

int main(int argc, char **argv) {
        SampleSet *info_set = NULL, *ps_set = NULL;
        Helper helper = {};
        AgentWatch watch;
        AgentMemory idle, end;
        struct rlimit nproc;
        unsigned pid_max = 0;
        FILE *f;
        Args a;
        int r;

        r = parse_argv(argc, argv, &a);
        if (r != 0)
                return r > 0 ? EXIT_SUCCESS : 2;
        if (bench_watch_init(&watch, a.agent_pid, a.target.pid) < 0) {
                fprintf(stderr, "bench-ps: no agent with pid %d\n", (int)a.agent_pid);
                return EXIT_FAILURE;
        }
        f = fopen("/proc/sys/kernel/pid_max", "re");
        if (!f || fscanf(f, "%u", &pid_max) != 1)
                pid_max = 32768;
        if (f)
                fclose(f);
        (void)getrlimit(RLIMIT_NPROC, &nproc);
        if (count_processes() + a.levels[a.n_levels - 1] + 1000 > pid_max) {
                fprintf(stderr, "bench-ps: %u more processes do not fit pid_max %u with the %u there are\n",
                        a.levels[a.n_levels - 1], pid_max, count_processes());
                return EXIT_FAILURE;
        }

        atexit(extra_kill_all);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGHUP, on_signal);

        info_set = sample_set_new(SAMPLES_PER_SLICE);
        ps_set = sample_set_new(SAMPLES_PER_SLICE);
        if (!info_set || !ps_set || helper_start(&a.target, &a.user, &helper) < 0) {
                fprintf(stderr, "bench-ps: cannot set up: %m\n");
                return EXIT_FAILURE;
        }

        bench_watch_memory(&watch, &idle);
        printf("ps with extra processes on the host: pid_max %u, RLIMIT_NPROC %llu, user %s (uid %u) owns the target "
               "and %d of them, the rest are %zu other users'\n",
               pid_max, (unsigned long long)nproc.rlim_cur, a.user.name, (unsigned)a.user.uid, VISIBLE_EXTRA,
               a.n_others);
        printf("%u timed listings per kind, interleaved; info: %u idle and %u loaded slices of %.1f s\n\n",
               a.iterations, a.rounds, a.rounds, a.seconds);
        bench_memory_print("agent memory idle:", &idle);
        printf("\n");

        for (size_t li = 0; li < a.n_levels; li++) {
                LevelResult res = { .level = a.levels[li] };
                uint64_t t0 = bench_now_nsec();

                r = extra_grow(&a, a.levels[li]);
                if (r < 0) {
                        fprintf(stderr, "bench-ps: cannot start %u extra processes (have %zu): %s\n", a.levels[li],
                                n_extra, strerror(-r));
                        break;
                }
                printf("# %zu extra processes started in %.2f s\n", n_extra, (double)(bench_now_nsec() - t0) / 1e9);
                res.processes = count_processes();
                r = time_listings(&a, &helper, &res);
                if (r == 0)
                        r = info_under_load(&a, &watch, info_set, ps_set, &res);
                if (r == 0)
                        r = noread_memory(&a, &watch, ps_set, &res);
                if (r < 0)
                        break;
                print_level(&a, &res);
        }

        helper_stop(&helper);
        bench_watch_memory(&watch, &end);
        bench_memory_print("agent memory at the end (VmHWM: the run's peak):", &end);
        printf("RESULT memory idle_rss_kb=%" PRIu64 " end_hwm_kb=%" PRIu64 " end_worker_hwm_max_kb=%" PRIu64 "\n",
               idle.agent_rss_kb, end.agent_hwm_kb, end.workers_hwm_max_kb);
        extra_kill_all();
        sample_set_free(info_set);
        sample_set_free(ps_set);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
