/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A core systemd-coredump stored: found for one trusted journal entry (crash-entry.h), checked to be
 * the one it stored for that crash, and decompressed into an unnamed file of dump_dir. In a worker.
 *
 * The decompression reads bytes the crashed process's owner chose (its memory, compressed): it
 * runs in a child of the worker that can do nothing but read the core's fd, write a pipe and manage
 * its memory (crash_core_confine()), and every byte that comes out is counted against a limit and
 * against dump_dir's guards (dump-writer.h) by the worker, which moves it from the pipe.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "agent/crashes/crash-entry.h"
#include "agent/dumps/dump-writer.h"

enum {
        _CRASH_CORE_E_SUCCESS,
        CRASH_CORE_E_GONE,      /* no core stored for it any more (removed, or never kept) */
        CRASH_CORE_E_UNTRUSTED, /* what is there is not the core systemd-coredump stored for this crash */
        CRASH_CORE_E_CORRUPT,   /* it does not decompress: corrupt, or cut short */
        CRASH_CORE_E_TOO_LARGE, /* it decompresses to more than the limit */
        CRASH_CORE_E_NO_SPACE,  /* dump_dir's guards would break */
        CRASH_CORE_E_NOT_CORE,  /* it decompressed, but is no whole ELF core */
};

/* The most a core may decompress to when the agent does not say: systemd-coredump's own most (32 GiB) */
#define CRASH_CORE_SIZE_MAX_DEFAULT (32ULL << 30)

/**
 * crash_core_open() - the stored core of @e, opened for reading
 *
 * CRASH_STORE_DIR is reached from "/" without following a symlink or crossing into another file
 * system's mount it does not live on; it must be root's and writable by nobody else. The core in it
 * by @e->file_name: opened without following a symlink, a regular file with one link, root's and
 * writable by nobody else, and, where systemd-coredump labelled it (user.coredump.pid, .uid,
 * .timestamp, set as root), labelled for this very crash.
 *
 * Return: 0 with the fd and its stat, CRASH_CORE_E_GONE, CRASH_CORE_E_UNTRUSTED (with *@ret_why), or
 * a negative errno.
 */
int crash_core_open(const CrashEntry *e, int *ret_fd, struct stat *ret_st, const char **ret_why);

/* Progress of a copy: called with the bytes written so far, every so often. */
typedef void (*CrashCoreProgress)(uint64_t bytes, void *userdata);

/**
 * crash_core_copy() - decompress the core in @core_fd (as @compression says) into @w's file
 *
 * The decompressor runs in a confined child (crash_core_confine()) writing into a pipe; this
 * process moves what comes into @w (dump_writer_pump(): counted, dump_dir's guards kept) and
 * refuses more than @max_bytes. Then the file must be a whole ELF core (dump_file_check_core()).
 *
 * Return: 0 (@w->bytes written), CRASH_CORE_E_CORRUPT, _TOO_LARGE, _NO_SPACE, _NOT_CORE (each with
 * *@ret_why), or a negative errno. On failure the file holds a part, which the caller drops.
 */
int crash_core_copy(int core_fd, CrashCompression compression, DumpWriter *w, uint64_t max_bytes,
                    CrashCoreProgress progress, void *userdata, const char **ret_why);

/**
 * crash_core_dotnet() - did the process whose core @core_fd holds map libcoreclr.so?
 *
 * The core's head is decompressed by the confined child (at most ELF_CORE_HEADERS_MAX bytes), and its
 * NT_FILE note read (elf_core_maps_file(), bounded and fuzzed). Return: 0 with *@ret
 * (CRASH_DOTNET_UNKNOWN when the head does not tell), or a negative errno.
 */
int crash_core_dotnet(int core_fd, CrashCompression compression, CrashDotnet *ret);

/**
 * crash_core_decompress() - what the confined child runs: @in_fd, compressed as @compression, into @out_fd
 *
 * Stops with -EFBIG once more than @max_bytes came out. Return: 0 when the stream ended whole,
 * CRASH_CORE_E_CORRUPT when it is corrupt or ends early, CRASH_CORE_E_TOO_LARGE, or a negative errno
 * (the pipe's reader went away: -EPIPE).
 */
int crash_core_decompress(int in_fd, CrashCompression compression, int out_fd, uint64_t max_bytes);
