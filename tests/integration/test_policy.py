#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The TOML policy with real users, groups, cgroups and the real runtime: grants, denials, reloads."""
import json
import os
import shutil
import subprocess
import threading

import harness
from harness import (ALICE, DSAGENT, EXIT_DENIED, EXIT_NO_SUCH_PROCESS, MALLORY, OPS, SVC, AcceptWatch, Agent,
                     Target, dsctl, info_json, place_in_unit,
                     make_dir, request_id_of, run_tests, test, uid_of, wait_for)

EXIT_POLICY_BROKEN = 14
POLICY_BROKEN_WORDS = "the policy is broken, see journalctl -u dsagent"

ONCALL = f"""
[agent]
owner_access = true

[[rule]]
name = "svc-oncall"
groups = ["{OPS}"]
commands = ["ps", "info", "dump", "trace"]
targets.users = ["{SVC}"]
targets.names = ["DsTestTarget"]
dump_types = ["mini", "heap"]
trace_profiles = ["cpu-sampling"]
max_duration = "1m"
"""


def explain(agent, user, pid, *args):
    r = dsctl(agent, user, "--json", "explain", str(pid), *args)
    assert r.returncode in (0, EXIT_DENIED), r
    verdict = json.loads(r.stdout)
    assert verdict["allowed"] == (r.returncode == 0)
    return verdict


@test
def group_grant_works_and_every_request_outside_it_is_denied():
    target = Target(SVC, args=["--marker", "granted"])
    others = Target(MALLORY)
    agent = Agent(policy=ONCALL)
    watch = AcceptWatch(target.pid)

    # granted through her supplementary group
    info = info_json(agent, ALICE, target.pid)
    assert "--marker granted" in info["command_line"]
    assert agent.records()[-1]["DSAGENT_RULE"] == "svc-oncall"
    assert watch.accepts() == 1

    # another requester: the process does not exist for him, and the runtime sees nothing of it
    r = dsctl(agent, MALLORY, "info", str(target.pid))
    assert r.returncode == EXIT_NO_SUCH_PROCESS and "no such process" in r.stderr, r
    assert agent.record_for(request_id_of(r))["DSAGENT_DECISION"] == "denied"
    assert watch.accepts() == 1

    # another target owner: outside her rule, so absent too
    r = dsctl(agent, ALICE, "info", str(others.pid))
    assert r.returncode == EXIT_NO_SUCH_PROCESS, r

    # another command, another dump type, another profile, too long: the rule's words
    assert "no rule grants you 'env'" in explain(agent, ALICE, target.pid, "env")["reason"]
    assert explain(agent, ALICE, target.pid, "dump", "--type", "heap")["rule"] == "svc-oncall"
    assert "does not allow full dumps" in explain(agent, ALICE, target.pid, "dump", "--type", "full")["reason"]
    assert "gc-verbose" in explain(agent, ALICE, target.pid, "trace", "--profile", "gc-verbose")["reason"]
    assert "at most 60s" in explain(agent, ALICE, target.pid, "trace", "--profile", "cpu-sampling",
                                    "--duration", "120")["reason"]
    assert explain(agent, ALICE, target.pid, "trace", "--profile", "cpu-sampling", "--duration", "60")["allowed"]
    assert watch.accepts() == 1

    # the stranger learns nothing about rules written for others, nor about the process
    r = dsctl(agent, MALLORY, "--json", "explain", str(target.pid), "info")
    assert r.returncode == EXIT_NO_SUCH_PROCESS and "svc-oncall" not in r.stdout and "DsTestTarget" not in r.stdout, r

    # and ps shows the granted target to her, not the other one
    listed = {p["pid"] for p in json.loads(dsctl(agent, ALICE, "--json", "ps").stdout)}
    assert target.pid in listed and others.pid not in listed


@test
def unit_selector_matches_the_process_cgroup():
    in_unit = Target(SVC)
    outside = Target(SVC)
    place_in_unit(in_unit.pid, "dst-orders.service")
    agent = Agent(policy=f"""
[agent]
owner_access = false
[[rule]]
name = "orders-unit"
users = ["{ALICE}"]
commands = ["info"]
targets.units = ["dst-orders.service"]
""")
    info = info_json(agent, ALICE, in_unit.pid)
    assert info["unit"] == "dst-orders.service"
    # outside the unit her rule names the process does not exist for her
    r = dsctl(agent, ALICE, "info", str(outside.pid))
    assert r.returncode == EXIT_NO_SUCH_PROCESS, r
    # with owner_access off, not even the owner gets in without a rule
    assert dsctl(agent, SVC, "info", str(outside.pid)).returncode == EXIT_NO_SUCH_PROCESS


