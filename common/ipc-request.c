/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One request of the .NET diagnostic IPC protocol decoded strictly and encoded again (ipc-
 * request.h): pure; the proxy and dsctl port use it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "ipc-request.h"
#include "text.h"
#include "unaligned.h"

/* The payload not yet decoded. Every read checks what is left first. */
typedef struct Reader {
        const uint8_t *p;
        size_t left;
} Reader;

static int read_bytes(Reader *rd, size_t n, const uint8_t **ret) {
        if (rd->left < n)
                return IPC_REQUEST_E_TRUNCATED;
        *ret = rd->p;
        rd->p += n;
        rd->left -= n;
        return 0;
}

static int read_u32(Reader *rd, uint32_t *ret) {
        const uint8_t *p;
        int r = read_bytes(rd, 4, &p);

        if (r == 0)
                *ret = unaligned_read_le32(p);
        return r;
}

static int read_u64(Reader *rd, uint64_t *ret) {
        const uint8_t *p;
        int r = read_bytes(rd, 8, &p);

        if (r == 0)
                *ret = unaligned_read_le64(p);
        return r;
}

/* One byte, 0 or 1: the runtime takes any non-zero byte as true, but no client sends one. */
static int read_bool(Reader *rd, bool *ret) {
        const uint8_t *p;
        int r = read_bytes(rd, 1, &p);

        if (r != 0)
                return r;
        if (*p > 1)
                return IPC_REQUEST_E_BAD_VALUE;
        *ret = *p == 1;
        return 0;
}

/* The units before a string's terminator: no NUL among them, surrogates only in pairs.
 * Exactly these decode to UTF-8 that dotnet_ipc_string_encode() turns back into them. */
static bool utf16_is_well_formed(const uint8_t *p, size_t n_units) {
        for (size_t i = 0; i < n_units; i++) {
                uint16_t u = unaligned_read_le16(p + 2 * i), low;

                if (u == 0 || (u >= 0xDC00 && u <= 0xDFFF))
                        return false;
                if (u < 0xD800 || u > 0xDBFF)
                        continue;
                if (i + 1 >= n_units)
                        return false;
                low = unaligned_read_le16(p + 2 * (i + 1));
                if (low < 0xDC00 || low > 0xDFFF)
                        return false;
                i++;
        }
        return true;
}

/*
 * One string as UTF-8, at most @max bytes of it. A @required one may be neither null nor
 * empty. Lengths are checked before anything is allocated: each unit before the NUL
 * becomes at least one byte of UTF-8.
 */
static int read_string(Reader *rd, bool required, size_t max, char **ret) {
        const uint8_t *units;
        uint32_t n;
        char *s;
        int r;

        r = read_u32(rd, &n);
        if (r != 0)
                return r;
        if (n == 0) {
                if (required)
                        return IPC_REQUEST_E_BAD_STRING;
                *ret = NULL;
                return 0;
        }
        if (n > rd->left / 2)
                return IPC_REQUEST_E_TRUNCATED;
        units = rd->p;
        if (unaligned_read_le16(units + 2 * ((size_t)n - 1)) != 0 || !utf16_is_well_formed(units, (size_t)n - 1))
                return IPC_REQUEST_E_BAD_STRING;
        if (required && n == 1)
                return IPC_REQUEST_E_BAD_STRING;
        if ((size_t)n - 1 > max)
                return IPC_REQUEST_E_OVERSIZED;

        r = utf16le_to_utf8(units, (size_t)n - 1, &s);
        if (r < 0)
                return r;
        if (strlen(s) > max) {
                free(s);
                return IPC_REQUEST_E_OVERSIZED;
        }
        rd->p += 2 * (size_t)n;
        rd->left -= 2 * (size_t)n;
        *ret = s;
        return 0;
}

static int decode_event_filter(Reader *rd, DotnetIpcEventFilter *f) {
        uint32_t n;
        int r;

        r = read_bool(rd, &f->enable);
        if (r == 0)
                r = read_u32(rd, &n);
        if (r != 0)
                return r;
        if (n > rd->left / 4)
                return IPC_REQUEST_E_TRUNCATED;
        if (n == 0)
                return 0;
        f->event_ids = calloc(n, sizeof(uint32_t));
        if (!f->event_ids)
                return -ENOMEM;
        f->n_event_ids = n;
        for (uint32_t i = 0; i < n; i++)
                (void)read_u32(rd, &f->event_ids[i]); /* the length was checked above */
        return 0;
}

