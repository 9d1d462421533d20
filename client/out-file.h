/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A file dsctl writes for the caller (-o): made before anything is asked of the agent, named when whole */
#pragma once

#include "cleanup.h"

typedef struct OutFile {
        int fd;
        int dir_fd;             /* the directory, pinned at open: the name is given in it, not by path again */
        char *name;             /* the last component of the path */
        char *temp_name;        /* a hidden name in dir_fd, where the file system has no O_TMPFILE */
} OutFile;

#define OUT_FILE_NULL { .fd = -EBADF, .dir_fd = -EBADF }

/**
 * out_file_open() - an unnamed file in @path's directory, as the caller, that is to become @path
 *
 * Made before the request is sent, so that a path the caller cannot write
 * costs no dump, no trace and no rate limit: only an error, at once. A
 * dsctl that dies leaves nothing behind; file systems without O_TMPFILE get a
 * hidden named file instead, removed on every way out but a kill.
 *
 * Return: 0, -EEXIST (@path exists: dsctl does not overwrite), or a negative
 * errno (the directory is missing or not writable).
 */
int out_file_open(OutFile *f, const char *path);

/*
 * Flushes the file to disk and gives it @path's last component as its name in
 * the directory out_file_open() pinned (a directory renamed or replaced by a
 * symlink meanwhile changes nothing), never replacing a file. @path is the
 * path given to out_file_open(), or one beside it ("FILE.partial").
 * Return: 0 or a negative errno.
 */
int out_file_commit(OutFile *f, const char *path);

/* Drops the file, and its hidden name if it has one. */
void out_file_done(OutFile *f);
