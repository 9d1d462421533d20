#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The man pages and the journal catalog say what the programs do.

The sources of truth are the --help texts, docs/policy.md and the agent's
audit code; each check fails when one of them grows something the
installed documentation does not mention. The other way round, every
command line the man pages and README show (their synopses, dsctl(1)'s
command headings and examples, README's usage block) is run against the
real binaries' parsers: a form the program refuses as a usage error (exit
2) fails the check, so no page can name an option the tool rejects.
"""
import glob
import json
import os
import re
import shlex
import subprocess
import tempfile

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
    # the records are written by agent/audit/: audit.c, its output (audit-output.c) and its names (audit-names.c)
    audit = "".join(open(path).read() for path in sorted(glob.glob(os.path.join(SOURCE, "agent/audit/*.c"))))
    page = man_text("dsagent.8")
    for name, message_id in ids:
        assert message_id in entries, f"no catalog entry for {name} {message_id}"
        assert message_id in page, f"dsagent.8 does not list {name} {message_id}"
        # every field the text substitutes is one the agent writes
        for field in set(re.findall(r"@([A-Z_]+)@", entries[message_id])):
            assert f'"{field}' in audit, f"catalog {message_id} uses @{field}@, which agent/audit/ never writes"
    assert set(entries) == {i for _, i in ids}, f"catalog entries without an id: {set(entries)}"
    # every field a record may carry is in dsagent(8), names and words for people included
    fields = sorted(set(re.findall(r'"(DSAGENT_[A-Z0-9_]+)', audit)))
    assert "DSAGENT_CLIENT_USER" in fields and "DSAGENT_TARGET_USER" in fields, fields
    missing = [f for f in fields if not re.search(rf"\b{f}\b", page)]
    assert not missing, f"dsagent.8 does not name {missing}"
    # the format journalctl --update-catalog accepts
    for message_id, text in entries.items():
        assert re.match(r"Subject: .+\nDefined-By: dsagent\n", text), message_id


@test
def the_shipping_docs_name_only_fields_and_message_ids_the_agent_writes():
    """docs/journal-shipping.md and the collector examples of docs/kubernetes.md tell auditors and log collectors
    what to match on: each DSAGENT_ field they name is one agent/audit/ writes, each MESSAGE_ID one it defines."""
    audit = "".join(open(path).read() for path in sorted(glob.glob(os.path.join(SOURCE, "agent/audit/*.c"))))
    written = set(re.findall(r'"(DSAGENT_[A-Z_]+)', audit))
    ids = set(re.findall(r'#define DSAGENT_MESSAGE_\w+ "([0-9a-f]{32})"',
                         open(os.path.join(SOURCE, "agent/audit/catalog-ids.h")).read()))
    readme = open(os.path.join(SOURCE, "README.md")).read()
    for page in ("docs/journal-shipping.md", "docs/kubernetes.md"):
        text = open(os.path.join(SOURCE, page)).read()
        named = set(re.findall(r"\b(DSAGENT_[A-Z_]*[A-Z])\b", text)) - {"DSAGENT_SOCKET", "DSAGENT_DEBIAN_MIRROR"}
        assert "DSAGENT_DECISION" in named, (page, named)
        unknown = sorted(named - written)
        assert not unknown, f"{page} names fields the agent never writes: {unknown}"
        message_ids = set(re.findall(r"\b([0-9a-f]{32})\b", text))
        assert message_ids and message_ids <= ids, f"{page}: {message_ids - ids} are no MESSAGE_ID of the agent's"
        assert f"({page})" in readme or f"`{page}`" in readme, f"README.md does not link {page}"


@test
def the_egress_page_names_every_egress_field_and_only_those_the_agent_writes():
    """docs/egress.md tells operators what each upload record says: every DSAGENT_EGRESS_ field agent/audit/ writes
    is named there, and every DSAGENT_ field it names is one the agent writes."""
    audit = "".join(open(path).read() for path in sorted(glob.glob(os.path.join(SOURCE, "agent/audit/*.c"))))
    written = set(re.findall(r'"(DSAGENT_[A-Z0-9_]*[A-Z0-9])', audit))
    text = open(os.path.join(SOURCE, "docs/egress.md")).read()
    named = set(re.findall(r"\b(DSAGENT_[A-Z0-9_]*[A-Z0-9])\b", text))
    egress = {f for f in written if f.startswith("DSAGENT_EGRESS_")}
    assert len(egress) >= 12, egress
    assert not sorted(egress - named), f"docs/egress.md does not name {sorted(egress - named)}"
    assert not sorted(named - written), f"docs/egress.md names fields the agent never writes: {sorted(named - written)}"
    ids = set(re.findall(r'#define DSAGENT_MESSAGE_EGRESS "([0-9a-f]{32})"',
                         open(os.path.join(SOURCE, "agent/audit/catalog-ids.h")).read()))
    assert ids and ids <= set(re.findall(r"\b([0-9a-f]{32})\b", text)), ids


@test
def policy_docs_name_every_collect_action_that_takes_an_artifact():
    # the agent's own word on which [[collect]] actions take their artifacts (dsagent --check-policy), asked
    # with the example docs/policy.md gives (users that exist here): policy.md and dsagent.policy(5) name each
    doc = open(os.path.join(SOURCE, "docs/policy.md")).read()
    collect = re.search(r"^## Collection rules.*?(?=^## )", doc, re.M | re.S).group(0)
    example = re.search(r"```toml\n(.*?)```", collect, re.S).group(1)
    example = re.sub(r'targets\.users = \[[^]]*\]', 'targets.users = ["root"]', example)
    example = re.sub(r'readers = \[[^]]*\]', 'readers = ["group:root"]', example)
    with tempfile.NamedTemporaryFile("w", suffix=".toml") as f:
        f.write(example)
        f.flush()
        said = run([os.path.join(BUILD, "agent/dsagent"), "--check-policy", f.name]).stdout
    line = next(l for l in said.splitlines() if "[[collect]] table" in l)
    actions = re.findall(r"then\.[a-z_]+", line.split("checked;")[1])
    assert {"then.dump", "then.trace_profile"} <= set(actions), line
    prose = " ".join(collect.split("```toml")[0].split())
    page = " ".join(man_text("dsagent.policy.5").split())
    missing = [a for a in actions if f"`{a}`" not in prose] + [f"{a} (man)" for a in actions if a not in page]
    assert not missing, f"{missing} take artifacts ({line}), but the docs do not say so"
    assert "only `then." not in prose, prose


# ---- every command line the pages show, run against the programs' parsers ----

ALTERNATING = {"BI", "BR", "IB", "IR", "RB", "RI"}


def roff_args(rest):
    """A request's arguments: words, or "quoted words" ("" inside quotes is one quote)."""
    args, i = [], 0
    while i < len(rest):
        if rest[i] == " ":
            i += 1
        elif rest[i] == '"':
            j, word = i + 1, ""
            while j < len(rest):
                if rest[j] == '"' and rest[j + 1:j + 2] == '"':
                    word, j = word + '"', j + 2
                elif rest[j] == '"':
                    break
                else:
                    word, j = word + rest[j], j + 1
            args.append(word)
            i = j + 1
        else:
            j = rest.find(" ", i)
            j = len(rest) if j < 0 else j
            args.append(rest[i:j])
            i = j
    return args


