/* Fuzz target: nft script text through the netlink translator (what
 * se_proxy_nft_apply_netlink does before it talks to the kernel). Sets the
 * script does not declare are described by a fake kernel: names starting
 * with 'v' are verdict maps keyed by address . protocol . port, 'd' data
 * maps of numgen to address . port, 'i' interval sets of addresses, 's'
 * plain address sets; others do not exist. Of the sets a script declares,
 * the kernel has those whose name starts with 'k' (the rest are new). */
#include <errno.h>
#include <linux/netfilter/nf_tables.h>
#include <string.h>

#include "../../pkg/proxy/proxy_nlbatch.h"
#include "fuzz.h"

static int fake_kernel(void *ctx, uint8_t family, const char *table, const char *set,
                       struct nfp_set_info *info)
{
        (void)ctx;
        (void)family;
        (void)table;
        memset(info, 0, sizeof(*info));
        switch (set[0]) {
        case 'v':
                *info = (struct nfp_set_info){ .flags = NFT_SET_MAP,
                                               .key_type = (7u << 12) | (12u << 6) | 13u,
                                               .key_len = 12,
                                               .data_type = NFT_DATA_VERDICT };
                return 0;
        case 'd':
                *info = (struct nfp_set_info){ .flags = NFT_SET_MAP,
                                               .key_type = 4,
                                               .key_len = 4,
                                               .data_type = (7u << 6) | 13u,
                                               .data_len = 8,
                                               .key_byteorder = 1 };
                return 0;
        case 'i':
                *info = (struct nfp_set_info){ .flags = NFT_SET_INTERVAL,
                                               .key_type = 7,
                                               .key_len = 4 };
                return 0;
        case 's':
                *info = (struct nfp_set_info){ .key_type = 7, .key_len = 4 };
                return 0;
        default:
                return -ENOENT;
        }
}

static int fake_exists(void *ctx, uint8_t family, const char *table, const char *set)
{
        (void)ctx;
        (void)family;
        (void)table;
        return set[0] == 'k';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct nlb b;
        char err[256];
        proxy_nlb_init(&b);
        struct nfp_kernel k = { .lookup = fake_kernel, .exists = fake_exists };
        (void)proxy_nft_translate_for((const char *)data, size, &b, &k, err, sizeof(err));
        proxy_nlb_release(&b);
        return 0;
}
