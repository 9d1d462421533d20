/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's own sandbox: no new privileges, two capabilities, not dumpable, a syscall allowlist */
#pragma once

typedef enum SandboxProfile {
        SANDBOX_AGENT,      /* the broker: talks to clients and runtimes, publishes dumps */
        SANDBOX_PAM_HELPER, /* the PAM account checker: reads files, asks NSS, nothing else */
        SANDBOX_EGRESS,     /* the egress process (libexec/dsagent-egress): the only one with AF_INET sockets */
} SandboxProfile;

int sandbox_enter(SandboxProfile profile);

/* Every capability out of the calling process's bounding set, if it holds CAP_SETPCAP (else it is left as it is):
 * the child the agent execs the egress process in, before it leaves root's uid (and CAP_SETPCAP with it).
 * Return: 0 or a negative errno. */
int sandbox_cut_bounding_set(void);
