/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes dotnet_ipc_advertise_decode() (common/dotnet-ipc.h): the 34 bytes a
 * runtime started with DOTNET_DiagnosticPorts=PATH,connect writes first on
 * every connection to the agent's reverse port. Any process that can connect
 * to the port writes them instead; the agent reads them as root.
 *
 * Input: the bytes to decode, of any size (only 34 bytes can decode).
 *
 * Invariants: the result is 0, -EINVAL or -EBADMSG, and agrees with a reference
 * written from the layout (-EINVAL exactly when the size is not 34; -EBADMSG
 * for a magic other than "ADVR_V1\0", a non-zero reserved u16 or a pid outside
 * 1..INT32_MAX); the result is untouched on failure; a decoded advertise holds
 * the input's cookie and pid, and encodes back to the input byte for byte,
 * into exactly 34 bytes of a larger buffer and never into a smaller one.
 *
 * Also, for any input of at least 24 bytes: its first 16 bytes as a cookie
 * and the next 8 as a u64 LE pid encode exactly when the pid is in
 * 1..INT32_MAX (-EINVAL otherwise, the buffer untouched), and what is written
 * decodes to that cookie and pid.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/dotnet-ipc.h"
#include "tests/fuzz/fuzz.h"

static uint64_t le64(const uint8_t *p) {
        uint64_t v = 0;

        for (int i = 7; i >= 0; i--)
                v = v << 8 | p[i];
        return v;
}

/* Return: 0, -EINVAL or -EBADMSG, as dotnet_ipc_advertise_decode() should. */
static int reference_decode(const uint8_t *data, size_t size) {
        static const char magic[8] = { 'A', 'D', 'V', 'R', '_', 'V', '1', '\0' };
        uint64_t pid;

        if (size != 34)
                return -EINVAL;
        for (size_t i = 0; i < sizeof(magic); i++)
                if (data[i] != (uint8_t)magic[i])
                        return -EBADMSG;
        if (data[32] != 0 || data[33] != 0)
                return -EBADMSG;
        pid = le64(data + 24);
        if (pid == 0 || pid > 0x7FFFFFFF)
                return -EBADMSG;
        return 0;
}

/* The encoder on its own, fed a cookie and a pid from the input. */
static void check_encode(const uint8_t *data, size_t size) {
        DotnetIpcAdvertise in = {}, out = {};
        uint8_t buf[DOTNET_IPC_ADVERTISE_SIZE];
        int r;

        if (size < 24)
                return;
        memcpy(in.cookie, data, sizeof(in.cookie));
        in.pid = le64(data + 16);

        memset(buf, 0xEE, sizeof(buf));
        r = dotnet_ipc_advertise_encode(&in, buf, sizeof(buf));
        if (in.pid == 0 || in.pid > 0x7FFFFFFF) {
                fuzz_assert(r == -EINVAL);
                for (size_t i = 0; i < sizeof(buf); i++)
                        fuzz_assert(buf[i] == 0xEE);
                return;
        }
        fuzz_assert(r == 0);
        fuzz_assert(reference_decode(buf, sizeof(buf)) == 0);
        fuzz_assert(dotnet_ipc_advertise_decode(buf, sizeof(buf), &out) == 0);
        fuzz_assert(out.pid == in.pid && memcmp(out.cookie, in.cookie, sizeof(in.cookie)) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        DotnetIpcAdvertise a, canary;
        uint8_t again[DOTNET_IPC_ADVERTISE_SIZE + 1];
        int r;

        check_encode(data, size);

        memset(&a, 0x5A, sizeof(a));
        memset(&canary, 0x5A, sizeof(canary));

        r = dotnet_ipc_advertise_decode(data, size, &a);
        fuzz_assert(r == reference_decode(data, size));
        if (r < 0) {
                fuzz_assert(memcmp(&a, &canary, sizeof(a)) == 0);
                return 0;
        }

        fuzz_assert(size == DOTNET_IPC_ADVERTISE_SIZE);
        fuzz_assert(memcmp(a.cookie, data + 8, sizeof(a.cookie)) == 0);
        fuzz_assert(a.pid == le64(data + 24));

        memset(again, 0xEE, sizeof(again));
        fuzz_assert(dotnet_ipc_advertise_encode(&a, again, DOTNET_IPC_ADVERTISE_SIZE - 1) == -ENOBUFS);
        fuzz_assert(again[0] == 0xEE);
        fuzz_assert(dotnet_ipc_advertise_encode(&a, again, sizeof(again)) == 0);
        fuzz_assert(memcmp(again, data, DOTNET_IPC_ADVERTISE_SIZE) == 0);
        fuzz_assert(again[DOTNET_IPC_ADVERTISE_SIZE] == 0xEE);
        return 0;
}
