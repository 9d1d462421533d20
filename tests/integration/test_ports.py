#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runtimes that connect in (DOTNET_DiagnosticPorts=PATH,connect): the policy's [[port]]s, real runtimes."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid

import cpu_profiles
import harness
from harness import (ALICE, EXIT_BUSY, EXIT_DENIED, MALLORY, OPS, SVC, AcceptWatch, Agent, Process, Target, acl_of,
                     as_user, can_read, claim_pid, dsctl, make_dir, printed, request_id_of, run_tests, target_app,
                     test, traceevent, uid_of, wait_for)

PORT_MESSAGE_ID = "92ba7a9ad3f54f1995e1add7dea5ceee"
SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
SESSION_END_ID = "1c5ee471f818453b8c7bac25ac2e872f"
DUMP_MESSAGE_ID = "b44be14ffedf48ee806826f1d59bcc4e"
EXIT_SUSPENDED = 15


def port_dir():
    """A directory for ports outside /tmp (a target with a /tmp of its own still sees it), root's, 0755."""
    d = tempfile.mkdtemp(prefix="dst-ports-", dir="/run")
    os.chmod(d, 0o755)
    harness.scope.callback(shutil.rmtree, d, ignore_errors=True)
    return d


def policy(port_path, suspend_timeout="30s", port_users=(SVC,), extra=""):
    users = ", ".join(f'"{u}"' for u in port_users)
    return (f'[agent]\ndump_dir = "@DUMP_DIR@"\n\n[[port]]\npath = "{port_path}"\nusers = [{users}]\n'
            f'suspend_timeout = "{suspend_timeout}"\n\n'
            f'[[rule]]\nname = "ops"\ngroups = ["{OPS}"]\n'
            f'commands = ["ps", "info", "dump", "trace", "counters", "resume", "env"]\n'
            f'targets.users = ["{SVC}"]\ndump_types = ["mini", "heap"]\ntrace_profiles = ["cpu-sampling"]\n'
            f'\n[[rule]]\nname = "mallory-looks"\nusers = ["{MALLORY}"]\ncommands = ["info"]\n'
            f'targets.users = ["{SVC}"]\n' + extra)


def wait_port(path):
    """The agent's socket is there before it loads the policy; its ports follow a moment later."""
    wait_for(lambda: os.path.lexists(path), timeout=30, what=f"the port {path}")


def port_records(agent, event=None):
    return [r for r in agent.records(message_id=PORT_MESSAGE_ID) if event is None or r["DSAGENT_PORT_EVENT"] == event]


def wait_registered(agent, pid, timeout=60):
    def found():
        return [r for r in port_records(agent, "registered") if r["DSAGENT_TARGET_PID"] == str(pid)]
    return wait_for(found, timeout=timeout, what=f"pid {pid} registered on the port")[-1]


def connecting_target(port_path, mode="nosuspend", user=SVC, **kwargs):
    env = dict(kwargs.pop("environment", {}), DOTNET_DiagnosticPorts=f"{port_path},connect,{mode}")
    return Target(user, environment=env, wait_ready=(mode == "nosuspend"), **kwargs)


