/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The events dsctl stacks, exceptions and logs read from a nettrace stream (monitor-events.h):
 * pure.
 */
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/cleanup.h"
#include "eventpipe/cursor.h"
#include "eventpipe/monitor-events.h"
#include "common/text.h"

/* Event ids of Microsoft-Windows-DotNETRuntime */
#define CLR_EXCEPTION_THROWN 80
#define CLR_METHOD_LOAD_VERBOSE 143
#define CLR_METHOD_UNLOAD_VERBOSE 144
#define CLR_MODULE_DC_END_V2 150
#define CLR_MODULE_LOAD 152
#define CLR_MODULE_UNLOAD 153
/* and of Microsoft-Windows-DotNETRuntimeRundown */
#define RUNDOWN_METHOD_DC_START_VERBOSE 143
#define RUNDOWN_METHOD_DC_END_VERBOSE 144
#define RUNDOWN_MODULE_DC_START 153
#define RUNDOWN_MODULE_DC_END 154

/* A string of the runtime's events; too long or unterminated is malformed here. Return: 0, MALFORMED, -ENOMEM. */
static int take_string(Cursor *c, char **ret) {
        int r = take_utf16z(c, ret);

        return r > 0 ? MONITOR_E_MALFORMED : r;
}

static bool event_is(const NettraceEvent *e, const char *provider, uint32_t id) {
        return e->metadata && e->metadata->event_id == id && strcmp(e->metadata->provider, provider) == 0;
}

void monitor_exception_done(MonitorException *x) {
        free(x->type);
        free(x->message);
        *x = (MonitorException){};
}

/**
 * monitor_exception_extract() - an ExceptionThrown_V1 event's fields
 * @pointer_size: of the stream (its header): ExceptionEIP is a pointer
 *
 * Layout: ExceptionType, ExceptionMessage (UTF-16 strings), ExceptionEIP,
 * ExceptionHRESULT (u32), ExceptionFlags (u16), ClrInstanceID (u16).
 *
 * Return: 0, MONITOR_E_OTHER, MONITOR_E_MALFORMED, -ENOMEM.
 */
int monitor_exception_extract(const NettraceEvent *e, unsigned pointer_size, MonitorException *ret) {
        _cleanup_(monitor_exception_done) MonitorException x = {};
        Cursor c = { e->payload, e->payload_size };
        uint32_t ip32 = 0;
        int r;

        if (!event_is(e, MONITOR_RUNTIME_PROVIDER, CLR_EXCEPTION_THROWN) || e->metadata->version < 1)
                return MONITOR_E_OTHER;
        if (pointer_size != 4 && pointer_size != 8)
                return MONITOR_E_MALFORMED;
        r = take_string(&c, &x.type);
        if (r == 0)
                r = take_string(&c, &x.message);
        if (r != 0)
                return r;
        if (!(pointer_size == 8 ? take_u64(&c, &x.ip) : take_u32(&c, &ip32)) || !take_u32(&c, &x.hresult) ||
            !take_u16(&c, &x.flags))
                return MONITOR_E_MALFORMED;
        if (pointer_size == 4)
                x.ip = ip32;
        *ret = x;
        x = (MonitorException){};
        return 0;
}

/* ---- logs ---- */

void monitor_log_entry_done(MonitorLogEntry *l) {
        free(l->category);
        free(l->event_name);
        free(l->message);
        for (size_t i = 0; i < l->n_arguments; i++) {
                free(l->keys[i]);
                free(l->values[i]);
        }
        free(l->keys);
        free(l->values);
        *l = (MonitorLogEntry){};
}

static const char *value_string(const NettraceValue *v, size_t n, const char *name) {
        const NettraceValue *f = nettrace_value_find(v, n, name);

        return f && f->type == NETTRACE_TYPE_STRING ? f->string : NULL;
}

static bool value_i32(const NettraceValue *v, size_t n, const char *name, int32_t *ret) {
        const NettraceValue *f = nettrace_value_find(v, n, name);

        if (!f || (f->type != NETTRACE_TYPE_INT32 && f->type != NETTRACE_TYPE_UINT32))
                return false;
        *ret = f->type == NETTRACE_TYPE_INT32 ? (int32_t)f->i : (int32_t)f->u;
        return true;
}

