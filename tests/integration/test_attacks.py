#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Attacks from a local user with no rights: every message type, floods, fd spam."""
import json
import os
import re
import struct
import time

import harness
from harness import (ALICE, MALLORY, SVC, Agent, FakeRuntime, Process, Target, as_user, info_json, run_tests,
                     test, wait_for)

# The most refused connections the agent holds at once before answering them (agent/loop/park.h), read from there
PARK_MAX = int(re.search(r"#define PARK_MAX (\d+)", open(os.path.join(harness.SOURCE, "agent/loop/park.h")).read())[1])


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
    # his listing of crashes reads the journal: an empty list where the agent can read one, its own error (9)
    # where no journal file is readable, as on a host without journald (docs/crashes.md): whichever it is here,
    # the flood's crashes request gets the same
    crashes = harness.dsctl(agent, MALLORY, "crashes")
    assert crashes.returncode in (0, 1), crashes
    listed = 3 + (crashes.returncode == 0)
    run = Process(as_user(MALLORY, [harness.PYTHON, "-c", script]))
    counts = eval(run.read_line("counts=", timeout=600).split("=", 1)[1])
    assert sum(counts.values()) == 65536, counts
    assert counts.get("nothing", 0) == 0, counts
    # the only ones not refused: listings of his own processes, dumps, collection tables and crashes (none), which
    # touch no runtime
    refused = {k: v for k, v in counts.items() if k.startswith("error-")}
    assert counts.get("type-0x8002") == listed and counts.get("error-9", 0) == 4 - listed, counts
    # every request about svc's process (info, env, explain, dump, counters, stacks, gcdump, exceptions,
    # logs, resume, resolve) is told it does not exist; a trace that names neither a profile nor providers, a
    # proxied request without its IPC message, and a copy of a crash without its id, are bad requests before any
    # process is looked at, like everything else
    assert {k: v for k, v in refused.items() if k != "error-9"} == {"error-2": 11, "error-6": 65536 - 4 - 11}, counts
    assert fake.received() == b"", "bytes reached the runtime"
    records = agent.records()
    assert records[0]["DSAGENT_COMMAND"] == "crashes", records[0]  # his listing above
    records = records[1:]  # the flood's own
    assert len(records) == 65536, len(records)
    assert {r["DSAGENT_DECISION"] for r in records} <= {"denied", "failed", "allowed"}
    assert sum(r["DSAGENT_DECISION"] == "allowed" for r in records) == listed
    # for the administrator, those eleven are what they are: denied by the policy
    denied = [r for r in records if r["DSAGENT_DECISION"] == "denied"]
    assert len(denied) == 11 and all(r["DSAGENT_TARGET_PID"] == str(fake.pid) for r in denied), denied

@test
def a_connection_flood_with_fd_spam_leaves_others_served_and_nothing_behind():
    target = Target(SVC)
    agent = Agent()
    info_json(agent, SVC, target.pid)  # warm: the agent's steady state before the attack
    baseline_fds, baseline_rss = fd_count(agent.proc.pid), rss_kib(agent.proc.pid)
    baseline_devnull = harness.fd_links(agent.proc.pid).count("/dev/null")
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
    # none of the 16 descriptors each of his connections carried (all /dev/null) is the agent's
    links = harness.fd_links(agent.proc.pid)
    assert links.count("/dev/null") == baseline_devnull, links
    # and his connections are bounded: his share (32), the busy replies still being written (at most a backlog
    # of 128), and the refusals held a second each before they are answered (at most PARK_MAX, 2048: see
    # agent/loop/park.h). How many of those a second holds depends on how fast the flood ran, hence the bound
    # and not an exact count; without one the agent would hold all 3000 and their 48,000 descriptors.
    assert fd_count(agent.proc.pid) <= baseline_fds + 32 + 128 + PARK_MAX, fd_count(agent.proc.pid)

    flood.stop()
    wait_for(lambda: fd_count(agent.proc.pid) <= baseline_fds, timeout=30, what="the agent's fds to go back")
    # AddressSanitizer keeps freed memory in quarantine on purpose: resident size means nothing there
    if "libasan" in open(f"/proc/{agent.proc.pid}/maps").read():
        print("# memory not compared: the agent runs under AddressSanitizer")
    else:
        assert rss_kib(agent.proc.pid) < baseline_rss + 8 * 1024, (baseline_rss, rss_kib(agent.proc.pid))
    assert info_json(agent, SVC, target.pid)["pid"] == target.pid


