/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Parsers of /proc/PID files (procfs.h): pure functions over bytes the caller read, used by target,
 * discover, sockopt, ports and startup.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>

#include "common/cleanup.h"
#include "agent/targets/procfs.h"
#include "common/wire.h"

/*
 * procfs_parse_stat_start_time() - field 22 (starttime) of /proc/PID/stat
 *
 * The comm field can contain spaces and ')' (the process chose it), so fields
 * are counted from the last ')' in the buffer, as the runtime itself does.
 */
int procfs_parse_stat_start_time(const char *buf, size_t n, uint64_t *ret) {
        const char *p = NULL, *end = buf + n;
        uint64_t v = 0;
        int field = 2;

        for (const char *c = buf; c < end; c++)
                if (*c == ')')
                        p = c;
        if (!p)
                return PROCFS_E_MALFORMED;
        p++;

        /* after ')' comes " state ppid ..."; field 3 is state */
        while (field < 22) {
                if (p >= end || *p != ' ')
                        return PROCFS_E_MALFORMED;
                p++;
                field++;
                if (field == 22)
                        break;
                /* the kernel never writes an empty field; one would shift all that follow */
                if (p >= end || *p == ' ')
                        return PROCFS_E_MALFORMED;
                while (p < end && *p != ' ')
                        p++;
        }

        if (p >= end || *p < '0' || *p > '9')
                return PROCFS_E_MALFORMED;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
                if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
                        return PROCFS_E_MALFORMED;
                v = v * 10 + (uint64_t)(*p - '0');
        }
        if (p < end && *p != ' ' && *p != '\n')
                return PROCFS_E_MALFORMED;

        *ret = v;
        return 0;
}

/*
 * Parses whitespace-separated decimal ids, however many: the first @max go to @out, *@ret_n
 * counts them all. Return: 0, or -1 for anything but ids.
 */
static int parse_ids(const char *p, const char *line_end, uint64_t *out, size_t max, size_t *ret_n) {
        size_t count = 0;

        for (;;) {
                uint64_t v = 0;
                bool digits = false;

                while (p < line_end && (*p == ' ' || *p == '\t'))
                        p++;
                if (p == line_end) {
                        *ret_n = count;
                        return 0;
                }
                for (; p < line_end && *p >= '0' && *p <= '9'; p++) {
                        digits = true;
                        v = v * 10 + (uint64_t)(*p - '0');
                        /* (uid_t) -1 means "no id" to the kernel; no process has it */
                        if (v >= UINT32_MAX)
                                return -1;
                }
                if (!digits || (p < line_end && *p != ' ' && *p != '\t'))
                        return -1;
                if (count < max)
                        out[count] = v;
                count++;
        }
}

/* Parses up to @max whitespace-separated decimal ids; returns how many, or -1 (also for more). */
static int parse_id_list(const char *p, const char *line_end, uint64_t *out, size_t max) {
        size_t count;

        if (parse_ids(p, line_end, out, max, &count) < 0 || count > max)
                return -1;
        return (int)count;
}

/* The Groups line's ids, after "Groups:": ret->groups, ->n_groups, ->groups_known. Return: 0 or -1. */
static int parse_groups(const char *p, const char *line_end, ProcStatus *ret) {
        uint64_t ids[PROCFS_GROUPS_MAX];

        if (parse_ids(p, line_end, ids, PROCFS_GROUPS_MAX, &ret->n_groups) < 0)
                return -1;
        for (size_t i = 0; i < ret->n_groups && i < PROCFS_GROUPS_MAX; i++)
                ret->groups[i] = (gid_t)ids[i];
        ret->groups_known = true;
        return 0;
}

/*
 * procfs_parse_status() - Uid, Gid, NSpid and Groups lines of /proc/PID/status
 *
 * The first three must be present and well formed; a missing NSpid (kernels
 * before 4.1) is an error rather than a guess about the target's namespace.
 * Only the process's own comm (Name:) is its to write in the file, and the
 * kernel escapes a newline in it.
 */