static int dup_string(const char *s, char **ret) {
        *ret = NULL;
        if (!s || !*s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* ActivityStart's Arguments: an array of { Key, Value } structs. */
static int scope_arguments(const NettraceValue *args, MonitorLogEntry *l) {
        size_t n = args->n_items < MONITOR_SCOPE_ARGUMENTS_MAX ? args->n_items : MONITOR_SCOPE_ARGUMENTS_MAX;

        if (args->type != NETTRACE_TYPE_ARRAY)
                return MONITOR_E_MALFORMED;
        l->keys = calloc(n ? n : 1, sizeof(char *));
        l->values = calloc(n ? n : 1, sizeof(char *));
        if (!l->keys || !l->values)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const NettraceValue *item = &args->items[i];
                const char *key, *value;

                if (item->type != NETTRACE_TYPE_OBJECT)
                        return MONITOR_E_MALFORMED;
                key = value_string(item->items, item->n_items, "Key");
                value = value_string(item->items, item->n_items, "Value");
                if (!key)
                        return MONITOR_E_MALFORMED;
                l->keys[l->n_arguments] = strdup(key);
                l->values[l->n_arguments] = strdup(value ? value : "");
                l->n_arguments++;
                if (!l->keys[l->n_arguments - 1] || !l->values[l->n_arguments - 1])
                        return -ENOMEM;
        }
        return 0;
}

/**
 * monitor_log_extract() - a Microsoft-Extensions-Logging event, by its field names
 *
 * FormattedMessage (Level, LoggerName, EventId, EventName, FormattedMessage),
 * ActivityStart (LoggerName, Arguments) and ActivityStop. Events of the
 * source are self-describing, so their definitions name the fields.
 *
 * Return: 0, MONITOR_E_OTHER (another event), MONITOR_E_MALFORMED, -ENOMEM.
 */
int monitor_log_extract(const NettraceEvent *e, MonitorLogEntry *ret) {
        _cleanup_(monitor_log_entry_done) MonitorLogEntry l = {};
        NettraceValue *values = NULL;
        const char *name;
        size_t n = 0;
        int r;

        if (!e->metadata || strcmp(e->metadata->provider, MONITOR_LOGGING_PROVIDER) != 0)
                return MONITOR_E_OTHER;
        name = e->metadata->event_name;
        if (strcmp(name, "FormattedMessage") == 0)
                l.kind = MONITOR_LOG_MESSAGE;
        else if (strcmp(name, "ActivityStart") == 0)
                l.kind = MONITOR_LOG_SCOPE_START;
        else if (strcmp(name, "ActivityStop") == 0)
                l.kind = MONITOR_LOG_SCOPE_STOP;
        else
                return MONITOR_E_OTHER;

        r = nettrace_payload_decode(e->metadata, e->payload, e->payload_size, &values, &n);
        if (r != 0)
                return r < 0 ? r : MONITOR_E_MALFORMED;
        r = dup_string(value_string(values, n, "LoggerName"), &l.category);
        if (r == 0 && !l.category)
                r = MONITOR_E_MALFORMED;
        if (r == 0 && l.kind == MONITOR_LOG_MESSAGE) {
                const char *message = value_string(values, n, "FormattedMessage");

                if (!value_i32(values, n, "Level", &l.level) || !value_i32(values, n, "EventId", &l.event_id))
                        r = MONITOR_E_MALFORMED;
                if (r == 0)
                        r = dup_string(value_string(values, n, "EventName"), &l.event_name);
                if (r == 0)
                        l.message = strdup(message ? message : "");
                if (r == 0 && !l.message)
                        r = -ENOMEM;
        }
        if (r == 0 && l.kind == MONITOR_LOG_SCOPE_START) {
                const NettraceValue *args = nettrace_value_find(values, n, "Arguments");

                r = args ? scope_arguments(args, &l) : MONITOR_E_MALFORMED;
        }
        nettrace_values_free(values, n);
        if (r != 0)
                return r;
        *ret = l;
        l = (MonitorLogEntry){};
        return 0;
}

/*
 * The open scopes, in a balanced tree by activity id (tsearch(3), red-black
 * in glibc): the runtime chooses the ids, so a lookup costs O(log n) however
 * it chooses them, for each of the up to 16 scopes around each message.
 */
struct MonitorScopes {
        void *root;
        size_t n;
};

static bool id_is_zero(const uint8_t id[16]) {
        static const uint8_t zero[16];
        return memcmp(id, zero, 16) == 0;
}

static int scope_compare(const void *a, const void *b) {
        return memcmp(((const MonitorScope *)a)->activity, ((const MonitorScope *)b)->activity, 16);
}

int monitor_scopes_new(MonitorScopes **ret) {
        *ret = calloc(1, sizeof(MonitorScopes));
        return *ret ? 0 : -ENOMEM;
}

static void scope_free(void *p) {
        MonitorScope *s = p;

        for (size_t i = 0; i < s->n_arguments; i++) {
                free(s->keys[i]);
                free(s->values[i]);
        }
        free(s->keys);
        free(s->values);
        free(s);
}

MonitorScopes *monitor_scopes_free(MonitorScopes *s) {
        if (!s)
                return NULL;
        tdestroy(s->root, scope_free);
        free(s);
        return NULL;
}

static MonitorScope *scope_find(const MonitorScopes *s, const uint8_t id[16]) {
        MonitorScope key;
        void *found;

        memcpy(key.activity, id, 16);
        found = tfind(&key, &s->root, scope_compare);
        return found ? *(MonitorScope **)found : NULL;
}

int monitor_scopes_start(MonitorScopes *s, const NettraceEvent *e, MonitorLogEntry *start) {
        MonitorScope *scope;

        if (id_is_zero(e->activity_id))
                return 0;
        monitor_scopes_stop(s, e); /* an id the runtime gave again: the old scope is over */
        if (s->n >= MONITOR_SCOPES_MAX)
                return 0;
        scope = calloc(1, sizeof(MonitorScope));
        if (!scope)
                return -ENOMEM;
        memcpy(scope->activity, e->activity_id, 16);
        memcpy(scope->parent, e->related_activity_id, 16);
        if (!tsearch(scope, &s->root, scope_compare)) {
                free(scope);
                return -ENOMEM;
        }
        scope->n_arguments = start->n_arguments;
        scope->keys = start->keys;
        scope->values = start->values;
        start->keys = start->values = NULL;
        start->n_arguments = 0;
        s->n++;
        return 0;
}

void monitor_scopes_stop(MonitorScopes *s, const NettraceEvent *e) {
        MonitorScope *scope = id_is_zero(e->activity_id) ? NULL : scope_find(s, e->activity_id);

        if (!scope)
                return;
        tdelete(scope, &s->root, scope_compare);
        scope_free(scope);
        s->n--;
}

size_t monitor_scopes_of(const MonitorScopes *s, const NettraceEvent *e, const MonitorScope **ret, size_t max) {
        const uint8_t *id = e->activity_id;
        size_t n = 0;

        /* each step goes to an enclosing scope; a scope met again (a cycle of ids, or a scope
         * that names itself its parent) ends the chain: each is shown once */
        while (n < max && !id_is_zero(id)) {
                const MonitorScope *scope = scope_find(s, id);
                bool seen = false;

                for (size_t i = 0; i < n && !seen; i++)
                        seen = ret[i] == scope;
                if (!scope || seen)
                        break;
                ret[n++] = scope;
                id = scope->parent;
        }
        return n;
}

/* ---- samples ---- */

#define SAMPLE_TYPE_EXTERNAL 1u /* SampleProfilerSampleType of the runtime: Error 0, External 1, Managed 2 */

bool monitor_sample_is_external(const NettraceEvent *e) {
        Cursor c = { e->payload, e->payload_size };
        uint32_t type;

        return e->metadata && strcmp(e->metadata->provider, MONITOR_SAMPLE_PROFILER) == 0 && take_u32(&c, &type) &&
               type == SAMPLE_TYPE_EXTERNAL;
}

/* ---- symbols ---- */

typedef struct Module {
        uint64_t id;
        char *name;
} Module;

struct MonitorSymbols {
        MonitorMethod *methods;
        size_t n_methods, cap_methods;
        bool sorted;
        Module *modules;
        size_t n_modules, cap_modules;
        size_t bytes;
};

int monitor_symbols_new(MonitorSymbols **ret) {
        *ret = calloc(1, sizeof(MonitorSymbols));
        return *ret ? 0 : -ENOMEM;
}

MonitorSymbols *monitor_symbols_free(MonitorSymbols *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_methods; i++) {
                free(s->methods[i].name);
                free(s->methods[i].parameters);
        }
        for (size_t i = 0; i < s->n_modules; i++)
                free(s->modules[i].name);
        free(s->methods);
        free(s->modules);
        free(s);
        return NULL;
}

