/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <pwd.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "cleanup.h"
#include "output.h"
#include "text.h"

typedef struct ProcessRow {
        uint32_t pid, uid;
        bool have_uid;
        uint64_t runtime_pid;
        bool have_runtime_pid;
        char *unit, *name, *exe, *command_line, *os, *arch, *runtime_version, *entry_assembly, *runtime_id;
        char cookie[33];
} ProcessRow;

static void process_row_done(ProcessRow *r) {
        free(r->unit);
        free(r->name);
        free(r->exe);
        free(r->command_line);
        free(r->os);
        free(r->arch);
        free(r->runtime_version);
        free(r->entry_assembly);
        free(r->runtime_id);
}

static void process_row_read(ProcessRow *r, const WireMessage *m) {
        const uint8_t *cookie;
        size_t cookie_size;

        (void)wire_message_get_u32(m, WIRE_TAG_PID, &r->pid);
        r->have_uid = wire_message_get_u32(m, WIRE_TAG_UID, &r->uid) == 0;
        r->have_runtime_pid = wire_message_get_u64(m, WIRE_TAG_RUNTIME_PID, &r->runtime_pid) == 0;
        (void)wire_message_get_string(m, WIRE_TAG_UNIT, &r->unit);
        (void)wire_message_get_string(m, WIRE_TAG_NAME, &r->name);
        (void)wire_message_get_string(m, WIRE_TAG_EXE, &r->exe);
        (void)wire_message_get_string(m, WIRE_TAG_COMMAND_LINE, &r->command_line);
        (void)wire_message_get_string(m, WIRE_TAG_OS, &r->os);
        (void)wire_message_get_string(m, WIRE_TAG_ARCH, &r->arch);
        (void)wire_message_get_string(m, WIRE_TAG_RUNTIME_VERSION, &r->runtime_version);
        (void)wire_message_get_string(m, WIRE_TAG_ENTRY_ASSEMBLY, &r->entry_assembly);
        (void)wire_message_get_string(m, WIRE_TAG_RUNTIME_ID, &r->runtime_id);
        if (wire_message_get_bytes(m, WIRE_TAG_COOKIE, &cookie, &cookie_size) == 0 && cookie_size == 16)
                for (size_t i = 0; i < 16; i++)
                        sprintf(r->cookie + 2 * i, "%02x", cookie[i]);
}

void output_json_string(FILE *f, const char *s) {
        size_t n = strlen(s);

        fputc('"', f);
        while (n > 0) {
                uint32_t cp = 0;
                size_t len = utf8_decode(s, n, &cp);

                if (len == 0)
                        len = 1, cp = (unsigned char)*s; /* the wire carries only valid UTF-8; be safe anyway */
                if (cp == '"' || cp == '\\')
                        fprintf(f, "\\%c", (char)cp);
                else if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0) || unicode_is_format_control(cp))
                        /* controls, and what would reorder or hide text where the JSON is shown */
                        fprintf(f, "\\u%04x", (unsigned)cp);
                else
                        fwrite(s, 1, len, f);
                s += len;
                n -= len;
        }
        fputc('"', f);
}

static void json_member_string(FILE *f, bool *first, const char *key, const char *value) {
        if (!value)
                return;
        fprintf(f, "%s\"%s\":", *first ? "" : ",", key);
        output_json_string(f, value);
        *first = false;
}

static void json_member_uint(FILE *f, bool *first, const char *key, uint64_t value) {
        fprintf(f, "%s\"%s\":%llu", *first ? "" : ",", key, (unsigned long long)value);
        *first = false;
}

static const char *user_name(uint32_t uid) {
        struct passwd *pw = getpwuid((uid_t)uid);
        return pw ? pw->pw_name : NULL;
}

static void output_process_json(Output *o, const ProcessRow *r) {
        bool first = true;

        fputs(o->count > 0 ? ",{" : "{", o->stream);
        json_member_uint(o->stream, &first, "pid", r->pid);
        if (r->have_uid) {
                json_member_uint(o->stream, &first, "uid", r->uid);
                json_member_string(o->stream, &first, "user", user_name(r->uid));
        }
        json_member_string(o->stream, &first, "unit", r->unit);
        json_member_string(o->stream, &first, "name", r->name);
        json_member_string(o->stream, &first, "exe", r->exe);
        json_member_string(o->stream, &first, "command_line", r->command_line);
        json_member_string(o->stream, &first, "os", r->os);
        json_member_string(o->stream, &first, "arch", r->arch);
        json_member_string(o->stream, &first, "runtime_version", r->runtime_version);
        json_member_string(o->stream, &first, "entry_assembly", r->entry_assembly);
        json_member_string(o->stream, &first, "runtime_identifier", r->runtime_id);
        if (r->have_runtime_pid)
                json_member_uint(o->stream, &first, "runtime_pid", r->runtime_pid);
        json_member_string(o->stream, &first, "cookie", r->cookie[0] ? r->cookie : NULL);
        fputc('}', o->stream);
}

