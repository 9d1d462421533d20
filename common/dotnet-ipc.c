/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The .NET diagnostic IPC codec (dotnet-ipc.h): pure encode and decode over bounded buffers, shared
 * by agent and client.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/dotnet-ipc.h"
#include "common/eventpipe-provider.h"
#include "common/text.h"
#include "common/unaligned.h"

static const uint8_t dotnet_ipc_magic[DOTNET_IPC_MAGIC_SIZE] = "DOTNET_IPC_V1";

#define STREAMING DOTNET_IPC_FLAG_STREAMING
#define RUNS_CODE DOTNET_IPC_FLAG_RUNS_CODE
#define SECRETS DOTNET_IPC_FLAG_READS_SECRETS

static const DotnetIpcCommandInfo dotnet_ipc_commands[] = {
        { DOTNET_IPC_GENERATE_CORE_DUMP, "GenerateCoreDump", SECRETS },
        { DOTNET_IPC_GENERATE_CORE_DUMP2, "GenerateCoreDump2", SECRETS },
        { DOTNET_IPC_GENERATE_CORE_DUMP3, "GenerateCoreDump3", SECRETS },
        { DOTNET_IPC_STOP_TRACING, "StopTracing", 0 },
        { DOTNET_IPC_COLLECT_TRACING, "CollectTracing", STREAMING | SECRETS },
        { DOTNET_IPC_COLLECT_TRACING2, "CollectTracing2", STREAMING | SECRETS },
        { DOTNET_IPC_COLLECT_TRACING3, "CollectTracing3", STREAMING | SECRETS },
        { DOTNET_IPC_COLLECT_TRACING4, "CollectTracing4", STREAMING | SECRETS },
        { DOTNET_IPC_COLLECT_TRACING5, "CollectTracing5", STREAMING | SECRETS },
        { DOTNET_IPC_COLLECT_TRACING6, "CollectTracing6", STREAMING | SECRETS },
        { DOTNET_IPC_ATTACH_PROFILER, "AttachProfiler", RUNS_CODE },
        { DOTNET_IPC_STARTUP_PROFILER, "StartupProfiler", RUNS_CODE },
        { DOTNET_IPC_PROCESS_INFO, "ProcessInfo", 0 },
        /* resuming a suspended runtime lets queued startup hooks and profilers run */
        { DOTNET_IPC_RESUME_RUNTIME, "ResumeRuntime", RUNS_CODE },
        { DOTNET_IPC_PROCESS_ENVIRONMENT, "ProcessEnvironment", SECRETS },
        { DOTNET_IPC_SET_ENVIRONMENT_VARIABLE, "SetEnvironmentVariable", RUNS_CODE },
        { DOTNET_IPC_PROCESS_INFO2, "ProcessInfo2", 0 },
        { DOTNET_IPC_ENABLE_PERF_MAP, "EnablePerfMap", 0 },
        { DOTNET_IPC_DISABLE_PERF_MAP, "DisablePerfMap", 0 },
        { DOTNET_IPC_APPLY_STARTUP_HOOK, "ApplyStartupHook", RUNS_CODE },
        { DOTNET_IPC_PROCESS_INFO3, "ProcessInfo3", 0 },
};

const DotnetIpcCommandInfo *dotnet_ipc_command_lookup(uint8_t command_set, uint8_t command_id) {
        unsigned code = (unsigned)command_set << 8 | command_id;

        for (size_t i = 0; i < ELEMENTSOF(dotnet_ipc_commands); i++)
                if ((unsigned)dotnet_ipc_commands[i].command == code)
                        return &dotnet_ipc_commands[i];
        return NULL;
}

const DotnetIpcCommandInfo *dotnet_ipc_command_table(size_t *ret_count) {
        *ret_count = ELEMENTSOF(dotnet_ipc_commands);
        return dotnet_ipc_commands;
}

