/* The hashing schedulers: destination hashing (ip_vs_dh.c), source hashing
 * (ip_vs_sh.c) and Maglev hashing (ip_vs_mh.c), with the kernel's own hash
 * functions so a client lands where IPVS would put it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>

#include "lb_internal.h"

uint32_t lb_addr_fold(const uint8_t *addr, uint8_t len)
{
        uint32_t w[4] = { 0 };
        memcpy(w, addr, len == 16 ? 16 : 4);
        uint32_t folded = len == 16 ? w[0] ^ w[1] ^ w[2] ^ w[3] : w[0];
        /* ntohl of the folded (network order) word */
        const uint8_t *b = (const uint8_t *)&folded;
        return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* include/linux/hash.h on machines without an arch hash: the top bits of
 * val * GOLDEN_RATIO_32. (Kernels before 4.x multiplied by 2654435761 and
 * kept the low bits; dh and sh use hash_32 now.) */
static uint32_t hash_32(uint32_t val, unsigned bits)
{
        return (val * 0x61C88647u) >> (32 - bits);
}

static uint64_t rol64(uint64_t v, unsigned s)
{
        return v << s | v >> (64 - s);
}

#define SIPROUND                                              \
 do {                                                         \
  v0 += v1, v1 = rol64(v1, 13), v1 ^= v0, v0 = rol64(v0, 32); \
  v2 += v3, v3 = rol64(v3, 16), v3 ^= v2;                     \
  v0 += v3, v3 = rol64(v3, 21), v3 ^= v0;                     \
  v2 += v1, v1 = rol64(v1, 17), v1 ^= v2, v2 = rol64(v2, 32); \
 } while (0)

/* lib/siphash.c's hsiphash where longs are 64 bits: SipHash with one
 * compression and three finalization rounds, the 64-bit result cut to 32. */
uint32_t se_lb_hsiphash(const void *data, size_t len, uint64_t k0, uint64_t k1)
{
        const uint8_t *p = data;
        uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
        uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
        uint64_t b = (uint64_t)len << 56;
        size_t i = 0;
        for (; i + 8 <= len; i += 8) {
                uint64_t m = 0;
                for (unsigned j = 0; j < 8; j++)
                        m |= (uint64_t)p[i + j] << (8 * j);
                v3 ^= m;
                SIPROUND;
                v0 ^= m;
        }
        for (unsigned j = 0; i + j < len; j++)
                b |= (uint64_t)p[i + j] << (8 * j);
        v3 ^= b;
        SIPROUND;
        v0 ^= b;
        v2 ^= 0xff;
        SIPROUND;
        SIPROUND;
        SIPROUND;
        return (uint32_t)((v0 ^ v1) ^ (v2 ^ v3));
}

/* ip_vs_mh.c's fixed keys (generate_hash_secret) */
#define MH_K1 2654435761ULL
#define MH_K2 2654446892ULL

/* ip_vs_mh_hashkey: the 32-bit sum offset + port + folded address, hashed
 * in host byte order as the kernel passes &v. */
