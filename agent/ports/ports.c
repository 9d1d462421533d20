/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Runtimes that connect in (ports.h): owns the [[port]] listeners and the runtimes registered
 * through them; the broker applies the policy's ports, commands reach a registered runtime.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "acl.h"
#include "audit.h"
#include "broker-state.h"
#include "array.h"
#include "cleanup.h"
#include "dotnet-ipc.h"
#include "fileio.h"
#include "on-start.h"
#include "ports.h"
#include "procfs.h"
#include "runtime-call.h"
#include "sockopt.h"
#include "test-hooks.h"
#include "text.h"


/* The reference tool gives the advertise 250 ms; a loaded host gets more, a silent peer no more than this. */
#define ADVERTISE_TIMEOUT_USEC (2 * 1000000ULL)
#define PORT_LISTEN_BACKLOG 255

typedef struct PortListener PortListener;
typedef struct Pending Pending;

struct PortListener {
        Ports *ports;
        PortListener *next;
        char *path;
        int fd;
        sd_event_source *source;
        sd_event_source *watch;   /* the directory: a removed or replaced file is bound again */
        sd_event_source *rest_timer; /* the agent ran out of fds: accepting again a second later */
        bool from_systemd;        /* the socket unit's: never unlinked, never bound again here */
        dev_t dev;                /* the socket file as bound here */
        ino_t ino;
        const PolicyPort *config; /* in ports->policy; NULL: no [[port]] names it, every runtime is refused */
};

/* A connection that has not sent its advertise yet. */
struct Pending {
        Ports *ports;
        Pending *next;
        PortListener *listener;
        int fd;
        int pidfd;
        PeerCreds peer;
        sd_event_source *io;
        sd_event_source *timer;
        uint8_t buf[DOTNET_IPC_ADVERTISE_SIZE];
        size_t got;
        uint64_t accepted_usec;   /* CLOCK_MONOTONIC: a runtime's suspend_timeout counts from here */
};

struct PortWaiter {
        PortRuntime *runtime;
        PortWaiter *next;
        PortConnected connected;
        void *userdata;
        sd_event_source *timer;
};

struct PortRuntime {
        Ports *ports;
        PortRuntime *next;
        uint64_t id;              /* port_runtime_id() */
        PortListener *listener;
        pid_t pid;                /* in the agent's pid namespace */
        int pidfd;
        uint64_t pidfd_ino;       /* pidfs inode: the process, never reused */
        sd_event_source *exit_source;
        uid_t uid;
        uid_t charged_uid; /* whom it counts against (userns.h) */
        gid_t gid;
        gid_t *groups;            /* primary first, as the kernel gave them for its first connection */
        size_t n_groups;
        uint64_t ns_pid;          /* as advertised, and checked */
        uint8_t cookie[16];
        char *exe;
        bool verified;            /* ProcessInfo on its first connection matched the advertise */
        bool suspended;           /* it said so then: its command line was its executable alone */
        bool resumed;             /* ResumeRuntime went through this port since */
        int idle_fd;
        sd_event_source *idle_source;
        RuntimeCall *call;        /* the first ProcessInfo, then the agent's own resume */
        sd_event_source *suspend_timer;
        sd_event_source *settle_timer;  /* asks again until it is clear whether it waits */
        unsigned settle_probes;
        bool settled;
        bool starting;            /* an [[on_start]] trace is being started (on-start.h) */
        bool resume_due;          /* suspend_timeout passed before it was told: resumed once it is */
        uint64_t registered_usec; /* when its first connection was accepted */
        PortWaiter *waiters;      /* in arrival order */
};

struct Ports {
        Broker *broker;
        Policy *policy;           /* whose [[port]]s are in force */
        PortListener *listeners;
        PortRuntime *runtimes;
        unsigned n_runtimes;
        Pending *pending;
        unsigned n_pending;
        uint64_t last_runtime_id;
        unsigned max_runtimes;    /* PORTS_RUNTIMES_MAX, or fewer when the open files limit is short */
};

/* ---- records ---- */

static void record(Ports *p, const char *event, const PortListener *l, const PeerCreds *peer, uint64_t advertised_pid,
                   const uint8_t *cookie, bool suspended, const char *reason) {
        char hex[TEXT_HEX_ID_SIZE] = "";
        AuditPortEvent e = {
                .event = event,
                .path = l->path,
                .pid = peer->pid,
                .uid = peer->uid,
                .gid = peer->gid,
                .pidfd_id = peer->pidfd_id,
                .charged_uid = peer->charged_uid,
                .advertised_pid = advertised_pid,
                .suspended = suspended,
                .suspend_timeout_usec = l->config ? l->config->suspend_timeout_usec : 0,
                .reason = reason,
        };

        if (cookie) {
                text_hex_id(cookie, hex);
                e.cookie = hex;
        }
        /* a flood of refused connections from one user takes from its budget of records, like its
         * requests; what happened to a registered runtime is always recorded (at most a few per runtime) */
        if (strcmp(event, "refused") != 0 || broker_admit_request(p->broker, peer->charged_uid))
                (void)audit_log_port(p->broker->config.audit_sink, &e);
}

void port_runtime_record(PortRuntime *rt, const char *event, const char *reason) {
        PeerCreds peer = { .pid = rt->pid, .uid = rt->uid, .gid = rt->gid, .pidfd_id = rt->pidfd_ino,
                           .charged_uid = rt->charged_uid };

        record(rt->ports, event, rt->listener, &peer, rt->ns_pid, rt->cookie, rt->suspended, reason);
}

/* ---- waiting for a runtime's next connection ---- */

static PortWaiter *waiter_free(PortWaiter *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->timer);
        free(w);
        return NULL;
}

static void waiter_unlink(PortWaiter *w) {
        for (PortWaiter **i = &w->runtime->waiters; *i; i = &(*i)->next)
                if (*i == w) {
                        *i = w->next;
                        return;
                }
}

PortWaiter *ports_waiter_cancel(PortWaiter *w) {
        if (!w)
                return NULL;
        waiter_unlink(w);
        return waiter_free(w);
}

