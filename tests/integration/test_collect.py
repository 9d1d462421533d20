#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The policy's [[collect]] tables against the real runtime: which processes are watched, when a table
fires, its limit per process, its records (docs/collect.md)."""
import time

import harness
from harness import ALICE, SVC, Agent, Target, run_tests, test, wait_for

COLLECT_MESSAGE_ID = "7e4f2962cff7436e853607d2fcf710fe"


def table(name, counter, line="when.above = 300", extra="", users=(SVC,)):
    quoted = ", ".join(f'"{u}"' for u in users)
    return (f'\n[[collect]]\nname = "{name}"\ntargets.users = [{quoted}]\nwhen.counter = "{counter}"\n{line}\n'
            f'then.dump = "mini"\nreaders = ["{ALICE}"]\n{extra}\n')


def agent_with(*tables):
    return Agent(policy='[agent]\ndump_dir = "@DUMP_DIR@"\n' + "".join(tables))


def fired(agent, pid=None, name=None):
    return [r for r in agent.records(message_id=COLLECT_MESSAGE_ID)
            if r.get("DSAGENT_COLLECT_EVENT") == "fired" and (pid is None or r["DSAGENT_TARGET_PID"] == str(pid))
            and (name is None or r["DSAGENT_RULE"] == name)]


@test
def a_counter_table_fires_on_the_process_it_covers_once_held_for_its_time():
    agent = agent_with(
        # a Meter gauge and an EventCounter, each beyond its line for 2 s: one session watches both
        table("gauge-high", "Dsagent.TestTarget:test-gauge", extra='when.for = "2s"'),
        table("counter-high", "Dsagent-TestTarget:test-counter", extra='when.for = "2s"'),
        # beyond the line too, but not for an hour yet
        table("held-long", "Dsagent.TestTarget:test-gauge", extra='when.for = "1h"'),
        # below the line: never beyond it
        table("low", "Dsagent.TestTarget:test-gauge", line="when.below = 10"))
    high = Target(user=SVC, args=("--meter-value", "500"))
    calm = Target(user=SVC, args=("--meter-value", "100"))
    other = Target(user=ALICE, args=("--meter-value", "500"))  # no table covers alice's processes

    for name in ("gauge-high", "counter-high"):
        rec = wait_for(lambda: fired(agent, high.pid, name), timeout=90, what=f"{name} fired")[0]
        assert rec["DSAGENT_COLLECT_TRIGGER"] == "counter" and float(rec["DSAGENT_COLLECT_VALUE"]) == 500, rec
        assert rec["DSAGENT_TARGET_UID"] == str(high.uid) and rec["DSAGENT_COLLECT_ACTION"] == "dump", rec
    assert rec["DSAGENT_COLLECT_WHAT"] == "Dsagent-TestTarget:test-counter", rec
    time.sleep(5)  # more samples beyond the line: the default limit, 1/1h, takes no second
    assert len(fired(agent, high.pid, "gauge-high")) == 1, fired(agent, high.pid)
    assert len(fired(agent, high.pid, "counter-high")) == 1, fired(agent, high.pid)
    assert not fired(agent, high.pid, "held-long"), "fired before its when.for was over"
    assert not fired(agent, name="low") and not fired(agent, calm.pid) and not fired(agent, other.pid), \
        fired(agent)


@test
def a_table_fires_at_most_its_limit_however_many_samples_cross_the_line():
    # no when.for: every sample (one a second) beyond the line meets the condition
    agent = agent_with(table("every-sample", "Dsagent.TestTarget:test-gauge", extra='limit = "2/1h"'))
    high = Target(user=SVC, args=("--meter-value", "500"))
    wait_for(lambda: len(fired(agent, high.pid)) >= 2, timeout=90, what="two firings")
    time.sleep(6)
    assert len(fired(agent, high.pid)) == 2, fired(agent, high.pid)
    assert int(fired(agent, high.pid)[-1].get("DSAGENT_COLLECT_LIMITED", "0")) == 0, fired(agent, high.pid)


@test
def a_reload_applies_new_tables_without_restarting_the_agent():
    agent = agent_with()
    high = Target(user=SVC, args=("--meter-value", "500"))
    time.sleep(4)  # walks happen: nothing to watch for
    assert not agent.records(message_id=COLLECT_MESSAGE_ID)
    agent.write_policy('[agent]\ndump_dir = "@DUMP_DIR@"\n' + table("added", "Dsagent.TestTarget:test-gauge"))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    wait_for(lambda: fired(agent, high.pid, "added"), timeout=90, what="the new table fired")


if __name__ == "__main__":
    run_tests()
