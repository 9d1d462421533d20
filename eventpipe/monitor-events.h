/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The events dsctl stacks, exceptions and logs read from a nettrace stream:
 * the runtime's exception events, its method and module events (rundown
 * included) that name the frames of a stack, and ILogger's EventSource.
 * Pure, no I/O. The runtime's own events carry no field list in their
 * definitions, so their payloads are read by their documented layouts
 * (ClrEtwAll.man); every size is checked against the bytes present.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "eventpipe/nettrace.h"

#define MONITOR_RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define MONITOR_RUNDOWN_PROVIDER "Microsoft-Windows-DotNETRuntimeRundown"
#define MONITOR_SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define MONITOR_LOGGING_PROVIDER "Microsoft-Extensions-Logging"

#define MONITOR_METHODS_MAX (1u << 20)         /* methods a symbol table keeps */
#define MONITOR_MODULES_MAX 4096u              /* modules it keeps */
#define MONITOR_SYMBOL_BYTES_MAX (64u << 20)   /* bytes of their names, summed */
#define MONITOR_SCOPES_MAX 4096u               /* open logging scopes tracked */
#define MONITOR_SCOPE_ARGUMENTS_MAX 64u        /* key/value pairs kept of one scope */

enum {
        _MONITOR_E_SUCCESS,
        MONITOR_E_OTHER,     /* not an event of the kind asked for */
        MONITOR_E_MALFORMED, /* of that kind, but its payload is not what its layout says */
};

/* ExceptionThrown_V1 of Microsoft-Windows-DotNETRuntime */
typedef struct MonitorException {
        char *type;
        char *message;
        uint64_t ip;        /* ExceptionEIP: where it was thrown */
        uint32_t hresult;
        uint16_t flags;
} MonitorException;

int monitor_exception_extract(const NettraceEvent *e, unsigned pointer_size, MonitorException *ret);
void monitor_exception_done(MonitorException *x);

typedef enum MonitorLogKind {
        MONITOR_LOG_MESSAGE,     /* FormattedMessage */
        MONITOR_LOG_SCOPE_START, /* ActivityStart (ILogger.BeginScope) */
        MONITOR_LOG_SCOPE_STOP,  /* ActivityStop */
} MonitorLogKind;

/* One event of Microsoft-Extensions-Logging, by the names of its fields. */
typedef struct MonitorLogEntry {
        MonitorLogKind kind;
        int32_t level;           /* LogLevel; MESSAGE */
        char *category;          /* LoggerName */
        int32_t event_id;        /* MESSAGE */
        char *event_name;        /* MESSAGE; NULL when empty */
        char *message;           /* MESSAGE */
        size_t n_arguments;      /* SCOPE_START: its key/value pairs */
        char **keys, **values;
} MonitorLogEntry;

int monitor_log_extract(const NettraceEvent *e, MonitorLogEntry *ret);
void monitor_log_entry_done(MonitorLogEntry *l);

/* The open scopes, by the activity id the runtime gave each (TplEventSource's activity tracking). */
typedef struct MonitorScope {
        uint8_t activity[16];
        uint8_t parent[16];      /* the enclosing scope's activity, or zeros */
        size_t n_arguments;
        char **keys, **values;
} MonitorScope;

typedef struct MonitorScopes MonitorScopes;

int monitor_scopes_new(MonitorScopes **ret);
MonitorScopes *monitor_scopes_free(MonitorScopes *s);
/* Takes @start's arguments. An event without an activity id opens no scope. */
int monitor_scopes_start(MonitorScopes *s, const NettraceEvent *e, MonitorLogEntry *start);
void monitor_scopes_stop(MonitorScopes *s, const NettraceEvent *e);
/* The scopes around @e, innermost first, each once (a cycle of parents ends the chain); at most @max. */
size_t monitor_scopes_of(const MonitorScopes *s, const NettraceEvent *e, const MonitorScope **ret, size_t max);

