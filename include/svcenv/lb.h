/* Connection schedulers: the kernel IPVS schedulers (rr, wrr, lc, wlc, sed,
 * nq, dh, sh, mh) computed exactly as net/netfilter/ipvs/ defines them, plus
 * kube-proxy's uniform random choice and power-of-two-choices. Pure: no I/O,
 * no clock, no locks.
 *
 * The caller owns the destination list (struct se_lb_dest[]) and keeps its
 * connection counters; a scheduler owns only its own state (a cursor, a
 * bucket table). List order matters as in IPVS: lc/nq break ties to the
 * first destination, rr/wrr walk the list, sh/dh/mh fill their tables in it.
 *
 * Call se_lb_update() whenever the list itself changes (entries, order,
 * weights); counters and the overloaded flag may change between picks
 * without it. One struct se_lb is not thread-safe: callers that pick from
 * several threads hold a lock around se_lb_pick() (the kernel holds the
 * service's sched_lock for the same reason). */
#ifndef SVCENV_LB_H
#define SVCENV_LB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum se_lb_kind {
        SE_LB_RR,
        SE_LB_WRR,
        SE_LB_LC,
        SE_LB_WLC,
        SE_LB_SED,
        SE_LB_NQ,
        SE_LB_DH,
        SE_LB_SH,
        SE_LB_MH,
        SE_LB_RANDOM, /* kube-proxy iptables/nftables: uniform over the eligible */
        SE_LB_P2C, /* two random eligible, the one with fewer active connections */
};

/* sh/mh flags, as ipvsadm's sh-fallback/sh-port and mh-fallback/mh-port */
#define SE_LB_FALLBACK 0x1u /* an unavailable bucket probes on instead of failing */
#define SE_LB_PORT     0x2u /* the source port is hashed with the source address */

/* One destination. addr is 4 (IPv4) or 16 (IPv6) bytes in network order,
 * port in host order. weight 0 quiesces it (no new connections), as IPVS. */
struct se_lb_dest {
        uint8_t addr[16];
        uint8_t addr_len;
        uint16_t port;
        int32_t weight;
        bool overloaded; /* skipped by every scheduler (IPVS's OVERLOAD flag) */
        uint32_t active; /* IPVS activeconns: established connections */
        uint32_t inactive; /* IPVS inactconns: the rest (UDP stays here) */
};

/* What a packet offers to hash: the client's address and port, and the
 * destination address (dh). Addresses as in se_lb_dest. */
struct se_lb_key {
        uint8_t saddr[16], daddr[16];
        uint8_t addr_len;
        uint16_t sport;
};

struct se_lb;

/* Parses "rr", "wlc", "sh", "sh:port,fallback" / "sh-port"... : the name, then
 * optional flags after ':' or as ipvsadm's "-port"/"-fallback" suffixes
 * (only sh and mh take flags). 0, or -EINVAL for an unknown name or flag. */
int se_lb_parse(const char *spec, enum se_lb_kind *kind, unsigned *flags);
/* "rr", "wrr", ... */
const char *se_lb_name(enum se_lb_kind kind);

/* A scheduler; seed drives random and p2c (deterministic for tests). NULL
 * on allocation failure. se_lb_free(NULL) is a no-op; returns NULL. */
struct se_lb *se_lb_new(enum se_lb_kind kind, unsigned flags, uint64_t seed);
struct se_lb *se_lb_free(struct se_lb *lb);

/* The list changed to d[0..n): rebuilds sh/dh/mh tables and repairs the
 * rr/wrr position as the kernel does on add/del/update of a destination.
 * 0, -ENOMEM, or -E2BIG (more destinations than mh's table holds). */
int se_lb_update(struct se_lb *lb, const struct se_lb_dest *d, size_t n);

/* The destination for a new connection: its index in d, or -1 when none is
 * available ("no destination available" in IPVS). d and n must be those of
 * the last se_lb_update() (counters and overloaded may differ). key may be
 * NULL for schedulers that hash nothing. */
int se_lb_pick(struct se_lb *lb, const struct se_lb_dest *d, size_t n, const struct se_lb_key *key);

/* The bucket table of an sh, dh or mh scheduler as its last se_lb_update()
 * filled it: *size buckets (256 for sh/dh, mh's prime), each the index in
 * that list of the destination the bucket sends to, -1 for none. What the
 * nftables writer copies into an in-kernel bucket map. Owned by lb, valid
 * until its next update or free; NULL (and *size 0) for other kinds or
 * before the first update. */
const int32_t *se_lb_buckets(const struct se_lb *lb, size_t *size);

/* IPVS's overhead of a destination for lc/wlc: active * 256 + inactive */
uint64_t se_lb_overhead(const struct se_lb_dest *d);

/* The kernel's hsiphash on 64-bit machines (SipHash-1-3, 32-bit result),
 * exposed for the mh table and its tests. */
uint32_t se_lb_hsiphash(const void *data, size_t len, uint64_t k0, uint64_t k1);

#endif
