/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policy.h"

/* The rule the runtime applies to its own socket: root, and the owner. */
#define POLICY_RULE_RUNTIME_DEFAULT "runtime-default"

const char *policy_command_to_string(PolicyCommand c) {
        switch (c) {
        case POLICY_COMMAND_PS: return "ps";
        case POLICY_COMMAND_INFO: return "info";
        default: return "unknown";
        }
}

static bool target_changed_credentials(const PolicyTarget *t) {
        return t->uid[0] != t->uid[1] || t->uid[1] != t->uid[2] || t->gid[0] != t->gid[1] ||
               t->gid[1] != t->gid[2];
}

/**
 * policy_check() - decide one request; deny unless a rule allows
 *
 * Until policy files exist the only rule is the runtime's own: root, and the
 * user the target runs as. A target that changed credentials (setuid and the
 * like) is left to root, as the kernel leaves such processes' memory to root.
 */
PolicyVerdict policy_check(const PolicyRequester *who, PolicyCommand what, const PolicyTarget *target) {
        if (what < 0 || what >= _POLICY_COMMAND_MAX)
                return (PolicyVerdict){ .reason = "unknown command" };

        if (who->uid == 0)
                return (PolicyVerdict){ .allowed = true, .rule = POLICY_RULE_RUNTIME_DEFAULT,
                                        .reason = "requester is root" };

        if (target_changed_credentials(target))
                return (PolicyVerdict){ .reason = "target changed credentials; only root may act on it" };

        if (who->uid != target->uid[1])
                return (PolicyVerdict){ .reason = "requester does not own the target" };

        return (PolicyVerdict){ .allowed = true, .rule = POLICY_RULE_RUNTIME_DEFAULT,
                                .reason = "requester owns the target" };
}