@test
def a_runtime_that_connects_in_is_registered_listed_and_served_through_its_port():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path))
    wait_port(path)
    st = os.lstat(path)
    assert st.st_uid == 0 and oct(st.st_mode & 0o777) == "0o660", oct(st.st_mode)  # mode shows the ACL mask
    acl = subprocess.run(["getfacl", "-cn", path], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert f"user:{uid_of(SVC)}:rw-" in acl and "other::---" in acl, acl

    target = connecting_target(path)
    rec = wait_registered(agent, target.pid)
    assert rec["DSAGENT_SUSPENDED"] == "no" and rec["DSAGENT_ADVERTISED_PID"] == str(target.ns_pid), rec
    assert rec["DSAGENT_TARGET_UID"] == str(uid_of(SVC)), rec

    watch = AcceptWatch(target.pid)  # the runtime's own socket: nothing may reach it
    r = dsctl(agent, ALICE, "--json", "ps")
    assert r.returncode == 0, r
    mine = [p for p in json.loads(r.stdout) if p["pid"] == target.pid]
    assert mine and mine[0]["port"] == path and mine[0]["suspended"] is False, r.stdout
    r = dsctl(agent, ALICE, "ps")
    assert any(line.startswith(str(target.pid)) and line.endswith("[port]") for line in r.stdout.splitlines()), r
    for _ in range(3):  # each command takes a connection; the runtime makes the next one
        r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
        assert r.returncode == 0, r
        info = json.loads(r.stdout)
        assert info["runtime_pid"] == target.ns_pid and info["port"] == path, info
    r = dsctl(agent, ALICE, "env", str(target.pid))
    assert r.returncode == 0 and "DOTNET_DiagnosticPorts" in r.stdout, r
    out = make_dir(ALICE, 0o700)
    r = dsctl(agent, ALICE, "trace", str(target.pid), "--profile", "cpu-sampling", "--duration", "2",
              "-o", os.path.join(out, "t.nettrace"), timeout=120)
    assert r.returncode == 0, r
    with open(os.path.join(out, "t.nettrace"), "rb") as f:
        assert f.read(8) == b"Nettrace", "not a nettrace"
    r = dsctl(agent, ALICE, "counters", str(target.pid), "--duration", "2", timeout=120)
    assert r.returncode == 0 and "System.Runtime" in r.stdout, r
    assert watch.accepts() == 0, "a request went to the runtime's own socket, not through its port"
    watch.stop()  # createdump must ptrace the process: nothing else may

    # without its own socket at all, the runtime is still served through its port: a dump too
    os.unlink(target.socket_path)
    r = dsctl(agent, ALICE, "dump", str(target.pid), "-o", os.path.join(out, "mini.core"), timeout=300)
    assert r.returncode == 0, r
    with open(os.path.join(out, "mini.core"), "rb") as f:
        assert f.read(4) == b"\x7fELF"
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == path, r
    assert len(port_records(agent, "registered")) == 1, "the runtime's reconnections were registered anew"


@test
def a_suspended_runtime_waits_for_a_granted_resume_through_its_port():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="0"))
    target = connecting_target(path, mode="suspend")
    rec = wait_registered(agent, target.pid)
    assert rec["DSAGENT_SUSPENDED"] == "yes" and rec["DSAGENT_SUSPEND_TIMEOUT_TEXT"] == "none", rec
    assert "ready" not in printed(target, wait=1.0), "the app ran before it was resumed"

    r = dsctl(agent, ALICE, "ps")
    assert any(line.startswith(str(target.pid)) and line.endswith("[suspended]") for line in r.stdout.splitlines()), r
    r = dsctl(agent, ALICE, "trace", str(target.pid), "--profile", "cpu-sampling", "--duration", "2",
              "-o", os.path.join(make_dir(ALICE, 0o700), "t.nettrace"))
    assert r.returncode == EXIT_SUSPENDED and f"dsctl resume {target.pid}" in r.stderr, r
    r = dsctl(agent, MALLORY, "resume", str(target.pid))
    assert r.returncode == EXIT_DENIED, r
    assert "ready" not in printed(target, wait=0.5), "a denied resume let the app run"

    r = dsctl(agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0 and f"resumed through its diagnostic port {path}" in r.stdout, r
    target.process.read_line("ready pid=", timeout=30)
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and json.loads(r.stdout).get("suspended", False) is False, r
    assert not port_records(agent, "auto-resumed"), "suspend_timeout 0 means wait"


def on_start(name="startup", users=(SVC,), providers=("Dsagent-TestTarget",), duration="3s", readers=(ALICE,),
             profile=None, max_size=None):
    """An [[on_start]] table tracing @providers, or @profile when given; stopped at @max_size when given."""
    quoted = lambda items: ", ".join(f'"{i}"' for i in items)
    what = f'trace_profile = "{profile}"' if profile else f'trace_providers = [{quoted(providers)}]'
    size = f'max_size = "{max_size}"\n' if max_size else ""
    return (f'\n[[on_start]]\nname = "{name}"\ntargets.users = [{quoted(users)}]\n'
            f'{what}\nduration = "{duration}"\n{size}readers = [{quoted(readers)}]\n')


@test
def an_on_start_trace_holds_the_apps_first_event_and_only_its_readers_read_it():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="0", extra=on_start()))
    # suspend_timeout 0: only the agent's on_start resume lets this app run
    target = connecting_target(path, mode="suspend", args=("--startup-marker",))
    target.process.read_line("ready pid=", timeout=60)
    rec = wait_registered(agent, target.pid)
    assert rec["DSAGENT_SUSPENDED"] == "no" and "[[on_start]] startup" in rec["DSAGENT_REASON"], rec
    started = [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    assert len(started) == 1 and started[0]["DSAGENT_SESSION_ORIGIN"] == "on_start", started
    assert started[0]["DSAGENT_RULE"] == "startup" and "Dsagent-TestTarget" in started[0]["DSAGENT_PROVIDERS"], started

    def published():
        return [r for r in agent.records(message_id=DUMP_MESSAGE_ID) if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    dump = wait_for(published, timeout=90, what="the on_start trace published")[0]
    # the end record follows the file's (it says whether the file was stored)
    ended = wait_for(lambda: [r for r in agent.records(message_id=SESSION_END_ID)
                              if r["DSAGENT_TARGET_PID"] == str(target.pid)], timeout=30, what="the session's end")
    assert ended and ended[0]["DSAGENT_SESSION_END"] == "duration" and ended[0]["DSAGENT_SESSION_COMPLETE"] == "yes", ended
    trace = dump["DSAGENT_DUMP_PATH"]
    assert os.path.dirname(trace) == agent.dumps and dump["DSAGENT_DUMP_TYPE"] == "trace", dump
    assert int(ended[0]["DSAGENT_SESSION_BYTES"]) == os.path.getsize(trace), (ended, os.path.getsize(trace))

    seen = traceevent(trace)  # Microsoft's reader: the app's very first statement is in it
    assert seen["markers"] >= 1 and seen["first_marker"]["sequence"] == -1, seen

    st = os.stat(trace)
    assert st.st_uid == 0 and st.st_nlink == 1, st
    acl = acl_of(trace)
    assert f"user:{uid_of(ALICE)}:r--" in acl and not [e for e in acl if e.startswith("user:") and
                                                       e not in ("user::rw-", f"user:{uid_of(ALICE)}:r--")], acl
    assert can_read(ALICE, trace), "the rule's reader cannot read the trace"
    for other in (MALLORY, SVC):  # the app's own user is not a reader unless the rule says so
        assert not can_read(other, trace), f"{other} can read the on_start trace"
    r = dsctl(agent, ALICE, "--json", "dumps")
    assert r.returncode == 0, r
    listed = [x for x in json.loads(r.stdout) if x["path"] == trace]
    assert listed and listed[0].get("dump_type", listed[0].get("type")) == "trace", r.stdout
    r = dsctl(agent, MALLORY, "--json", "dumps")
    assert r.returncode == 0 and trace not in r.stdout, r
    r = dsctl(agent, ALICE, "dumps", "--remove", trace)
    assert r.returncode != 0 and os.path.exists(trace), "a reader removed what the agent asked for"


@test
def an_on_start_trace_whose_first_name_is_taken_gets_the_next_one():
    """[[on_start]] traces are named for their rule, process and second, and published by the recorder that
    publishes [[collect]] artifacts: a second one of the same rule, process and second finds its first name taken
    and takes the next (".2"). Here every first name from the trace's start to three minutes on is taken while it
    runs. Before, each name tried labelled the file again with XATTR_CREATE, which fails on a file already
    labelled: every name failed and the trace was lost."""
    path = os.path.join(port_dir(), "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="0", extra=on_start(duration="8s")))
    target = connecting_target(path, mode="suspend", args=("--startup-marker",))
    target.process.read_line("ready pid=", timeout=60)  # resumed by the agent once its trace started
    name = harness.artifact_name_part(harness.info_json(agent, "root", target.pid)["name"])
    started = [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    assert started, "the app ran before its trace began"
    # 8 s: the trace was running when the app printed its first line, and runs 8 s; the names are taken well
    # within them (a few ms), from 5 s before now, which covers the trace's start, on
    harness.take_artifact_names(agent.dumps, f"trace.{name}.{target.pid}.on_start-startup", "nettrace", 180)
    ended = wait_for(lambda: [r for r in agent.records(message_id=SESSION_END_ID)
                              if r["DSAGENT_TARGET_PID"] == str(target.pid)], timeout=60, what="the session's end")
    assert ended[0]["DSAGENT_SESSION_END"] == "duration", ended
    dumps = [r for r in agent.records(message_id=DUMP_MESSAGE_ID) if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    assert len(dumps) == 1, (dumps, port_records(agent, "on-start-failed"))
    trace = dumps[0]["DSAGENT_DUMP_PATH"]
    assert trace.endswith(".2.nettrace") and f"trace.{name}.{target.pid}.on_start-startup." in trace, trace
    assert os.path.getsize(trace) > 0 and can_read(ALICE, trace), trace


@test
def an_on_start_trace_whose_record_cannot_be_written_is_removed():
    """No startup trace without its record, even where the room held for it does not help: a record that cannot
    be formatted for want of memory (the test hook DSAGENT_TEST_ARTIFACT_RECORD_FAILS fails every artifact's dump
    record so). The trace is removed from dump_dir once named, the agent says so, and the session's end record
    says it was not stored. Without the removal the trace stays, root's and readable by the rule's reader, with
    no record of it."""
    path = os.path.join(port_dir(), "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="0", extra=on_start()),
                  env={"DSAGENT_TEST_ARTIFACT_RECORD_FAILS": "1"})
    target = connecting_target(path, mode="suspend", args=("--startup-marker",))
    target.process.read_line("ready pid=", timeout=60)  # resumed by the agent once its trace started
    ended = wait_for(lambda: [r for r in agent.records(message_id=SESSION_END_ID)
                              if r["DSAGENT_TARGET_PID"] == str(target.pid)], timeout=60, what="the session's end")
    assert ended[0]["DSAGENT_SESSION_END"] == "not-stored", ended
    left = [f for f in os.listdir(agent.dumps) if ".on_start-" in f] if os.path.isdir(agent.dumps) else []
    assert left == [], left
    assert not agent.records(message_id=DUMP_MESSAGE_ID), "a dump record was written"
    said = f"[[on_start]] startup: the trace of pid {target.pid} was removed: its audit record could not be written"
    with open(agent.log_path, errors="replace") as log:
        text = log.read()
    assert said in text, text[-2000:]


@test
def an_on_start_trace_is_one_of_the_sessions_max_sessions_per_target_allows():
    """With max_sessions_per_target = 1 the startup trace holds the process's one session while it runs: a
    granted counters session is told so; once the trace has ended, it runs. Before, the startup trace was counted
    nowhere, and the process carried two sessions where the policy allows one."""
    d = port_dir()
    path = os.path.join(d, "app.sock")
    settings = policy(path, suspend_timeout="0", extra=on_start(duration="15s"))
    agent = Agent(policy=settings.replace("[agent]\n", "[agent]\nmax_sessions_per_target = 1\n", 1))
    target = connecting_target(path, mode="suspend", args=("--startup-marker",))
    target.process.read_line("ready pid=", timeout=60)  # resumed by the agent once its trace started
    mine = lambda rs: [r for r in rs if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    wait_for(lambda: mine(agent.records(message_id=SESSION_START_ID)), timeout=30, what="the startup trace's start")
    r = dsctl(agent, ALICE, "counters", str(target.pid), "--duration", "1", timeout=120)
    assert r.returncode == EXIT_BUSY and "max_sessions_per_target" in r.stderr, r
    assert not mine(agent.records(message_id=SESSION_END_ID)), "the trace ended before alice asked"
    wait_for(lambda: mine(agent.records(message_id=SESSION_END_ID)), timeout=90, what="the startup trace's end")
    # 3 s: the runtime's first sample comes a second after the session starts, later on a busy machine
    r = dsctl(agent, ALICE, "counters", str(target.pid), "--duration", "3", timeout=120)
    assert r.returncode == 0 and "System.Runtime" in r.stdout, r


@test
def an_on_start_trace_counts_as_one_of_its_owners_sessions():
    """A startup trace is work the agent starts of the runtime's owner's process: it is charged to that owner and
    counts against the owner's max_sessions_per_user, as the owner's own sessions do. With max_sessions_per_user
    = 1 and svc's counters session of another of its processes running, svc's new runtime is left untraced (and
    goes on at the port's suspend_timeout), with a record that says why. Before, startup traces were charged to an id of their own, apart from
    every user's pools."""
    d = port_dir()
    path = os.path.join(d, "app.sock")
    settings = policy(path, suspend_timeout="1s", extra=on_start())  # a runtime left untraced goes on after 1 s
    agent = Agent(policy=settings.replace("[agent]\n", "[agent]\nmax_sessions_per_user = 1\n", 1))
    other = Target(SVC)
    counters = Process(as_user(SVC, [harness.DSCTL, "--socket", agent.socket, "counters", str(other.pid),
                                     "--duration", "120"]))
    wait_for(lambda: [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] ==
                      str(other.pid)], timeout=60, what="svc's own session")
    target = connecting_target(path, mode="suspend", args=("--startup-marker",))
    skipped = wait_for(lambda: port_records(agent, "on-start-skipped"), timeout=30, what="the trace skipped")
    assert "max_sessions_per_user" in skipped[0]["DSAGENT_REASON"], skipped
    target.process.read_line("ready pid=", timeout=60)  # resumed at the port's suspend_timeout, untraced
    assert not [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    assert counters.proc.poll() is None, "svc's own session ended first"


@test
def a_runtime_no_on_start_covers_is_not_traced_and_waits_as_before():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="0", extra=on_start(users=(ALICE,))))
    target = connecting_target(path, mode="suspend", args=("--startup-marker",))
    rec = wait_registered(agent, target.pid)
    assert rec["DSAGENT_SUSPENDED"] == "yes", rec
    assert "ready" not in printed(target, wait=1.0), "the app ran before it was resumed"
    assert not agent.records(message_id=SESSION_START_ID), "a runtime no [[on_start]] covers was traced"
    r = dsctl(agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0, r
    target.process.read_line("ready pid=", timeout=30)


def on_start_cpu_trace(**settings):
    """An app that burns CPU from its start (--burn-cpu), held at its port until an [[on_start]] CPU trace
    (dotnet-sampled-thread-time) of @settings (on_start()'s) has started. Once the trace is published: its path
    and the session's end records."""
    path = os.path.join(port_dir(), "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="0", extra=on_start(profile="dotnet-sampled-thread-time",
                                                                           **settings)))
    target = connecting_target(path, mode="suspend", args=("--burn-cpu",))
    target.process.read_line("ready pid=", timeout=60)  # resumed by the agent once its trace started
    mine = lambda rs: [r for r in rs if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    dump = wait_for(lambda: mine(agent.records(message_id=DUMP_MESSAGE_ID)), timeout=90,
                    what="the on_start trace published")[0]
    # the end record follows the file's
    ended = wait_for(lambda: mine(agent.records(message_id=SESSION_END_ID)), timeout=30, what="the session's end")
    trace = dump["DSAGENT_DUMP_PATH"]
    assert dump["DSAGENT_DUMP_TYPE"] == "trace" and ".on_start-startup." in trace, dump
    return trace, ended


@test
def an_on_start_cpu_trace_converts_for_its_reader_with_the_hot_method_named():
    """An [[on_start]] table's CPU trace (dotnet-sampled-thread-time) of an app that burns CPU from its start, as the
    table's reader converts it (dsctl convert): every format names the hot method, go tool pprof -top first, the
    flame graph widest under Main. The session ended by the agent's StopTracing over the port, so the runtime's
    rundown names the methods. Mallory and the app's own user, whom the table does not name, cannot read the
    trace, and converting it writes them nothing."""
    trace, ended = on_start_cpu_trace(duration="4s")
    assert ended[0]["DSAGENT_SESSION_END"] == "duration" and ended[0]["DSAGENT_SESSION_COMPLETE"] == "yes", ended
    cpu_profiles.hot_method_in_every_format(ALICE, trace)
    cpu_profiles.converts_nothing_for((MALLORY, SVC), trace, "pprof", "cpu.pb.gz")


@test
def an_on_start_trace_stopped_at_max_size_holds_the_rundown_that_names_its_methods():
    """An [[on_start]] CPU trace with max_size = "64K" of an app that burns CPU: at 64 KiB the agent stops the
    session (StopTracing over the port), as docs/policy.md says, and the runtime's closing rundown comes on top. The
    end record says size-limit and complete, its bytes are the file's, past 64 KiB; the file holds the rundown,
    and the table's reader's dsctl convert names the hot method in every format. Before, the worker stopped
    reading at 64 KiB and the agent never stopped the session: complete=no, no rundown, every frame ?!?."""
    # 120 s: far beyond the seconds 64 KiB of samples of a burning app take, so the size ends the session
    trace, ended = on_start_cpu_trace(duration="120s", max_size="64K")
    assert len(ended) == 1, ended
    cpu_profiles.stopped_at_size_with_rundown(ended[0], trace, 64 * 1024)
    cpu_profiles.hot_method_in_every_format(ALICE, trace)


def second_port(path, suspend_timeout="0"):
    return f'\n[[port]]\npath = "{path}"\nusers = ["{SVC}"]\nsuspend_timeout = "{suspend_timeout}"\n'


@test
def a_runtime_suspended_on_two_ports_is_resumed_through_both():
    d = port_dir()
    a, b = os.path.join(d, "a.sock"), os.path.join(d, "b.sock")
    agent = Agent(policy=policy(a, suspend_timeout="0", extra=second_port(b)))
    target = connecting_target(f"{a},connect,suspend;{b}", mode="suspend")
    for path in (a, b):
        wait_for(lambda: [r for r in port_records(agent, "registered") if r["DSAGENT_PORT_PATH"] == path and
                          r["DSAGENT_TARGET_PID"] == str(target.pid) and r["DSAGENT_SUSPENDED"] == "yes"],
                 timeout=60, what=f"registered suspended on {path}")
    r = dsctl(agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0 and (f"diagnostic ports {a}, {b}" in r.stdout or f"diagnostic ports {b}, {a}" in r.stdout), r
    target.process.read_line("ready pid=", timeout=30)  # the runtime waited for both: one resume was not enough


@test
def a_runtime_exec_d_onto_another_port_leaves_no_registration_on_the_first():
    d = port_dir()
    a, b = os.path.join(d, "a.sock"), os.path.join(d, "b.sock")
    agent = Agent(policy=policy(a, extra=second_port(b, "30s")))
    trigger = os.path.join(make_dir(None, 0o755), "exec-now")
    target = connecting_target(a, args=("--exec-when", trigger, f"{b},connect,nosuspend"))
    first = wait_registered(agent, target.pid)
    assert first["DSAGENT_PORT_PATH"] == a, first
    open(trigger, "w").close()
    target.process.read_line("ready pid=", timeout=60)  # the same process, its second runtime
    wait_for(lambda: [r for r in port_records(agent, "registered") if r["DSAGENT_PORT_PATH"] == b],
             timeout=60, what="the new runtime registered on the second port")
    gone = [r for r in port_records(agent, "gone") if r["DSAGENT_PORT_PATH"] == a]
    assert gone and gone[0]["DSAGENT_TARGET_PID"] == str(target.pid) and \
        gone[0]["DSAGENT_RUNTIME_COOKIE"] == first["DSAGENT_RUNTIME_COOKIE"], port_records(agent)
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == b, r
    listed = [p for p in json.loads(dsctl(agent, ALICE, "--json", "ps").stdout) if p["pid"] == target.pid]
    assert len(listed) == 1 and listed[0]["port"] == b, listed


@test
def a_runtime_root_in_its_own_user_namespace_is_its_host_user_on_a_port():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path))
    target = connecting_target(path, userns="")  # unshare -Urm: uid 0 inside, as any user can make
    uid_map = open(f"/proc/{target.pid}/uid_map").read().split()
    assert uid_map[:2] == ["0", str(uid_of(SVC))], uid_map  # it really is "root" where it runs
    rec = wait_registered(agent, target.pid)
    assert rec["DSAGENT_TARGET_UID"] == str(uid_of(SVC)), rec
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == path, r

    # "root" of a namespace of a user the port does not admit is that user to the kernel: the socket's
    # ACL keeps it out (it runs, unregistered), and nothing of it reaches the agent
    intruder = connecting_target(path, user=MALLORY, userns="")
    assert open(f"/proc/{intruder.pid}/uid_map").read().split()[:2] == ["0", str(uid_of(MALLORY))]
    time.sleep(3)  # the runtime tries to connect in at startup, and again every second
    assert not [r for r in port_records(agent) if r["DSAGENT_TARGET_PID"] == str(intruder.pid)], port_records(agent)
    r = dsctl(agent, "root", "--json", "info", str(intruder.pid))
    assert r.returncode == 0 and "port" not in json.loads(r.stdout), r


# What the agent reserves for its clients (docs/architecture.md: 2720 + (512 + 4 of root's) x 6) and for the ports
# besides registrations (256 unadvertised connections at 2 fds, 4 per possible listener): an open files limit
# of these plus 4 leaves room for two registered runtimes.
CLIENT_FDS = 2720 + (512 + 4) * 6
PORT_FIXED_FDS = 2 * 256 + 4 * 16


@test
def registrations_stop_where_the_open_files_limit_does_and_clients_keep_theirs():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    limit = CLIENT_FDS + PORT_FIXED_FDS + 2 * 2
    agent = Agent(policy=policy(path), wrapper=["prlimit", f"--nofile={limit}:{limit}", "--"])
    said = wait_for(lambda: [line for line in open(agent.log_path) if "leaves room for" in line],
                    what="the agent's word on the fd limit")[0]
    assert f"open files limit ({limit}) leaves room for 2 registered runtimes" in said, said
    first, second = connecting_target(path), connecting_target(path)
    for t in (first, second):
        wait_registered(agent, t.pid)
    third = connecting_target(path)
    rec = wait_for(lambda: [r for r in port_records(agent, "refused") if r["DSAGENT_TARGET_PID"] == str(third.pid)],
                   timeout=30, what="the third runtime refused")[0]
    assert "open files limit" in rec["DSAGENT_REASON"], rec
    r = dsctl(agent, ALICE, "--json", "info", str(third.pid))  # it runs on, served through its own socket
    assert r.returncode == 0 and "port" not in json.loads(r.stdout), r
    r = dsctl(agent, ALICE, "--json", "info", str(first.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == path, r


@test
def the_agent_resumes_a_runtime_nobody_resumed_within_suspend_timeout():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="2s"))
    started = time.monotonic()
    target = connecting_target(path, mode="suspend")
    target.process.read_line("ready pid=", timeout=30)
    waited = time.monotonic() - started
    assert waited >= 2, f"resumed after {waited:.1f} s, before suspend_timeout"
    rec = wait_for(lambda: port_records(agent, "auto-resumed"), what="the auto-resume record")[0]
    assert rec["DSAGENT_TARGET_PID"] == str(target.pid) and "suspend_timeout (2 s)" in rec["DSAGENT_REASON"], rec


# Another user's flood: holds up to HOLD connections to the port open at once, never advertising, and opens
# another as soon as the agent closes one (refused at once over the per-user limit, or after 2 s of silence).
FLOOD = r"""
import selectors, socket, sys, time
path, hold = sys.argv[1], int(sys.argv[2])
sel, opened = selectors.DefaultSelector(), 0
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    while len(sel.get_map()) < hold:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        try:
            s.connect(path)
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            break
        sel.register(s, selectors.EVENT_READ)
        opened += 1
        if opened == 1000:
            print("opened 1000", flush=True)
    for key, _ in sel.select(0.05):
        try:
            data = key.fileobj.recv(64)
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj)
            key.fileobj.close()
"""

# One user's N fake runtimes (forked), each registering with its own pid and answering every ProcessInfo as a
# runtime suspended at startup does (its command line its executable alone), everything else with OK; each
# connects again at once after each command, and again and again when refused.
FAKE_RUNTIMES = r"""
import os, socket, struct, sys, time
path, n = sys.argv[1], int(sys.argv[2])


def string(text):
    data = (text + "\0").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


def read(c, size):
    data = b""
    while len(data) < size:
        more = c.recv(size - len(data))
        if not more:
            return None
        data += more
    return data


def serve():
    cookie, me, exe = os.urandom(16), os.getpid(), os.readlink("/proc/self/exe")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.connect(path)
            c.sendall(b"ADVR_V1\0" + cookie + struct.pack("<QH", me, 0))
            head = read(c, 20)
            if head is not None:
                size, command_set, command = struct.unpack("<HBB", head[14:18])
                read(c, size - 20)
                payload = b""
                if (command_set, command) == (4, 0):
                    payload = struct.pack("<Q", me) + cookie + string(exe) + string("Linux") + string("x64")
                c.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), 0xFF, 0, 0) + payload)
        except OSError:
            head = None
        c.close()
        if head is None:
            time.sleep(0.05)


for _ in range(n):
    if os.fork() == 0:
        serve()
        os._exit(0)
print("forked", n, flush=True)
os.wait()
"""


def script_file(text, name):
    path = os.path.join(make_dir(None, 0o755), name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


@test
def a_runtime_is_resumed_at_its_suspend_timeout_from_its_connection_through_other_users_floods():
    """dst-alice registers 80 fake runtimes (64 get in, the rest retry), dst-mallory keeps 300 silent connections
    coming; dst-svc's real app, suspended on the same port with suspend_timeout 1 s, runs within 1 s + 2 s of its
    connection. The deadline is armed from the accept of its first connection and, once over, the agent asks at
    once on the connection the runtime holds ready (one ProcessInfo, one ResumeRuntime): no pause of the agent's
    own is left after the deadline. The 2 s margin is for those two exchanges and for the app's own way from
    ResumeRuntime to Main on a loaded host (the agent resumed within 50 ms of the deadline in trials, the app
    printed up to 1.5 s later). (Before, the timer was armed only once the agent had told whether the runtime
    waits: 3.75 s of pauses after its first ProcessInfo, each question waiting for a new connection.)"""
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="1s", port_users=(SVC, ALICE, MALLORY)))
    wait_port(path)
    alice, mallory = str(uid_of(ALICE)), str(uid_of(MALLORY))
    Process(as_user(ALICE, [harness.PYTHON, script_file(FAKE_RUNTIMES, "fake_runtimes.py"), path, "80"]))
    wait_for(lambda: len([r for r in port_records(agent, "registered") if r["DSAGENT_TARGET_UID"] == alice]) >= 60,
             timeout=60, what="dst-alice's fake runtimes registered")
    flood = Process(as_user(MALLORY, [harness.PYTHON, script_file(FLOOD, "flood.py"), path, "300"]))
    flood.read_line("opened 1000", timeout=60)
    for _ in range(2):
        started = time.monotonic()
        target = connecting_target(path, mode="suspend")
        connected = time.monotonic()  # its diagnostic socket is there: it connects to the port right after
        target.process.read_line("ready pid=", timeout=60)
        ran = time.monotonic()
        assert ran - started >= 1, f"resumed {ran - started:.1f} s after it started, before suspend_timeout"
        assert ran - connected <= 1 + 2, f"resumed {ran - connected:.1f} s after it connected, suspend_timeout 1 s"
        rec = wait_for(lambda: [r for r in port_records(agent, "auto-resumed")
                                if r["DSAGENT_TARGET_PID"] == str(target.pid)], what="the app's auto-resume record")[0]
        assert "suspend_timeout (1 s)" in rec["DSAGENT_REASON"], rec
        target.process.stop()
    # both floods were there all along: alice's runtimes held their share, mallory's connections were refused
    assert len([r for r in port_records(agent, "auto-resumed") if r["DSAGENT_TARGET_UID"] == alice]) >= 60
    assert flood.proc.poll() is None
    assert [r for r in port_records(agent, "refused") if r["DSAGENT_TARGET_UID"] == mallory]


@test
def a_process_gets_one_startup_trace_however_many_ports_it_registers_on():
    """A runtime suspended on two ports registers twice; an [[on_start]] covers both registrations, but the
    process is traced once: the second is skipped with a record, and both resume it. (Two traces used to run,
    and the second file, named alike in the same second, was lost without a record.)"""
    d = port_dir()
    a, b = os.path.join(d, "a.sock"), os.path.join(d, "b.sock")
    agent = Agent(policy=policy(a, suspend_timeout="0", extra=second_port(b) + on_start(duration="2s")))
    target = connecting_target(f"{a},connect,suspend;{b}", mode="suspend", args=("--startup-marker",))
    for path in (a, b):  # the attack's premise: two registrations of the one process
        wait_for(lambda: [r for r in port_records(agent, "registered") if r["DSAGENT_PORT_PATH"] == path and
                          r["DSAGENT_TARGET_PID"] == str(target.pid)], timeout=60, what=f"registered on {path}")
    target.process.read_line("ready pid=", timeout=60)
    skipped = wait_for(lambda: port_records(agent, "on-start-skipped"), timeout=30, what="the second skipped")
    assert len(skipped) == 1 and "traced at its start already" in skipped[0]["DSAGENT_REASON"], skipped
    mine = lambda rs: [r for r in rs if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    dump = wait_for(lambda: mine(agent.records(message_id=DUMP_MESSAGE_ID)), timeout=90, what="the trace stored")
    assert len(mine(agent.records(message_id=SESSION_START_ID))) == 1, agent.records(message_id=SESSION_START_ID)
    ended = wait_for(lambda: mine(agent.records(message_id=SESSION_END_ID)), timeout=30, what="the session's end")
    assert len(ended) == 1 and ended[0]["DSAGENT_SESSION_END"] == "duration", ended
    assert len(dump) == 1 and os.path.getsize(dump[0]["DSAGENT_DUMP_PATH"]) == int(ended[0]["DSAGENT_SESSION_BYTES"])


# A fake runtime of the port's user that registers, then answers CollectTracing only after DELAY seconds
# (a runtime chooses when it answers), keeps the stream open, and answers everything else at once.
SLOW_TO_START = r"""
import os, socket, struct, sys, time
path, delay = sys.argv[1], float(sys.argv[2])
cookie, me, streams = os.urandom(16), os.getpid(), []


def string(text):
    data = (text + "\0").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


def reply(c, payload=b""):
    c.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), 0xFF, 0, 0) + payload)


def read(c, n):
    data = b""
    while len(data) < n:
        more = c.recv(n - len(data))
        if not more:
            return None
        data += more
    return data


deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    c.sendall(b"ADVR_V1\0" + cookie + struct.pack("<QH", me, 0))
    head = read(c, 20)
    if head is None:
        time.sleep(0.2)
        continue
    size, command_set, command = struct.unpack("<HBB", head[14:18])
    read(c, size - 20)
    if (command_set, command) == (4, 0):
        # its command line only the executable, as a runtime's before its entry assembly: not started yet
        reply(c, struct.pack("<Q", me) + cookie + string(os.readlink("/proc/self/exe")) + string("Linux") +
              string("x64"))
    elif command_set == 2 and command >= 2:
        print("asked to trace", flush=True)
        time.sleep(delay)
        reply(c, struct.pack("<Q", 0x1234))
        c.sendall(b"Nettrace")
        streams.append(c)
        continue
    else:
        reply(c)
    c.close()
"""


@test
def one_user_has_one_startup_trace_at_a_time_counted_before_its_runtime_answers():
    """Three fake runtimes of one user connect in at once and each holds its answer to CollectTracing for 3 s.
    The limits are counted when a trace is decided, not when the runtime answers: one trace starts, the other
    two are skipped with records. (Counting at the answer let all three, or twelve, start.)"""
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, extra=on_start(duration="20s")))
    wait_port(path)  # these fakes connect once: a runtime would retry, they would find no port
    script = os.path.join(make_dir(None, 0o755), "slow_to_start.py")
    with open(script, "w") as f:
        f.write(SLOW_TO_START)
    os.chmod(script, 0o644)
    fakes = [Process(as_user(SVC, [harness.PYTHON, script, path, "3"])) for _ in range(3)]
    for fake in fakes:
        wait_registered(agent, fake.proc.pid)
    skipped = wait_for(lambda: len(port_records(agent, "on-start-skipped")) >= 2 and port_records(agent, "on-start-skipped"),
                       timeout=30, what=f"two traces skipped: {[(r['DSAGENT_PORT_EVENT'], r.get('DSAGENT_REASON')) for r in port_records(agent)]}")
    assert all("a startup trace of this user runs already" in r["DSAGENT_REASON"] for r in skipped), skipped
    seen = {f: "" for f in fakes}

    def asked():
        for f in fakes:
            seen[f] += printed(proc_target(f))
        return [f for f in fakes if "asked to trace" in seen[f]]

    wait_for(asked, timeout=30, what="one runtime asked for a startup trace")
    time.sleep(2)  # for a second one to be asked, were it to be
    assert len(asked()) == 1, "the agent asked more than one of the user's runtimes for a startup trace"
    started = wait_for(lambda: agent.records(message_id=SESSION_START_ID), timeout=30, what="the one trace started")
    time.sleep(1)
    assert len(agent.records(message_id=SESSION_START_ID)) == 1, started
    assert len(port_records(agent, "on-start-skipped")) == 2


# A process that is no runtime: it connects to a port, advertises @pid ("own": its own) and @cookie,
# and answers the agent's question with a ProcessInfo whose cookie is another (or not at all).
IMPOSTOR = r"""
import os, socket, struct, sys, time, uuid
path, pid_mode, cookie_hex, answer = sys.argv[1:5]
pid = os.getpid() if pid_mode == "own" else int(pid_mode)


def string(text):
    data = (text + "\0").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
s.sendall(b"ADVR_V1\0" + bytes.fromhex(cookie_hex) + struct.pack("<QH", pid, 0))
s.settimeout(10)
try:
    request = s.recv(64)
    print("asked", request[:14] == b"DOTNET_IPC_V1\0", flush=True)
    if answer == "wrong-cookie":
        payload = struct.pack("<Q", pid) + uuid.uuid4().bytes + string("/usr/bin/impostor") + string("Linux") + \
            string("x64")
        s.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), 0xFF, 0x00, 0) + payload)
    time.sleep(5)
except OSError as e:
    print("closed", e, flush=True)
"""


def impostor(path, pid_mode, cookie, answer="none", user=SVC):
    script = os.path.join(make_dir(None, 0o755), "impostor.py")
    with open(script, "w") as f:
        f.write(IMPOSTOR)
    os.chmod(script, 0o644)
    return Process(as_user(user, [harness.PYTHON, script, path, pid_mode, cookie.hex(), answer]))


def refusals(agent):
    return port_records(agent, "refused")


@test
def impostors_are_refused_and_recorded():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, port_users=(SVC, MALLORY)))
    wait_port(path)  # these fakes connect once: a runtime would retry, they would find no port
    cookie = uuid.uuid4().bytes

    # another process's pid: the kernel says otherwise, and it is refused before anything is asked
    victim = Target(SVC)
    p = impostor(path, str(victim.pid), cookie)
    rec = wait_for(lambda: refusals(agent), what="a refusal")[-1]
    assert f"it advertised pid {victim.pid}" in rec["DSAGENT_REASON"], rec
    assert rec["DSAGENT_TARGET_PID"] == str(p.proc.pid), rec
    p.proc.wait(timeout=30)
    assert "asked True" not in p.proc.stdout.read(), "the agent asked a process that lied about its pid"

    # its own pid, but no runtime behind it: the ProcessInfo it is asked goes unanswered
    p = impostor(path, "own", cookie)
    wait_for(lambda: len(refusals(agent)) >= 2, timeout=30, what="a second refusal")
    rec = refusals(agent)[-1]
    assert rec["DSAGENT_TARGET_PID"] == str(p.proc.pid) and rec["DSAGENT_ADVERTISED_PID"] == str(p.proc.pid), rec
    assert "asked True" in p.read_line("asked", timeout=10)

    # its own pid, and a ProcessInfo answer with another cookie than it advertised
    p = impostor(path, "own", cookie, answer="wrong-cookie")
    wait_for(lambda: any("another runtime instance cookie" in r["DSAGENT_REASON"] for r in refusals(agent)),
             timeout=30, what="the cookie refusal")

    # a user the port no longer admits, through a socket file opened to all (a socket unit's SocketMode=0666):
    # the kernel's word on the peer decides, not the file's mode
    agent.write_policy(policy(path))
    agent.reload()
    os.chmod(path, 0o666)
    before = len(refusals(agent))
    p = impostor(path, "own", cookie, user=MALLORY)
    wait_for(lambda: len(refusals(agent)) > before, timeout=30, what="the refusal of mallory")
    rec = refusals(agent)[-1]
    assert "does not admit" in rec["DSAGENT_REASON"] and rec["DSAGENT_TARGET_UID"] == str(uid_of(MALLORY)), rec
    assert not port_records(agent, "registered"), "an impostor was registered"
    r = dsctl(agent, "root", "--json", "ps")
    assert r.returncode == 0 and all(p.get("port") is None for p in json.loads(r.stdout)), r.stdout


