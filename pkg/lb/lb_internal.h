/* The scheduler state shared by the lb files. */
#ifndef SVCENV_LB_INTERNAL_H
#define SVCENV_LB_INTERNAL_H

#include <svcenv/lb.h>

#define LB_BUCKETS 256 /* sh and dh: CONFIG_IP_VS_{SH,DH}_TAB_BITS 8 */
#define LB_MH_SIZE 4093 /* mh: primes[CONFIG_IP_VS_MH_TAB_INDEX 12 - 8] */
#define LB_MH_BITS 6 /* mh: CONFIG_IP_VS_MH_TAB_INDEX / 2 */

/* a destination's identity, to find it again after the list changed */
struct lb_ident {
        uint8_t addr[16];
        uint8_t addr_len;
        uint16_t port;
};

struct se_lb {
        enum se_lb_kind kind;
        unsigned flags;
        uint64_t rng; /* random, p2c */
        size_t n; /* destinations at the last update */
        struct lb_ident *idents; /* their identities, n of them (rr) */
        /* rr and wrr: the last chosen index, -1 for the list head */
        long cursor;
        int wrr_cw, wrr_mw, wrr_di;
        /* sh, dh, mh: bucket -> destination index, -1 for none */
        int32_t *table;
        size_t table_size;
};

/* rr / wrr (lb_rr.c) */
void lb_rr_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n);
int lb_rr_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n);
void lb_wrr_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n);
int lb_wrr_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n);

/* lc, wlc, sed, nq, random, p2c (lb_conn.c) */
int lb_lc_pick(const struct se_lb_dest *d, size_t n);
int lb_wlc_pick(const struct se_lb_dest *d, size_t n);
int lb_sed_pick(const struct se_lb_dest *d, size_t n);
int lb_nq_pick(const struct se_lb_dest *d, size_t n);
int lb_random_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n);
int lb_p2c_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n);

/* sh, dh, mh (lb_hash.c) */
int lb_hash_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n);
int lb_hash_pick(const struct se_lb *lb, const struct se_lb_dest *d, size_t n,
                 const struct se_lb_key *key);

/* IPVS's fold of an address into 32 bits (host order): IPv4 as is, IPv6 the
 * XOR of its four words */
uint32_t lb_addr_fold(const uint8_t *addr, uint8_t len);

#endif
