#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Count individual test cases from meson's test logs (one or more) and print 'N passed, N failed'.

TAP tests count one case per ok / not ok line; a TAP test that crashed or
timed out without reporting a plan counts as one more failure; a test
without TAP output counts once, by its result.

Each failed case is named with the seconds it took and its last wait (what it
waited for and how that ended, as tests/integration/harness.py reports it),
and on a line of its own where it failed and what the assertion said, so that
a flake tells its cause to whoever reads the summary (CI shows only its tail).

Before that last line (CI reads it) come the ten slowest test programs:
seconds, suite/phase and name, where the phase is the log's: "plain" for
meson's default testlog and test.sh's plain-*.json, "sanitize" for its
sanitize-*.json.
"""
import json
import os
import re
import sys

SLOWEST = 10

passed = failed = skipped = 0
entries = []  # (entry, phase)
timings = []  # (seconds, suite/phase, name) of every test program, from every log
for path in sys.argv[1:]:
    try:
        logged = [json.loads(line) for line in open(path)]
    except OSError:
        # a pass that did not run at all (its build failed) is a failure, not silence
        print(f"FAILED: no test log at {path}", flush=True)
        failed += 1
        continue
    base = os.path.basename(path).removesuffix(".json")
    phase = "plain" if base == "testlog" else base.split("-")[0]
    entries += [(entry, phase) for entry in logged]
    for entry in logged:
        # meson names a test "project:suite / name" when the project has more than one suite
        suite, sep, name = entry["name"].rpartition(" / ")
        # ... and "project:suite+other / name" when the test is in more than one: the first names it
        suite = suite.rpartition(":")[2].partition("+")[0] if sep else "-"
        timings.append((entry.get("duration") or 0.0, f"{suite}/{phase}", name))


def failed_cases(stdout):
    """(case, seconds, last wait, where it failed or None) of each "not ok" case in a TAP output from harness.py."""
    took, last_wait, failed_at, out = {}, None, None, []
    for line in stdout.splitlines():
        if m := re.match(r"# (\S+) took ([\d.]+) s$", line):
            took[m.group(1)] = m.group(2)
        elif m := re.match(r"# last wait: (.*)$", line):
            last_wait = m.group(1)
        elif m := re.match(r"# failed at: (.*)$", line):
            failed_at = m.group(1)
        elif m := re.match(r"not ok \d+ - (\S+)", line):
            out.append((m.group(1), took.get(m.group(1), "?"), last_wait or "not reported", failed_at))
            last_wait = failed_at = None
        elif re.match(r"ok \d+ ", line):
            last_wait = failed_at = None
    return out


for entry, phase in entries:
    result, stdout = entry["result"], entry.get("stdout") or ""
    skips = len(re.findall(r"^ok \d+.*# SKIP", stdout, re.M))  # TAP's skip: counted apart, never as a pass
    oks = len(re.findall(r"^ok \d+", stdout, re.M)) - skips
    skipped += skips
    not_oks = len(re.findall(r"^not ok \d+", stdout, re.M))
    planned = re.search(r"^1\.\.(\d+)", stdout, re.M)
    if result == "SKIP":
        skipped += 1
    elif oks or not_oks or planned:
        passed += oks
        failed += not_oks
        if result not in ("OK", "EXPECTEDFAIL") and not not_oks:
            failed += 1  # died, timed out or broke its plan after the cases it reported
    elif result == "OK":
        passed += 1
    else:
        failed += 1
    if result not in ("OK", "SKIP", "EXPECTEDFAIL"):
        print(f"FAILED: {entry['name']} ({result})", flush=True)
        for case, seconds, last_wait, failed_at in failed_cases(stdout):
            print(f"  {phase}: {case} failed after {seconds} s; last wait: {last_wait}", flush=True)
            if failed_at:
                print(f"    at {failed_at}", flush=True)

slowest = sorted(timings, key=lambda t: -t[0])[:SLOWEST]
if slowest:
    print(f"The {len(slowest)} slowest tests (seconds, suite/phase, test):")
    width = max(len(where) for _, where, _ in slowest)
    for seconds, where, name in slowest:
        print(f"  {seconds:8.1f} s  {where:<{width}}  {name}")

summary = f"{passed} passed, {failed} failed"
if skipped:
    summary += f", {skipped} skipped"
print(summary)
sys.exit(1 if failed else 0)
