/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Fuzzes the ELF core check (agent/dumps/elf-core.h). createdump runs as the
 * target's user, and any process of that user may write into the dump's
 * pipe: every byte of the file the check reads is the target's to choose.
 *
 * Input: the whole file.
 *
 * Invariants:
 *   - with the whole file in hand the check never asks for more;
 *   - given only a prefix, it asks for at most the file's size and at most
 *     ELF_CORE_HEADERS_MAX, always more than it had, and, handed what it asked
 *     for, ends with the same verdict as with the whole file;
 *   - whether the NT_FILE note names libcoreclr.so (elf_core_maps_file()) asks for more only past
 *     what it had and within ELF_CORE_HEADERS_MAX, and reads nothing past @size.
 */
#include "agent/dumps/elf-core.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t needed = 0, have = size < 64 ? size : 64;
        int whole, r;

        whole = elf_core_check(data, size, size, &needed);
        fuzz_assert(whole == 0 || whole == ELF_CORE_E_NOT_CORE || whole == ELF_CORE_E_TRUNCATED);

        for (unsigned rounds = 0;; rounds++) {
                fuzz_assert(rounds < 8);
                r = elf_core_check(data, have, size, &needed);
                if (r != ELF_CORE_E_MORE)
                        break;
                fuzz_assert(needed > have && needed <= size && needed <= ELF_CORE_HEADERS_MAX);
                have = needed;
        }
        fuzz_assert(r == whole);

        r = elf_core_maps_file(data, size, "/libcoreclr.so", &needed);
        fuzz_assert(r == 0 || r == 1 || r == ELF_CORE_E_NOT_CORE ||
                    (r == ELF_CORE_E_MORE && needed > size && needed <= ELF_CORE_HEADERS_MAX));
        return 0;
}