/*
 * Whether a sample of the sample profiler (ThreadSample, whose payload is
 * its Type, u32) was taken while its thread ran outside managed code
 * (External: waiting, or in native code) rather than in it (Managed).
 * Anything else, a payload too short included, is not External.
 */
bool monitor_sample_is_external(const NettraceEvent *e);

/* Which of the runtime's verbose method events: MethodLoadVerbose, MethodUnloadVerbose of its provider,
 * MethodDCStartVerbose, MethodDCEndVerbose of its rundown. */
typedef enum MonitorMethodEventKind {
        MONITOR_METHOD_LOAD,
        MONITOR_METHOD_UNLOAD,
        MONITOR_METHOD_DC_START,
        MONITOR_METHOD_DC_END,
} MonitorMethodEventKind;

/* One of those events, as it came (ClrEtwAll.man's MethodLoadVerbose layout). */
typedef struct MonitorMethodEvent {
        MonitorMethodEventKind kind;
        uint64_t method_id, module_id, start;
        uint32_t size, token, flags;
        char *namespace_name, *name, *signature; /* UTF-8, never NULL once extracted */
} MonitorMethodEvent;

#define MONITOR_METHOD_FLAG_JITTED 0x8u

/* Return: 0, MONITOR_E_OTHER (no verbose method event), MONITOR_E_MALFORMED, -ENOMEM. */
int monitor_method_event_extract(const NettraceEvent *e, MonitorMethodEvent *ret);
void monitor_method_event_done(MonitorMethodEvent *m);

/* A module's load, unload or rundown event: ModuleLoad and ModuleUnload of the runtime's provider, its
 * ModuleDCEnd_V2, and ModuleDCStart and ModuleDCEnd of its rundown (ModuleLoadUnload_V2's layout). */
typedef struct MonitorModuleEvent {
        uint64_t module_id, assembly_id;
        uint32_t flags;
        char *il_path;                   /* never NULL once extracted */
        char *native_path;               /* NULL when the event ends before it */
        bool has_pdb_signatures;         /* the event carries both PDB signatures (version 2) */
        uint8_t managed_pdb_signature[16], native_pdb_signature[16];
} MonitorModuleEvent;

/* Return: 0, MONITOR_E_OTHER (no module event), MONITOR_E_MALFORMED, -ENOMEM. */
int monitor_module_event_extract(const NettraceEvent *e, MonitorModuleEvent *ret);
void monitor_module_event_done(MonitorModuleEvent *m);

/* A method's code, as MethodLoadVerbose or the rundown's MethodDC*Verbose describe it. */
typedef struct MonitorMethod {
        uint64_t start;
        uint32_t size;
        uint64_t module_id;
        char *name;              /* Namespace.Type.Method */
        size_t method_at;        /* where Method starts in name (0: no type) */
        char *parameters;        /* MethodSignature from its first '(': "(int32,class System.String)"; or "" */
} MonitorMethod;

typedef struct MonitorSymbols MonitorSymbols;

int monitor_symbols_new(MonitorSymbols **ret);
MonitorSymbols *monitor_symbols_free(MonitorSymbols *s);
/* Return: 0 (kept, or dropped past the limits), MONITOR_E_OTHER, MONITOR_E_MALFORMED, -ENOMEM. */
int monitor_symbols_add(MonitorSymbols *s, const NettraceEvent *e);
/* The method whose code holds @ip (or @ip - 1: a return address may follow the last call). */
const MonitorMethod *monitor_symbols_lookup(MonitorSymbols *s, uint64_t ip);
/* A module's file name, like System.Private.CoreLib.dll; NULL when unknown. */
const char *monitor_symbols_module(MonitorSymbols *s, uint64_t module_id);
size_t monitor_symbols_methods(const MonitorSymbols *s);

DEFINE_TRIVIAL_CLEANUP_FUNC(MonitorSymbols *, monitor_symbols_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(MonitorScopes *, monitor_scopes_free);
