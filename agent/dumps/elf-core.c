/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The check that a dump is a whole ELF core (elf-core.h): pure, over bytes the caller reads; the
 * dump writer calls it.
 */
#include <elf.h>
#include <stdbool.h>
#include <string.h>

#include "agent/dumps/elf-core.h"

#define PN_XNUM_VALUE 0xffff

typedef struct ElfReader {
        const uint8_t *p;
        bool big_endian;
} ElfReader;

static uint64_t get(const ElfReader *r, size_t offset, size_t width) {
        uint64_t v = 0;

        for (size_t i = 0; i < width; i++) {
                size_t at = r->big_endian ? offset + i : offset + width - 1 - i;
                v = (v << 8) | r->p[at];
        }
        return v;
}

/* Where the fields are, by class. */
typedef struct ElfLayout {
        size_t ehsize, phentsize, shentsize, word;
        size_t e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize;
        size_t p_offset, p_filesz, sh_info;
} ElfLayout;

static const ElfLayout layout64 = {
        .ehsize = 64, .phentsize = 56, .shentsize = 64, .word = 8,
        .e_phoff = 32, .e_shoff = 40, .e_phentsize = 54, .e_phnum = 56, .e_shentsize = 58,
        .p_offset = 8, .p_filesz = 32, .sh_info = 44,
};

static const ElfLayout layout32 = {
        .ehsize = 52, .phentsize = 32, .shentsize = 40, .word = 4,
        .e_phoff = 28, .e_shoff = 32, .e_phentsize = 42, .e_phnum = 44, .e_shentsize = 46,
        .p_offset = 4, .p_filesz = 16, .sh_info = 28,
};

/* a + b <= limit, without overflow */
static bool fits(uint64_t a, uint64_t b, uint64_t limit) {
        return a <= limit && b <= limit - a;
}

int elf_core_check(const uint8_t *head, size_t head_size, uint64_t file_size, size_t *ret_needed) {
        const ElfLayout *l;
        ElfReader r = { .p = head };
        uint64_t phoff, phnum, table_end, needed;

        if (head_size < EI_NIDENT) {
                if (file_size < EI_NIDENT)
                        return ELF_CORE_E_NOT_CORE;
                *ret_needed = EI_NIDENT;
                return ELF_CORE_E_MORE;
        }
        if (memcmp(head, ELFMAG, SELFMAG) != 0)
                return ELF_CORE_E_NOT_CORE;
        if (head[EI_CLASS] == ELFCLASS64)
                l = &layout64;
        else if (head[EI_CLASS] == ELFCLASS32)
                l = &layout32;
        else
                return ELF_CORE_E_NOT_CORE;
        if (head[EI_DATA] != ELFDATA2LSB && head[EI_DATA] != ELFDATA2MSB)
                return ELF_CORE_E_NOT_CORE;
        r.big_endian = head[EI_DATA] == ELFDATA2MSB;
        if (head_size < l->ehsize) {
                if (file_size < l->ehsize)
                        return ELF_CORE_E_TRUNCATED;
                *ret_needed = l->ehsize;
                return ELF_CORE_E_MORE;
        }
        if (get(&r, 16, 2) != ET_CORE || get(&r, l->e_phentsize, 2) != l->phentsize)
                return ELF_CORE_E_NOT_CORE;

        phoff = get(&r, l->e_phoff, l->word);
        phnum = get(&r, l->e_phnum, 2);
        needed = l->ehsize;
        if (phnum == PN_XNUM_VALUE) {
                /* more headers than fit in 16 bits: the count is in section header 0 */
                uint64_t shoff = get(&r, l->e_shoff, l->word);
                if (get(&r, l->e_shentsize, 2) != l->shentsize || !fits(shoff, l->shentsize, ELF_CORE_HEADERS_MAX))
                        return ELF_CORE_E_NOT_CORE;
                if (!fits(shoff, l->shentsize, file_size))
                        return ELF_CORE_E_TRUNCATED;
                if (head_size < shoff + l->shentsize) {
                        *ret_needed = (size_t)(shoff + l->shentsize);
                        return ELF_CORE_E_MORE;
                }
                phnum = get(&r, (size_t)shoff + l->sh_info, 4);
                needed = shoff + l->shentsize;
        }
        if (phnum == 0 || phnum > ELF_CORE_HEADERS_MAX / l->phentsize || !fits(phoff, phnum * l->phentsize, ELF_CORE_HEADERS_MAX))
                return ELF_CORE_E_NOT_CORE;
        table_end = phoff + phnum * l->phentsize;
        if (table_end > file_size)
                return ELF_CORE_E_TRUNCATED;
        if (table_end > needed)
                needed = table_end;
        if (head_size < needed) {
                *ret_needed = (size_t)needed;
                return ELF_CORE_E_MORE;
        }

        for (uint64_t i = 0; i < phnum; i++) {
                size_t ph = (size_t)(phoff + i * l->phentsize);
                if (!fits(get(&r, ph + l->p_offset, l->word), get(&r, ph + l->p_filesz, l->word), file_size))
                        return ELF_CORE_E_TRUNCATED;
        }
        return 0;
}

