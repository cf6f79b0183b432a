/* Growable string with a cap and a sticky error (see strbuf.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/strbuf.h>

static char empty_buf[1];

void se_strbuf_init(struct se_strbuf *sb, size_t max)
{
        sb->buf = empty_buf;
        sb->len = 0;
        sb->alloc = 0;
        sb->max = max ? max : SE_STRBUF_DEFAULT_MAX;
        sb->err = 0;
}

void se_strbuf_release(struct se_strbuf *sb)
{
        if (sb->alloc)
                free(sb->buf);
        size_t max = sb->max;
        se_strbuf_init(sb, max);
}

void se_strbuf_reset(struct se_strbuf *sb)
{
        sb->len = 0;
        sb->err = 0;
        if (sb->alloc)
                sb->buf[0] = '\0';
}

int se_strbuf_grow(struct se_strbuf *sb, size_t n)
{
        if (sb->err)
                return sb->err;
        if (n > sb->max || sb->len > sb->max - n)
                return sb->err = -E2BIG;
        size_t need = sb->len + n + 1;
        if (need <= sb->alloc)
                return 0;
        size_t cap = sb->alloc ? sb->alloc : 64;
        while (cap < need)
                cap = cap * 2;
        /* big buffers (the proxy's rulesets) are written front to back
         * right away: huge pages (see se_malloc_huge) */
        char *p;
        if (sb->alloc >= SE_HUGE_MIN) {
                if ((p = se_reallocarray(sb->buf, cap, 1)))
                        se_advise_huge(p, cap);
        } else if ((p = se_malloc_huge(cap))) {
                /* a small buffer becoming big: aligned anew, a small copy */
                memcpy(p, sb->buf, sb->len + 1);
                if (sb->alloc)
                        free(sb->buf);
        }
        if (!p)
                return sb->err = -ENOMEM;
        sb->buf = p;
        sb->alloc = cap;
        return 0;
}

int se_strbuf_add(struct se_strbuf *sb, const void *data, size_t n)
{
        int r = se_strbuf_grow(sb, n);
        if (r < 0)
                return r;
        if (n)
                memcpy(sb->buf + sb->len, data, n);
        sb->len += n;
        sb->buf[sb->len] = '\0';
        return 0;
}

int se_strbuf_puts(struct se_strbuf *sb, const char *s)
{
        return se_strbuf_add(sb, s, strlen(s));
}

int se_strbuf_add_uint(struct se_strbuf *sb, unsigned long long v)
{
        char d[24], *p = d + sizeof(d);
        do
                *--p = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        return se_strbuf_append(sb, p, (size_t)(d + sizeof(d) - p));
}

int se_strbuf_add_int(struct se_strbuf *sb, long long v)
{
        if (v >= 0)
                return se_strbuf_add_uint(sb, (unsigned long long)v);
        se_strbuf_putc(sb, '-');
        return se_strbuf_add_uint(sb, 0ULL - (unsigned long long)v);
}

int se_strbuf_putc(struct se_strbuf *sb, char c)
{
        return se_strbuf_add(sb, &c, 1);
}

int se_strbuf_vprintf(struct se_strbuf *sb, const char *fmt, va_list ap)
{
        if (sb->err)
                return sb->err;
        va_list cp;
        va_copy(cp, ap);
        char small[256];
        int n = vsnprintf(small, sizeof(small), fmt, cp);
        va_end(cp);
        if (n < 0)
                return sb->err = -EINVAL;
        if ((size_t)n < sizeof(small))
                return se_strbuf_add(sb, small, (size_t)n);
        int r = se_strbuf_grow(sb, (size_t)n);
        if (r < 0)
                return r;
        vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
        sb->len += (size_t)n;
        return 0;
}

int se_strbuf_printf(struct se_strbuf *sb, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        int r = se_strbuf_vprintf(sb, fmt, ap);
        va_end(ap);
        return r;
}

void se_strbuf_truncate(struct se_strbuf *sb, size_t len)
{
        if (len < sb->len) {
                sb->len = len;
                sb->buf[len] = '\0';
        }
}

char *se_strbuf_detach(struct se_strbuf *sb, size_t *ret_len)
{
        char *out;
        if (sb->err) {
                se_strbuf_release(sb);
                return NULL;
        }
        if (sb->alloc) {
                out = sb->buf;
        } else {
                out = se_strdup("");
                if (!out)
                        return NULL;
        }
        if (ret_len)
                *ret_len = sb->len;
        se_strbuf_init(sb, sb->max);
        return out;
}
