/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Client requests of the .NET diagnostic IPC protocol (common/ipc-request.h), byte for
 * byte as Microsoft.Diagnostics.NETCore.Client writes them (ipc-protocol.md 1.4, 2): a
 * BinaryWriter's int and uint as 4 bytes, long as 8, bool as 1 byte 0 or 1, strings as a
 * u32 count of UTF-16 units including the NUL, the units, the NUL; "" as count 1; null as
 * count 0. The messages here are built by hand, not with the codec under test. What the
 * policy decides a request as is test-ipc-policy.c's.
 */
#include <stdlib.h>
#include <string.h>

#include "common/ipc-request.h"
#include "tests/unit/tap.h"

/* A check that the rest of the test function depends on: on failure, stop it here.
 * @cond is evaluated once (it often decodes). */
#define require(cond)                                                                        \
        do {                                                                                 \
                if (!(cond)) {                                                               \
                        printf("# %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
                        tap_current_failed = true;                                           \
                        return;                                                              \
                }                                                                            \
        } while (0)

static const uint8_t magic[14] = { 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0 };

/* A message under construction; the header's size is filled in by msg_end(). */
typedef struct Msg {
        uint8_t b[70000];
        size_t n;
} Msg;

static Msg *msg_begin(uint8_t set, uint8_t id) {
        Msg *m = calloc(1, sizeof(Msg));

        if (!m)
                abort();
        memcpy(m->b, magic, 14);
        m->b[16] = set;
        m->b[17] = id;
        m->n = 20;
        return m;
}

static void msg_u8(Msg *m, uint8_t v) {
        m->b[m->n++] = v;
}

static void msg_u32(Msg *m, uint32_t v) {
        for (int i = 0; i < 4; i++)
                msg_u8(m, (uint8_t)(v >> (8 * i)));
}

static void msg_u64(Msg *m, uint64_t v) {
        msg_u32(m, (uint32_t)v);
        msg_u32(m, (uint32_t)(v >> 32));
}

static void msg_bytes(Msg *m, const void *p, size_t n) {
        memcpy(m->b + m->n, p, n);
        m->n += n;
}

/* raw UTF-16 units; the caller gives the terminator when it wants one */
static void msg_units(Msg *m, uint32_t count, const uint16_t *units, size_t n_units) {
        msg_u32(m, count);
        for (size_t i = 0; i < n_units; i++) {
                msg_u8(m, (uint8_t)units[i]);
                msg_u8(m, (uint8_t)(units[i] >> 8));
        }
}

/* an ASCII string as the .NET client writes it; NULL as the null string */
static void msg_str(Msg *m, const char *s) {
        size_t n;

        if (!s) {
                msg_u32(m, 0);
                return;
        }
        n = strlen(s);
        msg_u32(m, (uint32_t)n + 1);
        for (size_t i = 0; i <= n; i++) {
                msg_u8(m, (uint8_t)s[i]);
                msg_u8(m, 0);
        }
}

static size_t msg_end(Msg *m) {
        m->b[14] = (uint8_t)m->n;
        m->b[15] = (uint8_t)(m->n >> 8);
        return m->n;
}

/* Decodes @m; on success re-encodes it and checks the bytes are the same. */
static int decode_and_reencode(const uint8_t *msg, size_t len, IpcRequest *ret) {
        uint8_t *again = malloc(DOTNET_IPC_MESSAGE_MAX);
        size_t size = 0;
        int r;

        if (!again)
                abort();
        r = ipc_request_decode(msg, len, ret);
        if (r == 0) {
                check(ipc_request_encode(ret, again, DOTNET_IPC_MESSAGE_MAX, &size) == 0);
                check(size == len && memcmp(again, msg, len) == 0);
        }
        free(again);
        return r;
}

static int decode_only(const uint8_t *msg, size_t len) {
        IpcRequest req = IPC_REQUEST_NULL;
        int r = ipc_request_decode(msg, len, &req);

        ipc_request_done(&req);
        return r;
}

/* Ends @m, decodes it and frees it. */
static int decode_end_free(Msg *m) {
        int r = decode_only(m->b, msg_end(m));

        free(m);
        return r;
}

static void test_empty_payload_commands(void) {
        static const struct {
                uint8_t id;
                DotnetIpcCommand command;
        } cases[] = {
                { 0x00, DOTNET_IPC_PROCESS_INFO },
                { 0x04, DOTNET_IPC_PROCESS_INFO2 },
                { 0x08, DOTNET_IPC_PROCESS_INFO3 },
                { 0x01, DOTNET_IPC_RESUME_RUNTIME },
                { 0x02, DOTNET_IPC_PROCESS_ENVIRONMENT },
                { 0x06, DOTNET_IPC_DISABLE_PERF_MAP },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                /* ipc-protocol.md 1.2: ProcessInfo is the bare header, 20 bytes */
                uint8_t msg[21] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F,
                                    0x56, 0x31, 0x00, 0x14, 0x00, 0x04, cases[i].id, 0x00, 0x00 };
                IpcRequest req = IPC_REQUEST_NULL;

                check(decode_and_reencode(msg, 20, &req) == 0);
                check(req.command == cases[i].command);
                ipc_request_done(&req);

                /* the runtime ignores a payload; the agent refuses one */
                msg[14] = 21;
                check(decode_only(msg, 21) == IPC_REQUEST_E_TRAILING);
        }
}

