#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The policy's [[collect]] tables against the real runtime: which processes are watched, when a table
fires, its limit per process, its records (docs/collect.md)."""
import csv
import glob
import grp
import io
import json
import os
import pwd
import re
import signal
import subprocess
import time
import uuid

import cpu_profiles
import harness
import nettrace_writer
from harness import (ALICE, MALLORY, OPS, SVC, Agent, FakeRuntime, Target, acl_of, can_read, dsctl, make_dir,
                     place_in_unit, run_tests, test, wait_for)

COLLECT_MESSAGE_ID = "7e4f2962cff7436e853607d2fcf710fe"
SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
SESSION_END_ID = "1c5ee471f818453b8c7bac25ac2e872f"


def table(name, counter, unit, line="when.above = 300", extra="", then='then.dump = "mini"', readers=(ALICE,),
          users=(SVC,)):
    """A table for processes of @users in @unit: the host's other tests run SVC's processes too, and no table here
    may watch them."""
    quoted = lambda items: ", ".join(f'"{i}"' for i in items)
    return (f'\n[[collect]]\nname = "{name}"\ntargets.users = [{quoted(users)}]\ntargets.units = ["{unit}"]\n'
            f'when.counter = "{counter}"\n{line}\n{then}\nreaders = [{quoted(readers)}]\n{extra}\n')


def exception_table(name, exception, unit, count=1, within=None, then='then.dump = "mini"', readers=(ALICE,)):
    quoted = lambda items: ", ".join(f'"{i}"' for i in items)
    window = f'when.count = {count}\nwhen.within = "{within}"\n' if within else ""
    return (f'\n[[collect]]\nname = "{name}"\ntargets.users = ["{SVC}"]\ntargets.units = ["{unit}"]\n'
            f'when.exception = "{exception}"\n{window}{then}\nreaders = [{quoted(readers)}]\n')


def target_in_unit(user=SVC, value="500", unit=None, args=()):
    """A target publishing @value, in a unit of its own (before the agent starts, whose first walk judges it), with
    a /tmp of its own: a table's dump still staging when its test ends (and its agent with it) leaves its staging
    directory there, where the next test's watchers do not look (test_mount_attacks counts the host's)."""
    unit = unit or f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    target = Target(user=user, tmpdir=None, mount_ns=True, args=("--meter-value", value, *args))
    place_in_unit(target.pid, unit)
    return target, unit


def hostile_samples(intervals=3):
    """A stream of EventCounters of provider Hostile whose "depth" stands at 900, @intervals intervals long, in a
    file anyone may read (a fake runtime sends it)."""
    d = make_dir(None, 0o755)
    path = os.path.join(d, "samples.nettrace")
    with open(path, "wb") as f:
        f.write(nettrace_writer.event_counters("Hostile", [("depth", "Depth", 900.0, "", "")], intervals=intervals))
    os.chmod(path, 0o644)
    return path


def in_new_unit(pid):
    """@pid placed in a unit of its own; its name."""
    unit = f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    place_in_unit(pid, unit)
    return unit


def agent_with(*tables, env=None):
    return Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + "".join(tables), env=env)


def fired(agent, pid=None, name=None):
    return [r for r in agent.records(message_id=COLLECT_MESSAGE_ID)
            if r.get("DSAGENT_COLLECT_EVENT") == "fired" and (pid is None or r["DSAGENT_TARGET_PID"] == str(pid))
            and (name is None or r["DSAGENT_RULE"] == name)]


@test
def a_counter_table_fires_on_the_process_it_covers_once_held_for_its_time():
    high, unit = target_in_unit()
    calm, _ = target_in_unit(value="100", unit=unit)
    other, _ = target_in_unit(user=ALICE, unit=unit)  # no table covers alice's processes, in the unit or not
    agent = agent_with(
        # a Meter gauge and an EventCounter, each beyond its line for 2 s: one session watches both
        table("gauge-high", "Dsagent.TestTarget:test-gauge", unit, extra='when.for = "2s"'),
        table("counter-high", "Dsagent-TestTarget:test-counter", unit, extra='when.for = "2s"'),
        # beyond the line too, but not for an hour yet
        table("held-long", "Dsagent.TestTarget:test-gauge", unit, extra='when.for = "1h"'),
        # below the line: never beyond it
        table("low", "Dsagent.TestTarget:test-gauge", unit, line="when.below = 10"),
        # alice's processes in another unit: the walk looks at hers too, and no table may take one for another's
        table("alice-elsewhere", "Dsagent.TestTarget:test-gauge", "dst-collect-elsewhere.service", users=(ALICE,)))

    for name in ("gauge-high", "counter-high"):
        rec = wait_for(lambda: fired(agent, high.pid, name), timeout=90, what=f"{name} fired")[0]
        assert rec["DSAGENT_COLLECT_TRIGGER"] == "counter" and float(rec["DSAGENT_COLLECT_VALUE"]) == 500, rec
        assert rec["DSAGENT_TARGET_UID"] == str(high.uid) and rec["DSAGENT_COLLECT_ACTION"] == "dump", rec
    assert rec["DSAGENT_COLLECT_WHAT"] == "Dsagent-TestTarget:test-counter", rec
    time.sleep(5)  # more samples beyond the line: the default limit, 1/1h, takes no second
    assert len(fired(agent, high.pid, "gauge-high")) == 1, fired(agent, high.pid)
    assert len(fired(agent, high.pid, "counter-high")) == 1, fired(agent, high.pid)
    assert not fired(agent, high.pid, "held-long"), "fired before its when.for was over"
    assert not fired(agent, name="low") and not fired(agent, calm.pid) and not fired(agent, other.pid), \
        fired(agent)


@test
def a_table_fires_at_most_its_limit_however_many_samples_cross_the_line():
    # no when.for: every sample (one a second) beyond the line meets the condition
    high, unit = target_in_unit()
    agent = agent_with(table("every-sample", "Dsagent.TestTarget:test-gauge", unit, extra='limit = "2/1h"'))
    wait_for(lambda: len(fired(agent, high.pid)) >= 2, timeout=90, what="two firings")
    time.sleep(6)
    assert len(fired(agent, high.pid)) == 2, fired(agent, high.pid)
    assert int(fired(agent, high.pid)[-1].get("DSAGENT_COLLECT_LIMITED", "0")) == 0, fired(agent, high.pid)


def collect_records(agent, pid, event):
    return [r for r in agent.records(message_id=COLLECT_MESSAGE_ID)
            if r.get("DSAGENT_COLLECT_EVENT") == event and r["DSAGENT_TARGET_PID"] == str(pid)]


def dump_record(agent, path, rule, kind=None):
    """The one dump record of the artifact at @path, which table @rule took: of type @kind (when given) and the
    file's size, not empty."""
    dumps = [r for r in agent.records(message_id=harness.DUMP_MESSAGE_ID) if r.get("DSAGENT_DUMP_PATH") == path]
    assert len(dumps) == 1 and dumps[0]["DSAGENT_RULE"] == rule, dumps
    assert kind is None or dumps[0]["DSAGENT_DUMP_TYPE"] == kind, dumps
    assert int(dumps[0]["DSAGENT_DUMP_SIZE"]) == os.path.getsize(path) > 0, (dumps, os.path.getsize(path))
    return dumps[0]


