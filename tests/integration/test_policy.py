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


EGRESS_SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY-dsagent-it"


class FileOpens:
    """Counts the opens and reads of one file (inotify's IN_OPEN and IN_ACCESS) from now on: an open with O_PATH,
    which reads nothing, makes none, so a count of 0 says the file was looked at and never opened to be read."""
    IN_ACCESS, IN_OPEN = 0x1, 0x20

    def __init__(self, path):
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, ctypes.get_errno()
        harness.scope.callback(os.close, self.fd)
        assert libc.inotify_add_watch(self.fd, path.encode(), self.IN_ACCESS | self.IN_OPEN) >= 0, ctypes.get_errno()

    def count(self):
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return 0
        return len(data) // 16  # struct inotify_event without a name: a watch on the file itself


def egress_policy(credentials, extra="", endpoint="http://127.0.0.1:7480"):
    return f"""[egress.central]
endpoint = "{endpoint}"
bucket = "dotnet-diagnostics"
region = "us-east-1"
prefix = "prod/"
credentials = "{credentials}"
{extra}
[[rule]]
name = "ops-dumps"
groups = ["{OPS}"]
commands = ["dump"]
dump_types = ["mini"]
targets.users = ["{SVC}"]
egress = "central"

[[collect]]
name = "marker"
targets.any = true
when.exception = "InvalidOperationException"
then.stacks = true
then.egress = "central"
"""


