#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""dsctl flame, trace --format and convert against the real runtime (the test app's --burn-cpu: a known hot method
called from Main): the flame graph rendered in a real browser, the speedscope and Chromium files equal to stock
dotnet-trace convert's of the same trace, pprof read by go tool pprof; and a hostile runtime's names, which stay
text in every format and in the browser."""
import json
import os
import re
import shutil

import browser
import nettrace_writer
from cpu_profiles import (HOT, MAIN, SVG_NS, WARM, children, convert, pprof_profile, pprof_top, stock_convert,
                          svg_frames, the, without_exporter)
from harness import (ALICE, EXIT_DENIED, EXIT_NO_SUCH_PROCESS, MALLORY, RUNTIME_BOUND, SOURCE, SVC, Agent, FakeRuntime,
                     Target, dsctl, make_dir, run_tests, test)

SESSION_START_ID = "21c6214d54a0498bbab8983290c4efb6"
EXIT_RUNTIME_FAILED = 8


def burning_target(*more):
    return Target(SVC, args=("--burn-cpu", *more))


def rgb(fill):
    return tuple(int(v) for v in re.match(r"rgb\((\d+),(\d+),(\d+)\)$", fill).groups())


def near(a, b, tolerance=24):
    return all(abs(x - y) <= tolerance for x, y in zip(a, b))


def pixels_of(png, frame):
    """How many pixels of the screenshot's row through @frame's middle have @frame's fill colour."""
    _, _, rows = browser.read_png(png)
    y = int(float(frame["rect"]["y"]) + float(frame["rect"]["height"]) / 2)
    color = rgb(frame["rect"]["fill"])
    return sum(1 for pixel in rows[y] if near(pixel, color))


