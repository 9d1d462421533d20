# SPDX-License-Identifier: LGPL-2.1-or-later
"""A tool's time and its own peak memory, for the benchmarks that compare dsctl with a stock tool
(bench-gcdump.py, bench-convert.py)."""
import os
import tempfile
import time

GNU_TIME = "/usr/bin/time"


def timed_rusage(argv, env=None):
    """Runs @argv to its end: (seconds, peak RSS in MiB of that process alone).

    The peak is what GNU time reads of its child with wait4, not this script's own wait4: the kernel
    keeps, across execve, the peak of the memory the process had before it, and a child spawned from
    here (vfork) had this Python's (some 15 MiB), which was then every small tool's "peak". time's own
    child starts from time's small memory."""
    with tempfile.NamedTemporaryFile(mode="r", prefix="bench-rss-") as rss:
        started = time.monotonic()
        pid = os.posix_spawn(GNU_TIME, [GNU_TIME, "-f", "%M", "-o", rss.name, *argv],
                             env if env is not None else os.environ,
                             file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                                           (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0)])
        _, status, _ = os.wait4(pid, 0)
        elapsed = time.monotonic() - started
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed: status {os.waitstatus_to_exitcode(status)}")
        return elapsed, int(rss.read().split()[-1]) / 1024
