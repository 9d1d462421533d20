/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What bench-load and bench-ps share (bench-common.h): timed exchanges, samples in shared memory,
 * statistics, the agent's memory and CPU.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/agent-client.h"
#include "bench/bench-common.h"
#include "common/cleanup.h"
#include "common/dotnet-ipc.h"
#include "common/io.h"
#include "common/text.h"
#include "common/wire.h"

/* How often the agent's memory is read during a slice. */
#define WATCH_INTERVAL_NSEC (50 * 1000000ULL)

uint64_t bench_now_nsec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
        struct timespec ts = { .tv_sec = (time_t)(t / 1000000000u), .tv_nsec = (long)(t % 1000000000u) };

        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

int bench_parse_list(const char *s, unsigned *out, size_t max, size_t *ret_n) {
        _cleanup_free_ char *copy = strdup(s);
        char *save = NULL;
        size_t n = 0;

        if (!copy)
                return -ENOMEM;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                uint64_t v;

                if (n == max || parse_u64(tok, &v) < 0 || v == 0 || v > 1000000)
                        return -EINVAL;
                out[n++] = (unsigned)v;
        }
        if (n == 0)
                return -EINVAL;
        *ret_n = n;
        return 0;
}

int bench_split_names(char *s, const char **out, size_t max, size_t *ret_n) {
        char *save = NULL;
        size_t n = 0;

        for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (n == max)
                        return -E2BIG;
                out[n++] = tok;
        }
        if (n == 0)
                return -EINVAL;
        *ret_n = n;
        return 0;
}

static const char *errno_name(int r) {
        return r == -ETIMEDOUT ? "timed out" : strerror(-r);
}

/* ---- agent exchanges ---- */

/*
 * Reads frames until DONE. PROCESS frames are counted; when @pid > 0, each
 * must be about @pid. Return: 0, or -1 with @f filled in.
 */
static int agent_read_reply(AgentClient *client, pid_t pid, unsigned *ret_n, BenchFailure *f) {
        unsigned n_process = 0;
        WireMessage m;
        int r;

        for (;;) {
                r = agent_client_receive(client, &m);
                if (r < 0) {
                        snprintf(f->what, sizeof(f->what), "receive after %u PROCESS frame(s): %s", n_process,
                                 r == -EBADMSG ? "malformed frame" : errno_name(r));
                        return -1;
                }
                if (m.type == WIRE_REPLY_PROCESS) {
                        uint32_t p = 0;

                        if (pid > 0 && (wire_message_get_u32(&m, WIRE_TAG_PID, &p) != 0 || p != (uint32_t)pid)) {
                                snprintf(f->what, sizeof(f->what), "PROCESS frame for pid %" PRIu32 ", not %d", p,
                                         (int)pid);
                                return -1;
                        }
                        n_process++;
                        continue;
                }
                if (m.type == WIRE_REPLY_DONE)
                        break;
                if (m.type == WIRE_REPLY_ERROR) {
                        _cleanup_free_ char *message = NULL;
                        uint32_t error = 0;

                        (void)wire_message_get_u32(&m, WIRE_TAG_ERROR, &error);
                        (void)wire_message_get_string(&m, WIRE_TAG_MESSAGE, &message);
                        f->busy = error == WIRE_ERROR_BUSY;
                        snprintf(f->what, sizeof(f->what), "agent replied ERROR %" PRIu32 " (%s): %s", error,
                                 wire_error_to_string(error), message ? message : "(no message)");
                        return -1;
                }
                snprintf(f->what, sizeof(f->what), "unexpected frame type 0x%04x", (unsigned)m.type);
                return -1;
        }
        *ret_n = n_process;
        return 0;
}

static int agent_request(const BenchTarget *t, WireType type, AgentClient **ret, BenchFailure *f) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        WireWriter w;
        int r;

        r = agent_client_connect(t->agent_socket, BENCH_IO_TIMEOUT_SEC, &client);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "connect to %s: %s", t->agent_socket,
                         r == -EAGAIN ? "timed out (listen backlog full?)" : errno_name(r));
                return -1;
        }
        wire_writer_begin(&w, type);
        if (type == WIRE_REQUEST_INFO)
                wire_writer_put_u32(&w, WIRE_TAG_PID, (uint32_t)t->pid);
        r = agent_client_send(client, &w);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "send: %s", errno_name(r));
                return -1;
        }
        *ret = TAKE_PTR(client);
        return 0;
}

