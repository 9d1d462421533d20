#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""An audit output whose reader stops reading holds no one: clients are answered throughout, served
while the agent's bounded queue takes their records, refused "audit unavailable" once it is full; when the
reader comes back, every queued record arrives, in order, and the refused requests are counted."""
import fcntl
import json
import os
import re
import subprocess
import threading
import time

import harness
from harness import ALICE, EXIT_NO_SUCH_PROCESS, REQUEST_MESSAGE_ID, Agent, make_dir, run_tests, test

EXIT_AUDIT_UNAVAILABLE = 16
AUDIT_GAP_MESSAGE_ID = "e7a3a2ffe6c543d2a42572e8d2074d1b"
F_SETPIPE_SZ = 1031
# records that may wait for the stalled reader (DSAGENT_TEST_AUDIT_QUEUE): a few, where the real bound is 1024
QUEUE = 8
# no pid is this high (pid_max is at most 2^22): each request is decided and recorded "no such process"
ABSENT_PID = "4999999"
# each request's answer: it comes within ms; before the queue, the agent blocked in write() and these never came,
# so any bound tells the two apart, and this one (HANG_BOUND, 30 s) is one a loaded machine does not reach
ANSWER_TIMEOUT = harness.HANG_BOUND
POLICY = '[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 10000\nmax_request_burst = 10000\n'


def ask(agent, user):
    """One request, answered within ANSWER_TIMEOUT: (exit status, request id)."""
    started = time.monotonic()
    try:
        r = harness.dsctl(agent, user, "info", ABSENT_PID, timeout=ANSWER_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{user}'s request was not answered in {ANSWER_TIMEOUT} s: the agent is blocked")
    assert r.returncode in (EXIT_NO_SUCH_PROCESS, EXIT_AUDIT_UNAVAILABLE), r
    if r.returncode == EXIT_AUDIT_UNAVAILABLE:
        assert "audit unavailable" in r.stderr, r
    m = re.search(r"request ([0-9a-f]{16})", r.stderr)
    assert m, r
    return r.returncode, m.group(1), time.monotonic() - started


class Lines:
    """Reads a stream in a thread once started: the reader that comes back."""

    def __init__(self, f, parse):
        self.f, self.parse, self.items, self.lock = f, parse, [], threading.Lock()

    def start(self):
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        for line in self.f:
            item = self.parse(line)
            if item is not None:
                with self.lock:
                    self.items.append(item)

    def snapshot(self):
        with self.lock:
            return list(self.items)


def parse_audit_line(line):
    if line.startswith("{"):
        return json.loads(line)
    if line.startswith("dsagent-audit:"):
        return dict(re.findall(r' ([A-Z_]+)="((?:[^"\\]|\\.)*)"', line))
    return None


def stall_and_resume(agent, reader, stalled_sign):
    """Clients (root and ALICE, in turn) while the reader reads nothing, until the queue is full and a few
    are refused; then the reader reads again, and more clients. Checks records = decisions, in order."""
    answers = []  # (exit status, request id), in the order the agent decided them
    refused = 0
    slowest = 0.0
    # 400: a count of requests, far past the few dozen whose records fill the pipe and the queue (it depends on
    # their sizes, not on time: nobody reads meanwhile)
    for i in range(400):
        status, request_id, took = ask(agent, "root" if i % 2 == 0 else ALICE)
        slowest = max(slowest, took)
        answers.append((status, request_id))
        refused += status == EXIT_AUDIT_UNAVAILABLE
        if refused >= 6:
            break
    assert refused >= 6, f"the queue never filled in {len(answers)} requests"
    served_before = [rid for status, rid in answers if status == EXIT_NO_SUCH_PROCESS]
    # they were served only while the queue had room: the first QUEUE records at most past what the output took
    assert answers[-1][0] == EXIT_AUDIT_UNAVAILABLE
    stalled_sign()
    print(f"# {len(answers)} requests while the reader read nothing, {refused} refused; "
          f"the slowest answered in {slowest:.3f} s", flush=True)

    reader.start()
    # the refused get a record that counts them once the queue has room; later requests are recorded again
    harness.wait_for(lambda: any(r.get("MESSAGE_ID") == AUDIT_GAP_MESSAGE_ID for r in reader.snapshot()),
                     what="the record of the refused requests")
    for i in range(4):
        status, request_id, took = ask(agent, "root" if i % 2 == 0 else ALICE)
        assert status == EXIT_NO_SUCH_PROCESS, "a request refused after the reader came back"
        answers.append((status, request_id))
    served = [rid for status, rid in answers if status == EXIT_NO_SUCH_PROCESS]

    def requests():
        return [r["DSAGENT_REQUEST_ID"] for r in reader.snapshot() if r.get("MESSAGE_ID") == REQUEST_MESSAGE_ID]

    # one more request, whose record closes the stream: records go out in the order of the decisions, so once
    # it is in, nothing recorded before it (a record twice, a late count) is still to come, where a pause would
    # only have hoped so
    status, last, _ = ask(agent, "root")
    assert status == EXIT_NO_SUCH_PROCESS, "a request refused after the reader came back"
    served.append(last)
    harness.wait_for(lambda: last in requests(), what="the last request's record")
    records = reader.snapshot()
    # every decision that was answered has its record, exactly once, in the order they were decided
    assert requests() == served, f"records {requests()} != decisions {served}"
    gaps = [r for r in records if r.get("MESSAGE_ID") == AUDIT_GAP_MESSAGE_ID]
    assert sum(int(g["DSAGENT_AUDIT_REFUSED"]) for g in gaps) == refused, gaps
    assert all(g["DSAGENT_AUDIT_LOST"] == "0" for g in gaps), gaps
    # the count comes after the records queued before the refusals, and before those that followed
    ids = [r.get("DSAGENT_REQUEST_ID", r["MESSAGE_ID"]) for r in records
           if r.get("MESSAGE_ID") in (REQUEST_MESSAGE_ID, AUDIT_GAP_MESSAGE_ID)]
    assert ids.index(AUDIT_GAP_MESSAGE_ID) == len(served_before), ids


def stream_sink(audit):
    r, w = os.pipe2(os.O_CLOEXEC)
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)  # fills after a few records
    reading = os.fdopen(r, "r", errors="replace")
    harness.scope.callback(reading.close)
    agent = Agent(policy=POLICY, audit=audit, audit_fd=w, env={"DSAGENT_TEST_AUDIT_QUEUE": str(QUEUE)})
    os.close(w)

    def pipe_is_full():
        # what the reader did not read: the pipe holds at least a page of records
        import array
        n = array.array("i", [0])
        fcntl.ioctl(r, 0x541B, n)  # FIONREAD
        assert n[0] >= 2048, f"only {n[0]} bytes wait in the pipe"

    stall_and_resume(agent, Lines(reading, parse_audit_line), pipe_is_full)
    # the description the agent was handed, and shares with whoever else writes to it, still blocks
    fd = 1 if audit == "json" else 2
    flags = int(re.search(r"^flags:\s+([0-7]+)", open(f"/proc/{agent.proc.pid}/fdinfo/{fd}").read(), re.M).group(1), 8)
    assert not flags & os.O_NONBLOCK, oct(flags)


@test
def a_stalled_stderr_reader_holds_no_one_and_loses_no_record():
    stream_sink("stderr")


@test
def a_stalled_json_reader_holds_no_one_and_loses_no_record():
    stream_sink("json")


@test
def a_stalled_journald_holds_no_one_and_loses_no_record():
    # journald's socket, in a mount namespace of the agent's own, is the fake's, whose queue takes 4 datagrams
    d = make_dir(None, 0o755)
    os.mkdir(os.path.join(d, "journal"), 0o755)
    path = os.path.join(d, "journal", "socket")
    fake = subprocess.Popen(["unshare", "-n", harness.PYTHON, os.path.join(harness.HERE, "fake_journald.py"), path,
                             "4"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    harness.scope.callback(fake.wait)
    harness.scope.callback(fake.kill)
    assert fake.stdout.readline().strip() == "ready"
    mount = 'mount --bind "$0" /run/systemd && exec "$@"'
    agent = Agent(policy=POLICY, audit="journal", env={"DSAGENT_TEST_AUDIT_QUEUE": str(QUEUE)},
                  wrapper=["unshare", "-m", "--propagation", "private", "sh", "-c", mount, d])

    class Journal(Lines):
        def start(self):
            fake.stdin.write("read\n")
            fake.stdin.flush()
            super().start()

    def nothing_read():
        assert fake.poll() is None

    stall_and_resume(agent, Journal(fake.stdout, json.loads), nothing_read)


if __name__ == "__main__":
    run_tests()