@test
def a_pid_reused_after_registration_gets_nothing_of_the_registration():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path))
    target = connecting_target(path)
    rec = wait_registered(agent, target.pid)
    pid, cookie = target.pid, bytes.fromhex(rec["DSAGENT_RUNTIME_COOKIE"])
    target.process.stop()

    # the same user's process takes the pid and replays the runtime's advertise, cookie and all
    script = os.path.join(make_dir(None, 0o755), "impostor.py")
    with open(script, "w") as f:
        f.write(IMPOSTOR)
    os.chmod(script, 0o644)
    substitute = claim_pid(pid, as_user(SVC, [harness.PYTHON, script, path, "own", cookie.hex(), "none"]))
    assert substitute is not None, f"could not hand pid {pid} to the substitute"
    refused = wait_for(lambda: [r for r in refusals(agent) if r["DSAGENT_TARGET_PID"] == str(pid)], timeout=30,
                       what="the substitute refused")[-1]
    assert refused["DSAGENT_RUNTIME_COOKIE"] == cookie.hex(), refused  # the attack really replayed the cookie
    assert len(port_records(agent, "registered")) == 1, "the substitute was registered"
    r = dsctl(agent, ALICE, "--json", "info", str(pid))
    assert r.returncode != 0 and "port" not in r.stdout, r