static void test_enable_perf_map(void) {
        /* EnablePerfMap(PerfMapType.PerfMapOnly = 3): header + u32 3 */
        uint8_t msg[24] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F, 0x56,
                            0x31, 0x00, 0x18, 0x00, 0x04, 0x05, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00 };
        IpcRequest req = IPC_REQUEST_NULL;

        require(decode_and_reencode(msg, sizeof(msg), &req) == 0);
        check(req.command == DOTNET_IPC_ENABLE_PERF_MAP && req.perf_map_type == 3);
        ipc_request_done(&req);

        msg[20] = 0;
        check(decode_only(msg, sizeof(msg)) == IPC_REQUEST_E_BAD_VALUE);
        msg[20] = 4;
        check(decode_only(msg, sizeof(msg)) == IPC_REQUEST_E_BAD_VALUE);
        msg[20] = 1;
        msg[14] = 22; /* half of the type */
        check(decode_only(msg, 22) == IPC_REQUEST_E_TRUNCATED);
}

static void test_stop_tracing(void) {
        uint8_t msg[29] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F, 0x56, 0x31, 0x00, 0x1C,
                            0x00, 0x02, 0x01, 0x00, 0x00, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11 };
        IpcRequest req = IPC_REQUEST_NULL;

        require(decode_and_reencode(msg, 28, &req) == 0);
        check(req.command == DOTNET_IPC_STOP_TRACING && req.session_id == 0x1122334455667788ULL);
        ipc_request_done(&req);

        /* exactly 8 bytes: older runtimes read 8 whatever was sent */
        msg[14] = 27;
        check(decode_only(msg, 27) == IPC_REQUEST_E_TRUNCATED);
        msg[14] = 29;
        check(decode_only(msg, 29) == IPC_REQUEST_E_TRAILING);
        /* a header that claims less than arrived, even when the rest would make a payload */
        msg[14] = 20;
        check(decode_only(msg, 28) == IPC_REQUEST_E_TRAILING);
}

#define CLR "Microsoft-Windows-DotNETRuntime"
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"
#define METRICS_ARGS                                                                                   \
        "SessionId=6e0a7d2c-2b6f-4a43-9c1f-3a1d5f9e8b70;Metrics=System.Runtime,Microsoft.AspNetCore.Hosting;" \
        "RefreshInterval=1;MaxTimeSeries=1000;MaxHistograms=10;ClientId=1f4c2f62-8d8b-4e5a-9d0c-7a3f2e6b1c55"

/*
 * dotnet-trace collect --providers with a profile's providers, an EventCounters source
 * with its interval and a Meter listener with its arguments: CollectTracing2 (the client's
 * choice for the default rundown and stacks), 256 MB, NetTrace, rundown. A provider
 * without arguments gets "" from GetArgumentString(), so count 1.
 */
static size_t build_dotnet_trace(Msg *m) {
        msg_u32(m, 256);
        msg_u32(m, 1);
        msg_u8(m, 1);
        msg_u32(m, 4);

        msg_u64(m, 0xF00000000000ULL);
        msg_u32(m, 4);
        msg_str(m, SAMPLER);
        msg_str(m, "");

        msg_u64(m, 0x14C14FCCBDULL);
        msg_u32(m, 5);
        msg_str(m, CLR);
        msg_str(m, "");

        msg_u64(m, 0);
        msg_u32(m, 4);
        msg_str(m, "System.Runtime");
        msg_str(m, "EventCounterIntervalSec=1");

        msg_u64(m, 0x2);
        msg_u32(m, 4);
        msg_str(m, "System.Diagnostics.Metrics");
        msg_str(m, METRICS_ARGS);
        return msg_end(m);
}

static void test_collect_tracing2_dotnet_trace(void) {
        Msg *m = msg_begin(0x02, 0x03);
        size_t len = build_dotnet_trace(m), size = 0;
        uint8_t *again = malloc(DOTNET_IPC_MESSAGE_MAX);
        IpcRequest req = IPC_REQUEST_NULL;
        const EventPipeConfig *c;

        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_COLLECT_TRACING2);
        check(req.tracing.buffer_mb == 256 && req.tracing.format == DOTNET_IPC_FORMAT_NETTRACE);
        check(req.tracing.rundown_keyword == DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT && req.tracing.stackwalk);
        check(req.tracing.filters == NULL);
        c = &req.tracing.config;
        check(c->rundown);
        require(c->n_providers == 4);
        check(strcmp(c->providers[0].name, SAMPLER) == 0 && c->providers[0].keywords == 0xF00000000000ULL);
        check(c->providers[0].level == 4 && c->providers[0].arguments && !*c->providers[0].arguments);
        check(strcmp(c->providers[1].name, CLR) == 0 && c->providers[1].level == 5);
        check(strcmp(c->providers[2].arguments, "EventCounterIntervalSec=1") == 0);
        check(c->providers[2].keywords == 0);
        check(strcmp(c->providers[3].arguments, METRICS_ARGS) == 0);

        /* the agent's own encoder writes the same bytes from the EventPipeConfig */
        check(dotnet_ipc_collect_tracing_encode(c, req.tracing.buffer_mb, again, DOTNET_IPC_MESSAGE_MAX, &size) == 0);
        check(size == len && memcmp(again, m->b, len) == 0);

        /* the agent may lower the buffer and encode again: only those bytes change */
        req.tracing.buffer_mb = 64;
        check(ipc_request_encode(&req, again, DOTNET_IPC_MESSAGE_MAX, &size) == 0);
        check(size == len && again[20] == 64 && again[21] == 0 && memcmp(again + 24, m->b + 24, len - 24) == 0);

        ipc_request_done(&req);
        check(req.tracing.config.providers == NULL && req.tracing.config.n_providers == 0);
        free(again);
        free(m);
}

