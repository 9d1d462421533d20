/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl <-> dsagent protocol: versioned, bounded frames of typed fields (docs/protocol.md) */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC "DSAG"
#define WIRE_VERSION 1
#define WIRE_HEADER_SIZE 12
#define WIRE_PAYLOAD_MAX (64 * 1024)
#define WIRE_FRAME_MAX (WIRE_HEADER_SIZE + WIRE_PAYLOAD_MAX)
#define WIRE_FIELDS_MAX 32
#define WIRE_FIELD_HEADER_SIZE 6

enum {
        _WIRE_E_SUCCESS,
        WIRE_E_TRUNCATED,       /* more bytes are needed for a complete frame */
        WIRE_E_MALFORMED,       /* the bytes can never form a valid frame */
        WIRE_E_VERSION,         /* well-formed header of a protocol version we do not speak */
        WIRE_E_MISSING,         /* the message has no such field */
        WIRE_E_FULL,            /* the frame would exceed WIRE_PAYLOAD_MAX or WIRE_FIELDS_MAX */
};

typedef enum WireType {
        /* requests, client to agent */
        WIRE_REQUEST_PS = 0x0001,
        WIRE_REQUEST_INFO = 0x0002,
        WIRE_REQUEST_EXPLAIN = 0x0003,
        WIRE_REQUEST_DUMP = 0x0004,
        WIRE_REQUEST_DUMPS = 0x0005,
        WIRE_REQUEST_TRACE = 0x0006,
        WIRE_REQUEST_COUNTERS = 0x0007,
        WIRE_REQUEST_REMOVE_DUMP = 0x0008, /* PATH: a dump of dump_dir the caller asked for */
        WIRE_REQUEST_IPC = 0x0009,         /* IPC_MESSAGE: one diagnostic IPC request of a tool (dsctl port) */
        WIRE_REQUEST_ENV = 0x000A,         /* the target's environment, secrets redacted under policy */
        WIRE_REQUEST_STACKS = 0x000B,      /* a session whose stream holds every thread's managed stack */
        WIRE_REQUEST_EXCEPTIONS = 0x000C,  /* a session of the runtime's exception events */
        WIRE_REQUEST_LOGS = 0x000D,        /* a session of Microsoft-Extensions-Logging's events */
        WIRE_REQUEST_RESUME = 0x000E,      /* ResumeRuntime: a runtime suspended at startup starts its code */
        WIRE_REQUEST_GCDUMP = 0x000F,      /* a session whose stream holds a GC heap dump (the runtime's heap events) */
        WIRE_REQUEST_RESOLVE = 0x0010,     /* the pid a UNIT names for the caller (dsctl exec UNIT) */
        WIRE_REQUEST_COLLECT = 0x0011,     /* the [[collect]] tables the caller reads, and what they watch */
        WIRE_REQUEST_CRASHES = 0x0012,     /* the crashes systemd-coredump caught that the caller may see (TIME: since) */
        WIRE_REQUEST_CRASH = 0x0013,       /* CRASH_ID: that crash's core, decompressed into dump_dir (WANT_FD) */
        WIRE_REQUEST_DUMP_URL = 0x0014,    /* PATH: a presigned URL of that artifact's uploaded object (EGRESS) */
        /* replies, agent to client; every reply ends with DONE or ERROR */
        WIRE_REPLY_PROCESS = 0x8001,
        WIRE_REPLY_DONE = 0x8002,
        WIRE_REPLY_ERROR = 0x8003,
        WIRE_REPLY_VERDICT = 0x8004,
        WIRE_REPLY_DUMP = 0x8005,       /* a dump; for a dump request with WANT_FD, its fd comes with it */
        WIRE_REPLY_STREAM = 0x8006,     /* a session started; the read end of its stream's pipe comes with it */
        WIRE_REPLY_SESSION_END = 0x8007, /* how the session ended, after its stream's pipe was closed */
        WIRE_REPLY_PROGRESS = 0x8008,   /* not terminal: the request's deadline, and how far a dump got */
        WIRE_REPLY_IPC = 0x8009,        /* not terminal: IPC_MESSAGE holds bytes for the tool, as they are */
        WIRE_REPLY_ENV = 0x800A,        /* one variable: ENV_NAME, ENV_VALUE or REDACTED */
        WIRE_REPLY_COLLECT = 0x800B,    /* a [[collect]] table (RULE), or one process it watches (and PID) */
        WIRE_REPLY_CRASH = 0x800C,      /* one crash (CRASH_ID); for a CRASH request, DUMP follows with its core */
        WIRE_REPLY_URL = 0x800D,        /* a presigned URL: PATH, EGRESS (here the object's key), URL, TIME (its end) */
} WireType;