# Before Linux 6.5 (Debian 12 runs 6.1) the kernel has no SO_PEERPIDFD: the agent opens the peer's pidfd by
# the pid SO_PEERCRED gave, and checks whose process that pid now is.
OLD_KERNEL = {"DSAGENT_TEST_NO_PEERPIDFD": "1"}


@test
def on_a_kernel_without_so_peerpidfd_a_runtime_registers_waits_and_is_resumed():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path, suspend_timeout="0"), env=OLD_KERNEL)
    target = connecting_target(path, mode="suspend")
    rec = wait_registered(agent, target.pid)
    assert rec["DSAGENT_SUSPENDED"] == "yes", rec
    assert "ready" not in printed(target, wait=0.5), "the app ran before it was resumed"
    r = dsctl(agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0 and f"resumed through its diagnostic port {path}" in r.stdout, r
    target.process.read_line("ready pid=", timeout=30)
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == path, r
    assert not refusals(agent), refusals(agent)


# Connects to a port and hands the connection to a child, which advertises the parent's pid once the parent
# has exited and its pid is someone else's, and answers the agent's ProcessInfo with that pid and its cookie.
HAND_OFF = r"""
import os, socket, struct, sys, time, uuid
path = sys.argv[1]
cookie, me = os.urandom(16), os.getpid()


def string(text):
    data = (text + "\0").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
left, leaving = os.pipe()
if os.fork():
    # the pid is free for another process only once no session or group bears it either: the child leaves them
    # before the parent says so and exits (said first, a claim of the pid could fail while the child still had
    # not left: "could not hand pid")
    os.close(leaving)
    os.read(left, 1)
    print("connected pid=%d" % me, flush=True)
    os._exit(0)
os.close(left)
os.setsid()
os.close(leaving)
while os.getppid() == me:
    time.sleep(0.05)
time.sleep(float(sys.argv[2]))
s.sendall(b"ADVR_V1\0" + cookie + struct.pack("<QH", me, 0))
s.settimeout(30)
try:
    if s.recv(64)[:14] == b"DOTNET_IPC_V1\0":
        payload = struct.pack("<Q", me) + cookie + string("/usr/bin/dotnet") + string("Linux") + string("x64")
        s.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), 0xFF, 0x00, 0) + payload)
    time.sleep(20)
except OSError:
    pass
"""


@test
def on_a_kernel_without_so_peerpidfd_a_pid_handed_to_another_user_between_connect_and_accept_is_refused():
    """Without SO_PEERPIDFD the agent has only the pid the peer had at connect(). Mallory connects, passes the
    connection to a child and exits; svc's process takes her pid before the agent looks. Taken at its word, the
    pid would make her connection the port of svc's process: what ops ask of it would go to her."""
    d = port_dir()
    path = os.path.join(d, "app.sock")
    env = dict(OLD_KERNEL, DSAGENT_TEST_PAUSE="port-accept:8000")
    agent = Agent(policy=policy(path, port_users=(SVC, MALLORY)), env=env)
    wait_port(path)
    script = os.path.join(make_dir(None, 0o755), "hand_off.py")
    with open(script, "w") as f:
        f.write(HAND_OFF)
    os.chmod(script, 0o644)
    hand_off = Process(as_user(MALLORY, [harness.PYTHON, script, path, "2"]))
    pid = int(hand_off.read_line("connected pid=").split("=")[1])
    hand_off.proc.wait(timeout=30)
    victim = claim_pid(pid, as_user(SVC, ["sleep", "60"]))
    assert victim is not None, f"could not hand pid {pid} to svc's process"
    # the attack is in place: the agent looks only now, and the pid is svc's
    wait_for(lambda: "test-hook: paused at port-accept" in open(agent.log_path).read(), what="the pause")
    wait_for(lambda: os.stat(f"/proc/{pid}").st_uid == uid_of(SVC), timeout=5, what=f"pid {pid} svc's")
    assert not refusals(agent) and not port_records(agent, "registered"), "the agent looked before the pid was svc's"
    rec = wait_for(lambda: [r for r in refusals(agent) if r["DSAGENT_TARGET_PID"] == str(pid)], timeout=60,
                   what="the refusal")[-1]
    assert "exited before it could be checked" in rec["DSAGENT_REASON"], rec
    assert rec["DSAGENT_TARGET_UID"] == str(uid_of(MALLORY)), rec
    assert not port_records(agent, "registered"), "her connection was registered as svc's process"
    r = dsctl(agent, ALICE, "--json", "info", str(pid))
    assert "port" not in r.stdout, r
    victim.stop()


# A process that speaks the protocol well enough to register (its own pid and cookie, a ProcessInfo with
# them), connects again, then forks a child that keeps that connection and runs exec itself.
EXEC_AFTER_REGISTERING = r"""
import os, socket, struct, sys, time
path, program, go = sys.argv[1:4]
cookie, me = os.urandom(16), os.getpid()


def string(text):
    data = (text + "\0").encode("utf-16-le")
    return struct.pack("<I", len(data) // 2) + data


def connect():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    c.sendall(b"ADVR_V1\0" + cookie + struct.pack("<QH", me, 0))
    return c


def serve(c, who):
    head = c.recv(20)
    if len(head) < 20:
        return False
    payload = struct.pack("<Q", me) + cookie + string("/fake/answered-by-" + who) + string("Linux") + string("x64")
    c.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20 + len(payload), 0xFF, 0, 0) + payload)
    print("served by", who, flush=True)
    return True


c = connect()
serve(c, "self")
c.close()
c = connect()  # the agent holds it idle
while not os.path.exists(go):  # until the test has seen the registration
    time.sleep(0.05)
if os.fork() == 0:
    serve(c, "child")
    os._exit(0)
print("exec", flush=True)
os.execv(program, [program, "60"])
"""


@test
def a_registration_does_not_outlive_an_exec_of_its_process():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path))
    wait_port(path)  # these fakes connect once: a runtime would retry, they would find no port
    script = os.path.join(make_dir(None, 0o755), "exec_after.py")
    with open(script, "w") as f:
        f.write(EXEC_AFTER_REGISTERING)
    os.chmod(script, 0o644)
    go = os.path.join(make_dir(None, 0o755), "go")
    proc = Process(as_user(SVC, [harness.PYTHON, script, path, "/usr/bin/sleep", go]))
    proc.read_line("served by self", timeout=30)
    # registered before it execs: the attack happens (a fixed wait let a slow agent register it late)
    wait_registered(agent, proc.proc.pid, timeout=30)
    time.sleep(0.5)  # for the agent to take the idle connection; were it later, the test would only prove less
    open(go, "w").close()
    proc.read_line("exec", timeout=30)
    wait_for(lambda: open(f"/proc/{proc.proc.pid}/comm").read().strip() == "sleep", what="the exec")
    r = dsctl(agent, "root", "--json", "info", str(proc.proc.pid))
    assert "answered-by" not in r.stdout and '"port"' not in r.stdout, r
    assert "served by child" not in printed(proc_target(proc), wait=1.0), "the child answered for the exec'd process"


