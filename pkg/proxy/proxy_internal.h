/* Private helpers shared by the proxy writers. */
#ifndef SVCENV_PROXY_INTERNAL_H
#define SVCENV_PROXY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <svcenv/hashmap.h>
#include <svcenv/proxy.h>
#include <svcenv/strv.h>

/* The endpoint sets kube-proxy's CategorizeEndpoints gives one service
 * port: arrays of pointers into sp->eps, in sp->eps order (so "ip:port"
 * order; upstream's merged list is in map order, ours is sorted). */
#define PROXY_CAT_INLINE 16
struct proxy_categories {
        const struct se_proxy_endpoint **cluster, **local, **reachable;
        uint32_t n_cluster, n_local, n_reachable;
        bool has_any;
        /* the arrays of a service with few endpoints (no malloc per service) */
        const struct se_proxy_endpoint *small[3 * PROXY_CAT_INLINE];
};

/* Fills c (its arrays in c itself or allocated: do not copy c; release
 * with proxy_categories_release). 0 or -ENOMEM. */
int proxy_categorize(const struct se_proxy_svcport *sp, const struct se_proxy_options *opt,
                     struct proxy_categories *c);
void proxy_categories_release(struct proxy_categories *c);

/* ServicePort.ExternallyAccessible / UsesClusterEndpoints / UsesLocalEndpoints */
bool proxy_externally_accessible(const struct se_proxy_svcport *sp);
bool proxy_uses_cluster(const struct se_proxy_svcport *sp);
bool proxy_uses_local(const struct se_proxy_svcport *sp);

/* The local-traffic detector's CIDR for the family, NULL when none. */
const struct se_cidr *proxy_cluster_cidr(const struct se_proxy_options *opt, enum se_ip_family fam);
/* --nodeport-addresses for one family, as kube-proxy's NodePortAddresses:
 * NodePorts on every local address (MatchAll) when no CIDR of the family is
 * given (`primary` gives the family's first node IP unless there is none
 * or it is loopback) or one of them is 0.0.0.0/0 or ::/0. */
bool proxy_nodeport_all(const struct se_proxy_options *opt, enum se_ip_family fam);
/* Otherwise, whether the node IP opt->node_ips[i] takes NodePorts. */
bool proxy_nodeport_ip(const struct se_proxy_options *opt, unsigned i);
/* Text of the masquerade mark ("0x00004000" for bit 14, like Go's %#08x). */
void proxy_mark_text(const struct se_proxy_options *opt, char out[16]);
/* Canonical "ip/prefix" text of c. */
void proxy_cidr_text(const struct se_cidr *c, char *out, size_t size);

/* Partial syncs (proxy_tracker.c). A service's own nat chain lines start at
 * chains[chains_at] and its rules at rules[rules_at]: remembers them as
 * pending and, when they equal what the last successful sync wrote (and no
 * full sync is due), truncates them from the buffers. 0 or -ENOMEM. */
int proxy_tracker_segment(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                          struct se_strbuf *chains, size_t chains_at, struct se_strbuf *rules,
                          size_t rules_at);
/* Records the names text defines (as a segment does, without a digest)
 * under key: what a sync writes outside any service (nft's base chains and
 * global maps), so proxy_tracker_gone() keeps them. 0 or -ENOMEM. */
int proxy_tracker_names(struct se_proxy_tracker *tr, const char *key, const char *text, size_t len);
/* Carries the names recorded under key by the last applied sync over to
 * this one (a partial sync keeps what a full one recorded). 0 or -ENOMEM. */
int proxy_tracker_keep(struct se_proxy_tracker *tr, const char *key);
/* Appends to ret the names sp's segment had in the last applied sync (none
 * when it had no segment). 0 or -ENOMEM. */
int proxy_tracker_prev(const struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                       struct se_strv *ret);
/* Adds every name the last successful sync defined (and the seeded ones)
 * to names; the names are written into store first (keys and values point
 * into it: keep store, unchanged, while names is used). 0 or -ENOMEM. */
