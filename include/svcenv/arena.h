/* arena.h — a bump allocator that owns every byte of one decoded object.
 *
 * Objects in the store (a Pod, a Service, ...) keep their struct, arrays and
 * strings in one arena, so they cost one or two mallocs and are freed in one
 * call. Allocations are 8-byte aligned and never freed one by one. */
#ifndef SVCENV_ARENA_H
#define SVCENV_ARENA_H

#include <stddef.h>

struct se_arena_chunk;

struct se_arena {
        struct se_arena_chunk *head;
        char *cur;
        size_t left;
        size_t total; /* bytes allocated from malloc, for accounting */
};

#define SE_ARENA_INIT \
 {                    \
  NULL, NULL, 0, 0    \
 }

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
