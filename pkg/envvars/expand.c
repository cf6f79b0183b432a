/* $(VAR) expansion, as third_party/forked/golang/expansion does it. */
#include <string.h>

#include <svcenv/envvars.h>

/* Length of the UTF-8 sequence at s (n bytes left, n >= 1) the way Go's
 * utf8.DecodeRuneInString accepts it; 0 when the first byte starts no valid
 * sequence (Go then yields U+FFFD and advances one byte). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
        unsigned char c = s[0];
        unsigned char lo = 0x80, hi = 0xBF;
        size_t need;
        if (c < 0x80)
                return 1;
        if (c >= 0xC2 && c <= 0xDF)
                need = 2;
        else if (c >= 0xE0 && c <= 0xEF)
                need = 3;
        else if (c >= 0xF0 && c <= 0xF4)
                need = 4;
        else
                return 0;
        if (c == 0xE0)
                lo = 0xA0;
        else if (c == 0xED)
                hi = 0x9F;
        else if (c == 0xF0)
                lo = 0x90;
        else if (c == 0xF4)
                hi = 0x8F;
        if (n < need || s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < need; i++)
                if (s[i] < 0x80 || s[i] > 0xBF)
                        return 0;
        return need;
}

int se_envvars_expand(const char *input, size_t len, se_envvars_lookup_fn lookup, void *data,
                      struct se_strbuf *out)
{
        size_t checkpoint = 0;
        for (size_t cur = 0; cur < len; cur++) {
                if (input[cur] != '$' || cur + 1 >= len)
                        continue;
                se_strbuf_add(out, input + checkpoint, cur - checkpoint);
                const char *rest = input + cur + 1;
                size_t left = len - cur - 1;
                size_t advance = 1;
                if (rest[0] == '$') {
                        se_strbuf_putc(out, '$'); /* escaped operator */
                } else if (rest[0] == '(') {
                        const char *close = memchr(rest + 1, ')', left - 1);
                        if (close) {
                                size_t nlen = (size_t)(close - rest - 1);
                                const char *v = lookup(data, rest + 1, nlen);
                                if (v) {
                                        se_strbuf_puts(out, v);
                                } else {
                                        se_strbuf_add(out, rest - 1, nlen + 3);
                                }
                                advance = nlen + 2;
                        } else {
                                se_strbuf_add(out, "$(", 2); /* incomplete: keep, go on after ( */
                        }
                } else {
                        size_t u = utf8_len((const unsigned char *)rest, left);
                        se_strbuf_putc(out, '$');
                        if (u)
                                se_strbuf_add(out, rest, u);
                        else
                                se_strbuf_add(out, "\xEF\xBF\xBD", 3);
                        advance = u ? u : 1;
                }
                cur += advance;
                checkpoint = cur + 1;
        }
        se_strbuf_add(out, input + checkpoint, len - checkpoint);
        return se_strbuf_failed(out);
}