int procfs_parse_status(const char *buf, size_t n, ProcStatus *ret) {
        ProcStatus st = {};
        bool have_uid = false, have_gid = false, have_nspid = false;
        const char *end = buf + n;

        for (const char *line = buf; line < end;) {
                const char *line_end = memchr(line, '\n', (size_t)(end - line));
                uint64_t ids[PROCFS_NSPID_MAX];
                int k;

                if (!line_end)
                        line_end = end;

                if (line_end - line > 4 && memcmp(line, "Uid:", 4) == 0) {
                        k = parse_id_list(line + 4, line_end, ids, 4);
                        if (k != 4 || have_uid)
                                return PROCFS_E_MALFORMED;
                        for (int i = 0; i < 4; i++)
                                st.uid[i] = (uid_t)ids[i];
                        have_uid = true;
                } else if (line_end - line > 4 && memcmp(line, "Gid:", 4) == 0) {
                        k = parse_id_list(line + 4, line_end, ids, 4);
                        if (k != 4 || have_gid)
                                return PROCFS_E_MALFORMED;
                        for (int i = 0; i < 4; i++)
                                st.gid[i] = (gid_t)ids[i];
                        have_gid = true;
                } else if (line_end - line >= 7 && memcmp(line, "Groups:", 7) == 0) {
                        if (st.groups_known || parse_groups(line + 7, line_end, &st) < 0)
                                return PROCFS_E_MALFORMED;
                } else if (line_end - line > 6 && memcmp(line, "NSpid:", 6) == 0) {
                        k = parse_id_list(line + 6, line_end, ids, PROCFS_NSPID_MAX);
                        if (k < 1 || have_nspid)
                                return PROCFS_E_MALFORMED;
                        for (int i = 0; i < k; i++) {
                                if (ids[i] == 0 || ids[i] > INT_MAX)
                                        return PROCFS_E_MALFORMED;
                                st.nspid[i] = (pid_t)ids[i];
                        }
                        st.n_nspid = (size_t)k;
                        have_nspid = true;
                }
                line = line_end + 1;
        }

        if (!have_uid || !have_gid || !have_nspid)
                return PROCFS_E_MALFORMED;
        *ret = st;
        return 0;
}

bool procfs_ids_changed(const ProcStatus *s) {
        for (size_t i = 1; i < 4; i++)
                if (s->uid[i] != s->uid[0] || s->gid[i] != s->gid[0])
                        return true;
        return false;
}

bool procfs_same_credentials(const ProcStatus *a, const ProcStatus *b) {
        if (memcmp(a->uid, b->uid, sizeof(a->uid)) != 0 || memcmp(a->gid, b->gid, sizeof(a->gid)) != 0)
                return false;
        if (!a->groups_known || !b->groups_known || a->n_groups != b->n_groups || a->n_groups > PROCFS_GROUPS_MAX)
                return false;
        return memcmp(a->groups, b->groups, a->n_groups * sizeof(gid_t)) == 0;
}

/*
 * procfs_parse_pidfd_fdinfo() - the NSpid line of a pidfd's /proc/self/fdinfo entry
 *
 * Only ret->nspid and ret->n_nspid are set (outermost first; the last is the
 * process's pid in its own namespace). A pidfd of a process that exited
 * says "Pid: -1" and has no NSpid line.
 *
 * Return: 0, or PROCFS_E_MALFORMED (also for an exited process).
 */
int procfs_parse_pidfd_fdinfo(const char *buf, size_t n, ProcStatus *ret) {
        const char *end = buf + n;

        for (const char *line = buf; line < end;) {
                const char *line_end = memchr(line, '\n', (size_t)(end - line));
                uint64_t ids[PROCFS_NSPID_MAX];
                ProcStatus st = {};
                int k;

                if (!line_end)
                        line_end = end;
                if (line_end - line > 6 && memcmp(line, "NSpid:", 6) == 0) {
                        k = parse_id_list(line + 6, line_end, ids, PROCFS_NSPID_MAX);
                        if (k < 1)
                                return PROCFS_E_MALFORMED;
                        for (int i = 0; i < k; i++) {
                                if (ids[i] == 0 || ids[i] > INT_MAX)
                                        return PROCFS_E_MALFORMED;
                                st.nspid[i] = (pid_t)ids[i];
                        }
                        st.n_nspid = (size_t)k;
                        *ret = st;
                        return 0;
                }
                line = line_end + 1;
        }
        return PROCFS_E_MALFORMED;
}

