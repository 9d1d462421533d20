/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-info: latency of ProcessInfo through dsagent against the same request
 * sent straight to the runtime's diagnostic socket.
 *
 * The two paths alternate (agent, direct, agent, direct, ...) so that drift in
 * the machine's load affects both alike. Each sample is one whole exchange on
 * a fresh connection, from socket() to the last reply byte decoded:
 *
 *   agent:  connect, send WIRE_REQUEST_INFO, read frames until DONE (as dsctl)
 *   direct: connect, send the 20-byte ProcessInfo3 request, read and decode
 *           the whole reply
 *
 * Closing the connection is outside the timed region on both paths. Every
 * reply is checked; the first failure aborts the run. Nothing here asserts
 * timing: it prints numbers.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/agent-client.h"
#include "common/io.h"
#include "common/cleanup.h"
#include "common/dotnet-ipc.h"
#include "common/text.h"
#include "common/wire.h"

#define DEFAULT_ITERATIONS 2000
#define DEFAULT_WARMUP 100
#define IO_TIMEOUT_SEC 10

typedef struct Args {
        const char *agent_socket;
        const char *runtime_socket;
        pid_t pid;
        pid_t runtime_pid; /* the pid the runtime reports: its own, in its pid namespace; 0: pid */
        unsigned iterations;
        unsigned warmup;
} Args;

typedef enum Path {
        PATH_AGENT,
        PATH_DIRECT,
        _PATH_MAX,
} Path;

static const char *const path_name[_PATH_MAX] = {
        [PATH_AGENT] = "agent",
        [PATH_DIRECT] = "direct",
};

/* Why one exchange failed; filled in by the path that failed, printed by main. */
typedef struct Failure {
        char what[512];
} Failure;

static void usage(FILE *out) {
        fprintf(out,
                "Usage: bench-info --agent-socket PATH --runtime-socket PATH --pid PID\n"
                "                  [--runtime-pid PID] [--iterations N] [--warmup N]\n"
                "Compare ProcessInfo3 through dsagent with the same request sent straight\n"
                "to the runtime's diagnostic socket. Run as root, with the agent running.\n\n"
                "  --agent-socket PATH    dsagent's socket\n"
                "  --runtime-socket PATH  the target's dotnet-diagnostic-PID-STARTTIME-socket\n"
                "  --pid PID              the target's process id\n"
                "  --runtime-pid PID      the pid its runtime reports, when it runs in a pid namespace\n"
                "  --iterations N         measured requests per path [%d]\n"
                "  --warmup N             unmeasured requests per path first [%d]\n"
                "  --help                 show this help\n",
                DEFAULT_ITERATIONS, DEFAULT_WARMUP);
}

static int parse_unsigned(const char *s, unsigned *ret) {
        uint64_t v;

        if (parse_u64(s, &v) < 0 || v > 100000000)
                return -EINVAL;
        *ret = (unsigned)v;
        return 0;
}