def roff_text(lines):
    """What a reader sees of these source lines, fonts dropped: '.RB [ \\-\\-type' reads '[--type'."""
    words = []
    for line in lines:
        m = re.match(r"^\.([A-Z]{1,2})(?: (.*))?$", line)
        if m and m.group(1) in ALTERNATING:
            words.append("".join(roff_args(m.group(2) or "")))
        elif m and m.group(1) in ("B", "I"):
            words.append(" ".join(roff_args(m.group(2) or "")))
        elif m or line.startswith((".", "'")):
            continue  # .br, .PP and the like: no words
        else:
            words.append(line)
    text = " ".join(w for w in words if w)
    text = re.sub(r"\\f(\[[A-Z]*\]|[BIRP])", "", text)
    return text.replace("\\-", "-").replace("\\&", "").replace("\\ ", " ")


def section(page_text, name):
    """The source lines of a man page's section NAME."""
    m = re.search(rf"^\.SH {re.escape(name)}\n(.*?)(?=^\.SH |\Z)", page_text, re.M | re.S)
    return m.group(1).splitlines() if m else []


def man_forms(page):
    """(where, form) for each command line the page shows: its synopsis, one form a .br; for dsctl(1)
    also each command's heading and the examples. Synopsis lines that are no command (a policy's path) are
    left to the caller."""
    text = open(os.path.join(MAN, page)).read()
    forms, entry = [], []
    for line in section(text, "SYNOPSIS") + [".br"]:
        if line == ".br":
            if entry:
                forms.append((f"{page} SYNOPSIS", roff_text(entry)))
            entry = []
        else:
            entry.append(line)
    commands = section(text, "COMMANDS")
    for i, line in enumerate(commands):
        if line == ".TP" and i + 1 < len(commands):
            forms.append((f"{page} COMMANDS", "dsctl [OPTIONS] " + roff_text([commands[i + 1]])))
    for line in section(text, "EXAMPLES"):
        if line.startswith("$ dsctl "):
            forms.append((f"{page} EXAMPLES", "LITERAL " + line[2:].replace("\\-", "-")))
    return forms


