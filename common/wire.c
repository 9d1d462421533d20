/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The dsctl <-> dsagent frames (wire.h): versioned, bounded, typed fields, encoded and decoded. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/unaligned.h"
#include "common/wire.h"

static const WireFieldKind wire_tag_kinds[_WIRE_TAG_MAX] = {
        [WIRE_TAG_PID] = WIRE_KIND_U32,
        [WIRE_TAG_UID] = WIRE_KIND_U32,
        [WIRE_TAG_UNIT] = WIRE_KIND_STRING,
        [WIRE_TAG_NAME] = WIRE_KIND_TEXT,
        [WIRE_TAG_EXE] = WIRE_KIND_TEXT,
        [WIRE_TAG_COMMAND_LINE] = WIRE_KIND_TEXT,
        [WIRE_TAG_OS] = WIRE_KIND_TEXT,
        [WIRE_TAG_ARCH] = WIRE_KIND_TEXT,
        [WIRE_TAG_RUNTIME_VERSION] = WIRE_KIND_TEXT,
        [WIRE_TAG_ENTRY_ASSEMBLY] = WIRE_KIND_TEXT,
        [WIRE_TAG_RUNTIME_ID] = WIRE_KIND_TEXT,
        [WIRE_TAG_RUNTIME_PID] = WIRE_KIND_U64,
        [WIRE_TAG_COOKIE] = WIRE_KIND_COOKIE,
        [WIRE_TAG_ERROR] = WIRE_KIND_U32,
        [WIRE_TAG_MESSAGE] = WIRE_KIND_STRING,
        [WIRE_TAG_HRESULT] = WIRE_KIND_U32,
        [WIRE_TAG_REQUEST_ID] = WIRE_KIND_U64,
        [WIRE_TAG_COMMAND] = WIRE_KIND_STRING,
        [WIRE_TAG_DUMP_TYPE] = WIRE_KIND_STRING,
        [WIRE_TAG_TRACE_PROFILE] = WIRE_KIND_STRING,
        [WIRE_TAG_DURATION] = WIRE_KIND_U64,
        [WIRE_TAG_ALLOWED] = WIRE_KIND_U32,
        [WIRE_TAG_RULE] = WIRE_KIND_STRING,
        [WIRE_TAG_PATH] = WIRE_KIND_STRING,
        [WIRE_TAG_SIZE] = WIRE_KIND_U64,
        [WIRE_TAG_WANT_FD] = WIRE_KIND_U32,
        [WIRE_TAG_READABLE] = WIRE_KIND_U32,
        [WIRE_TAG_TIME] = WIRE_KIND_U64,
        [WIRE_TAG_PROVIDERS] = WIRE_KIND_STRING,
        [WIRE_TAG_BUFFER_MB] = WIRE_KIND_U32,
        [WIRE_TAG_INTERVAL] = WIRE_KIND_U32,
        [WIRE_TAG_ENDED] = WIRE_KIND_STRING,
        [WIRE_TAG_COMPLETE] = WIRE_KIND_U32,
        [WIRE_TAG_SIZE_LIMIT] = WIRE_KIND_U64,
        [WIRE_TAG_PROGRESS] = WIRE_KIND_U32,
        [WIRE_TAG_DEADLINE] = WIRE_KIND_U64,
        [WIRE_TAG_IPC_MESSAGE] = WIRE_KIND_BYTES,
        [WIRE_TAG_ENV_NAME] = WIRE_KIND_TEXT,
        [WIRE_TAG_ENV_VALUE] = WIRE_KIND_TEXT,
        [WIRE_TAG_REDACTED] = WIRE_KIND_U32,
        [WIRE_TAG_LOG_LEVEL] = WIRE_KIND_STRING,
        [WIRE_TAG_LOG_CATEGORY] = WIRE_KIND_STRING,
        [WIRE_TAG_PORT] = WIRE_KIND_STRING,
        [WIRE_TAG_SUSPENDED] = WIRE_KIND_U32,
        [WIRE_TAG_CONTAINER] = WIRE_KIND_STRING,
        [WIRE_TAG_POD_UID] = WIRE_KIND_STRING,
        [WIRE_TAG_CGROUP] = WIRE_KIND_TEXT,
        [WIRE_TAG_UNVERIFIED_CONTAINER] = WIRE_KIND_STRING,
        [WIRE_TAG_UNVERIFIED_POD_UID] = WIRE_KIND_STRING,
        [WIRE_TAG_CGROUP_UNVERIFIED] = WIRE_KIND_U32,
        [WIRE_TAG_COMMANDS] = WIRE_KIND_STRING,
        [WIRE_TAG_CRASH_ID] = WIRE_KIND_STRING,
        [WIRE_TAG_SIGNAL] = WIRE_KIND_U32,
        [WIRE_TAG_STORED] = WIRE_KIND_U32,
        [WIRE_TAG_DOTNET] = WIRE_KIND_U32,
        [WIRE_TAG_TRUNCATED] = WIRE_KIND_U32,
        [WIRE_TAG_RESULT] = WIRE_KIND_STRING,
        [WIRE_TAG_RESULT_TIME] = WIRE_KIND_U64,
        [WIRE_TAG_RESULT_PID] = WIRE_KIND_U32,
        [WIRE_TAG_REASON] = WIRE_KIND_TEXT,
        [WIRE_TAG_EGRESS] = WIRE_KIND_STRING,
        [WIRE_TAG_EGRESS_STORE] = WIRE_KIND_STRING,
        [WIRE_TAG_URL] = WIRE_KIND_STRING,
};