const char *dotnet_ipc_hresult_name(uint32_t hresult) {
        switch (hresult) {
        case DOTNET_IPC_HR_OK: return "S_OK";
        case DOTNET_IPC_HR_BAD_ENCODING: return "bad encoding";
        case DOTNET_IPC_HR_UNKNOWN_COMMAND: return "unknown command";
        case DOTNET_IPC_HR_UNKNOWN_MAGIC: return "unknown magic";
        case DOTNET_IPC_HR_NOT_SUPPORTED: return "not supported";
        case DOTNET_IPC_HR_FAIL: return "failed";
        case DOTNET_IPC_HR_NOT_YET_AVAILABLE: return "not yet available";
        case DOTNET_IPC_HR_RUNTIME_UNINITIALIZED: return "runtime not initialized";
        case DOTNET_IPC_HR_INVALID_ARG: return "invalid argument";
        case DOTNET_IPC_HR_INSUFFICIENT_BUFFER: return "insufficient buffer";
        case DOTNET_IPC_HR_ENVVAR_NOT_FOUND: return "environment variable not found";
        case DOTNET_IPC_HR_PROFILER_ALREADY_ACTIVE: return "profiler already active";
        default: return NULL;
        }
}

void dotnet_ipc_header_encode(uint8_t buf[DOTNET_IPC_HEADER_SIZE], uint16_t size, uint8_t command_set,
                              uint8_t command_id) {
        memcpy(buf, dotnet_ipc_magic, DOTNET_IPC_MAGIC_SIZE);
        unaligned_write_le16(buf + 14, size);
        buf[16] = command_set;
        buf[17] = command_id;
        unaligned_write_le16(buf + 18, 0);
}

/**
 * dotnet_ipc_header_decode() - validate and decode a 20-byte header
 *
 * Stricter than the runtime: the reserved field must be zero and the size must
 * cover the header, so a peer cannot smuggle bytes past a lenient check.
 *
 * Return: 0, DOTNET_IPC_E_TRUNCATED if @len < 20, DOTNET_IPC_E_MALFORMED.
 */
int dotnet_ipc_header_decode(const uint8_t *buf, size_t len, DotnetIpcHeader *ret) {
        DotnetIpcHeader h;

        if (len < DOTNET_IPC_HEADER_SIZE)
                return DOTNET_IPC_E_TRUNCATED;
        if (memcmp(buf, dotnet_ipc_magic, DOTNET_IPC_MAGIC_SIZE) != 0)
                return DOTNET_IPC_E_MALFORMED;

        h.size = unaligned_read_le16(buf + 14);
        h.command_set = buf[16];
        h.command_id = buf[17];
        h.reserved = unaligned_read_le16(buf + 18);
        if (h.size < DOTNET_IPC_HEADER_SIZE || h.reserved != 0)
                return DOTNET_IPC_E_MALFORMED;

        *ret = h;
        return 0;
}

bool dotnet_ipc_reply_ends_exchange(const uint8_t *buf, size_t len) {
        DotnetIpcHeader h;

        if (dotnet_ipc_header_decode(buf, len, &h) != 0)
                return false;
        switch ((DotnetIpcCommand)(h.command_set << 8 | h.command_id)) {
        case DOTNET_IPC_PROCESS_INFO:
        case DOTNET_IPC_PROCESS_INFO2:
        case DOTNET_IPC_PROCESS_INFO3:
        case DOTNET_IPC_RESUME_RUNTIME:
                return true;
        default:
                return false;
        }
}

int dotnet_ipc_request_encode(DotnetIpcCommand command, const uint8_t *payload, size_t payload_size,
                              uint8_t *buf, size_t buf_size, size_t *ret_size) {
        size_t total = DOTNET_IPC_HEADER_SIZE + payload_size;

        if (payload_size > DOTNET_IPC_MESSAGE_MAX - DOTNET_IPC_HEADER_SIZE)
                return DOTNET_IPC_E_TOO_LARGE;
        if (buf_size < total)
                return -ENOBUFS;

        dotnet_ipc_header_encode(buf, (uint16_t)total, (uint8_t)(command >> 8), (uint8_t)(command & 0xFF));
        if (payload_size > 0)
                memcpy(buf + DOTNET_IPC_HEADER_SIZE, payload, payload_size);
        *ret_size = total;
        return 0;
}

/*
 * A protocol string of at most @max_units UTF-16 units (NUL included): a message's strings
 * fit in one message, an environment block's may be longer.
 */
