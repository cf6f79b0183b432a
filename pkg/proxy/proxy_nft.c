/* The nftables backend (placeholder until written). */
#include <errno.h>

#include <svcenv/proxy.h>

int se_proxy_nft_write(const struct se_proxy_table *t, const struct se_proxy_options *opt,
                       struct se_strbuf *out)
{
        (void)t;
        (void)opt;
        (void)out;
        return -EOPNOTSUPP;
}