def collected_artifact(agent, pid, rule, action, suffix, began, kind=None, timeout=120):
    """Table @rule's @action on @pid, once collected: its artifact, @action.NAME.PID.collect-RULE.TIME@suffix in
    dump_dir, with its dump record (of type @kind, else @action's), after one firing whose record says @began.
    Returns the artifact's path, the fired record and the dump record."""
    rec = wait_for(lambda: collect_records(agent, pid, "collected"), timeout=timeout,
                   what=f"{rule}'s {action} collected")[0]
    path = rec["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    assert rec["DSAGENT_RULE"] == rule and rec["DSAGENT_COLLECT_ACTION"] == action, rec
    assert os.path.dirname(path) == agent.dumps and path.endswith(suffix), path
    assert os.path.basename(path).startswith(f"{action}.") and f".{pid}.collect-{rule}." in path, path
    fire = collect_records(agent, pid, "fired")
    assert len(fire) == 1 and fire[0]["DSAGENT_COLLECT_RESULT"] == began, fire
    return path, fire[0], dump_record(agent, path, rule, kind or action)


@test
def a_trace_table_writes_its_trace_for_its_readers_only_once_per_limit():
    high, unit = target_in_unit()
    agent = agent_with(table("slow-trace", "Dsagent.TestTarget:test-gauge", unit, readers=(f"group:{OPS}",),
                             then='then.trace_profile = "gc-collect"\nthen.duration = "3s"'))
    rec = wait_for(lambda: collect_records(agent, high.pid, "collected"), timeout=120, what="the trace collected")[0]
    path = rec["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    assert rec["DSAGENT_RULE"] == "slow-trace" and rec["DSAGENT_COLLECT_ACTION"] == "trace", rec
    assert os.path.dirname(path) == agent.dumps and f".{high.pid}.collect-slow-trace." in path, path
    assert path.endswith(".nettrace"), path
    fire = collect_records(agent, high.pid, "fired")
    assert len(fire) == 1 and "a trace of profile gc-collect begins" in fire[0]["DSAGENT_COLLECT_RESULT"], fire
    dump_record(agent, path, "slow-trace")
    with open(path, "rb") as f:
        assert f.read(8) == b"Nettrace", "not a nettrace"
    sessions = lambda mid: [r for r in agent.records(message_id=mid) if r["DSAGENT_TARGET_PID"] == str(high.pid)]
    started = sessions(SESSION_START_ID)
    assert len(started) == 1 and started[0]["DSAGENT_SESSION_ORIGIN"] == "collect", started
    assert started[0]["DSAGENT_RULE"] == "slow-trace" and started[0]["DSAGENT_TRACE_PROFILE"] == "gc-collect", started
    ended = sessions(SESSION_END_ID)
    assert len(ended) == 1 and ended[0]["DSAGENT_SESSION_END"] == "duration", ended
    assert int(ended[0]["DSAGENT_SESSION_BYTES"]) == os.path.getsize(path), ended

    st = os.stat(path)
    assert st.st_uid == 0 and st.st_nlink == 1, st
    acl = acl_of(path)
    assert f"group:{grp.getgrnam(OPS).gr_gid}:r--" in acl, acl  # exactly the table's readers: ops, no user
    assert not [e for e in acl if e.startswith("user:") and e != "user::rw-"], acl
    assert not [e for e in acl if e.startswith("group:") and e not in ("group::---", f"group:{grp.getgrnam(OPS).gr_gid}:r--")], acl
    assert can_read(ALICE, path), "a reader (in the table's group) cannot read the trace"
    for other in (MALLORY, SVC):  # the app's own user reads it only if the table says so
        assert not can_read(other, path), f"{other} can read the collected trace"
    r = dsctl(agent, ALICE, "--json", "dumps")
    assert r.returncode == 0 and [x for x in json.loads(r.stdout) if x["path"] == path], r.stdout
    r = dsctl(agent, MALLORY, "--json", "dumps")
    assert r.returncode == 0 and path not in r.stdout, r

    time.sleep(6)  # the gauge stays beyond the line: the default limit, 1/1h, takes no second trace
    assert len(collect_records(agent, high.pid, "fired")) == 1, collect_records(agent, high.pid, "fired")
    assert [f for f in os.listdir(agent.dumps) if f".{high.pid}.collect-" in f] == [os.path.basename(path)], \
        os.listdir(agent.dumps)


def is_elf_core(path):
    with open(path, "rb") as f:
        head = f.read(18)
    return head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 4  # ET_CORE


@test
def a_dump_table_writes_an_elf_core_for_its_readers_only_once_per_limit():
    high, unit = target_in_unit()
    agent = agent_with(table("core-high", "Dsagent.TestTarget:test-gauge", unit, readers=(ALICE,),
                             then='then.dump = "mini"'))
    path, _, dump = collected_artifact(agent, high.pid, "core-high", "dump", "", "a mini dump begins", kind="mini")
    assert dump["DSAGENT_DUMP_READABLE"] == "yes", dump
    assert is_elf_core(path), "not an ELF core"

    st = os.stat(path)
    assert st.st_uid == 0 and st.st_nlink == 1 and st.st_mode & 0o007 == 0, st  # group: the ACL mask
    acl = acl_of(path)
    alice = pwd.getpwnam(ALICE).pw_uid
    assert f"user:{alice}:r--" in acl, acl  # exactly the table's readers: alice, no group, not the app's user
    assert not [e for e in acl if e.startswith("user:") and e not in ("user::rw-", f"user:{alice}:r--")], acl
    assert not [e for e in acl if e.startswith("group:") and e != "group::---"], acl
    r = subprocess.run(harness.as_user(ALICE, ["head", "-c", "4", path]), stdout=subprocess.PIPE)
    assert r.returncode == 0 and r.stdout[:4] == b"\x7fELF", "the reader cannot read the core"
    for other in (MALLORY, SVC):  # the app's own user reads it only if the table says so
        assert not can_read(other, path), f"{other} can read the collected dump"
    r = dsctl(agent, ALICE, "--json", "dumps")
    listed = [x for x in json.loads(r.stdout) if x["path"] == path] if r.returncode == 0 else r
    assert listed and listed[0]["type"] == "mini" and listed[0]["pid"] == high.pid, (listed, r.stdout)
    r = dsctl(agent, MALLORY, "--json", "dumps")
    assert r.returncode == 0 and path not in r.stdout and "core-high" not in r.stdout, r

    time.sleep(6)  # the gauge stays beyond the line: the default limit, 1/1h, takes no second dump
    assert len(collect_records(agent, high.pid, "fired")) == 1, collect_records(agent, high.pid, "fired")
    assert [f for f in os.listdir(agent.dumps) if f".{high.pid}.collect-" in f] == [os.path.basename(path)], \
        os.listdir(agent.dumps)


@test
def a_tables_dump_counts_as_the_owners_own_dump():
    """A table's dump of svc's process is charged to svc, as svc's dump of its own process: with svc's own
    dump of another of its processes in progress (held: that runtime is stopped), svc's max_dumps_per_user (1)
    is taken, and the table's firing is recorded "not dumped", with no core. (The host's max_concurrent_dumps is
    not what bounds it: a_tables_dump_of_a_users_own_process_takes_none_of_the_hosts_dump_slots.)"""
    first = Target(SVC, tmpdir=None, mount_ns=True)  # a /tmp of its own: its staging is seen there alone
    high, unit = target_in_unit()
    policy = '[agent]\ndump_dir = "@DUMP_DIR@"\nmax_concurrent_dumps = 1\n'
    agent = Agent(policy=policy)
    # svc's dump of a stopped process holds svc's one dump: its runtime cannot answer
    harness.stop_process(first.pid)
    harness.scope.callback(lambda: os.kill(first.pid, signal.SIGCONT))
    pending = subprocess.Popen(harness.as_user(SVC, [harness.DSCTL, "--socket", agent.socket, "dump", str(first.pid)]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: glob.glob(f"/proc/{first.pid}/root/tmp/.dsagent-dump-*"), what="svc's dump to start")
    # the table comes once svc's dump is counted, so its first sample over the line finds svc's dumps taken
    agent.write_policy(policy + table("bounded-core", "Dsagent.TestTarget:test-gauge", unit))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    rec = wait_for(lambda: fired(agent, high.pid), timeout=90, what="the table fired")[0]
    assert rec["DSAGENT_COLLECT_RESULT"].startswith(f"not dumped (counted as uid {high.uid}'s dump of its own") and \
        "max_dumps_per_user" in rec["DSAGENT_COLLECT_RESULT"], rec
    os.kill(first.pid, signal.SIGCONT)
    assert pending.wait(timeout=120) == 0
    time.sleep(3)
    assert not collect_records(agent, high.pid, "collected"), "a dump past the owner's bound"
    assert not [f for f in os.listdir(agent.dumps) if f".{high.pid}.collect-" in f], os.listdir(agent.dumps)


@test
def a_dump_table_whose_runtime_writes_nothing_records_the_failure_and_leaves_nothing():
    # a runtime whose counter crosses the line, and that never answers GenerateCoreDump nor writes a byte
    fake = FakeRuntime(f"stream:{hostile_samples()}")
    unit = in_new_unit(fake.pid)
    agent = Agent("--dump-start-timeout", "2",
                  policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + table("silent-core", "Hostile:depth", unit))
    rec = wait_for(lambda: collect_records(agent, fake.pid, "failed"), timeout=90, what="the dump's failure")[0]
    assert rec["DSAGENT_RULE"] == "silent-core" and rec["DSAGENT_COLLECT_ACTION"] == "dump", rec
    assert "--dump-start-timeout" in rec["DSAGENT_COLLECT_RESULT"], rec
    assert fired(agent, fake.pid)[0]["DSAGENT_COLLECT_RESULT"] == "a mini dump begins", fired(agent, fake.pid)
    assert not collect_records(agent, fake.pid, "collected")
    assert not [f for f in os.listdir(agent.dumps) if f".{fake.pid}." in f], os.listdir(agent.dumps)
    assert not [f for f in os.listdir(fake.tmpdir) if f.startswith(".dsagent-dump-")], os.listdir(fake.tmpdir)
    assert agent.proc.poll() is None, "the agent died"


PARKED = "DsTestTarget!DsTestTarget.DsagentProbe.ParkedInDsagentStacksProbe()"


def parked_frames(text):
    """The frames of the thread parked in the test app's probe, from dsctl stacks' text."""
    threads, current = [], None
    for line in text.splitlines():
        if line.startswith("Thread (0x") and line.endswith("):"):
            current = []
            threads.append(current)
        elif line.startswith("  ") and current is not None:
            current.append(line.strip())
    parked = [frames for frames in threads if PARKED in frames]
    assert len(parked) == 1, text
    return parked[0]


def read_by_ops_alone(agent, path, kind, table):
    """@path, a table's artifact of type @kind readable by group ops: root's, one link, exactly ops in its ACL and no
    user; the app's user and mallory cannot read it; alice (in ops) has it listed by dsctl dumps, mallory has not."""
    st = os.stat(path)
    assert st.st_uid == 0 and st.st_nlink == 1, st
    acl = acl_of(path)
    assert f"group:{grp.getgrnam(OPS).gr_gid}:r--" in acl, acl  # exactly the table's readers: ops, no user
    assert not [e for e in acl if e.startswith("user:") and e != "user::rw-"], acl
    for other in (MALLORY, SVC):  # the app's own user reads it only if the table says so
        assert not can_read(other, path), f"{other} can read the collected {kind}"
    r = dsctl(agent, ALICE, "--json", "dumps")
    listed = [x for x in json.loads(r.stdout) if x["path"] == path] if r.returncode == 0 else r
    assert listed and listed[0]["type"] == kind, (listed, r.stdout)
    r = dsctl(agent, MALLORY, "--json", "dumps")
    assert r.returncode == 0 and path not in r.stdout and table not in r.stdout, r


@test
def a_stacks_table_writes_the_text_dsctl_stacks_prints_for_its_readers_only_once_per_limit():
    high, unit = target_in_unit(args=("--park-thread",))
    agent = agent_with(table("stacks-high", "Dsagent.TestTarget:test-gauge", unit, readers=(f"group:{OPS}",),
                             then="then.stacks = true"))
    path, _, _ = collected_artifact(agent, high.pid, "stacks-high", "stacks", ".txt", "a stacks session begins")

    # the text dsctl stacks prints: the parked thread's frames, innermost first, are the same
    r = subprocess.run(harness.as_user(ALICE, ["cat", path]), stdout=subprocess.PIPE, text=True)
    assert r.returncode == 0, "a reader (in the table's group) cannot read the stacks"
    collected = parked_frames(r.stdout)
    live = dsctl(agent, "root", "stacks", str(high.pid))
    assert live.returncode == 0, live
    assert collected == parked_frames(live.stdout), (collected, live.stdout)

    read_by_ops_alone(agent, path, "stacks", "stacks-high")
    sessions = [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] == str(high.pid)
                and r.get("DSAGENT_SESSION_ORIGIN") == "collect"]
    assert len(sessions) == 1 and sessions[0]["DSAGENT_SESSION_KIND"] == "stacks", sessions

    time.sleep(6)  # the default limit, 1/1h, takes no second
    assert len(collect_records(agent, high.pid, "fired")) == 1, collect_records(agent, high.pid, "fired")
    assert [f for f in os.listdir(agent.dumps) if f".{high.pid}.collect-" in f] == [os.path.basename(path)], \
        os.listdir(agent.dumps)


CSV_HEAD = ["Timestamp", "Provider", "Counter Name", "Counter Type", "Mean/Increment"]  # dotnet-counters collect's


def counter_rows(text):
    """dsctl counters' CSV: its head, then (provider, name, type) -> the values, each row's time as it writes it."""
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and rows[0] == CSV_HEAD, text
    found = {}
    for row in rows[1:]:
        assert len(row) == 5 and re.fullmatch(r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d", row[0]), row
        found.setdefault(tuple(row[1:4]), []).append(float(row[4]))
    return found


@test
def a_counters_table_writes_the_csv_dsctl_counters_prints_for_its_readers_only_once_per_limit():
    high, unit = target_in_unit()
    providers = "System.Runtime,Dsagent-TestTarget"  # EventCounters: the watch holds the metrics session
    agent = agent_with(table("counters-high", "Dsagent.TestTarget:test-gauge", unit, readers=(f"group:{OPS}",),
                             then='then.counters = ["System.Runtime", "Dsagent-TestTarget"]\nthen.duration = "4s"'))
    path, _, _ = collected_artifact(agent, high.pid, "counters-high", "counters", ".csv",
                                    "a counters session begins")
    sessions = [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] == str(high.pid)
                and r.get("DSAGENT_SESSION_ORIGIN") == "collect"]
    assert len(sessions) == 1 and sessions[0]["DSAGENT_SESSION_KIND"] == "counters", sessions
    ended = [r for r in agent.records(message_id=SESSION_END_ID) if r["DSAGENT_TARGET_PID"] == str(high.pid)
             and r.get("DSAGENT_SESSION_ORIGIN") == "collect"]
    assert len(ended) == 1 and ended[0]["DSAGENT_SESSION_END"] == "duration", ended

    # the CSV dsctl counters --format csv prints of the same counters: its head, the runtime's counters and the
    # app's own Meter, named and typed alike
    r = subprocess.run(harness.as_user(ALICE, ["cat", path]), stdout=subprocess.PIPE, text=True)
    assert r.returncode == 0, "a reader (in the table's group) cannot read the counters"
    collected = counter_rows(r.stdout)
    live = dsctl(agent, "root", "counters", str(high.pid), "--format", "csv", "--counters", providers,
                 "--duration", "4", timeout=120)
    assert live.returncode == 0, live
    printed = counter_rows(live.stdout)
    for key in (("System.Runtime", "CPU Usage (%)", "Metric"), ("Dsagent-TestTarget", "Test counter", "Metric")):
        assert key in collected and key in printed, (key, sorted(collected), sorted(printed))
    assert set(collected[("Dsagent-TestTarget", "Test counter", "Metric")]) == {500.0}, collected
    # every counter the table's file holds is one dsctl prints of the process, and most of them are
    assert set(collected) <= set(printed) and len(collected) >= len(printed) // 2, (sorted(collected), sorted(printed))

    read_by_ops_alone(agent, path, "counters", "counters-high")

    time.sleep(6)  # the gauge stays beyond the line: the default limit, 1/1h, takes no second
    assert len(collect_records(agent, high.pid, "fired")) == 1, collect_records(agent, high.pid, "fired")
    assert [f for f in os.listdir(agent.dumps) if f".{high.pid}.collect-" in f] == [os.path.basename(path)], \
        os.listdir(agent.dumps)


@test
def a_counters_table_on_a_process_without_a_metrics_session_holds_its_meters():
    """An exception table's watch asks for no Meters: the table's counters session is the process's metrics
    session, and its CSV holds the app's own Meter as dsctl counters prints it."""
    thrower, unit = target_in_unit(args=("--throw-exceptions", "5"))
    agent = agent_with(exception_table("meters-thrown", "DsagentProbeException", unit,
                                       then='then.counters = ["Dsagent.TestTarget"]\nthen.duration = "3s"'))
    rec = wait_for(lambda: collect_records(agent, thrower.pid, "collected"), timeout=120, what="the counters")[0]
    path = rec["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    assert f".{thrower.pid}.collect-meters-thrown." in path and path.endswith(".csv"), path
    r = subprocess.run(harness.as_user(ALICE, ["cat", path]), stdout=subprocess.PIPE, text=True)
    assert r.returncode == 0, "the reader cannot read the counters"
    collected = counter_rows(r.stdout)
    gauge = [k for k in collected if k[0] == "Dsagent.TestTarget" and k[1].startswith("test-gauge")]
    assert gauge and set(collected[gauge[0]]) == {500.0}, collected
    assert not [k for k in collected if k[0] != "Dsagent.TestTarget"], collected
    live = dsctl(agent, "root", "counters", str(thrower.pid), "--format", "csv", "--counters", "Dsagent.TestTarget",
                 "--duration", "3", timeout=120)
    assert live.returncode == 0, live
    assert gauge[0] in counter_rows(live.stdout), (gauge, live.stdout)
    assert not can_read(MALLORY, path) and not can_read(SVC, path), path


@test
def a_watch_is_one_of_the_sessions_max_sessions_per_target_allows():
    """A process's sessions are its watch's and its users' together: with max_sessions_per_target = 1, the
    watch holds the one, and the owner's own counters session is told so; once a reload takes the table away,
    the owner's session runs. Before, a watch was counted nowhere, and the runtime carried one session more
    than the policy allows."""
    target, unit = target_in_unit(value="100", args=("--report-sessions",))
    settings = '[agent]\ndump_dir = "@DUMP_DIR@"\nmax_sessions_per_target = 1\n'
    agent = Agent(policy=settings + table("watch-only", "Dsagent-TestTarget:test-counter", unit,
                                          line="when.above = 1000000"))
    target.process.read_line("eventsource-enabled True", timeout=90)  # the watch's session runs
    r = dsctl(agent, SVC, "counters", str(target.pid), "--duration", "1")
    assert r.returncode == harness.EXIT_BUSY and "max_sessions_per_target" in r.stderr, r
    agent.write_policy(settings)
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    target.process.read_line("eventsource-enabled False", timeout=60)  # the watch ended its session
    r = dsctl(agent, SVC, "counters", str(target.pid), "--duration", "1")
    assert r.returncode == 0, r


@test
def a_tables_action_needs_a_session_of_its_own_under_max_sessions_per_target():
    """A table's stacks (or trace) session is one more of the process's, beside its watch: with
    max_sessions_per_target = 1 the watch holds the one, so the firing is recorded, not collected, and counts
    against the limit (as a dump past max_concurrent_dumps does). Before, the action's session was counted
    nowhere, and the process carried two sessions where the policy allows one."""
    target, unit = target_in_unit()
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_sessions_per_target = 1\n'
                  + table("no-seat", "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true",
                          extra='limit = "2/1h"'))
    records = wait_for(lambda: len(fired(agent, target.pid)) == 2 and fired(agent, target.pid), timeout=90,
                       what="two firings")
    for rec in records:
        assert rec["DSAGENT_COLLECT_RESULT"] == \
            "not traced: as many sessions of this process as max_sessions_per_target allows run", rec
    time.sleep(3)  # samples beyond the line still: the two refused firings took the limit, 2/1h
    assert len(fired(agent, target.pid)) == 2, fired(agent, target.pid)
    assert not collect_records(agent, target.pid, "collected") and not collect_records(agent, target.pid, "failed")
    assert not [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] == str(target.pid)]
    assert not os.path.exists(agent.dumps), os.listdir(agent.dumps)  # made at the first artifact: none


@test
def a_tables_trace_holds_a_session_of_the_process_until_it_ends():
    """With max_sessions_per_target = 2, the watch and the table's trace hold both while the trace runs: the
    owner's counters session is told so; once the trace is stored its seat is free, and the owner's runs.
    Before, the owner's session ran beside them, a third where the policy allows two."""
    target, unit = target_in_unit()
    settings = '[agent]\ndump_dir = "@DUMP_DIR@"\nmax_sessions_per_target = 2\n'
    agent = Agent(policy=settings + table("seated-trace", "Dsagent.TestTarget:test-gauge", unit,
                                          then='then.trace_profile = "gc-collect"\nthen.duration = "15s"'))
    rec = wait_for(lambda: fired(agent, target.pid), timeout=90, what="the table fired")[0]
    assert rec["DSAGENT_COLLECT_RESULT"] == "a trace of profile gc-collect begins", rec
    r = dsctl(agent, SVC, "counters", str(target.pid), "--duration", "1")
    assert r.returncode == harness.EXIT_BUSY and "max_sessions_per_target" in r.stderr, r
    assert not collect_records(agent, target.pid, "collected"), "the trace ended before the owner asked"
    wait_for(lambda: collect_records(agent, target.pid, "collected"), timeout=120, what="the trace collected")
    r = dsctl(agent, SVC, "counters", str(target.pid), "--duration", "1", timeout=120)
    assert r.returncode == 0, r


@test
def the_agent_stops_cleanly_while_a_watch_and_a_tables_trace_hold_sessions():
    """At its exit the agent ends the watch and the table's trace, and each gives its session back to the
    admission, which must still be there. (It was freed first: under the sanitizers, as scripts/test.sh runs
    this file, the agent died of a use after free at every exit with a watch running.)"""
    target, unit = target_in_unit()
    agent = agent_with(table("stopped-trace", "Dsagent.TestTarget:test-gauge", unit,
                             then='then.trace_profile = "gc-collect"\nthen.duration = "60s"'))
    rec = wait_for(lambda: fired(agent, target.pid), timeout=90, what="the table fired")[0]
    assert rec["DSAGENT_COLLECT_RESULT"] == "a trace of profile gc-collect begins", rec
    agent.proc.terminate()
    assert agent.proc.wait(timeout=30) == 0, open(agent.log_path).read()[-3000:]


@test
def a_reload_gives_no_process_a_fresh_limit():
    """A reload ends every watch and starts them again under the new policy: a table that is the same there (its
    name, its limit) keeps what it counted on each process, so that a configuration tool reloading every few
    minutes takes no artifact each time. 'probe' changes its limit at the reload (2/1h, then 1/1h), so it fires
    afresh, once: its third record shows that the new watch saw the value beyond the line."""
    target, unit = target_in_unit()
    settings = '[agent]\ndump_dir = "@DUMP_DIR@"\n'
    once = table("once", "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true")  # limit 1/1h
    probe = lambda limit: table("probe", "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true",
                                extra=f'limit = "{limit}"')
    agent = Agent(policy=settings + once + probe("2/1h"))
    wait_for(lambda: fired(agent, target.pid, "once"), timeout=90, what="once fired")
    wait_for(lambda: len(fired(agent, target.pid, "probe")) == 2, timeout=90, what="probe fired twice")
    agent.write_policy(settings + once + probe("1/1h"))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    wait_for(lambda: len(fired(agent, target.pid, "probe")) == 3, timeout=90, what="probe fired afresh")
    time.sleep(3)  # three more samples beyond the line
    assert len(fired(agent, target.pid, "once")) == 1, fired(agent, target.pid)
    assert len(fired(agent, target.pid, "probe")) == 3, fired(agent, target.pid)


@test
def two_reloads_before_the_next_walk_give_no_process_a_fresh_limit():
    """A configuration tool may reload twice in quick succession: the second reload comes while the walk the first
    one started still runs (each walk is held 4 s here), before any watch took what the first carried. What each
    table counted must survive it. Before, the second reload dropped what the first carried, and 'once' (1/1h)
    fired a second time on the same process."""
    target, unit = target_in_unit()
    settings = '[agent]\ndump_dir = "@DUMP_DIR@"\n'
    once = table("once", "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true")  # limit 1/1h
    agent = Agent(policy=settings + once, env={"DSAGENT_TEST_PAUSE": "candidate-walk:4000"})
    wait_for(lambda: fired(agent, target.pid, "once"), timeout=90, what="once fired")
    started = time.monotonic()
    for _ in range(2):
        assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    # the premise: a walk started before the first reload is cancelled by it, and the one it starts is held 4 s,
    # so no watch (none of what the first carried taken) came back before the second
    assert time.monotonic() - started < 3.5, "the second reload came after the first one's walk"

    def watched():
        r = dsctl(agent, "root", "--json", "collect")
        return r.returncode == 0 and [x for x in json.loads(r.stdout) if x.get("pid") == target.pid]
    row = wait_for(watched, timeout=60, what="the process watched again")[0]
    time.sleep(4)  # samples beyond the line, one a second
    assert len(fired(agent, target.pid, "once")) == 1, fired(agent, target.pid)
    assert row.get("last_fired_usec"), row  # its firing was carried across both reloads


@test
def dsctl_collect_lists_the_tables_each_reads_and_none_to_anyone_else():
    high, unit = target_in_unit()
    before = time.time() * 1e6
    agent = agent_with(
        table("alice-reads", "Dsagent.TestTarget:test-gauge", unit, readers=(ALICE,), then="then.stacks = true"),
        table("ops-read", "Dsagent.TestTarget:test-gauge", unit, line="when.below = 10", readers=(f"group:{OPS}",)),
        table("root-only", "Dsagent.TestTarget:test-gauge", unit, line="when.below = 10", readers=()))
    wait_for(lambda: collect_records(agent, high.pid, "collected"), timeout=120, what="alice-reads collected")
    after = time.time() * 1e6

    def listing(user):
        r = dsctl(agent, user, "--json", "collect")
        assert r.returncode == 0, r
        rows = json.loads(r.stdout)
        tables = {x["table"]: x for x in rows if "pid" not in x}
        watched = {(x["table"], x["pid"]): x for x in rows if "pid" in x}
        return tables, watched, r.stdout

    tables, watched, _ = listing("root")
    assert sorted(tables) == ["alice-reads", "ops-read", "root-only"], tables
    assert tables["alice-reads"]["action"] == "stacks" and tables["ops-read"]["action"] == "dump", tables
    assert tables["alice-reads"]["what"] == "Dsagent.TestTarget:test-gauge", tables
    for name in tables:
        assert (name, high.pid) in watched and watched[(name, high.pid)]["uid"] == high.uid, (name, watched)
    last = watched[("alice-reads", high.pid)].get("last_fired_usec")
    assert last and before <= last <= after, (before, last, after)  # when it fired, on the wall clock
    assert "last_fired_usec" not in watched[("ops-read", high.pid)], watched  # never beyond its line

    tables, watched, _ = listing(ALICE)  # a reader of one table by name, of another through her group
    assert sorted(tables) == ["alice-reads", "ops-read"], tables
    assert sorted(watched) == [("alice-reads", high.pid), ("ops-read", high.pid)], watched
    r = dsctl(agent, ALICE, "collect")
    assert r.returncode == 0 and "alice-reads: stacks when Dsagent.TestTarget:test-gauge" in r.stdout, r
    assert f"  {high.pid} " in r.stdout and "last fired" in r.stdout and "never fired" in r.stdout, r.stdout
    assert "root-only" not in r.stdout + r.stderr, r

    # a reader of no table sees none, as under a policy without tables: no name, no process, no count
    tables, watched, out = listing(MALLORY)
    assert out == "[]\n", out
    r = dsctl(agent, MALLORY, "collect")
    assert r.returncode == 0 and r.stdout == "", r
    assert r.stderr == "No collection tables whose artifacts you can read.\n", r.stderr


@test
def dsctl_collect_lists_every_table_before_any_process_is_watched():
    """A table is listed from the policy, not from its watches: with no process covered (its unit runs nothing),
    root and its readers see it, with no process under it; anyone else sees nothing of it."""
    empty = f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    agent = agent_with(table("nothing-yet", "Dsagent.TestTarget:test-gauge", empty, readers=(ALICE,)),
                       table("ops-nothing", "Dsagent.TestTarget:test-gauge", empty, readers=(f"group:{OPS}",)),
                       exception_table("root-nothing", "TimeoutException", empty, readers=()))
    time.sleep(3)  # a walk or more: nothing to watch

    def rows(user):
        r = dsctl(agent, user, "--json", "collect")
        assert r.returncode == 0, r
        return json.loads(r.stdout)
    listed = rows("root")
    assert sorted(x["table"] for x in listed) == ["nothing-yet", "ops-nothing", "root-nothing"], listed
    assert not [x for x in listed if "pid" in x], listed
    assert {x["table"]: x["action"] for x in listed}["root-nothing"] == "dump", listed
    assert sorted(x["table"] for x in rows(ALICE)) == ["nothing-yet", "ops-nothing"], rows(ALICE)
    r = dsctl(agent, ALICE, "collect")
    assert r.returncode == 0 and r.stdout.startswith("nothing-yet: dump when Dsagent.TestTarget:test-gauge\n"), r
    assert rows(MALLORY) == []
    r = dsctl(agent, MALLORY, "collect")
    assert r.returncode == 0 and r.stdout == "" and "No collection tables" in r.stderr, r


def collect_rows(agent, user):
    """dsctl collect --json as @user: the tables by name, and the watched processes by (table, pid)."""
    r = dsctl(agent, user, "--json", "collect")
    assert r.returncode == 0, r
    rows = json.loads(r.stdout)
    return {x["table"]: x for x in rows if "pid" not in x}, {(x["table"], x["pid"]): x for x in rows if "pid" in x}


@test
def dsctl_collect_shows_each_tables_last_result_collected_or_failed_to_its_readers():
    """How a table's action last ended, as its collect record says it: collected (the file, its size) or failed
    (the record's reason), with when and on which process, under the table and under the process; to the table's
    readers and root, to nobody else."""
    high, unit = target_in_unit(args=("--park-thread",))
    agent_head = '[agent]\ndump_dir = "@DUMP_DIR@"\n'
    both = (table("result-stacks", "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true") +
            table("result-none", "Dsagent.TestTarget:test-gauge", unit, line="when.below = 10"))
    before = time.time() * 1e6
    agent = Agent(policy=agent_head + both)
    rec = wait_for(lambda: collect_records(agent, high.pid, "collected"), timeout=120, what="the stacks collected")[0]
    path = rec["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    size = os.path.getsize(path)
    assert rec["DSAGENT_COLLECT_RESULT"] == f"{path} ({size} bytes)", rec
    for user in ("root", ALICE):
        tables, watched = collect_rows(agent, user)
        # the bound is the listing's answer, not the record's sight: the agent keeps the result's time on its loop's
        # monotonic clock and turns it into wall time as it answers, against the loop's cached "now", which can put
        # it some ms past the moment the record was seen (2.5 ms once in CI), never past the answer
        after = time.time() * 1e6
        t = tables["result-stacks"]
        assert (t.get("last_result"), t.get("last_result_path"), t.get("last_result_size"), t.get("last_result_pid")) \
            == ("collected", path, size, high.pid), t
        assert before <= t["last_result_usec"] <= after and "last_result_reason" not in t, (before, t, after)
        w = watched[("result-stacks", high.pid)]
        assert (w.get("last_result"), w.get("last_result_path"), w.get("last_result_size")) == \
            ("collected", path, size), w
        # a table that never fired has no result, nor has its process
        assert "last_result" not in tables["result-none"] and "last_result" not in watched[("result-none", high.pid)]
    r = dsctl(agent, ALICE, "collect")
    assert r.returncode == 0, r
    lines = r.stdout.splitlines()
    head = lines.index("result-stacks: stacks when Dsagent.TestTarget:test-gauge")
    assert re.fullmatch(rf"  last collected \S+ \S+ \(pid {high.pid}\): {re.escape(path)} \({size} bytes\)",
                        lines[head + 1]), r.stdout
    row = [i for i, line in enumerate(lines) if i > head and line.startswith(f"  {high.pid} ")][0]
    assert re.fullmatch(rf" +last collected \S+ \S+: {re.escape(path)} \({size} bytes\)", lines[row + 1]), r.stdout
    for way in (("collect",), ("--json", "collect")):
        r = dsctl(agent, MALLORY, *way)  # reads no table: no name, no path, no reason
        assert r.returncode == 0 and path not in r.stdout + r.stderr and "result-" not in r.stdout + r.stderr, r
    # a reload that keeps the table keeps its result; a table taken away and back (here one that never fires) is
    # another one, without the result of the one before: the agent keeps results only of the tables in force
    def reload_with(*tables):
        agent.write_policy(agent_head + "".join(tables))
        assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
        return collect_rows(agent, "root")[0]
    assert reload_with(both)["result-stacks"].get("last_result_path") == path
    reload_with(table("result-none", "Dsagent.TestTarget:test-gauge", unit, line="when.below = 10"))
    back = reload_with(table("result-stacks", "Dsagent.TestTarget:test-gauge", unit, line="when.below = 10",
                             then="then.stacks = true"))
    assert "last_result" not in back["result-stacks"], back

    # failed: the heap dump does not fit max_use; the reason is the failed record's, word for word
    small, small_unit = target_in_unit()
    tight = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_use = "4K"\n' +
                  table("result-heap", "Dsagent.TestTarget:test-gauge", small_unit, then="then.gcdump = true"))
    rec = wait_for(lambda: collect_records(tight, small.pid, "failed"), timeout=180, what="the heap dump's failure")[0]
    reason = rec["DSAGENT_COLLECT_RESULT"]
    assert reason.startswith("cannot store the heap dump: "), rec
    for user in ("root", ALICE):
        tables, watched = collect_rows(tight, user)
        t = tables["result-heap"]
        assert (t.get("last_result"), t.get("last_result_reason"), t.get("last_result_pid")) == \
            ("failed", reason, small.pid), t
        assert "last_result_path" not in t and "last_result_size" not in t, t
        w = watched[("result-heap", small.pid)]
        assert (w.get("last_result"), w.get("last_result_reason")) == ("failed", reason), w
    r = dsctl(tight, ALICE, "collect")
    assert r.returncode == 0 and f"  last failed " in r.stdout and f"(pid {small.pid}): {reason}\n" in r.stdout, r
    r = dsctl(tight, MALLORY, "--json", "collect")
    assert r.returncode == 0 and r.stdout == "[]\n", r


@test
def an_exception_table_fires_when_its_type_is_thrown_count_times_within_its_window():
    thrower, unit = target_in_unit(args=("--throw-exceptions", "5"))  # DsTestTarget.DsagentProbeException
    quiet, _ = target_in_unit(unit=unit)
    agent = agent_with(
        # the short name, and three within 10 s: the process throws five a second; the action: a trace
        exception_table("probe-thrown", "DsagentProbeException", unit, count=3, within="10s",
                        then='then.trace_profile = "gc-collect"\nthen.duration = "2s"'),
        # the full name, one is enough; the action: a mini dump
        exception_table("probe-full", "DsTestTarget.DsagentProbeException", unit),
        # more than the process throws in the window
        exception_table("too-many", "DsagentProbeException", unit, count=1000, within="1s"),
        # a type nobody throws; a full name in another namespace
        exception_table("other-type", "TimeoutException", unit),
        exception_table("other-namespace", "Other.DsagentProbeException", unit))

    collected = lambda name: [r for r in collect_records(agent, thrower.pid, "collected") if r["DSAGENT_RULE"] == name]
    rec = wait_for(lambda: collected("probe-thrown"), timeout=120, what="the exception table's trace")[0]
    assert rec["DSAGENT_RULE"] == "probe-thrown" and rec["DSAGENT_COLLECT_TRIGGER"] == "exception", rec
    path = rec["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    assert f".{thrower.pid}.collect-probe-thrown." in path and can_read(ALICE, path), path
    assert not can_read(MALLORY, path) and not can_read(SVC, path), path
    fire = {r["DSAGENT_RULE"]: r for r in collect_records(agent, thrower.pid, "fired")}
    assert fire["probe-thrown"]["DSAGENT_COLLECT_EXCEPTION"] == "DsTestTarget.DsagentProbeException", fire
    assert fire["probe-thrown"]["DSAGENT_COLLECT_WHAT"] == "DsagentProbeException", fire
    assert "probe-full" in fire and fire["probe-full"]["DSAGENT_COLLECT_RESULT"] == "a mini dump begins", fire
    core = wait_for(lambda: collected("probe-full"), timeout=120, what="the exception table's dump")[0]
    core = core["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    assert f".{thrower.pid}.collect-probe-full." in core and is_elf_core(core), core
    assert can_read(ALICE, core) and not can_read(MALLORY, core) and not can_read(SVC, core), core
    time.sleep(4)
    fired_now = [r["DSAGENT_RULE"] for r in collect_records(agent, thrower.pid, "fired")]
    assert sorted(fired_now) == ["probe-full", "probe-thrown"], fired_now  # once each: the limit, 1/1h
    assert not collect_records(agent, quiet.pid, "fired"), collect_records(agent, quiet.pid, "fired")


@test
def an_exceptions_table_keeps_the_throw_site_of_the_exception_that_fired_it_for_its_readers_only():
    """then.exceptions: the exceptions, with their stacks, as dsctl exceptions prints them. The one that fired the
    table was thrown once, before the table's own session began: its type, message and throwing method are in the
    file all the same (the watch's own event, with its stack, its frames named by the session's rundown)."""
    once, unit = target_in_unit(args=("--throw-once-when-watched",))
    agent = agent_with(exception_table("once-thrown", "DsagentOnceException", unit, readers=(f"group:{OPS}",),
                                       then='then.exceptions = true\nthen.duration = "1s"'))
    # the app throws once the watch's session asks for exception events: the agent's first walk finds it, a worker
    # opens it and the session starts (read_line's bound, RUNTIME_BOUND, ends only a hang)
    once.process.read_line("thrown-once")
    path, fire, _ = collected_artifact(agent, once.pid, "once-thrown", "exceptions", ".txt",
                                       "an exceptions session begins")
    assert fire["DSAGENT_COLLECT_EXCEPTION"] == "DsTestTarget.DsagentOnceException", fire
    # dsctl exceptions' text: the exception's head, its type and message, then its frames from the throw site out
    r = subprocess.run(harness.as_user(ALICE, ["cat", path]), stdout=subprocess.PIPE, text=True)
    assert r.returncode == 0, "a reader (in the table's group) cannot read the exceptions"
    lines = r.stdout.splitlines()
    assert "DsTestTarget.DsagentOnceException: dsagent-once-probe" in lines, r.stdout
    at = lines.index("DsTestTarget.DsagentOnceException: dsagent-once-probe")
    assert re.fullmatch(r"First chance exception at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} on thread \d+", lines[at - 1]), \
        r.stdout
    assert lines[at + 1] == "   at DsTestTarget.DsagentProbe.ThrowDsagentOnce", r.stdout  # the throw site
    assert r.stdout.count("DsagentOnceException") == 1, r.stdout  # thrown once, before the table's session

    sessions = [r for r in agent.records(message_id=SESSION_START_ID) if r["DSAGENT_TARGET_PID"] == str(once.pid)
                and r.get("DSAGENT_SESSION_ORIGIN") == "collect"]
    assert len(sessions) == 1 and sessions[0]["DSAGENT_SESSION_KIND"] == "exceptions", sessions

    read_by_ops_alone(agent, path, "exceptions", "once-thrown")


@test
def a_runtime_that_floods_its_watch_has_the_session_cut():
    d = make_dir(None, 0o755)
    head, block = nettrace_writer.flood_stream(d)
    fake = FakeRuntime(f"flood:{head}:{block}")
    unit = f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    place_in_unit(fake.pid, unit)
    agent = agent_with(table("watched", "System.Runtime:cpu-usage", unit))
    # over 1 MiB in a second, the agent hangs up: the fake says how much it sent, and for how long
    flood = wait_for(lambda: os.path.exists(fake.log + ".flood") and open(fake.log + ".flood").read(), timeout=60,
                     what="the agent to cut the flooding stream")
    sent, seconds = flood.split()
    assert int(sent) < 64 << 20 and float(seconds) < 10, flood
    assert agent.proc.poll() is None, "the agent died"


@test
def a_watch_that_ends_stops_its_session_in_the_runtime():
    # a session of exception events has nothing to write while nothing is thrown: without a StopTracing it
    # would stay in the runtime, one of its 64, long after the agent closed its stream
    d = make_dir(None, 0o755)
    head, _ = nettrace_writer.flood_stream(d)
    fake = FakeRuntime(f"trace:{head}")  # answers CollectTracing with a valid head, then holds the stream open
    unit = f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    place_in_unit(fake.pid, unit)
    agent = agent_with(exception_table("quiet-exceptions", "TimeoutException", unit))
    collect_tracing = lambda data: [i for i in range(len(data) - 17) if data[i:i + 14] == b"DOTNET_IPC_V1\x00"
                                    and data[i + 16] == 0x02 and data[i + 17] >= 0x02]
    stop_tracing = lambda data: [i for i in range(len(data) - 17) if data[i:i + 14] == b"DOTNET_IPC_V1\x00"
                                 and data[i + 16] == 0x02 and data[i + 17] == 0x01]
    wait_for(lambda: collect_tracing(fake.received()), timeout=60, what="the watch's session")
    time.sleep(1)
    assert not stop_tracing(fake.received())
    agent.write_policy('[agent]\ndump_dir = "@DUMP_DIR@"\n')  # no tables: the watch ends
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    wait_for(lambda: stop_tracing(fake.received()), timeout=30, what="StopTracing for the watch's session")


@test
def one_users_processes_hold_one_collection_trace_at_a_time_of_the_two():
    """Collection traces run two at once host-wide, and one of each owner's processes at a time: svc's two
    processes fire first, and only one of them is traced; alice's, covered by the same table, fires next and is
    traced beside it; mallory's, after them, finds the two running. Before, svc's two held both, and alice's was
    refused ("2 collection traces run already") for as long as svc's ran: one user's tables' work made another's
    fail."""
    first, unit = target_in_unit()
    second, _ = target_in_unit(unit=unit)
    agent = agent_with(table("long-trace", "Dsagent.TestTarget:test-gauge", unit, users=(SVC, ALICE, MALLORY),
                             then='then.trace_profile = "gc-collect"\nthen.duration = "60s"'))
    fired_of = lambda targets: [r for t in targets for r in collect_records(agent, t.pid, "fired")]
    records = wait_for(lambda: len(fired_of([first, second])) == 2 and fired_of([first, second]), timeout=90,
                       what="svc's two fired")
    results = sorted(r["DSAGENT_COLLECT_RESULT"] for r in records)
    assert results == ["a trace of profile gc-collect begins",
                       f"not traced: a collection trace of a process of uid {first.uid} runs already"], results
    alices, _ = target_in_unit(user=ALICE, unit=unit)  # its facts say the table covers it: watched at once
    rec = wait_for(lambda: fired_of([alices]), timeout=90, what="alice's fired")[0]
    assert rec["DSAGENT_COLLECT_RESULT"] == "a trace of profile gc-collect begins", rec
    mallorys, _ = target_in_unit(user=MALLORY, unit=unit)
    rec = wait_for(lambda: fired_of([mallorys]), timeout=90, what="mallory's fired")[0]
    assert rec["DSAGENT_COLLECT_RESULT"] == "not traced: 2 collection traces run already", rec


@test
def a_tables_dump_of_a_users_own_process_takes_none_of_the_hosts_dump_slots():
    """svc's runtime (svc's own to program) crosses a table's line and trickles the core the table asks for. The
    dump is charged to svc as svc's dump of its own process: the users' own pool (max_concurrent_own_dumps), never
    the host's one slot (max_concurrent_dumps = 1), which alice's rule dump of mallory's process needs. Before,
    the table's dump took the host's slot, and alice's dump was refused "as many dumps as max_concurrent_dumps
    allows" for as long as svc's runtime trickled."""
    fake = FakeRuntime(f"stream-trickle:{hostile_samples()}:0.5")  # a byte every half second: for minutes
    unit = in_new_unit(fake.pid)
    victim = Target(MALLORY, tmpdir=None, mount_ns=True)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_concurrent_dumps = 1\n\n[[rule]]\n'
                  f'name = "alice-dumps-mallory"\nusers = ["{ALICE}"]\ncommands = ["dump"]\n'
                  f'targets.users = ["{MALLORY}"]\ndump_types = ["mini"]\n' + table("trickled", "Hostile:depth", unit))
    wait_for(lambda: os.path.exists(fake.log + ".trickling"), timeout=90, what="the table's dump to trickle")
    assert fired(agent, fake.pid)[0]["DSAGENT_COLLECT_RESULT"] == "a mini dump begins", fired(agent, fake.pid)
    r = dsctl(agent, ALICE, "dump", str(victim.pid), timeout=120)
    assert r.returncode == 0, r
    # the premise: the table's dump still trickled while alice's was taken
    assert not collect_records(agent, fake.pid, "collected") and not collect_records(agent, fake.pid, "failed"), \
        collect_records(agent, fake.pid, "failed")


@test
def a_tables_dump_of_a_trickling_runtime_is_cut_at_the_pace_deadline_as_its_owners_dump_is():
    """A table's dump follows the pace deadlines its owner's own dumps do (--dump-min-rate over each stretch of
    --dump-stall-timeout): svc's runtime, which svc programs, trickles the core a byte every half second, and the
    dump is cut some 3 s after its first byte, recorded failed with the deadline named, and nothing is left in
    dump_dir or the runtime's /tmp. Without the deadline it would hold its slot and dump_dir's room for the whole
    --dump-timeout (300 s)."""
    fake = FakeRuntime(f"stream-trickle:{hostile_samples()}:0.5")  # a byte every half second: for minutes
    unit = in_new_unit(fake.pid)
    agent = Agent("--dump-stall-timeout", "3", "--dump-min-rate", "1000",
                  policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + table("trickled", "Hostile:depth", unit))
    wait_for(lambda: os.path.exists(fake.log + ".trickling"), timeout=90, what="the table's dump to trickle")
    # the cut comes some 3 s after the first byte (one stretch of --dump-stall-timeout); 60 s only ends a hang,
    # far below the 300 s --dump-timeout that would end it otherwise
    rec = wait_for(lambda: collect_records(agent, fake.pid, "failed"), timeout=60, what="the dump's cut")[0]
    assert rec["DSAGENT_COLLECT_ACTION"] == "dump" and "--dump-min-rate" in rec["DSAGENT_COLLECT_RESULT"], rec
    assert not collect_records(agent, fake.pid, "collected")
    assert not [f for f in os.listdir(agent.dumps) if f".{fake.pid}." in f], os.listdir(agent.dumps)
    assert not [f for f in os.listdir(fake.tmpdir) if f.startswith(".dsagent-dump-")], os.listdir(fake.tmpdir)


def connection_of_a_gone_process(agent, user):
    """A connection to @agent made by a process of @user that is gone by the time the agent accepts it (the
    agent is stopped meanwhile): the agent cannot tell its user namespace, and charges it as unknown."""
    import socket
    os.kill(agent.proc.pid, signal.SIGSTOP)
    try:
        ours, theirs = socket.socketpair()
        child = os.fork()
        if child == 0:
            try:
                os.setgroups([])
                os.setgid(pwd.getpwnam(user).pw_gid)
                os.setuid(pwd.getpwnam(user).pw_uid)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(agent.socket)
                socket.send_fds(theirs, [b"c"], [s.fileno()])
            finally:
                os._exit(0)
        os.waitpid(child, 0)
        _, fds, _, _ = socket.recv_fds(ours, 1, 1)
        ours.close()
        theirs.close()
    finally:
        os.kill(agent.proc.pid, signal.SIGCONT)
    conn = socket.socket(fileno=fds[0])
    conn.settimeout(60)
    harness.scope.callback(conn.close)
    return conn


@test
def the_watchers_charge_is_not_the_one_of_peers_it_cannot_tell():
    """A peer whose user namespace cannot be told (its process is gone) is charged as unknown, (uid_t) -3. The
    watcher's own charge was that very value: its watch of svc's process counted as one of the unknown peers'
    sessions, and with max_sessions_per_user = 1 such a peer's session was refused ("as many sessions as
    max_sessions_per_user allows run for you") while the table watched. The watcher's charge is its own now,
    and a watch counts as nobody's session but its process's."""
    target, unit = target_in_unit(value="100", args=("--report-sessions",))
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_sessions_per_user = 1\n' +
                  table("watching", "Dsagent-TestTarget:test-counter", unit, line="when.above = 1000000"))
    target.process.read_line("eventsource-enabled True", timeout=90)  # the watch's session runs
    conn = connection_of_a_gone_process(agent, SVC)
    conn.sendall(harness.wire_trace_request(target.pid, "Microsoft-Windows-DotNETRuntime:0x1:4", duration=1))
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    frames = harness.wire_decode(data)
    # the premise: the agent charged the peer as unknown (the record names that charge "unknown")
    recs = wait_for(lambda: [r for r in agent.records() if r.get("DSAGENT_CLIENT_PID") and
                             r.get("DSAGENT_CLIENT_UID") == str(target.uid) and r.get("DSAGENT_COMMAND") == "trace"],
                    what="the session's record")
    assert recs[-1].get("DSAGENT_CLIENT_CHARGED_UID") == "unknown", recs
    assert frames and frames[0][0] == harness.WIRE_STREAM, (frames, recs[-1])
    assert recs[-1]["DSAGENT_DECISION"] == "allowed", recs[-1]


@test
def a_runtime_that_ends_its_stream_gets_no_fresh_limit():
    # the runtime ends each session after samples beyond the line; the agent watches it again (30 s later,
    # 3 s under the test hook), and the table's limit, once an hour, must still count the first firing
    fake = FakeRuntime(f"stream:{hostile_samples()}")
    unit = in_new_unit(fake.pid)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + table("restarted", "Hostile:depth", unit),
                  env={"DSAGENT_TEST_COLLECT_RETRY_MS": "3000"})
    wait_for(lambda: fired(agent, fake.pid), timeout=60, what="the first firing")
    sessions = lambda: [i for i in range(len(fake.received()) - 17) if fake.received()[i:i + 14] == b"DOTNET_IPC_V1\x00"
                        and fake.received()[i + 16] == 0x02 and fake.received()[i + 17] >= 0x02]
    first = len(sessions())
    wait_for(lambda: len(sessions()) > first, timeout=90, what="the agent to watch the runtime again")
    time.sleep(3)  # the new session's samples, beyond the line again, have been read
    assert len(fired(agent, fake.pid)) == 1, fired(agent, fake.pid)