static int string_encode_bounded(const char *utf8, size_t max_units, uint8_t *buf, size_t buf_size,
                                 size_t *ret_size) {
        size_t n, len, units = 1, pos = 4;
        uint32_t cp;

        if (!utf8) {
                if (buf_size < 4)
                        return -ENOBUFS;
                unaligned_write_le32(buf, 0);
                *ret_size = 4;
                return 0;
        }

        n = strlen(utf8);
        if (!utf8_is_valid(utf8, n))
                return DOTNET_IPC_E_MALFORMED;

        /* valid, so utf8_decode() takes one whole character each time */
        for (size_t i = 0; i < n; i += len) {
                len = utf8_decode(utf8 + i, n - i, &cp);
                units += cp >= 0x10000 ? 2 : 1;
        }
        if (units > max_units)
                return DOTNET_IPC_E_TOO_LARGE;
        if (buf_size < 4 || (buf_size - 4) / 2 < units)
                return -ENOBUFS;

        unaligned_write_le32(buf, (uint32_t)units);
        for (size_t i = 0; i < n; i += len) {
                len = utf8_decode(utf8 + i, n - i, &cp);
                if (cp >= 0x10000) {
                        cp -= 0x10000;
                        unaligned_write_le16(buf + pos, (uint16_t)(0xD800 | (cp >> 10)));
                        unaligned_write_le16(buf + pos + 2, (uint16_t)(0xDC00 | (cp & 0x3FF)));
                        pos += 4;
                } else {
                        unaligned_write_le16(buf + pos, (uint16_t)cp);
                        pos += 2;
                }
        }
        unaligned_write_le16(buf + pos, 0);
        *ret_size = pos + 2;
        return 0;
}

/**
 * dotnet_ipc_string_encode() - encode UTF-8 as the protocol's UTF-16 string
 * @utf8: valid UTF-8 without NUL bytes, or NULL for the null string
 *
 * Return: 0, DOTNET_IPC_E_MALFORMED for invalid UTF-8, DOTNET_IPC_E_TOO_LARGE,
 * -ENOBUFS if @buf_size is too small.
 */
int dotnet_ipc_string_encode(const char *utf8, uint8_t *buf, size_t buf_size, size_t *ret_size) {
        return string_encode_bounded(utf8, (DOTNET_IPC_MESSAGE_MAX - DOTNET_IPC_HEADER_SIZE - 4) / 2, buf, buf_size,
                                     ret_size);
}

/**
 * dotnet_ipc_string_decode() - decode one protocol string into UTF-8
 *
 * Runtimes do not validate what they send: the units before the NUL
 * terminator go through utf16le_to_utf8(), so ill-formed UTF-16 (lone
 * surrogates) and embedded NULs become U+FFFD instead of truncating or
 * corrupting the string. The last unit must be the NUL terminator.
 *
 * Return: 0 with *@ret_utf8 NULL for the null string, DOTNET_IPC_E_TRUNCATED,
 * DOTNET_IPC_E_MALFORMED, -ENOMEM.
 */
int dotnet_ipc_string_decode(const uint8_t *buf, size_t len, char **ret_utf8, size_t *ret_consumed) {
        uint32_t units;
        char *s;
        int r;

        if (len < 4)
                return DOTNET_IPC_E_TRUNCATED;
        units = unaligned_read_le32(buf);
        if (units == 0) {
                *ret_utf8 = NULL;
                *ret_consumed = 4;
                return 0;
        }
        if (units > (len - 4) / 2)
                return DOTNET_IPC_E_TRUNCATED;
        if (unaligned_read_le16(buf + 4 + (size_t)(units - 1) * 2) != 0)
                return DOTNET_IPC_E_MALFORMED;

        r = utf16le_to_utf8(buf + 4, (size_t)units - 1, &s);
        if (r < 0)
                return r;

        *ret_utf8 = s;
        *ret_consumed = 4 + (size_t)units * 2;
        return 0;
}

/**
 * dotnet_ipc_response_decode() - decode a complete server reply
 *
 * @len must equal the size field: a reply whose size disagrees with what
 * arrived is corrupt (older runtimes truncated the size of large replies).
 * For an error the HRESULT is taken off and @payload holds what follows it.
 *
 * Return: 0, DOTNET_IPC_E_TRUNCATED, DOTNET_IPC_E_MALFORMED.
 */
