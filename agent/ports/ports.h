/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Runtimes that connect in: the policy's [[port]]s, the sockets the agent
 * listens on for runtimes started with DOTNET_DiagnosticPorts=PATH,connect,
 * and the runtimes registered through them.
 *
 * A runtime connects, sends the 34-byte advertise (cookie, its pid in its own
 * pid namespace) and waits for one command on that connection; after each
 * command it connects again. The agent believes nothing of the advertise
 * that the kernel does not confirm: the peer's uid and pidfd come from the
 * socket (SO_PEERCRED, SO_PEERPIDFD), the advertised pid must be the peer's
 * innermost pid (the last NSpid of its pidfd), and the first connection of
 * every runtime is spent on ProcessInfo, whose cookie and pid must be the
 * advertised ones. Only then is the runtime registered; its later
 * connections are kept, one idle at a time, for requests about it.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "agent/targets/target.h"

typedef struct Broker Broker;
typedef struct Ports Ports;
typedef struct PortRuntime PortRuntime;
typedef struct PortWaiter PortWaiter;

/* Runtimes registered at once, of all users (each user's share is max_runtimes_per_user). */
#define PORTS_RUNTIMES_MAX 4096
/* Connections that have not advertised yet: in all, and per uid (each costs two fds and a timer). */
#define PORTS_PENDING_MAX 256
#define PORTS_PENDING_PER_UID_MAX 64
/* Listening sockets, with their directory watches (POLICY_PORTS_MAX, and as many systemd may pass). */
#define PORTS_LISTENERS_FDS (4 * POLICY_PORTS_MAX)
/* The fds the ports hold at most: a registered runtime holds its pidfd and one idle connection, an
 * unadvertised one its connection and pidfd, and a startup trace's start a connection more. */
#define PORTS_FDS_MAX (2 * PORTS_RUNTIMES_MAX + 2 * PORTS_PENDING_MAX + PORTS_LISTENERS_FDS)

int ports_new(Broker *b, Ports **ret);
/*
 * ports_set_fd_budget() - the open files the ports may hold (broker_fit_fd_limit())
 *
 * Registrations past what @fds allows (after the connections still to
 * advertise and the listeners) are refused, and recorded, as past
 * PORTS_RUNTIMES_MAX: never an fd taken from the clients.
 */
void ports_set_fd_budget(Ports *p, uint64_t fds);
/* How many runtimes @fds let the ports register. */
unsigned ports_runtimes_for_fds(uint64_t fds);
Ports *ports_free(Ports *p);

/*
 * ports_adopt_fd() - take a listening socket systemd passed for a port
 *
 * It is served under the [[port]] of the same path once ports_apply() puts
 * one in force; until then, and when none names it, every runtime that
 * connects through it is refused (and recorded), never left waiting unseen.
 * The agent never unlinks or replaces such a socket: the socket unit owns it.
 *
 * Return: 0, -ENOTSOCK / -EINVAL for a socket that is not a listening unix
 * stream socket bound to a path, or a negative errno.
 */
int ports_adopt_fd(Ports *p, int fd);

/*
 * ports_apply() - put @policy's [[port]]s in force
 *
 * Listens on each new path (a socket file of mode 0600 and owner root, with
 * one ACL entry per user and group the port admits, made under a temporary
 * name and renamed into place), binds again a path whose file was removed or
 * replaced, and closes the ports the policy no longer has, with the runtimes
 * registered through them. A port that cannot be bound is reported on
 * stderr and skipped.
 *
 * Return: 0, or a negative errno when nothing could be done (out of memory).
 */
int ports_apply(Ports *p, Policy *policy);

/*
 * The verified runtime of the process @t pins: of its registrations (one per
 * port it connected in on), the first that waits for ResumeRuntime
 * (port_runtime_waits()), else the first; NULL when it has none. A resume
 * then goes through the port that waits for it.
 */
PortRuntime *ports_find(Ports *p, const Target *t);
/* Whether any registration, checked or not, names @pid: a request about it then wants a fresh reading. */
bool ports_have_pid(const Ports *p, pid_t pid);

/*
 * Whether the runtime is suspended at startup and no one has resumed it
 * through its port yet. Known once port_runtime_settled(): a runtime connects
 * in before it runs its entry assembly, suspended or not, and the agent asks
 * it again for a few seconds before it says it waits.
 */
bool port_runtime_waits(const PortRuntime *rt);
bool port_runtime_settled(const PortRuntime *rt);
/* The port the runtime connected through. */
const char *port_runtime_path(const PortRuntime *rt);

/*
 * @fd is a connection to the runtime, which the callee takes; or @fd is
 * negative and @error says why there is none: -ETIMEDOUT (no connection
 * within --runtime-timeout), -ESRCH (the process exited or its port closed).
 */
typedef void (*PortConnected)(int fd, int error, void *userdata);

/*
 * ports_connect() - a connection to @rt for one command
 *
 * Return: 0 with *@ret_fd, a connection held idle until now; PORTS_WAITING
 * when there is none: @connected gets the runtime's next one, or the reason
 * there is none, and *@ret_waiter cancels the wait (ports_waiter_cancel());
 * or a negative errno.
 */
#define PORTS_WAITING 1
int ports_connect(PortRuntime *rt, PortConnected connected, void *userdata, int *ret_fd, PortWaiter **ret_waiter);

/* Gives up a wait: its callback is not called. NULL is fine. Return: NULL. */
PortWaiter *ports_waiter_cancel(PortWaiter *w);

/* ResumeRuntime went through @rt's port and the runtime took it: its suspend_timeout stops. */
void port_runtime_resumed(PortRuntime *rt);

/* A registration's id, never reused while the agent runs: who keeps it finds the registration
 * again (or learns it is gone) with ports_runtime_by_id(), and never holds a dangling pointer. */
uint64_t port_runtime_id(const PortRuntime *rt);
PortRuntime *ports_runtime_by_id(Ports *p, uint64_t id);
/* The process, in the agent's pid namespace, as the kernel gave it. */
pid_t port_runtime_pid(const PortRuntime *rt);
/* Whom the runtime counts against for per-user bounds: its uid, or its user namespace's owner (userns.h). */
uid_t port_runtime_charged_uid(const PortRuntime *rt);
/* Is the process @t pins the one registered, still running what it registered with (ports_find())? */
bool port_runtime_is_target(const PortRuntime *rt, const Target *t);
/* A port record of @rt: @event (on-start-failed, on-start-skipped, resume-failed, ...) and why. */
void port_runtime_record(PortRuntime *rt, const char *event, const char *reason);
/*
 * port_runtime_startup_done() - what startup_trace_begin() did for @rt
 *
 * @resumed: the agent resumed it once its [[on_start]] trace ran, and it is recorded as
 * registered and running, with @reason; else it is treated as a runtime no [[on_start]]
 * covers (told suspended or not, resumed after suspend_timeout).
 */
void port_runtime_startup_done(PortRuntime *rt, bool resumed, const char *reason);

/*
 * The host pids of the verified runtimes, for ps: those registered under one of
 * @uids (NULL: all), at most @max into @pids. Return: how many.
 */
size_t ports_list_pids(const Ports *p, const uid_t *uids, size_t n_uids, pid_t *pids, size_t max);
