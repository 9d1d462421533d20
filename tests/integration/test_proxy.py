#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl port: stock .NET tools through the agent, each IPC command decided, recorded and re-encoded.

The tools are the real ones, pinned: dotnet-counters, -dump, -gcdump, -stack and -trace 10.0.750501
(tests/tools/dotnet-tools/install.sh), and
a program on Microsoft.Diagnostics.NETCore.Client 0.2.750501 (tests/tools/ipc-client). The files they
write are read by TraceEvent (tests/tools/traceevent-check). Hostile clients are written by hand
(port_client.py), as the caller and as other users. All against the real agent and the real runtime.

What a stock tool sends (recorded through a relaying socket in front of a .NET 10.0.12 runtime):
dotnet-trace collect sends CollectTracing2 (CollectTracing4 for a profile with a rundown keyword of its
own, e.g. gc-collect), then ResumeRuntime on a second connection (unless --resume-runtime:false), then
StopTracing on a third; the client library sends ProcessInfo3 for GetProcessInfo, GenerateCoreDump3 for
WriteDump and falls back to 2 and 1 on "unknown command". The providers dotnet-trace sends for its default
and each --profile (tests/tools/capture-ipc-requests.py records them) are in docs/proxy.md; a rule that
lists those profiles admits them."""
import json
import os
import re
import select
import signal
import stat
import struct
import subprocess
import time

import harness
from harness import (ALICE, DSAGENT, DSCTL, DUMP_BOUND, EXIT_DENIED, HANG_BOUND, HERE, MALLORY, PYTHON, RUNTIME_BOUND,
                     SOURCE, SVC, AcceptWatch, Agent, Process, Target, as_user, dsctl, make_dir, place_in_unit, printed,
                     run_tests, test, tool, traceevent, uid_of, wait_for)

SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
SESSION_END_ID = "1c5ee471f818453b8c7bac25ac2e872f"
PROVIDER = "Dsagent-TestTarget"
# EventSource events reach an EventPipe session only with the session keyword bits (0xF00000000000) in the
# mask: "Dsagent-TestTarget" alone (keywords 0 from dotnet-trace) or ":0x1" enables the source but no Marker.
MARKERS = f"{PROVIDER}:0xFFFFFFFFFFFFFFFF:4"
MARKER = {"number": 0x5A5A1234, "big": 0x0123456789ABCDEF, "text": "dsagent-marker \u00e9\u20ac", "real": 2.5}
E_ACCESSDENIED = "0x80070005"
HR_BAD_ENCODING, HR_UNKNOWN_COMMAND, HR_UNKNOWN_MAGIC = 0x80131384, 0x80131385, 0x80131386
IPC_MAGIC = b"DOTNET_IPC_V1\0"

ALLOWED = f"""
[agent]
dump_dir = "@DUMP_DIR@"

[[rule]]
name = "alice-proxy"
users = ["{ALICE}"]
commands = ["info", "env", "trace", "dump", "resume"]
targets.users = ["{SVC}"]
dump_types = ["mini", "heap", "triage", "full"]
trace_providers = ["{PROVIDER}", "Microsoft-Windows-DotNETRuntime", "Microsoft-DotNETCore-SampleProfiler"]
"""

# The same user and target, a rule that lets her see the process listed and use none of the proxied commands
# (not even ProcessInfo, which any command that reaches the runtime answers with the name in place of the
# command line).
LACKING = f"""
[agent]
dump_dir = "@DUMP_DIR@"

[[rule]]
name = "alice-listing-only"
users = ["{ALICE}"]
commands = ["ps"]
targets.users = ["{SVC}"]
"""

# --- the stock tools, built or installed once per run ---

def ipc_client(user, *args, cwd=None, timeout=300):
    """The client library's program as @user: (exit status, its one JSON object, stderr). @timeout: a bound against
    a hang; its runtime starts and asks once (a dump or a session of seconds at most)."""
    dll = tool("ipc-client", "tests/tools/ipc-client/build.sh")
    r = subprocess.run(as_user(user, ["dotnet", dll, *args]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, cwd=cwd)
    lines = r.stdout.strip().splitlines()
    assert lines, f"ipc-client printed nothing: {r}"
    return r.returncode, json.loads(lines[-1]), r.stderr


def dotnet_trace_argv(user, port, out, *args):
    return as_user(user, [tool("dotnet-trace", "tests/tools/dotnet-trace/install.sh"), "collect",
                          "--diagnostic-port", port, "-o", out, *args])


def dotnet_trace(user, port, out, *args, timeout=180):
    """dotnet-trace collect as @user through @port. @timeout: a bound against a hang; the tool's runtime starts, a
    session of a few seconds runs, the tool stops it and ends: a minute at worst on a loaded machine."""
    return subprocess.run(dotnet_trace_argv(user, port, out, *args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)


def assert_markers(path, *providers):
    seen = traceevent(path)
    assert seen["markers"] > 0 and PROVIDER in seen["providers"], seen
    first = seen["first_marker"]
    assert {k: first[k] for k in MARKER} == MARKER, first
    for p in providers:
        assert p in seen["providers"], (p, seen["providers"])
    return seen


def assert_denied(result, what):
    """The library's exception carries E_ACCESSDENIED: as its HRESULT, or named in its message."""
    status, out, _ = result
    assert status == 1 and "error" in out, (what, result)
    assert out["hresult"] == E_ACCESSDENIED or E_ACCESSDENIED in out["message"].lower(), (what, out)


# --- the port ---


class Port:
    """`dsctl port TARGET` as @user, served until the test ends; self.value is the line it printed."""

    def __init__(self, agent, user, target, *args, env=(), cwd=None, expect_ready=True):
        self.stderr_path = os.path.join(make_dir(None, 0o755), "port.stderr")
        self.stderr = open(self.stderr_path, "w")
        harness.scope.callback(self.stderr.close)
        argv = as_user(user, ["env", *env, DSCTL, "--agent-socket", agent.socket, "port", str(target), *args])
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, cwd=cwd, start_new_session=True)
        harness.scope.callback(self.stop)
        self.value = self.path = None
        if expect_ready:
            self.value = self.proc.stdout.readline().strip()
            # a port that printed no path has ended, or ends at once: a bound against a hang
            assert self.value.endswith(",connect"), (self.value, self.wait(10), self.errors())
            self.path = self.value[:-len(",connect")]

    def errors(self):
        return open(self.stderr_path).read()

    def wait(self, timeout=60):
        """Its exit status; @timeout: a bound against a hang, where it ends within ms (its session over, Ctrl-C)."""
        return self.proc.wait(timeout=timeout)

    def interrupt(self):
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.wait()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)  # it ends on SIGTERM within ms; past 10 s a kill, which fails nothing
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def raw(user, path, data, *flags, timeout=20):
    """port_client.py as @user: what came back for @data sent straight to the port's socket. @timeout bounds its
    reads: the port answers or closes within ms (or within its wait for a request, which a case shortens below it);
    30 s more for the client's own start."""
    r = subprocess.run(as_user(user, [PYTHON, os.path.join(HERE, "port_client.py"), path, data.hex(), *flags,
                                      "--timeout", str(timeout)]),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout + 30)
    assert r.returncode == 0, r
    out = json.loads(r.stdout)
    out["reply"] = bytes.fromhex(out["reply"])
    return out


def ipc_message(command_set, command_id, payload=b"", size=None):
    size = 20 + len(payload) if size is None else size
    return IPC_MAGIC + struct.pack("<HBBH", size, command_set, command_id, 0) + payload


def ipc_error_hresult(reply):
    """The HRESULT of the runtime-style error reply @reply (command set 0xFF, id 0xFF, 24 bytes)."""
    assert len(reply) == 24, reply
    magic, size, command_set, command_id, _, hresult = struct.unpack("<14sHBBHI", reply)
    assert (magic, size, command_set, command_id) == (IPC_MAGIC, 24, 0xFF, 0xFF), reply
    return hresult


def lines_so_far(process, wait=1.0):
    """What @process printed and nobody read yet, waiting @wait seconds for more. For checks that something was
    not printed: a loaded machine can only make such a check pass wrongly, never fail, and each use stands beside
    the agent's records that say the same."""
    lines = []
    while select.select([process.proc.stdout], [], [], wait)[0]:
        line = process.proc.stdout.readline()
        if not line:
            break
        lines.append(line)
    return lines


def proxy_records(agent, **fields):
    return [r for r in agent.records() if all(r.get(k) == v for k, v in fields.items())]


def session_records(agent, count):
    """The proxy's records of CollectTracing2, once there are @count. An allowed session's record says how it
    ended, so the agent writes it when the session ends, which may come after the tool has read the end of its
    stream and exited (CI of this session: dotnet-counters had exited, its record not yet written)."""
    return wait_for(lambda: (lambda found: found if len(found) >= count else None)(
        proxy_records(agent, DSAGENT_IPC_COMMAND="CollectTracing2")), what=f"{count} records of CollectTracing2")


def marker_target(*extra):
    return Target(SVC, args=("--emit-events", "100", *extra))


# --- the port's socket ---


