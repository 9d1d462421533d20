#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl gcdump against the real runtime: its type table is the stock dotnet-gcdump's of the same session
(convert + report of the stream dsctl kept), and the policy decides it as `gcdump`."""
import os
import re

from harness import (ALICE, EXIT_DENIED, SVC, AcceptWatch, Agent, Target, dsctl, make_dir, run_tests, stock_gcdump,
                     stock_gcdump_report, test)

SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
SESSION_END_ID = "1c5ee471f818453b8c7bac25ac2e872f"


def stock_report_of(nettrace):
    """dotnet-gcdump convert of the stream @nettrace, then dotnet-gcdump report of the .gcdump it made."""
    gcdump = nettrace + ".stock.gcdump"
    r = stock_gcdump("convert", nettrace, "-o", gcdump)
    assert r.returncode == 0 and os.path.exists(gcdump), r
    return stock_gcdump_report(gcdump)


def rows(report):
    """The type rows of a report: (size, count, type and module)."""
    found = re.findall(r"^ +([\d,]+) +([\d,]+)  (.+)$", report, re.M)
    return [(int(size.replace(",", "")), int(count.replace(",", "")), what) for size, count, what in found]


def take(agent, user, target, directory, name, *more):
    """dsctl gcdump --report of @target as @user, keeping the stream in @directory/@name: the result, the path."""
    path = os.path.join(directory, name)
    # 180 s: past the agent's own bounds on the session (30 s for the heap to come, 60 s to stop), so that a stuck
    # one ends with the agent's words; a heap of the test app comes in a second or two
    r = dsctl(agent, user, "gcdump", str(target.pid), "--report", "--nettrace", path, *more, timeout=180)
    assert r.returncode == 0, r
    assert os.stat(path).st_uid == os.stat(directory).st_uid, "the stream is not the caller's own file"
    return r, path


@test
def gcdump_report_is_the_stock_report_of_the_same_session():
    """Differential: dsctl's table of a session (--sort stock: dotnet-gcdump report's layout and order), the
    stock tools' of the stream dsctl kept, and the stock report of the .gcdump dsctl wrote, are equal: the
    totals, every type, count and size, in the same order. Twice: a second dump names its types too."""
    target = Target(SVC)
    agent = Agent()
    mine = make_dir(SVC, 0o755)
    for attempt in ("first", "second"):
        gcdump = os.path.join(mine, f"{attempt}.gcdump")
        r, path = take(agent, SVC, target, mine, f"{attempt}.nettrace", "-o", gcdump, "--sort", "stock")
        theirs = stock_report_of(path)
        assert r.stdout == theirs, f"dsctl gcdump:\n{r.stdout}\ndotnet-gcdump convert + report:\n{theirs}"
        assert os.stat(gcdump).st_uid == os.stat(mine).st_uid, "the .gcdump is not the caller's own file"
        of_ours = stock_gcdump_report(gcdump)
        assert of_ours == theirs, f"dotnet-gcdump report of dsctl's .gcdump:\n{of_ours}\nof its own:\n{theirs}"
        assert f"wrote {gcdump}" in r.stderr, r.stderr
        table = rows(r.stdout)
        assert len(table) > 20, r.stdout
        assert any(what.startswith("System.String  [System.Private.CoreLib.dll]") for _, _, what in table), table
        assert not any(what.startswith("UNKNOWN") for _, _, what in table), r.stdout
        objects = int(re.search(r"^ +([\d,]+)  GC Heap objects$", r.stdout, re.M).group(1).replace(",", ""))
        assert objects > 100, r.stdout
    start = agent.records(message_id=SESSION_START_ID)[-1]
    assert start["DSAGENT_SESSION_KIND"] == "gcdump" and start["DSAGENT_RULE"] == "owner-access", start
    # dsctl stopped each session itself once the dump's GC had ended, not the agent's 30 s window, and the
    # rundown that names the modules came whole
    ends = agent.records(message_id=SESSION_END_ID)
    assert [(e["DSAGENT_SESSION_END"], e["DSAGENT_SESSION_COMPLETE"]) for e in ends] == [("stopped", "yes")] * 2, ends
    decided = [rec for rec in agent.records() if rec.get("DSAGENT_COMMAND") == "gcdump"]
    assert len(decided) == 2 and all(rec["DSAGENT_DECISION"] == "allowed" for rec in decided), decided
    assert start["DSAGENT_PROVIDERS"] == "Microsoft-Windows-DotNETRuntime:0x1980001:5", start


HELD = 200000  # objects of the app's HeldItem (24 B each): the type of most objects and most bytes


@test
def gcdump_orders_its_table_as_dumpheap_stat_biggest_last_or_by_count_or_name():
    """The app's type of most objects, whose first object is small, sits deep in dotnet-gcdump report's table;
    by default dsctl orders by each type's bytes, as dumpheap -stat, and it comes last; --sort count puts it
    last too, --sort name in its place. Every order holds the stock report's rows of the same session."""
    target = Target(SVC, args=("--hold-objects", str(HELD)))
    agent = Agent()
    mine = make_dir(SVC, 0o755)
    held = "HeldItem  [DsTestTarget.dll]"

    r, path = take(agent, SVC, target, mine, "default.nettrace")
    theirs = rows(stock_report_of(path))
    ours = rows(r.stdout)
    assert re.search(r"^ +Total Bytes +Count  Type$", r.stdout, re.M), r.stdout
    # the same types and counts as the stock tool's table of the same session
    assert sorted((count, what) for _, count, what in ours) == sorted((count, what) for _, count, what in theirs), \
        (ours, theirs)
    # the stock table: the size of the first object, biggest first; HeldItem far from its end
    stock_place = [what for _, _, what in theirs].index(held)
    assert theirs[stock_place][:2] == (24, HELD) and stock_place < len(theirs) - 10, (stock_place, theirs)
    # dsctl's: all of a type's bytes, ascending; HeldItem's are the most
    assert [size for size, _, _ in ours] == sorted(size for size, _, _ in ours), r.stdout
    assert ours[-1] == (24 * HELD, HELD, held), ours[-3:]
    print(f"# stock row {stock_place + 1} of {len(theirs)}; dsctl: {ours[-2:]}")

    r, _ = take(agent, SVC, target, mine, "count.nettrace", "--sort", "count")
    ours = rows(r.stdout)
    counts = [count for _, count, _ in ours]
    assert counts == sorted(counts) and ours[-1] == (24 * HELD, HELD, held), ours[-3:]

    r, _ = take(agent, SVC, target, mine, "name.nettrace", "--sort", "name")
    names = [what for _, _, what in rows(r.stdout)]
    assert names == sorted(names, key=lambda n: n.encode()) and held in names, names


