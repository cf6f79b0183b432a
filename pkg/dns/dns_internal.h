/* dns_internal.h — what the files of pkg/dns share: the zone's shape, the
 * wire reader and the message writer. */
#ifndef SVCENV_DNS_INTERNAL_H
#define SVCENV_DNS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <svcenv/arena.h>
#include <svcenv/dns.h>
#include <svcenv/hashmap.h>

enum {
        DNS_T_A = 1,
        DNS_T_NS = 2,
        DNS_T_CNAME = 5,
        DNS_T_SOA = 6,
        DNS_T_PTR = 12,
        DNS_T_MX = 15,
        DNS_T_TXT = 16,
        DNS_T_AAAA = 28,
        DNS_T_SRV = 33,
        DNS_T_OPT = 41,
        DNS_T_IXFR = 251,
        DNS_T_AXFR = 252,
        DNS_T_ANY = 255,
};

enum {
        DNS_RC_NOERROR = 0,
        DNS_RC_FORMERR = 1,
        DNS_RC_SERVFAIL = 2,
        DNS_RC_NXDOMAIN = 3,
        DNS_RC_NOTIMP = 4,
        DNS_RC_REFUSED = 5,
        DNS_RC_BADVERS = 16,
};

#define DNS_HDR 12
/* The TXT record dns-version.<zone> answers (spec 2.2) and its fixed TTL. */
#define DNS_SCHEMA_VERSION "1.1.0"
#define DNS_VERSION_TTL    28800
/* More records of one type on one name cannot fit a 64 KiB message. */
#define DNS_MAX_RRS_PER_NAME 4096
/* How far an ExternalName chain inside the zone is followed. */
#define DNS_MAX_CHASE 8

/* ---- names ---- */

/* Lower-case presentation form of a wire name, no final dot ("" for the
 * root); bytes other than [!-~] and the characters . and \ are written as
 * \DDD. Returns the length or -ENAMETOOLONG when it does not fit cap
 * (including the NUL). */
int dns_name_text(const uint8_t *wire, size_t wlen, char *out, size_t cap);
/* Uncompressed wire form of a presentation name (no escapes; "" or "." is
 * the root). Labels 1..63 bytes, the whole ≤ 255. Returns the length or
 * -EINVAL. */
int dns_name_wire(const char *text, uint8_t out[SE_DNS_MAX_NAME]);
/* Reads the (possibly compressed) name at *off of msg into out as an
 * uncompressed wire name and moves *off past it. Pointers must go backwards,
 * at most 127 of them; the name ≤ 255. Length or -EBADMSG. */
int dns_read_name(const uint8_t *msg, size_t len, size_t *off, uint8_t out[SE_DNS_MAX_NAME]);
/* Moves *off past one name without decoding it. 0 or -EBADMSG. */
int dns_skip_name(const uint8_t *msg, size_t len, size_t *off);
/* True for a name the zone can hold as one label: 1..63 bytes of [a-z0-9-],
 * neither first nor last a dash (false for NULL). */
bool dns_label_ok(const char *s);
/* Length of an uncompressed wire name (with the root byte). */
size_t dns_wire_len(const uint8_t *wire);

/* The labels of a (possibly compressed) name in a message of any origin,
 * one at a time: what the autopath rewrite and the dig-style text share.
 * More lenient than dns_read_name (pointers may go forward, as some servers
 * write them) yet bounded: at most 64 pointers, the name with its root at
 * most SE_DNS_MAX_NAME bytes (serve_name.c). */
struct dns_label_walk {
        const uint8_t *msg;
        size_t len, pos, end, total;
        unsigned jumps;
};
void dns_label_walk_init(struct dns_label_walk *w, const uint8_t *msg, size_t len, size_t off);
/* The next label's length (1..63) with *label at its bytes; 0 at the root,
 * when the name is done and w->end is where the field after it starts;
 * -EBADMSG when the name is malformed. */
int dns_label_walk_next(struct dns_label_walk *w, const uint8_t **label);