static uint32_t mh_hashkey(const uint8_t *addr, uint8_t len, uint16_t port, uint64_t key,
                           uint32_t offset)
{
        uint32_t v = offset + port + lb_addr_fold(addr, len);
        uint8_t le[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
        return se_lb_hsiphash(le, 4, key, key);
}

static bool unavailable(const struct se_lb_dest *d)
{
        return d->weight <= 0 || d->overloaded;
}

static int gcd(int a, int b)
{
        while (b) {
                int t = a % b;
                a = b;
                b = t;
        }
        return a;
}

static int fls32(uint32_t x)
{
        return x ? 32 - __builtin_clz(x) : 0;
}

/* Maglev population (ip_vs_mh_permutate + ip_vs_mh_populate): each
 * destination walks its own permutation (offset, skip from two hashes of its
 * address and port) and claims the next free slot, taking "turns" slots a
 * round in proportion to its weight reduced by the gcd and a shift that keeps
 * the largest under 2^LB_MH_BITS. */
static int mh_populate(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        for (size_t i = 0; i < LB_MH_SIZE; i++)
                lb->table[i] = -1;
        int g = 0, maxw = 0;
        for (size_t i = 0; i < n; i++) {
                if (d[i].weight > 0)
                        g = g > 0 ? gcd(d[i].weight, g) : d[i].weight;
                if (d[i].weight > maxw)
                        maxw = d[i].weight;
        }
        if (g < 1)
                return 0;
        int shift = fls32((uint32_t)(maxw / g)) - LB_MH_BITS;
        if (shift < 0)
                shift = 0;
        uint32_t *perm = se_calloc(n, sizeof(*perm) * 2);
        int *turns = se_calloc(n, sizeof(*turns));
        uint8_t *taken = se_calloc(LB_MH_SIZE, 1);
        if (!perm || !turns || !taken) {
                free(perm);
                free(turns);
                free(taken);
                return -ENOMEM;
        }
        uint32_t *skip = perm + n;
        for (size_t i = 0; i < n; i++) {
                perm[i] = mh_hashkey(d[i].addr, d[i].addr_len, d[i].port, MH_K1, 0) % LB_MH_SIZE;
                skip[i] = mh_hashkey(d[i].addr, d[i].addr_len, d[i].port, MH_K2, 0) %
                                  (LB_MH_SIZE - 1) +
                          1;
                int lw = d[i].weight > 0 ? d[i].weight : 0;
                int t = (lw / g) >> shift;
                turns[i] = t ? t : (lw != 0);
        }
        size_t filled = 0, i = 0;
        int dt_count = 0;
        while (filled < LB_MH_SIZE) {
                if (turns[i] < 1) {
                        i = (i + 1) % n;
                        continue;
                }
                uint32_t c = perm[i];
                while (taken[c]) {
                        perm[i] += skip[i];
                        if (perm[i] >= LB_MH_SIZE)
                                perm[i] -= LB_MH_SIZE;
                        c = perm[i];
                }
                taken[c] = 1;
                lb->table[c] = (int32_t)i;
                filled++;
                if (++dt_count >= turns[i]) {
                        dt_count = 0;
                        i = (i + 1) % n;
                }
        }
        free(perm);
        free(turns);
        free(taken);
        return 0;
}

int lb_hash_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        size_t size = lb->kind == SE_LB_MH ? LB_MH_SIZE : LB_BUCKETS;
        if (lb->kind == SE_LB_MH && n > LB_MH_SIZE)
                return -E2BIG;
        if (!lb->table) {
                lb->table = se_calloc(size, sizeof(*lb->table));
                if (!lb->table)
                        return -ENOMEM;
                lb->table_size = size;
        }
        if (lb->kind == SE_LB_MH)
                return mh_populate(lb, d, n);
        /* sh: each destination takes weight consecutive buckets (at least
         * one: the kernel moves on once its count reaches the weight), round
         * robin over the list; dh: one bucket each. */
        size_t at = 0;
        int count = 0;
        for (size_t b = 0; b < LB_BUCKETS; b++) {
                if (n == 0) {
                        lb->table[b] = -1;
                        continue;
                }
                lb->table[b] = (int32_t)at;
                if (lb->kind == SE_LB_DH || ++count >= d[at].weight) {
                        at = (at + 1) % n;
                        count = 0;
                }
        }
        return 0;
}

static uint32_t sh_hashkey(const struct se_lb_key *k, uint16_t port, uint32_t offset)
{
        uint32_t v = (uint32_t)port + lb_addr_fold(k->saddr, k->addr_len);
        return (offset + hash_32(v, 8)) & (LB_BUCKETS - 1);
}

/* sh-fallback: probe (ihash + offset) for offset 0..255, rehashing with
 * that offset, until an available destination (an empty bucket ends it). */
static int sh_pick(const struct se_lb *lb, const struct se_lb_dest *d, const struct se_lb_key *k)
{
        uint16_t port = lb->flags & SE_LB_PORT ? k->sport : 0;
        uint32_t ihash = sh_hashkey(k, port, 0);
        int32_t at = lb->table[ihash];
        if (at < 0)
                return -1;
        if (!unavailable(&d[at]))
                return at;
        if (!(lb->flags & SE_LB_FALLBACK))
                return -1;
        for (uint32_t off = 0; off < LB_BUCKETS; off++) {
                uint32_t roff = (off + ihash) % LB_BUCKETS;
                at = lb->table[sh_hashkey(k, port, roff)];
                if (at < 0)
                        break;
                if (!unavailable(&d[at]))
                        return at;
        }
        return -1;
}

static int mh_pick(const struct se_lb *lb, const struct se_lb_dest *d, const struct se_lb_key *k)
{
        uint16_t port = lb->flags & SE_LB_PORT ? k->sport : 0;
        uint32_t ihash = mh_hashkey(k->saddr, k->addr_len, port, MH_K1, 0) % LB_MH_SIZE;
        int32_t at = lb->table[ihash];
        if (at < 0)
                return -1;
        if (!unavailable(&d[at]))
                return at;
        if (!(lb->flags & SE_LB_FALLBACK))
                return -1;
        for (uint32_t off = 0; off < LB_MH_SIZE; off++) {
                uint32_t roff = (off + ihash) % LB_MH_SIZE;
                at = lb->table[mh_hashkey(k->saddr, k->addr_len, port, MH_K1, roff) % LB_MH_SIZE];
                if (at < 0)
                        break;
                if (!unavailable(&d[at]))
                        return at;
        }
        return -1;
}

int lb_hash_pick(const struct se_lb *lb, const struct se_lb_dest *d, size_t n,
                 const struct se_lb_key *key)
{
        if (!key || !lb->table || n == 0)
                return -1;
        if (lb->kind == SE_LB_SH)
                return sh_pick(lb, d, key);
        if (lb->kind == SE_LB_MH)
                return mh_pick(lb, d, key);
        /* dh: the destination address alone, no fallback */
        int32_t at = lb->table[hash_32(lb_addr_fold(key->daddr, key->addr_len), 8)];
        return at < 0 || unavailable(&d[at]) ? -1 : at;
}