int proxy_tracker_known(const struct se_proxy_tracker *tr, struct se_strbuf *store,
                        struct se_hashmap *names);
/* The first 8 characters of the base32 of d[0..4] (no NUL). */
void proxy_base32_8(const uint8_t d[5], char out[8]);
/* Decimal text of v into out (>= 11 bytes, no NUL); returns its length. */
size_t proxy_int_text(int32_t v, char *out);
/* Names (sorted) the last successful sync defined that this one does not:
 * iptables chains, or nft "chain NAME" / "set NAME" / "map NAME". */
int proxy_tracker_gone(struct se_proxy_tracker *tr, struct se_strv *gone);
/* Whether the sync being built is full. */
bool proxy_tracker_full(const struct se_proxy_tracker *tr);
/* Starts a sync: forgets any pending state of an unfinished one. */
void proxy_tracker_begin(struct se_proxy_tracker *tr);
/* The sync being built defines chains only in the chain parts of its
 * segments (iptables: ":NAME" lines; the rules are "-A" lines): names are
 * not looked for in the rules. */
void proxy_tracker_chains_only(struct se_proxy_tracker *tr);
/* After a full sync's segments were written (proxy_tracker_segment with
 * the writer's buffers), part 0 (their chain lines) or 1 (their rules) has
 * moved: it is now in buf, each segment's offset plus shift. The last move
 * must put both parts into the sync's output (se_proxy_tracker_done takes
 * it); buf NULL: the segments are lost (a failed write). */
void proxy_tracker_moved(struct se_proxy_tracker *tr, int part, const struct se_strbuf *buf,
                         size_t shift);
/* Room for n bytes of segments and about that many entries (service
 * ports) in the sync being built (a hint). */
void proxy_tracker_reserve(struct se_proxy_tracker *tr, size_t n, size_t entries);
/* Appends `:CHAIN` + `-X CHAIN` for every chain of the last successful sync
 * that this one no longer writes. */
int proxy_tracker_deletions(struct se_proxy_tracker *tr, struct se_strbuf *chains,
                            struct se_strbuf *rules);

/* Smaller partial syncs (proxy_topdiff.c): the top-level chains of one
 * table as the last applied sync left them. */
#define PROXY_TOP_MAX 8
struct proxy_top_table {
        struct se_strv rules[PROXY_TOP_MAX]; /* "-A CHAIN ..." lines, in order */
        bool declared[PROXY_TOP_MAX];
};
/* A carried sync's edit of one top-level chain, made to cur once applied:
 * del rules from old index at replaced by ins (owned). */
struct proxy_top_op {
        int table, chain;
        size_t at, del;
        struct se_strv ins;
};
struct proxy_top {
        struct proxy_top_table cur[2], pend[2]; /* [0] filter, [1] nat */
        bool known; /* cur is what the kernel has (an applied sync recorded it) */
        bool minimal; /* se_proxy_tracker_set_minimal() */
        struct proxy_top_op *ops; /* the carried sync being built's edits */
        size_t n_ops, cap_ops;
};
void proxy_top_release(struct proxy_top_table t[2]);
/* Appends the body of one table (chain lines then rules, no header) for
 * names[] (the table's top-level chains): as built on full syncs, else
 * with unchanged top chains left out and changed ones edited rule by rule
 * (see proxy_topdiff.c). Records what the kernel will have in top->pend. */
int proxy_top_write(struct proxy_top *top, bool partial, int table, const char *const *names,
                    size_t n_names, const char *chains, size_t nc, const char *rules, size_t nr,
                    struct se_strbuf *out);
/* Carried syncs (proxy_topcarry.c): the rules of service spn in the
 * top-level chains names[] of table (0 filter, 1 nat) become those of
 * rules ("-A CHAIN ..." lines, a full sync's for the service; none: it is
 * removed). Appends the `-D` / `-I` lines that do it to out and records
 * them; call in table order of the services. -EAGAIN when cur is not
 * known. */
int proxy_top_carry_port(struct proxy_top *top, int table, const char *const *names, size_t n_names,
                         const char *spn, const char *rules, size_t nr, struct se_strbuf *out);