static inline uint16_t dns_get16(const uint8_t *p)
{
        return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t dns_get32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void dns_put16(uint8_t *p, uint16_t v)
{
        p[0] = (uint8_t)(v >> 8);
        p[1] = (uint8_t)v;
}
static inline void dns_put32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

/* ---- a parsed query ---- */

struct dns_query {
        uint16_t id;
        uint8_t opcode;
        bool rd, cd;
        uint8_t qname[SE_DNS_MAX_NAME]; /* as asked (case kept), uncompressed */
        size_t qname_len;
        uint16_t qtype, qclass;
        bool edns;
        uint8_t edns_version;
        bool do_bit;
        size_t udp_size; /* what the client takes over UDP */
};

enum dns_parse {
        DNS_PARSE_OK,
        DNS_PARSE_DROP, /* a response, or shorter than a header */
        DNS_PARSE_FORMERR, /* header readable, the rest not */
        DNS_PARSE_FORMERR_Q, /* question readable, the rest not */
        DNS_PARSE_NOTIMP, /* opcode other than QUERY */
};

enum dns_parse dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q);

/* ---- the message writer ---- */

#define DNS_MAX_PTRS 256

struct dns_writer {
        uint8_t *buf;
        size_t len;
        size_t limit; /* records that would end past it are not written */
        uint16_t ptr_off[DNS_MAX_PTRS]; /* where names (and their suffixes) start */
        unsigned n_ptrs;
};

/* Writes name (uncompressed wire) at the end, compressed (when compress)
 * against the names already written (byte-exact match, so lower-case targets
 * stay lower case); either way later names may point into it. 0 or -ENOSPC
 * (nothing written then). */
int dns_put_name(struct dns_writer *w, const uint8_t *name, bool compress);
int dns_put_bytes(struct dns_writer *w, const void *p, size_t n);

/* ---- the zone ---- */

/* One record as it is prepared at build time. The rdata is `fixed` bytes and
 * then, for CNAME/PTR/SRV, one uncompressed wire name (lower case). */
struct dns_rr {
        uint16_t type;
        uint8_t n_fixed;
        uint32_t ttl;
        const uint8_t *fixed;
        const uint8_t *name;
        /* SRV: the records of the target's node, whose A/AAAA go to the
         * additional section (their owner is the target) */
        const struct dns_rr_set *add;
        const char *why; /* the object behind it, for --explain (zone_master) */
};

struct dns_rr_set {
        struct dns_rr *v;
        uint32_t n, cap; /* cap 0 with n > 0: v is in a block's slab */
};

enum dns_node_kind {
        DNS_NODE_APEX, /* <zone> */
        DNS_NODE_BRANCH, /* svc.<zone>, pod.<zone>, ns.dns.<zone> */
        DNS_NODE_NAMESPACE, /* <ns>.svc.<zone> */
        DNS_NODE_SERVICE, /* <svc>.<ns>.svc.<zone> */
        DNS_NODE_PORT, /* <port>.<proto>.<svc>.<ns>.svc.<zone>, underscores dropped */
        DNS_NODE_ENDPOINT, /* <hostname>.<svc>.<ns>.svc.<zone> */
        DNS_NODE_EXTERNAL, /* an ExternalName service */
        DNS_NODE_VERSION, /* dns-version.<zone> */
        DNS_NODE_POD, /* a-b-c-d.<ns>.pod.<zone> (pods verified) */
        DNS_NODE_REVERSE, /* a PTR name */
};

struct dns_node {
        const char *key; /* lower case, no final dot; the hashmap key */
        uint8_t kind;
        /* a headless Service's own name or one of its ports: the records
         * are written from its block's endpoint table when asked for */
        bool from_table;
        struct dns_rr_set rrs;
        const char *target; /* EXTERNAL: the CNAME target's key */
        const uint8_t *wire; /* written from a table: its name, the SRV target */
};

struct dns_node_list {
        struct dns_node **v;
        size_t n, cap;
};

/* One address of a ready endpoint: what its name's A/AAAA and SRV
 * records, a headless Service's records and its PTR are written from.
 * 24 bytes: a zone of 150,000 endpoints holds 150,000 of them. */
struct dns_ep {
        uint8_t addr[16];
        /* where the entries of its name start in the block's by_name
         * (they follow there, in index order) */
        uint32_t name_pos;
        uint16_t slice; /* in the block's slices: its ports and why */
        uint8_t v6;
        /* its name is not the dashed form of addr but a hostname or pod
         * name, found in the block's labels (few endpoints have one) */
        bool labelled;
};

/* The name of a labelled entry: in a slice the block holds, or a copy in
 * the slab. */
struct dns_ep_name {
        uint32_t ep; /* its index in the block's eps */
        const char *label;
};

