/* Fuzz target: any manifest through the proxy table and both writers, for
 * both families (what `svcenv rules` does with outside input). */
#include <svcenv/manifest.h>
#include <svcenv/proxy.h>
#include <svcenv/store.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_store *s = se_store_new();
        struct se_proxy_options o;
        struct se_diag d;
        if (!s)
                return 0;
        se_proxy_options_init(&o);
        o.node_name = "node-a";
        (void)se_parse_ip("10.0.0.11", &o.node_ips[0]);
        o.n_node_ips = 1;
        (void)se_parse_cidr("10.244.0.0/16", &o.cluster_cidrs[0]);
        o.n_cluster_cidrs = 1;
        if (se_manifest_load_buffer(s, "fuzz", (const char *)data, size, NULL, NULL, &d) == 0) {
                static const enum se_ip_family fams[] = { SE_IPV4, SE_IPV6 };
                for (size_t i = 0; i < 2; i++) {
                        struct se_proxy_table *t = NULL;
                        struct se_strbuf sb;
                        if (se_proxy_table_build(s, &o, fams[i], &t) < 0)
                                continue;
                        se_strbuf_init(&sb, 0);
                        (void)se_proxy_iptables_write(t, &o, &sb);
                        se_strbuf_reset(&sb);
                        (void)se_proxy_nft_write(t, &o, &sb);
                        se_strbuf_release(&sb);
                        se_proxy_table_free(t);
                }
        }
        se_store_free(s);
        return 0;
}