/* Everything shown came from a process or a runtime: escape it for the terminal. */
static void text_line(FILE *f, const char *label, const char *value) {
        _cleanup_free_ char *escaped = NULL;

        if (!value)
                return;
        escaped = text_escape(value, strlen(value));
        fprintf(f, "%-17s %s\n", label, escaped ? escaped : "?");
}

static void output_info_text(Output *o, const ProcessRow *r) {
        char buf[64];
        const char *user = r->have_uid ? user_name(r->uid) : NULL;

        snprintf(buf, sizeof(buf), "%u", r->pid);
        text_line(o->stream, "PID:", buf);
        if (r->have_uid) {
                snprintf(buf, sizeof(buf), "%s (%u)", user ? user : "?", r->uid);
                text_line(o->stream, "User:", buf);
        }
        text_line(o->stream, "Unit:", r->unit);
        text_line(o->stream, "Name:", r->name);
        text_line(o->stream, "Executable:", r->exe);
        text_line(o->stream, "Command line:", r->command_line);
        text_line(o->stream, "OS:", r->os);
        text_line(o->stream, "Architecture:", r->arch);
        text_line(o->stream, "Runtime version:", r->runtime_version);
        text_line(o->stream, "Entry assembly:", r->entry_assembly);
        text_line(o->stream, "Runtime ID:", r->runtime_id);
}

static void output_ps_text(Output *o, const ProcessRow *r) {
        _cleanup_free_ char *unit = NULL, *name = NULL;
        const char *user = r->have_uid ? user_name(r->uid) : NULL;
        char uid_buf[16];

        if (o->count == 0)
                fprintf(o->stream, "%-8s %-16s %-32s %s\n", "PID", "USER", "UNIT", "NAME");
        if (!user) {
                snprintf(uid_buf, sizeof(uid_buf), "%u", r->uid);
                user = uid_buf;
        }
        unit = r->unit ? text_escape(r->unit, strlen(r->unit)) : NULL;
        name = r->name ? text_escape(r->name, strlen(r->name)) : NULL;
        fprintf(o->stream, "%-8u %-16s %-32s %s\n", r->pid, user, unit ? unit : "-", name ? name : "-");
}

static bool output_is_list(const Output *o) {
        return strcmp(o->verb, "ps") == 0 || strcmp(o->verb, "dumps") == 0;
}

