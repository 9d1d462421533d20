# SPDX-License-Identifier: LGPL-2.1-or-later
"""What dsctl convert and trace --format write, read back for the tests: the flame graph's frames, a pprof file's
protobuf, go tool pprof's -top; and the test app's known hot method (its --burn-cpu) found in every format of a
trace, whoever took it (dsctl trace, a [[collect]] table, an [[on_start]] table)."""
import collections
import gzip
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

from harness import BUILD, DSCTL, RUNTIME_BOUND, SOURCE, as_user, make_dir

MAIN = "DsTestTarget!Program.<Main>$(class System.String[])"
HOT = "DsTestTarget!DsTestTarget.CpuBurn.BurnCpuInDsagentFlameProbe()"
WARM = "DsTestTarget!DsTestTarget.CpuBurn.WarmInDsagentFlameProbe()"
SVG_NS = "{http://www.w3.org/2000/svg}"
NETTRACE_DUMP = os.path.join(BUILD, "tests", "tools", "nettrace-dump")
RUNDOWN_PROVIDER = "Microsoft-Windows-DotNETRuntimeRundown"
METHOD_DC_END_VERBOSE, DC_END_COMPLETE = 144, 146  # the rundown's events: a method's name and address; its end
FORMATS = {"speedscope": "speedscope.json", "chromium": "chromium.json", "pprof": "pb.gz", "flame": "svg"}


def convert(user, nettrace, fmt, out):
    """dsctl convert as @user: no agent."""
    return subprocess.run(as_user(user, [DSCTL, "convert", nettrace, "--format", fmt, "-o", out]),
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=RUNTIME_BOUND)