def readme_forms():
    """README's usage block ("## Using it" and what follows until the next heading): each dsctl or dsagent
    line of its indented blocks, with the lines that continue it; comments dropped."""
    text = open(os.path.join(SOURCE, "README.md")).read()
    block = re.search(r"^## Using it\n(.*?)(?=^## )", text, re.M | re.S).group(1)
    forms, current = [], None
    for line in block.splitlines():
        if line.startswith("    ") and line.strip().startswith("#"):
            continue  # a comment alone on its line: the command above may go on below it
        command = line.split(" #")[0].strip() if line.startswith("    ") else ""
        if re.match(r"(dsctl|dsagent) ", command):
            current = ["README.md", command]
            forms.append(current)
        elif current and command.startswith(("[", "-")):
            current[1] += " " + command  # a command's options that go on under it
        else:
            current = None
    return [tuple(f) for f in forms]


def is_metavariable(word):
    return re.fullmatch(r"[A-Z][A-Z_]*", word) is not None


def tokens(form):
    """The form's words, brackets and bars as tokens; brackets inside a value (System.Runtime[cpu-usage])
    stay in it."""
    out = []
    for word in form.split():
        if word == "|":
            out.append("|")
            continue
        while word.startswith("["):
            out.append("[")
            word = word[1:]
        closes = 0
        while word.endswith("]") and word.count("]") > word.count("["):
            closes += 1
            word = word[:-1]
        if word:
            out.append(word)
        out += ["]"] * closes
    return out


def parse_form(toks, i=0, until=None):
    """-> (alternatives: a list of sequences, next index). A sequence holds ("word", [alternatives]) and
    ("optional", alternatives); "a|b" in a word is a choice between words, " | " between sequences."""
    alternatives, seq = [], []
    while i < len(toks) and toks[i] != until:
        t = toks[i]
        if t == "[":
            inner, i = parse_form(toks, i + 1, "]")
            assert i < len(toks), f"unclosed [ in {' '.join(toks)}"
            seq.append(("optional", inner))
        elif t == "|":
            alternatives.append(seq)
            seq = []
        else:
            word = t[:-3] if t.endswith("...") else t
            seq.append(("word", word.split("|") if "|" in word and word != "|" else [word]))
        i += 1
    alternatives.append(seq)
    return alternatives, i


def variants_of_item(item):
    kind, alts = item
    if kind == "word":
        return [[w] for w in alts]
    out = [[]]
    for seq in alts:
        out += variants_of_seq(seq)
    return out


