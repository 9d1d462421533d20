/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A dump arriving through the staging FIFO, moved with splice() into an
 * unnamed file of dump_dir (O_TMPFILE, root's, 0600): the bytes never pass
 * through user memory, the file is never reachable by anyone while it is
 * written, and dump_dir's guards hold while it grows. The writing runs in a
 * worker (jobs.h); the check that the result is a whole core runs in the
 * agent afterwards.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "agent/dumps/dump-publish.h"
#include "policy/policy.h"

enum {
        _DUMP_WRITER_E_SUCCESS,
        DUMP_WRITER_E_ENDED,      /* every writer closed the FIFO (not an error: the runtime's answer decides) */
        DUMP_WRITER_E_NO_SPACE,   /* max_use or keep_free would break, or the disk is full */
        DUMP_WRITER_E_NOT_CORE,   /* what arrived is not a whole ELF core */
        DUMP_WRITER_E_EMPTY,      /* nothing arrived */
};

/* How often, in bytes written, dump_dir's guards are looked at again while a dump grows. */
#define DUMP_WRITER_CHECK_EVERY (64ULL << 20)
#define DUMP_SLOTS_MAX 64

/*
 * The bytes each dump in progress has written so far, one slot per dump, in
 * memory the agent and its workers share (MAP_SHARED, made before the first
 * worker is forked): unnamed files are not in dump_dir's listing, and
 * max_use must count them. Only the agent claims and frees slots; only the
 * worker writing a dump updates its slot.
 */
typedef struct DumpSlots {
        bool used[DUMP_SLOTS_MAX];
        uint64_t bytes[DUMP_SLOTS_MAX];
} DumpSlots;

typedef struct DumpLimits {
        PolicySize max_use;
        PolicySize keep_free;
} DumpLimits;

DumpSlots *dump_slots_new(void);
void dump_slots_free(DumpSlots *s);
/* Return: 0 with a slot, or -EBUSY when all are taken. */
int dump_slots_claim(DumpSlots *s, unsigned *ret_slot);
void dump_slots_release(DumpSlots *s, unsigned slot);
uint64_t dump_slots_total(const DumpSlots *s);

/*
 * Room asked for when the guards would break (a user's dump, whose room retention may make):
 * @ask gets the bytes written so far and the room wanted, and returns 0 when room was made (the
 * guards are looked at again) or DUMP_WRITER_E_NO_SPACE.
 */
typedef struct DumpRoom {
        int (*ask)(void *userdata, uint64_t bytes, uint64_t room);
        void *userdata;
} DumpRoom;

/*
 * How much room a dump asks for when the guards stop it: 4 MiB the first time, twice as much each
 * time after, up to as much as it writes between two checks. So a small dump has no more removed
 * for it than it needs, give or take 4 MiB, and a large one asks a few times, not once every 4 MiB.
 */
#define DUMP_WRITER_ROOM_FIRST (4ULL << 20)
#define DUMP_WRITER_ROOM_MOST DUMP_WRITER_CHECK_EVERY
/* How often one check asks for room before it gives up: each pass removes something or says no. */
#define DUMP_WRITER_ROOM_TRIES 8

typedef struct DumpWriter {
        int dir_fd, file_fd, source_fd; /* not owned */
        DumpLimits limits;
        DumpRoom room;          /* .ask NULL: none is asked for */
        uint64_t room_step;     /* the room it asks for next */
        DumpSlots *slots;
        unsigned slot;
        uint64_t bytes;
        uint64_t next_check;
        bool ended;
        char why[DUMP_SPACE_WHY_MAX]; /* what a refusal's why points to: the limit and the numbers */
} DumpWriter;

/**
 * dump_writer_init() - start writing into @file_fd, an unnamed file of @dir_fd, from @source_fd
 *
 * @room: NULL, or whom to ask for room whenever the guards would break (DumpRoom).
 *
 * Return: 0, DUMP_WRITER_E_NO_SPACE with *@ret_why (the guards are broken
 * already), or a negative errno.
 */
int dump_writer_init(DumpWriter *w, int dir_fd, int file_fd, int source_fd, const DumpLimits *limits,
                     DumpSlots *slots, unsigned slot, const DumpRoom *room, const char **ret_why);

/**
 * dump_writer_pump() - move what the FIFO holds now, at most @budget bytes
 *
 * Return: 0 (the FIFO is empty for now, or @budget was moved),
 * DUMP_WRITER_E_ENDED, DUMP_WRITER_E_NO_SPACE with *@ret_why, or a negative errno.
 */
int dump_writer_pump(DumpWriter *w, uint64_t budget, const char **ret_why);

/**
 * dump_writer_drain() - after the runtime said the dump is written
 *
 * Everything createdump wrote is in the FIFO by then (the runtime answers
 * once createdump has exited): moves what is left, at most one pipe's worth
 * (more would be someone else's writing).
 *
 * Return: 0, DUMP_WRITER_E_NO_SPACE with *@ret_why, or a negative errno.
 */
int dump_writer_drain(DumpWriter *w, const char **ret_why);

/**
 * dump_writer_write() - write @size bytes the worker made itself (a [[collect]] table's .gcdump)
 *
 * As dump_writer_pump() moves a FIFO's, counted in the slot and under dump_dir's guards; the
 * writer's source is not used. Return: 0, DUMP_WRITER_E_NO_SPACE with *@ret_why, or a negative errno.
 */
int dump_writer_write(DumpWriter *w, const void *data, size_t size, const char **ret_why);

/**
 * dump_file_check_core() - is the @size bytes file @fd a whole ELF core?
 *
 * Return: 0, DUMP_WRITER_E_EMPTY or DUMP_WRITER_E_NOT_CORE with *@ret_why, or a negative errno.
 */
int dump_file_check_core(int fd, uint64_t size, const char **ret_why);