/* Frees @w, then tells its owner: the callback may start anything, even a new wait. */
static void waiter_finish(PortWaiter *w, int fd, int error) {
        PortConnected connected = w->connected;
        void *userdata = w->userdata;

        waiter_unlink(w);
        waiter_free(w);
        connected(fd, error, userdata);
}

static int waiter_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        waiter_finish(userdata, -EBADF, -ETIMEDOUT);
        return 0;
}

/* ---- registered runtimes ---- */

static void runtime_drop_idle(PortRuntime *rt) {
        rt->idle_source = sd_event_source_disable_unref(rt->idle_source);
        rt->idle_fd = safe_close(rt->idle_fd);
}

static PortRuntime *runtime_free(PortRuntime *rt) {
        if (!rt)
                return NULL;
        for (PortRuntime **i = &rt->ports->runtimes; *i; i = &(*i)->next)
                if (*i == rt) {
                        *i = rt->next;
                        rt->ports->n_runtimes--;
                        break;
                }
        /* whoever waits hears that the runtime is gone; none may touch @rt any more */
        while (rt->waiters)
                waiter_finish(rt->waiters, -EBADF, -ESRCH);
        runtime_drop_idle(rt);
        runtime_call_free(rt->call);
        sd_event_source_disable_unref(rt->suspend_timer);
        sd_event_source_disable_unref(rt->settle_timer);
        sd_event_source_disable_unref(rt->exit_source);
        safe_close(rt->pidfd);
        free(rt->exe);
        free(rt->groups);
        free(rt);
        return NULL;
}

static int runtime_on_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        runtime_free(userdata);
        return 0;
}

/* The runtime hung up its idle connection, or wrote on it unasked: it is of no use; the runtime makes another. */
static int runtime_on_idle_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        runtime_drop_idle(userdata);
        return 0;
}

/* A new connection of @rt's runtime, already advertised: to the first waiter, else kept idle. */
static void runtime_offer(PortRuntime *rt, int fd) {
        int r;

        if (rt->waiters) {
                waiter_finish(rt->waiters, fd, 0);
                return;
        }
        runtime_drop_idle(rt);
        r = sd_event_add_io(rt->ports->broker->event, &rt->idle_source, fd, EPOLLIN | EPOLLRDHUP,
                            runtime_on_idle_event, rt);
        if (r < 0) {
                safe_close(fd);
                return;
        }
        rt->idle_fd = fd;
}

/* Is the connection kept idle still open? The runtime may have dropped it just before making another. */
static bool runtime_idle_is_open(PortRuntime *rt) {
        char c;

        if (rt->idle_fd < 0)
                return false;
        if (recv(rt->idle_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return true;
        runtime_drop_idle(rt);
        return false;
}

int ports_connect(PortRuntime *rt, PortConnected connected, void *userdata, int *ret_fd, PortWaiter **ret_waiter) {
        PortWaiter *w, **tail;
        int r;

        if (runtime_idle_is_open(rt)) {
                rt->idle_source = sd_event_source_disable_unref(rt->idle_source);
                *ret_fd = TAKE_FD(rt->idle_fd);
                return 0;
        }
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (PortWaiter){ .runtime = rt, .connected = connected, .userdata = userdata };
        r = sd_event_add_time_relative(rt->ports->broker->event, &w->timer, CLOCK_MONOTONIC,
                                       rt->ports->broker->config.runtime_timeout_usec, 0, waiter_on_timeout, w);
        if (r < 0) {
                waiter_free(w);
                return r;
        }
        for (tail = &rt->waiters; *tail; tail = &(*tail)->next)
                ;
        *tail = w;
        *ret_waiter = w;
        return PORTS_WAITING;
}

bool port_runtime_waits(const PortRuntime *rt) {
        return rt->settled && rt->suspended && !rt->resumed;
}

bool port_runtime_settled(const PortRuntime *rt) {
        return rt->settled;
}

const char *port_runtime_path(const PortRuntime *rt) {
        return rt->listener->path;
}

void port_runtime_resumed(PortRuntime *rt) {
        rt->resumed = true;
        rt->resume_due = false;
        rt->suspend_timer = sd_event_source_disable_unref(rt->suspend_timer);
}

uint64_t port_runtime_id(const PortRuntime *rt) {
        return rt->id;
}

PortRuntime *ports_runtime_by_id(Ports *p, uint64_t id) {
        for (PortRuntime *rt = p->runtimes; rt; rt = rt->next)
                if (rt->id == id)
                        return rt;
        return NULL;
}

pid_t port_runtime_pid(const PortRuntime *rt) {
        return rt->pid;
}

uid_t port_runtime_charged_uid(const PortRuntime *rt) {
        return rt->charged_uid;
}

/* Is this registration the process @t pins? Both pidfds name it; the pidfs inode is never reused. */
/*
 * The process may have run exec since it registered (a setuid program, say)
 * while another process it forked keeps answering on the connections it
 * made: the registration serves it only while it still runs the executable
 * it registered with, under the uid the kernel gave for its connection.
 */
static bool runtime_unchanged(const PortRuntime *rt, const Target *t) {
        for (size_t i = 0; i < 3; i++)
                if (t->status.uid[i] != rt->uid || t->status.gid[i] != rt->gid)
                        return false;
        return rt->exe && t->exe && strcmp(rt->exe, t->exe) == 0;
}

bool port_runtime_is_target(const PortRuntime *rt, const Target *t) {
        if (!rt->verified || rt->pid != t->pid || !runtime_unchanged(rt, t))
                return false;
        if (t->pidfd_on_pidfs && rt->pidfd_ino != 0)
                return (uint64_t)t->pidfd_ino == rt->pidfd_ino;
        /* without pidfs: both pidfds pin a live process with this pid, which is then the same one (a
         * registration is dropped as soon as its pidfd says the process exited) */
        return target_is_alive(t);
}

bool ports_have_pid(const Ports *p, pid_t pid) {
        for (const PortRuntime *rt = p ? p->runtimes : NULL; rt; rt = rt->next)
                if (rt->pid == pid)
                        return true;
        return false;
}

PortRuntime *ports_find(Ports *p, const Target *t) {
        PortRuntime *first = NULL;

        for (PortRuntime *rt = p->runtimes; rt; rt = rt->next) {
                if (!port_runtime_is_target(rt, t))
                        continue;
                if (port_runtime_waits(rt))
                        return rt;
                if (!first)
                        first = rt;
        }
        return first;
}

size_t ports_list_pids(const Ports *p, const uid_t *uids, size_t n_uids, pid_t *pids, size_t max) {
        size_t n = 0;

        for (const PortRuntime *rt = p->runtimes; rt && n < max; rt = rt->next) {
                bool seen = false, wanted = !uids;

                if (!rt->verified)
                        continue;
                for (size_t i = 0; i < n_uids && !wanted; i++)
                        wanted = uids[i] == rt->uid;
                for (size_t i = 0; i < n && !seen; i++)
                        seen = pids[i] == rt->pid;
                if (wanted && !seen)
                        pids[n++] = rt->pid;
        }
        return n;
}

/* ---- asking the runtime something on the agent's own behalf ---- */

/* Sends @command, without payload, on @fd (taken); @done gets the reply. Return: 0 or a negative errno. */
static int runtime_send(PortRuntime *rt, int fd, DotnetIpcCommand command, RuntimeCallDone done) {
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        size_t size;
        int r;

        r = dotnet_ipc_request_encode(command, NULL, 0, request, sizeof(request), &size);
        if (r != 0) {
                safe_close(fd);
                return -EINVAL;
        }
        r = runtime_call_start(rt->ports->broker->event, fd, request, size,
                               rt->ports->broker->config.runtime_timeout_usec, done, rt, &rt->call);
        return r == 0 ? 0 : r < 0 ? r : -EIO;
}

/* @command on the runtime's next connection (now, or when it comes). Return: 0 or a negative errno. */
static int runtime_ask(PortRuntime *rt, DotnetIpcCommand command, PortConnected connected, RuntimeCallDone done) {
        PortWaiter *w = NULL;
        int fd = -EBADF, r;

        r = ports_connect(rt, connected, rt, &fd, &w);
        if (r == 0)
                return runtime_send(rt, fd, command, done);
        return r < 0 ? r : 0;
}

/* Decodes a ProcessInfo reply. Return: whether the runtime still runs no entry assembly, or -EBADMSG. */
static int reply_not_started(PortRuntime *rt, int error, const DotnetIpcResponse *reply) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;

        if (error != 0 || !reply->ok ||
            dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO, reply->payload, reply->payload_size, &info) != 0)
                return -EBADMSG;
        return procfs_command_line_is_exe(info.command_line, rt->exe);
}

