/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* dsctl's output (output.h): aligned text for people, JSON for scripts. */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "common/cleanup.h"
#include "client/exit-status.h"
#include "client/output.h"
#include "policy/policy.h"
#include "common/text.h"

typedef struct ProcessRow {
        uint32_t pid, uid;
        bool have_uid;
        uint64_t runtime_pid;
        bool have_runtime_pid;
        char *unit, *name, *exe, *command_line, *os, *arch, *runtime_version, *entry_assembly, *runtime_id;
        char *message; /* resume: what it did */
        char *port;    /* the diagnostic port it connected in on */
        uint32_t suspended;
        char *container_id, *pod_uid, *cgroup; /* from its cgroup, when it names them */
        /* the names of a cgroup root does not vouch for: a delegated subtree's user chose them */
        char *unverified_container_id, *unverified_pod_uid;
        uint32_t cgroup_unverified;
        char *commands; /* ps: the policy commands the caller holds on it, comma-separated */
        char cookie[TEXT_HEX_ID_SIZE];
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
        free(r->message);
        free(r->port);
        free(r->container_id);
        free(r->pod_uid);
        free(r->cgroup);
        free(r->unverified_container_id);
        free(r->unverified_pod_uid);
        free(r->commands);
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
        (void)wire_message_get_string(m, WIRE_TAG_MESSAGE, &r->message);
        (void)wire_message_get_string(m, WIRE_TAG_PORT, &r->port);
        (void)wire_message_get_u32(m, WIRE_TAG_SUSPENDED, &r->suspended);
        (void)wire_message_get_string(m, WIRE_TAG_CONTAINER, &r->container_id);
        (void)wire_message_get_string(m, WIRE_TAG_POD_UID, &r->pod_uid);
        (void)wire_message_get_string(m, WIRE_TAG_CGROUP, &r->cgroup);
        (void)wire_message_get_string(m, WIRE_TAG_UNVERIFIED_CONTAINER, &r->unverified_container_id);
        (void)wire_message_get_string(m, WIRE_TAG_UNVERIFIED_POD_UID, &r->unverified_pod_uid);
        (void)wire_message_get_u32(m, WIRE_TAG_CGROUP_UNVERIFIED, &r->cgroup_unverified);
        (void)wire_message_get_string(m, WIRE_TAG_COMMANDS, &r->commands);
        if (wire_message_get_bytes(m, WIRE_TAG_COOKIE, &cookie, &cookie_size) == 0 && cookie_size == 16)
                text_hex_id(cookie, r->cookie);
}