size_t monitor_symbols_methods(const MonitorSymbols *s) {
        return s->n_methods;
}

static int method_event_kind(const NettraceEvent *e, MonitorMethodEventKind *ret) {
        if (event_is(e, MONITOR_RUNTIME_PROVIDER, CLR_METHOD_LOAD_VERBOSE))
                *ret = MONITOR_METHOD_LOAD;
        else if (event_is(e, MONITOR_RUNTIME_PROVIDER, CLR_METHOD_UNLOAD_VERBOSE))
                *ret = MONITOR_METHOD_UNLOAD;
        else if (event_is(e, MONITOR_RUNDOWN_PROVIDER, RUNDOWN_METHOD_DC_START_VERBOSE))
                *ret = MONITOR_METHOD_DC_START;
        else if (event_is(e, MONITOR_RUNDOWN_PROVIDER, RUNDOWN_METHOD_DC_END_VERBOSE))
                *ret = MONITOR_METHOD_DC_END;
        else
                return MONITOR_E_OTHER;
        return 0;
}

static bool is_module_event(const NettraceEvent *e) {
        return event_is(e, MONITOR_RUNTIME_PROVIDER, CLR_MODULE_LOAD) ||
               event_is(e, MONITOR_RUNTIME_PROVIDER, CLR_MODULE_UNLOAD) ||
               event_is(e, MONITOR_RUNTIME_PROVIDER, CLR_MODULE_DC_END_V2) ||
               event_is(e, MONITOR_RUNDOWN_PROVIDER, RUNDOWN_MODULE_DC_START) ||
               event_is(e, MONITOR_RUNDOWN_PROVIDER, RUNDOWN_MODULE_DC_END);
}

