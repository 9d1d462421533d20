/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a tool's diagnostic IPC request is decided as (policy/ipc-policy.h): the policy command
 * of every request, .NET's dump types, the providers and buffer of a CollectTracing, and the
 * shapes of the stock tools' sessions. The requests are built as the decoder returns them
 * (test-ipc-request.c checks the decoding).
 */
#include <stdlib.h>
#include <string.h>

#include "policy/ipc-policy.h"
#include "eventpipe/session-config.h"
#include "tests/unit/tap.h"

#define CLR "Microsoft-Windows-DotNETRuntime"
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"
#define METRICS_ARGS                                                                                   \
        "SessionId=6e0a7d2c-2b6f-4a43-9c1f-3a1d5f9e8b70;Metrics=System.Runtime,Microsoft.AspNetCore.Hosting;" \
        "RefreshInterval=1;MaxTimeSeries=1000;MaxHistograms=10;ClientId=1f4c2f62-8d8b-4e5a-9d0c-7a3f2e6b1c55"

/* Every request the decoder returns is decided as one command; setenv, startup-hook and profiler run code. */
static void test_commands(void) {
        static const struct {
                DotnetIpcCommand command;
                const char *policy;
        } cases[] = {
                { DOTNET_IPC_PROCESS_INFO, "info" },
                { DOTNET_IPC_PROCESS_INFO2, "info" },
                { DOTNET_IPC_PROCESS_INFO3, "info" },
                { DOTNET_IPC_RESUME_RUNTIME, "resume" },
                { DOTNET_IPC_PROCESS_ENVIRONMENT, "env" },
                { DOTNET_IPC_ENABLE_PERF_MAP, "perfmap" },
                { DOTNET_IPC_DISABLE_PERF_MAP, "perfmap" },
                { DOTNET_IPC_COLLECT_TRACING, "trace" },
                { DOTNET_IPC_COLLECT_TRACING3, "trace" },
                { DOTNET_IPC_COLLECT_TRACING5, "trace" },
                { DOTNET_IPC_STOP_TRACING, "trace" },
                { DOTNET_IPC_GENERATE_CORE_DUMP, "dump" },
                { DOTNET_IPC_GENERATE_CORE_DUMP3, "dump" },
                { DOTNET_IPC_SET_ENVIRONMENT_VARIABLE, "setenv" },
                { DOTNET_IPC_APPLY_STARTUP_HOOK, "startup-hook" },
                { DOTNET_IPC_ATTACH_PROFILER, "profiler" },
                { DOTNET_IPC_STARTUP_PROFILER, "profiler" },
        };
        PolicyRequest q;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                PolicyCommand c = ipc_policy_command(cases[i].command);
                bool runs_code = strcmp(cases[i].policy, "setenv") == 0 ||
                                 strcmp(cases[i].policy, "startup-hook") == 0 || strcmp(cases[i].policy, "profiler") == 0;

                check(strcmp(policy_command_to_string(c), cases[i].policy) == 0);
                check(policy_command_runs_code(c) == runs_code);
        }
        /* CollectTracing6 (Block mode) is not carried; nor is a command no runtime knows */
        check(ipc_policy_command(DOTNET_IPC_COLLECT_TRACING6) == _POLICY_COMMAND_INVALID);
        check(ipc_policy_request(&(IpcRequest){ .command = DOTNET_IPC_COLLECT_TRACING6 }, NULL, 0, &q) == -EINVAL);
        check(ipc_policy_request(&(IpcRequest){ .command = (DotnetIpcCommand)0x0509 }, NULL, 0, &q) == -EINVAL);

        /* StopTracing is a trace with nothing to decide but the command */
        check(ipc_policy_request(&(IpcRequest){ .command = DOTNET_IPC_STOP_TRACING, .session_id = 7 }, NULL, 0, &q) == 0);
        check(q.command == POLICY_COMMAND_TRACE && q.n_providers == 0 && q.buffer_mb == 0);
}