/* ---- the agent's own resume, once suspend_timeout has passed ---- */

static void auto_resume_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        PortRuntime *rt = userdata;
        char why[160];

        rt->call = runtime_call_free(rt->call);
        if (error != 0 || !reply->ok) {
                snprintf(why, sizeof(why), "the runtime did not take the agent's ResumeRuntime: %s",
                         error != 0 ? runtime_call_error_text(error) : "it refused the command");
                port_runtime_record(rt, "resume-failed", why);
                return;
        }
        port_runtime_resumed(rt);
        snprintf(why, sizeof(why), "no one resumed it within suspend_timeout (%" PRIu64 " s): the agent did",
                 rt->listener->config ? rt->listener->config->suspend_timeout_usec / 1000000 : 0);
        port_runtime_record(rt, "auto-resumed", why);
}

static void auto_resume_connected(int fd, int error, void *userdata) {
        PortRuntime *rt = userdata;

        if (fd < 0) {
                if (error != -ESRCH) /* -ESRCH: @rt is being freed; the process or its port went away */
                        port_runtime_record(rt, "resume-failed", "the runtime did not connect again to be resumed");
                return;
        }
        if (!port_runtime_waits(rt)) {
                safe_close(fd); /* someone resumed it while the agent waited */
                return;
        }
        if (runtime_send(rt, fd, DOTNET_IPC_RESUME_RUNTIME, auto_resume_done) < 0)
                port_runtime_record(rt, "resume-failed", "the agent could not send ResumeRuntime");
}

/* The answer just given says it waits: ResumeRuntime on its next connection, no question before. */
static void runtime_auto_resume(PortRuntime *rt) {
        if (runtime_ask(rt, DOTNET_IPC_RESUME_RUNTIME, auto_resume_connected, auto_resume_done) < 0)
                port_runtime_record(rt, "resume-failed", "the agent could not send ResumeRuntime");
}

/* Asked once more before the resume: an app that started meanwhile (another tool resumed it) is left alone. */
static void resume_probe_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        PortRuntime *rt = userdata;
        int waits = reply_not_started(rt, error, reply);

        rt->call = runtime_call_free(rt->call);
        if (waits == 0 || !port_runtime_waits(rt)) {
                rt->suspended = rt->suspended && waits != 0;
                return; /* started meanwhile, or resumed by someone: nothing for the agent to do */
        }
        runtime_auto_resume(rt);
}

static void resume_probe_connected(int fd, int error, void *userdata) {
        PortRuntime *rt = userdata;

        if (fd < 0) {
                if (error != -ESRCH)
                        port_runtime_record(rt, "resume-failed", "the runtime did not connect again to be resumed");
                return;
        }
        if (runtime_send(rt, fd, DOTNET_IPC_PROCESS_INFO, resume_probe_done) < 0)
                port_runtime_record(rt, "resume-failed", "the agent could not ask the runtime");
}

static void runtime_settle_now(PortRuntime *rt);

static int runtime_on_suspend_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        PortRuntime *rt = userdata;

        rt->suspend_timer = sd_event_source_disable_unref(rt->suspend_timer);
        if (!rt->settled && !rt->resumed) {
                /* the deadline is the runtime's, not the end of the agent's pauses in telling it: the
                 * next answer decides, asked now (settle_done(), port_runtime_startup_done()) */
                rt->resume_due = true;
                runtime_settle_now(rt);
                return 0;
        }
        if (!port_runtime_waits(rt) || rt->call)
                return 0;
        if (runtime_ask(rt, DOTNET_IPC_PROCESS_INFO, resume_probe_connected, resume_probe_done) < 0)
                port_runtime_record(rt, "resume-failed", "the agent could not wait for the runtime's connection");
        return 0;
}

