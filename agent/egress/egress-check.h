/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The agent's half of `dsagent --check-policy --egress` (egress-check.c): it execs the egress process
 * (libexec/dsagent-egress) as its own user and asks it, store by store, whether the policy's keys reach the
 * bucket. The agent opens the keys for it (that user could not), never reads them, and links no libcurl.
 */
#pragma once

#include <sys/types.h>

#include "agent/egress/egress-protocol.h"
#include "policy/policy.h"

/* The egress process this build installs; test builds take DSAGENT_TEST_EGRESS_HELPER instead, if set. */
const char *egress_helper_path(void);

/* The system user the egress process runs as (units/dsagent.sysusers): never root, so that what holds the
 * network and parses the stores' answers can open no file of root's. */
#define EGRESS_USER "dsagent-egress"

/* EGRESS_USER; test builds take DSAGENT_TEST_EGRESS_USER instead, if set (a test of a missing user). */
const char *egress_user_name(void);

/**
 * egress_user_lookup() - the uid and primary gid of egress_user_name()
 *
 * Return: 0, -ENOENT (no such user), -EPERM (its uid or gid is root's: it would be no user of its own), or a
 * negative errno of the lookup.
 */
int egress_user_lookup(uid_t *ret_uid, gid_t *ret_gid);

/**
 * egress_process_spawn() - fork and exec @helper as @uid:@gid with one end of a SOCK_SEQPACKET socketpair as its
 * fd 3
 *
 * The child drops its supplementary groups and takes @uid and @gid as real, effective and saved ids before the
 * exec (no code of the egress binary or its libraries runs as root); it keeps stdin, stdout, stderr and fd 3
 * (close_range()); it watches fd 3 to die with its parent (egress-main.c). The caller needs CAP_SETUID and CAP_SETGID.
 * Return: 0 with the child's pid and the agent's end (CLOEXEC), or a negative errno.
 */
int egress_process_spawn(const char *helper, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_fd);

/**
 * egress_request_send() - send @q (its type, id and fields set) on @sock with what it needs open
 * @artifact_fd: an upload's file, or -1
 * @flags: sendmsg()'s (MSG_DONTWAIT for the loop)
 *
 * The agent opens the store's keys (q->credentials) and its CA (q->ca_file, if any) itself, as root, without
 * following a link, and sends them with @artifact_fd (egress-protocol.h): the egress process, another user,
 * could open neither. One that cannot be opened goes as its errno (q->credentials_error, q->ca_error), for the
 * egress process to answer it as before. What is opened here is closed here.
 *
 * Return: 0, or a negative errno of sendmsg().
 */
int egress_request_send(int sock, EgressRequest *q, int artifact_fd, int flags);

/**
 * egress_request_fill() - @q (zeroed first) with @e's non-secret fields and where its keys are
 * @credentials_dir: $CREDENTIALS_DIRECTORY, for credentials = "systemd:NAME"; NULL when unset
 *
 * The caller sets the type and what the type needs. Return: 0, -ENOENT (systemd credentials without a
 * directory), or -ENAMETOOLONG (a field does not fit).
 */
int egress_request_fill(EgressRequest *q, const PolicyEgress *e, const char *credentials_dir);

/**
 * egress_check_target() - ask the egress process on @fd whether @e's keys reach its bucket
 * @credentials_dir: $CREDENTIALS_DIRECTORY, for credentials = "systemd:NAME"; NULL when unset
 * @timeout_usec: how long to wait for the answer
 *
 * Return: 0 with the answer in *@ret (its result says reachable, refused or unreachable), -ETIMEDOUT,
 * -EBADMSG (an answer that is not one), -ECONNRESET (the egress process is gone), or a negative errno.
 */
int egress_check_target(int fd, const PolicyEgress *e, const char *credentials_dir, uint64_t timeout_usec,
                        EgressReply *ret);

/* "reachable", "refused", "unreachable", "garbage", "untrusted" (the store's certificate), "credentials" or "failed":
 * what an answer's result says */
const char *egress_result_to_string(int result);
