/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A file dsctl writes for the caller (-o) (out-file.h): made before the agent is asked, renamed
 * into place when whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/out-file.h"

/* A hidden name beside the file's, for file systems without O_TMPFILE. */
static int open_hidden(OutFile *f) {
        for (int attempt = 0; attempt < 16; attempt++) {
                uint64_t random;
                int fd;

                if (getrandom(&random, sizeof(random), 0) != sizeof(random))
                        return -errno;
                free(f->temp_name);
                if (asprintf(&f->temp_name, ".%s.%016llx", f->name, (unsigned long long)random) < 0) {
                        f->temp_name = NULL;
                        return -ENOMEM;
                }
                fd = openat(f->dir_fd, f->temp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd >= 0) {
                        f->fd = fd;
                        return 0;
                }
                if (errno != EEXIST)
                        break;
        }
        free(f->temp_name);
        f->temp_name = NULL;
        return -errno;
}

int out_file_pin(OutFile *f, const char *path) {
        _cleanup_free_ char *dir_copy = strdup(path), *base_copy = strdup(path);

        if (!dir_copy || !base_copy)
                return -ENOMEM;
        f->name = strdup(basename(base_copy));
        if (!f->name)
                return -ENOMEM;
        if (strcmp(f->name, "/") == 0 || strcmp(f->name, ".") == 0 || strcmp(f->name, "..") == 0)
                return -EISDIR;
        f->dir_fd = open(dirname(dir_copy), O_PATH | O_DIRECTORY | O_CLOEXEC);
        return f->dir_fd < 0 ? -errno : 0;
}

int out_file_open(OutFile *f, const char *path) {
        struct stat st;
        int fd, r;

        r = out_file_pin(f, path);
        if (r < 0)
                return r;
        if (fstatat(f->dir_fd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return -EEXIST;
        if (errno != ENOENT)
                return -errno;
        /* O_TMPFILE needs a real directory fd, not an O_PATH one: "." below the pinned directory */
        fd = openat(f->dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
        if (fd >= 0) {
                f->fd = fd;
                return 0;
        }
        if (errno != EOPNOTSUPP && errno != EISDIR)
                return -errno;
        return open_hidden(f);
}

int out_file_write(OutFile *f, const void *data, size_t size) {
        const uint8_t *p = data;

        while (size > 0) {
                ssize_t n = write(f->fd, p, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                size -= (size_t)n;
        }
        return 0;
}

int out_file_commit(OutFile *f, const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        const char *name;
        char proc_path[64];

        if (!copy)
                return -ENOMEM;
        name = basename(copy);
        if (fsync(f->fd) < 0)
                return -errno;
        if (f->temp_name)
                return linkat(f->dir_fd, f->temp_name, f->dir_fd, name, 0) < 0 ? -errno : 0;
        snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", f->fd);
        return linkat(AT_FDCWD, proc_path, f->dir_fd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

int out_file_open_replacement(OutFile *f) {
        return open_hidden(f);
}

int out_file_replace(OutFile *f) {
        if (fsync(f->fd) < 0 || renameat(f->dir_fd, f->temp_name, f->dir_fd, f->name) < 0) {
                int r = -errno;

                out_file_drop(f);
                return r;
        }
        f->fd = safe_close(f->fd);
        free(f->temp_name);
        f->temp_name = NULL;
        return 0;
}

void out_file_drop(OutFile *f) {
        f->fd = safe_close(f->fd);
        if (f->temp_name)
                (void)unlinkat(f->dir_fd, f->temp_name, 0);
        free(f->temp_name);
        f->temp_name = NULL;
}

void out_file_done(OutFile *f) {
        out_file_drop(f);
        f->dir_fd = safe_close(f->dir_fd);
        free(f->name);
        f->name = NULL;
}
