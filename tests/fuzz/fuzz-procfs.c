/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the /proc/PID parsers (agent/targets/procfs.h). Every byte of these files that
 * matters is chosen by the target process: its name (comm, in stat and status),
 * its environment and its command line.
 *
 * Input: one selector byte, then the file's contents. Seeds start with an
 * ASCII digit so that they stay readable:
 *   selector % 4 == 0 ('0'): /proc/PID/stat      -> procfs_parse_stat_start_time()
 *   selector % 4 == 1 ('1'): /proc/PID/status    -> procfs_parse_status(), and the same bytes as a
 *                            pidfd's fdinfo -> procfs_parse_pidfd_fdinfo()
 *   selector % 4 == 2 ('2'): /proc/PID/environ   -> procfs_environ_get(), procfs_environ_startup_suspend()
 *   selector % 4 == 3 ('3'): /proc/PID/cmdline   -> procfs_cmdline_name()
 *   selector % 8 == 4 ('4'): /proc/PID/cgroup    -> procfs_cgroup_unit(), procfs_cgroup_container()
 *                            (takes precedence)
 *   selector % 8 == 5 ('5'): /proc/PID/net/unix  -> procfs_unix_diagnostic_listeners() (so does it)
 *
 * The parsers get a buffer of exactly the file's size, not NUL-terminated, as
 * read_file_at() would hand them, so sanitizers see any read past the end.
 * environ and cmdline results are compared with simple reference
 * implementations over a NUL-terminated copy.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "agent/targets/procfs.h"
#include "common/text.h"

/* A copy with two NULs appended, so that string functions stop inside it. */
static char *terminated_copy(const char *buf, size_t n) {
        char *c = malloc(n + 2);

        fuzz_assert(c);
        memcpy(c, buf, n);
        c[n] = c[n + 1] = '\0';
        return c;
}

static void fuzz_stat(const char *buf, size_t n) {
        const char *close_paren = NULL, *p;
        char expected[32];
        uint64_t start_time;
        unsigned spaces = 0;
        int r;

        r = procfs_parse_stat_start_time(buf, n, &start_time);
        if (r != 0) {
                fuzz_assert(r == PROCFS_E_MALFORMED);
                return;
        }

        /* the value is the 22nd field: after the last ')', fields are separated by
         * single spaces and fields 3..21 hold no space, so it follows the 20th space */
        for (size_t i = 0; i < n; i++)
                if (buf[i] == ')')
                        close_paren = buf + i;
        fuzz_assert(close_paren);
        for (p = close_paren + 1; p < buf + n && spaces < 20; p++)
                if (*p == ' ')
                        spaces++;
        fuzz_assert(spaces == 20);
        while (p < buf + n - 1 && *p == '0' && p[1] >= '0' && p[1] <= '9')
                p++; /* leading zeros */
        snprintf(expected, sizeof(expected), "%" PRIu64, start_time);
        fuzz_assert((size_t)(buf + n - p) >= strlen(expected));
        fuzz_assert(memcmp(p, expected, strlen(expected)) == 0);
        p += strlen(expected);
        fuzz_assert(p == buf + n || *p == ' ' || *p == '\n');
}

static void fuzz_status(const char *buf, size_t n) {
        ProcStatus st;
        int r;

        r = procfs_parse_pidfd_fdinfo(buf, n, &st);
        if (r == 0) {
                fuzz_assert(st.n_nspid >= 1 && st.n_nspid <= PROCFS_NSPID_MAX);
                for (size_t i = 0; i < st.n_nspid; i++)
                        fuzz_assert(st.nspid[i] > 0);
        } else
                fuzz_assert(r == PROCFS_E_MALFORMED);

        r = procfs_parse_status(buf, n, &st);
        if (r != 0) {
                fuzz_assert(r == PROCFS_E_MALFORMED);
                return;
        }
        fuzz_assert(st.n_nspid >= 1 && st.n_nspid <= PROCFS_NSPID_MAX);
        for (size_t i = 0; i < st.n_nspid; i++)
                fuzz_assert(st.nspid[i] > 0);
        /* a reading is the same as itself exactly when all its groups were kept */
        fuzz_assert(procfs_same_credentials(&st, &st) == (st.groups_known && st.n_groups <= PROCFS_GROUPS_MAX));
        fuzz_assert(st.groups_known || st.n_groups == 0);
}