/* .NET's DumpType 1..4 are mini, heap, triage, full; a dump is decided with its type. */
static void test_dump_types(void) {
        static const PolicyDumpType types[] = { POLICY_DUMP_MINI, POLICY_DUMP_HEAP, POLICY_DUMP_TRIAGE,
                                                POLICY_DUMP_FULL };
        IpcRequest req = { .command = DOTNET_IPC_GENERATE_CORE_DUMP3,
                           .dump = { .path = (char *)"/tmp/d.1", .type = IPC_REQUEST_DUMP_FULL } };
        PolicyRequest q;

        for (uint32_t t = 0; t <= 5; t++)
                check(ipc_policy_dump_type(t) == (t >= 1 && t <= 4 ? types[t - 1] : _POLICY_DUMP_INVALID));
        check(ipc_policy_request(&req, NULL, 0, &q) == 0);
        check(q.command == POLICY_COMMAND_DUMP && q.dump_type == POLICY_DUMP_FULL);
        check(strcmp(policy_dump_type_to_string(q.dump_type), "full") == 0);
}

/*
 * dotnet-trace collect --providers with a profile's providers, an EventCounters source with its
 * interval and a Meter listener with its arguments, as the decoder returns it (test-ipc-request.c's
 * test_collect_tracing2_dotnet_trace): decided as a trace of its four providers.
 */
static void test_dotnet_trace_providers(void) {
        EventPipeProvider p[] = {
                { (char *)SAMPLER, 0xF00000000000ULL, 4, (char *)"" },
                { (char *)CLR, 0x14C14FCCBDULL, 5, (char *)"" },
                { (char *)"System.Runtime", 0, 4, (char *)"EventCounterIntervalSec=1" },
                { (char *)"System.Diagnostics.Metrics", 0x2, 4, (char *)METRICS_ARGS },
        };
        IpcRequest req = { .command = DOTNET_IPC_COLLECT_TRACING2,
                           .tracing = { .buffer_mb = 256, .format = DOTNET_IPC_FORMAT_NETTRACE,
                                        .rundown_keyword = DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT, .stackwalk = true,
                                        .config = { .providers = p, .n_providers = 4, .rundown = true } } };
        PolicyProvider providers[IPC_REQUEST_PROVIDERS_MAX];
        PolicyRequest q;
        char *text;

        text = eventpipe_config_to_string(&req.tracing.config);
        check(text && strcmp(text, SAMPLER ":0xf00000000000:4:," CLR ":0x14c14fccbd:5:,System.Runtime:0x0:4:"
                                   "EventCounterIntervalSec=1,System.Diagnostics.Metrics:0x2:4:" METRICS_ARGS) == 0);
        free(text);

        /* "" is no arguments to the policy, anything else is */
        check(ipc_policy_request(&req, providers, 4, &q) == 0);
        check(q.command == POLICY_COMMAND_TRACE && q.n_providers == 4 && q.providers == providers);
        check(q.buffer_mb == 256 && q.duration_usec == 0 && q.trace_profile == NULL);
        check(strcmp(providers[1].name, CLR) == 0 && providers[1].keywords == 0x14C14FCCBDULL);
        check(!providers[0].arguments && !providers[1].arguments && providers[1].level == 5);
        check(strcmp(providers[2].arguments, "EventCounterIntervalSec=1") == 0 &&
              strcmp(providers[3].arguments, METRICS_ARGS) == 0);
        check(ipc_policy_request(&req, providers, 3, &q) == -ENOBUFS);
}

/* A CollectTracing of @n providers, to be classified by its shape (nothing is encoded). */
static IpcRequestTracing shaped(EventPipeProvider *p, size_t n, uint64_t rundown_keyword) {
        return (IpcRequestTracing){ .buffer_mb = 256, .format = DOTNET_IPC_FORMAT_NETTRACE,
                                    .rundown_keyword = rundown_keyword, .stackwalk = true,
                                    .config = { .providers = p, .n_providers = n, .rundown = rundown_keyword != 0 } };
}

