/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The runtimes registered through a [[port]] (ports.h): their records, the connections commands
 * wait for, the agent's own calls (ProcessInfo to verify one, the resume once suspend_timeout has
 * passed), and telling a suspended runtime from one still starting.
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

#include "agent/dumps/acl.h"
#include "agent/audit/audit.h"
#include "agent/loop/broker-state.h"
#include "common/array.h"
#include "common/cleanup.h"
#include "common/dotnet-ipc.h"
#include "agent/support/fileio.h"
#include "agent/ports/on-start.h"
#include "agent/ports/ports.h"
#include "agent/targets/procfs.h"
#include "agent/runtime/runtime-call.h"
#include "agent/loop/sockopt.h"
#include "agent/support/test-hooks.h"
#include "common/text.h"

#include "agent/ports/ports-internal.h"

/* ---- records ---- */

void ports_record(Ports *p, const char *event, const PortListener *l, const PeerCreds *peer, uint64_t advertised_pid,
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

        ports_record(rt->ports, event, rt->listener, &peer, rt->ns_pid, rt->cookie, rt->suspended, reason);
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

PortRuntime *port_runtime_free(PortRuntime *rt) {
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

int port_runtime_on_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        port_runtime_free(userdata);
        return 0;
}

/* The runtime hung up its idle connection, or wrote on it unasked: it is of no use; the runtime makes another. */
static int runtime_on_idle_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        runtime_drop_idle(userdata);
        return 0;
}

/* A new connection of @rt's runtime, already advertised: to the first waiter, else kept idle. */
void port_runtime_offer(PortRuntime *rt, int fd) {
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
bool port_runtime_idle_is_open(PortRuntime *rt) {
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

        if (port_runtime_idle_is_open(rt)) {
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

void port_runtime_refuse(PortRuntime *rt, const char *reason) {
        port_runtime_record(rt, "refused", reason);
        port_runtime_free(rt);
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

void port_runtime_verify_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        PortRuntime *rt = userdata;

        if (error != 0) {
                port_runtime_refuse(rt, runtime_call_error_text(error));
                return;
        }
        if (!reply->ok ||
            dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO, reply->payload, reply->payload_size, &info) != 0) {
                port_runtime_refuse(rt, "no valid ProcessInfo reply on its first connection");
                return;
        }
        if (info.pid != rt->ns_pid) {
                port_runtime_refuse(rt, "ProcessInfo reports another process id than the advertise");
                return;
        }
        if (memcmp(info.cookie, rt->cookie, sizeof(rt->cookie)) != 0) {
                port_runtime_refuse(rt, "ProcessInfo reports another runtime instance cookie than the advertise");
                return;
        }
        rt->call = runtime_call_free(rt->call);
        runtime_verified(rt, &info);
}
