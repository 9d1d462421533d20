#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""In the SELinux guest: connect straight to the diagnostic socket of runtime PID (argv[1]) in /tmp.

Prints "connected PATH" and exits 0, or "refused PATH ERROR" and exits 1.
"""
import glob
import socket
import sys

path = glob.glob(f"/tmp/dotnet-diagnostic-{sys.argv[1]}-*-socket")[0]
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(path)
    print("connected", path)
except OSError as e:
    print("refused", path, e)
    sys.exit(1)