void output_json_string(FILE *f, const char *s) {
        /* a process's facts come as its bytes (WIRE_KIND_TEXT): one that is not UTF-8 becomes U+FFFD */
        text_json_string(f, s, strlen(s));
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

static bool output_is_list(const Output *o) {
        return strcmp(o->verb, "ps") == 0 || strcmp(o->verb, "env") == 0 || strcmp(o->verb, "crashes") == 0 ||
               strcmp(o->verb, "collect") == 0 || (strcmp(o->verb, "dumps") == 0 && !o->removing);
}

/*
 * Opens an object of the JSON output. A listing's array opens with its first element (or at
 * its end, empty), so that an error answered instead of the listing is one whole object.
 */
static void json_object_begin(Output *o) {
        if (o->count > 0)
                fputs(",{", o->stream);
        else
                fputs(output_is_list(o) ? "[{" : "{", o->stream);
}

static const char *user_name(uint32_t uid) {
        struct passwd *pw = getpwuid((uid_t)uid);
        return pw ? pw->pw_name : NULL;
}

/* ps --json: "commands":["info","counters"], each name as the agent sent it. */
static void json_member_commands(FILE *f, bool *first, const char *commands) {
        const char *c = commands;

        if (!commands)
                return;
        fprintf(f, "%s\"commands\":[", *first ? "" : ",");
        while (*c) {
                size_t n = strcspn(c, ",");

                if (c != commands)
                        fputc(',', f);
                text_json_string(f, c, n);
                c += n + (c[n] == ',');
        }
        fputc(']', f);
        *first = false;
}

static void output_process_json(Output *o, const ProcessRow *r) {
        bool first = true;

        json_object_begin(o);
        json_member_uint(o->stream, &first, "pid", r->pid);
        if (r->have_uid) {
                json_member_uint(o->stream, &first, "uid", r->uid);
                json_member_string(o->stream, &first, "user", user_name(r->uid));
        }
        json_member_string(o->stream, &first, "unit", r->unit);
        json_member_string(o->stream, &first, "container_id", r->container_id);
        json_member_string(o->stream, &first, "pod_uid", r->pod_uid);
        json_member_string(o->stream, &first, "cgroup", r->cgroup);
        json_member_string(o->stream, &first, "unverified_container_id", r->unverified_container_id);
        json_member_string(o->stream, &first, "unverified_pod_uid", r->unverified_pod_uid);
        if (r->cgroup_unverified)
                fprintf(o->stream, ",\"cgroup_unverified\":true");
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
        json_member_string(o->stream, &first, "message", r->message);
        json_member_string(o->stream, &first, "port", r->port);
        if (r->port || r->suspended)
                fprintf(o->stream, ",\"suspended\":%s", r->suspended ? "true" : "false");
        json_member_commands(o->stream, &first, r->commands);
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
        if (r->container_id) {
                /* the short id, as docker ps and podman ps show it; --json has it whole */
                snprintf(buf, sizeof(buf), "%.12s", r->container_id);
                text_line(o->stream, "Container:", buf);
        }
        if (r->unverified_container_id) {
                snprintf(buf, sizeof(buf), "%.12s (unverified: a cgroup not root's names it)",
                         r->unverified_container_id);
                text_line(o->stream, "Container:", buf);
        }
        text_line(o->stream, "Pod UID:", r->pod_uid);
        if (r->unverified_pod_uid) {
                snprintf(buf, sizeof(buf), "%.36s (unverified)", r->unverified_pod_uid);
                text_line(o->stream, "Pod UID:", buf);
        }
        text_line(o->stream, "Cgroup:", r->cgroup);
        if (r->cgroup && r->cgroup_unverified)
                text_line(o->stream, "Cgroup owner:", "not root alone (delegated): no rule selects it by cgroup or container");
        text_line(o->stream, "Name:", r->name);
        text_line(o->stream, "Executable:", r->exe);
        text_line(o->stream, "Command line:", r->command_line);
        text_line(o->stream, "OS:", r->os);
        text_line(o->stream, "Architecture:", r->arch);
        text_line(o->stream, "Runtime version:", r->runtime_version);
        text_line(o->stream, "Entry assembly:", r->entry_assembly);
        text_line(o->stream, "Runtime ID:", r->runtime_id);
        text_line(o->stream, "Connected in on:", r->port);
        if (r->suspended)
                text_line(o->stream, "Startup:", "suspended, waiting for dsctl resume");
}

/* resume: "1234 (name): what the resume did" */
static void output_resume_text(Output *o, const ProcessRow *r) {
        _cleanup_free_ char *name = r->name ? text_escape(r->name, strlen(r->name)) : NULL;
        _cleanup_free_ char *message = r->message ? text_escape(r->message, strlen(r->message)) : NULL;

        fprintf(o->stream, "%u%s%s%s: %s\n", r->pid, name ? " (" : "", name ? name : "", name ? ")" : "",
                message ? message : "done");
}

/*
 * ps's COMMANDS column: the commands as the agent lists them, with "all" standing for every
 * command that runs no code (root's and an owner's), followed by any others.
 */
static char *commands_column(const char *commands) {
        const uint32_t no_code = POLICY_COMMANDS_LIVE & ~POLICY_COMMANDS_RUNNING_CODE;
        _cleanup_free_ char *all = malloc(strlen(commands) + sizeof("all,"));
        uint32_t held = 0;
        char *rest;

        if (!all)
                return NULL;
        rest = stpcpy(all, "all");
        for (const char *c = commands; *c;) {
                size_t n = strcspn(c, ",");
                char name[32] = "";
                PolicyCommand command = _POLICY_COMMAND_INVALID;

                if (n < sizeof(name)) {
                        memcpy(name, c, n);
                        command = policy_command_from_string(name);
                }
                if (command >= 0 && (no_code & (1u << command)))
                        held |= 1u << command;
                else
                        rest += sprintf(rest, ",%.*s", (int)n, c);
                c += n + (c[n] == ',');
        }
        return held == no_code ? text_escape(all, strlen(all)) : text_escape(commands, strlen(commands));
}

static void output_ps_text(Output *o, const ProcessRow *r) {
        _cleanup_free_ char *unit = NULL, *name = NULL, *ctr = NULL, *commands = NULL;
        const char *user = r->have_uid ? user_name(r->uid) : NULL;
        char uid_buf[16], ctr_mark[48] = "";

        if (o->count == 0)
                fprintf(o->stream, "%-8s %-16s %-32s %-24s %s\n", "PID", "USER", "UNIT", "COMMANDS", "NAME");
        if (!user) {
                snprintf(uid_buf, sizeof(uid_buf), "%u", r->uid);
                user = uid_buf;
        }
        unit = r->unit ? text_escape(r->unit, strlen(r->unit)) : NULL;
        name = r->name ? text_escape(r->name, strlen(r->name)) : NULL;
        /* one in a container says which after its name, by the short id docker ps shows */
        ctr = r->container_id ? text_escape(r->container_id, strnlen(r->container_id, 12)) : NULL;
        if (ctr)
                snprintf(ctr_mark, sizeof(ctr_mark), " [ctr:%.12s]", ctr);
        else if (r->unverified_container_id) {
                ctr = text_escape(r->unverified_container_id, strnlen(r->unverified_container_id, 12));
                if (ctr)
                        snprintf(ctr_mark, sizeof(ctr_mark), " [unverified ctr:%.12s]", ctr);
        }
        commands = r->commands ? commands_column(r->commands) : NULL;
        /* the name last, as the process chose it; a runtime that connected in says so after it, and whether it
         * waits to be resumed */
        fprintf(o->stream, "%-8u %-16s %-32s %-24s %s%s%s\n", r->pid, user, unit ? unit : "-",
                commands ? commands : "-", name ? name : "-", ctr_mark,
                r->suspended ? " [suspended]" : r->port ? " [port]" : "");
}

void output_format_size(uint64_t size, char *buf, size_t n) {
        text_format_size(size, buf, n);
}

void output_format_grouped(int64_t value, char *buf, size_t n) {
        char digits[32], grouped[48];
        uint64_t v = value < 0 ? -(uint64_t)value : (uint64_t)value;
        int count = snprintf(digits, sizeof(digits), "%" PRIu64, v), j = 0;

        if (value < 0)
                grouped[j++] = '-';
        for (int i = 0; i < count; i++) {
                if (i > 0 && (count - i) % 3 == 0)
                        grouped[j++] = ',';
                grouped[j++] = digits[i];
        }
        grouped[j] = 0;
        snprintf(buf, n, "%s", grouped);
}

struct DumpRow {
        char *path, *type, *unit, *name, *exe;
        char *egress; /* the upload's label: pending:STORE, uploaded:STORE:KEY, failed:STORE:RESULT */
        uint64_t size, time_usec;
        uint32_t readable, pid, uid;
        bool have_uid;
};

static void dump_row_done(DumpRow *r) {
        free(r->path);
        free(r->type);
        free(r->unit);
        free(r->name);
        free(r->exe);
        free(r->egress);
}

static void dump_row_read(DumpRow *r, const WireMessage *m) {
        (void)wire_message_get_string(m, WIRE_TAG_PATH, &r->path);
        (void)wire_message_get_string(m, WIRE_TAG_DUMP_TYPE, &r->type);
        (void)wire_message_get_string(m, WIRE_TAG_UNIT, &r->unit);
        (void)wire_message_get_string(m, WIRE_TAG_NAME, &r->name);
        (void)wire_message_get_string(m, WIRE_TAG_EXE, &r->exe);
        (void)wire_message_get_string(m, WIRE_TAG_EGRESS, &r->egress);
        (void)wire_message_get_u64(m, WIRE_TAG_SIZE, &r->size);
        (void)wire_message_get_u64(m, WIRE_TAG_TIME, &r->time_usec);
        (void)wire_message_get_u32(m, WIRE_TAG_READABLE, &r->readable);
        (void)wire_message_get_u32(m, WIRE_TAG_PID, &r->pid);
        r->have_uid = wire_message_get_u32(m, WIRE_TAG_UID, &r->uid) == 0;
}

/* The name a dump is shown by: the process's name, else its executable's. */
static const char *dump_row_name(const DumpRow *r) {
        const char *slash;

        if (r->name)
                return r->name;
        if (!r->exe)
                return NULL;
        slash = strrchr(r->exe, '/');
        return slash ? slash + 1 : r->exe;
}

/* "2026-11-21 14:05:09" in local time, as coredumpctl shows it */
static void format_when(uint64_t time_usec, char *buf, size_t n) {
        time_t t = (time_t)(time_usec / 1000000);
        struct tm tm;

        if (time_usec == 0 || !localtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, n, "-");
}

/* "egress": {"state", "store", "key" or "result"}, from the label "STATE:STORE:REST" */
static void dump_row_egress_json(Output *o, const DumpRow *r, bool *first) {
        _cleanup_free_ char *copy = r->egress ? strdup(r->egress) : NULL;
        char *store, *rest;

        if (!copy || !(store = strchr(copy, ':')))
                return;
        *store++ = '\0';
        rest = strchr(store, ':');
        if (rest)
                *rest++ = '\0';
        fputs(",\"egress\":", o->stream);
        {
                bool inner = true;

                fputc('{', o->stream);
                json_member_string(o->stream, &inner, "state", copy);
                json_member_string(o->stream, &inner, "store", store);
                json_member_string(o->stream, &inner, strcmp(copy, "uploaded") == 0 ? "key" : "result", rest);
                fputc('}', o->stream);
        }
        *first = false;
}

static void dump_row_json(Output *o, const DumpRow *r, const char *saved_to) {
        bool first = true;

        json_object_begin(o);
        json_member_string(o->stream, &first, "path", r->path);
        json_member_uint(o->stream, &first, "size", r->size);
        json_member_string(o->stream, &first, "type", r->type);
        if (r->pid)
                json_member_uint(o->stream, &first, "pid", r->pid);
        if (r->have_uid) {
                json_member_uint(o->stream, &first, "uid", r->uid);
                json_member_string(o->stream, &first, "user", user_name(r->uid));
        }
        json_member_string(o->stream, &first, "unit", r->unit);
        json_member_string(o->stream, &first, "name", dump_row_name(r));
        json_member_string(o->stream, &first, "exe", r->exe);
        if (r->time_usec)
                json_member_uint(o->stream, &first, "time_usec", r->time_usec);
        fprintf(o->stream, ",\"readable\":%s", r->readable ? "true" : "false");
        json_member_string(o->stream, &first, "saved_to", saved_to);
        dump_row_egress_json(o, r, &first);
        fputc('}', o->stream);
        o->count++;
}

/* The listing's row: everything in it came from a process or the file system, and is escaped. */
static void dump_row_text(Output *o, const DumpRow *r) {
        _cleanup_free_ char *path = NULL, *unit = NULL, *name = NULL;
        const char *shown = dump_row_name(r);
        char when[32], size[32];

        format_when(r->time_usec, when, sizeof(when));
        output_format_size(r->size, size, sizeof(size));
        path = r->path ? text_escape(r->path, strlen(r->path)) : NULL;
        unit = r->unit ? text_escape(r->unit, strlen(r->unit)) : NULL;
        name = shown ? text_escape(shown, strlen(shown)) : NULL;
        if (o->count == 0)
                fprintf(o->stream, "%-19s %-8s %-24s %-20s %-6s %10s %s\n", "TIME", "PID", "UNIT", "NAME", "TYPE",
                        "SIZE", "PATH");
        fprintf(o->stream, "%-19s %-8u %-24s %-20s %-6s %10s %s\n", when, r->pid, unit ? unit : "-",
                name ? name : "-", r->type ? r->type : "-", size, path ? path : "?");
        /* its upload, on a line of its own under it: "uploaded:STORE:KEY" and the like, the agent's own words */
        if (r->egress) {
                _cleanup_free_ char *egress = text_escape(r->egress, strlen(r->egress));
                fprintf(o->stream, "%-19s egress %s\n", "", egress ? egress : "?");
        }
        o->count++;
}

/* The dump just taken, for people. */
static void dump_taken_text(Output *o, const DumpRow *r, const char *saved_to) {
        _cleanup_free_ char *path = r->path ? text_escape(r->path, strlen(r->path)) : NULL;
        char size[32];

        output_format_size(r->size, size, sizeof(size));
        if (strcmp(o->verb, "crash") == 0)
                fprintf(o->stream, "core of crashed process %u (%s) stored at %s\n", r->pid, size, path ? path : "?");
        else
                fprintf(o->stream, "%s dump of %u (%s) stored at %s\n", r->type ? r->type : "?", r->pid, size,
                        path ? path : "?");
        if (saved_to)
                fprintf(o->stream, "your copy: %s\n", saved_to);
        if (!r->readable)
                fprintf(o->stream, "only root may read it: the process changed credentials\n");
}

int output_dump(Output *o, const WireMessage *m, const char *saved_to) {
        DumpRow r = {};
        DumpRow *rows;

        dump_row_read(&r, m);
        if (strcmp(o->verb, "dumps") != 0) {
                if (o->json)
                        dump_row_json(o, &r, saved_to);
                else
                        dump_taken_text(o, &r, saved_to);
                dump_row_done(&r);
                return 0;
        }
        /* a listing is shown once whole, in time order */
        rows = realloc(o->dumps, (o->n_dumps + 1) * sizeof(DumpRow));
        if (!rows) {
                dump_row_done(&r);
                return -ENOMEM;
        }
        o->dumps = rows;
        o->dumps[o->n_dumps++] = r;
        return 0;
}

static int dump_row_compare(const void *a, const void *b) {
        const DumpRow *x = a, *y = b;

        if (x->time_usec != y->time_usec)
                return x->time_usec < y->time_usec ? -1 : 1;
        return strcmp(x->path ? x->path : "", y->path ? y->path : "");
}

/* Oldest first, newest last, as coredumpctl lists: the one just taken is at the bottom. */
static void output_dump_listing(Output *o) {
        qsort(o->dumps, o->n_dumps, sizeof(DumpRow), dump_row_compare);
        for (size_t i = 0; i < o->n_dumps; i++) {
                if (o->json)
                        dump_row_json(o, &o->dumps[i], NULL);
                else
                        dump_row_text(o, &o->dumps[i]);
        }
}

/* One crash systemd-coredump recorded; its name, unit, executable and cgroup are the process's, escaped. */
void output_crash(Output *o, const WireMessage *m) {
        _cleanup_free_ char *id = NULL, *unit = NULL, *name = NULL, *exe = NULL, *cgroup = NULL;
        _cleanup_free_ char *unit_shown = NULL, *name_shown = NULL;
        uint64_t time_usec = 0, size = 0;
        uint32_t pid = 0, uid = 0, signal = 0, stored = 0, dotnet = 0, truncated = 0;
        bool have_dotnet, first = true;
        const char *shown, *user;
        char when[32], size_text[32];

        if (strcmp(o->verb, "crashes") != 0)
                return;
        (void)wire_message_get_string(m, WIRE_TAG_CRASH_ID, &id);
        (void)wire_message_get_string(m, WIRE_TAG_UNIT, &unit);
        (void)wire_message_get_string(m, WIRE_TAG_NAME, &name);
        (void)wire_message_get_string(m, WIRE_TAG_EXE, &exe);
        (void)wire_message_get_string(m, WIRE_TAG_CGROUP, &cgroup);
        (void)wire_message_get_u64(m, WIRE_TAG_TIME, &time_usec);
        (void)wire_message_get_u64(m, WIRE_TAG_SIZE, &size);
        (void)wire_message_get_u32(m, WIRE_TAG_PID, &pid);
        (void)wire_message_get_u32(m, WIRE_TAG_UID, &uid);
        (void)wire_message_get_u32(m, WIRE_TAG_SIGNAL, &signal);
        (void)wire_message_get_u32(m, WIRE_TAG_STORED, &stored);
        (void)wire_message_get_u32(m, WIRE_TAG_TRUNCATED, &truncated);
        have_dotnet = wire_message_get_u32(m, WIRE_TAG_DOTNET, &dotnet) == 0;
        user = user_name(uid);
        shown = name ? name : exe ? (strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe) : NULL;
        if (o->json) {
                json_object_begin(o);
                json_member_string(o->stream, &first, "id", id);
                json_member_uint(o->stream, &first, "time_usec", time_usec);
                json_member_uint(o->stream, &first, "pid", pid);
                json_member_uint(o->stream, &first, "uid", uid);
                json_member_string(o->stream, &first, "user", user);
                json_member_uint(o->stream, &first, "signal", signal);
                json_member_string(o->stream, &first, "signal_name", sigabbrev_np((int)signal));
                json_member_string(o->stream, &first, "unit", unit);
                json_member_string(o->stream, &first, "name", shown);
                json_member_string(o->stream, &first, "exe", exe);
                json_member_string(o->stream, &first, "cgroup", cgroup);
                fprintf(o->stream, ",\"dotnet\":%s", !have_dotnet ? "null" : dotnet ? "true" : "false");
                fprintf(o->stream, ",\"stored\":%s", stored ? "true" : "false");
                if (stored)
                        json_member_uint(o->stream, &first, "size", size);
                fprintf(o->stream, ",\"truncated\":%s", truncated ? "true" : "false");
                fputc('}', o->stream);
                o->count++;
                return;
        }
        format_when(time_usec, when, sizeof(when));
        if (stored)
                output_format_size(size, size_text, sizeof(size_text));
        else
                snprintf(size_text, sizeof(size_text), "missing");
        unit_shown = unit ? text_escape(unit, strlen(unit)) : NULL;
        name_shown = shown ? text_escape(shown, strlen(shown)) : NULL;
        if (o->count == 0)
                fprintf(o->stream, "%-19s %-22s %-8s %-12s %-7s %-5s %10s %-24s %s\n", "TIME", "ID", "PID", "USER", "SIG",
                        ".NET", "COREFILE", "UNIT", "NAME");
        {
                char sig[16], uid_text[16];
                const char *abbrev = sigabbrev_np((int)signal);

                snprintf(sig, sizeof(sig), "%s%s", abbrev ? "SIG" : "", abbrev ? abbrev : "?");
                snprintf(uid_text, sizeof(uid_text), "%u", uid);
                fprintf(o->stream, "%-19s %-22s %-8u %-12s %-7s %-5s %10s %-24s %s\n", when, id ? id : "?", pid,
                        user ? user : uid_text, sig, !have_dotnet ? "?" : dotnet ? "yes" : "no",
                        truncated && stored ? "truncated" : size_text, unit_shown ? unit_shown : "-",
                        name_shown ? name_shown : "-");
        }
        o->count++;
}

void output_url(Output *o, const WireMessage *m) {
        _cleanup_free_ char *path = NULL, *key = NULL, *url = NULL;
        uint64_t expires = 0;
        bool first = true;

        (void)wire_message_get_string(m, WIRE_TAG_PATH, &path);
        (void)wire_message_get_string(m, WIRE_TAG_EGRESS, &key);
        (void)wire_message_get_string(m, WIRE_TAG_URL, &url);
        (void)wire_message_get_u64(m, WIRE_TAG_TIME, &expires);
        if (o->json) {
                fputc('{', o->stream);
                json_member_string(o->stream, &first, "path", path);
                json_member_string(o->stream, &first, "key", key);
                json_member_string(o->stream, &first, "url", url);
                json_member_uint(o->stream, &first, "expires_usec", expires);
                fputc('}', o->stream);
        } else {
                /* the agent's own string, escaped all the same: a URL has nothing to escape */
                _cleanup_free_ char *shown = url ? text_escape(url, strlen(url)) : NULL;
                fprintf(o->stream, "%s\n", shown ? shown : "?");
        }
        o->count++;
}

void output_removed(Output *o, const char *path) {
        bool first = true;

        if (o->json) {
                fputc('{', o->stream);
                json_member_string(o->stream, &first, "removed", path);
                fputc('}', o->stream);
        } else {
                _cleanup_free_ char *escaped = text_escape(path, strlen(path));
                fprintf(o->stream, "removed %s\n", escaped ? escaped : "?");
        }
        o->count++;
}

void output_done(Output *o) {
        for (size_t i = 0; i < o->n_dumps; i++)
                dump_row_done(&o->dumps[i]);
        free(o->dumps);
        o->dumps = NULL;
        o->n_dumps = 0;
}

void output_process(Output *o, const WireMessage *m) {
        _cleanup_(process_row_done) ProcessRow r = {};

        process_row_read(&r, m);
        if (o->json)
                output_process_json(o, &r);
        else if (strcmp(o->verb, "ps") == 0)
                output_ps_text(o, &r);
        else if (strcmp(o->verb, "resume") == 0)
                output_resume_text(o, &r);
        else
                output_info_text(o, &r);
        o->count++;
}

/* Both sides come from the process: escaped like every string of a target's, on one line each. */
void output_env(Output *o, const WireMessage *m) {
        _cleanup_free_ char *name = NULL, *value = NULL, *shown_name = NULL, *shown_value = NULL;
        uint32_t redacted = 0;
        bool first = true;

        (void)wire_message_get_string(m, WIRE_TAG_ENV_NAME, &name);
        (void)wire_message_get_string(m, WIRE_TAG_ENV_VALUE, &value);
        (void)wire_message_get_u32(m, WIRE_TAG_REDACTED, &redacted);
        if (!name)
                return;
        if (o->json) {
                json_object_begin(o);
                json_member_string(o->stream, &first, "name", name);
                if (redacted || !value)
                        fputs(",\"value\":null", o->stream);
                else
                        json_member_string(o->stream, &first, "value", value);
                fprintf(o->stream, ",\"redacted\":%s}", redacted ? "true" : "false");
        } else {
                shown_name = text_escape(name, strlen(name));
                shown_value = !redacted && value ? text_escape(value, strlen(value)) : NULL;
                fprintf(o->stream, "%s=%s\n", shown_name ? shown_name : "?",
                        redacted ? "<redacted>" : shown_value ? shown_value : "");
        }
        o->count++;
}

/* An egress store as a reply names it (EGRESS, EGRESS_STORE "ENDPOINT/BUCKET/PREFIX"), split for showing. */
typedef struct EgressRow {
        char *name, *store;
        const char *bucket, *prefix; /* in store, after the endpoint's NUL and the bucket's */
} EgressRow;

static void egress_row_done(EgressRow *e) {
        free(e->name);
        free(e->store);
}

static void egress_row_read(const WireMessage *m, EgressRow *e) {
        char *authority, *slash;

        (void)wire_message_get_string(m, WIRE_TAG_EGRESS, &e->name);
        (void)wire_message_get_string(m, WIRE_TAG_EGRESS_STORE, &e->store);
        /* the endpoint has no path: the first '/' after "://" ends it, the next one the bucket */
        if (!e->store || !(authority = strstr(e->store, "://")) || !(slash = strchr(authority + 3, '/')))
                return;
        *slash = '\0';
        e->bucket = slash + 1;
        if (!(slash = strchr(slash + 1, '/')))
                return;
        *slash = '\0';
        e->prefix = slash + 1;
}

/* "egress": NAME, and "egress_endpoint", "egress_bucket", "egress_prefix" */
static void egress_row_json(FILE *f, bool *first, const EgressRow *e) {
        if (!e->name)
                return;
        json_member_string(f, first, "egress", e->name);
        if (!e->prefix)
                return;
        json_member_string(f, first, "egress_endpoint", e->store);
        json_member_string(f, first, "egress_bucket", e->bucket);
        json_member_string(f, first, "egress_prefix", e->prefix);
}

/* "INDENTegress: NAME (ENDPOINT, bucket BUCKET[, prefix PREFIX])" */
static void egress_row_text(FILE *f, const char *indent, const EgressRow *e) {
        if (!e->name)
                return;
        fprintf(f, "%segress: %s", indent, e->name);
        if (e->prefix)
                fprintf(f, " (%s, bucket %s%s%s)", e->store, e->bucket, *e->prefix ? ", prefix " : "", e->prefix);
        fputc('\n', f);
}

/* Return: whether the command would be allowed. */
/* What admitted a trace, after "granted by rule 'NAME'" in @reason: " as dotnet-common, ...", or "". */
static const char *verdict_admitted_as(const char *reason, const char *rule) {
        static const char head[] = "granted by rule '";
        size_t n = strlen(head), rule_len = rule ? strlen(rule) : 0;

        if (!reason || !rule || strncmp(reason, head, n) != 0 || strncmp(reason + n, rule, rule_len) != 0 ||
            reason[n + rule_len] != '\'')
                return "";
        return reason + n + rule_len + 1;
}

/*
 * explain: "COMMAND on PID: allowed by rule 'R'[ as PROFILES]" or "... denied: why", and for a trace the
 * providers it was decided on ("  providers: ..."), and for a dump, gcdump or trace the rule's egress store
 * ("  egress: NAME (ENDPOINT, bucket B, prefix P)"); with --json, one object with "providers" and "egress" too.
 */
bool output_verdict(Output *o, const WireMessage *m) {
        _cleanup_free_ char *command = NULL, *rule = NULL, *reason = NULL, *escaped = NULL, *providers = NULL;
        _cleanup_free_ char *escaped_as = NULL, *escaped_providers = NULL;
        _cleanup_(egress_row_done) EgressRow egress = {};
        uint32_t allowed = 0, pid = 0;
        bool first = true;

        (void)wire_message_get_u32(m, WIRE_TAG_ALLOWED, &allowed);
        (void)wire_message_get_u32(m, WIRE_TAG_PID, &pid);
        (void)wire_message_get_string(m, WIRE_TAG_COMMAND, &command);
        (void)wire_message_get_string(m, WIRE_TAG_RULE, &rule);
        (void)wire_message_get_string(m, WIRE_TAG_MESSAGE, &reason);
        (void)wire_message_get_string(m, WIRE_TAG_PROVIDERS, &providers);
        egress_row_read(m, &egress);

        if (o->json) {
                fputc('{', o->stream);
                json_member_uint(o->stream, &first, "pid", pid);
                json_member_string(o->stream, &first, "command", command);
                fprintf(o->stream, ",\"allowed\":%s", allowed ? "true" : "false");
                json_member_string(o->stream, &first, "rule", rule);
                json_member_string(o->stream, &first, "reason", reason);
                if (providers)
                        json_member_string(o->stream, &first, "providers", providers);
                egress_row_json(o->stream, &first, &egress);
                fputc('}', o->stream);
                return allowed;
        }
        escaped = reason ? text_escape(reason, strlen(reason)) : NULL;
        if (allowed) {
                const char *as = verdict_admitted_as(reason, rule);

                escaped_as = text_escape(as, strlen(as));
                fprintf(o->stream, "%s on %u: allowed by rule '%s'%s\n", command ? command : "?", pid,
                        rule ? rule : "?", escaped_as ? escaped_as : "");
        } else
                fprintf(o->stream, "%s on %u: denied: %s\n", command ? command : "?", pid,
                        escaped ? escaped : "no reason given");
        escaped_providers = providers ? text_escape(providers, strlen(providers)) : NULL;
        if (escaped_providers)
                fprintf(o->stream, "  providers: %s\n", escaped_providers);
        egress_row_text(o->stream, "  ", &egress);
        return allowed;
}

/* How a table's action last ended (wire: RESULT, RESULT_TIME, PATH and SIZE or REASON), as it came. */
typedef struct CollectResultRow {
        char *result, *path, *reason;
        uint64_t time_usec, size;
        uint32_t pid;             /* a table's: the process it was about */
} CollectResultRow;

static void collect_result_row_done(CollectResultRow *r) {
        free(r->result);
        free(r->path);
        free(r->reason);
}

static void collect_result_row_read(const WireMessage *m, CollectResultRow *r) {
        (void)wire_message_get_string(m, WIRE_TAG_RESULT, &r->result);
        (void)wire_message_get_u64(m, WIRE_TAG_RESULT_TIME, &r->time_usec);
        (void)wire_message_get_u32(m, WIRE_TAG_RESULT_PID, &r->pid);
        (void)wire_message_get_string(m, WIRE_TAG_PATH, &r->path);
        (void)wire_message_get_u64(m, WIRE_TAG_SIZE, &r->size);
        (void)wire_message_get_string(m, WIRE_TAG_REASON, &r->reason);
}

/* "last_result": "collected" or "failed", with its time, process (a table's), and path and size or reason. */
static void collect_result_json(FILE *f, bool *first, const CollectResultRow *r) {
        if (!r->result)
                return;
        json_member_string(f, first, "last_result", r->result);
        json_member_uint(f, first, "last_result_usec", r->time_usec);
        if (r->pid)
                json_member_uint(f, first, "last_result_pid", r->pid);
        json_member_string(f, first, "last_result_path", r->path);
        if (r->path)
                json_member_uint(f, first, "last_result_size", r->size);
        json_member_string(f, first, "last_result_reason", r->reason);
}

/* "@indent""last collected 2026-11-21 14:05:12 (pid 4242): PATH (N bytes)", or "... failed ...: REASON". */
static void collect_result_text(FILE *f, const char *indent, const CollectResultRow *r) {
        _cleanup_free_ char *what = NULL;
        char when[64], pid[24] = "";

        if (!r->result)
                return;
        format_when(r->time_usec, when, sizeof(when));
        if (r->pid)
                snprintf(pid, sizeof(pid), " (pid %u)", r->pid);
        if (r->path)
                what = text_escape(r->path, strlen(r->path));
        else if (r->reason)
                what = text_escape(r->reason, strlen(r->reason));
        if (r->path)
                fprintf(f, "%slast %s %s%s: %s (%" PRIu64 " bytes)\n", indent, r->result, when, pid, what ? what : "?",
                        r->size);
        else
                fprintf(f, "%slast %s %s%s: %s\n", indent, r->result, when, pid, what ? what : "?");
}

/*
 * collect: a table ("queue-backlog: dump when Provider:name", and below it in brackets what the agent
 * says of it, such as artifacts removed, and how its action last ended), then each process it watches
 * ("  1234 svc app.service app, last fired 2026-11-21 14:05:09", or "never fired", and below it how
 * the action last ended on it); with --json, one object each, the table's with "action", "what", "note"
 * and "last_result...", a process's with its pid.
 */
void output_collect(Output *o, const WireMessage *m) {
        _cleanup_free_ char *table = NULL, *action = NULL, *what = NULL, *unit = NULL, *name = NULL, *note = NULL;
        _cleanup_free_ char *e_table = NULL, *e_what = NULL, *e_unit = NULL, *e_name = NULL, *e_note = NULL;
        _cleanup_(collect_result_row_done) CollectResultRow result = {};
        _cleanup_(egress_row_done) EgressRow egress = {};
        uint32_t pid = 0, uid = 0;
        uint64_t fired = 0;
        bool have_uid, first = true;
        const char *user;
        char when[64], uid_buf[16];

        (void)wire_message_get_string(m, WIRE_TAG_RULE, &table);
        (void)wire_message_get_string(m, WIRE_TAG_COMMAND, &action);
        (void)wire_message_get_string(m, WIRE_TAG_PROVIDERS, &what);
        (void)wire_message_get_string(m, WIRE_TAG_MESSAGE, &note);
        (void)wire_message_get_string(m, WIRE_TAG_UNIT, &unit);
        (void)wire_message_get_string(m, WIRE_TAG_NAME, &name);
        (void)wire_message_get_u32(m, WIRE_TAG_PID, &pid);
        (void)wire_message_get_u64(m, WIRE_TAG_TIME, &fired);
        collect_result_row_read(m, &result);
        egress_row_read(m, &egress);
        have_uid = wire_message_get_u32(m, WIRE_TAG_UID, &uid) == 0;
        user = have_uid ? user_name(uid) : NULL;
        if (o->json) {
                json_object_begin(o);
                json_member_string(o->stream, &first, "table", table);
                json_member_string(o->stream, &first, "action", action);
                json_member_string(o->stream, &first, "what", what);
                json_member_string(o->stream, &first, "note", note);
                egress_row_json(o->stream, &first, &egress);
                if (pid)
                        json_member_uint(o->stream, &first, "pid", pid);
                if (have_uid) {
                        json_member_uint(o->stream, &first, "uid", uid);
                        json_member_string(o->stream, &first, "user", user);
                }
                json_member_string(o->stream, &first, "unit", unit);
                json_member_string(o->stream, &first, "name", name);
                if (fired)
                        json_member_uint(o->stream, &first, "last_fired_usec", fired);
                collect_result_json(o->stream, &first, &result);
                fputc('}', o->stream);
                o->count++;
                return;
        }
        e_table = table ? text_escape(table, strlen(table)) : NULL;
        if (!pid) {
                e_what = what ? text_escape(what, strlen(what)) : NULL;
                fprintf(o->stream, "%s: %s when %s\n", e_table ? e_table : "?", action ? action : "?",
                        e_what ? e_what : "?");
                e_note = note ? text_escape(note, strlen(note)) : NULL;
                if (e_note)
                        fprintf(o->stream, "  (%s)\n", e_note);
                egress_row_text(o->stream, "  ", &egress);
                collect_result_text(o->stream, "  ", &result);
                o->count++;
                return;
        }
        if (!user) {
                snprintf(uid_buf, sizeof(uid_buf), "%u", uid);
                user = uid_buf;
        }
        e_unit = unit ? text_escape(unit, strlen(unit)) : NULL;
        e_name = name ? text_escape(name, strlen(name)) : NULL;
        format_when(fired, when, sizeof(when));
        fprintf(o->stream, "  %-8u %-16s %-32s %s, %s%s\n", pid, user, e_unit ? e_unit : "-", e_name ? e_name : "-",
                fired ? "last fired " : "never fired", fired ? when : "");
        collect_result_text(o->stream, "           ", &result);
}

void output_end(Output *o) {
        if (strcmp(o->verb, "dumps") == 0 && !o->removing)
                output_dump_listing(o);
        if (o->json && output_is_list(o))
                fputs(o->count > 0 ? "]\n" : "[]\n", o->stream);
        else if (o->json)
                fputc('\n', o->stream);
        else if (strcmp(o->verb, "ps") == 0 && o->count == 0)
                fprintf(stderr, "No .NET processes that you may act on.\n");
        else if (strcmp(o->verb, "dumps") == 0 && o->count == 0)
                fprintf(stderr, "No dumps that you can read.\n");
        else if (strcmp(o->verb, "collect") == 0 && o->count == 0)
                fprintf(stderr, "No collection tables whose artifacts you can read.\n");
        else if (strcmp(o->verb, "crashes") == 0 && o->count == 0)
                fprintf(stderr, "No crashes that you may see.\n");
}

void output_json_error(FILE *f, int exit_status, uint32_t code, const char *error, const char *message,
                       uint32_t hresult, uint64_t request_id) {
        bool first = true;
        char id[17];

        fputc('{', f);
        json_member_uint(f, &first, "exit_status", (uint64_t)exit_status);
        json_member_string(f, &first, "error", error);
        json_member_string(f, &first, "message", message);
        if (code != 0)
                json_member_uint(f, &first, "protocol_error", code);
        if (hresult != 0)
                json_member_uint(f, &first, "hresult", hresult);
        if (request_id != 0) {
                snprintf(id, sizeof(id), "%016llx", (unsigned long long)request_id);
                json_member_string(f, &first, "request_id", id);
        }
        fputs("}\n", f);
}

static const char *exit_status_to_string(int status) {
        switch (status) {
        case EXIT_USAGE: return "usage error";
        case EXIT_AGENT_UNREACHABLE: return "the agent is not reachable";
        default: return "error";
        }
}

int output_fail(bool json, int exit_status, const char *fmt, ...) {
        _cleanup_free_ char *message = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&message, fmt, ap);
        va_end(ap);
        if (n < 0)
                return exit_status;
        if (json) {
                output_json_error(stdout, exit_status, 0, exit_status_to_string(exit_status), message, 0, 0);
                fflush(stdout);
        } else
                fprintf(stderr, "dsctl: %s\n", message);
        return exit_status;
}