@test
def the_port_socket_is_the_callers_alone():
    target = marker_target()
    agent = Agent(policy=ALLOWED)

    # no $XDG_RUNTIME_DIR (as_user clears the environment): a private directory under /tmp
    port = Port(agent, ALICE, target.pid)
    st = os.lstat(port.path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == uid_of(ALICE), st.st_uid
    parent = os.lstat(os.path.dirname(port.path))
    assert parent.st_uid == uid_of(ALICE) and stat.S_IMODE(parent.st_mode) == 0o700, (port.path, oct(parent.st_mode))
    status, info, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0 and info["ProcessId"] == target.ns_pid, info
    # Ctrl-C ends it, and it leaves nothing behind
    assert port.interrupt() == 0, port.errors()
    assert not os.path.exists(port.path) and not os.path.exists(os.path.dirname(port.path)), port.path

    # $XDG_RUNTIME_DIR, when it is the caller's own private directory
    runtime_dir = make_dir(ALICE, 0o700)
    port = Port(agent, ALICE, target.pid, env=[f"XDG_RUNTIME_DIR={runtime_dir}"])
    assert os.path.dirname(port.path) == runtime_dir, port.path
    port.stop()
    # ... and not when others may write there
    shared = make_dir(None, 0o1777)
    port = Port(agent, ALICE, target.pid, env=[f"XDG_RUNTIME_DIR={shared}"])
    assert not port.path.startswith(shared + "/"), port.path


@test
def a_path_that_exists_or_a_symlink_is_refused_never_replaced():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o700)
    existing = os.path.join(mine, "existing")
    with open(existing, "w") as f:
        f.write("keep me")
    os.chown(existing, uid_of(ALICE), uid_of(ALICE))
    dangling = os.path.join(mine, "dangling")
    os.symlink(os.path.join(mine, "elsewhere.sock"), dangling)
    pointing = os.path.join(mine, "pointing")
    os.symlink(existing, pointing)
    for path in (existing, dangling, pointing):
        port = Port(agent, ALICE, target.pid, "--port-path", path, expect_ready=False)
        out = port.proc.stdout.read()
        assert port.wait(30) == 1 and out == "", (path, out, port.errors())  # it refuses at once: a hang bound
        assert "does not replace" in port.errors(), port.errors()
    assert open(existing).read() == "keep me"
    assert os.readlink(dangling) == os.path.join(mine, "elsewhere.sock") and os.readlink(pointing) == existing
    assert not os.path.exists(os.path.join(mine, "elsewhere.sock")), "a socket was made through the symlink"
    assert agent.records() == [], "refusing the path asked the agent something"

    # a path of one's own choosing works, and is the value printed
    path = os.path.join(mine, "p.sock")
    port = Port(agent, ALICE, target.pid, "--port-path", path)
    assert port.value == f"{path},connect", port.value


@test
def socket_is_the_agents_and_port_takes_its_path_by_another_name():
    """`dsctl --socket A port PID --socket B` once served B and silently dropped A: port's own socket was
    --socket too. Now --socket is the agent's for every command, port's path is --port-path, and the old
    spelling after 'port' is a usage error that names the new option: nothing is served, nothing asked."""
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o700)
    wanted = os.path.join(mine, "old.sock")
    for argv in (["--socket", agent.socket, "port", str(target.pid), "--socket", wanted],
                 ["port", str(target.pid), "--socket", wanted]):
        r = subprocess.run(as_user(ALICE, [DSCTL, *argv]), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=HANG_BOUND)  # a usage error, at once
        assert r.returncode == 2 and r.stdout == "", (argv, r)  # a usage error
        assert "--port-path PATH" in r.stderr and "--socket is the agent's" in r.stderr, (argv, r.stderr)
        assert not os.path.exists(wanted), argv
    assert agent.records() == [], "a refused command line asked the agent something"

    # --socket before 'port' is the agent's, --port-path the port's: both are used
    path = os.path.join(mine, "new.sock")
    argv = as_user(ALICE, [DSCTL, "--socket", agent.socket, "port", str(target.pid), "--port-path", path])
    port = Process(argv)
    value = port.read_line(path)
    assert value == f"{path},connect", value
    status, info, _ = ipc_client(ALICE, "info", value)
    assert status == 0 and info["ProcessId"] == target.ns_pid, info
    records = proxy_records(agent, DSAGENT_COMMAND="info")
    assert [r["DSAGENT_CLIENT_UID"] for r in records] == [str(uid_of(ALICE))], records


@test
def another_user_is_closed_on_before_anything_reaches_the_agent():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    port = Port(agent, ALICE, target.pid)
    watch = AcceptWatch(target.pid)
    info_request = ipc_message(0x04, 0x08)

    # root passes the file's mode; dsctl still closes on it (SO_PEERCRED)
    got = raw("root", port.path, info_request)
    assert got["connected"] and got["reply"] == b"" and got["eof"], got
    # another user, let through the file's mode on purpose
    os.chmod(os.path.dirname(port.path), 0o711)
    os.chmod(port.path, 0o666)
    got = raw(MALLORY, port.path, info_request)
    assert got["connected"] and got["reply"] == b"" and got["eof"], got
    assert agent.records() == [], agent.records()
    assert watch.accepts() == 0, "another user's request reached the runtime"
    assert "refused a connection from another user" in port.errors(), port.errors()
    # and the caller is still served
    status, info, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0 and info["ProcessId"] == target.ns_pid, info


# --- dotnet-trace ---


def trace_start_records(agent):
    return agent.records(message_id=SESSION_START_ID)


@test
def dotnet_trace_collects_with_a_profile_and_a_duration():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)

    # 10.0.750501's collect has no cpu-sampling (that is collect-linux's): its sampling profile is this one
    out = os.path.join(mine, "profile.nettrace")
    started = time.monotonic()
    r = dotnet_trace(ALICE, port.value, out, "--profile", "dotnet-sampled-thread-time", "--providers", MARKERS,
                     "--duration", "00:00:00:03")
    assert r.returncode == 0 and "Trace completed" in r.stdout, r.stdout
    # a lower end only, which load cannot break: the session was not ended before its 3 s
    assert time.monotonic() - started >= 3, "the duration was not kept"
    assert os.stat(out).st_uid == uid_of(ALICE)
    assert_markers(out, "Microsoft-DotNETCore-SampleProfiler")

    trace = proxy_records(agent, DSAGENT_COMMAND="trace", DSAGENT_DECISION="allowed")
    assert [r["DSAGENT_IPC_COMMAND"] for r in trace] == ["CollectTracing2"], trace
    assert trace[0]["DSAGENT_RULE"] == "alice-proxy" and trace[0]["DSAGENT_CLIENT_UID"] == str(uid_of(ALICE))
    # dotnet-trace resumes the runtime after every collect through a port
    resume = proxy_records(agent, DSAGENT_IPC_COMMAND="ResumeRuntime")
    assert [r["DSAGENT_DECISION"] for r in resume] == ["allowed"], resume
    start, = trace_start_records(agent)
    assert "Microsoft-DotNETCore-SampleProfiler" in start["DSAGENT_PROVIDERS"], start
    end, = agent.records(message_id=SESSION_END_ID)
    assert end["DSAGENT_SESSION_END"] == "stopped" and end["DSAGENT_SESSION_COMPLETE"] == "yes", end


@test
def dotnet_trace_collects_named_providers():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    out = os.path.join(mine, "providers.nettrace")
    r = dotnet_trace(ALICE, port.value, out, "--providers", f"{MARKERS},Microsoft-Windows-DotNETRuntime:0x1:4",
                     "--duration", "00:00:00:02")
    assert r.returncode == 0 and "Trace completed" in r.stdout, r.stdout
    assert_markers(out)
    start, = trace_start_records(agent)
    assert f"{PROVIDER}:0xffffffffffffffff:4" in start["DSAGENT_PROVIDERS"], start
    assert "Microsoft-Windows-DotNETRuntime:0x1:4" in start["DSAGENT_PROVIDERS"], start


@test
def dotnet_trace_stopped_by_ctrl_c_keeps_a_complete_trace():
    target = marker_target("--report-sessions")
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    out = os.path.join(mine, "interrupted.nettrace")
    # no terminal, stdin /dev/null: dotnet-trace still takes SIGINT as Ctrl-C
    tracer = Process(dotnet_trace_argv(ALICE, port.value, out, "--providers", MARKERS))
    target.process.read_line("eventsource-enabled True")
    # the session runs: the app writes 100 markers a second into it from now on, and the check needs one; 1.5 s
    # gives some 150, and the stop flushes every one written
    time.sleep(1.5)
    os.killpg(tracer.proc.pid, signal.SIGINT)
    assert tracer.proc.wait(timeout=RUNTIME_BOUND) == 0, tracer.proc.stdout.read()
    assert "Trace completed" in tracer.proc.stdout.read()
    assert_markers(out)
    target.process.read_line("eventsource-enabled False", timeout=30)  # the session ended before the tool did
    end, = agent.records(message_id=SESSION_END_ID)
    assert end["DSAGENT_SESSION_END"] == "stopped" and end["DSAGENT_SESSION_COMPLETE"] == "yes", end
    # the StopTracing never reached the agent as a request of its own: dsctl port answered it
    assert proxy_records(agent, DSAGENT_IPC_COMMAND="StopTracing") == []


@test
def dotnet_trace_of_a_provider_the_rule_does_not_allow_is_refused():
    target = marker_target("--report-sessions")
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    watch = AcceptWatch(target.pid)
    # a provider the rule does not name, alone or beside one it does; a provider with arguments
    for providers in ("System.Threading.Tasks.TplEventSource:0x1:4",
                      f"{MARKERS},Microsoft-Diagnostics-DiagnosticSource", f"{MARKERS}:Key=Value"):
        out = os.path.join(mine, "refused.nettrace")
        r = dotnet_trace(ALICE, port.value, out, "--providers", providers, "--duration", "00:00:00:02")
        assert r.returncode != 0 and E_ACCESSDENIED in r.stdout.lower(), (providers, r.stdout)
        assert not os.path.exists(out), providers
    assert watch.accepts() == 0, "a refused session reached the runtime"
    assert trace_start_records(agent) == []
    denied = proxy_records(agent, DSAGENT_COMMAND="trace", DSAGENT_DECISION="denied")
    assert len(denied) == 3 and all(d["DSAGENT_IPC_COMMAND"] == "CollectTracing2" for d in denied), denied
    assert "eventsource-enabled True\n" not in lines_so_far(target.process), "the runtime started a session"
    # the port and the agent go on serving
    out = os.path.join(mine, "allowed.nettrace")
    r = dotnet_trace(ALICE, port.value, out, "--providers", MARKERS, "--duration", "00:00:00:01")
    assert r.returncode == 0, r.stdout
    assert_markers(out)