static void fuzz_environ_key(const char *buf, size_t n, const char *key) {
        size_t key_len = strlen(key);
        const char *expected = NULL;
        char *value = NULL, *copy;
        int r;

        copy = terminated_copy(buf, n);
        for (const char *e = copy; e < copy + n; e += strlen(e) + 1)
                if (strncmp(e, key, key_len) == 0 && e[key_len] == '=') {
                        expected = e + key_len + 1;
                        break;
                }

        r = procfs_environ_get(buf, n, key, &value);
        fuzz_assert(r == 0 || r == PROCFS_E_NOT_FOUND);
        if (r == 0) {
                fuzz_assert(value && expected);
                fuzz_assert(strcmp(value, expected) == 0);
        } else
                fuzz_assert(!expected);

        free(value);
        free(copy);
}

static void fuzz_environ(const char *buf, size_t n) {
        int r;

        fuzz_environ_key(buf, n, "TMPDIR"); /* what the agent asks for */
        fuzz_environ_key(buf, n, "TMP");    /* a prefix of another key must not match it */
        /* the runtime's startup settings, read from the same block: only the two bits, or -ENOMEM */
        r = procfs_environ_startup_suspend(buf, n);
        fuzz_assert(r == -ENOMEM || (r >= 0 && (r & ~(PROCFS_SUSPEND_DEFAULT_PORT | PROCFS_SUSPEND_PORTS)) == 0));
}

static const char *basename_of(const char *s) {
        const char *slash = strrchr(s, '/');
        return slash ? slash + 1 : s;
}

static void fuzz_cmdline(const char *buf, size_t n) {
        char *name = NULL, *copy, *expected = NULL;
        const char *arg0, *arg1 = NULL, *b;
        int r;

        /* reference: argv[0]'s basename, or for "dotnet x/App.dll ..." "App" */
        copy = terminated_copy(buf, n);
        arg0 = copy;
        if (strlen(arg0) + 1 < n)
                arg1 = arg0 + strlen(arg0) + 1;
        b = basename_of(arg0);
        if (strcmp(b, "dotnet") == 0 && arg1 && strlen(arg1) > 4 &&
            strcmp(arg1 + strlen(arg1) - 4, ".dll") == 0) {
                b = basename_of(arg1);
                expected = strndup(b, strlen(b) - 4);
        } else
                expected = strdup(b);
        fuzz_assert(expected);

        r = procfs_cmdline_name(buf, n, &name);
        fuzz_assert(r == 0 || r == PROCFS_E_NOT_FOUND);
        if (r == 0) {
                fuzz_assert(name && *name);
                fuzz_assert(!strchr(name, '/'));
                fuzz_assert(strcmp(name, expected) == 0);
        } else
                fuzz_assert(*expected == '\0');

        free(name);
        free(expected);
        free(copy);
}

/* A unit found is a whole path component of the input, and looks like a unit. */
static void fuzz_cgroup(const char *buf, size_t n) {
        char *unit = NULL;
        ProcContainer c;
        int r = procfs_cgroup_unit(buf, n, &unit);

        fuzz_assert(r == 0 || r == PROCFS_E_NOT_FOUND || r == PROCFS_E_MALFORMED || r == -ENOMEM);
        /* read as strictly as the container parser: malformed for one is malformed for the other */
        if (r != -ENOMEM)
                fuzz_assert((r == PROCFS_E_MALFORMED) == (procfs_cgroup_container(buf, n, &c) == PROCFS_E_MALFORMED));
        if (r != 0) {
                fuzz_assert(unit == NULL);
                return;
        }
        fuzz_assert(unit && *unit && !strchr(unit, '/') && !strchr(unit, '\n'));
        fuzz_assert(memmem(buf, n, unit, strlen(unit)) != NULL);
        fuzz_assert(strrchr(unit, '.') != NULL);
        free(unit);
}

