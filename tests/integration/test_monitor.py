#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl stacks, exceptions and logs against the real runtime: what each shows, its formats, and the policy."""
import json
import os
import re
import subprocess

import harness
import nettrace_writer
from harness import (ALICE, EXIT_DENIED, RUNTIME_BOUND, SOURCE, SVC, AcceptWatch, Agent, FakeRuntime, Target, dsctl,
                     make_dir, run_tests, test, tool)

SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
PARKED = "DsTestTarget.DsagentProbe.ParkedInDsagentStacksProbe"
SPEEDSCOPE_SCHEMA = os.path.join(SOURCE, "tests", "data", "speedscope", "file-format-schema.json")


def thread_name(target, tid):
    with open(f"/proc/{target.pid}/task/{tid}/comm") as f:
        return f.read().strip()


def text_stacks(out):
    """{thread id: [frames]} from dsctl stacks' text."""
    threads, current = {}, None
    for line in out.splitlines():
        m = re.match(r"Thread \(0x([0-9A-F]+)\):$", line)
        if m:
            current = threads.setdefault(int(m.group(1), 16), [])
        elif line.startswith("  "):
            current.append(line.strip())
    return threads


def report_blocks(out):
    """dotnet-stack report's text (or dsctl stacks'), as a sorted list of its threads' blocks: each the thread's
    lines, from its "Thread (0x...):" to the empty line that ends it. Every line is in one block."""
    lines = out.split("\n")
    assert lines[-1] == "", f"the text does not end in a newline: {out!r}"
    blocks, current = [], None
    for line in lines[:-1]:
        if current is None:
            assert re.match(r"Thread \(0x[0-9A-F]+\):$", line), f"a line outside a thread's block: {line!r}"
            current = [line]
        else:
            current.append(line)
            if line == "":
                blocks.append(tuple(current))
                current = None
    assert current is None, f"a thread's block not ended by an empty line: {current}"
    return sorted(blocks)


