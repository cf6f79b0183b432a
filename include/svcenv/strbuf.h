/* strbuf.h — growable string with a hard maximum size.
 *
 * Invariants: `buf` is never NULL after se_strbuf_init (it points at a static
 * empty string until the first append) and is always NUL-terminated; `len`
 * excludes the NUL. Appends past `max` bytes (0 = 256 MiB) or a failed
 * allocation put the buffer into a sticky failed state: later appends do
 * nothing and se_strbuf_failed() reports the first error. This lets writers
 * append freely and check once at the end. */
#ifndef SVCENV_STRBUF_H
#define SVCENV_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <svcenv/macro.h>

struct se_strbuf {
        char *buf;
        size_t len;
        size_t alloc;
        size_t max;
        int err; /* 0, -ENOMEM or -E2BIG (over max) */
};

#define SE_STRBUF_DEFAULT_MAX ((size_t)256 << 20)

/* Empty buffer limited to max bytes (0 = default). Never fails. */
void se_strbuf_init(struct se_strbuf *sb, size_t max);
/* Frees the contents; the buffer is empty and usable again. */
void se_strbuf_release(struct se_strbuf *sb);
/* Sets len to 0, keeps the allocation, clears the error. */
void se_strbuf_reset(struct se_strbuf *sb);
/* Hands the string to the caller (free() it) and resets the buffer. NULL if
 * the buffer is in the failed state or allocation fails. */
char *se_strbuf_detach(struct se_strbuf *sb, size_t *ret_len);
/* Appends; each returns 0 or the sticky negative error. */
int se_strbuf_add(struct se_strbuf *sb, const void *data, size_t n);
int se_strbuf_puts(struct se_strbuf *sb, const char *s);
int se_strbuf_putc(struct se_strbuf *sb, char c);
int se_strbuf_printf(struct se_strbuf *sb, const char *fmt, ...) SE_PRINTF(2, 3);
int se_strbuf_vprintf(struct se_strbuf *sb, const char *fmt, va_list ap) SE_PRINTF(2, 0);
/* Ensures room for n more bytes without changing len. */
int se_strbuf_grow(struct se_strbuf *sb, size_t n);
/* Truncates to len bytes (len <= current length). */
void se_strbuf_truncate(struct se_strbuf *sb, size_t len);
/* se_strbuf_add, inlined for the common case of room in the buffer (hot
 * loops that append many short pieces). */
static inline int se_strbuf_append(struct se_strbuf *sb, const void *data, size_t n)
{
        if (sb->err == 0 && n < sb->alloc - sb->len && n <= sb->max - sb->len) {
                char *p = sb->buf + sb->len;
                __builtin_memcpy(p, data, n);
                sb->len += n;
                p[n] = '\0';
                return 0;
        }
        return se_strbuf_add(sb, data, n);
}
/* Appends a string literal. */
#define se_strbuf_lit(sb, lit) se_strbuf_append((sb), "" lit, sizeof(lit) - 1)
/* Appends v in decimal (printf's %u / %lld without the printf). */
int se_strbuf_add_uint(struct se_strbuf *sb, unsigned long long v);
int se_strbuf_add_int(struct se_strbuf *sb, long long v);
/* The sticky error, 0 when all appends succeeded. */
static inline int se_strbuf_failed(const struct se_strbuf *sb)
{
        return sb->err;
}

static inline void se_strbuf_releasep(struct se_strbuf *sb)
{
        se_strbuf_release(sb);
}
#define _cleanup_strbuf_ _cleanup_(se_strbuf_releasep)

#endif
