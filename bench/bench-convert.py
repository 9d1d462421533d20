#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Time and peak memory of dsctl convert against stock dotnet-trace convert, on CPU traces of growing size.

A trace is made here (no runtime needed, so its size is whatever is asked): the sample profiler's
ThreadSample events of THREADS threads sampled every millisecond, each thread staying HOLD_MS on one of
STACKS stacks (20 to 40 frames of METHODS methods) before the next, then a rundown that names every method.
Its size grows with the samples; its distinct stacks (printed), methods and threads stay the same. For each
size, each converter runs RUNS times, interleaved: dsctl convert --format speedscope, pprof and flame (dsctl
converts as it reads, keeping the distinct stacks, and spools speedscope's time line to $TMPDIR), and the
stock dotnet-trace convert --format Speedscope (10.0.750501, tests/tools/dotnet-tools), which builds
TraceEvent's ETLX file of the whole trace first, up to --stock-max MiB (it takes minutes and gigabytes past
that). Each run is timed from start to exit, and its peak resident memory is its own (ru_maxrss through GNU
time, as bench-gcdump.py reads it). The speedscope files of both are compared once per size (parsed, the
exporter aside) and must be equal; a RESULT line gives dsctl's median time and peak memory over the stock
tool's for speedscope, the format both write.

