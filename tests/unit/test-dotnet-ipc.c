/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Byte-exact vectors for the .NET diagnostic IPC codec */
#include <stdlib.h>
#include <string.h>

#include "common/dotnet-ipc.h"
#include "tests/unit/tap.h"

static const uint8_t magic[14] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F,
                                   0x49, 0x50, 0x43, 0x5F, 0x56, 0x31, 0x00 };

static void test_process_info_request_vector(void) {
        /* ipc-protocol.md 1.2: the ProcessInfo request is the bare header */
        static const uint8_t expected[20] = { 0x44, 0x4F, 0x54, 0x4E, 0x45, 0x54, 0x5F, 0x49, 0x50, 0x43,
                                              0x5F, 0x56, 0x31, 0x00, 0x14, 0x00, 0x04, 0x00, 0x00, 0x00 };
        uint8_t buf[64];
        size_t size = 0;

        check(dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO, NULL, 0, buf, sizeof(buf), &size) == 0);
        check(size == 20);
        check(memcmp(buf, expected, 20) == 0);

        check(dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO3, NULL, 0, buf, sizeof(buf), &size) == 0);
        check(buf[16] == 0x04 && buf[17] == 0x08);
        check(dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO, NULL, 0, buf, 19, &size) == -ENOBUFS);
}

static void test_header_decode_rejects(void) {
        uint8_t h[20];
        DotnetIpcHeader out;

        dotnet_ipc_header_encode(h, 24, 0xFF, 0x00);
        check(dotnet_ipc_header_decode(h, 20, &out) == 0);
        check(out.size == 24 && out.command_set == 0xFF && out.command_id == 0);
        check(dotnet_ipc_header_decode(h, 19, &out) == DOTNET_IPC_E_TRUNCATED);

        h[0] = 'X';
        check(dotnet_ipc_header_decode(h, 20, &out) == DOTNET_IPC_E_MALFORMED);

        dotnet_ipc_header_encode(h, 19, 0xFF, 0x00); /* smaller than the header itself */
        check(dotnet_ipc_header_decode(h, 20, &out) == DOTNET_IPC_E_MALFORMED);

        dotnet_ipc_header_encode(h, 20, 0x04, 0x00);
        h[18] = 1; /* reserved must be zero */
        check(dotnet_ipc_header_decode(h, 20, &out) == DOTNET_IPC_E_MALFORMED);
}

/* Only replies after which the runtime sends nothing may be read past (runtime-call.c). */
static void test_reply_ends_exchange(void) {
        static const DotnetIpcCommand ends[] = { DOTNET_IPC_PROCESS_INFO, DOTNET_IPC_PROCESS_INFO2,
                                                 DOTNET_IPC_PROCESS_INFO3, DOTNET_IPC_RESUME_RUNTIME };
        static const DotnetIpcCommand followed[] = { DOTNET_IPC_PROCESS_ENVIRONMENT, DOTNET_IPC_COLLECT_TRACING,
                                                     DOTNET_IPC_COLLECT_TRACING2, DOTNET_IPC_COLLECT_TRACING5,
                                                     DOTNET_IPC_GENERATE_CORE_DUMP3, DOTNET_IPC_ATTACH_PROFILER };
        uint8_t buf[20];
        size_t size;

        for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
                check(dotnet_ipc_request_encode(ends[i], NULL, 0, buf, sizeof(buf), &size) == 0);
                check(dotnet_ipc_reply_ends_exchange(buf, size));
                check(!dotnet_ipc_reply_ends_exchange(buf, size - 1)); /* not a whole header */
        }
        for (size_t i = 0; i < sizeof(followed) / sizeof(followed[0]); i++) {
                check(dotnet_ipc_request_encode(followed[i], NULL, 0, buf, sizeof(buf), &size) == 0);
                check(!dotnet_ipc_reply_ends_exchange(buf, size));
        }
        check(dotnet_ipc_request_encode(DOTNET_IPC_PROCESS_INFO, NULL, 0, buf, sizeof(buf), &size) == 0);
        buf[0] = 'X'; /* not a request at all */
        check(!dotnet_ipc_reply_ends_exchange(buf, size));
}

