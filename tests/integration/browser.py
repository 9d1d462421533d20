# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real browser for the tests of what dsctl writes to be opened in one: Debian's chromium, headless, as root
(hence --no-sandbox), offline, each run with a profile directory of its own; and the PNG of its screenshots read
back pixel by pixel (no imaging library: the few lines below read what chromium writes)."""
import os
import shutil
import struct
import subprocess
import zlib

from harness import make_dir

# 120 s: a bound against a hang; chromium starts, renders an SVG of a few thousand elements and exits in seconds
BROWSER_BOUND = 120

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--force-device-scale-factor=1", "--disable-extensions", "--mute-audio"]


def chromium():
    path = shutil.which("chromium")
    assert path, "chromium is not installed (scripts/install-deps.sh installs it)"
    return path


def run(url, *args):
    """chromium headless on @url with @args: its standard output."""
    profile = make_dir(None, 0o700)
    r = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args, url], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=BROWSER_BOUND)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return r.stdout.decode()


def dump_dom(path):
    """The document at @path once loaded, its scripts run, as the browser serializes it."""
    return run("file://" + os.path.abspath(path), "--dump-dom")


def screenshot(path, png, width, height):
    """A screenshot of the document at @path, @width x @height pixels at least, into @png. The window is 100 pixels
    taller: headless chromium shows a document exactly as tall as its window only in part."""
    run("file://" + os.path.abspath(path), f"--screenshot={png}", f"--window-size={width},{height + 100}")
    assert os.path.getsize(png) > 0, png


def read_png(path):
    """(width, height, rows): rows[y][x] is an (r, g, b) tuple. 8-bit RGB or RGBA, not interlaced."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    at, idat = 8, b""
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    channels = 3 if color == 2 else 4
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for y in range(height):
        line = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        kind, cur = line[0], bytearray(line[1:])
        for i in range(stride):
            left = cur[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                cur[i] = (cur[i] + left) & 0xFF
            elif kind == 2:
                cur[i] = (cur[i] + up) & 0xFF
            elif kind == 3:
                cur[i] = (cur[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                cur[i] = (cur[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append([tuple(cur[x * channels:x * channels + 3]) for x in range(width)])
        previous = cur
    return width, height, rows