int bench_agent_info(const BenchTarget *t, uint64_t *ret_nsec, BenchFailure *f) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        uint64_t start = bench_now_nsec(), end;
        unsigned n = 0;

        if (agent_request(t, WIRE_REQUEST_INFO, &client, f) < 0 || agent_read_reply(client, t->pid, &n, f) < 0)
                return -1;
        end = bench_now_nsec();
        if (n != 1) {
                snprintf(f->what, sizeof(f->what), "DONE after %u PROCESS frames, expected 1", n);
                return -1;
        }
        *ret_nsec = end - start;
        return 0;
}

int bench_agent_ps(const BenchTarget *t, unsigned *ret_n, uint64_t *ret_nsec, BenchFailure *f) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        uint64_t start = bench_now_nsec(), end;

        if (agent_request(t, WIRE_REQUEST_PS, &client, f) < 0 || agent_read_reply(client, 0, ret_n, f) < 0)
                return -1;
        end = bench_now_nsec();
        *ret_nsec = end - start;
        return 0;
}

int bench_agent_ps_noread(const BenchTarget *t, uint64_t deadline_nsec, uint64_t *ret_nsec, BenchFailure *f) {
        _cleanup_(agent_client_freep) AgentClient *client = NULL;
        uint64_t start = bench_now_nsec();

        if (agent_request(t, WIRE_REQUEST_PS, &client, f) < 0)
                return -1;
        for (;;) {
                /* POLLRDHUP alone: the reply's bytes (POLLIN) are left unread */
                struct pollfd p = { .fd = client->fd, .events = POLLRDHUP };
                uint64_t now = bench_now_nsec();
                int r;

                if (now >= deadline_nsec) {
                        *ret_nsec = 0;
                        return 0;
                }
                r = poll(&p, 1, (int)((deadline_nsec - now) / 1000000 + 1));
                if (r < 0 && errno != EINTR) {
                        snprintf(f->what, sizeof(f->what), "poll: %m");
                        return -1;
                }
                if (r > 0 && p.revents) {
                        *ret_nsec = bench_now_nsec() - start;
                        return 0;
                }
        }
}

/* ---- direct exchange ---- */

int bench_direct_info(const BenchTarget *t, uint64_t *ret_nsec, BenchFailure *f) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        static uint8_t reply[DOTNET_IPC_MESSAGE_MAX];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = BENCH_IO_TIMEOUT_SEC };
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        _cleanup_close_ int fd = -EBADF;
        DotnetIpcResponse response;
        DotnetIpcHeader h;
        size_t request_size;
        uint64_t start, end;
        int r;

        if (!t->runtime_socket || strlen(t->runtime_socket) >= sizeof(sa.sun_path)) {
                snprintf(f->what, sizeof(f->what), "no usable runtime socket path");
                return -1;
        }
        memcpy(sa.sun_path, t->runtime_socket, strlen(t->runtime_socket));
        r = dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO3, NULL, 0, request, sizeof(request), &request_size);
        if (r != 0) {
                snprintf(f->what, sizeof(f->what), "cannot encode ProcessInfo3 (%d)", r);
                return -1;
        }

        start = bench_now_nsec();
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
                snprintf(f->what, sizeof(f->what), "socket: %m");
                return -1;
        }
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                snprintf(f->what, sizeof(f->what), "connect to %s: %s", t->runtime_socket,
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
        if (dotnet_ipc_header_decode(reply, DOTNET_IPC_HEADER_SIZE, &h) != 0) {
                snprintf(f->what, sizeof(f->what), "malformed reply header");
                return -1;
        }
        r = fd_read_exactly(fd, reply + DOTNET_IPC_HEADER_SIZE, h.size - DOTNET_IPC_HEADER_SIZE);
        if (r < 0) {
                snprintf(f->what, sizeof(f->what), "receive %u-byte reply: %s", (unsigned)h.size, errno_name(r));
                return -1;
        }
        if (dotnet_ipc_response_decode(reply, h.size, &response) != 0 || !response.ok) {
                snprintf(f->what, sizeof(f->what), "runtime replied with an error or a malformed reply");
                return -1;
        }
        r = dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO3, response.payload, response.payload_size, &info);
        end = bench_now_nsec();
        if (r != 0 || info.pid != (uint64_t)t->pid) {
                snprintf(f->what, sizeof(f->what), "ProcessInfo3 malformed, or not for pid %d", (int)t->pid);
                return -1;
        }
        *ret_nsec = end - start;
        return 0;
}