#define COUNTERS_METRICS "SessionId=9fc49c65-592a-4916-bad1-3ff9d2b28cce;Metrics=System.Runtime,Foo.Bar;" \
        "RefreshInterval=1;MaxTimeSeries=1000;MaxHistograms=10;ClientId=a0748ade-29a3-490d-9f8f-8a291271d8e2"

static IpcTracingShape counters_shape(const char *runtime_args, uint64_t keywords, uint32_t level,
                                      const char *metrics_args, uint64_t rundown) {
        EventPipeProvider p[] = {
                { (char *)"System.Runtime", keywords, level, (char *)runtime_args },
                { (char *)"Foo.Bar", 0, 4, (char *)"EventCounterIntervalSec=1" },
                { (char *)"System.Diagnostics.Metrics", 0x2, 4, (char *)metrics_args },
        };
        IpcRequestTracing t = shaped(p, metrics_args ? 3 : 2, rundown);

        return ipc_policy_tracing_shape(&t);
}

/* What each stock tool sends (recorded from 10.0.750501) is decided as its dsctl command; a step off the shape is trace. */
static void test_tracing_shapes(void) {
        EventPipeProvider gc[] = { { (char *)CLR, 0x1980001, 5, (char *)"" } };
        EventPipeProvider sampler[] = { { (char *)SAMPLER, 0xF00000000000ULL, 4, (char *)"" } };
        EventPipeProvider trace[] = { { (char *)CLR, 0x100003801dULL, 4, (char *)"" },
                                      { (char *)SAMPLER, 0xF00000000000ULL, 4, (char *)"" } };
        EventPipeProvider p[3];
        PolicyProvider providers[IPC_REQUEST_PROVIDERS_MAX];
        IpcRequest req = { .command = DOTNET_IPC_COLLECT_TRACING2 };
        IpcRequestTracing t;
        PolicyRequest q;

        /* dotnet-counters collect and monitor (SessionId=SHARED), with a refresh interval and an instrument */
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, COUNTERS_METRICS, 0) == IPC_TRACING_SHAPE_COUNTERS);
        check(counters_shape("EventCounterIntervalSec=2.5", 0, 4,
                             "SessionId=SHARED;Metrics=System.Runtime\\dotnet.gc.pause.time;RefreshInterval=2.5",
                             0) == IPC_TRACING_SHAPE_COUNTERS);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, NULL, 0) == IPC_TRACING_SHAPE_COUNTERS);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=x;Metrics=", 0) == IPC_TRACING_SHAPE_COUNTERS);
        /* off the shape: other arguments, keywords, a higher level, a rundown, a meter not also asked for */
        check(counters_shape("EventCounterIntervalSec=1;Key=Value", 0, 4, NULL, 0) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=", 0, 4, NULL, 0) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1e3", 0, 4, NULL, 0) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0x1, 4, NULL, 0) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 5, NULL, 0) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, NULL, 1) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=x;Metrics=Other.Meter", 0) ==
              IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "Metrics=System.Runtime", 0) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=x;Metrics=System.Runtime;SessionId=y", 0) ==
              IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=x;Metrics=System.Runtime;", 0) ==
              IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=x;Metrics=System.Runtime;Filter=*", 0) ==
              IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=x;Metrics=System.Runtime;MaxTimeSeries=1000000",
                             0) == IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=a b;Metrics=System.Runtime", 0) ==
              IPC_TRACING_SHAPE_TRACE);
        check(counters_shape("EventCounterIntervalSec=1", 0, 4, "SessionId=x;Metrics=System.Runtime\\", 0) ==
              IPC_TRACING_SHAPE_TRACE);
        /* the Metrics provider alone is not counters: its meters are decided through the EventCounters names */
        p[0] = (EventPipeProvider){ (char *)"System.Diagnostics.Metrics", 0x2, 4, (char *)"SessionId=x;Metrics=" };
        t = shaped(p, 1, 0);
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_TRACE);

        /* dotnet-gcdump: the heap session, and the type-table flush before it */
        t = shaped(gc, 1, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_GCDUMP);
        gc[0].keywords |= 0x8000; /* exceptions besides: a trace */
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_TRACE);
        gc[0].keywords = 0x1980001;
        gc[0].level = 4;
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_TRACE);
        gc[0].level = 5;
        gc[0].arguments = (char *)"Key=Value";
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_TRACE);
        gc[0].arguments = (char *)"";
        t = shaped(sampler, 1, 0);
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_GCDUMP_TYPES);
        /* dotnet-stack: the same with a rundown */
        t = shaped(sampler, 1, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_STACKS);
        /* dotnet-trace's default: trace */
        t = shaped(trace, 2, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        check(ipc_policy_tracing_shape(&t) == IPC_TRACING_SHAPE_TRACE);
        check(ipc_policy_shape_command(IPC_TRACING_SHAPE_GCDUMP_TYPES) == POLICY_COMMAND_GCDUMP);

        /* the policy is asked for the shape's command: counters with the EventCounters names */
        p[0] = (EventPipeProvider){ (char *)"System.Runtime", 0, 4, (char *)"EventCounterIntervalSec=1" };
        p[1] = (EventPipeProvider){ (char *)"System.Diagnostics.Metrics", 0x2, 4,
                                    (char *)"SessionId=x;Metrics=System.Runtime" };
        req.tracing = shaped(p, 2, 0);
        check(ipc_policy_request(&req, providers, IPC_REQUEST_PROVIDERS_MAX, &q) == 0);
        check(q.command == POLICY_COMMAND_COUNTERS && q.n_providers == 1 && strcmp(q.providers[0].name, "System.Runtime") == 0);
        req.tracing = shaped(sampler, 1, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        check(ipc_policy_request(&req, providers, IPC_REQUEST_PROVIDERS_MAX, &q) == 0);
        check(q.command == POLICY_COMMAND_STACKS && q.n_providers == 0 && q.buffer_mb == 256);
        req.tracing = shaped(gc, 1, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        req.tracing.buffer_mb = 1024;
        check(ipc_policy_request(&req, providers, IPC_REQUEST_PROVIDERS_MAX, &q) == 0);
        check(q.command == POLICY_COMMAND_GCDUMP && q.n_providers == 0 && q.buffer_mb == 1024);
        req.tracing = shaped(trace, 2, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        check(ipc_policy_request(&req, providers, IPC_REQUEST_PROVIDERS_MAX, &q) == 0);
        check(q.command == POLICY_COMMAND_TRACE && q.n_providers == 2);
        /* a trace's providers carry their levels and arguments, for the profiles' shapes (policy.h) */
        check(providers[0].keywords == 0x100003801dULL && providers[0].level == 4 && !providers[0].arguments);
        check(providers[1].level == 4 && !providers[1].arguments);

        /* dotnet-stack's shape is dotnet-trace's dotnet-sampled-thread-time too: it may be asked as a trace */
        req.tracing = shaped(sampler, 1, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        check(ipc_policy_trace_request(&req, providers, IPC_REQUEST_PROVIDERS_MAX, &q) == 0);
        check(q.command == POLICY_COMMAND_TRACE && q.n_providers == 1 && q.buffer_mb == 256 &&
              q.trace_profile == NULL);
        check(strcmp(providers[0].name, SAMPLER) == 0 && providers[0].keywords == 0xF00000000000ULL &&
              providers[0].level == 4 && !providers[0].arguments);
        check(ipc_policy_trace_request(&req, providers, 0, &q) == -ENOBUFS);
        req.command = DOTNET_IPC_STOP_TRACING;
        check(ipc_policy_trace_request(&req, providers, IPC_REQUEST_PROVIDERS_MAX, &q) == -EINVAL);
}

int main(void) {
        run_test(test_commands);
        run_test(test_dump_types);
        run_test(test_dotnet_trace_providers);
        run_test(test_tracing_shapes);
        return tap_finish();
}