int dotnet_ipc_response_decode(const uint8_t *msg, size_t len, DotnetIpcResponse *ret) {
        DotnetIpcHeader h;
        DotnetIpcResponse r = {};
        int k;

        k = dotnet_ipc_header_decode(msg, len, &h);
        if (k != 0)
                return k;
        if (len < h.size)
                return DOTNET_IPC_E_TRUNCATED;
        if (len > h.size || h.command_set != DOTNET_IPC_SET_SERVER)
                return DOTNET_IPC_E_MALFORMED;

        r.payload = msg + DOTNET_IPC_HEADER_SIZE;
        r.payload_size = h.size - DOTNET_IPC_HEADER_SIZE;

        switch (h.command_id) {
        case 0x00:
                r.ok = true;
                break;
        case 0xFF:
                if (r.payload_size < 4)
                        return DOTNET_IPC_E_MALFORMED;
                r.hresult = unaligned_read_le32(r.payload);
                r.payload += 4;
                r.payload_size -= 4;
                break;
        default:
                return DOTNET_IPC_E_MALFORMED;
        }

        *ret = r;
        return 0;
}

typedef struct Cursor {
        const uint8_t *p;
        size_t left;
} Cursor;

static int cursor_string(Cursor *c, char **ret) {
        size_t used;
        int r;

        r = dotnet_ipc_string_decode(c->p, c->left, ret, &used);
        if (r != 0)
                return r == DOTNET_IPC_E_TRUNCATED ? DOTNET_IPC_E_MALFORMED : r;
        c->p += used;
        c->left -= used;
        return 0;
}

static int cursor_bytes(Cursor *c, void *out, size_t n) {
        if (c->left < n)
                return DOTNET_IPC_E_MALFORMED;
        memcpy(out, c->p, n);
        c->p += n;
        c->left -= n;
        return 0;
}

void dotnet_process_info_done(DotnetProcessInfo *info) {
        free(info->command_line);
        free(info->os);
        free(info->arch);
        free(info->entry_assembly);
        free(info->runtime_version);
        free(info->runtime_identifier);
        *info = (DotnetProcessInfo)DOTNET_PROCESS_INFO_NULL;
}

/**
 * dotnet_process_info_decode() - decode the payload of a ProcessInfo* reply
 * @command: which request was answered: ProcessInfo, ProcessInfo2 or ProcessInfo3
 *
 * The payload must be consumed exactly, except that a ProcessInfo3 reply of a
 * version above 1 may carry fields appended after the ones known here.
 *
 * Return: 0, DOTNET_IPC_E_MALFORMED, -EINVAL for another @command, -ENOMEM.
 */
int dotnet_process_info_decode(DotnetIpcCommand command, const uint8_t *payload, size_t payload_size,
                               DotnetProcessInfo *ret) {
        _cleanup_(dotnet_process_info_done) DotnetProcessInfo info = DOTNET_PROCESS_INFO_NULL;
        Cursor c = { payload, payload_size };
        uint8_t raw[8];
        int r;

        if (command != DOTNET_IPC_PROCESS_INFO && command != DOTNET_IPC_PROCESS_INFO2 &&
            command != DOTNET_IPC_PROCESS_INFO3)
                return -EINVAL;

        if (command == DOTNET_IPC_PROCESS_INFO3) {
                r = cursor_bytes(&c, raw, 4);
                if (r != 0)
                        return r;
                info.version = unaligned_read_le32(raw);
                if (info.version < 1)
                        return DOTNET_IPC_E_MALFORMED;
        }

        r = cursor_bytes(&c, raw, 8);
        if (r == 0)
                r = cursor_bytes(&c, info.cookie, sizeof(info.cookie));
        if (r == 0)
                r = cursor_string(&c, &info.command_line);
        if (r == 0)
                r = cursor_string(&c, &info.os);
        if (r == 0)
                r = cursor_string(&c, &info.arch);
        if (r == 0 && command != DOTNET_IPC_PROCESS_INFO)
                r = cursor_string(&c, &info.entry_assembly);
        if (r == 0 && command != DOTNET_IPC_PROCESS_INFO)
                r = cursor_string(&c, &info.runtime_version);
        if (r == 0 && command == DOTNET_IPC_PROCESS_INFO3)
                r = cursor_string(&c, &info.runtime_identifier);
        if (r != 0)
                return r;
        info.pid = unaligned_read_le64(raw);

        if (c.left > 0 && !(command == DOTNET_IPC_PROCESS_INFO3 && info.version > 1))
                return DOTNET_IPC_E_MALFORMED;

        *ret = info;
        info = (DotnetProcessInfo)DOTNET_PROCESS_INFO_NULL;
        return 0;
}

