/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl's command line: options anywhere, help that asks for nothing, and the agent's own limits */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "client/cli.h"
#include "policy/policy.h"
#include "eventpipe/session-config.h"
#include "tests/unit/tap.h"
#include "common/wire.h"

#define ARGV_MAX 16

/* Parses "dsctl ARGS..." (NULL-terminated) into @a; the error, if any, in *@ret_error. */
static int parse(Args *a, char **ret_error, ...) {
        char *argv[ARGV_MAX + 1] = { (char *)"dsctl" };
        int argc = 1;
        va_list ap;

        va_start(ap, ret_error);
        for (char *arg; (arg = va_arg(ap, char *)) && argc < ARGV_MAX;)
                argv[argc++] = arg;
        va_end(ap);
        args_done(a);
        *a = (Args)ARGS_NULL;
        free(*ret_error);
        *ret_error = NULL;
        return cli_parse(argc, argv, a, ret_error);
}

/* The parse failed as a usage error, with words that contain @words (read once the parse is done). */
static void refused(int r, char *const *error, const char *words) {
        check(r == -EINVAL && *error && strstr(*error, words));
        if (r != -EINVAL || !*error || !strstr(*error, words))
                printf("# got %d '%s', wanted '%s'\n", r, *error ? *error : "(none)", words);
}

static void test_options_before_and_after_the_command(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        check(parse(&a, &error, "info", "351", "--json", NULL) == 0);
        check(a.verb == VERB_INFO && a.pid == 351 && a.json);
        check(parse(&a, &error, "--json", "info", "351", NULL) == 0 && a.json && a.pid == 351);
        check(parse(&a, &error, "dump", "--type", "full", "orders.service", "-o", "x.core", "--socket", "/s", NULL) == 0);
        check(a.verb == VERB_DUMP && a.unit && strcmp(a.unit, "orders.service") == 0 && a.pid == 0);
        check(strcmp(a.dump_type, "full") == 0 && strcmp(a.output, "x.core") == 0 && strcmp(a.socket_path, "/s") == 0);
        check(parse(&a, &error, "counters", "7", "--refresh-interval=5", "-q", NULL) == 0);
        check(a.interval_sec == 5 && a.quiet && a.session.quiet && a.session.kind == SESSION_OUTPUT_CSV);
        /* after "--", nothing is an option */
        refused(parse(&a, &error, "info", "--", "--json", NULL), &error, "not '--json'");
        args_done(&a);
        free(error);
}

static void test_help_asks_for_nothing(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        check(parse(&a, &error, "dump", "--help", NULL) == 0 && a.help && a.verb == VERB_DUMP);
        check(parse(&a, &error, "help", "trace", NULL) == 0 && a.help && a.verb == VERB_TRACE);
        check(parse(&a, &error, "help", NULL) == 0 && a.help && a.verb == _VERB_NONE);
        check(parse(&a, &error, "--help", NULL) == 0 && a.help && a.verb == _VERB_NONE);
        /* help wins over what is missing or wrong in the rest */
        check(parse(&a, &error, "dump", "-h", NULL) == 0 && a.help);
        check(parse(&a, &error, "explain", "--type", "huge", "--help", NULL) == 0 && a.help);
        refused(parse(&a, &error, "help", "frobnicate", NULL), &error, "help takes one command");
        refused(parse(&a, &error, "frobnicate", "--help", NULL), &error, "unknown command 'frobnicate'");
        args_done(&a);
        free(error);
}

static void test_targets(void) {
        Args a = ARGS_NULL;
        char *error = NULL;
        char long_unit[WIRE_UNIT_MAX + 16];

        check(parse(&a, &error, "info", "orders.service", NULL) == 0 && a.unit && a.pid == 0);
        check(parse(&a, &error, "explain", "session-3.scope", "dump", NULL) == 0 && a.unit);
        check(strcmp(a.command, "dump") == 0);
        refused(parse(&a, &error, "info", NULL), &error, "info takes one process id or unit");
        refused(parse(&a, &error, "info", "not-a-pid", NULL), &error, "not 'not-a-pid'");
        refused(parse(&a, &error, "info", "a/b.service", NULL), &error, "not 'a/b.service'");
        refused(parse(&a, &error, "info", "1", "2", NULL), &error, "unexpected argument '2'");
        refused(parse(&a, &error, "explain", "1", NULL), &error, "a process id or unit and a command");
        refused(parse(&a, &error, "explain", "1", "frob", NULL), &error, "not 'frob'");
        check(parse(&a, &error, "resume", "4242", NULL) == 0 && a.verb == VERB_RESUME && a.pid == 4242);
        check(parse(&a, &error, "resume", "orders.service", "--json", NULL) == 0 && a.unit && a.json);
        refused(parse(&a, &error, "resume", NULL), &error, "resume takes one process id or unit");
        refused(parse(&a, &error, "resume", "1", "--type", "full", NULL), &error, "resume takes no --type");
        memset(long_unit, 'a', sizeof(long_unit));
        strcpy(long_unit + WIRE_UNIT_MAX - 8, ".service"); /* exactly WIRE_UNIT_MAX bytes */
        check(parse(&a, &error, "dump", long_unit, NULL) == 0);
        strcpy(long_unit + WIRE_UNIT_MAX - 7, ".service");
        refused(parse(&a, &error, "dump", long_unit, NULL), &error, "takes one process id or unit");
        args_done(&a);
        free(error);
}