static int decode_provider(Reader *rd, IpcRequestTracing *t, size_t i) {
        EventPipeProvider *p = &t->config.providers[i];
        int r;

        r = read_u64(rd, &p->keywords);
        if (r == 0)
                r = read_u32(rd, &p->level);
        if (r != 0)
                return r;
        if (p->level > EVENTPIPE_LEVEL_MAX)
                return IPC_REQUEST_E_BAD_VALUE;

        r = read_string(rd, true, IPC_REQUEST_PROVIDER_NAME_MAX, &p->name);
        if (r != 0)
                return r;
        /* names that policy rules can name, and never "*", with which the runtime enables every
         * provider there is */
        if (!eventpipe_provider_name_is_valid(p->name))
                return IPC_REQUEST_E_BAD_STRING;
        /* the runtime would merge the two in ways the policy does not see */
        for (size_t j = 0; j < i; j++)
                if (strcmp(t->config.providers[j].name, p->name) == 0)
                        return IPC_REQUEST_E_BAD_VALUE;

        r = read_string(rd, false, IPC_REQUEST_ARGUMENTS_MAX, &p->arguments);
        if (r != 0)
                return r;
        return t->filters ? decode_event_filter(rd, &t->filters[i]) : 0;
}

/* CollectTracing 1 to 5; the fields each version has are in ipc-protocol.md 2.1. */
static int decode_tracing(Reader *rd, DotnetIpcCommand command, IpcRequestTracing *t) {
        uint32_t session_type, n;
        bool rundown;
        int r;

        if (command == DOTNET_IPC_COLLECT_TRACING5) {
                r = read_u32(rd, &session_type);
                if (r != 0)
                        return r;
                if (session_type == 1)
                        return IPC_REQUEST_E_UNSUPPORTED;
                if (session_type != 0)
                        return IPC_REQUEST_E_BAD_VALUE;
        }

        r = read_u32(rd, &t->buffer_mb);
        if (r == 0)
                r = read_u32(rd, &t->format);
        if (r != 0)
                return r;
        if (t->buffer_mb == 0 || t->format > DOTNET_IPC_FORMAT_NETTRACE)
                return IPC_REQUEST_E_BAD_VALUE;

        t->rundown_keyword = DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT;
        t->stackwalk = true;
        if (command == DOTNET_IPC_COLLECT_TRACING2 || command == DOTNET_IPC_COLLECT_TRACING3) {
                r = read_bool(rd, &rundown);
                if (r != 0)
                        return r;
                if (!rundown)
                        t->rundown_keyword = 0;
        } else if (command != DOTNET_IPC_COLLECT_TRACING) {
                r = read_u64(rd, &t->rundown_keyword);
                if (r != 0)
                        return r;
        }
        if (command != DOTNET_IPC_COLLECT_TRACING && command != DOTNET_IPC_COLLECT_TRACING2) {
                r = read_bool(rd, &t->stackwalk);
                if (r != 0)
                        return r;
        }
        t->config.rundown = t->rundown_keyword != 0;

        r = read_u32(rd, &n);
        if (r != 0)
                return r;
        if (n == 0)
                return IPC_REQUEST_E_BAD_VALUE;
        if (n > IPC_REQUEST_PROVIDERS_MAX)
                return IPC_REQUEST_E_TOO_MANY_PROVIDERS;
        t->config.providers = calloc(n, sizeof(EventPipeProvider));
        if (!t->config.providers)
                return -ENOMEM;
        t->config.n_providers = n;
        if (command == DOTNET_IPC_COLLECT_TRACING5) {
                t->filters = calloc(n, sizeof(DotnetIpcEventFilter));
                if (!t->filters)
                        return -ENOMEM;
                t->n_filters = n;
        }
        for (size_t i = 0; i < n; i++) {
                r = decode_provider(rd, t, i);
                if (r != 0)
                        return r;
        }
        return 0;
}

static int decode_dump(Reader *rd, DotnetIpcCommand command, IpcRequestDump *d) {
        int r;

        r = read_string(rd, true, IPC_REQUEST_STRING_MAX, &d->path);
        if (r == 0)
                r = read_u32(rd, &d->type);
        if (r == 0)
                r = read_u32(rd, &d->flags);
        if (r != 0)
                return r;
        if (ipc_request_policy_dump_type(d->type) == _POLICY_DUMP_INVALID ||
            d->flags > (command == DOTNET_IPC_GENERATE_CORE_DUMP ? 1 : IPC_REQUEST_DUMP_FLAGS_ALL))
                return IPC_REQUEST_E_BAD_VALUE;
        return 0;
}