/* The .NET client's pick of version for other options (ipc-protocol.md 2.1), and v1. */
static void test_collect_tracing_versions(void) {
        static const uint32_t ids[] = { 17, 2, 0x10000 };
        uint8_t *again = malloc(DOTNET_IPC_MESSAGE_MAX);
        IpcRequest req = IPC_REQUEST_NULL;
        size_t len, size;
        Msg *m;

        /* v1: no rundown or stack fields; the runtime does both, NetPerf is still a format */
        m = msg_begin(0x02, 0x02);
        msg_u32(m, 16);
        msg_u32(m, 0);
        msg_u32(m, 1);
        msg_u64(m, 0x1);
        msg_u32(m, 4);
        msg_str(m, CLR);
        msg_str(m, NULL);
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_COLLECT_TRACING && req.tracing.format == DOTNET_IPC_FORMAT_NETPERF);
        check(req.tracing.rundown_keyword == DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT && req.tracing.stackwalk);
        require(req.tracing.config.n_providers == 1);
        check(req.tracing.config.rundown && req.tracing.config.providers[0].arguments == NULL);
        ipc_request_done(&req);
        free(m);

        /* v3: stacks off (EventPipeSessionConfiguration requestStackwalk: false), no rundown */
        m = msg_begin(0x02, 0x04);
        msg_u32(m, 256);
        msg_u32(m, 1);
        msg_u8(m, 0);
        msg_u8(m, 0);
        msg_u32(m, 1);
        msg_u64(m, 0x1);
        msg_u32(m, 4);
        msg_str(m, CLR);
        msg_str(m, "");
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_COLLECT_TRACING3 && !req.tracing.stackwalk);
        check(req.tracing.rundown_keyword == 0 && !req.tracing.config.rundown);
        /* CollectTracing2 cannot turn stacks off: the agent's v2 encoder is not used for it */
        req.command = DOTNET_IPC_COLLECT_TRACING2;
        check(ipc_request_encode(&req, again, DOTNET_IPC_MESSAGE_MAX, &size) == IPC_REQUEST_E_BAD_VALUE);
        ipc_request_done(&req);
        free(m);

        /* v4: a rundown keyword of its own (dotnet-trace's GC-only rundown) */
        m = msg_begin(0x02, 0x05);
        msg_u32(m, 256);
        msg_u32(m, 1);
        msg_u64(m, 0x1);
        msg_u8(m, 1);
        msg_u32(m, 2);
        msg_u64(m, 0x1);
        msg_u32(m, 4);
        msg_str(m, CLR);
        msg_str(m, "");
        msg_u64(m, 0x1);
        msg_u32(m, 4);
        msg_str(m, "Microsoft-Windows-DotNETRuntimePrivate");
        msg_str(m, "");
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_COLLECT_TRACING4 && req.tracing.rundown_keyword == 0x1);
        check(req.tracing.config.rundown && req.tracing.stackwalk && req.tracing.config.n_providers == 2);
        ipc_request_done(&req);
        free(m);

        /* v5: a streaming session with an event filter on one provider, none on the other */
        m = msg_begin(0x02, 0x06);
        msg_u32(m, 0);
        msg_u32(m, 100);
        msg_u32(m, 1);
        msg_u64(m, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT);
        msg_u8(m, 1);
        msg_u32(m, 2);
        msg_u64(m, 0x8);
        msg_u32(m, 4);
        msg_str(m, CLR);
        msg_str(m, "");
        msg_u8(m, 1);
        msg_u32(m, 3);
        for (size_t i = 0; i < 3; i++)
                msg_u32(m, ids[i]);
        msg_u64(m, 0);
        msg_u32(m, 5);
        msg_str(m, "My.Events");
        msg_str(m, "Level=debug");
        msg_u8(m, 0);
        msg_u32(m, 0);
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_COLLECT_TRACING5 && req.tracing.buffer_mb == 100);
        require(req.tracing.filters && req.tracing.config.n_providers == 2);
        check(req.tracing.filters[0].enable && req.tracing.filters[0].n_event_ids == 3);
        check(req.tracing.filters[0].n_event_ids == 3 && req.tracing.filters[0].event_ids[2] == 0x10000);
        check(!req.tracing.filters[1].enable && req.tracing.filters[1].n_event_ids == 0);
        check(req.tracing.filters[1].event_ids == NULL);
        check(strcmp(req.tracing.config.providers[1].arguments, "Level=debug") == 0);
        {
                /* the agent moves the providers out (session_start_proxy()); the filters' ids are
                 * still freed by done: the leak check of the sanitizer pass fails otherwise */
                EventPipeConfig moved = req.tracing.config;

                req.tracing.config = (EventPipeConfig){};
                check(req.tracing.n_filters == 2);
                ipc_request_done(&req);
                eventpipe_config_done(&moved);
        }

        /* session type 1 (user_events) needs an fd the agent does not pass; 2 is no type */
        m->b[20] = 1;
        check(decode_only(m->b, len) == IPC_REQUEST_E_UNSUPPORTED);
        m->b[20] = 2;
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        m->b[20] = 0;
        /* CollectTracing6 (Block mode) is not carried: answered as unknown, tools fall back */
        m->b[17] = 0x07;
        check(decode_only(m->b, len) == IPC_REQUEST_E_UNSUPPORTED);
        free(m);
        free(again);
}