/* Ends a carried sync: applied, its edits are made to cur; else dropped. */
void proxy_top_carry_done(struct proxy_top *top, bool applied);
/* nft: records the elements of verdict map idx (0..PROXY_TOP_MAX-1) from
 * the writer's element text; on a partial sync whose previous state is
 * known appends `delete element` lines (elements gone or changed) to del
 * and `add element` lines to add and returns 1 (the map must not be
 * rewritten); 0: write the map whole; < 0 on error. */
int proxy_top_elems(struct proxy_top *top, bool partial, int idx, const char *family,
                    const char *table, const char *map, const char *text, size_t len,
                    struct se_strbuf *del, struct se_strbuf *add);
/* Carried syncs (iptables, se_proxy_iptables_sync_changed): a digest of
 * the top-level rules of the port whose segment was recorded last. */
void proxy_tracker_set_top(struct se_proxy_tracker *tr, const uint8_t top[16]);
/* Starts a carried sync: only the given ports are written, each against
 * its entry of the last applied sync. -EAGAIN when the tracker cannot
 * (a full sync is due). se_proxy_tracker_done ends it as any sync. */
int proxy_tracker_carry_begin(struct se_proxy_tracker *tr);
/* Drops a carried sync being built (the caller syncs another way). */
void proxy_tracker_carry_abort(struct se_proxy_tracker *tr);
/* One port of a carried sync with its new chain lines and rules: *same
 * when they equal the last applied ones (write nothing); otherwise
 * recorded, and the chains it no longer has appended to gone_chains
 * (":NAME - [0:0]") and gone_rules ("-X NAME"). -EAGAIN when the port is
 * unknown or its top-level rules (digest top) changed: sync another way.
 * top NULL: not compared (nft edits its top-level elements itself). */
int proxy_tracker_carry(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                        const uint8_t top[16], const char *chains, size_t nc, const char *rules,
                        size_t nr, struct se_strbuf *gone_chains, struct se_strbuf *gone_rules,
                        bool *same);
/* As proxy_tracker_carry, but a change of the top-level rules is carried
 * too (iptables: the caller edits them, proxy_top_carry_port): *top_changed
 * says so, and the digest top is recorded with the port. */
int proxy_tracker_carry_top(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                            const uint8_t top[16], const char *chains, size_t nc, const char *rules,
                            size_t nr, struct se_strbuf *gone_chains, struct se_strbuf *gone_rules,
                            bool *same, bool *top_changed);
/* A port a carried sync adds: its segment recorded (with the digest of its
 * top-level rules, top, unless NULL), to be known once applied. -EAGAIN
 * when the tracker already knows it. */
int proxy_tracker_carry_add(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                            const char *chains, size_t nc, const char *rules, size_t nr);
int proxy_tracker_carry_add_top(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                                const uint8_t top[16], const char *chains, size_t nc,
                                const char *rules, size_t nr);
/* A port a carried sync removes: every name its entry defined
 * appended to gone_chains and gone_rules as proxy_tracker_carry does; the
 * entry is forgotten once applied. -EAGAIN when the tracker does not know
 * it. */
int proxy_tracker_carry_remove(struct se_proxy_tracker *tr, const struct se_proxy_svcport *sp,
                               struct se_strbuf *gone_chains, struct se_strbuf *gone_rules);
/* The tracker's top-chain state; NULL when minimal partial syncs are off. */
struct proxy_top *proxy_tracker_top(struct se_proxy_tracker *tr);

/* nft: the name the writer gives sp's chain of prefix ("service-",
 * "local-", "external-", "firewall-") or, with ep, ep's chain (prefix
 * "endpoint-", "affinity-"): prefix + "HASH8-ns/name/proto/port[__ip/port]"
 * (proxy_nft.c). out >= 340 bytes. 0 or -EIO. */
#define PROXY_NFT_NAME_SIZE 340
int proxy_nft_chain_name(const struct se_proxy_svcport *sp, const char *prefix,
                         const struct se_proxy_endpoint *ep, char *out, size_t size);
