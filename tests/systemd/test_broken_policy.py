#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A broken policy under a real systemd as PID 1: the door never closes.

The installed units, in order: a policy that works; a broken drop-in that
`systemctl reload` refuses; the agent started again on it (a restart, and a
client coming to a stopped agent, more often than systemd's start limit
allows failures), which must serve root, answer everyone else why not, and
leave the socket listening; a fixed policy reloaded; a reload after the agent
sat idle. After each step the socket is listening, /run/dsagent.sock is
there and no start limit was hit.
"""
import json
import time

from booted import (BUILD, REQUEST_MESSAGE_ID, SOURCE, Machine, policy_dir, policy_records, reload_and_wait,
                    run_tests, start_target, target_app, test, wait_for)

EXIT_POLICY_BROKEN = 14
WORDS = "the policy is broken, see journalctl -u dsagent"
SVC, ALICE = "dst-svc", "dst-alice"
TARGET_UNIT = "dst-target.service"
# systemd's default start limit: 5 starts in 10 s; a client more than that must not fail the socket. The 8
# come one after another within a second or two; a loaded machine that spread them past 10 s could only make the
# check pass wrongly, and the checks that one agent answered them all stand on their own
REQUESTS = 8
# how long the agent used to stay without clients before it exited (--idle-exit's old default)
OLD_IDLE_EXIT_SEC = 60

state = {}


def alice_rule(name):
    return f"""
[[rule]]
name = "{name}"
users = ["{ALICE}"]
commands = ["ps", "info"]
targets.units = ["{TARGET_UNIT}"]
"""


def dsctl(m, user, *args):
    return m.run(["dsctl", *args], user=user, check=False)


def request_record(m, r):
    """The journal's record of the request whose id dsctl printed."""
    request_id = r.stderr.rsplit("(request ", 1)[1].split(")")[0]
    return wait_for(lambda: m.journal(f"MESSAGE_ID={REQUEST_MESSAGE_ID}", f"DSAGENT_REQUEST_ID={request_id}"),
                    what=f"the record of request {request_id}")


def assert_door_open(m):
    """The socket listens and never failed; the agent runs; systemd never gave up on either."""
    socket = m.show("dsagent.socket", "ActiveState", "SubState", "Result")
    assert socket["ActiveState"] == "active" and socket["SubState"] in ("listening", "running"), socket
    assert socket["Result"] == "success", socket
    assert m.run(["test", "-S", "/run/dsagent.sock"], check=False).returncode == 0, "/run/dsagent.sock is gone"
    service = m.show("dsagent.service", "ActiveState", "Result")
    assert service == {"ActiveState": "active", "Result": "success"}, service
    log = m.run(["journalctl", "--no-pager", "-u", "dsagent.socket", "-u", "dsagent.service"]).stdout
    assert "start-limit-hit" not in log and "Failed with result" not in log, log


def assert_broken_for_users(m, invocation):
    """Each request of a user: exit 14, the words, and a record that names the broken drop-in."""
    for _ in range(REQUESTS):
        r = dsctl(m, ALICE, "info", str(state["pid"]))
        assert r.returncode == EXIT_POLICY_BROKEN and WORDS in r.stderr, r
    r = dsctl(m, SVC, "ps")
    assert r.returncode == EXIT_POLICY_BROKEN and WORDS in r.stderr, r
    record = request_record(m, r)[0]
    assert record["DSAGENT_DECISION"] == "failed" and record["DSAGENT_COMMAND"] == "ps", record
    assert "the policy is broken" in record["DSAGENT_REASON"], record
    assert f"{policy_dir()}/policy.d/60-broken.toml:" in record["DSAGENT_REASON"], record
    assert record["_SYSTEMD_UNIT"] == "dsagent.service", record
    # one agent answered them all: none of them started it again
    assert m.show("dsagent.service", "InvocationID")["InvocationID"] == invocation
    assert m.show("dsagent.service", "StatusText")["StatusText"].startswith("The policy is broken"), \
        m.show("dsagent.service", "StatusText")
    # root is served, under the built-in rules
    r = m.run(["dsctl", "--json", "info", str(state["pid"])])
    assert json.loads(r.stdout)["unit"] == TARGET_UNIT, r.stdout
    assert_door_open(m)


@test
def installed_and_serving(m):
    m.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--quiet"])
    m.run(["systemctl", "daemon-reload"])
    m.add_user(SVC, groups=["dsagent"])
    m.add_user(ALICE, groups=["dsagent"])
    state["pid"] = start_target(m, TARGET_UNIT, SVC, target_app())
    m.write(f"{policy_dir()}/policy.d/50-alice.toml", alice_rule("alice-reads-target"))
    m.run(["systemctl", "start", "dsagent.socket"])
    wait_for(lambda: m.show("dsagent.service", "ActiveState")["ActiveState"] == "active",
             what="the socket to start the agent")
    r = dsctl(m, ALICE, "info", str(state["pid"]))
    assert r.returncode == 0, r
    assert_door_open(m)


