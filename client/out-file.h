/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A file dsctl writes for the caller (-o): made before anything is asked of the agent, named when whole */
#pragma once

#include "cleanup.h"

typedef struct OutFile {
        int fd;
        char *temp_path;        /* a hidden named file, where the file system has no O_TMPFILE */
} OutFile;

#define OUT_FILE_NULL { .fd = -EBADF }

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

/* Flushes the file to disk and gives it @path, never replacing a file. Return: 0 or a negative errno. */
int out_file_commit(OutFile *f, const char *path);

/* Drops the file, and its hidden name if it has one. */
void out_file_done(OutFile *f);