/* "ADVR_V1" and its NUL */
static const uint8_t dotnet_ipc_advertise_magic[8] = "ADVR_V1";

static bool advertise_pid_is_valid(uint64_t pid) {
        return pid > 0 && pid <= INT32_MAX;
}

int dotnet_ipc_advertise_decode(const uint8_t *buf, size_t size, DotnetIpcAdvertise *ret) {
        DotnetIpcAdvertise a;

        if (size != DOTNET_IPC_ADVERTISE_SIZE)
                return -EINVAL;
        if (memcmp(buf, dotnet_ipc_advertise_magic, sizeof(dotnet_ipc_advertise_magic)) != 0)
                return -EBADMSG;
        if (unaligned_read_le16(buf + 32) != 0)
                return -EBADMSG;

        memcpy(a.cookie, buf + 8, sizeof(a.cookie));
        a.pid = unaligned_read_le64(buf + 24);
        if (!advertise_pid_is_valid(a.pid))
                return -EBADMSG;

        *ret = a;
        return 0;
}

int dotnet_ipc_advertise_encode(const DotnetIpcAdvertise *a, uint8_t *buf, size_t size) {
        if (!advertise_pid_is_valid(a->pid))
                return -EINVAL;
        if (size < DOTNET_IPC_ADVERTISE_SIZE)
                return -ENOBUFS;

        memcpy(buf, dotnet_ipc_advertise_magic, sizeof(dotnet_ipc_advertise_magic));
        memcpy(buf + 8, a->cookie, sizeof(a->cookie));
        unaligned_write_le64(buf + 24, a->pid);
        unaligned_write_le16(buf + 32, 0);
        return 0;
}

/**
 * dotnet_ipc_environment_size_decode() - how many bytes of environment follow a ProcessEnvironment reply
 *
 * The OK reply's payload is exactly a u32 size and a u16 that the runtime sets to 0, as the
 * headers' reserved field, and is held to it the same way. The block holds at least its count.
 *
 * Return: 0, DOTNET_IPC_E_MALFORMED, DOTNET_IPC_E_TOO_LARGE past DOTNET_IPC_ENVIRONMENT_MAX.
 */
int dotnet_ipc_environment_size_decode(const DotnetIpcResponse *reply, uint32_t *ret_size) {
        uint32_t size;

        if (!reply->ok || reply->payload_size != 6 || unaligned_read_le16(reply->payload + 4) != 0)
                return DOTNET_IPC_E_MALFORMED;
        size = unaligned_read_le32(reply->payload);
        if (size < 4)
                return DOTNET_IPC_E_MALFORMED;
        if (size > DOTNET_IPC_ENVIRONMENT_MAX)
                return DOTNET_IPC_E_TOO_LARGE;
        *ret_size = size;
        return 0;
}

void dotnet_environment_done(DotnetEnvironment *env) {
        for (size_t i = 0; i < env->n; i++)
                free(env->variables[i].name); /* the value lives in the same allocation */
        free(env->variables);
        *env = (DotnetEnvironment)DOTNET_ENVIRONMENT_NULL;
}

/* The shortest variable the block can hold: count, "a=", NUL. */
#define ENVIRONMENT_VARIABLE_MIN (4 + 3 * 2)

/**
 * dotnet_environment_decode() - the variables of the block that follows a ProcessEnvironment reply
 * @block: all of it, as many bytes as the reply announced
 *
 * The block is a u32 count and that many strings, each "NAME=VALUE", and nothing after them;
 * the count must agree with the strings, and each string must be non-null with a '=' after a
 * name of at least one character. A name is what comes before the first '=': a value may hold
 * more of them. Strings are decoded as dotnet_ipc_string_decode() does (ill-formed UTF-16 and
 * NULs become U+FFFD). Variables keep the runtime's order; a name given twice stays twice.
 *
 * Return: 0, DOTNET_IPC_E_MALFORMED, DOTNET_IPC_E_TOO_LARGE past DOTNET_IPC_ENVIRONMENT_MAX, -ENOMEM.
 */