@test
def a_reload_applies_new_tables_without_restarting_the_agent():
    high, unit = target_in_unit()
    agent = agent_with()
    time.sleep(4)  # walks happen: nothing to watch for
    assert not agent.records(message_id=COLLECT_MESSAGE_ID)
    agent.write_policy('[agent]\ndump_dir = "@DUMP_DIR@"\n' + table("added", "Dsagent.TestTarget:test-gauge", unit))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    wait_for(lambda: fired(agent, high.pid, "added"), timeout=90, what="the new table fired")


def stock_gcdump_report(path):
    """What the stock dotnet-gcdump report (tests/tools/dotnet-tools, as test_gcdump uses it) prints of @path."""
    tool = os.path.join(harness.tool("dotnet-tools", "tests/tools/dotnet-tools/install.sh"), "dotnet-gcdump")
    r = subprocess.run(["env", "DOTNET_CLI_TELEMETRY_OPTOUT=1", tool, "report", path], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r
    return r.stdout


@test
def a_gcdump_table_writes_a_gcdump_the_stock_report_reads_for_its_readers_only_once_per_limit():
    high, unit = target_in_unit()
    agent = agent_with(table("heap-high", "Dsagent.TestTarget:test-gauge", unit, readers=(f"group:{OPS}",),
                             then="then.gcdump = true"))
    path, _, _ = collected_artifact(agent, high.pid, "heap-high", "gcdump", ".gcdump", "a heap dump session begins",
                                    timeout=180)

    # the stock reader reads it: the runtime's types and the test app's own, each with its module
    report = stock_gcdump_report(path)
    found = re.findall(r"^ +([\d,]+) +([\d,]+)  (.+)$", report, re.M)
    assert len(found) > 20, report
    assert any(what.startswith("System.String  [System.Private.CoreLib.dll]") for _, _, what in found), report
    assert any(what == "TestTargetSource  [DsTestTarget.dll]" for _, _, what in found), report
    assert not any(what.startswith("UNKNOWN") for _, _, what in found), report
    objects = int(re.search(r"^ +([\d,]+)  GC Heap objects$", report, re.M).group(1).replace(",", ""))
    assert objects > 100, report

    st = os.stat(path)
    assert st.st_uid == 0 and st.st_nlink == 1, st
    acl = acl_of(path)
    assert f"group:{grp.getgrnam(OPS).gr_gid}:r--" in acl, acl  # exactly the table's readers: ops, no user
    assert not [e for e in acl if e.startswith("user:") and e != "user::rw-"], acl
    assert not [e for e in acl if e.startswith("group:") and e not in ("group::---", f"group:{grp.getgrnam(OPS).gr_gid}:r--")], acl
    assert can_read(ALICE, path), "a reader (in the table's group) cannot read the heap dump"
    for other in (MALLORY, SVC):  # the app's own user reads it only if the table says so
        assert not can_read(other, path), f"{other} can read the collected heap dump"
    r = dsctl(agent, ALICE, "--json", "dumps")
    listed = [x for x in json.loads(r.stdout) if x["path"] == path] if r.returncode == 0 else r
    assert listed and listed[0]["type"] == "gcdump" and "collect-heap-high" in listed[0]["path"], (listed, r.stdout)
    r = dsctl(agent, MALLORY, "--json", "dumps")
    assert r.returncode == 0 and path not in r.stdout and "heap-high" not in r.stdout, r

    # the session dsctl gcdump asks for, stopped by the agent once the dump's GC had ended (not at its 30 s
    # window), with the rundown that names the modules whole
    mine = lambda mid: [r for r in agent.records(message_id=mid) if r["DSAGENT_TARGET_PID"] == str(high.pid)
                        and r.get("DSAGENT_SESSION_ORIGIN") == "collect"]
    started = mine(SESSION_START_ID)
    assert len(started) == 1 and started[0]["DSAGENT_SESSION_KIND"] == "gcdump", started
    assert started[0]["DSAGENT_RULE"] == "heap-high", started
    assert started[0]["DSAGENT_PROVIDERS"] == "Microsoft-Windows-DotNETRuntime:0x1980001:5", started
    ended = mine(SESSION_END_ID)
    assert [(e["DSAGENT_SESSION_END"], e["DSAGENT_SESSION_COMPLETE"]) for e in ended] == [("stopped", "yes")], ended

    time.sleep(6)  # the default limit, 1/1h, takes no second
    assert len(collect_records(agent, high.pid, "fired")) == 1, collect_records(agent, high.pid, "fired")
    assert [f for f in os.listdir(agent.dumps) if f".{high.pid}.collect-" in f] == [os.path.basename(path)], \
        os.listdir(agent.dumps)


@test
def a_gcdump_table_whose_runtime_sends_no_heap_records_the_failure_and_leaves_nothing():
    # a runtime whose counter crosses the line, and that answers the heap dump's session with counter samples
    fake = FakeRuntime(f"stream:{hostile_samples()}")
    unit = in_new_unit(fake.pid)
    agent = agent_with(table("no-heap", "Hostile:depth", unit, then="then.gcdump = true"))
    rec = wait_for(lambda: collect_records(agent, fake.pid, "failed"), timeout=90, what="the heap dump's failure")[0]
    assert rec["DSAGENT_RULE"] == "no-heap" and rec["DSAGENT_COLLECT_ACTION"] == "gcdump", rec
    assert rec["DSAGENT_COLLECT_RESULT"] == "no heap dump: the runtime sent no complete heap dump", rec
    assert fired(agent, fake.pid)[0]["DSAGENT_COLLECT_RESULT"] == "a heap dump session begins", fired(agent, fake.pid)
    assert not collect_records(agent, fake.pid, "collected")
    assert not [f for f in os.listdir(agent.dumps) if f".{fake.pid}." in f], os.listdir(agent.dumps)
    # the session was the heap dump's, and the runtime ended it: never stopped as a whole dump
    ended = [r for r in agent.records(message_id=SESSION_END_ID) if r["DSAGENT_TARGET_PID"] == str(fake.pid)
             and r.get("DSAGENT_SESSION_ORIGIN") == "collect"]
    assert [(e["DSAGENT_SESSION_KIND"], e["DSAGENT_SESSION_END"]) for e in ended] == [("gcdump", "target-ended")], ended
    assert agent.proc.poll() is None, "the agent died"


@test
def a_gcdump_past_max_use_records_the_failure_and_leaves_nothing():
    # the .gcdump is written through the dump writer, under dump_dir's guards: 4 KiB are not enough for it
    high, unit = target_in_unit()
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_use = "4K"\n' +
                  table("heap-small", "Dsagent.TestTarget:test-gauge", unit, then="then.gcdump = true"))
    rec = wait_for(lambda: collect_records(agent, high.pid, "failed"), timeout=180, what="the heap dump's failure")[0]
    assert rec["DSAGENT_RULE"] == "heap-small" and rec["DSAGENT_COLLECT_ACTION"] == "gcdump", rec
    assert rec["DSAGENT_COLLECT_RESULT"].startswith("cannot store the heap dump: ") and \
        "max_use" in rec["DSAGENT_COLLECT_RESULT"], rec
    assert not collect_records(agent, high.pid, "collected")
    assert os.listdir(agent.dumps) == [], os.listdir(agent.dumps)
    ended = [r for r in agent.records(message_id=SESSION_END_ID) if r["DSAGENT_TARGET_PID"] == str(high.pid)
             and r.get("DSAGENT_SESSION_ORIGIN") == "collect"]
    assert [e["DSAGENT_SESSION_END"] for e in ended] == ["no-space"], ended


