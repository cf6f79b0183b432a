/* Reading iptables-save output: which of our per-service nat chains exist
 * (kube-proxy deletes the ones it no longer writes on full syncs). */
#include <errno.h>
#include <string.h>

#include <svcenv/alloc.h>
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
                                char *c = se_strndup(p + 1, name);
                                if (!c || se_strv_push_consume(ret, c) < 0)
                                        return -ENOMEM;
                        }
                }
                p += n + 1;
        }
        return 0;
}