/* Return: 0 to run, 1 to exit successfully (help), -EINVAL for usage errors. */
static int parse_argv(int argc, char **argv, Args *a) {
        enum { ARG_AGENT = 0x100, ARG_RUNTIME, ARG_PID, ARG_RUNTIME_PID, ARG_ITERATIONS, ARG_WARMUP, ARG_HELP };
        static const struct option options[] = {
                { "agent-socket", required_argument, NULL, ARG_AGENT },
                { "runtime-socket", required_argument, NULL, ARG_RUNTIME },
                { "pid", required_argument, NULL, ARG_PID },
                { "runtime-pid", required_argument, NULL, ARG_RUNTIME_PID },
                { "iterations", required_argument, NULL, ARG_ITERATIONS },
                { "warmup", required_argument, NULL, ARG_WARMUP },
                { "help", no_argument, NULL, ARG_HELP },
                {},
        };
        int c;

        *a = (Args){ .iterations = DEFAULT_ITERATIONS, .warmup = DEFAULT_WARMUP };
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case ARG_AGENT:
                        a->agent_socket = optarg;
                        break;
                case ARG_RUNTIME:
                        a->runtime_socket = optarg;
                        break;
                case ARG_PID:
                        if (parse_pid(optarg, &a->pid) < 0) {
                                fprintf(stderr, "bench-info: --pid takes a process id\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_RUNTIME_PID:
                        if (parse_pid(optarg, &a->runtime_pid) < 0) {
                                fprintf(stderr, "bench-info: --runtime-pid takes a process id\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_ITERATIONS:
                        if (parse_unsigned(optarg, &a->iterations) < 0 || a->iterations == 0) {
                                fprintf(stderr, "bench-info: --iterations takes a positive number\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_WARMUP:
                        if (parse_unsigned(optarg, &a->warmup) < 0) {
                                fprintf(stderr, "bench-info: --warmup takes a number\n");
                                return -EINVAL;
                        }
                        break;
                case ARG_HELP:
                        usage(stdout);
                        return 1;
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "bench-info: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        if (!a->agent_socket || !a->runtime_socket || a->pid <= 0) {
                fprintf(stderr, "bench-info: --agent-socket, --runtime-socket and --pid are required\n");
                usage(stderr);
                return -EINVAL;
        }
        return 0;
}

static uint64_t now_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *errno_name(int r) {
        return r == -ETIMEDOUT ? "timed out" : strerror(-r);
}

/* ---- agent path ------------------------------------------------------------------------------------- */

/* Return: 0 when the agent answered PROCESS (for @pid) then DONE, else -1 with @f filled in. */
static int agent_exchange(const Args *a, WireWriter *request, uint64_t *ret_nsec, Failure *f) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        unsigned n_process = 0;
        uint64_t start, end;
        WireMessage m;
        int r;

        start = now_nsec();
        r = agent_client_connect(a->agent_socket, IO_TIMEOUT_SEC, &client);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "connect to %s: %s", a->agent_socket, errno_name(r));
                return -1;
        }
        r = agent_client_send(client, request);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "send: %s", errno_name(r));
                return -1;
        }
        for (;;) {
                r = agent_client_receive(client, &m);
                if (r < 0) {
                        snprintf(f->what, sizeof(f->what), "receive after %u PROCESS frame(s): %s", n_process,
                                 r == -EBADMSG ? "malformed frame" : errno_name(r));
                        return -1;
                }
                if (m.type == WIRE_REPLY_PROCESS) {
                        uint32_t pid = 0;

                        if (wire_message_get_u32(&m, WIRE_TAG_PID, &pid) != 0 || pid != (uint32_t)a->pid) {
                                snprintf(f->what, sizeof(f->what), "PROCESS frame for pid %" PRIu32 ", not %d",
                                         pid, (int)a->pid);
                                return -1;
                        }
                        n_process++;
                        continue;
                }
                if (m.type == WIRE_REPLY_DONE)
                        break;
                if (m.type == WIRE_REPLY_ERROR) {
                        _cleanup_free_ char *message = NULL, *escaped = NULL;
                        uint32_t error = 0, hresult = 0;
                        uint64_t request_id = 0;

                        (void)wire_message_get_u32(&m, WIRE_TAG_ERROR, &error);
                        (void)wire_message_get_u32(&m, WIRE_TAG_HRESULT, &hresult);
                        (void)wire_message_get_u64(&m, WIRE_TAG_REQUEST_ID, &request_id);
                        (void)wire_message_get_string(&m, WIRE_TAG_MESSAGE, &message);
                        escaped = message ? text_escape(message, strlen(message)) : NULL;
                        snprintf(f->what, sizeof(f->what),
                                 "agent replied ERROR %" PRIu32 " (%s): %s, hresult 0x%08" PRIx32
                                 ", request %016" PRIx64,
                                 error, wire_error_to_string(error), escaped ? escaped : "(no message)", hresult,
                                 request_id);
                        return -1;
                }
                snprintf(f->what, sizeof(f->what), "unexpected frame type 0x%04x", (unsigned)m.type);
                return -1;
        }
        end = now_nsec();

        if (n_process != 1) {
                snprintf(f->what, sizeof(f->what), "DONE after %u PROCESS frames, expected 1", n_process);
                return -1;
        }
        *ret_nsec = end - start;
        return 0;
}

/* ---- direct path ------------------------------------------------------------------------------------ */

/*
 * Return: 0 when the runtime answered ProcessInfo3 successfully with a reply
 * that decodes and names @pid, else -1 with @f filled in. @reply is the
 * caller's DOTNET_IPC_MESSAGE_MAX buffer, kept out of the stack and reused.
 */