@test
def a_fired_record_says_the_value_rounded_for_people_and_exactly_for_machines():
    # 94.763704 as a double is 94.763704000000004 to 17 digits, which records once printed
    high, unit = target_in_unit(value="94.763704")
    agent = agent_with(table("gauge-rounded", "Dsagent.TestTarget:test-gauge", unit, line="when.above = 90"),
                       table("counter-rounded", "Dsagent-TestTarget:test-counter", unit, line="when.above = 90"))
    for name in ("gauge-rounded", "counter-rounded"):
        # 90 s: the agent's first walk finds the target, starts its counters session, and samples come each second
        rec = wait_for(lambda: fired(agent, high.pid, name), timeout=90, what=f"{name} fired")[0]
        assert rec["DSAGENT_COLLECT_VALUE"] == "94.764", rec
        assert rec["DSAGENT_COLLECT_VALUE_EXACT"] == "94.763704", rec
        assert float(rec["DSAGENT_COLLECT_VALUE_EXACT"]) == 94.763704, rec
        assert " at 94.764: " in rec["MESSAGE"], rec["MESSAGE"]


@test
def tables_that_fire_together_on_one_process_take_turns():
    """Two tables on one process fire on every sample; one collection session of an owner's processes runs at a
    time, so at each sample one acts and the other is held back. The look at the tables starts after the one that
    acted last: both take their stacks. Before, the first table in the policy took every turn (five of five) and
    the second never collected."""
    target, unit = target_in_unit()
    agent = agent_with(*(table(name, "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true",
                               extra='limit = "5/1h"') for name in ("first", "second")))
    for name in ("first", "second"):
        # 120 s: the first walk, the watch's session, and a few samples a second apart, on a loaded machine
        wait_for(lambda: [c for c in collect_records(agent, target.pid, "collected") if c["DSAGENT_RULE"] == name],
                 timeout=120, what=f"{name}'s stacks")
    # the premise: they fired together, and one was held back for the other
    assert any("runs already" in r["DSAGENT_COLLECT_RESULT"] for r in fired(agent, target.pid)), fired(agent)