/* A ClusterIP of a block, for its PTR. */
struct dns_cip {
        uint8_t addr[16];
        uint8_t v6;
};

/* Reverse lookups: every (address, block, entry) in arrays sorted by
 * address (dns_rev_cmp_addr), split by the address's hash into shards; a zone built after a
 * change shares every shard none of whose addresses changed with the
 * previous zone (so its blocks are all in that zone too). */
#define DNS_REV_SHARDS 1024
#define DNS_REV_CIP    0x80000000u /* idx: blk->cips[idx & ~DNS_REV_CIP] */

struct dns_rev {
        const struct dns_block *blk;
        uint32_t idx; /* in blk->eps, or a ClusterIP */
        /* the address's first four bytes, big-endian: an IPv4 address
         * whole, so most comparisons need not look into the block (16
         * bytes an entry, not 32 with the address copied) */
        uint32_t head;
};

struct dns_rev_shard {
        int refs; /* the zones that hold it */
        struct dns_rev *v; /* by (address, block in store order, idx) */
        size_t n;
};

size_t dns_rev_shard_of(const uint8_t addr[16], bool v6);
void dns_rev_shard_unref(struct dns_rev_shard *s); /* NULL-safe */

/* The arena of the blocks one build made: one arena per block would waste
 * most of its doubling chunks. It goes with the last of them. */
struct dns_slab {
        int refs;
        struct se_arena arena;
};

/* Everything one Service puts in the zone: its names (which no other
 * Service can make) and its addresses for PTRs. Immutable once built and
 * shared by every zone built from the same objects: a change rebuilds
 * only the blocks of the Services it touched. */
struct dns_block {
        int refs;
        const char *key; /* "<ns>/<name>" */
        const char *fqdn; /* "<name>.<ns>.svc.<zone>" */
        const uint8_t *fqdn_wire; /* the same as a wire name */
        struct se_object *svc; /* the objects it was built from, referenced: */
        struct se_object **slices; /* the same pointers again mean the same */
        uint32_t n_slices; /* contents (store objects are immutable) */
        bool ns_exists;
        bool names; /* the endpoints have names (else PTRs alone) */
        /* --explain names the Service behind its endpoints' PTRs (a
         * Service without names or ports: CoreDNS finds them through it) */
        bool ptrs_by_service;
        /* a ClusterIP Service with names and ports: the records of its name
         * and named ports are written from its Service when asked (nodes
         * is empty), as a headless one's are from its table */
        bool cluster_ip;
        struct dns_node_list nodes; /* sorted by key once built */
        struct dns_ep *eps; /* in slice, endpoint, address order */
        struct dns_ep_name *labels; /* the labelled entries', by ep */
        uint32_t n_labels;
        uint32_t *by_name; /* eps' indexes by (name, index) */
        uint32_t n_eps;
        struct dns_cip *cips;
        uint32_t n_cips;
        struct dns_slab *slab; /* the block itself, keys, rdata, names, nodes, tables */
};

/* The address an entry stands for; *v6 its family. */
static inline const uint8_t *dns_rev_addr(const struct dns_rev *r, uint8_t *v6)
{
        if (r->idx & DNS_REV_CIP) {
                const struct dns_cip *c = &r->blk->cips[r->idx & ~DNS_REV_CIP];
                *v6 = c->v6;
                return c->addr;
        }
        const struct dns_ep *e = &r->blk->eps[r->idx];
        *v6 = e->v6;
        return e->addr;
}
/* Entries are ordered by (head, family, address): the order shards are
 * sorted and searched in. */
static inline int dns_rev_cmp_addr(const struct dns_rev *r, uint32_t head, const uint8_t addr[16],
                                   uint8_t v6)
{
        if (r->head != head)
                return r->head < head ? -1 : 1;
        uint8_t rv6;
        const uint8_t *ra = dns_rev_addr(r, &rv6);
        if (rv6 != v6)
                return rv6 < v6 ? -1 : 1;
        return memcmp(ra, addr, 16);
}
static inline uint32_t dns_rev_head(const uint8_t addr[16])
{
        return (uint32_t)addr[0] << 24 | (uint32_t)addr[1] << 16 | (uint32_t)addr[2] << 8 | addr[3];
}

void dns_slab_unref(struct dns_slab *slab); /* NULL-safe */
void dns_block_unref(struct dns_block *blk);
/* Frees what a list's nodes own (record arrays, build scratch) and the list. */
void dns_node_list_release(struct dns_node_list *l);

