/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Moving a dump's bytes from the staging FIFO into an unnamed file of dump_dir (dump-writer.h);
 * runs in a worker, asked by dump.c and on-start.c through jobs.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "agent/dumps/dump-publish.h"
#include "agent/dumps/dump-writer.h"
#include "agent/dumps/elf-core.h"

#define SPLICE_CHUNK (1 << 20)
#define ELF_HEAD_READ 4096

DumpSlots *dump_slots_new(void) {
        void *p = mmap(NULL, sizeof(DumpSlots), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

void dump_slots_free(DumpSlots *s) {
        if (s)
                (void)munmap(s, sizeof(*s));
}

int dump_slots_claim(DumpSlots *s, unsigned *ret_slot) {
        for (unsigned i = 0; i < DUMP_SLOTS_MAX; i++)
                if (!s->used[i]) {
                        s->used[i] = true;
                        __atomic_store_n(&s->bytes[i], 0, __ATOMIC_RELAXED);
                        *ret_slot = i;
                        return 0;
                }
        return -EBUSY;
}

void dump_slots_release(DumpSlots *s, unsigned slot) {
        if (slot < DUMP_SLOTS_MAX) {
                s->used[slot] = false;
                __atomic_store_n(&s->bytes[slot], 0, __ATOMIC_RELAXED);
        }
}

uint64_t dump_slots_total(const DumpSlots *s) {
        uint64_t total = 0;

        for (unsigned i = 0; i < DUMP_SLOTS_MAX; i++)
                total += __atomic_load_n(&s->bytes[i], __ATOMIC_RELAXED);
        return total;
}

/*
 * The guards are looked at again once the dump has gone one byte past the
 * headroom they left (other dumps may have been removed meanwhile), and at
 * least every DUMP_WRITER_CHECK_EVERY bytes (other dumps grow too).
 */
static uint64_t next_check_after(uint64_t bytes, uint64_t headroom) {
        return bytes + (headroom < DUMP_WRITER_CHECK_EVERY ? headroom + 1 : DUMP_WRITER_CHECK_EVERY);
}

/* @what, and the numbers of dump_dir now, in w->why: for a file system that filled up under the guards. */
static const char *full_why(DumpWriter *w, const char *what) {
        return dump_space_full_why(w->dir_fd, &w->limits.max_use, &w->limits.keep_free, dump_slots_total(w->slots),
                                   what, w->why, sizeof(w->why));
}

static int check_space(DumpWriter *w, const char **ret_why) {
        uint64_t headroom;
        int r;

        r = dump_space_headroom(w->dir_fd, &w->limits.max_use, &w->limits.keep_free, dump_slots_total(w->slots),
                                &headroom, w->why, sizeof(w->why));
        for (unsigned try = 0; r == DUMP_PUBLISH_E_NO_SPACE && w->room.ask && try < DUMP_WRITER_ROOM_TRIES; try++) {
                if (w->room.ask(w->room.userdata, w->bytes, w->room_step) != 0)
                        break;
                w->room_step = w->room_step < DUMP_WRITER_ROOM_MOST / 2 ? 2 * w->room_step : DUMP_WRITER_ROOM_MOST;
                r = dump_space_headroom(w->dir_fd, &w->limits.max_use, &w->limits.keep_free,
                                        dump_slots_total(w->slots), &headroom, w->why, sizeof(w->why));
        }
        if (r == DUMP_PUBLISH_E_NO_SPACE)
                *ret_why = w->why;
        if (r != 0)
                return r == DUMP_PUBLISH_E_NO_SPACE ? DUMP_WRITER_E_NO_SPACE : r;
        w->next_check = next_check_after(w->bytes, headroom);
        return 0;
}

int dump_writer_init(DumpWriter *w, int dir_fd, int file_fd, int source_fd, const DumpLimits *limits,
                     DumpSlots *slots, unsigned slot, const DumpRoom *room, const char **ret_why) {
        *w = (DumpWriter){ .dir_fd = dir_fd, .file_fd = file_fd, .source_fd = source_fd, .limits = *limits,
                           .slots = slots, .slot = slot, .room = room ? *room : (DumpRoom){},
                           .room_step = DUMP_WRITER_ROOM_FIRST };
        return check_space(w, ret_why);
}

static int account(DumpWriter *w, size_t n, const char **ret_why) {
        w->bytes += n;
        __atomic_store_n(&w->slots->bytes[w->slot], w->bytes, __ATOMIC_RELAXED);
        return w->bytes < w->next_check ? 0 : check_space(w, ret_why);
}

int dump_writer_pump(DumpWriter *w, uint64_t budget, const char **ret_why) {
        uint64_t moved = 0;

        if (w->ended)
                return DUMP_WRITER_E_ENDED;
        while (moved < budget) {
                /* never past the next check: a limit is found broken by one byte, not by a chunk */
                uint64_t until_check = w->next_check - w->bytes;
                ssize_t n = splice(w->source_fd, NULL, w->file_fd, NULL,
                                   until_check < SPLICE_CHUNK ? (size_t)until_check : SPLICE_CHUNK,
                                   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                int r;

                if (n == 0) {
                        w->ended = true;
                        return DUMP_WRITER_E_ENDED;
                }
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                return 0;
                        if (errno == ENOSPC || errno == EDQUOT) {
                                *ret_why = full_why(w, "the dump does not fit: the dump directory's file system is full");
                                return DUMP_WRITER_E_NO_SPACE;
                        }
                        return -errno;
                }
                moved += (uint64_t)n;
                r = account(w, (size_t)n, ret_why);
                if (r != 0)
                        return r;
        }
        return 0;
}

int dump_writer_write(DumpWriter *w, const void *data, size_t size, const char **ret_why) {
        const uint8_t *p = data;

        while (size > 0) {
                /* never past the next check, as dump_writer_pump() */
                uint64_t until_check = w->next_check - w->bytes;
                ssize_t n = write(w->file_fd, p, until_check < size ? (size_t)until_check : size);
                int r;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == ENOSPC || errno == EDQUOT) {
                                *ret_why = full_why(w, "the file does not fit: the dump directory's file system is full");
                                return DUMP_WRITER_E_NO_SPACE;
                        }
                        return -errno;
                }
                p += n;
                size -= (size_t)n;
                r = account(w, (size_t)n, ret_why);
                if (r != 0)
                        return r;
        }
        return 0;
}