@test
def a_process_that_rebinds_its_socket_gets_no_fresh_limit():
    """The same process (pid and start time) closes its listener and binds it again, each time after its samples
    crossed the line: the walk between misses its socket, and its watch ends. The table's limit (once an hour) is
    the process's for as long as it lives. Before, the limit lived on the watch: each re-bind got a fresh one, and
    the table fired (and took an artifact) at every re-bind."""
    fake = FakeRuntime(f"rebind:{hostile_samples()}:5")  # 5 s away: more than a walk's 2 s
    unit = in_new_unit(fake.pid)
    agent = agent_with(table("rebound", "Hostile:depth", unit, then="then.stacks = true"))
    rebinds = lambda: int(open(fake.log + ".rebinds").read()) if os.path.exists(fake.log + ".rebinds") else 0
    sessions = lambda: [i for i in range(len(fake.received()) - 17) if fake.received()[i:i + 14] == b"DOTNET_IPC_V1\x00"
                        and fake.received()[i + 16] == 0x02 and fake.received()[i + 17] >= 0x02]
    # the premise: re-bound three times, and watched again after each (a watch's session is one CollectTracing)
    wait_for(lambda: rebinds() >= 3 and len(sessions()) >= 4, timeout=120, what="three re-binds, each watched again")
    time.sleep(2)  # the last watch's samples have been read
    assert harness.start_time_of(fake.pid) and fake.process.proc.poll() is None, "not the same process any more"
    assert len(fired(agent, fake.pid)) == 1, fired(agent, fake.pid)