static void test_response_ok_and_error(void) {
        uint8_t ok[24], err[24];
        DotnetIpcResponse r;

        /* generic OK: size 24, set FF, id 00, int32 0 */
        memcpy(ok, magic, 14);
        memcpy(ok + 14, (uint8_t[]){ 0x18, 0x00, 0xFF, 0x00, 0x00, 0x00, 0, 0, 0, 0 }, 10);
        check(dotnet_ipc_response_decode(ok, 24, &r) == 0);
        check(r.ok && r.payload_size == 4);

        /* error: HRESULT 0x80131385 (unknown command), little endian */
        memcpy(err, magic, 14);
        memcpy(err + 14, (uint8_t[]){ 0x18, 0x00, 0xFF, 0xFF, 0x00, 0x00, 0x85, 0x13, 0x13, 0x80 }, 10);
        check(dotnet_ipc_response_decode(err, 24, &r) == 0);
        check(!r.ok && r.hresult == DOTNET_IPC_HR_UNKNOWN_COMMAND && r.payload_size == 0);

        /* size field and bytes that arrived must agree */
        check(dotnet_ipc_response_decode(ok, 23, &r) == DOTNET_IPC_E_TRUNCATED);
        ok[14] = 0x17;
        check(dotnet_ipc_response_decode(ok, 24, &r) == DOTNET_IPC_E_MALFORMED);
        ok[14] = 0x18;

        /* replies come from the server command set only */
        ok[16] = 0x04;
        check(dotnet_ipc_response_decode(ok, 24, &r) == DOTNET_IPC_E_MALFORMED);

        /* an error too short to hold its HRESULT */
        err[14] = 20;
        check(dotnet_ipc_response_decode(err, 20, &r) == DOTNET_IPC_E_MALFORMED);
}

static void test_string_vectors(void) {
        static const uint8_t hi[] = { 3, 0, 0, 0, 'h', 0, 'i', 0, 0, 0 };
        static const uint8_t empty[] = { 1, 0, 0, 0, 0, 0 };
        /* U+00E9 and U+1F600 (a surrogate pair: D83D DE00) */
        static const uint8_t astral[] = { 4, 0, 0, 0, 0xE9, 0x00, 0x3D, 0xD8, 0x00, 0xDE, 0, 0 };
        uint8_t buf[64];
        size_t size, used;
        char *s;

        check(dotnet_ipc_string_encode("hi", buf, sizeof(buf), &size) == 0);
        check(size == sizeof(hi) && memcmp(buf, hi, size) == 0);
        check(dotnet_ipc_string_encode("", buf, sizeof(buf), &size) == 0);
        check(size == sizeof(empty) && memcmp(buf, empty, size) == 0);
        check(dotnet_ipc_string_encode(NULL, buf, sizeof(buf), &size) == 0);
        check(size == 4 && memcmp(buf, "\0\0\0\0", 4) == 0);
        check(dotnet_ipc_string_encode("\xc3\xa9\xf0\x9f\x98\x80", buf, sizeof(buf), &size) == 0);
        check(size == sizeof(astral) && memcmp(buf, astral, size) == 0);
        check(dotnet_ipc_string_encode("\xff", buf, sizeof(buf), &size) == DOTNET_IPC_E_MALFORMED);
        check(dotnet_ipc_string_encode("hi", buf, 9, &size) == -ENOBUFS);

        check(dotnet_ipc_string_decode(astral, sizeof(astral), &s, &used) == 0);
        check(used == sizeof(astral) && s && strcmp(s, "\xc3\xa9\xf0\x9f\x98\x80") == 0);
        free(s);

        check(dotnet_ipc_string_decode(buf, 4, &s, &used) == DOTNET_IPC_E_TRUNCATED);
        memcpy(buf, "\0\0\0\0", 4);
        check(dotnet_ipc_string_decode(buf, 4, &s, &used) == 0 && s == NULL && used == 4);
}

