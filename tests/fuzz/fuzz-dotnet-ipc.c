/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the decoders of what a .NET runtime sends the agent (common/dotnet-ipc.h).
 * The runtime is not trusted: any process can listen on a socket of the
 * expected name, and the agent talks to it as root.
 *
 * Input: one mode byte, then the bytes to decode.
 *   mode % 5 == 0: a whole reply message (header + payload); an OK reply's
 *                  payload is then decoded as ProcessInfo, ProcessInfo2 and
 *                  ProcessInfo3
 *   mode % 5 == 1, 2, 3: a ProcessInfo, ProcessInfo2, ProcessInfo3 payload
 *   mode % 5 == 4: one protocol string
 *
 * Invariants: results point inside the input; decoded strings are valid UTF-8;
 * encoding a decoded string (or ProcessInfo) and decoding it again gives the
 * same value, and gives back the input bytes when the input was well-formed
 * UTF-16 without embedded NULs.
 */
#include <stdbool.h>
#include <string.h>

#include "common/dotnet-ipc.h"
#include "tests/fuzz/fuzz.h"
#include "common/text.h"

/* dotnet_ipc_string_encode()'s limit on UTF-16 units, NUL included */
#define STRING_UNITS_MAX ((DOTNET_IPC_MESSAGE_MAX - DOTNET_IPC_HEADER_SIZE - 4) / 2)

static uint16_t le16(const uint8_t *p) {
        return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p) {
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v) {
        for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
}

/* A non-null decoded string must be NUL-free valid UTF-8 (NUL-free is implied
 * by the round trip, which counts UTF-16 units). */
static void check_utf8(const char *s) {
        if (s)
                fuzz_assert(utf8_is_valid(s, strlen(s)));
}

static bool streq_null(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}

/* Is the string at @p (already decoded successfully, @units > 0) well-formed
 * UTF-16 with no NUL before its terminator? Only then is decoding lossless. */
static bool utf16_is_clean(const uint8_t *p, uint32_t units) {
        for (uint32_t i = 0; i + 1 < units; i++) {
                uint16_t u = le16(p + 4 + (size_t)i * 2);

                if (u == 0 || (u >= 0xDC00 && u <= 0xDFFF))
                        return false;
                if (u >= 0xD800 && u <= 0xDBFF) {
                        uint16_t low;

                        if (i + 2 >= units)
                                return false;
                        low = le16(p + 4 + (size_t)(i + 1) * 2);
                        if (low < 0xDC00 || low > 0xDFFF)
                                return false;
                        i++;
                }
        }
        return true;
}

/*
 * Encodes @s and appends it at @buf + *@pos (capacity @cap). The decoded
 * string came from @units UTF-16 units; each unit decodes to one code point or
 * a pair to one supplementary one, so re-encoding yields exactly @units units.
 * Returns false when the string is too long for the encoder (only possible
 * for inputs larger than any real message).
 */
static bool encode_string(const char *s, uint32_t units, uint8_t *buf, size_t cap, size_t *pos) {
        size_t n = 0;
        int r;

        r = dotnet_ipc_string_encode(s, buf + *pos, cap - *pos, &n);
        if (r == DOTNET_IPC_E_TOO_LARGE) {
                fuzz_assert(s && units > STRING_UNITS_MAX);
                return false;
        }
        fuzz_assert(r == 0);
        fuzz_assert(n == 4 + (size_t)units * 2);
        fuzz_assert(le32(buf + *pos) == units);
        *pos += n;
        return true;
}

static void fuzz_string(const uint8_t *data, size_t size) {
        char *s = NULL, *again = NULL;
        size_t consumed = 0, consumed_again = 0, n = 0;
        uint8_t *buf;
        uint32_t units;
        int r;

        r = dotnet_ipc_string_decode(data, size, &s, &consumed);
        if (r != 0) {
                fuzz_assert(r == DOTNET_IPC_E_TRUNCATED || r == DOTNET_IPC_E_MALFORMED);
                fuzz_assert(!(r == DOTNET_IPC_E_TRUNCATED && size >= 4 &&
                              (size_t)le32(data) <= (size - 4) / 2));
                return;
        }

        units = le32(data);
        fuzz_assert(consumed == 4 + (size_t)units * 2);
        fuzz_assert(consumed <= size);
        fuzz_assert((units == 0) == (s == NULL));
        check_utf8(s);

        buf = malloc(consumed);
        fuzz_assert(buf);
        if (encode_string(s, units, buf, consumed, &n)) {
                fuzz_assert(n == consumed);
                if (units > 0 && utf16_is_clean(data, units))
                        fuzz_assert(memcmp(buf, data, consumed) == 0);

                r = dotnet_ipc_string_decode(buf, n, &again, &consumed_again);
                fuzz_assert(r == 0);
                fuzz_assert(consumed_again == n);
                fuzz_assert(streq_null(s, again));
        }
        free(again);
        free(buf);
        free(s);
}

