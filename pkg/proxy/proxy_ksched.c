/* The schedulers the nftables rules run in the kernel (svcenv.io/scheduler
 * rr, sh, dh, mh): what the writer puts in a service's dispatch rule and
 * map, and what `svcenv trace` computes from them.
 *
 * rr is `numgen inc mod N` (one counter per rule: A, B, C, A, ...). sh, dh
 * and mh are `jhash KEY mod M seed S` into a map of M buckets filled as
 * IPVS fills its table (pkg/lb). The hash is nft_jhash's (include/linux/
 * jhash.h, then reciprocal_scale), not IPVS's hash_32 / hsiphash: the same
 * kind of pinning, other buckets. The seed is fixed, because nft_jhash
 * draws a random one when the rule gives none and the trace could not say
 * where a client goes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/lb.h>

#include "proxy_internal.h"

enum proxy_ksched proxy_ksched_of(const struct se_proxy_svcport *sp, uint32_t n_eps)
{
        if (!sp->sched_set)
                return PROXY_KS_RANDOM;
        switch (sp->sched) {
        case SE_LB_RR:
                return PROXY_KS_RR;
        case SE_LB_MH:
                /* more endpoints than Maglev's slots: IPVS refuses the
                 * service; the rules balance it as kube-proxy does */
                return n_eps > PROXY_MH_SLOTS ? PROXY_KS_RANDOM : PROXY_KS_HASH;
        case SE_LB_SH:
        case SE_LB_DH:
                return PROXY_KS_HASH;
        default:
                return PROXY_KS_RANDOM;
        }
}

const char *proxy_ksched_key(const struct se_proxy_svcport *sp, bool v6, char *buf, size_t size)
{
        const char *ip = v6 ? "ip6" : "ip";
        if (sp->sched == SE_LB_DH)
                snprintf(buf, size, "%s daddr", ip);
        else if (sp->sched_flags & SE_LB_PORT)
                snprintf(buf, size, "%s saddr . %s sport", ip, sp->proto);
        else
                snprintf(buf, size, "%s saddr", ip);
        return buf;
}

int proxy_ksched_buckets(const struct se_proxy_svcport *sp,
                         const struct se_proxy_endpoint *const *eps, uint32_t n, int32_t **ret,
                         size_t *size)
{
        *ret = NULL;
        *size = 0;
        struct se_lb_dest *d = se_calloc(n ? n : 1, sizeof(*d));
        struct se_lb *lb = se_lb_new(sp->sched, sp->sched_flags, 0);
        int r = d && lb ? 0 : -ENOMEM;
        /* the table depends on the destinations' addresses (mh) and on
         * their order; kube-proxy gives every real server weight 1 */
        for (uint32_t i = 0; r == 0 && i < n; i++) {
                struct se_ip ip;
                if (se_parse_ip(eps[i]->ip, &ip) < 0)
                        r = -EINVAL;
                d[i].addr_len = ip.family == SE_IPV6 ? 16 : 4;
                memcpy(d[i].addr, ip.addr, d[i].addr_len);
                d[i].port = (uint16_t)eps[i]->port;
                d[i].weight = 1;
        }
        if (r == 0)
                r = se_lb_update(lb, d, n);
        const int32_t *table = r == 0 ? se_lb_buckets(lb, size) : NULL;
        if (r == 0 && !table)
                r = -EINVAL;
        if (r == 0 && !(*ret = se_malloc(*size * sizeof(**ret))))
                r = -ENOMEM;
        if (r == 0)
                memcpy(*ret, table, *size * sizeof(**ret));
        else
                *size = 0;
        se_lb_free(lb);
        free(d);
        return r;
}

static uint32_t rol32(uint32_t w, unsigned s)
{
        return w << s | w >> (32 - s);
}

/* lookup3's mix and final, as include/linux/jhash.h has them */
#define JH_MIX(a, b, c)                                         \
 do {                                                           \
  a -= c, a ^= rol32(c, 4), c += b, b -= a, b ^= rol32(a, 6);   \
  a += c, c -= b, c ^= rol32(b, 8), b += a, a -= c;             \
  a ^= rol32(c, 16), c += b, b -= a, b ^= rol32(a, 19), a += c; \
  c -= b, c ^= rol32(b, 4), b += a;                             \
 } while (0)
#define JH_FINAL(a, b, c)                                                 \
 do {                                                                     \
  c ^= b, c -= rol32(b, 14), a ^= c, a -= rol32(c, 11), b ^= a;           \
  b -= rol32(a, 25), c ^= b, c -= rol32(b, 16), a ^= c, a -= rol32(c, 4); \
  b ^= a, b -= rol32(a, 14), c ^= b, c -= rol32(b, 24);                   \
 } while (0)

/* 4 bytes as the kernel reads a u32 on a little-endian machine (x86,
 * arm64: where svcenv runs) */
static uint32_t le32(const uint8_t *k, size_t n)
{
        uint32_t v = 0;
        for (size_t i = 0; i < n && i < 4; i++)
                v |= (uint32_t)k[i] << (8 * i);
        return v;
}

uint32_t proxy_jhash(const void *key, uint32_t len, uint32_t seed)
{
        const uint8_t *k = key;
        uint32_t a, b, c;
        a = b = c = 0xdeadbeefu + len + seed;
        for (; len > 12; len -= 12, k += 12) {
                a += le32(k, 4);
                b += le32(k + 4, 4);
                c += le32(k + 8, 4);
                JH_MIX(a, b, c);
        }
        if (len == 0)
                return c;
        /* the last 1..12 bytes, missing ones as zero */
        a += le32(k, len);
        if (len > 4)
                b += le32(k + 4, len - 4);
        if (len > 8)
                c += le32(k + 8, len - 8);
        JH_FINAL(a, b, c);
        return c;
}

uint32_t proxy_ksched_bucket(const struct se_proxy_svcport *sp, const struct se_ip *src,
                             uint16_t sport, const struct se_ip *dst, uint32_t m)
{
        /* the registers nft_jhash reads: the address, then with the port
         * flag the port in network order padded to a 4-byte register
         * (nft_payload zeroes the rest of it) */
        uint8_t key[20] = { 0 };
        uint32_t alen = src->family == SE_IPV6 ? 16 : 4, len = alen;
        memcpy(key, sp->sched == SE_LB_DH ? dst->addr : src->addr, alen);
        if (sp->sched != SE_LB_DH && (sp->sched_flags & SE_LB_PORT)) {
                key[alen] = (uint8_t)(sport >> 8);
                key[alen + 1] = (uint8_t)sport;
                len += 4;
        }
        uint32_t h = proxy_jhash(key, len, PROXY_JHASH_SEED);
        return (uint32_t)(((uint64_t)h * m) >> 32); /* reciprocal_scale */
}