static int direct_exchange(const Args *a, const uint8_t *request, size_t request_size, uint8_t *reply,
                           uint64_t *ret_nsec, Failure *f) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = IO_TIMEOUT_SEC };
        _cleanup_close_ int fd = -EBADF;
        DotnetIpcResponse response;
        DotnetIpcHeader h;
        uint64_t start, end;
        int r;

        memcpy(sa.sun_path, a->runtime_socket, strlen(a->runtime_socket)); /* length checked in main */

        start = now_nsec();
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                snprintf(f->what, sizeof(f->what), "socket: %m");
                return -1;
        }
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
                snprintf(f->what, sizeof(f->what), "setsockopt: %m");
                return -1;
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                /* EAGAIN from a blocking AF_UNIX connect means the send timeout expired: backlog full */
                snprintf(f->what, sizeof(f->what), "connect to %s: %s", a->runtime_socket,
                         errno == EAGAIN ? "timed out (listen backlog full?)" : strerror(errno));
                return -1;
        }
        r = fd_write_all(fd, request, request_size);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "send: %s", errno_name(r));
                return -1;
        }
        r = fd_read_exactly(fd, reply, DOTNET_IPC_HEADER_SIZE);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "receive reply header: %s", errno_name(r));
                return -1;
        }
        r = dotnet_ipc_header_decode(reply, DOTNET_IPC_HEADER_SIZE, &h);
        if (r != 0) {
                snprintf(f->what, sizeof(f->what), "malformed reply header (%d)", r);
                return -1;
        }
        r = fd_read_exactly(fd, reply + DOTNET_IPC_HEADER_SIZE, h.size - DOTNET_IPC_HEADER_SIZE);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "receive %u-byte reply: %s", (unsigned)h.size, errno_name(r));
                return -1;
        }
        r = dotnet_ipc_response_decode(reply, h.size, &response);
        if (r != 0) {
                snprintf(f->what, sizeof(f->what), "malformed reply (%d)", r);
                return -1;
        }
        if (!response.ok) {
                const char *name = dotnet_ipc_hresult_name(response.hresult);

                snprintf(f->what, sizeof(f->what), "runtime replied error hresult 0x%08" PRIx32 " (%s)",
                         response.hresult, name ? name : "unknown");
                return -1;
        }
        r = dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO3, response.payload, response.payload_size, &info);
        end = now_nsec();
        if (r != 0) {
                snprintf(f->what, sizeof(f->what), "malformed ProcessInfo3 payload (%d)", r);
                return -1;
        }
        /* the runner starts the target in our pid namespace, so its own pid is ours */
        if (info.pid != (uint64_t)(a->runtime_pid > 0 ? a->runtime_pid : a->pid)) {
                snprintf(f->what, sizeof(f->what), "runtime reports pid %" PRIu64 ", not %d", info.pid,
                         (int)(a->runtime_pid > 0 ? a->runtime_pid : a->pid));
                return -1;
        }
        *ret_nsec = end - start;
        return 0;
}

/* ---- statistics ------------------------------------------------------------------------------------- */

typedef struct Stats {
        double min, median, p90, p99, max, mean;
} Stats;

static int cmp_u64(const void *x, const void *y) {
        uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
        return (a > b) - (a < b);
}

/* nearest rank: the smallest sample with at least @q of the samples at or below it */
static double quantile_sorted(const uint64_t *v, size_t n, double q) {
        size_t rank = (size_t)((double)n * q + 0.999999999);

        if (rank < 1)
                rank = 1;
        if (rank > n)
                rank = n;
        return (double)v[rank - 1];
}

static Stats stats_of(uint64_t *v, size_t n) {
        double sum = 0;
        Stats s;

        qsort(v, n, sizeof(*v), cmp_u64);
        for (size_t i = 0; i < n; i++)
                sum += (double)v[i];
        s.min = (double)v[0] / 1000.0;
        s.max = (double)v[n - 1] / 1000.0;
        s.mean = sum / (double)n / 1000.0;
        /* the median of an even count is the mean of the middle two */
        s.median = (n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0) / 1000.0;
        s.p90 = quantile_sorted(v, n, 0.90) / 1000.0;
        s.p99 = quantile_sorted(v, n, 0.99) / 1000.0;
        return s;
}

