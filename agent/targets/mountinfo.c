/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The mount table parser and the questions asked of a table (mountinfo.h): pure; target-view.c asks
 * them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "agent/targets/mountinfo.h"

/* Fields 1 to 6 come before the optional fields, then "-", type, source, options. */
#define MOUNTINFO_FIXED_FIELDS 6

typedef struct Span {
        const char *p;
        size_t n;
} Span;

static bool span_equals(Span s, const char *word) {
        return s.n == strlen(word) && memcmp(s.p, word, s.n) == 0;
}

/* Decimal, no sign, at most INT32_MAX: mount ids and device numbers are ints to the kernel. */
static int span_to_u64(Span s, uint64_t *ret) {
        uint64_t v = 0;

        if (s.n == 0 || s.n > 10)
                return MOUNTINFO_E_MALFORMED;
        for (size_t i = 0; i < s.n; i++) {
                if (s.p[i] < '0' || s.p[i] > '9')
                        return MOUNTINFO_E_MALFORMED;
                v = v * 10 + (uint64_t)(s.p[i] - '0');
        }
        if (v > INT32_MAX)
                return MOUNTINFO_E_MALFORMED;
        *ret = v;
        return 0;
}

static int span_to_device(Span s, unsigned *ret_major, unsigned *ret_minor) {
        const char *colon = memchr(s.p, ':', s.n);
        uint64_t major, minor;

        if (!colon || span_to_u64((Span){ s.p, (size_t)(colon - s.p) }, &major) != 0 ||
            span_to_u64((Span){ colon + 1, (size_t)(s.p + s.n - colon - 1) }, &minor) != 0)
                return MOUNTINFO_E_MALFORMED;
        *ret_major = (unsigned)major;
        *ret_minor = (unsigned)minor;
        return 0;
}

/* Undoes the kernel's \ooo escapes; a NUL, a lone backslash or a bad digit is malformed. */
static int span_unescape(Span s, char **ret) {
        _cleanup_free_ char *out = malloc(s.n + 1);
        size_t o = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < s.n; i++) {
                unsigned v = 0;

                if (s.p[i] == '\0')
                        return MOUNTINFO_E_MALFORMED; /* the kernel never writes one */
                if (s.p[i] != '\\') {
                        out[o++] = s.p[i];
                        continue;
                }
                if (s.n - i < 4)
                        return MOUNTINFO_E_MALFORMED;
                for (size_t k = 1; k <= 3; k++) {
                        if (s.p[i + k] < '0' || s.p[i + k] > '7')
                                return MOUNTINFO_E_MALFORMED;
                        v = v * 8 + (unsigned)(s.p[i + k] - '0');
                }
                if (v == 0 || v > 0xff)
                        return MOUNTINFO_E_MALFORMED;
                out[o++] = (char)v;
                i += 3;
        }
        out[o] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

/* The next space-separated field of a line; the kernel writes single spaces, and fields may be empty. */
static bool next_field(const char **p, const char *end, Span *ret) {
        const char *start = *p, *space;

        if (start > end)
                return false;
        space = memchr(start, ' ', (size_t)(end - start));
        if (!space)
                space = end;
        *ret = (Span){ start, (size_t)(space - start) };
        *p = space + 1;
        return true;
}

static void mount_entry_done(MountEntry *e) {
        free(e->mount_point);
        free(e->fs_type);
}

