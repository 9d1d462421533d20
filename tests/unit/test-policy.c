/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The policy compiler (schema, one check per rule of it) and the engine (each selector, deny by default) */
#include <string.h>

#include "common/cleanup.h"
#include "policy/policy-compile.h"
#include "eventpipe/session-config.h"
#include "tests/unit/tap.h"
#include "policy/toml.h"

/* --- a fixed world: names the fake resolver knows --- */

static int fake_user(const char *name, uid_t *ret, void *userdata) {
        static const struct { const char *name; uid_t uid; } users[] = {
                { "root", 0 }, { "alice", 1001 }, { "bob", 1002 }, { "carol", 1003 }, { "svc-orders", 2001 },
                { "svc-billing", 2002 },
        };
        for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++)
                if (strcmp(users[i].name, name) == 0) {
                        *ret = users[i].uid;
                        return 0;
                }
        return -ENOENT;
}

static int fake_group(const char *name, gid_t *ret, void *userdata) {
        if (strcmp(name, "ops") == 0) {
                *ret = 3001;
                return 0;
        }
        return -ENOENT;
}

static const PolicyResolver resolver = { .user = fake_user, .group = fake_group };

/* Compiles one or two documents; returns NULL and keeps the messages on failure. */
static Policy *compile2(const char *main_text, const char *dropin_text, PolicyDiagnostics *d) {
        TomlValue *roots[2] = {};
        PolicySource sources[2];
        Policy *p = NULL;
        size_t n = 0;
        TomlError e;

        if (toml_parse(main_text, strlen(main_text), &roots[0], &e) != 0) {
                printf("# toml error %u:%u %s\n", e.line, e.column, e.message);
                return NULL;
        }
        sources[n++] = (PolicySource){ .path = "policy.toml", .root = roots[0], .is_main = true };
        if (dropin_text) {
                if (toml_parse(dropin_text, strlen(dropin_text), &roots[1], &e) != 0) {
                        toml_value_free(roots[0]);
                        return NULL;
                }
                sources[n++] = (PolicySource){ .path = "policy.d/10-extra.toml", .root = roots[1] };
        }
        if (policy_compile(sources, n, &resolver, &p, d) != 0)
                p = NULL;
        toml_value_free(roots[0]);
        toml_value_free(roots[1]);
        return p;
}

static Policy *compile_ok(const char *text) {
        PolicyDiagnostics d = {};
        Policy *p = compile2(text, NULL, &d);

        for (size_t i = 0; i < d.n; i++)
                printf("# unexpected: %s\n", d.messages[i]);
        check(p != NULL);
        policy_diagnostics_done(&d);
        return p;
}

/* The document must be refused with @expected (a substring) at @line:@column. */
static void compile_fails(const char *text, const char *dropin, unsigned line, unsigned column, const char *expected) {
        PolicyDiagnostics d = {};
        Policy *p = compile2(text, dropin, &d);
        char where[64];
        bool found = false;

        snprintf(where, sizeof(where), ":%u:%u: ", line, column);
        for (size_t i = 0; i < d.n; i++)
                if (strstr(d.messages[i], where) && strstr(d.messages[i], expected))
                        found = true;
        check(p == NULL);
        check(found);
        if (!found) {
                printf("# wanted %s%s, got %zu messages:\n", where, expected, d.n);
                for (size_t i = 0; i < d.n; i++)
                        printf("#   %s\n", d.messages[i]);
        }
        policy_unref(p);
        policy_diagnostics_done(&d);
}

static const gid_t alice_groups[] = { 1001, 3001 }; /* alice is in ops */
static const PolicyRequester alice = { .uid = 1001, .gid = 1001, .groups = alice_groups, .n_groups = 2 };
static const PolicyRequester bob = { .uid = 1002, .gid = 1002, .groups = (const gid_t[]){ 1002 }, .n_groups = 1 };
static const PolicyRequester carol = { .uid = 1003, .gid = 1003, .groups = (const gid_t[]){ 1003 }, .n_groups = 1 };
static const PolicyRequester root = { .uid = 0, .gid = 0, .groups = (const gid_t[]){ 0 }, .n_groups = 1 };

static PolicyTarget target(uid_t uid, const char *unit, const char *name) {
        return (PolicyTarget){ .uid = { uid, uid, uid, uid }, .gid = { 100, 100, 100, 100 }, .unit = unit, .name = name };
}

static PolicyVerdict decide(const Policy *p, const PolicyRequester *who, PolicyTarget t, PolicyRequest q) {
        PolicyVerdict v;
        policy_check(p, who, &t, &q, &v);
        return v;
}

#define CMD(c) ((PolicyRequest){ .command = (c) })

static const char orders_policy[] =
        "[agent]\n"
        "owner_access = true\n"
        "\n"
        "[[rule]]\n"
        "name = \"orders-oncall\"\n"
        "users = [\"bob\", \"uid:4242\"]\n"
        "groups = [\"ops\"]\n"
        "commands = [\"ps\", \"info\", \"dump\", \"trace\", \"counters\"]\n"
        "targets.users = [\"svc-orders\"]\n"
        "targets.units = [\"orders.service\"]\n"
        "dump_types = [\"mini\", \"triage\", \"heap\"]\n"
        "trace_profiles = [\"cpu-sampling\", \"gc-collect\"]\n"
        "max_duration = \"5m\"\n"
        "rate_limit = \"6/1h\"\n"
        "readers = [\"group:ops\", \"carol\"]\n"
        "\n"
        "[[rule]]\n"
        "name = \"billing-names\"\n"
        "users = [\"carol\"]\n"
        "commands = [\"info\"]\n"
        "targets.names = [\"Billing.Api\"]\n";

static void test_builtin_policy(void) {
        Policy *p = policy_new_builtin();
        PolicyVerdict v;

        v = decide(p, &root, target(2001, NULL, NULL), CMD(POLICY_COMMAND_DUMP));
        check(v.allowed && strcmp(v.rule_name, POLICY_RULE_ROOT) == 0);
        v = decide(p, &alice, target(1001, NULL, NULL), CMD(POLICY_COMMAND_INFO));
        check(v.allowed && strcmp(v.rule_name, POLICY_RULE_OWNER) == 0);
        v = decide(p, &alice, target(2001, NULL, NULL), CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && v.rule_name == NULL && strstr(v.reason, "no rule"));
        /* code injection: not even root, and not the owner, without a rule that says so */
        check(!decide(p, &root, target(2001, NULL, NULL), CMD(POLICY_COMMAND_STARTUP_HOOK)).allowed);
        check(!decide(p, &alice, target(1001, NULL, NULL), CMD(POLICY_COMMAND_PROFILER)).allowed);
        check(!decide(p, &alice, target(1001, NULL, NULL), CMD(POLICY_COMMAND_SETENV)).allowed);
        policy_unref(p);
}

static void test_owner_access_and_changed_credentials(void) {
        Policy *p = compile_ok("[agent]\nowner_access = false\n");
        PolicyTarget setuid_target = { .uid = { 1001, 2001, 2001, 2001 }, .gid = { 1, 1, 1, 1 } };
        Policy *q = policy_new_builtin();
        PolicyVerdict v;

        check(p && !decide(p, &alice, target(1001, NULL, NULL), CMD(POLICY_COMMAND_INFO)).allowed);
        v = decide(q, &alice, setuid_target, CMD(POLICY_COMMAND_INFO));
        check(!v.allowed);
        setuid_target.uid[0] = 2001; /* now alice is the effective owner of a process that was started by... */
        setuid_target.uid[1] = 1001; /* ...someone else and switched to alice: still not hers to read */
        check(!decide(q, &alice, setuid_target, CMD(POLICY_COMMAND_INFO)).allowed);
        /* hers in every id but one: root kept as the saved or the filesystem uid or gid (issue 35) */
        check(decide(q, &alice, target(1001, NULL, NULL), CMD(POLICY_COMMAND_DUMP)).allowed);
        for (size_t i = 0; i < 8; i++) {
                PolicyTarget kept_root = target(1001, NULL, NULL);

                if (i < 4)
                        kept_root.uid[i] = 0;
                else
                        kept_root.gid[i - 4] = 0;
                v = decide(q, &alice, kept_root, CMD(POLICY_COMMAND_DUMP));
                check(!v.allowed);
                /* with root as its effective uid it is not hers at all, else it changed credentials */
                check(i == 1 || strstr(v.reason, "target changed credentials"));
        }
        policy_unref(p);
        policy_unref(q);
}

static void test_requester_selectors(void) {
        Policy *p = compile_ok(orders_policy);
        PolicyTarget orders = target(2001, "orders.service", "Orders.Api");
        PolicyRequester by_uid = { .uid = 4242, .gid = 4242, .groups = (const gid_t[]){ 4242 }, .n_groups = 1 };
        PolicyVerdict v;

        check(p && p->n_rules == 2);
        /* by name, by uid:, by supplementary group */
        check(decide(p, &bob, orders, CMD(POLICY_COMMAND_INFO)).allowed);
        check(decide(p, &by_uid, orders, CMD(POLICY_COMMAND_INFO)).allowed);
        v = decide(p, &alice, orders, CMD(POLICY_COMMAND_INFO));
        check(v.allowed && v.rule && strcmp(v.rule_name, "orders-oncall") == 0);
        /* carol is in no group of the rule and not named: and she learns nothing of it */
        v = decide(p, &carol, orders, CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && !strstr(v.reason, "orders-oncall"));
        policy_unref(p);
}

static void test_target_selectors(void) {
        Policy *p = compile_ok(orders_policy);
        PolicyVerdict v;

        /* every selector given must match: owner and unit */
        v = decide(p, &bob, target(2002, "orders.service", NULL), CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && strstr(v.reason, "target's user"));
        v = decide(p, &bob, target(2001, "billing.service", NULL), CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && strstr(v.reason, "target's unit"));
        v = decide(p, &bob, target(2001, NULL, NULL), CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && strstr(v.reason, "target's unit"));
        /* by process name */
        check(decide(p, &carol, target(2002, NULL, "Billing.Api"), CMD(POLICY_COMMAND_INFO)).allowed);
        v = decide(p, &carol, target(2002, NULL, "Orders.Api"), CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && strstr(v.reason, "target's name"));
        policy_unref(p);
}

/* What a requester may not act on in any way, it must not learn exists. */
static void test_visibility(void) {
        Policy *p = compile_ok(orders_policy);
        PolicyTarget orders = target(2001, "orders.service", "Orders.Api");
        PolicyTarget changed = target(1002, NULL, NULL), own = target(1002, NULL, NULL);

        check(policy_target_visible(p, &root, &orders));
        check(policy_target_visible(p, &bob, &orders));        /* by name in the rule */
        check(policy_target_visible(p, &alice, &orders));      /* by group */
        check(!policy_target_visible(p, &carol, &orders));     /* her rule covers only Billing.Api */
        check(policy_target_visible(p, &carol, &(PolicyTarget){ .uid = { 2002, 2002, 2002, 2002 }, .name = "Billing.Api" }));
        /* a rule's target selectors all count: the right user in the wrong unit is not covered */
        check(!policy_target_visible(p, &bob, &(PolicyTarget){ .uid = { 2001, 2001, 2001, 2001 }, .unit = "x.service" }));
        /* its own processes, under owner_access, even when they changed credentials */
        check(policy_target_visible(p, &bob, &own));
        changed.uid[1] = 2001;
        check(policy_target_visible(p, &bob, &changed));
        check(!policy_target_visible(p, &carol, &changed));

        /* the cheap first cut of listings agrees */
        {
                uid_t uids[8];
                size_t n = 0;
                check(policy_visible_uids(p, &root, uids, 8, &n));
                check(!policy_visible_uids(p, &bob, uids, 8, &n) && n == 2 && uids[0] == 1002 && uids[1] == 2001);
                /* carol's rule names processes, not users: anybody's may match */
                check(policy_visible_uids(p, &carol, uids, 8, &n));
                check(policy_visible_uids(p, &bob, uids, 1, &n)); /* no room: say anybody's, never too few */
        }
        policy_unref(p);

        /* without owner_access nobody sees its own processes through the agent */
        p = compile_ok("[agent]\nowner_access = false\n");
        check(!policy_target_visible(p, &bob, &own));
        check(policy_target_visible(p, &root, &own));
        policy_unref(p);
}

static void test_command_and_parameters(void) {
        Policy *p = compile_ok(orders_policy);
        PolicyTarget orders = target(2001, "orders.service", "Orders.Api");
        PolicyVerdict v;

        v = decide(p, &bob, orders, CMD(POLICY_COMMAND_ENV));
        check(!v.allowed && strstr(v.reason, "no rule grants you 'env'"));
        check(decide(p, &bob, orders, (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = POLICY_DUMP_HEAP })
                      .allowed);
        v = decide(p, &bob, orders, (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = POLICY_DUMP_FULL });
        check(!v.allowed && strstr(v.reason, "does not allow full dumps"));
        check(decide(p, &bob, orders,
                     (PolicyRequest){ .command = POLICY_COMMAND_TRACE, .trace_profile = "cpu-sampling",
                                      .duration_usec = 300000000 })
                      .allowed);
        v = decide(p, &bob, orders,
                   (PolicyRequest){ .command = POLICY_COMMAND_TRACE, .trace_profile = "gc-verbose" });
        check(!v.allowed && strstr(v.reason, "gc-verbose"));
        v = decide(p, &bob, orders,
                   (PolicyRequest){ .command = POLICY_COMMAND_COUNTERS, .duration_usec = 301000000 });
        check(!v.allowed && strstr(v.reason, "at most 300s"));
        policy_unref(p);
}

static void test_first_match_and_any(void) {
        Policy *p = compile_ok("[[rule]]\nname = \"narrow\"\nusers = [\"bob\"]\ncommands = [\"dump\"]\n"
                               "targets.users = [\"svc-orders\"]\ndump_types = [\"mini\"]\n"
                               "[[rule]]\nname = \"wide\"\nusers = [\"bob\"]\ncommands = [\"dump\", \"info\"]\n"
                               "targets.any = true\ndump_types = [\"mini\", \"full\"]\n");
        PolicyVerdict v;

        v = decide(p, &bob, target(2001, NULL, NULL),
                   (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = POLICY_DUMP_MINI });
        check(v.allowed && strcmp(v.rule_name, "narrow") == 0);
        v = decide(p, &bob, target(2001, NULL, NULL),
                   (PolicyRequest){ .command = POLICY_COMMAND_DUMP, .dump_type = POLICY_DUMP_FULL });
        check(v.allowed && strcmp(v.rule_name, "wide") == 0);
        v = decide(p, &bob, target(0, NULL, NULL), CMD(POLICY_COMMAND_INFO));
        check(v.allowed && strcmp(v.rule_name, "wide") == 0);
        policy_unref(p);
}

#define BIT(c) (1u << (c))

/*
 * A listing shows a process exactly to those who hold a command on it, whichever: ps is allowed
 * exactly when policy_commands_held() is not 0, a held process is always a visible one, and a
 * request for any of several commands is allowed exactly when one of them is held.
 */
static void test_commands_held_and_ps(void) {
        Policy *p = compile_ok("[agent]\nowner_access = true\n"
                               "[[rule]]\nname = \"counters-only\"\nusers = [\"alice\"]\ncommands = [\"counters\"]\n"
                               "targets.users = [\"svc-orders\"]\n"
                               "[[rule]]\nname = \"trace-billing\"\nusers = [\"alice\"]\ncommands = [\"trace\", \"dump\"]\n"
                               "targets.names = [\"Billing.Api\"]\ndump_types = [\"mini\"]\ntrace_profiles = [\"cpu-sampling\"]\n"
                               "[[rule]]\nname = \"listing\"\nusers = [\"bob\"]\ncommands = [\"ps\"]\n"
                               "targets.users = [\"svc-billing\"]\n"
                               "[[rule]]\nname = \"hooks\"\nusers = [\"carol\"]\ncommands = [\"startup-hook\"]\n"
                               "targets.users = [\"svc-orders\"]\nallow_code_injection = true\n");
        const uint32_t no_code = POLICY_COMMANDS_LIVE & ~POLICY_COMMANDS_RUNNING_CODE;
        PolicyTarget orders = target(2001, "orders.service", "Orders.Api");
        PolicyTarget billing = target(2002, NULL, "Billing.Api"), other = target(2002, NULL, "Other");
        PolicyTarget own = target(1002, NULL, NULL), changed = target(1002, NULL, NULL);
        PolicyTarget targets[] = { orders, billing, other, own, changed };
        const PolicyRequester *everyone[] = { &root, &alice, &bob, &carol };
        PolicyVerdict v;

        changed.uid[1] = 2001;
        targets[4] = changed;
        if (!p)
                return;
        /* a grant of counters alone: listed, with counters; no info, and explain of info says so */
        check(policy_commands_held(p, &alice, &orders) == BIT(POLICY_COMMAND_COUNTERS));
        v = decide(p, &alice, orders, CMD(POLICY_COMMAND_PS));
        check(v.allowed && strcmp(v.rule_name, "counters-only") == 0);
        check(!decide(p, &alice, orders, CMD(POLICY_COMMAND_INFO)).allowed);
        /* by name; a dump's type is a parameter, not what makes it held */
        check(policy_commands_held(p, &alice, &billing) == (BIT(POLICY_COMMAND_TRACE) | BIT(POLICY_COMMAND_DUMP)));
        check(policy_commands_held(p, &alice, &other) == 0);
        v = decide(p, &alice, other, CMD(POLICY_COMMAND_PS));
        check(!v.allowed);
        /* ps alone still lists */
        check(policy_commands_held(p, &bob, &billing) == BIT(POLICY_COMMAND_PS));
        check(decide(p, &bob, billing, CMD(POLICY_COMMAND_PS)).allowed);
        /* a command that runs code is a command held */
        check(policy_commands_held(p, &carol, &orders) == BIT(POLICY_COMMAND_STARTUP_HOOK));
        check(decide(p, &carol, orders, CMD(POLICY_COMMAND_PS)).allowed);
        /* root and the owner: every command that runs no code; not the owner of one that changed credentials */
        check(policy_commands_held(p, &root, &other) == no_code);
        check(policy_commands_held(p, &bob, &own) == no_code);
        check(policy_commands_held(p, &bob, &changed) == 0 && !decide(p, &bob, changed, CMD(POLICY_COMMAND_PS)).allowed);

        /* any_of: any one of the commands asked, parameters aside, the first rule granting one named */
        v = decide(p, &alice, billing, (PolicyRequest){ .command = POLICY_COMMAND_INFO,
                                                        .any_of = BIT(POLICY_COMMAND_DUMP) | BIT(POLICY_COMMAND_ENV) });
        check(v.allowed && strcmp(v.rule_name, "trace-billing") == 0);
        v = decide(p, &alice, orders, (PolicyRequest){ .command = POLICY_COMMAND_INFO,
                                                       .any_of = BIT(POLICY_COMMAND_DUMP) | BIT(POLICY_COMMAND_ENV) });
        check(!v.allowed);
        v = decide(p, &bob, billing, (PolicyRequest){ .command = POLICY_COMMAND_INFO,
                                                      .any_of = POLICY_COMMANDS_ALL & ~BIT(POLICY_COMMAND_PS) });
        check(!v.allowed && strstr(v.reason, "no rule grants you a command on this process"));

        /* as a listing names them */
        {
                char text[POLICY_COMMANDS_TEXT_MAX];

                policy_commands_to_string(BIT(POLICY_COMMAND_DUMP) | BIT(POLICY_COMMAND_TRACE), text);
                check(strcmp(text, "dump,trace") == 0);
                policy_commands_to_string(0, text);
                check(strcmp(text, "") == 0);
                policy_commands_to_string(POLICY_COMMANDS_ALL, text);
                check(strcmp(text, "ps,info,env,dump,gcdump,trace,counters,resume,perfmap,stacks,exceptions,logs,"
                                   "setenv,startup-hook,profiler,crashes") == 0);
        }

        /* the same answer every way it can be asked, for everyone about everything */
        for (size_t w = 0; w < ELEMENTSOF(everyone); w++)
                for (size_t t = 0; t < ELEMENTSOF(targets); t++) {
                        uint32_t held = policy_commands_held(p, everyone[w], &targets[t]);

                        check(decide(p, everyone[w], targets[t], CMD(POLICY_COMMAND_PS)).allowed == (held != 0));
                        check(held == 0 || policy_target_visible(p, everyone[w], &targets[t]));
                        /* crashes is about the dead: no live process is held for it (test_crashes) */
                        for (int c = 0; c < _POLICY_COMMAND_MAX; c++) {
                                PolicyRequest any = { .command = POLICY_COMMAND_INFO, .any_of = BIT(c) };

                                if (c == POLICY_COMMAND_CRASHES)
                                        continue;

                                check(decide(p, everyone[w], targets[t], any).allowed == ((held & BIT(c)) != 0));
                        }
                }
        policy_unref(p);
}