int dump_writer_drain(DumpWriter *w, const char **ret_why) {
        int capacity, r;

        if (w->ended)
                return 0;
        capacity = fcntl(w->source_fd, F_GETPIPE_SZ);
        r = dump_writer_pump(w, capacity > 0 ? (uint64_t)capacity : 65536, ret_why);
        return r == DUMP_WRITER_E_ENDED ? 0 : r;
}

int dump_file_check_core(int fd, uint64_t size, const char **ret_why) {
        _cleanup_free_ uint8_t *head = NULL;
        size_t have = size < ELF_HEAD_READ ? (size_t)size : ELF_HEAD_READ, needed = 0;
        int r;

        if (size == 0) {
                *ret_why = "the runtime reported success but no dump arrived";
                return DUMP_WRITER_E_EMPTY;
        }
        for (;;) {
                uint8_t *grown = realloc(head, have ? have : 1);
                ssize_t n;

                if (!grown)
                        return -ENOMEM;
                head = grown;
                n = pread(fd, head, have, 0);
                if (n < 0)
                        return -errno;
                if ((size_t)n != have)
                        return -EIO;
                r = elf_core_check(head, have, size, &needed);
                if (r != ELF_CORE_E_MORE)
                        break;
                have = needed;
        }
        if (r == ELF_CORE_E_NOT_CORE)
                *ret_why = "what the runtime wrote is not an ELF core file";
        else if (r == ELF_CORE_E_TRUNCATED)
                *ret_why = "the runtime's dump is cut short: its headers promise more than arrived";
        return r == 0 ? 0 : DUMP_WRITER_E_NOT_CORE;
}