def variants_of_seq(seq):
    """Command lines that together take every word and every optional part once: the form with each
    optional part left out, then with one part at a time given (each of its choices)."""
    per_item = [variants_of_item(item) for item in seq]
    base = [v[0] for v in per_item]
    out = [sum(base, [])]
    for i, variants in enumerate(per_item):
        for v in variants[1:]:
            out.append(sum(base[:i] + [v] + base[i + 1:], []))
    return out


def expand(form):
    if form.startswith("LITERAL "):
        return [shlex.split(form[len("LITERAL "):].split(" > ")[0])]
    alternatives, _ = parse_form(tokens(form))
    return [v for seq in alternatives for v in variants_of_seq(seq)]


class Values:
    """A value for each metavariable a page names, as the program takes it, by command and option; each
    FILE and PATH a fresh name in a scratch directory, none existing, but the policy dsagent reads."""

    def __init__(self, scratch):
        self.scratch, self.n = scratch, 0
        self.policy = os.path.join(scratch, "policy.toml")
        with open(self.policy, "w") as f:
            f.write("# empty: the agent's built-in policy\n")

    def fresh(self, stem):
        self.n += 1
        return os.path.join(self.scratch, f"{stem}{self.n}")

    def of(self, program, verb, before, name):
        if name == "OPTIONS":
            return None  # the common options, which the OPTIONS section lists
        if program == "dsagent":
            known = {"FILE": self.policy, "SECONDS": "5", "SEC": "5", "BYTES": "1048576", "MODE": "0660",
                     "GROUP": "root", "WHERE": "json"}
            if name == "PATH":
                return self.fresh("agent.sock" if before == "--listen" else "rundir")
            return known.get(name)
        if name in ("FILE", "PATH"):
            return {"--remove": "/var/lib/dsagent/dumps/dump.none", "--socket": self.fresh("none.sock")}.get(
                before, self.fresh("out"))
        if name == "COMMAND":
            return {"explain": "trace", "exec": "true", "help": "dump"}.get(verb)
        return {"PID": "4242", "UNIT": "orders.service", "T": "mini", "P": "dotnet-common", "NAME": "cpu-sampling",
                "SPEC": "Microsoft-Windows-DotNETRuntime:0x1:4", "SECONDS": "5", "S": "5", "N": "8",
                "LIST": "System.Runtime", "LEVEL": "Warning", "L": "Warning", "CATEGORY": "Orders.Api",
                "C": "Orders.Api", "ARGS": "x", "ORDER": "count", "TIME": "2h", "ID": "1764400000-4242"}.get(name)

    def argv(self, words):
        """The command line, each metavariable given its value; the verb is the first word after the
        program that is no option nor one's value."""
        program, out, verb = words[0], [], None
        for w in words[1:]:
            if is_metavariable(w):
                value = self.of(program, verb, out[-1] if out else None, w)
                if value is None and w != "OPTIONS":
                    raise AssertionError(f"no value for {w} of {program} {verb}: add one to Values.of()")
                if value is not None:
                    out.append(value)
                continue
            if verb is None and not w.startswith("-") and not (out and out[-1] in ("--socket", "--agent-socket")):
                verb = w
            out.append(w)
        return program, out