/* ---- samples ---- */

SampleSet *sample_set_new(size_t capacity) {
        size_t size = sizeof(SampleSet) + capacity * sizeof(uint64_t);
        SampleSet *s = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

        if (s == MAP_FAILED)
                return NULL;
        s->capacity = capacity;
        return s;
}

void sample_set_free(SampleSet *s) {
        if (s)
                (void)munmap(s, sizeof(SampleSet) + s->capacity * sizeof(uint64_t));
}

void sample_set_reset(SampleSet *s) {
        s->n = s->busy = s->failed = s->frames = s->all = 0;
        s->have_error = 0;
        s->first_error[0] = '\0';
}

void sample_set_add(SampleSet *s, uint64_t nsec) {
        uint64_t i = __atomic_fetch_add(&s->n, 1, __ATOMIC_RELAXED);

        if (i < s->capacity)
                s->v[i] = nsec;
}

void sample_set_fail(SampleSet *s, const BenchFailure *f) {
        if (f->busy) {
                __atomic_fetch_add(&s->busy, 1, __ATOMIC_RELAXED);
                return;
        }
        __atomic_fetch_add(&s->failed, 1, __ATOMIC_RELAXED);
        if (__atomic_exchange_n(&s->have_error, 1, __ATOMIC_ACQ_REL) == 0)
                snprintf(s->first_error, sizeof(s->first_error), "%s", f->what);
}

size_t sample_set_kept(const SampleSet *s) {
        return s->n < s->capacity ? s->n : s->capacity;
}

static int cmp_u64(const void *x, const void *y) {
        uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
        return (a > b) - (a < b);
}

static double quantile_sorted(const uint64_t *v, size_t n, double q) {
        size_t rank = (size_t)((double)n * q + 0.999999999);

        if (rank < 1)
                rank = 1;
        if (rank > n)
                rank = n;
        return (double)v[rank - 1];
}

Stats bench_stats(uint64_t *v, size_t n) {
        Stats s = { .n = n };
        double sum = 0;

        if (n == 0)
                return s;
        qsort(v, n, sizeof(*v), cmp_u64);
        for (size_t i = 0; i < n; i++)
                sum += (double)v[i];
        s.min = (double)v[0] / 1000.0;
        s.max = (double)v[n - 1] / 1000.0;
        s.mean = sum / (double)n / 1000.0;
        s.median = (n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0) / 1000.0;
        s.p90 = quantile_sorted(v, n, 0.90) / 1000.0;
        s.p99 = quantile_sorted(v, n, 0.99) / 1000.0;
        return s;
}

/* ---- users ---- */

int bench_user_resolve(const char *name, BenchUser *ret) {
        struct passwd *pw = getpwnam(name);

        if (!pw)
                return -ENOENT;
        *ret = (BenchUser){ .name = name, .uid = pw->pw_uid, .gid = pw->pw_gid,
                            .n_groups = (int)ELEMENTSOF(ret->groups) };
        if (getgrouplist(name, pw->pw_gid, ret->groups, &ret->n_groups) < 0)
                return -E2BIG;
        return 0;
}

int bench_user_become(const BenchUser *u) {
        if (!u || u->uid == 0)
                return 0;
        if (setgroups((size_t)u->n_groups, u->groups) < 0 || setresgid(u->gid, u->gid, u->gid) < 0 ||
            setresuid(u->uid, u->uid, u->uid) < 0)
                return -errno;
        return 0;
}

/* ---- /proc ---- */

