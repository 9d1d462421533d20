/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-load: info of one .NET target by many concurrent clients, through
 * dsagent and straight to the runtime, in one run.
 *
 * For each number of clients (1, 8, 64 by default) it runs short slices,
 * alternating the path (agent, direct, direct, agent, ...): N client
 * processes each loop one exchange after another on fresh connections for
 * the slice's length. It reports requests per second and latency per path
 * and their ratios, the CPU time each party spent per request (the agent's
 * loop, its workers, the runtime, the clients), and the agent's memory: idle,
 * and at its peak under load. Nothing here asserts timing.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench-common.h"
#include "common/cleanup.h"
#include "common/text.h"

#define SAMPLES_PER_SLICE (2u << 20)
#define CONCURRENCY_MAX 16
#define USERS_MAX 64

typedef enum Path {
        PATH_AGENT,
        PATH_DIRECT,
        _PATH_MAX,
} Path;

static const char *const path_name[_PATH_MAX] = { "agent", "direct" };

typedef struct Args {
        BenchTarget target;
        pid_t agent_pid;
        unsigned clients[CONCURRENCY_MAX];
        size_t n_clients;
        BenchUser users[USERS_MAX];
        size_t n_users;
        double seconds, warmup;
        unsigned rounds;
} Args;

/* What one (clients, path) pair gathered over its slices. */
typedef struct Tally {
        uint64_t *v;
        size_t n, allocated;
        uint64_t busy, failed, all;
        double window_sec, agent_cpu, workers_cpu, target_cpu, clients_cpu;
        char first_error[512];
        AgentMemory peak;
} Tally;