static void format_size(uint64_t size, char *buf, size_t n) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        double v = (double)size;
        int u = 0;

        while (v >= 1024 && u < 4) {
                v /= 1024;
                u++;
        }
        snprintf(buf, n, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

void output_dump(Output *o, const WireMessage *m, const char *saved_to) {
        _cleanup_free_ char *path = NULL, *type = NULL, *escaped = NULL;
        uint64_t size = 0, time_usec = 0;
        uint32_t readable = 0, pid = 0;
        bool first = true;
        char size_text[32], when[32] = "-";

        (void)wire_message_get_string(m, WIRE_TAG_PATH, &path);
        (void)wire_message_get_string(m, WIRE_TAG_DUMP_TYPE, &type);
        (void)wire_message_get_u64(m, WIRE_TAG_SIZE, &size);
        (void)wire_message_get_u64(m, WIRE_TAG_TIME, &time_usec);
        (void)wire_message_get_u32(m, WIRE_TAG_READABLE, &readable);
        (void)wire_message_get_u32(m, WIRE_TAG_PID, &pid);

        if (o->json) {
                fputs(o->count > 0 ? ",{" : "{", o->stream);
                json_member_string(o->stream, &first, "path", path);
                json_member_uint(o->stream, &first, "size", size);
                json_member_string(o->stream, &first, "type", type);
                if (pid)
                        json_member_uint(o->stream, &first, "pid", pid);
                if (time_usec)
                        json_member_uint(o->stream, &first, "time_usec", time_usec);
                fprintf(o->stream, ",\"readable\":%s", readable ? "true" : "false");
                json_member_string(o->stream, &first, "saved_to", saved_to);
                fputc('}', o->stream);
                o->count++;
                return;
        }
        format_size(size, size_text, sizeof(size_text));
        escaped = path ? text_escape(path, strlen(path)) : NULL;
        if (strcmp(o->verb, "dumps") == 0) {
                if (time_usec) {
                        time_t t = (time_t)(time_usec / 1000000);
                        struct tm tm;
                        localtime_r(&t, &tm);
                        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
                }
                if (o->count == 0)
                        fprintf(o->stream, "%-19s %10s %-7s %-8s %s\n", "TIME", "SIZE", "TYPE", "PID", "PATH");
                fprintf(o->stream, "%-19s %10s %-7s %-8u %s\n", when, size_text, type ? type : "-", pid,
                        escaped ? escaped : "?");
        } else {
                fprintf(o->stream, "%s dump of %u (%s) stored at %s\n", type ? type : "?", pid, size_text,
                        escaped ? escaped : "?");
                if (saved_to)
                        fprintf(o->stream, "your copy: %s\n", saved_to);
                if (!readable)
                        fprintf(o->stream, "only root may read it: the process changed credentials\n");
        }
        o->count++;
}

void output_begin(Output *o) {
        if (o->json && output_is_list(o))
                fputc('[', o->stream);
}

void output_process(Output *o, const WireMessage *m) {
        _cleanup_(process_row_done) ProcessRow r = {};

        process_row_read(&r, m);
        if (o->json)
                output_process_json(o, &r);
        else if (strcmp(o->verb, "ps") == 0)
                output_ps_text(o, &r);
        else
                output_info_text(o, &r);
        o->count++;
}

/* Return: whether the command would be allowed. */
bool output_verdict(Output *o, const WireMessage *m) {
        _cleanup_free_ char *command = NULL, *rule = NULL, *reason = NULL, *escaped = NULL;
        uint32_t allowed = 0, pid = 0;
        bool first = true;

        (void)wire_message_get_u32(m, WIRE_TAG_ALLOWED, &allowed);
        (void)wire_message_get_u32(m, WIRE_TAG_PID, &pid);
        (void)wire_message_get_string(m, WIRE_TAG_COMMAND, &command);
        (void)wire_message_get_string(m, WIRE_TAG_RULE, &rule);
        (void)wire_message_get_string(m, WIRE_TAG_MESSAGE, &reason);

        if (o->json) {
                fputc('{', o->stream);
                json_member_uint(o->stream, &first, "pid", pid);
                json_member_string(o->stream, &first, "command", command);
                fprintf(o->stream, ",\"allowed\":%s", allowed ? "true" : "false");
                json_member_string(o->stream, &first, "rule", rule);
                json_member_string(o->stream, &first, "reason", reason);
                fputc('}', o->stream);
                return allowed;
        }
        escaped = reason ? text_escape(reason, strlen(reason)) : NULL;
        if (allowed)
                fprintf(o->stream, "%s on %u: allowed by rule '%s'\n", command ? command : "?", pid,
                        rule ? rule : "?");
        else
                fprintf(o->stream, "%s on %u: denied: %s\n", command ? command : "?", pid,
                        escaped ? escaped : "no reason given");
        return allowed;
}

void output_end(Output *o) {
        if (o->json && output_is_list(o))
                fputs("]\n", o->stream);
        else if (o->json)
                fputc('\n', o->stream);
        else if (strcmp(o->verb, "ps") == 0 && o->count == 0)
                fprintf(stderr, "No .NET processes that you may act on.\n");
        else if (strcmp(o->verb, "dumps") == 0 && o->count == 0)
                fprintf(stderr, "No dumps that you can read.\n");
}

void output_json_error(FILE *f, uint32_t code, const char *error, const char *message, uint32_t hresult,
                       uint64_t request_id) {
        bool first = true;
        char id[17];

        snprintf(id, sizeof(id), "%016llx", (unsigned long long)request_id);
        fputc('{', f);
        json_member_uint(f, &first, "error_code", code);
        json_member_string(f, &first, "error", error);
        json_member_string(f, &first, "message", message);
        if (hresult != 0)
                json_member_uint(f, &first, "hresult", hresult);
        json_member_string(f, &first, "request_id", id);
        fputs("}\n", f);
}