/*
 * procfs_environ_get() - value of @key in a NUL-separated environment block
 *
 * The first definition wins, as getenv() in the target would return it.
 *
 * Return: 0, PROCFS_E_NOT_FOUND, -ENOMEM.
 */
int procfs_environ_get(const char *buf, size_t n, const char *key, char **ret) {
        size_t key_len = strlen(key);
        const char *end = buf + n;

        for (const char *entry = buf; entry < end;) {
                const char *entry_end = memchr(entry, '\0', (size_t)(end - entry));
                size_t len;

                if (!entry_end)
                        entry_end = end;
                len = (size_t)(entry_end - entry);
                if (len > key_len && memcmp(entry, key, key_len) == 0 && entry[key_len] == '=') {
                        char *v = strndup(entry + key_len + 1, len - key_len - 1);
                        if (!v)
                                return -ENOMEM;
                        *ret = v;
                        return 0;
                }
                entry = entry_end + 1;
        }
        return PROCFS_E_NOT_FOUND;
}

/* A .NET setting as CLRConfig reads it: DOTNET_NAME, else COMPlus_NAME. Return: 0, PROCFS_E_NOT_FOUND, -ENOMEM. */
static int environ_clr_config(const char *buf, size_t n, const char *name, char **ret) {
        char key[64];
        int r;

        snprintf(key, sizeof(key), "DOTNET_%s", name);
        r = procfs_environ_get(buf, n, key, ret);
        if (r != PROCFS_E_NOT_FOUND)
                return r;
        snprintf(key, sizeof(key), "COMPlus_%s", name);
        return procfs_environ_get(buf, n, key, ret);
}

/* A DWORD setting as CLRConfig parses it: hexadecimal; one that does not parse is the default, 0. */
static uint32_t clr_config_dword(const char *s) {
        unsigned long long v;
        char *end;

        errno = 0;
        v = strtoull(s, &end, 16);
        if (end == s || errno == ERANGE)
                return 0;
        return (uint32_t)v;
}

/* Does one entry of DOTNET_DiagnosticPorts (ADDRESS[,TAG...]) make a port that suspends startup? */
static bool diagnostic_port_suspends(const char *entry, size_t len) {
        const char *end = entry + len, *tag;
        int suspend = -1, connect = -1;
        size_t address = strcspn(entry, ",");

        if (address >= len) /* no tags: a connect port that suspends */
                return len > 0;
        if (address == 0) /* no address: the runtime ignores the entry */
                return false;
        /* the first of each kind of tag wins; unknown tags are ignored */
        for (tag = entry + address + 1; tag <= end; tag += strcspn(tag, ",") + 1) {
                size_t n = strcspn(tag, ",");

                if (tag + n > end)
                        n = (size_t)(end - tag);
                if (suspend < 0 && n == 7 && strncasecmp(tag, "suspend", n) == 0)
                        suspend = 1;
                else if (suspend < 0 && n == 9 && strncasecmp(tag, "nosuspend", n) == 0)
                        suspend = 0;
                else if (connect < 0 && n == 7 && strncasecmp(tag, "connect", n) == 0)
                        connect = 1;
                else if (connect < 0 && n == 6 && strncasecmp(tag, "listen", n) == 0)
                        connect = 0;
        }
        /* CoreCLR makes no listen ports but its default one */
        return suspend != 0 && connect != 0;
}

/**
 * procfs_environ_startup_suspend() - does a .NET runtime's environment pause it at startup?
 *
 * As the runtime reads its settings: DOTNET_DefaultDiagnosticPortSuspend
 * (hexadecimal, not 0) pauses it until ResumeRuntime comes on its own socket;
 * DOTNET_DiagnosticPorts (ADDRESS[,connect|listen][,suspend|nosuspend];...)
 * until the tool at each connect port that suspends (the default) resumes it.
 * COMPlus_ stands in for a DOTNET_ name that is not set. That the runtime is
 * still paused only it can tell (startup.h).
 *
 * Return: PROCFS_SUSPEND_DEFAULT_PORT and PROCFS_SUSPEND_PORTS, as they apply, or -ENOMEM.
 */