void monitor_method_event_done(MonitorMethodEvent *m) {
        free(m->namespace_name);
        free(m->name);
        free(m->signature);
        *m = (MonitorMethodEvent){};
}

/*
 * MethodID, ModuleID, MethodStartAddress (u64 each), MethodSize, MethodToken,
 * MethodFlags (u32 each), MethodNamespace, MethodName, MethodSignature; the
 * rest (ClrInstanceID, ReJITID) is not needed.
 */
int monitor_method_event_extract(const NettraceEvent *e, MonitorMethodEvent *ret) {
        _cleanup_(monitor_method_event_done) MonitorMethodEvent m = {};
        Cursor c = { e->payload, e->payload_size };
        int r = method_event_kind(e, &m.kind);

        if (r != 0)
                return r;
        if (!take_u64(&c, &m.method_id) || !take_u64(&c, &m.module_id) || !take_u64(&c, &m.start) ||
            !take_u32(&c, &m.size) || !take_u32(&c, &m.token) || !take_u32(&c, &m.flags))
                return MONITOR_E_MALFORMED;
        r = take_string(&c, &m.namespace_name);
        if (r == 0)
                r = take_string(&c, &m.name);
        if (r == 0)
                r = take_string(&c, &m.signature);
        if (r != 0)
                return r;
        *ret = m;
        m = (MonitorMethodEvent){};
        return 0;
}

void monitor_module_event_done(MonitorModuleEvent *m) {
        free(m->il_path);
        free(m->native_path);
        *m = (MonitorModuleEvent){};
}

/*
 * ModuleID, AssemblyID (u64 each), ModuleFlags, Reserved1 (u32 each), ModuleILPath, then in later
 * versions ModuleNativePath, ClrInstanceID (u16), ManagedPdbSignature (GUID), ManagedPdbAge (u32),
 * ManagedPdbBuildPath, NativePdbSignature (GUID), ...: what ends early is left out, not malformed.
 */
int monitor_module_event_extract(const NettraceEvent *e, MonitorModuleEvent *ret) {
        _cleanup_(monitor_module_event_done) MonitorModuleEvent m = {};
        _cleanup_free_ char *build_path = NULL;
        Cursor c = { e->payload, e->payload_size };
        const uint8_t *managed, *native;
        uint32_t reserved, age;
        uint16_t instance;
        int r;

        if (!is_module_event(e))
                return MONITOR_E_OTHER;
        if (!take_u64(&c, &m.module_id) || !take_u64(&c, &m.assembly_id) || !take_u32(&c, &m.flags) ||
            !take_u32(&c, &reserved))
                return MONITOR_E_MALFORMED;
        r = take_string(&c, &m.il_path);
        if (r != 0)
                return r;
        if (c.left > 0 && take_string(&c, &m.native_path) == -ENOMEM)
                return -ENOMEM;
        if (m.native_path && take_u16(&c, &instance) && take(&c, 16, &managed) && take_u32(&c, &age) &&
            take_string(&c, &build_path) == 0 && take(&c, 16, &native)) {
                memcpy(m.managed_pdb_signature, managed, 16);
                memcpy(m.native_pdb_signature, native, 16);
                m.has_pdb_signatures = true;
        }
        *ret = m;
        m = (MonitorModuleEvent){};
        return 0;
}

/* Of the signature, the parameters are kept as TraceEvent keeps them (from the first '('), which
 * dotnet-stack report shows after the name. */
