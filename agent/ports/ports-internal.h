/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the files of ports.h share, and nothing outside agent/ports/ sees: the listeners, the
 * connections still advertising, the registered runtimes and the Ports that holds them all.
 * ports.c listens, port-advertise.c reads what a connection advertises, port-runtime.c keeps the
 * runtimes that registered.
 */
#pragma once

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

/* The record of a port's event about the peer @peer of @l (audit_log_port()); @cookie may be NULL. */
void ports_record(Ports *p, const char *event, const PortListener *l, const PeerCreds *peer, uint64_t advertised_pid,
                  const uint8_t *cookie, bool suspended, const char *reason);

/* port-runtime.c, for a runtime that registers (port-advertise.c) or whose listener closes (ports.c) */
PortRuntime *port_runtime_free(PortRuntime *rt);
/* Takes @fd, a new connection of @rt, as its idle one, or hands it to the first waiter. */
void port_runtime_offer(PortRuntime *rt, int fd);
/* Whether @rt's idle connection is still open (its runtime has not closed it). */
bool port_runtime_idle_is_open(PortRuntime *rt);
/* @rt's pidfd became readable: its process ended. */
int port_runtime_on_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata);
/* Records why @rt is not kept, and frees it. */
void port_runtime_refuse(PortRuntime *rt, const char *reason);
/* The ProcessInfo a newly registered runtime was asked for (runtime_call_start()'s callback). */
void port_runtime_verify_done(RuntimeCall *call, int error, const DotnetIpcResponse *reply, void *userdata);

/* port-advertise.c, for ports.c's listeners */
Pending *port_pending_free(Pending *pe);
/* A listener's socket is readable: new connections to accept and read the advertise of. */
int port_listener_on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata);
