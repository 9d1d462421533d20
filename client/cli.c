/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * dsctl's command line parsed into a request (cli.h), each value checked as the agent checks it;
 * dsctl.c calls it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "client/cli.h"
#include "common/duration.h"
#include "eventpipe/monitor-config.h"
#include "policy/policy.h"
#include "eventpipe/session-config.h"
#include "common/text.h"
#include "common/wire.h"

#define DSCTL_DEFAULT_SOCKET "/run/dsagent.sock"
#define POSITIONAL_MAX 8

typedef enum Opt {
        OPT_SOCKET,
        OPT_JSON,
        OPT_QUIET,
        OPT_HELP,
        OPT_VERSION,
        OPT_TYPE,
        OPT_PROFILE,
        OPT_PROVIDERS,
        OPT_DURATION,
        OPT_BUFFER_MB,
        OPT_COUNTERS,
        OPT_INTERVAL,
        OPT_FORMAT,
        OPT_OUTPUT,
        OPT_WATCH,
        OPT_REMOVE,
        OPT_URL,
        OPT_ONCE,
        OPT_AGENT_SOCKET,
        OPT_LEVEL,
        OPT_CATEGORY,
        OPT_PORT_PATH,
        OPT_REPORT,
        OPT_NETTRACE,
        OPT_AS,
        OPT_SORT,
        OPT_SINCE,
        _OPT_MAX,
} Opt;

#define OPT(x) (1u << (x))
#define OPTS_COMMON \
        (OPT(OPT_SOCKET) | OPT(OPT_AGENT_SOCKET) | OPT(OPT_JSON) | OPT(OPT_QUIET) | OPT(OPT_HELP) | OPT(OPT_VERSION))

typedef struct VerbInfo {
        const char *name;
        const char *synopsis;    /* what follows the command */
        const char *summary;     /* its line in 'dsctl --help' */
        const char *description; /* its own --help */
        unsigned options;        /* OPT() of what it takes besides OPTS_COMMON */
        unsigned min_args, max_args;
} VerbInfo;

