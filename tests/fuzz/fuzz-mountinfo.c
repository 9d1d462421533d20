/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the mountinfo parser (agent/targets/mountinfo.h). A target's mount table is
 * its owner's to shape: in a user and mount namespace of its own a user
 * mounts what it likes, where it likes, under names it chooses (escaped by
 * the kernel, but only for space, tab, newline and backslash).
 *
 * Input: the file's contents, exactly, not NUL-terminated.
 *
 * Invariants of a successful parse:
 *   - every mount point is absolute and holds no NUL before its end;
 *   - every type is non-empty;
 *   - mount_table_find() finds each entry's id (the first with that id);
 *   - mount_table_covering() of each mount point returns an entry whose
 *     mount point is that path or a parent of it, never a mere name prefix.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "agent/targets/mountinfo.h"

static bool is_parent_or_same(const char *parent, const char *path) {
        size_t len = strlen(parent);

        if (strcmp(parent, "/") == 0)
                return true;
        return strncmp(path, parent, len) == 0 && (path[len] == '/' || path[len] == '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        MountTable t = MOUNT_TABLE_NULL;
        int r;

        r = mountinfo_parse((const char *)data, size, &t);
        if (r != 0) {
                fuzz_assert(r == MOUNTINFO_E_MALFORMED || r == MOUNTINFO_E_LIMIT || r == -ENOMEM);
                fuzz_assert(t.n == 0 && t.entries == NULL);
                return 0;
        }
        for (size_t i = 0; i < t.n; i++) {
                const MountEntry *e = &t.entries[i], *found, *cover;

                fuzz_assert(e->mount_point[0] == '/');
                fuzz_assert(e->fs_type[0] != '\0');
                found = mount_table_find(&t, e->id);
                fuzz_assert(found && found->id == e->id && found <= e);
                cover = mount_table_covering(&t, e->mount_point);
                fuzz_assert(cover && is_parent_or_same(cover->mount_point, e->mount_point));
                (void)mount_fs_type_is_unsafe(e->fs_type);
        }
        mount_table_done(&t);
        return 0;
}