# A client's loop of one-request connections (info about a pid that cannot exist), as fast as the agent
# answers: ask(socket path, n) is (decided, refused as "too many requests").
ASK_AGAIN_AND_AGAIN = """
import socket, struct
def ask(path, n):
    request = b'DSAG' + struct.pack('<HHI', 1, 2, 10) + struct.pack('<HI', 1, 4) + struct.pack('<I', 4194303)
    decided = refused = 0
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.sendall(request)
        reply = b''
        while chunk := s.recv(65536):
            reply += chunk
        s.close()
        if b'too many requests' in reply:
            refused += 1
        else:
            decided += 1
    return decided, refused
"""


def suppression_records(agent, refused):
    """The records that count @refused refused requests, once they are all counted."""
    def counted():
        records = agent.records(message_id=harness.SUPPRESSED_MESSAGE_ID)
        return records if sum(int(r["DSAGENT_SUPPRESSED"]) for r in records) >= refused else None
    records = wait_for(counted, timeout=10, what="the records that count the refused requests")
    assert sum(int(r["DSAGENT_SUPPRESSED"]) for r in records) == refused, records
    return records


@test
def one_users_flood_is_counted_in_a_record_a_second_and_others_are_decided_as_ever():
    target = Target(SVC)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 5\nmax_request_burst = 20\n')
    script = ASK_AGAIN_AND_AGAIN + f"print('counts=%d %d' % ask({agent.socket!r}, 300), flush=True)\n"
    flood = Process(as_user(MALLORY, [harness.PYTHON, "-c", script]))
    decided, refused = map(int, flood.read_line("counts=", timeout=120).split("=")[1].split())
    assert decided + refused == 300 and decided >= 20 and refused > 200, (decided, refused)
    # another user has a budget of his own
    assert info_json(agent, SVC, target.pid)["pid"] == target.pid
    mine = [r for r in agent.records() if r["DSAGENT_CLIENT_UID"] == str(harness.uid_of(MALLORY))]
    assert len(mine) == decided, (len(mine), decided)
    records = suppression_records(agent, refused)
    assert {r["DSAGENT_CLIENT_UID"] for r in records} == {str(harness.uid_of(MALLORY))}, records


