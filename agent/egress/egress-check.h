/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The agent's half of `dsagent --check-policy --egress` (egress-check.c): it execs the egress process
 * (libexec/dsagent-egress) and asks it, store by store, whether the policy's keys reach the bucket. The agent
 * sends where the keys are, never reads them, and links no libcurl.
 */
#pragma once

#include <sys/types.h>

#include "agent/egress/egress-protocol.h"
#include "policy/policy.h"

/* The egress process this build installs; test builds take DSAGENT_TEST_EGRESS_HELPER instead, if set. */
const char *egress_helper_path(void);

/**
 * egress_process_spawn() - fork and exec @helper with one end of a SOCK_SEQPACKET socketpair as its fd 3
 *
 * The child keeps stdin, stdout, stderr and fd 3 (close_range()), and dies with its parent (PR_SET_PDEATHSIG).
 * Return: 0 with the child's pid and the agent's end (CLOEXEC), or a negative errno.
 */
int egress_process_spawn(const char *helper, pid_t *ret_pid, int *ret_fd);

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