@test
def a_table_takes_at_most_its_limit_total_over_all_its_processes():
    """Each new process has a limit of its own (once an hour), but the table as a whole takes at most limit_total
    (two an hour): the third and fourth process fire nothing. Before, every fresh process (or pid) brought a
    fresh budget, and four processes took four artifacts."""
    samples = hostile_samples()
    fakes = [FakeRuntime(f"stream:{samples}") for _ in range(4)]
    unit = in_new_unit(fakes[0].pid)
    for fake in fakes[1:]:
        place_in_unit(fake.pid, unit)
    agent = agent_with(table("bounded", "Hostile:depth", unit, then="then.stacks = true", extra='limit_total = "2/1h"'))
    everyone = lambda: [r for f in fakes for r in fired(agent, f.pid)]
    wait_for(lambda: len(everyone()) >= 2, timeout=90, what="two firings")
    # every process was watched and its samples read: each has had its session (and the first two their stacks')
    wait_for(lambda: all(b"DOTNET_IPC_V1\x00" in f.received() for f in fakes), timeout=60, what="every process watched")
    time.sleep(4)  # the samples of the last to be watched have been read
    assert len(everyone()) == 2, everyone()



@test
def one_owners_processes_cannot_spend_another_owners_limit_total():
    """A table covers the processes of two users (svc, mallory) in one unit. Mallory's own processes cross the
    line whenever she likes (she writes their counters), three of them, each a fresh process with a limit of its
    own: they take the table's limit_total (two an hour) as fast as they are watched. Then svc's process crosses
    it: it is fired on all the same, since limit_total counts per owner; mallory's third process, a fresh one of
    hers, still gets nothing. Before, limit_total was one count for the whole table: mallory's two firings spent
    it, and svc's process was never collected for the rest of the hour."""
    samples = hostile_samples()
    hers = [FakeRuntime(f"stream:{samples}", user=MALLORY) for _ in range(3)]
    unit = in_new_unit(hers[0].pid)
    for fake in hers[1:]:
        place_in_unit(fake.pid, unit)
    agent = agent_with(table("shared", "Hostile:depth", unit, then="then.stacks = true", extra='limit_total = "2/1h"',
                             users=(SVC, MALLORY)))
    mallorys = lambda: [r for f in hers for r in fired(agent, f.pid)]
    # the attack: her processes fired the table twice, and each of them was watched and its samples read
    wait_for(lambda: len(mallorys()) >= 2, timeout=90, what="two firings of mallory's processes")
    wait_for(lambda: all(b"DOTNET_IPC_V1\x00" in f.received() for f in hers), timeout=60,
             what="every process of hers watched")
    time.sleep(4)  # the samples of the last of hers to be watched have been read (as the test above)
    assert len(mallorys()) == 2, mallorys()  # her fresh third process brought no budget beyond her two
    theirs = FakeRuntime(f"stream:{samples}", user=SVC)
    place_in_unit(theirs.pid, unit)
    # 90 s: the next walk finds it, its watch's session starts and its first sample is beyond the line
    rec = wait_for(lambda: fired(agent, theirs.pid), timeout=90, what="svc's process fired on")[0]
    assert rec["DSAGENT_RULE"] == "shared", rec
    assert len(mallorys()) == 2, mallorys()


AUDIT_GAP_ID = "e7a3a2ffe6c543d2a42572e8d2074d1b"
EXIT_AUDIT_UNAVAILABLE = 16


class StalledRecords:
    """The agent's JSON records from a pipe the test reads only when it says so: between reads, the pipe (4 KiB)
    and then the agent's audit queue fill, as with a log collector that stopped reading."""

    def __init__(self, fd):
        import fcntl
        fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ
        os.set_blocking(fd, False)
        self.fd, self.buf, self.records = fd, b"", []
        harness.scope.callback(os.close, fd)

    def read_now(self):
        """Everything the pipe holds now; the records so far."""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        self.records += [json.loads(line) for line in lines if line.startswith(b"{")]
        return self.records