typedef enum WireFieldKind {
        WIRE_KIND_U32,
        WIRE_KIND_U64,
        WIRE_KIND_STRING, /* UTF-8, no NUL, at most WIRE_STRING_MAX bytes */
        /* No NUL, at most WIRE_STRING_MAX bytes, not necessarily UTF-8: a fact the agent read from a
         * process (a path, a command line, a name), as the kernel or the runtime gave it. A process
         * chooses these bytes: refusing them would drop the process from a reply; the reader escapes
         * them for its output instead (text_escape(), text_json_string()). */
        WIRE_KIND_TEXT,
        WIRE_KIND_COOKIE, /* exactly 16 bytes */
        WIRE_KIND_BYTES,  /* any bytes, as many as the frame holds */
} WireFieldKind;

#define WIRE_STRING_MAX (32 * 1024)

typedef enum WireTag {
        WIRE_TAG_PID = 1,               /* u32: target pid as the agent sees it */
        WIRE_TAG_UID = 2,               /* u32: target owner (effective uid) */
        WIRE_TAG_UNIT = 3,              /* string: systemd unit of the target */
        WIRE_TAG_NAME = 4,              /* text: process or entry assembly name */
        WIRE_TAG_EXE = 5,               /* text */
        WIRE_TAG_COMMAND_LINE = 6,      /* text */
        WIRE_TAG_OS = 7,                /* text */
        WIRE_TAG_ARCH = 8,              /* text */
        WIRE_TAG_RUNTIME_VERSION = 9,   /* text */
        WIRE_TAG_ENTRY_ASSEMBLY = 10,   /* text */
        WIRE_TAG_RUNTIME_ID = 11,       /* text: portable RID, e.g. linux-x64 */
        WIRE_TAG_RUNTIME_PID = 12,      /* u64: pid inside the target's pid namespace */
        WIRE_TAG_COOKIE = 13,           /* bytes[16]: runtime instance cookie */
        WIRE_TAG_ERROR = 14,            /* u32: WireError */
        WIRE_TAG_MESSAGE = 15,          /* string: human-readable detail */
        WIRE_TAG_HRESULT = 16,          /* u32: the runtime's HRESULT */
        WIRE_TAG_REQUEST_ID = 17,       /* u64: id of the audit record */
        WIRE_TAG_COMMAND = 18,          /* string: a policy command name (explain) */
        WIRE_TAG_DUMP_TYPE = 19,        /* string: mini, heap, triage, full */
        WIRE_TAG_TRACE_PROFILE = 20,    /* string */
        WIRE_TAG_DURATION = 21,         /* u64: seconds */
        WIRE_TAG_ALLOWED = 22,          /* u32: 1 allowed, 0 denied */
        WIRE_TAG_RULE = 23,             /* string: the rule that decided */
        WIRE_TAG_PATH = 24,             /* string: where the agent stored something */
        WIRE_TAG_SIZE = 25,             /* u64: bytes */
        WIRE_TAG_WANT_FD = 26,          /* u32: 1 to get a read-only fd of the result */
        WIRE_TAG_READABLE = 27,         /* u32: 1 when the requester may read the result */
        WIRE_TAG_TIME = 28,             /* u64: microseconds since the epoch */
        WIRE_TAG_PROVIDERS = 29,        /* string: Provider[:Keywords[:Level[:Args]]],... or counter providers */
        WIRE_TAG_BUFFER_MB = 30,        /* u32: the runtime's buffer for the session */
        WIRE_TAG_INTERVAL = 31,         /* u32: seconds between counter samples */
        WIRE_TAG_ENDED = 32,            /* string: how a session ended */
        WIRE_TAG_COMPLETE = 33,         /* u32: 1 when the runtime closed the stream after a stop */
        WIRE_TAG_SIZE_LIMIT = 34,       /* u64: bytes after which the session is stopped */
        WIRE_TAG_PROGRESS = 35,         /* u32: 1 to get PROGRESS frames while the request runs */
        WIRE_TAG_DEADLINE = 36,         /* u64: microseconds from this frame until the agent gives up */
        WIRE_TAG_IPC_MESSAGE = 37,      /* bytes: a diagnostic IPC message, at most WIRE_IPC_MESSAGE_MAX */
        WIRE_TAG_ENV_NAME = 38,         /* text: an environment variable's name */
        WIRE_TAG_ENV_VALUE = 39,        /* text: its value (absent when redacted) */
        WIRE_TAG_REDACTED = 40,         /* u32: 1 when the value is withheld (policy_env_value_hidden()) */
        WIRE_TAG_LOG_LEVEL = 41,        /* string: the lowest ILogger level asked for (logs) */
        WIRE_TAG_LOG_CATEGORY = 42,     /* string: a category prefix (logs) */
        WIRE_TAG_PORT = 43,             /* string: the diagnostic port a runtime connected in on */
        WIRE_TAG_SUSPENDED = 44,        /* u32: 1 when the runtime waits, suspended at startup, for a resume */
        WIRE_TAG_CONTAINER = 45,        /* string: the target's container id, 64 lowercase hex (its cgroup's name) */
        WIRE_TAG_POD_UID = 46,          /* string: the target's Kubernetes pod uid (its cgroup's name) */
        WIRE_TAG_CGROUP = 47,           /* text: the target's cgroup path, as the kernel tells it */
        /* where root does not vouch for that path (a delegated subtree's, agent/targets/cgroupfs.h): the names on it
         * are anybody's, so never sent as CONTAINER or POD_UID */
        WIRE_TAG_UNVERIFIED_CONTAINER = 48, /* string: a container id such a path names */
        WIRE_TAG_UNVERIFIED_POD_UID = 49,   /* string: a pod uid such a path names */
        WIRE_TAG_CGROUP_UNVERIFIED = 50,    /* u32: 1 when root does not vouch for CGROUP: no rule matches it */
        WIRE_TAG_COMMANDS = 51,         /* string: ps: the policy commands the requester holds on it, comma-separated */
        WIRE_TAG_CRASH_ID = 52,         /* string: a crash, "SECONDS-PID" (agent/crashes/crash-entry.h) */
        WIRE_TAG_SIGNAL = 53,           /* u32: the signal a process died of */
        WIRE_TAG_STORED = 54,           /* u32: 1 when the crash's core is still stored */
        WIRE_TAG_DOTNET = 55,           /* u32: 1 when the process mapped libcoreclr.so, 0 when not; absent: unknown */
        WIRE_TAG_TRUNCATED = 56,        /* u32: 1 when systemd-coredump cut the core at its size limit */
        WIRE_TAG_RESULT = 57,           /* string: collect: how a table's action last ended, "collected" or "failed" */
        WIRE_TAG_RESULT_TIME = 58,      /* u64: then, in microseconds since the epoch */
        WIRE_TAG_RESULT_PID = 59,       /* u32: a table's last result: the process it was about */
        WIRE_TAG_REASON = 60,           /* text: why it failed, as its record says */
        WIRE_TAG_EGRESS = 61,           /* string: explain, collect: the [egress.NAME] store its artifacts go to;
                                         * dumps: the artifact's upload (its label user.dsagent.egress):
                                         * "pending:STORE", "uploaded:STORE:KEY" or "failed:STORE:RESULT";
                                         * REPLY_URL: the object's key */
        WIRE_TAG_EGRESS_STORE = 62,     /* string: that store's ENDPOINT/BUCKET/PREFIX (never its credentials) */
        WIRE_TAG_URL = 63,              /* string: a presigned URL of an uploaded artifact (the last tag the
                                         * decoder's 64-bit mask of seen tags holds: a new one widens it) */
        _WIRE_TAG_MAX,
} WireTag;