int procfs_environ_startup_suspend(const char *buf, size_t n) {
        _cleanup_free_ char *suspend = NULL, *ports = NULL;
        int r, result = 0;

        r = environ_clr_config(buf, n, "DefaultDiagnosticPortSuspend", &suspend);
        if (r < 0)
                return r;
        if (r == 0 && clr_config_dword(suspend) != 0)
                result |= PROCFS_SUSPEND_DEFAULT_PORT;
        r = environ_clr_config(buf, n, "DiagnosticPorts", &ports);
        if (r < 0)
                return r;
        for (const char *p = ports; r == 0 && *p; p += strcspn(p, ";") + (p[strcspn(p, ";")] ? 1 : 0))
                if (diagnostic_port_suspends(p, strcspn(p, ";")))
                        result |= PROCFS_SUSPEND_PORTS;
        return result;
}

static const char *path_basename(const char *s, size_t len, size_t *ret_len) {
        const char *b = s;

        for (size_t i = 0; i < len; i++)
                if (s[i] == '/')
                        b = s + i + 1;
        *ret_len = len - (size_t)(b - s);
        return b;
}

static bool has_suffix(const char *s, size_t len, const char *suffix) {
        size_t sl = strlen(suffix);
        return len > sl && memcmp(s + len - sl, suffix, sl) == 0;
}

/*
 * procfs_cmdline_name() - a short name for a .NET process from its command line
 *
 * "dotnet /srv/app/Orders.Api.dll" is named "Orders.Api"; an apphost
 * "/srv/app/Orders.Api" is named by its basename. Display only: the process
 * chose these bytes, so nothing may trust them.
 *
 * Return: 0, PROCFS_E_NOT_FOUND for an empty command line, -ENOMEM.
 */
int procfs_cmdline_name(const char *buf, size_t n, char **ret) {
        const char *arg0 = buf, *arg1 = NULL, *name;
        size_t len0, len1 = 0, name_len;
        const char *nul;
        char *s;

        if (n == 0 || buf[0] == '\0')
                return PROCFS_E_NOT_FOUND;
        nul = memchr(buf, '\0', n);
        len0 = nul ? (size_t)(nul - buf) : n;
        if (nul && (size_t)(nul - buf) + 1 < n) {
                const char *nul1;
                arg1 = nul + 1;
                nul1 = memchr(arg1, '\0', (size_t)(buf + n - arg1));
                len1 = nul1 ? (size_t)(nul1 - arg1) : (size_t)(buf + n - arg1);
        }

        name = path_basename(arg0, len0, &name_len);
        if (name_len == 6 && memcmp(name, "dotnet", 6) == 0 && arg1 && has_suffix(arg1, len1, ".dll")) {
                name = path_basename(arg1, len1, &name_len);
                name_len -= 4;
        }
        if (name_len == 0)
                return PROCFS_E_NOT_FOUND;

        s = strndup(name, name_len);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* What readlink() of /proc/PID/exe appends when the file was replaced since the process started. */
#define EXE_DELETED_SUFFIX " (deleted)"

bool procfs_command_line_is_exe(const char *command_line, const char *exe) {
        size_t n;

        if (!command_line || !exe)
                return false;
        n = strlen(exe);
        if (n > strlen(EXE_DELETED_SUFFIX) && strcmp(exe + n - strlen(EXE_DELETED_SUFFIX), EXE_DELETED_SUFFIX) == 0)
                n -= strlen(EXE_DELETED_SUFFIX);
        return strlen(command_line) == n && memcmp(command_line, exe, n) == 0;
}

/* The unit in a cgroup path: the first component below the slices. */
/* Is everything of @path before @component "/.." components? */
static bool leading_dotdots(const char *path, const char *component) {
        for (const char *c = path; c < component; c++)
                if (*c != '/' && *c != '.')
                        return false;
        return true;
}

static int unit_of_cgroup_path(const char *path, size_t len, char **ret) {
        const char *p = path, *end = path + len;

        while (p < end) {
                const char *component, *slash;
                size_t clen;

                while (p < end && *p == '/')
                        p++;
                component = p;
                slash = memchr(p, '/', (size_t)(end - p));
                clen = slash ? (size_t)(slash - p) : (size_t)(end - p);
                p = component + clen;
                if (clen == 0)
                        break;
                /* read from a cgroup namespace of its own (the agent in a container), the kernel shows
                 * the host's path relative to ours: "/../../system.slice/x.service"; only leading ones */
                if (clen == 2 && memcmp(component, "..", 2) == 0 && leading_dotdots(path, component))
                        continue;
                if (has_suffix(component, clen, ".slice"))
                        continue;
                if (!wire_unit_name_is_valid(component, clen))
                        return PROCFS_E_NOT_FOUND;
                *ret = strndup(component, clen);
                return *ret ? 0 : -ENOMEM;
        }
        return PROCFS_E_NOT_FOUND;
}

static bool is_lower_hex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Exactly PROC_CONTAINER_ID_LEN lowercase hex characters. */
static bool is_container_id(const char *s, size_t len) {
        if (len != PROC_CONTAINER_ID_LEN)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!is_lower_hex(s[i]))
                        return false;
        return true;
}

