/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * systemd-coredump's journal entries (crash-entry.h): whose they are, and what they say of the
 * process that died; pure.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "agent/crashes/crash-entry.h"
#include "agent/targets/procfs.h"
#include "common/text.h"

static const char *const compression_suffixes[_CRASH_COMPRESSION_MAX] = {
        [CRASH_COMPRESSION_NONE] = "",
        [CRASH_COMPRESSION_ZSTD] = ".zst",
        [CRASH_COMPRESSION_LZ4] = ".lz4",
        [CRASH_COMPRESSION_XZ] = ".xz",
};

/* The fields the parser reads; each at most once in an entry. */
typedef enum Field {
        F_MESSAGE_ID,
        F_TRANSPORT,
        F_COMM,
        F_EXE_TRUSTED,
        F_SYSTEMD_UNIT,
        F_SYSTEMD_CGROUP,
        F_MACHINE_ID,
        F_UID_TRUSTED,
        F_PID,
        F_UID,
        F_GID,
        F_SIGNAL,
        F_TIMESTAMP,
        F_DUMPABLE,
        F_EXE,
        F_CMDLINE,
        F_CGROUP,
        F_FILENAME,
        F_TRUNCATED,
        F_PROC_STATUS,
        F_PROC_AUXV,
        F_PROC_MAPS,
        _F_MAX,
} Field;

static const char *const field_names[_F_MAX] = {
        [F_MESSAGE_ID] = "MESSAGE_ID",
        [F_TRANSPORT] = "_TRANSPORT",
        [F_COMM] = "_COMM",
        [F_EXE_TRUSTED] = "_EXE",
        [F_SYSTEMD_UNIT] = "_SYSTEMD_UNIT",
        [F_SYSTEMD_CGROUP] = "_SYSTEMD_CGROUP",
        [F_MACHINE_ID] = "_MACHINE_ID",
        [F_UID_TRUSTED] = "_UID",
        [F_PID] = "COREDUMP_PID",
        [F_UID] = "COREDUMP_UID",
        [F_GID] = "COREDUMP_GID",
        [F_SIGNAL] = "COREDUMP_SIGNAL",
        [F_TIMESTAMP] = "COREDUMP_TIMESTAMP",
        [F_DUMPABLE] = "COREDUMP_DUMPABLE",
        [F_EXE] = "COREDUMP_EXE",
        [F_CMDLINE] = "COREDUMP_CMDLINE",
        [F_CGROUP] = "COREDUMP_CGROUP",
        [F_FILENAME] = "COREDUMP_FILENAME",
        [F_TRUNCATED] = "COREDUMP_TRUNCATED",
        [F_PROC_STATUS] = "COREDUMP_PROC_STATUS",
        [F_PROC_AUXV] = "COREDUMP_PROC_AUXV",
        [F_PROC_MAPS] = "COREDUMP_PROC_MAPS",
};

/* A field's value, not NUL-terminated; NULL when the entry lacks it. */
typedef struct Value {
        const char *p;
        size_t n;
} Value;

/* Each field by name. Return: 0, or -EINVAL when one the parser reads comes twice. */
static int index_fields(const CrashField *fields, size_t n_fields, Value v[static _F_MAX]) {
        for (size_t i = 0; i < n_fields; i++) {
                const char *d = fields[i].data, *eq;
                size_t size = fields[i].size;

                if (!d || size == 0 || size > CRASH_FIELD_MAX)
                        continue;
                eq = memchr(d, '=', size);
                if (!eq)
                        continue;
                for (int f = 0; f < _F_MAX; f++) {
                        size_t len = strlen(field_names[f]);

                        if ((size_t)(eq - d) != len || memcmp(d, field_names[f], len) != 0)
                                continue;
                        if (v[f].p)
                                return -EINVAL;
                        v[f] = (Value){ .p = eq + 1, .n = size - len - 1 };
                }
        }
        return 0;
}

static bool value_is(const Value *v, const char *s) {
        return v->p && v->n == strlen(s) && memcmp(v->p, s, v->n) == 0;
}

static bool value_has_prefix(const Value *v, const char *prefix) {
        return v->p && v->n >= strlen(prefix) && memcmp(v->p, prefix, strlen(prefix)) == 0;
}

static bool value_has_suffix(const Value *v, const char *suffix) {
        size_t n = strlen(suffix);

        return v->p && v->n >= n && memcmp(v->p + v->n - n, suffix, n) == 0;
}