static void test_string_decode_hostile(void) {
        /* count claims more units than the buffer holds */
        static const uint8_t too_long[] = { 9, 0, 0, 0, 'a', 0, 0, 0 };
        /* no terminating NUL */
        static const uint8_t unterminated[] = { 2, 0, 0, 0, 'a', 0, 'b', 0 };
        /* lone high surrogate, embedded NUL, lone low surrogate */
        static const uint8_t ill[] = { 5, 0, 0, 0, 0x00, 0xD8, 0, 0, 0x00, 0xDC, 'x', 0, 0, 0 };
        size_t used;
        char *s;

        check(dotnet_ipc_string_decode(too_long, sizeof(too_long), &s, &used) == DOTNET_IPC_E_TRUNCATED);
        check(dotnet_ipc_string_decode(unterminated, sizeof(unterminated), &s, &used) == DOTNET_IPC_E_MALFORMED);
        check(dotnet_ipc_string_decode(ill, sizeof(ill), &s, &used) == 0);
        check(s && strcmp(s, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx") == 0);
        free(s);
}

/* Appends a protocol string to @p and returns the new end. */
static uint8_t *put_string(uint8_t *p, const char *s) {
        size_t size;
        if (dotnet_ipc_string_encode(s, p, 256, &size) != 0)
                abort();
        return p + size;
}

static size_t build_process_info3(uint8_t *buf, uint32_t version, uint64_t pid) {
        uint8_t *p = buf;

        memcpy(p, &version, 4);
        p += 4;
        memcpy(p, &pid, 8);
        p += 8;
        for (int i = 0; i < 16; i++)
                *p++ = (uint8_t)(0xA0 + i);
        p = put_string(p, "/usr/bin/dotnet app.dll --flag");
        p = put_string(p, "Linux");
        p = put_string(p, "x64");
        p = put_string(p, "App");
        p = put_string(p, "10.0.12");
        p = put_string(p, "linux-x64");
        return (size_t)(p - buf);
}

static void test_process_info3_decode(void) {
        DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        uint8_t buf[1024];
        size_t size;

        size = build_process_info3(buf, 1, 4242);
        check(dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO3, buf, size, &info) == 0);
        check(info.version == 1 && info.pid == 4242 && info.cookie[0] == 0xA0 && info.cookie[15] == 0xAF);
        check(info.command_line && strcmp(info.command_line, "/usr/bin/dotnet app.dll --flag") == 0);
        check(info.os && strcmp(info.os, "Linux") == 0);
        check(info.arch && strcmp(info.arch, "x64") == 0);
        check(info.entry_assembly && strcmp(info.entry_assembly, "App") == 0);
        check(info.runtime_version && strcmp(info.runtime_version, "10.0.12") == 0);
        check(info.runtime_identifier && strcmp(info.runtime_identifier, "linux-x64") == 0);
        dotnet_process_info_done(&info);

        /* version 1 must be consumed exactly */
        buf[size] = 0;
        check(dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO3, buf, size + 1, &info) == DOTNET_IPC_E_MALFORMED);
        /* a later version may append fields */
        size = build_process_info3(buf, 2, 4242);
        buf[size] = 0x55;
        check(dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO3, buf, size + 1, &info) == 0);
        dotnet_process_info_done(&info);
        /* cut anywhere: malformed, never a crash or a partial result */
        for (size_t cut = 0; cut < size; cut++)
                check(dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO3, buf, cut, &info) == DOTNET_IPC_E_MALFORMED);
        check(info.command_line == NULL);
}

static void test_process_info_v1_decode(void) {
        DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        uint8_t buf[512], *p = buf;
        uint64_t pid = 7;

        memcpy(p, &pid, 8);
        p += 8;
        memset(p, 0x11, 16);
        p += 16;
        p = put_string(p, "cmd");
        p = put_string(p, "Linux");
        p = put_string(p, "arm64");
        check(dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO, buf, (size_t)(p - buf), &info) == 0);
        check(info.pid == 7 && info.version == 0 && info.entry_assembly == NULL);
        check(info.arch && strcmp(info.arch, "arm64") == 0);
        dotnet_process_info_done(&info);

        /* the same bytes are too short for ProcessInfo2 */
        check(dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO2, buf, (size_t)(p - buf), &info) ==
              DOTNET_IPC_E_MALFORMED);
        check(dotnet_process_info_decode(DOTNET_IPC_RESUME_RUNTIME, buf, (size_t)(p - buf), &info) == -EINVAL);
}