static int parse_line(const char *line, const char *end, MountEntry *ret) {
        _cleanup_free_ char *mount_point = NULL, *fs_type = NULL;
        Span f[MOUNTINFO_FIXED_FIELDS], sep, type, source;
        MountEntry e = {};
        const char *p = line;
        int r;

        for (size_t i = 0; i < MOUNTINFO_FIXED_FIELDS; i++)
                if (!next_field(&p, end, &f[i]) || f[i].n == 0)
                        return MOUNTINFO_E_MALFORMED;
        /* optional fields ("shared:1", "master:2", ...) until the lone "-" */
        do
                if (!next_field(&p, end, &sep) || sep.n == 0)
                        return MOUNTINFO_E_MALFORMED;
        while (!span_equals(sep, "-"));
        /* the source may be empty (a mount made with ""); the options are the rest of the line */
        if (!next_field(&p, end, &type) || type.n == 0 || !next_field(&p, end, &source) || p > end)
                return MOUNTINFO_E_MALFORMED;

        if (span_to_u64(f[0], &e.id) != 0 || span_to_u64(f[1], &e.parent_id) != 0 ||
            span_to_device(f[2], &e.major, &e.minor) != 0)
                return MOUNTINFO_E_MALFORMED;
        r = span_unescape(f[4], &mount_point);
        if (r != 0)
                return r;
        if (mount_point[0] != '/')
                return MOUNTINFO_E_MALFORMED;
        r = span_unescape(type, &fs_type);
        if (r != 0)
                return r;

        e.mount_point = TAKE_PTR(mount_point);
        e.fs_type = TAKE_PTR(fs_type);
        *ret = e;
        return 0;
}

void mount_table_done(MountTable *t) {
        for (size_t i = 0; i < t->n; i++)
                mount_entry_done(&t->entries[i]);
        free(t->entries);
        *t = (MountTable)MOUNT_TABLE_NULL;
}

int mountinfo_parse(const char *buf, size_t n, MountTable *ret) {
        _cleanup_(mount_table_done) MountTable t = MOUNT_TABLE_NULL;
        size_t allocated = 0;
        const char *end = buf + n;

        for (const char *line = buf; line < end;) {
                const char *line_end = memchr(line, '\n', (size_t)(end - line));
                int r;

                if (!line_end)
                        return MOUNTINFO_E_MALFORMED;
                if (t.n == MOUNTINFO_ENTRIES_MAX)
                        return MOUNTINFO_E_LIMIT;
                if (t.n == allocated) {
                        size_t grown = allocated ? allocated * 2 : 64;
                        MountEntry *e = realloc(t.entries, grown * sizeof(*e));
                        if (!e)
                                return -ENOMEM;
                        t.entries = e;
                        allocated = grown;
                }
                r = parse_line(line, line_end, &t.entries[t.n]);
                if (r != 0)
                        return r;
                t.n++;
                line = line_end + 1;
        }

        *ret = t;
        t = (MountTable)MOUNT_TABLE_NULL;
        return 0;
}

const MountEntry *mount_table_find(const MountTable *t, uint64_t id) {
        for (size_t i = 0; i < t->n; i++)
                if (t->entries[i].id == id)
                        return &t->entries[i];
        return NULL;
}

/* Length of @mount_point when it is @path or a parent directory of it, else 0 ("/" counts as 1). */
static size_t covers(const char *mount_point, const char *path) {
        size_t len = strlen(mount_point);

        if (strcmp(mount_point, "/") == 0)
                return 1;
        if (strncmp(path, mount_point, len) != 0 || (path[len] != '/' && path[len] != '\0'))
                return 0;
        return len;
}

const MountEntry *mount_table_covering(const MountTable *t, const char *path) {
        const MountEntry *best = NULL;
        size_t best_len = 0;

        for (size_t i = 0; i < t->n; i++) {
                size_t len = covers(t->entries[i].mount_point, path);
                if (len > 0 && len >= best_len) {
                        best = &t->entries[i];
                        best_len = len;
                }
        }
        return best;
}

bool mount_fs_type_is_unsafe(const char *fs_type) {
        static const char *const unsafe[] = {
                /* served by a process */
                "fuse", "fuseblk", "autofs",
                /* served over a network */
                "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "9p", "ceph", "glusterfs", "lustre", "gfs2",
                "ocfs2", "afs", "coda", "orangefs", "beegfs", "gpfs",
        };

        if (strncmp(fs_type, "fuse.", 5) == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(unsafe); i++)
                if (strcmp(fs_type, unsafe[i]) == 0)
                        return true;
        return false;
}
