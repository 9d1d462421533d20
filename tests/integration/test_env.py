#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl env through a running dsagent, against the real .NET runtime: redaction, reveal, denial, audit."""
import json
import os
import subprocess

from harness import (ALICE, DSCTL, EXIT_DENIED, EXIT_NO_SUCH_PROCESS, EXIT_RUNTIME_UNREACHABLE, MALLORY, PYTHON,
                     SOURCE, SVC, AcceptWatch, Agent, FakeRuntime, Process, Target, as_user, dsctl, make_dir,
                     place_in_unit, request_id_of, run_tests, test, uid_of)

# Values no other test and no part of the environment holds: found anywhere, they leaked.
SECRET = "hunter2-5f1c0d8a"
CONN_SECRET = "Server=db;Password=c0nn-9e41b7"
TOKEN_SECRET = "tok-77a1e3c9"
ENVIRONMENT = {
    "DSAGENT_TEST_PLAIN": "hello",
    "DB_PASSWORD": SECRET,
    "ConnectionStrings__Main": CONN_SECRET,
    "GITHUB_TOKEN": TOKEN_SECRET,
}
SECRETS = (SECRET, CONN_SECRET, TOKEN_SECRET)


def env_policy(commands='"env"', extra=""):
    return (f'[agent]\ndump_dir = "@DUMP_DIR@"\n\n[[rule]]\nname = "ops-env"\nusers = ["{ALICE}"]\n'
            f'commands = [{commands}]\ntargets.users = ["{SVC}"]\n{extra}')


def env_json(agent, user, what):
    r = dsctl(agent, user, "--json", "env", str(what))
    assert r.returncode == 0, r
    return r, json.loads(r.stdout)


def values_of(listing):
    return {v["name"]: v for v in listing}


def assert_not_logged(agent, *values):
    log = open(agent.log_path).read()
    for value in values:
        assert value not in log, f"{value!r} is in the agent's log"


@test
def env_shows_plain_values_and_redacts_secrets():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy())

    r, listing = env_json(agent, ALICE, target.pid)
    seen = values_of(listing)
    assert seen["DSAGENT_TEST_PLAIN"] == {"name": "DSAGENT_TEST_PLAIN", "value": "hello", "redacted": False}, seen
    for name in ("DB_PASSWORD", "ConnectionStrings__Main", "GITHUB_TOKEN"):
        assert seen[name] == {"name": name, "value": None, "redacted": True}, seen[name]
    # the runtime's own view: the variables the target was started with, in their order
    assert seen["PATH"]["value"] == "/usr/bin:/bin" and seen["TMPDIR"]["value"] == target.tmpdir
    names = [v["name"] for v in listing]
    assert names.index("DSAGENT_TEST_PLAIN") < names.index("DB_PASSWORD"), names
    for secret in SECRETS:
        assert secret not in r.stdout and secret not in r.stderr

    text = dsctl(agent, ALICE, "env", str(target.pid))
    assert text.returncode == 0, text
    lines = text.stdout.splitlines()
    assert "DSAGENT_TEST_PLAIN=hello" in lines and "DB_PASSWORD=<redacted>" in lines, lines
    assert "ConnectionStrings__Main=<redacted>" in lines and "GITHUB_TOKEN=<redacted>" in lines, lines
    assert len(lines) == len(listing)
    for secret in SECRETS:
        assert secret not in text.stdout

    # the record lists the names returned, says how many values were withheld, and holds no value
    record = agent.records()[-1]
    assert record["DSAGENT_COMMAND"] == "env" and record["DSAGENT_DECISION"] == "allowed", record
    assert record["DSAGENT_RULE"] == "ops-env"
    assert record["DSAGENT_ENV_NAMES"].split(" ") == names, record["DSAGENT_ENV_NAMES"]
    assert record["DSAGENT_ENV_COUNT"] == str(len(names)) and record["DSAGENT_ENV_REDACTED"] == "3", record
    assert "hello" not in record["DSAGENT_ENV_NAMES"]
    assert_not_logged(agent, *SECRETS)


@test
def env_reveal_and_the_built_in_grants_show_the_secrets():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy(extra="env_reveal = true\n"))

    for user in (ALICE, SVC, None):  # the rule with env_reveal, the process's own user, root
        _, listing = env_json(agent, user, target.pid)
        seen = values_of(listing)
        assert seen["DB_PASSWORD"] == {"name": "DB_PASSWORD", "value": SECRET, "redacted": False}, (user, seen)
        assert seen["ConnectionStrings__Main"]["value"] == CONN_SECRET
        assert seen["GITHUB_TOKEN"]["value"] == TOKEN_SECRET
    records = agent.records()[-3:]
    assert [r["DSAGENT_RULE"] for r in records] == ["ops-env", "owner-access", "root"], records
    assert all(r["DSAGENT_ENV_REDACTED"] == "0" and "DB_PASSWORD" in r["DSAGENT_ENV_NAMES"].split(" ")
               for r in records), records
    # what was shown never reaches the log
    assert_not_logged(agent, *SECRETS)


