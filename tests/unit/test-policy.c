/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The built-in rule: root and the target's owner; deny everything else */
#include <string.h>

#include "policy.h"
#include "tap.h"

static PolicyTarget owned_by(uid_t uid) {
        return (PolicyTarget){ .uid = { uid, uid, uid, uid }, .gid = { 100, 100, 100, 100 } };
}

static void test_root_allowed(void) {
        PolicyRequester root = { .uid = 0 };
        PolicyTarget t = owned_by(1001);
        PolicyVerdict v = policy_check(&root, POLICY_COMMAND_INFO, &t);

        check(v.allowed && v.rule && strcmp(v.rule, "runtime-default") == 0);
}

static void test_owner_allowed(void) {
        PolicyRequester owner = { .uid = 1001, .gid = 100 };
        PolicyTarget t = owned_by(1001);

        check(policy_check(&owner, POLICY_COMMAND_INFO, &t).allowed);
        check(policy_check(&owner, POLICY_COMMAND_PS, &t).allowed);
}

static void test_other_user_denied(void) {
        /* sharing a group with the target grants nothing */
        gid_t groups[] = { 100 };
        PolicyRequester other = { .uid = 1002, .gid = 100, .groups = groups, .n_groups = 1 };
        PolicyTarget t = owned_by(1001);
        PolicyVerdict v = policy_check(&other, POLICY_COMMAND_INFO, &t);

        check(!v.allowed && v.rule == NULL && v.reason && strstr(v.reason, "does not own"));
}

static void test_changed_credentials_left_to_root(void) {
        PolicyRequester owner = { .uid = 1001 }, root = { .uid = 0 };
        PolicyTarget setuid_target = { .uid = { 1001, 0, 0, 0 }, .gid = { 100, 100, 100, 100 } };
        PolicyTarget setgid_target = { .uid = { 1001, 1001, 1001, 1001 }, .gid = { 100, 5, 5, 5 } };
        PolicyTarget dropped = { .uid = { 0, 1001, 1001, 1001 }, .gid = { 100, 100, 100, 100 } };

        check(!policy_check(&owner, POLICY_COMMAND_INFO, &setuid_target).allowed);
        check(!policy_check(&owner, POLICY_COMMAND_INFO, &setgid_target).allowed);
        check(!policy_check(&owner, POLICY_COMMAND_INFO, &dropped).allowed);
        check(policy_check(&root, POLICY_COMMAND_INFO, &setuid_target).allowed);
}

static void test_unknown_command_denied(void) {
        PolicyRequester root = { .uid = 0 };
        PolicyTarget t = owned_by(0);

        check(!policy_check(&root, _POLICY_COMMAND_MAX, &t).allowed);
        check(!policy_check(&root, (PolicyCommand)-1, &t).allowed);
}

int main(void) {
        run_test(test_root_allowed);
        run_test(test_owner_allowed);
        run_test(test_other_user_denied);
        run_test(test_changed_credentials_left_to_root);
        run_test(test_unknown_command_denied);
        return tap_finish();
}
