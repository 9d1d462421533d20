/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "out-file.h"

int out_file_open(OutFile *f, const char *path) {
        _cleanup_free_ char *dir_copy = strdup(path), *base_copy = strdup(path);
        const char *dir;
        struct stat st;
        int fd;

        if (!dir_copy || !base_copy)
                return -ENOMEM;
        if (lstat(path, &st) == 0)
                return -EEXIST;
        if (errno != ENOENT)
                return -errno;
        dir = dirname(dir_copy);
        fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0) {
                f->fd = fd;
                return 0;
        }
        if (errno != EOPNOTSUPP && errno != EISDIR)
                return -errno;
        if (asprintf(&f->temp_path, "%s/.%s.XXXXXX", dir, basename(base_copy)) < 0) {
                f->temp_path = NULL;
                return -ENOMEM;
        }
        fd = mkostemp(f->temp_path, O_CLOEXEC);
        if (fd < 0) {
                fd = -errno;
                free(f->temp_path);
                f->temp_path = NULL;
                return fd;
        }
        f->fd = fd;
        return 0;
}

int out_file_commit(OutFile *f, const char *path) {
        char proc_path[64];

        if (fsync(f->fd) < 0)
                return -errno;
        if (f->temp_path)
                return link(f->temp_path, path) < 0 ? -errno : 0;
        snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", f->fd);
        return linkat(AT_FDCWD, proc_path, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

void out_file_done(OutFile *f) {
        f->fd = safe_close(f->fd);
        if (f->temp_path)
                (void)unlink(f->temp_path);
        free(f->temp_path);
        f->temp_path = NULL;
}