typedef enum WireError {
        WIRE_ERROR_DENIED = 1,
        WIRE_ERROR_NO_SUCH_PROCESS = 2,
        WIRE_ERROR_NOT_DOTNET = 3,
        WIRE_ERROR_RUNTIME_UNREACHABLE = 4,     /* no answer in time, or connection refused */
        WIRE_ERROR_RUNTIME_FAILED = 5,          /* the runtime answered with an error HRESULT */
        WIRE_ERROR_BAD_REQUEST = 6,
        WIRE_ERROR_UNSUPPORTED_VERSION = 7,
        WIRE_ERROR_BUSY = 8,
        WIRE_ERROR_INTERNAL = 9,
        WIRE_ERROR_SOCKET_UNTRUSTED = 10,       /* the socket at the target's name failed verification */
        WIRE_ERROR_NO_SPACE = 11,               /* the dump directory's limits or disk refuse it */
        WIRE_ERROR_UNSAFE_FS = 12,              /* the target's files lie on a FUSE or network file system */
        WIRE_ERROR_NO_STAGING = 13,             /* no safe place for a dump's pipe in the target's view */
        WIRE_ERROR_POLICY_BROKEN = 14,          /* no policy file has loaded: only root is served */
        WIRE_ERROR_SUSPENDED = 15,              /* the runtime is suspended at startup: it must be resumed first */
        WIRE_ERROR_AUDIT_UNAVAILABLE = 16,      /* the decision's record could not be written, so it was not carried out */
        WIRE_ERROR_NO_SUCH_CRASH = 17,          /* no crash of that id the caller may see, or its core is not stored */
        WIRE_ERROR_CORE_UNUSABLE = 18,          /* the stored core is corrupt, cut short, too large, or not the one stored */
        _WIRE_ERROR_MAX,
} WireError;