@test
def the_rules_max_duration_ends_a_dotnet_trace_session():
    target = marker_target()
    agent = Agent(policy=ALLOWED.replace('trace_providers =', 'max_duration = "3s"\ntrace_providers ='))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    out = os.path.join(mine, "limited.nettrace")
    started = time.monotonic()
    # no --duration: the agent stops the session, and dotnet-trace ends as when the runtime ends a session
    r = dotnet_trace(ALICE, port.value, out, "--providers", MARKERS, timeout=RUNTIME_BOUND)
    assert r.returncode == 0 and "Trace completed" in r.stdout, r.stdout
    # not before the rule's 3 s (a lower end, which load cannot break); what ended it is the end record's
    # duration-limit, not a time: without the limit the tool would run until the bound above
    assert time.monotonic() - started >= 3
    assert_markers(out)
    end, = agent.records(message_id=SESSION_END_ID)
    assert end["DSAGENT_SESSION_END"] == "duration-limit" and end["DSAGENT_SESSION_COMPLETE"] == "yes", end


# --- dotnet-trace's own profiles, under a rule that lists profiles alone ---

# The rule of issue 37: an operator lists profiles and no trace_providers.
PROFILES_RULE = ["cpu-sampling", "dotnet-common", "dotnet-sampled-thread-time"]
# Every profile dotnet-trace 10.0.750501's collect takes (`dotnet-trace list-profiles`; cpu-sampling and
# thread-time are collect-linux's), with the CollectTracing version it sends for it.
STOCK_PROFILES = {"dotnet-common": "CollectTracing2", "dotnet-sampled-thread-time": "CollectTracing2",
                  "gc-verbose": "CollectTracing2", "gc-collect": "CollectTracing4", "database": "CollectTracing2"}
CLR_COMMON = "Microsoft-Windows-DotNETRuntime:0x100003801d:4"
SAMPLER = "Microsoft-DotNETCore-SampleProfiler:0xf00000000000:4"


def trace_profiles_policy(profiles, commands=("trace",)):
    listed = ", ".join(f'"{p}"' for p in profiles)
    return granting(*commands, extra=f"trace_profiles = [{listed}]")


def provider_set(text):
    """The providers of a DSAGENT_PROVIDERS or explain list, as (name, keywords, level, whether it has arguments):
    the records write the "" a tool sends for none as a trailing ':', and escape what arguments they show."""
    out = set()
    for item in re.split(r',(?=[A-Za-z0-9._-]+:0x[0-9a-f]+:[0-5])', text):
        name, keywords, level, *arguments = item.split(":", 3)
        out.add((name, keywords, level, bool(arguments and arguments[0])))
    return out


def explained(agent, user, pid, *args):
    """`dsctl explain PID trace ARGS` as @user: its status, and its answer as JSON."""
    r = dsctl(agent, user, "--json", "explain", str(pid), "trace", *args)
    assert r.returncode in (0, EXIT_DENIED) and r.stdout, r
    return r.returncode, json.loads(r.stdout)


@test
def dotnet_trace_default_through_exec_is_admitted_as_the_profiles_it_sends():
    target = marker_target()
    agent = Agent(policy=trace_profiles_policy(PROFILES_RULE))
    mine = make_dir(ALICE, 0o755)
    out = os.path.join(mine, "default.nettrace")

    # plain `dotnet-trace collect`: no --profile, no --providers
    status, said, err = dsctl_exec(agent, ALICE, target.pid, stock("dotnet-trace"), "collect", "-p", str(target.pid),
                                   "-o", out, "--duration", "00:00:00:02")
    assert status == 0 and "Trace completed" in said, (status, said, err)
    assert os.stat(out).st_uid == uid_of(ALICE)
    seen = traceevent(out)
    assert {"Microsoft-DotNETCore-SampleProfiler", "Microsoft-Windows-DotNETRuntime"} <= set(seen["providers"]), seen
    session, = session_records(agent, 1)
    assert (session["DSAGENT_COMMAND"], session["DSAGENT_DECISION"]) == ("trace", "allowed"), session
    start, = trace_start_records(agent)
    assert start["DSAGENT_TRACE_PROFILE"] == "dotnet-common,dotnet-sampled-thread-time", start
    sent = provider_set(start["DSAGENT_PROVIDERS"])
    assert sent == {("Microsoft-Windows-DotNETRuntime", "0x100003801d", "4", False),
                    ("Microsoft-DotNETCore-SampleProfiler", "0xf00000000000", "4", False)}, start
    end, = agent.records(message_id=SESSION_END_ID)
    assert end["DSAGENT_SESSION_END"] == "stopped" and end["DSAGENT_SESSION_COMPLETE"] == "yes", end

    # explain predicts it: the same providers, the same rule and profiles
    status, verdict = explained(agent, ALICE, target.pid, "--as", "dotnet-trace")
    assert status == 0 and verdict["allowed"], verdict
    assert verdict["reason"] == "granted by rule 'alice-tool' as dotnet-common, dotnet-sampled-thread-time", verdict
    assert provider_set(verdict["providers"]) == sent, (verdict, sent)
    r = dsctl(agent, ALICE, "explain", str(target.pid), "trace", "--as", "dotnet-trace")
    assert r.returncode == 0 and r.stdout == (
        f"trace on {target.pid}: allowed by rule 'alice-tool' as dotnet-common, dotnet-sampled-thread-time\n"
        f"  providers: {CLR_COMMON},{SAMPLER}\n"), r


@test
def each_profile_dotnet_trace_takes_is_admitted_as_itself():
    target = marker_target()
    # trace alone: the sample profiler of dotnet-sampled-thread-time is no stacks session here
    agent = Agent(policy=trace_profiles_policy(STOCK_PROFILES))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    for profile, ipc_command in STOCK_PROFILES.items():
        out = os.path.join(mine, f"{profile}.nettrace")
        r = dotnet_trace(ALICE, port.value, out, "--profile", profile, "--duration", "00:00:00:02")
        assert r.returncode == 0 and "Trace completed" in r.stdout, (profile, r.stdout, port.errors())
        assert traceevent(out)["events"] > 0, profile
        session = proxy_records(agent, DSAGENT_DECISION="allowed")[-1]
        assert (session["DSAGENT_COMMAND"], session["DSAGENT_IPC_COMMAND"]) == ("trace", ipc_command), session
        start = trace_start_records(agent)[-1]
        assert start["DSAGENT_TRACE_PROFILE"] == profile, start
        # and explain, about dsctl's profile of that name, predicts what the tool sent
        status, verdict = explained(agent, ALICE, target.pid, "--profile", profile)
        assert status == 0 and verdict["reason"] == f"granted by rule 'alice-tool' as {profile}", verdict
        assert provider_set(verdict["providers"]) == provider_set(start["DSAGENT_PROVIDERS"]), (verdict, start)
    ends = agent.records(message_id=SESSION_END_ID)
    assert [(e["DSAGENT_SESSION_KIND"], e["DSAGENT_SESSION_END"]) for e in ends] == [("trace", "stopped")] * 5, ends
    assert proxy_records(agent, DSAGENT_DECISION="denied") == []


@test
def a_dotnet_trace_outside_the_granted_profiles_is_refused_saying_why():
    target = marker_target()
    agent = Agent(policy=trace_profiles_policy(PROFILES_RULE))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    watch = AcceptWatch(target.pid)
    refusals = [
        # a profile the rule does not list, refused as that profile
        (["--profile", "gc-verbose"], "rule 'alice-tool' does not allow the trace profile 'gc-verbose'"),
        # a provider no listed profile has
        (["--providers", "System.Threading.Tasks.TplEventSource:0x1:4"],
         "rule 'alice-tool' does not allow the provider 'System.Threading.Tasks.TplEventSource'"),
        # a listed profile with its provider asked for at another level
        (["--profile", "dotnet-common", "--providers", "Microsoft-Windows-DotNETRuntime:0x100003801d:5"],
         "rule 'alice-tool' allows 'Microsoft-Windows-DotNETRuntime' only as its trace_profiles ask for it, not at "
         "keywords 0x100003801d, level 5"),
    ]
    for args, why in refusals:
        out = os.path.join(mine, "refused.nettrace")
        r = dotnet_trace(ALICE, port.value, out, *args, "--duration", "00:00:00:02")
        assert r.returncode != 0 and E_ACCESSDENIED in r.stdout.lower(), (args, r.stdout)
        assert not os.path.exists(out), args
        denied = proxy_records(agent, DSAGENT_DECISION="denied")[-1]
        assert denied["DSAGENT_COMMAND"] == "trace" and why in denied["DSAGENT_REASON"], (args, denied)
        assert why in port.errors(), (args, port.errors())
        # explain says the same of the tool's request
        status, verdict = explained(agent, ALICE, target.pid, "--as", "dotnet-trace", *args)
        assert status == EXIT_DENIED and why in verdict["reason"], (args, verdict)
    assert watch.accepts() == 0, "a refused session reached the runtime"
    assert trace_start_records(agent) == []

    # the same port, the tool's default: admitted
    out = os.path.join(mine, "default.nettrace")
    r = dotnet_trace(ALICE, port.value, out, "--duration", "00:00:00:01")
    assert r.returncode == 0 and "Trace completed" in r.stdout, r.stdout
    start, = trace_start_records(agent)
    assert CLR_COMMON in start["DSAGENT_PROVIDERS"] and SAMPLER in start["DSAGENT_PROVIDERS"], start