/* dotnet_ipc_collect_tracing_encode() keeps its bytes; the versioned encoder refuses to drop options. */
static void test_collect_tracing_encoders(void) {
        /* CollectTracing2, 256 MB, NetTrace, rundown, one provider A.b:0x1:4, null arguments */
        static const uint8_t expected[61] = {
                0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F, 0x56, 0x31, 0x00, 0x3D, 0x00,
                0x02, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00,
                0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00,
                0x00, 'A',  0x00, '.',  0x00, 'b',  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        };
        EventPipeProvider provider = { .name = (char *)"A.b", .keywords = 1, .level = 4 };
        EventPipeConfig config = { .providers = &provider, .n_providers = 1, .rundown = true };
        DotnetIpcTracingOptions o = { DOTNET_IPC_FORMAT_NETTRACE, DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT, true, NULL };
        DotnetIpcEventFilter filter = { .enable = false };
        uint8_t buf[256];
        size_t size = 0;

        check(dotnet_ipc_collect_tracing_encode(&config, 256, buf, sizeof(buf), &size) == 0);
        check(size == sizeof(expected) && memcmp(buf, expected, size) == 0);
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING2, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == 0);
        check(size == sizeof(expected) && memcmp(buf, expected, size) == 0);
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING2, &config, 256, &o, buf, 60,
                                                        &size) == -ENOBUFS);

        /* what a version cannot say is refused, not dropped */
        o.stackwalk = false;
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING2, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING3, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == 0);
        o.rundown_keyword = 0x1;
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING3, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING4, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == 0);
        o.filters = &filter;
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING4, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING5, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == 0);
        o.filters = NULL;
        o.rundown_keyword = 0; /* contradicts config.rundown */
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING4, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        config.rundown = false;
        o.stackwalk = true;
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING2, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == 0);
        check(buf[28] == 0);
        o.format = 2;
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_COLLECT_TRACING2, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        check(dotnet_ipc_collect_tracing_encode_command(DOTNET_IPC_STOP_TRACING, &config, 256, &o, buf,
                                                        sizeof(buf), &size) == -EINVAL);
}

/* A CollectTracing2 of one provider, up to its name: 256 MB, NetTrace, rundown; keywords 0x1, level 4. */
static Msg *begin_one_provider(void) {
        Msg *m = msg_begin(0x02, 0x03);

        msg_u32(m, 256);
        msg_u32(m, 1);
        msg_u8(m, 1);
        msg_u32(m, 1);
        msg_u64(m, 1);
        msg_u32(m, 4);
        return m;
}

/* ... then @name as raw UTF-16 units and @arguments: what does the decoder say? */
static int decode_one_provider(uint32_t name_count, const uint16_t *name, size_t n_name, const char *arguments) {
        Msg *m = begin_one_provider();

        msg_units(m, name_count, name, n_name);
        msg_str(m, arguments);
        return decode_end_free(m);
}

static int decode_provider_name(const char *ascii) {
        uint16_t units[300];
        size_t n = strlen(ascii);

        for (size_t i = 0; i <= n; i++)
                units[i] = (uint8_t)ascii[i];
        return decode_one_provider((uint32_t)n + 1, units, n + 1, NULL);
}

