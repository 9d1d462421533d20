#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Count individual test cases from meson's test logs (one or more) and print 'N passed, N failed'.

TAP tests count one case per ok / not ok line; a TAP test that crashed or
timed out without reporting a plan counts as one more failure; a test
without TAP output counts once, by its result.
"""
import json
import re
import sys

passed = failed = skipped = 0
entries = []
for path in sys.argv[1:]:
    try:
        entries += [json.loads(line) for line in open(path)]
    except OSError:
        # a pass that did not run at all (its build failed) is a failure, not silence
        print(f"FAILED: no test log at {path}", flush=True)
        failed += 1
for entry in entries:
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

summary = f"{passed} passed, {failed} failed"
if skipped:
    summary += f", {skipped} skipped"
print(summary)
sys.exit(1 if failed else 0)