@test
def reload_refuses_a_broken_dropin_and_the_agent_keeps_its_policy(m):
    m.write(f"{policy_dir()}/policy.d/60-broken.toml", "[[rule]\nname = \"half-written\"\n")
    # the operator sees the reload fail (test_units.py shows that the agent is not even signalled)
    r = m.run(["systemctl", "reload", "dsagent"], check=False)
    assert r.returncode != 0 and "dsagent.service" in r.stderr, r
    # and what --check-policy found is in the unit's journal, where everyone is sent to look
    log = m.run(["journalctl", "--no-pager", "-u", "dsagent.service"]).stdout
    assert "60-broken.toml:1:" in log, log
    assert dsctl(m, ALICE, "info", str(state["pid"])).returncode == 0
    assert_door_open(m)


@test
def restarted_on_the_broken_dropin_it_serves_root_and_tells_users_why(m):
    # a reboot, an upgrade, a crash: the agent starts again on the files as they are
    before = len(policy_records(m))
    m.run(["systemctl", "restart", "dsagent.service"])
    record = wait_for(lambda: policy_records(m)[before:], what="the agent's policy record")[-1]
    assert record["DSAGENT_POLICY_LOADED"] == "no", record
    assert "60-broken.toml:1:" in record["DSAGENT_POLICY_ERROR"], record
    assert_broken_for_users(m, m.show("dsagent.service", "InvocationID")["InvocationID"])


@test
def a_client_starts_a_stopped_agent_on_the_broken_dropin(m):
    # the agent not running and the socket listening, as after `systemctl stop dsagent.service`
    m.run(["systemctl", "stop", "dsagent.service"])
    assert m.show("dsagent.socket", "SubState")["SubState"] == "listening"
    before = m.show("dsagent.service", "InvocationID")["InvocationID"]
    r = dsctl(m, ALICE, "info", str(state["pid"]))
    assert r.returncode == EXIT_POLICY_BROKEN and WORDS in r.stderr, r
    invocation = m.show("dsagent.service", "InvocationID")["InvocationID"]
    assert invocation and invocation != before, "the client did not start the agent"
    assert_broken_for_users(m, invocation)


@test
def reload_still_broken_fails_and_the_agent_stays_as_it_is(m):
    invocation = m.show("dsagent.service", "InvocationID")["InvocationID"]
    r = reload_and_wait(m)
    assert r.returncode != 0, "systemctl reload accepted a broken policy"
    assert_broken_for_users(m, invocation)


@test
def a_fixed_policy_reloads_and_everyone_is_served(m):
    m.write(f"{policy_dir()}/policy.d/60-broken.toml", alice_rule("alice-lists-target"))
    r = reload_and_wait(m)
    assert r.returncode == 0, r
    record = policy_records(m)[-1]
    assert record["DSAGENT_POLICY_LOADED"] == "yes" and record["DSAGENT_POLICY_RULES"] == "2", record
    r = dsctl(m, ALICE, "info", str(state["pid"]))
    assert r.returncode == 0, r
    assert m.show("dsagent.service", "StatusText")["StatusText"] == "Serving diagnostic requests"
    assert_door_open(m)


@test
def reload_works_after_the_agent_sat_idle(m):
    # no client for longer than the agent used to wait before it exited: it is still there to reload
    invocation = m.show("dsagent.service", "InvocationID")["InvocationID"]
    # a check that nothing happens, so a sleep: past the old 60 s, and 5 s for the exit an old agent would make
    # then; a loaded machine can only delay such an exit, and so only make this pass wrongly
    time.sleep(OLD_IDLE_EXIT_SEC + 5)
    assert m.show("dsagent.service", "InvocationID")["InvocationID"] == invocation
    m.run(["rm", f"{policy_dir()}/policy.d/60-broken.toml"])
    r = reload_and_wait(m)
    assert r.returncode == 0, r
    record = policy_records(m)[-1]
    assert record["DSAGENT_POLICY_LOADED"] == "yes" and record["DSAGENT_POLICY_RULES"] == "1", record
    assert dsctl(m, ALICE, "info", str(state["pid"])).returncode == 0
    assert_door_open(m)


if __name__ == "__main__":
    # a clone or build under /tmp would be hidden by the booted system's own /tmp
    run_tests(lambda: Machine(name="dsagent-broken-policy", binds=[SOURCE, BUILD]))