@test
def an_artifact_made_while_the_audit_queue_is_full_is_published_with_its_record():
    """No artifact without its record. The audit output stops being read while a table's trace runs; requests fill
    the queue for decisions, and another table's firings (300 at once) its reserve for events; then the trace
    ends. The room for the trace's records was held when it began, so its file is published and, once the output
    is read again, its dump record and its "collected" record are there, while the noise's events were lost and
    counted. Before the room was held, the trace was published in dump_dir, root's and readable by the table's
    readers, with no record of it."""
    target, unit = target_in_unit()
    noise_unit = f"dst-collect-{uuid.uuid4().hex[:12]}.service"
    noise_path = hostile_samples(intervals=150)
    r, w = os.pipe2(os.O_CLOEXEC)
    records = StalledRecords(r)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 10000\nmax_request_burst = 10000\n'
                  + table("unrecorded", "Dsagent.TestTarget:test-gauge", unit,
                          then='then.trace_profile = "gc-collect"\nthen.duration = "40s"')
                  + table("noise", "Hostile:depth", noise_unit, then="then.stacks = true",
                          extra='limit = "100/1h"\nlimit_total = "1000/1h"'),
                  audit="json", audit_fd=w, env={"DSAGENT_TEST_AUDIT_QUEUE": "8"})
    os.close(w)
    began = lambda: [x for x in records.read_now() if x.get("MESSAGE_ID") == COLLECT_MESSAGE_ID and
                     x.get("DSAGENT_COLLECT_EVENT") == "fired" and x["DSAGENT_TARGET_PID"] == str(target.pid)]
    rec = wait_for(began, timeout=90, what="the table's trace to begin")[0]
    assert rec["DSAGENT_COLLECT_RESULT"] == "a trace of profile gc-collect begins", rec
    # from now on nothing is read. Requests until one is refused: the queue for decisions is full
    for _ in range(400):
        if dsctl(agent, "root", "info", "4999999").returncode == EXIT_AUDIT_UNAVAILABLE:
            break
    else:
        raise AssertionError("the audit queue never filled")
    # three processes the noise table covers, each crossing its line 150 times at once: 300 firings, recorded
    # in the reserve the queue keeps for events, and past it
    fakes = [FakeRuntime(f"stream:{noise_path}") for _ in range(3)]
    for fake in fakes:
        place_in_unit(fake.pid, noise_unit)
    mine = lambda: [f for f in os.listdir(agent.dumps) if ".collect-unrecorded." in f] if os.path.isdir(
        agent.dumps) else []
    wait_for(lambda: all(b"DOTNET_IPC_V1\x00" in f.received() for f in fakes), timeout=60,
             what="the noise table's watches")
    assert not mine(), "the trace ended before the queue was full: no attack"  # the premise
    # 120 s: the trace's 40 s from its start, and its rundown, on a loaded machine
    published = wait_for(mine, timeout=120, what="the trace's file")
    assert "the trace's audit record could not be written" not in open(agent.log_path).read()
    # the output is read again: the queue drains; what it could not take is counted, and the trace's records are
    # there
    wait_for(lambda: any(x.get("MESSAGE_ID") == AUDIT_GAP_ID for x in records.read_now()), timeout=30,
             what="the record of what was refused and lost")
    gaps = [x for x in records.read_now() if x.get("MESSAGE_ID") == AUDIT_GAP_ID]
    assert sum(int(g["DSAGENT_AUDIT_LOST"]) for g in gaps) > 0, gaps  # the premise: events were lost
    dumps = wait_for(lambda: [x for x in records.read_now() if x.get("MESSAGE_ID") == harness.DUMP_MESSAGE_ID and
                              ".collect-unrecorded." in x.get("DSAGENT_DUMP_PATH", "")], timeout=30,
                     what="the trace's dump record")
    assert [os.path.basename(x["DSAGENT_DUMP_PATH"]) for x in dumps] == published, (dumps, published)
    collected = [x for x in records.read_now() if x.get("MESSAGE_ID") == COLLECT_MESSAGE_ID and
                 x.get("DSAGENT_COLLECT_EVENT") == "collected" and x["DSAGENT_TARGET_PID"] == str(target.pid)]
    assert len(collected) == 1, collected


def hostile_heap_stream(directory):
    """What a hostile runtime sends a heap dump's session, in three files: a head (the runtime's GCStart, GCEnd and
    GCBulkNode defined, and the start of an induced, blocking gen-2 GC, so that what follows is the dump's); an
    EventBlock of 25,000 nodes that can follow itself again and again, each node at a lower address than the one
    before (so that each starts a run of addresses of its own: the most the heap keeps for a node); and a tail,
    the GC's end and the stream's."""
    import struct
    provider = "Microsoft-Windows-DotNETRuntime"
    stream = nettrace_writer.Stream()
    stream.metadata(nettrace_writer.metadata(1, provider, 1, "GCStart"),
                    nettrace_writer.metadata(2, provider, 18, "GCBulkNode"),
                    nettrace_writer.metadata(3, provider, 2, "GCEnd"))
    stream.events([nettrace_writer.event(metadata_id=1, thread=1, stack=0, ts=1,
                                         payload=struct.pack("<IIII", 1, 2, 1, 0))])  # count, depth 2, induced, blocking
    head = stream.data
    nodes = struct.pack("<IIH", 0, 1000, 0) + b"".join(struct.pack("<QQQQ", (1 << 40) - 64 * i, 24, 7, 0)
                                                       for i in range(1000))
    for last_ts in (2, 200, 20000, 2000000):  # the last event's time, 1 to 4 bytes long, sets the block's length
        stream = nettrace_writer.Stream()
        stream.data = head
        stream.events([nettrace_writer.event(metadata_id=2, thread=1, stack=0, ts=2, payload=nodes)] * 24 +
                      [nettrace_writer.event(metadata_id=2, thread=1, stack=0, ts=last_ts, payload=nodes)])
        block = stream.data[len(head):]
        if len(block) % 4 == 0:
            break
    assert len(block) % 4 == 0, len(block)  # so that each block after it starts where this one did, mod 4
    stream = nettrace_writer.Stream()
    stream.data = head
    stream.events([nettrace_writer.event(metadata_id=3, thread=1, stack=0, ts=3, payload=struct.pack("<II", 1, 2))])
    tail = stream.end()[len(head):]
    paths = [os.path.join(directory, name) for name in ("heap-head", "heap-block", "heap-tail")]
    for path, data in zip(paths, (head, block, tail)):
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o644)
    return paths


def peak_memory_of_children(pid):
    """The most memory (VmHWM) any child of @pid (the agent's workers and helper) has held, in bytes."""
    peak = 0
    for child in open(f"/proc/{pid}/task/{pid}/children").read().split():
        try:
            status = open(f"/proc/{child}/status").read()
        except OSError:
            continue
        m = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
        peak = max(peak, int(m.group(1)) * 1024 if m else 0)
    return peak


@test
def a_hostile_runtimes_heap_dump_is_made_by_a_worker_of_bounded_memory():
    """A table's heap dump is made from the runtime's own stream by one of the agent's workers. A hostile runtime
    answers the session with 10 million nodes (dotnet-gcdump's limit, and the heap's), each in a run of
    addresses of its own, and the GC's end: over 300 MiB for the worker to hold, and two such dumps may run at
    once. The worker may take 256 MiB for it: the heap is refused as one past the heap's limits is, nothing is
    stored, and no worker's memory went past the bound. Before, the worker took what the stream asked."""
    head, block, tail = hostile_heap_stream(make_dir(None, 0o755))
    # 400 blocks: 10 million nodes, dotnet-gcdump's limit, 320 MB of stream
    fake = FakeRuntime(f"heapdump:{hostile_samples()}:{head}:{block}:400:{tail}")
    unit = in_new_unit(fake.pid)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_trace_size = "512M"\n' +
                  table("hostile-heap", "Hostile:depth", unit, then="then.gcdump = true"))
    rec = wait_for(lambda: collect_records(agent, fake.pid, "failed") or collect_records(agent, fake.pid, "collected"),
                   timeout=180, what="the heap dump's end")[0]
    peak = peak_memory_of_children(agent.proc.pid)
    # the runtime counts what it sent once the agent hung up, which may come after the agent's record
    sent = int(wait_for(lambda: os.path.exists(fake.log + ".heapdump") and open(fake.log + ".heapdump").read(),
                        what="the runtime's count of what it sent"))
    print(f"# the runtime sent {sent >> 20} MiB of nodes; the agent's workers held {peak >> 20} MiB at most",
          flush=True)
    assert rec["DSAGENT_COLLECT_RESULT"] == \
        "no heap dump: the heap needs more memory than the agent gives a worker for a heap dump (256 MiB)", rec
    # the bound, what the worker held before the job, and under the sanitizers the shadow of what it holds (an
    # eighth of it)
    assert peak < (256 + 96) << 20, peak >> 20
    # the worker stopped taking the stream at the bound, well before its end (the whole of it took 412 MiB of the
    # worker on the code before)
    assert sent < 400 * os.path.getsize(block), (sent, 400 * os.path.getsize(block))
    assert not [f for f in os.listdir(agent.dumps) if f".{fake.pid}." in f] if os.path.isdir(agent.dumps) else True
    assert agent.proc.poll() is None, "the agent died"


@test
def an_artifact_whose_record_cannot_be_written_is_removed_and_said():
    """No artifact without its record, even where the room held for it does not help: a record that cannot be
    formatted for want of memory (the test hook DSAGENT_TEST_ARTIFACT_RECORD_FAILS fails every artifact's dump
    record so). A table's stacks and a table's dump are removed from dump_dir once named, each with a "failed"
    record saying why, and `dsctl collect` tells the table's reader how many were removed. Without the removal
    both files stay, root's and readable by the reader, with no record of them."""
    target, unit = target_in_unit()
    agent = agent_with(table("stacks-unrecorded", "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true")
                       + table("dump-unrecorded", "Dsagent.TestTarget:test-gauge", unit),
                       env={"DSAGENT_TEST_ARTIFACT_RECORD_FAILS": "1"})
    failed = lambda: collect_records(agent, target.pid, "failed")
    # 360 s: a dump through the agent, past its own dump deadline (DUMP_BOUND), and the stacks' session
    recs = wait_for(lambda: failed() if len(failed()) == 2 else None, timeout=harness.DUMP_BOUND,
                    what="both actions' end")
    for rec in recs:
        assert "audit record could not be written (Cannot allocate memory): it was removed" in \
            rec["DSAGENT_COLLECT_RESULT"], rec
    assert not collect_records(agent, target.pid, "collected"), collect_records(agent, target.pid, "collected")
    left = [f for f in os.listdir(agent.dumps) if ".collect-" in f] if os.path.isdir(agent.dumps) else []
    assert left == [], left
    assert not agent.records(message_id=harness.DUMP_MESSAGE_ID), "a dump record was written"
    r = dsctl(agent, ALICE, "collect")
    assert r.returncode == 0, r
    for name in ("stacks-unrecorded", "dump-unrecorded"):
        block = r.stdout.split(f"{name}:", 1)[1].split("\n\n", 1)[0]
        assert f"1 artifact removed: its audit record could not be written (the last of pid {target.pid})" in block, \
            r.stdout


@test
def an_artifact_whose_first_name_is_taken_gets_the_next_one():
    """Artifacts are named for their table, process and second: a second one of the same table, process and
    second finds its first name taken and must take the next (".2"). Here every first name of the next three
    minutes is taken before the table fires, as an earlier artifact of that second would have it. Before, each
    name tried labelled the file again, with XATTR_CREATE, which fails on a file already labelled: every name
    failed, and the artifact was lost (a "failed" record, "File exists")."""
    target, unit = target_in_unit()
    agent = agent_with(table("taken-names", "Dsagent.TestTarget:test-gauge", unit, then="then.stacks = true",
                             extra='when.for = "4s"'))
    name = harness.artifact_name_part(harness.info_json(agent, "root", target.pid)["name"])
    # the table fires within seconds: well inside these three minutes
    harness.take_artifact_names(agent.dumps, f"stacks.{name}.{target.pid}.collect-taken-names", "txt", 180)
    rec = wait_for(lambda: collect_records(agent, target.pid, "collected") or collect_records(agent, target.pid,
                                                                                              "failed"),
                   timeout=120, what="the stacks' end")[0]
    assert rec["DSAGENT_COLLECT_EVENT"] == "collected", rec
    path = rec["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    assert path.endswith(".2.txt") and f"stacks.{name}.{target.pid}.collect-taken-names." in path, path
    assert os.path.getsize(path) > 0 and can_read(ALICE, path), path
    dumps = [r for r in agent.records(message_id=harness.DUMP_MESSAGE_ID) if r.get("DSAGENT_DUMP_PATH") == path]
    assert len(dumps) == 1 and dumps[0]["DSAGENT_DUMP_TYPE"] == "stacks", dumps


def cpu_trace_collected(settings="", duration="3s"):
    """A table's cpu-sampling trace of @duration of the app burning CPU (--burn-cpu), under the [agent]
    @settings, readers the group OPS. Once collected: the table's collected record, the trace's path and the
    session's end records."""
    high, unit = target_in_unit(args=("--burn-cpu",))
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + settings +
                  table("cpu-trace", "Dsagent.TestTarget:test-gauge", unit, readers=(f"group:{OPS}",),
                        then=f'then.trace_profile = "cpu-sampling"\nthen.duration = "{duration}"'))
    end = wait_for(lambda: collect_records(agent, high.pid, "collected") or collect_records(agent, high.pid, "failed"),
                   timeout=120, what="the trace's end")[0]
    assert end["DSAGENT_COLLECT_EVENT"] == "collected", end
    path, _, _ = collected_artifact(agent, high.pid, "cpu-trace", "trace", ".nettrace",
                                    "a trace of profile cpu-sampling begins")
    ended = [r for r in agent.records(message_id=SESSION_END_ID) if r["DSAGENT_TARGET_PID"] == str(high.pid)]
    return end, path, ended