#define NOTE_ALIGN 4
#define NT_FILE_TYPE 0x46494c45

static uint64_t align4(uint64_t v) {
        return (v + NOTE_ALIGN - 1) & ~(uint64_t)(NOTE_ALIGN - 1);
}

/* One NT_FILE descriptor: its names, after count ranges of three words. 1 when one ends in @suffix. */
static int file_note_names(const ElfReader *r, const ElfLayout *l, size_t desc, uint64_t descsz, const char *suffix) {
        uint64_t count, names, end = desc + descsz;
        size_t n = strlen(suffix);

        if (descsz < 2 * l->word)
                return 0;
        count = get(r, desc, l->word);
        if (count > descsz / (3 * l->word))
                return 0;
        names = desc + 2 * l->word + count * 3 * l->word;
        for (uint64_t i = 0; i < count && names < end; i++) {
                const uint8_t *p = r->p + names, *nul = memchr(p, '\0', (size_t)(end - names));
                size_t len = nul ? (size_t)(nul - p) : (size_t)(end - names);

                if (len >= n && memcmp(p + len - n, suffix, n) == 0)
                        return 1;
                names += len + 1;
        }
        return 0;
}

/* The notes of one segment, [@off, @off + @size) within the head. 1 when an NT_FILE names @suffix. */
static int segment_notes(const ElfReader *r, const ElfLayout *l, uint64_t off, uint64_t size, const char *suffix) {
        uint64_t end = off + size;

        while (end - off >= 12) {
                uint64_t namesz = get(r, (size_t)off, 4), descsz = get(r, (size_t)off + 4, 4),
                         type = get(r, (size_t)off + 8, 4), name = off + 12, desc = name + align4(namesz);

                if (desc > end || descsz > end - desc)
                        return 0; /* a note past its segment: what follows is not read */
                if (type == NT_FILE_TYPE && namesz == 5 && memcmp(r->p + name, "CORE", 5) == 0 &&
                    file_note_names(r, l, (size_t)desc, descsz, suffix))
                        return 1;
                if (align4(descsz) > end - desc)
                        return 0;
                off = desc + align4(descsz);
        }
        return 0;
}

int elf_core_maps_file(const uint8_t *head, size_t head_size, const char *suffix, size_t *ret_needed) {
        ElfReader r = { .p = head };
        const ElfLayout *l;
        uint64_t phoff, phnum, needed = 0;
        size_t checked = 0;
        int c;

        c = elf_core_check(head, head_size, head_size, &checked);
        if (c == ELF_CORE_E_MORE || c == ELF_CORE_E_TRUNCATED) {
                /* the headers are not all here yet: the check said how much they need */
                if (c == ELF_CORE_E_MORE) {
                        *ret_needed = checked;
                        return ELF_CORE_E_MORE;
                }
        } else if (c != 0)
                return ELF_CORE_E_NOT_CORE;
        if (head_size < EI_NIDENT)
                return ELF_CORE_E_NOT_CORE;
        l = head[EI_CLASS] == ELFCLASS64 ? &layout64 : &layout32;
        r.big_endian = head[EI_DATA] == ELFDATA2MSB;
        if (head_size < l->ehsize)
                return ELF_CORE_E_NOT_CORE;
        phoff = get(&r, l->e_phoff, l->word);
        phnum = get(&r, l->e_phnum, 2);
        if (phnum == PN_XNUM_VALUE || phnum == 0 || phnum > ELF_CORE_HEADERS_MAX / l->phentsize ||
            !fits(phoff, phnum * l->phentsize, head_size))
                return phnum == PN_XNUM_VALUE ? 0 : ELF_CORE_E_NOT_CORE; /* so many mappings: not looked into */
        for (uint64_t i = 0; i < phnum; i++) {
                size_t ph = (size_t)(phoff + i * l->phentsize);
                uint64_t off = get(&r, ph + l->p_offset, l->word), size = get(&r, ph + l->p_filesz, l->word);

                if (get(&r, ph, 4) != PT_NOTE || !fits(off, size, ELF_CORE_HEADERS_MAX))
                        continue;
                if (!fits(off, size, head_size)) {
                        if (off + size > needed)
                                needed = off + size;
                        continue;
                }
                if (segment_notes(&r, l, off, size, suffix))
                        return 1;
        }
        if (needed > head_size) {
                *ret_needed = (size_t)needed;
                return ELF_CORE_E_MORE;
        }
        return 0;
}