/* ---- telling a suspended runtime from one still starting ---- */

/*
 * A runtime connects in early in its startup, suspended or not, and until
 * the host runs its entry assembly ProcessInfo's command line is its
 * executable alone (startup.h). One that still says so after these pauses
 * has stopped there: it waits for ResumeRuntime on this port.
 */
static const uint64_t settle_delays_usec[] = { 250000, 500000, 1000000, 2000000 };

/* suspend_timeout from the runtime's first connection, armed as soon as it is known not started. */
static void runtime_arm_suspend_timeout(PortRuntime *rt) {
        uint64_t timeout = rt->listener->config ? rt->listener->config->suspend_timeout_usec : 0;

        if (timeout == 0 || rt->suspend_timer)
                return;
        if (sd_event_add_time(rt->ports->broker->event, &rt->suspend_timer, CLOCK_MONOTONIC,
                              rt->registered_usec + timeout, 0, runtime_on_suspend_timeout, rt) < 0)
                /* never hang an app because of the agent: resume it once told rather than maybe never */
                rt->resume_due = true;
}

static void runtime_settle_because(PortRuntime *rt, bool suspended, const char *reason) {
        rt->settled = true;
        rt->suspended = suspended;
        rt->settle_timer = sd_event_source_disable_unref(rt->settle_timer);
        port_runtime_record(rt, "registered", reason);
        if (!suspended) {
                rt->suspend_timer = sd_event_source_disable_unref(rt->suspend_timer);
                rt->resume_due = false;
                return;
        }
        if (rt->resume_due && !rt->resumed && !rt->call) {
                rt->resume_due = false;
                runtime_auto_resume(rt);
        }
}

static void runtime_settle(PortRuntime *rt, bool suspended) {
        runtime_settle_because(rt, suspended, suspended ? "suspended at startup, waiting for ResumeRuntime" : "running");
}

static int runtime_on_settle_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void settle_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        PortRuntime *rt = userdata;
        int waits = reply_not_started(rt, error, reply);
        int r;

        rt->call = runtime_call_free(rt->call);
        if (waits <= 0 || rt->settle_probes >= ELEMENTSOF(settle_delays_usec) || rt->resume_due) {
                /* a runtime that stops answering is taken as suspended: the agent's resume then says so */
                runtime_settle(rt, waits != 0);
                return;
        }
        r = sd_event_source_set_time_relative(rt->settle_timer, settle_delays_usec[rt->settle_probes]);
        if (r >= 0)
                r = sd_event_source_set_enabled(rt->settle_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                runtime_settle(rt, true);
}

static void settle_connected(int fd, int error, void *userdata) {
        PortRuntime *rt = userdata;

        if (fd < 0) {
                if (error != -ESRCH)
                        runtime_settle(rt, true);
                return;
        }
        if (runtime_send(rt, fd, DOTNET_IPC_PROCESS_INFO, settle_done) < 0)
                runtime_settle(rt, true);
}

static int runtime_on_settle_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        PortRuntime *rt = userdata;

        rt->settle_probes++;
        if (runtime_ask(rt, DOTNET_IPC_PROCESS_INFO, settle_connected, settle_done) < 0)
                runtime_settle(rt, true);
        return 0;
}

static void runtime_refuse(PortRuntime *rt, const char *reason) {
        port_runtime_record(rt, "refused", reason);
        runtime_free(rt);
}

/* Asks again, for a while, whether the runtime waits (settle_delays_usec); at once when its suspend_timeout
 * is over. */
static void runtime_begin_settle(PortRuntime *rt) {
        int r;

        r = sd_event_add_time_relative(rt->ports->broker->event, &rt->settle_timer, CLOCK_MONOTONIC,
                                       rt->resume_due ? 0 : settle_delays_usec[0], 0, runtime_on_settle_timer, rt);
        if (r < 0)
                runtime_settle(rt, true);
}

/* The pause before the next question ends now; a question already out (or an [[on_start]] trace being
 * started) finishes first, and its end looks at resume_due. */
static void runtime_settle_now(PortRuntime *rt) {
        int enabled = SD_EVENT_OFF;

        if (!rt->settle_timer || sd_event_source_get_enabled(rt->settle_timer, &enabled) < 0 ||
            enabled == SD_EVENT_OFF)
                return;
        if (sd_event_source_set_time_relative(rt->settle_timer, 0) < 0)
                runtime_settle(rt, true);
}

void port_runtime_startup_done(PortRuntime *rt, bool resumed, const char *reason) {
        if (!rt->starting)
                return;
        rt->starting = false;
        if (resumed)
                runtime_settle_because(rt, false, reason);
        else
                runtime_begin_settle(rt);
}

static void runtime_verified(PortRuntime *rt, const DotnetProcessInfo *info) {
        int r;

        rt->verified = true;
        if (!procfs_command_line_is_exe(info->command_line, rt->exe)) {
                runtime_settle(rt, false);
                return;
        }
        /* from its first connection: the time spent verifying and telling it counts */
        runtime_arm_suspend_timeout(rt);
        /* not in its entry assembly yet: an [[on_start]] trace can begin before it runs */
        rt->starting = true;
        r = startup_trace_begin(rt->ports->broker->startup_traces, rt);
        if (r == 0)
                return;
        rt->starting = false;
        if (r < 0)
                port_runtime_record(rt, "on-start-failed", "the agent could not look at the process for [[on_start]]");
        runtime_begin_settle(rt);
}

static void verify_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        PortRuntime *rt = userdata;

        if (error != 0) {
                runtime_refuse(rt, runtime_call_error_text(error));
                return;
        }
        if (!reply->ok ||
            dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO, reply->payload, reply->payload_size, &info) != 0) {
                runtime_refuse(rt, "no valid ProcessInfo reply on its first connection");
                return;
        }
        if (info.pid != rt->ns_pid) {
                runtime_refuse(rt, "ProcessInfo reports another process id than the advertise");
                return;
        }
        if (memcmp(info.cookie, rt->cookie, sizeof(rt->cookie)) != 0) {
                runtime_refuse(rt, "ProcessInfo reports another runtime instance cookie than the advertise");
                return;
        }
        rt->call = runtime_call_free(rt->call);
        runtime_verified(rt, &info);
}

