/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Runtimes that connect in (ports.h): the [[port]] listeners, bound, watched and applied from the
 * policy, and the Ports that holds them; what a connection advertises is port-advertise.c's, the
 * runtimes that registered port-runtime.c's. The broker applies the policy's ports.
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

/* ---- listening ---- */

static void listener_drop_runtimes(PortListener *l) {
        Ports *p = l->ports;

        for (Pending *pe = p->pending, *next; pe; pe = next) {
                next = pe->next;
                if (pe->listener == l)
                        port_pending_free(pe);
        }
        for (PortRuntime *rt = p->runtimes, *next; rt; rt = next) {
                next = rt->next;
                if (rt->listener == l)
                        port_runtime_free(rt);
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
        return sd_event_add_io(l->ports->broker->event, &l->source, l->fd, EPOLLIN, port_listener_on_accept, l);
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
        r = sd_event_add_io(p->broker->event, &l->source, fd, EPOLLIN, port_listener_on_accept, l);
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
                        port_pending_free(pe);
        }
        for (PortRuntime *rt = p->runtimes, *next; rt; rt = next) {
                next = rt->next;
                if (rt->listener == l && !policy_port_admits(l->config, rt->uid, rt->groups, rt->n_groups)) {
                        port_runtime_record(rt, "gone", "the port no longer admits runtimes of this user");
                        port_runtime_free(rt);
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