@test
def a_tables_cpu_trace_converts_for_its_reader_with_the_hot_method_named():
    """A table's cpu-sampling trace of the app burning CPU, as its reader converts it (dsctl convert, as she would a
    trace of her own): every format names the hot method, go tool pprof -top first, the flame graph widest under
    Main. The session ended by the agent's StopTracing, so the runtime's rundown names the methods. Those the table
    does not name (the app's own user among them) cannot read the trace, and converting it writes them nothing."""
    _, path, ended = cpu_trace_collected()
    assert len(ended) == 1 and ended[0]["DSAGENT_SESSION_END"] == "duration", ended
    cpu_profiles.hot_method_in_every_format(ALICE, path)  # ALICE reads it through the table's group
    cpu_profiles.converts_nothing_for((MALLORY, SVC), path, "flame", "cpu.svg")


@test
def a_tables_cpu_trace_stopped_at_max_trace_size_holds_the_rundown_that_names_its_methods():
    """A table's cpu-sampling trace under max_trace_size = "64K" of the app burning CPU: at 64 KiB the agent stops
    the session, as docs/policy.md says, and the runtime's closing rundown comes on top. The table's record says
    the trace was stopped at max_trace_size, the session's end record says size-limit and complete with the file's
    bytes, past 64 KiB; the file holds the rundown, and the table's reader's dsctl convert names the hot method in
    every format. Before, the worker stopped reading at 64 KiB and the agent never stopped the session: "cut at
    max_trace_size", complete=no, no rundown, every frame ?!?."""
    # then.duration 120 s: far beyond the second or two 64 KiB of samples of a burning app take
    end, path, ended = cpu_trace_collected('max_trace_size = "64K"\n', duration="120s")
    size = os.path.getsize(path)
    assert end["DSAGENT_COLLECT_RESULT"] == f"{path} ({size} bytes, stopped at max_trace_size)", end
    assert len(ended) == 1, ended
    cpu_profiles.stopped_at_size_with_rundown(ended[0], path, 64 * 1024)
    cpu_profiles.hot_method_in_every_format(ALICE, path)  # ALICE reads it through the table's group


FLAME_TABLE = 'then.trace_profile = "cpu-sampling"\nthen.duration = "3s"\nthen.flame = true'


def trace_and_flame_records(agent, pid):
    """Once the trace's collect record of @pid is written (the flame graph's comes just before it): the trace's
    record, collected, and the flame graph's (a list: one, unless the feature is gone)."""
    of = lambda action: [r for r in agent.records(message_id=COLLECT_MESSAGE_ID)
                         if r["DSAGENT_TARGET_PID"] == str(pid) and r.get("DSAGENT_COLLECT_ACTION") == action
                         and r.get("DSAGENT_COLLECT_EVENT") in ("collected", "failed")]
    trace = wait_for(lambda: of("trace"), timeout=120, what="the trace's record")
    assert len(trace) == 1 and trace[0]["DSAGENT_COLLECT_EVENT"] == "collected", trace
    return trace[0], of("flame")


def flame_table_ran(settings=""):
    """A table's cpu-sampling trace of 3 s of the app burning CPU, with then.flame, under the [agent] @settings,
    readers the group OPS: the agent, the process, the trace's collect record and the flame graph's."""
    high, unit = target_in_unit(args=("--burn-cpu",))
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + settings +
                  table("cpu-flame", "Dsagent.TestTarget:test-gauge", unit, readers=(f"group:{OPS}",),
                        then=FLAME_TABLE))
    return (agent, high) + trace_and_flame_records(agent, high.pid)


@test
def an_agent_that_stops_while_the_flame_graph_is_drawn_still_records_its_published_trace():
    """The trace is published before its flame graph is drawn. An agent stopped meanwhile (the worker drawing it
    paused at the test hook flame-draw) tells the trace's outcome as it exits: the trace's collected record, and
    the flame graph's failed record saying why there is none. Before, the recorder was freed without a word: a
    published trace, readable by the table's readers, with no collect record."""
    high, unit = target_in_unit(args=("--burn-cpu",))
    # 600 s: the worker waits at the hook until the agent is gone (it dies with it), never for the bound
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' +
                  table("cpu-flame", "Dsagent.TestTarget:test-gauge", unit, readers=(f"group:{OPS}",),
                        then=FLAME_TABLE), env={"DSAGENT_TEST_PAUSE": "flame-draw:600000"})
    wait_for(lambda: "test-hook: paused at flame-draw" in open(agent.log_path, errors="replace").read(),
             timeout=120, what="the flame graph's worker at its hook")
    published = [r for r in agent.records(message_id=harness.DUMP_MESSAGE_ID) if r["DSAGENT_DUMP_TYPE"] == "trace"]
    assert len(published) == 1, published  # the premise: the trace is out, its collect record not yet
    assert not collect_records(agent, high.pid, "collected"), collect_records(agent, high.pid, "collected")
    agent.proc.terminate()
    # 30 s: the agent exits on SIGTERM within ms, the records written first
    assert agent.proc.wait(timeout=30) == 0, open(agent.log_path).read()[-3000:]
    records = {r["DSAGENT_COLLECT_ACTION"]: r for r in collect_records(agent, high.pid, "collected")
               + collect_records(agent, high.pid, "failed")}
    assert records["trace"]["DSAGENT_COLLECT_EVENT"] == "collected", records
    assert records["trace"]["DSAGENT_COLLECT_RESULT"].startswith(published[0]["DSAGENT_DUMP_PATH"] + " ("), records
    assert records["flame"]["DSAGENT_COLLECT_EVENT"] == "failed", records
    assert records["flame"]["DSAGENT_COLLECT_RESULT"] == "no flame graph: the agent stopped before it was drawn", \
        records


@test
def a_tables_flame_graph_is_published_beside_its_trace_as_its_reader_converts_it():
    """then.flame: beside the table's trace, its flame graph, flame.NAME.PID.collect-TABLE.TIME.svg (the trace's
    name parts), root's with exactly the trace's ACL, listed by dsctl dumps (type flame) for the table's reader
    only, with a dump record and a collect record of its own. It is byte for byte what the reader's dsctl convert
    --format flame writes of the published trace (the SVG names no file), and the hot method is the widest frame
    under Main. Neither mallory nor the app's own user reads or sees either file."""
    agent, high, trace, flame = flame_table_ran()
    path = trace["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    svg = os.path.join(agent.dumps, os.path.basename(path).replace("trace.", "flame.", 1)[:-len(".nettrace")] + ".svg")
    assert len(flame) == 1 and flame[0]["DSAGENT_COLLECT_EVENT"] == "collected", flame
    assert flame[0]["DSAGENT_RULE"] == "cpu-flame", flame
    assert flame[0]["DSAGENT_COLLECT_RESULT"] == f"{svg} ({os.path.getsize(svg)} bytes)", (flame, svg)
    print(f"# trace {os.path.getsize(path)} bytes, flame graph {os.path.getsize(svg)} bytes", flush=True)
    dump_record(agent, path, "cpu-flame", "trace")
    dump_record(agent, svg, "cpu-flame", "flame")
    ended = [r for r in agent.records(message_id=SESSION_END_ID) if r["DSAGENT_TARGET_PID"] == str(high.pid)]
    assert len(ended) == 1 and ended[0]["DSAGENT_SESSION_END"] == "duration", ended

    st = os.stat(svg)
    assert st.st_uid == 0 and st.st_nlink == 1 and st.st_mode & 0o007 == 0, st
    assert acl_of(svg) == acl_of(path) and f"group:{grp.getgrnam(OPS).gr_gid}:r--" in acl_of(svg), acl_of(svg)
    for user, reads in ((ALICE, True), (MALLORY, False), (SVC, False)):
        assert can_read(user, path) == reads and can_read(user, svg) == reads, user
        r = dsctl(agent, user, "--json", "dumps")
        listed = {x["path"]: x for x in json.loads(r.stdout)} if r.returncode == 0 else r
        assert r.returncode == 0, r
        if reads:
            assert listed[path]["type"] == "trace" and listed[svg]["type"] == "flame", listed
            assert listed[svg]["pid"] == high.pid, listed[svg]
        else:
            assert path not in listed and svg not in listed and "cpu-flame" not in r.stdout, (user, r.stdout)

    # the reader's own conversion of the published trace: the very bytes (the SVG holds no file name)
    work = make_dir(ALICE, 0o755)
    mine = os.path.join(work, "mine.svg")
    r = cpu_profiles.convert(ALICE, path, "flame", mine)
    assert r.returncode == 0, r
    with open(mine, "rb") as a, open(svg, "rb") as b:
        assert a.read() == b.read(), "the agent's flame graph is not the one dsctl convert writes of its trace"
    frames, _ = cpu_profiles.svg_frames(svg)
    under_main = sorted(cpu_profiles.children(frames, cpu_profiles.the(frames, cpu_profiles.MAIN)),
                        key=lambda f: -f["ms"])
    assert under_main and under_main[0]["name"] == cpu_profiles.HOT, [(f["name"], f["ms"]) for f in under_main]


@test
def a_tables_flame_graph_with_no_room_leaves_its_trace_and_a_record_of_why():
    """then.flame under max_use = "256K": the trace of the burning app fills dump_dir to max_use and is published
    cut there ("cut: dump_dir is full"), and no room is left for its flame graph. The trace stays, for its reader;
    no SVG is left in dump_dir, and the flame graph's failed record says why, in max_use's words."""
    agent, high, trace, flame = flame_table_ran('max_use = "256K"\n')
    path = trace["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    assert trace["DSAGENT_COLLECT_RESULT"] == f"{path} ({os.path.getsize(path)} bytes, cut: dump_dir is full)", trace
    dump_record(agent, path, "cpu-flame", "trace")
    assert can_read(ALICE, path), "the trace was not kept for its reader"
    assert len(flame) == 1 and flame[0]["DSAGENT_COLLECT_EVENT"] == "failed", flame
    why = flame[0]["DSAGENT_COLLECT_RESULT"]
    assert why.startswith("cannot store the flame graph: ") and "max_use" in why, why
    print(f"# {why}", flush=True)
    assert not [f for f in os.listdir(agent.dumps) if f.startswith("flame.")], os.listdir(agent.dumps)
    assert not [r for r in agent.records(message_id=harness.DUMP_MESSAGE_ID)
                if r.get("DSAGENT_DUMP_TYPE") == "flame"], "a dump record of a flame graph that is not there"


@test
def a_trace_without_samples_is_kept_and_its_flame_graphs_record_says_why():
    """then.flame on a runtime that answers the trace's session with counters alone, no sample (a fake one: the real
    runtime's sample profiler samples every managed thread): the trace is published for its reader, no SVG is left,
    and the flame graph's failed record says the trace holds no CPU samples."""
    fake = FakeRuntime(f"stream:{hostile_samples()}")
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' +
                  table("no-samples", "Hostile:depth", in_new_unit(fake.pid), then=FLAME_TABLE))
    trace, flame = trace_and_flame_records(agent, fake.pid)
    path = trace["DSAGENT_COLLECT_RESULT"].split(" (")[0]
    dump_record(agent, path, "no-samples", "trace")
    assert can_read(ALICE, path), "the trace was not kept for its reader"
    assert len(flame) == 1 and flame[0]["DSAGENT_COLLECT_EVENT"] == "failed", flame
    assert flame[0]["DSAGENT_COLLECT_RESULT"] == "no flame graph: the trace holds no CPU samples", flame
    assert not [f for f in os.listdir(agent.dumps) if f.startswith("flame.")], os.listdir(agent.dumps)


if __name__ == "__main__":
    run_tests()
