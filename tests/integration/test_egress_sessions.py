#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A rule's traces and gcdumps to its egress store, against the real runtime and a real radosgw: under a rule
with `egress`, `dsctl trace` and `dsctl gcdump` still give the client its file, and the agent keeps a copy in
dump_dir (session-copy.h), published as a dump is (for the requester and the rule's readers), recorded, and
uploaded with the requester and the rule in its metadata. Under a rule without `egress` nothing is kept; a
copy that dump_dir's max_use cannot hold is dropped and the client's trace goes on whole.

One store serves the whole file (radosgw.py), started on first use.
"""
import json
import os
import re
import signal
import subprocess

import radosgw
from egress_tools import DUMP_MESSAGE_ID, EGRESS_MESSAGE_ID, HELPER, keys_file, outcome_for, sha256_file
from harness import (ALICE, DSCTL, MALLORY, RUNTIME_BOUND, SVC, Agent, Target, dsctl, make_dir, run_tests, test, uid_of,
                     as_user, stock_gcdump_report, wait_for)

SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
PROVIDER = "Dsagent-TestTarget"  # the test app's EventSource (its --emit-events)
# the .gcdump's first bytes, as dotnet-gcdump writes them (FastSerialization's header)
GCDUMP_MAGIC = b"!FastSerialization.1"

store = radosgw.file_store


def sessions_policy(egress=True, agent_extra="", rule_extra=""):
    """A store, and a rule that lets alice trace and gcdump dst-svc's processes, uploading there when @egress."""
    gw = store()
    credentials = keys_file(make_dir(None, 0o700), "keys", gw.access_key, gw.secret_key)
    return f"""[agent]
dump_dir = "@DUMP_DIR@"
{agent_extra}

[egress.central]
endpoint = "{gw.endpoint}"
bucket = "{gw.bucket}"
region = "{gw.region}"
prefix = "test/"
credentials = "file:{credentials}"

[[rule]]
name = "ops-sessions"
users = ["{ALICE}"]
commands = ["trace", "gcdump", "ps", "info"]
targets.users = ["{SVC}"]
trace_profiles = ["cpu-sampling"]
{'egress = "central"' if egress else ''}
{rule_extra}
"""


def start_agent(policy):
    return Agent(policy=policy, env={"DSAGENT_TEST_EGRESS_HELPER": HELPER})


def listed(agent, user):
    r = dsctl(agent, user, "--json", "dumps")
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def dump_dir_names(agent):
    return sorted(n for n in os.listdir(agent.dumps) if not n.startswith("."))


def request_record(agent, request_id):
    """The request's own record (its decision and outcome), by its id."""
    found = [r for r in agent.records() if r.get("DSAGENT_REQUEST_ID") == request_id]
    assert found, (request_id, agent.records())
    return found[-1]


def assert_kept_and_uploaded(agent, kind, suffix, client_file):
    """The one artifact of @kind in dump_dir: listed for alice (not for mallory), recorded, uploaded with the
    requester and the rule in its metadata; returns its path and the object's key."""
    gw = store()
    mine = [x for x in listed(agent, ALICE) if x.get("type") == kind]
    assert len(mine) == 1, listed(agent, ALICE)
    path = mine[0]["path"]
    assert os.path.basename(path).startswith(f"{kind}.") and path.endswith(suffix), path
    request_id = os.path.basename(path)[:-len(suffix)].rsplit(".", 1)[1]
    out = outcome_for(agent, path)
    assert out["DSAGENT_EGRESS_RESULT"] == "uploaded", out
    key = out["DSAGENT_EGRESS_KEY"]
    host = os.uname().nodename
    assert re.fullmatch(rf"test/{re.escape(host)}/[^/]+/{kind}/\d{{4}}/\d\d/\d\d/[A-Za-z0-9._-]+-\d+-"
                        rf"\d{{8}}T\d{{6}}Z-{request_id}{re.escape(suffix)}", key), key
    kept = sha256_file(path)
    assert gw.sha256_of(key) == kept == out["DSAGENT_EGRESS_SHA256"], (key, kept, out)
    assert out["DSAGENT_RULE"] == "ops-sessions" and out["DSAGENT_REQUEST_ID"] == request_id, out
    meta = gw.client().head_object(Bucket=gw.bucket, Key=key)["Metadata"]
    assert meta["requester-uid"] == str(uid_of(ALICE)) and meta["requester-name"] == ALICE, meta
    assert meta["rule"] == "ops-sessions" and meta["type"] == kind and meta["request-id"] == request_id, meta
    # the records: the copy's dump record, then queued, then the outcome
    dumps = [r for r in agent.records(message_id=DUMP_MESSAGE_ID) if r.get("DSAGENT_DUMP_PATH") == path]
    assert len(dumps) == 1 and dumps[0]["DSAGENT_REQUEST_ID"] == request_id, dumps
    assert dumps[0]["DSAGENT_RULE"] == "ops-sessions", dumps
    events = [r["DSAGENT_EGRESS_EVENT"] for r in agent.records(message_id=EGRESS_MESSAGE_ID)
              if r.get("DSAGENT_DUMP_PATH") == path]
    assert events == ["queued", "outcome"], events
    # listed with its upload, as a dump is; readable by its requester alone here (the rule names no readers)
    again = [x for x in listed(agent, ALICE) if x["path"] == path]
    assert again[0]["egress"] == {"state": "uploaded", "store": "central", "key": key}, again
    assert not [x for x in listed(agent, MALLORY) if x["path"] == path]
    st = os.stat(path)
    assert st.st_uid == 0 and st.st_mode & 0o007 == 0, oct(st.st_mode)  # root's; others only by its ACL
    assert f"kept as {path} for egress" in request_record(agent, request_id).get("DSAGENT_REASON", ""), \
        request_record(agent, request_id)
    return path, key, kept


@test
def a_rules_trace_reaches_the_client_whole_and_its_copy_the_store():
    target = Target(SVC)
    agent = start_agent(sessions_policy())
    out = os.path.join(make_dir(ALICE), "t.nettrace")
    # 3 s of cpu-sampling: a trace of a few MiB, its rundown included
    r = dsctl(agent, ALICE, "--json", "trace", str(target.pid), "--profile", "cpu-sampling", "--duration", "3",
              "-o", out, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    summary = json.loads(r.stdout)
    assert summary["complete"] and summary["size"] == os.path.getsize(out) > 0, summary
    path, key, kept = assert_kept_and_uploaded(agent, "trace", ".nettrace", out)
    # the client's file, the kept copy and the object are the same bytes
    assert sha256_file(out) == kept, (os.path.getsize(out), os.path.getsize(path))


@test
def a_rules_gcdump_reaches_the_client_and_its_heap_dump_the_store():
    target = Target(SVC)
    agent = start_agent(sessions_policy())
    out = os.path.join(make_dir(ALICE), "h.gcdump")
    # 180 s: past the agent's own bounds on the session (30 s for the heap to come, 60 s to stop); a heap of the
    # test app comes in a second or two
    r = dsctl(agent, ALICE, "gcdump", str(target.pid), "-o", out, timeout=180)
    assert r.returncode == 0 and f"wrote {out}" in r.stderr, r
    with open(out, "rb") as f:
        assert f.read(64).find(GCDUMP_MAGIC) >= 0
    path, key, kept = assert_kept_and_uploaded(agent, "gcdump", ".gcdump", out)
    # the agent's .gcdump is made of the same stream as dsctl's, by the writer [[collect]]'s then.gcdump uses: the
    # same heap, its types, counts and sizes, as the stock dotnet-gcdump reports each file
    with open(path, "rb") as f:
        assert f.read(64).find(GCDUMP_MAGIC) >= 0
    theirs, ours = stock_gcdump_report(out), stock_gcdump_report(path)
    assert ours == theirs and "System.String" in ours, f"the client's .gcdump:\n{theirs}\nthe copy:\n{ours}"


@test
def under_a_rule_without_egress_nothing_is_kept():
    target = Target(SVC)
    agent = start_agent(sessions_policy(egress=False))
    mine = make_dir(ALICE)
    r = dsctl(agent, ALICE, "--json", "trace", str(target.pid), "--profile", "cpu-sampling", "--duration", "2",
              "-o", os.path.join(mine, "t.nettrace"), timeout=RUNTIME_BOUND)
    assert r.returncode == 0 and json.loads(r.stdout)["complete"], r
    r = dsctl(agent, ALICE, "gcdump", str(target.pid), "-o", os.path.join(mine, "h.gcdump"), timeout=180)
    assert r.returncode == 0, r
    assert dump_dir_names(agent) == [], dump_dir_names(agent)
    assert agent.records(message_id=EGRESS_MESSAGE_ID) == []


@test
def a_copy_max_use_cannot_hold_is_dropped_and_the_clients_trace_goes_on_whole():
    """max_use of 64 KiB: the copy's worker stops at dump_dir's guard, its pipe closes, and the relay goes on
    to the client alone; nothing of the copy is left, nothing is uploaded, and the request's record says why."""
    target = Target(SVC)
    agent = start_agent(sessions_policy(agent_extra='max_use = "64K"'))
    out = os.path.join(make_dir(ALICE), "t.nettrace")
    r = dsctl(agent, ALICE, "--json", "trace", str(target.pid), "--profile", "cpu-sampling", "--duration", "3",
              "-o", out, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    summary = json.loads(r.stdout)
    # the trace is larger than max_use: the guard is what stopped the copy
    assert summary["complete"] and summary["size"] == os.path.getsize(out) > 256 * 1024, summary
    assert dump_dir_names(agent) == [], dump_dir_names(agent)
    assert agent.records(message_id=EGRESS_MESSAGE_ID) == []
    reasons = [x.get("DSAGENT_REASON", "") for x in agent.records() if x.get("DSAGENT_RULE") == "ops-sessions"]
    assert any("no copy kept for egress" in x and "max_use" in x for x in reasons), reasons


def agent_workers(agent):
    """The agent's children but its egress process: its workers."""
    children = open(f"/proc/{agent.proc.pid}/task/{agent.proc.pid}/children").read().split()
    return [int(c) for c in children if open(f"/proc/{c}/comm").read().strip() != "dsagent-egress"]


@test
def a_copy_whose_worker_stops_reading_is_dropped_and_the_clients_trace_goes_on_whole():
    """The copy's worker stopped (SIGSTOP, as a worker stuck on a slow disk would be): once the copy's pipe has
    been full for the stall bound the copy is dropped, and the relay goes on to the client alone. Without that
    bound the stream stayed held behind the full pipe, the stop's rundown could not be read, and the session
    was cut at its stop deadline: the client's trace failed."""
    # the app writes its marker events as fast as it can: the stream outgrows the relay's and the copy's pipes
    # (1 MiB each) at once while the worker is stopped; the session ends at max_trace_size (8 MiB), stopped
    target = Target(SVC, args=("--emit-events", "0"))
    agent = start_agent(sessions_policy(agent_extra='max_trace_size = "8M"',
                                        rule_extra=f'trace_providers = ["{PROVIDER}"]'))
    out = os.path.join(make_dir(ALICE), "t.nettrace")
    # --duration 60: a bound far past the copy's stall bound (10 s), never reached: max_trace_size ends it
    trace = subprocess.Popen(as_user(ALICE, [DSCTL, "--socket", agent.socket, "--json", "trace", str(target.pid),
                                             "--providers", PROVIDER, "--duration", "60", "-o", out]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = []
    try:
        wait_for(lambda: agent.records(message_id=SESSION_START_ID), what="the session's start record")
        for pid in agent_workers(agent):
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        # the session's own bound: its duration (60 s), its stop's grace (60 s); dsctl's wait for its last word
        stdout, stderr = trace.communicate(timeout=240)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass  # the copy's worker: the agent killed it when it dropped the copy
        if trace.poll() is None:
            trace.kill()
    assert trace.returncode == 0, (stdout, stderr)
    summary = json.loads(stdout)
    # the precondition: more than both pipes hold, so the copy's pipe really stayed full
    assert summary["complete"] and summary["size"] == os.path.getsize(out) > 2 * 1024 * 1024, summary
    reasons = [x.get("DSAGENT_REASON", "") for x in agent.records() if x.get("DSAGENT_RULE") == "ops-sessions"]
    assert any("no copy kept for egress: its worker did not keep up" in x for x in reasons), reasons
    assert dump_dir_names(agent) == [], dump_dir_names(agent)
    assert agent.records(message_id=EGRESS_MESSAGE_ID) == []


@test
def explain_names_the_store_a_rules_traces_and_gcdumps_go_to():
    target = Target(SVC)
    agent = start_agent(sessions_policy())
    for command in (("trace", "--profile", "cpu-sampling"), ("gcdump",)):
        r = dsctl(agent, ALICE, "--json", "explain", str(target.pid), *command)
        assert r.returncode == 0 and json.loads(r.stdout)["egress"] == "central", (command, r)
    r = dsctl(agent, ALICE, "--json", "explain", str(target.pid), "info")
    assert r.returncode == 0 and "egress" not in json.loads(r.stdout), r


run_tests()
