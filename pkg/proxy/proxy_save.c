/* Reading iptables-save output: which of our per-service nat chains exist
 * (kube-proxy deletes the ones it no longer writes on full syncs). */
#include <errno.h>
#include <string.h>

#include <svcenv/proxy.h>
#include <svcenv/strv.h>

/* isServiceChainName: the five per-service prefixes */
static bool service_chain(const char *name, size_t n)
{
        static const char *const prefixes[] = { "KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-",
                                                "KUBE-SEP-" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(prefixes); i++) {
                size_t k = strlen(prefixes[i]);
                if (n > k && strncmp(name, prefixes[i], k) == 0)
                        return true;
        }
        return false;
}

int se_proxy_parse_save_chains(const char *text, size_t len, struct se_strv *ret)
{
        const char *p = text, *end = text + len;
        bool in_nat = false;
        size_t found = 0;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (n >= 1 && p[0] == '*') {
                        in_nat = n == 4 && strncmp(p, "*nat", 4) == 0;
                } else if (in_nat && n > 1 && p[0] == ':') {
                        size_t name = 0;
                        while (name + 1 < n && p[1 + name] != ' ' && p[1 + name] != '\t')
                                name++;
                        /* iptables limits chain names to 28 characters */
                        if (name <= 28 && service_chain(p + 1, name)) {
                                if (++found > SE_PROXY_MAX_SAVED_CHAINS)
                                        return -E2BIG;
                                char *c = strndup(p + 1, name);
                                if (!c || se_strv_push_consume(ret, c) < 0)
                                        return -ENOMEM;
                        }
                }
                p += n + 1;
        }
        return 0;
}

/* nft prints our table as "table ip svcenv {", its objects one tab in
 * ("\tchain NAME {"), and closes it with "}" alone */
int se_proxy_nft_parse_names(const char *text, size_t len, struct se_strv *ret)
{
        static const char *const kinds[] = { "chain ", "set ", "map " };
        const char *p = text, *end = text + len;
        bool in_ours = false;
        size_t found = 0;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                if (n > 6 && strncmp(p, "table ", 6) == 0) {
                        const char *sp = memchr(p + 6, ' ', n - 6);
                        size_t rest = sp ? n - (size_t)(sp + 1 - p) : 0;
                        in_ours = sp && rest == 8 && strncmp(sp + 1, "svcenv {", 8) == 0;
                } else if (n >= 1 && p[0] == '}') {
                        in_ours = false;
                } else if (in_ours && n > 3 && p[0] == '\t' && p[1] != '\t' && p[n - 1] == '{' &&
                           p[n - 2] == ' ') {
                        for (size_t k = 0; k < SE_ARRAY_SIZE(kinds); k++) {
                                size_t kl = strlen(kinds[k]);
                                if (n - 3 <= kl || strncmp(p + 1, kinds[k], kl) != 0)
                                        continue;
                                size_t name = n - 3 - kl; /* "\tKIND NAME {" */
                                if (name == 0 || name > 255 || memchr(p + 1 + kl, ' ', name))
                                        break;
                                if (++found > SE_PROXY_MAX_SAVED_CHAINS)
                                        return -E2BIG;
                                char *c = strndup(p + 1, kl + name);
                                if (!c || se_strv_push_consume(ret, c) < 0)
                                        return -ENOMEM;
                                break;
                        }
                }
                p += n + 1;
        }
        return 0;
}
