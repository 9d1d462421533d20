/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One request of the .NET diagnostic IPC protocol decoded strictly and encoded again (ipc-
 * request.h): pure; the proxy and dsctl port use it. What the policy decides a request as is
 * policy/ipc-policy.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/ipc-request.h"
#include "common/text.h"
#include "common/unaligned.h"

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
        if (d->type < IPC_REQUEST_DUMP_NORMAL || d->type > IPC_REQUEST_DUMP_FULL ||
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
        eventpipe_config_done(&r->tracing.config);
        /* counted apart: the providers may have been moved out (session_start_proxy()) */
        for (size_t i = 0; i < r->tracing.n_filters; i++)
                free(r->tracing.filters[i].event_ids);
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