int dotnet_environment_decode(const uint8_t *block, size_t size, DotnetEnvironment *ret) {
        _cleanup_(dotnet_environment_done) DotnetEnvironment env = DOTNET_ENVIRONMENT_NULL;
        Cursor c = { block, size };
        uint32_t count;

        if (size > DOTNET_IPC_ENVIRONMENT_MAX)
                return DOTNET_IPC_E_TOO_LARGE;
        if (size < 4)
                return DOTNET_IPC_E_MALFORMED;
        count = unaligned_read_le32(block);
        c.p += 4;
        c.left -= 4;
        /* the count is checked against what the bytes can hold before anything is allocated for it */
        if (count > c.left / ENVIRONMENT_VARIABLE_MIN)
                return DOTNET_IPC_E_MALFORMED;
        if (count > 0) {
                env.variables = calloc(count, sizeof(DotnetEnvVariable));
                if (!env.variables)
                        return -ENOMEM;
        }
        for (uint32_t i = 0; i < count; i++) {
                char *s = NULL, *eq;
                int r;

                r = cursor_string(&c, &s);
                if (r != 0)
                        return r;
                if (!s)
                        return DOTNET_IPC_E_MALFORMED;
                eq = strchr(s, '=');
                if (!eq || eq == s) {
                        free(s);
                        return DOTNET_IPC_E_MALFORMED;
                }
                *eq = '\0';
                env.variables[env.n++] = (DotnetEnvVariable){ .name = s, .value = eq + 1 };
        }
        if (c.left > 0)
                return DOTNET_IPC_E_MALFORMED;

        *ret = env;
        env = (DotnetEnvironment)DOTNET_ENVIRONMENT_NULL;
        return 0;
}

/**
 * dotnet_environment_encode() - a block as the runtime writes it, of @n variables
 *
 * Each variable becomes the string "NAME=VALUE". A block that decoded from well-formed
 * UTF-16 without NULs comes back byte for byte. The caller frees *@ret_block.
 *
 * Return: 0, DOTNET_IPC_E_MALFORMED for a name or value that is not valid UTF-8 or a name
 * that is empty or holds '=', DOTNET_IPC_E_TOO_LARGE past 4 GiB, -ENOMEM.
 */
int dotnet_environment_encode(const DotnetEnvVariable *variables, size_t n, uint8_t **ret_block, size_t *ret_size) {
        _cleanup_free_ uint8_t *block = NULL;
        size_t size = 4, pos = 4, used;
        int r;

        if (n > UINT32_MAX)
                return DOTNET_IPC_E_TOO_LARGE;
        /* UTF-16 never takes more units than UTF-8 takes bytes: this is enough, and checked below */
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(variables[i].name) + 1 + strlen(variables[i].value);

                if (!*variables[i].name || strchr(variables[i].name, '='))
                        return DOTNET_IPC_E_MALFORMED;
                if (len > (UINT32_MAX - 4) / 2 - 1 || size > UINT32_MAX - 4 - (len + 1) * 2)
                        return DOTNET_IPC_E_TOO_LARGE;
                size += 4 + (len + 1) * 2;
        }
        block = malloc(size);
        if (!block)
                return -ENOMEM;
        unaligned_write_le32(block, (uint32_t)n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *pair = NULL;

                if (asprintf(&pair, "%s=%s", variables[i].name, variables[i].value) < 0) {
                        pair = NULL;
                        return -ENOMEM;
                }
                r = string_encode_bounded(pair, UINT32_MAX, block + pos, size - pos, &used);
                if (r != 0)
                        return r == -ENOBUFS ? DOTNET_IPC_E_TOO_LARGE : r;
                pos += used;
        }
        *ret_size = pos;
        *ret_block = TAKE_PTR(block);
        return 0;
}

/**
 * dotnet_ipc_collect_tracing_encode() - CollectTracing2 for a streaming NetTrace session
 *
 * Version 2 is the newest request every supported runtime (.NET 5 and
 * later) knows, and says all a session needs: buffer, format, rundown, and
 * the providers with keywords, level and arguments.
 *
 * Return: 0, DOTNET_IPC_E_MALFORMED for a provider without a name or with a
 * level above 5, DOTNET_IPC_E_TOO_LARGE, -ENOBUFS.
 */
