#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The man pages and the journal catalog say what the programs do.

The sources of truth are the --help texts, docs/policy.md and the agent's
audit code; each check fails when one of them grows something the
installed documentation does not mention.
"""
import os
import re

from tap import BUILD, SOURCE, run, run_tests, test

MAN = os.path.join(SOURCE, "docs/man")


def man_text(page):
    """The page's source with roff escapes for '-' undone, as words appear to a reader."""
    return open(os.path.join(MAN, page)).read().replace("\\-", "-")


def options_of(help_text):
    return sorted(set(re.findall(r"(--[a-z][a-z-]+)", help_text)))


@test
def dsagent_8_has_every_option():
    help_text = run([os.path.join(BUILD, "agent/dsagent"), "--help"]).stdout
    page = man_text("dsagent.8")
    missing = [o for o in options_of(help_text) if o not in page]
    assert not missing, f"dsagent.8 lacks {missing}"


@test
def dsctl_1_has_every_option_command_and_exit_status():
    help_text = run([os.path.join(BUILD, "client/dsctl"), "--help"]).stdout
    page = man_text("dsctl.1")
    missing = [o for o in options_of(help_text) if o not in page]
    commands = re.findall(r"^  ([a-z]+)\b", help_text.split("Options:")[0], re.M)
    assert "ps" in commands and "info" in commands, commands
    missing += [c for c in commands if not re.search(rf"^\.B[I]? {c}\b", page, re.M)]
    statuses = re.findall(r"(\d+) [a-z]", help_text.split("Exit status:")[1])
    missing += [f"exit {s}" for s in statuses if not re.search(rf"^\.B {s}$", page, re.M)]
    assert not missing, f"dsctl.1 lacks {missing}"


@test
def dsagent_policy_5_has_every_key_and_value():
    doc = open(os.path.join(SOURCE, "docs/policy.md")).read()
    page = man_text("dsagent.policy.5")
    keys = re.findall(r"^\| `([a-z_.]+)`", doc, re.M)
    assert "dump_dir" in keys and "targets.units" in keys, keys
    values = []
    for key in ("commands", "trace_profiles"):
        # the row's list of values, in whichever column it stands: the longest `...` of its cells
        row = re.search(rf"^\| `{key}` \|(.*)$", doc, re.M).group(1)
        values += max((v.split() for v in re.findall(r"`([^`]+)`", row)), key=len)
    assert "perfmap" in values and "dotnet-sampled-thread-time" in values, values
    missing = [w for w in keys + values if w not in page]
    assert not missing, f"dsagent.policy.5 lacks {missing}"


@test
def man_pages_format_without_warnings():
    for page in ("dsagent.8", "dsctl.1", "dsagent.policy.5"):
        r = run(["man", "--warnings", "-l", "-E", "UTF-8", os.path.join(MAN, page)],
                env={"MANWIDTH": "80", "PATH": os.environ["PATH"]})
        assert r.stdout.count("\n") > 40, r.stdout
        r = run(["sh", "-c", 'man --warnings -l "$1" 2>&1 >/dev/null', "sh", os.path.join(MAN, page)])
        assert r.stdout == "", f"{page}: {r.stdout}"


@test
def catalog_explains_every_message_id():
    ids = re.findall(r'#define (DSAGENT_MESSAGE_\w+) "([0-9a-f]{32})"',
                     open(os.path.join(SOURCE, "agent/audit/catalog-ids.h")).read())
    assert len(ids) >= 2, ids
    catalog = open(os.path.join(SOURCE, "units/dsagent.catalog")).read()
    entries = dict(re.findall(r"^-- ([0-9a-f]{32})\n(.*?)(?=^-- |\Z)", catalog, re.M | re.S))
    audit = open(os.path.join(SOURCE, "agent/audit/audit.c")).read()
    page = man_text("dsagent.8")
    for name, message_id in ids:
        assert message_id in entries, f"no catalog entry for {name} {message_id}"
        assert message_id in page, f"dsagent.8 does not list {name} {message_id}"
        # every field the text substitutes is one the agent writes
        for field in set(re.findall(r"@([A-Z_]+)@", entries[message_id])):
            assert f'"{field}' in audit, f"catalog {message_id} uses @{field}@, which audit.c never writes"
    assert set(entries) == {i for _, i in ids}, f"catalog entries without an id: {set(entries)}"
    # every field a record may carry is in dsagent(8), names and words for people included
    fields = sorted(set(re.findall(r'"(DSAGENT_[A-Z_]+)', audit)))
    assert "DSAGENT_CLIENT_USER" in fields and "DSAGENT_TARGET_USER" in fields, fields
    missing = [f for f in fields if not re.search(rf"\b{f}\b", page)]
    assert not missing, f"dsagent.8 does not name {missing}"
    # the format journalctl --update-catalog accepts
    for message_id, text in entries.items():
        assert re.match(r"Subject: .+\nDefined-By: dsagent\n", text), message_id


if __name__ == "__main__":
    run_tests()