int bench_proc_read(pid_t pid, ProcReading *ret) {
        char path[64], buf[4096], line[256];
        unsigned long long utime = 0, stime = 0, start = 0;
        const char *p;
        FILE *f;
        ssize_t n;
        int fd;

        *ret = (ProcReading){};
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = '\0';
        p = strrchr(buf, ')');
        /* after ") ": state is field 3; utime 14, stime 15, starttime 22 */
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu",
                         &utime, &stime, &start) != 3)
                return -EBADMSG;
        ret->cpu_ticks = utime + stime;
        ret->start_time = start;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long long kb;

                if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
                        ret->rss_kb = kb;
                else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
                        ret->hwm_kb = kb;
        }
        fclose(f);
        return 0;
}

size_t bench_proc_children(pid_t pid, pid_t *out, size_t max) {
        char path[64], buf[4096];
        size_t n = 0;
        ssize_t k;
        char *save = NULL;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
                return 0;
        buf[k] = '\0';
        for (char *tok = strtok_r(buf, " \n", &save); tok && n < max; tok = strtok_r(NULL, " \n", &save)) {
                pid_t child;
                if (parse_pid(tok, &child) == 0)
                        out[n++] = child;
        }
        return n;
}

int bench_watch_init(AgentWatch *w, pid_t agent, pid_t target) {
        pid_t children[BENCH_WORKERS_MAX];
        size_t n = bench_proc_children(agent, children, ELEMENTSOF(children));
        ProcReading best = {}, r;

        *w = (AgentWatch){ .agent = agent, .target = target };
        if (bench_proc_read(agent, &r) < 0)
                return -ESRCH;
        /* the PAM helper is forked first, at start-up; the workers after the sandbox */
        for (size_t i = 0; i < n; i++) {
                if (bench_proc_read(children[i], &r) < 0)
                        continue;
                if (!w->pam_helper || r.start_time < best.start_time ||
                    (r.start_time == best.start_time && children[i] < w->pam_helper)) {
                        w->pam_helper = children[i];
                        best = r;
                }
        }
        return 0;
}

/* Pss from /proc/PID/smaps_rollup: the process's share of every page it maps. */
static uint64_t proc_pss_kb(pid_t pid) {
        unsigned long long kb = 0;
        char path[64], line[256];
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Pss: %llu kB", &kb) == 1)
                        break;
        fclose(f);
        return kb;
}

void bench_watch_memory(const AgentWatch *w, AgentMemory *ret) {
        pid_t children[BENCH_WORKERS_MAX];
        size_t n = bench_proc_children(w->agent, children, ELEMENTSOF(children));
        ProcReading r;

        *ret = (AgentMemory){};
        if (bench_proc_read(w->agent, &r) == 0) {
                ret->agent_rss_kb = r.rss_kb;
                ret->agent_hwm_kb = r.hwm_kb;
                ret->pss_kb += proc_pss_kb(w->agent);
        }
        for (size_t i = 0; i < n; i++) {
                if (bench_proc_read(children[i], &r) < 0)
                        continue;
                if (children[i] == w->pam_helper) {
                        ret->helper_rss_kb = r.rss_kb;
                        continue;
                }
                ret->pss_kb += proc_pss_kb(children[i]);
                ret->n_workers++;
                ret->workers_rss_sum_kb += r.rss_kb;
                if (r.rss_kb > ret->workers_rss_max_kb)
                        ret->workers_rss_max_kb = r.rss_kb;
                if (r.hwm_kb > ret->workers_hwm_max_kb)
                        ret->workers_hwm_max_kb = r.hwm_kb;
        }
}

#define MAX_INTO(a, b) ((a) = (a) > (b) ? (a) : (b))

void bench_memory_max(AgentMemory *acc, const AgentMemory *m) {
        MAX_INTO(acc->agent_rss_kb, m->agent_rss_kb);
        MAX_INTO(acc->agent_hwm_kb, m->agent_hwm_kb);
        MAX_INTO(acc->n_workers, m->n_workers);
        MAX_INTO(acc->workers_rss_sum_kb, m->workers_rss_sum_kb);
        MAX_INTO(acc->workers_rss_max_kb, m->workers_rss_max_kb);
        MAX_INTO(acc->workers_hwm_max_kb, m->workers_hwm_max_kb);
        MAX_INTO(acc->helper_rss_kb, m->helper_rss_kb);
        MAX_INTO(acc->pss_kb, m->pss_kb);
}