static const VerbInfo verbs[_VERB_MAX] = {
        [VERB_PS] = {
                "ps", "", "list the .NET processes you may act on",
                "List the .NET processes you may act on: pid, user, unit and name.\n",
                0, 0, 0,
        },
        [VERB_INFO] = {
                "info", "PID|UNIT", "command line, OS, architecture and runtime of a process",
                "Show the command line, OS, architecture, runtime version, entry assembly and runtime\n"
                "identifier of a process, or of the one .NET process of a systemd unit, as its runtime\n"
                "reports them.\n",
                0, 1, 1,
        },
        [VERB_ENV] = {
                "env", "PID|UNIT", "the environment variables of a process, secrets redacted",
                "Show the environment variables of a process, or of the one .NET process of a systemd\n"
                "unit, as its runtime reports them: one NAME=VALUE per line, in the runtime's order. A\n"
                "value is shown as <redacted> unless known safe: its name is on the allow list of harmless\n"
                "configuration, each by its exact name (PATH, LANG, TZ, DOTNET_gcServer, ASPNETCORE_URLS,\n"
                "...; the rule's env_show adds to it), the policy's env_redact does not name it, and neither\n"
                "name nor value looks like a secret (password=, user:pass, JWTs, keys, UUIDs, headers, long\n"
                "digits, OTP seeds, tokens in URLs, ...). A rule that says env_reveal = true shows\n"
                "every value; root and the process's own user see them all. With --json, an array of\n"
                "{\"name\", \"value\", \"redacted\"} objects, value null when redacted.\n",
                0, 1, 1,
        },
        [VERB_EXPLAIN] = {
                "explain", "PID|UNIT COMMAND [--type T] [--profile P] [--providers SPEC] [--as dotnet-trace] [--duration S]",
                "would COMMAND be allowed, and by which rule or why not",
                "Would COMMAND (ps, info, dump, trace, counters, ...) on the process be allowed, and by\n"
                "which rule, or why not. It mentions only rules that name you and uses no rate limit;\n"
                "it exits 0 for allowed and 4 for denied. For a trace it says the providers it is\n"
                "decided on, and the profiles that admit them.\n\n"
                "  --type mini|heap|triage|full  the dump type the rules look at (mini)\n"
                "  --profile NAME                the trace profile the rules look at, as dsctl trace and\n"
                "                                dotnet-trace send it; NAME,NAME,... as dotnet-trace\n"
                "  --providers SPEC              providers besides, as dotnet-trace collect --providers\n"
                "  --as dotnet-trace             the trace as stock dotnet-trace collect sends it for the\n"
                "                                same --profile and --providers: without them, its\n"
                "                                default (" EVENTPIPE_STOCK_DEFAULT_PROFILES ")\n"
                "  --duration S                  the session length the rules look at\n",
                OPT(OPT_TYPE) | OPT(OPT_PROFILE) | OPT(OPT_PROVIDERS) | OPT(OPT_AS) | OPT(OPT_DURATION), 2, 2,
        },
        [VERB_DUMP] = {
                "dump", "PID|UNIT [--type mini|heap|triage|full] [-o FILE]",
                "take a dump (mini unless told); -o also writes your own copy to FILE",
                "Take a dump of a process, or of the one .NET process of a systemd unit. The agent\n"
                "stores it in its dump directory, readable by you and the readers of the rule that\n"
                "allowed it, and says where. On a terminal, standard error shows its progress.\n\n"
                "  --type mini|heap|triage|full  the dump type (mini)\n"
                "  -o, --output FILE             also write your own copy to FILE, which must not exist;\n"
                "                                it is checked before anything is asked of the agent\n",
                OPT(OPT_TYPE) | OPT(OPT_OUTPUT), 1, 1,
        },
        [VERB_DUMPS] = {
                "dumps", "[--remove PATH | --url PATH]",
                "list the dumps you can read, oldest first; --remove deletes one you asked for",
                "List the dumps you can read, oldest first, as coredumpctl does: time, pid, unit,\n"
                "name, type, size and path; under an artifact uploaded to an S3 store, its object.\n\n"
                "  --remove PATH  remove the dump PATH (as listed, or its name alone), if you asked\n"
                "                 for it; any other answer is the one a dump that does not exist gets\n"
                "  --url PATH     a short-lived presigned URL of PATH's uploaded object, if you may\n"
                "                 read PATH; any other answer is the one a dump that does not exist gets\n",
                OPT(OPT_REMOVE) | OPT(OPT_URL), 0, 0,
        },
        [VERB_COLLECT] = {
                "collect", "",
                "list the collection rules whose artifacts you can read, what they watch, when they fired, what they took",
                "List the policy's [[collect]] tables whose artifacts you can read (root: all), each\n"
                "with its action, what it watches and how its action last ended (collected: the file\n"
                "and its size; failed: why), and under it the processes it watches now, when it last\n"
                "fired on each and how its action last ended there.\n",
                0, 0, 0,
        },
        [VERB_CRASHES] = {
                "crashes", "[--since TIME]",
                "list the crashes systemd-coredump caught that you may see, oldest first",
                "List the crashes systemd-coredump caught and recorded in the journal that you may\n"
                "see, oldest first, as coredumpctl list does: time, id, pid, user, signal, whether it was\n"
                "a .NET process (libcoreclr mapped), the stored core's size (or \"missing\"), unit and\n"
                "name. You see the crashes of your own processes, and those of the processes a rule's\n"
                "crashes command covers. Only entries systemd-coredump itself wrote count: one any user\n"
                "logged with the same fields is never listed (docs/crashes.md).\n\n"
                "  --since TIME  only crashes logged since TIME: a time ago (30m, 2h, 1d), @SECONDS\n"
                "                since the epoch, or YYYY-MM-DD[ HH:MM[:SS]] in local time\n",
                OPT(OPT_SINCE), 0, 0,
        },
        [VERB_CRASH] = {
                "crash", "ID [-o FILE]",
                "the core of a crash, decompressed into the dump directory; -o also writes your copy",
                "Have the core systemd-coredump stored for crash ID (as dsctl crashes lists it)\n"
                "decompressed into the agent's dump directory, readable by you and the readers of the\n"
                "rule that allowed it, and say where; dotnet-dump analyze opens it. A crash you may not\n"
                "see is answered as one that never was (exit 17); a core that is corrupt, cut short or\n"
                "too large is refused (exit 18). On a terminal, standard error shows its progress.\n\n"
                "  -o, --output FILE  also write your own copy to FILE, which must not exist; it is\n"
                "                     checked before anything is asked of the agent\n",
                OPT(OPT_OUTPUT), 1, 1,
        },
        [VERB_TRACE] = {
                "trace", "PID|UNIT [--profile NAME | --providers SPEC] [--duration S] [--buffer-mb N] [--format F] [-o FILE]",
                "record an EventPipe trace (cpu-sampling unless told) into FILE [trace.nettrace]",
                "Record an EventPipe trace of a process into FILE, as dotnet-trace writes it. The file\n"
                "appears only once the trace is complete; a trace cut short is kept as FILE.partial\n"
                "(exit 8). Ctrl-C stops the trace and keeps it; on a terminal, standard error shows\n"
                "the bytes recorded and the time.\n\n"
                "  --profile NAME     cpu-sampling (default), gc-verbose, gc-collect, dotnet-common,\n"
                "                     dotnet-sampled-thread-time, database\n"
                "  --providers SPEC   Provider[:Keywords[:Level[:Args]]],... instead of a profile\n"
                "  --duration S       stop after S: whole seconds up to 30 days, like 30, 90s, 5m, 1h30m\n"
                "  --buffer-mb N      the runtime's buffer, 1 to 1024 MB\n"
                "  --format F         nettrace (default); or the trace's CPU samples, converted by dsctl\n"
                "                     as dotnet-trace convert does: speedscope, chromium (Chrome's trace\n"
                "                     event format), pprof (go tool pprof), flame (an SVG flame graph)\n"
                "  -o, --output FILE  the file, which must not exist (trace.nettrace, trace.speedscope.json,\n"
                "                     trace.chromium.json, trace.pb.gz, trace.svg)\n"
                "  --nettrace FILE    with --format: also keep the trace itself in FILE\n",
                OPT(OPT_PROFILE) | OPT(OPT_PROVIDERS) | OPT(OPT_DURATION) | OPT(OPT_BUFFER_MB) | OPT(OPT_OUTPUT) |
                        OPT(OPT_FORMAT) | OPT(OPT_NETTRACE),
                1, 1,
        },
        [VERB_FLAME] = {
                "flame", "PID|UNIT [--duration S] [--profile NAME] [-o FILE]",
                "a CPU flame graph of a process, as one interactive SVG [flame.svg]",
                "Sample the stacks of a process's threads for a while (10 s unless told) and draw where it\n"
                "spends CPU time as a flame graph: one self-contained SVG (no network, no external\n"
                "script) that a browser opens. Every thread's stacks are merged; each frame is as wide as\n"
                "the CPU time in it and what it called, its callers below it; managed frames are named\n"
                "as dotnet-trace names them, Module!Namespace.Type.Method(parameters). In the browser,\n"
                "hovering shows a frame's name, time and share, clicking zooms to it, Search (or\n"
                "Ctrl-F) highlights frames by name. It is a trace: the policy decides it as one, with\n"
                "its profile. Ctrl-C ends the sampling early and keeps what it has.\n\n"
                "  --duration S       how long to sample: whole seconds up to 30 days (10)\n"
                "  --profile NAME     dotnet-sampled-thread-time (default) or cpu-sampling: the profiles\n"
                "                     that sample stacks\n"
                "  -o, --output FILE  the SVG, which must not exist (flame.svg)\n",
                OPT(OPT_DURATION) | OPT(OPT_PROFILE) | OPT(OPT_OUTPUT), 1, 1,
        },
        [VERB_CONVERT] = {
                "convert", "FILE.nettrace [--format speedscope|chromium|pprof|flame] [-o FILE]",
                "turn a trace already taken into speedscope, chromium, pprof or a flame graph",
                "Convert a nettrace file (dsctl trace, a [[collect]] or [[on_start]] trace, dotnet-trace\n"
                "collect) here, without .NET and without the agent: its CPU samples become what\n"
                "dotnet-trace convert --format Speedscope or Chromium writes of the same file, a pprof\n"
                "profile (go tool pprof), or a flame graph (as dsctl flame draws it). A trace cut short\n"
                "is converted as far as it goes, and said so (exit 8).\n\n"
                "  --format F         speedscope (default), chromium, pprof or flame\n"
                "  -o, --output FILE  the file, which must not exist (FILE without .nettrace, and\n"
                "                     .speedscope.json, .chromium.json, .pb.gz or .svg)\n",
                OPT(OPT_FORMAT) | OPT(OPT_OUTPUT), 1, 1,
        },
        [VERB_COUNTERS] = {
                "counters", "PID|UNIT [--counters LIST] [--interval S] [--duration S] [--format csv|json|prometheus] [-o FILE] [--watch]",
                "counters (System.Runtime unless told) every interval; --watch redraws them in place",
                "Show counters of a process every interval, as dotnet-counters does: EventCounters and\n"
                "System.Diagnostics.Metrics instruments. Rows go to standard output (or FILE) as\n"
                "dotnet-counters collect writes them; with --watch on a terminal the latest values are\n"
                "redrawn in place, as dotnet-counters monitor shows them. With --format prometheus the\n"
                "latest values are written in the Prometheus text format each interval, and -o FILE is\n"
                "replaced whole each time (node_exporter's textfile collector). Ctrl-C ends it.\n\n"
                "  --counters LIST    Provider[name,...],... (System.Runtime); names keep only those\n"
                "  --interval S       seconds between samples, 1 to 3600 (1); also --refresh-interval\n"
                "  --duration S       stop after S: whole seconds up to 30 days\n"
                "  --format FORMAT    csv, json or prometheus (csv; json with --json)\n"
                "  -o, --output FILE  write the rows to FILE, which must not exist; prometheus:\n"
                "                     replace FILE each interval (a new file renamed over it)\n"
                "  --watch            redraw the latest values in place (rows when not on a terminal)\n",
                OPT(OPT_COUNTERS) | OPT(OPT_INTERVAL) | OPT(OPT_DURATION) | OPT(OPT_FORMAT) | OPT(OPT_OUTPUT) |
                        OPT(OPT_WATCH),
                1, 1,
        },
        [VERB_STACKS] = {
                "stacks", "PID|UNIT [--format text|json|speedscope]",
                "the managed stack of every thread, now",
                "Show the managed call stack of every thread of a process, as dotnet-stack report takes\n"
                "them: the runtime samples each thread's stack, and the methods are named by the\n"
                "runtime's rundown. The text is dotnet-stack report's, line for line: \"Thread (0xTID):\",\n"
                "\"[Native Frames]\" when the thread waits outside managed code, then its frames innermost\n"
                "first as Module!Namespace.Type.Method(parameters) (\"?!?\": code the rundown does not\n"
                "name), and an empty line; a thread never seen outside managed code, which dotnet-stack\n"
                "leaves out, is shown too.\n\n"
                "  --format text|json|speedscope  text (json with --json): {\"threads\": [{\"threadId\",\n"
                "                     \"frames\": [{\"methodName\", \"className\", \"moduleName\"}]}]}, as\n"
                "                     dotnet-monitor's /stacks; speedscope: speedscope's file format, one\n"
                "                     profile per thread, as dotnet-trace convert writes it\n",
                OPT(OPT_FORMAT), 1, 1,
        },
        [VERB_GCDUMP] = {
                "gcdump", "PID|UNIT [-o FILE] [--report] [--sort size|count|name|stock] [--nettrace FILE] [--duration S]",
                "a GC heap dump: its type table, biggest last, as dumpheap -stat orders it",
                "Take a GC heap dump of a process, as dotnet-gcdump collect takes it: the runtime runs a\n"
                "full blocking GC and reports every object, reference, root and type; dsctl reads them\n"
                "itself (no .NET needed here) and prints the type table of the dump, in dotnet-gcdump\n"
                "report's layout: the heap's bytes and objects, then per type the bytes of all its\n"
                "objects (\"Total Bytes\"), their number and the module, ordered as dotnet-dump's\n"
                "dumpheap -stat orders its table: by total bytes, the biggest last. --sort stock prints\n"
                "dotnet-gcdump report's own table line for line: the size of each type's first object\n"
                "(\"Object Bytes\") and that size's order, biggest first. With -o, dsctl writes the dump\n"
                "as a .gcdump file, as dotnet-gcdump writes it (dotnet-gcdump report reads it). The GC\n"
                "pauses the process for as long as the heap takes to walk. On a terminal, standard\n"
                "error shows the bytes received and the heap's objects described so far.\n\n"
                "  -o, --output FILE  write the dump to FILE (.gcdump), which must not exist\n"
                "  --report           print the type table (the default without -o)\n"
                "  --sort ORDER       the table's order: size (total bytes, the default) or count\n"
                "                     (objects), the biggest last; name; or stock: dotnet-gcdump\n"
                "                     report's own table and order. Prints the table, with -o too\n"
                "  --nettrace FILE    also keep the session's stream in FILE, which must not exist\n"
                "                     (dotnet-gcdump convert FILE makes a .gcdump of it)\n"
                "  --duration S       how long the dump may take to come (30 s)\n",
                OPT(OPT_OUTPUT) | OPT(OPT_REPORT) | OPT(OPT_SORT) | OPT(OPT_NETTRACE) | OPT(OPT_DURATION), 1, 1,
        },
        [VERB_EXCEPTIONS] = {
                "exceptions", "PID|UNIT [--duration S]",
                "first-chance exceptions thrown during a window (10 s unless told)",
                "Show the first-chance exceptions a process throws during a window, from the runtime's\n"
                "exception events: time, thread, type and message, and the throwing method's stack,\n"
                "named by the runtime's rundown at the end of the window. They are shown when the window\n"
                "ends, oldest first (at most 10000; more are counted). Ctrl-C ends it early. With --json,\n"
                "one JSON object per line, as dotnet-monitor's /exceptions writes them.\n\n"
                "  --duration S       the window: whole seconds up to 30 days (10)\n",
                OPT(OPT_DURATION), 1, 1,
        },
        [VERB_LOGS] = {
                "logs", "PID|UNIT [--level L] [--category C] [--duration S]",
                "ILogger messages logged during a window (30 s unless told)",
                "Show the messages a process logs through Microsoft.Extensions.Logging during a window,\n"
                "as they come: time, level, category, event id, message and the scopes around it. The\n"
                "app must have the EventSource logger (AddEventSourceLogger(), which the default host\n"
                "adds). Without --level or --category the app's own filters decide what is logged.\n"
                "Ctrl-C ends it. With --json, one JSON object per line, as dotnet-monitor's /logs\n"
                "writes them.\n\n"
                "  --level L          from L up: Trace, Debug, Information, Warning, Error, Critical\n"
                "  --category C       only the categories C begins (and from Debug up, unless --level)\n"
                "  --duration S       the window: whole seconds up to 30 days (30)\n",
                OPT(OPT_LEVEL) | OPT(OPT_CATEGORY) | OPT(OPT_DURATION), 1, 1,
        },
        [VERB_RESUME] = {
                "resume", "PID|UNIT", "let a runtime suspended at startup run its code",
                "Let a process whose runtime is suspended at startup (DOTNET_DefaultDiagnosticPortSuspend=1)\n"
                "start: it runs no managed code until it is resumed. Until then a dump other than a full\n"
                "one, and a trace, counters, stacks, exceptions or logs, are answered \"suspended at\n"
                "startup\" (exit 15). Resuming a process that is not suspended changes nothing, and says\n"
                "so.\n",
                0, 1, 1,
        },
        [VERB_PORT] = {
                "port", "PID|UNIT [--port-path PATH] [--once]",
                "a diagnostic port for stock .NET tools (dotnet-trace --diagnostic-port)",
                "Serve a diagnostic port for a process: a socket of yours (mode 0600) that stock tools\n"
                "reach with --diagnostic-port PATH,connect (dotnet-trace, dotnet-dump, the client\n"
                "library's DiagnosticsClientConnector.FromDiagnosticPort). Its first line on standard\n"
                "output is that value. The agent decides each command a tool sends as the policy\n"
                "command it maps to (docs/proxy.md) and records it; a dump a tool asks for is written\n"
                "where it asks, by dsctl, as you. Only your own processes may connect. Ctrl-C ends it.\n\n"
                "  --port-path PATH     the port's socket, which must not exist [$XDG_RUNTIME_DIR/...,\n"
                "                       else a private directory in $TMPDIR]; --socket is the agent's,\n"
                "                       as for every command, and not taken after 'port'\n"
                "  --once               end after the first trace session or dump a tool takes\n",
                OPT(OPT_ONCE) | OPT(OPT_PORT_PATH), 1, 1,
        },
        [VERB_EXEC] = {
                "exec", "PID|UNIT -- COMMAND [ARGS...]",
                "run a stock .NET tool that takes -p PID through a port of its own",
                "Run COMMAND with TMPDIR set to a private directory of yours where the process's port\n"
                "(as 'dsctl port' serves it) has the runtime's own socket name, dotnet-diagnostic-PID-1-socket,\n"
                "so that tools that find a process by -p PID use it unchanged: dotnet-stack report -p PID,\n"
                "dotnet-counters monitor -p PID, dotnet-gcdump collect -p PID, dotnet-dump collect -p PID,\n"
                "dotnet-trace collect -p PID. In COMMAND's arguments dsctl replaces {pid} with the pid,\n"
                "and COMMAND gets it in $DSCTL_PID too (for a script: a shell at your prompt expands\n"
                "\"$DSCTL_PID\" before dsctl sets it; a -p or --process-id that reaches COMMAND empty is\n"
                "warned of on standard error before it runs). For a UNIT, the agent first names its one\n"
                ".NET process, dsctl says which on standard error, and the port serves that process only\n"
                "while it runs in the unit (a restarted service is another one: run exec again), e.g.\n"
                "  dsctl exec orders.service -- dotnet-counters monitor -p {pid}\n"
                "The port lives as long as COMMAND, and dsctl exits with its status (128+N when a signal\n"
                "N ended it). What the agent refuses is said on standard error with its reason. Ctrl-C\n"
                "goes to COMMAND, which ends its sessions itself.\n",
                0, 1, 1,
        },
        [VERB_HELP] = {
                "help", "[COMMAND]", "show this help, or a command's",
                "Show the summary of all commands, or the help of COMMAND. Nothing is sent to the agent.\n",
                0, 0, 1,
        },
};