@test
def env_by_unit_and_its_own_redaction_list():
    target = Target(SVC, environment=dict(ENVIRONMENT, APP_PIN="4711"))
    place_in_unit(target.pid, "dsagent-it-env.service")
    agent = Agent(policy=env_policy().replace("[[rule]]", 'env_redact = ["*_PIN", "DB_*"]\n\n[[rule]]', 1))

    _, listing = env_json(agent, ALICE, "dsagent-it-env.service")
    seen = values_of(listing)
    # the policy's list replaces the built-in one: the token is shown, the PIN is not
    assert seen["APP_PIN"]["redacted"] and seen["DB_PASSWORD"]["redacted"], seen
    assert seen["GITHUB_TOKEN"]["value"] == TOKEN_SECRET and seen["DSAGENT_TEST_PLAIN"]["value"] == "hello"
    assert agent.records()[-1]["DSAGENT_TARGET_UNIT"] == "dsagent-it-env.service"


@test
def a_stranger_gets_no_such_process_and_the_runtime_sees_nothing():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy())
    watch = AcceptWatch(target.pid)

    r = dsctl(agent, MALLORY, "env", str(target.pid))
    assert r.returncode == EXIT_NO_SUCH_PROCESS, r
    assert "no such process" in r.stderr and r.stdout == ""
    as_json = dsctl(agent, MALLORY, "--json", "env", str(target.pid))
    assert as_json.returncode == EXIT_NO_SUCH_PROCESS, as_json
    assert json.loads(as_json.stdout)["error"] == "no such process"  # one object, not a listing
    assert watch.accepts() == 0, "a request nobody may make reached the runtime"
    record = agent.record_for(request_id_of(r))
    assert record["DSAGENT_DECISION"] == "denied" and record["DSAGENT_COMMAND"] == "env", record
    assert "DSAGENT_ENV_NAMES" not in record


@test
def a_rule_without_env_denies_and_the_runtime_sees_nothing():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy(commands='"info"'))
    watch = AcceptWatch(target.pid)

    r = dsctl(agent, ALICE, "env", str(target.pid))
    assert r.returncode == EXIT_DENIED, r
    assert "permission denied" in r.stderr and "no rule grants you 'env'" in r.stderr, r
    assert r.stdout == ""
    assert watch.accepts() == 0, "a denied request reached the runtime"
    record = agent.record_for(request_id_of(r))
    assert record["DSAGENT_DECISION"] == "denied" and record["DSAGENT_COMMAND"] == "env", record
    assert record["DSAGENT_CLIENT_UID"] == str(uid_of(ALICE)) and record["DSAGENT_TARGET_PID"] == str(target.pid)
    assert "DSAGENT_ENV_NAMES" not in record

    explained = dsctl(agent, ALICE, "explain", str(target.pid), "env")
    assert explained.returncode == EXIT_DENIED and "env on" in explained.stdout, explained
    # control: what the rule grants does reach the runtime
    assert dsctl(agent, ALICE, "info", str(target.pid)).returncode == 0
    assert watch.accepts() == 1


@test
def values_and_names_from_the_target_are_escaped():
    evil = "red\x1b[31mX\u202egnp.exe\x07"
    target = Target(SVC, environment={"DSAGENT_TEST_EVIL": evil, "SPACE NAME": "x", "BACK\\SLASH": "y"})
    agent = Agent()

    text = dsctl(agent, SVC, "env", str(target.pid))
    assert text.returncode == 0, text
    assert "\x1b" not in text.stdout and "\u202e" not in text.stdout and "\x07" not in text.stdout
    assert "DSAGENT_TEST_EVIL=red\\x1b[31mX\\u202egnp.exe\\x07" in text.stdout.splitlines(), text.stdout
    _, listing = env_json(agent, SVC, target.pid)
    assert values_of(listing)["DSAGENT_TEST_EVIL"]["value"] == evil  # JSON carries it exactly, escaped as JSON
    # in the record a space inside a name is \x20 and a backslash \\, so that the names stay apart
    names = agent.records()[-1]["DSAGENT_ENV_NAMES"].split(" ")
    assert r"SPACE\x20NAME" in names and r"BACK\\SLASH" in names, names


@test
def an_environment_too_large_for_one_reply_is_refused_whole():
    agent = Agent()
    # 12000 small variables: the block fits what the agent reads, their frames not one reply;
    # 40000: not even the block
    for count, decoded in ((12000, True), (40000, False)):
        target = Target(SVC, environment={f"DSV{i:05d}": "" for i in range(count)})
        r = dsctl(agent, SVC, "env", str(target.pid))
        assert r.returncode == 1, r
        assert "larger than one reply carries (256 KiB)" in r.stderr, r.stderr
        assert (f"{count + 3} variables, " in r.stderr) == decoded, r.stderr
        assert r.stdout == ""
        assert agent.records()[-1]["DSAGENT_DECISION"] == "failed"
        target.process.stop()

    # a value longer than a protocol string is not cut short either
    long_value = Target(SVC, environment={"DSAGENT_LONG": "v" * 40000})
    r = dsctl(agent, SVC, "--json", "env", str(long_value.pid))
    assert r.returncode == 1, r
    error = json.loads(r.stdout)
    assert "longer than a reply carries (32 KiB)" in error["message"], error