/* A strict decimal number (parse_u64()'s rules) of at most @max. */
static int value_u64(const Value *v, uint64_t max, uint64_t *ret) {
        char buf[21];
        uint64_t x;

        if (!v->p || v->n == 0 || v->n >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, v->p, v->n);
        buf[v->n] = '\0';
        if (parse_u64(buf, &x) < 0 || x > max)
                return -EINVAL;
        *ret = x;
        return 0;
}

/* @v as a C string into @buf when it fits and holds no NUL; else "" */
static void value_copy(const Value *v, char *buf, size_t size) {
        buf[0] = '\0';
        if (!v->p || v->n >= size || memchr(v->p, '\0', v->n))
                return;
        memcpy(buf, v->p, v->n);
        buf[v->n] = '\0';
}

/* systemd-coredump@INSTANCE.service, INSTANCE made of what systemd puts there ("0-119-0"), and only that */
static bool writer_unit_is_valid(const Value *unit) {
        size_t pre = strlen(CRASH_WRITER_UNIT_PREFIX), post = strlen(".service");

        if (!value_has_prefix(unit, CRASH_WRITER_UNIT_PREFIX) || !value_has_suffix(unit, ".service") ||
            unit->n <= pre + post || unit->n > CRASH_UNIT_MAX)
                return false;
        for (size_t i = pre; i < unit->n - post; i++) {
                char c = unit->p[i];
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
                      c == '_' || c == '\\'))
                        return false;
        }
        return true;
}

/* _SYSTEMD_CGROUP is the unit's own cgroup in systemd-coredump's slice, nothing below or beside it */
static bool writer_cgroup_is_valid(const Value *cgroup, const Value *unit) {
        size_t pre = strlen(CRASH_WRITER_SLICE_CGROUP);

        return value_has_prefix(cgroup, CRASH_WRITER_SLICE_CGROUP) && cgroup->n == pre + unit->n &&
               memcmp(cgroup->p + pre, unit->p, unit->n) == 0;
}

static bool writer_is_systemd_coredump(const Value v[static _F_MAX], const char *machine_id, uint64_t *ret_writer_uid) {
        uint64_t writer_uid;

        if (!value_is(&v[F_MESSAGE_ID], CRASH_MESSAGE_ID) || !value_is(&v[F_TRANSPORT], "journal") ||
            !value_is(&v[F_COMM], CRASH_WRITER_COMM) || !writer_unit_is_valid(&v[F_SYSTEMD_UNIT]) ||
            !writer_cgroup_is_valid(&v[F_SYSTEMD_CGROUP], &v[F_SYSTEMD_UNIT]) || !machine_id ||
            !value_is(&v[F_MACHINE_ID], machine_id))
                return false;
        /* journald leaves _EXE out when it cannot read it (systemd-coredump makes itself undumpable) */
        if (v[F_EXE_TRUSTED].p && !value_is(&v[F_EXE_TRUSTED], "/usr/lib/systemd/systemd-coredump") &&
            !value_is(&v[F_EXE_TRUSTED], "/lib/systemd/systemd-coredump"))
                return false;
        if (value_u64(&v[F_UID_TRUSTED], UINT32_MAX - 1, &writer_uid) < 0)
                return false;
        *ret_writer_uid = writer_uid;
        return true;
}

/* Its own ids, groups and dumpability: whether the process's memory was root's alone when it died. */
static void parse_credentials(const Value v[static _F_MAX], CrashEntry *e) {
        ProcStatus status;
        bool changed = true, secure = true;
        uint64_t dumpable = 0;

        for (size_t i = 0; i < 4; i++) {
                e->ids_uid[i] = i < 2 ? e->uid : (uint32_t)-1;
                e->ids_gid[i] = i < 2 ? e->gid : (uint32_t)-1;
        }
        if (v[F_PROC_STATUS].p && procfs_parse_status(v[F_PROC_STATUS].p, v[F_PROC_STATUS].n, &status) == 0 &&
            status.uid[0] == e->uid && status.gid[0] == e->gid) {
                memcpy(e->ids_uid, status.uid, sizeof(e->ids_uid));
                memcpy(e->ids_gid, status.gid, sizeof(e->ids_gid));
                changed = procfs_ids_changed(&status);
        }
        /* the kernel's %d: 1 for a dumpable process; 2 (suid_dumpable) a core only root may read */
        if (v[F_DUMPABLE].p && (value_u64(&v[F_DUMPABLE], 2, &dumpable) < 0 || dumpable != 1))
                changed = true;
        if (!v[F_PROC_AUXV].p || procfs_auxv_secure(v[F_PROC_AUXV].p, v[F_PROC_AUXV].n, &secure) != 0 || secure)
                changed = true;
        e->changed_credentials = changed;
}

