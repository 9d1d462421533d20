# SPDX-License-Identifier: LGPL-2.1-or-later
"""A crowd of processes that each listen where a .NET runtime of its pid would.

usage: many_listeners.py N

Forks N children; each binds $TMPDIR/dotnet-diagnostic-PID-STARTTIME-socket for its own pid and
start time, listens, and waits, so that each is a process `ps` lists (a listing calls no runtime).
Prints "listening N" once all are, then waits to be killed; the children die with it
(PR_SET_PDEATHSIG). They are forks, not new programs: they share this one's executable and
command line, which is how a test gives every one of them a long /proc/PID/exe.
"""
import ctypes
import os
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1
count = int(sys.argv[1])
tmpdir = os.environ["TMPDIR"]
libc = ctypes.CDLL(None, use_errno=True)


def start_time(pid):
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat[stat.rindex(")") + 2:].split()[19])


def listen_forever(ready):
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    me = os.getpid()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(f"{tmpdir}/dotnet-diagnostic-{me}-{start_time(me)}-socket")
    s.listen(1)
    os.write(ready, b".")
    while True:
        signal.pause()


read_end, write_end = os.pipe()
for _ in range(count):
    if os.fork() == 0:
        os.close(read_end)
        listen_forever(write_end)
        os._exit(0)
os.close(write_end)
ready = 0
while ready < count:
    chunk = os.read(read_end, count)
    if not chunk:
        sys.exit("a listener died before it listened")
    ready += len(chunk)
print(f"listening {count}", flush=True)
while True:
    signal.pause()