/* ---- reading the advertise ---- */

static Pending *pending_free(Pending *pe) {
        if (!pe)
                return NULL;
        for (Pending **i = &pe->ports->pending; *i; i = &(*i)->next)
                if (*i == pe) {
                        *i = pe->next;
                        pe->ports->n_pending--;
                        break;
                }
        sd_event_source_disable_unref(pe->io);
        sd_event_source_disable_unref(pe->timer);
        safe_close(pe->fd);
        safe_close(pe->pidfd);
        peer_creds_done(&pe->peer);
        free(pe);
        return NULL;
}

static void pending_refuse(Pending *pe, uint64_t advertised_pid, const uint8_t *cookie, const char *reason) {
        record(pe->ports, "refused", pe->listener, &pe->peer, advertised_pid, cookie, false, reason);
        pending_free(pe);
}

/* The innermost pid of the process @pidfd pins, from the agent's own fdinfo of it: nothing of the peer is read. */
static int pidfd_ns_pid(int pidfd, pid_t *ret) {
        _cleanup_free_ char *buf = NULL;
        char path[64];
        ProcStatus st;
        size_t n;
        int r;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        r = read_file_at(AT_FDCWD, path, 4096, &buf, &n);
        if (r < 0)
                return r;
        r = procfs_parse_pidfd_fdinfo(buf, n, &st);
        if (r != 0)
                return -EBADMSG;
        *ret = st.nspid[st.n_nspid - 1];
        return 0;
}

/* The executable, to tell a runtime suspended at startup (see procfs_command_line_is_exe()). readlink() of the
 * exe link only formats the path the kernel holds: no lookup, nothing the peer can make wait. */
static char *exe_of(pid_t pid) {
        char path[64], buf[PATH_MAX];
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
        n = readlink(path, buf, sizeof(buf) - 1);
        if (n <= 0)
                return NULL;
        buf[n] = '\0';
        return strdup(buf);
}

static unsigned runtimes_of_uid(const Ports *p, uid_t uid) {
        unsigned n = 0;

        for (const PortRuntime *rt = p->runtimes; rt; rt = rt->next)
                n += rt->charged_uid == uid;
        return n;
}

static PortRuntime *runtime_of_peer(Ports *p, const PortListener *l, const PeerCreds *peer) {
        for (PortRuntime *rt = p->runtimes; rt; rt = rt->next)
                if (rt->listener == l && rt->pid == peer->pid && rt->pidfd_ino == peer->pidfd_id)
                        return rt;
        return NULL;
}

/* The registrations of the process @peer pins whose runtime instance is not @cookie's: each is recorded and dropped. */
static void runtimes_drop_other_instance(Ports *p, const PeerCreds *peer, const uint8_t *cookie) {
        PortRuntime *next;

        for (PortRuntime *rt = p->runtimes; rt; rt = next) {
                next = rt->next;
                if (rt->pid != peer->pid || rt->pidfd_ino != peer->pidfd_id ||
                    memcmp(rt->cookie, cookie, sizeof(rt->cookie)) == 0)
                        continue;
                port_runtime_record(rt, "gone", "the process advertised another runtime instance");
                runtime_free(rt);
        }
}

/* A new runtime: registered unverified, and its first connection spent on ProcessInfo. */
static void pending_register(Pending *pe, const DotnetIpcAdvertise *adv) {
        Ports *p = pe->ports;
        uint8_t request[DOTNET_IPC_HEADER_SIZE];
        PortRuntime *rt;
        size_t size;
        int r;

        char why[160];

        if (runtimes_of_uid(p, pe->peer.charged_uid) >= p->policy->agent.max_runtimes_per_user) {
                pending_refuse(pe, adv->pid, adv->cookie, "too many runtimes of this user are registered "
                                                          "(max_runtimes_per_user)");
                return;
        }
        if (p->n_runtimes >= p->max_runtimes) {
                snprintf(why, sizeof(why), "the agent holds as many runtimes as it may (%u: %s)", p->max_runtimes,
                         p->max_runtimes < PORTS_RUNTIMES_MAX ? "its open files limit" : "PORTS_RUNTIMES_MAX");
                pending_refuse(pe, adv->pid, adv->cookie, why);
                return;
        }
        rt = calloc(1, sizeof(*rt));
        if (!rt) {
                pending_refuse(pe, adv->pid, adv->cookie, "out of memory");
                return;
        }
        *rt = (PortRuntime){ .ports = p, .id = ++p->last_runtime_id, .listener = pe->listener, .pid = pe->peer.pid, .pidfd = TAKE_FD(pe->pidfd),
                             .pidfd_ino = pe->peer.pidfd_id, .uid = pe->peer.uid, .gid = pe->peer.gid,
                             .charged_uid = pe->peer.charged_uid,
                             .ns_pid = adv->pid, .idle_fd = -EBADF };
        memcpy(rt->cookie, adv->cookie, sizeof(rt->cookie));
        rt->registered_usec = pe->accepted_usec;
        rt->groups = TAKE_PTR(pe->peer.groups);
        rt->n_groups = pe->peer.n_groups;
        pe->peer.n_groups = 0;
        rt->next = p->runtimes;
        p->runtimes = rt;
        p->n_runtimes++;
        rt->exe = exe_of(rt->pid);
        r = sd_event_add_io(p->broker->event, &rt->exit_source, rt->pidfd, EPOLLIN, runtime_on_exit, rt);
        if (r >= 0)
                r = dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO, NULL, 0, request, sizeof(request), &size);
        if (r >= 0) {
                r = runtime_call_start(p->broker->event, TAKE_FD(pe->fd), request, size,
                                       p->broker->config.runtime_timeout_usec, verify_done, rt, &rt->call);
                r = r == 0 ? 0 : -EIO;
        }
        pending_free(pe);
        if (r < 0)
                runtime_refuse(rt, "the agent could not ask the runtime for ProcessInfo");
}