static void test_collect_tracing_rejects(void) {
        static const uint16_t lone_high[] = { 'A', 0xD800, 'b', 0 };
        static const uint16_t lone_low[] = { 'A', 0xDC00, 0 };
        static const uint16_t inner_nul[] = { 'A', 0, 'b', 0 };
        static const uint16_t unterminated[] = { 'A', '.', 'b' };
        static const uint16_t ab[] = { 'A', '.', 'b', 0 };
        char name[IPC_REQUEST_PROVIDER_NAME_MAX + 2], *arguments;
        size_t len;
        Msg *m;

        check(decode_provider_name("Microsoft-Windows-DotNETRuntime") == 0);
        check(decode_provider_name("*") == IPC_REQUEST_E_BAD_STRING); /* every provider at once */
        check(decode_provider_name("My Provider") == IPC_REQUEST_E_BAD_STRING);
        check(decode_provider_name("A:B") == IPC_REQUEST_E_BAD_STRING);
        check(decode_provider_name("") == IPC_REQUEST_E_BAD_STRING);
        memset(name, 'a', sizeof(name));
        name[IPC_REQUEST_PROVIDER_NAME_MAX] = '\0';
        check(decode_provider_name(name) == 0);
        name[IPC_REQUEST_PROVIDER_NAME_MAX] = 'a';
        name[IPC_REQUEST_PROVIDER_NAME_MAX + 1] = '\0';
        check(decode_provider_name(name) == IPC_REQUEST_E_OVERSIZED);

        /* strings: null name, bad UTF-16, no terminator, a count beyond the payload */
        check(decode_one_provider(0, NULL, 0, NULL) == IPC_REQUEST_E_BAD_STRING);
        check(decode_one_provider(4, lone_high, 4, NULL) == IPC_REQUEST_E_BAD_STRING);
        check(decode_one_provider(3, lone_low, 3, NULL) == IPC_REQUEST_E_BAD_STRING);
        check(decode_one_provider(4, inner_nul, 4, NULL) == IPC_REQUEST_E_BAD_STRING);
        check(decode_one_provider(3, unterminated, 3, NULL) == IPC_REQUEST_E_BAD_STRING);
        check(decode_one_provider(40, lone_low, 3, NULL) == IPC_REQUEST_E_TRUNCATED); /* 40 units claimed */

        /* arguments are free text, but well-formed: a lone surrogate would come back as U+FFFD */
        m = begin_one_provider();
        msg_str(m, CLR);
        msg_units(m, 4, lone_high, 4);
        check(decode_end_free(m) == IPC_REQUEST_E_BAD_STRING);

        /* arguments: at most IPC_REQUEST_ARGUMENTS_MAX bytes of UTF-8 */
        arguments = malloc(IPC_REQUEST_ARGUMENTS_MAX + 2);
        memset(arguments, 'x', IPC_REQUEST_ARGUMENTS_MAX + 1);
        arguments[IPC_REQUEST_ARGUMENTS_MAX + 1] = '\0';
        check(decode_one_provider(4, ab, 4, arguments) == IPC_REQUEST_E_OVERSIZED);
        arguments[IPC_REQUEST_ARGUMENTS_MAX] = '\0';
        check(decode_one_provider(4, ab, 4, arguments) == 0);
        free(arguments);

        /* the limit is on bytes of UTF-8: 1100 units of U+00E9 are 2200 bytes */
        m = begin_one_provider();
        msg_str(m, CLR);
        msg_u32(m, 1101);
        for (int i = 0; i < 1100; i++)
                msg_bytes(m, "\xe9\x00", 2);
        msg_bytes(m, "\0\0", 2);
        check(decode_end_free(m) == IPC_REQUEST_E_OVERSIZED);

        /* values: each field of the dotnet-trace message spoiled in turn */
        m = msg_begin(0x02, 0x03);
        len = build_dotnet_trace(m);
        check(decode_only(m->b, len) == 0);
        m->b[20] = 0; /* buffer 0 MB */
        m->b[21] = 0;
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        m->b[21] = 1;
        m->b[24] = 2; /* format 2 */
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        m->b[24] = 1;
        m->b[28] = 2; /* rundown byte 2: the runtime says true, the agent says no */
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        m->b[28] = 1;
        m->b[29] = 0; /* no providers */
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        m->b[29] = IPC_REQUEST_PROVIDERS_MAX + 1;
        check(decode_only(m->b, len) == IPC_REQUEST_E_TOO_MANY_PROVIDERS);
        m->b[29] = 3; /* a provider fewer than there are */
        check(decode_only(m->b, len) == IPC_REQUEST_E_TRAILING);
        m->b[29] = 5; /* one more */
        check(decode_only(m->b, len) == IPC_REQUEST_E_TRUNCATED);
        m->b[29] = 4;
        m->b[41] = 6; /* the first provider's level: above Verbose */
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        m->b[41] = 4;
        check(decode_only(m->b, len) == 0);

        /* every cut is truncated, with or without the header agreeing */
        for (size_t cut = 20; cut < len; cut++) {
                check(decode_only(m->b, cut) == IPC_REQUEST_E_TRUNCATED);
                m->b[14] = (uint8_t)cut;
                m->b[15] = (uint8_t)(cut >> 8);
                check(decode_only(m->b, cut) == IPC_REQUEST_E_TRUNCATED);
                m->b[14] = (uint8_t)len;
                m->b[15] = (uint8_t)(len >> 8);
        }
        free(m);

        /* a provider twice */
        m = msg_begin(0x02, 0x03);
        msg_u32(m, 1);
        msg_u32(m, 1);
        msg_u8(m, 1);
        msg_u32(m, 2);
        for (int i = 0; i < 2; i++) {
                msg_u64(m, i + 1);
                msg_u32(m, 4);
                msg_str(m, CLR);
                msg_str(m, "");
        }
        check(decode_end_free(m) == IPC_REQUEST_E_BAD_VALUE);

        /* v5 filters: a boolean is 0 or 1, the ids lie within the payload */
        m = msg_begin(0x02, 0x06);
        msg_u32(m, 0);
        msg_u32(m, 1);
        msg_u32(m, 1);
        msg_u64(m, 0);
        msg_u8(m, 1);
        msg_u32(m, 1);
        msg_u64(m, 1);
        msg_u32(m, 4);
        msg_str(m, CLR);
        msg_str(m, "");
        msg_u8(m, 2);
        msg_u32(m, 1);
        msg_u32(m, 7);
        len = msg_end(m);
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        m->b[len - 9] = 1;
        check(decode_only(m->b, len) == 0);
        m->b[len - 8] = 2;
        check(decode_only(m->b, len) == IPC_REQUEST_E_TRUNCATED);
        free(m);
}

