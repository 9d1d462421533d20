/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A dump arriving through the staging FIFO, moved with splice() into an
 * unnamed file of dump_dir (O_TMPFILE, root's, 0600): the bytes never pass
 * through the agent's memory, the file is never reachable by anyone while it
 * is written, and dump_dir's guards hold while it grows.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policy.h"

enum {
        _DUMP_WRITER_E_SUCCESS,
        DUMP_WRITER_E_ENDED,      /* every writer closed the FIFO (not an error: the runtime's answer decides) */
        DUMP_WRITER_E_NO_SPACE,   /* max_use or keep_free would break, or the disk is full */
        DUMP_WRITER_E_NOT_CORE,   /* what arrived is not a whole ELF core */
        DUMP_WRITER_E_EMPTY,      /* nothing arrived */
};

/* How often, in bytes written, dump_dir's guards are looked at again while a dump grows. */
#define DUMP_WRITER_CHECK_EVERY (64ULL << 20)

typedef struct DumpWriter {
        int dir_fd;             /* dump_dir; not owned */
        int file_fd;            /* the unnamed file */
        int source_fd;          /* the FIFO's read end, non-blocking */
        const PolicyAgentSettings *limits;
        uint64_t *in_flight;    /* bytes written by all dumps being taken now, this one included */
        uint64_t bytes;
        uint64_t next_check;
        bool ended;
} DumpWriter;

/**
 * dump_writer_new() - an unnamed file in @dir_fd, fed from @source_fd
 * @source_fd: taken over, also on failure
 * @limits, @in_flight: must outlive the writer
 *
 * Return: 0, DUMP_WRITER_E_NO_SPACE with *@ret_why, or a negative errno.
 */
int dump_writer_new(int dir_fd, int source_fd, const PolicyAgentSettings *limits, uint64_t *in_flight,
                    DumpWriter **ret, const char **ret_why);

/**
 * dump_writer_pump() - move what the FIFO holds now, at most @budget bytes
 *
 * Return: 0 (the FIFO is empty for now, or @budget was moved),
 * DUMP_WRITER_E_ENDED, DUMP_WRITER_E_NO_SPACE with *@ret_why, or a negative errno.
 */
int dump_writer_pump(DumpWriter *w, uint64_t budget, const char **ret_why);

/**
 * dump_writer_finish() - after the runtime said the dump is written
 *
 * Everything createdump wrote is in the FIFO by then (the runtime answers
 * once createdump has exited): moves what is left, at most one pipe's worth
 * (more would be someone else's writing), then checks that the file is a
 * whole ELF core.
 *
 * Return: 0 with the size, DUMP_WRITER_E_EMPTY, DUMP_WRITER_E_NOT_CORE,
 * DUMP_WRITER_E_NO_SPACE (each with *@ret_why), or a negative errno.
 */
int dump_writer_finish(DumpWriter *w, uint64_t *ret_size, const char **ret_why);

/* Closes the FIFO: a createdump still writing gets EPIPE, and stops. */
void dump_writer_close_source(DumpWriter *w);

/* Drops the file unless it was linked; gives its bytes back to *in_flight. */
DumpWriter *dump_writer_free(DumpWriter *w);
