/* The nft script translator's input: tokens, names, numbers, durations,
 * and the one-line errors that name the script's line. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/netfilter.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "proxy_nftparse.h"

int proxy_nfp_fail(struct nfp_parser *ps, unsigned line, const char *fmt, ...)
{
        if (ps->err)
                return ps->err;
        ps->err = -EINVAL;
        if (ps->errbuf && ps->errsize) {
                int k = snprintf(ps->errbuf, ps->errsize, "line %u: ", line);
                va_list ap;
                va_start(ap, fmt);
                if (k >= 0 && (size_t)k < ps->errsize)
                        vsnprintf(ps->errbuf + k, ps->errsize - (size_t)k, fmt, ap);
                va_end(ap);
        }
        return ps->err;
}

int proxy_nfp_oom(struct nfp_parser *ps, int e)
{
        if (!ps->err) {
                ps->err = e;
                if (ps->errbuf && ps->errsize)
                        snprintf(ps->errbuf, ps->errsize, "line %u: %s", ps->line,
                                 e == -E2BIG ? "script too large" : "out of memory");
        }
        return ps->err;
}

static void lex(struct nfp_parser *ps, struct nfp_tok *t)
{
        bool nl = ps->at_line_start;
        for (;;) {
                while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r'))
                        ps->p++;
                if (ps->p < ps->end && *ps->p == '#')
                        while (ps->p < ps->end && *ps->p != '\n')
                                ps->p++;
                if (ps->p < ps->end && *ps->p == '\n') {
                        ps->p++;
                        ps->line++;
                        nl = true;
                        continue;
                }
                break;
        }
        ps->at_line_start = false;
        t->line = ps->line;
        t->first = nl;
        t->s = ps->p < ps->end ? ps->p : NULL;
        t->n = 0;
        if (!t->s)
                return;
        const char *q = ps->p;
        if (special(*q)) {
                q++;
        } else if (*q == '"') {
                q++;
                while (q < ps->end && *q != '"' && *q != '\n')
                        q++;
                if (q < ps->end && *q == '"')
                        q++;
        } else {
                while (q < ps->end && !special(*q) && *q != ' ' && *q != '\t' && *q != '\n' &&
                       *q != '\r' && *q != '"')
                        q++;
        }
        t->n = (uint32_t)(q - ps->p);
        ps->p = q;
}

struct nfp_tok *proxy_nfp_peek(struct nfp_parser *ps)
{
        if (!ps->have) {
                lex(ps, &ps->la);
                ps->have = true;
        }
        return &ps->la;
}

struct nfp_tok proxy_nfp_next(struct nfp_parser *ps)
{
        struct nfp_tok t = *proxy_nfp_peek(ps);
        ps->have = false;
        return t;
}

int proxy_nfp_expect(struct nfp_parser *ps, const char *w)
{
        struct nfp_tok t = proxy_nfp_next(ps);
        if (!is(&t, w))
                return proxy_nfp_fail(ps, t.line, "expected '%s', found '%.*s'", w, (int)t.n,
                                      t.s ? t.s : "");
        return 0;
}

/* a name token into out (NUL-terminated); strings lose their quotes */
int proxy_nfp_name(struct nfp_parser *ps, char out[NAME_MAX_LEN], const char *what)
{
        struct nfp_tok t = proxy_nfp_next(ps);
        const char *s = t.s;
        size_t n = t.n;
        if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
                s++;
                n -= 2;
        }
        if (!s || n == 0 || special(s[0]) || n >= NAME_MAX_LEN)
                return proxy_nfp_fail(ps, t.line, "bad %s '%.*s'", what, (int)t.n, t.s ? t.s : "");
        memcpy(out, s, n);
        out[n] = 0;
        return 0;
}

int proxy_nfp_family(struct nfp_parser *ps, uint8_t *fam)
{
        struct nfp_tok t = proxy_nfp_next(ps);
        if (is(&t, "ip"))
                *fam = NFPROTO_IPV4;
        else if (is(&t, "ip6"))
                *fam = NFPROTO_IPV6;
        else if (is(&t, "inet"))
                *fam = NFPROTO_INET;
        else
                return proxy_nfp_fail(ps, t.line, "unknown family '%.*s'", (int)t.n,
                                      t.s ? t.s : "");
        return 0;
}

int proxy_nfp_number(struct nfp_parser *ps, const struct nfp_tok *t, uint64_t max, uint64_t *v)
{
        char buf[32];
        if (!t->s || t->n == 0 || t->n >= sizeof(buf))
                return proxy_nfp_fail(ps, t->line, "expected a number, found '%.*s'", (int)t->n,
                                      t->s ? t->s : "");
        memcpy(buf, t->s, t->n);
        buf[t->n] = 0;
        char *e = NULL;
        errno = 0;
        unsigned long long x = strtoull(buf, &e, 0);
        if (errno || !e || *e || buf[0] == '-' || x > max)
                return proxy_nfp_fail(ps, t->line, "bad number '%s'", buf);
        *v = x;
        return 0;
}

/* "600s", "10m", "1h", "2d", "500ms" in milliseconds */
int proxy_nfp_duration(struct nfp_parser *ps, const struct nfp_tok *t, uint64_t *ms)
{
        char buf[32];
        if (!t->s || t->n == 0 || t->n >= sizeof(buf))
                return proxy_nfp_fail(ps, t->line, "expected a duration");
        memcpy(buf, t->s, t->n);
        buf[t->n] = 0;
        char *e = NULL;
        errno = 0;
        unsigned long long x = strtoull(buf, &e, 10);
        uint64_t unit = 0;
        if (e && strcmp(e, "ms") == 0)
                unit = 1;
        else if (e && strcmp(e, "s") == 0)
                unit = 1000;
        else if (e && strcmp(e, "m") == 0)
                unit = 60000;
        else if (e && strcmp(e, "h") == 0)
                unit = 3600000;
        else if (e && strcmp(e, "d") == 0)
                unit = 86400000;
        if (errno || e == buf || !unit || x > UINT64_MAX / 86400000)
                return proxy_nfp_fail(ps, t->line, "bad duration '%s'", buf);
        *ms = x * unit;
        return 0;
}