static int decode_profiler(Reader *rd, DotnetIpcCommand command, IpcRequestProfiler *p) {
        static const uint8_t zero[16] = {};
        const uint8_t *bytes;
        uint32_t n;
        int r;

        if (command == DOTNET_IPC_ATTACH_PROFILER) {
                r = read_u32(rd, &p->attach_timeout);
                if (r != 0)
                        return r;
        }
        r = read_bytes(rd, sizeof(p->clsid), &bytes);
        if (r != 0)
                return r;
        memcpy(p->clsid, bytes, sizeof(p->clsid));
        if (memcmp(p->clsid, zero, sizeof(zero)) == 0)
                return IPC_REQUEST_E_BAD_VALUE;
        r = read_string(rd, true, IPC_REQUEST_STRING_MAX, &p->path);
        if (r != 0 || command != DOTNET_IPC_ATTACH_PROFILER)
                return r;

        r = read_u32(rd, &n);
        if (r == 0)
                r = read_bytes(rd, n, &bytes);
        if (r != 0 || n == 0)
                return r;
        p->client_data = malloc(n);
        if (!p->client_data)
                return -ENOMEM;
        memcpy(p->client_data, bytes, n);
        p->client_data_size = n;
        return 0;
}

static int decode_payload(Reader *rd, IpcRequest *req) {
        int r;

        switch (req->command) {
        case DOTNET_IPC_PROCESS_INFO:
        case DOTNET_IPC_PROCESS_INFO2:
        case DOTNET_IPC_PROCESS_INFO3:
        case DOTNET_IPC_RESUME_RUNTIME:
        case DOTNET_IPC_PROCESS_ENVIRONMENT:
        case DOTNET_IPC_DISABLE_PERF_MAP:
                return 0;
        case DOTNET_IPC_ENABLE_PERF_MAP:
                r = read_u32(rd, &req->perf_map_type);
                if (r == 0 && (req->perf_map_type == 0 || req->perf_map_type > IPC_REQUEST_PERF_MAP_TYPE_MAX))
                        return IPC_REQUEST_E_BAD_VALUE;
                return r;
        case DOTNET_IPC_STOP_TRACING:
                return read_u64(rd, &req->session_id);
        case DOTNET_IPC_COLLECT_TRACING:
        case DOTNET_IPC_COLLECT_TRACING2:
        case DOTNET_IPC_COLLECT_TRACING3:
        case DOTNET_IPC_COLLECT_TRACING4:
        case DOTNET_IPC_COLLECT_TRACING5:
                return decode_tracing(rd, req->command, &req->tracing);
        case DOTNET_IPC_COLLECT_TRACING6:
                return IPC_REQUEST_E_UNSUPPORTED;
        case DOTNET_IPC_GENERATE_CORE_DUMP:
        case DOTNET_IPC_GENERATE_CORE_DUMP2:
        case DOTNET_IPC_GENERATE_CORE_DUMP3:
                return decode_dump(rd, req->command, &req->dump);
        case DOTNET_IPC_ATTACH_PROFILER:
        case DOTNET_IPC_STARTUP_PROFILER:
                return decode_profiler(rd, req->command, &req->profiler);
        case DOTNET_IPC_SET_ENVIRONMENT_VARIABLE:
                r = read_string(rd, true, IPC_REQUEST_STRING_MAX, &req->env_name);
                if (r == 0 && strchr(req->env_name, '='))
                        return IPC_REQUEST_E_BAD_STRING;
                if (r == 0)
                        r = read_string(rd, false, IPC_REQUEST_STRING_MAX, &req->env_value);
                return r;
        case DOTNET_IPC_APPLY_STARTUP_HOOK:
                return read_string(rd, true, IPC_REQUEST_STRING_MAX, &req->startup_hook);
        default:
                return IPC_REQUEST_E_UNKNOWN_COMMAND;
        }
}

void ipc_request_done(IpcRequest *r) {
        if (!r)
                return;
        for (size_t i = 0; i < r->tracing.config.n_providers; i++) {
                free(r->tracing.config.providers[i].name);
                free(r->tracing.config.providers[i].arguments);
        }
        /* counted apart: the providers may have been moved out (session_start_proxy()) */
        for (size_t i = 0; i < r->tracing.n_filters; i++)
                free(r->tracing.filters[i].event_ids);
        free(r->tracing.config.providers);
        free(r->tracing.filters);
        free(r->dump.path);
        free(r->profiler.path);
        free(r->profiler.client_data);
        free(r->env_name);
        free(r->env_value);
        free(r->startup_hook);
        *r = (IpcRequest)IPC_REQUEST_NULL;
}