static void test_code_injection_needs_explicit_grant(void) {
        Policy *p = compile_ok("[[rule]]\nname = \"hooks\"\nusers = [\"bob\"]\ncommands = [\"startup-hook\"]\n"
                               "targets.users = [\"svc-orders\"]\nallow_code_injection = true\n");

        check(decide(p, &bob, target(2001, NULL, NULL), CMD(POLICY_COMMAND_STARTUP_HOOK)).allowed);
        check(!decide(p, &bob, target(2001, NULL, NULL), CMD(POLICY_COMMAND_PROFILER)).allowed);
        policy_unref(p);
}

static void test_agent_settings(void) {
        Policy *p = compile_ok("[agent]\ndump_dir = \"/srv/dumps\"\nmax_concurrent_dumps = 3\n"
                               "audit_failure = \"allow\"\npam_service = \"dsagent\"\n");

        check(p && strcmp(p->agent.dump_dir, "/srv/dumps") == 0 && p->agent.max_concurrent_dumps == 3);
        check(p && p->agent.audit_failure_allow && strcmp(p->agent.pam_service, "dsagent") == 0);
        check(p && p->agent.owner_access);
        check(p && p->agent.max_concurrent_own_dumps == 4); /* the default */
        policy_unref(p);
        p = compile_ok("[agent]\nmax_concurrent_own_dumps = 2\n");
        check(p && p->agent.max_concurrent_own_dumps == 2 && p->agent.max_concurrent_dumps == 1);
        policy_unref(p);
        compile_fails("[agent]\nmax_concurrent_own_dumps = 65\n", NULL, 2, 28, "must be 1 to 64");
}

#define RULE_HEAD "[[rule]]\nname = \"r\"\nusers = [\"bob\"]\n"

static void test_schema_errors(void) {
        compile_fails("[agent]\nfoo = 1\n", NULL, 2, 1, "unknown key 'foo' in [agent]");
        compile_fails("bogus = 1\n", NULL, 1, 1, "unknown key 'bogus'");
        compile_fails("[agent]\nowner_access = \"yes\"\n", NULL, 2, 16, "must be a boolean");
        compile_fails("[agent]\nmax_concurrent_dumps = 0\n", NULL, 2, 24, "must be 1 to 64");
        compile_fails("[agent]\ndump_dir = \"relative\"\n", NULL, 2, 12, "absolute path");
        compile_fails("[agent]\naudit_failure = \"maybe\"\n", NULL, 2, 17, "\"deny\" or \"allow\"");
        compile_fails("[agent]\nmax_use = \"lots\"\n", NULL, 2, 11, "bad size \"lots\" for 'max_use'");
        compile_fails("[agent]\npam_service = \"../x\"\n", NULL, 2, 15, "plain service name");
        compile_fails("[[rule]]\nusers = [\"bob\"]\ncommands = [\"info\"]\ntargets.any = true\n", NULL, 1, 1,
                      "needs a name");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\n"
                      "[[rule]]\nname = \"r\"\nusers = [\"bob\"]\ncommands = [\"info\"]\ntargets.any = true\n",
                      NULL, 6, 1, "rule name 'r' is already used at policy.toml:1");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\n",
                      "[[rule]]\nname = \"r\"\nusers = [\"bob\"]\ncommands = [\"info\"]\ntargets.any = true\n", 1, 1,
                      "already used");
        compile_fails("[[rule]]\nname = \"r\"\ncommands = [\"info\"]\ntargets.any = true\n", NULL, 1, 1,
                      "needs users or groups");
        compile_fails(RULE_HEAD "commands = []\ntargets.any = true\n", NULL, 4, 12, "must not be an empty list");
        compile_fails(RULE_HEAD "commands = [\"info\", \"info\"]\ntargets.any = true\n", NULL, 4, 21, "twice");
        compile_fails(RULE_HEAD "commands = [\"teleport\"]\ntargets.any = true\n", NULL, 4, 13,
                      "unknown command \"teleport\"");
        compile_fails(RULE_HEAD "commands = \"info\"\ntargets.any = true\n", NULL, 4, 12, "must be a list");
        compile_fails(RULE_HEAD "commands = [\"info\"]\n", NULL, 1, 1, "rule needs targets");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\ntargets.users = [\"bob\"]\n", NULL, 5, 9,
                      "cannot be combined");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = false\n", NULL, 5, 9, "means nothing");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.hosts = [\"x\"]\n", NULL, 5, 9,
                      "unknown key 'targets.hosts'");
        compile_fails(RULE_HEAD "users2 = 1\ncommands = [\"info\"]\ntargets.any = true\n", NULL, 4, 1,
                      "unknown key 'users2'");
        compile_fails("[[rule]]\nname = \"r\"\nusers = [\"mallory\"]\ncommands = [\"info\"]\ntargets.any = true\n",
                      NULL, 3, 10, "unknown user \"mallory\"");
        compile_fails("[[rule]]\nname = \"r\"\ngroups = [\"wheel\"]\ncommands = [\"info\"]\ntargets.any = true\n",
                      NULL, 3, 11, "unknown group \"wheel\"");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.users = [\"uid:-1\"]\n", NULL, 5, 18,
                      "not a valid uid:");
        compile_fails(RULE_HEAD "commands = [\"dump\"]\ntargets.any = true\n", NULL, 1, 1, "say which dump_types");
        compile_fails(RULE_HEAD "commands = [\"dump\"]\ntargets.any = true\ndump_types = [\"huge\"]\n", NULL, 6, 15,
                      "unknown dump type \"huge\"");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\ndump_types = [\"mini\"]\n", NULL, 6, 1,
                      "does not grant 'dump'");
        compile_fails(RULE_HEAD "commands = [\"trace\"]\ntargets.any = true\ntrace_profiles = [\"x\"]\n", NULL, 6, 19,
                      "unknown trace profile");
        compile_fails(RULE_HEAD "commands = [\"trace\"]\ntargets.any = true\n", NULL, 1, 1, "say which trace_profiles");
        compile_fails(RULE_HEAD "commands = [\"counters\"]\ntargets.any = true\nmax_duration = \"5 minutes\"\n",
                      NULL, 6, 16, "bad duration");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\nmax_duration = \"5m\"\n", NULL, 6, 1,
                      "none of 'trace', 'counters', 'exceptions', 'logs'");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\nrate_limit = \"lots\"\n", NULL, 6, 14,
                      "bad rate");
        compile_fails(RULE_HEAD "commands = [\"setenv\"]\ntargets.any = true\n", NULL, 4, 12,
                      "allow_code_injection = true");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\nallow_code_injection = true\n", NULL, 6, 1,
                      "grants no command that runs code");
        compile_fails("", "[agent]\nowner_access = false\n", 1, 2, "belongs in the main policy file");
}

static void test_every_error_is_reported(void) {
        PolicyDiagnostics d = {};
        Policy *p = compile2("[agent]\nfoo = 1\nbar = 2\n[[rule]]\nname = \"x y\"\n", NULL, &d);

        check(p == NULL);
        check(d.n >= 4); /* foo, bar, the name, and what the rule lacks */
        policy_diagnostics_done(&d);
}

static void test_durations_and_rates(void) {
        uint64_t usec = 0;
        PolicyRateLimit rate = {};

        check(policy_parse_duration("90s", &usec) == 0 && usec == 90000000ULL);
        check(policy_parse_duration("1h30m", &usec) == 0 && usec == 5400ULL * 1000000);
        check(policy_parse_duration("2d", &usec) == 0 && usec == 172800ULL * 1000000);
        check(policy_parse_duration("0s", &usec) == -EINVAL);
        check(policy_parse_duration("31d", &usec) == -EINVAL);
        /* a bare number is seconds, as everywhere else (duration_parse()) */
        check(policy_parse_duration("5", &usec) == 0 && usec == 5000000ULL);
        check(policy_parse_duration("30d", &usec) == 0 && usec == 2592000ULL * 1000000);
        check(policy_parse_duration("500ms", &usec) == 0 && usec == 500000ULL);
        /* numbers that wrapped around 64 bits once multiplied, to about 16 hours and 10 seconds */
        check(policy_parse_duration("213503983d", &usec) == -EINVAL);
        check(policy_parse_duration("307445734562m", &usec) == -EINVAL);
        check(policy_parse_duration("m", &usec) == -EINVAL);
        check(policy_parse_duration("5m ", &usec) == -EINVAL);
        check(policy_parse_duration("", &usec) == -EINVAL);
        check(policy_parse_rate("6/1h", &rate) == 0 && rate.count == 6 && rate.period_usec == 3600ULL * 1000000);
        check(policy_parse_rate("0/1h", &rate) == -EINVAL);
        check(policy_parse_rate("6/", &rate) == -EINVAL);
        check(policy_parse_rate("/1h", &rate) == -EINVAL);
        check(policy_parse_rate("99999/1h", &rate) == -EINVAL);

        PolicySize size = {};
        check(policy_parse_size("500M", &size) == 0 && size.bytes == 500ULL << 20 && size.percent == 0);
        check(policy_parse_size("2G", &size) == 0 && size.bytes == 2ULL << 30);
        check(policy_parse_size("4096", &size) == 0 && size.bytes == 4096);
        check(policy_parse_size("10%", &size) == 0 && size.percent == 10 && size.bytes == 0);
        check(policy_parse_size("0%", &size) == -EINVAL);
        check(policy_parse_size("101%", &size) == -EINVAL);
        check(policy_parse_size("0G", &size) == -EINVAL);
        check(policy_parse_size("G", &size) == -EINVAL);
        check(policy_parse_size("1.5G", &size) == -EINVAL);
        check(policy_parse_size("99999999999T", &size) == -EINVAL);
}

static const char providers_policy[] =
        "[agent]\n"
        "max_trace_buffer_mb = 64\n"
        "max_session_duration = \"10m\"\n"
        "\n"
        "[[rule]]\n"
        "name = \"providers\"\n"
        "users = [\"bob\"]\n"
        "commands = [\"trace\", \"counters\"]\n"
        "targets.any = true\n"
        "trace_providers = [\"My-Source:0x3\", \"Other-Source\"]\n"
        "counter_providers = [\"System.Runtime\", \"My.Meter\"]\n"
        "\n"
        "[[rule]]\n"
        "name = \"runtime-counters\"\n"
        "users = [\"carol\"]\n"
        "commands = [\"counters\"]\n"
        "targets.any = true\n";

static PolicyRequest trace_of(const PolicyProvider *p) {
        return (PolicyRequest){ .command = POLICY_COMMAND_TRACE, .providers = p, .n_providers = 1 };
}

static void test_providers_and_session_limits(void) {
        Policy *p = compile_ok(providers_policy);
        PolicyTarget t = target(2001, NULL, "Orders.Api");
        PolicyVerdict v;

        check(decide(p, &bob, t, trace_of(&(PolicyProvider){ .name = "My-Source", .keywords = 0x1 })).allowed);
        check(decide(p, &bob, t, trace_of(&(PolicyProvider){ .name = "My-Source", .keywords = 0x3 })).allowed);
        v = decide(p, &bob, t, trace_of(&(PolicyProvider){ .name = "My-Source", .keywords = 0x4 }));
        check(!v.allowed && strstr(v.reason, "within 0x3"));
        /* an EventSource takes keywords 0 as all of them */
        check(!decide(p, &bob, t, trace_of(&(PolicyProvider){ .name = "My-Source", .keywords = 0 })).allowed);
        check(decide(p, &bob, t, trace_of(&(PolicyProvider){ .name = "Other-Source", .keywords = 0 })).allowed);
        v = decide(p, &bob, t, trace_of(&(PolicyProvider){ .name = "Other-Source", .keywords = 1, .arguments = "Key=Value" }));
        check(!v.allowed && strstr(v.reason, "no provider arguments"));
        v = decide(p, &bob, t, trace_of(&(PolicyProvider){ .name = "Microsoft-Windows-DotNETRuntime", .keywords = 1 }));
        check(!v.allowed && strstr(v.reason, "does not allow the provider 'Microsoft-Windows-DotNETRuntime'"));

        check(decide(p, &bob, t, (PolicyRequest){ .command = POLICY_COMMAND_COUNTERS, .n_providers = 1,
                                                  .providers = &(PolicyProvider){ .name = "My.Meter" } })
                      .allowed);
        /* a rule that names no counter providers allows System.Runtime alone */
        check(decide(p, &carol, t, (PolicyRequest){ .command = POLICY_COMMAND_COUNTERS, .n_providers = 1,
                                                    .providers = &(PolicyProvider){ .name = "System.Runtime" } })
                      .allowed);
        v = decide(p, &carol, t, (PolicyRequest){ .command = POLICY_COMMAND_COUNTERS, .n_providers = 1,
                                                  .providers = &(PolicyProvider){ .name = "My.Meter" } });
        check(!v.allowed && strstr(v.reason, "counters of 'My.Meter'"));

        /* the agent's limits hold for root too */
        v = decide(p, &root, t, (PolicyRequest){ .command = POLICY_COMMAND_TRACE, .trace_profile = "cpu-sampling",
                                                 .buffer_mb = 65 });
        check(!v.allowed && strstr(v.reason, "above 64 MB"));
        v = decide(p, &root, t, (PolicyRequest){ .command = POLICY_COMMAND_COUNTERS, .duration_usec = 601000000 });
        check(!v.allowed && strstr(v.reason, "at most 600s"));
        check(decide(p, &root, t, (PolicyRequest){ .command = POLICY_COMMAND_COUNTERS, .duration_usec = 600000000 })
                      .allowed);
        check(p->agent.max_sessions_per_target == 4 && p->agent.max_trace_size == 1ULL << 30);
        policy_unref(p);

        compile_fails(RULE_HEAD "commands = [\"trace\"]\ntargets.any = true\ntrace_providers = [\"A:12\"]\n", NULL, 6,
                      20, "bad provider \"A:12\"");
        compile_fails(RULE_HEAD "commands = [\"trace\"]\ntargets.any = true\ntrace_providers = [\"A;B\"]\n", NULL, 6,
                      20, "bad provider name");
        compile_fails(RULE_HEAD "commands = [\"trace\"]\ntargets.any = true\n", NULL, 1, 1,
                      "say which trace_profiles or trace_providers");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\ncounter_providers = [\"A\"]\n", NULL, 6,
                      1, "does not grant 'counters'");
        compile_fails("[agent]\nmax_sessions_per_target = 65\n", NULL, 2, 27, "must be 1 to 64");
        compile_fails("[agent]\nmax_trace_size = \"10%\"\n", NULL, 2, 18, "bad size");
}

/* The issue's rule: profiles alone, as an operator lists them for dotnet-trace. */
static const char profiles_policy[] =
        "[[rule]]\n"
        "name = \"ops-profiles\"\n"
        "users = [\"bob\"]\n"
        "commands = [\"trace\"]\n"
        "targets.any = true\n"
        "trace_profiles = [\"cpu-sampling\", \"dotnet-common\", \"dotnet-sampled-thread-time\"]\n"
        "\n"
        "[[rule]]\n"
        "name = \"gc-and-mine\"\n"
        "users = [\"carol\"]\n"
        "commands = [\"trace\"]\n"
        "targets.any = true\n"
        "trace_profiles = [\"gc-collect\"]\n"
        "trace_providers = [\"My-Source:0x3\"]\n"
        "\n"
        "[[rule]]\n"
        "name = \"db\"\n"
        "users = [\"alice\"]\n"
        "commands = [\"trace\"]\n"
        "targets.any = true\n"
        "trace_profiles = [\"database\"]\n";

#define CLR "Microsoft-Windows-DotNETRuntime"
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

static PolicyVerdict trace_decided(const Policy *p, const PolicyRequester *who, const PolicyProvider *providers,
                                   size_t n) {
        return decide(p, who, target(2001, NULL, NULL),
                      (PolicyRequest){ .command = POLICY_COMMAND_TRACE, .providers = providers, .n_providers = n });
}