const char *verb_to_string(Verb verb) {
        return verb >= 0 && verb < _VERB_MAX ? verbs[verb].name : NULL;
}

static Verb verb_from_string(const char *s) {
        for (Verb v = 0; v < _VERB_MAX; v++)
                if (strcmp(s, verbs[v].name) == 0)
                        return v;
        return _VERB_NONE;
}

static void help_summary(FILE *f) {
        fprintf(f,
                "Usage: dsctl [OPTIONS] COMMAND [ARGUMENTS] [OPTIONS]\n"
                "Ask dsagent for diagnostics of .NET processes. Options may come before or after the\n"
                "command; 'dsctl COMMAND --help' or 'dsctl help COMMAND' explains one, and sends nothing.\n\n"
                "Commands:\n");
        for (Verb v = 0; v < _VERB_MAX; v++) {
                char head[160];

                snprintf(head, sizeof(head), "%s%s%s", verbs[v].name, *verbs[v].synopsis ? " " : "", verbs[v].synopsis);
                if (strlen(head) <= 17)
                        fprintf(f, "  %-17s  %s\n", head, verbs[v].summary);
                else
                        fprintf(f, "  %s\n  %-17s  %s\n", head, "", verbs[v].summary);
        }
        fprintf(f,
                "PID|UNIT is a process id, or a systemd unit (like orders.service) whose one .NET process\n"
                "is meant. Ctrl-C ends a trace or counters session and keeps what it recorded.\n\n"
                "Options:\n"
                "  --socket PATH  the agent's socket [$DSAGENT_SOCKET, else " DSCTL_DEFAULT_SOCKET "];\n"
                "                 also spelled --agent-socket\n"
                "  --json         machine-readable output; errors too, with their exit status\n"
                "  -q, --quiet    no progress and no notes on standard error\n"
                "  -h, --help     show this help, or with a command, its own\n"
                "  --version      show the version\n\n"
                "Exit status: 0 ok, 1 error, 2 usage, 3 agent not reachable, 4 permission denied,\n"
                "5 no such process, 6 not a .NET process, 7 runtime not answering, 8 runtime error,\n"
                "9 diagnostic socket failed verification, 10 agent busy, 11 no space for the dump,\n"
                "12 unsafe file system, 13 no safe place for the dump,\n"
                "14 the agent's policy is broken (only root is served), 15 suspended at startup,\n"
                "16 audit unavailable (the agent could not record the decision, so it refused it),\n"
                "17 no such crash (or none you may see, or its core is gone), 18 the stored core is unusable,\n"
                "130 a second Ctrl-C left a session without waiting for its end.\n"
                "explain exits 0 when the command would be allowed and 4 when it would be denied.\n");
}

