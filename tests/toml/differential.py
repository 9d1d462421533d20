#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Differential test of policy/toml.c (through toml-dump) against Python's tomllib.

    differential.py TOML-DUMP [--seed N] [--count N] [--keep DIR]

For every document, tomllib's verdict decides what toml-dump must print:

* tomllib refuses it (or it is not UTF-8): a syntax or limit error. Not
  "unsupported", which means valid TOML, unless it holds a leap second or
  the year 0: valid TOML (RFC 3339) that Python's datetime cannot hold.
* tomllib accepts it, and it holds something a policy does not: an error of
  the matching kind. Floats, dates and times, and keys containing U+0000
  are "unsupported"; integers beyond 64 bits are "syntax" (TOML 1.0 requires
  an error, tomllib returns a Python int); nesting deeper than
  TOML_DEPTH_MAX, more than TOML_VALUES_MAX values or more than
  TOML_INPUT_MAX bytes are "limit".
* tomllib accepts it otherwise: the same tree, keys in the same order.

The documents are cases/valid/*.toml (tomllib must accept them),
cases/invalid/*.toml (tomllib must refuse them), and generated ones: random
trees written as TOML in many styles (tomllib must read back the tree),
mutations of those, and short runs of headers and dotted keys over three
names, which redefine tables in most of the ways TOML allows or forbids.
Generation is seeded, so every run checks the same documents. Output is
TAP: one line per corpus file and one per batch of generated documents; a
mismatch prints the document.
"""

import argparse
import datetime
import json
import os
import random
import re
import subprocess
import sys
import tempfile

try:
    import tomllib
except ImportError:
    print("1..0 # SKIP tomllib needs Python 3.11 or later (use /usr/bin/python3 on Debian 12)")
    sys.exit(0)

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
DEPTH_MAX = 32
VALUES_MAX = 100000
INPUT_MAX = 1024 * 1024

BATCH = 100  # generated documents per TAP line
DUMP_CHUNK = 400  # files per toml-dump run


# --- what toml-dump must print -------------------------------------------------


class Expectation:
    """Either value (the tagged tree), kinds (errors we must give), or reject."""

    def __init__(self, value=None, kinds=None, reject=None):
        self.value, self.kinds, self.reject = value, kinds, reject


def tag(v, depth, reasons, count):
    """tomllib's result in toml-dump's JSON; notes why we must refuse it."""
    if isinstance(v, dict):
        if depth > DEPTH_MAX:
            reasons.add("limit")
        out = {}
        for k, x in v.items():
            if "\0" in k:
                reasons.add("unsupported")
            count[0] += 1
            out[k] = tag(x, depth + 1, reasons, count)
        return out
    if isinstance(v, list):
        if depth > DEPTH_MAX:
            reasons.add("limit")
        count[0] += len(v)
        return [tag(x, depth + 1, reasons, count) for x in v]
    if isinstance(v, bool):
        return {"type": "bool", "value": "true" if v else "false"}
    if isinstance(v, int):
        if not INT_MIN <= v <= INT_MAX:
            reasons.add("syntax")
        return {"type": "integer", "value": str(v)}
    if isinstance(v, str):
        return {"type": "string", "value": v}
    if isinstance(v, (float, datetime.date, datetime.time)):
        reasons.add("unsupported")
        return {"type": type(v).__name__, "value": str(v)}
    raise TypeError(f"tomllib returned a {type(v).__name__}")


def expect(data):
    if len(data) > INPUT_MAX:
        return Expectation(kinds={"limit"})
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return Expectation(reject=f"not UTF-8: {e}")
    try:
        tree = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return Expectation(reject=str(e))
    except (ValueError, RecursionError) as e:
        # int() of thousands of digits, or a deep nest: refused, not by the parser proper
        return Expectation(reject=f"{type(e).__name__}: {e}")
    reasons, count = set(), [0]
    value = tag(tree, 0, reasons, count)
    if count[0] > VALUES_MAX:
        reasons.add("limit")
    if reasons:
        return Expectation(kinds=reasons)
    return Expectation(value=value)


ERROR_LINE = re.compile(r"error (\d+):(\d+) (syntax|unsupported|limit): (.+)")
BEYOND_DATETIME = re.compile(rb"(^|[^0-9])0000-[0-9]{2}-[0-9]{2}|[0-9]{2}:[0-9]{2}:60")


def judge(exp, data, line):
    """None if our output @line for @data meets @exp, else what is wrong."""
    m = ERROR_LINE.fullmatch(line)
    if line.startswith("error") and (not m or int(m[1]) < 1 or int(m[2]) < 1):
        return f"malformed error line: {line!r}"
    if exp.reject is not None:
        if not m:
            return f"tomllib refuses it ({exp.reject}), we accept it: {line[:300]}"
        if m[3] == "unsupported" and not BEYOND_DATETIME.search(data):
            return f"tomllib refuses it ({exp.reject}), we call it valid but unsupported: {line}"
        return None
    if exp.kinds is not None:
        if not m:
            return f"we accept it, but it must be refused as {'/'.join(sorted(exp.kinds))}"
        return None if m[3] in exp.kinds else f"want a {'/'.join(sorted(exp.kinds))} error, got: {line}"
    if m:
        return f"tomllib accepts it, we refuse it: {line}"
    try:
        ours = json.loads(line)
    except json.JSONDecodeError as e:
        return f"toml-dump printed bad JSON ({e}): {line[:300]}"
    # dumps() keeps key order, so this compares the order of entries too
    if json.dumps(ours, ensure_ascii=False) != json.dumps(exp.value, ensure_ascii=False):
        return (f"values differ:\n  ours:    {json.dumps(ours, ensure_ascii=False)[:2000]}\n"
                f"  tomllib: {json.dumps(exp.value, ensure_ascii=False)[:2000]}")
    return None


class Dumper:
    """Runs toml-dump --batch over many documents at once."""

    def __init__(self, exe, keep=None):
        self.exe = exe
        self.tmp = tempfile.TemporaryDirectory(prefix="toml-diff-")
        self.keep = keep is not None
        self.dir = keep or self.tmp.name
        self.n = 0

    def run(self, docs):
        paths = []
        for data in docs:
            self.n += 1
            path = os.path.join(self.dir, f"doc-{self.n:06d}.toml")
            with open(path, "wb") as f:
                f.write(data)
            paths.append(path)
        lines = []
        for i in range(0, len(paths), DUMP_CHUNK):
            chunk = paths[i:i + DUMP_CHUNK]
            out = subprocess.run([self.exe, "--batch", *chunk], stdout=subprocess.PIPE, check=True)
            got = out.stdout.decode("utf-8").split("\n")[:-1]
            if len(got) != len(chunk):
                raise RuntimeError(f"toml-dump printed {len(got)} lines for {len(chunk)} files")
            lines += got
        if not self.keep:
            for path in paths:
                os.unlink(path)
        return lines


# --- TAP -------------------------------------------------------------------------

class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def result(self, ok, name, details=()):
        self.n += 1
        self.failed += not ok
        name = name.replace("#", "\\#")  # not a TAP directive, whatever a message says
        print(f"{'ok' if ok else 'not ok'} {self.n} - {name}")
        for d in details:
            for line in d.splitlines():
                print(f"# {line}")
        sys.stdout.flush()

    def finish(self):
        print(f"1..{self.n}")
        return 1 if self.failed else 0


def show(data):
    text = data.decode("utf-8", errors="backslashreplace")
    if len(text) > 3000:
        text = text[:3000] + "\n[... cut]"
    return "document (repr of each line):\n" + "\n".join("  " + repr(l) for l in text.split("\n"))


# --- the committed corpus ------------------------------------------------------


def run_corpus(tap, dumper):
    files = []
    for verdict in ("valid", "invalid"):
        d = os.path.join(CASES, verdict)
        files += [(verdict, os.path.join(d, n)) for n in sorted(os.listdir(d)) if n.endswith(".toml")]
    docs = []
    for _, path in files:
        with open(path, "rb") as f:
            docs.append(f.read())
    lines = dumper.run(docs)
    counts = {"valid": 0, "invalid": 0}
    for (verdict, path), data, line in zip(files, docs, lines):
        name = f"{verdict}/{os.path.basename(path)}"
        exp = expect(data)
        counts[verdict] += 1
        if (exp.reject is None) != (verdict == "valid"):
            tap.result(False, name, [f"the corpus is wrong: tomllib {'accepts' if exp.reject is None else 'refuses'} it"
                                     + (f" ({exp.reject})" if exp.reject else ""), show(data)])
            continue
        problem = judge(exp, data, line)
        tap.result(problem is None, f"{name}: {line[:100]}", [problem, show(data)] if problem else ())
    return counts


# --- random documents ------------------------------------------------------------

BARE = re.compile(r"[A-Za-z0-9_-]+")
KEY_WORDS = ["a", "b", "key", "name", "users", "rule", "1", "123", "true", "false", "inf", "nan", "1e5",
             "0x10", "-", "_", "--x", "a-b", "a_b", "A", "Z9"]
TEXT_POOL = (list("abcXYZ019 _-.,:;!?=[]{}#") + ["\t", "\n", '"', "'", "\\", "''", '""', "'''", '"""',
             "é", "ß", "€", "😀", "\u2028", "\ufeff", "\uffff", "\U0010ffff", "\x00", "\x01", "\x1f", "\x7f",
             "\x80", "\x9f", "\r", "\r\n", "\\n", "\\u0041", "${x}", "%s"])
SPECIAL_INTS = [0, 1, -1, 7, 10, 255, 256, 4096, 65535, INT_MAX, INT_MIN, INT_MAX - 1, INT_MIN + 1,
                2**31, -(2**31), 2**32, 10**18]


class TreeGen:
    def __init__(self, rng):
        self.rng = rng

    def key(self):
        r = self.rng.random()
        if r < 0.5:
            return self.rng.choice(KEY_WORDS) + (str(self.rng.randrange(100)) if self.rng.random() < 0.5 else "")
        if r < 0.55:
            return ""
        if r < 0.56:
            return "nul\0key"  # valid TOML that the parser refuses
        return "".join(self.rng.choice(TEXT_POOL) for _ in range(self.rng.randrange(1, 5))).replace("\0", "0")

    def string(self):
        n = self.rng.choice([0, 1, 2, 3, 5, 8, 20])
        return "".join(self.rng.choice(TEXT_POOL) for _ in range(n))

    def integer(self):
        r = self.rng.random()
        if r < 0.4:
            return self.rng.choice(SPECIAL_INTS)
        if r < 0.41:
            return self.rng.choice([INT_MAX + 1, INT_MIN - 1, 2**64, -(2**70)])  # beyond 64 bits
        if r < 0.7:
            return self.rng.randrange(-1000, 1000)
        return self.rng.randrange(INT_MIN, INT_MAX + 1)

    def scalar(self):
        r = self.rng.random()
        if r < 0.45:
            return self.string()
        if r < 0.85:
            return self.integer()
        return self.rng.random() < 0.5

    def value(self, depth):
        r = self.rng.random()
        if depth >= 5 or r < 0.6:
            return self.scalar()
        if r < 0.75:
            return self.array(depth + 1)
        if r < 0.85:
            return [self.table(depth + 2) for _ in range(self.rng.randrange(1, 4))]
        return self.table(depth + 1)

    def array(self, depth):
        n = self.rng.choice([0, 1, 2, 3, 5])
        if self.rng.random() < 0.5:
            return [self.value(depth + 1) for _ in range(n)]
        kind = self.rng.choice([self.string, self.integer, lambda: self.rng.random() < 0.5])
        return [kind() for _ in range(n)]

    def table(self, depth):
        t = {}
        for _ in range(self.rng.choice([0, 1, 2, 3, 4, 6])):
            k = self.key()
            if k not in t:
                t[k] = self.value(depth)
        return t

    def deep(self):
        """A chain of tables and arrays about as deep as the parser allows."""
        depth = self.rng.randrange(DEPTH_MAX - 2, DEPTH_MAX + 3)
        v = self.scalar()
        for _ in range(depth):
            v = [v] if self.rng.random() < 0.3 else {self.rng.choice(KEY_WORDS): v}
        return {"deep": v} if isinstance(v, list) or self.rng.random() < 0.5 else v


def is_table_array(v):
    return isinstance(v, list) and len(v) > 0 and all(isinstance(x, dict) for x in v)


class Writer:
    """Writes a tree as TOML, choosing among the equivalent spellings at random."""

    def __init__(self, rng):
        self.rng = rng
        self.nl = "\r\n" if rng.random() < 0.15 else "\n"

    def ws(self):
        return self.rng.choice(["", "", " ", " ", "  ", "\t", " \t "])

    def escape(self, s, multiline=False):
        """The characters of @s as they go between double quotes, one list item per character."""
        out = []
        for c in s:
            o = ord(c)
            if c == '"':
                out.append('\\"')
            elif c == "\\":
                out.append("\\\\")
            elif c == "\n" and multiline:
                out.append("\n")
            elif c in "\b\t\n\f\r" and self.rng.random() < 0.7:
                out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[c])
            elif c == "\t" and self.rng.random() < 0.5:
                out.append("\t")
            elif o < 0x20 or o == 0x7F or self.rng.random() < 0.1:
                out.append(f"\\u{o:04x}" if o < 0x10000 and self.rng.random() < 0.7 else f"\\U{o:08X}")
            else:
                out.append(c)
        return out

    def literal_ok(self, s):
        return not any((ord(c) < 0x20 and c != "\t") or c == "\x7f" or c == "'" for c in s)

    def string(self, s, key=False):
        r = self.rng.random()
        if r < 0.3 and self.literal_ok(s):
            return f"'{s}'"
        if key or r < 0.6:
            return '"' + "".join(self.escape(s)) + '"'
        if r < 0.8:
            body = self.escape(s, multiline=True)
            body = "".join(self.line_ending_backslashes(body) if self.rng.random() < 0.5 else body)
            lead = "\n" if body.startswith("\n") or self.rng.random() < 0.5 else ""
            return f'"""{lead}{body}"""'.replace("\n", self.nl)
        ok = not any((ord(c) < 0x20 and c not in "\t\n") or c == "\x7f" for c in s) and "'''" not in s
        if ok and not s.endswith("'''") and not s.startswith("'"):
            lead = "\n" if s.startswith("\n") or self.rng.random() < 0.5 else ""
            return f"'''{lead}{s}'''".replace("\n", self.nl)
        return '"' + "".join(self.escape(s)) + '"'

    def line_ending_backslashes(self, chars):
        """Puts '\\', whitespace, newlines and indentation before some characters: all of it vanishes.
        Not before whitespace, which would vanish with it."""
        out = []
        for c in chars:
            if c[0] not in " \t\n" and self.rng.random() < 0.15:
                out.append("\\" + self.ws() + "\n" * self.rng.randrange(1, 3) + self.ws())
            out.append(c)
        return out

    def key(self, k):
        if BARE.fullmatch(k) and self.rng.random() < 0.85:
            return k
        return self.string(k, key=True)

    def integer(self, v):
        r = self.rng.random()
        if v >= 0 and r < 0.25:
            fmt, prefix = self.rng.choice([("x", "0x"), ("X", "0x"), ("o", "0o"), ("b", "0b")])
            digits = format(v, fmt)
        else:
            prefix, digits = ("-" if v < 0 else ("+" if self.rng.random() < 0.2 else "")), str(abs(v))
        if len(digits) > 1 and self.rng.random() < 0.3:
            digits = "".join(d + ("_" if i < len(digits) - 1 and self.rng.random() < 0.3 else "")
                             for i, d in enumerate(digits))
        return prefix + digits

    def value(self, v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return self.integer(v)
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, list):
            return self.array(v)
        return self.inline_table(v)

    def array_space(self):
        r = self.rng.random()
        if r < 0.7:
            return self.ws()
        if r < 0.85:
            return self.ws() + self.nl + self.ws()
        return self.ws() + "# c" + self.nl + self.ws()

    def array(self, items):
        if not items:
            return "[" + self.array_space() + "]"
        parts = [self.array_space() + self.value(x) + self.array_space() for x in items]
        trailing = "," + self.array_space() if self.rng.random() < 0.3 else ""
        return "[" + ",".join(parts) + trailing + "]"

    def inline_table(self, t):
        if not t:
            return "{" + self.ws() + "}"
        parts = []
        for k, v in t.items():
            for path, x in self.dotted(k, v, inline=True):
                parts.append(self.ws() + path + self.ws() + "=" + self.ws() + self.value(x) + self.ws())
        return "{" + ",".join(parts) + "}"

    def dotted(self, k, v, inline=False):
        """(dotted key, value) pairs that define @k = @v, splitting tables into dotted keys at random."""
        if isinstance(v, dict) and v and self.rng.random() < 0.4:
            sep = self.ws() + "." + self.ws()
            return [(self.key(k) + sep + p, x) for k2, v2 in v.items() for p, x in self.dotted(k2, v2, inline)]
        return [(self.key(k), v)]

    def path(self, keys):
        sep = self.ws() + "." + self.ws() if self.rng.random() < 0.3 else "."
        return sep.join(self.key(k) for k in keys)

    def header(self, keys, array):
        inner = self.ws() + self.path(keys) + self.ws()
        return ("[[" + inner + "]]" if array else "[" + inner + "]") + self.comment()

    def comment(self):
        r = self.rng.random()
        if r < 0.85:
            return ""
        return self.ws() + self.rng.choice(["#", "# note", "#é ☃", "# \t tabs", "#[a] = 1"])

    def body(self, path, table, lines):
        """Key/value lines of @table for its section; returns the sub-tables left for [headers]."""
        here, later = [], []
        for k, v in table.items():
            if isinstance(v, dict) and self.rng.random() < 0.5:
                later.append((k, v, False))
            elif is_table_array(v) and self.rng.random() < 0.6:
                later.append((k, v, True))
            else:
                for p, x in self.dotted(k, v):
                    here.append(self.ws() + p + self.ws() + "=" + self.ws() + self.value(x) + self.comment())
        if self.rng.random() < 0.3:
            self.rng.shuffle(here)  # any order within a section means the same
        for line in here:
            lines.append(line)
            if self.rng.random() < 0.1:
                lines.append(self.rng.choice(["", self.ws() + "# comment", self.ws()]))
        return later

    def section(self, path, table, lines, array=False):
        own = []
        later = self.body(path, table, own)
        # a table with no keys of its own may be left implicit, and its header may come after its children's
        implicit = not array and not own and later and self.rng.random() < 0.4
        own_after = not array and not implicit and later and self.rng.random() < 0.2
        if not implicit and not own_after:
            lines.append(self.header(path, array))
            lines += own
        for k, v, is_array in later:
            if is_array:
                for element in v:
                    self.section(path + [k], element, lines, array=True)
            else:
                self.section(path + [k], v, lines)
        if own_after:
            lines.append(self.header(path, array))
            lines += own

    def document(self, root):
        lines = []
        later = self.body([], root, lines)
        for k, v, is_array in later:
            if is_array:
                for element in v:
                    self.section([k], element, lines, array=True)
            else:
                self.section([k], v, lines)
        text = self.nl.join(lines)
        if self.rng.random() < 0.7:
            text += self.nl
        return text


SNIPPETS = [b"=", b"[", b"]", b"[[", b"]]", b"{", b"}", b",", b".", b"#", b'"', b"'", b'"""', b"'''", b"\\",
            b"\n", b"\r", b"\r\n", b"\t", b" ", b"\x00", b"\x7f", b"\x1b", b"\xff", b"\xc3", b"\xed\xa0\x80",
            b"\xef\xbb\xbf", b"0", b"_", b"-", b"+", b"x", b"e", b"1.5", b"1e5", b"inf", b"nan",
            b"1979-05-27", b"07:32:00", b"1979-05-27T07:32:00Z", b"1979-05-27 07:32:00", b"true", b"a = 1",
            b"\\u", b"\\U0001F600", b"\\uD800", b"\\x41", b"\\e", b"a.b", b'""', b"''", b"= {}", b"= []",
            b"[a]", b"[[a]]", b"\n[a]\n", b"\na.b = 1\n", b"9223372036854775808", b"-0", b"00", b"0x", b"0_1"]


def mutate(rng, data, others):
    lines = data.split(b"\n")
    r = rng.random()
    if r < 0.2 and data:
        i = rng.randrange(len(data))
        return data[:i] + data[i + 1:]
    if r < 0.45:
        i = rng.randrange(len(data) + 1)
        return data[:i] + rng.choice(SNIPPETS) + data[i:]
    if r < 0.6 and data:
        i = rng.randrange(len(data))
        return data[:i] + rng.choice(SNIPPETS) + data[i + 1:]
    if r < 0.72:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines) + 1)
        return b"\n".join(lines[:j] + [lines[i]] + lines[j:])
    if r < 0.82 and len(lines) > 1:
        i, j = rng.sample(range(len(lines)), 2)
        lines[i], lines[j] = lines[j], lines[i]
        return b"\n".join(lines)
    if r < 0.9:
        return data[:rng.randrange(len(data) + 1)]
    other = rng.choice(others).split(b"\n")
    i = rng.randrange(len(lines) + 1)
    return b"\n".join(lines[:i] + [rng.choice(other)] + lines[i:])


STRUCTURE_VALUES = ["1", "{}", "{ x = 1 }", "{ a.b = 1 }", "{ b = {} }", "[]", "[{}]", "[{ b = 1 }]", "[1]"]


def structure(rng):
    """A few headers and dotted keys over the names a, b and c: most documents
    define something twice, in one of the many ways TOML forbids or allows."""
    lines = []
    for _ in range(rng.randrange(2, 9)):
        path = ".".join(rng.choice("abc") for _ in range(rng.randrange(1, 4)))
        r = rng.random()
        if r < 0.3:
            lines.append(f"[{path}]")
        elif r < 0.5:
            lines.append(f"[[{path}]]")
        else:
            lines.append(f"{path} = {rng.choice(STRUCTURE_VALUES)}")
    return ("\n".join(lines) + "\n").encode()


def generate(seed, count):
    """count well-formed documents with their trees, two mutants of each, and count structures."""
    rng = random.Random(seed)
    gen = TreeGen(rng)
    valid = []
    for i in range(count):
        tree = gen.deep() if i % 100 == 99 else gen.table(0)
        valid.append((Writer(rng).document(tree).encode("utf-8"), tree))
    docs = [d for d, _ in valid]
    mutants = [mutate(rng, d, docs) for d in docs for _ in range(2)]
    mutants += [structure(rng) for _ in range(count)]
    return valid, mutants


def run_generated(tap, dumper, seed, count):
    valid, mutants = generate(seed, count)
    stats = {"accepted": 0, "unsupported": 0, "syntax": 0, "limit": 0, "refused": 0}

    def check_batch(name, batch, trees=None):
        lines = dumper.run(batch)
        problems = []
        for i, (data, line) in enumerate(zip(batch, lines)):
            exp = expect(data)
            problem = judge(exp, data, line)
            if trees is not None and exp.reject is not None:
                problem = f"the generator wrote bad TOML (tomllib: {exp.reject})"
            elif trees is not None and exp.reject is None and tomllib.loads(data.decode()) != trees[i]:
                problem = "the generator wrote TOML that tomllib reads as another tree"
            if line.startswith("error"):
                kind = ERROR_LINE.fullmatch(line)
                stats[kind[3] if kind else "refused"] += 1
            else:
                stats["accepted"] += 1
            if problem and len(problems) < 5:
                problems += [problem, show(data)]
            elif problem:
                problems.append("(more)")
        tap.result(not problems, name, problems)

    for b in range(0, len(valid), BATCH):
        chunk = valid[b:b + BATCH]
        check_batch(f"generated documents {b + 1}-{b + len(chunk)} (seed {seed})",
                    [d for d, _ in chunk], [t for _, t in chunk])
    for b in range(0, len(mutants), BATCH * 2):
        chunk = mutants[b:b + BATCH * 2]
        check_batch(f"mutants {b + 1}-{b + len(chunk)} (seed {seed})", chunk)
    return len(valid), len(mutants), stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("toml_dump", nargs="?", default=os.environ.get("TOML_DUMP"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=2000, help="generated documents (each also gives two mutants)")
    ap.add_argument("--keep", help="leave the documents in this directory")
    args = ap.parse_args()
    if not args.toml_dump:
        ap.error("the path to toml-dump is needed (argument or $TOML_DUMP)")

    tap = Tap()
    dumper = Dumper(args.toml_dump, args.keep)
    counts = run_corpus(tap, dumper)
    n_valid, n_mutants, stats = run_generated(tap, dumper, args.seed, args.count)
    print(f"# corpus: {counts['valid']} valid, {counts['invalid']} invalid; generated: {n_valid} documents, "
          f"{n_mutants} mutants and table structures; our verdicts on those: {stats}")
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