/* A trace is decided by its shape: each provider exactly one of a granted profile's, or within trace_providers. */
static void test_trace_profiles_by_shape(void) {
        Policy *p = compile_ok(profiles_policy);
        /* what stock dotnet-trace 10.0.750501 sends for its default, dotnet-common and dotnet-sampled-thread-time;
         * the .NET client sends "" for no arguments */
        const PolicyProvider common = { CLR, 0x100003801dULL, 4, "" };
        const PolicyProvider sampler = { SAMPLER, 0xf00000000000ULL, 4, "" };
        const PolicyProvider stock_default[] = { common, sampler };
        /* dotnet-trace 8 and 9's cpu-sampling, dsctl's */
        const PolicyProvider cpu_sampling[] = { sampler, { CLR, 0x14c14fccbdULL, 4, NULL } };
        const EventPipeProfile *database = eventpipe_profile_find("database");
        PolicyVerdict v;

        if (!p) {
                check(p);
                return;
        }
        v = trace_decided(p, &bob, stock_default, 2);
        check(v.allowed && strcmp(v.reason, "granted by rule 'ops-profiles' as dotnet-common, "
                                            "dotnet-sampled-thread-time") == 0);
        check(strcmp(v.trace_profiles, "dotnet-common,dotnet-sampled-thread-time") == 0);
        v = trace_decided(p, &bob, &common, 1);
        check(v.allowed && strcmp(v.reason, "granted by rule 'ops-profiles' as dotnet-common") == 0);
        /* the sample profiler is cpu-sampling's too: put down to the profile the request holds whole */
        v = trace_decided(p, &bob, &sampler, 1);
        check(v.allowed && strcmp(v.reason, "granted by rule 'ops-profiles' as dotnet-sampled-thread-time") == 0);
        v = trace_decided(p, &bob, cpu_sampling, 2);
        check(v.allowed && strcmp(v.reason, "granted by rule 'ops-profiles' as cpu-sampling") == 0);

        /* a step off a profile's shape is outside it: another level, fewer keywords, arguments */
        v = trace_decided(p, &bob, &(PolicyProvider){ CLR, 0x100003801dULL, 5, NULL }, 1);
        check(!v.allowed && v.parameters_refused);
        check(strcmp(v.reason, "rule 'ops-profiles' allows 'Microsoft-Windows-DotNETRuntime' only as its "
                               "trace_profiles ask for it, not at keywords 0x100003801d, level 5") == 0);
        check(!trace_decided(p, &bob, &(PolicyProvider){ CLR, 0x1, 4, NULL }, 1).allowed);
        check(!trace_decided(p, &bob, &(PolicyProvider){ CLR, 0, 4, NULL }, 1).allowed);
        v = trace_decided(p, &bob, &(PolicyProvider){ CLR, 0x100003801dULL, 4, "a=b" }, 1);
        check(!v.allowed && strstr(v.reason, "with these arguments"));
        /* gc-verbose, which the rule does not list: a request that is one profile is refused as that profile */
        v = trace_decided(p, &bob, &(PolicyProvider){ CLR, 0x8003, 5, "" }, 1);
        check(!v.allowed && strcmp(v.reason, "rule 'ops-profiles' does not allow the trace profile 'gc-verbose'") == 0);
        /* a provider no profile of the rule names, beside granted ones */
        v = trace_decided(p, &bob,
                          (const PolicyProvider[]){ common, { "System.Threading.Tasks.TplEventSource", 0x1, 4, NULL } }, 2);
        check(!v.allowed && strcmp(v.reason, "rule 'ops-profiles' does not allow the provider "
                                             "'System.Threading.Tasks.TplEventSource'") == 0);

        /* a profile by name (dsctl trace --profile, explain) is decided as its providers are */
        v = decide(p, &bob, target(2001, NULL, NULL),
                   (PolicyRequest){ .command = POLICY_COMMAND_TRACE, .trace_profile = "dotnet-common" });
        check(v.allowed && strcmp(v.reason, "granted by rule 'ops-profiles' as dotnet-common") == 0);
        v = decide(p, &bob, target(2001, NULL, NULL),
                   (PolicyRequest){ .command = POLICY_COMMAND_TRACE, .trace_profile = "gc-verbose" });
        check(!v.allowed && strcmp(v.reason, "rule 'ops-profiles' does not allow the trace profile 'gc-verbose'") == 0);

        /* profiles and trace_providers together; a part of a profile (dotnet-trace --providers replaced the rest) */
        v = trace_decided(p, &carol,
                          (const PolicyProvider[]){ { CLR, 0x1, 4, "" },
                                                    { "Microsoft-Windows-DotNETRuntimePrivate", 0x1, 4, "" },
                                                    { "My-Source", 0x1, 4, "" } },
                          3);
        check(v.allowed && strcmp(v.reason, "granted by rule 'gc-and-mine' as gc-collect and trace_providers") == 0);
        v = trace_decided(p, &carol, &(PolicyProvider){ CLR, 0x1, 4, "" }, 1);
        check(v.allowed && strcmp(v.reason, "granted by rule 'gc-and-mine' as gc-collect") == 0);
        v = trace_decided(p, &carol, &(PolicyProvider){ "My-Source", 0x1, 4, "" }, 1);
        check(v.allowed && strcmp(v.reason, "granted by rule 'gc-and-mine'") == 0 && !v.trace_profiles[0]);
        /* root is allowed as root, by no profile */
        v = trace_decided(p, &root, stock_default, 2);
        check(v.allowed && strcmp(v.rule_name, POLICY_RULE_ROOT) == 0 && !v.trace_profiles[0]);
        /* trace_providers still allows no arguments */
        v = trace_decided(p, &carol, &(PolicyProvider){ "My-Source", 0x1, 4, "Key=Value" }, 1);
        check(!v.allowed && strstr(v.reason, "allows no provider arguments"));

        /* a profile's own arguments are admitted exactly as it has them, and no others */
        check(database && database->n_providers == 2);
        if (!database)
                return;
        v = trace_decided(p, &alice,
                          (const PolicyProvider[]){ { "System.Threading.Tasks.TplEventSource", 0x80, 4, "" },
                                                    { "Microsoft-Diagnostics-DiagnosticSource", 0x3, 5,
                                                      database->providers[1].arguments } },
                          2);
        check(v.allowed && strcmp(v.reason, "granted by rule 'db' as database") == 0);
        v = trace_decided(p, &alice,
                          &(PolicyProvider){ "Microsoft-Diagnostics-DiagnosticSource", 0x3, 5,
                                             "FilterAndPayloadSpecs=\"MyListener/MyEvent:-Secret\"" },
                          1);
        check(!v.allowed && strstr(v.reason, "with these arguments"));
        check(!trace_decided(p, &alice, &(PolicyProvider){ "Microsoft-Diagnostics-DiagnosticSource", 0x3, 5, "" }, 1)
                       .allowed);

        /* a denial for want of the command is not one of parameters */
        v = decide(p, &bob, target(2001, NULL, NULL), CMD(POLICY_COMMAND_STACKS));
        check(!v.allowed && !v.parameters_refused);
        policy_unref(p);
}

/* stacks, exceptions, logs: run no code, so owner access covers them; sessions under the agent's limits */
static void test_monitor_commands(void) {
        Policy *p = compile_ok("[agent]\nmax_session_duration = \"10m\"\n\n" RULE_HEAD
                               "commands = [\"logs\", \"exceptions\"]\ntargets.users = [\"uid:2001\"]\n"
                               "max_duration = \"1m\"\n");
        PolicyTarget t = target(2001, NULL, "Orders.Api");
        PolicyVerdict v;

        for (PolicyCommand c = POLICY_COMMAND_STACKS; c <= POLICY_COMMAND_LOGS; c++) {
                check(!policy_command_runs_code(c));
                v = decide(p, &(PolicyRequester){ .uid = 2001, .gid = 2001 }, t, CMD(c));
                check(v.allowed && strcmp(v.rule_name, POLICY_RULE_OWNER) == 0);
        }
        check(decide(p, &bob, t, CMD(POLICY_COMMAND_LOGS)).allowed);
        check(decide(p, &bob, t, (PolicyRequest){ .command = POLICY_COMMAND_EXCEPTIONS, .duration_usec = 60000000 }).allowed);
        v = decide(p, &bob, t, (PolicyRequest){ .command = POLICY_COMMAND_EXCEPTIONS, .duration_usec = 61000000 });
        check(!v.allowed && strstr(v.reason, "allows at most 60s"));
        v = decide(p, &bob, t, CMD(POLICY_COMMAND_STACKS));
        check(!v.allowed && strstr(v.reason, "no rule grants you 'stacks'"));
        /* max_session_duration holds for root as for traces */
        v = decide(p, &root, t, (PolicyRequest){ .command = POLICY_COMMAND_LOGS, .duration_usec = 601000000 });
        check(!v.allowed && strstr(v.reason, "at most 600s"));
        check(decide(p, &root, t, CMD(POLICY_COMMAND_STACKS)).allowed);
        policy_unref(p);

        policy_unref(compile_ok(RULE_HEAD "commands = [\"stacks\"]\ntargets.any = true\n"));
        compile_fails(RULE_HEAD "commands = [\"stacks\"]\ntargets.any = true\nmax_duration = \"5m\"\n", NULL, 6, 1,
                      "none of 'trace', 'counters', 'exceptions', 'logs'");
}

/* ---- env: the allow list, env_show, env_redact and env_reveal ---- */

static bool hidden_value(const Policy *p, const PolicyVerdict *v, const char *name, const char *value) {
        size_t budget = POLICY_ENV_CHECK_BUDGET;

        return policy_env_value_hidden(p, v, name, value, &budget);
}

/* A name's verdict with a value that looks like no secret. */
static bool hidden(const Policy *p, const PolicyVerdict *v, const char *name) {
        return hidden_value(p, v, name, "1");
}

static void test_env_pattern_match(void) {
        char long_name[4097];

        check(policy_env_pattern_match("*", ""));
        check(policy_env_pattern_match("*PASSWORD*", "db_password"));
        check(policy_env_pattern_match("*PASSWORD*", "PASSWORD"));
        check(!policy_env_pattern_match("*PASSWORD*", "PASSWOR"));
        check(policy_env_pattern_match("ConnectionStrings__*", "CONNECTIONSTRINGS__Main"));
        check(!policy_env_pattern_match("ConnectionStrings__*", "My_ConnectionStrings__Main"));
        check(policy_env_pattern_match("*_PWD", "DB_PWD"));
        check(!policy_env_pattern_match("*_PWD", "OLDPWD"));
        check(policy_env_pattern_match("A?C", "abc"));
        check(!policy_env_pattern_match("A?C", "ac"));
        check(policy_env_pattern_match("A?C", "A\xC3\x84" "C")); /* '?' is one character, Ä */
        check(!policy_env_pattern_match("A??C", "A\xC3\x84" "C"));
        check(policy_env_pattern_match("*a*b", "xaxxb"));
        check(!policy_env_pattern_match("*a*b", "xaxxbx"));
        /* many stars against a long name that almost matches: linear per star, no blow-up */
        memset(long_name, 'a', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = '\0';
        check(!policy_env_pattern_match("*a*a*a*a*a*a*a*a*a*a*b", long_name));
        check(policy_env_pattern_match("*a*a*a*a*a*a*a*a*a*a*", long_name));

        check(policy_env_pattern_is_valid("*SECRET*") && policy_env_pattern_is_valid("Connection?trings__*"));
        check(!policy_env_pattern_is_valid("") && !policy_env_pattern_is_valid("A=B"));
        check(!policy_env_pattern_is_valid("[A]*") && !policy_env_pattern_is_valid("A\\*"));
        check(!policy_env_pattern_is_valid("A B") && !policy_env_pattern_is_valid("A\tB"));
        check(!policy_env_pattern_is_valid("\xC3(")); /* not UTF-8 */
}

/* What one environment's checks may cost: allow-listed values past POLICY_ENV_CHECK_BUDGET are withheld unchecked. */
static void test_env_check_budget(void) {
        Policy *p = policy_new_builtin();
        PolicyVerdict redacting = { .allowed = true }, revealing = { .allowed = true, .env_reveal = true };
        size_t budget = POLICY_ENV_CHECK_BUDGET, name = strlen("DOTNET_EventPipeConfig");
        char *value = malloc(POLICY_ENV_CHECK_BUDGET + 1);

        check(p && value);
        memset(value, 'x', POLICY_ENV_CHECK_BUDGET);
        /* one value larger than the whole budget: withheld, and the budget left for the next */
        value[POLICY_ENV_CHECK_BUDGET] = '\0';
        check(policy_env_value_hidden(p, &redacting, "DOTNET_EventPipeConfig", value, &budget));
        check(budget == POLICY_ENV_CHECK_BUDGET);
        /* a value that just fits is checked (and shown), and spends the budget */
        value[POLICY_ENV_CHECK_BUDGET - name] = '\0';
        check(!policy_env_value_hidden(p, &redacting, "DOTNET_EventPipeConfig", value, &budget));
        check(budget == 0);
        /* past it, a harmless value is not vouched for; names off the allow list cost nothing */
        check(policy_env_value_hidden(p, &redacting, "DOTNET_gcServer", "1", &budget));
        check(policy_env_value_hidden(p, &redacting, "OTHER", "1", &budget) && budget == 0);
        /* a reveal checks nothing, so needs no budget */
        check(!policy_env_value_hidden(p, &revealing, "DOTNET_gcServer", "1", &budget));
        free(value);
        policy_unref(p);
}

static void test_env_redact_defaults(void) {
        static const char *const secrets[] = {
                "DB_PASSWORD", "db_password", "MYSQL_PASSWD", "GPG_PASSPHRASE", "DB_PWD", "CLIENT_SECRET",
                "GITHUB_TOKEN", "API_KEY", "ConnectionStrings__Main", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_ACCESS_KEY_ID", "AZURE_CLIENT_SECRET", "AZURE_STORAGE_KEY", "AZURE_STORAGE_CONNECTION_STRING",
                "AZURE_CLIENT_CERTIFICATE_PASSWORD", "APPLICATIONINSIGHTS_CONNECTION_STRING",
                "GOOGLE_APPLICATION_CREDENTIALS", "SENTRY_DSN", "DATABASE_URL",
                "ASPNETCORE_Kestrel__Certificates__Default__Password",
                /* what .NET's configuration reads as connection strings, and other places of secrets */
                "SQLCONNSTR_Main", "CUSTOMCONNSTR_Reports", "POSTGRESQLCONNSTR_Orders", "SERVICEBUSCONNSTR_Bus",
                "AzureWebJobsStorage", "RABBITMQ_DEFAULT_PASS", "SMTP_PASS", "REDIS_URL", "MONGODB_URI",
                "HTTPS_PROXY", "SSL_PRIVATE_KEY_PATH", "BASIC_AUTH",
                /* names no deny list thought of: not on the allow list, so hidden all the same (issue 26) */
                "PGPASS", "DBPASS", "SQL_PW", "AZURE_STORAGE_SAS", "Redis__Configuration", "JWT_SIGNING",
                "STRIPE_SK", "ORDERS_DB", "DSAGENT_TEST_PLAIN", "Seq__ServerUrl", "Kafka__BootstrapServers",
                /* once on the allow list by its prefix, but a name that looks secret, or a configuration section */
                "DOTNET_SIGNING_KEY", "DOTNET_ConnectionStrings__Db", "LC_PASSWORD", "DOTNET_Db__Pass",
                /* ... or a camel-cased compound that names its secret last (issue 26 item 11) */
                "DOTNET_SmtpPw", "DOTNET_SMTPPW", "DOTNET_DbPin",
                /* names applications chose under the prefixes, which once put them on the list (issue 35) */
                "DOTNET_LaunchDarkly_Sdk", "DOTNET_Segment_WriteId", "DOTNET_Upstream_Headers", "DOTNET_Login",
                "DOTNET_Passcode", "DOTNET_Otp_Seed", "DOTNET_Alerts_Webhook", "COMPlus_Alerts_Webhook",
                "ASPNETCORE_Upstream_Headers", "LC_LOGIN", "KUBERNETES_PORT_443_TCP_TOKEN", "DOTNET_SYSTEM_WEBHOOK",
                "DOTNET_EnableDiagnosticsX", "XDOTNET_gcServer", "DOTNET_", "COMPlus_",
                /* a knob's name in another case is no knob on Linux, whose getenv() the runtime uses */
                "dotnet_running_in_container", "DOTNET_GCSERVER", "dotnet_gcServer", "Path", "tz",
                /* a host's or a library's setting is read under DOTNET_ only */
                "COMPlus_ROOT", "COMPlus_SYSTEM_GLOBALIZATION_INVARIANT",
        };
        static const char *const plain[] = {
                "PATH", "HOME", "PWD", "OLDPWD", "LANG", "TMPDIR", "DOTNET_ROOT", "ASPNETCORE_URLS",
                "ASPNETCORE_ENVIRONMENT", "HOSTNAME", "USER", "TZ", "LC_ALL", "DOTNET_gcServer",
                "DOTNET_DiagnosticPorts", "DOTNET_RUNNING_IN_CONTAINER", "ASPNETCORE_HTTP_PORTS",
                "KUBERNETES_SERVICE_HOST", "container", "ASPNETCORE_HOSTINGSTARTUPASSEMBLIES",
                /* the runtime's knobs, under either prefix; whole names of the host and the libraries */
                "COMPlus_gcServer", "DOTNET_GCHeapHardLimit", "COMPlus_GCHeapHardLimit", "DOTNET_TieredCompilation",
                "DOTNET_EnableDiagnostics", "COMPlus_EnableDiagnostics", "DOTNET_EnableDiagnostics_IPC",
                "DOTNET_ENVIRONMENT", "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT", "LC_MESSAGES",
                "KUBERNETES_PORT_443_TCP_ADDR", "CORECLR_PROFILER_PATH", "DOTNET_STARTUP_HOOKS",
        };
        Policy *p = policy_new_builtin();
        PolicyVerdict redacting = { .allowed = true };

        for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
                check(hidden(p, &redacting, secrets[i]));
                if (!hidden(p, &redacting, secrets[i]))
                        printf("# not redacted by default: %s\n", secrets[i]);
        }
        for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
                check(!hidden(p, &redacting, plain[i]));
                if (hidden(p, &redacting, plain[i]))
                        printf("# redacted by default: %s\n", plain[i]);
        }
        policy_unref(p);
}