# Run in a user namespace of the user's own, mapped onto her subordinate range (newuidmap), as its root:
# each of N_UIDS children takes a uid of its own there and opens PER_UID connections that send two bytes
# of a header and then nothing, and holds them (the agent closes them at its request deadline, 5 s).
NAMESPACE_FLOOD = """
import os, select, socket, sys, time
sock, n_uids, per_uid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
first_uid = int(sys.argv[4]) if len(sys.argv) > 4 else 1

def connect_or_wait(deadline):
    # a slow agent (a loaded machine, a sanitizer) leaves its backlog full for a while: each uid waits its
    # turn rather than give up, so that every one of them reaches the agent
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(sock)
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)
        except OSError:
            s.close()
            return None

# every connection is made before the first one held could reach the agent's request deadline (5 s): what
# she holds at once is then what the records of held connections count
deadline = time.monotonic() + 4
children = []
for k in range(first_uid, first_uid + n_uids):
    pid = os.fork()
    if pid == 0:
        os.setresgid(k, k, k)
        os.setresuid(k, k, k)
        held, sent = [], 0
        for _ in range(per_uid):
            s = connect_or_wait(deadline)
            if s is None:
                continue
            try:
                sent += s.send(b'DS') == 2
            except OSError:
                pass
            held.append(s)
        os.write(1, f'connected={len(held)} {sent}\\n'.encode())  # one write: the children share the pipe
        # then until the agent has answered each (its reply and its close: a refusal at once, a held one at the
        # request deadline), so that a test knows when every record is written; 120 s: a bound against a hang
        waiting, end = list(held), time.monotonic() + 120
        while waiting and time.monotonic() < end:
            for s in select.select(waiting, [], [], 1)[0]:
                try:
                    gone = not s.recv(65536)
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    waiting.remove(s)
        os.write(1, f'answered={len(held) - len(waiting)} of {len(held)}\\n'.encode())
        time.sleep(120)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""


def flood_lines(flood, prefix, n, timeout=harness.RUNTIME_BOUND):
    """The next @n lines of @flood that begin with @prefix: its children write lines of several kinds in whatever
    order they get to them, and a line of another kind read meanwhile is kept for its own turn (flood.kept)."""
    kept = flood.__dict__.setdefault("kept", [])
    out = [line for line in kept if line.startswith(prefix)][:n]
    for line in out:
        kept.remove(line)
    while len(out) < n:
        line = flood.read_line("", timeout=timeout)
        (out if line.startswith(prefix) else kept).append(line)
    return out


def namespace_flood(agent, user, n_uids, per_uid):
    """@user's flood from many uids of her subordinate range: (process, connections made, and of them
    those that sent their two bytes (a connection that sent nothing ends without a record))."""
    flood = Process(as_user(user, ["unshare", "--user", "--map-auto", "--setuid", "0", "--setgid", "0", "--",
                                   harness.PYTHON, "-c", NAMESPACE_FLOOD, agent.socket, str(n_uids), str(per_uid)]))
    counts = [line.split("=")[1].split() for line in flood_lines(flood, "connected=", n_uids)]
    return flood, sum(int(c[0]) for c in counts), sum(int(c[1]) for c in counts)


@test
def many_uids_of_one_users_namespace_count_as_that_one_user():
    """A user with a subordinate uid range runs processes under many uids in a user namespace of her own:
    each of them was a requester of its own, and one user held hundreds of connections (the global cap) where
    her share is 32. Charged to the namespace's owner, they hold her 32; the records name both uids."""
    sub = harness.subordinate_range(MALLORY)
    target = Target(SVC)
    own = Target(ALICE)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 100000\n'
                         'max_request_burst = 1000000\n')
    flood, connected, sent = namespace_flood(agent, MALLORY, 24, 40)
    # while she holds them, root and another user are answered
    assert info_json(agent, "root", target.pid)["pid"] == target.pid
    assert info_json(agent, ALICE, own.pid)["pid"] == own.pid
    # every connection she made is answered, held ones at the request deadline, the others at once; the record
    # of each is written before its answer. Only then does she go: a connection she closed first would read as an
    # incomplete request, which is not what this tests
    answered = flood_lines(flood, "answered=", 24)
    assert all(a.split("=")[1].split(" of ")[0] == a.split(" of ")[1] for a in answered), answered
    flood.stop()
    uids = range(sub + 1, sub + 25)
    mine = [r for r in agent.records() if int(r["DSAGENT_CLIENT_UID"]) in uids]
    assert sent <= len(mine) <= connected, (len(mine), sent, connected)
    # the attack was real: a dozen uids and more reached the agent (a child that found the backlog full until
    # the flood's deadline has no record)
    assert len({r["DSAGENT_CLIENT_UID"] for r in mine}) >= 12, {r["DSAGENT_CLIENT_UID"] for r in mine}
    # she held her share, no more: the rest were told "busy" at once
    held = [r for r in mine if r["DSAGENT_REASON"] == "the request did not arrive in time"]
    busy = [r for r in mine if r["DSAGENT_REASON"] == "too many connections from this user"]
    assert len(held) + len(busy) == len(mine), {r["DSAGENT_REASON"] for r in mine}
    assert 0 < len(held) <= 32 and len(busy) >= sent - 32, (len(held), len(busy))
    # each of them counted against her, as the records say beside the uid that connected
    assert all(r.get("DSAGENT_CLIENT_CHARGED_UID") == str(harness.uid_of(MALLORY)) for r in mine), mine[:3]
    # a peer in the agent's own namespace counts against its own uid, and its record says no more
    r = [r for r in agent.records() if r["DSAGENT_CLIENT_UID"] == "0"][0]
    assert "DSAGENT_CLIENT_CHARGED_UID" not in r, r


