#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl as operators know coredumpctl and the dotnet-* tools, and long work that is honest and visible.

Help that sends nothing; options before or after the command; PID or UNIT everywhere; --json for every
command, errors with their exit status; dsctl's checks equal to the agent's; the hint to join the group;
dumps in time order with unit and name, and removing one's own; counters --watch; progress on a terminal;
-o checked before anything is asked; dsctl waiting exactly as long as the agent's deadline; a dump whose
client left is not kept. All against the real agent and the real runtime."""
import grp
import json
import os
import pty
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import time

import harness
from harness import (ALICE, BUILD, DSCTL, DUMP_BOUND, EXIT_AGENT_UNREACHABLE, EXIT_DENIED, EXIT_NO_SUCH_PROCESS,
                     EXIT_RUNTIME_UNREACHABLE, HANG_BOUND, MALLORY, OPS, RUNTIME_BOUND, SOURCE, SVC, Agent, Target,
                     as_user, dsctl, make_dir, place_in_unit, run_tests, test, uid_of, wait_for)

EXIT_FAILED, EXIT_USAGE = 1, 2
WIRE_ERROR_DENIED, WIRE_ERROR_NO_SUCH_PROCESS, WIRE_ERROR_BAD_REQUEST = 1, 2, 6
WIRE_TRACE, WIRE_COUNTERS, WIRE_PROGRESS = 0x0006, 0x0007, 0x8008
TAG_PID, TAG_BUFFER_MB, TAG_INTERVAL, TAG_DURATION, TAG_PROVIDERS = 1, 30, 31, 21, 29
TAG_MESSAGE, TAG_DEADLINE, TAG_PROGRESS = 15, 36, 35


def gone_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def on_terminal(user, args, stream="stderr", timeout=DUMP_BOUND):
    """dsctl run as @user with @stream on a pseudo-terminal: (exit status, what the terminal got, the other
    stream's text). @timeout bounds the reading against a hang: it ends when dsctl closes both, once its dump or
    session (seconds) is done."""
    master, slave = pty.openpty()
    kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: slave}
    proc = subprocess.Popen(as_user(user, [DSCTL, *args]), stdin=subprocess.DEVNULL, **kwargs)
    os.close(slave)
    other = proc.stdout if stream == "stderr" else proc.stderr
    shown, rest = b"", b""
    deadline = time.monotonic() + timeout
    open_fds = [master, other.fileno()]
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(open_fds, [], [], 1)  # a pace for checking the deadline, not a wait
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's other side is closed
                chunk = b""
            if not chunk:
                open_fds.remove(fd)
            elif fd == master:
                shown += chunk
            else:
                rest += chunk
    os.close(master)
    # its exit follows the close of its outputs at once; a bound against a hang
    return proc.wait(timeout=HANG_BOUND), shown.decode(errors="replace"), rest.decode(errors="replace")


def without_ids(text):
    return re.sub(r"[0-9a-f]{16}", "<request>", text)


# --- help, options, targets, JSON ---


@test
def listen_mode_and_group_make_the_agents_socket_a_gate_of_its_own():
    # without options: 0660, root's group, so root alone connects; another user is refused by the kernel
    default = Agent(listen_mode=None)
    st = os.stat(default.socket)
    assert st.st_uid == 0 and st.st_gid == 0 and oct(st.st_mode & 0o777) == "0o660", st
    assert dsctl(default, "root", "ps").returncode == 0
    for user in (ALICE, MALLORY):
        r = dsctl(default, user, "ps")
        assert r.returncode == EXIT_AGENT_UNREACHABLE and "ermission denied" in r.stderr, (user, r)
    # ... root's group also in a set-group-id directory of another group, whose group the socket would inherit
    setgid_dir = make_dir(None, 0o755)
    os.chown(setgid_dir, 0, grp.getgrnam(OPS).gr_gid)
    os.chmod(setgid_dir, 0o2755)
    inherited = os.path.join(setgid_dir, "s.sock")
    proc = subprocess.Popen([harness.DSAGENT, "--listen", inherited, "--policy", default.policy_path, "--runtime-dir",
                             os.path.join(setgid_dir, "run"), "--audit", "stderr"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    harness.scope.callback(lambda: (proc.kill(), proc.wait()))
    wait_for(lambda: os.path.exists(inherited) or proc.poll() is not None, what="the agent's socket")
    st = os.stat(inherited)
    assert st.st_gid == 0 and oct(st.st_mode & 0o777) == "0o660", st
    # --listen-group alone: the default mode with that group, its members in, others out
    grouped = Agent("--listen-group", OPS, listen_mode=None)
    st = os.stat(grouped.socket)
    assert st.st_gid == grp.getgrnam(OPS).gr_gid and oct(st.st_mode & 0o777) == "0o660", st
    assert dsctl(grouped, ALICE, "ps").returncode == 0
    r = dsctl(grouped, MALLORY, "ps")
    assert r.returncode == EXIT_AGENT_UNREACHABLE and "ermission denied" in r.stderr, r
    # 0666 opens it to every user: the policy alone decides
    opened = Agent(listen_mode="0666")
    assert oct(os.stat(opened.socket).st_mode & 0o777) == "0o666"
    assert dsctl(opened, MALLORY, "ps").returncode == 0

    agent = Agent("--listen-mode", "0660", "--listen-group", OPS, listen_mode=None)
    st = os.stat(agent.socket)
    assert st.st_uid == 0 and st.st_gid == grp.getgrnam(OPS).gr_gid and oct(st.st_mode & 0o777) == "0o660", st
    r = dsctl(agent, ALICE, "ps")  # in the group
    assert r.returncode == 0, r
    r = dsctl(agent, MALLORY, "ps")  # not: the kernel refuses the connect, the agent never hears of it
    assert r.returncode == EXIT_AGENT_UNREACHABLE and "ermission denied" in r.stderr, r
    assert not [x for x in agent.records() if x.get("DSAGENT_CLIENT_UID") == str(uid_of(MALLORY))]

    for bad in (["--listen-mode", "0777"], ["--listen-mode", "4660"], ["--listen-mode", "rw"],
                ["--listen-group", "no-such-group-here"]):
        r = subprocess.run([harness.DSAGENT, "--listen", "/nonexistent/x.sock", *bad], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=HANG_BOUND)  # it refuses its options at once
        assert r.returncode != 0 and bad[0] in r.stderr, (bad, r)


@test
def help_of_a_command_sends_nothing():
    agent = Agent()
    for args in (["dump", "--help"], ["help", "dump"], ["dump", "4242", "-h"], ["--help", "trace"],
                 ["info", "orders.service", "--help"], ["help"], ["--help"], ["counters", "--help"]):
        r = dsctl(agent, SVC, *args)
        assert r.returncode == 0 and r.stdout.startswith("Usage: dsctl"), (args, r)
        command = next((a for a in args if a in ("dump", "trace", "info", "counters")), None)
        if command:
            assert f"dsctl [OPTIONS] {command} " in r.stdout, (args, r.stdout)
    # no agent needed at all, and the one there heard nothing
    r = subprocess.run([DSCTL, "--socket", "/nonexistent/dsagent.sock", "dump", "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0 and "--type" in r.stdout, r
    assert agent.records() == [], agent.records()


@test
def options_may_follow_the_command_and_its_arguments():
    target = Target(SVC)
    agent = Agent()
    for args in (["info", str(target.pid), "--json"], ["--json", "info", str(target.pid)],
                 ["info", "--json", str(target.pid)]):
        r = dsctl(agent, SVC, *args)
        assert r.returncode == 0, (args, r)
        assert json.loads(r.stdout)["pid"] == target.pid, (args, r.stdout)
    r = dsctl(agent, SVC, "explain", str(target.pid), "dump", "--type", "full", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["allowed"] is True, r
    r = dsctl(agent, SVC, "ps", "--json")
    assert target.pid in [p["pid"] for p in json.loads(r.stdout)], r
    # an option a command does not take is refused by name, and nothing is asked
    before = len(agent.records())
    r = dsctl(agent, SVC, "info", str(target.pid), "--profile", "gc-collect")
    assert r.returncode == EXIT_USAGE and "info takes no --profile" in r.stderr, r
    assert len(agent.records()) == before


@test
def info_and_explain_take_a_unit():
    target = Target(SVC)
    place_in_unit(target.pid, "dst-dsctl-one.service")
    agent = Agent()
    r = dsctl(agent, SVC, "--json", "info", "dst-dsctl-one.service")
    assert r.returncode == 0, r
    info = json.loads(r.stdout)
    assert info["pid"] == target.pid and info["unit"] == "dst-dsctl-one.service", info
    r = dsctl(agent, SVC, "explain", "dst-dsctl-one.service", "dump", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["pid"] == target.pid, r
    record = agent.records()[-1]
    assert record["DSAGENT_COMMAND"] == "explain" and record["DSAGENT_TARGET_PID"] == str(target.pid), record

    # a unit with several: said so, and each one named, for the caller to pick
    first, second = Target(SVC), Target(SVC)
    for t in (first, second):
        place_in_unit(t.pid, "dst-dsctl-two.service")
    for command in (["info"], ["explain", "{}", "info"], ["dump"]):
        args = [a.format("dst-dsctl-two.service") for a in command]
        if len(args) == 1:
            args.append("dst-dsctl-two.service")
        r = dsctl(agent, SVC, *args)
        assert r.returncode == EXIT_FAILED, (args, r)
        assert "runs several .NET processes (2)" in r.stderr, (args, r.stderr)
        assert str(first.pid) in r.stderr and str(second.pid) in r.stderr, (args, r.stderr)
    # and what is no unit name is refused before it is sent
    before = len(agent.records())
    r = dsctl(agent, SVC, "info", "not-a-unit")
    assert r.returncode == EXIT_USAGE and "not 'not-a-unit'" in r.stderr, r
    assert len(agent.records()) == before


@test
def json_errors_carry_the_exit_status_and_the_protocol_code_apart():
    target = Target(SVC)
    agent = Agent()
    r = dsctl(agent, SVC, "--json", "info", str(gone_pid()))
    error = json.loads(r.stdout)
    assert r.returncode == EXIT_NO_SUCH_PROCESS == error["exit_status"], r
    assert error["protocol_error"] == WIRE_ERROR_NO_SUCH_PROCESS and error["request_id"], error
    r = dsctl(agent, ALICE, "dump", str(target.pid), "--json")
    error = json.loads(r.stdout)
    assert r.returncode == EXIT_NO_SUCH_PROCESS == error["exit_status"], r
    r = dsctl(agent, SVC, "info", str(target.pid), "--json", "--bogus")
    error = json.loads(r.stdout)
    assert r.returncode == EXIT_USAGE == error["exit_status"] and "--bogus" in error["message"], r
    assert "protocol_error" not in error, error
    r = subprocess.run([DSCTL, "--socket", "/nonexistent/dsagent.sock", "--json", "ps"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    error = json.loads(r.stdout)
    assert r.returncode == EXIT_AGENT_UNREACHABLE == error["exit_status"], r
    # the sessions too: the trace's summary, the counters' rows
    out = os.path.join(make_dir(SVC), "t.nettrace")
    r = dsctl(agent, SVC, "trace", str(target.pid), "--duration", "1", "-o", out, "--json", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    summary = json.loads(r.stdout)
    assert summary["path"] == out and summary["size"] == os.path.getsize(out) and summary["complete"], summary
    # 2 s of 1 s intervals: one or two rows of each counter, where the check needs one (a loaded machine would
    # have to make the first interval a whole second late)
    r = dsctl(agent, SVC, "counters", str(target.pid), "--duration", "2", "--json", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    rows = json.loads(r.stdout)["Events"]
    assert any(row["provider"] == "System.Runtime" for row in rows), rows
    r = dsctl(agent, SVC, "counters", str(gone_pid()), "--duration", "2", "--json")
    assert r.returncode == EXIT_NO_SUCH_PROCESS == json.loads(r.stdout)["exit_status"], r


# --- the same checks on both sides ---


def raw_session_error(agent, msg_type, fields):
    frames = harness.raw_exchange(agent, harness.wire_frame(msg_type, fields))
    return harness.error_code(frames), frames[-1][1][harness.TAG_MESSAGE].decode()


@test
def dsctl_refuses_what_the_agent_refuses_naming_the_option_and_range():
    target = Target(SVC)
    # the policy allows the protocol's largest buffer: the edge is the agent's check, not a rule's
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_trace_buffer_mb = 1024\n')
    pid = struct.pack("<I", target.pid)
    refused = [
        (["trace", str(target.pid), "--buffer-mb", "1025"], "--buffer-mb takes a number of MB from 1 to 1024",
         (WIRE_TRACE, [(TAG_PID, pid), (20, b"cpu-sampling"), (TAG_BUFFER_MB, struct.pack("<I", 1025))])),
        (["counters", str(target.pid), "--interval", "3601"], "--interval takes a number of seconds from 1 to 3600",
         (WIRE_COUNTERS, [(TAG_PID, pid), (TAG_INTERVAL, struct.pack("<I", 3601))])),
        (["counters", str(target.pid), "--refresh-interval", "0"], "--refresh-interval takes a number of seconds",
         (WIRE_COUNTERS, [(TAG_PID, pid), (TAG_INTERVAL, struct.pack("<I", 0))])),
        (["trace", str(target.pid), "--duration", "2592001"], "--duration takes whole seconds from 1 s to 30 days",
         (WIRE_TRACE, [(TAG_PID, pid), (20, b"cpu-sampling"), (TAG_DURATION, struct.pack("<Q", 2592001))])),
        (["dump", str(target.pid), "--type", "huge"], "--type takes mini, heap, triage or full, not 'huge'",
         (0x0004, [(TAG_PID, pid), (19, b"huge")])),
        (["trace", str(target.pid), "--profile", "nope"], "--profile takes one of cpu-sampling, gc-verbose",
         (WIRE_TRACE, [(TAG_PID, pid), (20, b"nope")])),
        (["counters", str(target.pid), "--counters", ",".join(f"P{i}" for i in range(17))],
         "--counters takes Provider[name,...],... with at most 16 providers",
         (WIRE_COUNTERS, [(TAG_PID, pid), (TAG_PROVIDERS, ",".join(f"P{i}" for i in range(17)).encode())])),
    ]
    for args, words, raw in refused:
        before = len(agent.records())
        r = dsctl(agent, SVC, *args)
        assert r.returncode == EXIT_USAGE and words in r.stderr, (args, r)
        assert len(agent.records()) == before, f"{args} reached the agent"
        code, message = raw_session_error(agent, *raw)
        assert code == WIRE_ERROR_BAD_REQUEST, (args, code, message)
    # and at the edge both accept: the largest buffer, the longest interval
    out = os.path.join(make_dir(SVC), "edge.nettrace")
    r = dsctl(agent, SVC, "trace", str(target.pid), "--buffer-mb", "1024", "--duration", "1", "-o", out,
              timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    r = dsctl(agent, SVC, "counters", str(target.pid), "--interval", "3600", "--duration", "2", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r


@test
def a_caller_outside_the_socket_group_is_told_to_join_it():
    agent = Agent()
    os.chown(agent.socket, 0, grp.getgrnam(OPS).gr_gid)
    os.chmod(agent.socket, 0o660)
    r = dsctl(agent, MALLORY, "ps")
    assert r.returncode == EXIT_AGENT_UNREACHABLE, r
    assert "Permission denied; you may need to be in the group 'dst-ops' (then log in again)" in r.stderr, r
    r = dsctl(agent, MALLORY, "--json", "ps")
    assert "in the group 'dst-ops'" in json.loads(r.stdout)["message"], r
    assert dsctl(agent, ALICE, "ps").returncode == 0  # a member gets through
    # a socket whose group says nothing (root's): the packages' group is named
    os.chown(agent.socket, 0, 0)
    r = dsctl(agent, MALLORY, "ps")
    assert "you may need to be in the group 'dsagent' (then log in again)" in r.stderr, r


# --- dumps: listing, removing ---


def take_dump(agent, user, target, *args):
    r = dsctl(agent, user, "--json", "dump", str(target), *args, timeout=DUMP_BOUND)
    assert r.returncode == 0, r
    return json.loads(r.stdout)


@test
def dumps_are_listed_oldest_first_with_unit_and_name():
    in_unit, plain = Target(SVC), Target(SVC)
    place_in_unit(in_unit.pid, "dst-dsctl-dumps.service")
    agent = Agent()
    first = take_dump(agent, SVC, in_unit.pid)
    second = take_dump(agent, SVC, plain.pid, "--type", "triage")
    third = take_dump(agent, SVC, "dst-dsctl-dumps.service")
    assert first["unit"] == "dst-dsctl-dumps.service" and first["name"] == "DsTestTarget", first
    # times that neither the order of taking nor any order of names gives
    now = time.time()
    for dump, age in ((first, 100), (second, 300), (third, 200)):
        os.utime(dump["path"], (now - age, now - age))
    listed = json.loads(dsctl(agent, SVC, "--json", "dumps").stdout)
    assert [d["path"] for d in listed] == [second["path"], third["path"], first["path"]], listed
    times = [d["time_usec"] for d in listed]
    assert times == sorted(times), times
    by_path = {d["path"]: d for d in listed}
    assert by_path[first["path"]]["unit"] == "dst-dsctl-dumps.service", by_path
    assert by_path[second["path"]]["type"] == "triage" and by_path[second["path"]]["pid"] == plain.pid
    assert all(d["name"] == "DsTestTarget" and d["user"] == SVC for d in listed), listed

    text = dsctl(agent, SVC, "dumps")
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["TIME", "PID", "UNIT", "NAME", "TYPE", "SIZE", "PATH"], lines[0]
    assert [line.split()[-1] for line in lines[1:]] == [second["path"], third["path"], first["path"]], lines
    assert "dst-dsctl-dumps.service" in lines[3] and "DsTestTarget" in lines[3], lines[3]
    assert re.match(rf"\S+ \S+ +{plain.pid} +- +DsTestTarget +triage ", lines[1]), lines[1]


@test
def a_dump_is_removed_by_who_asked_for_it_and_nobody_else():
    target, hers = Target(SVC), Target(MALLORY)
    agent = Agent()
    mine = take_dump(agent, SVC, target.pid)
    another = take_dump(agent, SVC, target.pid, "--type", "triage")
    theirs = take_dump(agent, MALLORY, hers.pid)

    # someone else's dump is answered as one that does not exist: same words, same status
    asked = dsctl(agent, MALLORY, "dumps", "--remove", mine["path"])
    missing = dsctl(agent, MALLORY, "dumps", "--remove", os.path.join(agent.dumps, "dump.nothing.1.mini.x"))
    assert asked.returncode == missing.returncode == EXIT_DENIED, (asked, missing)
    assert without_ids(asked.stderr).replace(mine["path"], "P") == \
        without_ids(missing.stderr).replace(os.path.join(agent.dumps, "dump.nothing.1.mini.x"), "P"), (asked, missing)
    assert "no dump of that name that you asked for" in asked.stderr, asked
    asked_json = json.loads(dsctl(agent, MALLORY, "--json", "dumps", "--remove", mine["path"]).stdout)
    missing_json = json.loads(dsctl(agent, MALLORY, "--json", "dumps", "--remove", "dump.nothing").stdout)
    del asked_json["request_id"], missing_json["request_id"]
    assert asked_json == missing_json, (asked_json, missing_json)
    assert os.path.exists(mine["path"])
    refused = [rec for rec in agent.records() if rec["DSAGENT_COMMAND"] == "remove-dump"]
    assert [rec["DSAGENT_DECISION"] for rec in refused] == ["denied", "failed", "denied", "failed"], refused
    assert f"asked for by uid {uid_of(SVC)}" in refused[0]["DSAGENT_REASON"], refused[0]

    # nothing outside the dump directory, by any path, even for root
    for path in ("/etc/passwd", os.path.join(agent.dumps, "..", "policy.toml"), "../policy.toml",
                 os.path.join(agent.dumps, ".."), "."):
        r = dsctl(agent, "root", "dumps", "--remove", path)
        assert r.returncode == EXIT_FAILED and "only a dump of the dump directory" in r.stderr, (path, r)
    assert os.path.exists("/etc/passwd") and os.path.exists(agent.policy_path)

    # the one who asked removes it, by its path or its name alone, and each removal has its record
    r = dsctl(agent, SVC, "dumps", "--remove", mine["path"])
    assert r.returncode == 0 and r.stdout == f"removed {mine['path']}\n", r
    assert not os.path.exists(mine["path"])
    r = dsctl(agent, SVC, "--json", "dumps", "--remove", os.path.basename(another["path"]))
    assert r.returncode == 0 and json.loads(r.stdout) == {"removed": os.path.basename(another["path"])}, r
    assert not os.path.exists(another["path"])
    removed = [rec for rec in agent.records() if rec["DSAGENT_COMMAND"] == "remove-dump"][-2:]
    assert all(rec["DSAGENT_DECISION"] == "allowed" for rec in removed), removed
    assert removed[0]["DSAGENT_REASON"] == f"removed the dump {mine['path']}", removed[0]
    assert removed[0]["DSAGENT_TARGET_PID"] == str(target.pid) and removed[0]["DSAGENT_CLIENT_UID"] == \
        str(uid_of(SVC)), removed[0]
    # root may remove anyone's
    assert dsctl(agent, "root", "dumps", "--remove", theirs["path"]).returncode == 0
    assert not os.path.exists(theirs["path"])
    assert json.loads(dsctl(agent, SVC, "--json", "dumps").stdout) == []


# --- progress, -o, counters --watch ---


@test
def dumps_and_traces_show_progress_on_a_terminal_only():
    target = Target(SVC, tmpdir=None, mount_ns=True, args=("--allocate-mb", "256"))
    agent = Agent()
    status, shown, out = on_terminal(SVC, ["--socket", agent.socket, "dump", str(target.pid), "--type", "full"])
    assert status == 0 and "full dump of" in out, (status, shown, out)
    assert "\r\033[Kdsctl: dump: " in shown, repr(shown)
    assert re.search(r"dsctl: dump: \d+\.\d (KiB|MiB|GiB), 00:\d\d", shown), repr(shown)
    assert shown.endswith("\r\033[K"), repr(shown[-80:])  # the line is gone before the result

    out = os.path.join(make_dir(SVC), "p.nettrace")
    status, shown, _ = on_terminal(SVC, ["--socket", agent.socket, "trace", str(target.pid), "--duration", "3",
                                         "-o", out])
    assert status == 0 and os.path.exists(out), (status, shown)
    sizes = re.findall(r"dsctl: trace: (\d+(?:\.\d)? (?:B|KiB|MiB)), 00:0(\d)", shown)
    # a redraw a second or more often through 3 s of session: 3 of them, and the last past 2 s, leave a loaded
    # machine a second to spare
    assert len(sizes) >= 3 and sizes[-1][0] != "0 B" and int(sizes[-1][1]) >= 2, (sizes, repr(shown))
    assert "wrote " + out in shown, repr(shown)

    # not a terminal, or --quiet: no progress
    r = dsctl(agent, SVC, "dump", str(target.pid), timeout=DUMP_BOUND)
    assert r.returncode == 0 and "\r" not in r.stderr and "\033" not in r.stderr, r
    status, shown, _ = on_terminal(SVC, ["--socket", agent.socket, "-q", "trace", str(target.pid), "--duration",
                                         "1", "-o", out + ".2"])
    assert status == 0 and shown == "", (status, repr(shown))


@test
def gcdump_shows_its_progress_on_a_terminal_only():
    held = 200000  # the app's HeldItem objects: the heap has at least as many
    target = Target(SVC, args=("--hold-objects", str(held)))
    agent = Agent()
    status, shown, out = on_terminal(SVC, ["--socket", agent.socket, "gcdump", str(target.pid)])
    assert status == 0 and "HeldItem  [DsTestTarget.dll]" in out, (status, repr(shown), out[-2000:])
    # the bytes received and the heap's objects so far, redrawn in place; drawn once more when the dump's GC
    # has ended, with all of them; gone before the table
    lines = re.findall(r"\r\033\[Kdsctl: gcdump: (\d+(?:\.\d)? (?:B|KiB|MiB|GiB)), ([\d,]+) objects, 00:\d\d", shown)
    assert len(lines) >= 2 and lines[0] == ("0 B", "0"), repr(shown)
    print(f"# progress lines drawn: {lines}")
    assert max(int(objects.replace(",", "")) for _, objects in lines) >= held, lines
    assert shown.endswith("\r\033[K"), repr(shown[-80:])
    objects = int(re.search(r"^ +([\d,]+)  GC Heap objects$", out, re.M).group(1).replace(",", ""))
    assert int(lines[-1][1].replace(",", "")) <= objects, (lines[-1], objects)

    # not a terminal, or --quiet: no progress
    r = dsctl(agent, SVC, "gcdump", str(target.pid), timeout=180)
    assert r.returncode == 0 and r.stderr == "", r
    status, shown, out = on_terminal(SVC, ["--socket", agent.socket, "-q", "gcdump", str(target.pid)])
    assert status == 0 and shown == "" and "GC Heap objects" in out, (status, repr(shown))


@test
def an_output_the_caller_cannot_write_is_refused_before_anything_is_asked():
    target = Target(SVC)
    agent = Agent()
    closed = make_dir(None, 0o700)  # root's alone
    existing = os.path.join(make_dir(SVC), "there")
    open(existing, "w").close()
    for args, words in ((["dump", str(target.pid), "-o", os.path.join(closed, "x.core")], "Permission denied"),
                        (["dump", str(target.pid), "--type", "full", "-o", "/nonexistent/x.core"], "No such file"),
                        (["dump", str(target.pid), "-o", existing], "does not overwrite"),
                        (["trace", str(target.pid), "-o", os.path.join(closed, "x.nettrace")], "Permission denied"),
                        (["counters", str(target.pid), "-o", os.path.join(closed, "x.csv")], "Permission denied")):
        r = dsctl(agent, SVC, *args)
        assert r.returncode == EXIT_FAILED and words in r.stderr and "nothing was asked" in r.stderr, (args, r)
    assert agent.records() == [] and agent.records(message_id=harness.DUMP_MESSAGE_ID) == []
    assert not os.path.exists(agent.dumps) or os.listdir(agent.dumps) == []
    assert os.listdir(closed) == []
    # a session refused by the agent leaves no rows file behind
    rows = os.path.join(make_dir(ALICE), "rows.csv")
    r = dsctl(agent, ALICE, "counters", str(target.pid), "-o", rows)
    assert r.returncode == EXIT_NO_SUCH_PROCESS and not os.path.exists(rows), r


@test
def counters_watch_redraws_in_place_on_a_terminal_and_writes_rows_elsewhere():
    target = Target(SVC, args=("--meter-value", "42.5"))
    agent = Agent()
    status, shown, _ = on_terminal(SVC, ["--socket", agent.socket, "counters", str(target.pid), "--watch",
                                         "--counters", "System.Runtime,Dsagent.TestTarget", "--duration", "4"],
                                   stream="stdout")
    assert status == 0, (status, shown)
    frames = shown.split("\033[H\033[J")
    # a frame a second through 4 s: 3 parts (what came before the first) need 2 of the 3 or 4 frames, a second
    # or two to spare on a loaded machine
    assert len(frames) >= 3, repr(shown)
    last = frames[-1]
    assert f"counters of {target.pid}, every 1 s" in last and "Current Value" in last, repr(last)
    # .NET 9 on: System.Runtime's Meter, not its EventCounters, as dotnet-counters monitor shows it
    assert "[System.Runtime]" in last and "dotnet.process.memory.working_set (By)" in last, repr(last)
    assert "CPU Usage (%)" not in last, repr(last)
    # (a terminal shows each new line as \r\n)
    assert re.search(r"\[Dsagent.TestTarget\]\r?\n +test-gauge \(items\) +42\.5 *\r?\n", last), repr(last)
    assert "Timestamp,Provider" not in shown
    # not a terminal: the rows, as without --watch
    r = dsctl(agent, SVC, "counters", str(target.pid), "--watch", "--duration", "2", timeout=RUNTIME_BOUND)
    assert r.returncode == 0 and r.stdout.startswith("Timestamp,Provider,Counter Name"), r
    assert "\033" not in r.stdout
    r = dsctl(agent, SVC, "counters", str(target.pid), "--watch", "-o", "/tmp/x.csv")
    assert r.returncode == EXIT_USAGE and "--watch" in r.stderr, r


# --- deadlines ---


@test
def dsctl_waits_as_long_as_the_agent_does_for_a_dump():
    """dsctl used to give up after its own wait for the agent's first answer (60 s) whatever the agent allowed;
    now the agent's first-byte deadline ends the dump, and dsctl reports the agent's words that name it. A test
    hook makes dsctl's own wait 4 s and the agent's deadline 9 s, where the real ones would hold the test over a
    minute: the proof is the same, dsctl waits past its own wait for as long as the agent announced."""
    target = Target(SVC, tmpdir=None, mount_ns=True)
    agent = Agent("--dump-start-timeout", "9")
    harness.stop_process(target.pid)
    harness.scope.callback(lambda: os.kill(target.pid, signal.SIGCONT))
    started = time.monotonic()
    # 120 s: a bound against a hang, below the next deadline the agent would keep (--dump-timeout, 300 s)
    r = subprocess.run(as_user(SVC, ["env", "DSCTL_TEST_AGENT_WAIT_SEC=4", DSCTL, "--socket", agent.socket, "dump",
                                     str(target.pid)]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=120)
    took = time.monotonic() - started
    # the agent's answer, naming its deadline (dsctl giving up on its own would exit "agent unreachable")...
    assert r.returncode == EXIT_RUNTIME_UNREACHABLE and "--dump-start-timeout" in r.stderr, r
    # ... which came after that 9 s deadline (0.5 s less: this clock started before the agent's), long past
    # dsctl's own 4 s: a loaded machine only makes it later. When it came is the agent's, checked by the above
    assert took > 8.5, took


@test
def the_dump_deadline_that_ended_a_dump_is_named():
    target = Target(SVC, tmpdir=None, mount_ns=True)
    agent = Agent("--dump-timeout", "3", "--dump-start-timeout", "60")
    harness.stop_process(target.pid)
    harness.scope.callback(lambda: os.kill(target.pid, signal.SIGCONT))
    # 60 s: a bound against a hang; the agent ends the dump at 3 s
    r = dsctl(agent, SVC, "dump", str(target.pid), timeout=60)
    assert r.returncode == EXIT_RUNTIME_UNREACHABLE and "(--dump-timeout, 3 s)" in r.stderr, r
    # the agent announced that deadline to the client: the dump's 3 s and 30 s to hand it over
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(HANG_BOUND)  # each read: this dump too ends at 3 s
    sock.connect(agent.socket)
    harness.scope.callback(sock.close)
    sock.sendall(harness.wire_frame(0x0004, [(TAG_PID, struct.pack("<I", target.pid)),
                                             (TAG_PROGRESS, struct.pack("<I", 1))]))
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    frames = harness.wire_decode(data)
    announced = [f for t, f in frames if t == WIRE_PROGRESS and TAG_MESSAGE in f]
    assert [f[TAG_MESSAGE].decode() for f in announced][-1] == "the dump's deadline (--dump-timeout, 3 s, and 30 s)"
    assert 30e6 < struct.unpack("<Q", announced[-1][TAG_DEADLINE])[0] <= 33e6, announced
    assert frames[-1][0] == harness.WIRE_ERROR


@test
def dsctl_says_which_deadline_it_gave_up_on():
    """An agent that announced its deadline and then says nothing (hung, stopped): dsctl gives up just past
    that deadline, and names it."""
    where = make_dir(None, 0o755)
    path = os.path.join(where, "silent.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    harness.scope.callback(server.close)
    client = subprocess.Popen([DSCTL, "--socket", path, "dump", "1234"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    harness.scope.callback(client.kill)
    conn, _ = server.accept()
    harness.scope.callback(conn.close)
    conn.recv(65536)
    conn.sendall(harness.wire_frame(WIRE_PROGRESS, [(TAG_DEADLINE, struct.pack("<Q", 1_000_000)),
                                                    (TAG_MESSAGE, b"the test's own deadline (1 s)")]))
    announced = time.monotonic()
    # a bound against a hang, past dsctl's own default wait (60 s) that it would keep had it ignored the deadline
    _, err = client.communicate(timeout=90)
    took = time.monotonic() - announced
    assert client.returncode == EXIT_AGENT_UNREACHABLE, (client.returncode, err)
    assert "the agent did not answer within the test's own deadline (1 s), and 5 s more" in err, err
    # the product's deadline: 1 s and 5 s more from dsctl's reading the frame (less 0.5 s: it may read it just
    # before this clock starts); 24 s more for a loaded machine's late wake-up, far from the 60 s it would
    # otherwise wait
    assert 5.5 < took < 30, took


@test
def a_dump_the_client_left_before_it_was_handed_over_is_removed():
    target = Target(SVC, tmpdir=None, mount_ns=True)
    # the whole agent stops before it hands the dump over, until dsctl is gone
    pause = harness.Pause("before-dump-reply")
    agent = Agent(env=pause.env)
    pending = subprocess.Popen(as_user(SVC, [DSCTL, "--socket", agent.socket, "dump", str(target.pid)]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    harness.scope.callback(pending.kill)
    pause.wait(agent, timeout=DUMP_BOUND)  # once the dump is published
    published = agent.records(message_id=harness.DUMP_MESSAGE_ID)
    assert len(published) == 1 and os.path.exists(published[0]["DSAGENT_DUMP_PATH"]), published
    pending.kill()
    pending.wait()
    assert not pause.resumed(agent), "the agent handed the dump over before dsctl was gone"
    pause.end()
    record = wait_for(lambda: [r for r in agent.records() if r["DSAGENT_COMMAND"] == "dump"],
                      what="the dump's request record")[0]
    assert record["DSAGENT_DECISION"] == "failed", record
    assert "went away before the dump was handed over; the dump was removed" in record["DSAGENT_REASON"], record
    assert os.listdir(agent.dumps) == [], os.listdir(agent.dumps)


# --- completion ---


@test
def bash_completion_is_installed_and_completes_commands_options_and_values():
    dest = make_dir(None, 0o755)
    r = subprocess.run(["meson", "install", "-C", BUILD, "--destdir", dest, "--no-rebuild", "--quiet"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert r.returncode == 0, r.stdout
    prefix = subprocess.run(["meson", "introspect", BUILD, "--buildoptions"], stdout=subprocess.PIPE,
                            text=True).stdout
    prefix = next(o["value"] for o in json.loads(prefix) if o["name"] == "prefix")
    bash = os.path.join(dest + prefix, "share/bash-completion/completions/dsctl")
    zsh = os.path.join(dest + prefix, "share/zsh/site-functions/_dsctl")
    assert os.path.isfile(bash) and os.path.isfile(zsh), (bash, zsh)
    assert open(zsh).readline().startswith("#compdef dsctl"), zsh

    def complete(*words):
        quoted = " ".join(f"'{w}'" for w in words)
        script = (f"source {bash}\nCOMP_WORDS=(dsctl {quoted})\nCOMP_CWORD={len(words)}\n"
                  f"COMP_LINE=\"${{COMP_WORDS[*]}}\"\nCOMP_POINT=${{#COMP_LINE}}\n_dsctl\n"
                  "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
        out = subprocess.run(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={"PATH": os.environ["PATH"]})
        assert out.returncode == 0, out.stderr
        return sorted(out.stdout.split())

    assert complete("du") == ["dump", "dumps"]
    assert complete("help", "") == sorted(["ps", "info", "env", "explain", "dump", "dumps", "collect", "crashes", "crash",
                                           "trace", "flame", "convert",
                                           "counters", "stacks", "gcdump", "exceptions", "logs", "resume", "port",
                                           "exec", "help"])
    assert complete("gcdump", "1", "--r") == ["--report"]
    assert complete("res") == ["resume"] and complete("resume", "1", "--") == sorted(
        ["--socket", "--agent-socket", "--json", "--quiet", "--help", "--version"])
    assert complete("stacks", "1", "--format", "") == ["json", "speedscope", "text"]
    assert complete("logs", "1", "--level", "W") == ["Warning"]
    assert complete("logs", "1", "--") == sorted(["--category", "--duration", "--level", "--socket", "--agent-socket",
                                                  "--json", "--quiet", "--help", "--version"])
    assert complete("explain", "1", "exc") == ["exceptions"]
    assert "--watch" in complete("counters", "1", "--") and "--type" not in complete("counters", "1", "--")
    assert complete("dump", "1", "--type", "") == ["full", "heap", "mini", "triage"]
    assert "gc-collect" in complete("trace", "1", "--profile", "")
    assert complete("counters", "1", "--format", "") == ["csv", "json", "prometheus"]
    assert complete("trace", "1", "--format", "") == ["chromium", "flame", "nettrace", "pprof", "speedscope"]
    assert complete("convert", "t.nettrace", "--format", "") == ["chromium", "flame", "pprof", "speedscope"]
    assert complete("flame", "1", "--") == sorted(["--duration", "--profile", "--output", "--socket", "--agent-socket",
                                                   "--json", "--quiet", "--help", "--version"])
    assert "explain" in complete("help", "")
    assert complete("explain", "1", "du") == ["dump"]

    # zsh, where there is one: the same answers, through a real interactive zsh on a terminal
    if not shutil.which("zsh"):
        print("# no zsh here: its completion is checked for its header only")
        return
    for line, wanted in (("dsctl du", ["dump", "dumps"]), ("dsctl dump 1 --type ", ["full", "heap", "mini", "triage"]),
                         ("dsctl counters 1 --w", ["--watch"]), ("dsctl trace 1 --profile gc-c", ["gc-collect"]),
                         ("dsctl dumps --r", ["--remove"]), ("dsctl stacks 1 --format s", ["speedscope"]),
                         ("dsctl logs 1 --level Cr", ["Critical"]), ("dsctl gcdump 1 --n", ["--nettrace"]),
                         ("dsctl convert t.nettrace --format p", ["pprof"]), ("dsctl fla", ["flame"])):
        assert zsh_complete(os.path.dirname(zsh), line) == wanted, (line, zsh_complete(os.path.dirname(zsh), line))


# The line editor takes keys one after another, but skips a completion while more keys wait: so the Tab goes alone,
# and Ctrl-U and a command that prints @@DONE@@ only once the completion printed its first matches; that line then
# comes after the rest of the completion, and the reading ends there, however long a loaded machine takes over
# compinit and the completion. (What is typed is echoed: @@E''ND@@ and @@DO""NE@@ there are not the words looked
# for, which only the commands print.)
ZSH_CAPTURE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=; fpath=($1 \$fpath); autoload -U compinit; compinit -u"
zpty -w z "compadd () { builtin compadd -O __hits \"\$@\"; print -l -- @@BEGIN@@ \$__hits @@E''ND@@ }"
zpty -w -n z "$2"$'\t'
local all="" chunk
while [[ $all != *@@END@@* ]] && zpty -r z chunk; do all+=$chunk; done
zpty -w z $'\x15print @@DO""NE@@'
while [[ $all != *@@DONE@@* ]] && zpty -r z chunk; do all+=$chunk; done
print -r -- "$all"
zpty -d z
"""


def zsh_complete(fpath, line):
    """What zsh offers for @line and a Tab, with the completion functions of @fpath."""
    # 60 s: a bound against a hang (a completion that never ends); compinit and one completion take a second
    out = subprocess.run(["zsh", "-f", "-c", ZSH_CAPTURE, "zsh", fpath, line], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=60, env={"PATH": os.environ["PATH"]}).stdout
    assert "@@DONE@@" in out, out
    words = set()
    for block in re.findall(r"@@BEGIN@@\r?\n(.*?)@@END@@", out, re.S):
        words.update(w for w in block.replace("\r", "").split("\n") if w)
    return sorted(words)


if __name__ == "__main__":
    run_tests()
