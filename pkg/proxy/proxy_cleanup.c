/* --cleanup, pure part: from iptables-save output, the restore input that
 * removes everything the proxy made (as kube-proxy's CleanupLeftovers). */
#include <errno.h>
#include <string.h>

#include <svcenv/proxy.h>
#include <svcenv/strv.h>

static const char *const fixed_chains[] = {
        "KUBE-SERVICES",       "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS",
        "KUBE-POSTROUTING",    "KUBE-MARK-MASQ",         "KUBE-FORWARD",
        "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL",          "KUBE-PROXY-CANARY",
};
static const char *const chain_prefixes[] = { "KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-",
                                              "KUBE-SEP-" };

bool se_proxy_own_chain(const char *name, size_t n)
{
        for (size_t i = 0; i < SE_ARRAY_SIZE(fixed_chains); i++)
                if (strlen(fixed_chains[i]) == n && memcmp(name, fixed_chains[i], n) == 0)
                        return true;
        for (size_t i = 0; i < SE_ARRAY_SIZE(chain_prefixes); i++) {
                size_t k = strlen(chain_prefixes[i]);
                if (n > k && memcmp(name, chain_prefixes[i], k) == 0)
                        return true;
        }
        return false;
}

/* The jump target of a saved rule ("... -j NAME ..."), or NULL. */
static const char *jump_target(const char *line, size_t n, size_t *ret_len)
{
        for (size_t i = 0; i + 4 <= n; i++)
                if (memcmp(line + i, " -j ", 4) == 0 || memcmp(line + i, " -g ", 4) == 0) {
                        const char *t = line + i + 4;
                        size_t k = 0;
                        while (t + k < line + n && t[k] != ' ')
                                k++;
                        *ret_len = k;
                        return t;
                }
        return NULL;
}

struct table_out {
        struct se_strbuf decl, dels, rules;
        bool any;
};

static void table_flush(struct table_out *t, const char *header, size_t hlen, struct se_strbuf *out)
{
        if (t->any) {
                se_strbuf_add(out, header, hlen);
                se_strbuf_putc(out, '\n');
                se_strbuf_add(out, t->decl.buf, t->decl.len);
                se_strbuf_add(out, t->rules.buf, t->rules.len);
                se_strbuf_add(out, t->dels.buf, t->dels.len);
                se_strbuf_puts(out, "COMMIT\n");
        }
        se_strbuf_reset(&t->decl);
        se_strbuf_reset(&t->dels);
        se_strbuf_reset(&t->rules);
        t->any = false;
}

/* Length of the word at p, within the line's n bytes: the text need not
 * end in a NUL (a last line without its newline). */
static size_t word_len(const char *p, size_t n)
{
        size_t k = 0;
        while (k < n && p[k] != ' ' && p[k] != '\n')
                k++;
        return k;
}

int se_proxy_cleanup_text(const char *text, size_t len, struct se_strbuf *out)
{
        struct table_out t;
        const char *p = text, *end = text + len, *header = NULL;
        size_t hlen = 0;
        if (len > SE_PROXY_MAX_SAVED_CHAINS * 64)
                return -E2BIG;
        se_strbuf_init(&t.decl, 0);
        se_strbuf_init(&t.dels, 0);
        se_strbuf_init(&t.rules, 0);
        t.any = false;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (n > 1 && p[0] == '*') {
                        header = p;
                        hlen = n;
                } else if (n >= 6 && memcmp(p, "COMMIT", 6) == 0 && header) {
                        table_flush(&t, header, hlen, out);
                } else if (n > 1 && p[0] == ':') {
                        size_t k = word_len(p + 1, n - 1);
                        if (se_proxy_own_chain(p + 1, k)) {
                                /* declaring flushes it; deleted after every flush */
                                se_strbuf_printf(&t.decl, ":%.*s - [0:0]\n", (int)k, p + 1);
                                se_strbuf_printf(&t.dels, "-X %.*s\n", (int)k, p + 1);
                                t.any = true;
                        }
                } else if (n > 3 && memcmp(p, "-A ", 3) == 0) {
                        size_t k = word_len(p + 3, n - 3), tl;
                        const char *tg = jump_target(p, n, &tl);
                        /* a jump from a chain not ours into ours: delete the rule */
                        if (!se_proxy_own_chain(p + 3, k) && tg && se_proxy_own_chain(tg, tl)) {
                                se_strbuf_printf(&t.rules, "-D %.*s\n", (int)(n - 3), p + 3);
                                t.any = true;
                        }
                }
                p += n + 1;
        }
        int r = se_strbuf_failed(&t.decl)  ? se_strbuf_failed(&t.decl) :
                se_strbuf_failed(&t.rules) ? se_strbuf_failed(&t.rules) :
                                             se_strbuf_failed(&t.dels);
        se_strbuf_release(&t.decl);
        se_strbuf_release(&t.dels);
        se_strbuf_release(&t.rules);
        return r ? r : se_strbuf_failed(out);
}