def proc_target(proc):
    class T:
        process = proc
    return T


@test
def a_port_directory_is_made_reachable_and_never_reached_through_a_symlink():
    d = port_dir()
    made = os.path.join(d, "made-here")
    # the unit's UMask=0077: the directory the agent makes must still let runtimes through
    agent = Agent(policy=policy(os.path.join(made, "app.sock")), wrapper=("sh", "-c", 'umask 077; exec "$@"', "sh"))
    wait_port(os.path.join(made, "app.sock"))
    assert oct(os.stat(made).st_mode & 0o777) == "0o755", oct(os.stat(made).st_mode)
    target = connecting_target(os.path.join(made, "app.sock"))
    wait_registered(agent, target.pid)
    agent.stop()

    # a directory reached through a symbolic link is refused, even one root made
    elsewhere = port_dir()
    os.symlink(elsewhere, os.path.join(d, "link"))
    agent = Agent(policy=policy(os.path.join(d, "link", "app.sock")))
    wait_for(lambda: "cannot listen on port" in open(agent.log_path).read(), what="the refusal")
    assert os.listdir(elsewhere) == [], "the agent bound a socket through a symbolic link"


@test
def fifty_runtimes_connect_in_at_once():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path))
    procs = []
    env = ["env", "-i", "PATH=/usr/bin:/bin", "DOTNET_CLI_TELEMETRY_OPTOUT=1",
           f"DOTNET_DiagnosticPorts={path},connect,suspend"]
    for _ in range(50):
        procs.append(Process(as_user(SVC, env + [target_app()])))
    pids = {p.proc.pid for p in procs}
    wait_for(lambda: {int(r["DSAGENT_TARGET_PID"]) for r in port_records(agent, "registered")} >= pids,
             timeout=240, what="all 50 registered")
    r = dsctl(agent, ALICE, "--json", "ps", timeout=120)
    listed = {p["pid"] for p in json.loads(r.stdout) if p.get("suspended")}
    assert listed >= pids, f"{len(pids - listed)} not listed as suspended"
    for p in procs:
        r = dsctl(agent, ALICE, "resume", str(p.proc.pid))
        assert r.returncode == 0, r
    for p in procs:
        p.read_line("ready pid=", timeout=120)
    assert not port_records(agent, "refused"), port_records(agent, "refused")


