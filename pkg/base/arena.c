/* Bump allocator for one object's memory (see arena.h). */
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

/* The first chunk is small: most objects (a Service, a Pod's slim view) fit in
 * a few hundred bytes. Later chunks double. */
#define FIRST_CHUNK 512
#define ALIGN       8
#define HDR         ((sizeof(struct se_arena_chunk) + 15) & ~(size_t)15)

static int add_chunk(struct se_arena *a, size_t need)
{
        size_t size = a->head ? a->head->size * 2 : FIRST_CHUNK;
        while (size < need)
                size *= 2;
        struct se_arena_chunk *c = se_malloc(HDR + size);
        if (!c)
                return -1;
        c->next = a->head;
        c->size = size;
        a->head = c;
        a->cur = (char *)c + HDR;
        a->left = size;
        a->total += HDR + size;
        return 0;
}

void *se_arena_alloc(struct se_arena *a, size_t size)
{
        if (size > SIZE_MAX / 2)
                return NULL;
        size_t rounded = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
        if (rounded == 0)
                rounded = ALIGN;
        if (rounded > a->left && add_chunk(a, rounded) < 0)
                return NULL;
        void *p = a->cur;
        a->cur += rounded;
        a->left -= rounded;
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
        if (!s)
                return NULL;
        /* strings need no alignment: take exactly n+1 bytes when they fit */
        char *p;
        if (n + 1 <= a->left) {
                p = a->cur;
                a->cur += n + 1;
                a->left -= n + 1;
                /* re-align for the next structured allocation */
                size_t mis = (uintptr_t)a->cur & (ALIGN - 1);
                if (mis) {
                        size_t pad = ALIGN - mis;
                        if (pad <= a->left) {
                                a->cur += pad;
                                a->left -= pad;
                        } else {
                                a->left = 0;
                        }
                }
        } else {
                p = se_arena_alloc(a, n + 1);
                if (!p)
                        return NULL;
        }
        memcpy(p, s, n);
        p[n] = '\0';
        return p;
}

char *se_arena_strdup(struct se_arena *a, const char *s)
{
        return s ? se_arena_strndup(a, s, strlen(s)) : NULL;
}

void se_arena_release(struct se_arena *a)
{
        /* The arena struct may itself live inside one of its chunks. */
        struct se_arena_chunk *c = a->head;
        a->head = NULL;
        a->cur = NULL;
        a->left = 0;
        a->total = 0;
        while (c) {
                struct se_arena_chunk *next = c->next;
                free(c);
                c = next;
        }
}