/*
 * The bounds of request fields. dsctl checks them before it sends anything and
 * the agent checks them again, with these very numbers: a value is refused by
 * both or by neither. (BUFFER_MB's is EVENTPIPE_BUFFER_MB_MAX.)
 */
#define WIRE_DURATION_MAX_SEC (30ULL * 86400)   /* DURATION of a trace or counters session: 30 days */
#define WIRE_INTERVAL_MAX_SEC 3600u             /* INTERVAL between counter samples */
#define WIRE_COUNTER_PROVIDERS_MAX 16u          /* provider names in a COUNTERS request */
#define WIRE_UNIT_MAX 256u                      /* bytes of a UNIT a request names */
/* An IPC_MESSAGE and a UNIT, with their field headers, fit in one frame; tools' requests are far smaller. */
#define WIRE_IPC_MESSAGE_MAX (WIRE_PAYLOAD_MAX - 1024u)

_Static_assert(_WIRE_TAG_MAX <= 64, "wire_message_decode() tracks seen tags in a 64-bit mask");

typedef struct WireField {
        uint16_t tag;
        uint32_t size;
        const uint8_t *value; /* points into the decoded frame */
} WireField;

typedef struct WireMessage {
        uint16_t type;
        size_t n_fields;
        WireField fields[WIRE_FIELDS_MAX];
} WireMessage;

typedef struct WireWriter {
        uint8_t buf[WIRE_FRAME_MAX];
        size_t size;
        size_t n_fields;
        uint64_t seen; /* tags written so far: like the decoder, the writer refuses duplicates */
        int error;     /* first error, sticky, so callers check once at the end */
} WireWriter;

const char *wire_error_to_string(WireError error);

/* The kind of @tag's values; WIRE_KIND_BYTES for a tag that is not one. */
WireFieldKind wire_tag_kind(WireTag tag);

/*
 * Whether @s (@len bytes) can name a systemd unit a process runs in: systemd's
 * alphabet, a suffix of a unit type that has processes, at most WIRE_UNIT_MAX.
 */
bool wire_unit_name_is_valid(const char *s, size_t len);

/* framing */
int wire_frame_peek(const uint8_t *buf, size_t len, size_t *ret_frame_size);
size_t wire_frame_wanted(const uint8_t *buf, size_t len);
int wire_message_decode(const uint8_t *frame, size_t len, WireMessage *ret);

/* field access */
int wire_message_get_u32(const WireMessage *m, WireTag tag, uint32_t *ret);
int wire_message_get_u64(const WireMessage *m, WireTag tag, uint64_t *ret);
/* STRING and TEXT fields, as a C string (neither holds a NUL); a TEXT one may not be UTF-8 */
int wire_message_get_string(const WireMessage *m, WireTag tag, char **ret);
/* COOKIE and BYTES fields */
int wire_message_get_bytes(const WireMessage *m, WireTag tag, const uint8_t **ret, size_t *ret_size);

/* encoding */
void wire_writer_begin(WireWriter *w, WireType type);
void wire_writer_put_u32(WireWriter *w, WireTag tag, uint32_t v);
void wire_writer_put_u64(WireWriter *w, WireTag tag, uint64_t v);
void wire_writer_put_string(WireWriter *w, WireTag tag, const char *s);
void wire_writer_put_bytes(WireWriter *w, WireTag tag, const void *p, size_t n);
int wire_writer_finish(WireWriter *w, const uint8_t **ret_frame, size_t *ret_size);