int ipc_request_decode(const uint8_t *msg, size_t len, IpcRequest *ret) {
        _cleanup_(ipc_request_done) IpcRequest req = IPC_REQUEST_NULL;
        DotnetIpcHeader h;
        Reader rd;
        int r;

        if (len > DOTNET_IPC_MESSAGE_MAX)
                return IPC_REQUEST_E_OVERSIZED;
        r = dotnet_ipc_header_decode(msg, len, &h);
        if (r == DOTNET_IPC_E_TRUNCATED)
                return IPC_REQUEST_E_TRUNCATED;
        if (r != 0)
                return IPC_REQUEST_E_BAD_HEADER;
        if (len < h.size)
                return IPC_REQUEST_E_TRUNCATED;
        if (len > h.size)
                return IPC_REQUEST_E_TRAILING;

        req.command = (DotnetIpcCommand)((unsigned)h.command_set << 8 | h.command_id);
        rd = (Reader){ msg + DOTNET_IPC_HEADER_SIZE, len - DOTNET_IPC_HEADER_SIZE };
        r = decode_payload(&rd, &req);
        if (r != 0)
                return r;
        if (rd.left > 0)
                return IPC_REQUEST_E_TRAILING;

        *ret = req;
        req = (IpcRequest)IPC_REQUEST_NULL;
        return 0;
}

/* A payload being written; the first error sticks and later writes do nothing. */
typedef struct Writer {
        uint8_t *p;
        size_t size, pos;
        int error;
} Writer;

static void put_bytes(Writer *w, const void *src, size_t n) {
        if (w->error != 0)
                return;
        if (w->size - w->pos < n) {
                w->error = IPC_REQUEST_E_OVERSIZED;
                return;
        }
        if (n > 0)
                memcpy(w->p + w->pos, src, n);
        w->pos += n;
}

static void put_u32(Writer *w, uint32_t v) {
        uint8_t b[4];

        unaligned_write_le32(b, v);
        put_bytes(w, b, sizeof(b));
}

static void put_u64(Writer *w, uint64_t v) {
        uint8_t b[8];

        unaligned_write_le64(b, v);
        put_bytes(w, b, sizeof(b));
}

static void put_string(Writer *w, const char *s) {
        size_t n;
        int r;

        if (w->error != 0)
                return;
        r = dotnet_ipc_string_encode(s, w->p + w->pos, w->size - w->pos, &n);
        if (r == 0)
                w->pos += n;
        else
                w->error = r == DOTNET_IPC_E_MALFORMED ? IPC_REQUEST_E_BAD_STRING : IPC_REQUEST_E_OVERSIZED;
}

/* Every request but CollectTracing: its payload, then the header in front of it. */
static int encode_plain(const IpcRequest *r, uint8_t *buf, size_t buf_size, size_t *ret_size) {
        uint8_t payload[IPC_REQUEST_PAYLOAD_MAX];
        Writer w = { payload, sizeof(payload), 0, 0 };
        int k;

        switch (r->command) {
        case DOTNET_IPC_PROCESS_INFO:
        case DOTNET_IPC_PROCESS_INFO2:
        case DOTNET_IPC_PROCESS_INFO3:
        case DOTNET_IPC_RESUME_RUNTIME:
        case DOTNET_IPC_PROCESS_ENVIRONMENT:
        case DOTNET_IPC_DISABLE_PERF_MAP:
                break;
        case DOTNET_IPC_ENABLE_PERF_MAP:
                put_u32(&w, r->perf_map_type);
                break;
        case DOTNET_IPC_STOP_TRACING:
                put_u64(&w, r->session_id);
                break;
        case DOTNET_IPC_GENERATE_CORE_DUMP:
        case DOTNET_IPC_GENERATE_CORE_DUMP2:
        case DOTNET_IPC_GENERATE_CORE_DUMP3:
                put_string(&w, r->dump.path);
                put_u32(&w, r->dump.type);
                put_u32(&w, r->dump.flags);
                break;
        case DOTNET_IPC_ATTACH_PROFILER:
                if (r->profiler.client_data_size > 0 && !r->profiler.client_data)
                        return -EINVAL;
                put_u32(&w, r->profiler.attach_timeout);
                put_bytes(&w, r->profiler.clsid, sizeof(r->profiler.clsid));
                put_string(&w, r->profiler.path);
                put_u32(&w, (uint32_t)r->profiler.client_data_size);
                put_bytes(&w, r->profiler.client_data, r->profiler.client_data_size);
                break;
        case DOTNET_IPC_STARTUP_PROFILER:
                put_bytes(&w, r->profiler.clsid, sizeof(r->profiler.clsid));
                put_string(&w, r->profiler.path);
                break;
        case DOTNET_IPC_SET_ENVIRONMENT_VARIABLE:
                put_string(&w, r->env_name);
                put_string(&w, r->env_value);
                break;
        case DOTNET_IPC_APPLY_STARTUP_HOOK:
                put_string(&w, r->startup_hook);
                break;
        default:
                return -EINVAL;
        }
        if (w.error != 0)
                return w.error;

        k = dotnet_ipc_request_encode(r->command, payload, w.pos, buf, buf_size, ret_size);
        return k == DOTNET_IPC_E_TOO_LARGE ? IPC_REQUEST_E_OVERSIZED : k;
}

