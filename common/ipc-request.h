/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One request of the .NET diagnostic IPC protocol, as a tool sends it (dotnet-trace,
 * Microsoft.Diagnostics.NETCore.Client): decoded strictly into typed values and encoded again
 * from those values; and the replies the agent answers with in the runtime's place. Pure: no
 * I/O, no logging, no global state. What the policy decides a request as (its command, its
 * tracing shape) is policy/ipc-policy.h's: this layer knows nothing of the policy.
 *
 * The decoder accepts only what ipc_request_encode() writes back byte for byte, so the
 * runtime never receives a byte the agent did not encode from a value it checked.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dotnet-ipc.h"
#include "common/eventpipe-provider.h" /* EventPipeConfig and its limits */

/*
 * Limits. A message is at most DOTNET_IPC_MESSAGE_MAX (65535) bytes, header included, so a
 * payload at most IPC_REQUEST_PAYLOAD_MAX; event ids and profiler client data are bounded by
 * that alone. Strings are measured in bytes of their UTF-8 form.
 */
#define IPC_REQUEST_PAYLOAD_MAX (DOTNET_IPC_MESSAGE_MAX - DOTNET_IPC_HEADER_SIZE)
#define IPC_REQUEST_PROVIDERS_MAX EVENTPIPE_PROVIDERS_MAX   /* 32; the runtime takes up to 1000 */
#define IPC_REQUEST_PROVIDER_NAME_MAX EVENTPIPE_NAME_MAX    /* 256 */
#define IPC_REQUEST_ARGUMENTS_MAX EVENTPIPE_ARGUMENTS_MAX   /* 2048 */
#define IPC_REQUEST_STRING_MAX 4095 /* any other string: paths, environment names and values */
/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" and its NUL */
#define IPC_REQUEST_CLSID_STRING_SIZE 37

enum {
        _IPC_REQUEST_E_SUCCESS,
        IPC_REQUEST_E_TRUNCATED,          /* the message, or a field of it, ends early */
        IPC_REQUEST_E_TRAILING,           /* bytes after the last field, or after the header's size */
        IPC_REQUEST_E_BAD_HEADER,         /* wrong magic, reserved field not 0, size below 20 */
        IPC_REQUEST_E_OVERSIZED,          /* over 65535 bytes, or a string over its limit */
        IPC_REQUEST_E_BAD_STRING,         /* see ipc_request_decode() */
        IPC_REQUEST_E_TOO_MANY_PROVIDERS, /* more than IPC_REQUEST_PROVIDERS_MAX */
        IPC_REQUEST_E_BAD_VALUE,          /* a number, flag or list outside what the command allows */
        IPC_REQUEST_E_UNKNOWN_COMMAND,    /* a command set or id no runtime knows */
        IPC_REQUEST_E_UNSUPPORTED,        /* known to runtimes, not carried: CollectTracing6, user_events */
};

/* .NET's DumpType, the second field of GenerateCoreDump 1 to 3 */
#define IPC_REQUEST_DUMP_NORMAL 1u
#define IPC_REQUEST_DUMP_WITH_HEAP 2u
#define IPC_REQUEST_DUMP_TRIAGE 3u
#define IPC_REQUEST_DUMP_FULL 4u
/* GenerateCoreDump2 and 3 flags (createdump --diag, --verbose, --crashreport, --crashreportonly) */
#define IPC_REQUEST_DUMP_FLAG_LOGGING 0x1u
#define IPC_REQUEST_DUMP_FLAG_VERBOSE_LOGGING 0x2u
#define IPC_REQUEST_DUMP_FLAG_CRASH_REPORT 0x4u
#define IPC_REQUEST_DUMP_FLAG_CRASH_REPORT_ONLY 0x8u
#define IPC_REQUEST_DUMP_FLAGS_ALL 0xFu
/* EnablePerfMap: 1 perf map and jitdump, 2 jitdump only, 3 perf map only */
#define IPC_REQUEST_PERF_MAP_TYPE_MAX 3u