def capped_and_held_by_mallory():
    """An agent that serves 40 connections at once (a test hook), 32 of them held by mallory's namespace, and
    svc's app: (target, agent, her flood)."""
    harness.subordinate_range(MALLORY)
    target = Target(SVC)
    agent = Agent(env={"DSAGENT_TEST_MAX_CONNECTIONS": "40"},
                  policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 100000\n'
                         'max_request_burst = 1000000\n')
    flood, connected, _ = namespace_flood(agent, MALLORY, 4, 8)  # her share: 32
    assert connected == 32, connected
    return target, agent, flood


@test
def root_has_a_slot_past_the_global_cap():
    """The connections the agent serves at once all held by others: root is still let in and answered, while
    they hold theirs (his record comes before the first of theirs to time out), and the others are told
    "busy" at once instead of waiting."""
    target, agent, flood = capped_and_held_by_mallory()
    others, alice_connected, _ = namespace_flood(agent, ALICE, 1, 8)  # and 8 of alice's: the 40 are held
    assert alice_connected == 8, alice_connected
    assert info_json(agent, "root", target.pid)["pid"] == target.pid
    records = agent.records()
    timed_out = [i for i, r in enumerate(records) if r["DSAGENT_REASON"] == "the request did not arrive in time"]
    root = [i for i, r in enumerate(records) if r["DSAGENT_CLIENT_UID"] == "0" and r.get("DSAGENT_COMMAND") == "info"]
    assert root and (not timed_out or root[0] < timed_out[0]), (root, timed_out[:3])
    # past the cap, another user's connection is refused at once, not left waiting
    r = harness.dsctl(agent, SVC, "info", str(target.pid))
    assert r.returncode == harness.EXIT_BUSY and "as many connections as it may" in r.stderr, r
    flood.stop()
    others.stop()


# The same flood from a user namespace root made, as a rootful container runtime, systemd's PrivateUsers= or
# the kubelet make theirs: its first process, root, makes it (keeping every capability there: no exec after) and
# waits until root outside has written its maps.
ROOT_MADE_NAMESPACE_FLOOD = """
import ctypes, os, time
if ctypes.CDLL(None, use_errno=True).unshare(0x10000000) != 0:  # CLONE_NEWUSER
    raise OSError(ctypes.get_errno(), 'unshare')
print(f'unmapped pid={os.getpid()}', flush=True)
while not open('/proc/self/uid_map').read().strip():
    time.sleep(0.01)
""" + NAMESPACE_FLOOD


def root_made_namespace_flood(agent, n_uids, per_uid, mapping="0 301000 65536", first_uid=1):
    """A user namespace root makes and maps (@mapping, uids and gids alike), flooding the agent from @n_uids of its
    uids from @first_uid (as namespace_flood()): (process, connections made, those that sent their two bytes,
    the namespace's inode)."""
    flood = Process([harness.PYTHON, "-c", ROOT_MADE_NAMESPACE_FLOOD, agent.socket, str(n_uids), str(per_uid),
                     str(first_uid)])
    pid = int(flood.read_line("unmapped pid=").split("=")[1])
    inode = os.stat(f"/proc/{pid}/ns/user").st_ino
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{pid}/{name}", "w") as f:
            f.write(mapping + "\n")
    counts = [line.split("=")[1].split() for line in flood_lines(flood, "connected=", n_uids)]
    return flood, sum(int(c[0]) for c in counts), sum(int(c[1]) for c in counts), inode