/* A name on the allow list shows its value only when the value does not look secret either. */
static void test_env_value_checked(void) {
        Policy *p = policy_new_builtin();
        PolicyVerdict redacting = { .allowed = true }, revealing = { .allowed = true, .env_reveal = true };

        check(!hidden_value(p, &redacting, "ASPNETCORE_URLS", "http://+:8080"));
        check(hidden_value(p, &redacting, "ASPNETCORE_URLS", "http://admin:pw@+:8080"));
        check(!hidden_value(p, &redacting, "DOTNET_DiagnosticPorts", "/run/a.sock,connect"));
        check(hidden_value(p, &redacting, "DOTNET_STARTUP_HOOKS", "Server=db;Password=x"));
        /* JSON as Jackson's pretty printer writes it: a blank before the ':' (issue 26 item 11) */
        check(hidden_value(p, &redacting, "DOTNET_STARTUP_HOOKS", "{\"user\" : \"a\", \"password\" : \"hunter2\"}"));
        check(hidden_value(p, &redacting, "HOSTNAME", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.x"));
        check(hidden_value(p, &redacting, "TZ", "AKIAIOSFODNN7EXAMPLE"));
        check(!hidden_value(p, &revealing, "TZ", "AKIAIOSFODNN7EXAMPLE"));
        /* the shapes of issue 35, each under a name of the list */
        check(hidden_value(p, &redacting, "DOTNET_EventPipeConfig", "sdk-2f0b7a9e-51c3-4d8e-9a6b-0c1d2e3f4a5b"));
        check(hidden_value(p, &redacting, "DOTNET_EventPipeConfig", "x-api-key: 6f1c2d3e-4b5a-6978-8796-a5b4c3d2e1f0"));
        check(hidden_value(p, &redacting, "DOTNET_DiagnosticPorts", "user:Winter2025!"));
        check(hidden_value(p, &redacting, "DOTNET_GCHeapHardLimit", "48213907"));
        check(hidden_value(p, &redacting, "HOSTNAME", "JBSWY3DPEHPK3PXP"));
        check(hidden_value(p, &redacting, "ASPNETCORE_URLS", "https://hooks.example.com/hooks/catch/4821390/k3j5h6g/"));
        check(!hidden_value(p, &redacting, "DOTNET_GCHeapHardLimit", "0x10000000"));
        check(!hidden_value(p, &revealing, "PGPASS", "x"));
        policy_unref(p);
}

static void test_env_reveal(void) {
        Policy *p = compile_ok("[[rule]]\nname = \"env-plain\"\nusers = [\"bob\"]\ncommands = [\"env\"]\n"
                               "targets.users = [\"svc-orders\"]\n"
                               "[[rule]]\nname = \"env-all\"\nusers = [\"carol\"]\ncommands = [\"env\", \"info\"]\n"
                               "targets.users = [\"svc-orders\"]\nenv_reveal = true\n");
        PolicyVerdict v;

        /* a rule without env_reveal: the values env_redact matches are withheld */
        v = decide(p, &bob, target(2001, NULL, NULL), CMD(POLICY_COMMAND_ENV));
        check(v.allowed && !v.env_reveal && hidden(p, &v, "DB_PASSWORD") && !hidden(p, &v, "PATH"));
        /* with it, nothing is */
        v = decide(p, &carol, target(2001, NULL, NULL), CMD(POLICY_COMMAND_ENV));
        check(v.allowed && v.env_reveal && !hidden(p, &v, "DB_PASSWORD"));
        /* root and a process's own user read the environment anyway (/proc/PID/environ, the socket) */
        v = decide(p, &root, target(2001, NULL, NULL), CMD(POLICY_COMMAND_ENV));
        check(v.allowed && v.env_reveal && !hidden(p, &v, "DB_PASSWORD"));
        v = decide(p, &alice, target(1001, NULL, NULL), CMD(POLICY_COMMAND_ENV));
        check(v.allowed && strcmp(v.rule_name, POLICY_RULE_OWNER) == 0 && v.env_reveal);
        /* a rule without env does not grant it */
        v = decide(p, &alice, target(2001, NULL, NULL), CMD(POLICY_COMMAND_ENV));
        check(!v.allowed && !v.env_reveal);
        policy_unref(p);
}

static void test_env_redact_setting(void) {
        Policy *mine = compile_ok("[agent]\nenv_redact = [\"MY_*\", \"LANG\"]\n");
        Policy *none = compile_ok("[agent]\nenv_redact = []\n");
        PolicyVerdict redacting = { .allowed = true };

        /* the policy's list replaces the built-in deny list, and withholds names of the allow list */
        check(mine && mine->agent.env_redact.n == 2);
        check(mine && hidden(mine, &redacting, "my_thing") && hidden(mine, &redacting, "LANG"));
        check(mine && !hidden(mine, &redacting, "PATH") && !hidden(mine, &redacting, "TZ"));
        /* an empty one withholds nothing more than the allow list does: a secret name stays hidden */
        check(none && none->agent.env_redact.n == 0 && hidden(none, &redacting, "DB_PASSWORD"));
        check(none && hidden(none, &redacting, "DOTNET_API_KEY") && !hidden(none, &redacting, "PATH"));
        policy_unref(mine);
        policy_unref(none);

        compile_fails("[agent]\nenv_redact = \"*KEY*\"\n", NULL, 2, 14, "must be a list");
        compile_fails("[agent]\nenv_redact = [\"A=B\"]\n", NULL, 2, 15, "bad pattern \"A=B\"");
        compile_fails("[agent]\nenv_redact = [\"[AB]*\"]\n", NULL, 2, 15, "bad pattern");
        compile_fails("[agent]\nenv_redact = [\"*KEY*\", \"*KEY*\"]\n", NULL, 2, 24, "lists \"*KEY*\" twice");
        compile_fails("[agent]\nenv_redact = [1]\n", NULL, 2, 15, "must list non-empty strings");
        compile_fails("[agent]\nowner_access = true\n", "[agent]\nenv_redact = []\n", 1, 2,
                      "[agent] belongs in the main policy file");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\nenv_reveal = true\n", NULL, 6, 1,
                      "env_reveal given, but the rule does not grant 'env'");
        compile_fails(RULE_HEAD "commands = [\"env\"]\ntargets.any = true\nenv_reveal = \"yes\"\n", NULL, 6, 14,
                      "must be a boolean");
        /* so does the other flag of a rule: the error refuses the policy, it does not merely print */
        compile_fails(RULE_HEAD "commands = [\"setenv\"]\ntargets.any = true\nallow_code_injection = \"yes\"\n",
                      NULL, 6, 24, "must be a boolean");
}

/* env_show: a rule widens the allow list for its grantees, never past what looks secret */
static void test_env_show(void) {
        Policy *p = compile_ok("[agent]\nenv_redact = [\"APP_INTERNAL*\"]\n"
                               "[[rule]]\nname = \"env-wide\"\nusers = [\"bob\"]\ncommands = [\"env\"]\n"
                               "targets.users = [\"svc-orders\"]\nenv_show = [\"Logging__*\", \"APP_*\"]\n"
                               "[[rule]]\nname = \"env-plain\"\nusers = [\"carol\"]\ncommands = [\"env\"]\n"
                               "targets.users = [\"svc-orders\"]\n");
        PolicyVerdict wide, plain;

        check(p && p->n_rules == 2 && p->rules[0].env_show.n == 2);
        if (!p)
                return;
        wide = decide(p, &bob, target(2001, NULL, NULL), CMD(POLICY_COMMAND_ENV));
        plain = decide(p, &carol, target(2001, NULL, NULL), CMD(POLICY_COMMAND_ENV));
        check(wide.allowed && plain.allowed && !wide.env_reveal);
        check(!hidden_value(p, &wide, "Logging__LogLevel__Default", "Information"));
        check(!hidden_value(p, &wide, "app_mode", "blue"));
        check(hidden_value(p, &plain, "Logging__LogLevel__Default", "Information"));
        check(hidden_value(p, &plain, "APP_MODE", "blue"));
        /* shown names still hide what looks secret, by value and by name, and what env_redact names */
        check(hidden_value(p, &wide, "APP_REDIS", "cache:6379,password=x"));
        check(hidden_value(p, &wide, "APP_API_KEY", "1"));
        check(hidden_value(p, &wide, "APP_INTERNAL_URL", "http://x"));
        check(!hidden_value(p, &wide, "PATH", "/usr/bin"));
        policy_unref(p);

        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\nenv_show = [\"A_*\"]\n", NULL, 6, 1,
                      "env_show given, but the rule does not grant 'env'");
        compile_fails(RULE_HEAD "commands = [\"env\"]\ntargets.any = true\nenv_reveal = true\nenv_show = [\"A\"]\n",
                      NULL, 7, 1, "env_reveal = true shows every value already");
        compile_fails(RULE_HEAD "commands = [\"env\"]\ntargets.any = true\nenv_show = [\"A=B\"]\n", NULL, 6, 13,
                      "bad pattern \"A=B\" in 'env_show'");
        compile_fails(RULE_HEAD "commands = [\"env\"]\ntargets.any = true\nenv_show = []\n", NULL, 6, 12,
                      "'env_show' must not be an empty list");
        compile_fails(RULE_HEAD "commands = [\"env\"]\ntargets.any = true\nenv_show = \"A\"\n", NULL, 6, 12,
                      "must be a list");
        compile_fails(RULE_HEAD "commands = [\"env\"]\ntargets.any = true\nenv_show = [\"A\", \"A\"]\n", NULL, 6,
                      18, "lists \"A\" twice");
}

/* [[port]]: what a port needs, what it defaults to, whose runtimes it admits */
static void test_ports(void) {
        Policy *p = compile_ok("[[port]]\npath = \"/run/dsagent/ports/a.sock\"\nusers = [\"svc-orders\"]\n"
                               "[[port]]\npath = \"/run/dsagent/ports/b.sock\"\ngroups = [\"ops\"]\n"
                               "suspend_timeout = \"0\"\n"
                               "[[port]]\npath = \"/run/dsagent/ports/c.sock\"\nusers = [\"uid:4242\"]\n"
                               "suspend_timeout = \"2m\"\n");
        const gid_t ops[] = { 100, 3001 };

        check(p && p->n_ports == 3);
        if (!p)
                return;
        check(p->agent.max_runtimes_per_user == POLICY_RUNTIMES_PER_USER_DEFAULT);
        check(strcmp(p->ports[0].path, "/run/dsagent/ports/a.sock") == 0);
        check(p->ports[0].suspend_timeout_usec == POLICY_SUSPEND_TIMEOUT_DEFAULT_USEC);
        check(p->ports[1].suspend_timeout_usec == 0);
        check(p->ports[2].suspend_timeout_usec == 120 * 1000000ULL);
        check(policy_port_admits(&p->ports[0], 2001, (const gid_t[]){ 2001 }, 1));
        check(!policy_port_admits(&p->ports[0], 2002, (const gid_t[]){ 3001 }, 1));
        check(policy_port_admits(&p->ports[1], 1001, ops, 2));  /* a supplementary group */
        check(!policy_port_admits(&p->ports[1], 1001, ops, 1));
        check(policy_port_admits(&p->ports[2], 4242, (const gid_t[]){ 4242 }, 1));
        policy_unref(p);

        p = compile_ok("[agent]\nmax_runtimes_per_user = 3\n");
        check(p && p->agent.max_runtimes_per_user == 3);
        check(p && p->agent.target_cache_ms == POLICY_TARGET_CACHE_MS_DEFAULT);
        policy_unref(p);
        p = compile_ok("[agent]\ntarget_cache_ms = 0\n");
        check(p && p->agent.target_cache_ms == 0);
        policy_unref(p);
        p = compile_ok("[agent]\ntarget_cache_ms = 10000\n");
        check(p && p->agent.target_cache_ms == 10000);
        policy_unref(p);
        compile_fails("[agent]\ntarget_cache_ms = 10001\n", NULL, 2, 19, "must be 0 to 10000");
        compile_fails("[agent]\ntarget_cache_ms = -1\n", NULL, 2, 19, "must be 0 to 10000");
        compile_fails("[agent]\ntarget_cache_ms = \"1s\"\n", NULL, 2, 19, "target_cache_ms");

        compile_fails("[[port]]\npath = \"run/a.sock\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/run/../a.sock\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/run/a/\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/run/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                      "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\nusers = [\"bob\"]\n", NULL, 2, 8, "at most 106 bytes");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\n", NULL, 1, 1, "needs 'users' or 'groups'");
        compile_fails("[[port]]\nusers = [\"bob\"]\n", NULL, 1, 1, "needs a 'path'");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\nsuspend_timeout = \"2h\"\n", NULL,
                      4, 19, "suspend_timeout");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\nmode = \"0666\"\n", NULL, 4, 1,
                      "unknown key 'mode' in [[port]]");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\n",
                      "[[port]]\npath = \"/run/a.sock\"\ngroups = [\"ops\"]\n", 1, 1, "already defined at");
        compile_fails("[agent]\nmax_runtimes_per_user = 0\n", NULL, 2, 25, "must be 1 to 4096");
}

/* The compile must fail with @expected somewhere, wherever it is reported. */
static void compile_fails_anywhere(const char *text, const char *expected) {
        PolicyDiagnostics d = {};
        Policy *p = compile2(text, NULL, &d);
        bool found = false;

        for (size_t i = 0; i < d.n; i++)
                if (strstr(d.messages[i], expected))
                        found = true;
        check(p == NULL);
        check(found);
        if (!found)
                printf("# wanted %s, got %zu messages\n", expected, d.n);
        policy_unref(p);
        policy_diagnostics_done(&d);
}

/* [[port]], the edges: paths at and past sun_path, every spelling of zero, policy.d, the limits */
static void test_port_limits(void) {
        char path[POLICY_PORT_PATH_MAX + 1], text[16384];
        PolicyDiagnostics d = {};
        Policy *p, *builtin = policy_new_builtin();
        size_t n = 0;

        check(builtin && builtin->agent.max_runtimes_per_user == 64 && builtin->n_ports == 0);
        policy_unref(builtin);

        /* 106 bytes and the NUL fill sun_path exactly */
        memset(path, 'x', POLICY_PORT_PATH_MAX - 1);
        memcpy(path, "/run/", 5);
        path[POLICY_PORT_PATH_MAX - 1] = '\0';
        snprintf(text, sizeof(text), "[[port]]\npath = \"%s\"\nusers = [\"bob\"]\nsuspend_timeout = \"0s\"\n", path);
        p = compile_ok(text);
        check(p && strlen(p->ports[0].path) == 106 && p->ports[0].suspend_timeout_usec == 0);
        policy_unref(p);
        p = compile_ok("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\nsuspend_timeout = \"1h\"\n");
        check(p && p->ports[0].suspend_timeout_usec == POLICY_SUSPEND_TIMEOUT_MAX_USEC);
        policy_unref(p);

        /* in policy.d too, and named there in messages */
        p = compile2("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\n",
                     "\n[[port]]\npath = \"/run/b.sock\"\ngroups = [\"gid:3001\"]\n", &d);
        check(p && p->n_ports == 2);
        check(p && strcmp(p->ports[1].file, "policy.d/10-extra.toml") == 0 && p->ports[1].line == 2);
        check(p && policy_port_admits(&p->ports[1], 1001, alice_groups, 2));
        check(p && !policy_port_admits(&p->ports[1], 3001, (const gid_t[]){ 1001 }, 1)); /* a gid, not a uid */
        policy_unref(p);
        policy_diagnostics_done(&d);

        compile_fails("[[port]]\npath = \"/run/./a.sock\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/run//a.sock\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/run/..\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/run/.\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/\"\nusers = [\"bob\"]\n", NULL, 2, 8, "absolute path");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = []\n", NULL, 3, 9, "must not be an empty list");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = [\"mallory\"]\n", NULL, 3, 10,
                      "unknown user \"mallory\"");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\nsuspend_timeout = \"soon\"\n", NULL,
                      4, 19, "bad duration \"soon\" for 'suspend_timeout'");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\nsuspend_timeout = \"1h1s\"\n", NULL,
                      4, 19, "at most \"1h\"");
        compile_fails("[[port]]\npath = \"/run/a.sock\"\nusers = [\"bob\"]\nsuspend_timeout = 30\n", NULL, 4, 19,
                      "must be a string");
        compile_fails("[agent]\nmax_runtimes_per_user = 4097\n", NULL, 2, 25, "must be 1 to 4096");
        p = compile_ok("[agent]\nmax_runtimes_per_user = 4096\n");
        check(p && p->agent.max_runtimes_per_user == 4096);
        policy_unref(p);

        text[0] = '\0';
        for (int i = 0; i <= POLICY_PORTS_MAX; i++)
                n += (size_t)snprintf(text + n, sizeof(text) - n,
                                      "[[port]]\npath = \"/run/%d.sock\"\nusers = [\"bob\"]\n", i);
        compile_fails_anywhere(text, "at most 16 [[port]]s");
}

/* ---- [[on_start]] ---- */

static const char on_start_policy[] =
        "[[on_start]]\n"
        "name = \"orders-cpu\"\n"
        "targets.users = [\"svc-orders\"]\n"
        "targets.units = [\"orders.service\"]\n"
        "trace_profile = \"cpu-sampling\"\n"
        "duration = \"30s\"\n"
        "\n"
        "[[on_start]]\n"
        "name = \"billing-gc\"\n"
        "targets.names = [\"Billing.Api\"]\n"
        "trace_providers = [\"Microsoft-Windows-DotNETRuntime:0x1\", \"My-Source\"]\n"
        "duration = \"1m\"\n"
        "max_size = \"100M\"\n"
        "readers = [\"bob\", \"group:ops\", \"uid:4242\"]\n"
        "\n"
        "[[on_start]]\n"
        "name = \"everything\"\n"
        "targets.any = true\n"
        "trace_profile = \"gc-collect\"\n"
        "duration = \"5s\"\n"
        "readers = []\n";

static void test_on_start(void) {
        Policy *p = compile_ok(on_start_policy);
        const PolicyOnStart *o;

        check(p && p->n_on_start == 3);
        if (!p || p->n_on_start != 3)
                return;
        o = &p->on_start[0];
        check(strcmp(o->name, "orders-cpu") == 0 && strcmp(o->file, "policy.toml") == 0 && o->line == 1);
        check(!o->targets.any && o->targets.users.n == 1 && o->targets.users.ids[0] == 2001);
        check(o->targets.units.n == 1 && o->targets.names.n == 0);
        check(strcmp(o->trace_profile, "cpu-sampling") == 0 && o->n_trace_providers == 0);
        check(o->duration_usec == 30000000ULL);
        check(o->max_size == p->agent.max_trace_size); /* the default: the agent's own limit */
        check(o->reader_users.n == 0 && o->reader_groups.n == 0);

        o = &p->on_start[1];
        check(o->line == 8 && !o->trace_profile && o->n_trace_providers == 2);
        check(strcmp(o->trace_providers[0].name, "Microsoft-Windows-DotNETRuntime") == 0 &&
              o->trace_providers[0].keywords == 0x1);
        check(strcmp(o->trace_providers[1].name, "My-Source") == 0 && o->trace_providers[1].keywords == UINT64_MAX);
        check(o->duration_usec == 60000000ULL && o->max_size == 100ULL << 20);
        check(o->reader_users.n == 2 && o->reader_users.ids[0] == 1002 && o->reader_users.ids[1] == 4242);
        check(o->reader_groups.n == 1 && o->reader_groups.ids[0] == 3001);

        o = &p->on_start[2];
        check(o->targets.any && strcmp(o->trace_profile, "gc-collect") == 0);
        check(o->reader_users.n == 0 && o->reader_groups.n == 0); /* readers = []: root alone */
        policy_unref(p);
}

/* [[on_start]] is held to the [agent] limits, wherever [agent] stands, and may live in policy.d */
#define AGENT_LIMITS "[agent]\nmax_session_duration = \"10m\"\nmax_trace_size = \"200M\"\n"

