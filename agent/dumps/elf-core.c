/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The check that a dump is a whole ELF core (elf-core.h): pure, over bytes the caller reads; the
 * dump writer calls it.
 */
#include <elf.h>
#include <stdbool.h>
#include <string.h>

#include "elf-core.h"

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