@test
def flame_shows_the_hot_method_widest_under_main_in_the_browser():
    """The done-when: dsctl flame of the burning app, rendered by headless chromium, shows BurnCpuInDsagentFlameProbe
    as the widest frame under Main: in the SVG's data, in the frames the viewer laid out, and in the screenshot's
    pixels (the row above Main holds more of its colour than of any sibling's)."""
    target = burning_target("--park-thread")
    agent = Agent()
    work = make_dir(SVC, 0o755)
    svg = os.path.join(work, "cpu.svg")
    r = dsctl(agent, SVC, "flame", str(target.pid), "--duration", "3", "-o", svg, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    assert re.search(r"wrote .*cpu\.svg \(flame\): \d+ thread samples \(ended: duration\)", r.stderr), r.stderr
    assert os.stat(svg).st_uid == os.stat(work).st_uid, "the SVG is not the caller's own file"

    frames, root = svg_frames(svg)
    main = the(frames, MAIN)
    under_main = sorted(children(frames, main), key=lambda f: -f["ms"])
    assert under_main[0]["name"] == HOT, [(f["name"], f["ms"]) for f in under_main]
    assert WARM in [f["name"] for f in under_main], under_main
    assert the(frames, HOT)["ms"] > 3 * the(frames, WARM)["ms"], (the(frames, HOT), the(frames, WARM))
    # threads merged, CPU only: the parked thread's waiting is not CPU time (its spinning before it, if sampled, is)
    parked = [f for f in frames if "ParkedInDsagentStacksProbe" in f["name"]]
    assert not parked or parked[0]["ms"] < 0.05 * main["ms"], parked
    # self-contained: no reference to anything outside the file
    text = open(svg).read()
    assert not re.search(r"(href|src)\s*=|https?://(?!www\.w3\.org/2000/svg)|@import|url\(", text), \
        re.search(r"(href|src)\s*=|https?://\S+|@import|url\(", text)

    # the browser: the viewer ran (it marks the document), and laid the hot frame out widest above Main
    dom = browser.dump_dom(svg)
    assert 'data-viewer="ready"' in dom.split(">", 1)[0], dom[:300]
    png = os.path.join(work, "cpu.png")
    browser.screenshot(svg, png, int(root.get("width")), int(root.get("height")))
    hot_pixels = pixels_of(png, the(frames, HOT))
    others = {f["name"]: pixels_of(png, f) for f in under_main[1:]}
    assert hot_pixels > float(the(frames, HOT)["rect"]["width"]) * 0.6, hot_pixels
    assert all(hot_pixels > n for n in others.values()), (hot_pixels, others)
    # to look at it: DSAGENT_TEST_ARTIFACTS=DIR keeps the screenshot there
    if os.environ.get("DSAGENT_TEST_ARTIFACTS"):
        shutil.copy(png, os.path.join(os.environ["DSAGENT_TEST_ARTIFACTS"], "flame-burn-cpu.png"))

    # decided and recorded as a trace of its profile
    start = agent.records(message_id=SESSION_START_ID)[-1]
    assert start["DSAGENT_SESSION_KIND"] == "trace" and start["DSAGENT_RULE"] == "owner-access", start
    assert start["DSAGENT_PROVIDERS"].startswith("Microsoft-DotNETCore-SampleProfiler:"), start


@test
def the_viewer_zooms_hovers_and_searches_in_the_browser():
    """Click, hover and search in chromium: a copy of the SVG with a test script after the viewer's clicks the hot
    frame, hovers it and searches (the search's prompt answered by the test), and writes what it sees on the
    document; the screenshot of the zoomed graph has the hot frame across the whole width."""
    target = burning_target()
    agent = Agent()
    work = make_dir(SVC, 0o755)
    svg = os.path.join(work, "cpu.svg")
    r = dsctl(agent, SVC, "flame", str(target.pid), "--duration", "2", "-o", svg, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    frames, root = svg_frames(svg)
    probe = """<script type="text/ecmascript"><![CDATA[
(function () {
  var svg = document.documentElement, gs = document.getElementById("frames").getElementsByTagName("g");
  function frame(name) { for (var i = 0; i < gs.length; i++) if (gs[i].getAttribute("data-n") === name) return gs[i]; }
  function click(node) { node.dispatchEvent(new MouseEvent("click", { bubbles: true })); }
  var hot = frame(%(hot)s), main = frame(%(main)s), warm = frame(%(warm)s);
  hot.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
  svg.setAttribute("data-t-details", document.getElementById("details").textContent);
  click(hot.getElementsByTagName("rect")[0]);
  svg.setAttribute("data-t-hot-width", hot.getElementsByTagName("rect")[0].getAttribute("width"));
  svg.setAttribute("data-t-main", main.getAttribute("class"));
  svg.setAttribute("data-t-warm", warm.getAttribute("class"));
  svg.setAttribute("data-t-reset", document.getElementById("reset").getAttribute("class"));
  window.prompt = function () { return "BurnCpuInDsagent"; };
  click(document.getElementById("search"));
  svg.setAttribute("data-t-matched", document.getElementById("matched").textContent);
  svg.setAttribute("data-t-hot-fill", hot.getElementsByTagName("rect")[0].getAttribute("fill"));
})();
]]></script>
</svg>""" % {"hot": json.dumps(HOT), "main": json.dumps(MAIN), "warm": json.dumps(WARM)}
    probed = os.path.join(work, "probed.svg")
    with open(probed, "w") as f:
        f.write(open(svg).read().replace("</svg>", probe))
    head = browser.dump_dom(probed).split(">", 1)[0]
    seen = dict(re.findall(r'data-t-([a-z-]+)="([^"]*)"', head))
    assert 'data-viewer="ready"' in head, head
    hot = the(frames, HOT)
    assert seen["details"].startswith(HOT.replace("<", "&lt;").replace(">", "&gt;") + ": "), seen
    assert f'{hot["samples"]} samples' in seen["details"] and "%" in seen["details"], seen
    assert abs(float(seen["hot-width"]) - 1180) < 0.01, seen                   # zoomed: the whole width
    assert "parent" in seen["main"] and "hide" in seen["warm"], seen          # its caller greyed, its sibling gone
    assert "hide" not in seen["reset"], seen
    assert re.match(r"Matched: \d+\.\d\d% \(1 frames\)$", seen["matched"]), seen
    assert seen["hot-fill"] == "rgb(230,0,230)", seen
    png = os.path.join(work, "zoomed.png")
    browser.screenshot(probed, png, int(root.get("width")), int(root.get("height")))
    zoomed = dict(hot, rect=dict(hot["rect"], fill="rgb(230,0,230)"))
    # across the width but for its label
    assert pixels_of(png, zoomed) > 0.7 * 1180, pixels_of(png, zoomed)


@test
def speedscope_and_chromium_are_dotnet_trace_converts_own():
    """Differential, against stock dotnet-trace convert 10.0.750501 on the same file: dsctl's speedscope and
    Chromium files parse to the same documents as the stock tool's (every frame and name, every profile, event and
    time, the same numbering), its exporter aside; for the sample profiler alone and for dsctl trace's default
    cpu-sampling, which adds the runtime's events (JIT, exceptions, GC), of a process with a burning, a parked, a
    throwing and a logging thread. dsctl trace --format speedscope writes the same file as it goes."""
    target = burning_target("--park-thread", "--throw-exceptions", "50", "--log-warnings", "20")
    agent = Agent()
    ours, theirs = make_dir(SVC, 0o755), make_dir(None, 0o755)
    for profile in ("dotnet-sampled-thread-time", "cpu-sampling"):
        nettrace = os.path.join(ours, f"{profile}.nettrace")
        live = os.path.join(ours, f"{profile}-live.speedscope.json")
        r = dsctl(agent, SVC, "trace", str(target.pid), "--profile", profile, "--duration", "2", "--format",
                  "speedscope", "-o", live, "--nettrace", nettrace, timeout=RUNTIME_BOUND)
        assert r.returncode == 0, r
        for fmt in ("Speedscope", "Chromium"):
            mine = os.path.join(ours, f"{profile}.{fmt.lower()}.json")
            r = convert(SVC, nettrace, fmt.lower(), mine)
            assert r.returncode == 0, r
            stock = json.load(open(stock_convert(nettrace, fmt, theirs)))
            converted = json.load(open(mine))
            assert without_exporter(converted) == without_exporter(stock), f"{profile} {fmt} differs"
            if fmt == "Speedscope":
                names = [f["name"] for f in converted["shared"]["frames"]]
                assert HOT in names and MAIN in names and "CPU_TIME" in names, names
                assert "UNMANAGED_CODE_TIME" in names, names               # the parked thread waits
                assert len(converted["profiles"]) >= 3, converted["profiles"]
                # the live file: the same document, but for its name
                assert dict(without_exporter(json.load(open(live))), name=None) == dict(without_exporter(converted),
                                                                                      name=None)


@test
def captured_trace_converts_as_dotnet_trace_did():
    """The same differential on a trace captured once (tests/data/nettrace/README.md), against the files stock
    dotnet-trace convert made of it then: no .NET needed, so it holds wherever the tests run."""
    data = os.path.join(SOURCE, "tests", "data", "nettrace")
    work = make_dir(SVC, 0o755)
    for fmt in ("speedscope", "chromium"):
        out = os.path.join(work, f"cpu-burn.{fmt}.json")
        r = convert(SVC, os.path.join(data, "cpu-burn.nettrace"), fmt, out)
        assert r.returncode == 0, r
        stock = json.load(open(os.path.join(data, f"cpu-burn.{fmt}.json")))
        assert without_exporter(json.load(open(out))) == without_exporter(stock), fmt


@test
def the_picture_in_the_docs_is_what_dsctl_draws():
    """docs/flame.md shows docs/flame-example.svg, drawn from the committed CPU trace: it is, byte for byte, what
    dsctl convert draws of that trace now, so the docs never show a picture the code no longer makes (redraw it
    with the command docs/flame.md gives)."""
    work = make_dir(SVC, 0o755)
    out = os.path.join(work, "flame-example.svg")
    r = convert(SVC, os.path.join(SOURCE, "tests", "data", "nettrace", "cpu-burn.nettrace"), "flame", out)
    assert r.returncode == 0, r
    assert open(out, "rb").read() == open(os.path.join(SOURCE, "docs", "flame-example.svg"), "rb").read()


def speedscope_totals(document):
    """Milliseconds under CPU_TIME and under UNMANAGED_CODE_TIME in a speedscope file, all threads."""
    names = [f["name"] for f in document["shared"]["frames"]]
    totals = {"CPU_TIME": 0.0, "UNMANAGED_CODE_TIME": 0.0}
    for profile in document["profiles"]:
        opened = {}
        for e in profile["events"]:
            name = names[e["frame"]]
            if name in totals and e["type"] == "O":
                opened[name] = e["at"]
            elif name in totals:
                totals[name] += e["at"] - opened.pop(name)
    return totals


@test
def pprof_is_read_by_go_tool_pprof_and_sums_as_speedscope():
    """go tool pprof -top names the hot method first; the profile's cpu and wall totals are the speedscope file's
    CPU_TIME and CPU_TIME plus UNMANAGED_CODE_TIME of the same trace (within the float32 rounding of the latter)."""
    target = burning_target("--park-thread")
    agent = Agent()
    work = make_dir(SVC, 0o755)
    nettrace, pprof = os.path.join(work, "t.nettrace"), os.path.join(work, "t.pb.gz")
    r = dsctl(agent, SVC, "trace", str(target.pid), "--profile", "dotnet-sampled-thread-time", "--duration", "3",
              "--format", "pprof", "-o", pprof, "--nettrace", nettrace, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    top, rows = pprof_top(pprof)
    assert rows and rows[0].endswith(" " + HOT), top
    assert "Type: cpu" in top, top

    speedscope = os.path.join(work, "t.speedscope.json")
    assert convert(SVC, nettrace, "speedscope", speedscope).returncode == 0
    totals = speedscope_totals(json.load(open(speedscope)))
    types, values, strings, functions = pprof_profile(pprof)
    assert types == ["samples", "cpu", "wall"], types
    samples, cpu, wall = (sum(v[i] for v in values) for i in range(3))
    # The speedscope file is dotnet-trace's to the bit, and TraceEvent sums a frame's samples in a float32 (a
    # sample's Metric): each of a run's additions rounds by up to half an ulp of the sum, 2**-24 of it at most.
    # pprof's sums are doubles, each row rounded to the nanosecond. So they agree within that float's rounding,
    # not within a nanosecond a sample (the committed cpu-burn trace: 401 ns apart over 652 samples; a 3 s trace
    # on a loaded machine, 3.6 us).
    float_rounding_ns = samples * (totals["CPU_TIME"] + totals["UNMANAGED_CODE_TIME"]) * 1e6 * 2**-24 + samples
    assert abs(cpu - totals["CPU_TIME"] * 1e6) <= float_rounding_ns, (cpu, totals, float_rounding_ns)
    assert abs(wall - (totals["CPU_TIME"] + totals["UNMANAGED_CODE_TIME"]) * 1e6) <= float_rounding_ns, \
        (wall, totals, float_rounding_ns)
    assert totals["UNMANAGED_CODE_TIME"] > 0 and HOT in functions, (totals, functions)


HOSTILE = [
    # (namespace, name): each a method frame, every stack under the one before, so the first is the widest frame
    # and its label is whole: markup that a viewer putting labels in as markup would make an element of, and run
    ("<image xmlns=\"http://www.w3.org/2000/svg\" href=\"data:,\" "
     "onerror=\"document.documentElement.setAttribute('data-pwned','image')\"/>", "A"),
    ("<script>document.documentElement.setAttribute('data-pwned','script')</script>", "A"),
    ('"><script>document.documentElement.setAttribute(\'data-pwned\',\'attr\')</script><g x="', "B"),
    ("]]></script><script>document.documentElement.setAttribute('data-pwned','cdata')</script><![CDATA[", "C"),
    ("<svg onload=\"document.documentElement.setAttribute('data-pwned','onload')\"/>", "D"),
    ("<image href=\"x\" onerror=\"document.documentElement.setAttribute('data-pwned','onerror')\"/>", "E"),
    ("'+document.documentElement.setAttribute('data-pwned','quote')+'", "F\u2028\u2029"),
    ("ctl\x01\x07\x1b[31m\n\r\t", "G\x7f\u0085"),
    ("lone\ud800surrogate\udfff", "H\u202eevil"),
    ("&amp;&lt;&#x3c;", "I" * 3000),
]
MODULE = "/opt/Evil&amp;'\"M.dll"
# the process's name (its executable's file name) is the graph's title: no '/' in it, and an element left open,
# which unescaped would make the file no XML at all
COMMAND = "\"<script>document.documentElement.setAttribute('data-pwned','title')\" --x"


def shown(text):
    """A name as the flame graph shows it: what XML cannot hold or should not show as it is (controls, lone
    surrogates, characters that reorder text) as U+FFFD."""
    out = ""
    for c in text:
        o = ord(c)
        bad = o < 0x20 or 0x7F <= o < 0xA0 or 0xD800 <= o < 0xE000 or o == 0x202E
        out += "\ufffd" if bad else c
    return out


def decoded(text):
    """A name as the JSON formats and pprof hold it: the runtime's, what UTF-16 cannot decode (lone surrogates) as
    U+FFFD; the JSON escapes the rest and gives it back as it was."""
    return "".join("\ufffd" if 0xD800 <= ord(c) < 0xE000 else c for c in text)


def hostile_stream():
    return nettrace_writer.cpu_trace(COMMAND, MODULE, HOSTILE, threads=3, samples=30)


def no_script_ran(dom):
    """The document as the browser left it: the viewer's one script, which ran to its end (it marks the document),
    no mark of a name's, no element of one."""
    head = dom.split(">", 1)[0]
    assert "data-pwned" not in head, head
    assert 'data-viewer="ready"' in head, head
    assert len(re.findall(r"<script\b", dom)) == 1, re.findall(r"<script\b[^>]*>", dom)
    assert not re.search(r"<(image|img|iframe|object|embed|foreignObject)\b", dom), dom[:2000]


@test
def hostile_names_stay_text_in_the_flame_graph_in_the_browser():
    """A runtime that names its process, module and methods <script>, quotes, CDATA ends, event handlers, controls,
    lone surrogates and bidi overrides: dsctl flame's SVG is well-formed, shows every name as text (the names
    read back from it are the runtime's, what cannot be shown as U+FFFD), and chromium opens it with the viewer's
    script the only one run: no element of a name's made, no attribute of a name's set."""
    agent = Agent()
    stream_file = os.path.join(make_dir(SVC, 0o755), "hostile.nettrace")
    with open(stream_file, "wb") as f:
        f.write(hostile_stream())
    os.chmod(stream_file, 0o644)
    fake = FakeRuntime(f"trace:{stream_file}")
    work = make_dir(SVC, 0o755)
    svg = os.path.join(work, "hostile.svg")
    r = dsctl(agent, SVC, "flame", str(fake.pid), "--duration", "1", "-o", svg, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    frames, root = svg_frames(svg)                      # well-formed XML, or this raises
    expected = {"Evil&amp;'\"M!" + shown(f"{ns}.{name}") + "()" for ns, name in HOSTILE}
    assert expected <= {f["name"] for f in frames}, {f["name"] for f in frames} ^ expected
    title = root.find(SVG_NS + "text").text
    assert title == "CPU flame graph: <script>document.documentElement.setAttribute('data-pwned','title') (pid 4242)", \
        title
    no_script_ran(browser.dump_dom(svg))
    png = os.path.join(work, "hostile.png")
    browser.screenshot(svg, png, int(root.get("width")), int(root.get("height")))


@test
def hostile_names_stay_text_in_speedscope_chromium_and_pprof():
    """The same names in dsctl convert's other formats: each file parses (JSON; protobuf) and holds the names as
    the flame graph does; no '<', '>' or '&' stands in the JSON as itself, so a page that puts the file in a
    <script> element, as viewers do, runs only its own script; pprof's strings are valid UTF-8."""
    work = make_dir(SVC, 0o755)
    nettrace = os.path.join(work, "hostile.nettrace")
    with open(nettrace, "wb") as f:
        f.write(hostile_stream())
    os.chmod(nettrace, 0o644)
    expected = {"Evil&amp;'\"M!" + decoded(f"{ns}.{name}") + "()" for ns, name in HOSTILE}
    for fmt in ("speedscope", "chromium"):
        out = os.path.join(work, f"hostile.{fmt}.json")
        r = convert(SVC, nettrace, fmt, out)
        assert r.returncode == 0, r
        raw = open(out, "rb").read()
        assert not re.search(rb"[<>&]", raw), re.search(rb".{20}[<>&].{20}", raw)
        document = json.loads(raw)
        if fmt == "speedscope":
            names = {f["name"] for f in document["shared"]["frames"]}
        else:
            names = {f"{v['category']}!{v['name']}" for v in document["stackFrames"].values()}
        assert expected <= names, names ^ expected
        page = os.path.join(work, f"{fmt}.html")
        with open(page, "wb") as f:
            f.write(b"<!DOCTYPE html><html><head><title>t</title></head><body><script>var profile = " + raw +
                    b";\ndocument.body.setAttribute('data-keys', Object.keys(profile).length);</script></body></html>")
        dom = browser.dump_dom(page)
        assert re.search(r'<body data-keys="[1-9]', dom), dom[:500]
        assert "data-pwned" not in dom.split("<script", 1)[0] and len(re.findall(r"<script\b", dom)) == 1, dom[:3000]
    pprof = os.path.join(work, "hostile.pb.gz")
    assert convert(SVC, nettrace, "pprof", pprof).returncode == 0
    _, values, strings, functions = pprof_profile(pprof)
    assert expected <= set(functions), set(functions) ^ expected


@test
def convert_keeps_a_cut_trace_as_partial_and_refuses_what_is_no_trace():
    """dsctl convert of a trace cut in the middle converts what it holds into FILE.partial and exits 8; of bytes
    that are no nettrace it writes nothing and exits 8; it never overwrites a file."""
    work = make_dir(SVC, 0o755)
    whole = hostile_stream()
    cut = os.path.join(work, "cut.nettrace")
    with open(cut, "wb") as f:
        f.write(whole[:len(whole) * 2 // 3])
    junk = os.path.join(work, "junk.nettrace")
    with open(junk, "wb") as f:
        f.write(b"not a trace at all" * 100)
    for path in (cut, junk):
        os.chmod(path, 0o644)
    r = convert(SVC, cut, "pprof", os.path.join(work, "cut.pb.gz"))
    assert r.returncode == EXIT_RUNTIME_FAILED and "stops early" in r.stderr, r
    assert os.path.exists(os.path.join(work, "cut.pb.gz.partial")) and not os.path.exists(os.path.join(work, "cut.pb.gz"))
    r = convert(SVC, junk, "flame", os.path.join(work, "junk.svg"))
    assert r.returncode == EXIT_RUNTIME_FAILED and "no nettrace stream" in r.stderr, r
    assert sorted(os.listdir(work)) == ["cut.nettrace", "cut.pb.gz.partial", "junk.nettrace"], os.listdir(work)
    r = convert(SVC, cut, "pprof", os.path.join(work, "cut.pb.gz.partial"))
    assert r.returncode != 0 and "does not overwrite" in r.stderr, r


POLICY = f"""
[agent]
owner_access = false

[[rule]]
name = "alice-sampling"
users = ["{ALICE}"]
commands = ["trace"]
targets.users = ["{SVC}"]
trace_profiles = ["dotnet-sampled-thread-time"]
"""


@test
def flame_is_decided_as_a_trace_of_its_profile():
    """A rule that grants traces of dotnet-sampled-thread-time: dsctl flame (that profile unless told) is allowed and
    recorded as a trace under the rule; flame --profile cpu-sampling, whose runtime provider the rule does not
    grant, is denied before anything is written; a user no rule names gets nothing either."""
    target = burning_target()
    agent = Agent(policy=POLICY)
    work = make_dir(ALICE, 0o755)
    svg = os.path.join(work, "f.svg")
    r = dsctl(agent, ALICE, "flame", str(target.pid), "--duration", "1", "-o", svg, timeout=RUNTIME_BOUND)
    assert r.returncode == 0, r
    frames, _ = svg_frames(svg)
    assert HOT in {f["name"] for f in frames}
    start = agent.records(message_id=SESSION_START_ID)[-1]
    assert start["DSAGENT_RULE"] == "alice-sampling" and start["DSAGENT_SESSION_KIND"] == "trace", start
    assert start["DSAGENT_TRACE_PROFILE"] == "dotnet-sampled-thread-time", start
    os.unlink(svg)
    r = dsctl(agent, ALICE, "flame", str(target.pid), "--duration", "1", "--profile", "cpu-sampling", "-o", svg,
              timeout=RUNTIME_BOUND)
    assert r.returncode == EXIT_DENIED, r
    other = make_dir(MALLORY, 0o755)
    r = dsctl(agent, MALLORY, "flame", str(target.pid), "--duration", "1", "-o", os.path.join(other, "f.svg"),
              timeout=RUNTIME_BOUND)
    assert r.returncode == EXIT_NO_SUCH_PROCESS, r
    assert not os.listdir(work) and not os.listdir(other), (os.listdir(work), os.listdir(other))


if __name__ == "__main__":
    run_tests()
