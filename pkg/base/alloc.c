/* The project allocator: libc plus overflow checks and a failure hook. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

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

int se_vasprintf(char **ret, const char *fmt, va_list ap)
{
        va_list again;
        va_copy(again, ap);
        int n = vsnprintf(NULL, 0, fmt, ap);
        char *s = n < 0 ? NULL : se_malloc((size_t)n + 1);
        if (s && vsnprintf(s, (size_t)n + 1, fmt, again) != n) {
                free(s);
                s = NULL;
        }
        va_end(again);
        *ret = s;
        return s ? n : -1;
}

int se_asprintf(char **ret, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int n = se_vasprintf(ret, fmt, ap);
        va_end(ap);
        return n;
}

/* Transparent huge pages: a buffer filled front to back right after it is
 * made costs one fault per 2 MiB instead of one per 4 KiB, and faults cost
 * more than the writing. Only for sizes where the last, partly used huge
 * page is cheaper than the small pages it replaces. */
#define HUGE_PAGE ((size_t)2 << 20)

void se_advise_huge(void *p, size_t size)
{
#ifdef MADV_HUGEPAGE
        uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        uintptr_t end = ((uintptr_t)p + size) & ~(uintptr_t)(HUGE_PAGE - 1);
        if (size >= SE_HUGE_MIN && end > start)
                (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
        (void)p;
        (void)size;
#endif
}

void *se_malloc_huge(size_t size)
{
        if (size < SE_HUGE_MIN)
                return se_malloc(size);
        if (should_fail())
                return NULL;
        /* whole huge pages: the kernel maps one only where the 2 MiB
         * around it are all ours (untouched ones cost no memory) */
        size_t whole = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        void *p = NULL;
        if (whole < size || posix_memalign(&p, HUGE_PAGE, whole) != 0)
                return NULL;
        se_advise_huge(p, whole);
        return p;
}