def usage_error(program, args, scratch):
    """The program's complaint when it refuses @args as a usage error (exit 2), else None. dsctl runs
    with no agent to reach: a command it parsed ends with exit 3 (or 0, 1) once it asks, and dsctl port,
    which serves before it asks, prints its port's first line once the command line is taken. dsagent
    parses and then only checks the policy (--check-policy)."""
    env = {"PATH": os.environ["PATH"], "TMPDIR": scratch, "XDG_RUNTIME_DIR": scratch, "HOME": scratch,
           "DSAGENT_SOCKET": os.path.join(scratch, "no-agent.sock")}
    if program == "dsagent":
        argv = [os.path.join(BUILD, "agent/dsagent")] + args + ([] if "--check-policy" in args else ["--check-policy"])
    else:
        argv = [os.path.join(BUILD, "client/dsctl")] + args
    with open(os.path.join(scratch, "stderr"), "w+") as err:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, cwd=scratch,
                             env=env, text=True)
        first = p.stdout.readline()
        try:
            complaint = json.loads(first) if first.startswith("{") else {}
        except ValueError:
            complaint = {}
        if first and p.poll() is None:
            p.terminate()  # dsctl port, serving: its command line was taken
        p.stdout.read()
        status = p.wait()
        err.seek(0)
        message = err.read()
    if isinstance(complaint, dict) and complaint.get("exit_status") == 2:
        return complaint.get("message", first)
    if status == 2:
        return message.strip() or f"exit {status}"
    return None


def all_forms():
    forms = []
    for page in sorted(os.listdir(MAN)):
        if re.search(r"\.[158]$", page):
            forms += man_forms(page)
    return forms + readme_forms()


@test
def every_command_line_the_pages_show_is_accepted():
    forms = [(where, form) for where, form in all_forms()
             if re.match(r"(LITERAL )?(dsctl|dsagent)( |$)", form)]
    # the pages as they stand: each of dsctl's commands, dsagent's two forms, README's block, the examples
    wheres = {w for w, _ in forms}
    assert {"dsctl.1 SYNOPSIS", "dsctl.1 COMMANDS", "dsctl.1 EXAMPLES", "dsagent.8 SYNOPSIS",
            "README.md"} <= wheres, wheres
    assert len(forms) >= 60, forms
    refused, tried = [], 0
    with tempfile.TemporaryDirectory(prefix="dsagent-docs-") as scratch:
        values = Values(scratch)
        for where, form in forms:
            for words in expand(form):
                program, args = values.argv(words)
                tried += 1
                why = usage_error(program, args, scratch)
                if why:
                    refused.append(f"{where}: '{form}' as '{program} {shlex.join(args)}': {why}")
    assert tried >= 150, tried
    assert not refused, "the pages show command lines the programs refuse:\n" + "\n".join(refused)


@test
def the_form_reader_takes_options_choices_and_values_apart():
    # what the check above relies on, on forms written as the pages write them
    assert roff_text([".RB [ \\-\\-type", ".BR mini | heap ]"]) == "[--type mini|heap]"
    assert roff_text(['.BI exec " PID\\fR|\\fPUNIT " "\\-\\- COMMAND \\fR[\\fIARGS\\fR...]"']) == \
        "exec PID|UNIT -- COMMAND [ARGS...]"
    got = expand("dsctl trace PID|UNIT [--profile NAME | --providers SPEC] [--watch]")
    assert got == [["dsctl", "trace", "PID"], ["dsctl", "trace", "UNIT"],
                   ["dsctl", "trace", "PID", "--profile", "NAME"], ["dsctl", "trace", "PID", "--providers", "SPEC"],
                   ["dsctl", "trace", "PID", "--watch"]], got
    assert tokens("[--counters System.Runtime[cpu-usage],MyMeter]") == \
        ["[", "--counters", "System.Runtime[cpu-usage],MyMeter", "]"]
    with tempfile.TemporaryDirectory(prefix="dsagent-docs-") as scratch:
        # the check sees a refusal: an option dsctl does not know, one port no longer takes after it
        values = Values(scratch)
        assert usage_error(*values.argv(["dsctl", "ps", "--bogus"]), scratch)
        assert "--port-path" in usage_error(*values.argv(["dsctl", "port", "PID", "--socket", "PATH"]), scratch)
        assert usage_error(*values.argv(["dsagent", "--bogus"]), scratch)
        assert usage_error(*values.argv(["dsctl", "ps"]), scratch) is None
        assert usage_error(*values.argv(["dsctl", "port", "PID", "--port-path", "PATH"]), scratch) is None


if __name__ == "__main__":
    run_tests()
