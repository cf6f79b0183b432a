/* dns_internal.h — what the files of pkg/dns share: the zone's shape, the
 * wire reader and the message writer. */
#ifndef SVCENV_DNS_INTERNAL_H
#define SVCENV_DNS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

struct dns_srv_seen {
        const struct dns_node *node;
        int32_t port;
};

struct dns_node {
        const char *key; /* lower case, no final dot; the hashmap key */
        int refs; /* REVERSE: the zones that hold it (others: 0) */
        uint8_t kind;
        bool cluster_ip_ptr; /* REVERSE: its PTR is a Service's ClusterIP */
        uint32_t srv_pairs; /* while building: what SRV weights divide */
        uint32_t n_seen; /* while building, an endpoint name: the SRV records */
        struct dns_srv_seen *seen; /* to it already made (freed once built) */
        struct dns_rr_set rrs;
        const char *target; /* EXTERNAL: the CNAME target's key */
};

struct dns_node_list {
        struct dns_node **v;
        size_t n, cap;
};

/* A PTR record a Service asks for. Reverse names are shared between
 * Services (the first ClusterIP wins, endpoint PTRs add up), so they are
 * made per zone from these, in Service order. */
struct dns_ptr_want {
        const char *key; /* the reverse name, in the block's arena */
        const uint8_t *target;
        const char *why;
        uint32_t hash_hi; /* the key's se_hash_str >> 32 */
        bool cluster_ip;
};

/* The reverse names are split by their key's hash into shards: a zone
 * built after a change shares every shard none of whose names changed
 * with the previous zone, so it copies and references DNS_REV_SHARDS
 * pointers, not every reverse name. */
#define DNS_REV_SHARDS 1024
static inline size_t dns_rev_shard_of(uint64_t hash)
{
        return (size_t)(hash >> 54); /* the top 10 bits; the table uses the low ones */
}

struct dns_rev_shard {
        int refs; /* the zones that hold it */
        struct se_hashmap names; /* key -> reverse node (each refcounted by shards) */
};

void dns_rev_shard_unref(struct dns_rev_shard *s); /* NULL-safe */

/* The arena of the blocks one build made: one arena per block would waste
 * most of its doubling chunks. It goes with the last of them. */
struct dns_slab {
        int refs;
        struct se_arena arena;
};

/* Everything one Service puts in the zone: its names (which no other
 * Service can make) and the PTRs it wants. Immutable once built and shared
 * by every zone built from the same objects: a change rebuilds only the
 * blocks of the Services it touched. */
struct dns_block {
        int refs;
        const char *key; /* "<ns>/<name>" */
        struct se_object *svc; /* the objects it was built from, referenced: */
        struct se_object **slices; /* the same pointers again mean the same */
        uint32_t n_slices; /* contents (store objects are immutable) */
        bool ns_exists;
        struct dns_node_list nodes; /* sorted by key once built */
        struct dns_ptr_want *ptrs;
        size_t n_ptrs, cap_ptrs;
        struct dns_slab *slab; /* keys, rdata, names, nodes */
};

void dns_slab_unref(struct dns_slab *slab); /* NULL-safe */
void dns_rev_unref(struct dns_node *n); /* NULL-safe */
void dns_block_unref(struct dns_block *blk);
/* Frees what a list's nodes own (record arrays, build scratch) and the list. */
void dns_node_list_release(struct dns_node_list *l);

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
        /* the reverse names (each node its own allocation, refcounted by
         * the shards that hold it): the previous zone's shards, those with
         * a name the changed blocks want made afresh; NULL: none there */
        struct dns_rev_shard *rev[DNS_REV_SHARDS];
        struct dns_node_list own; /* the frame, namespaces, reverse names, pods */
        struct dns_block **blocks; /* one per Service with names, in store order */
        size_t n_blocks;
        struct se_hashmap block_of; /* "<ns>/<name>" -> struct dns_block */
        struct se_arena arena; /* the own nodes' keys, rdata, names, nodes */
};

const struct dns_node *dns_zone_find(const struct se_dns_zone *z, const char *key);
/* Every node (own, the blocks', the reverse ones) in a new array, for
 * listing; *n its length. -ENOMEM. */
int dns_zone_nodes(const struct se_dns_zone *z, const struct dns_node ***ret, size_t *n);

#endif