static void pending_advertised(Pending *pe) {
        DotnetIpcAdvertise adv;
        PortRuntime *rt;
        pid_t ns_pid;
        char why[128];

        if (dotnet_ipc_advertise_decode(pe->buf, sizeof(pe->buf), &adv) != 0) {
                pending_refuse(pe, 0, NULL, "not an advertise (ADVR_V1)");
                return;
        }
        if (pidfd_ns_pid(pe->pidfd, &ns_pid) < 0) {
                pending_refuse(pe, adv.pid, adv.cookie, "the process exited before it could be checked");
                return;
        }
        if ((uint64_t)ns_pid != adv.pid) {
                snprintf(why, sizeof(why), "it advertised pid %" PRIu64 ", but the kernel says the process is pid %d "
                         "in its own namespace", adv.pid, (int)ns_pid);
                pending_refuse(pe, adv.pid, adv.cookie, why);
                return;
        }
        rt = runtime_of_peer(pe->ports, pe->listener, &pe->peer);
        if (rt && memcmp(rt->cookie, adv.cookie, sizeof(adv.cookie)) == 0) {
                /* the runtime connects again after each command: one connection at a time, never two */
                if (runtime_idle_is_open(rt)) {
                        pending_refuse(pe, adv.pid, adv.cookie, "a second advertise from a process whose "
                                                                "connection is already held");
                        return;
                }
                runtime_offer(rt, TAKE_FD(pe->fd));
                pending_free(pe);
                return;
        }
        /* the same process, another runtime instance (it ran exec): its registrations on every port are
         * over, whichever port the new runtime connects to */
        runtimes_drop_other_instance(pe->ports, &pe->peer, adv.cookie);
        pending_register(pe, &adv);
}

static int pending_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Pending *pe = userdata;
        ssize_t n;

        n = recv(pe->fd, pe->buf + pe->got, sizeof(pe->buf) - pe->got, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                pending_refuse(pe, 0, NULL, n == 0 ? "it hung up before a whole advertise" : "cannot read its advertise");
                return 0;
        }
        pe->got += (size_t)n;
        if (pe->got == sizeof(pe->buf)) {
                pe->io = sd_event_source_disable_unref(pe->io);
                pending_advertised(pe);
        }
        return 0;
}

static int pending_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        pending_refuse(userdata, 0, NULL, "no advertise in time");
        return 0;
}

static unsigned pending_of_uid(const Ports *p, uid_t uid) {
        unsigned n = 0;

        for (const Pending *pe = p->pending; pe; pe = pe->next)
                n += pe->peer.charged_uid == uid;
        return n;
}

/* Who connected, from the kernel; refused at once when the port does not admit its user. */
static void listener_accept_one(PortListener *l, int fd) {
        Ports *p = l->ports;
        _cleanup_free_ Pending *pe = calloc(1, sizeof(*pe));
        struct stat st;
        int r;

        if (!pe) {
                safe_close(fd);
                return;
        }
        *pe = (Pending){ .ports = p, .listener = l, .fd = fd, .pidfd = -EBADF, .peer = PEER_CREDS_NULL };
        (void)sd_event_now(p->broker->event, CLOCK_MONOTONIC, &pe->accepted_usec);
        test_hook_pause("port-accept");
        r = sockopt_get_peer_creds(fd, &pe->peer);
        if (r < 0 || pe->peer.pid <= 0) {
                safe_close(fd); /* a peer in a pid namespace the agent cannot see has no pid to check */
                peer_creds_done(&pe->peer);
                return;
        }
        p->n_pending++;
        pe->next = p->pending;
        p->pending = pe;
        if (!l->config) {
                pending_refuse(TAKE_PTR(pe), 0, NULL, "no [[port]] of the policy names this socket");
                return;
        }
        if (!policy_port_admits(l->config, pe->peer.uid, pe->peer.groups, pe->peer.n_groups)) {
                pending_refuse(TAKE_PTR(pe), 0, NULL, "the port does not admit runtimes of this user");
                return;
        }
        if (p->n_pending > PORTS_PENDING_MAX || pending_of_uid(p, pe->peer.charged_uid) > PORTS_PENDING_PER_UID_MAX) {
                pending_refuse(TAKE_PTR(pe), 0, NULL, "too many connections wait to advertise");
                return;
        }
        r = sockopt_get_peer_pidfd(fd, pe->peer.pid, pe->peer.uid, &pe->pidfd);
        if (r < 0) {
                pending_refuse(TAKE_PTR(pe), 0, NULL, r == -EMFILE || r == -ENFILE ?
                               "the agent is out of file descriptors" : "the process exited before it could be checked");
                return;
        }
        /* the identity that outlives pid reuse: from this pidfd, whatever SO_PEERPIDFD gave before */
        if (pidfd_identity(pe->pidfd, &st) == 0)
                pe->peer.pidfd_id = (uint64_t)st.st_ino;
        r = sd_event_add_io(p->broker->event, &pe->io, fd, EPOLLIN, pending_on_io, pe);
        if (r >= 0)
                r = sd_event_add_time_relative(p->broker->event, &pe->timer, CLOCK_MONOTONIC, ADVERTISE_TIMEOUT_USEC,
                                               0, pending_on_timeout, pe);
        if (r < 0) {
                pending_refuse(TAKE_PTR(pe), 0, NULL, "the agent could not wait for its advertise");
                return;
        }
        /* a runtime writes its advertise right after connect(): it is usually there already */
        (void)pending_on_io(NULL, fd, EPOLLIN, TAKE_PTR(pe));
}

static int listener_on_rested(sd_event_source *s, uint64_t usec, void *userdata) {
        PortListener *l = userdata;

        (void)sd_event_source_set_enabled(l->source, SD_EVENT_ON);
        return 0;
}

/* Out of fds: the pending connection stays readable, so the listener rests a second rather than spin. */
static void listener_rest(PortListener *l) {
        (void)sd_event_source_set_enabled(l->source, SD_EVENT_OFF);
        l->rest_timer = sd_event_source_disable_unref(l->rest_timer);
        if (sd_event_add_time_relative(l->ports->broker->event, &l->rest_timer, CLOCK_MONOTONIC, 1000000, 0,
                                       listener_on_rested, l) < 0)
                (void)sd_event_source_set_enabled(l->source, SD_EVENT_ON);
}