# --- the client library ---


@test
def client_library_reads_info_and_environment():
    target = marker_target()
    place_in_unit(target.pid, "dst-proxy-info.service")
    agent = Agent(policy=ALLOWED)
    for name in (str(target.pid), "dst-proxy-info.service"):
        port = Port(agent, ALICE, name)
        status, info, _ = ipc_client(ALICE, "info", port.value)
        assert status == 0, info
        assert info["ProcessId"] == target.ns_pid and "--emit-events 100" in info["CommandLine"], info
        assert info["OperatingSystem"] == "Linux" and info["ManagedEntrypointAssemblyName"] == "DsTestTarget", info
        port.stop()
    records = proxy_records(agent, DSAGENT_COMMAND="info")
    assert [r["DSAGENT_IPC_COMMAND"] for r in records] == ["ProcessInfo3"] * 2, records
    assert all(r["DSAGENT_DECISION"] == "allowed" and r["DSAGENT_RULE"] == "alice-proxy" for r in records), records

    port = Port(agent, ALICE, target.pid)
    status, env, _ = ipc_client(ALICE, "env", port.value, "TMPDIR", "PATH", "NOT_THERE")
    assert status == 0, env
    assert env["count"] >= 2 and env["present"] == {"TMPDIR": True, "PATH": True, "NOT_THERE": False}, env
    assert env["values"]["TMPDIR"] == target.tmpdir, env
    record, = proxy_records(agent, DSAGENT_COMMAND="env")
    assert record["DSAGENT_IPC_COMMAND"] == "ProcessEnvironment" and record["DSAGENT_DECISION"] == "allowed", record


@test
def client_library_dumps_land_where_asked_owned_by_the_caller():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid, cwd=mine)
    for dump_type in ("Normal", "WithHeap", "Triage", "Full"):
        path = os.path.join(mine, f"{dump_type}.core")
        status, out, _ = ipc_client(ALICE, "dump", port.value, dump_type, path)
        assert status == 0 and out["dumped"], (dump_type, out)
        st = os.stat(path)
        assert st.st_uid == uid_of(ALICE) and stat.S_ISREG(st.st_mode) and st.st_size > 4096, (dump_type, st)
        with open(path, "rb") as f:
            assert f.read(4) == b"\x7fELF", dump_type
    records = proxy_records(agent, DSAGENT_COMMAND="dump", DSAGENT_DECISION="allowed")
    assert [r["DSAGENT_IPC_COMMAND"] for r in records] == ["GenerateCoreDump3"] * 4, records

    # a relative path is dsctl's, not the tool's
    elsewhere = make_dir(ALICE, 0o755)
    status, out, _ = ipc_client(ALICE, "dump", port.value, "Normal", "relative.core", cwd=elsewhere)
    assert status == 0, out
    assert os.path.exists(os.path.join(mine, "relative.core")), os.listdir(mine)
    assert os.listdir(elsewhere) == []

    # a file that is there is never replaced, and costs no dump
    before = len(proxy_records(agent, DSAGENT_COMMAND="dump"))
    path = os.path.join(mine, "Normal.core")
    size = os.path.getsize(path)
    status, out, _ = ipc_client(ALICE, "dump", port.value, "Normal", path)
    assert status == 1 and out["error"] == "ServerErrorException", out
    assert os.path.getsize(path) == size
    assert len(proxy_records(agent, DSAGENT_COMMAND="dump")) == before
    # nor is a path the caller cannot write asked for
    closed = make_dir(None, 0o755)
    status, out, _ = ipc_client(ALICE, "dump", port.value, "Normal", os.path.join(closed, "x.core"))
    assert status == 1 and os.listdir(closed) == [], out
    assert len(proxy_records(agent, DSAGENT_COMMAND="dump")) == before


@test
def client_library_trace_sessions_start_and_stop():
    target = marker_target("--report-sessions")
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    # each CollectTracing version the library sends: 2 by default, 3 without stacks, 4 with a rundown
    # keyword of its own, 5 with an event filter
    versions = {(): "CollectTracing2", ("--no-stackwalk",): "CollectTracing3",
                ("--rundown-keyword", "0x8"): "CollectTracing4", ("--event-ids", "1"): "CollectTracing5"}
    for n, (options, name) in enumerate(versions.items()):
        out = os.path.join(mine, f"session-{n}.nettrace")
        status, result, err = ipc_client(ALICE, "trace", port.value, "2", out, MARKERS, *options)
        assert status == 0 and result["end"] == "stopped" and result["bytes"] > 0, (options, result, err)
        assert_markers(out)
        target.process.read_line("eventsource-enabled True")
        target.process.read_line("eventsource-enabled False", timeout=30)  # ended before the client did
        assert proxy_records(agent, DSAGENT_COMMAND="trace")[-1]["DSAGENT_IPC_COMMAND"] == name, name
    ends = agent.records(message_id=SESSION_END_ID)
    assert [e["DSAGENT_SESSION_END"] for e in ends] == ["stopped"] * 4, ends

    # CollectTracing6 (Block buffering) is .NET 11's: "unknown command", as this runtime itself answers
    status, result, _ = ipc_client(ALICE, "trace", port.value, "1", os.path.join(mine, "block.nettrace"), MARKERS,
                                   "--block")
    assert status == 1 and result["error"] == "UnsupportedCommandException", result
    assert not os.path.exists(os.path.join(mine, "block.nettrace"))

    # StopTracing of an id this port never gave out: refused, and the session running is not stopped by it
    tracer = Process(as_user(ALICE, ["dotnet", tool("ipc-client", "tests/tools/ipc-client/build.sh"), "trace",
                                     port.value, "4", os.path.join(mine, "kept.nettrace"), MARKERS]))
    target.process.read_line("eventsource-enabled True")
    # the stray StopTracing comes well within the session's 4 s (a client's start and one answer)
    got = raw(ALICE, port.path, ipc_message(0x02, 0x01, struct.pack("<Q", 0x7F0000001234)))
    assert got["eof"] and ipc_error_hresult(got["reply"]) != 0, got
    assert tracer.proc.wait(timeout=RUNTIME_BOUND) == 0, tracer.proc.stdout.read()
    assert_markers(os.path.join(mine, "kept.nettrace"))


def suspended_target():
    """The test app as SVC, held at startup by DOTNET_DefaultDiagnosticPortSuspend=1 until a ResumeRuntime."""
    tmpdir = make_dir(SVC, 0o700)
    app = harness.target_app()
    process = Process(as_user(SVC, ["env", "-i", "PATH=/usr/bin:/bin", f"TMPDIR={tmpdir}",
                                    "DOTNET_DefaultDiagnosticPortSuspend=1", app, "--emit-events", "10"]))
    pid = process.proc.pid
    wait_for(lambda: any(n.startswith(f"dotnet-diagnostic-{pid}-") for n in os.listdir(tmpdir)),
             what="the suspended runtime's socket")
    return process, pid


@test
def client_library_resumes_a_suspended_runtime():
    process, pid = suspended_target()
    agent = Agent(policy=ALLOWED)
    port = Port(agent, ALICE, pid)
    # a check that nothing happens: held at startup, the runtime neither runs nor exits (a loaded machine can only
    # make it pass wrongly; the resume below is what the case is about)
    time.sleep(1)
    assert process.proc.poll() is None
    status, result, _ = ipc_client(ALICE, "resume", port.value)
    assert status == 0 and result == {"resumed": True}, result
    process.read_line("ready pid=")
    record, = proxy_records(agent, DSAGENT_COMMAND="resume")
    assert record["DSAGENT_IPC_COMMAND"] == "ResumeRuntime" and record["DSAGENT_DECISION"] == "allowed", record


@test
def each_command_the_rule_lacks_is_refused_with_access_denied():
    target = marker_target("--report-sessions")
    agent = Agent(policy=LACKING)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    watch = AcceptWatch(target.pid)
    assert_denied(ipc_client(ALICE, "info", port.value), "info")
    assert_denied(ipc_client(ALICE, "env", port.value), "env")
    for dump_type in ("Normal", "Full"):
        path = os.path.join(mine, f"{dump_type}.core")
        assert_denied(ipc_client(ALICE, "dump", port.value, dump_type, path), f"dump {dump_type}")
        assert not os.path.exists(path), "a refused dump left a file"
    assert_denied(ipc_client(ALICE, "trace", port.value, "1", os.path.join(mine, "t.nettrace"), MARKERS), "trace")
    assert not os.path.exists(os.path.join(mine, "t.nettrace"))
    # ResumeRuntime to a runtime that runs is a no-op, answered OK without a grant, the runtime not asked
    status, out, _ = ipc_client(ALICE, "resume", port.value)
    assert status == 0, out
    assert_denied(ipc_client(ALICE, "perfmap", port.value, "on"), "perfmap")
    r = dotnet_trace(ALICE, port.value, os.path.join(mine, "dt.nettrace"), "--providers", MARKERS,
                     "--duration", "00:00:00:01")
    assert r.returncode != 0 and E_ACCESSDENIED in r.stdout.lower(), r.stdout
    assert watch.accepts() == 0, "a refused request reached the runtime"
    assert trace_start_records(agent) == []

    denied = [r for r in agent.records() if r["DSAGENT_DECISION"] == "denied"]
    assert [r["DSAGENT_IPC_COMMAND"] for r in denied] == [
        "ProcessInfo3", "ProcessEnvironment", "GenerateCoreDump3", "GenerateCoreDump3", "CollectTracing2",
        "EnablePerfMap", "CollectTracing2"], denied
    assert [r["DSAGENT_COMMAND"] for r in denied] == ["info", "env", "dump", "dump", "trace", "perfmap",
                                                      "trace"], denied
    resumes = proxy_records(agent, DSAGENT_IPC_COMMAND="ResumeRuntime")
    assert resumes and all(r["DSAGENT_DECISION"] == "allowed" for r in resumes), resumes
    assert all("no-op" in r["DSAGENT_REASON"] for r in resumes), resumes


