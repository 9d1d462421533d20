/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What a tool's diagnostic IPC request (common/ipc-request.h) is decided as by the policy: its
 * command, its dump type, and for a CollectTracing its shape (what stock tool sends it) and the
 * providers the policy matches. The IPC codec below knows nothing of the policy; this module
 * stands above both. Pure: no I/O, no logging, no global state.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "common/dotnet-ipc.h"
#include "common/ipc-request.h"
#include "policy/policy.h"

/**
 * ipc_policy_command() - the policy command a request is decided as
 *
 * ProcessInfo 1-3: info; ProcessEnvironment: env; CollectTracing 1-5 and StopTracing: trace (a
 * CollectTracing is then decided by its shape, see ipc_policy_request()); GenerateCoreDump 1-3: dump; ResumeRuntime: resume; EnablePerfMap, DisablePerfMap: perfmap;
 * SetEnvironmentVariable: setenv; ApplyStartupHook: startup-hook; AttachProfiler and
 * StartupProfiler: profiler (the last three run the requester's code in the target, see
 * policy_command_runs_code()).
 *
 * Return: the command, or _POLICY_COMMAND_INVALID for one ipc_request_decode() never returns
 * (CollectTracing6 included).
 */
PolicyCommand ipc_policy_command(DotnetIpcCommand command);

/**
 * ipc_policy_dump_type() - .NET's DumpType as the policy's dump type
 *
 * Return: Normal (1): mini; WithHeap (2): heap; Triage (3): triage; Full (4): full;
 * _POLICY_DUMP_INVALID for anything else.
 */
PolicyDumpType ipc_policy_dump_type(uint32_t dump_type);

/*
 * What a CollectTracing is, by its shape: the providers, keywords, levels, arguments and rundown
 * a stock tool sends for it, so that the tool works under a grant of the dsctl command that does
 * the same (docs/proxy.md).
 */
typedef enum IpcTracingShape {
        IPC_TRACING_SHAPE_TRACE,        /* anything else */
        /* dotnet-counters: providers with keywords 0, Informational at most, and only
         * "EventCounterIntervalSec=SECONDS"; and maybe System.Diagnostics.Metrics with keywords 0x2
         * and SessionId=ID;Metrics=METER[\INSTRUMENT],...[;RefreshInterval=SECONDS][;MaxTimeSeries=N]
         * [;MaxHistograms=N][;ClientId=ID], each meter also one of the EventCounters providers; no rundown */
        IPC_TRACING_SHAPE_COUNTERS,
        /* dotnet-gcdump's heap session: Microsoft-Windows-DotNETRuntime alone, keywords 0x1980001
         * (GC, Type, GCHeapDump, GCHeapCollect, GCHeapAndTypeNames), Verbose, no arguments */
        IPC_TRACING_SHAPE_GCDUMP,
        /* dotnet-gcdump's first session, which flushes the type table: the sample profiler alone,
         * keywords 0xf00000000000, Informational, no arguments, no rundown */
        IPC_TRACING_SHAPE_GCDUMP_TYPES,
        /* dotnet-stack and dsctl stacks: the same as GCDUMP_TYPES, with a rundown to name the methods */
        IPC_TRACING_SHAPE_STACKS,
} IpcTracingShape;

/* The shape of @t, one of IpcTracingShape (IPC_TRACING_SHAPE_TRACE when it has none other). */
IpcTracingShape ipc_policy_tracing_shape(const IpcRequestTracing *t);

/* The policy command a shape is decided as: trace, counters, gcdump (both of gcdump's) or stacks. */
PolicyCommand ipc_policy_shape_command(IpcTracingShape shape);

/**
 * ipc_policy_request() - what policy_check() is to decide for @r
 * @providers: room for @n_providers PolicyProvider entries; IPC_REQUEST_PROVIDERS_MAX always suffices
 *
 * Sets the command, the dump type for dumps, and for CollectTracing the providers (names
 * pointing into @r, which must outlive *@ret) and the buffer. A CollectTracing is decided as
 * the command of its shape (ipc_policy_tracing_shape()): trace and counters with their
 * providers (counters: the EventCounters providers, not System.Diagnostics.Metrics), gcdump and
 * stacks with none, as dsctl's own are decided. A provider has arguments only
 * when they are non-empty: the .NET client sends "" for none. No trace profile and no
 * duration: the protocol has neither, so the agent enforces the rule's max_duration itself;
 * a trace is decided by its providers, which the policy matches against the profiles'
 * (policy.h), so a stock tool's --profile is admitted as that profile.
 *
 * Return: 0 and *@ret set; -EINVAL for a command ipc_request_decode() never returns;
 * -ENOBUFS when @n_providers is too small.
 */
int ipc_policy_request(const IpcRequest *r, PolicyProvider *providers, size_t n_providers,
                               PolicyRequest *ret);

/**
 * ipc_policy_trace_request() - a CollectTracing decided as a trace, whatever its shape
 *
 * As ipc_policy_request() decides a trace-shaped one: its providers and buffer. For a
 * request of another shape that may be a trace too: the sample profiler alone is dotnet-stack's
 * and dotnet-gcdump's, and also dotnet-trace's dotnet-sampled-thread-time.
 *
 * Return: 0 and *@ret set; -EINVAL for a request other than CollectTracing 1 to 5; -ENOBUFS.
 */
int ipc_policy_trace_request(const IpcRequest *r, PolicyProvider *providers, size_t n_providers,
                                     PolicyRequest *ret);