static void test_on_start_agent_limits(void) {
        PolicyDiagnostics d = {};
        Policy *p;

        p = compile_ok(AGENT_LIMITS "[[on_start]]\nname = \"s\"\ntargets.any = true\ntrace_profile = \"cpu-sampling\"\n"
                       "duration = \"10m\"\n");
        check(p && p->on_start[0].duration_usec == 600000000ULL && p->on_start[0].max_size == 200ULL << 20);
        policy_unref(p);

        /* [agent] after the tables that depend on it */
        p = compile_ok("[[on_start]]\nname = \"s\"\ntargets.any = true\ntrace_profile = \"cpu-sampling\"\n"
                       "duration = \"2h\"\nmax_size = \"2G\"\n"
                       "[agent]\nmax_session_duration = \"3h\"\nmax_trace_size = \"4G\"\n");
        check(p && p->on_start[0].duration_usec == 7200000000ULL && p->on_start[0].max_size == 2ULL << 30);
        policy_unref(p);

        p = compile2(AGENT_LIMITS, "[[on_start]]\nname = \"s\"\ntargets.units = [\"a.service\"]\n"
                                   "trace_providers = [\"My-Source\"]\nduration = \"1m\"\n", &d);
        check(p && p->n_on_start == 1 && strcmp(p->on_start[0].file, "policy.d/10-extra.toml") == 0);
        check(p && p->on_start[0].max_size == 200ULL << 20);
        policy_unref(p);
        policy_diagnostics_done(&d);

        compile_fails(AGENT_LIMITS,
                      "[[on_start]]\nname = \"s\"\ntargets.any = true\ntrace_profile = \"cpu-sampling\"\n"
                      "duration = \"11m\"\n", 5, 12, "at most max_session_duration (600s), not 660s");
        compile_fails(AGENT_LIMITS,
                      "[[on_start]]\nname = \"s\"\ntargets.any = true\ntrace_profile = \"cpu-sampling\"\n"
                      "duration = \"1m\"\nmax_size = \"201M\"\n", 6, 12, "at most max_trace_size");
}

#define ON_START_HEAD "[[on_start]]\nname = \"s\"\ntargets.users = [\"svc-orders\"]\n"
#define ON_START_OK ON_START_HEAD "trace_profile = \"cpu-sampling\"\nduration = \"5s\"\n"

static void test_on_start_errors(void) {
        char text[16384];
        size_t n = 0;

        compile_fails(ON_START_HEAD "trace_profile = \"cpu-sampling\"\ntrace_providers = [\"A\"]\nduration = \"5s\"\n",
                      NULL, 5, 1, "trace_profile or trace_providers, not both");
        compile_fails(ON_START_HEAD "duration = \"5s\"\n", NULL, 1, 1, "needs a trace_profile or trace_providers");
        compile_fails(ON_START_HEAD "trace_profile = \"cpu\"\nduration = \"5s\"\n", NULL, 4, 17,
                      "unknown trace profile \"cpu\"");
        compile_fails(ON_START_HEAD "trace_profile = [\"cpu-sampling\"]\nduration = \"5s\"\n", NULL, 4, 17,
                      "must be a string");
        compile_fails(ON_START_HEAD "trace_providers = [\"A:12\"]\nduration = \"5s\"\n", NULL, 4, 20,
                      "bad provider \"A:12\"");
        compile_fails(ON_START_HEAD "trace_profile = \"cpu-sampling\"\n", NULL, 1, 1, "needs a duration");
        compile_fails(ON_START_HEAD "trace_profile = \"cpu-sampling\"\nduration = \"2h\"\n", NULL, 5, 12,
                      "at most max_session_duration (3600s)");
        compile_fails(ON_START_HEAD "trace_profile = \"cpu-sampling\"\nduration = \"0s\"\n", NULL, 5, 12,
                      "bad duration \"0s\"");
        compile_fails(ON_START_OK "max_size = \"2G\"\n", NULL, 6, 12, "at most max_trace_size (1073741824 bytes)");
        compile_fails(ON_START_OK "max_size = \"10%\"\n", NULL, 6, 12, "bad size \"10%\" for 'max_size'");
        compile_fails(ON_START_OK ON_START_OK, NULL, 6, 1, "on_start name 's' is already used at policy.toml:1");
        compile_fails(ON_START_OK, ON_START_OK, 1, 1, "on_start name 's' is already used at policy.toml:1");
        /* a rule may have the same name: they are different things */
        policy_unref(compile_ok(ON_START_OK "[[rule]]\nname = \"s\"\nusers = [\"bob\"]\ncommands = [\"info\"]\n"
                                            "targets.any = true\n"));
        compile_fails("[[on_start]]\ntargets.any = true\ntrace_profile = \"cpu-sampling\"\nduration = \"5s\"\n", NULL,
                      1, 1, "[[on_start]] needs a name");
        compile_fails("[[on_start]]\nname = \"x y\"\ntargets.any = true\ntrace_profile = \"cpu-sampling\"\n"
                      "duration = \"5s\"\n", NULL, 2, 8, "on_start name must be 1-64");
        compile_fails("[[on_start]]\nname = \"s\"\ntrace_profile = \"cpu-sampling\"\nduration = \"5s\"\n", NULL, 1, 1,
                      "[[on_start]] needs targets");
        compile_fails("[[on_start]]\nname = \"s\"\ntargets.users = [\"mallory\"]\ntrace_profile = \"cpu-sampling\"\n"
                      "duration = \"5s\"\n", NULL, 3, 18, "unknown user \"mallory\"");
        compile_fails("[[on_start]]\nname = \"s\"\ntargets.any = true\ntargets.names = [\"A\"]\n"
                      "trace_profile = \"cpu-sampling\"\nduration = \"5s\"\n", NULL, 3, 9, "cannot be combined");
        compile_fails("[[on_start]]\nname = \"s\"\ntargets.hosts = [\"x\"]\ntrace_profile = \"cpu-sampling\"\n"
                      "duration = \"5s\"\n", NULL, 3, 9, "unknown key 'targets.hosts'");
        compile_fails(ON_START_OK "readers = [\"group:wheel\"]\n", NULL, 6, 12, "unknown group \"wheel\"");
        compile_fails(ON_START_OK "readers = \"bob\"\n", NULL, 6, 11, "must be a list");
        compile_fails(ON_START_OK "commands = [\"trace\"]\n", NULL, 6, 1, "unknown key 'commands' in [[on_start]]");
        compile_fails("on_start = 1\n", NULL, 1, 12, "'on_start' must be a list");

        text[0] = '\0';
        for (int i = 0; i <= POLICY_ON_START_MAX; i++)
                n += (size_t)snprintf(text + n, sizeof(text) - n,
                                      "[[on_start]]\nname = \"s%d\"\ntargets.any = true\n"
                                      "trace_profile = \"cpu-sampling\"\nduration = \"5s\"\n", i);
        check(n < sizeof(text));
        compile_fails_anywhere(text, "at most 64 [[on_start]]s");
}

/* ---- [[collect]] ---- */

static const char collect_policy[] =
        "[[collect]]\n"
        "name = \"queue-backlog\"\n"
        "targets.users = [\"svc-orders\"]\n"
        "when.counter = \"Bars.Target:bars-queue-depth[queue=bars-q2,region=eu]\"\n"
        "when.above = 300\n"
        "when.for = \"2s\"\n"
        "then.dump = \"mini\"\n"
        "readers = [\"group:ops\", \"bob\"]\n"
        "limit = \"2/1h\"\n"
        "limit_total = \"20/1d\"\n"
        "\n"
        "[[collect]]\n"
        "name = \"marker-exceptions\"\n"
        "targets.any = true\n"
        "when.exception = \"BarsMarkerException\"\n"
        "when.count = 2\n"
        "when.within = \"10s\"\n"
        "then.stacks = true\n"
        "\n"
        "[[collect]]\n"
        "name = \"low-threads\"\n"
        "targets.units = [\"orders.service\"]\n"
        "when.counter = \"System.Runtime:threadpool-thread-count\"\n"
        "when.below = 2\n"
        "then.trace_profile = \"cpu-sampling\"\n"
        "then.duration = \"30s\"\n"
        "readers = []\n";

static void test_collect(void) {
        Policy *p = compile_ok(collect_policy);
        const PolicyCollect *c;

        check(p && p->n_collect == 3);
        if (!p || p->n_collect != 3) {
                policy_unref(p);
                return;
        }
        c = &p->collect[0];
        check(strcmp(c->name, "queue-backlog") == 0 && strcmp(c->file, "policy.toml") == 0 && c->line == 1);
        check(c->targets.users.n == 1 && c->targets.users.ids[0] == 2001);
        check(c->when == POLICY_COLLECT_WHEN_COUNTER && strcmp(c->counter_provider, "Bars.Target") == 0 &&
              strcmp(c->counter_name, "bars-queue-depth") == 0);
        check(c->n_counter_tags == 2 && strcmp(c->counter_tags[0].key, "queue") == 0 &&
              strcmp(c->counter_tags[0].value, "bars-q2") == 0 && strcmp(c->counter_tags[1].key, "region") == 0 &&
              strcmp(c->counter_tags[1].value, "eu") == 0);
        check(c->has_above && !c->has_below && c->above == 300 && c->for_usec == 2000000ULL);
        check(c->then == POLICY_COLLECT_THEN_DUMP && c->dump_type == POLICY_DUMP_MINI);
        check(c->reader_groups.n == 1 && c->reader_groups.ids[0] == 3001 && c->reader_users.n == 1 &&
              c->reader_users.ids[0] == 1002);
        check(c->limit.count == 2 && c->limit.period_usec == 3600000000ULL);
        check(c->limit_total.count == 20 && c->limit_total.period_usec == 86400000000ULL);

        c = &p->collect[1];
        check(c->targets.any && c->when == POLICY_COLLECT_WHEN_EXCEPTION &&
              strcmp(c->exception_type, "BarsMarkerException") == 0 && c->exception_count == 2 &&
              c->within_usec == 10000000ULL);
        check(c->then == POLICY_COLLECT_THEN_STACKS);
        /* no readers: root's alone; no limit: once an hour */
        check(c->reader_users.n == 0 && c->reader_groups.n == 0);
        check(c->limit.count == 1 && c->limit.period_usec == 3600000000ULL);
        /* no limit_total: ten an hour over all the processes the table covers */
        check(c->limit_total.count == 10 && c->limit_total.period_usec == 3600000000ULL);

        c = &p->collect[2];
        check(!c->has_above && c->has_below && c->below == 2 && c->for_usec == 0 && c->n_counter_tags == 0);
        check(c->then == POLICY_COLLECT_THEN_TRACE && strcmp(c->trace_profile, "cpu-sampling") == 0 &&
              c->duration_usec == 30000000ULL);
        policy_unref(p);
}

/* [[collect]] lives in policy.d too, held to [agent]'s max_session_duration wherever [agent] stands */
static void test_collect_dropin(void) {
        PolicyDiagnostics d = {};
        Policy *p = compile2("[agent]\nmax_session_duration = \"1m\"\n",
                             "[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                             "then.trace_profile = \"cpu-sampling\"\nthen.duration = \"1m\"\n", &d);

        check(p && p->n_collect == 1 && strcmp(p->collect[0].file, "policy.d/10-extra.toml") == 0);
        policy_unref(p);
        policy_diagnostics_done(&d);
        compile_fails("[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                      "then.trace_profile = \"cpu-sampling\"\nthen.duration = \"61s\"\n[agent]\n"
                      "max_session_duration = \"1m\"\n", NULL, 6, 17, "at most max_session_duration (60s)");
}

#define COLLECT_HEAD "[[collect]]\nname = \"c\"\ntargets.users = [\"svc-orders\"]\n"
#define COLLECT_COUNTER COLLECT_HEAD "when.counter = \"System.Runtime:cpu-usage\"\n"
#define COLLECT_OK COLLECT_COUNTER "when.above = 90\nthen.dump = \"mini\"\n"

/* then.flame: the trace's flame graph beside it, only with a trace_profile whose trace has CPU samples to draw */
static void test_collect_flame(void) {
        Policy *p = compile_ok(COLLECT_COUNTER "when.above = 90\nthen.trace_profile = \"cpu-sampling\"\n"
                               "then.duration = \"5s\"\nthen.flame = true\n"
                               "[[collect]]\nname = \"d\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                               "then.trace_profile = \"dotnet-sampled-thread-time\"\nthen.duration = \"5s\"\n"
                               "[[collect]]\nname = \"e\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                               "then.trace_profile = \"cpu-sampling\"\nthen.duration = \"5s\"\nthen.flame = false\n");

        check(p && p->n_collect == 3);
        if (p && p->n_collect == 3)
                check(p->collect[0].flame && !p->collect[1].flame && !p->collect[2].flame);
        policy_unref(p);
        /* no trace: nothing to draw of */
        compile_fails(COLLECT_OK "then.flame = true\n", NULL, 7, 6,
                      "'then.flame' goes with 'then.trace_profile' only");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = true\nthen.flame = true\n", NULL, 7, 6,
                      "'then.flame' goes with 'then.trace_profile' only");
        /* a trace without the sample profiler has no stacks */
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.trace_profile = \"gc-verbose\"\nthen.duration = \"5s\"\n"
                      "then.flame = true\n", NULL, 8, 6,
                      "'then.flame' needs a trace profile that samples CPU: \"gc-verbose\" has no "
                      "Microsoft-DotNETCore-SampleProfiler, so its trace has no stacks to draw (these have: "
                      "cpu-sampling, dotnet-sampled-thread-time)");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.trace_profile = \"cpu-sampling\"\nthen.duration = \"5s\"\n"
                      "then.flame = \"yes\"\n", NULL, 8, 14, "must be a boolean");
}

/* then.counters: true for dsctl counters' own default, or the providers; then.duration optional */
static void test_collect_counters(void) {
        Policy *p = compile_ok(COLLECT_COUNTER "when.above = 90\nthen.counters = true\n"
                               "[[collect]]\nname = \"d\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                               "then.counters = [\"System.Runtime\", \"Bars.Target\"]\nthen.duration = \"5s\"\n");
        const PolicyCollect *c;

        check(p && p->n_collect == 2);
        if (!p || p->n_collect != 2) {
                policy_unref(p);
                return;
        }
        c = &p->collect[0];
        /* what dsctl counters shows unless told, for as long as dotnet-monitor's CollectLiveMetrics */
        check(c->then == POLICY_COLLECT_THEN_COUNTERS && c->counters_providers.n == 1 &&
              strcmp(c->counters_providers.items[0], "System.Runtime") == 0 && c->duration_usec == 30000000ULL);
        check(!c->trace_profile);
        c = &p->collect[1];
        check(c->then == POLICY_COLLECT_THEN_COUNTERS && c->counters_providers.n == 2 &&
              strcmp(c->counters_providers.items[0], "System.Runtime") == 0 &&
              strcmp(c->counters_providers.items[1], "Bars.Target") == 0 && c->duration_usec == 5000000ULL);
        policy_unref(p);

        /* the default is cut to max_session_duration, wherever [agent] stands */
        p = compile_ok(COLLECT_COUNTER "when.above = 90\nthen.counters = true\n[agent]\nmax_session_duration = \"10s\"\n");
        check(p && p->n_collect == 1 && p->collect[0].duration_usec == 10000000ULL);
        policy_unref(p);

        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = false\n", NULL, 6, 6,
                      "'then.counters = false' means nothing");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = \"System.Runtime\"\n", NULL, 6, 17,
                      "'then.counters' is true or a list of providers");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = []\n", NULL, 6, 17, "must not be an empty list");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = [\"A\", \"A\"]\n", NULL, 6, 23,
                      "lists \"A\" twice");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = [\"System.Runtime[cpu-usage]\"]\n", NULL, 6, 18,
                      "bad provider name \"System.Runtime[cpu-usage]\" in 'then.counters'");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = [\"System.Diagnostics.Metrics\"]\n", NULL, 6, 18,
                      "bad provider name \"System.Diagnostics.Metrics\"");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\","
                      "\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]\n", NULL, 6, 17,
                      "'then.counters' names at most 16 providers");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = true\nthen.stacks = true\n", NULL, 7, 6,
                      "'then.counters' and 'then.stacks': one action a table");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = true\nthen.duration = \"2h\"\n", NULL, 7, 17,
                      "at most max_session_duration (3600s)");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.counters = true\nthen.duration = \"0s\"\n", NULL, 7, 17,
                      "bad duration");
}

