/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The agent's own sandbox: no new privileges, two capabilities, not dumpable, a syscall allowlist */
#pragma once

typedef enum SandboxProfile {
        SANDBOX_AGENT,      /* the broker: talks to clients and runtimes, publishes dumps */
        SANDBOX_PAM_HELPER, /* the PAM account checker: reads files, asks NSS, nothing else */
        SANDBOX_EGRESS,     /* the egress process (libexec/dsagent-egress): the only one with AF_INET sockets */
} SandboxProfile;

int sandbox_enter(SandboxProfile profile);