/* A carried nft sync (the store said which services changed), as
 * se_proxy_iptables_sync_changed: writes only ports[] (every port of each
 * changed service as it is now; was[i] the same port as the last applied
 * table has it; was[i] NULL: a port added, ports[i] NULL: one removed,
 * its chains, maps and elements deleted): their chains and maps when they changed, what they
 * dropped deleted, and single element edits of the top-level verdict maps
 * and sets for what they changed there. hairpin_refs counts the hairpin
 * elements of the whole last table (proxy_nft_hairpin_count): one that
 * another service still has stays. -EAGAIN when the tracker cannot (a
 * full sync due, a port it does not know): the caller syncs from the
 * whole table. Then se_proxy_tracker_done as after any sync. Nothing to
 * change: out gets nothing. */
int proxy_nft_sync_changed(const struct se_proxy_svcport *const *ports,
                           const struct se_proxy_svcport *const *was, size_t n,
                           enum se_ip_family family, const struct se_proxy_options *opt,
                           const struct se_hashmap *hairpin_refs, struct se_proxy_tracker *tracker,
                           struct se_strbuf *out);
/* Adds delta (1 or -1) to the count of each hairpin-connections element
 * sp writes (its local reachable endpoints) in refs (keys and values
 * owned: release with proxy_nft_hairpin_release). 0 or -ENOMEM. */
int proxy_nft_hairpin_count(struct se_hashmap *refs, const struct se_proxy_svcport *sp,
                            const struct se_proxy_options *opt, int delta);
void proxy_nft_hairpin_release(struct se_hashmap *refs);
/* proxy_split.c: iptables-restore --noflush input rewritten for the
 * nf_tables backend as several COMMIT blocks per large table (see the file
 * for why), each chain still rewritten whole in one block; small tables,
 * and tables holding lines other than `:`, `-A` and `-X`, are copied as
 * they are. Appends to out: 0, -ENOMEM or -E2BIG. */
int proxy_restore_split(const char *in, size_t n, struct se_strbuf *out);

/* In-kernel schedulers of the nftables rules (proxy_ksched.c): which one a
 * port's dispatch over n_eps endpoints uses (kube-proxy's numgen random
 * unless the Service asks for rr, sh, dh or mh that fits). */
enum proxy_ksched { PROXY_KS_RANDOM, PROXY_KS_RR, PROXY_KS_HASH };
enum proxy_ksched proxy_ksched_of(const struct se_proxy_svcport *sp, uint32_t n_eps);
#define PROXY_MH_SLOTS 4093 /* pkg/lb's (IPVS's) Maglev table */
/* jhash's fixed seed: nft_jhash draws a random one when a rule has none */
#define PROXY_JHASH_SEED 0x5c4ed001u
/* jhash's input for sp: "ip saddr", "ip6 saddr . tcp sport", "ip daddr" */
const char *proxy_ksched_key(const struct se_proxy_svcport *sp, bool v6, char *buf, size_t size);
/* sp's bucket table (sh/dh/mh) over eps[0..n) as IPVS fills it: *ret (the
 * caller frees it) holds *size endpoint indexes, -1 for none. 0, -ENOMEM,
 * -EINVAL (an endpoint IP that does not parse), -E2BIG. */
int proxy_ksched_buckets(const struct se_proxy_svcport *sp,
                         const struct se_proxy_endpoint *const *eps, uint32_t n, int32_t **ret,
                         size_t *size);
/* include/linux/jhash.h's jhash() on a little-endian machine */
uint32_t proxy_jhash(const void *key, uint32_t len, uint32_t seed);
/* The bucket nft's `jhash KEY mod m seed PROXY_JHASH_SEED` gives a packet
 * src:sport -> dst (both of one family) for sp's key. */
uint32_t proxy_ksched_bucket(const struct se_proxy_svcport *sp, const struct se_ip *src,
                             uint16_t sport, const struct se_ip *dst, uint32_t m);

#endif
