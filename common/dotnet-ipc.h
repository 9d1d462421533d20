/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* .NET diagnostic IPC codec: pure encode/decode over bounded buffers, no I/O */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DOTNET_IPC_HEADER_SIZE 20
#define DOTNET_IPC_MESSAGE_MAX 65535
/* The magic is "DOTNET_IPC_V1" followed by one NUL: 14 bytes. */
#define DOTNET_IPC_MAGIC_SIZE 14

enum {
        _DOTNET_IPC_E_SUCCESS,
        DOTNET_IPC_E_TRUNCATED, /* the buffer ends before the item does */
        DOTNET_IPC_E_MALFORMED, /* the bytes can never form a valid item */
        DOTNET_IPC_E_TOO_LARGE, /* encoding would exceed the 64 KiB message limit */
};

typedef enum DotnetIpcCommandSet {
        DOTNET_IPC_SET_DUMP = 0x01,
        DOTNET_IPC_SET_EVENTPIPE = 0x02,
        DOTNET_IPC_SET_PROFILER = 0x03,
        DOTNET_IPC_SET_PROCESS = 0x04,
        DOTNET_IPC_SET_SERVER = 0xFF,
} DotnetIpcCommandSet;

/* Command codes are set << 8 | id. */
typedef enum DotnetIpcCommand {
        DOTNET_IPC_GENERATE_CORE_DUMP = 0x0101,
        DOTNET_IPC_GENERATE_CORE_DUMP2 = 0x0102,
        DOTNET_IPC_GENERATE_CORE_DUMP3 = 0x0103,
        DOTNET_IPC_STOP_TRACING = 0x0201,
        DOTNET_IPC_COLLECT_TRACING = 0x0202,
        DOTNET_IPC_COLLECT_TRACING2 = 0x0203,
        DOTNET_IPC_COLLECT_TRACING3 = 0x0204,
        DOTNET_IPC_COLLECT_TRACING4 = 0x0205,
        DOTNET_IPC_COLLECT_TRACING5 = 0x0206,
        DOTNET_IPC_COLLECT_TRACING6 = 0x0207,
        DOTNET_IPC_ATTACH_PROFILER = 0x0301,
        DOTNET_IPC_STARTUP_PROFILER = 0x0302,
        DOTNET_IPC_PROCESS_INFO = 0x0400,
        DOTNET_IPC_RESUME_RUNTIME = 0x0401,
        DOTNET_IPC_PROCESS_ENVIRONMENT = 0x0402,
        DOTNET_IPC_SET_ENVIRONMENT_VARIABLE = 0x0403,
        DOTNET_IPC_PROCESS_INFO2 = 0x0404,
        DOTNET_IPC_ENABLE_PERF_MAP = 0x0405,
        DOTNET_IPC_DISABLE_PERF_MAP = 0x0406,
        DOTNET_IPC_APPLY_STARTUP_HOOK = 0x0407,
        DOTNET_IPC_PROCESS_INFO3 = 0x0408,
        DOTNET_IPC_SERVER_OK = 0xFF00,
        DOTNET_IPC_SERVER_ERROR = 0xFFFF,
} DotnetIpcCommand;

/* HRESULTs the runtime puts on the wire */
#define DOTNET_IPC_HR_OK 0x00000000u
#define DOTNET_IPC_HR_BAD_ENCODING 0x80131384u
#define DOTNET_IPC_HR_UNKNOWN_COMMAND 0x80131385u
#define DOTNET_IPC_HR_UNKNOWN_MAGIC 0x80131386u
#define DOTNET_IPC_HR_NOT_SUPPORTED 0x80131515u
#define DOTNET_IPC_HR_FAIL 0x80004005u
#define DOTNET_IPC_HR_NOT_YET_AVAILABLE 0x8013135Bu
#define DOTNET_IPC_HR_RUNTIME_UNINITIALIZED 0x80131371u
#define DOTNET_IPC_HR_INVALID_ARG 0x80070057u
#define DOTNET_IPC_HR_INSUFFICIENT_BUFFER 0x8007007Au
#define DOTNET_IPC_HR_ENVVAR_NOT_FOUND 0x800000CBu
#define DOTNET_IPC_HR_PROFILER_ALREADY_ACTIVE 0x8013136Au

typedef enum DotnetIpcCommandFlags {
        /* the runtime keeps the connection open and streams after the reply */
        DOTNET_IPC_FLAG_STREAMING = 1u << 0,
        /* the command makes the target run code or change its own behaviour */
        DOTNET_IPC_FLAG_RUNS_CODE = 1u << 1,
        /* the reply carries secrets (memory, environment) */
        DOTNET_IPC_FLAG_READS_SECRETS = 1u << 2,
} DotnetIpcCommandFlags;