static void test_command_table(void) {
        const DotnetIpcCommandInfo *c;
        size_t n;

        c = dotnet_ipc_command_table(&n);
        check(c && n == 21);
        c = dotnet_ipc_command_lookup(0x04, 0x08);
        check(c && strcmp(c->name, "ProcessInfo3") == 0 && c->flags == 0);
        c = dotnet_ipc_command_lookup(0x04, 0x07);
        check(c && (c->flags & DOTNET_IPC_FLAG_RUNS_CODE));
        c = dotnet_ipc_command_lookup(0x03, 0x01);
        check(c && (c->flags & DOTNET_IPC_FLAG_RUNS_CODE));
        c = dotnet_ipc_command_lookup(0x02, 0x02);
        check(c && (c->flags & DOTNET_IPC_FLAG_STREAMING));
        check(dotnet_ipc_command_lookup(0x04, 0x09) == NULL);
        check(dotnet_ipc_command_lookup(0xFF, 0x00) == NULL);
        check(strcmp(dotnet_ipc_hresult_name(DOTNET_IPC_HR_UNKNOWN_COMMAND), "unknown command") == 0);
        check(dotnet_ipc_hresult_name(0x12345678) == NULL);
}

/* ---- ProcessEnvironment ---- */

/* Appends one protocol string of ASCII @s (NULL: the null string) at @buf + *@pos. */
static void put_ascii_string(uint8_t *buf, size_t *pos, const char *s) {
        size_t units = s ? strlen(s) + 1 : 0;

        memcpy(buf + *pos, (uint8_t[]){ (uint8_t)units, (uint8_t)(units >> 8), 0, 0 }, 4);
        *pos += 4;
        for (size_t i = 0; i < units; i++, *pos += 2) {
                buf[*pos] = i + 1 < units ? (uint8_t)s[i] : 0;
                buf[*pos + 1] = 0;
        }
}

/* A block of @n strings, with @count as its count. */
static size_t env_block(uint8_t *buf, uint32_t count, const char *const *strings, size_t n) {
        size_t pos = 4;

        memcpy(buf, (uint8_t[]){ (uint8_t)count, (uint8_t)(count >> 8), (uint8_t)(count >> 16),
                                 (uint8_t)(count >> 24) }, 4);
        for (size_t i = 0; i < n; i++)
                put_ascii_string(buf, &pos, strings[i]);
        return pos;
}

static int env_decode(const uint8_t *buf, size_t size, DotnetEnvironment *env) {
        *env = (DotnetEnvironment)DOTNET_ENVIRONMENT_NULL;
        return dotnet_environment_decode(buf, size, env);
}

static void test_environment_decode(void) {
        static const char *const strings[] = { "PATH=/usr/bin:/bin", "EMPTY=", "A=b=c", "DB_PASSWORD=hunter2",
                                               "PATH=again" };
        DotnetEnvironment env;
        uint8_t buf[512], *again = NULL;
        size_t size = env_block(buf, 5, strings, 5), again_size = 0;

        check(env_decode(buf, size, &env) == 0);
        check(env.n == 5);
        if (env.n == 5) {
                /* the runtime's order, a repeated name twice, a value may hold '=' and be empty */
                check(strcmp(env.variables[0].name, "PATH") == 0);
                check(strcmp(env.variables[0].value, "/usr/bin:/bin") == 0);
                check(strcmp(env.variables[1].name, "EMPTY") == 0 && strcmp(env.variables[1].value, "") == 0);
                check(strcmp(env.variables[2].name, "A") == 0 && strcmp(env.variables[2].value, "b=c") == 0);
                check(strcmp(env.variables[3].name, "DB_PASSWORD") == 0);
                check(strcmp(env.variables[4].name, "PATH") == 0 && strcmp(env.variables[4].value, "again") == 0);
        }
        /* what decodes comes back byte for byte */
        check(dotnet_environment_encode(env.variables, env.n, &again, &again_size) == 0);
        check(again_size == size && again && memcmp(again, buf, size) == 0);
        free(again);
        dotnet_environment_done(&env);
        check(env.n == 0 && !env.variables);

        /* no variables at all */
        size = env_block(buf, 0, NULL, 0);
        check(env_decode(buf, size, &env) == 0 && env.n == 0);
        dotnet_environment_done(&env);
}