@test
def rate_limit_denies_past_the_budget_and_names_the_rule():
    target = Target(SVC)
    agent = Agent(policy=f"""
[[rule]]
name = "twice-an-hour"
users = ["{ALICE}"]
commands = ["info"]
targets.users = ["{SVC}"]
rate_limit = "2/1h"
""")
    watch = AcceptWatch(target.pid)
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == 0
    assert explain(agent, ALICE, target.pid, "info")["allowed"]  # asking costs nothing
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == 0
    r = dsctl(agent, ALICE, "info", str(target.pid))
    assert r.returncode == EXIT_DENIED and "rate limit of rule 'twice-an-hour' reached" in r.stderr, r
    record = agent.record_for(request_id_of(r))
    assert record["DSAGENT_DECISION"] == "denied" and record["DSAGENT_RULE"] == "twice-an-hour"
    assert watch.accepts() == 2
    # the owner is not counted against alice's budget
    assert dsctl(agent, SVC, "info", str(target.pid)).returncode == 0


def check_policy(path):
    return subprocess.run([DSAGENT, "--check-policy", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def write_root_file(directory, name, text, mode=0o644):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


@test
def check_policy_checks_collect_tables_in_main_file_and_policy_d():
    d = make_dir(None, 0o755)
    main = write_root_file(d, "policy.toml", f"""[agent]
max_session_duration = "1m"
[[collect]]
name = "queue-backlog"
targets.users = ["{SVC}"]
when.counter = "DsTest.Meter:ds-test-gauge[queue=q2]"
when.above = 300
when.for = "2s"
then.dump = "mini"
readers = ["group:{OPS}"]
limit = "1/1h"
""")
    dropins = os.path.join(d, "policy.d")
    os.mkdir(dropins, 0o755)
    write_root_file(dropins, "10-ex.toml", """[[collect]]
name = "marker"
targets.any = true
when.exception = "InvalidOperationException"
when.count = 2
when.within = "10s"
then.stacks = true
""")
    r = check_policy(main)
    assert r.returncode == 0 and ("2 [[collect]] tables checked; then.dump, then.stacks, then.trace_profile, "
                                  "then.counters, then.gcdump and then.exceptions take their artifacts") in r.stdout, r

    # a broken table in policy.d: the file, the line and the column, and the main file's [agent] bounds it
    bad = write_root_file(dropins, "20-bad.toml", """[[collect]]
name = "queue-backlog"
targets.users = ["no-such-user-here"]
when.counter = "DsTest.Meter:ds-test-gauge[queue=]"
when.above = 1
when.count = 2
then.trace_profile = "cpu-sampling"
then.duration = "2m"
then.gcdump = true
""")
    r = check_policy(main)
    assert r.returncode == 1, r
    for expected in (f'{bad}:3:18: \'users\': unknown user "no-such-user-here"',
                     f'{bad}:4:16: bad counter "DsTest.Meter:ds-test-gauge[queue=]"',
                     f"{bad}:6:6: 'when.count' does not go with 'when.counter'",
                     f"{bad}:8:17: 'then.duration' may be at most max_session_duration (60s)",
                     f"{bad}:9:6: 'then.trace_profile' and 'then.gcdump': one action a table",
                     f"{bad}:1:1: collect name 'queue-backlog' is already used at {main}:3"):
        assert expected in r.stderr, (expected, r.stderr)


@test
def check_policy_reports_every_error_with_its_position():
    d = make_dir(None, 0o755)
    good = write_root_file(d, "good.toml", ONCALL)
    r = check_policy(good)
    assert r.returncode == 0 and "OK, 1 rule in 1 file" in r.stdout, r

    bad = write_root_file(d, "bad.toml", f"""[agent]
owner_access = "yes"
[[rule]]
name = "r1"
users = ["no-such-user-here"]
commands = ["info", "teleport"]
targets.any = true
[[rule]]
name = "r1"
users = ["{ALICE}"]
commands = ["info"]
""")
    r = check_policy(bad)
    assert r.returncode == 1, r
    for expected in (f"{bad}:2:16: 'owner_access' must be a boolean",
                     f'{bad}:5:10: \'users\': unknown user "no-such-user-here"',
                     f'{bad}:6:21: unknown command "teleport"',
                     f"{bad}:8:1: rule needs targets",
                     f"{bad}:8:1: rule name 'r1' is already used at {bad}:3"):
        assert expected in r.stderr, (expected, r.stderr)

    syntax = write_root_file(d, "syntax.toml", "[agent]\nowner_access = true\nowner_access = false\n")
    r = check_policy(syntax)
    assert r.returncode == 1 and f"{syntax}:3:1:" in r.stderr and "duplicate" in r.stderr, r


@test
def unsafe_policy_files_are_refused():
    d = make_dir(None, 0o755)
    writable = write_root_file(d, "group-writable.toml", ONCALL, 0o664)
    r = check_policy(writable)
    assert r.returncode == 1 and "writable by group or others" in r.stderr, r

    owned = write_root_file(d, "owned.toml", ONCALL)
    os.chown(owned, uid_of(SVC), -1)
    r = check_policy(owned)
    assert r.returncode == 1 and "not owned by root" in r.stderr, r

    link = os.path.join(d, "link.toml")
    os.symlink(write_root_file(d, "target.toml", ONCALL), link)
    assert check_policy(link).returncode == 1

    dropins = os.path.join(d, "policy.d")
    os.mkdir(dropins, 0o777)
    os.chmod(dropins, 0o777)
    r = check_policy(write_root_file(d, "main.toml", ""))
    assert r.returncode == 1 and "policy.d" in r.stderr and "writable by group or others" in r.stderr, r

    # an agent started on such a policy listens, and answers everyone but root why it serves them not
    target = Target(SVC)
    agent = Agent("--policy", writable)  # the last --policy is the one read
    r = dsctl(agent, ALICE, "info", str(target.pid))
    assert r.returncode == EXIT_POLICY_BROKEN and POLICY_BROKEN_WORDS in r.stderr, r
    assert f"{writable}:0:0: refusing the policy file: it is writable by group or others" in \
        agent.record_for(request_id_of(r))["DSAGENT_REASON"]


@test
def broken_policy_at_start_serves_root_alone_until_a_reload_fixes_it():
    target = Target(SVC)
    agent = Agent(policy=ONCALL + '\n[[rule]]\nname = "half-written"\nusers = ["' + ALICE + '"]\n')
    # the socket is there before the policy is read: the record follows
    loaded = wait_for(lambda: agent.records(message_id=harness.POLICY_MESSAGE_ID), what="the policy record")
    assert [r["DSAGENT_POLICY_LOADED"] for r in loaded] == ["no"], loaded
    problem = f"{agent.policy_path}:"
    assert problem in loaded[0]["DSAGENT_POLICY_ERROR"], loaded
    watch = AcceptWatch(target.pid)

    # everyone but root is told why, in words and in an exit status of its own, whatever they ask:
    # the rule she was being granted, the owner's own access, listings, explanations, dumps
    for user, args in ((ALICE, ["info", str(target.pid)]), (SVC, ["info", str(target.pid)]),
                       (SVC, ["ps"]), (SVC, ["dumps"]), (ALICE, ["explain", str(target.pid), "info"]),
                       (SVC, ["dump", str(target.pid), "--type", "mini"])):
        r = dsctl(agent, user, *args)
        assert r.returncode == EXIT_POLICY_BROKEN and POLICY_BROKEN_WORDS in r.stderr, (args, r)
        # one record each, as for any request, naming what is wrong with which file
        record = agent.record_for(request_id_of(r))
        assert record["DSAGENT_DECISION"] == "failed" and record["DSAGENT_COMMAND"] == args[0], record
        assert record["DSAGENT_CLIENT_UID"] == str(uid_of(user)), record
        assert "the policy is broken" in record["DSAGENT_REASON"] and problem in record["DSAGENT_REASON"], record
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == EXIT_POLICY_BROKEN, r
    assert json.loads(r.stdout)["message"].startswith(POLICY_BROKEN_WORDS), r.stdout
    # nobody's request came near the runtime
    assert watch.accepts() == 0

    # root is served, under the built-in rules: the real runtime answers
    info = info_json(agent, "root", target.pid)
    assert info["pid"] == target.pid and info["runtime_version"], info
    assert agent.records()[-1]["DSAGENT_RULE"] == "root"
    assert watch.accepts() == 1

    # a reload that is still broken keeps it broken, and the records name the new problem
    still_broken = ONCALL + "\n[[rule]]\nname = 3\n"
    agent.write_policy(still_broken)
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "no"
    r = dsctl(agent, ALICE, "info", str(target.pid))
    assert r.returncode == EXIT_POLICY_BROKEN, r
    line = still_broken.splitlines().index("name = 3") + 1
    record = agent.record_for(request_id_of(r))
    assert f"{agent.policy_path}:{line}:" in record["DSAGENT_REASON"], record

    # fixed: the policy is in force and serves her
    agent.write_policy(ONCALL)
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    assert info_json(agent, ALICE, target.pid)["pid"] == target.pid
    assert agent.records()[-1]["DSAGENT_RULE"] == "svc-oncall"
    assert dsctl(agent, SVC, "info", str(target.pid)).returncode == 0  # owner_access = true, again
    # and a broken one after that keeps the good one: broken is only ever the state before any policy
    agent.write_policy(still_broken)
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "no"
    assert info_json(agent, ALICE, target.pid)["pid"] == target.pid


@test
def dropins_add_rules_in_name_order():
    target = Target(SVC)
    agent = Agent(policy="[agent]\nowner_access = false\n")
    agent.write_policy(f"""[[rule]]
name = "from-dropin"
users = ["{ALICE}"]
commands = ["info"]
targets.users = ["{SVC}"]
""", name="20-alice.toml")
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == 0
    assert agent.records()[-1]["DSAGENT_RULE"] == "from-dropin"

    agent.write_policy("[agent]\nowner_access = true\n", name="30-agent.toml")
    record = agent.reload()
    assert record["DSAGENT_POLICY_LOADED"] == "no"
    assert "belongs in the main policy file" in record["DSAGENT_POLICY_ERROR"]


@test
def reload_swaps_the_policy_and_keeps_the_old_one_when_the_new_is_broken():
    target = Target(SVC)
    allow = ONCALL
    agent = Agent(policy=allow)
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == 0

    agent.write_policy("[agent]\nowner_access = true\n")
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == EXIT_NO_SUCH_PROCESS

    agent.write_policy(allow + "\n[[rule]]\nname = \"broken\"\n")
    record = agent.reload()
    assert record["DSAGENT_POLICY_LOADED"] == "no" and "policy.toml:" in record["DSAGENT_POLICY_ERROR"]
    # still the previous (deny) policy, not the broken one, not nothing
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == EXIT_NO_SUCH_PROCESS
    assert dsctl(agent, SVC, "info", str(target.pid)).returncode == 0


@test
def reload_under_concurrent_requests_drops_none():
    target = Target(SVC)
    first = ONCALL
    second = ONCALL.replace('name = "svc-oncall"', 'name = "svc-oncall-v2"')
    agent = Agent(policy=first)
    results, lock = [], threading.Lock()

    def client():
        for _ in range(20):
            r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
            with lock:
                results.append(r)

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    reloads = 0
    while any(t.is_alive() for t in threads):
        agent.write_policy(second if reloads % 2 == 0 else first)
        assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
        reloads += 1
    for t in threads:
        t.join()

    # 120 requests, each a process of its own, against reloads that each wait some 50 ms for their record: a
    # loaded machine slows both alike, and the requests' side is tens of times the longer
    assert reloads >= 3, reloads
    failed = [r for r in results if r.returncode != 0]
    assert not failed, failed[:3]
    assert all(json.loads(r.stdout)["pid"] == target.pid for r in results)
    rules = {rec["DSAGENT_RULE"] for rec in agent.records()}
    assert rules <= {"svc-oncall", "svc-oncall-v2"} and len(agent.records()) == len(results)


@test
def pam_account_stack_gates_every_request():
    # a real PAM stack: the account phase refuses alice, lets everyone else through
    service = "dsagent-it-test"
    path = f"/etc/pam.d/{service}"
    with open(path, "w") as f:
        f.write(f"account required pam_succeed_if.so quiet user != {ALICE}\naccount required pam_permit.so\n")
    harness.scope.callback(os.unlink, path)
    target = Target(SVC)
    rule = f"""
[[rule]]
name = "both"
users = ["{ALICE}", "{MALLORY}"]
commands = ["ps", "info"]
targets.users = ["{SVC}"]
"""
    agent = Agent(policy=f'[agent]\npam_service = "{service}"\n' + rule)
    watch = AcceptWatch(target.pid)

    r = dsctl(agent, ALICE, "info", str(target.pid))
    assert r.returncode == EXIT_DENIED and f"PAM account check of service '{service}' failed" in r.stderr, r
    assert agent.record_for(request_id_of(r))["DSAGENT_DECISION"] == "denied"
    assert dsctl(agent, ALICE, "ps").returncode == EXIT_DENIED
    assert not explain(agent, ALICE, target.pid, "info")["allowed"]
    assert watch.accepts() == 0
    assert dsctl(agent, MALLORY, "info", str(target.pid)).returncode == 0
    assert watch.accepts() == 1

    # the same policy without PAM lets alice in: the stack was what refused her
    agent.write_policy(rule)
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == 0


if __name__ == "__main__":
    run_tests()
