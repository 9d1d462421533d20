# SPDX-License-Identifier: LGPL-2.1-or-later
"""A process of the target's user, in the target's namespaces, attacking every staging directory that appears.

usage: staging_watcher.py MODE ARG STOP TALLY

  mount-inside VICTIM   make a directory in the staging directory and bind VICTIM onto it
  mount-over-dir VICTIM bind VICTIM onto the staging directory
  mount-over-fifo FILE  bind FILE onto the staging directory's "dump"
  hold-fds -            open everything in the staging directory read-write (else write-only, else
                        read-only), map what can be mapped shared and writable, and keep it all;
                        once STOP appears, write and grow through every fd and mapping for 2 s

Mounting needs a user and mount namespace of one's own: run it with nsenter --user --mount
into the target's. It prints "watching" once it watches (a test starts the dump after that line).
When STOP appears it writes TALLY as JSON: how many staging directories it
saw, what it managed (mounts in place, fds held, mappings), and the errors it got.
"""
import ctypes
import glob
import json
import mmap
import os
import sys
import time

mode, arg, stop, tally = sys.argv[1:5]
MS_BIND = 4096
libc = ctypes.CDLL(None, use_errno=True)
seen, done, errors, held, maps = set(), [], set(), [], []


def bind_mount(source, target):
    if libc.mount(source.encode(), target.encode(), None, MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def attack(staging):
    dump = os.path.join(staging, "dump")
    if mode == "mount-inside":
        # mkdir, not makedirs: a staging directory the agent removed meanwhile must not be made again, the
        # user's own, for the next run's watcher to find
        try:
            os.mkdir(os.path.join(staging, "evil"))
        except FileExistsError:
            pass
        bind_mount(arg, os.path.join(staging, "evil"))
    elif mode == "mount-over-dir":
        bind_mount(arg, staging)
    elif mode == "mount-over-fifo":
        if not os.path.lexists(dump):
            return False  # wait for whatever the agent or the runtime puts there
        bind_mount(arg, dump)
    elif mode == "hold-fds":
        before = len(held)
        for name in os.listdir(staging) if os.access(staging, os.R_OK) else ["dump"]:
            path = os.path.join(staging, name)
            for flags in (os.O_RDWR, os.O_WRONLY, os.O_RDONLY):
                try:
                    fd = os.open(path, flags | os.O_NONBLOCK)
                except OSError as e:
                    errors.add(f"open {flags}: {e.strerror}")
                    continue
                held.append(fd)
                try:
                    maps.append(mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
                except (OSError, ValueError) as e:
                    errors.add(f"mmap: {e}")
                break
        return len(held) > before  # else nothing there yet, or nothing it may open: try again
    return True


# 600 s: only for a test that never writes STOP (the tests write it within seconds, and kill the watcher as
# they end anyway); the watch must outlast any dump a loaded machine takes
deadline = time.time() + 600
print("watching", flush=True)
while time.time() < deadline and not os.path.exists(stop):
    for staging in glob.glob("/tmp/.dsagent-dump-*"):
        if staging in seen:
            continue
        try:
            if attack(staging):
                seen.add(staging)
                done.append(staging)
        except OSError as e:
            seen.add(staging)
            errors.add(e.strerror or str(e))
    time.sleep(0.001)  # a poll's pace: a staging directory lives as long as its dump, a second at least

if mode == "hold-fds":
    # the dumps are published by now: try to change them through everything kept, for 2 s (the attack's own
    # length: more tries, not a wait for anything; a loaded machine makes fewer, each one a proof)
    end = time.time() + 2
    while time.time() < end:
        for fd in held:
            try:
                os.pwrite(fd, b"REWRITTEN" * 100, 0)
                os.pwrite(fd, b"GROWN", 1 << 30)
            except OSError as e:
                errors.add(f"pwrite: {e.strerror}")
                try:
                    os.write(fd, b"REWRITTEN" * 100)  # a pipe: whoever reads it gets this
                except OSError as e2:
                    errors.add(f"write: {e2.strerror}")
        for m in maps:
            try:
                m[0:9] = b"REWRITTEN"
            except (OSError, ValueError, IndexError) as e:
                errors.add(f"map write: {e}")
        time.sleep(0.05)

with open(tally + ".new", "w") as f:
    json.dump({"seen": len(seen), "done": len(done), "held": len(held), "maps": len(maps),
               "errors": sorted(errors)}, f)
os.rename(tally + ".new", tally)