/* A canonical lowercase UUID, with @sep where it has its dashes ('-', or '_' in a systemd slice name). */
static bool is_uuid(const char *s, size_t len, char sep) {
        if (len != PROC_POD_UID_LEN)
                return false;
        for (size_t i = 0; i < len; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? s[i] != sep : !is_lower_hex(s[i]))
                        return false;
        }
        return true;
}

/* A container id in one component: <id>, or ENGINE-<id> with or without ".scope". */
static bool component_container_id(const char *c, size_t len, char id[static PROC_CONTAINER_ID_LEN + 1]) {
        static const char *const prefixes[] = { "libpod-", "docker-", "crio-", "cri-containerd-" };

        if (!is_container_id(c, len)) {
                size_t plen = 0;

                if (has_suffix(c, len, ".scope"))
                        len -= strlen(".scope");
                for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]) && plen == 0; i++)
                        if (len > strlen(prefixes[i]) && memcmp(c, prefixes[i], strlen(prefixes[i])) == 0)
                                plen = strlen(prefixes[i]);
                if (plen == 0 || !is_container_id(c + plen, len - plen))
                        return false;
                c += plen;
                len -= plen;
        }
        memcpy(id, c, len);
        id[len] = '\0';
        return true;
}

/* A Kubernetes pod in one component: kubepods[-QOS]-pod<uid with '_'>.slice, or pod<uid>. */
static bool component_pod_uid(const char *c, size_t len, char uid[static PROC_POD_UID_LEN + 1]) {
        const char *u = NULL;

        if (len == 3 + PROC_POD_UID_LEN && memcmp(c, "pod", 3) == 0 && is_uuid(c + 3, PROC_POD_UID_LEN, '-'))
                u = c + 3;
        else if (len >= strlen("kubepods-pod") + PROC_POD_UID_LEN + strlen(".slice") &&
                 memcmp(c, "kubepods-", strlen("kubepods-")) == 0 && has_suffix(c, len, ".slice")) {
                const char *tail = c + len - strlen(".slice") - PROC_POD_UID_LEN;
                if (memcmp(tail - 4, "-pod", 4) == 0 && is_uuid(tail, PROC_POD_UID_LEN, '_'))
                        u = tail;
        }
        if (!u)
                return false;
        for (size_t i = 0; i < PROC_POD_UID_LEN; i++)
                uid[i] = u[i] == '_' ? '-' : u[i];
        uid[PROC_POD_UID_LEN] = '\0';
        return true;
}

