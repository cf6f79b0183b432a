/* JSON string escaping (see jsonstr.h). */
#include <stdbool.h>
#include <stddef.h>

#include <svcenv/jsonstr.h>

/* The length of the valid UTF-8 sequence at p (lead byte >= 0x80), or 0. */
static size_t utf8_len(const unsigned char *p)
{
        unsigned char c = p[0];
        size_t need = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        for (size_t k = 1; k < need; k++)
                if ((p[k] & 0xC0) != 0x80) /* also stops at the NUL */
                        return 0;
        /* overlong 3- and 4-byte forms, UTF-16 surrogates, above U+10FFFF */
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) ||
            (c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))
                return 0;
        return need;
}

void se_json_put_escaped(struct se_strbuf *sb, const char *s)
{
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p = (const unsigned char *)s;
        while (*p) {
                const unsigned char *run = p;
                while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
                        p++;
                if (p > run)
                        se_strbuf_add(sb, run, (size_t)(p - run));
                unsigned char c = *p;
                if (!c)
                        break;
                if (c == '"' || c == '\\') {
                        char esc[2] = { '\\', (char)c };
                        se_strbuf_add(sb, esc, 2);
                        p++;
                } else if (c == '\n' || c == '\t' || c == '\r') {
                        char esc[2] = { '\\', c == '\n' ? 'n' : c == '\t' ? 't' : 'r' };
                        se_strbuf_add(sb, esc, 2);
                        p++;
                } else if (c < 0x20) {
                        char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
                        se_strbuf_add(sb, esc, 6);
                        p++;
                } else {
                        size_t n = utf8_len(p);
                        if (n) {
                                se_strbuf_add(sb, p, n);
                                p += n;
                        } else {
                                se_strbuf_puts(sb, "\\ufffd");
                                p++;
                        }
                }
        }
}

void se_json_put_string(struct se_strbuf *sb, const char *s)
{
        se_strbuf_putc(sb, '"');
        se_json_put_escaped(sb, s);
        se_strbuf_putc(sb, '"');
}
