/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Which processes may have a .NET runtime listening on its diagnostic
 * socket, found without reading any process's memory or looking anything up
 * in its file system: every runtime binds dotnet-diagnostic-PID-KEY-socket,
 * and the kernel lists bound Unix sockets per network namespace
 * (/proc/PID/net/unix). What this finds is a hint; each candidate is then
 * pinned and checked like any target. Runs in a worker: it reads all of /proc.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The most candidates one walk reports; they must fit one worker message. */
#define DISCOVER_CANDIDATES_MAX 7168

typedef struct DiscoverFilter {
        /* false: only processes whose /proc entry is owned by one of @uids, or by root (a process
         * that is not dumpable shows as root's there, whatever its ids: it is looked at closer) */
        bool any_uid;
        const uid_t *uids;
        size_t n_uids;
} DiscoverFilter;

typedef struct DiscoverCandidate {
        pid_t pid;
        uid_t owner;            /* of its /proc entry when it was seen */
} DiscoverCandidate;

/* Whether a process whose /proc entry @owner owns passes @f (pure: the loop filters a shared walk's finds with it). */
bool discover_filter_allows(const DiscoverFilter *f, uid_t owner);

/**
 * discover_take_fairly() - at most @max of @n candidates, fairly among their owners
 *
 * All of them when they fit. Else each owner in turn gets one more (lowest pids first), so
 * that one user's many (anybody may name a socket like a runtime's) cannot crowd out the
 * others' in a walk shared by listings of several users. Reorders @candidates. Pure.
 *
 * Return: how many were put in @out, or -ENOMEM.
 */
ssize_t discover_take_fairly(DiscoverCandidate *candidates, size_t n, DiscoverCandidate *out, size_t max);

/**
 * discover_candidates() - processes that may run a .NET runtime
 *
 * A process is a candidate when a listening socket named for its own pid
 * (the last of its NSpid) and its start time is in its network namespace's
 * table. At most @max (discover_take_fairly()), in pid order, each with the owner of its
 * /proc entry.
 *
 * Return: 0 with *@ret_n, or a negative errno when /proc cannot be read.
 */
int discover_candidates(const DiscoverFilter *f, DiscoverCandidate *out, size_t max, size_t *ret_n);
