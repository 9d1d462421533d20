/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Corpus replay driver: runs LLVMFuzzerTestOneInput() once per input, without
 * libFuzzer, so every committed corpus file is a regression test under any
 * compiler. Arguments are directories (their regular files are run in byte
 * order of their names; names starting with '.' are skipped) or single files.
 * Output is TAP. A violated invariant aborts the process, which is the failure.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

static unsigned n_run;

/* Reads the whole file into a buffer of exactly its size, so that a sanitizer
 * catches any read past the end of the input. */
static int read_input(int dir_fd, const char *name, uint8_t **ret, size_t *ret_size) {
        struct stat st;
        uint8_t *buf = NULL;
        size_t done = 0;
        int fd;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                close(fd);
                return -EINVAL;
        }
        /* never hand a NULL pointer to the target, not even for an empty input */
        buf = malloc(st.st_size > 0 ? (size_t)st.st_size : 1);
        if (!buf) {
                close(fd);
                return -ENOMEM;
        }
        while (done < (size_t)st.st_size) {
                ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int r = n < 0 ? -errno : -EIO;
                        free(buf);
                        close(fd);
                        return r;
                }
                done += (size_t)n;
        }
        close(fd);
        *ret = buf;
        *ret_size = done;
        return 0;
}

static int run_one(int dir_fd, const char *name, const char *label) {
        uint8_t *buf = NULL;
        size_t size = 0;
        int r;

        r = read_input(dir_fd, name, &buf, &size);
        if (r < 0) {
                printf("Bail out! %s: %s\n", label, strerror(-r));
                return r;
        }
        /* announce the input first: if it crashes, the log names it */
        printf("# %s (%zu bytes)\n", label, size);
        fflush(stdout);
        (void)LLVMFuzzerTestOneInput(buf, size);
        free(buf);
        printf("ok %u - %s\n", ++n_run, label);
        fflush(stdout);
        return 0;
}

static int compare_names(const struct dirent **a, const struct dirent **b) {
        return strcmp((*a)->d_name, (*b)->d_name);
}

static int skip_hidden(const struct dirent *de) {
        return de->d_name[0] != '.';
}

static int run_directory(const char *path) {
        struct dirent **entries;
        int dir_fd, n, r = 0;

        dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0) {
                printf("Bail out! %s: %s\n", path, strerror(errno));
                return -errno;
        }
        n = scandir(path, &entries, skip_hidden, compare_names);
        if (n < 0) {
                printf("Bail out! %s: %s\n", path, strerror(errno));
                close(dir_fd);
                return -errno;
        }
        for (int i = 0; i < n; i++) {
                struct stat st;

                if (r == 0 && fstatat(dir_fd, entries[i]->d_name, &st, 0) == 0 && S_ISREG(st.st_mode))
                        r = run_one(dir_fd, entries[i]->d_name, entries[i]->d_name);
                free(entries[i]);
        }
        free(entries);
        close(dir_fd);
        return r;
}

int main(int argc, char *argv[]) {
        if (argc < 2) {
                fprintf(stderr, "usage: %s CORPUS-DIRECTORY|FILE...\n", argv[0]);
                return EXIT_FAILURE;
        }

        for (int i = 1; i < argc; i++) {
                struct stat st;

                if (stat(argv[i], &st) < 0) {
                        printf("Bail out! %s: %s\n", argv[i], strerror(errno));
                        return EXIT_FAILURE;
                }
                if (S_ISDIR(st.st_mode)) {
                        if (run_directory(argv[i]) < 0)
                                return EXIT_FAILURE;
                } else if (run_one(AT_FDCWD, argv[i], argv[i]) < 0)
                        return EXIT_FAILURE;
        }

        if (n_run == 0) {
                printf("Bail out! no inputs in");
                for (int i = 1; i < argc; i++)
                        printf(" %s", argv[i]);
                printf("\n");
                return EXIT_FAILURE;
        }
        printf("1..%u\n", n_run);
        return EXIT_SUCCESS;
}