@test
def runtimes_come_back_after_an_agent_restart_and_a_removed_socket_is_bound_again():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path))
    target = connecting_target(path)
    wait_registered(agent, target.pid)
    agent.stop()

    agent = Agent(policy=policy(path))
    wait_registered(agent, target.pid, timeout=30)
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == path, r

    # removed by someone (root) on disk: bound again, and a new runtime connects through it
    ino = os.lstat(path).st_ino
    os.unlink(path)
    wait_for(lambda: os.path.exists(path) and os.lstat(path).st_ino != ino, timeout=10, what="the port bound again")
    # replaced by a regular file: the same
    os.unlink(path)
    wait_for(lambda: os.path.exists(path), timeout=10, what="the port bound again")
    tmp = path + ".planted"
    with open(tmp, "w") as f:
        f.write("x")
    os.rename(tmp, path)
    wait_for(lambda: os.path.exists(path) and not os.path.isfile(path), timeout=10, what="the planted file replaced")
    second = connecting_target(path)
    wait_registered(agent, second.pid)
    r = dsctl(agent, ALICE, "--json", "info", str(second.pid))
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == path, r


@test
def ports_follow_reloads():
    d = port_dir()
    first, second = os.path.join(d, "one.sock"), os.path.join(d, "two.sock")
    agent = Agent(policy=policy(first))
    wait_port(first)
    assert not os.path.exists(second)
    agent.write_policy(policy(second))
    rec = agent.reload()
    assert rec["DSAGENT_POLICY_OUTCOME"].startswith("loaded"), rec
    # the reload's record comes first, then its ports (broker_load_policy())
    wait_for(lambda: os.path.exists(second) and not os.path.exists(first), timeout=30,
             what=f"the ports to follow the reload: {os.listdir(d)}")
    target = connecting_target(second)
    wait_registered(agent, target.pid)

    # a reload that no longer admits the runtime's user ends its registration
    agent.write_policy(policy(second, port_users=(MALLORY,)))
    agent.reload()
    gone = wait_for(lambda: port_records(agent, "gone"), what="the registration ended")[-1]
    assert gone["DSAGENT_TARGET_PID"] == str(target.pid) and "no longer admits" in gone["DSAGENT_REASON"], gone
    r = dsctl(agent, ALICE, "--json", "info", str(target.pid))
    assert r.returncode == 0 and "port" not in json.loads(r.stdout), r  # served on its own socket again