WireFieldKind wire_tag_kind(WireTag tag) {
        return tag > 0 && tag < _WIRE_TAG_MAX ? wire_tag_kinds[tag] : WIRE_KIND_BYTES;
}

const char *wire_error_to_string(WireError error) {
        switch (error) {
        case WIRE_ERROR_DENIED: return "permission denied";
        case WIRE_ERROR_NO_SUCH_PROCESS: return "no such process";
        case WIRE_ERROR_NOT_DOTNET: return "not a .NET process";
        case WIRE_ERROR_RUNTIME_UNREACHABLE: return "the .NET runtime is not answering";
        case WIRE_ERROR_RUNTIME_FAILED: return "the .NET runtime reported an error";
        case WIRE_ERROR_BAD_REQUEST: return "bad request";
        case WIRE_ERROR_UNSUPPORTED_VERSION: return "unsupported protocol version";
        case WIRE_ERROR_BUSY: return "the agent is busy";
        case WIRE_ERROR_INTERNAL: return "internal error in the agent";
        case WIRE_ERROR_SOCKET_UNTRUSTED: return "the diagnostic socket failed verification";
        case WIRE_ERROR_NO_SPACE: return "no space for the dump";
        case WIRE_ERROR_UNSAFE_FS: return "the process's files are on a file system the agent does not look into";
        case WIRE_ERROR_NO_STAGING: return "no safe place for the dump in the process's view";
        case WIRE_ERROR_POLICY_BROKEN: return "policy broken";
        case WIRE_ERROR_SUSPENDED: return "suspended at startup";
        case WIRE_ERROR_AUDIT_UNAVAILABLE: return "audit unavailable";
        case WIRE_ERROR_NO_SUCH_CRASH: return "no such crash";
        case WIRE_ERROR_CORE_UNUSABLE: return "the stored core cannot be used";
        default: return "unknown error";
        }
}

/**
 * wire_frame_peek() - is a complete frame at the start of @buf?
 *
 * Checks only the header, so a reader can size its next read; the version is
 * checked by wire_message_decode() so that the agent can still answer a
 * well-formed frame of another version with WIRE_ERROR_UNSUPPORTED_VERSION.
 *
 * Return: 0 and the frame's size, WIRE_E_TRUNCATED, WIRE_E_MALFORMED.
 */
int wire_frame_peek(const uint8_t *buf, size_t len, size_t *ret_frame_size) {
        uint32_t payload;

        if (len < WIRE_HEADER_SIZE) {
                /* reject a wrong magic as early as its first byte */
                if (memcmp(buf, WIRE_MAGIC, len < 4 ? len : 4) != 0)
                        return WIRE_E_MALFORMED;
                return WIRE_E_TRUNCATED;
        }
        if (memcmp(buf, WIRE_MAGIC, 4) != 0)
                return WIRE_E_MALFORMED;
        payload = unaligned_read_le32(buf + 8);
        if (payload > WIRE_PAYLOAD_MAX)
                return WIRE_E_MALFORMED;
        if (len < WIRE_HEADER_SIZE + (size_t)payload)
                return WIRE_E_TRUNCATED;

        *ret_frame_size = WIRE_HEADER_SIZE + payload;
        return 0;
}

/*
 * wire_frame_wanted() - how many bytes the frame at @buf has in all, as far
 * as is known: the header's size until the header is complete. Only for a
 * buffer that wire_frame_peek() did not call malformed.
 */
size_t wire_frame_wanted(const uint8_t *buf, size_t len) {
        if (len < WIRE_HEADER_SIZE)
                return WIRE_HEADER_SIZE;
        return WIRE_HEADER_SIZE + unaligned_read_le32(buf + 8);
}