/* Units of each string in a ProcessInfo payload that decoded successfully,
 * walked independently of the decoder; also tells whether all were clean. */
typedef struct StringWalk {
        uint32_t units[6];
        size_t n;
        bool clean;
        size_t end; /* offset after the last known field */
} StringWalk;

static void walk_strings(DotnetIpcCommand command, const uint8_t *p, size_t size, StringWalk *w) {
        size_t pos = (command == DOTNET_IPC_PROCESS_INFO3 ? 4 : 0) + 8 + 16;
        size_t count = command == DOTNET_IPC_PROCESS_INFO ? 3 : command == DOTNET_IPC_PROCESS_INFO2 ? 5 : 6;

        *w = (StringWalk){ .clean = true };
        for (size_t i = 0; i < count; i++) {
                uint32_t units;

                fuzz_assert(size - pos >= 4);
                units = le32(p + pos);
                fuzz_assert((size - pos - 4) / 2 >= units);
                if (units > 0 && !utf16_is_clean(p + pos, units))
                        w->clean = false;
                w->units[w->n++] = units;
                pos += 4 + (size_t)units * 2;
        }
        w->end = pos;
}

static void fuzz_process_info(DotnetIpcCommand command, const uint8_t *payload, size_t size) {
        DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL, again = DOTNET_PROCESS_INFO_NULL;
        const char *strings[6];
        StringWalk w;
        uint8_t *buf;
        size_t pos = 0;
        bool encoded = true;
        int r;

        r = dotnet_process_info_decode(command, payload, size, &info);
        if (r != 0) {
                fuzz_assert(r == DOTNET_IPC_E_MALFORMED);
                return;
        }

        if (command == DOTNET_IPC_PROCESS_INFO3)
                fuzz_assert(info.version >= 1);
        else
                fuzz_assert(info.version == 0);
        if (command == DOTNET_IPC_PROCESS_INFO)
                fuzz_assert(!info.entry_assembly && !info.runtime_version);
        if (command != DOTNET_IPC_PROCESS_INFO3)
                fuzz_assert(!info.runtime_identifier);

        strings[0] = info.command_line;
        strings[1] = info.os;
        strings[2] = info.arch;
        strings[3] = info.entry_assembly;
        strings[4] = info.runtime_version;
        strings[5] = info.runtime_identifier;
        for (size_t i = 0; i < 6; i++)
                check_utf8(strings[i]);

        walk_strings(command, payload, size, &w);
        fuzz_assert(w.end == size || (command == DOTNET_IPC_PROCESS_INFO3 && info.version > 1));
        for (size_t i = 0; i < w.n; i++)
                fuzz_assert((w.units[i] == 0) == (strings[i] == NULL));

        /* re-encode the known fields; that is never longer than what was decoded */
        buf = malloc(w.end);
        fuzz_assert(buf);
        if (command == DOTNET_IPC_PROCESS_INFO3) {
                put_le32(buf, info.version);
                pos = 4;
        }
        put_le32(buf + pos, (uint32_t)info.pid);
        put_le32(buf + pos + 4, (uint32_t)(info.pid >> 32));
        memcpy(buf + pos + 8, info.cookie, 16);
        pos += 24;
        for (size_t i = 0; i < w.n && encoded; i++)
                encoded = encode_string(strings[i], w.units[i], buf, w.end, &pos);

        if (encoded) {
                fuzz_assert(pos == w.end);
                if (w.clean)
                        fuzz_assert(memcmp(buf, payload, pos) == 0);

                r = dotnet_process_info_decode(command, buf, pos, &again);
                fuzz_assert(r == 0);
                fuzz_assert(again.version == info.version);
                fuzz_assert(again.pid == info.pid);
                fuzz_assert(memcmp(again.cookie, info.cookie, 16) == 0);
                fuzz_assert(streq_null(again.command_line, info.command_line));
                fuzz_assert(streq_null(again.os, info.os));
                fuzz_assert(streq_null(again.arch, info.arch));
                fuzz_assert(streq_null(again.entry_assembly, info.entry_assembly));
                fuzz_assert(streq_null(again.runtime_version, info.runtime_version));
                fuzz_assert(streq_null(again.runtime_identifier, info.runtime_identifier));
                dotnet_process_info_done(&again);
        }
        free(buf);

        dotnet_process_info_done(&info);
        fuzz_assert(!info.command_line && !info.os && !info.arch && !info.entry_assembly &&
                    !info.runtime_version && !info.runtime_identifier);
}

