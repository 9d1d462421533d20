/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy engine: who may do what to which process. Pure: no I/O, no logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef enum PolicyCommand {
        POLICY_COMMAND_PS,
        POLICY_COMMAND_INFO,
        _POLICY_COMMAND_MAX,
} PolicyCommand;

typedef struct PolicyRequester {
        uid_t uid;
        gid_t gid;
        const gid_t *groups;
        size_t n_groups;
} PolicyRequester;

typedef struct PolicyTarget {
        uid_t uid[4]; /* real, effective, saved, filesystem */
        gid_t gid[4];
} PolicyTarget;

typedef struct PolicyVerdict {
        bool allowed;
        const char *rule;   /* the rule that allowed, or NULL */
        const char *reason; /* why, in words fit for the requester and the audit log */
} PolicyVerdict;

const char *policy_command_to_string(PolicyCommand c);
PolicyVerdict policy_check(const PolicyRequester *who, PolicyCommand what, const PolicyTarget *target);