static int listener_on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        PortListener *l = userdata;

        /* a few at a time: one port must not starve the loop */
        for (int i = 0; i < 16; i++) {
                int c = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (c < 0) {
                        if (errno == EMFILE || errno == ENFILE)
                                listener_rest(l);
                        break;
                }
                listener_accept_one(l, c);
        }
        return 0;
}

/* ---- listening ---- */

static void listener_drop_runtimes(PortListener *l) {
        Ports *p = l->ports;

        for (Pending *pe = p->pending, *next; pe; pe = next) {
                next = pe->next;
                if (pe->listener == l)
                        pending_free(pe);
        }
        for (PortRuntime *rt = p->runtimes, *next; rt; rt = next) {
                next = rt->next;
                if (rt->listener == l)
                        runtime_free(rt);
        }
}

static PortListener *listener_free(PortListener *l) {
        if (!l)
                return NULL;
        listener_drop_runtimes(l);
        sd_event_source_disable_unref(l->source);
        sd_event_source_disable_unref(l->watch);
        sd_event_source_disable_unref(l->rest_timer);
        safe_close(l->fd);
        free(l->path);
        free(l);
        return NULL;
}

/* No component of a port's directory may be a symbolic link: the path is the policy's, not a user's. */
static int open_dir_no_symlinks(const char *dir) {
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                                .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = (int)syscall(SYS_openat2, AT_FDCWD, dir, &how, sizeof(how));

        return fd < 0 ? -errno : fd;
}

/* Splits @path into its directory, opened, and its last component. */
static int open_parent(const char *path, int *ret_dir_fd, const char **ret_name) {
        _cleanup_free_ char *dir = NULL;
        const char *slash = strrchr(path, '/');
        struct stat st;
        bool made;
        int fd;

        if (!slash || slash[1] == '\0')
                return -EINVAL;
        dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
        if (!dir)
                return -ENOMEM;
        /* the packaged default directory is made on first use; others must exist */
        fd = open_dir_no_symlinks(dir);
        made = fd == -ENOENT && mkdir(dir, 0755) == 0;
        if (made)
                fd = open_dir_no_symlinks(dir);
        if (fd < 0)
                return fd;
        /* the unit's UMask=0077 would leave it 0700: no runtime could reach its sockets */
        if (made && fchmod(fd, 0755) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        /* whoever may write the directory may swap the socket for their own: only root may */
        if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
                safe_close(fd);
                return -EPERM;
        }
        *ret_dir_fd = fd;
        *ret_name = slash + 1;
        return 0;
}

/* The users and groups a port admits get rw- (connecting needs write), everyone else nothing. */
static int set_acl_at(int dir_fd, const char *name, const PolicyPort *config) {
        AclGrant grant = { .users = config->users.ids, .n_users = config->users.n,
                           .groups = config->groups.ids, .n_groups = config->groups.n };
        char path[64 + NAME_MAX];

        snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dir_fd, name);
        return acl_set_exact_path_rw(path, &grant);
}

/* The same for the socket file at the listener's path, looked up in its directory only. */
static int listener_set_acl(PortListener *l) {
        _cleanup_close_ int dir_fd = -EBADF;
        const char *name;
        struct stat st;
        int r;

        r = open_parent(l->path, &dir_fd, &name);
        if (r < 0)
                return r;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        return set_acl_at(dir_fd, name, l->config);
}

/*
 * Binds @l->path: under a temporary name in the same directory, given its
 * ACL there and listening, then renamed over whatever the path held (a stale
 * socket of an agent before), so that the path never names a socket with the
 * wrong access, nor one that refuses a connection.
 */
static int listener_bind(PortListener *l) {
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char tmp[NAME_MAX + 1];
        const char *name;
        struct stat st;
        int r;

        r = open_parent(l->path, &dir_fd, &name);
        if (r < 0)
                return r;
        if ((size_t)snprintf(tmp, sizeof(tmp), ".%.200s.%d", name, (int)getpid()) >= sizeof(tmp))
                return -ENAMETOOLONG;
        if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dir_fd, tmp) >=
            sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void)unlinkat(dir_fd, tmp, 0);
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        r = set_acl_at(dir_fd, tmp, l->config);
        /* listening before the path names it: a runtime that finds the file is never refused */
        if (r == 0 && listen(fd, PORT_LISTEN_BACKLOG) < 0)
                r = -errno;
        if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r == 0 && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlinkat(dir_fd, tmp, 0);
                return r;
        }
        l->source = sd_event_source_disable_unref(l->source);
        safe_close(l->fd);
        l->fd = TAKE_FD(fd);
        l->dev = st.st_dev;
        l->ino = st.st_ino;
        return sd_event_add_io(l->ports->broker->event, &l->source, l->fd, EPOLLIN, listener_on_accept, l);
}

