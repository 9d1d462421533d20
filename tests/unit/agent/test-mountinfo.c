/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The mountinfo parser against real, escaped and hostile tables */
#include <fcntl.h>
#include <string.h>

#include "common/cleanup.h"
#include "agent/support/fileio.h"
#include "agent/targets/mountinfo.h"
#include "tests/unit/tap.h"

static const char table[] =
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "60 27 0:50 / /tmp rw,nosuid shared:7 master:3 - tmpfs tmpfs rw,size=1024k\n"
        "61 60 0:51 / /tmp/my\\040dir rw - fuse.sshfs user@host: rw,user_id=1000\n"
        "62 60 0:52 / /tmp/share rw - nfs4 server:/export rw\n"
        "63 27 0:53 /sub /tmp rw - tmpfs  rw\n";

static void test_parse(void) {
        MountTable t = MOUNT_TABLE_NULL;

        check(mountinfo_parse(table, strlen(table), &t) == 0);
        check(t.n == 6);
        if (t.n != 6)
                return;
        check(t.entries[0].id == 27 && t.entries[0].parent_id == 1 && t.entries[0].major == 254 &&
              t.entries[0].minor == 0 && strcmp(t.entries[0].mount_point, "/") == 0 &&
              strcmp(t.entries[0].fs_type, "ext4") == 0);
        /* optional fields are skipped; the escaped space comes back as a space */
        check(strcmp(t.entries[2].fs_type, "tmpfs") == 0);
        check(strcmp(t.entries[3].mount_point, "/tmp/my dir") == 0 && strcmp(t.entries[3].fs_type, "fuse.sshfs") == 0);
        /* an empty source, as a mount made with "" shows */
        check(t.entries[5].id == 63 && strcmp(t.entries[5].fs_type, "tmpfs") == 0);
        check(mount_table_find(&t, 62) == &t.entries[4]);
        check(mount_table_find(&t, 99) == NULL);
        mount_table_done(&t);
        check(t.entries == NULL && t.n == 0);
}

static void test_covering(void) {
        MountTable t = MOUNT_TABLE_NULL;

        check(mountinfo_parse(table, strlen(table), &t) == 0);
        check(mount_table_covering(&t, "/")->id == 27);
        check(mount_table_covering(&t, "/var/tmp")->id == 27);
        /* two mounts on /tmp: the later one is on top */
        check(mount_table_covering(&t, "/tmp")->id == 63);
        check(mount_table_covering(&t, "/tmp/x/y")->id == 63);
        check(mount_table_covering(&t, "/tmp/my dir/sock")->id == 61);
        /* a prefix of a name is not a parent directory */
        check(mount_table_covering(&t, "/tmpfoo")->id == 27);
        check(mount_table_covering(&t, "/tmp/sharex")->id == 63);
        mount_table_done(&t);
}

static void test_unsafe_types(void) {
        check(mount_fs_type_is_unsafe("fuse"));
        check(mount_fs_type_is_unsafe("fuse.sshfs"));
        check(mount_fs_type_is_unsafe("fuseblk"));
        check(mount_fs_type_is_unsafe("nfs4"));
        check(mount_fs_type_is_unsafe("cifs"));
        check(mount_fs_type_is_unsafe("9p"));
        check(mount_fs_type_is_unsafe("ceph"));
        check(mount_fs_type_is_unsafe("autofs"));
        check(!mount_fs_type_is_unsafe("ext4"));
        check(!mount_fs_type_is_unsafe("tmpfs"));
        check(!mount_fs_type_is_unsafe("overlay"));
        check(!mount_fs_type_is_unsafe("fusexyz"));
}

static void test_malformed(void) {
        static const char *const bad[] = {
                "27 1 254:0 / / rw - ext4 /dev/vda rw",            /* cut off: no newline */
                "27 1 254:0 / / rw ext4 /dev/vda rw\n",            /* no separator */
                "27 1 254:0 / / rw -\n",                            /* nothing after it */
                "27 1 254:0 / / rw - ext4\n",                       /* no source, no options */
                "x 1 254:0 / / rw - ext4 /dev/vda rw\n",            /* not a number */
                "27 1 254 / / rw - ext4 /dev/vda rw\n",             /* no minor */
                "27 1 254:0 / relative rw - ext4 /dev/vda rw\n",    /* not absolute */
                "27 1 254:0 / /a\\0 rw - ext4 /dev/vda rw\n",       /* short escape */
                "27 1 254:0 / /a\\000 rw - ext4 /dev/vda rw\n",     /* NUL */
                "27 1 254:0 / /a\\9zz rw - ext4 /dev/vda rw\n",     /* not octal */
                "27  1 254:0 / / rw - ext4 /dev/vda rw\n",          /* empty field */
                "99999999999 1 254:0 / / rw - ext4 /dev/vda rw\n",  /* beyond an int */
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                MountTable t = MOUNT_TABLE_NULL;
                int r = mountinfo_parse(bad[i], strlen(bad[i]), &t);
                if (r != MOUNTINFO_E_MALFORMED)
                        printf("# case %zu: %d\n", i, r);
                check(r == MOUNTINFO_E_MALFORMED);
                check(t.n == 0);
        }
}

static void test_empty(void) {
        MountTable t = MOUNT_TABLE_NULL;

        check(mountinfo_parse("", 0, &t) == 0 && t.n == 0);
        check(mount_table_covering(&t, "/tmp") == NULL);
}

/* The table this very process lives in: every mount has a type, "/" is covered. */
static void test_self(void) {
        MountTable t = MOUNT_TABLE_NULL;
        char *buf = NULL;
        size_t n;

        check(read_file_at(AT_FDCWD, "/proc/self/mountinfo", 4 << 20, &buf, &n) == 0);
        check(mountinfo_parse(buf, n, &t) == 0);
        check(t.n > 0);
        check(mount_table_covering(&t, "/") != NULL);
        for (size_t i = 0; i < t.n; i++)
                check(t.entries[i].fs_type[0] != '\0');
        mount_table_done(&t);
        free(buf);
}

int main(void) {
        run_test(test_parse);
        run_test(test_covering);
        run_test(test_unsafe_types);
        run_test(test_malformed);
        run_test(test_empty);
        run_test(test_self);
        return tap_finish();
}
