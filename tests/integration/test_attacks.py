#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks from a local user with no rights: every message type, floods, fd spam."""
import json
import os
import struct
import time

import harness
from harness import (MALLORY, SVC, Agent, FakeRuntime, Process, Target, as_user, info_json, run_tests, test,
                     wait_for)


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@test
def every_message_type_from_a_stranger_is_refused_audited_and_reaches_no_runtime():
    fake = FakeRuntime("silent")  # svc's "runtime", logging every byte it is sent
    # every one of them decided and recorded: the budget of one user's requests is out of the way here
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 100000\n'
                         'max_request_burst = 1000000\n')
    script = f"""
import socket, struct, collections
counts = collections.Counter()
pid = struct.pack('<I', {fake.pid})
for t in range(65536):
    payload = struct.pack('<HI', 1, 4) + pid + struct.pack('<HI', 18, 4) + b'dump'
    frame = b'DSAG' + struct.pack('<HHI', 1, t, len(payload)) + payload
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({agent.socket!r})
    s.sendall(frame)
    reply = b''
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    s.close()
    # the last frame's type: DONE 0x8002 or ERROR 0x8003, and the error code if any
    last, offset = None, 0
    while offset + 12 <= len(reply):
        size = struct.unpack('<I', reply[offset + 8:offset + 12])[0]
        last = (struct.unpack('<H', reply[offset + 6:offset + 8])[0], reply[offset + 12:offset + 12 + size])
        offset += 12 + size
    if last and last[0] == 0x8003:
        code = struct.unpack('<I', last[1][6:10])[0]
        counts[f'error-{{code}}'] += 1
    elif last:
        counts[f'type-{{last[0]:#x}}'] += 1
    else:
        counts['nothing'] += 1
print('counts=' + repr(dict(counts)), flush=True)
"""
    run = Process(as_user(MALLORY, [harness.PYTHON, "-c", script]))
    counts = eval(run.read_line("counts=", timeout=600).split("=", 1)[1])
    assert sum(counts.values()) == 65536, counts
    assert counts.get("nothing", 0) == 0, counts
    # the only ones not refused: listings of his own processes and dumps (none), which touch no runtime
    refused = {k: v for k, v in counts.items() if k.startswith("error-")}
    assert sum(refused.values()) == 65536 - 2 and counts.get("type-0x8002") == 2, counts
    # every request about svc's process (info, env, explain, dump, counters, stacks, exceptions, logs,
    # resume) is told it does not exist; a trace that names neither a profile nor providers, and a proxied
    # request without its IPC message, are bad requests before any process is looked at, like everything else
    assert refused == {"error-2": 9, "error-6": 65536 - 2 - 9}, counts
    assert fake.received() == b"", "bytes reached the runtime"
    records = agent.records()
    assert len(records) == 65536, len(records)
    assert {r["DSAGENT_DECISION"] for r in records} <= {"denied", "failed", "allowed"}
    assert sum(r["DSAGENT_DECISION"] == "allowed" for r in records) == 2
    # for the administrator, those nine are what they are: denied by the policy
    denied = [r for r in records if r["DSAGENT_DECISION"] == "denied"]
    assert len(denied) == 9 and all(r["DSAGENT_TARGET_PID"] == str(fake.pid) for r in denied), denied

@test
def a_connection_flood_with_fd_spam_leaves_others_served_and_nothing_behind():
    target = Target(SVC)
    agent = Agent()
    info_json(agent, SVC, target.pid)  # warm: the agent's steady state before the attack
    baseline_fds, baseline_rss = fd_count(agent.proc.pid), rss_kib(agent.proc.pid)
    script = f"""
import array, os, socket, time
devnull = [os.open('/dev/null', os.O_RDONLY) for _ in range(16)]
held = []
for i in range(3000):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect({agent.socket!r})
        # a dribble of a header, carrying sixteen file descriptors
        s.sendmsg([b'DS'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', devnull))])
    except OSError:
        s.close()
        continue
    held.append(s)
print(f'held={{len(held)}}', flush=True)
time.sleep(30)
"""
    flood = Process(as_user(MALLORY, [harness.PYTHON, "-c", script]))
    # past his share of 32 the agent answers "busy" and hangs up; he got at least that far
    held = int(flood.read_line("held=", timeout=120).split("=")[1])
    assert held > 32, held
    # while he holds them, another user is served at once
    started = time.monotonic()
    assert info_json(agent, SVC, target.pid)["pid"] == target.pid
    assert time.monotonic() - started < 15   # starved, it would wait for the flood to end (30 s)
    # the agent holds his share (32) and the busy replies still being written (at most a backlog of
    # 128), never thousands of connections, and none of the 16 descriptors each of them carried
    assert fd_count(agent.proc.pid) <= baseline_fds + 32 + 128, fd_count(agent.proc.pid)

    flood.stop()
    wait_for(lambda: fd_count(agent.proc.pid) <= baseline_fds, timeout=30, what="the agent's fds to go back")
    # AddressSanitizer keeps freed memory in quarantine on purpose: resident size means nothing there
    if "libasan" in open(f"/proc/{agent.proc.pid}/maps").read():
        print("# memory not compared: the agent runs under AddressSanitizer")
    else:
        assert rss_kib(agent.proc.pid) < baseline_rss + 8 * 1024, (baseline_rss, rss_kib(agent.proc.pid))
    assert info_json(agent, SVC, target.pid)["pid"] == target.pid


@test
def one_users_flood_is_counted_in_a_record_a_second_and_others_are_decided_as_ever():
    target = Target(SVC)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 5\nmax_request_burst = 20\n')
    script = f"""
import socket, struct
decided = refused = 0
request = b'DSAG' + struct.pack('<HHI', 1, 2, 10) + struct.pack('<HI', 1, 4) + struct.pack('<I', 4194303)
for _ in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({agent.socket!r})
    s.sendall(request)
    reply = b''
    while chunk := s.recv(65536):
        reply += chunk
    s.close()
    if b'too many requests' in reply:
        refused += 1
    else:
        decided += 1
print(f'counts={{decided}} {{refused}}', flush=True)
"""
    flood = Process(as_user(MALLORY, [harness.PYTHON, "-c", script]))
    decided, refused = map(int, flood.read_line("counts=", timeout=120).split("=")[1].split())
    assert decided + refused == 300 and decided >= 20 and refused > 200, (decided, refused)
    # another user has a budget of his own
    assert info_json(agent, SVC, target.pid)["pid"] == target.pid
    mine = [r for r in agent.records() if r["DSAGENT_CLIENT_UID"] == str(harness.uid_of(MALLORY))]
    assert len(mine) == decided, (len(mine), decided)

    def counted():
        records = agent.records(message_id=harness.SUPPRESSED_MESSAGE_ID)
        return records if sum(int(r["DSAGENT_SUPPRESSED"]) for r in records) >= refused else None
    records = wait_for(counted, timeout=10, what="the records that count the refused requests")
    assert sum(int(r["DSAGENT_SUPPRESSED"]) for r in records) == refused, records
    assert {r["DSAGENT_CLIENT_UID"] for r in records} == {str(harness.uid_of(MALLORY))}, records


if __name__ == "__main__":
    run_tests()
