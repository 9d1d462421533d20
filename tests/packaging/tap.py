# SPDX-License-Identifier: LGPL-2.1-or-later
"""TAP for the packaging tests, in the style of tests/integration: @test, then run_tests()."""
import os
import subprocess
import sys
import time
import traceback

BUILD = os.environ.get("DSAGENT_BUILD_DIR", os.path.join(os.path.dirname(__file__), "../../build"))
SOURCE = os.path.realpath(os.environ.get("DSAGENT_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../..")))

sys.path.insert(0, os.path.join(SOURCE, "tests/integration"))
from harness import where_it_failed  # noqa: E402

_tests = []


def test(fn):
    _tests.append(fn)
    return fn


def run_tests(needs_root=False, chained=False):
    """chained: each test builds on the previous one's result, so a failure ends the run."""
    if needs_root and os.geteuid() != 0:
        print("1..0 # SKIP needs root")
        sys.exit(77)
    selected = [fn for fn in _tests if len(sys.argv) < 2 or fn.__name__ in sys.argv[1:]]
    failed = 0
    for n, fn in enumerate(selected, 1):
        if chained and failed:
            print(f"not ok {n} - {fn.__name__} # not run: an earlier test failed", flush=True)
            failed += 1
            continue
        began = time.monotonic()
        try:
            fn()
            print(f"# {fn.__name__} took {time.monotonic() - began:.1f} s", flush=True)
            print(f"ok {n} - {fn.__name__}", flush=True)
        except Exception:
            failed += 1
            for line in traceback.format_exc().splitlines():
                print(f"# {line}")
            # what the suite's summary prints of the failure (tests/summarize.py), so that CI's names its cause
            print(f"# {fn.__name__} took {time.monotonic() - began:.1f} s", flush=True)
            print(f"# failed at: {where_it_failed(sys.exc_info()[1])}", flush=True)
            print(f"not ok {n} - {fn.__name__}", flush=True)
    print(f"1..{len(selected)}", flush=True)
    sys.exit(1 if failed else 0)


def run(argv, check=True, **kwargs):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv} exited {r.returncode}:\n{r.stdout[-6000:]}")
    return r