static int encode_tracing(const IpcRequest *r, uint8_t *buf, size_t buf_size, size_t *ret_size) {
        const IpcRequestTracing *t = &r->tracing;
        DotnetIpcTracingOptions o = {
                .format = t->format,
                .rundown_keyword = t->rundown_keyword,
                .stackwalk = t->stackwalk,
                .filters = t->filters,
        };
        int k;

        k = dotnet_ipc_collect_tracing_encode_command(r->command, &t->config, t->buffer_mb, &o, buf, buf_size,
                                                      ret_size);
        if (k == DOTNET_IPC_E_MALFORMED)
                return IPC_REQUEST_E_BAD_VALUE;
        return k == DOTNET_IPC_E_TOO_LARGE ? IPC_REQUEST_E_OVERSIZED : k;
}

/*
 * The encoders above write any values; the decoder is what knows the rules. So the result
 * is decoded once more, and refused with the decoder's code when it would not be accepted
 * from a tool either.
 */
int ipc_request_encode(const IpcRequest *r, uint8_t *buf, size_t buf_size, size_t *ret_size) {
        IpcRequest check = IPC_REQUEST_NULL;
        size_t size = 0;
        int k;

        if (r->command >= DOTNET_IPC_COLLECT_TRACING && r->command <= DOTNET_IPC_COLLECT_TRACING5)
                k = encode_tracing(r, buf, buf_size, &size);
        else
                k = encode_plain(r, buf, buf_size, &size);
        if (k != 0)
                return k;

        k = ipc_request_decode(buf, size, &check);
        ipc_request_done(&check);
        if (k != 0)
                return k;
        *ret_size = size;
        return 0;
}

PolicyCommand ipc_request_policy_command(DotnetIpcCommand command) {
        switch (command) {
        case DOTNET_IPC_PROCESS_INFO:
        case DOTNET_IPC_PROCESS_INFO2:
        case DOTNET_IPC_PROCESS_INFO3:
                return POLICY_COMMAND_INFO;
        case DOTNET_IPC_PROCESS_ENVIRONMENT:
                return POLICY_COMMAND_ENV;
        case DOTNET_IPC_COLLECT_TRACING:
        case DOTNET_IPC_COLLECT_TRACING2:
        case DOTNET_IPC_COLLECT_TRACING3:
        case DOTNET_IPC_COLLECT_TRACING4:
        case DOTNET_IPC_COLLECT_TRACING5:
        case DOTNET_IPC_STOP_TRACING:
                return POLICY_COMMAND_TRACE;
        case DOTNET_IPC_GENERATE_CORE_DUMP:
        case DOTNET_IPC_GENERATE_CORE_DUMP2:
        case DOTNET_IPC_GENERATE_CORE_DUMP3:
                return POLICY_COMMAND_DUMP;
        case DOTNET_IPC_RESUME_RUNTIME:
                return POLICY_COMMAND_RESUME;
        case DOTNET_IPC_ENABLE_PERF_MAP:
        case DOTNET_IPC_DISABLE_PERF_MAP:
                return POLICY_COMMAND_PERFMAP;
        case DOTNET_IPC_SET_ENVIRONMENT_VARIABLE:
                return POLICY_COMMAND_SETENV;
        case DOTNET_IPC_APPLY_STARTUP_HOOK:
                return POLICY_COMMAND_STARTUP_HOOK;
        case DOTNET_IPC_ATTACH_PROFILER:
        case DOTNET_IPC_STARTUP_PROFILER:
                return POLICY_COMMAND_PROFILER;
        default:
                return _POLICY_COMMAND_INVALID;
        }
}

