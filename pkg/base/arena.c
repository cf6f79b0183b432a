/* Two-ended bump allocator for one object's memory (see arena.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/arena.h>

struct se_arena_chunk {
        struct se_arena_chunk *next;
        size_t size;
        /* data follows, 16-aligned */
};

/* Without a reservation the first chunk is small and later ones double. */
#define FIRST_CHUNK 512
#define ALIGN       8
#define HDR         ((sizeof(struct se_arena_chunk) + 15) & ~(size_t)15)

/* *counter += n, saturating. */
static void count(uint32_t *counter, size_t n)
{
        *counter = n >= (size_t)(UINT32_MAX - *counter) ? UINT32_MAX : *counter + (uint32_t)n;
}

static int add_chunk(struct se_arena *a, size_t need, size_t exact)
{
        size_t size = exact;
        if (!size) {
                size = a->head ? a->head->size * 2 : FIRST_CHUNK;
                while (size < need)
                        size *= 2;
        }
        /* a big chunk (a proxy table's) is filled front to back right away */
        struct se_arena_chunk *c = se_malloc_huge(HDR + size);
        if (!c)
                return -ENOMEM;
        c->next = a->head;
        c->size = size;
        a->head = c;
        a->lo = (char *)c + HDR;
        a->hi = a->lo + size;
        count(&a->total, HDR + size);
        return 0;
}

int se_arena_reserve(struct se_arena *a, size_t size)
{
        if (a->head || size == 0)
                return 0;
        if (size > SIZE_MAX / 2)
                return -ENOMEM;
        return add_chunk(a, size, (size + ALIGN - 1) & ~(size_t)(ALIGN - 1));
}

void *se_arena_alloc(struct se_arena *a, size_t size)
{
        if (size > SIZE_MAX / 2)
                return NULL;
        size_t rounded = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        if (rounded == 0)
                rounded = ALIGN;
        if ((size_t)(a->hi - a->lo) < rounded && add_chunk(a, rounded, 0) < 0)
                return NULL;
        void *p = a->lo;
        a->lo += rounded;
        count(&a->requested, rounded);
        memset(p, 0, size);
        return p;
}

void *se_arena_array(struct se_arena *a, size_t n, size_t size)
{
        if (size && n > SIZE_MAX / 2 / size)
                return NULL;
        return se_arena_alloc(a, n * size);
}

char *se_arena_strndup(struct se_arena *a, const char *s, size_t n)
{
        if (!s || n > SIZE_MAX / 2)
                return NULL;
        if ((size_t)(a->hi - a->lo) < n + 1 && add_chunk(a, n + 1, 0) < 0)
                return NULL;
        a->hi -= n + 1;
        count(&a->requested, n + 1);
        memcpy(a->hi, s, n);
        a->hi[n] = '\0';
        return a->hi;
}

char *se_arena_strdup(struct se_arena *a, const char *s)
{
        return s ? se_arena_strndup(a, s, strlen(s)) : NULL;
}

void se_arena_release(struct se_arena *a)
{
        /* The arena struct may itself live inside one of its chunks. */
        struct se_arena_chunk *c = a->head;
        memset(a, 0, sizeof(*a));
        while (c) {
                struct se_arena_chunk *next = c->next;
                free(c);
                c = next;
        }
}