def a_namespace_root_made_is_charged_as_itself(env=None):
    """Root made the namespace, so NS_GET_OWNER_UID said 0, and its peers were charged to root: an ordinary host
    uid (301000 and up) holding 40 connections took root's share, and root's own ps and info were refused. The
    namespace is charged as itself now: its uids share one share of their own, root keeps his."""
    target = Target(SVC)
    agent = Agent(env=env, policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 100000\n'
                                  'max_request_burst = 1000000\n')
    flood, connected, sent, inode = root_made_namespace_flood(agent, 24, 40)
    # the attack is in place: connections from host uids of the namespace's range
    assert connected >= 32 * 2, connected
    # while they hold theirs, root is answered, ps and info
    assert info_json(agent, "root", target.pid)["pid"] == target.pid
    r = harness.dsctl(agent, "root", "--json", "ps")
    assert r.returncode == 0 and target.pid in [p["pid"] for p in json.loads(r.stdout)], r
    uids = range(301001, 301025)
    # each connection answered (and so recorded) before they go: one closed first would be an incomplete request
    answered = flood_lines(flood, "answered=", 24)
    assert all(a.split("=")[1].split(" of ")[0] == a.split(" of ")[1] for a in answered), answered
    flood.stop()
    theirs = [r for r in agent.records() if int(r["DSAGENT_CLIENT_UID"]) in uids]
    assert sent <= len(theirs) <= connected, (len(theirs), sent, connected)
    assert len({r["DSAGENT_CLIENT_UID"] for r in theirs}) >= 12, {r["DSAGENT_CLIENT_UID"] for r in theirs}
    # every one charged to the namespace, none to root
    assert all(r.get("DSAGENT_CLIENT_CHARGED_UID") == f"userns:{inode}" for r in theirs), theirs[:3]
    # its many uids are one share: 32 held, the rest busy
    held = [r for r in theirs if r["DSAGENT_REASON"] == "the request did not arrive in time"]
    busy = [r for r in theirs if r["DSAGENT_REASON"] == "too many connections from this user"]
    assert len(held) + len(busy) == len(theirs), {r["DSAGENT_REASON"] for r in theirs}
    assert 0 < len(held) <= 32 and len(busy) >= sent - 32, (len(held), len(busy))
    # root's own records are his: charged to himself, nothing else
    mine = [r for r in agent.records() if r["DSAGENT_CLIENT_UID"] == "0"]
    assert len(mine) == 2 and all(r["DSAGENT_DECISION"] == "allowed" for r in mine), mine
    assert not any("DSAGENT_CLIENT_CHARGED_UID" in r for r in mine), mine


@test
def a_namespace_root_made_is_charged_as_itself_never_as_root():
    a_namespace_root_made_is_charged_as_itself()


@test
def a_namespace_root_made_is_charged_as_itself_on_kernels_without_so_peerpidfd():
    # before Linux 6.5 (Debian 12): the peer's pidfd by pidfd_open() of its pid, checked, and its namespace from
    # /proc/PID/ns/user (no PIDFD_GET_USER_NAMESPACE before 6.11), checked against the pidfd
    a_namespace_root_made_is_charged_as_itself(env={"DSAGENT_TEST_NO_PEERPIDFD": "1"})


@test
def a_namespace_root_made_is_charged_as_itself_on_kernels_without_pidfd_get_user_namespace():
    # Linux 6.5 to 6.10: SO_PEERPIDFD, but the namespace from /proc/PID/ns/user
    a_namespace_root_made_is_charged_as_itself(env={"DSAGENT_TEST_NO_PIDFD_USERNS": "1"})


@test
def uid_0_of_a_namespace_root_made_has_none_of_roots_share_or_slots():
    """uid 0 of a namespace root made and mapped onto the host's 0 (what PrivateUsers=yes does for a service that
    runs as root) is root's uid, but not root: with the connections served at once held by her and it, its next
    ones went into root's slots past the cap, and root waited in the backlog behind them until their request
    deadline. Charged as its namespace, they are told busy at once, and root is answered at once."""
    target, agent, flood = capped_and_held_by_mallory()
    ns_flood, ns_connected, _, inode = root_made_namespace_flood(agent, 1, 12, mapping="0 0 1", first_uid=0)
    assert ns_connected == 12, ns_connected
    assert info_json(agent, "root", target.pid)["pid"] == target.pid
    records = agent.records()
    timed_out = [i for i, r in enumerate(records) if r["DSAGENT_REASON"] == "the request did not arrive in time"]
    root = [i for i, r in enumerate(records) if r["DSAGENT_CLIENT_UID"] == "0" and r.get("DSAGENT_COMMAND") == "info"]
    assert root and (not timed_out or root[0] < timed_out[0]), (root, timed_out[:3])
    assert "DSAGENT_CLIENT_CHARGED_UID" not in records[root[0]], records[root[0]]
    # uid 0 of the namespace: past the cap like anyone but root, told so at once, charged to its namespace
    theirs = [r for r in records if r.get("DSAGENT_CLIENT_CHARGED_UID") == f"userns:{inode}"]
    assert len(theirs) == 4 and all(r["DSAGENT_CLIENT_UID"] == "0" for r in theirs), theirs
    assert all("as many connections as it may" in r["DSAGENT_REASON"] for r in theirs), theirs
    flood.stop()
    ns_flood.stop()


