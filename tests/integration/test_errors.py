#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every failure has its own exit code and its own words (dsctl(1), EXIT STATUS), and the agent's own
failures keep their errno in the message and as ERRNO= in the record.

Codes 8 (a runtime's error), 11 (no space), 12 (FUSE) and 13 (no staging) need hostile set-ups of their
own: test_mount_attacks and test_dump check those codes and words."""
import os
import signal
import socket
import subprocess

import harness
from harness import (ALICE, DSCTL, EXIT_AGENT_UNREACHABLE, EXIT_BUSY, EXIT_DENIED, EXIT_NO_SUCH_PROCESS,
                     EXIT_NOT_DOTNET, EXIT_RUNTIME_UNREACHABLE, EXIT_SOCKET_UNTRUSTED, SVC, Agent, Process, Target,
                     as_user, dsctl, make_dir, run_tests, test, wait_for)

EXIT_FAILED, EXIT_USAGE = 1, 2


def check(r, code, words, stream="stderr"):
    text = getattr(r, stream)
    assert r.returncode == code and words in text, (code, words, r.returncode, r.stdout, r.stderr)


def gone_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@test
def each_failure_has_its_own_exit_code_and_words():
    target = Target(SVC, tmpdir="shared")
    # target_cache_ms = 0: the socket replaced below is looked up again, not the one found a moment ago.
    # --runtime-timeout 2: only the stopped runtime below meets it, which is what it checks; no request here needs
    # a runtime's answer
    agent = Agent("--runtime-timeout", "2", policy='[agent]\ndump_dir = "@DUMP_DIR@"\ntarget_cache_ms = 0\n'
                  '[[rule]]\nname = "alice-looks"\nusers = ["dst-alice"]\ncommands = ["info"]\n'
                  f'targets.users = ["{SVC}"]\n')
    check(dsctl(agent, SVC, "info"), EXIT_USAGE, "takes one process id")
    check(subprocess.run([DSCTL, "--socket", "/nonexistent/dsagent.sock", "info", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True), EXIT_AGENT_UNREACHABLE, "cannot reach")
    check(dsctl(agent, ALICE, "dump", str(target.pid)), EXIT_DENIED, "denied")
    check(dsctl(agent, SVC, "info", str(gone_pid())), EXIT_NO_SUCH_PROCESS, "no such process")
    sleeper = Process(as_user(SVC, ["sleep", "300"])).wait_exec("sleep")  # no .NET process; it outlives the case
    check(dsctl(agent, SVC, "info", str(sleeper.proc.pid)), EXIT_NOT_DOTNET, "no diagnostic socket")

    # another user's socket at the target's name
    planted_dir = target.tmpdir
    os.unlink(target.socket_path)
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    impostor.bind(target.socket_path)
    harness.scope.callback(impostor.close)
    impostor.listen(1)
    check(dsctl(agent, SVC, "info", str(target.pid)), EXIT_SOCKET_UNTRUSTED, "not owned by the target's user")
    assert os.path.dirname(target.socket_path) == planted_dir

    # a runtime that does not answer: stopped (in a /tmp of its own, where only this agent stages dumps)
    quiet = Target(SVC, tmpdir=None, mount_ns=True)
    harness.stop_process(quiet.pid)
    harness.scope.callback(lambda: os.kill(quiet.pid, signal.SIGCONT))
    check(dsctl(agent, SVC, "info", str(quiet.pid)), EXIT_RUNTIME_UNREACHABLE, "did not answer in time")

    # one dump of a process at a time
    pending = subprocess.Popen(as_user(SVC, [DSCTL, "--socket", agent.socket, "dump", str(quiet.pid)]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    harness.scope.callback(pending.kill)
    wait_for(lambda: _dump_running(quiet), what="the first dump to start")
    check(dsctl(agent, SVC, "dump", str(quiet.pid)), EXIT_BUSY, "already")


def _dump_running(target):
    return any(name.startswith(".dsagent-dump-") for name in os.listdir(f"/proc/{target.pid}/root/tmp"))


@test
def the_agents_own_failures_keep_their_errno():
    # a dump directory under a file, which no directory can be: listing dumps fails, and says with which errno
    where = make_dir(None, 0o755)
    open(os.path.join(where, "file"), "w").close()
    agent = Agent(policy=f'[agent]\ndump_dir = "{where}/file/dumps"\n')
    r = dsctl(agent, SVC, "dumps")
    check(r, EXIT_FAILED, "the dump directory cannot be opened: Not a directory")
    record = agent.record_for(harness.request_id_of(r))
    assert record["DSAGENT_DECISION"] == "failed" and record["ERRNO"] == "20", record


@test
def a_malformed_reply_from_something_posing_as_the_agent_is_an_error_of_its_own():
    where = make_dir(None, 0o755)
    path = os.path.join(where, "fake.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    harness.scope.callback(server.close)
    client = subprocess.Popen([DSCTL, "--socket", path, "info", "1"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    conn, _ = server.accept()
    conn.recv(65536)
    conn.sendall(b"DSAG" + bytes([1, 0, 0x01, 0x80, 4, 0, 0, 0]) + b"junk")  # a field cut short
    conn.shutdown(socket.SHUT_WR)
    while conn.recv(65536):
        pass
    conn.close()
    out, err = client.communicate(timeout=30)  # it ends on the reply it got; a bound against a hang
    assert client.returncode == EXIT_FAILED and "malformed reply" in err, (client.returncode, err)


if __name__ == "__main__":
    run_tests()