static void test_environment_decode_hostile(void) {
        static const char *const two[] = { "A=1", "B=2" };
        static const char *const no_eq[] = { "NOEQUALS" };
        static const char *const no_name[] = { "=value" };
        static const char *const null[] = { NULL };
        static const uint8_t lone[] = { 1, 0, 0, 0, 4, 0, 0, 0, 'X', 0, '=', 0, 0x00, 0xD8, 0, 0 };
        DotnetEnvironment env;
        uint8_t buf[256];
        size_t size;

        /* the count must agree with the strings, both ways */
        size = env_block(buf, 3, two, 2);
        check(env_decode(buf, size, &env) == DOTNET_IPC_E_MALFORMED);
        size = env_block(buf, 1, two, 2);
        check(env_decode(buf, size, &env) == DOTNET_IPC_E_MALFORMED);
        /* a count far beyond what the bytes hold is refused before anything is allocated for it */
        size = env_block(buf, 0xFFFFFFFFu, two, 2);
        check(env_decode(buf, size, &env) == DOTNET_IPC_E_MALFORMED);
        /* each string is NAME=VALUE, with a name */
        size = env_block(buf, 1, no_eq, 1);
        check(env_decode(buf, size, &env) == DOTNET_IPC_E_MALFORMED);
        size = env_block(buf, 1, no_name, 1);
        check(env_decode(buf, size, &env) == DOTNET_IPC_E_MALFORMED);
        size = env_block(buf, 1, null, 1);
        memset(buf + size, 0, 6); /* room enough for one variable, so that the null string itself is refused */
        check(env_decode(buf, size + 6, &env) == DOTNET_IPC_E_MALFORMED);
        /* cut anywhere inside the last string */
        size = env_block(buf, 2, two, 2);
        for (size_t cut = 1; cut < 10; cut++)
                check(env_decode(buf, size - cut, &env) == DOTNET_IPC_E_MALFORMED);
        check(env_decode(buf, 3, &env) == DOTNET_IPC_E_MALFORMED);
        check(env_decode(buf, DOTNET_IPC_ENVIRONMENT_MAX + 1u, &env) == DOTNET_IPC_E_TOO_LARGE);
        /* a lone surrogate in a value becomes U+FFFD, as in every protocol string */
        check(env_decode(lone, sizeof(lone), &env) == 0);
        check(env.n == 1 && strcmp(env.variables[0].name, "X") == 0 &&
              strcmp(env.variables[0].value, "\xEF\xBF\xBD") == 0);
        dotnet_environment_done(&env);
}

static void test_environment_size_decode(void) {
        uint8_t payload[6] = { 0x10, 0x00, 0x00, 0x00, 0x00, 0x00 };
        DotnetIpcResponse reply = { .ok = true, .payload = payload, .payload_size = 6 };
        uint32_t size = 0;

        check(dotnet_ipc_environment_size_decode(&reply, &size) == 0 && size == 16);
        reply.payload_size = 4; /* the u16 is part of the reply */
        check(dotnet_ipc_environment_size_decode(&reply, &size) == DOTNET_IPC_E_MALFORMED);
        reply.payload_size = 7;
        check(dotnet_ipc_environment_size_decode(&reply, &size) == DOTNET_IPC_E_MALFORMED);
        reply.payload_size = 6;
        payload[4] = 1; /* held to 0, like the headers' reserved field */
        check(dotnet_ipc_environment_size_decode(&reply, &size) == DOTNET_IPC_E_MALFORMED);
        payload[4] = 0;
        payload[0] = 3; /* no room for the count */
        check(dotnet_ipc_environment_size_decode(&reply, &size) == DOTNET_IPC_E_MALFORMED);
        payload[0] = 0;
        payload[3] = 0x10; /* 256 MiB */
        check(dotnet_ipc_environment_size_decode(&reply, &size) == DOTNET_IPC_E_TOO_LARGE);
        payload[3] = 0;
        payload[0] = 4;
        reply.ok = false;
        check(dotnet_ipc_environment_size_decode(&reply, &size) == DOTNET_IPC_E_MALFORMED);
}

static void test_environment_encode(void) {
        char name[] = "TOKEN", value[] = "<redacted>", bad[] = "A=B", empty[] = "";
        DotnetEnvVariable v = { .name = name, .value = value };
        DotnetEnvironment env;
        uint8_t *block = NULL;
        size_t size = 0;

        check(dotnet_environment_encode(&v, 1, &block, &size) == 0);
        check(size == 4 + 4 + 2 * (strlen("TOKEN=<redacted>") + 1));
        check(block && env_decode(block, size, &env) == 0);
        check(env.n == 1 && strcmp(env.variables[0].value, "<redacted>") == 0);
        dotnet_environment_done(&env);
        free(block);

        v.name = bad;
        check(dotnet_environment_encode(&v, 1, &block, &size) == DOTNET_IPC_E_MALFORMED);
        v.name = empty;
        check(dotnet_environment_encode(&v, 1, &block, &size) == DOTNET_IPC_E_MALFORMED);
}

