/* arena.h — a bump allocator that owns every byte of one decoded object.
 *
 * Objects in the store (a Pod, a Service, ...) keep their struct, arrays and
 * strings in one arena, so they cost one malloc and are freed in one call.
 * Structured allocations are 8-byte aligned and taken from the bottom of a
 * chunk; strings need no alignment and are taken from its top, so nothing is
 * lost to padding. `requested` counts what was asked for: an arena that
 * reserves that many bytes up front serves the same allocations from exactly
 * one chunk (how decoders size an object: decode once, decode again).
 * Allocations are never freed one by one. */
#ifndef SVCENV_ARENA_H
#define SVCENV_ARENA_H

#include <stddef.h>
#include <stdint.h>

struct se_arena_chunk;

struct se_arena {
        struct se_arena_chunk *head;
        char *lo; /* next structured allocation */
        char *hi; /* end of the free space; strings are taken below it */
        /* Both saturate at UINT32_MAX: 32 bits keep every cached object 8 B
         * smaller, and no object nears 4 GiB (a big proxy table's arena may,
         * but nothing reads its counts). */
        uint32_t requested; /* bytes asked for (structs rounded to 8) */
        uint32_t total; /* bytes allocated from malloc, for accounting */
};

#define SE_ARENA_INIT    \
 {                       \
  NULL, NULL, NULL, 0, 0 \
 }

/* Makes the first chunk hold at least size bytes; only on an empty arena
 * (otherwise a no-op). 0 or -ENOMEM. */
int se_arena_reserve(struct se_arena *a, size_t size);
/* size bytes, zeroed; NULL on failure or overflow. */
void *se_arena_alloc(struct se_arena *a, size_t size);
/* n elements of size bytes, zeroed, overflow-checked. */
void *se_arena_array(struct se_arena *a, size_t n, size_t size);
/* Copy of s in the arena (NULL gives NULL). */
char *se_arena_strdup(struct se_arena *a, const char *s);
char *se_arena_strndup(struct se_arena *a, const char *s, size_t n);
/* Frees every chunk; the arena is empty and usable again. */
void se_arena_release(struct se_arena *a);

#endif