/* Each bound is the agent's (wire.h, session-config.h): its value passes, one more does not. */
static void test_limits_are_the_agents(void) {
        Args a = ARGS_NULL;
        char *error = NULL;
        char many[256] = "P0";

        check(parse(&a, &error, "trace", "1", "--buffer-mb", "1024", NULL) == 0 && a.buffer_mb == EVENTPIPE_BUFFER_MB_MAX);
        refused(parse(&a, &error, "trace", "1", "--buffer-mb", "1025", NULL), &error,
                "--buffer-mb takes a number of MB from 1 to 1024");
        refused(parse(&a, &error, "trace", "1", "--buffer-mb", "0", NULL), &error, "from 1 to 1024");
        check(parse(&a, &error, "counters", "1", "--interval", "3600", NULL) == 0 && a.interval_sec == WIRE_INTERVAL_MAX_SEC);
        refused(parse(&a, &error, "counters", "1", "--interval", "3601", NULL), &error,
                "--interval takes a number of seconds from 1 to 3600");
        check(parse(&a, &error, "trace", "1", "--duration", "30d", NULL) == 0 && a.duration_sec == WIRE_DURATION_MAX_SEC);
        refused(parse(&a, &error, "trace", "1", "--duration", "2592001", NULL), &error,
                "--duration takes whole seconds from 1 s to 30 days");
        refused(parse(&a, &error, "counters", "1", "--duration", "1.5s", NULL), &error, "--duration takes whole seconds");
        for (unsigned i = 1; i < WIRE_COUNTER_PROVIDERS_MAX; i++)
                snprintf(many + strlen(many), sizeof(many) - strlen(many), ",P%u", i);
        check(parse(&a, &error, "counters", "1", "--counters", many, NULL) == 0);
        strcat(many, ",One.More");
        refused(parse(&a, &error, "counters", "1", "--counters", many, NULL), &error, "at most 16 providers");
        refused(parse(&a, &error, "counters", "1", "--counters", "Bad Name", NULL), &error, "--counters takes");
        args_done(&a);
        free(error);
}

static void test_names_are_the_agents(void) {
        Args a = ARGS_NULL;
        char *error = NULL;
        size_t n;
        const EventPipeProfile *profiles = eventpipe_profiles(&n);

        for (PolicyDumpType t = POLICY_DUMP_MINI; t < _POLICY_DUMP_MAX; t++)
                check(parse(&a, &error, "dump", "1", "--type", policy_dump_type_to_string(t), NULL) == 0);
        refused(parse(&a, &error, "dump", "1", "--type", "huge", NULL), &error,
                "--type takes mini, heap, triage or full, not 'huge'");
        for (size_t i = 0; i < n; i++)
                check(parse(&a, &error, "trace", "1", "--profile", profiles[i].name, NULL) == 0);
        refused(parse(&a, &error, "trace", "1", "--profile", "nope", NULL), &error, "--profile takes one of cpu-sampling");
        for (int c = 0; c < _POLICY_COMMAND_MAX; c++)
                check(parse(&a, &error, "explain", "1", policy_command_to_string((PolicyCommand)c), NULL) == 0);
        refused(parse(&a, &error, "trace", "1", "--providers", "X:zz", NULL), &error, "--providers takes");
        refused(parse(&a, &error, "trace", "1", "--providers", "X", "--profile", "gc-collect", NULL), &error, "not both");
        refused(parse(&a, &error, "counters", "1", "--format", "xml", NULL), &error,
                "--format takes csv, json or prometheus");
        check(parse(&a, &error, "counters", "1", "--format", "prometheus", "-o", "x.prom", NULL) == 0 &&
              a.session.kind == SESSION_OUTPUT_PROMETHEUS && strcmp(a.session.output, "x.prom") == 0);
        refused(parse(&a, &error, "counters", "1", "--format", "prometheus", "--watch", NULL), &error,
                "it takes no --format prometheus");
        args_done(&a);
        free(error);
}

