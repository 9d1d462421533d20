/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Is this an ELF core file that is whole? A pure check of the bytes createdump wrote */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum {
        _ELF_CORE_E_SUCCESS,
        ELF_CORE_E_NOT_CORE,    /* not an ELF file, or not a core */
        ELF_CORE_E_TRUNCATED,   /* a segment the headers announce lies past the end of the file */
        ELF_CORE_E_MORE,        /* the check needs the first *ret_needed bytes of the file */
};

/* createdump writes one program header per mapping; no real process has more than this. */
#define ELF_CORE_HEADERS_MAX (16U * 1024 * 1024)

/**
 * elf_core_check() - the ELF header and program header table of a core dump
 * @head: the first @head_size bytes of the file
 * @file_size: the file's whole size
 *
 * Checks the identification (64-bit or 32-bit, either byte order is refused
 * but the host's), e_type ET_CORE, and that every segment's bytes lie
 * within @file_size. When @head is too short for the headers it names, asks
 * for more: ELF_CORE_E_MORE with *@ret_needed (at most ELF_CORE_HEADERS_MAX).
 *
 * Return: 0, ELF_CORE_E_NOT_CORE, ELF_CORE_E_TRUNCATED, or ELF_CORE_E_MORE.
 */
int elf_core_check(const uint8_t *head, size_t head_size, uint64_t file_size, size_t *ret_needed);

/**
 * elf_core_maps_file() - does the core's NT_FILE note name a mapped file whose name ends in @suffix?
 * @head: the first @head_size bytes of the file (elf_core_check() found it a core)
 *
 * Reads the program headers, then each PT_NOTE segment's notes ("CORE", NT_FILE: the count, the page
 * size, count ranges, then count NUL-terminated names), within @head. When a note segment lies past
 * @head, asks for more: ELF_CORE_E_MORE with *@ret_needed, never past ELF_CORE_HEADERS_MAX (a
 * segment past that is not looked at). @suffix is matched on whole names ("/libcoreclr.so").
 *
 * Return: 1 (named), 0 (not named, or no NT_FILE note), ELF_CORE_E_NOT_CORE, or ELF_CORE_E_MORE.
 */
int elf_core_maps_file(const uint8_t *head, size_t head_size, const char *suffix, size_t *ret_needed);
