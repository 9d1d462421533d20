#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl resume against real runtimes suspended at startup: who may, what the runtime sees, what else says so."""
import json
import os

import harness
from harness import (ALICE, DUMP_BOUND, EXIT_DENIED, EXIT_NO_SUCH_PROCESS, MALLORY, OPS, SVC, AcceptWatch, Agent,
                     Target, dsctl, make_dir, printed, request_id_of, run_tests, test)

EXIT_SUSPENDED = 15
SUSPEND = {"DOTNET_DefaultDiagnosticPortSuspend": "1"}
ELF_CORE = 4  # e_type of a core file


def policy(rules):
    return '[agent]\ndump_dir = "@DUMP_DIR@"\n' + rules


def rule(name, who, commands, extra=""):
    quoted = ", ".join(f'"{c}"' for c in commands)
    return f'\n[[rule]]\nname = "{name}"\n{who}\ncommands = [{quoted}]\ntargets.users = ["{SVC}"]\n{extra}'


def suspended_target(**kwargs):
    return Target(SVC, environment=dict(SUSPEND, **kwargs.pop("environment", {})), wait_ready=False, **kwargs)


def record(agent, result):
    return agent.record_for(request_id_of(result))


@test
def a_suspended_app_runs_its_code_only_once_a_granted_user_resumes_it():
    target = suspended_target()
    agent = Agent(policy=policy(rule("ops-resume", f'groups = ["{OPS}"]', ["resume", "info"]) +
                                rule("mallory-looks", f'users = ["{MALLORY}"]', ["info"])))
    # checks that the app did not run (here and below) wait a moment for what it would print: a loaded machine can
    # only make them pass wrongly, and the records and the runtime's own answers say the same
    assert "ready" not in printed(target, wait=1.0), "the app ran before anyone resumed it"
    watch = AcceptWatch(target.pid)

    # a user who may look at the process but not resume it: refused, and the runtime sees nothing
    r = dsctl(agent, MALLORY, "resume", str(target.pid))
    assert r.returncode == EXIT_DENIED and "permission denied" in r.stderr, r
    rec = record(agent, r)
    assert rec["DSAGENT_COMMAND"] == "resume" and rec["DSAGENT_DECISION"] == "denied", rec
    assert watch.accepts() == 0, "a denied resume reached the runtime"
    assert "ready" not in printed(target, wait=0.5), "a denied resume let the app run"
    watch.stop()

    r = dsctl(agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0, r
    assert r.stdout.startswith(f"{target.pid} (DsTestTarget): resumed"), r.stdout
    rec = record_of_last(agent, "resume")
    assert rec["DSAGENT_DECISION"] == "allowed" and rec["DSAGENT_RULE"] == "ops-resume", rec
    assert "was suspended at startup" in rec["DSAGENT_REASON"], rec
    assert target.process.read_line("ready pid=").startswith(f"ready pid={target.ns_pid}")


def record_of_last(agent, command):
    records = [r for r in agent.records() if r.get("DSAGENT_COMMAND") == command]
    assert records, f"no {command} record"
    return records[-1]


@test
def a_stranger_is_told_no_such_process_and_the_runtime_sees_nothing():
    target = suspended_target()
    agent = Agent(policy=policy(rule("ops-resume", f'groups = ["{OPS}"]', ["resume"])))
    watch = AcceptWatch(target.pid)
    r = dsctl(agent, MALLORY, "resume", str(target.pid))
    assert r.returncode == EXIT_NO_SUCH_PROCESS and "no such process" in r.stderr, r
    assert "permission" not in r.stderr, r
    rec = record(agent, r)
    assert rec["DSAGENT_COMMAND"] == "resume" and rec["DSAGENT_DECISION"] == "denied", rec
    assert watch.accepts() == 0, "a stranger's resume reached the runtime"
    assert "ready" not in printed(target, wait=0.5), "a stranger's resume let the app run"


@test
def dumps_and_sessions_of_a_suspended_runtime_say_so_until_it_is_resumed():
    target = suspended_target()
    agent = Agent(policy=policy(rule("ops-all", f'groups = ["{OPS}"]',
                                     ["info", "dump", "trace", "counters", "stacks", "exceptions", "logs", "resume"],
                                     'dump_types = ["mini", "heap", "triage", "full"]\n'
                                     'trace_profiles = ["cpu-sampling"]\n')))
    mine = make_dir(ALICE, 0o700)
    words = "suspended at startup: the runtime waits to be resumed"
    hint = f"dsctl resume {target.pid}"

    # info works, and shows what the runtime says while it waits: its executable alone
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0, r
    info = json.loads(r.stdout)
    assert info["command_line"] == info["exe"], info

    asked = [("dump", str(target.pid)), ("dump", str(target.pid), "--type", "heap"),
             ("dump", str(target.pid), "--type", "triage"),
             ("trace", str(target.pid), "--duration", "5", "-o", os.path.join(mine, "t.nettrace")),
             ("counters", str(target.pid), "--duration", "5"), ("stacks", str(target.pid)),
             ("exceptions", str(target.pid), "--duration", "5"), ("logs", str(target.pid), "--duration", "5")]
    for args in asked:
        r = dsctl(agent, ALICE, *args)
        assert r.returncode == EXIT_SUSPENDED and words in r.stderr and hint in r.stderr, (args, r)
        rec = record(agent, r)
        assert rec["DSAGENT_COMMAND"] == args[0] and rec["DSAGENT_DECISION"] == "failed", rec
        assert "waits to be resumed" in rec["DSAGENT_REASON"] and rec["DSAGENT_RULE"] == "ops-all", rec
    assert os.listdir(mine) == [], "a refused trace left a file"
    r = dsctl(agent, ALICE, "--json", "dump", str(target.pid))
    assert r.returncode == EXIT_SUSPENDED, r
    assert json.loads(r.stdout)["exit_status"] == EXIT_SUSPENDED, r.stdout

    # a full dump needs nothing the startup has not made: it is taken
    core = os.path.join(mine, "full.core")
    r = dsctl(agent, ALICE, "dump", str(target.pid), "--type", "full", "-o", core, timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    with open(core, "rb") as f:
        header = f.read(18)
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[16:18], "little") == ELF_CORE
    assert "ready" not in printed(target), "a dump let the app run"

    r = dsctl(agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0, r
    target.process.read_line("ready pid=")
    r = dsctl(agent, ALICE, "dump", str(target.pid), timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    r = dsctl(agent, ALICE, "stacks", str(target.pid))
    assert r.returncode == 0, r


@test
def resuming_a_runtime_that_runs_changes_nothing_and_says_so():
    target = Target(SVC)
    agent = Agent()
    before = dsctl(agent, SVC, "--json", "info", str(target.pid))
    assert before.returncode == 0, before
    r = dsctl(agent, SVC, "--json", "resume", str(target.pid))
    assert r.returncode == 0, r
    answer = json.loads(r.stdout)
    assert answer["pid"] == target.pid and answer["message"].startswith("not suspended at startup"), answer
    rec = record_of_last(agent, "resume")
    assert rec["DSAGENT_DECISION"] == "allowed" and rec["DSAGENT_RULE"] == "owner-access", rec
    after = dsctl(agent, SVC, "--json", "info", str(target.pid))
    assert after.returncode == 0 and json.loads(after.stdout) == json.loads(before.stdout), (before, after)
    # and a runtime that was resumed before is one that runs
    suspended = suspended_target()
    assert dsctl(agent, SVC, "resume", str(suspended.pid)).returncode == 0
    suspended.process.read_line("ready pid=")
    r = dsctl(agent, SVC, "resume", str(suspended.pid))
    assert r.returncode == 0 and "not suspended at startup" in r.stdout, r


@test
def a_runtime_waiting_for_its_diagnostic_port_tools_is_not_released_by_its_own_socket():
    directory = make_dir(SVC, 0o700)
    # a connect port nobody listens on suspends by default; the default port does not here
    target = Target(SVC, environment={"DOTNET_DiagnosticPorts": os.path.join(directory, "monitor.sock")},
                    wait_ready=False)
    agent = Agent()
    r = dsctl(agent, SVC, "resume", str(target.pid))
    assert r.returncode == EXIT_SUSPENDED and "DOTNET_DiagnosticPorts" in r.stderr, r
    r = dsctl(agent, SVC, "dump", str(target.pid))
    assert r.returncode == EXIT_SUSPENDED and "DOTNET_DiagnosticPorts" in r.stderr, r
    assert "ready" not in printed(target, wait=0.5)


if __name__ == "__main__":
    run_tests()