@test
def code_injection_needs_a_rule_that_says_so():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    hook = os.path.join(mine, "Hook.dll")
    open(hook, "w").close()
    port = Port(agent, ALICE, target.pid)
    watch = AcceptWatch(target.pid)
    assert_denied(ipc_client(ALICE, "setenv", port.value, "DSAGENT_INJECTED", "1"), "setenv")
    assert_denied(ipc_client(ALICE, "startup-hook", port.value, hook), "startup-hook")
    assert watch.accepts() == 0
    status, env, _ = ipc_client(ALICE, "env", port.value, "DSAGENT_INJECTED")
    assert status == 0 and env["present"] == {"DSAGENT_INJECTED": False}, env
    denied = [r for r in agent.records() if r["DSAGENT_DECISION"] == "denied"]
    assert [(r["DSAGENT_IPC_COMMAND"], r["DSAGENT_COMMAND"]) for r in denied] == [
        ("SetEnvironmentVariable", "setenv"), ("ApplyStartupHook", "startup-hook")], denied

    # the same request under a rule that says allow_code_injection reaches the runtime and takes effect
    agent.write_policy(ALLOWED.replace('"resume"]', '"resume", "setenv"]\nallow_code_injection = true'))
    agent.reload()
    status, out, _ = ipc_client(ALICE, "setenv", port.value, "DSAGENT_INJECTED", "1")
    assert status == 0, out
    status, env, _ = ipc_client(ALICE, "env", port.value, "DSAGENT_INJECTED")
    assert status == 0 and env["present"] == {"DSAGENT_INJECTED": True}, env


@test
def once_ends_the_port_after_the_first_session():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid, "--once")
    # an answer is not a session: the port stays
    status, _, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0
    # a check that nothing happens, which a loaded machine can only make pass wrongly; the trace below, through
    # the same port, shows it stayed all the same
    time.sleep(0.5)
    assert port.proc.poll() is None, port.errors()
    # dotnet-trace's three connections (CollectTracing, ResumeRuntime, StopTracing) all get through
    out = os.path.join(mine, "once.nettrace")
    r = dotnet_trace(ALICE, port.value, out, "--providers", MARKERS, "--duration", "00:00:00:02")
    assert r.returncode == 0 and "Trace completed" in r.stdout, r.stdout
    assert port.wait(30) == 0, port.errors()  # it ends with the session; a bound against a hang
    assert not os.path.exists(port.path)
    assert_markers(out)


# --- the five stock tools, each under a grant of its own command alone ---


def granting(*commands, extra=""):
    """A policy whose one rule grants alice @commands on dst-svc's processes, and nothing else."""
    listed = ", ".join(f'"{c}"' for c in commands)
    return f"""
[agent]
dump_dir = "@DUMP_DIR@"

[[rule]]
name = "alice-tool"
users = ["{ALICE}"]
commands = [{listed}]
targets.users = ["{SVC}"]
{extra}
"""


def stock(name):
    """The stock tool @name 10.0.750501, installed from NuGet with the others (tests/tools/dotnet-tools)."""
    return os.path.join(tool("dotnet-tools", "tests/tools/dotnet-tools/install.sh"), name)