static void test_collect_errors(void) {
        char text[32768];
        size_t n = 0;

        policy_unref(compile_ok(COLLECT_OK));
        /* what a table must have */
        compile_fails("[[collect]]\ntargets.any = true\nwhen.exception = \"E\"\nthen.stacks = true\n", NULL, 1, 1,
                      "[[collect]] needs a name");
        compile_fails("[[collect]]\nname = \"c\"\nwhen.exception = \"E\"\nthen.stacks = true\n", NULL, 1, 1,
                      "[[collect]] needs targets");
        compile_fails(COLLECT_HEAD "then.stacks = true\n", NULL, 1, 1, "[[collect]] needs a trigger");
        compile_fails(COLLECT_COUNTER "when.above = 90\n", NULL, 1, 1, "[[collect]] needs an action");
        compile_fails(COLLECT_HEAD "when.for = \"2s\"\nthen.stacks = true\n", NULL, 4, 1, "'when' needs a trigger");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nthen = {}\n", NULL, 5, 1, "'then' needs an action");
        /* unknown keys, wherever they stand */
        compile_fails(COLLECT_OK "commands = [\"dump\"]\n", NULL, 7, 1, "unknown key 'commands' in [[collect]]");
        compile_fails(COLLECT_OK "when.every = \"1s\"\n", NULL, 7, 6, "unknown key 'when.every'");
        compile_fails(COLLECT_OK "then.upload = \"s3\"\n", NULL, 7, 6, "unknown key 'then.upload'");
        {
                /* then.gcdump: a heap dump, with no setting of its own */
                Policy *p = compile_ok(COLLECT_COUNTER "when.above = 90\nthen.gcdump = true\n");

                check(p && p->n_collect == 1 && p->collect[0].then == POLICY_COLLECT_THEN_GCDUMP &&
                      !p->collect[0].trace_profile && p->collect[0].duration_usec == 0);
                policy_unref(p);
        }
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.gcdump = false\n", NULL, 6, 6,
                      "'then.gcdump = false' means nothing");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.gcdump = \"yes\"\n", NULL, 6, 15, "must be a boolean");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.stacks = true\nthen.gcdump = true\n", NULL, 7, 6,
                      "'then.stacks' and 'then.gcdump': one action");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.gcdump = true\nthen.duration = \"1s\"\n", NULL, 7, 6,
                      "'then.duration' goes with 'then.trace_profile', 'then.counters' or 'then.exceptions' only");
        {
                /* then.exceptions: dsctl exceptions' window unless then.duration says, cut to max_session_duration */
                Policy *p = compile_ok(COLLECT_HEAD "when.exception = \"E\"\nthen.exceptions = true\n"
                                       "[[collect]]\nname = \"d\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                                       "then.exceptions = true\nthen.duration = \"2s\"\n"
                                       "[[collect]]\nname = \"e\"\ntargets.any = true\nwhen.counter = \"A:b\"\n"
                                       "when.above = 1\nthen.exceptions = true\n");

                check(p && p->n_collect == 3);
                if (p && p->n_collect == 3) {
                        check(p->collect[0].then == POLICY_COLLECT_THEN_EXCEPTIONS &&
                              p->collect[0].duration_usec == POLICY_COLLECT_EXCEPTIONS_DEFAULT_USEC);
                        check(p->collect[1].then == POLICY_COLLECT_THEN_EXCEPTIONS &&
                              p->collect[1].duration_usec == 2000000ULL);
                        /* a counter table may take the exceptions thrown after it fired */
                        check(p->collect[2].then == POLICY_COLLECT_THEN_EXCEPTIONS);
                }
                policy_unref(p);
                p = compile_ok(COLLECT_HEAD "when.exception = \"E\"\nthen.exceptions = true\n"
                               "[agent]\nmax_session_duration = \"3s\"\n");
                check(p && p->n_collect == 1 && p->collect[0].duration_usec == 3000000ULL);
                policy_unref(p);
        }
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nthen.exceptions = false\n", NULL, 5, 6,
                      "'then.exceptions = false' means nothing");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nthen.exceptions = \"all\"\n", NULL, 5, 19,
                      "must be a boolean");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nthen.exceptions = true\nthen.stacks = true\n", NULL, 6, 6,
                      "'then.exceptions' and 'then.stacks': one action");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nthen.exceptions = true\nthen.duration = \"2h\"\n", NULL, 6,
                      17, "at most max_session_duration (3600s)");
        compile_fails(COLLECT_HEAD "when.crash = true\nthen.exceptions = true\n", NULL, 1, 1,
                      "a [[collect]] with when.crash takes then.core = true");
        compile_fails("collect = 1\n", NULL, 1, 11, "'collect' must be a list");
        compile_fails("collect = [1]\n", NULL, 1, 12, "'collect' must be an array of tables");
        /* every array of tables says the same of an item that is not one, at the item, and keeps the tables */
        compile_fails("rule = [1]\n", NULL, 1, 9, "'rule' must be an array of tables: [[rule]]");
        compile_fails("port = [\"x\"]\n", NULL, 1, 9, "'port' must be an array of tables: [[port]]");
        compile_fails("on_start = [{ name = \"a\" }, 2]\n", NULL, 1, 29, "'on_start' must be an array of tables");
        compile_fails(COLLECT_HEAD "when = \"x\"\nthen.stacks = true\n", NULL, 4, 8, "'when' must be a table");
        /* triggers: one, with its own keys only */
        compile_fails(COLLECT_COUNTER "when.exception = \"E\"\nwhen.above = 1\nthen.stacks = true\n", NULL, 5, 6,
                      "one of them: one trigger a table");
        compile_fails(COLLECT_COUNTER "then.stacks = true\n", NULL, 4, 6, "needs 'when.above' or 'when.below'");
        compile_fails(COLLECT_COUNTER "when.above = 1\nwhen.below = 1\nthen.stacks = true\n", NULL, 6, 6,
                      "'when.below' must be more than 'when.above' (between the two), not 1 <= 1");
        compile_fails(COLLECT_COUNTER "when.below = \"1\"\nthen.stacks = true\n", NULL, 5, 14, "must be a integer");
        {
                Policy *p = compile_ok(COLLECT_COUNTER "when.above = -5\nwhen.below = 10\nthen.stacks = true\n");
                check(p && p->collect[0].has_above && p->collect[0].above == -5 && p->collect[0].has_below &&
                      p->collect[0].below == 10);
                policy_unref(p);
        }
        compile_fails(COLLECT_COUNTER "when.above = \"90\"\nthen.stacks = true\n", NULL, 5, 14, "must be a integer");
        compile_fails(COLLECT_COUNTER "when.above = 1\nwhen.count = 2\nthen.stacks = true\n", NULL, 6, 6,
                      "'when.count' does not go with 'when.counter'");
        compile_fails(COLLECT_COUNTER "when.above = 1\nwhen.within = \"1s\"\nthen.stacks = true\n", NULL, 6, 6,
                      "'when.within' does not go with 'when.counter'");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nwhen.above = 1\nthen.stacks = true\n", NULL, 5, 6,
                      "'when.above' does not go with 'when.exception'");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nwhen.for = \"1s\"\nthen.stacks = true\n", NULL, 5, 6,
                      "'when.for' does not go with 'when.exception'");
        compile_fails(COLLECT_COUNTER "when.above = 1\nwhen.for = \"0s\"\nthen.stacks = true\n", NULL, 6, 12,
                      "bad duration \"0s\" for 'for'");
        compile_fails(COLLECT_COUNTER "when.above = 1\nwhen.for = \"31d\"\nthen.stacks = true\n", NULL, 6, 12,
                      "bad duration \"31d\" for 'for'");
        /* counters: Provider:name[k=v,...] */
        {
                static const char *const bad[] = {
                        "cpu-usage", ":cpu-usage", "System.Runtime:", "System Runtime:cpu", "System.Runtime:cpu usage",
                        "A:b[]", "A:b[k]", "A:b[k=]", "A:b[=v]", "A:b[k=v", "A:b[k=v,]", "A:b[k=v]x", "A:b[k=v][k=w]",
                        "A:b:c", "A:b[k=v=w]", "A:b[k=v,k2=v 2]", "A:b[a=1,b=2,c=3,d=4,e=5,f=6,g=7,h=8,i=9]",
                };
                for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                        char doc[512];
                        snprintf(doc, sizeof(doc), COLLECT_HEAD "when.counter = \"%s\"\nwhen.above = 1\n"
                                 "then.stacks = true\n", bad[i]);
                        compile_fails(doc, NULL, 4, 16, "bad counter");
                }
        }
        n = (size_t)snprintf(text, sizeof(text), COLLECT_HEAD "when.counter = \"A:");
        for (int i = 0; i < POLICY_COLLECT_TEXT_MAX; i++)
                text[n++] = 'x';
        n += (size_t)snprintf(text + n, sizeof(text) - n, "\"\nwhen.above = 1\nthen.stacks = true\n");
        compile_fails(text, NULL, 4, 16, "bad counter");
        /* exceptions */
        compile_fails(COLLECT_HEAD "when.exception = \"System..E\"\nthen.stacks = true\n", NULL, 4, 18,
                      "bad exception type");
        compile_fails(COLLECT_HEAD "when.exception = \"E x\"\nthen.stacks = true\n", NULL, 4, 18, "bad exception type");
        compile_fails(COLLECT_HEAD "when.exception = \".E\"\nthen.stacks = true\n", NULL, 4, 18, "bad exception type");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nwhen.count = 2\nthen.stacks = true\n", NULL, 5, 6,
                      "'when.count' above 1 needs 'when.within'");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nwhen.within = \"1s\"\nthen.stacks = true\n", NULL, 5, 6,
                      "'when.within' needs 'when.count' above 1");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nwhen.count = 0\nwhen.within = \"1s\"\nthen.stacks = true\n",
                      NULL, 5, 14, "'when.count' must be 1 to 1000");
        compile_fails(COLLECT_HEAD "when.exception = \"E\"\nwhen.count = 1001\nwhen.within = \"1s\"\n"
                      "then.stacks = true\n", NULL, 5, 14, "'when.count' must be 1 to 1000");
        /* actions: one, with its own keys only */
        compile_fails(COLLECT_OK "then.stacks = true\n", NULL, 7, 6, "'then.dump' and 'then.stacks': one action");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.dump = \"tiny\"\n", NULL, 6, 13, "unknown dump type \"tiny\"");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.dump = \"none\"\n", NULL, 6, 13, "unknown dump type");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.stacks = false\n", NULL, 6, 6, "means nothing");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.stacks = \"yes\"\n", NULL, 6, 15, "must be a boolean");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.trace_profile = \"cpu-sampling\"\n", NULL, 6, 6,
                      "'then.trace_profile' needs 'then.duration'");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.trace_profile = \"cpu\"\nthen.duration = \"5s\"\n", NULL, 6,
                      22, "unknown trace profile \"cpu\"");
        compile_fails(COLLECT_OK "then.duration = \"5s\"\n", NULL, 7, 6, "'then.duration' goes with 'then.trace_profile'");
        compile_fails(COLLECT_COUNTER "when.above = 90\nthen.trace_profile = \"cpu-sampling\"\nthen.duration = \"2h\"\n",
                      NULL, 7, 17, "at most max_session_duration (3600s)");
        /* readers, limit, name */
        compile_fails(COLLECT_OK "readers = [\"group:wheel\"]\n", NULL, 7, 12, "unknown group \"wheel\"");
        compile_fails(COLLECT_OK "readers = \"bob\"\n", NULL, 7, 11, "must be a list");
        compile_fails(COLLECT_OK "limit = \"1\"\n", NULL, 7, 9, "bad limit \"1\"");
        compile_fails(COLLECT_OK "limit = \"0/1h\"\n", NULL, 7, 9, "bad limit \"0/1h\"");
        compile_fails(COLLECT_OK "limit = 1\n", NULL, 7, 9, "must be a string");
        compile_fails(COLLECT_OK "limit = \"101/1h\"\n", NULL, 7, 9, "bad limit \"101/1h\"");
        policy_unref(compile_ok(COLLECT_OK "limit = \"100/1m\"\n"));
        compile_fails(COLLECT_OK "limit_total = \"0/1h\"\n", NULL, 7, 15, "bad limit_total \"0/1h\"");
        compile_fails(COLLECT_OK "limit_total = \"1001/1h\"\n", NULL, 7, 15, "bad limit_total \"1001/1h\"");
        compile_fails(COLLECT_OK "limit_total = 5\n", NULL, 7, 15, "must be a string");
        policy_unref(compile_ok(COLLECT_OK "limit_total = \"1000/1m\"\n"));
        compile_fails("[[collect]]\nname = \"a b\"\ntargets.any = true\nwhen.exception = \"E\"\nthen.stacks = true\n",
                      NULL, 2, 8, "collect name must be 1-64");
        compile_fails(COLLECT_OK COLLECT_OK, NULL, 7, 1, "collect name 'c' is already used at policy.toml:1");
        compile_fails(COLLECT_OK, COLLECT_OK, 1, 1, "collect name 'c' is already used at policy.toml:1");
        compile_fails(COLLECT_OK "targets.any = true\n", NULL, 7, 9, "cannot be combined");
        /* an [[on_start]] may share a table's name: they are different things */
        policy_unref(compile_ok(COLLECT_OK "[[on_start]]\nname = \"c\"\ntargets.any = true\n"
                                           "trace_profile = \"cpu-sampling\"\nduration = \"5s\"\n"));

        n = 0;
        for (int i = 0; i <= POLICY_COLLECT_MAX; i++)
                n += (size_t)snprintf(text + n, sizeof(text) - n,
                                      "[[collect]]\nname = \"c%d\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                                      "then.stacks = true\n", i);
        check(n < sizeof(text));
        compile_fails_anywhere(text, "at most 64 [[collect]]s");
}

