/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Exit codes: stable, documented in docs/dsctl.md, one per kind of failure. */
#pragma once

enum {
        EXIT_OK = 0,
        EXIT_ERROR = 1,
        EXIT_USAGE = 2,
        EXIT_AGENT_UNREACHABLE = 3,
        EXIT_DENIED = 4,
        EXIT_NO_SUCH_PROCESS = 5,
        EXIT_NOT_DOTNET = 6,
        EXIT_RUNTIME_UNREACHABLE = 7,
        EXIT_RUNTIME_FAILED = 8,
        EXIT_SOCKET_UNTRUSTED = 9,
        EXIT_AGENT_BUSY = 10,
        EXIT_NO_SPACE = 11,
        EXIT_UNSAFE_FS = 12,
        EXIT_NO_STAGING = 13,
        EXIT_POLICY_BROKEN = 14,
        EXIT_SUSPENDED = 15,    /* the runtime is suspended at startup: dsctl resume first */
        EXIT_AUDIT_UNAVAILABLE = 16, /* the agent could not record the decision, so it refused it */
        EXIT_NO_SUCH_CRASH = 17, /* no crash of that id you may see, or no core stored for it */
        EXIT_CORE_UNUSABLE = 18, /* the stored core is corrupt, cut short, too large, or not the one stored */
        EXIT_INTERRUPTED = 130, /* a second Ctrl-C: left without waiting for the session's end */
};