/* ipc-protocol.md 4.3: an advertise as the runtime writes it, for pid 1234 (0x4D2) */
static const uint8_t advertise_1234[DOTNET_IPC_ADVERTISE_SIZE] = {
        0x41, 0x44, 0x56, 0x52, 0x5F, 0x56, 0x31, 0x00,                 /* "ADVR_V1\0" */
        0x3F, 0x25, 0x04, 0xE0, 0x4F, 0x89, 0x41, 0xD3,                 /* cookie */
        0x9A, 0x0C, 0x03, 0x05, 0xE8, 0x2C, 0x33, 0x01,
        0xD2, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,                 /* pid, u64 LE */
        0x00, 0x00,                                                     /* reserved */
};

static const uint8_t advertise_cookie[16] = { 0x3F, 0x25, 0x04, 0xE0, 0x4F, 0x89, 0x41, 0xD3,
                                              0x9A, 0x0C, 0x03, 0x05, 0xE8, 0x2C, 0x33, 0x01 };

/* Decodes @buf and checks that a failure leaves the result untouched. */
static int advertise_decode_untouched(const uint8_t *buf, size_t size) {
        DotnetIpcAdvertise a;
        int r;

        memset(&a, 0x5A, sizeof(a));
        r = dotnet_ipc_advertise_decode(buf, size, &a);
        if (r < 0) {
                uint8_t canary[sizeof(a)];

                memset(canary, 0x5A, sizeof(canary));
                check(memcmp(&a, canary, sizeof(a)) == 0);
        }
        return r;
}

static void test_advertise_vector(void) {
        DotnetIpcAdvertise a = {};
        uint8_t buf[DOTNET_IPC_ADVERTISE_SIZE];

        check(DOTNET_IPC_ADVERTISE_SIZE == 34);
        check(dotnet_ipc_advertise_decode(advertise_1234, sizeof(advertise_1234), &a) == 0);
        check(a.pid == 1234);
        check(memcmp(a.cookie, advertise_cookie, 16) == 0);

        memset(buf, 0xEE, sizeof(buf));
        check(dotnet_ipc_advertise_encode(&a, buf, sizeof(buf)) == 0);
        check(memcmp(buf, advertise_1234, sizeof(buf)) == 0);
}

static void test_advertise_round_trip(void) {
        static const uint64_t pids[] = { 1, 2, 1234, 4194304, INT32_MAX };
        uint8_t buf[DOTNET_IPC_ADVERTISE_SIZE + 8];

        for (size_t i = 0; i < sizeof(pids) / sizeof(pids[0]); i++) {
                DotnetIpcAdvertise in = { .pid = pids[i] }, out = {};

                for (int j = 0; j < 16; j++)
                        in.cookie[j] = (uint8_t)(0xC0 + j * 3 + i);
                /* a larger buffer is fine; exactly DOTNET_IPC_ADVERTISE_SIZE bytes are written */
                memset(buf, 0xEE, sizeof(buf));
                check(dotnet_ipc_advertise_encode(&in, buf, sizeof(buf)) == 0);
                check(buf[DOTNET_IPC_ADVERTISE_SIZE] == 0xEE);
                check(dotnet_ipc_advertise_decode(buf, DOTNET_IPC_ADVERTISE_SIZE, &out) == 0);
                check(out.pid == in.pid && memcmp(out.cookie, in.cookie, 16) == 0);
        }
}

/* The advertised cookie is the ProcessInfo cookie, byte for byte: memcmp() compares them. */
static void test_advertise_cookie_matches_process_info(void) {
        DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        DotnetIpcAdvertise a = {};
        uint8_t payload[256], *p = payload;
        uint64_t pid = 1234;

        memcpy(p, &pid, 8);
        p += 8;
        memcpy(p, advertise_cookie, 16);
        p += 16;
        p = put_string(p, "/usr/bin/dotnet app.dll");
        p = put_string(p, "Linux");
        p = put_string(p, "x64");
        check(dotnet_process_info_decode(DOTNET_IPC_PROCESS_INFO, payload, (size_t)(p - payload), &info) == 0);
        check(dotnet_ipc_advertise_decode(advertise_1234, sizeof(advertise_1234), &a) == 0);
        check(sizeof(a.cookie) == sizeof(info.cookie));
        check(memcmp(a.cookie, info.cookie, sizeof(a.cookie)) == 0);
        check(a.pid == info.pid);
        dotnet_process_info_done(&info);
}