@test
def a_target_in_its_own_pid_and_mount_namespace_is_reached_through_a_bind_mounted_port():
    d = port_dir()
    path = os.path.join(d, "app.sock")
    agent = Agent(policy=policy(path))
    inner = "/tmp/diag"  # in the target's own tmpfs: nothing of it is on the host
    # its own /tmp (nothing shared), its own pid namespace, and the port directory bind-mounted in, read-only
    script = (f"mount -t tmpfs -o mode=1777 tmpfs /tmp && mkdir -p {inner} && mount --bind {d} {inner} && "
              f"mount -o remount,bind,ro {inner} && " 'exec "$@"')
    env = ["env", "-i", "PATH=/usr/bin:/bin", "DOTNET_CLI_TELEMETRY_OPTOUT=1",
           f"DOTNET_DiagnosticPorts={inner}/app.sock,connect,suspend"]
    proc = Process(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--mount", "--propagation",
                    "private", "--", "sh", "-c", script, "sh"] + as_user(SVC, env + [target_app()]))
    rec = wait_for(lambda: port_records(agent, "registered"), timeout=60, what="the runtime registered")[-1]
    host_pid, ns_pid = int(rec["DSAGENT_TARGET_PID"]), int(rec["DSAGENT_ADVERTISED_PID"])
    assert host_pid != ns_pid, "the target is not in a pid namespace of its own"
    assert os.stat(f"/proc/{host_pid}/root/tmp").st_dev != os.stat("/tmp").st_dev, "the target shares /tmp"
    r = dsctl(agent, ALICE, "resume", str(host_pid))
    assert r.returncode == 0 and "diagnostic port" in r.stdout, r
    line = proc.read_line("ready pid=", timeout=30)
    assert line.startswith(f"ready pid={ns_pid}"), line
    r = dsctl(agent, ALICE, "--json", "info", str(host_pid))
    assert r.returncode == 0 and json.loads(r.stdout)["runtime_pid"] == ns_pid, r