void cli_help(FILE *f, Verb verb) {
        if (verb < 0 || verb >= _VERB_MAX || verb == VERB_HELP) {
                help_summary(f);
                return;
        }
        fprintf(f, "Usage: dsctl [OPTIONS] %s%s%s\n\n%s\n", verbs[verb].name, *verbs[verb].synopsis ? " " : "",
                verbs[verb].synopsis, verbs[verb].description);
        fprintf(f, "Common options: --socket PATH, --json, -q/--quiet, -h/--help; see 'dsctl --help'.\n");
}

void args_done(Args *a) {
        SessionOptions *o = &a->session;

        free(a->output_owned);
        a->output_owned = NULL;
        for (size_t i = 0; i < o->n_counter_filters; i++) {
                free(o->counter_filter_providers[i]);
                free(o->counter_names[i]);
        }
        free(o->counter_filter_providers);
        free(o->counter_names);
        free(a->counter_providers);
        o->counter_filter_providers = o->counter_names = NULL;
        o->n_counter_filters = 0;
        a->counter_providers = NULL;
}

/* What was on the command line, before it is checked against the command. */
typedef struct Given {
        unsigned mask;
        const char *value[_OPT_MAX];
        char spelled[_OPT_MAX][24]; /* as typed, for messages: "-o", "--refresh-interval" */
        const char *positional[POSITIONAL_MAX];
        size_t n_positional;
        bool socket_after_command; /* --socket came after the command word: port's old spelling of --port-path */
} Given;

__attribute__((format(printf, 2, 3)))
static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(ret_error, fmt, ap);
        va_end(ap);
        if (n < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

static const struct option long_options[] = {
        { "socket", required_argument, NULL, 0x100 + OPT_SOCKET },
        { "json", no_argument, NULL, 0x100 + OPT_JSON },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 0x100 + OPT_VERSION },
        { "type", required_argument, NULL, 0x100 + OPT_TYPE },
        { "profile", required_argument, NULL, 0x100 + OPT_PROFILE },
        { "providers", required_argument, NULL, 0x100 + OPT_PROVIDERS },
        { "duration", required_argument, NULL, 0x100 + OPT_DURATION },
        { "buffer-mb", required_argument, NULL, 0x100 + OPT_BUFFER_MB },
        { "counters", required_argument, NULL, 0x100 + OPT_COUNTERS },
        { "interval", required_argument, NULL, 0x100 + OPT_INTERVAL },
        { "refresh-interval", required_argument, NULL, 0x100 + OPT_INTERVAL },
        { "format", required_argument, NULL, 0x100 + OPT_FORMAT },
        { "output", required_argument, NULL, 'o' },
        { "watch", no_argument, NULL, 0x100 + OPT_WATCH },
        { "remove", required_argument, NULL, 0x100 + OPT_REMOVE },
        { "url", required_argument, NULL, 0x100 + OPT_URL },
        { "once", no_argument, NULL, 0x100 + OPT_ONCE },
        { "agent-socket", required_argument, NULL, 0x100 + OPT_AGENT_SOCKET },
        { "level", required_argument, NULL, 0x100 + OPT_LEVEL },
        { "category", required_argument, NULL, 0x100 + OPT_CATEGORY },
        { "port-path", required_argument, NULL, 0x100 + OPT_PORT_PATH },
        { "report", no_argument, NULL, 0x100 + OPT_REPORT },
        { "nettrace", required_argument, NULL, 0x100 + OPT_NETTRACE },
        { "as", required_argument, NULL, 0x100 + OPT_AS },
        { "sort", required_argument, NULL, 0x100 + OPT_SORT },
        { "since", required_argument, NULL, 0x100 + OPT_SINCE },
        {},
};

static Opt opt_of(int c) {
        switch (c) {
        case 'q': return OPT_QUIET;
        case 'h': return OPT_HELP;
        case 'o': return OPT_OUTPUT;
        default: return (Opt)(c - 0x100);
        }
}

static int add_positional(Given *g, const char *arg, char **ret_error) {
        if (g->n_positional >= POSITIONAL_MAX)
                return fail(ret_error, "dsctl: unexpected argument '%s'", arg);
        g->positional[g->n_positional++] = arg;
        return 0;
}

/*
 * "-" first in the option string: arguments that are no options come back in
 * order, as option 1, wherever they stand, whatever POSIXLY_CORRECT says.
 */