int dotnet_ipc_collect_tracing_encode(const EventPipeConfig *config, uint32_t buffer_mb, uint8_t *buf,
                                      size_t buf_size, size_t *ret_size) {
        uint8_t payload[DOTNET_IPC_MESSAGE_MAX - DOTNET_IPC_HEADER_SIZE];
        size_t pos = 0, n;
        int r;

        if (buffer_mb == 0 || config->n_providers == 0)
                return DOTNET_IPC_E_MALFORMED;
        unaligned_write_le32(payload, buffer_mb);
        unaligned_write_le32(payload + 4, 1); /* NetTrace */
        payload[8] = config->rundown ? 1 : 0;
        unaligned_write_le32(payload + 9, (uint32_t)config->n_providers);
        pos = 13;
        for (size_t i = 0; i < config->n_providers; i++) {
                const EventPipeProvider *p = &config->providers[i];

                if (!p->name || !*p->name || p->level > EVENTPIPE_LEVEL_MAX)
                        return DOTNET_IPC_E_MALFORMED;
                if (sizeof(payload) - pos < 12)
                        return DOTNET_IPC_E_TOO_LARGE;
                unaligned_write_le64(payload + pos, p->keywords);
                unaligned_write_le32(payload + pos + 8, p->level);
                pos += 12;
                r = dotnet_ipc_string_encode(p->name, payload + pos, sizeof(payload) - pos, &n);
                if (r == 0) {
                        pos += n;
                        r = dotnet_ipc_string_encode(p->arguments, payload + pos, sizeof(payload) - pos, &n);
                }
                if (r == -ENOBUFS)
                        return DOTNET_IPC_E_TOO_LARGE;
                if (r != 0)
                        return r;
                pos += n;
        }
        return dotnet_ipc_request_encode(DOTNET_IPC_COLLECT_TRACING2, payload, pos, buf, buf_size, ret_size);
}

int dotnet_ipc_stop_tracing_encode(uint64_t session_id, uint8_t *buf, size_t buf_size, size_t *ret_size) {
        uint8_t payload[8];

        unaligned_write_le64(payload, session_id);
        return dotnet_ipc_request_encode(DOTNET_IPC_STOP_TRACING, payload, sizeof(payload), buf, buf_size, ret_size);
}

/* The OK reply to CollectTracing carries exactly the session id. Return: 0 or DOTNET_IPC_E_MALFORMED. */
int dotnet_ipc_session_id_decode(const DotnetIpcResponse *reply, uint64_t *ret_session_id) {
        if (!reply->ok || reply->payload_size != 8)
                return DOTNET_IPC_E_MALFORMED;
        *ret_session_id = unaligned_read_le64(reply->payload);
        return 0;
}

/* Can @command say all that @config and @o ask for, dropping or changing nothing? */
static bool collect_tracing_expressible(DotnetIpcCommand command, const EventPipeConfig *config,
                                        const DotnetIpcTracingOptions *o) {
        bool implied_keyword = o->rundown_keyword == (config->rundown ? DOTNET_IPC_RUNDOWN_KEYWORD_DEFAULT : 0);

        if ((o->rundown_keyword != 0) != config->rundown || o->format > DOTNET_IPC_FORMAT_NETTRACE)
                return false;
        if (o->filters && command != DOTNET_IPC_COLLECT_TRACING5)
                return false;
        switch (command) {
        case DOTNET_IPC_COLLECT_TRACING: /* rundown and stacks, always */
                return config->rundown && implied_keyword && o->stackwalk;
        case DOTNET_IPC_COLLECT_TRACING2: /* rundown or not, stacks always */
                return implied_keyword && o->stackwalk;
        case DOTNET_IPC_COLLECT_TRACING3:
                return implied_keyword;
        default:
                return true;
        }
}