static bool wire_type_is_known(uint16_t type) {
        switch (type) {
        case WIRE_REQUEST_PS:
        case WIRE_REQUEST_INFO:
        case WIRE_REQUEST_EXPLAIN:
        case WIRE_REQUEST_DUMP:
        case WIRE_REQUEST_DUMPS:
        case WIRE_REQUEST_TRACE:
        case WIRE_REQUEST_COUNTERS:
        case WIRE_REQUEST_REMOVE_DUMP:
        case WIRE_REQUEST_IPC:
        case WIRE_REQUEST_ENV:
        case WIRE_REQUEST_STACKS:
        case WIRE_REQUEST_EXCEPTIONS:
        case WIRE_REQUEST_LOGS:
        case WIRE_REQUEST_RESUME:
        case WIRE_REQUEST_GCDUMP:
        case WIRE_REQUEST_RESOLVE:
        case WIRE_REQUEST_COLLECT:
        case WIRE_REQUEST_CRASHES:
        case WIRE_REQUEST_CRASH:
        case WIRE_REQUEST_DUMP_URL:
        case WIRE_REPLY_PROCESS:
        case WIRE_REPLY_DONE:
        case WIRE_REPLY_ERROR:
        case WIRE_REPLY_VERDICT:
        case WIRE_REPLY_DUMP:
        case WIRE_REPLY_STREAM:
        case WIRE_REPLY_SESSION_END:
        case WIRE_REPLY_PROGRESS:
        case WIRE_REPLY_IPC:
        case WIRE_REPLY_ENV:
        case WIRE_REPLY_COLLECT:
        case WIRE_REPLY_CRASH:
        case WIRE_REPLY_URL:
                return true;
        default:
                return false;
        }
}

static bool has_suffix(const char *s, size_t len, const char *suffix) {
        size_t n = strlen(suffix);

        return len > n && memcmp(s + len - n, suffix, n) == 0;
}

bool wire_unit_name_is_valid(const char *s, size_t len) {
        static const char *const suffixes[] = { ".service", ".scope", ".socket", ".mount", ".swap", ".timer" };

        if (len == 0 || len > WIRE_UNIT_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
                      (s[i] != '\0' && strchr(":_.\\-@", s[i]))))
                        return false;
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
                if (has_suffix(s, len, suffixes[i]))
                        return true;
        return false;
}

static bool wire_field_is_valid(uint16_t tag, const uint8_t *value, uint32_t size) {
        if (tag == 0 || tag >= _WIRE_TAG_MAX)
                return false;

        switch (wire_tag_kinds[tag]) {
        case WIRE_KIND_U32:
                return size == 4;
        case WIRE_KIND_U64:
                return size == 8;
        case WIRE_KIND_STRING:
                return size <= WIRE_STRING_MAX && !memchr(value, 0, size) &&
                       utf8_is_valid((const char *)value, size);
        case WIRE_KIND_TEXT:
                return size <= WIRE_STRING_MAX && !memchr(value, 0, size);
        case WIRE_KIND_COOKIE:
                return size == 16;
        case WIRE_KIND_BYTES:
                return true; /* the frame bounds it */
        }
        return false;
}

/**
 * wire_message_decode() - decode exactly one frame
 *
 * @len must be the frame's size: trailing bytes are an error, never a second
 * message. Unknown types and tags, duplicate tags, wrongly sized integers and
 * strings that are not NUL-free UTF-8 are all rejected.
 *
 * Return: 0, WIRE_E_TRUNCATED, WIRE_E_MALFORMED, WIRE_E_VERSION.
 */
int wire_message_decode(const uint8_t *frame, size_t len, WireMessage *ret) {
        WireMessage m = {};
        size_t frame_size, pos;
        uint64_t seen = 0;
        int r;

        r = wire_frame_peek(frame, len, &frame_size);
        if (r != 0)
                return r;
        if (frame_size != len)
                return WIRE_E_MALFORMED;
        if (unaligned_read_le16(frame + 4) != WIRE_VERSION)
                return WIRE_E_VERSION;

        m.type = unaligned_read_le16(frame + 6);
        if (!wire_type_is_known(m.type))
                return WIRE_E_MALFORMED;

        for (pos = WIRE_HEADER_SIZE; pos < len;) {
                uint16_t tag;
                uint32_t size;

                if (len - pos < WIRE_FIELD_HEADER_SIZE || m.n_fields >= WIRE_FIELDS_MAX)
                        return WIRE_E_MALFORMED;
                tag = unaligned_read_le16(frame + pos);
                size = unaligned_read_le32(frame + pos + 2);
                pos += WIRE_FIELD_HEADER_SIZE;
                if (size > len - pos)
                        return WIRE_E_MALFORMED;
                if (!wire_field_is_valid(tag, frame + pos, size) || (seen & (UINT64_C(1) << tag)))
                        return WIRE_E_MALFORMED;
                seen |= UINT64_C(1) << tag;

                m.fields[m.n_fields++] = (WireField){ .tag = tag, .size = size, .value = frame + pos };
                pos += size;
        }

        *ret = m;
        return 0;
}