/* CollectTracing 1 to 5, always a streaming session. */
typedef struct IpcRequestTracing {
        uint32_t buffer_mb;       /* > 0; no upper bound but the policy's */
        uint32_t format;          /* DOTNET_IPC_FORMAT_NETPERF or DOTNET_IPC_FORMAT_NETTRACE */
        uint64_t rundown_keyword; /* as sent by 4 and 5; 1 to 3: DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT or 0 */
        bool stackwalk;           /* as sent by 3 to 5; true for 1 and 2 */
        /* The providers: names UTF-8 of [A-Za-z0-9._-], distinct; arguments NULL when the
         * client sent none, "" when it sent an empty string (the .NET client always sends at
         * least ""). config.rundown is rundown_keyword != 0. */
        EventPipeConfig config;
        DotnetIpcEventFilter *filters; /* CollectTracing5: config.n_providers of them; else NULL */
        size_t n_filters;              /* how many filters holds, for freeing them */
} IpcRequestTracing;

/* GenerateCoreDump 1 to 3 */
typedef struct IpcRequestDump {
        char *path;     /* the tool's path in its own view: never NULL or empty */
        uint32_t type;  /* IPC_REQUEST_DUMP_* */
        uint32_t flags; /* GenerateCoreDump: its diagnostics boolean, 0 or 1; 2 and 3: IPC_REQUEST_DUMP_FLAG_* */
} IpcRequestDump;

/* AttachProfiler and StartupProfiler */
typedef struct IpcRequestProfiler {
        uint32_t attach_timeout; /* AttachProfiler; the .NET client sends seconds, the spec says ms */
        uint8_t clsid[16];       /* .NET's Guid.ToByteArray() layout; never all zero */
        char *path;              /* a native library in the target's view: never NULL or empty */
        uint8_t *client_data;    /* AttachProfiler; NULL when client_data_size is 0 */
        size_t client_data_size;
} IpcRequestProfiler;

/* A decoded request. Only the member its command names is set; the others are zero. */
typedef struct IpcRequest {
        DotnetIpcCommand command;
        IpcRequestTracing tracing;   /* CollectTracing 1 to 5 */
        uint64_t session_id;         /* StopTracing: the id as the tool knows it */
        IpcRequestDump dump;         /* GenerateCoreDump 1 to 3 */
        IpcRequestProfiler profiler; /* AttachProfiler, StartupProfiler */
        uint32_t perf_map_type;      /* EnablePerfMap: 1 to IPC_REQUEST_PERF_MAP_TYPE_MAX */
        char *env_name;              /* SetEnvironmentVariable: never NULL or empty, no '=' */
        char *env_value;             /* SetEnvironmentVariable: NULL unsets the variable */
        char *startup_hook;          /* ApplyStartupHook: a managed assembly's path, never NULL or empty */
} IpcRequest;

#define IPC_REQUEST_NULL {}

/**
 * ipc_request_decode() - decode and validate one whole client request message
 * @msg: the message, header included, exactly as it arrived
 * @len: its length; the header's size field must equal it
 *
 * Knows every request a runtime of .NET 5 to 10 takes: ProcessInfo 1 to 3, ResumeRuntime,
 * ProcessEnvironment, EnablePerfMap and DisablePerfMap (empty payloads but EnablePerfMap's
 * u32 type); StopTracing (exactly a u64); CollectTracing 1 to 5 (streaming sessions);
 * GenerateCoreDump 1 to 3; SetEnvironmentVariable, ApplyStartupHook, AttachProfiler and
 * StartupProfiler. Every byte must belong to a field: nothing may follow the last one.
 *
 * Stricter than the runtime, so that what is accepted re-encodes byte for byte: booleans
 * are 0 or 1, and a string (u32 count of UTF-16 units with the terminator, then the units)
 * must lie within the payload, end in its NUL and nowhere before it, and be well-formed
 * UTF-16 (no lone surrogates). IPC_REQUEST_E_BAD_STRING also covers a required string that
 * is null (count 0) or empty: provider names, dump, profiler and startup hook paths,
 * environment variable names (which may not hold '='); and a provider name of anything but
 * [A-Za-z0-9._-] (so never "*", which the runtime takes as every provider at once).
 * IPC_REQUEST_E_BAD_VALUE covers: a zero buffer, a format above 1, a level above 5, no
 * providers, a provider named twice, a dump type outside 1..4, unknown dump flags,
 * GenerateCoreDump's diagnostics other than 0 or 1, a perf map type outside 1..3, an all-zero
 * CLSID, a session type other than 0 (streaming) or 1 (user_events).
 *
 * Return: 0 and *@ret set (free it with ipc_request_done()); IPC_REQUEST_E_TRUNCATED,
 * IPC_REQUEST_E_TRAILING, IPC_REQUEST_E_BAD_HEADER, IPC_REQUEST_E_OVERSIZED,
 * IPC_REQUEST_E_BAD_STRING, IPC_REQUEST_E_TOO_MANY_PROVIDERS, IPC_REQUEST_E_BAD_VALUE,
 * IPC_REQUEST_E_UNKNOWN_COMMAND, IPC_REQUEST_E_UNSUPPORTED (CollectTracing6, and
 * CollectTracing5 for a user_events session, which needs a file descriptor passed along);
 * -ENOMEM. *@ret is untouched unless 0 is returned.
 */