/* One provider_config at @payload + *@pos; CollectTracing5's carries its event filter (@f, or none). */
static int collect_tracing_put_provider(const EventPipeProvider *p, bool with_filter, const DotnetIpcEventFilter *f,
                                        uint8_t *payload, size_t size, size_t *pos) {
        size_t n, n_ids = f ? f->n_event_ids : 0;
        int r;

        if (!p->name || !*p->name || p->level > EVENTPIPE_LEVEL_MAX)
                return DOTNET_IPC_E_MALFORMED;
        if (size - *pos < 12)
                return DOTNET_IPC_E_TOO_LARGE;
        unaligned_write_le64(payload + *pos, p->keywords);
        unaligned_write_le32(payload + *pos + 8, p->level);
        *pos += 12;
        r = dotnet_ipc_string_encode(p->name, payload + *pos, size - *pos, &n);
        if (r == 0) {
                *pos += n;
                r = dotnet_ipc_string_encode(p->arguments, payload + *pos, size - *pos, &n);
        }
        if (r == -ENOBUFS)
                return DOTNET_IPC_E_TOO_LARGE;
        if (r != 0)
                return r;
        *pos += n;
        if (!with_filter)
                return 0;

        if (size - *pos < 5 || (size - *pos - 5) / 4 < n_ids)
                return DOTNET_IPC_E_TOO_LARGE;
        payload[*pos] = f && f->enable ? 1 : 0;
        unaligned_write_le32(payload + *pos + 1, (uint32_t)n_ids);
        *pos += 5;
        for (size_t i = 0; i < n_ids; i++, *pos += 4)
                unaligned_write_le32(payload + *pos, f->event_ids[i]);
        return 0;
}

/**
 * dotnet_ipc_collect_tracing_encode_command() - CollectTracing in the version @command names
 * @command: DOTNET_IPC_COLLECT_TRACING to DOTNET_IPC_COLLECT_TRACING5 (a streaming session)
 * @config: the providers, and whether rundown is asked for
 * @options: format, rundown keyword (0 exactly when @config asks for no rundown), stack
 *      walking, and for CollectTracing5 the event filters, one per provider
 *
 * Writes exactly the fields of that version, in the .NET client's encoding (booleans as one
 * byte 0 or 1). A version that cannot say what is asked is refused rather than made to say
 * less: CollectTracing always does rundown with the default keyword and walks stacks;
 * CollectTracing2 walks stacks and knows only the default keyword; CollectTracing3 adds
 * turning stacks off; filters need CollectTracing5. For CollectTracing2 with NetTrace, the
 * default keyword or none, and stacks, the bytes are those of dotnet_ipc_collect_tracing_encode().
 *
 * Return: 0 with *@ret_size set; -EINVAL for another @command; DOTNET_IPC_E_MALFORMED for a zero
 * buffer, no providers, a provider without a name or with a level above 5, a format above 1, or
 * options @command cannot express; DOTNET_IPC_E_TOO_LARGE past 64 KiB; -ENOBUFS.
 */
int dotnet_ipc_collect_tracing_encode_command(DotnetIpcCommand command, const EventPipeConfig *config,
                                              uint32_t buffer_mb, const DotnetIpcTracingOptions *options,
                                              uint8_t *buf, size_t buf_size, size_t *ret_size) {
        uint8_t payload[DOTNET_IPC_MESSAGE_MAX - DOTNET_IPC_HEADER_SIZE];
        size_t pos = 0;
        int r;

        if (command < DOTNET_IPC_COLLECT_TRACING || command > DOTNET_IPC_COLLECT_TRACING5)
                return -EINVAL;
        if (buffer_mb == 0 || config->n_providers == 0 || !collect_tracing_expressible(command, config, options))
                return DOTNET_IPC_E_MALFORMED;

        if (command == DOTNET_IPC_COLLECT_TRACING5) {
                unaligned_write_le32(payload, 0); /* session type: streaming */
                pos = 4;
        }
        unaligned_write_le32(payload + pos, buffer_mb);
        unaligned_write_le32(payload + pos + 4, options->format);
        pos += 8;
        if (command == DOTNET_IPC_COLLECT_TRACING2 || command == DOTNET_IPC_COLLECT_TRACING3)
                payload[pos++] = config->rundown ? 1 : 0;
        if (command >= DOTNET_IPC_COLLECT_TRACING4) {
                unaligned_write_le64(payload + pos, options->rundown_keyword);
                pos += 8;
        }
        if (command >= DOTNET_IPC_COLLECT_TRACING3)
                payload[pos++] = options->stackwalk ? 1 : 0;
        unaligned_write_le32(payload + pos, (uint32_t)config->n_providers);
        pos += 4;
        for (size_t i = 0; i < config->n_providers; i++) {
                r = collect_tracing_put_provider(&config->providers[i], command == DOTNET_IPC_COLLECT_TRACING5,
                                                 options->filters ? &options->filters[i] : NULL, payload,
                                                 sizeof(payload), &pos);
                if (r != 0)
                        return r;
        }
        return dotnet_ipc_request_encode(command, payload, pos, buf, buf_size, ret_size);
}