GCDUMP_ONLY = f"""
[[rule]]
name = "alice-gcdump"
users = ["{ALICE}"]
commands = ["gcdump"]
targets.users = ["{SVC}"]
"""

TRACE_NOT_GCDUMP = f"""
[[rule]]
name = "alice-trace"
users = ["{ALICE}"]
commands = ["trace", "stacks", "info"]
targets.users = ["{SVC}"]
trace_providers = ["Microsoft-Windows-DotNETRuntime"]
"""


@test
def gcdump_is_granted_by_gcdump_alone_and_refused_without_it():
    target = Target(SVC)
    agent = Agent(policy=TRACE_NOT_GCDUMP)
    mine = make_dir(ALICE, 0o755)
    watch = AcceptWatch(target.pid)
    # a rule that grants a trace of the very providers, but not gcdump: refused, the runtime never asked
    r = dsctl(agent, ALICE, "gcdump", str(target.pid), "--report")
    assert r.returncode == EXIT_DENIED and "no rule grants you 'gcdump'" in r.stderr, r
    assert r.stdout == "", r
    assert watch.accepts() == 0, "a denied gcdump reached the runtime"
    denied = [rec for rec in agent.records() if rec["DSAGENT_DECISION"] == "denied"]
    assert [rec["DSAGENT_COMMAND"] for rec in denied] == ["gcdump"], denied

    # a rule of gcdump alone: allowed, and the stream kept is Alice's
    agent.write_policy(GCDUMP_ONLY)
    agent.reload()
    r, path = take(agent, ALICE, target, mine, "heap.nettrace")
    assert "GC Heap objects" in r.stdout and len(rows(r.stdout)) > 50, r
    start = agent.records(message_id=SESSION_START_ID)[-1]
    assert start["DSAGENT_RULE"] == "alice-gcdump" and start["DSAGENT_SESSION_KIND"] == "gcdump", start


@test
def gcdump_options_are_checked_before_anything_is_sent():
    target = Target(SVC)
    agent = Agent()
    mine = make_dir(SVC, 0o755)
    existing = os.path.join(mine, "exists.nettrace")
    open(existing, "w").close()
    os.chown(existing, os.stat(mine).st_uid, -1)
    for args, why in [
        (["--format", "json"], "gcdump takes no --format"),
        (["--duration", "0"], "--duration takes whole seconds"),
        (["--nettrace", existing], "dsctl does not overwrite files"),
        (["-o", existing], "dsctl does not overwrite files"),
        (["-o", "same", "--nettrace", "same"], "two files, not one"),
        (["--sort", "total"], "--sort takes size, count, name or stock, not 'total'"),
    ]:
        r = dsctl(agent, SVC, "gcdump", str(target.pid), *args)
        assert r.returncode != 0 and why in r.stderr, (args, r)
    assert agent.records(message_id=SESSION_START_ID) == []


if __name__ == "__main__":
    run_tests()