@test
def a_runtime_that_breaks_its_environment_block_is_answered_as_not_answering():
    agent = Agent("--runtime-timeout", "2")
    for kind, words in (("short", "closed the connection before the whole environment"),
                        ("stall", "did not send the whole environment in time"),
                        ("count", "sent a malformed environment"),
                        # nothing of the agent's memory in the words: the size was never decoded
                        ("huge", "announced an environment larger than any process has (over 4 MiB)")):
        fake = FakeRuntime(f"env:{kind}")
        r = dsctl(agent, SVC, "env", str(fake.pid))
        assert r.returncode == EXIT_RUNTIME_UNREACHABLE, r
        assert words in r.stderr and r.stdout == "", (kind, r.stderr)
        record = agent.records()[-1]
        assert record["DSAGENT_DECISION"] == "failed" and "DSAGENT_ENV_NAMES" not in record, record
        assert fake.received()[16:18] == b"\x04\x02"  # it was asked ProcessEnvironment, nothing else


# ProcessEnvironment through a dsctl port socket, as a stock tool sends it: the tool's
# client reads the reply (u32 size, u16 0) and then that many bytes of block to the end.
IPC_ENV_CLIENT = r'''
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(sys.argv[1])
s.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 20, 4, 2, 0))
data = b""
while chunk := s.recv(65536):
    data += chunk
size, cset, cid = struct.unpack("<HBB", data[14:18])
assert (cset, cid) == (0xFF, 0x00), data[:24]
announced, = struct.unpack("<I", data[20:24])
block = data[size:]
assert len(block) == announced, (len(block), announced)
count, = struct.unpack("<I", block[:4])
pos, out = 4, []
for _ in range(count):
    units, = struct.unpack("<I", block[pos:pos + 4])
    text = block[pos + 4:pos + 4 + 2 * units].decode("utf-16-le").rstrip("\0")
    pos += 4 + 2 * units
    name, _, value = text.partition("=")
    out.append([name, value])
assert pos == len(block)
print(json.dumps(out))
'''


@test
def the_diagnostic_port_redacts_what_env_redacts():
    target = Target(SVC, environment=ENVIRONMENT)
    agent = Agent(policy=env_policy())
    directory = make_dir(ALICE, 0o700)
    path = os.path.join(directory, "port.sock")
    port = Process(as_user(ALICE, [DSCTL, "--agent-socket", agent.socket, "port", str(target.pid),
                                   "--port-path", path]))
    assert port.read_line(path) == f"{path},connect"

    def tool():
        r = subprocess.run(as_user(ALICE, [PYTHON, "-c", IPC_ENV_CLIENT, path]), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        assert r.returncode == 0, r
        return dict(json.loads(r.stdout))

    seen = tool()
    assert seen["DSAGENT_TEST_PLAIN"] == "hello" and seen["DB_PASSWORD"] == "<redacted>", seen
    assert seen["ConnectionStrings__Main"] == "<redacted>" and seen["GITHUB_TOKEN"] == "<redacted>", seen
    record = agent.records()[-1]
    assert record["DSAGENT_IPC_COMMAND"] == "ProcessEnvironment" and record["DSAGENT_COMMAND"] == "env", record
    assert "DB_PASSWORD" in record["DSAGENT_ENV_NAMES"].split(" ") and record["DSAGENT_ENV_REDACTED"] == "3"

    # the block encoded again is one the stock client library reads (GetProcessEnvironment)
    built = subprocess.run([os.path.join(SOURCE, "tests/tools/ipc-client/build.sh")], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert built.returncode == 0, built.stderr
    stock = subprocess.run(as_user(ALICE, ["dotnet", built.stdout.strip(), "env", f"{path},connect", "DB_PASSWORD",
                                           "DSAGENT_TEST_PLAIN"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    assert stock.returncode == 0, stock
    values = json.loads(stock.stdout.strip().splitlines()[-1])["values"]
    assert values == {"DB_PASSWORD": "<redacted>", "DSAGENT_TEST_PLAIN": "hello"}, values
    assert_not_logged(agent, *SECRETS)

    # with env_reveal the tool gets the block as the runtime sent it
    agent.write_policy(env_policy(extra="env_reveal = true\n"))
    assert agent.reload()["DSAGENT_POLICY_LOADED"] == "yes"
    seen = tool()
    assert seen["DB_PASSWORD"] == SECRET and seen["ConnectionStrings__Main"] == CONN_SECRET, seen


if __name__ == "__main__":
    run_tests()
