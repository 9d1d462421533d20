#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""In the SELinux guest: a store that notes who came and answers nothing (tests/selinux/guest-suite.sh).

egress-store.py PORT RESULTS COUNT: listens on 127.0.0.1:PORT, touches RESULTS/egress-store.listening,
then for each of COUNT connections, at the moment it is accepted (the process that connected waits for
an answer, so it is alive), writes to RESULTS/egress-peer.N.txt who connected, found by the kernel's
socket tables: "pid=P comm=C label=L ppid=PP parent_comm=PC parent_label=PL agent=A agent_comm=AC
agent_label=AL" (the agent: the nearest forebear that is not dsagent-egress), and `ps` with labels to
RESULTS/egress-ps-Z.N.txt, the request's head to RESULTS/egress-request.N.txt, and closes the
connection without an answer.
On the last one it first kills the agent and writes to
RESULTS/egress-pdeath.txt whether the egress process went with it: it holds the connection, so
only PR_SET_PDEATHSIG (or its own watch on the agent) ends it before the store answers.
"""
import os
import signal
import socket
import subprocess
import sys
import time



def read(path):
    try:
        with open(path) as f:
            return f.read().rstrip("\0\n")
    except OSError as e:
        return f"?({e.strerror})"


def peer_process(conn):
    """The pid whose socket is the other end of @conn: its inode in /proc/net/tcp, then the fd holding it."""
    local_port, peer_port = conn.getsockname()[1], conn.getpeername()[1]
    inode = None
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == peer_port and int(fields[2].split(":")[1], 16) == local_port:
            inode = fields[9]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return int(pid)
            except OSError:
                pass
    return None


def parent_of(pid):
    return int(read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[1])


def describe(pid):
    """Who connected, its parent, and the agent: its nearest forebear that is not dsagent-egress (the egress
    process is a supervisor whose server answers checks, and whose server's children upload)."""
    ppid = agent = parent_of(pid)
    while read(f"/proc/{agent}/comm") == "dsagent-egress":
        agent = parent_of(agent)
    return (f"pid={pid} comm={read(f'/proc/{pid}/comm')} label={read(f'/proc/{pid}/attr/current')} ppid={ppid} "
            f"parent_comm={read(f'/proc/{ppid}/comm')} parent_label={read(f'/proc/{ppid}/attr/current')} "
            f"agent={agent} agent_comm={read(f'/proc/{agent}/comm')} "
            f"agent_label={read(f'/proc/{agent}/attr/current')}"), agent


def alive(pid):
    """Running, not dead nor a zombie waiting to be reaped."""
    try:
        return "\nState:\tZ" not in open(f"/proc/{pid}/status").read()
    except FileNotFoundError:
        return False


port, results, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(4)
# a bound for a check that never comes: the suite starts it right after this file appears, and under an
# emulated CPU the agent starts within seconds; 600 s is far past that, and keeps a broken run finite
listener.settimeout(600)
open(os.path.join(results, "egress-store.listening"), "w").close()
for n in range(1, count + 1):
    conn, _ = listener.accept()
    pid = peer_process(conn)
    text, agent = describe(pid) if pid else ("no process holds the other end", None)
    with open(os.path.join(results, f"egress-peer.{n}.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(results, f"egress-ps-Z.{n}.txt"), "w") as f:
        subprocess.run(["ps", "-e", "-o", "label,pid,ppid,comm"], stdout=f, stderr=subprocess.STDOUT)
    # the request's head: curl sends it at once after connecting; a bound of its own as above
    conn.settimeout(60)
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 65536:
        chunk = conn.recv(4096)
        if not chunk:
            break
        head += chunk
    with open(os.path.join(results, f"egress-request.{n}.txt"), "wb") as f:
        f.write(head)
    if n == count:
        with open(os.path.join(results, "egress-pdeath.txt"), "w") as f:
            if not pid:
                f.write("no process connected\n")
            else:
                os.kill(agent, signal.SIGKILL)
                # the kernel sends the death signal as the parent exits: 20 s is far past that even
                # emulated, and short of the 30 s after which curl's low-speed limit would end it
                start = time.monotonic()
                while alive(pid) and time.monotonic() - start < 20:
                    time.sleep(0.1)
                f.write(f"egress {pid} {'outlived' if alive(pid) else 'died with'} its agent {agent} "
                        f"({time.monotonic() - start:.1f} s)\n")
    conn.close()