@test
def many_uids_of_one_users_namespace_share_her_budget_of_records():
    """Each uid of her namespace had a request budget of its own: ten uids, ten bursts of records. Charged to
    her, they share one, and the refused ones are counted in records that name her."""
    sub = harness.subordinate_range(MALLORY)
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 5\nmax_request_burst = 20\n')
    script = ASK_AGAIN_AND_AGAIN + """
import os, sys
children = []
for k in range(1, 11):
    pid = os.fork()
    if pid == 0:
        os.setresgid(k, k, k)
        os.setresuid(k, k, k)
        print('counts=%d %d' % ask(sys.argv[1], 30), flush=True)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""
    started = time.monotonic()
    flood = Process(as_user(MALLORY, ["unshare", "--user", "--map-auto", "--setuid", "0", "--setgid", "0", "--",
                                      harness.PYTHON, "-c", script, agent.socket]))
    counts = [tuple(map(int, flood.read_line("counts=", timeout=120).split("=")[1].split())) for _ in range(10)]
    took = time.monotonic() - started
    decided, refused = sum(c[0] for c in counts), sum(c[1] for c in counts)
    uids = range(sub + 1, sub + 11)
    mine = [r for r in agent.records() if int(r["DSAGENT_CLIENT_UID"]) in uids]
    # the attack was real: ten uids asked, and each had its requests decided as its own
    assert len({r["DSAGENT_CLIENT_UID"] for r in mine}) > 1 and len(mine) == decided, (len(mine), decided)
    # one budget for all ten: her burst (20) and what she earned back while the flood ran (5 a second), not
    # ten bursts (200 at once, and 50 a second); on a slow machine the flood takes longer and earns more back
    assert decided + refused == 300 and decided <= 20 + 5 * took + 5, (decided, refused, took)
    assert 20 + 5 * took + 5 < 200, f"the flood took {took:.0f} s: too long to tell one budget from ten"
    assert all(r.get("DSAGENT_CLIENT_CHARGED_UID") == str(harness.uid_of(MALLORY)) for r in mine), mine[:3]
    records = suppression_records(agent, refused)
    assert {r["DSAGENT_CLIENT_UID"] for r in records} == {str(harness.uid_of(MALLORY))}, records


@test
def a_users_subordinate_uids_share_the_users_request_budget():
    # /etc/subuid gives mallory 65536 uids of the host she may become alone (newuidmap): each with a
    # budget of its own, her flood of decided and recorded requests would be 65536 times the policy's
    uid, gid = harness.subordinate_range(MALLORY), harness.subordinate_range(MALLORY, "/etc/subgid")
    agent = Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\nmax_requests_per_second = 1\nmax_request_burst = 5\n')
    script = f"""
import os, socket, struct
request = b'DSAG' + struct.pack('<HHI', 1, 2, 10) + struct.pack('<HI', 1, 4) + struct.pack('<I', 4194303)
def refused(n):
    count = 0
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect({agent.socket!r})
        s.sendall(request)
        reply = b''
        while chunk := s.recv(65536):
            reply += chunk
        s.close()
        count += b'too many requests' in reply
    return count

mine = refused(10)  # her budget spent, as herself
os.setresuid(1, 1, 1)
print(f'pid={{os.getpid()}}', flush=True)
print(f'refused={{mine}} {{refused(5)}}', flush=True)  # as the host's uid {uid}
"""
    # in a user namespace of hers, as its root (her own uid outside), then as its uid 1: the host's uid
    flood = Process(as_user(MALLORY, ["unshare", f"--map-users={uid},1,1", f"--map-groups={gid},1,1",
                                      "--map-user=0", "--map-group=0", harness.PYTHON, "-c", script]))
    # the attack is in place: the process that sent the last requests is the host's uid, not hers
    assert os.stat(f"/proc/{flood.read_line('pid=').split('=')[1]}").st_uid == uid
    mine, subordinate = map(int, flood.read_line("refused=", timeout=120).split("=")[1].split())
    assert mine >= 4, mine
    # a second or two may pass on a loaded machine, each giving one request back
    assert subordinate >= 3, subordinate


if __name__ == "__main__":
    run_tests()