/* Walks @path's components outermost first: the first container or pod decides (procfs.h). */
static void container_of_path(const char *path, size_t len, ProcContainer *c) {
        const char *p = path, *end = path + len;

        while (p < end) {
                const char *slash = memchr(p, '/', (size_t)(end - p));
                size_t clen = slash ? (size_t)(slash - p) : (size_t)(end - p);

                if (component_container_id(p, clen, c->id))
                        return; /* a container: below a pod, or on its own */
                if (!c->pod_uid[0])
                        (void)component_pod_uid(p, clen, c->pod_uid);
                p += clen + 1;
        }
}

/* One line of /proc/PID/cgroup: "ID:CONTROLLERS:PATH". Return: false when it is not one. */
static bool cgroup_line_split(const char *line, size_t len, const char **ret_controllers, size_t *ret_controllers_len,
                              const char **ret_path, size_t *ret_path_len, bool *ret_unified) {
        const char *end = line + len, *c1 = memchr(line, ':', len), *c2;

        if (!c1 || c1 == line)
                return false;
        for (const char *d = line; d < c1; d++)
                if (*d < '0' || *d > '9')
                        return false;
        c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
        if (!c2 || c2 + 1 >= end || c2[1] != '/')
                return false;
        *ret_controllers = c1 + 1;
        *ret_controllers_len = (size_t)(c2 - c1 - 1);
        *ret_path = c2 + 1;
        *ret_path_len = (size_t)(end - c2 - 1);
        *ret_unified = c1 - line == 1 && line[0] == '0' && c2 == c1 + 1;
        return true;
}

/* Is "name=systemd" one of the comma-separated @controllers? */
static bool controllers_have_systemd(const char *controllers, size_t len) {
        const char *end = controllers + len;

        for (const char *p = controllers; p <= end;) {
                const char *comma = memchr(p, ',', (size_t)(end - p));
                size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);

                if (n == strlen("name=systemd") && memcmp(p, "name=systemd", n) == 0)
                        return true;
                p += n + 1;
        }
        return false;
}

/* The lines of /proc/PID/cgroup that say where a process is (cgroup_lines_scan()). */
typedef struct CgroupLines {
        const char *unified, *systemd, *other, *first;
        size_t unified_len, systemd_len, other_len, first_len;
        const char *other_controllers, *first_controllers;
        size_t other_controllers_len, first_controllers_len;
} CgroupLines;

/*
 * Splits /proc/PID/cgroup into its unified line, systemd's named v1 line, the
 * first other v1 line that is not the root, and the first line. Return: 0, or
 * PROCFS_E_MALFORMED for what procfs_cgroup_container() documents as such.
 */
static int cgroup_lines_scan(const char *buf, size_t n, CgroupLines *ret) {
        const char *end = buf + n;
        CgroupLines l = {};

        if (n == 0 || memchr(buf, '\0', n))
                return PROCFS_E_MALFORMED;
        for (const char *line = buf; line < end;) {
                const char *line_end = memchr(line, '\n', (size_t)(end - line)), *controllers, *lpath;
                size_t controllers_len, lpath_len;
                bool is_unified;

                if (!line_end)
                        line_end = end;
                if (line_end == line) { /* the kernel writes none; tolerated */
                        line = line_end + 1;
                        continue;
                }
                if (!cgroup_line_split(line, (size_t)(line_end - line), &controllers, &controllers_len, &lpath,
                                       &lpath_len, &is_unified))
                        return PROCFS_E_MALFORMED;
                if (!l.first) {
                        l.first = lpath, l.first_len = lpath_len;
                        l.first_controllers = controllers, l.first_controllers_len = controllers_len;
                }
                if (is_unified) {
                        if (l.unified)
                                return PROCFS_E_MALFORMED;
                        l.unified = lpath, l.unified_len = lpath_len;
                } else if (controllers_have_systemd(controllers, controllers_len)) {
                        if (l.systemd)
                                return PROCFS_E_MALFORMED;
                        l.systemd = lpath, l.systemd_len = lpath_len;
                } else if (!l.other && lpath_len > 1) {
                        l.other = lpath, l.other_len = lpath_len;
                        l.other_controllers = controllers, l.other_controllers_len = controllers_len;
                }
                line = line_end + 1;
        }
        if (!l.first)
                return PROCFS_E_MALFORMED;
        *ret = l;
        return 0;
}

