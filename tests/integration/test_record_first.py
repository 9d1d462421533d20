#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The record comes before the act: with the audit output's reader stopped and the agent's queue full, no
command that changes or reads a process sends its runtime anything (the runtime accepts no connection, its
environment and its state stay as they were, no file appears); an act that began while there was room is
recorded whole, and its client told it succeeded, however full the queue is when it ends; when the reader
comes back, the records add up to the decisions (issue 35, item 2).

The stall is real: the agent's audit stream (--audit json, its stdout) is a 4 KiB pipe the test holds unread,
and DSAGENT_TEST_AUDIT_QUEUE makes the queue behind it 8 records long (the real bound is 1024). On the code
before, every one of these commands reached the runtime and then answered "audit unavailable"."""
import fcntl
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import uuid

import harness
# harness.scope, never a name imported from it: run_tests() makes a new scope for each case
from harness import (ALICE, DSCTL, DUMP_BOUND, HANG_BOUND, HERE, OPS, PYTHON, RUNTIME_BOUND, SVC, AcceptWatch, Agent,
                     FakeRuntime, Process, Target, as_user, dsctl, make_dir, place_in_unit, printed, request_id_of,
                     run_tests, test, tool, wait_for)

EXIT_AUDIT_UNAVAILABLE = 16
REQUEST_ID = harness.REQUEST_MESSAGE_ID
DUMP_ID = harness.DUMP_MESSAGE_ID
AUDIT_GAP_ID = "e7a3a2ffe6c543d2a42572e8d2074d1b"
SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
SESSION_END_ID = "1c5ee471f818453b8c7bac25ac2e872f"
PORT_ID = "92ba7a9ad3f54f1995e1add7dea5ceee"
COLLECT_ID = "7e4f2962cff7436e853607d2fcf710fe"
F_SETPIPE_SZ = 1031
QUEUE = 8
# no pid is this high (pid_max is at most 2^22): each such request is decided and recorded "no such process"
ABSENT_PID = "4999999"
IPC_MAGIC = b"DOTNET_IPC_V1\0"
PROVIDER = "Dsagent-TestTarget"
# what the agent's test hook says when it holds no room, and what it holds none for does not begin
NO_ROOM = re.compile(r"test-hook: no room for (\d+) audit records")


class StalledAudit:
    """An agent whose audit records (--audit json, on its stdout) go to a pipe that is read until fill() and then
    nobody reads until resume(): what a test asks while it sets up (a listing polled until a table watches, say)
    can never fill the queue before the test means it to. Its own diagnostics and test-hook notes go to its log,
    as ever."""

    def __init__(self, policy, *args, env=None):
        r, w = os.pipe2(os.O_CLOEXEC)
        fcntl.fcntl(w, F_SETPIPE_SZ, 4096)  # a page: full after a few records
        self.items, self.lock = [], threading.Lock()
        self.reading = threading.Event()
        self.reading.set()
        threading.Thread(target=self._read, args=(r,), daemon=True).start()
        self.agent = Agent(*args, policy=policy, audit="json", audit_fd=w,
                           env=dict({"DSAGENT_TEST_AUDIT_QUEUE": str(QUEUE)}, **(env or {})))
        os.close(w)
        # the policy must load: under a broken one ALICE would be refused for that, not for the record
        check = subprocess.run([harness.DSAGENT, "--check-policy", self.agent.policy_path], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        assert check.returncode == 0, check.stdout
        self.answered = []  # the request ids dsctl reported for requests decided and recorded
        self.refused = 0    # the requests answered "audit unavailable"

    def _read(self, fd):
        """The reader: whole lines into items, while self.reading is set (a read under way when fill() clears it
        takes what it gets, and fill() goes on until the queue is full all the same)."""
        pending = b""
        with open(fd, "rb", buffering=0, closefd=True) as pipe:
            while True:
                self.reading.wait()
                chunk = pipe.read(65536)
                if not chunk:
                    return
                *lines, pending = (pending + chunk).split(b"\n")
                with self.lock:
                    self.items += [json.loads(line) for line in lines if line.startswith(b"{")]

    def fill(self):
        """The reader stops; requests as root until one is refused "audit unavailable": the pipe and the queue are
        full. 400: a count far past the few dozen records a page of pipe and the queue take (their sizes decide it,
        not time); each answered at once, so HANG_BOUND only tells an agent blocked in write(), which never
        answers."""
        self.reading.clear()
        for _ in range(400):
            r = dsctl(self.agent, "root", "info", ABSENT_PID, timeout=HANG_BOUND)
            assert r.returncode in (harness.EXIT_NO_SUCH_PROCESS, EXIT_AUDIT_UNAVAILABLE), r
            if r.returncode == EXIT_AUDIT_UNAVAILABLE:
                self.refused += 1
                return
            self.answered.append(request_id_of(r))
        raise AssertionError("the audit queue never filled")

    def refused_now(self, r, what):
        """@r (a dsctl result) was answered "audit unavailable", and is counted so."""
        assert r.returncode == EXIT_AUDIT_UNAVAILABLE and "audit unavailable" in r.stderr, (what, r)
        self.refused += 1

    def resume(self):
        """The reader comes back: it reads every record from now on."""
        self.reading.set()

    def records(self, message_id=None):
        with self.lock:
            return [r for r in self.items if message_id is None or r.get("MESSAGE_ID") == message_id]

    def notes(self):
        return NO_ROOM.findall(open(self.agent.log_path).read())

    def wait_accounted(self):
        """Every refusal counted, and every answered request's record there: records equal decisions. Returns
        the request records."""
        def counted():
            gaps = self.records(AUDIT_GAP_ID)
            return sum(int(g["DSAGENT_AUDIT_REFUSED"]) for g in gaps) >= self.refused and gaps
        # the queue drains within ms of the reader's return; 60 s only ends a hang
        gaps = wait_for(counted, timeout=60, what="the record counting the refused requests")
        ids = lambda: [r["DSAGENT_REQUEST_ID"] for r in self.records(REQUEST_ID)]
        wait_for(lambda: set(self.answered) <= set(ids()), timeout=60, what="every answered request's record")
        assert sum(int(g["DSAGENT_AUDIT_REFUSED"]) for g in gaps) == self.refused, (gaps, self.refused)
        for request_id in self.answered:
            assert ids().count(request_id) == 1, (request_id, ids())
        return self.records(REQUEST_ID)


def granted(*commands, extra=""):
    """A policy under which ALICE may do @commands to SVC's processes (none: root alone acts)."""
    head = '[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 10000\nmax_request_burst = 10000\n'
    if not commands:
        return head
    quoted = ", ".join(f'"{c}"' for c in commands)
    dumps = 'dump_types = ["mini", "heap", "triage", "full"]\n' if "dump" in commands else ""
    providers = (f'trace_providers = ["{PROVIDER}", "Microsoft-Windows-DotNETRuntime", '
                 f'"Microsoft-DotNETCore-SampleProfiler"]\n' if "trace" in commands else "")
    return (f'{head}\n[[rule]]\nname = "alice-all"\nusers = ["{ALICE}"]\ncommands = [{quoted}]\n'
            f'targets.users = ["{SVC}"]\n{dumps}{providers}{extra}')


