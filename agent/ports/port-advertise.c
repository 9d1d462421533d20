/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A connection to a [[port]] until its runtime has advertised (ports.h): accepted under the
 * listener's limits, its advertise read and checked against the kernel's word for the peer, then
 * registered as a runtime (port-runtime.c) or refused with a record.
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

/* ---- reading the advertise ---- */

Pending *port_pending_free(Pending *pe) {
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
        ports_record(pe->ports, "refused", pe->listener, &pe->peer, advertised_pid, cookie, false, reason);
        port_pending_free(pe);
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
                port_runtime_free(rt);
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
        r = sd_event_add_io(p->broker->event, &rt->exit_source, rt->pidfd, EPOLLIN, port_runtime_on_exit, rt);
        if (r >= 0)
                r = dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO, NULL, 0, request, sizeof(request), &size);
        if (r >= 0) {
                r = runtime_call_start(p->broker->event, TAKE_FD(pe->fd), request, size,
                                       p->broker->config.runtime_timeout_usec, port_runtime_verify_done, rt, &rt->call);
                r = r == 0 ? 0 : -EIO;
        }
        port_pending_free(pe);
        if (r < 0)
                port_runtime_refuse(rt, "the agent could not ask the runtime for ProcessInfo");
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
                if (port_runtime_idle_is_open(rt)) {
                        pending_refuse(pe, adv.pid, adv.cookie, "a second advertise from a process whose "
                                                                "connection is already held");
                        return;
                }
                port_runtime_offer(rt, TAKE_FD(pe->fd));
                port_pending_free(pe);
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

int port_listener_on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
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