static void usage(FILE *out) {
        fprintf(out,
                "Usage: bench-load --agent-socket PATH --runtime-socket PATH --pid PID --agent-pid PID\n"
                "                  [--clients 1,8,64] [--agent-users USER,...] [--seconds S] [--rounds N]\n"
                "                  [--warmup S]\n"
                "Many clients asking info of one .NET target at once: through dsagent and straight\n"
                "to the runtime's socket, alternating. Run as root, with the agent running.\n\n"
                "  --agent-socket PATH    dsagent's socket\n"
                "  --runtime-socket PATH  the target's dotnet-diagnostic-PID-STARTTIME-socket\n"
                "  --pid PID              the target's process id\n"
                "  --agent-pid PID        dsagent's process id (for its memory and CPU time)\n"
                "  --clients LIST         numbers of concurrent clients [1,8,64]\n"
                "  --agent-users LIST     the agent path's clients run as these users, in turn [root]\n"
                "                         (the direct path's run as root: only it reaches the socket)\n"
                "  --seconds S            measured length of each slice [2]\n"
                "  --rounds N             slices per path and number of clients [3]\n"
                "  --warmup S             unmeasured start of each slice [0.3]\n");
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
        enum { ARG_AGENT = 0x100, ARG_RUNTIME, ARG_PID, ARG_AGENT_PID, ARG_CLIENTS, ARG_USERS, ARG_SECONDS, ARG_ROUNDS,
               ARG_WARMUP, ARG_HELP };
        static const struct option options[] = {
                { "agent-socket", required_argument, NULL, ARG_AGENT },
                { "runtime-socket", required_argument, NULL, ARG_RUNTIME },
                { "pid", required_argument, NULL, ARG_PID },
                { "agent-pid", required_argument, NULL, ARG_AGENT_PID },
                { "clients", required_argument, NULL, ARG_CLIENTS },
                { "agent-users", required_argument, NULL, ARG_USERS },
                { "seconds", required_argument, NULL, ARG_SECONDS },
                { "rounds", required_argument, NULL, ARG_ROUNDS },
                { "warmup", required_argument, NULL, ARG_WARMUP },
                { "help", no_argument, NULL, ARG_HELP },
                {},
        };
        const char *names[USERS_MAX];
        uint64_t v;
        int c;

        *a = (Args){ .clients = { 1, 8, 64 }, .n_clients = 3, .seconds = 2, .rounds = 3, .warmup = 0.3 };
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case ARG_AGENT:
                        a->target.agent_socket = optarg;
                        break;
                case ARG_RUNTIME:
                        a->target.runtime_socket = optarg;
                        break;
                case ARG_PID:
                        if (parse_pid(optarg, &a->target.pid) < 0)
                                return -EINVAL;
                        break;
                case ARG_AGENT_PID:
                        if (parse_pid(optarg, &a->agent_pid) < 0)
                                return -EINVAL;
                        break;
                case ARG_CLIENTS:
                        if (bench_parse_list(optarg, a->clients, CONCURRENCY_MAX, &a->n_clients) < 0) {
                                fprintf(stderr, "bench-load: --clients takes a list like 1,8,64\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_USERS:
                        if (bench_split_names(optarg, names, USERS_MAX, &a->n_users) < 0) {
                                fprintf(stderr, "bench-load: --agent-users takes a list of user names\n");
                                return -EINVAL;
                        }
                        for (size_t i = 0; i < a->n_users; i++)
                                if (bench_user_resolve(names[i], &a->users[i]) < 0) {
                                        fprintf(stderr, "bench-load: no user %s\n", names[i]);
                                        return -EINVAL;
                                }
                        break;
                case ARG_SECONDS:
                        if (parse_seconds_arg(optarg, &a->seconds) < 0)
                                return -EINVAL;
                        break;
                case ARG_WARMUP:
                        if (parse_seconds_arg(optarg, &a->warmup) < 0)
                                return -EINVAL;
                        break;
                case ARG_ROUNDS:
                        if (parse_u64(optarg, &v) < 0 || v == 0 || v > 1000)
                                return -EINVAL;
                        a->rounds = (unsigned)v;
                        break;
                case ARG_HELP:
                        usage(stdout);
                        return 1;
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        }
        if (optind < argc || !a->target.agent_socket || !a->target.runtime_socket || a->target.pid <= 0 ||
            a->agent_pid <= 0) {
                usage(stderr);
                return -EINVAL;
        }
        return 0;
}

static int tally_take(Tally *t, const SampleSet *s, const SliceResult *r) {
        size_t kept = sample_set_kept(s);

        if (t->n + kept > t->allocated) {
                size_t n = (t->n + kept) * 2;
                uint64_t *grown = realloc(t->v, n * sizeof(uint64_t));
                if (!grown)
                        return -ENOMEM;
                t->v = grown;
                t->allocated = n;
        }
        memcpy(t->v + t->n, s->v, kept * sizeof(uint64_t));
        t->n += kept;
        t->busy += s->busy;
        t->failed += s->failed;
        t->all += s->all;
        t->window_sec += r->window_sec;
        t->agent_cpu += r->agent_cpu_sec;
        t->workers_cpu += r->workers_cpu_sec;
        t->target_cpu += r->target_cpu_sec;
        t->clients_cpu += r->clients_cpu_sec;
        if (!t->first_error[0] && s->first_error[0])
                snprintf(t->first_error, sizeof(t->first_error), "%s", s->first_error);
        bench_memory_max(&t->peak, &r->peak);
        return 0;
}

static double per_request_us(double sec, uint64_t n) {
        return n ? sec * 1e6 / (double)n : 0;
}

int main(int argc, char **argv) {
        _cleanup_free_ char *users_text = NULL;
        SampleSet *set = NULL;
        AgentWatch watch;
        AgentMemory idle, after;
        size_t users_len = 0;
        FILE *users_out;
        int r;
        Args a;

        r = parse_argv(argc, argv, &a);
        if (r != 0)
                return r > 0 ? EXIT_SUCCESS : 2;
        if (bench_watch_init(&watch, a.agent_pid, a.target.pid) < 0) {
                fprintf(stderr, "bench-load: no agent with pid %d\n", (int)a.agent_pid);
                return EXIT_FAILURE;
        }
        set = sample_set_new(SAMPLES_PER_SLICE);
        if (!set) {
                fprintf(stderr, "bench-load: out of memory\n");
                return EXIT_FAILURE;
        }
        users_out = open_memstream(&users_text, &users_len);
        if (!users_out)
                return EXIT_FAILURE;
        if (a.n_users == 0)
                fputs("root", users_out);
        for (size_t i = 0; i < a.n_users; i++)
                fprintf(users_out, "%s%s", i ? "," : "", a.users[i].name);
        fclose(users_out);

        /* before the first request: what the agent holds when nobody asks anything */
        bench_watch_memory(&watch, &idle);

        printf("info of pid %d by concurrent clients; %u slices of %.1f s (after %.1f s unmeasured) per path and "
               "number of clients, paths alternating\n",
               (int)a.target.pid, a.rounds, a.seconds, a.warmup);
        printf("agent-path clients run as: %s (in turn); direct-path clients as root\n\n", users_text);
        printf("%-8s %-7s %9s %9s %9s %9s %9s %9s %9s %8s %8s\n", "clients", "path", "req/s", "min", "median", "mean",
               "p90", "p99", "max", "busy", "failed");

        for (size_t ci = 0; ci < a.n_clients; ci++) {
                unsigned n = a.clients[ci];
                Tally tally[_PATH_MAX] = {};
                Stats s[_PATH_MAX];
                double rps[_PATH_MAX];

                for (unsigned round = 0; round < a.rounds; round++)
                        for (unsigned k = 0; k < _PATH_MAX; k++) {
                                /* ABBA...: the order flips each round so drift falls on both alike */
                                Path p = (Path)((k + round) % _PATH_MAX);
                                ClientGroup g = {
                                        .kind = p == PATH_AGENT ? CLIENT_AGENT_INFO : CLIENT_DIRECT_INFO,
                                        .n = n,
                                        .users = p == PATH_AGENT && a.n_users > 0 ? a.users : NULL,
                                        .n_users = a.n_users,
                                        .set = set,
                                };
                                SliceResult res;

                                if (bench_run_slice(&a.target, &g, 1, a.warmup, a.seconds, &watch, &res) < 0) {
                                        fprintf(stderr, "bench-load: a client of the %s path failed to run%s%s\n",
                                                path_name[p], set->first_error[0] ? ": " : "", set->first_error);
                                        return EXIT_FAILURE;
                                }
                                if (tally_take(&tally[p], set, &res) < 0)
                                        return EXIT_FAILURE;
                        }

                for (Path p = 0; p < _PATH_MAX; p++) {
                        s[p] = bench_stats(tally[p].v, tally[p].n);
                        rps[p] = tally[p].window_sec > 0 ? (double)tally[p].n / tally[p].window_sec : 0;
                        printf("%-8u %-7s %9.0f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %8" PRIu64 " %8" PRIu64 "\n", n,
                               path_name[p], rps[p], s[p].min, s[p].median, s[p].mean, s[p].p90, s[p].p99, s[p].max,
                               tally[p].busy, tally[p].failed);
                }
                printf("%-8u %-7s %9.3f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", n, "ag/dir", rps[PATH_AGENT] / rps[PATH_DIRECT],
                       s[PATH_AGENT].min / s[PATH_DIRECT].min, s[PATH_AGENT].median / s[PATH_DIRECT].median,
                       s[PATH_AGENT].mean / s[PATH_DIRECT].mean, s[PATH_AGENT].p90 / s[PATH_DIRECT].p90,
                       s[PATH_AGENT].p99 / s[PATH_DIRECT].p99, s[PATH_AGENT].max / s[PATH_DIRECT].max);
                for (Path p = 0; p < _PATH_MAX; p++)
                        if (tally[p].first_error[0])
                                printf("         %s: first failure: %s\n", path_name[p], tally[p].first_error);
                printf("         CPU per request (us): agent path: agent loop %.1f, workers %.1f, runtime %.1f, "
                       "clients %.1f; direct path: runtime %.1f, clients %.1f\n",
                       per_request_us(tally[PATH_AGENT].agent_cpu, tally[PATH_AGENT].n),
                       per_request_us(tally[PATH_AGENT].workers_cpu, tally[PATH_AGENT].n),
                       per_request_us(tally[PATH_AGENT].target_cpu, tally[PATH_AGENT].n),
                       per_request_us(tally[PATH_AGENT].clients_cpu, tally[PATH_AGENT].all),
                       per_request_us(tally[PATH_DIRECT].target_cpu, tally[PATH_DIRECT].n),
                       per_request_us(tally[PATH_DIRECT].clients_cpu, tally[PATH_DIRECT].all));
                printf("         agent loop busy %.0f%% of the agent path's time, workers %.0f%% (of one CPU)\n",
                       100 * tally[PATH_AGENT].agent_cpu / tally[PATH_AGENT].window_sec,
                       100 * tally[PATH_AGENT].workers_cpu / tally[PATH_AGENT].window_sec);
                bench_memory_print("memory peak (agent path):", &tally[PATH_AGENT].peak);
                printf("\n");
                printf("RESULT clients=%u agent_rps=%.0f agent_p50_us=%.1f agent_p99_us=%.1f direct_rps=%.0f "
                       "direct_p50_us=%.1f direct_p99_us=%.1f rps_ratio=%.3f p50_ratio=%.2f p99_ratio=%.2f "
                       "agent_busy=%" PRIu64 " agent_failed=%" PRIu64 " direct_failed=%" PRIu64
                       " agent_peak_rss_kb=%" PRIu64 " agent_hwm_kb=%" PRIu64 " workers_peak_rss_max_kb=%" PRIu64
                       " workers_max=%u peak_pss_kb=%" PRIu64 "\n\n",
                       n, rps[PATH_AGENT], s[PATH_AGENT].median, s[PATH_AGENT].p99, rps[PATH_DIRECT],
                       s[PATH_DIRECT].median, s[PATH_DIRECT].p99, rps[PATH_AGENT] / rps[PATH_DIRECT],
                       s[PATH_AGENT].median / s[PATH_DIRECT].median, s[PATH_AGENT].p99 / s[PATH_DIRECT].p99,
                       tally[PATH_AGENT].busy, tally[PATH_AGENT].failed, tally[PATH_DIRECT].failed,
                       tally[PATH_AGENT].peak.agent_rss_kb, tally[PATH_AGENT].peak.agent_hwm_kb,
                       tally[PATH_AGENT].peak.workers_rss_max_kb, tally[PATH_AGENT].peak.n_workers,
                       tally[PATH_AGENT].peak.pss_kb);
                for (Path p = 0; p < _PATH_MAX; p++)
                        free(tally[p].v);
        }

        bench_watch_memory(&watch, &after);
        printf("agent memory:\n");
        bench_memory_print("idle, before the first request:", &idle);
        bench_memory_print("at the end (VmHWM: peak of the run):", &after);
        printf("RESULT memory idle_rss_kb=%" PRIu64 " idle_hwm_kb=%" PRIu64 " idle_workers=%u idle_worker_rss_max_kb=%" PRIu64
               " end_hwm_kb=%" PRIu64 " end_worker_hwm_max_kb=%" PRIu64 "\n",
               idle.agent_rss_kb, idle.agent_hwm_kb, idle.n_workers, idle.workers_rss_max_kb, after.agent_hwm_kb,
               after.workers_hwm_max_kb);
        sample_set_free(set);
        return EXIT_SUCCESS;
}