PolicyDumpType ipc_request_policy_dump_type(uint32_t dump_type) {
        switch (dump_type) {
        case IPC_REQUEST_DUMP_NORMAL:
                return POLICY_DUMP_MINI;
        case IPC_REQUEST_DUMP_WITH_HEAP:
                return POLICY_DUMP_HEAP;
        case IPC_REQUEST_DUMP_TRIAGE:
                return POLICY_DUMP_TRIAGE;
        case IPC_REQUEST_DUMP_FULL:
                return POLICY_DUMP_FULL;
        default:
                return _POLICY_DUMP_INVALID;
        }
}

/* ---- what a CollectTracing is, by its shape ---- */

#define SHAPE_METRICS_PROVIDER EVENTPIPE_METRICS_PROVIDER
#define SHAPE_METRICS_KEYWORD_TIME_SERIES 0x2ULL
#define SHAPE_LEVEL_INFORMATIONAL 4u
#define SHAPE_LEVEL_VERBOSE 5u
/* GC 0x1 | Type 0x80000 | GCHeapDump 0x100000 | GCHeapCollect 0x800000 | GCHeapAndTypeNames 0x1000000 */
#define SHAPE_GC_HEAP_SNAPSHOT_KEYWORDS 0x1980001ULL
/* digits of a count in the Metrics arguments: MaxTimeSeries and MaxHistograms at most 999999 */
#define SHAPE_COUNT_DIGITS_MAX 6
#define SHAPE_ID_MAX 64