static bool all_lower_hex(const char *s, size_t len) {
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* A container id is 64 lowercase hex, a pod uid a canonical UUID, the path one of the input's, all terminated. */
static void fuzz_cgroup_container(const char *buf, size_t n) {
        ProcContainer c;
        char underscored[PROC_POD_UID_LEN + 1];
        size_t len;
        int r;

        memset(&c, 'x', sizeof(c));
        r = procfs_cgroup_container(buf, n, &c);
        fuzz_assert(r == 0 || r == PROCFS_E_MALFORMED);
        if (r != 0)
                return;
        fuzz_assert(n > 0 && !memchr(buf, '\0', n)); /* a NUL is never read as the end of a line */

        fuzz_assert(memchr(c.id, '\0', sizeof(c.id)));
        len = strlen(c.id);
        fuzz_assert(len == 0 || (len == PROC_CONTAINER_ID_LEN && all_lower_hex(c.id, len)));
        fuzz_assert(len == 0 || memmem(buf, n, c.id, len));

        fuzz_assert(memchr(c.pod_uid, '\0', sizeof(c.pod_uid)));
        len = strlen(c.pod_uid);
        fuzz_assert(len == 0 || len == PROC_POD_UID_LEN);
        for (size_t i = 0; i < len; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                fuzz_assert(dash ? c.pod_uid[i] == '-' : all_lower_hex(c.pod_uid + i, 1));
                underscored[i] = dash ? '_' : c.pod_uid[i];
        }
        underscored[len] = '\0';
        fuzz_assert(len == 0 || memmem(buf, n, c.pod_uid, len) || memmem(buf, n, underscored, len));

        fuzz_assert(memchr(c.cgroup, '\0', sizeof(c.cgroup)));
        len = strlen(c.cgroup);
        fuzz_assert(len <= PROC_CGROUP_PATH_MAX);
        fuzz_assert(len == 0 || (c.cgroup[0] == '/' && !strchr(c.cgroup, '\n')));
        fuzz_assert(len == 0 || memmem(buf, n, c.cgroup, len));
        /* a container or pod is read from the path that is kept, when it is kept */
        fuzz_assert(len == 0 || !c.id[0] || strstr(c.cgroup, c.id));

        /* the hierarchy: a plain directory name under /sys/fs/cgroup, or none, never both kinds */
        fuzz_assert(memchr(c.hierarchy, '\0', sizeof(c.hierarchy)));
        len = strlen(c.hierarchy);
        fuzz_assert(!c.unified || len == 0);
        for (size_t i = 0; i < len; i++)
                fuzz_assert(strchr("abcdefghijklmnopqrstuvwxyz0123456789_,", c.hierarchy[i]));
}

/* Every name found is in the input, as dotnet-diagnostic-PID-KEY-socket; the count does not depend on room. */
static void fuzz_unix(const char *buf, size_t n) {
        ProcDiagnosticName names[16];
        size_t found = 0, found_small = 0;
        int r = procfs_unix_diagnostic_listeners(buf, n, names, 16, &found);

        fuzz_assert(r == 0 || r == PROCFS_E_MALFORMED);
        if (r != 0)
                return;
        fuzz_assert(procfs_unix_diagnostic_listeners(buf, n, names, 1, &found_small) == 0 && found_small == found);
        (void)procfs_unix_diagnostic_listeners(buf, n, names, 16, &found);
        for (size_t i = 0; i < found && i < 16; i++)
                fuzz_assert(names[i].pid > 0);
        fuzz_assert(found == 0 || memmem(buf, n, "dotnet-diagnostic-", 18) != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *buf;
        size_t n;

        if (size < 1)
                return 0;
        buf = (const char *)data + 1;
        n = size - 1;

        if (data[0] % 8 == 4) {
                fuzz_cgroup(buf, n);
                fuzz_cgroup_container(buf, n);
                return 0;
        }
        if (data[0] % 8 == 5) {
                fuzz_unix(buf, n);
                return 0;
        }
        switch (data[0] % 4) {
        case 0:
                fuzz_stat(buf, n);
                break;
        case 1:
                fuzz_status(buf, n);
                break;
        case 2:
                fuzz_environ(buf, n);
                break;
        case 3:
                fuzz_cmdline(buf, n);
                break;
        }
        return 0;
}
