/* The schedulers that count connections: least connection (ip_vs_lc.c),
 * weighted least connection (ip_vs_wlc.c), shortest expected delay
 * (ip_vs_sed.c), never queue (ip_vs_nq.c); and the two random ones:
 * kube-proxy's uniform choice and power of two choices. */
#include "lb_internal.h"

uint64_t se_lb_overhead(const struct se_lb_dest *d)
{
        /* "active connections is 256 times higher than that of inactive"
         * (include/net/ip_vs.h; ip_vs_lc.c's comment saying <<5 is stale) */
        return ((uint64_t)d->active << 8) + d->inactive;
}

/* Minimum overhead over the entries that are neither overloaded nor of
 * weight 0; strict <, so a tie goes to the first in list order. */
int lb_lc_pick(const struct se_lb_dest *d, size_t n)
{
        int least = -1;
        uint64_t loh = 0;
        for (size_t i = 0; i < n; i++) {
                if (d[i].overloaded || d[i].weight == 0)
                        continue;
                uint64_t doh = se_lb_overhead(&d[i]);
                if (least < 0 || doh < loh) {
                        least = (int)i;
                        loh = doh;
                }
        }
        return least;
}

/* The first usable entry, then any later one whose overhead/weight is
 * smaller, compared crosswise in 128 bits as the kernel does in s64
 * (loh * w_dest > doh * w_least). overhead() is the scheduler's own. */
static int weighted_least(const struct se_lb_dest *d, size_t n,
                          uint64_t (*overhead)(const struct se_lb_dest *))
{
        size_t i = 0;
        while (i < n && (d[i].overloaded || d[i].weight <= 0))
                i++;
        if (i == n)
                return -1;
        size_t least = i;
        uint64_t loh = overhead(&d[i]);
        for (i++; i < n; i++) {
                if (d[i].overloaded)
                        continue;
                uint64_t doh = overhead(&d[i]);
                __int128 lhs = (__int128)loh * d[i].weight;
                __int128 rhs = (__int128)doh * d[least].weight;
                if (lhs > rhs) {
                        least = i;
                        loh = doh;
                }
        }
        return (int)least;
}

int lb_wlc_pick(const struct se_lb_dest *d, size_t n)
{
        return weighted_least(d, n, se_lb_overhead);
}

/* SED's expected delay counts only active connections, plus the new one. */
static uint64_t sed_overhead(const struct se_lb_dest *d)
{
        return (uint64_t)d->active + 1;
}

int lb_sed_pick(const struct se_lb_dest *d, size_t n)
{
        return weighted_least(d, n, sed_overhead);
}

/* The first idle entry (no active connection) in list order at once;
 * otherwise SED over the usable entries. */
int lb_nq_pick(const struct se_lb_dest *d, size_t n)
{
        int least = -1;
        uint64_t loh = 0;
        for (size_t i = 0; i < n; i++) {
                if (d[i].overloaded || d[i].weight == 0)
                        continue;
                uint64_t doh = sed_overhead(&d[i]);
                if (d[i].active == 0)
                        return (int)i;
                if (least < 0 || (__int128)loh * d[i].weight > (__int128)doh * d[least].weight) {
                        least = (int)i;
                        loh = doh;
                }
        }
        return least;
}

/* splitmix64: small, seedable, good enough to spread connections */
static uint64_t next_random(struct se_lb *lb)
{
        uint64_t z = (lb->rng += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
}

static size_t count_usable(const struct se_lb_dest *d, size_t n)
{
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                k += !d[i].overloaded && d[i].weight > 0;
        return k;
}

/* the r-th usable entry */
static int nth_usable(const struct se_lb_dest *d, size_t n, size_t r)
{
        for (size_t i = 0; i < n; i++)
                if (!d[i].overloaded && d[i].weight > 0 && r-- == 0)
                        return (int)i;
        return -1;
}

/* Uniform over the usable entries, as kube-proxy's statistic/numgen rules
 * spread new connections (weights are all 1 there). */
int lb_random_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        size_t k = count_usable(d, n);
        if (k == 0)
                return -1;
        return nth_usable(d, n, next_random(lb) % k);
}

/* Two distinct usable entries at random; the one with fewer active
 * connections relative to its weight, the first drawn on a tie. */
int lb_p2c_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n)
{
        size_t k = count_usable(d, n);
        if (k < 2)
                return k ? nth_usable(d, n, 0) : -1;
        size_t r1 = next_random(lb) % k;
        size_t r2 = next_random(lb) % (k - 1);
        if (r2 >= r1)
                r2++;
        int a = nth_usable(d, n, r1), b = nth_usable(d, n, r2);
        __int128 la = (__int128)sed_overhead(&d[a]) * d[b].weight;
        __int128 lbw = (__int128)sed_overhead(&d[b]) * d[a].weight;
        return lbw < la ? b : a;
}
