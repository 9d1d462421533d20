#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""tests/summarize.py on small made-up meson logs: what it counts, the ten
slowest it lists before the last line, and that the last line stays
"N passed, N failed" (CI reads only that line)."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "packaging"))
from tap import run_tests, test  # noqa: E402

SUMMARIZE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "summarize.py")


def entry(name, duration, result="OK", stdout="ok 1 - a\n1..1\n"):
    """One line of meson's testlog JSON, with only the fields summarize.py reads."""
    return {"name": name, "duration": duration, "result": result, "stdout": stdout}


def summarize(logs):
    """Write each {file name: [entries]} into a fresh directory, run summarize.py on them in that order."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for base, entries in logs.items():
            path = os.path.join(tmp, base)
            if entries is not None:  # None: a log that was never written
                with open(path, "w") as f:
                    f.writelines(json.dumps(e) + "\n" for e in entries)
            paths.append(path)
        r = subprocess.run([sys.executable, SUMMARIZE, *paths], stdout=subprocess.PIPE, text=True)
        return r.returncode, r.stdout.splitlines()


def slowest_lines(lines):
    """The rows under the "slowest" heading, split into (seconds, suite/phase, name)."""
    heading = [i for i, line in enumerate(lines) if "slowest tests" in line]
    assert len(heading) == 1, lines
    return [tuple(line.replace(" s ", " ", 1).split()) for line in lines[heading[0] + 1:-1]]


@test
def lists_the_ten_slowest_of_all_logs_before_the_last_line():
    plain = [entry(f"dsagent:unit / u{i}", float(i)) for i in range(12)]
    plain.append(entry("dsagent:integration / loop", 136.84))
    sanitize = [entry("dsagent:integration / dump", 811.25), entry("dsagent:integration / info", 0.5)]
    rc, lines = summarize({"testlog.json": plain, "sanitize-integration.json": sanitize})
    assert rc == 0, lines
    assert lines[-1] == "15 passed, 0 failed", lines
    assert lines[0] == "The 10 slowest tests (seconds, suite/phase, test):", lines
    assert slowest_lines(lines) == [
        ("811.2", "integration/sanitize", "dump"),
        ("136.8", "integration/plain", "loop"),
        *[(f"{i}.0", "unit/plain", f"u{i}") for i in range(11, 3, -1)],
    ], lines


@test
def fewer_than_ten_lists_them_all():
    rc, lines = summarize({"testlog.json": [entry("dsagent:toml / toml-differential", 7.49),
                                            entry("solo", 0.01)]})
    assert rc == 0, lines
    assert lines[0] == "The 2 slowest tests (seconds, suite/phase, test):", lines
    # a name without " / ": meson's form when a project has a single suite
    assert slowest_lines(lines) == [("7.5", "toml/plain", "toml-differential"), ("0.0", "-/plain", "solo")], lines
    assert lines[-1] == "2 passed, 0 failed", lines


@test
def a_test_in_two_suites_is_named_by_the_first_and_each_logs_phase_is_its_prefix():
    rc, lines = summarize({"plain-alone.json": [entry("dsagent:integration+integration-alone / collect", 110.0)],
                           "sanitize-shared.json": [entry("dsagent:integration+integration-shared / proxy", 99.0)]})
    assert rc == 0, lines
    assert slowest_lines(lines) == [("110.0", "integration/plain", "collect"),
                                    ("99.0", "integration/sanitize", "proxy")], lines
    assert lines[-1] == "2 passed, 0 failed", lines


@test
def counts_stay_as_they_were_and_failures_come_first():
    tap = "ok 1 - a\nok 2 - b # SKIP no v1 host\nnot ok 3 - c\n1..3\n"
    logs = {
        "testlog.json": [entry("dsagent:unit / mixed", 1.0, "FAIL", tap),
                         entry("dsagent:unit / crashed", 2.0, "ERROR", "ok 1 - a\n"),
                         entry("dsagent:unit / skipped", 0.0, "SKIP", ""),
                         entry("dsagent:unit / plain-exit", 3.0, "OK", "")],
        "sanitize-units.json": None,
    }
    rc, lines = summarize(logs)
    assert rc == 1, lines
    assert lines[:4] == ["FAILED: no test log at " + lines[0].split(" at ", 1)[1],
                         "FAILED: dsagent:unit / mixed (FAIL)",
                         "  plain: c failed after ? s; last wait: not reported",
                         "FAILED: dsagent:unit / crashed (ERROR)"], lines
    assert lines[0].endswith("/sanitize-units.json"), lines
    # ok a, ok a, plain-exit pass; not ok c, crashed's lost plan and the missing log fail; two skips
    assert lines[-1] == "3 passed, 3 failed, 2 skipped", lines
    assert slowest_lines(lines)[0] == ("3.0", "unit/plain", "plain-exit"), lines
    assert len(slowest_lines(lines)) == 4, lines


@test
def a_failed_case_is_named_with_its_seconds_and_last_wait():
    tap = ("# a took 1.5 s\nok 1 - a\n# Traceback (most recent call last):\n# AssertionError: timed out\n"
           "# b took 31.2 s\n# failed at: test_ports.py:12: AssertionError: timed out\n# last wait: the refusal of mallory (up to 30 s): timed out after 30.0 s, 0.0 s before "
           "the failure\nnot ok 2 - b\n# c took 0.4 s\n# last wait: none\nnot ok 3 - c\n1..3\n")
    rc, lines = summarize({"sanitize-shared.json": [entry("dsagent:integration+integration-shared / ports", 40.0,
                                                          "FAIL", tap)]})
    assert rc == 1, lines
    assert lines[:4] == ["FAILED: dsagent:integration+integration-shared / ports (FAIL)",
                         "  sanitize: b failed after 31.2 s; last wait: the refusal of mallory (up to 30 s): timed "
                         "out after 30.0 s, 0.0 s before the failure",
                         "    at test_ports.py:12: AssertionError: timed out",
                         "  sanitize: c failed after 0.4 s; last wait: none"], lines
    assert lines[-1] == "1 passed, 2 failed", lines


@test
def no_log_at_all_is_a_failure_without_a_list():
    rc, lines = summarize({"testlog.json": None})
    assert rc == 1, lines
    assert lines[-1] == "0 passed, 1 failed", lines
    assert not any("slowest" in line for line in lines), lines


if __name__ == "__main__":
    run_tests()