static void test_generate_core_dump3(void) {
        /* WriteDump(DumpType.Full, "/tmp/d.1"): GenerateCoreDump3, path, type 4, flags 0 */
        uint8_t msg[50] = {
                0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F, 0x56, 0x31, 0x00, 0x32, 0x00,
                0x01, 0x03, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, '/',  0x00, 't',  0x00, 'm',  0x00, 'p',  0x00,
                '/',  0x00, 'd',  0x00, '.',  0x00, '1',  0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00,
                0x00, 0x00,
        };
        IpcRequest req = IPC_REQUEST_NULL;

        require(decode_and_reencode(msg, sizeof(msg), &req) == 0);
        check(req.command == DOTNET_IPC_GENERATE_CORE_DUMP3);
        check(req.dump.path && strcmp(req.dump.path, "/tmp/d.1") == 0);
        check(req.dump.type == IPC_REQUEST_DUMP_FULL && req.dump.flags == 0);
        ipc_request_done(&req);

        /* DumpType 1..4 are Normal, WithHeap, Triage, Full */
        for (uint8_t t = 0; t <= 5; t++) {
                msg[42] = t;
                check(decode_only(msg, sizeof(msg)) == (t >= 1 && t <= 4 ? 0 : IPC_REQUEST_E_BAD_VALUE));
        }
        msg[42] = 2;

        /* flags: crash report (0x4) and the runtime's CrashReportOnly (0x8); nothing above */
        msg[46] = IPC_REQUEST_DUMP_FLAG_LOGGING | IPC_REQUEST_DUMP_FLAG_CRASH_REPORT;
        require(decode_and_reencode(msg, sizeof(msg), &req) == 0);
        check(req.dump.flags == 0x5);
        ipc_request_done(&req);
        msg[46] = 0x10;
        check(decode_only(msg, sizeof(msg)) == IPC_REQUEST_E_BAD_VALUE);
        /* GenerateCoreDump (v1): the third field is the diagnostics boolean as a uint */
        msg[17] = 0x01;
        msg[46] = 1;
        check(decode_only(msg, sizeof(msg)) == 0);
        msg[46] = 2;
        check(decode_only(msg, sizeof(msg)) == IPC_REQUEST_E_BAD_VALUE);
        msg[17] = 0x02;
        check(decode_only(msg, sizeof(msg)) == 0);
        msg[46] = 0;

        /* the path: within the payload, NUL-terminated, not null, not empty */
        msg[20] = 0x20;
        check(decode_only(msg, sizeof(msg)) == IPC_REQUEST_E_TRUNCATED);
        msg[20] = 0x08;
        check(decode_only(msg, sizeof(msg)) == IPC_REQUEST_E_BAD_STRING);
        msg[20] = 0x09;
        msg[14] = 49; /* one byte short of the last field */
        check(decode_only(msg, 49) == IPC_REQUEST_E_TRUNCATED);
}

static void test_dump_paths(void) {
        /* "/tmp/Größe/核.dmp" with U+1F4A5 in it: UTF-16 in, UTF-8 out, and back */
        static const uint16_t path[] = { '/', 't', 'm', 'p', '/', 'G', 'r', 0xF6, 0xDF, 'e', '/', 0x6838,
                                         0xD83D, 0xDCA5, '.', 'd', 'm', 'p', 0 };
        IpcRequest req = IPC_REQUEST_NULL;
        size_t len;
        Msg *m;

        m = msg_begin(0x01, 0x02);
        msg_units(m, sizeof(path) / 2, path, sizeof(path) / 2);
        msg_u32(m, 1);
        msg_u32(m, 0);
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.dump.path &&
              strcmp(req.dump.path, "/tmp/Gr\xc3\xb6\xc3\x9f" "e/\xe6\xa0\xb8\xf0\x9f\x92\xa5.dmp") == 0);
        check(req.dump.type == IPC_REQUEST_DUMP_NORMAL);
        ipc_request_done(&req);
        free(m);

        /* ill-formed UTF-16 in a path: a lone surrogate, a NUL inside */
        for (size_t bad = 0; bad < 3; bad++) {
                uint16_t spoiled[sizeof(path) / 2];

                memcpy(spoiled, path, sizeof(path));
                spoiled[bad == 0 ? 12 : bad == 1 ? 13 : 5] = bad == 2 ? 0 : 'x';
                m = msg_begin(0x01, 0x02);
                msg_units(m, sizeof(path) / 2, spoiled, sizeof(path) / 2);
                msg_u32(m, 1);
                msg_u32(m, 0);
                check(decode_end_free(m) == IPC_REQUEST_E_BAD_STRING);
        }

        /* the null path and the empty one: no stock tool sends them */
        m = msg_begin(0x01, 0x02);
        msg_str(m, NULL);
        msg_u32(m, 1);
        msg_u32(m, 0);
        check(decode_end_free(m) == IPC_REQUEST_E_BAD_STRING);
        m = msg_begin(0x01, 0x02);
        msg_str(m, "");
        msg_u32(m, 1);
        msg_u32(m, 0);
        check(decode_end_free(m) == IPC_REQUEST_E_BAD_STRING);
}