/*
 * procfs_cgroup_unit() - the systemd unit a process runs in, from /proc/PID/cgroup
 *
 * Reads the unified hierarchy ("0::/system.slice/x.service") and, on hybrid
 * and legacy hosts, systemd's named hierarchy ("N:name=systemd:/..."), the
 * way systemd names a process's unit: the first path component below the
 * slices. A user's own units are inside user@UID.service, which is what is
 * returned for them, as sd_pid_get_unit() does. The file is read as strictly
 * as procfs_cgroup_container() reads it: two unified lines, or two of systemd's,
 * name no unit, since which one is the kernel's is not known.
 *
 * Return: 0, PROCFS_E_NOT_FOUND, PROCFS_E_MALFORMED, -ENOMEM.
 */
int procfs_cgroup_unit(const char *buf, size_t n, char **ret) {
        CgroupLines l;
        int r = PROCFS_E_NOT_FOUND;

        if (cgroup_lines_scan(buf, n, &l) != 0)
                return PROCFS_E_MALFORMED;
        if (l.unified)
                r = unit_of_cgroup_path(l.unified, l.unified_len, ret);
        if (r == PROCFS_E_NOT_FOUND && l.systemd)
                r = unit_of_cgroup_path(l.systemd, l.systemd_len, ret);
        return r;
}

/* Which hierarchy a v1 line's @controllers name: "name=systemd" -> "systemd", others as they are. */
static void hierarchy_of(const char *controllers, size_t len, ProcContainer *c) {
        if (len > strlen("name=") && memcmp(controllers, "name=", strlen("name=")) == 0)
                controllers += strlen("name="), len -= strlen("name=");
        if (len == 0 || len > PROC_CGROUP_HIERARCHY_MAX)
                return; /* left "": no directory to look in, so the path stays unverified */
        for (size_t i = 0; i < len; i++) {
                char ch = controllers[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == ','))
                        return;
        }
        memcpy(c->hierarchy, controllers, len);
        c->hierarchy[len] = '\0';
}

int procfs_cgroup_container(const char *buf, size_t n, ProcContainer *ret) {
        CgroupLines l;
        const char *path, *controllers = NULL;
        size_t path_len, controllers_len = 0;
        bool unified = false;

        if (cgroup_lines_scan(buf, n, &l) != 0)
                return PROCFS_E_MALFORMED;

        /* legacy hosts list "0::/" for every process: there the unified path says nothing */
        if (l.unified && l.unified_len > 1)
                path = l.unified, path_len = l.unified_len, unified = true;
        else if (l.systemd && l.systemd_len > 1)
                path = l.systemd, path_len = l.systemd_len, controllers = "name=systemd",
                controllers_len = strlen("name=systemd");
        else if (!l.systemd && l.other) /* where systemd runs, it places processes; elsewhere any controller */
                path = l.other, path_len = l.other_len, controllers = l.other_controllers,
                controllers_len = l.other_controllers_len;
        else if (l.unified)
                path = l.unified, path_len = l.unified_len, unified = true;
        else if (l.systemd)
                path = l.systemd, path_len = l.systemd_len, controllers = "name=systemd",
                controllers_len = strlen("name=systemd");
        else
                path = l.first, path_len = l.first_len, controllers = l.first_controllers,
                controllers_len = l.first_controllers_len;

        *ret = (ProcContainer){ .unified = unified };
        /* not cut, but kept whatever its bytes: it is shown escaped, and a policy matches it byte by byte */
        if (path_len <= PROC_CGROUP_PATH_MAX) {
                memcpy(ret->cgroup, path, path_len);
                ret->cgroup[path_len] = '\0';
        }
        if (!unified && controllers)
                hierarchy_of(controllers, controllers_len, ret);
        container_of_path(path, path_len, ret);
        return 0;
}

/*
 * procfs_auxv_secure() - AT_SECURE of /proc/PID/auxv: did the kernel start the
 * process in secure-execution mode (setuid, setgid, file capabilities)?
 *
 * Pairs of native words up to AT_NULL. A vector without AT_NULL, or of an odd
 * size, is malformed: callers then treat the process as secure.
 *
 * Return: 0, PROCFS_E_MALFORMED.
 */