/* The endpoint name of blk's entry e ("10-1-2-3" or its label) into out
 * (64 bytes). */
void dns_ep_label(const struct dns_block *blk, const struct dns_ep *e, char out[64]);
/* The dashed form of e's address ("10-1-2-3", "fd00--1"). */
void dns_ep_dashed(const struct dns_ep *e, char out[64]);
/* The block of "<ns>/<name>" for "[...].<svc>.<ns>.svc.<zone>", or NULL. */
const struct dns_block *dns_block_for(const struct se_dns_zone *z, const char *key, size_t len);

/* Where nodes written at answer time live: a query's buffer first, then
 * the heap (a big headless Service; a whole zone for --zone). */
struct dns_scratch {
        bool why; /* fill dns_rr.why (for --explain) */
        uint16_t want; /* the type asked: records of others may be left out (0: all) */
        size_t used;
        struct se_arena heap;
        _Alignas(16) uint8_t buf[16384];
};
void *dns_scratch_alloc(struct dns_scratch *s, size_t n); /* zeroed; NULL: no memory */
void dns_scratch_release(struct dns_scratch *s);

/* The node of a name written from a block's table: an endpoint's name
 * (the entries by_name[lo, hi)), or a from_table node. NULL: no memory. */
const struct dns_node *dns_table_endpoint(const struct se_dns_zone *z, const struct dns_block *blk,
                                          uint32_t lo, uint32_t hi, struct dns_scratch *s);
const struct dns_node *dns_table_fill(const struct se_dns_zone *z, const struct dns_block *blk,
                                      const struct dns_node *n, struct dns_scratch *s);
/* A cluster_ip block's node of key (len bytes): its own name or
 * "<port>.<proto>.<fqdn>" of a named port; NULL when it is neither (or no
 * memory). */
const struct dns_node *dns_table_cluster(const struct se_dns_zone *z, const struct dns_block *blk,
                                         const char *key, size_t len, struct dns_scratch *s);
/* Every node of a cluster_ip block, for listing, into out (room for 1 +
 * the Service's ports); *n their number. 0 or -ENOMEM. */
int dns_table_cluster_nodes(const struct se_dns_zone *z, const struct dns_block *blk,
                            struct dns_scratch *s, const struct dns_node **out, size_t *n);
/* The PTR node of an address (the entries v[0, n) of one shard). */
const struct dns_node *dns_table_reverse(const struct se_dns_zone *z, const struct dns_rev *v,
                                         size_t n, struct dns_scratch *s);

/* What se_dns_changes_note saw (zone_changes.c). */
struct se_dns_changes {
        bool all; /* everything: a full pass */
        bool any; /* something was noted */
        struct se_hashmap keys; /* "<ns>/<name>" of changed Services -> the key */
};

struct se_dns_zone {
        int refs;
        bool endpoint_pod_names; /* with ttl and zone: when blocks carry over */
        uint32_t serial;
        uint32_t ttl;
        enum se_dns_pods pods;
        bool reverse_fallthrough;
        char *zone; /* "cluster.local" */
        uint8_t zone_wire[SE_DNS_MAX_NAME];
        size_t zone_wire_len;
        /* key -> struct dns_node: the zone's own names (a block's names are
         * in the block, found through block_of; no key is in both) */
        struct se_hashmap own_names;
        size_t n_namespaces; /* the <ns>.svc.<zone> names among them */
        /* the reverse index: the previous zone's shards, those with an
         * address the changed blocks have made afresh; NULL: none there */
        struct dns_rev_shard *rev[DNS_REV_SHARDS];
        struct dns_node_list own; /* the frame, namespaces, pods */
        struct dns_block **blocks; /* one per Service with names, in store order */
        size_t n_blocks;
        struct se_hashmap block_of; /* "<ns>/<name>" -> struct dns_block */
        struct se_arena arena; /* the own nodes' keys, rdata, names, nodes */
};

/* The node of key; names written from a table are written into s. */
const struct dns_node *dns_zone_find(const struct se_dns_zone *z, const char *key,
                                     struct dns_scratch *s);
/* Every node (own, the blocks', those of endpoint names and reverse
 * names, written into s) in a new array, for listing; *n its length.
 * -ENOMEM. */
int dns_zone_nodes(const struct se_dns_zone *z, struct dns_scratch *s, const struct dns_node ***ret,
                   size_t *n);

#endif