static int read_command_line(int argc, char **argv, Given *g, char **ret_error) {
        int c, index;

        optind = 0; /* a fresh scan, also when called again (tests) */
        opterr = 0;
        for (;;) {
                Opt o;

                index = -1;
                c = getopt_long(argc, argv, "-ho:q", long_options, &index);
                if (c < 0)
                        break;
                if (c == 1) {
                        if (add_positional(g, optarg, ret_error) < 0)
                                return -EINVAL;
                        continue;
                }
                if (c == '?') {
                        /* optopt: the option that lacks its value, else 0 or the unknown letter */
                        if (optopt == 'o' || optopt >= 0x100)
                                return fail(ret_error, "dsctl: %s takes a value", argv[optind - 1]);
                        return fail(ret_error, "dsctl: unknown option '%s'; see 'dsctl --help'", argv[optind - 1]);
                }
                o = opt_of(c);
                if (o == OPT_SOCKET && g->n_positional > 0)
                        g->socket_after_command = true;
                g->mask |= OPT(o);
                g->value[o] = optarg;
                if (index >= 0)
                        snprintf(g->spelled[o], sizeof(g->spelled[o]), "--%s", long_options[index].name);
                else
                        snprintf(g->spelled[o], sizeof(g->spelled[o]), "-%c", c);
        }
        for (; optind < argc; optind++) /* after "--" */
                if (add_positional(g, argv[optind], ret_error) < 0)
                        return -EINVAL;
        return 0;
}

/* PID or UNIT: a process id, else a name systemd could give a unit, as the agent accepts it. */
static int parse_target(Verb verb, const char *arg, Args *a, char **ret_error) {
        const char *name = verbs[verb].name;

        if (!arg)
                return fail(ret_error, "dsctl: %s takes one process id or unit, e.g. '%s 1234' or '%s orders.service'",
                            name, name, name);
        if (parse_pid(arg, &a->pid) == 0)
                return 0;
        if (!wire_unit_name_is_valid(arg, strlen(arg)))
                return fail(ret_error, "dsctl: %s takes one process id or unit (like orders.service), not '%s'", name,
                            arg);
        a->unit = arg;
        return 0;
}

/* A crash's id as the agent lists it: SECONDS-PID, decimal, no leading zero (crash_id_parse()). */
static int parse_crash_id(const char *arg, Args *a, char **ret_error) {
        const char *dash = arg ? strchr(arg, '-') : NULL;
        size_t n = arg ? strlen(arg) : 0;
        bool ok = dash && dash != arg && dash[1] && n < 32 && strspn(arg, "0123456789") == (size_t)(dash - arg) &&
                  strspn(dash + 1, "0123456789") == strlen(dash + 1) && !(dash - arg > 1 && arg[0] == '0') &&
                  dash[1] != '0';

        if (!ok)
                return fail(ret_error, "dsctl: crash takes a crash's id as dsctl crashes lists it, e.g. "
                            "'crash 1764400000-1234'%s%s%s", arg ? ", not '" : "", arg ? arg : "", arg ? "'" : "");
        a->crash_id = arg;
        return 0;
}

/* --since: a time ago (a duration), @SECONDS since the epoch, or a local date and time. */
static int parse_since(const Given *g, Args *a, char **ret_error) {
        const char *v = g->value[OPT_SINCE];
        uint64_t usec, seconds;
        struct tm tm = {};
        const char *end;

        if (v[0] == '@' && parse_u64(v + 1, &seconds) == 0 && seconds <= UINT64_MAX / USEC_PER_SEC) {
                a->since_usec = seconds * USEC_PER_SEC;
                return 0;
        }
        if (duration_parse(v, &usec) == 0 && usec > 0) {
                struct timespec now;

                (void)clock_gettime(CLOCK_REALTIME, &now);
                seconds = (uint64_t)now.tv_sec;
                a->since_usec = usec / USEC_PER_SEC >= seconds ? 1 : (seconds - usec / USEC_PER_SEC) * USEC_PER_SEC;
                return 0;
        }
        tm.tm_isdst = -1;
        end = strptime(v, "%Y-%m-%d", &tm);
        if (end && *end == ' ') {
                const char *t = strptime(end + 1, "%H:%M:%S", &tm);
                end = t ? t : strptime(end + 1, "%H:%M", &tm);
        }
        if (end && *end == '\0') {
                time_t t = mktime(&tm);
                if (t > 0) {
                        a->since_usec = (uint64_t)t * USEC_PER_SEC;
                        return 0;
                }
        }
        return fail(ret_error, "dsctl: %s takes a time ago (30m, 2h, 1d), @SECONDS, or YYYY-MM-DD[ HH:MM[:SS]], "
                    "not '%s'", g->spelled[OPT_SINCE], v);
}

/* --duration: whole seconds from 1 s to 30 days, the agent's own bounds (wire.h). */
static int parse_duration_option(const Given *g, Args *a, char **ret_error) {
        uint64_t usec;

        if (duration_parse(g->value[OPT_DURATION], &usec) < 0 || usec == 0 || usec % USEC_PER_SEC != 0 ||
            usec / USEC_PER_SEC > WIRE_DURATION_MAX_SEC)
                return fail(ret_error, "dsctl: %s takes whole seconds from 1 s to 30 days, like 30, 90s, 5m or 1h30m",
                            g->spelled[OPT_DURATION]);
        a->duration_sec = usec / USEC_PER_SEC;
        a->have_duration = true;
        return 0;
}

/* A number from 1 to @max, or a message naming the option and the range. */
static int parse_bounded(const Given *g, Opt o, uint32_t max, const char *unit, uint32_t *ret, char **ret_error) {
        uint64_t v;

        if (parse_u64(g->value[o], &v) < 0 || v == 0 || v > max)
                return fail(ret_error, "dsctl: %s takes a number of %s from 1 to %u", g->spelled[o], unit, max);
        *ret = (uint32_t)v;
        return 0;
}

static int check_dump_type(const Given *g, Args *a, char **ret_error) {
        a->dump_type = g->value[OPT_TYPE];
        if (!a->dump_type || policy_dump_type_from_string(a->dump_type) != _POLICY_DUMP_INVALID)
                return 0;
        return fail(ret_error, "dsctl: %s takes %s, %s, %s or %s, not '%s'", g->spelled[OPT_TYPE],
                    policy_dump_type_to_string(POLICY_DUMP_MINI), policy_dump_type_to_string(POLICY_DUMP_HEAP),
                    policy_dump_type_to_string(POLICY_DUMP_TRIAGE), policy_dump_type_to_string(POLICY_DUMP_FULL),
                    a->dump_type);
}

static int check_profile(const Given *g, Args *a, char **ret_error) {
        _cleanup_free_ char *names = NULL;
        size_t n, size = 0;
        const EventPipeProfile *profiles = eventpipe_profiles(&n);
        FILE *f;

        a->trace_profile = g->value[OPT_PROFILE];
        if (!a->trace_profile || eventpipe_profile_is_known(a->trace_profile))
                return 0;
        f = open_memstream(&names, &size);
        if (!f)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s%s", i > 0 ? ", " : "", profiles[i].name);
        if (fclose(f) != 0)
                return -ENOMEM;
        return fail(ret_error, "dsctl: %s takes one of %s, not '%s'", g->spelled[OPT_PROFILE], names, a->trace_profile);
}

/*
 * explain's trace as stock dotnet-trace collect sends it: --as dotnet-trace, a list of profiles, or
 * providers. Checked here as the agent checks it (eventpipe_stock_trace_config()); sent as given,
 * --as alone as the tool's default profiles.
 */