/* The @n bytes at @s are a number of seconds as the tools write it: digits, and maybe ".digits". */
static bool shape_seconds(const char *s, size_t n) {
        size_t digits = 0, i = 0;

        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
                digits++;
        if (digits == 0 || digits > 6)
                return false;
        if (i == n)
                return true;
        if (s[i++] != '.' || i == n || n - i > 6)
                return false;
        for (; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

static bool shape_count(const char *s, size_t n) {
        if (n == 0 || n > SHAPE_COUNT_DIGITS_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

/* A session or client id: a GUID, or "SHARED". */
static bool shape_id(const char *s, size_t n) {
        if (n == 0 || n > SHAPE_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      s[i] == '-'))
                        return false;
        return true;
}

/* An EventCounters provider as dotnet-counters asks for one: keywords 0, Informational at most,
 * and "EventCounterIntervalSec=SECONDS" alone. */
static bool shape_is_event_counters(const EventPipeProvider *p) {
        static const char key[] = "EventCounterIntervalSec=";

        return strcmp(p->name, SHAPE_METRICS_PROVIDER) != 0 && p->keywords == 0 &&
               p->level <= SHAPE_LEVEL_INFORMATIONAL && p->arguments &&
               strncmp(p->arguments, key, sizeof(key) - 1) == 0 &&
               shape_seconds(p->arguments + sizeof(key) - 1, strlen(p->arguments) - (sizeof(key) - 1));
}

/* @name (@n bytes) is the name of one of @c's EventCounters providers. */
static bool shape_names_counters_provider(const EventPipeConfig *c, const char *name, size_t n) {
        for (size_t i = 0; i < c->n_providers; i++)
                if (strlen(c->providers[i].name) == n && memcmp(c->providers[i].name, name, n) == 0 &&
                    shape_is_event_counters(&c->providers[i]))
                        return true;
        return false;
}

/* Metrics=: "Meter[\Instrument],...", each Meter one of the session's EventCounters providers
 * (dotnet-counters asks for every name as both), so counter_providers decides the meters too. */
static bool shape_meters(const EventPipeConfig *c, const char *s, size_t n) {
        size_t i = 0;

        while (i < n) {
                size_t start = i, meter_len, instrument_len = 0;

                while (i < n && eventpipe_name_char_is_valid(s[i]))
                        i++;
                meter_len = i - start;
                if (meter_len == 0 || !shape_names_counters_provider(c, s + start, meter_len))
                        return false;
                if (i < n && s[i] == '\\') {
                        for (i++; i < n && eventpipe_name_char_is_valid(s[i]); i++)
                                instrument_len++;
                        if (instrument_len == 0)
                                return false;
                }
                if (i < n && (s[i] != ',' || ++i == n))
                        return false;
        }
        return true;
}

/* The arguments dotnet-counters gives System.Diagnostics.Metrics: each of these keys at most once,
 * SessionId and Metrics present, and every value of its own form. */
static bool shape_metrics_arguments(const EventPipeConfig *c, const char *args) {
        static const char *const keys[] = { "SessionId", "Metrics", "RefreshInterval", "MaxTimeSeries",
                                            "MaxHistograms", "ClientId" };
        unsigned seen = 0;
        const char *p = args;

        while (*p) {
                const char *end = strchrnul(p, ';'), *eq = memchr(p, '=', (size_t)(end - p));
                size_t k, n;

                if (!eq)
                        return false;
                for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
                        if (strlen(keys[k]) == (size_t)(eq - p) && memcmp(keys[k], p, (size_t)(eq - p)) == 0)
                                break;
                if (k == sizeof(keys) / sizeof(keys[0]) || (seen & (1u << k)))
                        return false;
                seen |= 1u << k;
                n = (size_t)(end - (eq + 1));
                switch (k) {
                case 0: case 5: if (!shape_id(eq + 1, n)) return false; break;
                case 1: if (!shape_meters(c, eq + 1, n)) return false; break;
                case 2: if (!shape_seconds(eq + 1, n)) return false; break;
                default: if (!shape_count(eq + 1, n)) return false; break;
                }
                if (*end == '\0')
                        break;
                p = end + 1;
                if (*p == '\0')
                        return false; /* a trailing ';' */
        }
        return (seen & 0x3u) == 0x3u;
}

/* dotnet-counters' session: EventCounters providers, and maybe System.Diagnostics.Metrics; no rundown. */
static bool shape_is_counters(const IpcRequestTracing *t) {
        const EventPipeConfig *c = &t->config;
        size_t n_counters = 0;

        if (t->rundown_keyword != 0)
                return false;
        for (size_t i = 0; i < c->n_providers; i++) {
                const EventPipeProvider *p = &c->providers[i];

                if (shape_is_event_counters(p)) {
                        n_counters++;
                        continue;
                }
                if (strcmp(p->name, SHAPE_METRICS_PROVIDER) != 0 || p->keywords != SHAPE_METRICS_KEYWORD_TIME_SERIES ||
                    p->level > SHAPE_LEVEL_INFORMATIONAL || !p->arguments || !shape_metrics_arguments(c, p->arguments))
                        return false;
        }
        return n_counters > 0;
}

/* The one provider of @t, when it is @name with exactly @keywords and @level, and no arguments. */
static bool shape_is_only(const IpcRequestTracing *t, const char *name, uint64_t keywords, uint32_t level) {
        const EventPipeProvider *p = t->config.providers;

        return t->config.n_providers == 1 && strcmp(p->name, name) == 0 && p->keywords == keywords &&
               p->level == level && (!p->arguments || !*p->arguments);
}

IpcTracingShape ipc_request_tracing_shape(const IpcRequestTracing *t) {
        if (shape_is_counters(t))
                return IPC_TRACING_SHAPE_COUNTERS;
        if (shape_is_only(t, EVENTPIPE_CLR_PROVIDER, SHAPE_GC_HEAP_SNAPSHOT_KEYWORDS, SHAPE_LEVEL_VERBOSE))
                return IPC_TRACING_SHAPE_GCDUMP;
        if (shape_is_only(t, EVENTPIPE_SAMPLE_PROFILER, EVENTPIPE_SAMPLE_PROFILER_KEYWORDS, SHAPE_LEVEL_INFORMATIONAL))
                return t->rundown_keyword == 0 ? IPC_TRACING_SHAPE_GCDUMP_TYPES : IPC_TRACING_SHAPE_STACKS;
        return IPC_TRACING_SHAPE_TRACE;
}

PolicyCommand ipc_request_tracing_shape_command(IpcTracingShape shape) {
        switch (shape) {
        case IPC_TRACING_SHAPE_COUNTERS: return POLICY_COMMAND_COUNTERS;
        case IPC_TRACING_SHAPE_GCDUMP:
        case IPC_TRACING_SHAPE_GCDUMP_TYPES: return POLICY_COMMAND_GCDUMP;
        case IPC_TRACING_SHAPE_STACKS: return POLICY_COMMAND_STACKS;
        default: return POLICY_COMMAND_TRACE;
        }
}

/* The request decided as @command; for a CollectTracing @command is trace, or its shape's. */
static int policy_request_as(const IpcRequest *r, PolicyCommand command, PolicyProvider *providers,
                             size_t n_providers, PolicyRequest *ret) {
        const EventPipeConfig *config = &r->tracing.config;
        PolicyRequest q = { .command = command, .dump_type = POLICY_DUMP_NONE, .buffer_mb = r->tracing.buffer_mb };

        if (config->n_providers > n_providers)
                return -ENOBUFS;
        for (size_t i = 0; i < config->n_providers; i++) {
                const EventPipeProvider *p = &config->providers[i];

                /* counters: the EventCounters providers, whose names are the meters' too */
                if (command == POLICY_COMMAND_COUNTERS && strcmp(p->name, SHAPE_METRICS_PROVIDER) == 0)
                        continue;
                providers[q.n_providers++] = (PolicyProvider){
                        .name = p->name,
                        .keywords = p->keywords,
                        .level = p->level,
                        .arguments = p->arguments && *p->arguments ? p->arguments : NULL,
                };
        }
        q.providers = providers;
        *ret = q;
        return 0;
}

int ipc_request_policy_request(const IpcRequest *r, PolicyProvider *providers, size_t n_providers,
                               PolicyRequest *ret) {
        PolicyRequest q = { .command = ipc_request_policy_command(r->command), .dump_type = POLICY_DUMP_NONE };

        if (q.command == _POLICY_COMMAND_INVALID)
                return -EINVAL;
        if (q.command == POLICY_COMMAND_DUMP) {
                q.dump_type = ipc_request_policy_dump_type(r->dump.type);
                if (q.dump_type == _POLICY_DUMP_INVALID)
                        return -EINVAL;
        }
        if (q.command == POLICY_COMMAND_TRACE && r->command != DOTNET_IPC_STOP_TRACING) {
                q.command = ipc_request_tracing_shape_command(ipc_request_tracing_shape(&r->tracing));
                if (q.command != POLICY_COMMAND_TRACE && q.command != POLICY_COMMAND_COUNTERS) {
                        /* gcdump and stacks: the command alone is decided, as for dsctl's own */
                        q.buffer_mb = r->tracing.buffer_mb;
                        *ret = q;
                        return 0;
                }
                return policy_request_as(r, q.command, providers, n_providers, ret);
        }
        *ret = q;
        return 0;
}

int ipc_request_trace_policy_request(const IpcRequest *r, PolicyProvider *providers, size_t n_providers,
                                     PolicyRequest *ret) {
        if (r->command < DOTNET_IPC_COLLECT_TRACING || r->command > DOTNET_IPC_COLLECT_TRACING5)
                return -EINVAL;
        return policy_request_as(r, POLICY_COMMAND_TRACE, providers, n_providers, ret);
}

uint32_t ipc_request_error_hresult(int error) {
        if (error < 0)
                return DOTNET_IPC_HR_FAIL;
        if (error == IPC_REQUEST_E_UNKNOWN_COMMAND || error == IPC_REQUEST_E_UNSUPPORTED)
                return DOTNET_IPC_HR_UNKNOWN_COMMAND;
        return DOTNET_IPC_HR_BAD_ENCODING;
}

int ipc_request_reply_error_encode(uint32_t hresult, const char *message, uint8_t *buf, size_t buf_size,
                                   size_t *ret_size) {
        uint8_t payload[IPC_REQUEST_PAYLOAD_MAX];
        size_t n = 0;
        int r;

        unaligned_write_le32(payload, hresult);
        if (message) {
                r = dotnet_ipc_string_encode(message, payload + 4, sizeof(payload) - 4, &n);
                if (r == DOTNET_IPC_E_MALFORMED)
                        return IPC_REQUEST_E_BAD_VALUE;
                if (r != 0)
                        return IPC_REQUEST_E_OVERSIZED;
        }
        r = dotnet_ipc_request_encode(DOTNET_IPC_SERVER_ERROR, payload, 4 + n, buf, buf_size, ret_size);
        return r == DOTNET_IPC_E_TOO_LARGE ? IPC_REQUEST_E_OVERSIZED : r;
}

int ipc_request_reply_ok_encode(const uint8_t *payload, size_t payload_size, uint8_t *buf, size_t buf_size,
                                size_t *ret_size) {
        int r = dotnet_ipc_request_encode(DOTNET_IPC_SERVER_OK, payload, payload_size, buf, buf_size, ret_size);

        return r == DOTNET_IPC_E_TOO_LARGE ? IPC_REQUEST_E_OVERSIZED : r;
}

void ipc_request_clsid_to_string(const uint8_t clsid[16], char buf[IPC_REQUEST_CLSID_STRING_SIZE]) {
        snprintf(buf, IPC_REQUEST_CLSID_STRING_SIZE, "%08x-%04x-%04x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 unaligned_read_le32(clsid), unaligned_read_le16(clsid + 4), unaligned_read_le16(clsid + 6),
                 clsid[8], clsid[9], clsid[10], clsid[11], clsid[12], clsid[13], clsid[14], clsid[15]);
}