@test
def a_runtime_in_a_podman_container_connects_out_to_a_port_mounted_into_it():
    sys.path.insert(0, os.path.join(harness.SOURCE, "tests", "containers"))
    import podman
    d = port_dir()
    path = os.path.join(d, "app.sock")
    uid = f"uid:{podman.NO_HOST_UID}"
    agent = Agent(policy=policy(path, port_users=(uid,), extra=f'\n[[rule]]\nname = "containers"\nusers = ["{ALICE}"]\n'
                                f'commands = ["info", "dump"]\ntargets.users = ["{uid}"]\ndump_types = ["mini"]\n'))
    # no shared /tmp, no shared pid namespace: only the port directory, read-only
    c = podman.run_target("port", podman.rootfs(), options=(
        "-v", f"{d}:/run/dsagent-ports:ro", "-e", "DOTNET_DiagnosticPorts=/run/dsagent-ports/app.sock,connect,nosuspend"))
    assert c.ns_pid != c.pid and os.stat(f"/proc/{c.pid}/root/tmp").st_dev != os.stat("/tmp").st_dev
    rec = wait_registered(agent, c.pid)
    assert rec["DSAGENT_ADVERTISED_PID"] == str(c.ns_pid) and rec["DSAGENT_TARGET_UID"] == str(podman.NO_HOST_UID), rec
    os.unlink(c.tmp + "/" + [n for n in os.listdir(c.tmp) if n.startswith("dotnet-diagnostic-")][0])
    r = dsctl(agent, ALICE, "--json", "info", str(c.pid))  # its own socket is gone: only the port is left
    assert r.returncode == 0 and json.loads(r.stdout)["port"] == path, r
    assert json.loads(r.stdout)["runtime_pid"] == c.ns_pid, r
    out = os.path.join(make_dir(ALICE, 0o700), "c.core")
    r = dsctl(agent, ALICE, "dump", str(c.pid), "--type", "mini", "-o", out, timeout=300)
    assert r.returncode == 0 and harness.is_elf_core(out), r


# In a user namespace of her own, mapped onto her subordinate range, as its root: N children, each under a
# uid of its own there (her groups kept), open M connections to a port and never advertise.
PORT_FLOOD = """
import os, socket, sys, time
path, n_uids, per_uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
children = []
for k in range(1, n_uids + 1):
    pid = os.fork()
    if pid == 0:
        os.setresuid(k, k, k)
        held = []
        for _ in range(per_uid):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(path)
            except OSError:
                s.close()
                continue
            held.append(s)
        print(f'connected={len(held)}', flush=True)
        time.sleep(60)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


@test
def a_users_namespaced_uids_share_her_connections_waiting_to_advertise():
    """A port that admits her group; her subordinate uids in a namespace of her own kept the group, and each
    had 64 connections waiting to advertise of its own, up to the 256 of all users. Charged to her, they have
    her 64, and the records name her beside each uid."""
    sub = harness.subordinate_range(MALLORY)
    d = port_dir()
    path = os.path.join(d, "app.sock")
    text = policy(path).replace(f'users = ["{SVC}"]\nsuspend', f'users = ["{SVC}"]\ngroups = ["{MALLORY}"]\nsuspend', 1)
    agent = Agent(policy=text.replace('[agent]\n', '[agent]\nmax_requests_per_second = 100000\n'
                                                    'max_request_burst = 1000000\n', 1))
    wait_port(path)
    flood = Process(as_user(MALLORY, ["unshare", "--user", "--map-auto", "--setuid", "0", "--",
                                      harness.PYTHON, "-c", PORT_FLOOD, path, "8", "64"]))
    connected = sum(int(flood.read_line("connected=", timeout=120).split("=")[1]) for _ in range(8))
    uids = range(sub + 1, sub + 9)

    def all_recorded():
        mine = [r for r in port_records(agent, "refused") if int(r["DSAGENT_TARGET_UID"]) in uids]
        return mine if len(mine) >= connected else None
    mine = wait_for(all_recorded, timeout=120, what="a record of each of her connections")
    flood.stop()
    # the attack was real: several uids reached the port, admitted by the group they kept
    assert len({r["DSAGENT_TARGET_UID"] for r in mine}) > 1, mine[:3]
    waited = [r for r in mine if r["DSAGENT_REASON"] == "no advertise in time"]
    turned = [r for r in mine if r["DSAGENT_REASON"] == "too many connections wait to advertise"]
    assert len(waited) + len(turned) == len(mine), {r["DSAGENT_REASON"] for r in mine}
    # her share waited, no more; the rest were turned away at once
    assert 0 < len(waited) <= 64 and turned, (len(waited), len(turned))
    assert all(r.get("DSAGENT_TARGET_CHARGED_UID") == str(uid_of(MALLORY)) for r in mine), mine[:3]


if __name__ == "__main__":
    run_tests()