static int check_explain_stock_trace(const Given *g, Args *a, char **ret_error) {
        _cleanup_(eventpipe_config_done) EventPipeConfig config = EVENTPIPE_CONFIG_NULL;
        const char *as = g->value[OPT_AS];
        int r;

        if (as && strcmp(as, "dotnet-trace") != 0)
                return fail(ret_error, "dsctl: %s takes dotnet-trace, not '%s'", g->spelled[OPT_AS], as);
        if (strcmp(a->command, "trace") != 0)
                return fail(ret_error, "dsctl: explain asks about providers and lists of profiles for trace only");
        a->trace_profile = g->value[OPT_PROFILE];
        a->providers = g->value[OPT_PROVIDERS];
        if (!a->trace_profile && !a->providers)
                a->trace_profile = EVENTPIPE_STOCK_DEFAULT_PROFILES;
        r = eventpipe_stock_trace_config(a->trace_profile, a->providers, &config);
        if (r < 0)
                return r;
        switch (r) {
        case 0: return 0;
        case EVENTPIPE_E_NOT_STOCK:
                return fail(ret_error, "dsctl: dotnet-trace collect takes no profile '%s' of '%s' (dotnet-trace 10 "
                            "moved cpu-sampling to collect-linux); dsctl's cpu-sampling, dotnet-trace 8 and 9's, is "
                            "asked about alone, without --as", "cpu-sampling", a->trace_profile);
        case EVENTPIPE_E_UNKNOWN:
                return fail(ret_error, "dsctl: %s takes dotnet-trace's profiles, comma-separated: dotnet-common, "
                            "dotnet-sampled-thread-time, gc-verbose, gc-collect, database; not '%s'",
                            g->spelled[OPT_PROFILE], a->trace_profile);
        default:
                if (a->providers && eventpipe_providers_parse(a->providers, &config) != 0)
                        return fail(ret_error, "dsctl: --providers takes Provider[:Keywords[:Level[:Args]]],... with "
                                    "hex keywords and a level 0-5 or its name, each provider once");
                return fail(ret_error, "dsctl: %s takes a comma-separated list of profiles, not '%s'",
                            g->spelled[OPT_PROFILE], a->trace_profile);
        }
}

static int check_explain(const Given *g, Args *a, char **ret_error) {
        const char *profile = g->value[OPT_PROFILE];
        int r;

        a->command = g->positional[2];
        if (policy_command_from_string(a->command) == _POLICY_COMMAND_INVALID) {
                _cleanup_free_ char *names = NULL;
                size_t size = 0;
                FILE *f = open_memstream(&names, &size);

                if (!f)
                        return -ENOMEM;
                for (int c = 0; c < _POLICY_COMMAND_MAX; c++)
                        fprintf(f, "%s%s", c > 0 ? ", " : "", policy_command_to_string((PolicyCommand)c));
                if (fclose(f) != 0)
                        return -ENOMEM;
                return fail(ret_error, "dsctl: explain asks about one of %s, not '%s'", names, a->command);
        }
        r = check_dump_type(g, a, ret_error);
        if (r == 0 && (g->value[OPT_AS] || g->value[OPT_PROVIDERS] || (profile && strchr(profile, ','))))
                r = check_explain_stock_trace(g, a, ret_error);
        else if (r == 0)
                r = check_profile(g, a, ret_error);
        if (r == 0 && g->value[OPT_DURATION])
                r = parse_duration_option(g, a, ret_error);
        return r;
}

static int check_trace_format(const Given *g, Args *a, const char *verb, char **ret_error);

static int check_trace(const Given *g, Args *a, char **ret_error) {
        _cleanup_(eventpipe_config_done) EventPipeConfig config = EVENTPIPE_CONFIG_NULL;
        int r;

        if (g->value[OPT_PROFILE] && g->value[OPT_PROVIDERS])
                return fail(ret_error, "dsctl: trace takes --profile or --providers, not both");
        r = check_profile(g, a, ret_error);
        if (r < 0)
                return r;
        a->providers = g->value[OPT_PROVIDERS];
        if (!a->trace_profile && !a->providers)
                a->trace_profile = "cpu-sampling";
        if (a->providers) {
                r = eventpipe_providers_parse(a->providers, &config);
                if (r < 0)
                        return r;
                if (r > 0)
                        return fail(ret_error, "dsctl: --providers takes %s",
                                    r == EVENTPIPE_E_LIMIT ? "at most 32 providers, of names up to 256 bytes"
                                                           : "Provider[:Keywords[:Level[:Args]]],... with hex keywords "
                                                             "and a level 0-5 or its name");
        }
        if (g->value[OPT_DURATION] && (r = parse_duration_option(g, a, ret_error)) < 0)
                return r;
        if (g->value[OPT_BUFFER_MB] &&
            parse_bounded(g, OPT_BUFFER_MB, EVENTPIPE_BUFFER_MB_MAX, "MB", &a->buffer_mb, ret_error) < 0)
                return -EINVAL;
        a->session.kind = SESSION_OUTPUT_NETTRACE;
        return check_trace_format(g, a, "trace", ret_error);
}

/* flame: a trace of a profile that samples stacks, for 10 s unless told, made into a flame graph. */
static int check_flame(const Given *g, Args *a, char **ret_error) {
        const EventPipeProfile *profile;
        bool samples = false;
        int r;

        r = check_profile(g, a, ret_error);
        if (r < 0)
                return r;
        if (!a->trace_profile)
                a->trace_profile = "dotnet-sampled-thread-time";
        profile = eventpipe_profile_find(a->trace_profile);
        for (size_t i = 0; profile && i < profile->n_providers; i++)
                samples = samples || strcmp(profile->providers[i].name, EVENTPIPE_SAMPLE_PROFILER) == 0;
        if (!samples || !profile->rundown)
                return fail(ret_error, "dsctl: flame takes a profile that samples stacks and names their methods: "
                            "dotnet-sampled-thread-time or cpu-sampling, not '%s'", a->trace_profile);
        if (g->value[OPT_DURATION] && (r = parse_duration_option(g, a, ret_error)) < 0)
                return r;
        if (!a->have_duration) {
                a->duration_sec = 10;
                a->have_duration = true;
        }
        a->session.kind = SESSION_OUTPUT_NETTRACE;
        a->session.format = a->trace_format = TRACE_FORMAT_FLAME;
        a->session.converted_output = a->output ? a->output : "flame.svg";
        return 0;
}