/* stacks, exceptions, logs: their formats, and logs' level and category as the agent checks them */
/* explain trace as stock dotnet-trace sends it: its default, lists of profiles, providers */
static void test_explain_as_dotnet_trace(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        check(parse(&a, &error, "explain", "1", "trace", "--as", "dotnet-trace", NULL) == 0);
        check(strcmp(a.trace_profile, "dotnet-common,dotnet-sampled-thread-time") == 0 && !a.providers);
        check(parse(&a, &error, "explain", "1", "trace", "--as", "dotnet-trace", "--profile", "GC-Verbose", NULL) == 0);
        check(strcmp(a.trace_profile, "GC-Verbose") == 0);
        check(parse(&a, &error, "explain", "1", "trace", "--profile", "dotnet-common,gc-collect", NULL) == 0);
        check(parse(&a, &error, "explain", "1", "trace", "--providers", "My-Source:0x1", NULL) == 0);
        check(!a.trace_profile && strcmp(a.providers, "My-Source:0x1") == 0);
        check(parse(&a, &error, "explain", "1", "trace", "--profile", "gc-collect", "--providers", "A", NULL) == 0);
        /* dsctl's cpu-sampling alone, as dsctl trace asks for it; dotnet-trace 10's collect has none */
        check(parse(&a, &error, "explain", "1", "trace", "--profile", "cpu-sampling", NULL) == 0);
        refused(parse(&a, &error, "explain", "1", "trace", "--as", "dotnet-trace", "--profile", "cpu-sampling", NULL),
                &error, "collect-linux");
        refused(parse(&a, &error, "explain", "1", "trace", "--profile", "dotnet-common,nope", NULL), &error,
                "--profile takes dotnet-trace's profiles");
        refused(parse(&a, &error, "explain", "1", "trace", "--profile", "dotnet-common,", NULL), &error,
                "comma-separated list");
        refused(parse(&a, &error, "explain", "1", "trace", "--as", "dotnet-trace", "--providers", "X:zz", NULL), &error,
                "--providers takes");
        refused(parse(&a, &error, "explain", "1", "trace", "--as", "perfview", NULL), &error,
                "--as takes dotnet-trace, not 'perfview'");
        refused(parse(&a, &error, "explain", "1", "dump", "--as", "dotnet-trace", NULL), &error, "for trace only");
        args_done(&a);
        free(error);
}

static void test_monitor_commands(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        check(parse(&a, &error, "stacks", "12", NULL) == 0);
        check(a.verb == VERB_STACKS && a.pid == 12 && a.session.kind == SESSION_OUTPUT_STACKS && !a.json);
        check(parse(&a, &error, "stacks", "12", "--format", "speedscope", NULL) == 0 && a.session.speedscope && !a.json);
        check(parse(&a, &error, "--json", "stacks", "orders.service", NULL) == 0 && a.json && !a.session.speedscope);
        check(parse(&a, &error, "stacks", "12", "--json", "--format", "text", NULL) == 0 && !a.json);
        check(parse(&a, &error, "exceptions", "12", "--duration", "1m", NULL) == 0);
        check(a.session.kind == SESSION_OUTPUT_EXCEPTIONS && a.have_duration && a.duration_sec == 60);
        check(parse(&a, &error, "logs", "12", "--level", "warning", "--category", "Orders.Api", NULL) == 0);
        check(a.session.kind == SESSION_OUTPUT_LOGS && strcmp(a.log_level, "warning") == 0);
        check(strcmp(a.log_category, "Orders.Api") == 0 && !a.have_duration);
        refused(parse(&a, &error, "logs", "12", "--level", "Verbose", NULL), &error,
                "--level takes Trace, Debug, Information, Warning, Error or Critical, not 'Verbose'");
        refused(parse(&a, &error, "logs", "12", "--category", "A:Trace;B", NULL), &error, "--category takes");
        refused(parse(&a, &error, "stacks", "12", "--duration", "5", NULL), &error, "stacks takes no --duration");
        refused(parse(&a, &error, "stacks", "12", "--format", "csv", NULL), &error, "text, json or speedscope");
        refused(parse(&a, &error, "exceptions", "12", "--category", "X", NULL), &error, "exceptions takes no --category");
        /* gcdump: the table, the stream kept when asked, a window */
        check(parse(&a, &error, "gcdump", "12", "--report", "--nettrace", "heap.nettrace", "--duration", "90", NULL) == 0);
        check(a.verb == VERB_GCDUMP && a.session.kind == SESSION_OUTPUT_GCDUMP && a.report);
        check(strcmp(a.session.output, "heap.nettrace") == 0 && a.duration_sec == 90);
        check(parse(&a, &error, "gcdump", "orders.service", NULL) == 0 && a.report && !a.session.output);
        refused(parse(&a, &error, "gcdump", "12", "--format", "json", NULL), &error, "gcdump takes no --format");
        refused(parse(&a, &error, "gcdump", "12", "--nettrace", NULL), &error, "--nettrace takes a value");
        /* the table's order: dumpheap -stat's unless told; an order asks for the table, -o or not */
        check(parse(&a, &error, "gcdump", "12", NULL) == 0 && a.session.gcdump_sort == GCDUMP_SORT_SIZE);
        check(parse(&a, &error, "gcdump", "12", "--sort", "count", NULL) == 0 && a.session.gcdump_sort == GCDUMP_SORT_COUNT);
        check(parse(&a, &error, "gcdump", "12", "--sort", "name", NULL) == 0 && a.session.gcdump_sort == GCDUMP_SORT_NAME);
        check(parse(&a, &error, "gcdump", "12", "-o", "h.gcdump", NULL) == 0 && !a.report);
        check(parse(&a, &error, "gcdump", "12", "-o", "h.gcdump", "--sort", "stock", NULL) == 0 && a.report &&
              a.session.gcdump_report && a.session.gcdump_sort == GCDUMP_SORT_STOCK);
        refused(parse(&a, &error, "gcdump", "12", "--sort", "total", NULL), &error,
                "--sort takes size, count, name or stock, not 'total'");
        refused(parse(&a, &error, "trace", "12", "--sort", "size", NULL), &error, "trace takes no --sort");
        refused(parse(&a, &error, "logs", NULL), &error, "logs takes one process id or unit");
        args_done(&a);
        free(error);
}