typedef struct DotnetIpcCommandInfo {
        DotnetIpcCommand command;
        const char *name;
        unsigned flags;
} DotnetIpcCommandInfo;

typedef struct DotnetIpcHeader {
        uint16_t size; /* whole message, header included */
        uint8_t command_set;
        uint8_t command_id;
        uint16_t reserved;
} DotnetIpcHeader;

/* A decoded server reply. @payload points into the caller's buffer. */
typedef struct DotnetIpcResponse {
        bool ok;
        uint32_t hresult; /* 0 for OK replies whose payload is not an HRESULT */
        const uint8_t *payload;
        size_t payload_size;
} DotnetIpcResponse;

typedef struct DotnetProcessInfo {
        uint32_t version;       /* ProcessInfo3's version field; 0 for ProcessInfo/ProcessInfo2 */
        uint64_t pid;           /* in the runtime's own pid namespace */
        uint8_t cookie[16];
        char *command_line;     /* the strings are UTF-8; absent ones are NULL */
        char *os;
        char *arch;
        char *entry_assembly;   /* ProcessInfo2 and later */
        char *runtime_version;  /* ProcessInfo2 and later */
        char *runtime_identifier; /* ProcessInfo3 version 1 and later */
} DotnetProcessInfo;

#define DOTNET_PROCESS_INFO_NULL {}

/* catalogue */
const DotnetIpcCommandInfo *dotnet_ipc_command_lookup(uint8_t command_set, uint8_t command_id);
const DotnetIpcCommandInfo *dotnet_ipc_command_table(size_t *ret_count);
const char *dotnet_ipc_hresult_name(uint32_t hresult);

/* header */
void dotnet_ipc_header_encode(uint8_t buf[DOTNET_IPC_HEADER_SIZE], uint16_t size, uint8_t command_set,
                              uint8_t command_id);
int dotnet_ipc_header_decode(const uint8_t *buf, size_t len, DotnetIpcHeader *ret);
/*
 * Whether the runtime's reply to the request @buf (a whole encoded request) is
 * the last it sends on that connection, as for ProcessInfo and ResumeRuntime:
 * no stream and no block follows it, so a reader may read past the reply's end
 * without taking anything from whoever reads next. False when not sure. Pure.
 */
bool dotnet_ipc_reply_ends_exchange(const uint8_t *buf, size_t len);

/* requests */
int dotnet_ipc_request_encode(DotnetIpcCommand command, const uint8_t *payload, size_t payload_size,
                              uint8_t *buf, size_t buf_size, size_t *ret_size);

/* strings: u32 count of UTF-16 units including the NUL, then UTF-16LE; count 0 is null */
int dotnet_ipc_string_encode(const char *utf8, uint8_t *buf, size_t buf_size, size_t *ret_size);
int dotnet_ipc_string_decode(const uint8_t *buf, size_t len, char **ret_utf8, size_t *ret_consumed);

/* responses */
int dotnet_ipc_response_decode(const uint8_t *msg, size_t len, DotnetIpcResponse *ret);
int dotnet_process_info_decode(DotnetIpcCommand command, const uint8_t *payload, size_t payload_size,
                               DotnetProcessInfo *ret);
void dotnet_process_info_done(DotnetProcessInfo *info);

/*
 * The advertise message: what a runtime started with DOTNET_DiagnosticPorts=PATH,connect
 * writes first on every connection it makes to a listening tool (ipc-protocol.md 4.3).
 * 34 bytes: the magic "ADVR_V1" and a NUL, the runtime instance cookie (the same 16 bytes as
 * DotnetProcessInfo.cookie, comparable with memcmp()), the pid as a u64 LE, a u16 reserved 0.
 * Nothing of it is proven: the pid is only what the peer claims.
 */
#define DOTNET_IPC_ADVERTISE_SIZE 34

typedef struct DotnetIpcAdvertise {
        uint8_t cookie[16];
        uint64_t pid; /* in the runtime's own, innermost pid namespace; 1..INT32_MAX once decoded */
} DotnetIpcAdvertise;

/*
 * dotnet_ipc_advertise_decode() - decode one advertise message
 * @size: must be exactly DOTNET_IPC_ADVERTISE_SIZE
 *
 * Stricter than the runtime's readers: the reserved field must be zero, and the pid must
 * be one a pid_t can hold (1 to INT32_MAX), so that it can be compared with a kernel's.
 *
 * Return: 0 with *@ret set; -EINVAL for another @size; -EBADMSG for a wrong magic, a non-zero
 * reserved field, or a pid of 0 or above INT32_MAX. *@ret is untouched on failure.
 */