/* Does the path still name the socket bound here? Someone (root) may have removed or replaced it. */
static bool listener_file_is_ours(const PortListener *l) {
        struct stat st;

        return lstat(l->path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == l->dev && st.st_ino == l->ino;
}

static void listener_rebind(PortListener *l, const char *why) {
        int r;

        if (l->from_systemd || !l->config || listener_file_is_ours(l))
                return;
        r = listener_bind(l);
        if (r < 0)
                fprintf(stderr, "dsagent: port %s %s and cannot be bound again: %s\n", l->path, why, strerror(-r));
        else
                fprintf(stderr, "dsagent: port %s %s: bound again\n", l->path, why);
}

static int listener_on_dir_event(sd_event_source *s, const struct inotify_event *e, void *userdata) {
        PortListener *l = userdata;
        const char *name = strrchr(l->path, '/') + 1;

        if (e->len > 0 && strcmp(e->name, name) == 0)
                listener_rebind(l, "was removed or replaced");
        return 0;
}

static int listener_watch(PortListener *l) {
        _cleanup_free_ char *dir = strndup(l->path, (size_t)(strrchr(l->path, '/') - l->path));

        if (!dir)
                return -ENOMEM;
        return sd_event_add_inotify(l->ports->broker->event, &l->watch, *dir ? dir : "/",
                                    IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_ONLYDIR,
                                    listener_on_dir_event, l);
}

static PortListener *listener_find(Ports *p, const char *path) {
        for (PortListener *l = p->listeners; l; l = l->next)
                if (strcmp(l->path, path) == 0)
                        return l;
        return NULL;
}

static int listener_new(Ports *p, const char *path, PortListener **ret) {
        PortListener *l = calloc(1, sizeof(*l));

        if (!l)
                return -ENOMEM;
        *l = (PortListener){ .ports = p, .fd = -EBADF, .path = strdup(path) };
        if (!l->path) {
                free(l);
                return -ENOMEM;
        }
        l->next = p->listeners;
        p->listeners = l;
        *ret = l;
        return 0;
}

static int adopt_fd(Ports *p, int fd) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);
        int type = 0, listening = 0;
        socklen_t olen = sizeof(int);
        PortListener *l;
        int r;

        if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
                return -errno;
        if (sa.sun_family != AF_UNIX || len <= offsetof(struct sockaddr_un, sun_path) || sa.sun_path[0] != '/')
                return -EINVAL;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &olen) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) < 0)
                return -errno;
        if (type != SOCK_STREAM || !listening)
                return -EINVAL;
        sa.sun_path[sizeof(sa.sun_path) - 1] = '\0';
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
                return -errno;
        r = listener_new(p, sa.sun_path, &l);
        if (r < 0)
                return r;
        l->from_systemd = true;
        r = sd_event_add_io(p->broker->event, &l->source, fd, EPOLLIN, listener_on_accept, l);
        if (r < 0) {
                p->listeners = l->next;
                listener_free(l);
                return r;
        }
        l->fd = fd;
        return 0;
}

int ports_adopt_fd(Ports *p, int fd) {
        int r = adopt_fd(p, fd);

        if (r < 0)
                safe_close(fd); /* never a socket whose backlog nobody reads: its runtimes would wait forever */
        return r;
}

/* Puts one [[port]] in force: the listener of its path, adopted, kept or new. */
static void ports_apply_one(Ports *p, const PolicyPort *config) {
        PortListener *l = listener_find(p, config->path);
        bool fresh = !l;
        int r = 0;

        if (fresh)
                r = listener_new(p, config->path, &l);
        if (r < 0) {
                fprintf(stderr, "dsagent: cannot listen on port %s: %s\n", config->path, strerror(-r));
                return;
        }
        l->config = config;
        if (l->from_systemd)
                r = listener_set_acl(l); /* the socket unit made it root's alone: the [[port]] says who else */
        else if (fresh || !listener_file_is_ours(l))
                r = listener_bind(l);
        else
                r = listener_set_acl(l); /* the users or groups may have changed */
        if (r == 0 && !l->watch && !l->from_systemd)
                r = listener_watch(l);
        if (r < 0) {
                fprintf(stderr, "dsagent: cannot listen on port %s: %s\n", config->path,
                        r == -EPERM ? "its directory must belong to root and be writable by no one else"
                                    : strerror(-r));
                if (fresh && !l->from_systemd) {
                        p->listeners = l->next;
                        listener_free(l);
                }
        }
}

/* Closes a port the policy no longer has; its file goes too, if it is still the one bound here. */
static void ports_close_one(Ports *p, PortListener *l) {
        for (PortListener **i = &p->listeners; *i; i = &(*i)->next)
                if (*i == l) {
                        *i = l->next;
                        break;
                }
        if (listener_file_is_ours(l))
                (void)unlink(l->path);
        listener_free(l);
}

/* Registrations and connections whose user the port's new table no longer admits end now. */
static void listener_drop_unadmitted(PortListener *l) {
        Ports *p = l->ports;

        for (Pending *pe = p->pending, *next; pe; pe = next) {
                next = pe->next;
                if (pe->listener == l && !policy_port_admits(l->config, pe->peer.uid, pe->peer.groups,
                                                             pe->peer.n_groups))
                        pending_free(pe);
        }
        for (PortRuntime *rt = p->runtimes, *next; rt; rt = next) {
                next = rt->next;
                if (rt->listener == l && !policy_port_admits(l->config, rt->uid, rt->groups, rt->n_groups)) {
                        port_runtime_record(rt, "gone", "the port no longer admits runtimes of this user");
                        runtime_free(rt);
                }
        }
}

int ports_apply(Ports *p, Policy *policy) {
        Policy *old = p->policy;

        p->policy = policy_ref(policy);
        for (PortListener *l = p->listeners; l; l = l->next)
                l->config = NULL;
        for (size_t i = 0; i < policy->n_ports; i++)
                ports_apply_one(p, &policy->ports[i]);
        for (PortListener *l = p->listeners, *next; l; l = next) {
                next = l->next;
                if (l->config)
                        listener_drop_unadmitted(l);
                if (!l->config && !l->from_systemd)
                        ports_close_one(p, l);
                else if (!l->config)
                        listener_drop_runtimes(l); /* the socket unit's port stays open, refusing everyone */
        }
        policy_unref(old);
        return 0;
}

unsigned ports_runtimes_for_fds(uint64_t fds) {
        uint64_t fixed = 2 * PORTS_PENDING_MAX + PORTS_LISTENERS_FDS;
        uint64_t runtimes = fds > fixed ? (fds - fixed) / 2 : 0;

        return runtimes < PORTS_RUNTIMES_MAX ? (unsigned)runtimes : PORTS_RUNTIMES_MAX;
}

void ports_set_fd_budget(Ports *p, uint64_t fds) {
        p->max_runtimes = ports_runtimes_for_fds(fds);
}

int ports_new(Broker *b, Ports **ret) {
        Ports *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        p->broker = b;
        p->max_runtimes = PORTS_RUNTIMES_MAX;
        *ret = p;
        return 0;
}

Ports *ports_free(Ports *p) {
        if (!p)
                return NULL;
        while (p->listeners) {
                PortListener *l = p->listeners;

                p->listeners = l->next;
                listener_free(l);
        }
        policy_unref(p->policy);
        free(p);
        return NULL;
}
