# SPDX-License-Identifier: LGPL-2.1-or-later
"""A FUSE file system whose server never answers, for at most SECONDS.

usage: fuse_stall.py MOUNTPOINT SECONDS

Mounts a FUSE file system of type fuse.dsagent-stall on MOUNTPOINT (as root, with
allow_other, as a user's file system looks when /etc/fuse.conf has user_allow_other),
prints "mounted", and then never reads /dev/fuse: the kernel's INIT request and every
lookup after it wait. After SECONDS, or when killed, the server's end of /dev/fuse
closes, which aborts the connection and releases every waiter with ENOTCONN; the
mount is then detached.
"""
import ctypes
import os
import sys
import time

mountpoint, seconds = sys.argv[1], float(sys.argv[2])
libc = ctypes.CDLL(None, use_errno=True)
MNT_DETACH = 2

fd = os.open("/dev/fuse", os.O_RDWR)
options = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
if libc.mount(b"dsagent-stall", mountpoint.encode(), b"fuse.dsagent-stall", 0, options) != 0:
    e = ctypes.get_errno()
    sys.exit(f"mount: {os.strerror(e)}")
print("mounted", flush=True)
try:
    time.sleep(seconds)  # the stall itself, as long as the test asks: a test makes it outlast what it checks
finally:
    os.close(fd)
    libc.umount2(mountpoint.encode(), MNT_DETACH)