static void fuzz_header(const uint8_t *data, size_t size) {
        uint8_t again[DOTNET_IPC_HEADER_SIZE];
        DotnetIpcHeader h;
        int r;

        r = dotnet_ipc_header_decode(data, size, &h);
        if (r != 0) {
                fuzz_assert(r == DOTNET_IPC_E_TRUNCATED || r == DOTNET_IPC_E_MALFORMED);
                fuzz_assert((r == DOTNET_IPC_E_TRUNCATED) == (size < DOTNET_IPC_HEADER_SIZE));
                return;
        }
        fuzz_assert(h.size >= DOTNET_IPC_HEADER_SIZE);
        fuzz_assert(h.reserved == 0);

        /* a header that decodes is exactly what the encoder writes for its fields */
        dotnet_ipc_header_encode(again, h.size, h.command_set, h.command_id);
        fuzz_assert(memcmp(again, data, DOTNET_IPC_HEADER_SIZE) == 0);

        (void)dotnet_ipc_command_lookup(h.command_set, h.command_id);
}

static void fuzz_response(const uint8_t *data, size_t size) {
        DotnetIpcResponse reply;
        int r;

        fuzz_header(data, size);

        r = dotnet_ipc_response_decode(data, size, &reply);
        if (r != 0) {
                fuzz_assert(r == DOTNET_IPC_E_TRUNCATED || r == DOTNET_IPC_E_MALFORMED);
                return;
        }

        /* the whole message is one reply of the Server set, and the payload is its tail */
        fuzz_assert(size >= DOTNET_IPC_HEADER_SIZE && le16(data + 14) == size);
        fuzz_assert(data[16] == DOTNET_IPC_SET_SERVER);
        fuzz_assert(reply.payload >= data + DOTNET_IPC_HEADER_SIZE);
        fuzz_assert(reply.payload_size == size - (size_t)(reply.payload - data));
        if (reply.ok) {
                fuzz_assert(data[17] == 0x00);
                fuzz_assert(reply.hresult == 0);
                fuzz_assert(reply.payload == data + DOTNET_IPC_HEADER_SIZE);
        } else {
                fuzz_assert(data[17] == 0xFF);
                fuzz_assert(reply.payload == data + DOTNET_IPC_HEADER_SIZE + 4);
                fuzz_assert(reply.hresult == le32(data + DOTNET_IPC_HEADER_SIZE));
                (void)dotnet_ipc_hresult_name(reply.hresult);
                return;
        }

        fuzz_process_info(DOTNET_IPC_PROCESS_INFO, reply.payload, reply.payload_size);
        fuzz_process_info(DOTNET_IPC_PROCESS_INFO2, reply.payload, reply.payload_size);
        fuzz_process_info(DOTNET_IPC_PROCESS_INFO3, reply.payload, reply.payload_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;

        if (size < 1)
                return 0;

        switch (data[0] % 5) {
        case 0:
                fuzz_response(data + 1, size - 1);
                break;
        case 1:
                fuzz_process_info(DOTNET_IPC_PROCESS_INFO, data + 1, size - 1);
                break;
        case 2:
                fuzz_process_info(DOTNET_IPC_PROCESS_INFO2, data + 1, size - 1);
                break;
        case 3:
                fuzz_process_info(DOTNET_IPC_PROCESS_INFO3, data + 1, size - 1);
                break;
        case 4:
                fuzz_string(data + 1, size - 1);
                break;
        }

        /* any other command is refused before a byte is read */
        fuzz_assert(dotnet_process_info_decode(DOTNET_IPC_RESUME_RUNTIME, data, size, &info) < 0);
        return 0;
}