/* The cgroup, and the unit and container it names, as a live process's are read from /proc/PID/cgroup. */
static void parse_cgroup(const Value *cgroup, CrashEntry *e) {
        _cleanup_free_ char *line = NULL, *unit = NULL;
        ProcContainer c;
        size_t n;

        if (!cgroup->p || cgroup->n == 0 || cgroup->n > CRASH_CGROUP_MAX || cgroup->p[0] != '/' ||
            memchr(cgroup->p, '\0', cgroup->n) || memchr(cgroup->p, '\n', cgroup->n))
                return;
        n = cgroup->n + 4;
        line = malloc(n + 1);
        if (!line)
                return;
        memcpy(line, "0::", 3);
        memcpy(line + 3, cgroup->p, cgroup->n);
        line[n - 1] = '\n';
        line[n] = '\0';
        if (procfs_cgroup_unit(line, n, &unit) == 0 && strlen(unit) <= CRASH_UNIT_MAX)
                snprintf(e->unit, sizeof(e->unit), "%s", unit);
        if (procfs_cgroup_container(line, n, &c) == 0) {
                snprintf(e->cgroup, sizeof(e->cgroup), "%s", c.cgroup);
                snprintf(e->container_id, sizeof(e->container_id), "%s", c.id);
                snprintf(e->pod_uid, sizeof(e->pod_uid), "%s", c.pod_uid);
                e->hierarchy_unified = c.unified;
        }
}

/* The process name a rule's names select, from its command line, as procfs_cmdline_name() reads a live one's. */
static void parse_name(const Value *cmdline, CrashEntry *e) {
        _cleanup_free_ char *name = NULL;
        char args[2 * (CRASH_EXE_MAX + 1)];
        int n;

        if (!cmdline->p || cmdline->n == 0)
                return;
        n = crash_cmdline_args(cmdline->p, cmdline->n, 2, args, sizeof(args));
        if (n <= 0 || procfs_cmdline_name(args, (size_t)n, &name) != 0 || strlen(name) > CRASH_NAME_MAX)
                return;
        snprintf(e->name, sizeof(e->name), "%s", name);
}

static bool is_digits(const char *s, size_t n) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