static void test_code_injection_commands(void) {
        /* a CLSID as Guid.ToByteArray() gives it: {c01a6b1f-2d6e-4f6b-9a8c-0d1e2f3a4b5c} */
        static const uint8_t clsid[16] = { 0x1f, 0x6b, 0x1a, 0xc0, 0x6e, 0x2d, 0x6b, 0x4f,
                                           0x9a, 0x8c, 0x0d, 0x1e, 0x2f, 0x3a, 0x4b, 0x5c };
        static const uint8_t data[5] = { 1, 2, 3, 0, 0xff };
        char clsid_text[IPC_REQUEST_CLSID_STRING_SIZE];
        IpcRequest req = IPC_REQUEST_NULL;
        size_t len;
        Msg *m;

        /* SetEnvironmentVariable(name, value) */
        m = msg_begin(0x04, 0x03);
        msg_str(m, "DOTNET_gcServer");
        msg_str(m, "1");
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_SET_ENVIRONMENT_VARIABLE);
        check(strcmp(req.env_name, "DOTNET_gcServer") == 0 && strcmp(req.env_value, "1") == 0);
        ipc_request_done(&req);
        free(m);
        /* a null value unsets; a name with '=' is no name */
        m = msg_begin(0x04, 0x03);
        msg_str(m, "LD_PRELOAD");
        msg_str(m, NULL);
        require(decode_and_reencode(m->b, msg_end(m), &req) == 0);
        check(req.env_value == NULL);
        ipc_request_done(&req);
        free(m);
        m = msg_begin(0x04, 0x03);
        msg_str(m, "LD_PRELOAD");
        msg_units(m, 3, (const uint16_t[]){ 0xDC00, 'x', 0 }, 3);
        check(decode_end_free(m) == IPC_REQUEST_E_BAD_STRING);
        m = msg_begin(0x04, 0x03);
        msg_str(m, "A=B");
        msg_str(m, "1");
        check(decode_end_free(m) == IPC_REQUEST_E_BAD_STRING);

        /* ApplyStartupHook(path) */
        m = msg_begin(0x04, 0x07);
        msg_str(m, "/srv/hooks/Hook.dll");
        require(decode_and_reencode(m->b, msg_end(m), &req) == 0);
        check(strcmp(req.startup_hook, "/srv/hooks/Hook.dll") == 0);
        ipc_request_done(&req);
        free(m);

        /* AttachProfiler(TimeSpan.FromSeconds(10), clsid, path, data): u32 seconds, GUID, string, u32 + bytes */
        m = msg_begin(0x03, 0x01);
        msg_u32(m, 10);
        msg_bytes(m, clsid, sizeof(clsid));
        msg_str(m, "/opt/prof/libprof.so");
        msg_u32(m, sizeof(data));
        msg_bytes(m, data, sizeof(data));
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_ATTACH_PROFILER && req.profiler.attach_timeout == 10);
        check(memcmp(req.profiler.clsid, clsid, 16) == 0 && strcmp(req.profiler.path, "/opt/prof/libprof.so") == 0);
        require(req.profiler.client_data_size == 5);
        check(memcmp(req.profiler.client_data, data, 5) == 0);
        ipc_request_clsid_to_string(req.profiler.clsid, clsid_text);
        check(strcmp(clsid_text, "c01a6b1f-2d6e-4f6b-9a8c-0d1e2f3a4b5c") == 0);
        ipc_request_done(&req);
        /* the client data length is checked against the payload (runtimes before PR #122257 did not) */
        m->b[len - 9] = 6;
        check(decode_only(m->b, len) == IPC_REQUEST_E_TRUNCATED);
        m->b[len - 9] = 4;
        check(decode_only(m->b, len) == IPC_REQUEST_E_TRAILING);
        free(m);
        /* no client data: null byte[] is length 0 */
        m = msg_begin(0x03, 0x01);
        msg_u32(m, 0);
        msg_bytes(m, clsid, sizeof(clsid));
        msg_str(m, "/opt/prof/libprof.so");
        msg_u32(m, 0);
        require(decode_and_reencode(m->b, msg_end(m), &req) == 0);
        check(req.profiler.client_data == NULL && req.profiler.client_data_size == 0);
        ipc_request_done(&req);
        free(m);

        /* StartupProfiler(clsid, path); the empty GUID is refused, as the client refuses it */
        m = msg_begin(0x03, 0x02);
        msg_bytes(m, clsid, sizeof(clsid));
        msg_str(m, "/opt/prof/libprof.so");
        len = msg_end(m);
        require(decode_and_reencode(m->b, len, &req) == 0);
        check(req.command == DOTNET_IPC_STARTUP_PROFILER);
        ipc_request_done(&req);
        memset(m->b + 20, 0, 16);
        check(decode_only(m->b, len) == IPC_REQUEST_E_BAD_VALUE);
        free(m);
}

static void test_header_rejects(void) {
        uint8_t *big = calloc(1, DOTNET_IPC_MESSAGE_MAX + 1);
        uint8_t msg[24] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F, 0x56,
                            0x31, 0x00, 0x14, 0x00, 0x04, 0x00, 0x00, 0x00 };

        check(decode_only(msg, 20) == 0);
        check(decode_only(msg, 19) == IPC_REQUEST_E_TRUNCATED);
        check(decode_only(msg, 0) == IPC_REQUEST_E_TRUNCATED);
        check(decode_only(msg, 21) == IPC_REQUEST_E_TRAILING); /* a second message behind the first */
        msg[14] = 0x18;
        check(decode_only(msg, 20) == IPC_REQUEST_E_TRUNCATED); /* the size promises more */
        msg[14] = 0x13;
        check(decode_only(msg, 20) == IPC_REQUEST_E_BAD_HEADER);
        msg[14] = 0x14;
        msg[18] = 1;
        check(decode_only(msg, 20) == IPC_REQUEST_E_BAD_HEADER);
        msg[18] = 0;
        msg[12] = '2'; /* DOTNET_IPC_V2 */
        check(decode_only(msg, 20) == IPC_REQUEST_E_BAD_HEADER);
        msg[12] = '1';

        /* commands nobody knows, and replies sent as requests */
        msg[16] = 0x05;
        check(decode_only(msg, 20) == IPC_REQUEST_E_UNKNOWN_COMMAND);
        msg[16] = 0x04;
        msg[17] = 0x09;
        check(decode_only(msg, 20) == IPC_REQUEST_E_UNKNOWN_COMMAND);
        msg[16] = 0x02;
        msg[17] = 0x00;
        check(decode_only(msg, 20) == IPC_REQUEST_E_UNKNOWN_COMMAND);
        msg[16] = 0xFF;
        check(decode_only(msg, 20) == IPC_REQUEST_E_UNKNOWN_COMMAND);
        msg[17] = 0xFF;
        check(decode_only(msg, 20) == IPC_REQUEST_E_UNKNOWN_COMMAND);

        /* nothing over 64 KiB, whatever its header says */
        memcpy(big, msg, 20);
        check(big && decode_only(big, DOTNET_IPC_MESSAGE_MAX + 1) == IPC_REQUEST_E_OVERSIZED);
        free(big);
}