int dotnet_ipc_advertise_decode(const uint8_t *buf, size_t size, DotnetIpcAdvertise *ret);

/*
 * dotnet_ipc_advertise_encode() - write @a as a runtime does, for tests and tools
 * @size: of @buf, at least DOTNET_IPC_ADVERTISE_SIZE; exactly that many bytes are written
 *
 * What it writes decodes to @a again.
 *
 * Return: 0; -EINVAL for a pid of 0 or above INT32_MAX; -ENOBUFS if @size is too small.
 * @buf is untouched on failure.
 */
int dotnet_ipc_advertise_encode(const DotnetIpcAdvertise *a, uint8_t *buf, size_t size);

/*
 * ProcessEnvironment: the OK reply (u32 size, u16 0) announces a block that follows it on the
 * same connection: a u32 count, then that many strings "NAME=VALUE". A block is at most
 * DOTNET_IPC_ENVIRONMENT_MAX bytes here: the 2 MiB of arguments and environment a process
 * may start with under the usual 8 MiB stack limit, in UTF-16.
 */
#define DOTNET_IPC_ENVIRONMENT_MAX (4u * 1024u * 1024u)

typedef struct DotnetEnvVariable {
        char *name;  /* UTF-8, not empty, no '='; owns the allocation */
        char *value; /* UTF-8, may be empty; points into name's allocation */
} DotnetEnvVariable;

typedef struct DotnetEnvironment {
        DotnetEnvVariable *variables;
        size_t n;
} DotnetEnvironment;

#define DOTNET_ENVIRONMENT_NULL {}

int dotnet_ipc_environment_size_decode(const DotnetIpcResponse *reply, uint32_t *ret_size);
int dotnet_environment_decode(const uint8_t *block, size_t size, DotnetEnvironment *ret);
void dotnet_environment_done(DotnetEnvironment *env);
/* @variables need not come from the decoder: value is read on its own (a redacted copy, say). */
int dotnet_environment_encode(const DotnetEnvVariable *variables, size_t n, uint8_t **ret_block, size_t *ret_size);

/* EventPipe sessions */
struct EventPipeConfig;
int dotnet_ipc_collect_tracing_encode(const struct EventPipeConfig *config, uint32_t buffer_mb, uint8_t *buf,
                                      size_t buf_size, size_t *ret_size);
int dotnet_ipc_stop_tracing_encode(uint64_t session_id, uint8_t *buf, size_t buf_size, size_t *ret_size);
int dotnet_ipc_session_id_decode(const DotnetIpcResponse *reply, uint64_t *ret_session_id);

/*
 * CollectTracing in each of its versions 1 to 5, for requests the agent decodes from a tool
 * (common/ipc-request.h) and encodes again. dotnet_ipc_collect_tracing_encode() above stays
 * what the agent's own sessions send.
 */
#define DOTNET_IPC_FORMAT_NETPERF 0u
#define DOTNET_IPC_FORMAT_NETTRACE 1u
/* the rundown keywords that CollectTracing 1 to 3 imply when they ask for rundown, and the
 * .NET client's default for 4 and 5: GC, Loader, Jit, NGen, 0x100, ILToNativeMap, ThreadTransfer */
#define DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT 0x80020139ull
/* E_ACCESSDENIED: never sent by a runtime; the agent answers a request its policy refuses with it */
#define DOTNET_IPC_HR_ACCESS_DENIED 0x80070005u

/* CollectTracing5's per-provider filter. With @enable only the listed events are enabled,
 * without it all but them; { false, none } lets everything through. */
typedef struct DotnetIpcEventFilter {
        bool enable;
        uint32_t *event_ids;
        size_t n_event_ids;
} DotnetIpcEventFilter;

/* What a CollectTracing request says besides its buffer and providers. */
typedef struct DotnetIpcTracingOptions {
        uint32_t format;          /* DOTNET_IPC_FORMAT_* */
        uint64_t rundown_keyword; /* 0: no rundown */
        bool stackwalk;
        const DotnetIpcEventFilter *filters; /* CollectTracing5 only: one per provider, or NULL for none */
} DotnetIpcTracingOptions;

int dotnet_ipc_collect_tracing_encode_command(DotnetIpcCommand command, const struct EventPipeConfig *config,
                                              uint32_t buffer_mb, const DotnetIpcTracingOptions *options,
                                              uint8_t *buf, size_t buf_size, size_t *ret_size);