def dotnet_stack_report(target):
    """What the stock dotnet-stack report (10.0.750501, tests/tools/dotnet-tools) prints of @target, run as root
    where the target's runtime has its socket."""
    path = os.path.join(tool("dotnet-tools", "tests/tools/dotnet-tools/install.sh"), "dotnet-stack")
    # 300 s: a bound against a hang; the tool starts a runtime and takes a rundown of a small app in seconds
    r = subprocess.run(["env", f"TMPDIR={target.tmpdir}", "DOTNET_CLI_TELEMETRY_OPTOUT=1", path, "report", "-p",
                        str(target.pid)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r
    # its note when the rundown took over 5 s on a loaded machine is no thread's
    return "".join(line for line in r.stdout.splitlines(keepends=True)
                   if not line.startswith("# Sufficiently large applications"))


@test
def stacks_show_the_parked_method_on_its_thread():
    target = Target(SVC, args=("--park-thread",))
    agent = Agent()

    r = dsctl(agent, SVC, "stacks", str(target.pid))
    assert r.returncode == 0, r
    threads = text_stacks(r.stdout)
    parked = [tid for tid, frames in threads.items() if f"DsTestTarget!{PARKED}()" in frames]
    assert len(parked) == 1, r.stdout
    assert thread_name(target, parked[0]) == "dsagent-parked"
    frames = threads[parked[0]]
    # innermost first: the wait the method is parked in comes before it, its caller after it
    assert frames[0] == "[Native Frames]", frames
    assert any("ManualResetEventSlim.Wait(" in f for f in frames[:frames.index(f"DsTestTarget!{PARKED}()")]), frames
    assert frames[-1] == "System.Private.CoreLib!System.Threading.Thread.StartCallback()", frames
    assert re.search(r"dsctl: \d+ threads \(ended: duration-limit\)", r.stderr), r.stderr

    r = dsctl(agent, SVC, "stacks", str(target.pid), "--json")
    assert r.returncode == 0, r
    by_thread = {t["threadId"]: t["frames"] for t in json.loads(r.stdout)["threads"]}
    frame = {"methodName": "ParkedInDsagentStacksProbe", "className": "DsTestTarget.DsagentProbe",
             "moduleName": "DsTestTarget.dll"}
    assert [tid for tid, fs in by_thread.items() if frame in fs] == parked, by_thread

    start = agent.records(message_id=SESSION_START_ID)[-1]
    assert start["DSAGENT_SESSION_KIND"] == "stacks" and start["DSAGENT_RULE"] == "owner-access", start
    assert start["DSAGENT_PROVIDERS"] == "Microsoft-DotNETCore-SampleProfiler:0xf00000000000:4", start


@test
def stacks_text_is_dotnet_stack_report():
    """dsctl stacks' text is dotnet-stack report's of the same quiet process, line for line, thread order aside."""
    target = Target(SVC, args=("--park-thread",))
    agent = Agent()
    # 4 pairs: a count of tries, not a time; only a thread that moves between two snapshots makes one differ
    for attempt in range(4):
        r = dsctl(agent, SVC, "stacks", str(target.pid))
        assert r.returncode == 0, r
        ours, theirs = report_blocks(r.stdout), report_blocks(dotnet_stack_report(target))
        if ours == theirs:
            break
        # a thread that moved between the two snapshots: another pair; the threads here are parked, so
        # the same difference each time is a difference of the texts
        print(f"attempt {attempt}: the texts differ, again", flush=True)
    assert ours == theirs, f"dsctl stacks:\n{r.stdout}\ndotnet-stack report:\n{''.join(map(''.join, theirs))}"
    # threads of managed frames, the parked one among them, both parameters and "[Native Frames]" shown
    parked = [b for b in ours if f"  DsTestTarget!{PARKED}()" in b]
    assert len(ours) >= 2 and len(parked) == 1, ours
    assert parked[0][1] == "  [Native Frames]", parked
    assert "  DsTestTarget!Program.<Main>$(class System.String[])" in [line for b in ours for line in b], ours


@test
def stacks_as_speedscope_follow_its_schema_and_dotnet_trace():
    import jsonschema
    target = Target(SVC, args=("--park-thread",))
    agent = Agent()
    schema = json.load(open(SPEEDSCOPE_SCHEMA))

    r = dsctl(agent, SVC, "stacks", str(target.pid), "--format", "speedscope")
    assert r.returncode == 0, r
    ours = json.loads(r.stdout)
    jsonschema.validate(ours, schema)
    names = [f["name"] for f in ours["shared"]["frames"]]
    parked = [p for p in ours["profiles"]
              if any(names[e["frame"]] == f"DsTestTarget.dll!{PARKED}" for e in p["events"])]
    assert len(parked) == 1, ours["profiles"]
    tid = int(re.match(r"Thread \((\d+)\)$", parked[0]["name"]).group(1))
    assert thread_name(target, tid) == "dsagent-parked"
    # each frame opened is closed, innermost first
    events = parked[0]["events"]
    opened = [e["frame"] for e in events if e["type"] == "O"]
    assert [e["frame"] for e in events if e["type"] == "C"] == opened[::-1], events

    # dotnet-trace convert's file of the same process: the same schema, the same shape of profiles
    dotnet_trace = subprocess.run([os.path.join(SOURCE, "tests/tools/dotnet-trace/install.sh")],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert dotnet_trace.returncode == 0, dotnet_trace.stderr
    work = make_dir(SVC, 0o755)
    trace = os.path.join(work, "sampled.nettrace")
    r = dsctl(agent, SVC, "trace", str(target.pid), "--profile", "dotnet-sampled-thread-time", "--duration", "1",
              "-o", trace)
    assert r.returncode == 0, r
    converted = subprocess.run([dotnet_trace.stdout.strip(), "convert", "--format", "speedscope", "-o",
                                os.path.join(work, "theirs.json"), trace], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=300)  # a hang bound; seconds in truth
    assert converted.returncode == 0, converted.stdout
    theirs_path = [os.path.join(work, n) for n in os.listdir(work) if n.endswith(".json")]
    assert len(theirs_path) == 1, os.listdir(work)
    theirs = json.load(open(theirs_path[0]))
    jsonschema.validate(theirs, schema)
    assert set(ours) == set(theirs), (set(ours), set(theirs))
    assert {p["type"] for p in ours["profiles"]} == {p["type"] for p in theirs["profiles"]} == {"evented"}
    assert {p["unit"] for p in ours["profiles"]} == {p["unit"] for p in theirs["profiles"]}
    assert f"Thread ({tid})" in {p["name"] for p in theirs["profiles"]}
    assert any(PARKED in f["name"] for f in theirs["shared"]["frames"])


@test
def exceptions_show_type_message_and_thrower():
    target = Target(SVC, args=("--throw-exceptions", "20"))
    agent = Agent()

    r = dsctl(agent, SVC, "exceptions", str(target.pid), "--duration", "2", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    blocks = [b for b in r.stdout.split("\n\n") if b.strip()]
    # 20 a second for 2 s give some 40; a loaded machine that slept the thrower's sleeps long would still give 10
    assert len(blocks) >= 10, r.stdout
    for block in blocks:
        lines = block.splitlines()
        m = re.match(r"First chance exception at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} on thread (\d+)$", lines[0])
        assert m, lines
        assert re.match(r"DsTestTarget\.DsagentProbeException: dsagent-exception-probe \d+$", lines[1]), lines
        assert lines[2] == "   at DsTestTarget.DsagentProbe.ThrowDsagentProbe", lines
        assert lines[3] == "   at DsTestTarget.DsagentProbe.Throw", lines
        assert thread_name(target, int(m.group(1))) == "dsagent-thrower"
    sequences = [int(re.search(r"probe (\d+)", b).group(1)) for b in blocks]
    assert sequences == sorted(sequences), "oldest first"
    assert re.search(rf"dsctl: {len(blocks)} exceptions \(ended: duration\)", r.stderr), r.stderr

    r = dsctl(agent, SVC, "exceptions", str(target.pid), "--duration", "1", "--json", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines and r.stderr == "", r
    for n, e in enumerate(lines, 1):
        assert e["id"] == n and e["typeName"] == "DsTestTarget.DsagentProbeException", e
        assert e["message"].startswith("dsagent-exception-probe ") and e["hresult"] == "0x80131500", e
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", e["timestamp"]), e
        assert e["callStack"]["frames"][0] == {"methodName": "ThrowDsagentProbe",
                                               "className": "DsTestTarget.DsagentProbe",
                                               "moduleName": "DsTestTarget.dll"}, e

    start = agent.records(message_id=SESSION_START_ID)[-1]
    assert start["DSAGENT_SESSION_KIND"] == "exceptions", start
    assert start["DSAGENT_PROVIDERS"] == "Microsoft-Windows-DotNETRuntime:0x8000:4", start
    assert start["DSAGENT_DURATION_LIMIT_USEC"] == "1000000", start


LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (\w+) ([\w.]+)\[(\d+)\] (.*)$")


@test
def logs_show_message_category_level_and_scope():
    target = Target(SVC, args=("--log-warnings", "20"))
    agent = Agent()

    # the app's own filters: everything it logs (it set Trace as its minimum). Each 2 s window holds some 40 rounds
    # of the app's three messages, where each check below needs one
    r = dsctl(agent, SVC, "logs", str(target.pid), "--duration", "2", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    lines = [LOG_LINE.match(line) for line in r.stdout.splitlines()]
    assert lines and all(lines), r.stdout
    seen = {(m.group(1), m.group(2), m.group(3)) for m in lines}
    assert seen == {("Information", "Dsagent.TestTarget.Probe", "0"), ("Warning", "Dsagent.TestTarget.Probe", "7"),
                    ("Error", "Dsagent.TestTarget.Other", "0")}, seen
    # the round the app was in when the session began may have opened its scope before anyone listened (a scope's
    # start is written only while a session listens), and shows its warning with no scope: every later one has it
    warnings = [m.group(4) for m in lines if m.group(1) == "Warning"]
    assert len(warnings) >= 2 and all(re.match(r"dsagent-log-probe \d+ \[ScopeId=42\]$", w) for w in warnings[1:]), \
        warnings
    other = next(m.group(4) for m in lines if m.group(1) == "Error")
    assert re.match(r"dsagent-log-other \d+$", other), "no scope around the other category's message"

    # from Warning up: no Information
    r = dsctl(agent, SVC, "logs", str(target.pid), "--duration", "2", "--level", "Warning", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    levels = {LOG_LINE.match(line).group(1) for line in r.stdout.splitlines()}
    assert levels == {"Warning", "Error"}, r.stdout

    # one category, as JSON lines
    r = dsctl(agent, SVC, "logs", str(target.pid), "--duration", "2", "--category", "Dsagent.TestTarget.Pro",
              "--json", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    entries = [json.loads(line) for line in r.stdout.splitlines()]
    assert {e["Category"] for e in entries} == {"Dsagent.TestTarget.Probe"}, entries
    warnings = [e for e in entries if e["LogLevel"] == "Warning"]
    assert len(warnings) >= 2 and {e["LogLevel"] for e in entries} == {"Information", "Warning"}
    for w in warnings[1:]:  # the first may have begun its scope before the session, as above
        assert w["EventId"] == 7 and w["EventName"] == "ProbeWarning" and w["Scopes"] == {"ScopeId": "42"}, w
        assert re.match(r"dsagent-log-probe \d+$", w["Message"]), w
    assert thread_name(target, warnings[1]["ThreadId"]) == "dsagent-logger"

    starts = [s for s in agent.records(message_id=SESSION_START_ID) if s["DSAGENT_SESSION_KIND"] == "logs"]
    assert [s["DSAGENT_PROVIDERS"].split(",")[0] for s in starts] == [
        "Microsoft-Extensions-Logging:0x4:5:FilterSpecs=UseAppFilters",
        "Microsoft-Extensions-Logging:0x4:5:FilterSpecs=*:Warning",
        "Microsoft-Extensions-Logging:0x4:5:FilterSpecs=Dsagent.TestTarget.Pro*"], starts


MONITOR_POLICY = f"""
[[rule]]
name = "alice-info"
users = ["{ALICE}"]
commands = ["info", "counters"]
targets.users = ["{SVC}"]

[[rule]]
name = "alice-logs"
users = ["{ALICE}"]
commands = ["logs", "exceptions"]
targets.names = ["NoSuchApp"]
max_duration = "3s"
"""


@test
def each_is_denied_without_its_command_and_the_runtime_sees_nothing():
    target = Target(SVC, args=("--park-thread", "--throw-exceptions", "5", "--log-warnings", "5",
                               "--report-sessions"))
    agent = Agent(policy=MONITOR_POLICY)
    watch = AcceptWatch(target.pid)
    for command in ("stacks", "exceptions", "logs"):
        r = dsctl(agent, ALICE, command, str(target.pid))
        assert r.returncode == EXIT_DENIED, (command, r)
        assert f"no rule grants you '{command}'" in r.stderr or "does not cover" in r.stderr, (command, r.stderr)
        r = dsctl(agent, ALICE, "explain", str(target.pid), command)
        assert r.returncode == EXIT_DENIED, (command, r)
    assert watch.accepts() == 0, "a denied request reached the runtime"
    assert agent.records(message_id=SESSION_START_ID) == []
    denials = [rec for rec in agent.records() if rec["DSAGENT_DECISION"] == "denied"]
    assert sorted(rec["DSAGENT_COMMAND"] for rec in denials) == ["exceptions", "logs", "stacks"], denials

    # a rule that grants them: the runtime's own view shows the logs session start and end
    agent.write_policy(MONITOR_POLICY.replace('targets.names = ["NoSuchApp"]', f'targets.users = ["{SVC}"]'))
    agent.reload()
    r = dsctl(agent, ALICE, "logs", str(target.pid), "--duration", "2", timeout=RUNTIME_BOUND)
    assert r.returncode == 0 and "dsagent-log-probe" in r.stdout, r
    target.process.read_line("logging-enabled True")
    # the session ended before dsctl did; the app looks every 50 ms: a bound against a hang
    target.process.read_line("logging-enabled False", timeout=30)
    # and the rule's max_duration holds for them as for traces
    r = dsctl(agent, ALICE, "exceptions", str(target.pid), "--duration", "10")
    assert r.returncode == EXIT_DENIED and "allows at most 3s" in r.stderr, r
    r = dsctl(agent, ALICE, "stacks", str(target.pid))
    assert r.returncode == EXIT_DENIED and "no rule grants you 'stacks'" in r.stderr, r


@test
def bad_options_are_refused_before_anything_is_sent():
    target = Target(SVC)
    agent = Agent()
    for args, why in [
        (["logs", "--level", "Verbose"], "--level takes Trace, Debug, Information, Warning, Error or Critical"),
        (["logs", "--category", "A;B:Trace"], "--category takes a logger category"),
        (["stacks", "--duration", "5"], "stacks takes no --duration"),
        (["stacks", "--format", "csv"], "--format takes text, json or speedscope"),
        (["exceptions", "--level", "Warning"], "exceptions takes no --level"),
    ]:
        r = dsctl(agent, SVC, args[0], str(target.pid), *args[1:])
        assert r.returncode == 2 and why in r.stderr, (args, r)
    assert agent.records() == [], "a usage error reached the agent"


# A scope's key that would end the JSON line and write a whole other one, with terminal escapes.
FORGING_KEY = ('x":1,"LogLevel":"Critical","Message":"forged by the target"}\n{"Timestamp":"2030-01-01",'
               '"LogLevel":"Critical","Category":"Security","Message":"\x1b]0;owned\x07\x1b[31mFAKE ALERT')
MIB = 1 << 20


def hostile_runtime(stream):
    """svc's fake runtime, which sends @stream to any session asked of it."""
    path = os.path.join(make_dir(SVC, 0o755), "stream.nettrace")
    with open(path, "wb") as f:
        f.write(stream)
    os.chmod(path, 0o644)
    return FakeRuntime(f"trace:{path}")


@test
def a_hostile_runtime_neither_forges_log_lines_nor_floods_roots_terminal():
    agent = Agent()
    fake = hostile_runtime(nettrace_writer.logs_in_scope([(FORGING_KEY, "v")], ["hello"]))
    r = dsctl(agent, None, "--json", "logs", str(fake.pid), "--duration", "1", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    assert "\x1b" not in r.stdout and r.stdout.count("\n") == 1, r.stdout
    entry = json.loads(r.stdout)
    assert entry["Message"] == "hello" and entry["Scopes"] == {FORGING_KEY: "v"}, entry
    r = dsctl(agent, None, "logs", str(fake.pid), "--duration", "1", timeout=RUNTIME_BOUND)
    assert r.returncode == 0 and "\x1b" not in r.stdout and r.stdout.count("\n") == 1, r
    assert ' hello [x":1,"LogLevel"' in r.stdout and "\\x0a{" in r.stdout and "\\x1b]0;owned" in r.stdout, r

    # a scope of 64 long arguments that names itself its parent, around every message: shown once,
    # its arguments up to 4 KiB, the rest counted
    big = "\u20ac" * 300
    fake = hostile_runtime(nettrace_writer.logs_in_scope([(f"k{i}{big}", big) for i in range(64)], ["m"] * 50,
                                                         self_parent=True))
    r = dsctl(agent, None, "--json", "logs", str(fake.pid), "--duration", "1", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    assert len(r.stdout.encode()) <= 50 * (4096 + 1024), len(r.stdout)
    entries = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(entries) == 50, len(entries)
    for entry in entries:
        assert list(entry["Scopes"]) == [f"k0{big}", f"k1{big}"] and entry["ScopesLeftOut"] == 62, entry

    # one 512-frame stack on each of 270 threads, in a method of a 4000-byte name: 256 frames of it a
    # thread, each name cut at 1 KiB, and the threads past 64 MiB of output counted
    fake = hostile_runtime(nettrace_writer.one_stack_on_every_thread(270, 512, "M" * 4000))
    r = dsctl(agent, None, "stacks", str(fake.pid), timeout=300)  # a hang bound: 64 MiB of output in seconds
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) <= 66 * MIB, len(r.stdout)
    m = re.search(r"^dsctl: (\d+) threads \(ended: .*\)\ndsctl: (\d+) more threads not shown: the output reached its "
                  r"limit of 64 MiB$", r.stderr, re.M)
    assert m and int(m.group(1)) + int(m.group(2)) == 270 and int(m.group(2)) > 0, r.stderr
    threads = r.stdout.split("\n\n")
    assert threads[-1] == "" and len(threads) - 1 == int(m.group(1))
    frames = threads[0].splitlines()
    assert frames[:2] == ["Thread (0x1):", "  [Native Frames]"] and len(frames) == 259, frames[:3]
    assert set(frames[2:258]) == {"  ?!N." + "M" * 1022 + "\u2026[2978 bytes left out]"}, frames[2][-40:]
    assert frames[258] == "  [256 frames left out]", frames[258]


if __name__ == "__main__":
    run_tests()