/* @path without a ".nettrace" ending, and the format's. */
static int converted_name(Args *a, const char *path) {
        size_t n = strlen(path), k = strlen(".nettrace");

        if (n > k && strcmp(path + n - k, ".nettrace") == 0)
                n -= k;
        free(a->output_owned);
        if (asprintf(&a->output_owned, "%.*s%s", (int)n, path, trace_format_extension(a->trace_format)) < 0) {
                a->output_owned = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* trace --format, convert: what the trace becomes, and the files it goes to. */
static int check_trace_format(const Given *g, Args *a, const char *verb, char **ret_error) {
        const char *format = g->value[OPT_FORMAT];
        bool convert = strcmp(verb, "convert") == 0;
        int r;

        a->trace_format = convert ? TRACE_FORMAT_SPEEDSCOPE : TRACE_FORMAT_NETTRACE;
        if (format) {
                a->trace_format = trace_format_from_string(format);
                if (a->trace_format == _TRACE_FORMAT_INVALID || (convert && a->trace_format == TRACE_FORMAT_NETTRACE))
                        return fail(ret_error, "dsctl: --format takes %sspeedscope, chromium, pprof or flame, not '%s'",
                                    convert ? "" : "nettrace, ", format);
        }
        if (convert) {
                a->input = g->positional[1];
                if (!a->output && (r = converted_name(a, a->input)) < 0)
                        return r;
                if (!a->output)
                        a->output = a->output_owned;
                if (strcmp(a->output, a->input) == 0)
                        return fail(ret_error, "dsctl: convert writes a new file, not over its trace");
                return 0;
        }
        a->nettrace = g->value[OPT_NETTRACE];
        if (a->nettrace && a->trace_format == TRACE_FORMAT_NETTRACE)
                return fail(ret_error, "dsctl: %s goes with --format: without it the trace is the file itself",
                            g->spelled[OPT_NETTRACE]);
        if (a->trace_format == TRACE_FORMAT_NETTRACE) {
                a->session.output = a->output ? a->output : "trace.nettrace";
                return 0;
        }
        if (!a->output && (r = converted_name(a, "trace")) < 0)
                return r;
        a->session.format = a->trace_format;
        a->session.converted_output = a->output ? a->output : a->output_owned;
        a->session.output = a->nettrace;
        if (a->nettrace && strcmp(a->nettrace, a->session.converted_output) == 0)
                return fail(ret_error, "dsctl: %s writes the trace and its %s into two files, not one", verb, format);
        return 0;
}

static int filter_add(SessionOptions *o, const char *provider, size_t provider_len, const char *name, size_t name_len) {
        char **providers = realloc(o->counter_filter_providers, (o->n_counter_filters + 1) * sizeof(char *));
        char **names;

        if (!providers)
                return -ENOMEM;
        o->counter_filter_providers = providers;
        names = realloc(o->counter_names, (o->n_counter_filters + 1) * sizeof(char *));
        if (!names)
                return -ENOMEM;
        o->counter_names = names;
        providers[o->n_counter_filters] = strndup(provider, provider_len);
        names[o->n_counter_filters] = strndup(name, name_len);
        if (!providers[o->n_counter_filters] || !names[o->n_counter_filters]) {
                free(providers[o->n_counter_filters]);
                free(names[o->n_counter_filters]);
                return -ENOMEM;
        }
        o->n_counter_filters++;
        return 0;
}

/* One provider of the list and its bracketed names; @p moves past them. Return 0, -EINVAL, -ENOMEM. */
static int counters_item_parse(const char **p, FILE *providers, Args *a) {
        _cleanup_free_ char *provider = NULL;
        size_t len = strcspn(*p, ",[");
        int r;

        provider = strndup(*p, len);
        if (!provider)
                return -ENOMEM;
        /* the agent's own check of each name (session.c) */
        if (!eventpipe_provider_name_is_valid(provider))
                return -EINVAL;
        fprintf(providers, "%s%s", ftell(providers) > 0 ? "," : "", provider);
        *p += len;
        if (**p != '[')
                return 0;
        for ((*p)++; **p != ']';) {
                size_t n = strcspn(*p, ",]");
                if (n == 0)
                        return -EINVAL;
                r = filter_add(&a->session, provider, len, *p, n);
                if (r < 0)
                        return r;
                *p += n;
                if (**p == ',')
                        (*p)++;
        }
        (*p)++;
        return 0;
}

/*
 * dotnet-counters' list: "System.Runtime[cpu-usage,working-set],MyMeter".
 * The agent gets the providers; the names in brackets filter here.
 */
static int counters_list_parse(const char *list, Args *a) {
        _cleanup_free_ char *names = NULL;
        size_t size = 0, n = 0;
        FILE *f = open_memstream(&names, &size);
        const char *p = list;
        int r = 0;

        if (!f)
                return -ENOMEM;
        while (r == 0 && *p) {
                r = counters_item_parse(&p, f, a);
                if (r == 0 && ++n > WIRE_COUNTER_PROVIDERS_MAX)
                        r = -EINVAL;
                if (r == 0 && *p == ',' && p[1])
                        p++;
                else if (r == 0 && *p)
                        r = -EINVAL;
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        if (r < 0)
                return r;
        if (n == 0)
                return -EINVAL;
        a->counter_providers = TAKE_PTR(names);
        return 0;
}

static int check_counters(const Given *g, Args *a, char **ret_error) {
        const char *format = g->value[OPT_FORMAT];
        int r;

        r = counters_list_parse(g->value[OPT_COUNTERS] ? g->value[OPT_COUNTERS] : "System.Runtime", a);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(ret_error, "dsctl: --counters takes Provider[name,...],... with at most %u providers "
                            "named with letters, digits, '.', '-' and '_' (e.g. System.Runtime[cpu-usage])",
                            WIRE_COUNTER_PROVIDERS_MAX);
        if (g->value[OPT_INTERVAL] &&
            parse_bounded(g, OPT_INTERVAL, WIRE_INTERVAL_MAX_SEC, "seconds", &a->interval_sec, ret_error) < 0)
                return -EINVAL;
        if (g->value[OPT_DURATION] && (r = parse_duration_option(g, a, ret_error)) < 0)
                return r;
        if (format && strcmp(format, "csv") != 0 && strcmp(format, "json") != 0 && strcmp(format, "prometheus") != 0)
                return fail(ret_error, "dsctl: --format takes csv, json or prometheus, not '%s'", format);
        if ((g->mask & OPT(OPT_WATCH)) && format && strcmp(format, "prometheus") == 0)
                return fail(ret_error, "dsctl: --watch redraws the counters on the terminal; it takes no "
                            "--format prometheus");
        if ((g->mask & OPT(OPT_WATCH)) && a->output)
                return fail(ret_error, "dsctl: --watch redraws the counters on the terminal; it takes no %s",
                            g->spelled[OPT_OUTPUT]);
        /* --json asks for JSON rows, unless --format says otherwise */
        a->session.kind = (format ? strcmp(format, "json") == 0 : a->json) ? SESSION_OUTPUT_JSON : SESSION_OUTPUT_CSV;
        if (format && strcmp(format, "prometheus") == 0)
                a->session.kind = SESSION_OUTPUT_PROMETHEUS;
        a->session.output = a->output;
        a->session.watch = g->mask & OPT(OPT_WATCH);
        return 0;
}

/* stacks, exceptions, logs: what their view shows and, for logs, what the agent is asked for. */
static int check_monitor(const Given *g, Verb verb, Args *a, char **ret_error) {
        const char *format = g->value[OPT_FORMAT];
        int r;

        if (g->value[OPT_DURATION] && (r = parse_duration_option(g, a, ret_error)) < 0)
                return r;
        if (format && strcmp(format, "text") != 0 && strcmp(format, "json") != 0 && strcmp(format, "speedscope") != 0)
                return fail(ret_error, "dsctl: --format takes text, json or speedscope, not '%s'", format);
        a->log_level = g->value[OPT_LEVEL];
        if (a->log_level && monitor_log_level_from_string(a->log_level) == _MONITOR_LOG_LEVEL_INVALID)
                return fail(ret_error, "dsctl: %s takes Trace, Debug, Information, Warning, Error or Critical, not '%s'",
                            g->spelled[OPT_LEVEL], a->log_level);
        a->log_category = g->value[OPT_CATEGORY];
        if (a->log_category && !monitor_category_is_valid(a->log_category))
                return fail(ret_error, "dsctl: %s takes a logger category (or its beginning) of printable ASCII "
                            "without spaces, ; : * = quotes or backslashes, at most %d bytes",
                            g->spelled[OPT_CATEGORY], MONITOR_CATEGORY_MAX);
        a->session.kind = verb == VERB_STACKS ? SESSION_OUTPUT_STACKS
                          : verb == VERB_EXCEPTIONS ? SESSION_OUTPUT_EXCEPTIONS
                                                    : SESSION_OUTPUT_LOGS;
        /* --format decides over --json; --json alone asks for JSON */
        if (format)
                a->json = strcmp(format, "json") == 0;
        a->session.speedscope = format && strcmp(format, "speedscope") == 0;
        return 0;
}

static int check_gcdump(const Given *g, Args *a, char **ret_error) {
        int r;

        if (g->value[OPT_DURATION] && (r = parse_duration_option(g, a, ret_error)) < 0)
                return r;
        a->nettrace = g->value[OPT_NETTRACE];
        if (a->nettrace && a->output && strcmp(a->nettrace, a->output) == 0)
                return fail(ret_error, "dsctl: gcdump writes the dump and the stream into two files, not one");
        if (g->value[OPT_SORT]) {
                a->session.gcdump_sort = gcdump_sort_from_string(g->value[OPT_SORT]);
                if (a->session.gcdump_sort == _GCDUMP_SORT_INVALID)
                        return fail(ret_error, "dsctl: %s takes size, count, name or stock, not '%s'",
                                    g->spelled[OPT_SORT], g->value[OPT_SORT]);
        }
        /* without a file, the table is what is asked for; an order for it asks for it too */
        a->report = (g->mask & (OPT(OPT_REPORT) | OPT(OPT_SORT))) || !a->output;
        a->session.kind = SESSION_OUTPUT_GCDUMP;
        a->session.output = a->nettrace;
        a->session.gcdump_output = a->output;
        a->session.gcdump_report = a->report;
        return 0;
}

/* Options that the command does not take are refused by name, not ignored. */
static int check_options_taken(const Given *g, Verb verb, char **ret_error) {
        unsigned extra = g->mask & ~(OPTS_COMMON | verbs[verb].options);

        for (Opt o = 0; o < _OPT_MAX; o++)
                if (extra & OPT(o))
                        return fail(ret_error, "dsctl: %s takes no %s; see 'dsctl %s --help'", verbs[verb].name,
                                    g->spelled[o], verbs[verb].name);
        return 0;
}

static int check_arguments(const Given *g, Verb verb, Args *a, char **ret_error) {
        size_t n = g->n_positional - 1;

        if (n > verbs[verb].max_args)
                return fail(ret_error, "dsctl: unexpected argument '%s'; see 'dsctl %s --help'",
                            g->positional[1 + verbs[verb].max_args], verbs[verb].name);
        if (verb == VERB_EXPLAIN && n < 2)
                return fail(ret_error, "dsctl: explain takes a process id or unit and a command, e.g. "
                            "'explain 1234 dump'");
        if (verb == VERB_CRASH)
                return parse_crash_id(n > 0 ? g->positional[1] : NULL, a, ret_error);
        if (verb == VERB_CONVERT && n == 0)
                return fail(ret_error, "dsctl: convert takes the nettrace file to convert, e.g. "
                            "'convert trace.nettrace --format pprof'");
        if (verb == VERB_CONVERT)
                return 0;
        if (verbs[verb].min_args > 0)
                return parse_target(verb, n > 0 ? g->positional[1] : NULL, a, ret_error);
        return 0;
}

static int check_command(const Given *g, Verb verb, Args *a, char **ret_error) {
        int r;

        r = check_options_taken(g, verb, ret_error);
        if (r == 0)
                r = check_arguments(g, verb, a, ret_error);
        if (r < 0)
                return r;
        a->output = g->value[OPT_OUTPUT];
        a->remove = g->value[OPT_REMOVE];
        a->url = g->value[OPT_URL];
        if (a->remove && a->url)
                return fail(ret_error, "dsctl: dumps takes --remove or --url, not both");
        if (verb == VERB_PORT) {
                /* port's --socket once named its own socket: after the command it is refused, not silently
                 * taken as the agent's (`--socket A port PID --socket B` dropped A) */
                if (g->socket_after_command)
                        return fail(ret_error, "dsctl: port names its own socket with --port-path PATH; --socket "
                                    "is the agent's, given before 'port'");
                a->port_socket = g->value[OPT_PORT_PATH];
                a->once = g->mask & OPT(OPT_ONCE);
        }
        if (verb == VERB_EXEC && (!a->exec_argv || !a->exec_argv[0]))
                return fail(ret_error, "dsctl: exec takes a command after '--', e.g. "
                            "'exec 1234 -- dotnet-stack report -p 1234'");
        switch (verb) {
        case VERB_EXPLAIN: return check_explain(g, a, ret_error);
        case VERB_DUMP: return check_dump_type(g, a, ret_error);
        case VERB_CRASHES: return g->value[OPT_SINCE] ? parse_since(g, a, ret_error) : 0;
        case VERB_TRACE: return check_trace(g, a, ret_error);
        case VERB_FLAME: return check_flame(g, a, ret_error);
        case VERB_CONVERT: return check_trace_format(g, a, "convert", ret_error);
        case VERB_GCDUMP: return check_gcdump(g, a, ret_error);
        case VERB_COUNTERS: return check_counters(g, a, ret_error);
        case VERB_STACKS:
        case VERB_EXCEPTIONS:
        case VERB_LOGS: return check_monitor(g, verb, a, ret_error);
        default: return 0;
        }
}

/* Whether --json is among the options, before anything else is read: a usage error is then JSON too. */
static bool asks_for_json(int argc, char **argv) {
        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
                if (strcmp(argv[i], "--json") == 0)
                        return true;
        return false;
}

/* exec's COMMAND is everything after the first "--", options included: dsctl reads only what comes before. */
static int exec_split(int argc, char **argv, char ***ret_command) {
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "--") == 0) {
                        *ret_command = argv + i + 1;
                        return i;
                }
        *ret_command = NULL;
        return argc;
}

int cli_parse(int argc, char **argv, Args *a, char **ret_error) {
        Given g = {};
        char **command;
        int r, before = exec_split(argc, argv, &command);

        *ret_error = NULL;
        a->json = asks_for_json(argc, argv);
        r = read_command_line(before, argv, &g, ret_error);
        if (r == 0 && (g.n_positional == 0 || strcmp(g.positional[0], verbs[VERB_EXEC].name) != 0)) {
                g = (Given){}; /* not exec: what follows "--" is dsctl's own arguments */
                r = read_command_line(argc, argv, &g, ret_error);
        } else if (r == 0)
                a->exec_argv = command;
        if (r < 0)
                return r;
        a->json = g.mask & OPT(OPT_JSON);
        a->quiet = a->session.quiet = g.mask & OPT(OPT_QUIET);
        a->socket_path = g.value[OPT_AGENT_SOCKET] ? g.value[OPT_AGENT_SOCKET] : g.value[OPT_SOCKET];
        a->version = g.mask & OPT(OPT_VERSION);
        a->help = g.mask & OPT(OPT_HELP);
        a->verb = g.n_positional > 0 ? verb_from_string(g.positional[0]) : _VERB_NONE;
        if (g.n_positional > 0 && a->verb == _VERB_NONE)
                return fail(ret_error, "dsctl: unknown command '%s'; see 'dsctl --help'", g.positional[0]);
        if (a->verb == VERB_HELP) {
                /* "help dump" is "dump --help" */
                a->help = true;
                a->verb = g.n_positional > 1 ? verb_from_string(g.positional[1]) : _VERB_NONE;
                if (g.n_positional > 2 || (g.n_positional > 1 && a->verb == _VERB_NONE))
                        return fail(ret_error, "dsctl: help takes one command, like 'dsctl help dump'");
                return 0;
        }
        if (a->help || a->version)
                return 0;
        if (a->verb == _VERB_NONE)
                return fail(ret_error, "dsctl: no command given; see 'dsctl --help'");
        return check_command(&g, a->verb, a, ret_error);
}