static void test_options_a_command_does_not_take(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        refused(parse(&a, &error, "info", "1", "--type", "mini", NULL), &error, "info takes no --type");
        refused(parse(&a, &error, "dump", "1", "--watch", NULL), &error, "dump takes no --watch");
        refused(parse(&a, &error, "ps", "--remove", "x", NULL), &error, "ps takes no --remove");
        refused(parse(&a, &error, "counters", "1", "--watch", "-o", "f", NULL), &error, "it takes no -o");
        refused(parse(&a, &error, "ps", "--bogus", NULL), &error, "unknown option '--bogus'");
        refused(parse(&a, &error, "dump", "1", "--type", NULL), &error, "--type takes a value");
        refused(parse(&a, &error, NULL), &error, "no command given");
        /* --json is known before the error, so that the error itself is JSON */
        refused(parse(&a, &error, "ps", "--bogus", "--json", NULL), &error, "unknown option");
        check(a.json);
        args_done(&a);
        free(error);
}

static void test_outputs(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        check(parse(&a, &error, "trace", "1", NULL) == 0 && strcmp(a.session.output, "trace.nettrace") == 0);
        check(strcmp(a.trace_profile, "cpu-sampling") == 0 && a.session.kind == SESSION_OUTPUT_NETTRACE);
        check(parse(&a, &error, "counters", "1", "--json", NULL) == 0 && a.session.kind == SESSION_OUTPUT_JSON);
        check(parse(&a, &error, "counters", "1", "--json", "--format", "csv", NULL) == 0 &&
              a.session.kind == SESSION_OUTPUT_CSV);
        check(parse(&a, &error, "counters", "1", "--counters", "System.Runtime[cpu-usage],Meter", NULL) == 0);
        check(strcmp(a.counter_providers, "System.Runtime,Meter") == 0 && a.session.n_counter_filters == 1);
        check(parse(&a, &error, "dumps", "--remove", "/var/lib/dsagent/dumps/x", NULL) == 0 && a.remove);
        args_done(&a);
        free(error);
}

/* --socket is the agent's for every command; port names its own with --port-path, and its old spelling of
 * that, --socket after the command, is refused rather than taken as the agent's (it used to drop the first) */