static const WireField *wire_message_find(const WireMessage *m, WireTag tag) {
        for (size_t i = 0; i < m->n_fields; i++)
                if (m->fields[i].tag == tag)
                        return &m->fields[i];
        return NULL;
}

int wire_message_get_u32(const WireMessage *m, WireTag tag, uint32_t *ret) {
        const WireField *f = wire_message_find(m, tag);

        if (!f || wire_tag_kinds[tag] != WIRE_KIND_U32)
                return WIRE_E_MISSING;
        *ret = unaligned_read_le32(f->value);
        return 0;
}

int wire_message_get_u64(const WireMessage *m, WireTag tag, uint64_t *ret) {
        const WireField *f = wire_message_find(m, tag);

        if (!f || wire_tag_kinds[tag] != WIRE_KIND_U64)
                return WIRE_E_MISSING;
        *ret = unaligned_read_le64(f->value);
        return 0;
}

/* Return: 0 with a malloc'ed copy, WIRE_E_MISSING, -ENOMEM. */
int wire_message_get_string(const WireMessage *m, WireTag tag, char **ret) {
        const WireField *f = wire_message_find(m, tag);
        char *s;

        if (!f || (wire_tag_kinds[tag] != WIRE_KIND_STRING && wire_tag_kinds[tag] != WIRE_KIND_TEXT))
                return WIRE_E_MISSING;
        s = strndup((const char *)f->value, f->size);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int wire_message_get_bytes(const WireMessage *m, WireTag tag, const uint8_t **ret, size_t *ret_size) {
        const WireField *f = wire_message_find(m, tag);

        if (!f || (wire_tag_kinds[tag] != WIRE_KIND_COOKIE && wire_tag_kinds[tag] != WIRE_KIND_BYTES))
                return WIRE_E_MISSING;
        *ret = f->value;
        *ret_size = f->size;
        return 0;
}

void wire_writer_begin(WireWriter *w, WireType type) {
        memcpy(w->buf, WIRE_MAGIC, 4);
        unaligned_write_le16(w->buf + 4, WIRE_VERSION);
        unaligned_write_le16(w->buf + 6, (uint16_t)type);
        w->size = WIRE_HEADER_SIZE;
        w->n_fields = 0;
        w->seen = 0;
        w->error = 0;
}

static void wire_writer_put(WireWriter *w, WireTag tag, const void *value, size_t size) {
        if (w->error != 0)
                return;
        if (size > UINT32_MAX || !wire_field_is_valid((uint16_t)tag, value, (uint32_t)size) ||
            (w->seen & (UINT64_C(1) << tag))) {
                w->error = WIRE_E_MALFORMED;
                return;
        }
        if (w->n_fields >= WIRE_FIELDS_MAX || size > sizeof(w->buf) - w->size - WIRE_FIELD_HEADER_SIZE ||
            w->size + WIRE_FIELD_HEADER_SIZE > sizeof(w->buf)) {
                w->error = WIRE_E_FULL;
                return;
        }
        unaligned_write_le16(w->buf + w->size, (uint16_t)tag);
        unaligned_write_le32(w->buf + w->size + 2, (uint32_t)size);
        memcpy(w->buf + w->size + WIRE_FIELD_HEADER_SIZE, value, size);
        w->size += WIRE_FIELD_HEADER_SIZE + size;
        w->n_fields++;
        w->seen |= UINT64_C(1) << tag;
}

void wire_writer_put_u32(WireWriter *w, WireTag tag, uint32_t v) {
        uint8_t b[4];

        unaligned_write_le32(b, v);
        wire_writer_put(w, tag, b, sizeof(b));
}

void wire_writer_put_u64(WireWriter *w, WireTag tag, uint64_t v) {
        uint8_t b[8];

        unaligned_write_le64(b, v);
        wire_writer_put(w, tag, b, sizeof(b));
}

/* A NULL string is simply not written: absent fields stand for unknown values. */
void wire_writer_put_string(WireWriter *w, WireTag tag, const char *s) {
        if (s)
                wire_writer_put(w, tag, s, strlen(s));
}

void wire_writer_put_bytes(WireWriter *w, WireTag tag, const void *p, size_t n) {
        wire_writer_put(w, tag, p, n);
}

/* Return: 0, or the first error a put hit (WIRE_E_MALFORMED, WIRE_E_FULL). */
int wire_writer_finish(WireWriter *w, const uint8_t **ret_frame, size_t *ret_size) {
        if (w->error != 0)
                return w->error;
        unaligned_write_le32(w->buf + 8, (uint32_t)(w->size - WIRE_HEADER_SIZE));
        *ret_frame = w->buf;
        *ret_size = w->size;
        return 0;
}