static double mib(uint64_t kb) {
        return (double)kb / 1024.0;
}

void bench_memory_print(const char *label, const AgentMemory *m) {
        printf("  %s\n      agent VmRSS %.2f MiB, VmHWM %.2f MiB | %u workers: VmRSS max %.2f MiB (sum %.2f), "
               "VmHWM max %.2f MiB | agent+workers Pss %.2f MiB | PAM helper VmRSS %.2f MiB\n",
               label, mib(m->agent_rss_kb), mib(m->agent_hwm_kb), m->n_workers, mib(m->workers_rss_max_kb),
               mib(m->workers_rss_sum_kb), mib(m->workers_hwm_max_kb), mib(m->pss_kb), mib(m->helper_rss_kb));
}

void bench_cpu_snapshot(const AgentWatch *w, CpuSnapshot *ret) {
        pid_t children[BENCH_WORKERS_MAX];
        size_t n = bench_proc_children(w->agent, children, ELEMENTSOF(children));
        ProcReading r;

        *ret = (CpuSnapshot){};
        if (bench_proc_read(w->agent, &r) == 0)
                ret->agent = r.cpu_ticks;
        if (w->target > 0 && bench_proc_read(w->target, &r) == 0)
                ret->target = r.cpu_ticks;
        for (size_t i = 0; i < n; i++)
                if (children[i] != w->pam_helper && bench_proc_read(children[i], &r) == 0) {
                        ret->pids[ret->n] = children[i];
                        ret->ticks[ret->n++] = r.cpu_ticks;
                }
}

void bench_cpu_delta(const CpuSnapshot *a, const CpuSnapshot *b, double *agent, double *workers, double *target) {
        double hz = (double)sysconf(_SC_CLK_TCK);
        uint64_t w = 0;

        for (size_t i = 0; i < b->n; i++) {
                uint64_t before = 0;
                for (size_t k = 0; k < a->n; k++)
                        if (a->pids[k] == b->pids[i])
                                before = a->ticks[k];
                w += b->ticks[i] >= before ? b->ticks[i] - before : 0;
        }
        *agent = (double)(b->agent - a->agent) / hz;
        *workers = (double)w / hz;
        *target = (double)(b->target - a->target) / hz;
}

/* ---- slices ---- */

static _Noreturn void client_main(const BenchTarget *t, const ClientGroup *g, const BenchUser *u, pid_t parent,
                                  uint64_t window_start, uint64_t window_end) {
        BenchFailure f;

        if (bench_user_become(u) < 0) {
                f = (BenchFailure){};
                snprintf(f.what, sizeof(f.what), "cannot become user %s: %m", u->name);
                sample_set_fail(g->set, &f);
                _exit(1);
        }
        /* after the change of uid, which clears it */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(1);
        for (;;) {
                uint64_t nsec = 0, end;
                unsigned frames = 0;
                int r;

                if (bench_now_nsec() >= window_end)
                        break;
                f = (BenchFailure){};
                switch (g->kind) {
                case CLIENT_AGENT_INFO:
                        r = bench_agent_info(t, &nsec, &f);
                        break;
                case CLIENT_DIRECT_INFO:
                        r = bench_direct_info(t, &nsec, &f);
                        break;
                case CLIENT_AGENT_PS:
                        r = bench_agent_ps(t, &frames, &nsec, &f);
                        break;
                case CLIENT_AGENT_PS_NOREAD:
                        r = bench_agent_ps_noread(t, window_end, &nsec, &f);
                        break;
                default:
                        _exit(2);
                }
                end = bench_now_nsec();
                if (r == 0)
                        __atomic_fetch_add(&g->set->all, 1, __ATOMIC_RELAXED);
                if (end < window_start || end > window_end)
                        continue;
                if (r < 0) {
                        sample_set_fail(g->set, &f);
                        if (!f.busy)
                                usleep(1000); /* a failing path must not spin */
                        continue;
                }
                if (g->kind == CLIENT_AGENT_PS_NOREAD && nsec == 0)
                        continue; /* still open at the end of the window */
                __atomic_fetch_add(&g->set->frames, frames, __ATOMIC_RELAXED);
                sample_set_add(g->set, nsec);
        }
        _exit(0);
}