/* trace --format, flame and convert: what the trace becomes, and where it goes */
static void test_trace_formats(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        check(parse(&a, &error, "trace", "1", NULL) == 0 && a.trace_format == TRACE_FORMAT_NETTRACE);
        check(a.session.format == TRACE_FORMAT_NETTRACE && strcmp(a.session.output, "trace.nettrace") == 0);
        check(parse(&a, &error, "trace", "1", "--format", "pprof", NULL) == 0 && a.session.format == TRACE_FORMAT_PPROF);
        check(strcmp(a.session.converted_output, "trace.pb.gz") == 0 && !a.session.output);
        check(parse(&a, &error, "trace", "1", "--format", "speedscope", "-o", "s.json", "--nettrace", "t.nettrace",
                    NULL) == 0);
        check(strcmp(a.session.converted_output, "s.json") == 0 && strcmp(a.session.output, "t.nettrace") == 0);
        refused(parse(&a, &error, "trace", "1", "--format", "svg", NULL), &error,
                "--format takes nettrace, speedscope, chromium, pprof or flame, not 'svg'");
        refused(parse(&a, &error, "trace", "1", "--nettrace", "t.nettrace", NULL), &error, "goes with --format");
        refused(parse(&a, &error, "trace", "1", "--format", "flame", "-o", "x", "--nettrace", "x", NULL), &error,
                "two files");

        /* flame: a trace of a sampling profile, 10 s unless told, sent as a trace */
        check(parse(&a, &error, "flame", "orders.service", NULL) == 0 && a.verb == VERB_FLAME);
        check(strcmp(a.trace_profile, "dotnet-sampled-thread-time") == 0 && a.have_duration && a.duration_sec == 10);
        check(a.session.format == TRACE_FORMAT_FLAME && strcmp(a.session.converted_output, "flame.svg") == 0);
        check(parse(&a, &error, "flame", "1", "--profile", "cpu-sampling", "--duration", "1m", "-o", "c.svg", NULL) == 0);
        check(strcmp(a.trace_profile, "cpu-sampling") == 0 && a.duration_sec == 60);
        refused(parse(&a, &error, "flame", "1", "--profile", "gc-verbose", NULL), &error,
                "a profile that samples stacks");
        refused(parse(&a, &error, "flame", "1", "--format", "pprof", NULL), &error, "flame takes no --format");

        /* convert: a file, not a target; no agent */
        check(parse(&a, &error, "convert", "dir/app.nettrace", NULL) == 0 && a.verb == VERB_CONVERT);
        check(a.trace_format == TRACE_FORMAT_SPEEDSCOPE && strcmp(a.input, "dir/app.nettrace") == 0);
        check(strcmp(a.output, "dir/app.speedscope.json") == 0);
        check(parse(&a, &error, "convert", "x.trace", "--format", "flame", NULL) == 0 && strcmp(a.output, "x.trace.svg") == 0);
        check(parse(&a, &error, "convert", "1234", "--format", "pprof", "-o", "p", NULL) == 0);
        check(strcmp(a.input, "1234") == 0 && a.pid == 0 && strcmp(a.output, "p") == 0);
        refused(parse(&a, &error, "convert", NULL), &error, "takes the nettrace file");
        refused(parse(&a, &error, "convert", "t.nettrace", "--format", "nettrace", NULL), &error,
                "--format takes speedscope, chromium, pprof or flame");
        refused(parse(&a, &error, "convert", "t.json", "-o", "t.json", NULL), &error, "not over its trace");
        refused(parse(&a, &error, "convert", "t.nettrace", "--duration", "5", NULL), &error, "convert takes no --duration");
        args_done(&a);
        free(error);
}

static void test_port_socket_and_path(void) {
        Args a = ARGS_NULL;
        char *error = NULL;

        check(parse(&a, &error, "--socket", "/agent", "port", "7", "--port-path", "/port", NULL) == 0);
        check(a.verb == VERB_PORT && strcmp(a.socket_path, "/agent") == 0 && strcmp(a.port_socket, "/port") == 0);
        check(parse(&a, &error, "--agent-socket", "/agent", "port", "7", NULL) == 0);
        check(strcmp(a.socket_path, "/agent") == 0 && !a.port_socket);
        refused(parse(&a, &error, "--socket", "/agent", "port", "7", "--socket", "/port", NULL), &error,
                "port names its own socket with --port-path PATH");
        refused(parse(&a, &error, "port", "7", "--socket", "/port", NULL), &error, "--port-path");
        refused(parse(&a, &error, "ps", "--port-path", "/port", NULL), &error, "ps takes no --port-path");
        args_done(&a);
        free(error);
}

int main(void) {
        run_test(test_options_before_and_after_the_command);
        run_test(test_help_asks_for_nothing);
        run_test(test_targets);
        run_test(test_limits_are_the_agents);
        run_test(test_names_are_the_agents);
        run_test(test_explain_as_dotnet_trace);
        run_test(test_options_a_command_does_not_take);
        run_test(test_monitor_commands);
        run_test(test_outputs);
        run_test(test_port_socket_and_path);
        run_test(test_trace_formats);
        return tap_finish();
}