static int add_method(MonitorSymbols *s, const MonitorMethodEvent *m) {
        _cleanup_free_ char *full = NULL, *parameters = NULL;
        const char *open;

        if (m->size == 0 || m->start + m->size < m->start)
                return 0; /* nothing a frame could be in */
        open = strchr(m->signature, '(');
        if (asprintf(&full, "%s%s%s", m->namespace_name, *m->namespace_name ? "." : "", m->name) < 0)
                return -ENOMEM;
        parameters = strdup(open ? open : "");
        if (!parameters)
                return -ENOMEM;
        if (s->n_methods >= MONITOR_METHODS_MAX ||
            strlen(full) + strlen(parameters) > MONITOR_SYMBOL_BYTES_MAX - s->bytes)
                return 0;
        if (array_reserve((void **)&s->methods, &s->cap_methods, s->n_methods, sizeof(MonitorMethod)) < 0)
                return -ENOMEM;
        s->bytes += strlen(full) + strlen(parameters);
        s->methods[s->n_methods++] = (MonitorMethod){ .start = m->start, .size = m->size, .module_id = m->module_id,
                                                      .method_at = *m->namespace_name ? strlen(m->namespace_name) + 1 : 0,
                                                      .name = TAKE_PTR(full), .parameters = TAKE_PTR(parameters) };
        s->sorted = false;
        return 0;
}

static int add_module(MonitorSymbols *s, const MonitorModuleEvent *m) {
        const char *base;

        if (monitor_symbols_module(s, m->module_id))
                return 0;
        base = strrchr(m->il_path, '/');
        base = base ? base + 1 : m->il_path;
        if (!*base || s->n_modules >= MONITOR_MODULES_MAX || strlen(base) > MONITOR_SYMBOL_BYTES_MAX - s->bytes)
                return 0;
        if (array_reserve((void **)&s->modules, &s->cap_modules, s->n_modules, sizeof(Module)) < 0)
                return -ENOMEM;
        s->modules[s->n_modules].name = strdup(base);
        if (!s->modules[s->n_modules].name)
                return -ENOMEM;
        s->modules[s->n_modules++].id = m->module_id;
        s->bytes += strlen(base);
        return 0;
}

/**
 * monitor_symbols_add() - learn a method or a module from its event
 *
 * MethodLoadVerbose and MethodUnloadVerbose of the runtime's provider, and
 * the rundown's MethodDCStartVerbose and MethodDCEndVerbose, say where a
 * method's code lies; ModuleLoad, ModuleUnload, ModuleDCEnd_V2, ModuleDCStart and ModuleDCEnd
 * name a module. Past the limits (MONITOR_METHODS_MAX, MONITOR_MODULES_MAX,
 * MONITOR_SYMBOL_BYTES_MAX) further ones are left out.
 */
int monitor_symbols_add(MonitorSymbols *s, const NettraceEvent *e) {
        _cleanup_(monitor_method_event_done) MonitorMethodEvent method = {};
        _cleanup_(monitor_module_event_done) MonitorModuleEvent module = {};
        int r;

        r = monitor_method_event_extract(e, &method);
        if (r == 0)
                return add_method(s, &method);
        if (r != MONITOR_E_OTHER)
                return r;
        r = monitor_module_event_extract(e, &module);
        return r == 0 ? add_module(s, &module) : r;
}

static int method_compare(const void *a, const void *b) {
        const MonitorMethod *x = a, *y = b;

        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->size < y->size ? -1 : x->size > y->size;
}

static const MonitorMethod *find(const MonitorSymbols *s, uint64_t ip) {
        size_t lo = 0, hi = s->n_methods;

        /* the last method starting at or below @ip; methods do not overlap, but a few before it are
         * tried too, for code the rundown reports twice (DCStart and DCEnd, or a re-JIT) */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (s->methods[mid].start <= ip)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (size_t i = lo, tries = 0; i > 0 && tries < 4; i--, tries++)
                if (ip - s->methods[i - 1].start < s->methods[i - 1].size)
                        return &s->methods[i - 1];
        return NULL;
}

const MonitorMethod *monitor_symbols_lookup(MonitorSymbols *s, uint64_t ip) {
        const MonitorMethod *m;

        if (!s->sorted) {
                if (s->n_methods > 0)
                        qsort(s->methods, s->n_methods, sizeof(MonitorMethod), method_compare);
                s->sorted = true;
        }
        m = find(s, ip);
        if (!m && ip > 0)
                m = find(s, ip - 1);
        return m;
}

const char *monitor_symbols_module(MonitorSymbols *s, uint64_t module_id) {
        for (size_t i = 0; i < s->n_modules; i++)
                if (s->modules[i].id == module_id)
                        return s->modules[i].name;
        return NULL;
}
