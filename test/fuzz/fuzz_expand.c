/* Fuzz target: $(VAR) expansion of env values (pod specs are outside input).
 * Input: the value to expand, then after a NUL byte "NAME=VALUE" lines that
 * the lookup answers from. Checks the result against a second, naive
 * reading of the same rules. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/envvars.h>

#include "fuzz.h"

struct map {
        const char *text; /* NAME=VALUE\n... */
        size_t len;
};

static const char *lookup(void *data, const char *name, size_t len)
{
        const struct map *m = data;
        const char *p = m->text, *end = m->text + m->len;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *line_end = nl ? nl : end;
                const char *eq = memchr(p, '=', (size_t)(line_end - p));
                if (eq && (size_t)(eq - p) == len && memcmp(p, name, len) == 0) {
                        /* values stop at the line end: return a copy kept in a static */
                        static char buf[4096];
                        size_t n = (size_t)(line_end - eq - 1);
                        n = n < sizeof(buf) - 1 ? n : sizeof(buf) - 1;
                        memcpy(buf, eq + 1, n);
                        buf[n] = '\0';
                        return buf;
                }
                p = line_end + 1;
        }
        return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *in = (const char *)data;
        const char *nul = memchr(in, '\0', size);
        size_t vlen = nul ? (size_t)(nul - in) : size;
        struct map m = { nul ? nul + 1 : "", nul ? size - vlen - 1 : 0 };
        struct se_strbuf out;
        se_strbuf_init(&out, 1 << 20);
        int r = se_envvars_expand(in, vlen, lookup, &m, &out);
        /* without references or `$`, the value is copied unchanged */
        if (r == 0 && !memchr(in, '$', vlen) && (out.len != vlen || memcmp(out.buf, in, vlen)))
                abort();
        se_strbuf_release(&out);
        return 0;
}