static void test_replies(void) {
        /* E_ACCESSDENIED as the runtime's own error: FF FF, int32 0x80070005, 24 bytes */
        static const uint8_t denied[24] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F, 0x56,
                                            0x31, 0x00, 0x18, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x05, 0x00, 0x07, 0x80 };
        static const uint8_t ok[24] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43, 0x5F, 0x56,
                                        0x31, 0x00, 0x18, 0x00, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
        static const uint8_t zero[4] = {};
        uint8_t buf[256];
        DotnetIpcResponse reply;
        size_t size = 0, used;
        char *text;

        check(ipc_request_reply_error_encode(DOTNET_IPC_HR_ACCESS_DENIED, NULL, buf, sizeof(buf), &size) == 0);
        check(size == 24 && memcmp(buf, denied, 24) == 0);
        check(dotnet_ipc_response_decode(buf, size, &reply) == 0);
        check(!reply.ok && reply.hresult == 0x80070005u && reply.payload_size == 0);
        check(ipc_request_reply_error_encode(DOTNET_IPC_HR_ACCESS_DENIED, NULL, buf, 23, &size) == -ENOBUFS);

        /* GenerateCoreDump3's error carries a message the .NET client shows */
        check(ipc_request_reply_error_encode(DOTNET_IPC_HR_ACCESS_DENIED, "denied: no rule grants you 'dump'", buf,
                                             sizeof(buf), &size) == 0);
        check(size == 24 + 4 + (strlen("denied: no rule grants you 'dump'") + 1) * 2);
        check(dotnet_ipc_response_decode(buf, size, &reply) == 0);
        check(!reply.ok && reply.hresult == DOTNET_IPC_HR_ACCESS_DENIED);
        check(dotnet_ipc_string_decode(reply.payload, reply.payload_size, &text, &used) == 0);
        check(used == reply.payload_size && text && strcmp(text, "denied: no rule grants you 'dump'") == 0);
        free(text);
        check(ipc_request_reply_error_encode(DOTNET_IPC_HR_ACCESS_DENIED, "\xff", buf, sizeof(buf), &size) ==
              IPC_REQUEST_E_BAD_VALUE);

        check(ipc_request_reply_ok_encode(zero, sizeof(zero), buf, sizeof(buf), &size) == 0);
        check(size == 24 && memcmp(buf, ok, 24) == 0);
        check(ipc_request_reply_ok_encode((const uint8_t[]){ 1, 2, 3, 4, 5, 6, 7, 8 }, 8, buf, sizeof(buf),
                                          &size) == 0);
        check(dotnet_ipc_response_decode(buf, size, &reply) == 0);
        check(reply.ok && dotnet_ipc_session_id_decode(&reply, &(uint64_t){ 0 }) == 0);

        check(ipc_request_error_hresult(IPC_REQUEST_E_UNKNOWN_COMMAND) == DOTNET_IPC_HR_UNKNOWN_COMMAND);
        check(ipc_request_error_hresult(IPC_REQUEST_E_UNSUPPORTED) == DOTNET_IPC_HR_UNKNOWN_COMMAND);
        check(ipc_request_error_hresult(IPC_REQUEST_E_TRAILING) == DOTNET_IPC_HR_BAD_ENCODING);
        check(ipc_request_error_hresult(IPC_REQUEST_E_BAD_STRING) == DOTNET_IPC_HR_BAD_ENCODING);
        check(ipc_request_error_hresult(-ENOMEM) == DOTNET_IPC_HR_FAIL);
}

/* What the agent changes must still be what the decoder accepts. */
static void test_encode_rules(void) {
        static const uint8_t clsid[16] = { 1 };
        uint8_t buf[512];
        IpcRequest req = IPC_REQUEST_NULL;
        size_t size = 0;

        req.command = DOTNET_IPC_GENERATE_CORE_DUMP2;
        req.dump.path = (char *)"/tmp/x";
        req.dump.type = 5;
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == IPC_REQUEST_E_BAD_VALUE);
        req.dump.type = 1;
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == 0 && size == 20 + 4 + 14 + 8);
        check(ipc_request_encode(&req, buf, 20, &size) == -ENOBUFS);
        req.dump.path = (char *)"";
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == IPC_REQUEST_E_BAD_STRING);
        req.dump.path = (char *)"\xc3";
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == IPC_REQUEST_E_BAD_STRING);

        req = (IpcRequest){ .command = DOTNET_IPC_STARTUP_PROFILER, .profiler.path = (char *)"/p.so" };
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == IPC_REQUEST_E_BAD_VALUE);
        memcpy(req.profiler.clsid, clsid, 16);
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == 0);

        req = (IpcRequest){ .command = DOTNET_IPC_COLLECT_TRACING6 };
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == -EINVAL);
        req.command = (DotnetIpcCommand)0x0509;
        check(ipc_request_encode(&req, buf, sizeof(buf), &size) == -EINVAL);
}

int main(void) {
        run_test(test_empty_payload_commands);
        run_test(test_enable_perf_map);
        run_test(test_stop_tracing);
        run_test(test_collect_tracing2_dotnet_trace);
        run_test(test_collect_tracing_versions);
        run_test(test_collect_tracing_encoders);
        run_test(test_collect_tracing_rejects);
        run_test(test_generate_core_dump3);
        run_test(test_dump_paths);
        run_test(test_code_injection_commands);
        run_test(test_header_rejects);
        run_test(test_replies);
        run_test(test_encode_rules);
        return tap_finish();
}
