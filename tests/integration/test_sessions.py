#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl trace and dsctl counters against the real runtime: payloads, counters, policy, stops, concurrency."""
import csv
import io
import json
import os
import re
import signal
import subprocess
import time

import harness
import nettrace_writer
from harness import (ALICE, BUILD, DSCTL, EXIT_BUSY, EXIT_DENIED, HANG_BOUND, RUNTIME_BOUND, SOURCE, SVC, AcceptWatch,
                     Agent, FakeRuntime, Process, Target, as_user, dsctl, make_dir, run_tests, test, wait_for)

SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
SESSION_END_ID = "1c5ee471f818453b8c7bac25ac2e872f"
NETTRACE_DUMP = os.path.join(BUILD, "tests", "tools", "nettrace-dump")
PROVIDER = "Dsagent-TestTarget"
METER = "Dsagent.TestTarget"
MARKER = {"number": 0x5A5A1234, "big": 0x0123456789ABCDEF, "text": "dsagent-marker \u00e9\u20ac", "real": 2.5}


def decode(path, provider=PROVIDER):
    """Events of @provider as the project's own parser decodes them, and its verdict on the whole file."""
    out = subprocess.run([NETTRACE_DUMP, path, provider], stdout=subprocess.PIPE, text=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    return [line for line in lines if "summary" not in line], lines[-1]["summary"]


def assert_markers(path):
    events, summary = decode(path)
    assert summary["complete"], summary
    markers = [e["payload"] for e in events if e["event"] == "Marker"]
    assert markers, f"no Marker events among {summary}"
    for m in markers:
        assert {k: m[k] for k in MARKER} == MARKER, m
    sequences = [m["sequence"] for m in markers]
    assert sequences == sorted(sequences), "markers out of order"
    return markers


def trace(agent, user, target, out, *args, timeout=RUNTIME_BOUND):
    return dsctl(agent, user, "trace", str(target.pid), "-o", out, *args, timeout=timeout)


def start_trace(agent, user, target, out, *args):
    return Process(as_user(user, [DSCTL, "--socket", agent.socket, "trace", str(target.pid), "-o", out, *args]))


def session_records(agent, message_id):
    return agent.records(message_id=message_id)


@test
def trace_holds_the_apps_marker_events_with_their_payload_values():
    target = Target(SVC, args=("--emit-events", "200"))
    agent = Agent()
    out = os.path.join(make_dir(SVC), "markers.nettrace")
    r = trace(agent, SVC, target, out, "--providers", PROVIDER, "--duration", "2")
    assert r.returncode == 0, r
    assert "wrote" in r.stderr and "ended: duration" in r.stderr, r.stderr
    # 50: 2 s from the session's start at 200 a second give some 400; a loaded machine that slept the emitter's
    # sleeps four times as long would still give twice 50 (here and below)
    assert len(assert_markers(out)) >= 50
    assert os.stat(out).st_uid == harness.uid_of(SVC), "the trace belongs to the requester"

    start, = session_records(agent, SESSION_START_ID)
    end, = session_records(agent, SESSION_END_ID)
    assert start["DSAGENT_PROVIDERS"] == f"{PROVIDER}:0xffffffffffffffff:4", start
    assert start["DSAGENT_DURATION_LIMIT_USEC"] == "2000000", start
    assert end["DSAGENT_SESSION_END"] == "duration" and end["DSAGENT_SESSION_COMPLETE"] == "yes", end
    assert int(end["DSAGENT_SESSION_BYTES"]) == os.path.getsize(out), end


@test
def a_session_whose_start_the_socket_takes_in_part_still_runs():
    """The frame that starts a session names its providers; with 32 long ones it is about 8 KB, and on a host
    whose send buffers are small (net.core.wmem_default; a test-only hook sets one socket's) the socket takes
    only its head at first. The rest goes out as the client reads, and the trace is whole."""
    target = Target(SVC, args=("--emit-events", "200"))
    agent = Agent(env={"DSAGENT_TEST_SNDBUF": "4096"})
    out = os.path.join(make_dir(SVC), "long.nettrace")
    # providers the runtime does not have are enabled all the same, and never write
    providers = ",".join([PROVIDER] + [f"Dsagent-Absent-{i:02d}-" + "x" * 230 for i in range(31)])
    r = trace(agent, SVC, target, out, "--providers", providers, "--duration", "2")
    assert r.returncode == 0, r
    log = open(agent.log_path).read()
    assert "a frame went out in part" in log, "the socket took the frame whole"
    # the rest went while the session ran, not only with the reply at its end
    owed = log.find("test-hook: what was owed went out while the request worked")
    assert 0 <= owed < log.find(SESSION_END_ID), log
    assert len(assert_markers(out)) >= 50


@test
def traceevent_reads_our_trace_files():
    built = subprocess.run([os.path.join(SOURCE, "tests/tools/traceevent-check/build.sh")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert built.returncode == 0, built.stderr
    target = Target(SVC, args=("--emit-events", "200"))
    agent = Agent()
    out = os.path.join(make_dir(SVC, 0o755), "traceevent.nettrace")
    r = trace(agent, SVC, target, out, "--providers", PROVIDER, "--duration", "2")
    assert r.returncode == 0, r
    read = subprocess.run(["dotnet", built.stdout.strip(), out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=RUNTIME_BOUND)
    assert read.returncode == 0, read.stderr
    seen = json.loads(read.stdout)
    assert seen["markers"] > 0 and PROVIDER in seen["providers"], seen
    first = seen["first_marker"]
    assert (first["number"], first["big"], first["text"], first["real"]) == tuple(MARKER.values()), first


@test
def every_profile_gives_a_complete_trace():
    target = Target(SVC, args=("--emit-events", "50"))
    agent = Agent()
    mine = make_dir(SVC)
    for profile in ("cpu-sampling", "gc-verbose", "gc-collect", "dotnet-common", "dotnet-sampled-thread-time",
                    "database"):
        out = os.path.join(mine, f"{profile}.nettrace")
        r = trace(agent, SVC, target, out, "--profile", profile, "--duration", "1")
        assert r.returncode == 0, (profile, r)
        _, summary = decode(out, "Microsoft-DotNETCore-SampleProfiler")
        assert summary["complete"], (profile, summary)
        if profile in ("cpu-sampling", "dotnet-sampled-thread-time"):
            assert summary["shown"] > 0, f"{profile}: no stack samples"
    starts = session_records(agent, SESSION_START_ID)
    assert [s["DSAGENT_TRACE_PROFILE"] for s in starts][0] == "cpu-sampling"
    assert "Microsoft-DotNETCore-SampleProfiler:0xf00000000000:4" in starts[0]["DSAGENT_PROVIDERS"], starts[0]


def counters(agent, user, target, *args):
    """3 s of the default 1 s interval: two or three rows of each counter, where the checks need one."""
    return dsctl(agent, user, "counters", str(target.pid), "--duration", "3", *args, timeout=RUNTIME_BOUND)


@test
def counters_show_runtime_and_app_counters_in_csv_and_json():
    target = Target(SVC, args=("--meter-value", "42.5"))
    agent = Agent()
    wanted = f"System.Runtime,{PROVIDER},{METER}"

    r = counters(agent, SVC, target, "--counters", wanted)
    assert r.returncode == 0, r
    rows = list(csv.reader(io.StringIO(r.stdout)))
    assert rows[0] == ["Timestamp", "Provider", "Counter Name", "Counter Type", "Mean/Increment"], rows[0]
    by_name = {(row[1], row[2]): float(row[4]) for row in rows[1:]}
    # .NET 9 on, System.Runtime comes as a Meter, which dotnet-counters shows instead of its EventCounters
    assert any(p == "System.Runtime" and n.startswith("dotnet.process.cpu.time") for p, n in by_name), by_name
    assert by_name[("System.Runtime", "dotnet.process.memory.working_set (By)")] > 0, by_name
    assert by_name[(PROVIDER, "Test counter")] == 42.5, by_name
    assert by_name[(METER, "test-gauge (items)")] == 42.5, by_name

    # dotnet-counters' JSON: names as in the CSV (tests/integration/test_counters.py has the rest)
    r = counters(agent, SVC, target, "--counters", wanted, "--format", "json")
    assert r.returncode == 0, r
    events = json.loads(r.stdout)["Events"]
    names = {(e["provider"], e["name"]): e for e in events}
    assert names[(PROVIDER, "Test counter")]["value"] == 42.5
    assert names[(METER, "test-gauge (items)")]["value"] == 42.5
    assert names[("System.Runtime", "dotnet.process.memory.working_set (By)")]["value"] > 0

    # a filter in brackets keeps only the named counters of that provider
    r = counters(agent, SVC, target, "--counters", "System.Runtime[cpu-usage]")
    assert r.returncode == 0, r
    assert {row[2] for row in list(csv.reader(io.StringIO(r.stdout)))[1:]} == {"CPU Usage (%)"}, r.stdout


LIMITED_POLICY = f"""
[agent]
max_trace_buffer_mb = 64

[[rule]]
name = "alice-light"
users = ["{ALICE}"]
commands = ["trace", "counters", "dump"]
targets.users = ["{SVC}"]
trace_profiles = ["gc-collect"]
trace_providers = ["{PROVIDER}:0x1"]
dump_types = ["mini"]
max_duration = "10s"
"""


@test
def disallowed_sessions_are_denied_before_the_runtime_sees_anything():
    target = Target(SVC)
    agent = Agent(policy=LIMITED_POLICY)
    mine = make_dir(ALICE)
    out = os.path.join(mine, "denied.nettrace")
    watch = AcceptWatch(target.pid)
    denials = [
        (["trace", "--profile", "cpu-sampling"], "does not allow the trace profile 'cpu-sampling'"),
        (["trace", "--providers", "System.Threading.Tasks.TplEventSource:0x1:4"], "does not allow the provider"),
        # a provider of gc-collect's at keywords gc-collect does not ask for
        (["trace", "--providers", "Microsoft-Windows-DotNETRuntime:0x8000:4"],
         "allows 'Microsoft-Windows-DotNETRuntime' only as its trace_profiles ask for it"),
        (["trace", "--providers", f"{PROVIDER}:0x3"], "only with keywords within 0x1"),
        (["trace", "--providers", PROVIDER], "only with keywords within 0x1"),  # omitted keywords are all
        (["trace", "--providers", f"{PROVIDER}:0x0"], "only with keywords within 0x1"),  # so is 0
        (["trace", "--providers", f"{PROVIDER}:0x1:4:Key=Value"], "allows no provider arguments"),
        (["trace", "--profile", "gc-collect", "--duration", "60"], "allows at most 10s"),
        (["trace", "--profile", "gc-collect", "--buffer-mb", "128"], "buffers above 64 MB"),
        (["counters", "--counters", METER], f"does not allow the counters of '{METER}'"),
        (["counters", "--duration", "60"], "allows at most 10s"),
        (["dump", "--type", "full"], "does not allow full dumps"),
    ]
    for args, why in denials:
        extra = ["-o", out] if args[0] == "trace" else []
        r = dsctl(agent, ALICE, args[0], str(target.pid), *args[1:], *extra)
        assert r.returncode == EXIT_DENIED and why in r.stderr, (args, r)
        assert not os.path.exists(out)
    assert watch.accepts() == 0, "a denied session reached the runtime"
    # every denial has its record, and no session started
    assert len([rec for rec in agent.records() if rec["DSAGENT_DECISION"] == "denied"]) == len(denials)
    assert session_records(agent, SESSION_START_ID) == []

    # within the rule it works, and the rule's duration bounds a session that asked for none
    r = dsctl(agent, ALICE, "trace", str(target.pid), "--providers", f"{PROVIDER}:0x1", "--duration", "1",
              "-o", out)
    assert r.returncode == 0, r
    r = dsctl(agent, ALICE, "trace", str(target.pid), "--profile", "gc-collect", "-o", out + ".2",
              timeout=RUNTIME_BOUND)  # the rule's 10 s, and the session's start and stop
    assert r.returncode == 0 and "ended: duration-limit" in r.stderr, r
    start = session_records(agent, SESSION_START_ID)[-1]
    assert start["DSAGENT_RULE"] == "alice-light" and start["DSAGENT_DURATION_LIMIT_USEC"] == "10000000", start


@test
def ctrl_c_stops_the_session_and_keeps_a_complete_trace():
    target = Target(SVC, args=("--emit-events", "100"))
    agent = Agent()
    out = os.path.join(make_dir(SVC), "interrupted.nettrace")
    client = start_trace(agent, SVC, target, out, "--providers", PROVIDER)
    client.read_line("dsctl: tracing")
    # the session runs: the app writes 100 markers a second into it from now on, and the check needs one; 1.5 s
    # gives some 150, and the stop flushes every one written
    time.sleep(1.5)
    os.killpg(client.proc.pid, signal.SIGINT)
    assert client.proc.wait(timeout=RUNTIME_BOUND) == 0, client.proc.stdout.read()
    assert_markers(out)
    end, = session_records(agent, SESSION_END_ID)
    assert end["DSAGENT_SESSION_END"] == "stopped" and end["DSAGENT_SESSION_COMPLETE"] == "yes", end


@test
def killing_dsctl_leaves_the_runtime_with_no_session():
    target = Target(SVC, args=("--emit-events", "100", "--report-sessions"))
    agent = Agent()
    mine = make_dir(SVC)
    out = os.path.join(mine, "killed.nettrace")
    client = start_trace(agent, SVC, target, out, "--providers", PROVIDER)
    target.process.read_line("eventsource-enabled True")
    # mid-stream: the session has run a second, its markers flowing (a margin, not a wait for anything: the session
    # runs until killed)
    time.sleep(1)
    os.killpg(client.proc.pid, signal.SIGKILL)
    client.proc.wait()

    # the runtime's own view: no session listens to the app's EventSource any more (the app looks every 50 ms,
    # the agent ends the session as its client goes: a bound against a hang)
    target.process.read_line("eventsource-enabled False", timeout=30)
    wait_for(lambda: session_records(agent, SESSION_END_ID), what="the session's end record")
    end, = session_records(agent, SESSION_END_ID)
    assert end["DSAGENT_SESSION_END"] == "client-gone" and end["DSAGENT_SESSION_COMPLETE"] == "yes", end
    assert os.listdir(mine) == [], "a killed dsctl left a file behind"

    # and a new session starts and ends normally
    r = trace(agent, SVC, target, out, "--providers", PROVIDER, "--duration", "1")
    assert r.returncode == 0, r
    assert_markers(out)
    target.process.read_line("eventsource-enabled True")
    target.process.read_line("eventsource-enabled False", timeout=30)  # the session ended before dsctl did


@test
def two_clients_tracing_one_target_each_get_their_own_complete_file():
    target = Target(SVC, args=("--emit-events", "200"))
    agent = Agent()
    mine = make_dir(SVC)
    outs = [os.path.join(mine, f"concurrent-{i}.nettrace") for i in range(2)]
    # both run until stopped: durations of a few seconds had to overlap however late a loaded machine started the
    # second; once both say they trace, both sessions run at once
    clients = [start_trace(agent, SVC, target, out, "--providers", PROVIDER) for out in outs]
    for c in clients:
        c.read_line("dsctl: tracing")
    # 200 markers a second go into both from now on; the overlap checked needs one. 1 s gives some 200
    time.sleep(1)
    for c in clients:
        os.killpg(c.proc.pid, signal.SIGINT)  # Ctrl-C
    for c in clients:
        assert c.proc.wait(timeout=RUNTIME_BOUND) == 0, c.proc.stdout.read()
    first, second = (assert_markers(out) for out in outs)
    # both sessions ran at the same time: their marker ranges overlap
    assert max(m["sequence"] for m in first) > min(m["sequence"] for m in second)
    assert max(m["sequence"] for m in second) > min(m["sequence"] for m in first)
    assert len(session_records(agent, SESSION_END_ID)) == 2


@test
def sessions_per_target_are_capped():
    target = Target(SVC, args=("--report-sessions",))
    agent = Agent(policy="[agent]\nmax_sessions_per_target = 1\n")
    mine = make_dir(SVC)
    # the first runs until it is stopped, after the second was refused: a duration would have to outlast the
    # second's start, which a loaded machine could take long over
    first = start_trace(agent, SVC, target, os.path.join(mine, "first.nettrace"), "--providers", PROVIDER)
    target.process.read_line("eventsource-enabled True")
    r = trace(agent, SVC, target, os.path.join(mine, "second.nettrace"), "--providers", PROVIDER)
    assert r.returncode == EXIT_BUSY and "max_sessions_per_target" in r.stderr, r
    os.killpg(first.proc.pid, signal.SIGINT)  # Ctrl-C
    assert first.proc.wait(timeout=RUNTIME_BOUND) == 0


@test
def the_runtime_session_id_never_reaches_the_client():
    """The agent's replies carry only documented fields: none holds the runtime's session id."""
    target = Target(SVC, args=("--emit-events", "50"))
    agent = Agent()
    out = os.path.join(make_dir(SVC), "frames.nettrace")
    strace_out = os.path.join(make_dir(), "agent.strace")
    watch = subprocess.Popen(["strace", "-qq", "-f", "-e", "trace=sendmsg,sendto,write",
                              "-xx", "-s", "4096", "-o", strace_out, "-p", str(agent.proc.pid)],
                             stderr=subprocess.DEVNULL)
    harness.scope.callback(watch.kill)
    wait_for(lambda: harness.AcceptWatch._traced(agent.proc.pid), what="strace to attach")
    r = trace(agent, SVC, target, out, "--providers", PROVIDER, "--duration", "1")
    assert r.returncode == 0, r
    # strace logs each call before the agent goes on from it, so all it sent for the session is there; 0.5 s more
    # for what it writes after dsctl has its answer, for the check that the id went nowhere else (a check that a
    # loaded machine can only make pass wrongly)
    time.sleep(0.5)
    watch.send_signal(signal.SIGINT)
    watch.wait(timeout=HANG_BOUND)  # strace detaches and ends at once
    text = open(strace_out).read()
    # StopTracing, as the agent sent it to the runtime, holds the id after the 20-byte header
    stops = [m for m in re.findall(r'"((?:\\x[0-9a-f]{2})+)"', text)
             if m.startswith("\\x44\\x4f\\x54\\x4e\\x45\\x54") and m[16 * 4:18 * 4] == "\\x02\\x01"]
    assert len(stops) == 1, "expected one StopTracing"
    session_id = stops[0][20 * 4:28 * 4]
    assert text.count(session_id) == 1, "the session id left the agent in another message"



@test
def a_runtime_that_sends_on_past_its_stop_is_cut_at_the_rundowns_allowance():
    """At max_trace_size the agent stops the session and reads the runtime's closing rundown on top, at most
    EVENTPIPE_RUNDOWN_BYTES_MAX (256 MiB) more: a runtime (its user's to program) that goes on sending as fast as
    it is read, whatever StopTracing says, is cut there, its end record size-exceeded and incomplete, and nothing
    is read beyond. Without the allowance's bound the agent would read it until the session's duration (120 s
    here), gigabytes into its user's file."""
    d = make_dir(None, 0o755)
    head, block = nettrace_writer.flood_stream(d)
    fake = FakeRuntime(f"flood:{head}:{block}")
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_trace_size = "64K"\n')
    out = os.path.join(make_dir(SVC, 0o700), "flood.nettrace")
    # 256 MiB through a socket take a few seconds; RUNTIME_BOUND only ends a hang, before the 120 s duration
    r = dsctl(agent, SVC, "trace", str(fake.pid), "--providers", "Hostile", "--duration", "120", "-o", out,
              timeout=RUNTIME_BOUND)
    ended = wait_for(lambda: [x for x in agent.records(message_id=SESSION_END_ID)
                              if x["DSAGENT_TARGET_PID"] == str(fake.pid)], what="the session's end")[0]
    allowance = (64 << 10) + (256 << 20)
    assert ended["DSAGENT_SESSION_END"] == "size-exceeded" and ended["DSAGENT_SESSION_COMPLETE"] == "no", ended
    got = int(ended["DSAGENT_SESSION_BYTES"])
    # cut at the first splice that reaches the allowance: at most one splice (SESSION_SPLICE_MAX, 1 MiB) past it
    assert allowance <= got <= allowance + (1 << 20), (got, allowance)
    flood = wait_for(lambda: os.path.exists(fake.log + ".flood") and open(fake.log + ".flood").read(),
                     what="the runtime told it was hung up on")
    sent = int(flood.split()[0])
    # it counts whole blocks sent: what the agent read, but the block it was in, and what the socket buffers held
    # when the agent hung up
    assert got - os.path.getsize(block) <= sent < got + (16 << 20), (got, sent)
    stop = [i for i in range(len(fake.received()) - 17) if fake.received()[i:i + 14] == b"DOTNET_IPC_V1\x00"
            and fake.received()[i + 16] == 0x02 and fake.received()[i + 17] == 0x01]
    assert stop, "the agent never sent StopTracing at max_trace_size"
    # dsctl says so (exit 8, the runtime failed the session) and keeps no file of a stream that was cut
    assert r.returncode == 8 and "trace session ended (size-exceeded)" in r.stderr and not os.path.exists(out), r

if __name__ == "__main__":
    run_tests()
