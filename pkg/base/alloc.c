/* The project allocator: libc plus overflow checks and a failure hook. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>

static unsigned long fail_countdown;

/* True when this allocation should fail (test hook). */
static int should_fail(void)
{
        if (fail_countdown == 0)
                return 0;
        return --fail_countdown == 0;
}

void se_alloc_fail_at(unsigned long n)
{
        fail_countdown = n;
}

void *se_malloc(size_t size)
{
        if (should_fail())
                return NULL;
        return malloc(size ? size : 1);
}

void *se_calloc(size_t n, size_t size)
{
        if (size && n > SIZE_MAX / size)
                return NULL;
        if (should_fail())
                return NULL;
        return calloc(n ? n : 1, size ? size : 1);
}

void *se_reallocarray(void *p, size_t n, size_t size)
{
        if (size && n > SIZE_MAX / size)
                return NULL;
        if (should_fail())
                return NULL;
        size_t bytes = n * size;
        return realloc(p, bytes ? bytes : 1);
}

char *se_strndup(const char *s, size_t n)
{
        if (!s)
                return NULL;
        char *p = se_malloc(n + 1);
        if (!p)
                return NULL;
        memcpy(p, s, n);
        p[n] = '\0';
        return p;
}

char *se_strdup(const char *s)
{
        return s ? se_strndup(s, strlen(s)) : NULL;
}