def run_stock(user, name, *args, env=(), timeout=180):
    """The stock tool @name as @user (a clean environment, and @env): its status and everything it printed.
    @timeout: a bound against a hang; the tool's runtime starts, does its one thing (a session of seconds, a heap's
    30 s window at most) and ends."""
    r = subprocess.run(as_user(user, ["env", *env, stock(name), *args]), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return r.returncode, r.stdout


def runtime_named_port(agent, user, target):
    """dsctl port serving @target under the runtime's own socket name in a private $TMPDIR of @user's, where
    the tools that take only -p PID look (dotnet-stack 10 has no --diagnostic-port): that TMPDIR."""
    tmpdir = make_dir(user, 0o700)
    Port(agent, user, target.pid, "--port-path", os.path.join(tmpdir, f"dotnet-diagnostic-{target.pid}-1-socket"))
    return tmpdir


def gcdump_objects(path):
    """The heap's object count, as `dotnet-gcdump report` reads it in the .gcdump at @path."""
    status, out = run_stock("root", "dotnet-gcdump", "report", path, timeout=RUNTIME_BOUND)
    assert status == 0, out
    for line in out.splitlines():
        if line.strip().endswith("GC Heap objects"):
            return int(line.split()[0].replace(",", ""))
    raise AssertionError(f"no object count in the report of {path}: {out}")


@test
def dotnet_counters_collects_under_a_counters_grant_alone():
    target = marker_target()
    agent = Agent(policy=granting("counters"))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    out = os.path.join(mine, "counters.csv")
    status, said = run_stock(ALICE, "dotnet-counters", "collect", "--diagnostic-port", port.value, "-o", out,
                                "--duration", "00:00:00:04")
    assert status == 0, said
    rows = open(out).read()
    assert ",System.Runtime,dotnet.gc." in rows, rows[:2000]
    session = session_records(agent, 1)
    assert [(r["DSAGENT_COMMAND"], r["DSAGENT_DECISION"]) for r in session] == [("counters", "allowed")], session
    start, = trace_start_records(agent)
    assert "EventCounterIntervalSec=1" in start["DSAGENT_PROVIDERS"] and "SessionId=" in start["DSAGENT_PROVIDERS"]
    # its ResumeRuntime after the session: a no-op to a runtime that runs, without a grant of resume
    resume, = proxy_records(agent, DSAGENT_IPC_COMMAND="ResumeRuntime")
    assert resume["DSAGENT_DECISION"] == "allowed" and "no-op" in resume["DSAGENT_REASON"], resume

    # monitor asks ProcessInfo first (the runtime's version): under counters alone, the name for the command line
    monitor = Process(as_user(ALICE, [stock("dotnet-counters"), "monitor", "--diagnostic-port", port.value]))
    wait_for(lambda: len(trace_start_records(agent)) == 2, what="monitor's session")
    # until it has shown a counter of the runtime's, however long a loaded machine makes its first interval
    lines = [monitor.read_line("")]
    while "dotnet.gc" not in lines[-1]:
        lines.append(monitor.read_line(""))
    os.killpg(monitor.proc.pid, signal.SIGINT)
    monitor.proc.wait(timeout=RUNTIME_BOUND)
    shown = "\n".join(lines) + "\n" + monitor.proc.stdout.read()
    assert "[System.Runtime]" in shown and "dotnet.gc" in shown, shown[-2000:]
    assert proxy_records(agent, DSAGENT_DECISION="denied") == []
    info, = proxy_records(agent, DSAGENT_IPC_COMMAND="ProcessInfo3")
    assert info["DSAGENT_DECISION"] == "allowed" and "in place of its command line" in info["DSAGENT_REASON"], info
    status, shown, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0 and shown["ProcessId"] == target.ns_pid and shown["CommandLine"] == "DsTestTarget", shown
    assert shown["ManagedEntrypointAssemblyName"] == "DsTestTarget", shown

    # a provider counter_providers does not name (the default: System.Runtime alone) is refused as counters
    status, said = run_stock(ALICE, "dotnet-counters", "collect", "--diagnostic-port", port.value, "-o", out,
                                "--counters", "System.Runtime,Microsoft.AspNetCore.Hosting",
                                "--duration", "00:00:00:02")
    denied, = proxy_records(agent, DSAGENT_DECISION="denied", DSAGENT_IPC_COMMAND="CollectTracing2")
    assert status != 0 and denied["DSAGENT_COMMAND"] == "counters", (said, denied)
    assert "Microsoft.AspNetCore.Hosting" in denied["DSAGENT_REASON"], denied


@test
def dotnet_counters_is_refused_under_a_rule_without_counters():
    target = marker_target()
    # trace with System.Runtime allowed is not counters: the arguments make it counters' shape, and no trace rule
    # allows provider arguments
    agent = Agent(policy=granting("trace", "resume", extra='trace_providers = ["System.Runtime", '
                                                            '"System.Diagnostics.Metrics"]'))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    watch = AcceptWatch(target.pid)
    status, said = run_stock(ALICE, "dotnet-counters", "collect", "--diagnostic-port", port.value, "-o",
                                os.path.join(mine, "c.csv"), "--duration", "00:00:00:02")
    denied = proxy_records(agent, DSAGENT_DECISION="denied")
    assert status != 0 and [r["DSAGENT_COMMAND"] for r in denied] == ["counters"], (said, denied)
    assert watch.accepts() == 0, "a refused session reached the runtime"


@test
def a_tools_process_info_without_info_names_the_process_as_ps_does():
    """ProcessInfo through the port under a grant of another command than info (here trace): the client library's
    GetProcessInfo() gets the runtime's answer with the name dsctl ps shows the caller in place of the command
    line, whose arguments may carry secrets; under a grant of info, the command line; under ps alone, nothing."""
    target = marker_target("--marker", "secret-in-argv")
    agent = Agent(policy=granting("trace", extra=f'trace_providers = ["{PROVIDER}"]'))
    port = Port(agent, ALICE, target.pid)
    listed, = [p for p in json.loads(harness.dsctl(agent, ALICE, "--json", "ps").stdout) if p["pid"] == target.pid]
    assert listed["commands"] == ["trace"] and listed["name"] == "DsTestTarget", listed

    status, shown, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0, shown
    assert shown["CommandLine"] == listed["name"], shown
    assert shown["ProcessId"] == target.ns_pid and shown["ManagedEntrypointAssemblyName"] == "DsTestTarget", shown
    assert shown["OperatingSystem"] == "Linux" and shown["ClrProductVersionString"].startswith("10."), shown
    assert "secret-in-argv" not in json.dumps(shown), shown
    record, = proxy_records(agent, DSAGENT_IPC_COMMAND="ProcessInfo3")
    assert (record["DSAGENT_COMMAND"], record["DSAGENT_DECISION"], record["DSAGENT_RULE"]) == \
        ("info", "allowed", "alice-tool"), record
    assert "name in place of its command line" in record["DSAGENT_REASON"], record

    # a grant of info: the runtime's command line
    agent.write_policy(granting("trace", "info", extra=f'trace_providers = ["{PROVIDER}"]'))
    agent.reload()
    status, shown, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0 and "--marker secret-in-argv" in shown["CommandLine"], shown
    # ps alone reaches no runtime: refused, as info is
    agent.write_policy(granting("ps"))
    agent.reload()
    assert_denied(ipc_client(ALICE, "info", port.value), "info under ps alone")


@test
def dotnet_gcdump_collects_a_complete_heap_under_a_gcdump_grant_with_default_settings():
    target = Target(SVC)  # quiet: nothing allocates between the two collections
    # the agent's settings as shipped: max_trace_buffer_mb 256, while dotnet-gcdump asks for 1024 MB
    agent = Agent(policy=granting("gcdump"))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    through = os.path.join(mine, "through.gcdump")
    status, said = run_stock(ALICE, "dotnet-gcdump", "collect", "--diagnostic-port", port.value, "-o", through)
    assert status == 0 and os.path.exists(through), said
    sessions = proxy_records(agent, DSAGENT_COMMAND="gcdump", DSAGENT_DECISION="allowed")
    # the type-table flush, then the heap: both as gcdump, and the heap's buffer the agent's bound
    assert len(sessions) == 2, agent.records()
    starts = trace_start_records(agent)
    assert any("0x1980001:5" in r["DSAGENT_PROVIDERS"] for r in starts), starts
    assert all(r.get("DSAGENT_BUFFER_MB", "256") == "256" for r in starts), starts
    assert proxy_records(agent, DSAGENT_DECISION="denied") == []

    # complete: the same objects as dotnet-gcdump's own collection of the same process, straight from its socket.
    # The first collections of a process change its heap (the runtime's EventSource machinery is set up then),
    # so the heap is taken as settled when direct collections before and after the one through the agent agree.
    def direct():
        path = os.path.join(make_dir(None, 0o755), "direct.gcdump")
        status, said = run_stock("root", "dotnet-gcdump", "collect", "-p", str(target.pid), "-o", path,
                                 env=[f"TMPDIR={target.tmpdir}"])
        assert status == 0, said
        return gcdump_objects(path)

    seen = []
    # 4 rounds: a count of tries for the heap to settle, not a time
    for attempt in range(4):
        before = direct()
        status, said = run_stock(ALICE, "dotnet-gcdump", "collect", "--diagnostic-port", port.value, "-o",
                                 os.path.join(mine, f"through-{attempt}.gcdump"))
        assert status == 0, said
        seen.append((before, gcdump_objects(os.path.join(mine, f"through-{attempt}.gcdump")), direct()))
        if seen[-1][0] == seen[-1][2]:
            break
    before, agents, after = seen[-1]
    assert before == after and agents == before and before > 1000, seen


@test
def dotnet_gcdump_is_refused_under_a_rule_without_gcdump():
    target = Target(SVC)
    agent = Agent(policy=granting("trace", "stacks", extra='trace_providers = ["Microsoft-Windows-DotNETRuntime", '
                                                           '"Microsoft-DotNETCore-SampleProfiler"]'))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    out = os.path.join(mine, "refused.gcdump")
    status, said = run_stock(ALICE, "dotnet-gcdump", "collect", "--diagnostic-port", port.value, "-o", out)
    assert status != 0 and not os.path.exists(out), said
    denied = proxy_records(agent, DSAGENT_DECISION="denied")
    assert denied and all(r["DSAGENT_COMMAND"] == "gcdump" for r in denied), denied
    assert trace_start_records(agent) == []


@test
def dotnet_stack_reports_under_a_stacks_grant_alone():
    target = marker_target()
    agent = Agent(policy=granting("stacks"))
    tmpdir = runtime_named_port(agent, ALICE, target)
    status, said = run_stock(ALICE, "dotnet-stack", "report", "-p", str(target.pid), env=[f"TMPDIR={tmpdir}"])
    assert status == 0 and "Thread (0x" in said and "System.Private.CoreLib!" in said, said
    session, = session_records(agent, 1)
    assert (session["DSAGENT_COMMAND"], session["DSAGENT_DECISION"]) == ("stacks", "allowed"), session


@test
def a_stacks_grant_is_no_cpu_profile():
    target = marker_target()
    agent = Agent(policy=granting("stacks"))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    # dotnet-trace asking for what dotnet-stack asks, for a minute: a stacks session, which the agent ends at 10 s.
    # Who ended it is the end record's: duration-limit, where the tool's own minute would have said stopped
    r = dotnet_trace(ALICE, port.value, os.path.join(mine, "samples.nettrace"), "--providers",
                     "Microsoft-DotNETCore-SampleProfiler:0xF00000000000:4", "--duration", "00:00:01:00")
    assert r.returncode == 0 and "Trace completed" in r.stdout, r.stdout
    end, = agent.records(message_id=SESSION_END_ID)
    assert end["DSAGENT_SESSION_KIND"] == "stacks" and end["DSAGENT_SESSION_END"] == "duration-limit", end


@test
def dotnet_stack_is_refused_under_a_rule_without_stacks():
    target = marker_target()
    agent = Agent(policy=granting("gcdump", "counters"))
    tmpdir = runtime_named_port(agent, ALICE, target)
    status, said = run_stock(ALICE, "dotnet-stack", "report", "-p", str(target.pid), env=[f"TMPDIR={tmpdir}"])
    assert status != 0 and "Thread (0x" not in said, said
    denied = proxy_records(agent, DSAGENT_DECISION="denied")
    assert [r["DSAGENT_COMMAND"] for r in denied] == ["stacks"], denied


@test
def dotnet_trace_collects_under_a_trace_grant_without_resume():
    target = marker_target()
    agent = Agent(policy=granting("trace", extra=f'trace_providers = ["{PROVIDER}"]'))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    out = os.path.join(mine, "no-resume.nettrace")
    r = dotnet_trace(ALICE, port.value, out, "--providers", MARKERS, "--duration", "00:00:00:02")
    assert r.returncode == 0 and "Trace completed" in r.stdout, r.stdout
    assert_markers(out)
    resume, = proxy_records(agent, DSAGENT_IPC_COMMAND="ResumeRuntime")
    assert resume["DSAGENT_DECISION"] == "allowed" and resume["DSAGENT_COMMAND"] == "resume", resume
    assert "no-op" in resume["DSAGENT_REASON"] and "DSAGENT_RULE" not in resume, resume

    # under a rule without trace it is refused
    agent.write_policy(granting("counters", "resume"))
    agent.reload()
    out = os.path.join(mine, "refused.nettrace")
    r = dotnet_trace(ALICE, port.value, out, "--providers", MARKERS, "--duration", "00:00:00:01")
    assert r.returncode != 0 and E_ACCESSDENIED in r.stdout.lower(), r.stdout
    denied, = proxy_records(agent, DSAGENT_DECISION="denied")
    assert denied["DSAGENT_COMMAND"] == "trace", denied


@test
def resuming_a_suspended_runtime_through_the_port_still_needs_resume():
    target = Target(SVC, environment={"DOTNET_DefaultDiagnosticPortSuspend": "1"}, wait_ready=False)
    agent = Agent(policy=granting("info"))
    port = Port(agent, ALICE, target.pid)
    got = raw(ALICE, port.path, ipc_message(0x04, 0x01))
    assert ipc_error_hresult(got["reply"]) == int(E_ACCESSDENIED, 16), got
    denied, = proxy_records(agent, DSAGENT_IPC_COMMAND="ResumeRuntime")
    assert denied["DSAGENT_DECISION"] == "denied", denied
    # a check that nothing happens, which a loaded machine can only make pass wrongly; the denial's record says
    # the same
    time.sleep(1)
    assert printed(target) == "", "the runtime was resumed without a grant of resume"

    agent.write_policy(granting("info", "resume"))
    agent.reload()
    got = raw(ALICE, port.path, ipc_message(0x04, 0x01))
    assert got["reply"][16:18] == b"\xff\x00", got
    target.process.read_line("ready")


@test
def dotnet_dump_collects_under_a_dump_grant_alone():
    target = marker_target()
    agent = Agent(policy=granting("dump", extra='dump_types = ["mini"]'))
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    out = os.path.join(mine, "app.dmp")
    status, said = run_stock(ALICE, "dotnet-dump", "collect", "--diagnostic-port", port.value, "--type", "Mini",
                                "-o", out, timeout=DUMP_BOUND)
    assert status == 0 and "Complete" in said, said
    assert os.stat(out).st_uid == uid_of(ALICE) and open(out, "rb").read(4) == b"\x7fELF", out
    record, = proxy_records(agent, DSAGENT_COMMAND="dump")
    assert record["DSAGENT_DECISION"] == "allowed", record

    # a rule without dump: refused, and no file
    agent.write_policy(granting("info", "counters", "gcdump", "stacks"))
    agent.reload()
    refused = os.path.join(mine, "refused.dmp")
    status, said = run_stock(ALICE, "dotnet-dump", "collect", "--diagnostic-port", port.value, "--type", "Mini",
                                "-o", refused, timeout=DUMP_BOUND)
    assert status != 0 and not os.path.exists(refused), said
    denied, = proxy_records(agent, DSAGENT_DECISION="denied")
    assert denied["DSAGENT_COMMAND"] == "dump", denied


# --- dsctl exec: tools that find a process by -p PID ---


def dsctl_exec(agent, user, pid, *command, timeout=240):
    """`dsctl exec PID -- COMMAND...` as @user: its status, standard output and standard error. @timeout: a bound
    against a hang, past the agent's own bounds on what a stock tool asks (a heap's 30 s, a stop's 60 s)."""
    r = subprocess.run(as_user(user, [DSCTL, "--agent-socket", agent.socket, "exec", str(pid), "--", *command]),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr


@test
def dsctl_exec_serves_tools_by_their_pid_under_the_grant_of_their_command():
    target = marker_target()
    agent = Agent(policy=granting("stacks", "gcdump", "counters"))
    mine = make_dir(ALICE, 0o755)

    # dotnet-stack 10 has no --diagnostic-port: -p PID finds the port in the TMPDIR exec gives it
    status, out, err = dsctl_exec(agent, ALICE, target.pid, stock("dotnet-stack"), "report", "-p", str(target.pid))
    assert status == 0 and "Thread (0x" in out and "System.Private.CoreLib!" in out, (status, out, err)
    out_gcdump = os.path.join(mine, "exec.gcdump")
    status, out, err = dsctl_exec(agent, ALICE, target.pid, stock("dotnet-gcdump"), "collect", "-p",
                                  str(target.pid), "-o", out_gcdump)
    assert status == 0 and gcdump_objects(out_gcdump) > 100, (status, out, err)
    csv = os.path.join(mine, "exec.csv")
    status, out, err = dsctl_exec(agent, ALICE, target.pid, stock("dotnet-counters"), "collect", "-p",
                                  str(target.pid), "-o", csv, "--duration", "00:00:00:03")
    assert status == 0 and ",System.Runtime,dotnet." in open(csv).read(), (status, out, err)
    commands = [r["DSAGENT_COMMAND"] for r in proxy_records(agent, DSAGENT_DECISION="allowed")
                if r.get("DSAGENT_IPC_COMMAND", "").startswith("CollectTracing")]
    assert commands == ["stacks", "gcdump", "gcdump", "counters"], commands

    # the command's status is dsctl's; the port and its private directory end with it
    status, out, err = dsctl_exec(agent, ALICE, target.pid, "sh", "-c",
                                  'echo "$TMPDIR"; ls "$TMPDIR"; exit 7')
    tmpdir, name = out.split()
    assert status == 7 and name == f"dotnet-diagnostic-{target.pid}-1-socket", (status, out, err)
    assert not os.path.exists(tmpdir), "the private directory outlived the command"


@test
def dotnet_dump_through_dsctl_exec_leaves_no_hidden_copy_in_dump_dir():
    """dotnet-dump collect through the port used to leave a second copy of every dump in dump_dir (270 MiB on the
    app tried in issue 37), counted against max_use, which the user was never told of. The agent hands dsctl the
    unnamed file instead: the dump is where the tool asked, the user's, and dump_dir holds nothing."""
    target = marker_target()
    agent = Agent(policy=granting("dump", extra='dump_types = ["mini"]'))
    mine = make_dir(ALICE, 0o755)
    out = os.path.join(mine, "exec.dmp")
    status, said, err = dsctl_exec(agent, ALICE, target.pid, stock("dotnet-dump"), "collect", "-p", "{pid}",
                                   "--type", "Mini", "-o", out)
    assert status == 0 and "Complete" in said, (status, said, err)
    st = os.stat(out)
    assert st.st_uid == uid_of(ALICE) and st.st_size > 4096 and open(out, "rb").read(4) == b"\x7fELF", st
    assert os.listdir(agent.dumps) == [], os.listdir(agent.dumps)
    assert "(the agent keeps no copy)" in err, err
    dumped, = agent.records(message_id=harness.DUMP_MESSAGE_ID)
    assert dumped["DSAGENT_DUMP_STORED"] == "no" and "DSAGENT_DUMP_PATH" not in dumped, dumped
    assert int(dumped["DSAGENT_DUMP_SIZE"]) == st.st_size, (dumped, st.st_size)
    listed = dsctl(agent, ALICE, "--json", "dumps")
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed
    # nor does the agent hold the unnamed file once the request is over: its space is free again (the request
    # ends as its reply is written, about when dsctl has read it; the bound is only against a leak)
    def held():
        return [link for link in harness.fd_links(agent.proc.pid) if link.startswith(agent.dumps + "/")]
    wait_for(lambda: not held(), timeout=30, what="the agent to let the handed-over dump go")


@test
def dsctl_exec_says_why_the_agent_refused():
    target = marker_target()
    agent = Agent(policy=granting("gcdump"))
    watch = AcceptWatch(target.pid)
    status, out, err = dsctl_exec(agent, ALICE, target.pid, stock("dotnet-stack"), "report", "-p", str(target.pid))
    assert status != 0 and "Thread (0x" not in out, (status, out, err)
    assert "no rule grants you 'stacks'" in err, err
    assert watch.accepts() == 0


def without_ids(text, *words):
    """@text with request ids and @words (which differ between two questions) blanked out."""
    text = re.sub(r"[0-9a-f]{16}", "<request>", text)
    for w in words:
        text = text.replace(str(w), "<asked>")
    return text


def dsctl_exec_unit(agent, user, unit, *command, json=False, timeout=240):
    """`dsctl exec UNIT -- COMMAND...` as @user: its status, standard output and standard error."""
    r = subprocess.run(as_user(user, [DSCTL, "--agent-socket", agent.socket, *(["--json"] if json else []), "exec",
                                      unit, "--", *command]),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr


@test
def dsctl_exec_names_a_units_process_to_the_tool_in_dsctl_pid():
    """dsctl exec UNIT: the agent names the unit's one .NET process, dsctl says which and hands it to the command
    as $DSCTL_PID, and a stock tool given -p "$DSCTL_PID" works under the grant of its own command alone."""
    target = marker_target()
    place_in_unit(target.pid, "dst-proxy-exec.service")
    agent = Agent(policy=granting("stacks"))
    status, out, err = dsctl_exec_unit(agent, ALICE, "dst-proxy-exec.service", "sh", "-c",
                                       f'exec {stock("dotnet-stack")} report -p "$DSCTL_PID"')
    assert status == 0 and "Thread (0x" in out and "System.Private.CoreLib!" in out, (status, out, err)
    assert f"dst-proxy-exec.service is process {target.pid} ({{pid}}, $DSCTL_PID)" in err, err
    resolved, = proxy_records(agent, DSAGENT_COMMAND="resolve")
    assert resolved["DSAGENT_DECISION"] == "allowed" and resolved["DSAGENT_TARGET_PID"] == str(target.pid), resolved
    served = [r for r in proxy_records(agent, DSAGENT_DECISION="allowed") if r.get("DSAGENT_IPC_COMMAND")]
    assert served and all(r["DSAGENT_TARGET_PID"] == str(target.pid) for r in served), served
    assert [r["DSAGENT_COMMAND"] for r in served if r["DSAGENT_IPC_COMMAND"].startswith("CollectTracing")] == \
        ["stacks"], served


@test
def dsctl_exec_writes_the_pid_for_pid_and_warns_of_an_empty_process_id():
    """The trap of `dsctl exec PID -- dotnet-counters collect -p "$DSCTL_PID"` typed at a shell: the shell expands
    the variable before dsctl sets it, the tool gets -p "" and prints only its help. dsctl says so before the
    tool runs; -p {pid} gets the pid the port serves, for a pid and for a unit's process."""
    target = marker_target()
    place_in_unit(target.pid, "dst-proxy-placeholder.service")
    agent = Agent(policy=granting("counters"))
    mine = make_dir(ALICE, 0o755)
    counters = stock("dotnet-counters")
    warning = "dsctl: exec: warning: dotnet-counters is given -p without a process id (its argument 2)"

    # what the shell made of -p "$DSCTL_PID": the tool fails on its own, after dsctl's warning
    csv = os.path.join(mine, "empty.csv")
    status, out, err = dsctl_exec(agent, ALICE, target.pid, counters, "collect", "-p", "", "-o", csv,
                                  "--duration", "00:00:00:02")
    assert status != 0 and not os.path.exists(csv), (status, out, err)
    assert warning in err and f"write -p {{pid}}, which dsctl replaces with {target.pid}" in err, err
    assert "--process-id" in out + err, "the tool did not say what it could not parse"
    first_line = err.splitlines()[0]
    assert first_line.startswith(warning), f"the warning came after the tool's output: {err}"
    assert [r for r in agent.records() if r.get("DSAGENT_IPC_COMMAND")] == [], "the tool reached the agent"
    # unquoted, -p is followed by the next option; the attached form
    for args in (["-p", "-o", csv], ["--process-id=", "-o", csv]):
        status, out, err = dsctl_exec(agent, ALICE, target.pid, counters, "collect", *args, "--duration",
                                      "00:00:00:01")
        option = "--process-id" if args[0].startswith("--") else "-p"
        assert status != 0 and f"dotnet-counters is given {option} without a process id" in err, (args, status, err)

    # -p {pid}: the pid, and no warning
    csv = os.path.join(mine, "pid.csv")
    status, out, err = dsctl_exec(agent, ALICE, target.pid, counters, "collect", "-p", "{pid}", "-o", csv,
                                  "--duration", "00:00:00:03")
    assert status == 0 and ",System.Runtime,dotnet." in open(csv).read(), (status, out, err)
    assert "warning" not in err, err
    # a unit: {pid} is the process the agent named, within an argument too
    csv = os.path.join(mine, "unit.csv")
    status, out, err = dsctl_exec_unit(agent, ALICE, "dst-proxy-placeholder.service", counters, "collect",
                                       "--process-id={pid}", "-o", csv, "--duration", "00:00:00:03")
    assert status == 0 and ",System.Runtime,dotnet." in open(csv).read(), (status, out, err)
    sessions = session_records(agent, 2)
    assert [(r["DSAGENT_DECISION"], r["DSAGENT_TARGET_PID"]) for r in sessions] == \
        [("allowed", str(target.pid))] * 2, sessions


@test
def dsctl_exec_serves_a_units_process_only_while_it_runs_there():
    """The pid exec named is the one the port serves, and only while it is the unit's: a process that left the
    unit (a restarted service's pid now someone else's) is answered as gone, though the caller may still act
    on it by its pid."""
    target = marker_target()
    place_in_unit(target.pid, "dst-proxy-pinned.service")
    agent = Agent(policy=granting("stacks"))
    flag = os.path.join(make_dir(ALICE, 0o755), "moved")
    stack = stock("dotnet-stack")
    script = (f'{stack} report -p "$DSCTL_PID" >/dev/null && echo first-served; '
              f'while [ ! -e {flag} ]; do sleep 0.1; done; '
              f'{stack} report -p "$DSCTL_PID" >/dev/null 2>&1; echo "second=$?"')
    p = subprocess.Popen(as_user(ALICE, [DSCTL, "--agent-socket", agent.socket, "exec", "dst-proxy-pinned.service",
                                         "--", "sh", "-c", script]),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "first-served", p.stderr.read()
        # the process leaves the unit while dsctl exec still serves the pid it named
        place_in_unit(target.pid, "dst-proxy-elsewhere.service")
        open(flag, "w").close()
        out, err = p.communicate(timeout=240)  # one more stock tool's run; a bound against a hang
    finally:
        if p.poll() is None:
            p.kill()
    assert out.strip() != "second=0" and out.strip().startswith("second="), (out, err)
    assert "no such process" in err, err
    refused = [r for r in agent.records() if r.get("DSAGENT_IPC_COMMAND") and r["DSAGENT_DECISION"] != "allowed"]
    assert refused and refused[-1]["DSAGENT_TARGET_PID"] == str(target.pid), refused
    assert "no longer runs in the unit" in refused[-1]["DSAGENT_REASON"], refused[-1]
    # by its pid the same process is still served: what refused it was the unit alone
    status, out, err = dsctl_exec(agent, ALICE, target.pid, stack, "report", "-p", str(target.pid))
    assert status == 0 and "Thread (0x" in out, (status, out, err)


@test
def dsctl_exec_of_a_unit_the_caller_may_not_see_is_answered_as_a_unit_without_one():
    """A unit whose process the caller may not see: dsctl exec says what it says of a unit that runs none, runs
    nothing, and the process is never asked."""
    hidden = Target(MALLORY)
    place_in_unit(hidden.pid, "dst-proxy-hidden.service")
    agent = Agent(policy=granting("stacks", "info", "gcdump"))
    watch = AcceptWatch(hidden.pid)
    for json in (False, True):
        a = dsctl_exec_unit(agent, ALICE, "dst-proxy-hidden.service", "echo", "ran", json=json)
        b = dsctl_exec_unit(agent, ALICE, "dst-proxy-none.service", "echo", "ran", json=json)
        assert a[0] == b[0] == harness.EXIT_NO_SUCH_PROCESS, (a, b)
        assert "ran" not in a[1] + b[1], (a, b)
        for x, y in ((a[1], b[1]), (a[2], b[2])):
            assert without_ids(x, "dst-proxy-hidden.service") == without_ids(y, "dst-proxy-none.service"), (x, y)
        for text in a[1:]:
            assert str(hidden.pid) not in text and MALLORY not in text, text
    assert watch.accepts() == 0
    # its owner is told the process, and the command runs
    status, out, err = dsctl_exec_unit(agent, MALLORY, "dst-proxy-hidden.service", "sh", "-c", 'echo "$DSCTL_PID"')
    assert status == 0 and out.strip() == str(hidden.pid), (status, out, err)


# --- hostile clients ---


@test
def malformed_requests_get_an_error_or_a_close_and_the_port_goes_on():
    target = marker_target()
    agent = Agent(policy=ALLOWED)
    # a test hook makes dsctl port's wait for a tool's request 5 s, where the real one (30 s) would hold the test
    port = Port(agent, ALICE, target.pid, env=["DSCTL_TEST_TOOL_WAIT_SEC=5"])
    watch = AcceptWatch(target.pid)
    info = ipc_message(0x04, 0x08)
    cases = [
        ("bad magic", b"DOTNET_IPC_V2\0" + info[14:], [HR_BAD_ENCODING, HR_UNKNOWN_MAGIC]),
        ("size below the header", ipc_message(0x04, 0x08, size=10), [HR_BAD_ENCODING]),
        ("unknown command set", ipc_message(0x05, 0x00), [HR_UNKNOWN_COMMAND]),
        ("unknown command id", ipc_message(0x04, 0x7F), [HR_UNKNOWN_COMMAND]),
        ("server set as a request", ipc_message(0xFF, 0x00), [HR_UNKNOWN_COMMAND, HR_BAD_ENCODING]),
        ("a payload where none belongs", ipc_message(0x04, 0x08, b"\0" * 8), [HR_BAD_ENCODING]),
        ("a string without its NUL", ipc_message(0x04, 0x07, struct.pack("<I", 2) + "ab".encode("utf-16le")),
         [HR_BAD_ENCODING]),
        ("a string longer than the payload", ipc_message(0x04, 0x07, struct.pack("<I", 1000) + b"\0\0"),
         [HR_BAD_ENCODING]),
        ("oversized", ipc_message(0x04, 0x07, b"\x01" * (65535 - 20)), [HR_BAD_ENCODING]),
    ]
    for what, data, hresults in cases:
        got = raw(ALICE, port.path, data)
        assert got["eof"], (what, got)
        if got["reply"]:
            assert ipc_error_hresult(got["reply"]) in hresults, (what, hex(ipc_error_hresult(got["reply"])))
    assert watch.accepts() == 0, "a malformed request reached the runtime"

    # a size field beyond what is sent: the rest never comes, and the port does not wait for it forever
    got = raw(ALICE, port.path, ipc_message(0x04, 0x08, size=100), "--shutdown")
    assert got["eof"] and (got["reply"] == b"" or ipc_error_hresult(got["reply"]) == HR_BAD_ENCODING), got
    # ... nor on a client that says nothing more and keeps its side open (dsctl port's wait, 5 s here): the port
    # closes (eof, where the client's own 45 s would not be) after that wait, not its real one of 30 s. From 4.5 s
    # (this clock starts before the port's) to 30 s: 25 s for a loaded machine's start of the client and late wake-up
    started = time.monotonic()
    got = raw(ALICE, port.path, ipc_message(0x04, 0x08, size=100), timeout=45)
    assert got["eof"] and 4.5 < time.monotonic() - started < 30, (got, time.monotonic() - started)

    # two messages on one connection: the first is answered, the second never read
    got = raw(ALICE, port.path, info + info)
    assert got["eof"], got
    reply = got["reply"]
    size, command_set, command_id = struct.unpack("<HBB", reply[14:18])
    assert reply[:14] == IPC_MAGIC and (command_set, command_id) == (0xFF, 0x00) and len(reply) == size, reply[:20]
    assert len(proxy_records(agent, DSAGENT_IPC_COMMAND="ProcessInfo3")) == 1

    # the port and the agent serve the next tool as ever
    status, result, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0 and result["ProcessId"] == target.ns_pid, result
    assert port.proc.poll() is None and agent.proc.poll() is None


@test
def the_agent_restarting_mid_stream_ends_the_session_and_the_port_goes_on():
    target = marker_target("--report-sessions")
    agent = Agent(policy=ALLOWED)
    mine = make_dir(ALICE, 0o755)
    port = Port(agent, ALICE, target.pid)
    tracer = Process(as_user(ALICE, ["dotnet", tool("ipc-client", "tests/tools/ipc-client/build.sh"), "trace",
                                     port.value, "30", os.path.join(mine, "cut.nettrace"), MARKERS]))
    target.process.read_line("eventsource-enabled True")
    # mid-stream: the app writes 100 markers a second into the session from now on; 1 s of the 30 s asked, so a
    # loaded machine still kills the agent long before the session would end
    time.sleep(1)
    agent.proc.kill()
    agent.proc.wait()
    # the runtime's session ends with the agent's connection to it (at once: a bound against a hang)
    target.process.read_line("eventsource-enabled False", timeout=30)
    # the tool sees its stream end early; its StopTracing names a session the port no longer has
    assert tracer.proc.wait(timeout=RUNTIME_BOUND) in (0, 1)

    # a new agent on the same socket: the port, still running, serves the next tool through it
    if os.path.exists(agent.socket):
        os.unlink(agent.socket)
    again = subprocess.Popen([DSAGENT, "--listen", agent.socket, "--listen-mode", "0666", "--audit", "stderr",
                              "--policy", agent.policy_path, "--runtime-dir", agent.runtime_dir], stdin=subprocess.DEVNULL, stdout=agent.log,
                             stderr=agent.log, start_new_session=True)
    agent.proc = again
    wait_for(lambda: os.path.exists(agent.socket), what="the new agent's socket")
    assert port.proc.poll() is None, port.errors()
    status, result, _ = ipc_client(ALICE, "info", port.value)
    assert status == 0 and result["ProcessId"] == target.ns_pid, result
    out = os.path.join(mine, "after.nettrace")
    r = dotnet_trace(ALICE, port.value, out, "--providers", MARKERS, "--duration", "00:00:00:01")
    assert r.returncode == 0, r.stdout
    assert_markers(out)


if __name__ == "__main__":
    run_tests()