def files_in(directory):
    return os.listdir(directory) if os.path.isdir(directory) else []


def no_act_records(stalled, *commands):
    """No record says one of @commands was allowed, and no session started."""
    allowed = [r for r in stalled.records(REQUEST_ID)
               if r.get("DSAGENT_COMMAND") in commands and r["DSAGENT_DECISION"] == "allowed"]
    assert not allowed, allowed
    assert not stalled.records(SESSION_START_ID), stalled.records(SESSION_START_ID)
    assert not stalled.records(DUMP_ID), stalled.records(DUMP_ID)


# --- dsctl port (test_proxy.py's, in short) ---

class Port:
    """`dsctl port PID` as @user, until the test ends; self.value is the --diagnostic-port it printed."""

    def __init__(self, agent, user, pid):
        argv = as_user(user, [DSCTL, "--agent-socket", agent.socket, "port", str(pid)])
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        harness.scope.callback(self.stop)
        self.value = self.proc.stdout.readline().strip()
        assert self.value.endswith(",connect"), self.value
        self.path = self.value[:-len(",connect")]

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait()


def ipc_client(user, *args):
    """The client library's program (tests/tools/ipc-client) as @user: (exit status, its JSON object)."""
    dll = tool("ipc-client", "tests/tools/ipc-client/build.sh")
    # 300 s: a bound against a hang; its runtime starts and asks once
    r = subprocess.run(as_user(user, ["dotnet", dll, *args]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=300)
    lines = r.stdout.strip().splitlines()
    assert lines, r
    return r.returncode, json.loads(lines[-1])


def ipc_string(text):
    units = (text + "\0").encode("utf-16-le")
    return struct.pack("<I", len(units) // 2) + units


def ipc_message(command_set, command_id, payload):
    return IPC_MAGIC + struct.pack("<HBBH", 20 + len(payload), command_set, command_id, 0) + payload


def raw(user, path, data):
    """port_client.py as @user: what came back for @data sent to the port."""
    # bounds against a hang: 30 s on each read (the port answers at once), 60 s more for the client's start
    r = subprocess.run(as_user(user, [PYTHON, os.path.join(HERE, "port_client.py"), path, data.hex(),
                                      "--timeout", "30"]), stdout=subprocess.PIPE, text=True, timeout=90)
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def error_hresult(reply_hex):
    reply = bytes.fromhex(reply_hex)
    assert len(reply) == 24 and reply[16:18] == b"\xff\xff", reply
    return struct.unpack("<I", reply[20:24])[0]


# --- commands refused before the runtime hears of them ---

@test
def setenv_through_the_port_reaches_no_runtime_while_no_record_can_be_held():
    """The client library's SetEnvironmentVariable through dsctl port, granted: with the queue full the runtime
    accepts no connection, and once the reader is back the runtime's own environment (ProcessEnvironment) has no
    trace of the variable. Before, the runtime applied it and the tool was told "audit unavailable ... not carried
    out"."""
    target = Target(SVC)
    stalled = StalledAudit(granted("env", "setenv", extra="allow_code_injection = true\n"))
    port = Port(stalled.agent, ALICE, target.pid)
    stalled.fill()
    watch = AcceptWatch(target.pid)
    status, out = ipc_client(ALICE, "setenv", port.value, "DSAGENT_INJECTED", "1")
    assert status != 0 and "error" in out, out
    stalled.refused += 1
    accepted = watch.accepts()
    watch.stop()

    stalled.resume()
    stalled.wait_accounted()
    status, env = ipc_client(ALICE, "env", port.value, "DSAGENT_INJECTED")
    assert status == 0 and env["present"] == {"DSAGENT_INJECTED": False}, f"the runtime set the variable: {env}"
    assert accepted == 0, f"the runtime accepted {accepted} connections while no record could be held"
    no_act_records(stalled, "setenv")


@test
def startup_hooks_and_profilers_through_the_port_reach_no_runtime_while_no_record_can_be_held():
    """ApplyStartupHook (the client library's), AttachProfiler and StartupProfiler, granted: with the queue full
    the runtime accepts no connection, and the app runs on. Before, each reached the runtime (a startup hook
    that is not there made the app exit) and the tool was told "audit unavailable"."""
    target = Target(SVC)
    stalled = StalledAudit(granted("info", "startup-hook", "profiler", extra="allow_code_injection = true\n"))
    hook = os.path.join(make_dir(ALICE, 0o755), "Hook.dll")  # not there
    port = Port(stalled.agent, ALICE, target.pid)
    stalled.fill()
    watch = AcceptWatch(target.pid)
    accepted = {}
    clsid = uuid.uuid4().bytes
    # the hook last: on the code before, the runtime asked to load one that is not there ended the app
    for name, message in (("AttachProfiler", ipc_message(0x03, 0x01, struct.pack("<I", 5000) + clsid +
                                                         ipc_string("/nonexistent/profiler.so") +
                                                         struct.pack("<I", 0))),
                          ("StartupProfiler", ipc_message(0x03, 0x02, clsid + ipc_string("/nonexistent/p.so")))):
        got = raw(ALICE, port.path, message)
        assert got["connected"] and error_hresult(got["reply"]) != 0, (name, got)
        stalled.refused += 1
        accepted[name] = watch.accepts() - sum(accepted.values())
    status, out = ipc_client(ALICE, "startup-hook", port.value, hook)
    assert status != 0 and "error" in out, out
    stalled.refused += 1
    accepted["ApplyStartupHook"] = watch.accepts() - sum(accepted.values())
    watch.stop()
    assert not any(accepted.values()), f"the runtime accepted connections while no record could be held: {accepted}"

    stalled.resume()
    stalled.wait_accounted()
    r = dsctl(stalled.agent, ALICE, "info", str(target.pid))
    assert r.returncode == 0 and target.process.proc.poll() is None, r
    no_act_records(stalled, "startup-hook", "profiler")


@test
def resume_reaches_no_runtime_while_no_record_can_be_held():
    """A runtime suspended at startup stays suspended: dsctl resume is answered "audit unavailable", the runtime
    accepts nothing, and once the reader is back its ProcessInfo still shows its executable alone (no managed code
    ran). Before, the runtime was resumed and dsctl exited 16."""
    target = Target(SVC, environment={"DOTNET_DefaultDiagnosticPortSuspend": "1"}, wait_ready=False)
    stalled = StalledAudit(granted("info", "resume"))
    stalled.fill()
    watch = AcceptWatch(target.pid)
    stalled.refused_now(dsctl(stalled.agent, "root", "resume", str(target.pid)), "root's resume")
    stalled.refused_now(dsctl(stalled.agent, ALICE, "resume", str(target.pid)), "alice's resume")
    accepted = watch.accepts()
    watch.stop()

    stalled.resume()
    stalled.wait_accounted()
    r = dsctl(stalled.agent, "root", "--json", "info", str(target.pid))
    assert r.returncode == 0, r
    info = json.loads(r.stdout)
    assert info["command_line"] == info["exe"], f"the runtime runs its managed code: {info}"
    assert "ready" not in printed(target), "the app ran"
    assert accepted == 0, f"the runtime accepted {accepted} connections while no record could be held"
    no_act_records(stalled, "resume")
    # it waits for a resume, which works once its record can be written
    r = dsctl(stalled.agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0, r
    target.process.read_line("ready pid=")


@test
def a_dump_reaches_no_runtime_while_no_record_can_be_held():
    """Root's and a granted user's dumps, and a tool's GenerateCoreDump through dsctl port: answered "audit
    unavailable", the runtime accepting no connection, no file anywhere. Before, the runtime wrote its core and
    dsctl exited 16."""
    target = Target(SVC)
    stalled = StalledAudit(granted("dump"))
    mine = make_dir(ALICE, 0o755)
    port = Port(stalled.agent, ALICE, target.pid)
    stalled.fill()
    watch = AcceptWatch(target.pid)
    accepted = {}
    stalled.refused_now(dsctl(stalled.agent, "root", "dump", str(target.pid), timeout=DUMP_BOUND), "root's dump")
    accepted["root's dump"] = watch.accepts()
    stalled.refused_now(dsctl(stalled.agent, ALICE, "dump", str(target.pid), "--type", "full", "-o",
                              os.path.join(mine, "full.core"), timeout=DUMP_BOUND), "alice's dump")
    accepted["alice's dump"] = watch.accepts() - sum(accepted.values())
    status, out = ipc_client(ALICE, "dump", port.value, "Normal", os.path.join(mine, "tool.core"))
    assert status != 0 and "error" in out, out
    stalled.refused += 1
    accepted["GenerateCoreDump"] = watch.accepts() - sum(accepted.values())
    watch.stop()
    assert not any(accepted.values()), f"the runtime accepted connections while no record could be held: {accepted}"
    assert files_in(stalled.agent.dumps) == [] and files_in(mine) == [], (files_in(stalled.agent.dumps), files_in(mine))

    stalled.resume()
    stalled.wait_accounted()
    no_act_records(stalled, "dump")


@test
def sessions_and_reads_reach_no_runtime_while_no_record_can_be_held():
    """trace, counters, stacks, gcdump, exceptions, logs, a tool's CollectTracing through dsctl port, and the
    reads info and env: each answered "audit unavailable", the runtime accepting no connection, no session
    started. Before, the runtime started each session (or answered the read) and dsctl exited 16."""
    target = Target(SVC, args=("--emit-events", "10"))
    stalled = StalledAudit(granted("info", "env", "trace", "counters", "stacks", "gcdump", "exceptions", "logs"))
    mine = make_dir(ALICE, 0o755)
    port = Port(stalled.agent, ALICE, target.pid)
    stalled.fill()
    watch = AcceptWatch(target.pid)
    pid = str(target.pid)
    asked = [("trace", pid, "--providers", PROVIDER, "--duration", "3", "-o", os.path.join(mine, "t.nettrace")),
             ("counters", pid, "--duration", "3"), ("stacks", pid),
             ("gcdump", pid, "-o", os.path.join(mine, "heap.gcdump")), ("exceptions", pid, "--duration", "3"),
             ("logs", pid, "--duration", "3"), ("info", pid), ("env", pid)]
    accepted = {}
    for args in asked:
        stalled.refused_now(dsctl(stalled.agent, ALICE, *args, timeout=RUNTIME_BOUND), args[0])
        accepted[args[0]] = watch.accepts() - sum(accepted.values())
    status, out = ipc_client(ALICE, "trace", port.value, "1", os.path.join(mine, "tool.nettrace"),
                             f"{PROVIDER}:0xFFFFFFFFFFFFFFFF:4")
    assert status != 0 and "error" in out, out
    stalled.refused += 1
    accepted["CollectTracing"] = watch.accepts() - sum(accepted.values())
    watch.stop()
    assert not any(accepted.values()), f"the runtime accepted connections while no record could be held: {accepted}"
    assert [f for f in os.listdir(mine) if os.path.getsize(os.path.join(mine, f)) > 0] == [], os.listdir(mine)

    stalled.resume()
    stalled.wait_accounted()
    no_act_records(stalled, "trace", "counters", "stacks", "gcdump", "exceptions", "logs", "info", "env")


# --- acts that began with their room held ---

@test
def a_session_that_began_is_recorded_whole_and_told_so_though_the_queue_filled_meanwhile():
    """A trace started while the reader read; the queue filled while it ran; stopped with Ctrl-C, dsctl exits 0
    with the whole trace, and the session's start, its end and the request's record all arrive once the reader
    is back. Before, dsctl exited 16 after the runtime had streamed the trace."""
    target = Target(SVC, args=("--emit-events", "100"))
    stalled = StalledAudit(granted())
    out = os.path.join(make_dir(SVC), "held.nettrace")
    client = Process(as_user(SVC, [DSCTL, "--socket", stalled.agent.socket, "trace", str(target.pid), "-o", out,
                                   "--providers", PROVIDER]))
    client.read_line("dsctl: tracing")
    stalled.fill()
    os.killpg(client.proc.pid, signal.SIGINT)
    assert client.proc.wait(timeout=RUNTIME_BOUND) == 0, client.proc.stdout.read()
    with open(out, "rb") as f:
        assert f.read(8) == b"Nettrace", "not a trace"

    stalled.resume()
    records = stalled.wait_accounted()
    start = wait_for(lambda: stalled.records(SESSION_START_ID), what="the session's start")
    end = wait_for(lambda: stalled.records(SESSION_END_ID), what="the session's end")
    assert len(start) == 1 and len(end) == 1, (start, end)
    assert end[0]["DSAGENT_SESSION_END"] == "stopped" and int(end[0]["DSAGENT_SESSION_BYTES"]) == os.path.getsize(out)
    request = [r for r in records if r.get("DSAGENT_COMMAND") == "trace"]
    assert len(request) == 1 and request[0]["DSAGENT_DECISION"] == "allowed", request
    assert request[0]["DSAGENT_REQUEST_ID"] == start[0]["DSAGENT_REQUEST_ID"] == end[0]["DSAGENT_REQUEST_ID"]


@test
def a_dump_that_began_is_published_recorded_and_told_so_though_the_queue_filled_meanwhile():
    """Root's dump of a runtime that writes its core only when the test says (fake_runtime.py gated): the queue
    fills while the core is written; dsctl exits 0 with the file, which is there, and its dump record and the
    request's arrive once the reader is back. Before, the core was written, removed, and dsctl exited 16."""
    fake = FakeRuntime("gated")
    stalled = StalledAudit(granted(), "--dump-min-rate", "0", "--dump-stall-timeout", "600")
    client = Process([DSCTL, "--socket", stalled.agent.socket, "dump", str(fake.pid)])
    # the fake writes its first byte as it is asked, within ms; bounds against a hang
    wait_for(lambda: os.path.exists(fake.log + ".trickling"), timeout=60, what="the core's first byte")
    stalled.fill()
    open(fake.log + ".go", "w").close()
    assert client.proc.wait(timeout=120) == 0, client.proc.stdout.read()  # the rest of a small core, at once
    output = client.proc.stdout.read()
    path = re.search(r"(/\S+/dump\.\S+)", output).group(1)
    assert os.path.dirname(path) == stalled.agent.dumps and harness.is_elf_core(path), output

    stalled.resume()
    records = stalled.wait_accounted()
    dump = wait_for(lambda: stalled.records(DUMP_ID), what="the dump's record")
    assert len(dump) == 1 and dump[0]["DSAGENT_DUMP_PATH"] == path, dump
    assert int(dump[0]["DSAGENT_DUMP_SIZE"]) == os.path.getsize(path), dump
    request = [r for r in records if r.get("DSAGENT_COMMAND") == "dump"]
    assert len(request) == 1 and request[0]["DSAGENT_DECISION"] == "allowed", request
    assert request[0]["DSAGENT_REQUEST_ID"] == dump[0]["DSAGENT_REQUEST_ID"], (request, dump)


@test
def a_session_the_agent_stops_under_is_recorded_to_its_end():
    """The agent stops while a trace runs: the room its records held is used before it goes, so the session's end
    (cancelled) and the request's record (failed: the agent stopped) follow its start. Before, the start record
    was the last word of a session the runtime had run."""
    target = Target(SVC, args=("--emit-events", "100"))
    agent = Agent()
    out = os.path.join(make_dir(SVC), "cut.nettrace")
    client = Process(as_user(SVC, [DSCTL, "--socket", agent.socket, "trace", str(target.pid), "-o", out,
                                   "--providers", PROVIDER]))
    client.read_line("dsctl: tracing")
    agent.stop()
    start, = agent.records(SESSION_START_ID)
    ends = agent.records(SESSION_END_ID)
    assert len(ends) == 1 and ends[0]["DSAGENT_SESSION_END"] == "cancelled", ends
    request = [r for r in agent.records() if r.get("DSAGENT_REQUEST_ID") == start["DSAGENT_REQUEST_ID"]]
    assert len(request) == 1 and request[0]["DSAGENT_DECISION"] == "failed", request
    assert "the agent stopped" in request[0]["DSAGENT_REASON"], request


# --- the agent's own acts ---

def run_dir():
    """A directory outside /tmp (a target with a /tmp of its own still sees it), root's, 0755."""
    d = tempfile.mkdtemp(prefix="dst-recordfirst-", dir="/run")
    os.chmod(d, 0o755)
    harness.scope.callback(shutil.rmtree, d, ignore_errors=True)
    return d


@test
def an_on_start_trace_does_not_begin_while_no_record_can_be_held():
    """A runtime suspended at startup on a [[port]] that an [[on_start]] covers, arriving while the queue is
    full: the agent holds no room for the trace's records, so it asks the runtime for no session and does not
    resume it; the port record says why, and the runtime waits for a resume as any untraced one does. Before,
    the trace started, its records were dropped, and the app ran."""
    path = os.path.join(run_dir(), "app.sock")
    policy = granted("info", "resume") + (
        f'\n[[port]]\npath = "{path}"\nusers = ["{SVC}"]\nsuspend_timeout = "0"\n'
        f'\n[[on_start]]\nname = "startup"\ntargets.users = ["{SVC}"]\ntrace_providers = ["{PROVIDER}"]\n'
        f'duration = "2s"\nreaders = ["{ALICE}"]\n')
    stalled = StalledAudit(policy)
    wait_for(lambda: os.path.lexists(path), what="the port")
    stalled.fill()
    target = Target(SVC, environment={"DOTNET_DiagnosticPorts": f"{path},connect,suspend"}, wait_ready=False,
                    args=("--startup-marker",))
    # the agent's word that it held no room, or (on the code before) the app resumed by the trace it started
    seen = []
    # the runtime starts, connects to the port and is decided on: a runtime's start, RUNTIME_BOUND
    wait_for(lambda: stalled.notes() or seen.append(printed(target)) or "ready" in "".join(seen),
             timeout=RUNTIME_BOUND, what="the on_start decision")
    assert "ready" not in "".join(seen + [printed(target)]), "the app was resumed: its startup trace began"
    assert stalled.notes() == ["3"], stalled.notes()

    stalled.resume()
    stalled.wait_accounted()
    mine = lambda rs: [r for r in rs if r.get("DSAGENT_TARGET_PID") == str(target.pid)]
    skipped = wait_for(lambda: [r for r in mine(stalled.records(PORT_ID))
                                if r["DSAGENT_PORT_EVENT"] == "on-start-skipped"], timeout=60,
                       what="the record of the trace not started")  # queued: ms once the reader reads
    assert "audit output takes no records" in skipped[0]["DSAGENT_REASON"], skipped
    assert not mine(stalled.records(SESSION_START_ID)), "a startup trace began"
    r = dsctl(stalled.agent, ALICE, "resume", str(target.pid))
    assert r.returncode == 0, r
    target.process.read_line("ready pid=")
    assert files_in(stalled.agent.dumps) == [], files_in(stalled.agent.dumps)


@test
def a_collect_tables_actions_do_not_begin_while_no_record_can_be_held():
    """Two [[collect]] tables on one process, a dump and a trace, fire while the queue is full (the test moves the
    gauge past their line): neither asks the runtime for anything, no file appears, and each table's "fired"
    record says why. Before, the runtime was dumped and traced, and the files were published with their records
    dropped."""
    unit = f"dst-recordfirst-{uuid.uuid4().hex[:12]}.service"
    meter = os.path.join(run_dir(), "gauge")  # outside /tmp: the target has a /tmp of its own
    with open(meter, "w") as f:
        f.write("0")
    os.chmod(meter, 0o644)
    target = Target(SVC, tmpdir=None, mount_ns=True, args=("--meter-file", meter))
    place_in_unit(target.pid, unit)
    tables = "".join(
        f'\n[[collect]]\nname = "{name}"\ntargets.users = ["{SVC}"]\ntargets.units = ["{unit}"]\n'
        f'when.counter = "Dsagent.TestTarget:test-gauge"\nwhen.above = 300\n{then}\nreaders = ["{ALICE}"]\n'
        for name, then in (("core", 'then.dump = "mini"'),
                           ("slow", 'then.trace_profile = "gc-collect"\nthen.duration = "2s"')))
    stalled = StalledAudit(granted() + tables)

    def watched():
        r = dsctl(stalled.agent, "root", "--json", "collect")
        assert r.returncode == 0, r
        return sorted(x["table"] for x in json.loads(r.stdout) if x.get("pid") == target.pid) == ["core", "slow"]
    # the agent's walk (every 2 s) finds it and starts its counters session: a runtime's work, RUNTIME_BOUND
    wait_for(watched, timeout=RUNTIME_BOUND, what="both tables watching the process")
    stalled.fill()
    with open(meter + ".new", "w") as f:
        f.write("500")
    os.chmod(meter + ".new", 0o644)
    os.rename(meter + ".new", meter)
    files = lambda: files_in(stalled.agent.dumps)
    # the agent's word that it held no room for either, or (on the code before) their files
    # the gauge's next interval shows the new value, and both fire: seconds; 90 s only ends a hang
    wait_for(lambda: len(stalled.notes()) >= 2 or files(), timeout=90, what="both tables' firing")
    assert files() == [], f"a table's action wrote {files()}"
    assert sorted(stalled.notes()) == ["2", "4"], stalled.notes()

    stalled.resume()
    stalled.wait_accounted()
    def both_fired():
        got = [r for r in stalled.records(COLLECT_ID)
               if r["DSAGENT_COLLECT_EVENT"] == "fired" and r["DSAGENT_TARGET_PID"] == str(target.pid)]
        return got if len(got) >= 2 else None
    fired = wait_for(both_fired, timeout=60, what="both tables' fired records")  # ms once the reader reads
    assert sorted(r["DSAGENT_RULE"] for r in fired) == ["core", "slow"], fired
    assert all("the audit output takes no records" in r["DSAGENT_COLLECT_RESULT"] for r in fired), fired
    assert not [r for r in stalled.records(COLLECT_ID) if r["DSAGENT_COLLECT_EVENT"] != "fired"], stalled.records()
    assert not stalled.records(SESSION_START_ID) and not stalled.records(DUMP_ID)
    assert files() == [], files()


RETENTION_ID = "954f9a585ef5482c9a7017bba952745d"


@test
def retention_removes_nothing_while_no_record_can_be_held():
    """A file retention would remove (older than max_age) stays while its record cannot be written, and the
    agent says so; once the reader is back, the next pass records it and only then removes it."""
    stalled = StalledAudit(granted() + 'max_age = "1d"\n')
    stalled.fill()
    # dump_dir is made at the first artifact: here by hand, as root's and 0711, with a dump of uid 4242's in it
    os.mkdir(stalled.agent.dumps, 0o711)
    old = os.path.join(stalled.agent.dumps, "dump.App.4242.mini.20200101T000000Z.0000000000000001")
    with open(old, "w") as f:
        f.write("core")
    os.setxattr(old, "user.dsagent.requester_uid", b"4242")
    two_days_ago = os.stat(old).st_mtime - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))

    said = "dsagent: retention: the audit output takes no records now: " + old
    stalled.agent.proc.send_signal(signal.SIGHUP)  # a reload has a pass run
    wait_for(lambda: said in open(stalled.agent.log_path).read() or not os.path.exists(old), timeout=60,
             what="the pass to find no room (or to remove the file all the same)")
    assert os.path.exists(old), "removed while no record could be written"

    stalled.resume()
    wait_for(lambda: stalled.records(AUDIT_GAP_ID), timeout=60, what="the queue to drain")
    stalled.agent.proc.send_signal(signal.SIGHUP)
    removing, = wait_for(lambda: stalled.records(RETENTION_ID), timeout=60, what="the removal's record")
    assert removing["DSAGENT_RETENTION_EVENT"] == "removing" and removing["DSAGENT_DUMP_PATH"] == old, removing
    assert removing["DSAGENT_RETENTION_REASON"] == "max_age" and removing["DSAGENT_DUMP_REQUESTER_UID"] == "4242"
    wait_for(lambda: not os.path.exists(old), timeout=60, what="the file removed after its record")


@test
def a_dump_its_requester_removes_stays_while_no_record_can_be_held():
    """dsctl dumps --remove: the file stays while the removal's record cannot be written (the client is told so);
    once the reader is back the same request removes it, recorded. On main the file was unlinked first and its
    record then failed: the requester read "audit unavailable ... not carried out" while the dump was gone."""
    stalled = StalledAudit(granted("info"))
    # dump_dir is made at the first artifact: here by hand, as root's and 0711, with a dump ALICE asked for
    os.mkdir(stalled.agent.dumps, 0o711)
    path = os.path.join(stalled.agent.dumps, "dump.App.4242.mini.20260101T000000Z.0000000000000001")
    with open(path, "w") as f:
        f.write("core")
    os.setxattr(path, "user.dsagent.requester_uid", str(harness.uid_of(ALICE)).encode())
    os.setxattr(path, "user.dsagent.target_pid", b"4242")
    stalled.fill()

    r = dsctl(stalled.agent, ALICE, "dumps", "--remove", path, timeout=HANG_BOUND)
    stalled.refused_now(r, "the removal")
    assert os.path.exists(path), "the dump was removed while no record of its removal could be written"

    stalled.resume()
    stalled.wait_accounted()
    r = dsctl(stalled.agent, ALICE, "dumps", "--remove", path, timeout=HANG_BOUND)
    assert r.returncode == 0, r
    assert not os.path.exists(path)
    removed = wait_for(lambda: [x for x in stalled.records(REQUEST_ID) if x.get("DSAGENT_COMMAND") == "remove-dump"
                                and x["DSAGENT_DECISION"] == "allowed"], what="the removal's record")
    assert len(removed) == 1 and removed[0]["DSAGENT_CLIENT_UID"] == str(harness.uid_of(ALICE)), removed
    assert removed[0]["DSAGENT_TARGET_PID"] == "4242" and path in removed[0]["DSAGENT_REASON"], removed


if __name__ == "__main__":
    run_tests()
