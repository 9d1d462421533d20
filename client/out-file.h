/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A file dsctl writes for the caller (-o): made before anything is asked of the agent, named when whole */
#pragma once

#include <stddef.h>

#include "common/cleanup.h"

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

/* Writes all of @data to the file. Return: 0 or a negative errno. */
int out_file_write(OutFile *f, const void *data, size_t size);

/*
 * Flushes the file to disk and gives it @path's last component as its name in
 * the directory out_file_open() pinned (a directory renamed or replaced by a
 * symlink meanwhile changes nothing), never replacing a file. @path is the
 * path given to out_file_open(), or one beside it ("FILE.partial").
 * Return: 0 or a negative errno.
 */
int out_file_commit(OutFile *f, const char *path);

/*
 * A file replaced whole again and again (counters --format prometheus -o):
 * out_file_pin() once, then for each version out_file_open_replacement(),
 * write f->fd, out_file_replace().
 */

/* Pins @path's directory (O_PATH) and keeps its last component, without making anything. Return: 0 or a
 * negative errno (-EISDIR: @path ends in "/", "." or ".."). */
int out_file_pin(OutFile *f, const char *path);

/* A new file in the pinned directory, as f->fd, under a hidden random name made with O_EXCL | O_NOFOLLOW
 * (O_TMPFILE cannot replace a name). Return: 0 or a negative errno. */
int out_file_open_replacement(OutFile *f);

/* Flushes the file to disk and renames it over the name in the pinned directory (renameat(): a directory
 * on the path renamed or replaced by a symlink meanwhile changes nothing); the file is closed, and removed
 * on failure. Return: 0 or a negative errno. */
int out_file_replace(OutFile *f);

/* Drops the file, and its hidden name if it has one; the directory stays pinned. */
void out_file_drop(OutFile *f);

/* Drops the file, and its hidden name if it has one, and unpins the directory. */
void out_file_done(OutFile *f);
