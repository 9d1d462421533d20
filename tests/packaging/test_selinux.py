#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""selinux/: the module builds with the distribution's policy devel Makefile and says what it claims.

Built with make -f /usr/share/selinux/devel/Makefile (Debian's
selinux-policy-dev here; selinux-policy-devel on Fedora), together with a
module that uses every interface of dsagent.if. The rules are then read
from the expanded sources the Makefile leaves in tmp/: among everything
these modules allow, only dsagent_t may write to a runtime's diagnostic
socket or connect to a runtime domain.
"""
import os
import re
import shutil
import tempfile

from tap import SOURCE, run, run_tests, test

MAKEFILE = "/usr/share/selinux/devel/Makefile"
work = tempfile.mkdtemp(prefix="dsagent-selinux-")

# A confined .NET service and a confined client, as a site policy would write them.
EXAMPLE = """policy_module(dsagent_example, 1.0.0)
type example_dotnet_t;
domain_type(example_dotnet_t)
type example_client_t;
domain_type(example_client_t)
type example_cli_t;
domain_type(example_cli_t)
dsagent_dotnet_runtime(example_dotnet_t)
dsagent_stream_connect(example_client_t)
dsagent_read_dumps(example_client_t)
dsagent_client(example_cli_t)
"""


def statements(module):
    """The expanded module as (kind, words) with sets flattened; comments dropped."""
    text = open(os.path.join(work, "tmp", f"{module}.tmp")).read()
    text = re.sub(r"#[^\n]*", "", text)
    out = []
    for stmt in text.split(";"):
        stmt = " ".join(stmt.replace("{", " { ").replace("}", " } ").split())
        stmt = stmt.split("} ")[-1] if stmt.startswith("if ") else stmt.lstrip("} ")
        if stmt:
            out.append(stmt)
    return out


def parse_set(words):
    """'{ a b }' or 'a' at the front of words: (set, rest)."""
    if words[0] != "{":
        return {words[0]}, words[1:]
    end = words.index("}")
    return set(words[1:end]), words[end + 1:]


def allow_rules(module):
    """[(sources, targets, classes, perms)] of every allow rule, with attribute members in the module added."""
    members = {}
    rules = []
    for stmt in statements(module):
        words = stmt.split()
        if words[0] == "typeattribute":
            for attr in " ".join(words[2:]).replace(",", " ").split():
                members.setdefault(attr, set()).add(words[1])
        elif words[0] == "allow" and ":" in stmt:
            src, rest = parse_set(words[1:])
            tgt_and_class = " ".join(rest).split(":", 1)
            tgt, _ = parse_set(tgt_and_class[0].split())
            cls, perms = parse_set(tgt_and_class[1].split())
            perms, _ = parse_set(perms)
            rules.append((src, tgt, cls, perms))

    def expand(names):
        names = set(names)
        for n in list(names):
            names |= members.get(n, set())
        return names

    return [(expand(s), expand(t), c, p) for s, t, c, p in rules]


def granted(rules, cls, perm, target):
    """Sources allowed @perm on @target of @cls; '*' and '~' sets count as a grant to anyone."""
    who = set()
    for src, tgt, classes, perms in rules:
        if cls in classes and (perm in perms or "*" in perms or any(p.startswith("~") for p in perms)) \
                and (target in tgt or any(t.startswith("~") or t == "*" for t in tgt)):
            who |= src
    return who


@test
def builds_with_the_policy_devel_makefile():
    for name in ("dsagent.te", "dsagent.if", "dsagent.fc"):
        shutil.copy(os.path.join(SOURCE, "selinux", name), work)
    with open(os.path.join(work, "dsagent_example.te"), "w") as f:
        f.write(EXAMPLE)
    run(["make", "-f", MAKEFILE, "dsagent.pp", "dsagent_example.pp"], cwd=work)
    for pp in ("dsagent.pp", "dsagent_example.pp"):
        assert os.path.getsize(os.path.join(work, pp)) > 0
    # the Makefile removes its intermediate files; keep the expanded sources
    run(["make", "-f", MAKEFILE, "tmp/dsagent.tmp", "tmp/dsagent_example.tmp"], cwd=work)


@test
def only_dsagent_writes_to_diagnostic_sockets():
    for module in ("dsagent", "dsagent_example"):
        rules = allow_rules(module)
        writers = granted(rules, "sock_file", "write", "dsagent_dotnet_socket_t")
        assert writers <= {"dsagent_t"}, f"{module}: {writers} may write to runtime sockets"
        connectors = granted(rules, "unix_stream_socket", "connectto", "dsagent_dotnet_domain") | \
            granted(rules, "unix_stream_socket", "connectto", "example_dotnet_t")
        assert connectors <= {"dsagent_t"}, f"{module}: {connectors} may connect to runtimes"
    rules = allow_rules("dsagent")
    assert "dsagent_t" in granted(rules, "sock_file", "write", "dsagent_dotnet_socket_t")
    assert "dsagent_t" in granted(rules, "unix_stream_socket", "connectto", "dsagent_dotnet_domain")
    neverallow = [s for s in statements("dsagent") if s.startswith("neverallow")]
    assert any("dsagent_dotnet_socket_t:sock_file write" in s for s in neverallow), neverallow


@test
def interfaces_label_and_connect():
    stmts = statements("dsagent_example")
    # the runtime's sockets in /tmp get the type only dsagent may write to
    assert any(re.match(r"type_transition example_dotnet_t tmp_t ?: ?sock_file dsagent_dotnet_socket_t", s)
               for s in stmts), [s for s in stmts if s.startswith("type_transition")]
    rules = allow_rules("dsagent_example")
    assert "example_client_t" in granted(rules, "unix_stream_socket", "connectto", "dsagent_t")
    assert "example_client_t" in granted(rules, "file", "read", "dsagent_dump_t")
    assert "example_client_t" not in granted(rules, "file", "write", "dsagent_dump_t")
    # dsctl's domain takes the agent's descriptors (a session's pipe, a dump opened for a reader),
    # and opens no dump itself
    assert "example_cli_t" in granted(rules, "unix_stream_socket", "connectto", "dsagent_t")
    assert "example_cli_t" in granted(rules, "fd", "use", "dsagent_t")
    assert "example_cli_t" in granted(rules, "fifo_file", "read", "dsagent_t")
    assert "example_cli_t" in granted(rules, "file", "read", "dsagent_dump_t")
    assert "example_cli_t" not in granted(rules, "file", "open", "dsagent_dump_t")
    assert "example_cli_t" not in granted(rules, "fifo_file", "write", "dsagent_t")


@test
def the_egress_process_alone_reaches_stores_and_reads_their_keys():
    """dsagent_egress_t: entered from dsagent_t on exec of dsagent-egress, the only domain of the module with
    name_connect (HTTP ports; unreserved ones under a boolean), the only reader of the keys, and an artifact's
    reader only through the descriptor it is given."""
    stmts = statements("dsagent")
    assert any(re.match(r"type_transition dsagent_t dsagent_egress_exec_t ?: ?process dsagent_egress_t", s)
               for s in stmts), [s for s in stmts if s.startswith("type_transition")]
    rules = allow_rules("dsagent")
    assert "dsagent_t" in granted(rules, "process", "transition", "dsagent_egress_t")
    assert "dsagent_egress_t" in granted(rules, "file", "entrypoint", "dsagent_egress_exec_t")
    connecting = set()
    for src, tgt, classes, perms in rules:
        if "tcp_socket" in classes and "name_connect" in perms:
            connecting |= src
    assert connecting == {"dsagent_egress_t"}, connecting
    for port in ("http_port_t", "http_cache_port_t"):
        assert granted(rules, "tcp_socket", "name_connect", port) == {"dsagent_egress_t"}, port
    # any unreserved port, and systemd's credentials (every unit's are ramfs_t), only under booleans that are off
    raw = open(os.path.join(work, "tmp", "dsagent.tmp")).read()
    for boolean, words in (("dsagent_egress_connect_unreserved_ports", "unreserved_port_type:tcp_socket name_connect"),
                           ("dsagent_egress_read_systemd_credentials", "ramfs_t:file")):
        assert re.search(rf"^\s*bool {boolean} false;", raw, re.M), boolean
        start = raw.index(f"if ({boolean}) {{")
        block = raw[start:raw.index(f"}} # end {boolean}", start)]
        everywhere = [line for line in raw.splitlines() if words in line and line.lstrip().startswith("allow")]
        inside = [line for line in block.splitlines() if words in line and line.lstrip().startswith("allow")]
        assert everywhere and everywhere == inside, (boolean, everywhere, inside)
    # the keys: opened by the agent alone (the egress process's user, dsagent-egress, could not), which sends the
    # descriptor; the egress process reads them through it and never opens them itself
    assert granted(rules, "file", "open", "dsagent_egress_cred_t") == {"dsagent_t"}
    assert granted(rules, "file", "read", "dsagent_egress_cred_t") == {"dsagent_t", "dsagent_egress_t"}
    assert "dsagent_t" in granted(rules, "file", "getattr", "dsagent_egress_cred_t")
    assert "dsagent_egress_t" in granted(rules, "file", "getattr", "dsagent_egress_cred_t")
    # the child the agent execs it in takes dsagent-egress's ids: setuid, setgid for dsagent_t; the egress
    # process itself holds no capability at all
    assert "dsagent_t" in granted(rules, "capability", "setuid", "self")
    assert "dsagent_t" in granted(rules, "capability", "setgid", "self")
    assert not any("dsagent_egress_t" in src and "capability" in classes for src, tgt, classes, perms in rules), \
        [r for r in rules if "dsagent_egress_t" in r[0] and "capability" in r[2]]
    # an artifact: read through the passed descriptor; never opened, its directory never searched
    assert "dsagent_egress_t" in granted(rules, "file", "read", "dsagent_dump_t")
    assert "dsagent_egress_t" not in granted(rules, "file", "open", "dsagent_dump_t")
    assert "dsagent_egress_t" not in granted(rules, "dir", "search", "dsagent_dump_t")
    assert "dsagent_egress_t" not in granted(rules, "file", "write", "dsagent_dump_t")
    # each upload's child: forked, killed at its deadline, reaped (the guest runs no upload: held here)
    for perm in ("fork", "sigkill", "sigchld"):
        assert "dsagent_egress_t" in granted(rules, "process", perm, "self"), perm
    neverallow = [s.replace(" ", "") for s in stmts if s.startswith("neverallow")]
    for words in ("dsagent_egress_t dsagent_dump_t:file open", "dsagent_egress_t dsagent_egress_cred_t:file open",
                  "dsagent_t { http_port_t http_cache_port_t }:tcp_socket name_connect"):
        assert any(words.replace(" ", "") in s for s in neverallow), (words, neverallow)


@test
def file_contexts_cover_the_installed_paths():
    fc = open(os.path.join(SOURCE, "selinux/dsagent.fc")).read()
    expected = {"/usr/sbin/dsagent": "dsagent_exec_t", "/etc/dsagent/policy.toml": "dsagent_conf_t",
                "/run/dsagent.sock": "dsagent_runtime_t", "/run/dsagent/x": "dsagent_runtime_t",
                "/var/lib/dsagent": "dsagent_var_lib_t", "/var/lib/dsagent/dumps/core": "dsagent_dump_t",
                "/usr/libexec/dsagent-egress": "dsagent_egress_exec_t",
                "/usr/local/libexec/dsagent-egress": "dsagent_egress_exec_t",
                "/etc/dsagent/egress": "dsagent_egress_cred_t",
                "/etc/dsagent/egress/central.credentials": "dsagent_egress_cred_t"}
    entries = [(line.split()[0], line.split()[-1]) for line in fc.splitlines() if line.strip()]
    for path, want in expected.items():
        got = [ctx for regex, ctx in entries if re.fullmatch(regex, path)]
        assert got and want in got[-1], f"{path}: {got}, want {want}"


if __name__ == "__main__":
    try:
        run_tests(chained=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