def stock_dotnet_trace():
    """The stock dotnet-trace's path (tests/tools/dotnet-trace/install.sh installs it once)."""
    path = subprocess.run([os.path.join(SOURCE, "tests/tools/dotnet-trace/install.sh")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert path.returncode == 0, path.stderr
    return path.stdout.strip()


def stock_convert(nettrace, fmt, directory):
    """dotnet-trace convert --format @fmt of @nettrace into @directory, as root: the file it wrote."""
    out = os.path.join(directory, os.path.basename(nettrace).replace(".nettrace", ".json"))
    # 300 s: a bound against a hang; the tool starts a runtime and converts a trace of seconds in seconds
    r = subprocess.run(["env", "DOTNET_CLI_TELEMETRY_OPTOUT=1", stock_dotnet_trace(), "convert", "--format", fmt,
                        "-o", out, nettrace], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    assert r.returncode == 0 and "Conversion complete" in r.stdout, r.stdout
    written = out.replace(".json", f".{fmt.lower()}.json")
    assert os.path.exists(written), (r.stdout, os.listdir(directory))
    return written


def without_exporter(document):
    """A speedscope or Chromium file as parsed, less who wrote it."""
    document = dict(document)
    document.pop("exporter", None)
    if "otherData" in document:
        document["otherData"] = {k: v for k, v in document["otherData"].items() if k != "exporter"}
    return document


def svg_frames(path):
    """The flame graph's frames: name, ms, samples, x (ms from the left), depth; and the SVG's root."""
    root = ET.parse(path).getroot()
    frames = [dict(name=g.get("data-n"), ms=float(g.get("data-ms")), samples=int(g.get("data-s")),
                   x=float(g.get("data-x")), d=int(g.get("data-d")), rect=g.find(SVG_NS + "rect").attrib)
              for g in root.iter(SVG_NS + "g") if g.get("class") == "f"]
    return frames, root


# data-x and data-ms are written with six decimals, each rounded: a child's end (its x plus its ms) may pass its
# parent's by the three roundings, 1.5e-6 ms. Frames are whole samples apart, so a thousandth of a ms tells them.
ROUNDING_MS = 1e-3


def children(frames, parent):
    return [f for f in frames if f["d"] == parent["d"] + 1 and parent["x"] - ROUNDING_MS <= f["x"] and
            f["x"] + f["ms"] <= parent["x"] + parent["ms"] + ROUNDING_MS]


def the(frames, name):
    found = [f for f in frames if f["name"] == name]
    assert len(found) == 1, (name, [f["name"] for f in frames])
    return found[0]


def read_varint(data, at):
    """The protobuf varint at @at in @data: (its value, where the next field starts)."""
    v = shift = 0
    while True:
        b = data[at]
        at += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, at


def proto_fields(data):
    """A protobuf message's fields: (number, wire type, value) each; length-delimited values as bytes."""
    at, out = 0, []
    while at < len(data):
        key, at = read_varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == 0:
            value, at = read_varint(data, at)
            out.append((number, kind, value))
        elif kind == 2:
            n, at = read_varint(data, at)
            out.append((number, kind, data[at:at + n]))
            at += n
        else:
            raise AssertionError(f"wire type {kind}")
    return out


def _packed(data):
    values, at = [], 0
    while at < len(data):
        v, at = read_varint(data, at)
        values.append(v)
    return values


def pprof_profile(path):
    """The samples' values, the string table and the functions' names of a gzipped profile.proto."""
    fields = proto_fields(gzip.decompress(open(path, "rb").read()))
    strings = [v.decode() for n, _, v in fields if n == 6]
    types = [strings[dict((k, v) for k, _, v in proto_fields(m))[1]] for n, _, m in fields if n == 1]
    values = [_packed(dict((k, v) for k, _, v in proto_fields(m))[2]) for n, _, m in fields if n == 2]
    functions = [strings[dict((k, v) for k, _, v in proto_fields(m))[2]] for n, _, m in fields if n == 5]
    return types, values, strings, functions


def pprof_top(path):
    """go tool pprof -top of @path, as root: its whole output and its rows (a function's flat time first)."""
    go = shutil.which("go")
    assert go, "golang-go is not installed (scripts/install-deps.sh installs it)"
    # 300 s: a bound against a hang; a first run of go tool pprof builds nothing and reads a small file in a second
    top = subprocess.run([go, "tool", "pprof", "-top", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=300, env=dict(os.environ, HOME=make_dir(None, 0o700)))
    assert top.returncode == 0, top.stderr
    return top.stdout, [line for line in top.stdout.splitlines() if re.match(r"\s*[\d.]+m?s\s", line)]


def rundown_events(nettrace):
    """How many events of each id the runtime's rundown provider wrote into @nettrace (tests/tools/nettrace-dump)."""
    out = subprocess.run([NETTRACE_DUMP, nettrace, RUNDOWN_PROVIDER], stdout=subprocess.PIPE, text=True, check=True,
                         timeout=RUNTIME_BOUND).stdout
    return collections.Counter(e["id"] for e in map(json.loads, out.splitlines()) if "id" in e)


def hot_method_in_every_format(user, nettrace):
    """@nettrace, a CPU trace of the test app burning CPU that holds the runtime's rundown (the session was stopped,
    not cut), converted by @user into each format, in a directory of @user's: the speedscope and Chromium files are
    the ones stock dotnet-trace convert writes of it; the hot method is named in each (by that rundown, as
    dotnet-trace names it), go tool pprof -top's first row, and the widest frame under Main in the flame graph.
    Returns the files, by format."""
    rundown = rundown_events(nettrace)
    assert rundown[METHOD_DC_END_VERBOSE] > 0 and rundown[DC_END_COMPLETE] == 1, rundown
    work = make_dir(user, 0o755)
    out = {}
    for fmt, extension in FORMATS.items():
        # named as the stock tool names what it writes (speedscope's name is its file's)
        out[fmt] = os.path.join(work, os.path.basename(nettrace).replace(".nettrace", f".{extension}"))
        r = convert(user, nettrace, fmt, out[fmt])
        assert r.returncode == 0, (fmt, r)
        assert os.stat(out[fmt]).st_uid == os.stat(work).st_uid, f"the {fmt} file is not the caller's own"
    # the agent's file is read as dotnet-trace reads any trace: the stock tool converts it to the same documents
    theirs = make_dir(None, 0o755)
    for fmt in ("Speedscope", "Chromium"):
        stock = json.load(open(stock_convert(nettrace, fmt, theirs)))
        assert without_exporter(json.load(open(out[fmt.lower()]))) == without_exporter(stock), f"{fmt} differs"
    speedscope = json.load(open(out["speedscope"]))
    names = [f["name"] for f in speedscope["shared"]["frames"]]
    assert HOT in names and MAIN in names, names
    assert sum(len(p["events"]) for p in speedscope["profiles"]) > 0, speedscope["profiles"]
    chromium = json.load(open(out["chromium"]))
    assert HOT in {f"{v['category']}!{v['name']}" for v in chromium["stackFrames"].values()}, chromium["stackFrames"]
    types, values, _, functions = pprof_profile(out["pprof"])
    assert "cpu" in types and HOT in functions and values, (types, functions)
    text, rows = pprof_top(out["pprof"])
    assert rows and rows[0].endswith(" " + HOT), text
    frames, _ = svg_frames(out["flame"])
    under_main = sorted(children(frames, the(frames, MAIN)), key=lambda f: -f["ms"])
    assert under_main and under_main[0]["name"] == HOT, [(f["name"], f["ms"]) for f in under_main]
    return out


def stopped_at_size_with_rundown(ended, nettrace, limit):
    """@ended, the end record of an agent's own session stopped at @limit bytes (an [[on_start]]'s max_size,
    max_trace_size): size-limit and complete, with the bytes of @nettrace, past @limit (the rundown came on top);
    @nettrace holds the runtime's rundown."""
    size = os.path.getsize(nettrace)
    assert ended["DSAGENT_SESSION_END"] == "size-limit" and ended["DSAGENT_SESSION_COMPLETE"] == "yes", ended
    assert int(ended["DSAGENT_SESSION_BYTES"]) == size and size > limit, (ended, size)
    rundown = rundown_events(nettrace)
    print(f"# {size} bytes, {rundown[METHOD_DC_END_VERBOSE]} methods named by the rundown", flush=True)
    assert rundown[METHOD_DC_END_VERBOSE] > 0 and rundown[DC_END_COMPLETE] == 1, rundown


def converts_nothing_for(users, nettrace, fmt, out_name):
    """Each of @users, whom nothing lets read @nettrace, fails to convert it to @fmt ("Permission denied") and
    finds nothing written in a directory of their own."""
    for user in users:
        work = make_dir(user, 0o755)
        r = convert(user, nettrace, fmt, os.path.join(work, out_name))
        assert r.returncode != 0 and "Permission denied" in r.stderr, (user, r)
        assert not os.listdir(work), (user, os.listdir(work))
