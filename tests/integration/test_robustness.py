#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Misbehaving runtimes and clients: nothing stalls the agent, nothing unchecked gets through."""
import os
import shutil
import socket
import subprocess
import sys
import time

import harness
from harness import (ALICE, EXIT_BUSY, EXIT_DENIED, EXIT_RUNTIME_UNREACHABLE, MALLORY, SVC, WIRE_DONE, WIRE_INFO,
                     AcceptWatch, Agent, FakeRuntime, Process, Target, as_user, dsctl, error_code, info_json,
                     make_dir, raw_exchange, run_tests, test, wire_frame, wire_info_request)

WIRE_ERROR_BAD_REQUEST, WIRE_ERROR_UNSUPPORTED_VERSION = 6, 7
PROCESS_INFO3_REQUEST = b"DOTNET_IPC_V1\x00" + bytes([0x14, 0x00, 0x04, 0x08, 0x00, 0x00])


@test
def silent_runtime_times_out_and_blocks_no_one():
    fake = FakeRuntime("silent")
    real = Target(SVC)
    agent = Agent("--runtime-timeout", "10")

    stuck = subprocess.Popen(as_user(SVC, [harness.DSCTL, "--socket", agent.socket, "info", str(fake.pid)]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    harness.wait_for(lambda: fake.received(), timeout=10, what="the request to reach the silent runtime")
    # while the silent runtime holds its request, another one is served at once
    assert info_json(agent, SVC, real.pid)["pid"] == real.pid
    assert stuck.poll() is None, "the stuck request ended before its deadline"

    out, err = stuck.communicate(timeout=60)
    assert stuck.returncode == EXIT_RUNTIME_UNREACHABLE, (stuck.returncode, err)
    assert "did not answer in time" in err
    # exactly the canonical request reached it: nothing of the client's framing
    assert fake.received() == PROCESS_INFO3_REQUEST, fake.received()


@test
def malformed_runtime_reply_is_an_error_not_a_result():
    fake = FakeRuntime("garbage")
    agent = Agent()
    r = dsctl(agent, SVC, "info", str(fake.pid))
    assert r.returncode == EXIT_RUNTIME_UNREACHABLE, r
    assert "malformed" in r.stderr and r.stdout == ""


@test
def runtime_hanging_up_is_reported():
    fake = FakeRuntime("close")
    agent = Agent()
    r = dsctl(agent, SVC, "info", str(fake.pid))
    assert r.returncode == EXIT_RUNTIME_UNREACHABLE, r
    assert "closed the connection" in r.stderr


@test
def stalled_client_blocks_no_one_and_is_cut_off():
    real = Target(SVC)
    agent = Agent()
    stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stalled.connect(agent.socket)
    stalled.sendall(wire_info_request(real.pid)[:7])  # half a header, then nothing

    assert info_json(agent, SVC, real.pid)["pid"] == real.pid

    stalled.settimeout(30)
    started = time.monotonic()
    reply = b""
    while chunk := stalled.recv(4096):
        reply += chunk
    assert time.monotonic() - started < 25
    frames = harness.wire_decode(reply)
    assert error_code(frames) == WIRE_ERROR_BAD_REQUEST
    assert any(r.get("DSAGENT_REASON") == "the request did not arrive in time" for r in agent.records())


@test
def trailing_bytes_are_refused_and_reach_no_runtime():
    real = Target(SVC)
    agent = Agent()
    watch = AcceptWatch(real.pid)
    request = wire_info_request(real.pid)

    # a second frame in the same write must not be read as a second request
    frames = raw_exchange(agent, request + request)
    assert error_code(frames) == WIRE_ERROR_BAD_REQUEST
    frames = raw_exchange(agent, request + b"\x00")
    assert error_code(frames) == WIRE_ERROR_BAD_REQUEST
    # a size field that claims less than the payload holds
    short = bytearray(request)
    short[8] -= 1
    assert error_code(raw_exchange(agent, bytes(short))) == WIRE_ERROR_BAD_REQUEST
    assert watch.accepts() == 0
    # control: the exact frame alone is served
    assert raw_exchange(agent, request)[-1][0] == WIRE_DONE
    assert watch.accepts() == 1


@test
def unknown_protocol_version_is_answered_not_guessed():
    agent = Agent()
    frames = raw_exchange(agent, wire_frame(WIRE_INFO, version=2))
    assert error_code(frames) == WIRE_ERROR_UNSUPPORTED_VERSION


@test
def one_user_cannot_exhaust_the_agent_for_others():
    real = Target(SVC)
    agent = Agent()
    # ALICE parks 40 idle connections; past her share she is told the agent is busy
    hog = Process(as_user(ALICE, [harness.PYTHON, "-c", f"""
import select, socket, struct, time
held = []
for i in range(40):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({agent.socket!r})
    held.append(s)

def is_busy(data):
    return data[6:8] == struct.pack('<H', 0x8003) and struct.pack('<I', 8) in data

# each answer counted as it comes (a slow agent answers late), then half a second more for any beyond 8
busy, pending, deadline = 0, set(held), time.monotonic() + 30
while busy < 8 and time.monotonic() < deadline:
    for s in select.select(list(pending), [], [], 0.2)[0]:
        pending.discard(s)
        busy += is_busy(s.recv(4096))
time.sleep(0.5)
for s in select.select(list(pending), [], [], 0)[0]:
    busy += is_busy(s.recv(4096))
print(f"busy={{busy}}", flush=True)
time.sleep(60)
"""]))
    busy = int(hog.read_line("busy=").split("=")[1])
    assert busy == 40 - 32, busy
    # meanwhile everyone else is served
    assert info_json(agent, SVC, real.pid)["pid"] == real.pid
    r = dsctl(agent, ALICE, "info", str(real.pid))
    assert r.returncode == EXIT_BUSY, r


@test
def hostile_names_cannot_forge_audit_records():
    # the target's owner chooses its executable's path: put a newline and a fake field in it
    app_dir = os.path.dirname(harness.target_app())
    evil_dir = os.path.join(make_dir(None, 0o755), 'x\nDSAGENT_DECISION="allowed"')
    shutil.copytree(app_dir, evil_dir)
    os.chmod(os.path.dirname(evil_dir), 0o755)
    # started as ./DsTestTarget: env would take a path with "=" in it for an assignment
    target = Process(as_user(SVC, ["env", "-i", f"TMPDIR={make_dir(SVC)}", "DOTNET_CLI_TELEMETRY_OPTOUT=1",
                                   "./DsTestTarget"]), cwd=evil_dir)
    pid = int(target.read_line("ready pid=").split()[1].split("=")[1])
    agent = Agent()

    assert dsctl(agent, SVC, "info", str(pid)).returncode == 0
    assert dsctl(agent, ALICE, "info", str(pid)).returncode == harness.EXIT_NO_SUCH_PROCESS

    lines = open(agent.log_path).read().splitlines()
    assert all(line.startswith("dsagent-audit:") for line in lines), lines
    records = agent.records()
    assert len([line for line in lines if harness.REQUEST_MESSAGE_ID in line]) == len(records) == 2, lines
    assert [r["DSAGENT_DECISION"] for r in records] == ["allowed", "denied"]
    assert "\\x0aDSAGENT_DECISION=\\x22allowed\\x22" in records[0]["DSAGENT_TARGET_EXE"]


@test
def a_users_subordinate_uids_share_the_users_connections():
    # /etc/subuid gives mallory 65536 uids of the host she may become alone (newuidmap): 16 of them
    # would fill the agent's 512 connections if each had 32 of its own
    uid, gid = harness.subordinate_range(MALLORY), harness.subordinate_range(MALLORY, "/etc/subgid")
    real = Target(SVC)
    agent = Agent()
    # in a user namespace of hers, as its root (her own uid outside), then as its uid 1: the host's uid
    hog = Process(as_user(MALLORY, ["unshare", f"--map-users={uid},1,1", f"--map-groups={gid},1,1", "--map-user=0",
                                    "--map-group=0", harness.PYTHON, "-c", f"""
import os, select, socket, struct, time
def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({agent.socket!r})
    return s

def is_busy(data):
    return data[6:8] == struct.pack('<H', 0x8003) and struct.pack('<I', 8) in data

mine = [connect() for i in range(32)]  # her share, as herself
os.setresuid(1, 1, 1)
print(f"pid={{os.getpid()}}", flush=True)
held = [connect() for i in range(8)]  # as the host's uid {uid}
busy, pending, deadline = 0, set(held), time.monotonic() + 30
while busy < 8 and pending and time.monotonic() < deadline:
    for s in select.select(list(pending), [], [], 0.2)[0]:
        pending.discard(s)
        busy += is_busy(s.recv(4096))
print(f"busy={{busy}}", flush=True)
time.sleep(60)
"""]))
    # the attack is in place: the process that made the last connections is the host's uid, not hers
    assert os.stat(f"/proc/{hog.read_line('pid=').split('=')[1]}").st_uid == uid
    busy = int(hog.read_line("busy=").split("=")[1])
    assert busy == 8, busy
    assert info_json(agent, SVC, real.pid)["pid"] == real.pid


if __name__ == "__main__":
    run_tests()