@test
def check_policy_checks_egress_targets_and_never_reads_their_credentials():
    d = make_dir(None, 0o755)
    keys = make_dir(None, 0o700, base=d)
    credentials = write_root_file(keys, "central.credentials",
                                  f'access_key_id = "AKIAEXAMPLE"\nsecret_access_key = "{EGRESS_SECRET}"\n', 0o600)
    opens = FileOpens(credentials)
    main = write_root_file(d, "policy.toml", egress_policy(f"file:{credentials}"))

    def refused(text, *expected, env=None):
        path = write_root_file(d, "policy.toml", text)
        r = subprocess.run([DSAGENT, "--check-policy", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env)
        assert r.returncode == 1, r
        for words in expected:
            assert words in r.stderr, (words, r.stderr)
        assert EGRESS_SECRET not in r.stdout + r.stderr
        return r

    r = check_policy(main)
    assert r.returncode == 0 and "1 [egress.NAME] target checked, credentials root's alone (not read)" in r.stdout, r
    assert EGRESS_SECRET not in r.stdout + r.stderr
    os.chmod(credentials, 0o400)
    assert check_policy(main).returncode == 0

    # each unsafe place for the keys is refused, with where and why
    where = f"{main}:6:15: [egress.central]: refusing the credentials file {credentials}"
    os.chmod(credentials, 0o644)
    refused(egress_policy(f"file:{credentials}"), f"{where}: its mode is 0644; it must be 0600 or 0400")
    os.chmod(credentials, 0o640)
    refused(egress_policy(f"file:{credentials}"), f"{where}: its mode is 0640")
    os.chmod(credentials, 0o600)
    os.chown(credentials, uid_of(SVC), -1)
    refused(egress_policy(f"file:{credentials}"), f"{where}: it is not owned by root")
    os.chown(credentials, 0, -1)
    link = os.path.join(keys, "link.credentials")
    os.symlink(credentials, link)
    refused(egress_policy(f"file:{link}"), "refusing the credentials file", f"{link}: it is a symbolic link")
    refused(egress_policy(f"file:{keys}/missing"), f"{keys}/missing: it cannot be found: No such file or directory")
    os.chmod(keys, 0o770)
    refused(egress_policy(f"file:{credentials}"),
            f"{where}: its directory, or one on the way to it, may be written by others than root")
    os.chmod(keys, 0o700)
    os.chown(keys, uid_of(SVC), -1)
    refused(egress_policy(f"file:{credentials}"), f"{where}: its directory")
    os.chown(keys, 0, -1)
    # a directory a user may write on the way (not sticky): they could swap the directory holding the keys
    shared = make_dir(None, 0o777, base=d)
    os.chmod(shared, 0o777)
    inner = make_dir(None, 0o700, base=shared)
    planted = write_root_file(inner, "k", "x", 0o600)
    refused(egress_policy(f"file:{planted}"), "may be written by others than root")

    # systemd:NAME is $CREDENTIALS_DIRECTORY/NAME, as the unit's LoadCredential= puts it
    env = dict(os.environ)
    env.pop("CREDENTIALS_DIRECTORY", None)
    refused(egress_policy("systemd:s3-central"),
            f"{main}:6:15: [egress.central]: credentials \"systemd:s3-central\" needs the unit's "
            "LoadCredential=s3-central:PATH, and the agent runs without $CREDENTIALS_DIRECTORY", env=env)
    creds_dir = make_dir(None, 0o500, base=d)
    write_root_file(creds_dir, "s3-central", f'secret_access_key = "{EGRESS_SECRET}"\n', 0o400)
    env["CREDENTIALS_DIRECTORY"] = creds_dir
    path = write_root_file(d, "policy.toml", egress_policy("systemd:s3-central"))
    r = subprocess.run([DSAGENT, "--check-policy", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env)
    assert r.returncode == 0 and EGRESS_SECRET not in r.stdout + r.stderr, r
    refused(egress_policy("systemd:s3-other"), "s3-other: it cannot be found", env=env)

    # the schema's refusals, each with its position; a secret pasted into the policy is never echoed
    refused(egress_policy(f"file:{credentials}", endpoint="http://s3.example.net"),
            f"{main}:2:12: 'endpoint' \"http://s3.example.net\" is http: on a host that is not loopback")
    refused(egress_policy(f"file:{credentials}", 'part_size = "4M"'), f"{main}:7:13: bad 'part_size' \"4M\"")
    refused(egress_policy(f"file:{credentials}", 'bucketName = "x"'), f"{main}:7:1: unknown key 'bucketName'")
    refused(egress_policy(f"file:{credentials}", f'secret_access_key = "{EGRESS_SECRET}"'),
            f"{main}:7:1: 'secret_access_key' in [egress.central]: keys never go in the policy")
    refused(egress_policy(f"AKIAEXAMPLE:{EGRESS_SECRET}"),
            f"{main}:6:15: 'credentials' says where the keys are, never what they are")
    refused(egress_policy(f"file:{credentials}").replace('region = "us-east-1"\n', ""),
            f"{main}:1:9: [egress.central] needs 'region'")
    refused(egress_policy(f"file:{credentials}").replace('then.egress = "central"', 'then.egress = "centrl"'),
            f"{main}:21:15: [[collect]] 'marker' then.egress names egress \"centrl\", which is not defined: the "
            "policy has [egress.central]")
    refused(egress_policy(f"file:{credentials}").replace('egress = "central"\n\n', 'egress = "archive"\n\n'),
            f"{main}:14:10: rule 'ops-dumps' names egress \"archive\", which is not defined")

    # looked at every time, opened to be read never
    assert opens.count() == 0, "the policy loader opened the credentials file"


@test
def explain_and_collect_name_the_egress_store_and_nothing_of_its_credentials():
    """explain names the deciding rule's store for a dump (what the rule's egress applies to), collect a table's
    then.egress: name, endpoint, bucket, prefix. Of the credentials nothing, not even where they are: the
    requester has no use for it, and the path would point whoever else gets a foothold at the file."""
    d = make_dir(None, 0o755)
    keys = make_dir(None, 0o700, base=d)
    credentials = write_root_file(keys, "central.credentials",
                                  f'access_key_id = "AKIAEXAMPLE"\nsecret_access_key = "{EGRESS_SECRET}"\n', 0o600)
    target = Target(SVC)
    # the rule grants info too, which its store is not for
    agent = Agent(policy=egress_policy(f"file:{credentials}").replace('commands = ["dump"]', 'commands = ["info", "dump"]'))
    store = {"egress": "central", "egress_endpoint": "http://127.0.0.1:7480", "egress_bucket": "dotnet-diagnostics",
             "egress_prefix": "prod/"}
    said = []

    verdict = explain(agent, ALICE, target.pid, "dump", "--type", "mini")
    assert verdict["rule"] == "ops-dumps" and {k: verdict.get(k) for k in store} == store, verdict
    r = dsctl(agent, ALICE, "explain", str(target.pid), "dump")
    assert r.returncode == 0, r
    assert "  egress: central (http://127.0.0.1:7480, bucket dotnet-diagnostics, prefix prod/)\n" in r.stdout, r
    said += [json.dumps(verdict), r.stdout, r.stderr]

    # a command the store is not for, a rule without one (the owner's), a denial: no store named
    for user, args, rule in ((ALICE, ["info"], "ops-dumps"), (SVC, ["dump"], "owner-access"),
                             (ALICE, ["dump", "--type", "full"], None)):
        verdict = explain(agent, user, target.pid, *args)
        assert verdict.get("rule") == rule and not any(k in verdict for k in store), (user, args, verdict)
        said.append(json.dumps(verdict))

    # the [[collect]] table's then.egress, in both forms
    r = dsctl(agent, "root", "--json", "collect")
    assert r.returncode == 0, r
    table = [t for t in json.loads(r.stdout) if t.get("table") == "marker" and "pid" not in t]
    assert len(table) == 1 and {k: table[0].get(k) for k in store} == store, r.stdout
    said += [r.stdout, r.stderr]
    r = dsctl(agent, "root", "collect")
    assert r.returncode == 0, r
    assert "  egress: central (http://127.0.0.1:7480, bucket dotnet-diagnostics, prefix prod/)\n" in r.stdout, r
    said += [r.stdout, r.stderr]

    records = json.dumps(agent.records())
    for words in (EGRESS_SECRET, "AKIAEXAMPLE", credentials, "central.credentials", "file:"):
        assert not any(words in text for text in said), (words, said)
        assert words not in records, words


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
