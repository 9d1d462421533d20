/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Byte-exact vectors for the .NET diagnostic IPC codec */
#include <stdlib.h>
#include <string.h>

#include "dotnet-ipc.h"
#include "tap.h"

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

int main(void) {
        run_test(test_process_info_request_vector);
        run_test(test_header_decode_rejects);
        run_test(test_response_ok_and_error);
        run_test(test_string_vectors);
        run_test(test_string_decode_hostile);
        run_test(test_process_info3_decode);
        run_test(test_process_info_v1_decode);
        run_test(test_command_table);
        return tap_finish();
}