static bool is_lower_hex(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/*
 * The stored core's name, when COREDUMP_FILENAME is CRASH_STORE_DIR/NAME and NAME is what
 * systemd-coredump names this crash's core: core.COMM.UID.BOOT_ID.PID.TIMESTAMP, then the
 * compression's suffix (COMM escaped, so that it holds no '.', '/' or space).
 */
static void parse_file_name(const Value *v, const CrashEntry *e, CrashEntry *out) {
        size_t dir = strlen(CRASH_STORE_DIR "/");
        char tail[96];
        const char *name;
        size_t n, tail_n;
        int c;

        if (!value_has_prefix(v, CRASH_STORE_DIR "/") || v->n - dir == 0 || v->n - dir > CRASH_FILE_NAME_MAX)
                return;
        name = v->p + dir;
        n = v->n - dir;
        if (memchr(name, '/', n) || memchr(name, '\0', n) || n < 5 || memcmp(name, "core.", 5) != 0)
                return;
        for (c = _CRASH_COMPRESSION_MAX - 1; c >= 0; c--) {
                size_t s = strlen(compression_suffixes[c]);
                if (n >= s && memcmp(name + n - s, compression_suffixes[c], s) == 0)
                        break;
        }
        n -= strlen(compression_suffixes[c]);
        /* ".UID.BOOT_ID.PID.TIMESTAMP" at its end, with this crash's numbers */
        tail_n = (size_t)snprintf(tail, sizeof(tail), ".%" PRIu32 ".", e->uid);
        {
                char after[48];
                size_t after_n = (size_t)snprintf(after, sizeof(after), ".%" PRIu32 ".%" PRIu64, e->pid, e->time_usec);
                const char *boot;

                if (n < 5 + 1 + tail_n + 32 + after_n || memcmp(name + n - after_n, after, after_n) != 0)
                        return;
                boot = name + n - after_n - 32;
                if (!is_lower_hex(boot, 32) || memcmp(boot - tail_n, tail, tail_n) != 0)
                        return;
                /* COMM: at least one byte between "core." and ".UID" */
                if (boot - tail_n <= name + 5)
                        return;
        }
        memcpy(out->file_name, name, n + strlen(compression_suffixes[c]));
        out->file_name[n + strlen(compression_suffixes[c])] = '\0';
        out->compression = (uint8_t)c;
}

/* Does /proc/PID/maps text @maps map a file whose name is libcoreclr.so? (COREDUMP_PROC_MAPS may be cut short) */
static bool crash_maps_have_coreclr(const char *maps, size_t n) {
        static const char name[] = "/libcoreclr.so";
        size_t len = strlen(name);

        for (size_t line = 0; line < n;) {
                const char *nl = memchr(maps + line, '\n', n - line);
                size_t end = nl ? (size_t)(nl - maps) : n;

                if (end - line >= len && memcmp(maps + end - len, name, len) == 0)
                        return true;
                line = end + 1;
        }
        return false;
}

int crash_entry_parse(const CrashField *fields, size_t n_fields, const char *machine_id, uid_t coredump_uid,
                      uint64_t logged_usec, CrashEntry *ret) {
        Value v[_F_MAX] = {};
        uint64_t writer_uid, pid, uid, gid, signal, timestamp;
        CrashEntry e = {};

        if (index_fields(fields, n_fields, v) < 0)
                return CRASH_ENTRY_E_UNTRUSTED; /* journald never writes its own fields twice */
        if (!writer_is_systemd_coredump(v, machine_id, &writer_uid))
                return CRASH_ENTRY_E_UNTRUSTED;
        if (value_u64(&v[F_PID], INT32_MAX, &pid) < 0 || pid == 0 || value_u64(&v[F_UID], UINT32_MAX - 1, &uid) < 0 ||
            value_u64(&v[F_GID], UINT32_MAX - 1, &gid) < 0 || value_u64(&v[F_SIGNAL], 128, &signal) < 0 ||
            value_u64(&v[F_TIMESTAMP], UINT64_MAX / 2, &timestamp) < 0)
                return CRASH_ENTRY_E_MALFORMED;
        /* what it logs, it logs as the crashed process's user, or as its own for a system user's */
        if (writer_uid != uid && writer_uid != 0 && (coredump_uid == (uid_t)-1 || writer_uid != coredump_uid))
                return CRASH_ENTRY_E_UNTRUSTED;

        e.time_usec = timestamp;
        e.logged_usec = logged_usec;
        e.pid = (uint32_t)pid;
        e.uid = (uint32_t)uid;
        e.gid = (uint32_t)gid;
        e.signal = (uint32_t)signal;
        snprintf(e.id, sizeof(e.id), "%" PRIu64 "-%" PRIu64, timestamp / 1000000, pid);
        parse_credentials(v, &e);
        parse_cgroup(&v[F_CGROUP], &e);
        parse_name(&v[F_CMDLINE], &e);
        value_copy(&v[F_EXE], e.exe, sizeof(e.exe));
        e.truncated = value_is(&v[F_TRUNCATED], "1");
        /* systemd-coredump 252 keeps the first page of the maps alone: a "no" there is no answer (the
         * stored core's NT_FILE note is, crash_core_dotnet()) */
        e.dotnet = v[F_PROC_MAPS].p && crash_maps_have_coreclr(v[F_PROC_MAPS].p, v[F_PROC_MAPS].n) ? CRASH_DOTNET_YES
                                                                                                   : CRASH_DOTNET_UNKNOWN;
        parse_file_name(&v[F_FILENAME], &e, &e);
        *ret = e;
        return 0;
}

PolicyTarget crash_entry_policy_target(const CrashEntry *e) {
        PolicyTarget t = {
                .unit = e->unit[0] ? e->unit : NULL,
                .name = e->name[0] ? e->name : NULL,
                .cgroup = e->cgroup_vouched && e->cgroup[0] ? e->cgroup : NULL,
                .container_id = e->cgroup_vouched && e->container_id[0] ? e->container_id : NULL,
        };

        for (size_t i = 0; i < 4; i++) {
                t.uid[i] = e->ids_uid[i];
                t.gid[i] = e->ids_gid[i];
        }
        /* a crash whose memory is root's alone is no one else's own: the ids say changed whatever status said */
        if (e->changed_credentials && t.uid[2] == t.uid[0] && t.gid[2] == t.gid[0])
                t.uid[2] = (uid_t)-1;
        return t;
}

int crash_id_parse(const char *id, uint64_t *ret_seconds, uint32_t *ret_pid) {
        const char *dash = strchr(id, '-');
        char seconds[21], pid[11];
        uint64_t s, p;
        size_t ns, np;

        if (!dash)
                return -EINVAL;
        ns = (size_t)(dash - id);
        np = strlen(dash + 1);
        if (ns == 0 || ns >= sizeof(seconds) || np == 0 || np >= sizeof(pid) || !is_digits(id, ns) ||
            !is_digits(dash + 1, np) || (ns > 1 && id[0] == '0') || (np > 1 && dash[1] == '0'))
                return -EINVAL;
        memcpy(seconds, id, ns);
        seconds[ns] = '\0';
        memcpy(pid, dash + 1, np + 1);
        if (parse_u64(seconds, &s) < 0 || parse_u64(pid, &p) < 0 || p == 0 || p > INT32_MAX ||
            s > UINT64_MAX / 1000000 / 2)
                return -EINVAL;
        *ret_seconds = s;
        *ret_pid = (uint32_t)p;
        return 0;
}

static int hex_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* One character of a $'...' word after its backslash; the bytes it stands for into @out. Return: bytes read. */
static size_t c_escape(const char *s, size_t n, char *out, size_t *ret_len) {
        static const char simple[] = "a\ab\be\033f\fn\nr\rt\tv\v\\\\''\"\"??";

        if (n == 0)
                return 0;
        for (size_t i = 0; simple[i]; i += 2)
                if (s[0] == simple[i]) {
                        out[0] = simple[i + 1];
                        *ret_len = 1;
                        return 1;
                }
        if (s[0] == 'x' && n >= 3 && hex_value(s[1]) >= 0 && hex_value(s[2]) >= 0) {
                out[0] = (char)(hex_value(s[1]) * 16 + hex_value(s[2]));
                *ret_len = 1;
                return 3;
        }
        if (s[0] >= '0' && s[0] <= '3' && n >= 3 && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7') {
                out[0] = (char)((s[0] - '0') * 64 + (s[1] - '0') * 8 + (s[2] - '0'));
                *ret_len = 1;
                return 3;
        }
        return 0;
}

int crash_cmdline_args(const char *s, size_t n, size_t max_args, char *buf, size_t size) {
        size_t i = 0, out = 0, args = 0;

        while (i < n && args < max_args) {
                bool any = false;

                while (i < n && s[i] != ' ') {
                        char c = s[i], bytes[1];
                        size_t len = 0, used;

                        if (c == '\0')
                                return -EINVAL;
                        if (c == '$' && i + 1 < n && s[i + 1] == '\'') {
                                for (i += 2; i < n && s[i] != '\''; i += used) {
                                        if (s[i] == '\\') {
                                                used = c_escape(s + i + 1, n - i - 1, bytes, &len);
                                                if (used == 0 || bytes[0] == '\0')
                                                        return -EINVAL;
                                                used++;
                                        } else if (s[i] == '\0')
                                                return -EINVAL;
                                        else {
                                                bytes[0] = s[i];
                                                len = used = 1;
                                        }
                                        if (out + len >= size)
                                                return -EINVAL;
                                        buf[out++] = bytes[0];
                                }
                                if (i >= n)
                                        return -EINVAL;
                                i++;
                        } else if (c == '\'') {
                                for (i++; i < n && s[i] != '\''; i++) {
                                        if (s[i] == '\0' || out + 1 >= size)
                                                return -EINVAL;
                                        buf[out++] = s[i];
                                }
                                if (i >= n)
                                        return -EINVAL;
                                i++;
                        } else if (c == '"') {
                                for (i++; i < n && s[i] != '"'; i++) {
                                        if (s[i] == '\\' && i + 1 < n && strchr("\"\\`$", s[i + 1]))
                                                i++;
                                        if (s[i] == '\0' || out + 1 >= size)
                                                return -EINVAL;
                                        buf[out++] = s[i];
                                }
                                if (i >= n)
                                        return -EINVAL;
                                i++;
                        } else if (c == '\\' && i + 1 < n) {
                                if (s[i + 1] == '\0' || out + 1 >= size)
                                        return -EINVAL;
                                buf[out++] = s[i + 1];
                                i += 2;
                        } else {
                                if (out + 1 >= size)
                                        return -EINVAL;
                                buf[out++] = c;
                                i++;
                        }
                        any = true;
                }
                if (!any)
                        return -EINVAL; /* two spaces in a row, or one at an end: not what systemd writes */
                buf[out++] = '\0';
                args++;
                if (i < n)
                        i++; /* the space */
        }
        return (int)out;
}

/* The numbers of an entry, as packed; its strings follow, each a 16-bit length and its bytes. */
typedef struct PackedNumbers {
        uint64_t time_usec, logged_usec, stored_size;
        uint32_t pid, uid, gid, signal;
        uint32_t ids_uid[4], ids_gid[4];
        uint8_t changed_credentials, dotnet, truncated, compression, cgroup_vouched, stored, hierarchy_unified;
} PackedNumbers;

/* The strings of an entry, in packing order, with their buffers' sizes. */
#define PACKED_STRINGS(e)                                                                                         \
        {                                                                                                         \
                { (e)->id, sizeof((e)->id) }, { (e)->unit, sizeof((e)->unit) }, { (e)->name, sizeof((e)->name) }, \
                        { (e)->exe, sizeof((e)->exe) }, { (e)->cgroup, sizeof((e)->cgroup) },                     \
                        { (e)->container_id, sizeof((e)->container_id) }, { (e)->pod_uid, sizeof((e)->pod_uid) }, \
                        { (e)->file_name, sizeof((e)->file_name) },                                               \
        }

typedef struct PackedString {
        char *s;
        size_t size;
} PackedString;

size_t crash_entry_pack(const CrashEntry *e, uint8_t *buf, size_t size) {
        PackedString strings[] = PACKED_STRINGS((CrashEntry *)e);
        PackedNumbers n = {
                .time_usec = e->time_usec, .logged_usec = e->logged_usec, .stored_size = e->stored_size,
                .pid = e->pid, .uid = e->uid, .gid = e->gid, .signal = e->signal,
                .changed_credentials = e->changed_credentials, .dotnet = e->dotnet, .truncated = e->truncated,
                .compression = e->compression, .cgroup_vouched = e->cgroup_vouched, .stored = e->stored,
                .hierarchy_unified = (uint8_t)e->hierarchy_unified,
        };
        size_t used = sizeof(n);

        memcpy(n.ids_uid, e->ids_uid, sizeof(n.ids_uid));
        memcpy(n.ids_gid, e->ids_gid, sizeof(n.ids_gid));
        if (size < used)
                return 0;
        memcpy(buf, &n, sizeof(n));
        for (size_t i = 0; i < ELEMENTSOF(strings); i++) {
                uint16_t len = (uint16_t)strnlen(strings[i].s, strings[i].size - 1);

                if (size - used < sizeof(len) + len)
                        return 0;
                memcpy(buf + used, &len, sizeof(len));
                memcpy(buf + used + sizeof(len), strings[i].s, len);
                used += sizeof(len) + len;
        }
        return used;
}

int crash_entry_unpack(const uint8_t *buf, size_t size, CrashEntry *ret, size_t *ret_used) {
        CrashEntry e = {};
        PackedString strings[] = PACKED_STRINGS(&e);
        PackedNumbers n;
        size_t used = sizeof(n);

        if (size < used)
                return -EBADMSG;
        memcpy(&n, buf, sizeof(n));
        for (size_t i = 0; i < ELEMENTSOF(strings); i++) {
                uint16_t len;

                if (size - used < sizeof(len))
                        return -EBADMSG;
                memcpy(&len, buf + used, sizeof(len));
                if (len >= strings[i].size || size - used - sizeof(len) < len ||
                    memchr(buf + used + sizeof(len), '\0', len))
                        return -EBADMSG;
                memcpy(strings[i].s, buf + used + sizeof(len), len);
                strings[i].s[len] = '\0';
                used += sizeof(len) + len;
        }
        if (n.compression >= _CRASH_COMPRESSION_MAX || n.dotnet > CRASH_DOTNET_YES)
                return -EBADMSG;
        e.time_usec = n.time_usec;
        e.logged_usec = n.logged_usec;
        e.stored_size = n.stored_size;
        e.pid = n.pid;
        e.uid = n.uid;
        e.gid = n.gid;
        e.signal = n.signal;
        memcpy(e.ids_uid, n.ids_uid, sizeof(e.ids_uid));
        memcpy(e.ids_gid, n.ids_gid, sizeof(e.ids_gid));
        e.changed_credentials = n.changed_credentials != 0;
        e.dotnet = n.dotnet;
        e.truncated = n.truncated != 0;
        e.compression = n.compression;
        e.cgroup_vouched = n.cgroup_vouched != 0;
        e.stored = n.stored != 0;
        e.hierarchy_unified = n.hierarchy_unified != 0;
        *ret = e;
        *ret_used = used;
        return 0;
}