int procfs_auxv_secure(const char *buf, size_t n, bool *ret) {
        const size_t pair = 2 * sizeof(unsigned long);
        bool secure = false;

        if (n % pair != 0)
                return PROCFS_E_MALFORMED;
        for (size_t off = 0; off < n; off += pair) {
                unsigned long type, value;

                memcpy(&type, buf + off, sizeof(type));
                memcpy(&value, buf + off + sizeof(type), sizeof(value));
                if (type == AT_NULL) {
                        *ret = secure;
                        return 0;
                }
                if (type == AT_SECURE)
                        secure = value != 0;
        }
        return PROCFS_E_MALFORMED;
}

/* "dotnet-diagnostic-PID-KEY-socket" at the end of a path: PID and KEY. */
static bool parse_diagnostic_name(const char *path, size_t len, ProcDiagnosticName *ret) {
        static const char prefix[] = "dotnet-diagnostic-", suffix[] = "-socket";
        const char *p, *end = path + len;
        uint64_t v[2] = {};
        size_t base_len;

        path = path_basename(path, len, &base_len);
        if (base_len <= strlen(prefix) + strlen(suffix) || memcmp(path, prefix, strlen(prefix)) != 0 ||
            !has_suffix(path, base_len, suffix))
                return false;
        p = path + strlen(prefix);
        end = path + base_len - strlen(suffix);
        for (int i = 0; i < 2; i++) {
                const char *start = p;
                for (; p < end && *p >= '0' && *p <= '9'; p++) {
                        if (v[i] > (UINT64_MAX - 9) / 10)
                                return false;
                        v[i] = v[i] * 10 + (uint64_t)(*p - '0');
                }
                if (p == start || (i == 0 && (p >= end || *p != '-')) || (i == 1 && p != end))
                        return false;
                p++;
        }
        if (v[0] == 0 || v[0] > INT32_MAX)
                return false;
        *ret = (ProcDiagnosticName){ .pid = (pid_t)v[0], .key = v[1] };
        return true;
}

/* __SO_ACCEPTCON in the Flags column: the socket listens. */
#define UNIX_FLAG_LISTENING 0x10000u

int procfs_unix_diagnostic_listeners(const char *buf, size_t n, ProcDiagnosticName *out, size_t max, size_t *ret_n) {
        const char *end = buf + n, *line = buf;
        size_t found = 0;

        /* "Num       RefCount Protocol Flags    Type St Inode Path" */
        if (n < 4 || memcmp(buf, "Num ", 4) != 0)
                return PROCFS_E_MALFORMED;
        line = memchr(buf, '\n', n);
        for (line = line ? line + 1 : end; line < end;) {
                const char *line_end = memchr(line, '\n', (size_t)(end - line)), *p = line, *path;
                unsigned long flags = 0;
                ProcDiagnosticName name;

                if (!line_end)
                        line_end = end;
                /* fields: Num: RefCount Protocol Flags Type St Inode [Path] */
                for (int field = 0; field < 7; field++) {
                        while (p < line_end && *p == ' ')
                                p++;
                        if (field == 3)
                                for (const char *h = p; h < line_end && *h != ' '; h++) {
                                        unsigned digit = *h >= '0' && *h <= '9' ? (unsigned)(*h - '0')
                                                         : *h >= 'a' && *h <= 'f' ? (unsigned)(*h - 'a' + 10) : 16;
                                        if (digit > 15 || flags > 0xFFFFFFFFul)
                                                break;
                                        flags = flags * 16 + digit;
                                }
                        while (p < line_end && *p != ' ')
                                p++;
                }
                while (p < line_end && *p == ' ')
                        p++;
                path = p;
                if ((flags & UNIX_FLAG_LISTENING) && parse_diagnostic_name(path, (size_t)(line_end - path), &name)) {
                        if (found < max)
                                out[found] = name;
                        found++;
                }
                line = line_end + 1;
        }
        *ret_n = found;
        return 0;
}