static void test_advertise_decode_rejects(void) {
        uint8_t buf[DOTNET_IPC_ADVERTISE_SIZE + 1];

        /* wrong magic: another word, another version, a missing NUL */
        memcpy(buf, advertise_1234, DOTNET_IPC_ADVERTISE_SIZE);
        memcpy(buf, "DOTNET_I", 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);
        memcpy(buf, "ADVR_V2", 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);
        memcpy(buf, "ADVR_V1", 8);
        buf[7] = ' ';
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);
        memcpy(buf, "advr_v1", 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);

        /* reserved must be zero, either byte */
        memcpy(buf, advertise_1234, DOTNET_IPC_ADVERTISE_SIZE);
        buf[32] = 1;
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);
        buf[32] = 0;
        buf[33] = 0x80;
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);

        /* pid 0, pid INT32_MAX + 1, pids that only the high half makes too large */
        memcpy(buf, advertise_1234, DOTNET_IPC_ADVERTISE_SIZE);
        memset(buf + 24, 0, 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);
        memcpy(buf + 24, (uint8_t[]){ 0x00, 0x00, 0x00, 0x80, 0, 0, 0, 0 }, 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);
        memcpy(buf + 24, (uint8_t[]){ 0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0 }, 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == 0);
        memcpy(buf + 24, (uint8_t[]){ 0xD2, 0x04, 0x00, 0x00, 0x01, 0, 0, 0 }, 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);
        memset(buf + 24, 0xFF, 8);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == -EBADMSG);

        /* exactly 34 bytes: every shorter size, and one more */
        memcpy(buf, advertise_1234, DOTNET_IPC_ADVERTISE_SIZE);
        buf[DOTNET_IPC_ADVERTISE_SIZE] = 0;
        for (size_t size = 0; size < DOTNET_IPC_ADVERTISE_SIZE; size++)
                check(advertise_decode_untouched(buf, size) == -EINVAL);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE + 1) == -EINVAL);
        check(advertise_decode_untouched(buf, SIZE_MAX) == -EINVAL);
        check(advertise_decode_untouched(buf, DOTNET_IPC_ADVERTISE_SIZE) == 0);
}

static void test_advertise_encode_rejects(void) {
        DotnetIpcAdvertise a = { .pid = 0 };
        uint8_t buf[DOTNET_IPC_ADVERTISE_SIZE], untouched[DOTNET_IPC_ADVERTISE_SIZE];

        memset(buf, 0xEE, sizeof(buf));
        memset(untouched, 0xEE, sizeof(untouched));
        check(dotnet_ipc_advertise_encode(&a, buf, sizeof(buf)) == -EINVAL);
        a.pid = (uint64_t)INT32_MAX + 1;
        check(dotnet_ipc_advertise_encode(&a, buf, sizeof(buf)) == -EINVAL);
        a.pid = UINT64_MAX;
        check(dotnet_ipc_advertise_encode(&a, buf, sizeof(buf)) == -EINVAL);
        a.pid = 1234;
        check(dotnet_ipc_advertise_encode(&a, buf, DOTNET_IPC_ADVERTISE_SIZE - 1) == -ENOBUFS);
        check(dotnet_ipc_advertise_encode(&a, buf, 0) == -ENOBUFS);
        check(memcmp(buf, untouched, sizeof(buf)) == 0);
}

int main(void) {
        run_test(test_process_info_request_vector);
        run_test(test_header_decode_rejects);
        run_test(test_reply_ends_exchange);
        run_test(test_response_ok_and_error);
        run_test(test_string_vectors);
        run_test(test_string_decode_hostile);
        run_test(test_process_info3_decode);
        run_test(test_process_info_v1_decode);
        run_test(test_command_table);
        run_test(test_environment_decode);
        run_test(test_environment_decode_hostile);
        run_test(test_environment_size_decode);
        run_test(test_environment_encode);
        run_test(test_advertise_vector);
        run_test(test_advertise_round_trip);
        run_test(test_advertise_cookie_matches_process_info);
        run_test(test_advertise_decode_rejects);
        run_test(test_advertise_encode_rejects);
        return tap_finish();
}
