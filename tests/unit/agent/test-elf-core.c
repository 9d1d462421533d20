/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The ELF core check against made-up cores, whole, cut and forged */
#include <elf.h>
#include <string.h>

#include "agent/dumps/elf-core.h"
#include "tests/unit/tap.h"

/* A 64-bit little-endian core with @n PT_LOAD segments of 100 bytes each, after the headers. */
static size_t make_core64(uint8_t *buf, size_t size, unsigned n, uint16_t type) {
        Elf64_Ehdr eh = {
                .e_type = type, .e_machine = EM_X86_64, .e_version = EV_CURRENT, .e_phoff = sizeof(Elf64_Ehdr),
                .e_ehsize = sizeof(Elf64_Ehdr), .e_phentsize = sizeof(Elf64_Phdr), .e_phnum = (uint16_t)n,
        };
        size_t data = sizeof(eh) + n * sizeof(Elf64_Phdr);

        memcpy(eh.e_ident, ELFMAG, SELFMAG);
        eh.e_ident[EI_CLASS] = ELFCLASS64;
        eh.e_ident[EI_DATA] = ELFDATA2LSB;
        eh.e_ident[EI_VERSION] = EV_CURRENT;
        memset(buf, 0, size);
        memcpy(buf, &eh, sizeof(eh));
        for (unsigned i = 0; i < n; i++) {
                Elf64_Phdr ph = { .p_type = PT_LOAD, .p_offset = data + 100 * i, .p_filesz = 100, .p_memsz = 100 };
                memcpy(buf + sizeof(eh) + i * sizeof(ph), &ph, sizeof(ph));
        }
        return data + 100 * n;
}

static void test_whole_core(void) {
        static uint8_t buf[8192];
        size_t size = make_core64(buf, sizeof(buf), 3, ET_CORE), needed = 0;

        check(elf_core_check(buf, size, size, &needed) == 0);
        /* bytes after the last segment are allowed (notes, padding) */
        check(elf_core_check(buf, size, size + 10, &needed) == 0);
}

static void test_cut_core(void) {
        static uint8_t buf[8192];
        size_t size = make_core64(buf, sizeof(buf), 3, ET_CORE), needed = 0;

        check(elf_core_check(buf, size - 1, size - 1, &needed) == ELF_CORE_E_TRUNCATED);
        /* even the program header table cut */
        check(elf_core_check(buf, 100, 100, &needed) == ELF_CORE_E_TRUNCATED);
        check(elf_core_check(buf, 10, 10, &needed) == ELF_CORE_E_NOT_CORE);
}

static void test_asks_for_more(void) {
        static uint8_t buf[8192];
        size_t size = make_core64(buf, sizeof(buf), 3, ET_CORE), needed = 0;

        check(elf_core_check(buf, 8, size, &needed) == ELF_CORE_E_MORE && needed == EI_NIDENT);
        check(elf_core_check(buf, 20, size, &needed) == ELF_CORE_E_MORE && needed == sizeof(Elf64_Ehdr));
        check(elf_core_check(buf, sizeof(Elf64_Ehdr), size, &needed) == ELF_CORE_E_MORE &&
              needed == sizeof(Elf64_Ehdr) + 3 * sizeof(Elf64_Phdr));
        check(elf_core_check(buf, needed, size, &needed) == 0);
}

static void test_not_a_core(void) {
        static uint8_t buf[8192];
        size_t size = make_core64(buf, sizeof(buf), 1, ET_EXEC), needed = 0;

        check(elf_core_check(buf, size, size, &needed) == ELF_CORE_E_NOT_CORE);
        size = make_core64(buf, sizeof(buf), 1, ET_CORE);
        buf[EI_CLASS] = 7;
        check(elf_core_check(buf, size, size, &needed) == ELF_CORE_E_NOT_CORE);
        size = make_core64(buf, sizeof(buf), 1, ET_CORE);
        buf[0] = 'X';
        check(elf_core_check(buf, size, size, &needed) == ELF_CORE_E_NOT_CORE);
        /* a program header size that is not the class's */
        size = make_core64(buf, sizeof(buf), 1, ET_CORE);
        buf[54] = 40;
        check(elf_core_check(buf, size, size, &needed) == ELF_CORE_E_NOT_CORE);
        /* no segments at all */
        size = make_core64(buf, sizeof(buf), 0, ET_CORE);
        check(elf_core_check(buf, size, size, &needed) == ELF_CORE_E_NOT_CORE);
}

/* A segment whose offset plus size wraps around must not pass as within the file. */
static void test_overflowing_segment(void) {
        static uint8_t buf[8192];
        size_t size = make_core64(buf, sizeof(buf), 1, ET_CORE), needed = 0;
        uint64_t huge = UINT64_MAX - 10;

        memcpy(buf + sizeof(Elf64_Ehdr) + 8, &huge, 8); /* p_offset */
        check(elf_core_check(buf, size, size, &needed) == ELF_CORE_E_TRUNCATED);
}

/* More than 65534 headers: the count is in section header 0 (PN_XNUM). */
static void test_many_headers(void) {
        static uint8_t buf[1 << 16];
        size_t size = make_core64(buf, sizeof(buf), 2, ET_CORE), needed = 0;
        Elf64_Ehdr eh;
        Elf64_Shdr sh = { .sh_info = 2 };

        memcpy(&eh, buf, sizeof(eh));
        eh.e_phnum = 0xffff;
        eh.e_shoff = size;
        eh.e_shentsize = sizeof(Elf64_Shdr);
        eh.e_shnum = 1;
        memcpy(buf, &eh, sizeof(eh));
        memcpy(buf + size, &sh, sizeof(sh));
        check(elf_core_check(buf, size + sizeof(sh), size + sizeof(sh), &needed) == 0);
        sh.sh_info = 3; /* one more than there are: the third header is all zeros, offset 0 size 0 */
        memcpy(buf + size, &sh, sizeof(sh));
        check(elf_core_check(buf, size + sizeof(sh), size + sizeof(sh), &needed) == 0);
        sh.sh_info = 100000; /* a table past the end of the file */
        memcpy(buf + size, &sh, sizeof(sh));
        check(elf_core_check(buf, size + sizeof(sh), size + sizeof(sh), &needed) == ELF_CORE_E_TRUNCATED);
}

int main(void) {
        run_test(test_whole_core);
        run_test(test_cut_core);
        run_test(test_asks_for_more);
        run_test(test_not_a_core);
        run_test(test_overflowing_segment);
        run_test(test_many_headers);
        return tap_finish();
}