Usage (as root): bench/bench-convert.py BUILD_DIR [--sizes 64 256 1024] [--runs 3] [--stock-max 256]
"""
import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
import nettrace_writer as nw  # noqa: E402
from rusage import timed_rusage  # noqa: E402

THREADS, STACKS, METHODS = 16, 4000, 3000
HOLD_MS, VARIANTS = 100, 8
SAMPLE_PAYLOAD = b"\x02\x00\x00\x00"   # ThreadSample's type: managed code
BASE, SIZE = 0x7f0000100000, 0x400


def stacks():
    """STACKS stacks, innermost first, of 20 to 40 frames: a shared root path, then branches."""
    out = []
    for s in range(STACKS):
        depth = 20 + s % 21
        out.append([BASE + ((s * 7919 + i * 104729) % METHODS) * SIZE + 0x10 for i in range(depth)][::-1])
    return out


def block_events(variant, events):
    """The events of one EventBlock but its first, as bytes, of @events ThreadSample events (every thread each
    millisecond at 1e9 ticks a second, so a timestamp delta of 1e6 / THREADS), and the stack of its first: a
    thread stays on a stack for HOLD_MS, as a busy thread does, and each of the VARIANTS blocks walks other
    stacks, so that the trace holds many distinct stacks while its speedscope file (an event per frame entered
    or left) stays about the trace's size. Only a block's first event carries an absolute time."""
    def stack_of(n):
        thread, ms = n % THREADS, n // THREADS
        return 1 + ((ms // HOLD_MS + variant * events // THREADS // HOLD_MS) * 31 + thread * 17) % STACKS
    rest = b"".join(nw.event(None, thread=100 + n % THREADS, stack=stack_of(n), ts=10**6 // THREADS,
                             payload=SAMPLE_PAYLOAD) for n in range(1, events))
    return stack_of(0), rest


def make_trace(path, mib):
    """A trace of about @mib MiB at @path: (samples, distinct stacks sampled)."""
    s = nw.Stream(pid=4242)
    s.metadata(nw.metadata(1, nw.SAMPLER, 0, "ThreadSample"),
               nw.metadata(2, nw.RUNDOWN, 144, "MethodDCEndVerbose", version=1),
               nw.metadata(3, nw.RUNDOWN, 154, "ModuleDCEnd", version=2),
               nw.metadata(4, nw.EVENTPIPE, 1, "ProcessInfo"))
    s.events([nw.event(4, thread=1, stack=0, ts=1, payload=nw.utf16z("/usr/bin/bench /usr/bin/bench.dll") +
                       nw.utf16z("Linux") + nw.utf16z("x64"))])
    s.stacks(1, stacks())
    per_block = 60000
    block_ms = per_block // THREADS
    variants = [block_events(v, per_block) for v in range(VARIANTS)]
    sampled = {1 + ((ms // HOLD_MS + v * block_ms // HOLD_MS) * 31 + t * 17) % STACKS
               for v in range(VARIANTS) for ms in range(block_ms) for t in range(THREADS)}
    with open(path, "wb") as f:
        f.write(s.data)
        written, n = len(s.data), 0
        while written < mib << 20:
            first_stack, rest = variants[n % VARIANTS]
            ts = 10**6 + n * block_ms * 10**6
            body = nw.BLOCK_HEADER + nw.event(1, thread=100, stack=first_stack, ts=ts, payload=SAMPLE_PAYLOAD) + rest
            one = nw.object_type(b"EventBlock", 2) + struct.pack("<I", len(body))
            one += b"\0" * (-(written + len(one)) % 4)
            f.write(one + body + b"\x06")
            written += len(one) + len(body) + 1
            n += 1
        tail = nw.Stream()
        blobs = [nw.event(2, thread=1, stack=0, ts=10**6 + n * block_ms * 10**6 + i,
                          payload=nw.method_in_module(BASE + i * SIZE, SIZE, 7, "Bench.Work", f"Method{i}"))
                 for i in range(METHODS)]
        blobs.append(nw.event(3, thread=1, stack=0, ts=10**6 + n * block_ms * 10**6 + METHODS,
                              payload=nw.module_payload(7, "/usr/lib/bench/Bench.dll")))
        # the tail's objects are aligned from where the file stands
        tail.data = b"\0" * (written % 4)
        tail.events(blobs)
        f.write(tail.data[written % 4:] + b"\x01")
    return n * per_block, len(sampled)


def stock_dotnet_trace(source):
    r = subprocess.run([os.path.join(source, "tests/tools/dotnet-trace/install.sh")], stdout=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        raise SystemExit("cannot install the stock dotnet-trace")
    return r.stdout.strip()


def without_exporter(path):
    document = json.load(open(path))
    document.pop("exporter", None)
    document.pop("name", None)
    return document


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build")
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024], help="MiB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stock-max", type=int, default=256, help="the largest size (MiB) the stock tool converts")
    args = parser.parse_args()
    source = os.path.join(HERE, "..")
    dsctl = os.path.join(args.build, "client", "dsctl")
    stock = stock_dotnet_trace(source)
    work = tempfile.mkdtemp(prefix="bench-convert-")
    env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", TMPDIR=work)
    try:
        print(f"{'size':>9} {'samples':>11} {'tool':<22} {'median s':>9} {'peak MiB':>9}  runs (s / MiB)")
        for mib in args.sizes:
            trace = os.path.join(work, f"t{mib}.nettrace")
            samples, distinct = make_trace(trace, mib)
            size = os.path.getsize(trace)
            print(f"{size / 2**20:7.0f}Mi {samples:>11,} samples, {distinct:,} distinct stacks", flush=True)
            tools = [("dsctl speedscope", "speedscope", ".speedscope.json"), ("dsctl pprof", "pprof", ".pb.gz"),
                     ("dsctl flame", "flame", ".svg")]
            if mib <= args.stock_max:
                tools.append(("dotnet-trace Speedscope", None, ".stock.json"))
            results = {name: [] for name, _, _ in tools}
            for run in range(args.runs):
                for name, fmt, ext in tools:
                    out = os.path.join(work, f"out-{run}{ext}")
                    if fmt:
                        argv = [dsctl, "convert", trace, "--format", fmt, "-o", out, "-q"]
                    else:
                        argv = [stock, "convert", "--format", "Speedscope", trace, "-o", out]
                    results[name].append(timed_rusage(argv, env))
                    if run == 0 and name in ("dsctl speedscope", "dotnet-trace Speedscope"):
                        kept = os.path.join(work, f"first-{fmt or 'stock'}.json")
                        written = out if fmt else out.replace(".json", ".speedscope.json")
                        shutil.move(written, kept)
                    for leftover in os.listdir(work):
                        if leftover.startswith("out-"):
                            os.unlink(os.path.join(work, leftover))
            medians = {}
            for name, _, _ in tools:
                seconds = [r[0] for r in results[name]]
                peaks = [r[1] for r in results[name]]
                medians[name] = (statistics.median(seconds), max(peaks))
                runs = " ".join(f"{s:.1f}/{p:.0f}" for s, p in results[name])
                print(f"{size / 2**20:7.0f}Mi {samples:>11,} {name:<22} {medians[name][0]:9.1f} "
                      f"{medians[name][1]:9.0f}  {runs}", flush=True)
            if mib <= args.stock_max:
                same = without_exporter(os.path.join(work, "first-speedscope.json")) == \
                    without_exporter(os.path.join(work, "first-stock.json"))
                print(f"{'':>9} speedscope files equal: {same}", flush=True)
                if not same:
                    raise SystemExit("the speedscope files differ")
                ours, stock_ = medians["dsctl speedscope"], medians["dotnet-trace Speedscope"]
                print(f"RESULT size_mib={size / 2**20:.0f} samples={samples} time_ratio={ours[0] / stock_[0]:.3f} "
                      f"memory_ratio={ours[1] / stock_[1]:.3f} (dsctl speedscope / dotnet-trace Speedscope)",
                      flush=True)
            for leftover in os.listdir(work):
                os.unlink(os.path.join(work, leftover))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