int ipc_request_decode(const uint8_t *msg, size_t len, IpcRequest *ret);

/* Frees what ipc_request_decode() allocated and resets *@r to IPC_REQUEST_NULL; NULL is fine. */
void ipc_request_done(IpcRequest *r);

/**
 * ipc_request_encode() - the message for @r, as the .NET client would write it
 *
 * For what ipc_request_decode() returned, the bytes it decoded. The agent may change the
 * values first (a smaller buffer, a provider dropped); CollectTracing goes through
 * dotnet_ipc_collect_tracing_encode_command(), so the version is kept and must still be
 * able to say what the values ask for. Send the version the tool sent: tools find out what
 * a runtime supports from its IPC_REQUEST_E_UNKNOWN_COMMAND-like replies and fall back.
 *
 * Return: 0 and *@ret_size; IPC_REQUEST_E_BAD_VALUE when the values cannot be encoded (the
 * decoder's rules, or options the CollectTracing version cannot say); IPC_REQUEST_E_OVERSIZED
 * when the message would exceed 65535 bytes; -EINVAL for a command the decoder never
 * returns; -ENOBUFS when @buf_size is too small (DOTNET_IPC_MESSAGE_MAX always suffices).
 */
int ipc_request_encode(const IpcRequest *r, uint8_t *buf, size_t buf_size, size_t *ret_size);

/**
 * ipc_request_error_hresult() - the HRESULT a runtime would answer a rejected request with
 * @error: what ipc_request_decode() returned, not 0
 *
 * IPC_REQUEST_E_UNKNOWN_COMMAND and IPC_REQUEST_E_UNSUPPORTED: DOTNET_IPC_HR_UNKNOWN_COMMAND,
 * which makes tools fall back to an older version of the command, as with an older runtime;
 * the other positive codes: DOTNET_IPC_HR_BAD_ENCODING; a negative errno: DOTNET_IPC_HR_FAIL.
 */
uint32_t ipc_request_error_hresult(int error);

/**
 * ipc_request_reply_error_encode() - the runtime's error reply: command set 0xFF, id 0xFF
 * @hresult: e.g. DOTNET_IPC_HR_ACCESS_DENIED for a policy denial
 * @message: NULL, or UTF-8 text after the HRESULT; only GenerateCoreDump3's clients read one
 *      (the .NET client shows it as the exception's message)
 *
 * Without @message the reply is the 24 bytes every client understands.
 *
 * Return: 0 and *@ret_size; IPC_REQUEST_E_BAD_VALUE for @message not valid UTF-8;
 * IPC_REQUEST_E_OVERSIZED past 65535 bytes; -ENOBUFS.
 */
int ipc_request_reply_error_encode(uint32_t hresult, const char *message, uint8_t *buf, size_t buf_size,
                                   size_t *ret_size);

/**
 * ipc_request_reply_ok_encode() - an OK reply (command set 0xFF, id 0x00) with @payload
 *
 * Payloads tools expect: a u32 HRESULT 0 (4 bytes) after dumps, ResumeRuntime, perf maps,
 * SetEnvironmentVariable, ApplyStartupHook and the profiler commands; a u64 session id
 * (8 bytes) after CollectTracing and StopTracing.
 *
 * Return: 0 and *@ret_size; IPC_REQUEST_E_OVERSIZED past 65535 bytes; -ENOBUFS.
 */
int ipc_request_reply_ok_encode(const uint8_t *payload, size_t payload_size, uint8_t *buf, size_t buf_size,
                                size_t *ret_size);

/**
 * ipc_request_clsid_to_string() - a profiler CLSID as .NET prints a Guid, for audit records
 *
 * Writes "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lower case; the first three groups are
 * little-endian on the wire) and its NUL into @buf. Cannot fail.
 */
void ipc_request_clsid_to_string(const uint8_t clsid[16], char buf[IPC_REQUEST_CLSID_STRING_SIZE]);