/* ---- main ------------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
        _cleanup_free_ uint64_t *samples[_PATH_MAX] = {};
        _cleanup_free_ WireWriter *w = NULL;
        _cleanup_free_ uint8_t *reply = NULL;
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        unsigned failures[_PATH_MAX] = {}, done[_PATH_MAX] = {};
        size_t request_size;
        Stats s[_PATH_MAX];
        Args a;
        int r;

        r = parse_argv(argc, argv, &a);
        if (r != 0)
                return r > 0 ? EXIT_SUCCESS : 2;
        if (strlen(a.runtime_socket) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
                fprintf(stderr, "bench-info: runtime socket path too long\n");
                return 2;
        }

        w = malloc(sizeof(*w));
        reply = malloc(DOTNET_IPC_MESSAGE_MAX);
        for (Path p = 0; p < _PATH_MAX; p++)
                samples[p] = calloc(a.iterations, sizeof(uint64_t));
        if (!w || !reply || !samples[PATH_AGENT] || !samples[PATH_DIRECT]) {
                fprintf(stderr, "bench-info: out of memory\n");
                return EXIT_FAILURE;
        }

        /* both requests are built once, outside the timed region */
        wire_writer_begin(w, WIRE_REQUEST_INFO);
        wire_writer_put_u32(w, WIRE_TAG_PID, (uint32_t)a.pid);
        r = dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO3, NULL, 0, request, sizeof(request), &request_size);
        if (r != 0) {
                fprintf(stderr, "bench-info: cannot encode ProcessInfo3 request (%d)\n", r);
                return EXIT_FAILURE;
        }

        /* ABAB...: one agent request, then one direct request; warmup rounds are not recorded */
        for (unsigned i = 0; i < a.warmup + a.iterations; i++) {
                bool measured = i >= a.warmup;

                for (Path p = 0; p < _PATH_MAX; p++) {
                        Failure f = {};
                        uint64_t nsec = 0;

                        r = p == PATH_AGENT ? agent_exchange(&a, w, &nsec, &f)
                                            : direct_exchange(&a, request, request_size, reply, &nsec, &f);
                        if (r < 0) {
                                failures[p]++;
                                fprintf(stderr,
                                        "bench-info: %s request failed in %s round %u: %s\n"
                                        "bench-info: aborting; completed: agent %u, direct %u; "
                                        "failures: agent %u, direct %u\n",
                                        path_name[p], measured ? "measured" : "warmup",
                                        measured ? i - a.warmup : i, f.what, done[PATH_AGENT],
                                        done[PATH_DIRECT], failures[PATH_AGENT], failures[PATH_DIRECT]);
                                return EXIT_FAILURE;
                        }
                        done[p]++;
                        if (measured)
                                samples[p][i - a.warmup] = nsec;
                }
        }

        for (Path p = 0; p < _PATH_MAX; p++)
                s[p] = stats_of(samples[p], a.iterations);

        printf("ProcessInfo3, pid %d: %u measured requests per path after %u warmup, interleaved\n",
               (int)a.pid, a.iterations, a.warmup);
        printf("failures: agent %u, direct %u\n\n", failures[PATH_AGENT], failures[PATH_DIRECT]);
        printf("%-14s %10s %10s %10s %10s %10s %10s\n", "path (usec)", "min", "median", "mean", "p90", "p99",
               "max");
        for (Path p = 0; p < _PATH_MAX; p++)
                printf("%-14s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", path_name[p], s[p].min, s[p].median,
                       s[p].mean, s[p].p90, s[p].p99, s[p].max);
        printf("%-14s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", "agent/direct",
               s[PATH_AGENT].min / s[PATH_DIRECT].min, s[PATH_AGENT].median / s[PATH_DIRECT].median,
               s[PATH_AGENT].mean / s[PATH_DIRECT].mean, s[PATH_AGENT].p90 / s[PATH_DIRECT].p90,
               s[PATH_AGENT].p99 / s[PATH_DIRECT].p99, s[PATH_AGENT].max / s[PATH_DIRECT].max);
        printf("\nRESULT iterations=%u agent_median_us=%.1f agent_p99_us=%.1f direct_median_us=%.1f "
               "direct_p99_us=%.1f median_ratio=%.2f p99_ratio=%.2f\n",
               a.iterations, s[PATH_AGENT].median, s[PATH_AGENT].p99, s[PATH_DIRECT].median, s[PATH_DIRECT].p99,
               s[PATH_AGENT].median / s[PATH_DIRECT].median, s[PATH_AGENT].p99 / s[PATH_DIRECT].p99);
        return EXIT_SUCCESS;
}