int bench_run_slice(const BenchTarget *t, ClientGroup *groups, size_t n_groups, double warm_sec, double run_sec,
                    const AgentWatch *watch, SliceResult *ret) {
        uint64_t start = bench_now_nsec();
        uint64_t window_start = start + (uint64_t)(warm_sec * 1e9), window_end = window_start + (uint64_t)(run_sec * 1e9);
        CpuSnapshot before = {}, after = {};
        bool have_before = false, have_after = false;
        size_t n_clients = 0, n_running;
        _cleanup_free_ pid_t *clients = NULL;
        struct rusage ru_total = {};
        pid_t parent = getpid();
        unsigned total = 0;
        int failed = 0;

        *ret = (SliceResult){ .window_sec = run_sec };
        for (size_t k = 0; k < n_groups; k++) {
                sample_set_reset(groups[k].set);
                total += groups[k].n;
        }
        clients = calloc(total ? total : 1, sizeof(pid_t));
        if (!clients)
                return -1;

        fflush(stdout);
        fflush(stderr);
        for (size_t k = 0; k < n_groups && failed == 0; k++)
                for (unsigned i = 0; i < groups[k].n; i++) {
                        const BenchUser *u = groups[k].users ? &groups[k].users[i % groups[k].n_users] : NULL;
                        pid_t pid = fork();

                        if (pid < 0) {
                                fprintf(stderr, "bench: fork: %m\n");
                                failed = -1;
                                break;
                        }
                        if (pid == 0) {
                                signal(SIGINT, SIG_DFL);
                                signal(SIGTERM, SIG_DFL);
                                signal(SIGHUP, SIG_DFL);
                                client_main(t, &groups[k], u, parent, window_start, window_end);
                        }
                        clients[n_clients++] = pid;
                }
        if (failed < 0) /* those started stop at once */
                for (size_t i = 0; i < n_clients; i++)
                        (void)kill(clients[i], SIGKILL);

        /* read the agent while the clients run; reap them as they end */
        for (n_running = n_clients; n_running > 0;) {
                uint64_t now = bench_now_nsec(), next;

                if (watch && !have_before && now >= window_start) {
                        bench_cpu_snapshot(watch, &before);
                        have_before = true;
                }
                if (watch && !have_after && now >= window_end) {
                        bench_cpu_snapshot(watch, &after);
                        have_after = true;
                }
                if (watch && now >= window_start && now < window_end) {
                        AgentMemory m;
                        bench_watch_memory(watch, &m);
                        bench_memory_max(&ret->peak, &m);
                }
                for (size_t i = 0; i < n_clients; i++) {
                        struct rusage ru;
                        int status;

                        if (clients[i] <= 0 || wait4(clients[i], &status, WNOHANG, &ru) <= 0)
                                continue;
                        clients[i] = 0;
                        n_running--;
                        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                                failed = -1;
                        ru_total.ru_utime.tv_sec += ru.ru_utime.tv_sec;
                        ru_total.ru_utime.tv_usec += ru.ru_utime.tv_usec;
                        ru_total.ru_stime.tv_sec += ru.ru_stime.tv_sec;
                        ru_total.ru_stime.tv_usec += ru.ru_stime.tv_usec;
                }
                if (n_running == 0)
                        break;
                now = bench_now_nsec();
                next = now + WATCH_INTERVAL_NSEC;
                if (window_start > now && window_start < next)
                        next = window_start;
                else if (window_start <= now && window_end > now && window_end < next)
                        next = window_end;
                else if (window_end <= now)
                        next = now + 5000000; /* the last exchanges finishing */
                sleep_until(next);
        }
        if (watch && have_before && have_after)
                bench_cpu_delta(&before, &after, &ret->agent_cpu_sec, &ret->workers_cpu_sec, &ret->target_cpu_sec);
        ret->clients_cpu_sec = (double)ru_total.ru_utime.tv_sec + (double)ru_total.ru_utime.tv_usec / 1e6 +
                               (double)ru_total.ru_stime.tv_sec + (double)ru_total.ru_stime.tv_usec / 1e6;
        return failed;
}