static void test_collect_match(void) {
        Policy *p = compile_ok(collect_policy);
        PolicyTarget t;

        if (!p)
                return;
        const PolicyCollect *q = &p->collect[0], *e = &p->collect[1], *low = &p->collect[2];

        t = target(2001, NULL, "Orders.Api");
        check(policy_collect_covers(q, &t) && policy_collect_covers(e, &t) && !policy_collect_covers(low, &t));
        t = target(2002, "orders.service", "Orders.Api");
        check(!policy_collect_covers(q, &t) && policy_collect_covers(low, &t));

        /* every tag named, in either spelling, among others, in any order */
        check(policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", "queue=bars-q2,region=eu"));
        check(policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", "region=eu,host=a,queue=bars-q2"));
        check(policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", "region:eu, queue:bars-q2"));
        check(!policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", "queue=bars-q2"));
        check(!policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", "queue=bars-q22,region=eu"));
        check(!policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", "queue=bars-q,region=eu"));
        check(!policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", "xqueue=bars-q2,region=eu"));
        check(!policy_collect_counter_matches(q, "Bars.Target", "bars-queue-depth", NULL));
        check(!policy_collect_counter_matches(q, "Bars.Target", "bars-queue-length", "queue=bars-q2,region=eu"));
        check(!policy_collect_counter_matches(q, "bars.target", "bars-queue-depth", "queue=bars-q2,region=eu"));
        check(!policy_collect_counter_matches(e, "Bars.Target", "bars-queue-depth", "queue=bars-q2,region=eu"));
        /* no tags named: any sample of the instrument */
        check(policy_collect_counter_matches(low, "System.Runtime", "threadpool-thread-count", NULL));
        check(policy_collect_counter_matches(low, "System.Runtime", "threadpool-thread-count", "a=b"));

        /* a short name matches the last component, a full one only itself */
        check(policy_collect_exception_matches(e, "BarsMarkerException"));
        check(policy_collect_exception_matches(e, "Bars.Target.BarsMarkerException"));
        check(policy_collect_exception_matches(e, "Bars.Target.Outer+BarsMarkerException"));
        check(!policy_collect_exception_matches(e, "Bars.Target.XBarsMarkerException"));
        check(!policy_collect_exception_matches(e, "BarsMarkerExceptionX"));
        check(!policy_collect_exception_matches(q, "BarsMarkerException"));
        policy_unref(p);

        p = compile_ok("[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"System.TimeoutException\"\n"
                       "then.stacks = true\n");
        if (!p)
                return;
        check(policy_collect_exception_matches(&p->collect[0], "System.TimeoutException"));
        check(!policy_collect_exception_matches(&p->collect[0], "My.System.TimeoutException"));
        check(!policy_collect_exception_matches(&p->collect[0], "TimeoutException"));
        policy_unref(p);
}

static void test_on_start_match(void) {
        Policy *p = compile_ok(on_start_policy), *q;
        PolicyTarget t;
        const PolicyOnStart *o;

        if (!p)
                return;
        /* user and unit: the first */
        t = target(2001, "orders.service", "Orders.Api");
        o = policy_on_start_match(p, &t);
        check(o && strcmp(o->name, "orders-cpu") == 0);
        /* the first match wins, though "billing-gc" and "everything" cover it too */
        t = target(2001, "orders.service", "Billing.Api");
        check(policy_on_start_match(p, &t) == &p->on_start[0]);
        /* the wrong unit, or none, and the next one that matches */
        t = target(2001, "billing.service", "Billing.Api");
        check(policy_on_start_match(p, &t) == &p->on_start[1]);
        t = target(2001, NULL, "Billing.Api");
        check(policy_on_start_match(p, &t) == &p->on_start[1]);
        /* the wrong user, the wrong name: only targets.any */
        t = target(2002, "orders.service", "Orders.Api");
        check(policy_on_start_match(p, &t) == &p->on_start[2]);
        /* by the effective uid, as a rule's targets.users */
        t = (PolicyTarget){ .uid = { 2002, 2001, 2001, 2001 }, .unit = "orders.service" };
        check(policy_on_start_match(p, &t) == &p->on_start[0]);
        policy_unref(p);

        /* without targets.any: nothing for what no table covers */
        q = compile_ok("[[on_start]]\nname = \"n\"\ntargets.names = [\"Billing.Api\"]\n"
                       "trace_profile = \"gc-collect\"\nduration = \"5s\"\n");
        t = target(2001, "orders.service", "Orders.Api");
        check(q && !policy_on_start_match(q, &t));
        t = target(2001, NULL, NULL);
        check(q && !policy_on_start_match(q, &t));
        policy_unref(q);

        q = policy_new_builtin();
        t = target(2001, "orders.service", "Orders.Api");
        check(q && q->n_on_start == 0 && !policy_on_start_match(q, &t));
        policy_unref(q);
}

static void test_cgroup_pattern_match(void) {
        const char *podman = "/machine.slice/libpod-3f9a0c1e.scope/container";

        /* a pattern selects what it matches and everything below it */
        check(policy_cgroup_pattern_match("/machine.slice/libpod-*.scope", podman));
        check(policy_cgroup_pattern_match("/machine.slice", podman));
        check(policy_cgroup_pattern_match("/machine.slice/libpod-3f9a0c1e.scope/container", podman));
        check(!policy_cgroup_pattern_match("/machine.slice/libpod-3f9a0c1e.scope/container/x", podman));
        /* whole components only: a prefix of a name is not its parent */
        check(!policy_cgroup_pattern_match("/machine", podman));
        check(!policy_cgroup_pattern_match("/machine.slice/libpod-3f9a", podman));
        /* '*' and '?' never stand for '/' */
        check(!policy_cgroup_pattern_match("/*", "/") && policy_cgroup_pattern_match("/*", podman));
        check(policy_cgroup_pattern_match("/machine.slice*", podman)); /* "*" may stand for nothing */
        check(!policy_cgroup_pattern_match("/machine.slice?libpod-*.scope", podman));
        check(!policy_cgroup_pattern_match("/*.scope", podman));
        check(policy_cgroup_pattern_match("/*/*.scope", podman));
        check(policy_cgroup_pattern_match("/machine.slice/libpod-3f9a0c1?.scope", podman));
        check(!policy_cgroup_pattern_match("/machine.slice/libpod-3f9a0c1?.scope", "/machine.slice/libpod-3f9a0c1.scope"));
        /* "**": any number of components, none included */
        check(policy_cgroup_pattern_match("/**/libpod-*.scope", podman));
        check(policy_cgroup_pattern_match("/**/container", podman));
        check(policy_cgroup_pattern_match("/machine.slice/**/libpod-*.scope", podman));
        check(policy_cgroup_pattern_match("/**/**/container", podman));
        check(!policy_cgroup_pattern_match("/**/docker-*.scope", podman));
        check(policy_cgroup_pattern_match("/kubepods.slice/**/cri-containerd-*.scope",
                                          "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/"
                                          "cri-containerd-ab.scope"));
        check(!policy_cgroup_pattern_match("/kubepods.slice/**/cri-containerd-*.scope",
                                           "/system.slice/kubepods.slice/cri-containerd-ab.scope"));
        /* backtracking: the first component that fits is not always the one */
        check(policy_cgroup_pattern_match("/**/a/b", "/a/a/a/b"));
        check(!policy_cgroup_pattern_match("/**/a/b", "/a/a/a/c"));
        check(policy_cgroup_pattern_match("/x/**", "/x") && !policy_cgroup_pattern_match("/x/**/y", "/x"));
        /* case counts; the root cgroup is below nothing but "**" */
        check(!policy_cgroup_pattern_match("/Machine.slice", podman));
        check(policy_cgroup_pattern_match("/**", "/") && !policy_cgroup_pattern_match("/machine.slice", "/"));
        /* a long path against many stars ends without blowing up */
        {
                char path[513] = "";
                for (int i = 0; i < 128; i++)
                        strcat(path, "/aaa");
                check(policy_cgroup_pattern_match("/**/**/**/**/aaa", path));
                check(!policy_cgroup_pattern_match("/**/**/**/**/*a*a*a*a*b", path));
        }
}

static void test_cgroup_and_container_validation(void) {
        check(policy_cgroup_pattern_is_valid("/machine.slice/libpod-*.scope"));
        check(policy_cgroup_pattern_is_valid("/**/x y") && policy_cgroup_pattern_is_valid("/x/**"));
        check(!policy_cgroup_pattern_is_valid("/") && !policy_cgroup_pattern_is_valid(""));
        check(!policy_cgroup_pattern_is_valid("machine.slice"));
        check(!policy_cgroup_pattern_is_valid("/a//b") && !policy_cgroup_pattern_is_valid("/a/"));
        check(!policy_cgroup_pattern_is_valid("/a/../b") && !policy_cgroup_pattern_is_valid("/./b"));
        check(policy_cgroup_pattern_is_valid("/a/.../b") && policy_cgroup_pattern_is_valid("/.hidden"));
        check(!policy_cgroup_pattern_is_valid("/a**") && !policy_cgroup_pattern_is_valid("/***"));
        check(!policy_cgroup_pattern_is_valid("/a[0-9]") && !policy_cgroup_pattern_is_valid("/a\\b"));
        check(!policy_cgroup_pattern_is_valid("/a\nb") && !policy_cgroup_pattern_is_valid("/\xff"));
        {
                char longest[POLICY_CGROUP_PATTERN_MAX + 2];
                memset(longest, 'a', sizeof(longest));
                longest[0] = '/';
                longest[POLICY_CGROUP_PATTERN_MAX] = '\0';
                check(policy_cgroup_pattern_is_valid(longest));
                longest[POLICY_CGROUP_PATTERN_MAX] = 'a';
                longest[POLICY_CGROUP_PATTERN_MAX + 1] = '\0';
                check(!policy_cgroup_pattern_is_valid(longest));
        }
        check(policy_container_selector_is_valid("3f9a0c1e5b7d"));
        check(policy_container_selector_is_valid("3f9a0c1e5b7d3f9a0c1e5b7d3f9a0c1e5b7d3f9a0c1e5b7d3f9a0c1e5b7d3f9a"));
        check(!policy_container_selector_is_valid("3f9a0c1e5b7"));  /* 11: too short to mean one container */
        check(!policy_container_selector_is_valid("3F9A0C1E5B7D")); /* ids are lowercase */
        check(!policy_container_selector_is_valid("3f9a0c1e5b7d3f9a0c1e5b7d3f9a0c1e5b7d3f9a0c1e5b7d3f9a0c1e5b7d3f9a0"));
        check(!policy_container_selector_is_valid("libpod-3f9a0c1e5b7d"));
}

#define CONTAINER_A "3f9a0c1e5b7d11112222333344445555666677778888999900001111aaaabbbb"
#define CONTAINER_B "3f9a0c1e5b7e11112222333344445555666677778888999900001111aaaabbbb"

static const char *const container_policy =
        "[[rule]]\nname = \"in-pods\"\nusers = [\"bob\"]\ncommands = [\"info\"]\n"
        "targets.cgroups = [\"/kubepods.slice/**/cri-containerd-*.scope\", \"/machine.slice/libpod-*.scope\"]\n"
        "[[rule]]\nname = \"one-container\"\nusers = [\"carol\"]\ncommands = [\"info\"]\n"
        "targets.containers = [\"3f9a0c1e5b7d\"]\n"
        "[[rule]]\nname = \"orders-in-a-container\"\nusers = [\"alice\"]\ncommands = [\"info\"]\n"
        "targets.users = [\"svc-orders\"]\ntargets.containers = [\"" CONTAINER_B "\"]\n";

static PolicyTarget in_container(uid_t uid, const char *cgroup, const char *id) {
        PolicyTarget t = target(uid, NULL, "App");

        t.cgroup = cgroup;
        t.container_id = id;
        return t;
}

static void test_container_selectors(void) {
        Policy *p = compile_ok(container_policy);
        PolicyTarget a = in_container(2002, "/machine.slice/libpod-" CONTAINER_A ".scope", CONTAINER_A),
                     b = in_container(2001, "/machine.slice/libpod-" CONTAINER_B ".scope", CONTAINER_B),
                     host = in_container(2002, "/system.slice/app.service", NULL), unknown = target(2002, NULL, "App");
        PolicyVerdict v;
        uid_t uids[8];
        size_t n;

        if (!p)
                return;
        check(p->rules[0].targets.cgroups.n == 2 && p->rules[1].targets.containers.n == 1);
        /* by cgroup: both containers, not the host's service, not a process whose cgroup is unknown */
        check(decide(p, &bob, a, CMD(POLICY_COMMAND_INFO)).allowed);
        check(decide(p, &bob, b, CMD(POLICY_COMMAND_INFO)).allowed);
        v = decide(p, &bob, host, CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && strstr(v.reason, "target's cgroup"));
        check(!decide(p, &bob, unknown, CMD(POLICY_COMMAND_INFO)).allowed);
        /* by id prefix: A only; a process in no container is not in every one */
        check(decide(p, &carol, a, CMD(POLICY_COMMAND_INFO)).allowed);
        v = decide(p, &carol, b, CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && strstr(v.reason, "target's container"));
        check(!decide(p, &carol, host, CMD(POLICY_COMMAND_INFO)).allowed);
        /* with users, both must match */
        check(decide(p, &alice, b, CMD(POLICY_COMMAND_INFO)).allowed);
        b.uid[1] = 2002;
        v = decide(p, &alice, b, CMD(POLICY_COMMAND_INFO));
        check(!v.allowed && strstr(v.reason, "target's user"));
        /* visibility follows: carol learns of A, not of B */
        check(policy_target_visible(p, &carol, &a) && !policy_target_visible(p, &carol, &b));
        /* a container may hold anybody's processes: listings must look at every one */
        check(policy_visible_uids(p, &bob, uids, 8, &n) && policy_visible_uids(p, &carol, uids, 8, &n));
        check(!policy_visible_uids(p, &alice, uids, 8, &n) && n == 2 && uids[1] == 2001);
        policy_unref(p);

        /* [[on_start]] takes the same selectors */
        p = compile_ok("[[on_start]]\nname = \"s\"\ntargets.cgroups = [\"/machine.slice\"]\n"
                       "trace_profile = \"gc-collect\"\nduration = \"5s\"\n");
        check(p && policy_on_start_match(p, &a) && !policy_on_start_match(p, &host));
        policy_unref(p);
}

/* Which policies decide on what a process changes without an exec: a reading of it must then be fresh. */
static void test_selects_by_name_or_cgroup(void) {
        static const char *const by[] = { "targets.names = [\"App\"]\n", "targets.units = [\"app.service\"]\n",
                                          "targets.cgroups = [\"/machine.slice\"]\n",
                                          "targets.containers = [\"3f9a0c1e5b7d\"]\n",
                                          "targets.users = [\"uid:2001\"]\ntargets.names = [\"App\"]\n" };
        Policy *p;

        for (size_t i = 0; i < sizeof(by) / sizeof(by[0]); i++) {
                char text[512];

                snprintf(text, sizeof(text), RULE_HEAD "commands = [\"env\"]\n%s", by[i]);
                p = compile_ok(text);
                check(p && policy_selects_by_name_or_cgroup(p));
                policy_unref(p);
        }
        /* by user, or any process: the effective ids, which the target cache compares each time */
        p = compile_ok(RULE_HEAD "commands = [\"env\"]\ntargets.users = [\"uid:2001\"]\n"
                       "[[rule]]\nname = \"all\"\nusers = [\"root\"]\ncommands = [\"info\"]\ntargets.any = true\n");
        check(p && !policy_selects_by_name_or_cgroup(p));
        policy_unref(p);
        p = policy_new_builtin();
        check(p && !policy_selects_by_name_or_cgroup(p));
        policy_unref(p);
}

static void test_container_selector_errors(void) {
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.cgroups = [\"machine.slice\"]\n", NULL, 5, 20,
                      "bad entry \"machine.slice\" in 'targets.cgroups' (an absolute cgroup path");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.cgroups = [\"/a\", \"/b/../c\"]\n", NULL, 5, 26,
                      "bad entry \"/b/../c\"");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.cgroups = []\n", NULL, 5, 19,
                      "must not be an empty list");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.cgroups = \"/a\"\n", NULL, 5, 19, "must be a list");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.containers = [\"3F9A0C1E5B7D\"]\n", NULL, 5, 23,
                      "bad entry \"3F9A0C1E5B7D\" in 'targets.containers' (a container id: 12 to 64 lowercase");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.containers = [\"3f9a\"]\n", NULL, 5, 23,
                      "12 to 64 lowercase hexadecimal digits");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.any = true\ntargets.containers = [\"3f9a0c1e5b7d\"]\n",
                      NULL, 5, 9, "cannot be combined");
        compile_fails(RULE_HEAD "commands = [\"info\"]\ntargets.pods = [\"x\"]\n", NULL, 5, 9,
                      "unknown key 'targets.pods' (users, units, names, cgroups, containers, any)");
        compile_fails("[[on_start]]\nname = \"s\"\ntargets.cgroups = [\"/a/\"]\ntrace_profile = \"gc-collect\"\n"
                      "duration = \"5s\"\n",
                      NULL, 3, 20, "bad entry \"/a/\" in 'targets.cgroups'");
        {
                char text[8192] = RULE_HEAD "commands = [\"info\"]\ntargets.cgroups = [";
                for (int i = 0; i <= POLICY_CGROUP_PATTERNS_MAX; i++)
                        snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s\"/c%d\"", i ? "," : "", i);
                strcat(text, "]\n");
                compile_fails(text, NULL, 5, 19, "'targets.cgroups' takes at most 64 entries");
        }
}

/* Retention: [agent]'s max_age, max_files, max_use_per_user, and what a table says of its artifacts. */
static void test_retention_settings(void) {
        Policy *p = policy_new_builtin();

        /* the packaged tmpfiles.d line's age, now for any dump_dir; no bound on count nor per user */
        check(p && p->agent.max_age_usec == 3ULL * 24 * 3600 * 1000000 && p->agent.max_files == 0);
        check(p && p->agent.max_use_per_user.bytes == 0 && p->agent.max_use_per_user.percent == 0);
        policy_unref(p);
        p = compile_ok("[agent]\nmax_age = \"12h\"\nmax_files = 500\nmax_use_per_user = \"2G\"\n"
                       "[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"X\"\nthen.stacks = true\n"
                       "max_use = \"5%\"\nyield_to_dumps = true\nreaders_may_remove = true\n"
                       "[[on_start]]\nname = \"s\"\ntargets.any = true\ntrace_profile = \"gc-collect\"\n"
                       "duration = \"5s\"\nmax_use = \"100M\"\n");
        check(p && p->agent.max_age_usec == 12ULL * 3600 * 1000000 && p->agent.max_files == 500);
        check(p && p->agent.max_use_per_user.bytes == 2ULL << 30);
        check(p && p->n_collect == 1 && p->collect[0].artifacts.max_use.percent == 5 &&
              p->collect[0].artifacts.yield_to_dumps && p->collect[0].artifacts.readers_may_remove);
        check(p && p->n_on_start == 1 && p->on_start[0].artifacts.max_use.bytes == 100ULL << 20 &&
              !p->on_start[0].artifacts.yield_to_dumps && !p->on_start[0].artifacts.readers_may_remove);
        /* found by an artifact's labels: the collect tables first, then the on_starts */
        {
                size_t i = 99;

                check(p && policy_table_artifacts(p, "collect", "c", &i) == &p->collect[0].artifacts && i == 0);
                check(p && policy_table_artifacts(p, "on_start", "s", &i) == &p->on_start[0].artifacts && i == 1);
                check(p && !policy_table_artifacts(p, "on_start", "c", &i) && !policy_table_artifacts(p, "x", "c", &i));
                check(p && !policy_table_artifacts(p, NULL, "c", NULL) && !policy_table_artifacts(p, "collect", NULL, NULL));
        }
        policy_unref(p);
        p = compile_ok("[agent]\nmax_age = \"0\"\n");
        check(p && p->agent.max_age_usec == 0);
        policy_unref(p);
        p = compile_ok("[agent]\nmax_age = \"365d\"\n");
        check(p && p->agent.max_age_usec == 365ULL * 24 * 3600 * 1000000);
        policy_unref(p);
        compile_fails("[agent]\nmax_age = \"3 days\"\n", NULL, 2, 11, "bad duration \"3 days\" for 'max_age'");
        compile_fails("[agent]\nmax_age = \"3651d\"\n", NULL, 2, 11, "at most \"3650d\"");
        compile_fails("[agent]\nmax_files = 0\n", NULL, 2, 13, "must be 1 to 1000000");
        compile_fails("[agent]\nmax_use_per_user = \"much\"\n", NULL, 2, 20, "bad size \"much\" for 'max_use_per_user'");
        compile_fails("[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"X\"\nthen.stacks = true\n"
                      "yield_to_dumps = \"yes\"\n", NULL, 6, 18, "must be a boolean");
        compile_fails("[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"X\"\nthen.stacks = true\n"
                      "max_use = \"0\"\n", NULL, 6, 11, "bad size \"0\" for 'max_use'");
        compile_fails("[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"X\"\nthen.stacks = true\n"
                      "keep = 3\n", NULL, 6, 1, "(name, targets, when, then, readers, limit, limit_total, max_use, "
                      "yield_to_dumps, readers_may_remove)");
}

/*
 * crashes: decided on the crashed process as systemd-coredump recorded it, by the selectors a live
 * process is; a grant of crashes alone shows no live process, holds no live command on one, and makes
 * none visible; the owner sees its own crashes unless the process changed credentials.
 */
static void test_crashes(void) {
        Policy *p = compile_ok("[agent]\nowner_access = true\n"
                               "[[rule]]\nname = \"orders-crashes\"\ngroups = [\"ops\"]\ncommands = [\"crashes\"]\n"
                               "targets.units = [\"orders.service\"]\n"
                               "[[rule]]\nname = \"alice-dumps\"\nusers = [\"alice\"]\ncommands = [\"dump\"]\n"
                               "targets.units = [\"billing.service\"]\ndump_types = [\"mini\"]\n");
        PolicyTarget orders = target(2001, "orders.service", "Orders.Api");
        PolicyTarget billing = target(2002, "billing.service", "Billing.Api");
        PolicyTarget own = target(1002, NULL, "Mine"), changed = target(1002, NULL, "Mine");
        PolicyVerdict v;

        if (!p)
                return;
        changed.uid[2] = 0; /* kept root as its saved uid */
        /* alice is in ops: orders' crashes, by the rule */
        policy_crash_check(p, &alice, &orders, &v);
        check(v.allowed && strcmp(v.rule_name, "orders-crashes") == 0);
        /* a grant of dump is not one of crashes; and no rule for bob */
        policy_crash_check(p, &alice, &billing, &v);
        check(!v.allowed);
        policy_crash_check(p, &bob, &orders, &v);
        check(!v.allowed);
        /* root sees all; the owner its own, unless it changed credentials */
        policy_crash_check(p, &root, &billing, &v);
        check(v.allowed && strcmp(v.rule_name, POLICY_RULE_ROOT) == 0);
        policy_crash_check(p, &bob, &own, &v);
        check(v.allowed && strcmp(v.rule_name, POLICY_RULE_OWNER) == 0);
        policy_crash_check(p, &bob, &changed, &v);
        check(!v.allowed);
        /* crashes alone neither lists, nor holds anything on, nor shows a live process */
        check(policy_commands_held(p, &alice, &orders) == 0);
        check(!decide(p, &alice, orders, CMD(POLICY_COMMAND_PS)).allowed);
        check(!policy_target_visible(p, &alice, &orders));
        check((policy_commands_held(p, &root, &orders) & BIT(POLICY_COMMAND_CRASHES)) == 0);
        policy_unref(p);

        /* a listing of live processes looks at alice's own, and no one else's, under crashes alone */
        p = compile_ok("[agent]\nowner_access = true\n"
                       "[[rule]]\nname = \"orders-crashes\"\ngroups = [\"ops\"]\ncommands = [\"crashes\"]\n"
                       "targets.units = [\"orders.service\"]\n");
        if (!p)
                return;
        {
                uid_t uids[8];
                size_t n = 0;

                check(!policy_visible_uids(p, &alice, uids, ELEMENTSOF(uids), &n) && n == 1 && uids[0] == alice.uid);
                check(!policy_selects_by_name_or_cgroup(p));
        }
        policy_unref(p);
}

/* [[collect]] when.crash: a crash's core is what it takes, and all it can take. */
static void test_collect_crash_tables(void) {
        static const char head[] = "[[collect]]\nname = \"cores\"\ntargets.units = [\"orders.service\"]\nreaders = [\"alice\"]\n";
        char text[512];
        Policy *p;

        snprintf(text, sizeof(text), "%swhen.crash = true\nthen.core = true\nlimit = \"2/1h\"\n", head);
        p = compile_ok(text);
        if (p) {
                check(p->n_collect == 1 && p->collect[0].when == POLICY_COLLECT_WHEN_CRASH &&
                      p->collect[0].then == POLICY_COLLECT_THEN_CORE && p->collect[0].limit.count == 2);
                policy_unref(p);
        }
        snprintf(text, sizeof(text), "%swhen.crash = true\nthen.dump = \"mini\"\n", head);
        compile_fails_anywhere(text, "takes then.core = true");
        snprintf(text, sizeof(text), "%swhen.exception = \"X\"\nthen.core = true\n", head);
        compile_fails_anywhere(text, "then.core goes with when.crash only");
        snprintf(text, sizeof(text), "%swhen.crash = false\nthen.core = true\n", head);
        compile_fails_anywhere(text, "'when.crash = false' means nothing");
        snprintf(text, sizeof(text), "%swhen.crash = true\nwhen.exception = \"X\"\nthen.core = true\n", head);
        compile_fails_anywhere(text, "one trigger a table");
        snprintf(text, sizeof(text), "%swhen.crash = true\nwhen.within = \"1m\"\nthen.core = true\n", head);
        compile_fails_anywhere(text, "'when.within' does not go with 'when.crash'");
}

/* --- [egress.NAME] (docs/egress-plan.md): S3 stores, named by rules and [[collect]] tables --- */

#define EGRESS_OK \
        "[egress.central]\nendpoint = \"https://s3.eu-west-1.example.net\"\nbucket = \"dotnet-diagnostics\"\n" \
        "region = \"eu-west-1\"\ncredentials = \"file:/etc/dsagent/egress/central.credentials\"\n"
#define EGRESS_RULE \
        "[[rule]]\nname = \"ops-dumps\"\ngroups = [\"ops\"]\ncommands = [\"dump\"]\ndump_types = [\"mini\"]\n" \
        "targets.any = true\n"

static void test_egress(void) {
        Policy *p = compile_ok(EGRESS_OK EGRESS_RULE "egress = \"central\"\n"
                               "[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                               "then.stacks = true\nthen.egress = \"central\"\n"
                               "[egress.local]\nendpoint = \"http://127.0.0.1:7480\"\nbucket = \"b-1.x\"\n"
                               "region = \"us-east-1\"\ncredentials = \"systemd:s3-local\"\nprefix = \"prod/node-7/\"\n"
                               "path_style = false\nca_file = \"/etc/ssl/ca.pem\"\npart_size = \"5M\"\nattempts = 3\n"
                               "timeout = \"30m\"\nmin_speed = \"1K\"\nkeep_local = false\nverify = \"read-back\"\n"
                               "url_max_age = \"7d\"\nretries = 0\nretry_delay = \"1s\"\n");
        const PolicyEgress *central, *local;

        if (!p)
                return;
        check(p->n_egress == 2);
        central = policy_egress_find(p, "central");
        local = policy_egress_find(p, "local");
        check(central && local && !policy_egress_find(p, "other"));
        if (!central || !local)
                goto done;
        /* the defaults */
        check(strcmp(central->endpoint, "https://s3.eu-west-1.example.net") == 0);
        check(strcmp(central->bucket, "dotnet-diagnostics") == 0 && strcmp(central->region, "eu-west-1") == 0);
        check(strcmp(central->prefix, "") == 0 && central->path_style && !central->allow_http && !central->ca_file);
        check(central->credentials_kind == POLICY_EGRESS_CREDENTIALS_FILE &&
              strcmp(central->credentials, "/etc/dsagent/egress/central.credentials") == 0);
        check(central->credentials_line == 5 && central->credentials_column == 15);
        check(central->part_size == 16u << 20 && central->attempts == 5 && central->timeout_usec == 3600ULL * 1000000);
        check(central->min_speed == 64 << 10 && central->keep_local && central->verify == POLICY_EGRESS_VERIFY_SIGNED);
        check(central->url_max_age_usec == 15ULL * 60 * 1000000);
        check(central->retries == 8 && central->retry_delay_usec == 30ULL * 1000000);
        /* every key said */
        check(local->credentials_kind == POLICY_EGRESS_CREDENTIALS_SYSTEMD && strcmp(local->credentials, "s3-local") == 0);
        check(strcmp(local->prefix, "prod/node-7/") == 0 && !local->path_style && strcmp(local->ca_file, "/etc/ssl/ca.pem") == 0);
        check(local->part_size == 5u << 20 && local->attempts == 3 && local->timeout_usec == 1800ULL * 1000000);
        check(local->min_speed == 1024 && !local->keep_local && local->verify == POLICY_EGRESS_VERIFY_READ_BACK);
        check(local->url_max_age_usec == 7ULL * 24 * 3600 * 1000000);
        check(local->retries == 0 && local->retry_delay_usec == 1000000);
        /* the names resolved to the tables */
        check(p->n_rules == 1 && p->rules[0].egress == central && strcmp(p->rules[0].egress_name, "central") == 0);
        check(p->n_collect == 1 && p->collect[0].egress == central);
done:
        policy_unref(p);

        /* a rule without egress has none */
        p = compile_ok(EGRESS_OK EGRESS_RULE);
        check(p && p->rules[0].egress == NULL);
        policy_unref(p);
}

/* A rule in policy.d names a store of the main file, and a table of the main file one in policy.d: names are
 * resolved once every file is compiled. */
static void test_egress_across_files(void) {
        PolicyDiagnostics d = {};
        Policy *p = compile2(EGRESS_OK "[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                             "then.stacks = true\nthen.egress = \"second\"\n",
                             EGRESS_RULE "egress = \"central\"\n"
                             "[egress.second]\nendpoint = \"https://[::1]:9000\"\nbucket = \"abc\"\nregion = \"r\"\n"
                             "credentials = \"file:/x\"\n", &d);

        check(p && p->n_egress == 2 && p->rules[0].egress == &p->egress[0] && p->collect[0].egress == &p->egress[1]);
        check(p && strcmp(p->egress[1].file, "policy.d/10-extra.toml") == 0);
        policy_unref(p);
        policy_diagnostics_done(&d);
        /* the same store twice, in two files */
        compile_fails(EGRESS_OK, EGRESS_OK, 1, 9, "[egress.central] is already defined at policy.toml:1");
}

static void test_egress_errors(void) {
        /* what a store must have */
        compile_fails("[egress.central]\nbucket = \"abc\"\nregion = \"r\"\ncredentials = \"file:/x\"\n", NULL, 1, 9,
                      "[egress.central] needs 'endpoint'");
        compile_fails("[egress.central]\nendpoint = \"https://h\"\nregion = \"r\"\ncredentials = \"file:/x\"\n", NULL, 1,
                      9, "[egress.central] needs 'bucket'");
        compile_fails("[egress.central]\nendpoint = \"https://h\"\nbucket = \"abc\"\ncredentials = \"file:/x\"\n", NULL,
                      1, 9, "[egress.central] needs 'region'");
        compile_fails("[egress.central]\nendpoint = \"https://h\"\nbucket = \"abc\"\nregion = \"r\"\n", NULL, 1, 9,
                      "[egress.central] needs 'credentials'");
        /* a crash table's core is not uploaded: its then.egress is refused where it stands */
        compile_fails(EGRESS_OK "[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.crash = true\nthen.core = true\n"
                      "then.egress = \"central\"\n", NULL, 11, 15, "then.egress does not go with when.crash yet");
        /* unknown keys; keys named as secrets are told where they belong */
        compile_fails(EGRESS_OK "bucket_name = \"x\"\n", NULL, 6, 1, "unknown key 'bucket_name' in [egress.central]");
        compile_fails(EGRESS_OK "secret_access_key = \"wJalrXUtnFEMI\"\n", NULL, 6, 1,
                      "'secret_access_key' in [egress.central]: keys never go in the policy");
        compile_fails(EGRESS_OK "access_key_id = \"AKIA\"\n", NULL, 6, 1, "keys never go in the policy");
        compile_fails(EGRESS_OK "session_token = \"t\"\n", NULL, 6, 1, "keys never go in the policy");
        /* the endpoint */
        compile_fails("[egress.e]\nendpoint = \"ftp://h\"\nbucket = \"abc\"\nregion = \"r\"\ncredentials = \"file:/x\"\n",
                      NULL, 2, 12, "bad 'endpoint' \"ftp://h\": it must begin with https://");
        compile_fails("[egress.e]\nendpoint = \"https://h/bucket\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "without a user, path, query or fragment");
        compile_fails("[egress.e]\nendpoint = \"https://u:p@h\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "bad port");
        compile_fails("[egress.e]\nendpoint = \"https://h:0\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "bad port (1 to 65535)");
        compile_fails("[egress.e]\nendpoint = \"https://h:65536\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "bad port (1 to 65535)");
        compile_fails("[egress.e]\nendpoint = \"https://\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "needs a host name");
        compile_fails("[egress.e]\nendpoint = \"https://[zz]\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "bad IPv6 address");
        /* http: only on loopback, or said outright */
        compile_fails("[egress.e]\nendpoint = \"http://s3.example.net\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12,
                      "is http: on a host that is not loopback: the artifacts would cross the network in clear");
        compile_fails("[egress.e]\nendpoint = \"http://128.0.0.1\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "not loopback");
        compile_fails("[egress.e]\nendpoint = \"http://127.0.0.1.example.net\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 2, 12, "not loopback");
        for (size_t i = 0; i < 4; i++) {
                static const char *const loopback[] = { "http://127.0.0.1:7480", "http://localhost", "http://[::1]:80",
                                                        "http://127.255.0.9" };
                char text[512];

                snprintf(text, sizeof(text), "[egress.e]\nendpoint = \"%s\"\nbucket = \"abc\"\nregion = \"r\"\n"
                         "credentials = \"file:/x\"\n", loopback[i]);
                policy_unref(compile_ok(text));
        }
        policy_unref(compile_ok("[egress.e]\nendpoint = \"http://s3.example.net\"\nallow_http = true\n"
                                "bucket = \"abc\"\nregion = \"r\"\ncredentials = \"file:/x\"\n"));
        /* bucket, region, prefix */
        compile_fails(EGRESS_RULE, "[egress.e]\nendpoint = \"https://h\"\nbucket = \"ab\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", 3, 10, "S3's bucket names are 3-63");
        compile_fails("[egress.e]\nendpoint = \"https://h\"\nbucket = \"Upper\"\nregion = \"r\"\ncredentials = \"file:/x\"\n",
                      NULL, 3, 10, "bad 'bucket'");
        compile_fails("[egress.e]\nendpoint = \"https://h\"\nbucket = \"a..b\"\nregion = \"r\"\ncredentials = \"file:/x\"\n",
                      NULL, 3, 10, "bad 'bucket'");
        compile_fails("[egress.e]\nendpoint = \"https://h\"\nbucket = \"-ab\"\nregion = \"r\"\ncredentials = \"file:/x\"\n",
                      NULL, 3, 10, "bad 'bucket'");
        compile_fails("[egress.e]\nendpoint = \"https://h\"\nbucket = \"abc\"\nregion = \"a:b\"\ncredentials = \"file:/x\"\n",
                      NULL, 4, 10, "bad 'region'");
        compile_fails(EGRESS_OK "prefix = \"../\"\n", NULL, 6, 10, "bad 'prefix'");
        compile_fails(EGRESS_OK "prefix = \"prod\"\n", NULL, 6, 10, "each ending in '/'");
        compile_fails(EGRESS_OK "prefix = \"/prod/\"\n", NULL, 6, 10, "bad 'prefix'");
        compile_fails(EGRESS_OK "prefix = \"a b/\"\n", NULL, 6, 10, "bad 'prefix'");
        /* sizes, counts, durations, words */
        compile_fails(EGRESS_OK "part_size = \"4M\"\n", NULL, 6, 13, "bad 'part_size' \"4M\"");
        compile_fails(EGRESS_OK "part_size = \"6G\"\n", NULL, 6, 13, "bad 'part_size'");
        compile_fails(EGRESS_OK "part_size = \"10%\"\n", NULL, 6, 13, "bad 'part_size'");
        compile_fails(EGRESS_OK "attempts = 0\n", NULL, 6, 12, "'attempts' must be 1 to 20");
        compile_fails(EGRESS_OK "retries = 101\n", NULL, 6, 11, "'retries' must be 0 to 100");
        compile_fails(EGRESS_OK "retries = -1\n", NULL, 6, 11, "'retries' must be 0 to 100");
        compile_fails(EGRESS_OK "retry_delay = \"500ms\"\n", NULL, 6, 15, "'retry_delay'");
        compile_fails(EGRESS_OK "retry_delay = \"2h\"\n", NULL, 6, 15, "bad 'retry_delay' \"2h\"");
        compile_fails(EGRESS_OK "timeout = \"soon\"\n", NULL, 6, 11, "bad 'timeout' \"soon\"");
        compile_fails(EGRESS_OK "url_max_age = \"8d\"\n", NULL, 6, 15, "bad 'url_max_age' \"8d\"");
        compile_fails(EGRESS_OK "min_speed = \"0\"\n", NULL, 6, 13, "bad 'min_speed'");
        compile_fails(EGRESS_OK "verify = \"never\"\n", NULL, 6, 10, "'verify' is \"signed\" or \"read-back\"");
        compile_fails(EGRESS_OK "keep_local = \"no\"\n", NULL, 6, 14, "'keep_local' must be a boolean");
        compile_fails(EGRESS_OK "ca_file = \"ca.pem\"\n", NULL, 6, 11, "bad 'ca_file'");
        /* names */
        compile_fails("[egress.\"a/b\"]\nendpoint = \"https://h\"\nbucket = \"abc\"\nregion = \"r\"\n"
                      "credentials = \"file:/x\"\n", NULL, 1, 9, "egress name must be 1-64 of A-Z a-z 0-9 . _ -");
        compile_fails("egress = \"central\"\n", NULL, 1, 10, "'egress' must be a table");
        compile_fails("egress.central = 1\n", NULL, 1, 8, "'egress.central' must be a table");
}

/* credentials: where the keys are, in two spellings; a value that is neither is not echoed */
static void test_egress_credentials(void) {
        static const char *const bad[] = {
                "AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI", "file:relative/path", "file:/a/../b", "file:/a//b", "file:/a/",
                "file:/", "systemd:", "systemd:a/b", "systemd:..", "env:S3_KEY",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                PolicyDiagnostics d = {};
                char text[512];
                Policy *p;
                bool said = false, echoed = false;

                snprintf(text, sizeof(text), "[egress.e]\nendpoint = \"https://h\"\nbucket = \"abc\"\nregion = \"r\"\n"
                         "credentials = \"%s\"\n", bad[i]);
                p = compile2(text, NULL, &d);
                check(p == NULL);
                for (size_t j = 0; j < d.n; j++) {
                        said |= strstr(d.messages[j], "policy.toml:5:15: 'credentials' says where the keys are") != NULL;
                        char quoted[128];

                        snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
                        echoed |= strstr(d.messages[j], quoted) != NULL ||
                                  (strlen(bad[i]) > 12 && strstr(d.messages[j], bad[i]) != NULL);
                }
                check(said && !echoed);
                if (!said || echoed)
                        printf("# credentials = \"%s\": said %d, echoed %d\n", bad[i], said, echoed);
                policy_unref(p);
                policy_diagnostics_done(&d);
        }
}

/* egress = "NAME" on a rule, then.egress on a [[collect]]: a name that is no [egress.NAME] is an error */
static void test_egress_names(void) {
        compile_fails(EGRESS_OK EGRESS_RULE "egress = \"centrl\"\n", NULL, 12, 10,
                      "rule 'ops-dumps' names egress \"centrl\", which is not defined: the policy has [egress.central]");
        compile_fails(EGRESS_RULE "egress = \"central\"\n", NULL, 7, 10,
                      "names egress \"central\", which is not defined: the policy has no [egress.NAME] table");
        compile_fails(EGRESS_OK "[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                      "then.stacks = true\nthen.egress = \"nowhere\"\n", NULL, 11, 15,
                      "[[collect]] 'c' then.egress names egress \"nowhere\", which is not defined");
        /* reported beside the rule's other errors, in one run */
        compile_fails(EGRESS_RULE "egress = \"nowhere\"\nenv_reveal = 1\n", NULL, 7, 10,
                      "names egress \"nowhere\", which is not defined");
        compile_fails(EGRESS_OK EGRESS_RULE "egress = \"a/b\"\n", NULL, 12, 10, "'egress' must name an [egress.NAME]");
        compile_fails(EGRESS_OK EGRESS_RULE "egress = 1\n", NULL, 12, 10, "'egress' must be a string");
        /* a rule uploads its dumps, traces and gcdumps: one that grants none of them has nothing to upload */
        compile_fails(EGRESS_OK "[[rule]]\nname = \"r\"\ngroups = [\"ops\"]\ncommands = [\"info\"]\n"
                      "targets.any = true\negress = \"central\"\n", NULL, 11, 1,
                      "egress given, but the rule grants none of 'dump', 'trace', 'gcdump'");
        compile_fails(EGRESS_OK "[[rule]]\nname = \"r\"\ngroups = [\"ops\"]\ncommands = [\"stacks\", \"counters\"]\n"
                      "targets.any = true\negress = \"central\"\n", NULL, 11, 1,
                      "egress given, but the rule grants none of 'dump', 'trace', 'gcdump'");
        policy_unref(compile_ok(EGRESS_OK "[[rule]]\nname = \"r\"\ngroups = [\"ops\"]\ncommands = [\"gcdump\", \"trace\"]\n"
                                "trace_profiles = [\"cpu-sampling\"]\ntargets.any = true\negress = \"central\"\n"));
        policy_unref(compile_ok(EGRESS_OK "[[rule]]\nname = \"r\"\ngroups = [\"ops\"]\ncommands = [\"trace\"]\n"
                                "trace_profiles = [\"cpu-sampling\"]\ntargets.any = true\negress = \"central\"\n"));
        policy_unref(compile_ok(EGRESS_OK "[[rule]]\nname = \"r\"\ngroups = [\"ops\"]\ncommands = [\"gcdump\"]\n"
                                "targets.any = true\negress = \"central\"\n"));
        policy_unref(compile_ok(EGRESS_OK "[[rule]]\nname = \"r\"\ngroups = [\"ops\"]\ncommands = [\"dump\", \"gcdump\"]\n"
                                "dump_types = [\"mini\"]\n"
                                "targets.any = true\negress = \"central\"\n"));
        /* then.egress is no action of its own */
        compile_fails(EGRESS_OK "[[collect]]\nname = \"c\"\ntargets.any = true\nwhen.exception = \"E\"\n"
                      "then.egress = \"central\"\n", NULL, 10, 1, "'then' needs an action");
}

/* the prefix rule, shared with the object keys (agent/egress/egress-name.c) */
static void test_egress_prefix(void) {
        check(policy_egress_prefix_is_valid(""));
        check(policy_egress_prefix_is_valid("prod/"));
        check(policy_egress_prefix_is_valid("a.b/c_d-e/"));
        check(!policy_egress_prefix_is_valid("prod"));
        check(!policy_egress_prefix_is_valid("/"));
        check(!policy_egress_prefix_is_valid("a//"));
        check(!policy_egress_prefix_is_valid("./"));
        check(!policy_egress_prefix_is_valid("a/../"));
        check(!policy_egress_prefix_is_valid("a b/"));
        check(policy_egress_prefix_is_valid("...hidden/"));
}

int main(void) {
        run_test(test_crashes);
        run_test(test_collect_crash_tables);
        run_test(test_builtin_policy);
        run_test(test_owner_access_and_changed_credentials);
        run_test(test_requester_selectors);
        run_test(test_target_selectors);
        run_test(test_visibility);
        run_test(test_command_and_parameters);
        run_test(test_first_match_and_any);
        run_test(test_commands_held_and_ps);
        run_test(test_code_injection_needs_explicit_grant);
        run_test(test_agent_settings);
        run_test(test_retention_settings);
        run_test(test_schema_errors);
        run_test(test_every_error_is_reported);
        run_test(test_durations_and_rates);
        run_test(test_providers_and_session_limits);
        run_test(test_trace_profiles_by_shape);
        run_test(test_monitor_commands);
        run_test(test_env_pattern_match);
        run_test(test_env_check_budget);
        run_test(test_env_redact_defaults);
        run_test(test_env_reveal);
        run_test(test_env_redact_setting);
        run_test(test_env_value_checked);
        run_test(test_env_show);
        run_test(test_ports);
        run_test(test_port_limits);
        run_test(test_on_start);
        run_test(test_on_start_agent_limits);
        run_test(test_on_start_errors);
        run_test(test_on_start_match);
        run_test(test_collect);
        run_test(test_collect_dropin);
        run_test(test_collect_errors);
        run_test(test_collect_flame);
        run_test(test_collect_counters);
        run_test(test_collect_match);
        run_test(test_cgroup_pattern_match);
        run_test(test_cgroup_and_container_validation);
        run_test(test_container_selectors);
        run_test(test_container_selector_errors);
        run_test(test_selects_by_name_or_cgroup);
        run_test(test_egress);
        run_test(test_egress_across_files);
        run_test(test_egress_errors);
        run_test(test_egress_credentials);
        run_test(test_egress_names);
        run_test(test_egress_prefix);
        return tap_finish();
}
