/* zone_build.c — the cluster zone from the store: every name CoreDNS's
 * kubernetes plugin answers, with its records already in wire form. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/store.h>

#include "dns_internal.h"

#define LABEL_SERVICE_NAME "kubernetes.io/service-name"
#define KEY_MAX            1024
#define MAX_NODE_RRS       (2 * DNS_MAX_RRS_PER_NAME)
/* the blocks of one build share slabs of this size (a block that does
 * not fit takes a new one; a bigger block grows its slab); below
 * SE_HUGE_MIN, so plain malloc'ed pages, resident only where used */
#define SLAB_BYTES ((size_t)1000 * 1000)
/* a new slab when less is left: most blocks (a Service of tens of
 * endpoints) need a few KB; a bigger one grows the slab, later blocks
 * fill what it added */
#define SLAB_MARGIN ((size_t)32 * 1024)
/* a build's first slab, grown from small, is left at this size */
#define SLAB_GROWN ((size_t)256 * 1024)

struct build {
        struct se_dns_zone *z;
        const struct se_store *st;
        const struct se_dns_zone *prev; /* blocks to carry over, or NULL */
        /* where get_node and the helpers put things: the zone's own arena
         * and list, or those of the block being built (blk) */
        struct se_arena *arena;
        struct dns_node_list *list;
        struct dns_block *blk;
        struct dns_slab *slab; /* of the blocks this build makes */
        bool slab_reserved; /* the slabs from here on are SLAB_BYTES */
        struct se_hashmap blk_names; /* the names of the block being built */
        struct se_hashmap dirty; /* reverse names to make afresh: (void *)1 */
        /* a bit per (hash_hi & 0xffff) of the dirty names: most wishes
         * are told apart from them without a lookup */
        uint64_t dirty_bits[65536 / 64];
        bool rev_own[DNS_REV_SHARDS]; /* z->rev[i] is this build's, to change */
        struct dns_node_list fresh; /* the reverse nodes made (not owned) */
        bool endpoint_pod_names;
        struct se_hashmap ns; /* namespaces that exist: name -> (void *)1 */
        struct se_hashmap slices; /* "ns/svc" -> struct slice_list */
        struct se_hashmap sliced_ns; /* an update_changed: namespaces indexed */
        struct se_arena scratch; /* the slice lists and their keys */
};

struct slice_list {
        const struct se_endpoint_slice **v;
        size_t n, cap;
};

/* A DNS label as Kubernetes names are: 1..63 of [a-z0-9-], a letter or
 * digit first and last. Anything else
 * cannot come from a valid object, and is left out of the zone rather than
 * giving names that mean something else. */
static bool label_ok(const char *s)
{
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                        return false;
        }
        return true;
}

/* snprintf into a key buffer. Every key is at most 63 + 63 + 63 + 63 + 5 +
 * 200 bytes (labels are checked, the zone is capped), so KEY_MAX always
 * holds it; a wrapper keeps the compiler from guessing otherwise. */
static void SE_PRINTF(3, 4) keyf(char *buf, size_t cap, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(buf, cap, fmt, ap);
        va_end(ap);
}

/* "ns/name" into key (KEY_MAX); false when it does not fit. */
static bool ns_key(char *key, const char *ns, const char *name)
{
        size_t nl = strlen(ns), ml = strlen(name);
        if (nl + ml + 2 > KEY_MAX)
                return false;
        memcpy(key, ns, nl);
        key[nl] = '/';
        memcpy(key + nl + 1, name, ml + 1);
        return true;
}

static void *arena_copy(struct build *b, const void *p, size_t n)
{
        void *q = se_arena_alloc(b->arena, n ? n : 1);
        if (q)
                memcpy(q, p, n);
        return q;
}

static int list_push(struct dns_node_list *l, struct dns_node *n)
{
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 8;
                struct dns_node **v = se_reallocarray(l->v, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n++] = n;
        return 0;
}

/* The node of key, made when new; a key that lives as long as the zone
 * (kept) is not copied. */
static struct dns_node *node_of(struct build *b, const char *key, bool kept,
                                enum dns_node_kind kind)
{
        struct se_hashmap *map = b->blk ? &b->blk_names : &b->z->own_names;
        struct dns_node *n = se_hashmap_get(map, key);
        if (n)
                return n;
        n = se_arena_alloc(b->arena, sizeof(*n));
        if (!n || !(n->key = kept ? key : se_arena_strdup(b->arena, key)))
                return NULL;
        n->kind = (uint8_t)kind;
        if (list_push(b->list, n) < 0)
                return NULL;
        if (se_hashmap_put(map, n->key, n, NULL) < 0)
                return NULL;
        return n;
}

static struct dns_node *get_node(struct build *b, const char *key, enum dns_node_kind kind)
{
        return node_of(b, key, false, kind);
}

static int set_push(struct dns_rr_set *s, const struct dns_rr *rr)
{
        if (s->n >= MAX_NODE_RRS)
                return 0; /* more cannot be sent in one message anyway */
        if (s->n == s->cap) {
                uint32_t cap = s->cap ? 2 * s->cap : 2;
                struct dns_rr *v = se_reallocarray(s->v, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->v = v;
                s->cap = cap;
        }
        s->v[s->n++] = *rr;
        return 0;
}

static bool same_rdata(const struct dns_rr *a, const struct dns_rr *b)
{
        if (a->type != b->type || a->n_fixed != b->n_fixed)
                return false;
        if (a->type == DNS_T_SRV) /* the weight is set at the end: port only */
                return memcmp(a->fixed + 4, b->fixed + 4, 2) == 0 &&
                       memcmp(a->name, b->name, dns_wire_len(a->name)) == 0;
        if (a->n_fixed && memcmp(a->fixed, b->fixed, a->n_fixed) != 0)
                return false; /* (a PTR's fixed part is empty and NULL) */
        if (!a->name || !b->name)
                return a->name == b->name;
        return memcmp(a->name, b->name, dns_wire_len(a->name)) == 0;
}

/* Adds rr to node unless the same record is there (CoreDNS dedups its
 * answers: a dual-stack service's two SRV targets are one). */
static int node_add(struct dns_node *node, const struct dns_rr *rr)
{
        for (uint32_t i = 0; i < node->rrs.n; i++)
                if (same_rdata(&node->rrs.v[i], rr))
                        return 0;
        return set_push(&node->rrs, rr);
}

/* An IP address as an A/AAAA record; false when ip is not an address. */
static bool addr_rr(struct build *bd, const char *ip, const char *why, struct dns_rr *rr)
{
        uint8_t b[16];
        memset(rr, 0, sizeof(*rr));
        rr->ttl = bd->z->ttl;
        rr->why = why;
        if (!ip)
                return false;
        if (inet_pton(AF_INET, ip, b) == 1) {
                rr->type = DNS_T_A;
                rr->n_fixed = 4;
        } else if (inet_pton(AF_INET6, ip, b) == 1) {
                rr->type = DNS_T_AAAA;
                rr->n_fixed = 16;
        } else {
                return false;
        }
        rr->fixed = arena_copy(bd, b, rr->n_fixed);
        return rr->fixed != NULL;
}

/* The name a record points at, in the arena. */
static const uint8_t *wire_name(struct build *b, const char *text)
{
        uint8_t w[SE_DNS_MAX_NAME];
        int n = dns_name_wire(text, w);
        return n < 0 ? NULL : arena_copy(b, w, (size_t)n);
}

/* "d.c.b.a.in-addr.arpa" or the 32 nibbles of ip6.arpa; false when ip is
 * not an address. */
static bool reverse_key(const char *ip, char *out, size_t cap)
{
        uint8_t b[16];
        if (inet_pton(AF_INET, ip, b) == 1) {
                snprintf(out, cap, "%u.%u.%u.%u.in-addr.arpa", b[3], b[2], b[1], b[0]);
                return true;
        }
        if (inet_pton(AF_INET6, ip, b) != 1 || cap < 74)
                return false;
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        for (int i = 15; i >= 0; i--) {
                out[o++] = hex[b[i] & 0xf];
                out[o++] = '.';
                out[o++] = hex[b[i] >> 4];
                out[o++] = '.';
        }
        memcpy(out + o, "ip6.arpa", 9);
        return true;
}

/* A PTR record. CoreDNS answers an address that is a ClusterIP with the
 * first such Service alone (services come in namespace/name order here);
 * only an address that is no ClusterIP gets one PTR per endpoint name. */
/* Shard i of the zone being built, its own to change: made (from the
 * previous zone's, whose nodes it then references too) the first time. */
static struct dns_rev_shard *own_shard(struct build *b, size_t i)
{
        struct se_dns_zone *z = b->z;
        if (b->rev_own[i])
                return z->rev[i];
        struct dns_rev_shard *s = se_calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->refs = 1;
        struct dns_rev_shard *shared = z->rev[i];
        if (shared) {
                if (se_hashmap_copy(&s->names, &shared->names) < 0) {
                        free(s);
                        return NULL;
                }
                void *v;
                for (size_t it = 0; se_hashmap_next(&s->names, &it, NULL, &v);)
                        __atomic_add_fetch(&((struct dns_node *)v)->refs, 1, __ATOMIC_RELAXED);
                dns_rev_shard_unref(shared);
        }
        z->rev[i] = s;
        b->rev_own[i] = true;
        return s;
}

static int make_ptr(struct build *b, const char *key, const uint8_t *target, bool cluster_ip,
                    const char *why)
{
        struct dns_rr rr = { .type = DNS_T_PTR, .ttl = b->z->ttl, .name = target, .why = why };
        uint64_t h = se_hash_str(key);
        struct dns_rev_shard *s = own_shard(b, dns_rev_shard_of(h));
        if (!s)
                return -ENOMEM;
        struct dns_node *n = se_hashmap_get_hashed(&s->names, key, h);
        if (!n) {
                if (!(n = se_calloc(1, sizeof(*n))))
                        return -ENOMEM;
                *n = (struct dns_node){ .key = key, .refs = 1, .kind = DNS_NODE_REVERSE };
                if (se_hashmap_put(&s->names, key, n, NULL) < 0) {
                        free(n);
                        return -ENOMEM;
                }
                if (list_push(&b->fresh, n) < 0)
                        return -ENOMEM;
        }
        if (n->cluster_ip_ptr)
                return 0;
        if (cluster_ip) {
                n->cluster_ip_ptr = true;
                n->rrs.n = 0; /* endpoint PTRs give way */
        }
        return node_add(n, &rr);
}

/* While a block is built its PTRs are only noted (place_ptrs makes them). */
static int add_ptr(struct build *b, const char *ip, const uint8_t *target, bool cluster_ip,
                   const char *why)
{
        struct dns_block *blk = b->blk;
        char rkey[KEY_MAX];
        if (!reverse_key(ip, rkey, sizeof(rkey)))
                return 0;
        const char *key = se_arena_strdup(b->arena, rkey);
        if (!key)
                return -ENOMEM;
        if (!blk)
                return make_ptr(b, key, target, cluster_ip, why);
        if (blk->n_ptrs == blk->cap_ptrs) {
                size_t cap = blk->cap_ptrs ? 2 * blk->cap_ptrs : 4;
                struct dns_ptr_want *v = se_reallocarray(blk->ptrs, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                blk->ptrs = v;
                blk->cap_ptrs = cap;
        }
        blk->ptrs[blk->n_ptrs++] =
                (struct dns_ptr_want){ .key = key,
                                       .target = target,
                                       .why = why,
                                       .hash_hi = (uint32_t)(se_hash_str(key) >> 32),
                                       .cluster_ip = cluster_ip };
        return 0;
}

/* A Service whose namespace does not exist has no names, but CoreDNS still
 * answers PTR for its addresses (its reverse index ignores namespaces). */
static int build_ptrs_only(struct build *b, const struct se_service *s, const char *fqdn,
                           const char *why);

/* An SRV record to target; the weight is filled in by finish. */
static int make_srv(struct build *b, int32_t port, const uint8_t *target,
                    const struct dns_rr_set *add, const char *why, struct dns_rr *rr)
{
        uint8_t f[6] = { 0, 0, 0, 0, (uint8_t)(port >> 8), (uint8_t)port };
        *rr = (struct dns_rr){ .type = DNS_T_SRV,
                               .ttl = b->z->ttl,
                               .n_fixed = 6,
                               .name = target,
                               .add = add,
                               .why = why };
        return (rr->fixed = arena_copy(b, f, 6)) ? 0 : -ENOMEM;
}

static int add_srv(struct build *b, struct dns_node *n, int32_t port, const uint8_t *target,
                   const struct dns_rr_set *add, const char *why)
{
        /* the (address, port) pairs CoreDNS counts before it dedups: the
         * weight divides 100 among them (finish) */
        n->srv_pairs++;
        struct dns_rr rr;
        int r = make_srv(b, port, target, add, why, &rr);
        return r < 0 ? r : node_add(n, &rr);
}

/* An SRV to the endpoint name en on node n (en itself, its headless
 * service, a port of it), made once per (n, port): the same name and port
 * again (a second address, a hostname two endpoints share, the IPv6 slice
 * of a dual-stack pod) only counts for the weight. Without a scan of n's
 * records: a headless service may have thousands. */
static int add_endpoint_srv(struct build *b, struct dns_node *en, struct dns_node *n, int32_t port,
                            const uint8_t *target, const char *why)
{
        n->srv_pairs++;
        for (uint32_t i = 0; i < en->n_seen; i++)
                if (en->seen[i].node == n && en->seen[i].port == port)
                        return 0;
        if ((en->n_seen & (en->n_seen - 1)) == 0) { /* 0, 1, 2, 4...: grow */
                struct dns_srv_seen *v =
                        se_reallocarray(en->seen, en->n_seen ? 2 * en->n_seen : 1, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                en->seen = v;
        }
        en->seen[en->n_seen++] = (struct dns_srv_seen){ n, port };
        struct dns_rr rr;
        int r = make_srv(b, port, target, &en->rrs, why, &rr);
        return r < 0 ? r : set_push(&n->rrs, &rr);
}

static const char *why_of(struct build *b, const char *kind, const struct se_object *o)
{
        char buf[KEY_MAX];
        snprintf(buf, sizeof(buf), "%s %s/%s", kind, o->meta.namespace, o->meta.name);
        return se_arena_strdup(b->arena, buf);
}

static const char *proto_label(enum se_protocol p)
{
        return p == SE_PROTO_UDP ? "udp" : p == SE_PROTO_SCTP ? "sctp" : "tcp";
}

/* ---- endpoint names ---- */

/* The name CoreDNS gives an endpoint: its hostname; with endpoint_pod_names
 * the pod's name next; else the address with '-' for '.' and ':' (an IPv6
 * name that would start or end with '-' gets a 0 there). */
static bool endpoint_label(const struct build *b, const struct se_slice_endpoint *e, const char *ip,
                           char *out, size_t cap)
{
        if (label_ok(e->hostname)) {
                snprintf(out, cap, "%s", e->hostname);
                return true;
        }
        if (b->endpoint_pod_names && e->target_ref && label_ok(e->target_ref->name) &&
            (!e->target_ref->kind || strcmp(e->target_ref->kind, "Pod") == 0)) {
                snprintf(out, cap, "%s", e->target_ref->name);
                return true;
        }
        size_t o = 0;
        if (ip[0] == ':' && o + 1 < cap)
                out[o++] = '0';
        for (const char *p = ip; *p && o + 2 < cap; p++) {
                char c = *p;
                out[o++] = (c == '.' || c == ':') ? '-' : (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        if (o > 0 && out[o - 1] == '-' && o + 1 < cap)
                out[o++] = '0';
        out[o] = '\0';
        return label_ok(out);
}

static bool endpoint_ready(const struct se_slice_endpoint *e)
{
        return e->ready != SE_FALSE; /* absent counts as ready */
}

/* ---- services ---- */

static int add_cluster_ips(struct build *b, const struct se_service *s, struct dns_node *svc,
                           const uint8_t *target, const char *why)
{
        const char *one[1] = { s->cluster_ip };
        const char *const *v = s->cluster_ips.v;
        uint32_t n = s->cluster_ips.n;
        if (n == 0 && s->cluster_ip) {
                v = one;
                n = 1;
        }
        for (uint32_t i = 0; i < n; i++) {
                struct dns_rr rr;
                if (!addr_rr(b, v[i], why, &rr))
                        continue;
                int r = node_add(svc, &rr);
                if (r == 0)
                        r = add_ptr(b, v[i], target, true, why);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int build_cluster_ip(struct build *b, const struct se_service *s, const char *fqdn,
                            const char *why)
{
        if (s->n_ports == 0) {
                /* CoreDNS finds a ClusterIP service through its ports: none
                 * (possible in a manifest, not in the API) is NXDOMAIN */
                return build_ptrs_only(b, s, fqdn, why) < 0 ? -ENOMEM : 0;
        }
        struct dns_node *svc = get_node(b, fqdn, DNS_NODE_SERVICE);
        const uint8_t *target = wire_name(b, fqdn);
        if (!svc || !target)
                return -ENOMEM;
        int r = add_cluster_ips(b, s, svc, target, why);
        if (r < 0)
                return r;
        /* the service's own A/AAAA records are the additionals of its SRV
         * records (emit_additional takes only those two types) */
        uint32_t n_ips = svc->rrs.n;
        for (uint32_t p = 0; p < s->n_ports; p++) {
                const struct se_service_port *sp = &s->ports[p];
                /* one (address, port) pair per cluster IP, as CoreDNS counts */
                for (uint32_t i = 0; i < (n_ips ? n_ips : 1); i++)
                        if ((r = add_srv(b, svc, sp->port, target, &svc->rrs, why)) < 0)
                                return r;
                if (!sp->name || !label_ok(sp->name))
                        continue;
                char key[KEY_MAX];
                keyf(key, sizeof(key), "%s.%s.%s", sp->name, proto_label(sp->protocol), fqdn);
                struct dns_node *pn = get_node(b, key, DNS_NODE_PORT);
                if (!pn)
                        return -ENOMEM;
                for (uint32_t i = 0; i < n_ips; i++)
                        if ((r = node_add(pn, &svc->rrs.v[i])) < 0)
                                return r;
                for (uint32_t i = 0; i < (n_ips ? n_ips : 1); i++)
                        if ((r = add_srv(b, pn, sp->port, target, &svc->rrs, why)) < 0)
                                return r;
        }
        return 0;
}

/* What one ready endpoint adds beyond its name: for a headless service
 * the service's A/AAAA and SRV records and those of its named ports; SRV
 * on the endpoint's own name (one per port). */
static int endpoint_records(struct build *b, const struct se_endpoint_slice *es,
                            struct dns_node *svc, const char *fqdn, struct dns_node *en,
                            const uint8_t *target, const struct dns_rr_set *own, const char *why)
{
        int r = 0;
        for (uint32_t a = 0; svc && a < own->n && r == 0; a++)
                r = set_push(&svc->rrs, &own->v[a]);
        for (uint32_t p = 0; p < es->n_ports && r == 0; p++) {
                const struct se_slice_port *sp = &es->ports[p];
                if (!sp->has_port)
                        continue;
                for (uint32_t a = 0; a < own->n && r == 0; a++) {
                        r = add_endpoint_srv(b, en, en, sp->port, target, why);
                        if (r == 0 && svc)
                                r = add_endpoint_srv(b, en, svc, sp->port, target, why);
                }
                if (r < 0 || !svc || !sp->name || !label_ok(sp->name))
                        continue;
                char pkey[KEY_MAX];
                enum se_protocol proto = sp->has_protocol ? sp->protocol : SE_PROTO_TCP;
                keyf(pkey, sizeof(pkey), "%s.%s.%s", sp->name, proto_label(proto), fqdn);
                struct dns_node *pn = get_node(b, pkey, DNS_NODE_PORT);
                if (!pn)
                        return -ENOMEM;
                for (uint32_t a = 0; a < own->n && r == 0; a++) {
                        r = set_push(&pn->rrs, &own->v[a]);
                        if (r == 0)
                                r = add_endpoint_srv(b, en, pn, sp->port, target, why);
                }
        }
        return r;
}

/* The endpoints of a service, headless or not: names and PTRs for every
 * ready endpoint; for a headless service also the service's own A/AAAA and
 * SRV records. */
static int build_endpoints(struct build *b, const struct se_service *s, const char *fqdn,
                           bool headless)
{
        char key[KEY_MAX];
        (void)ns_key(key, s->obj.meta.namespace, s->obj.meta.name);
        const struct slice_list *sl = se_hashmap_get(&b->slices, key);
        if (!sl)
                return 0;
        struct dns_node *svc = NULL; /* headless only */
        for (size_t i = 0; i < sl->n; i++) {
                const struct se_endpoint_slice *es = sl->v[i];
                const char *why = why_of(b, "EndpointSlice", &es->obj);
                if (!why)
                        return -ENOMEM;
                for (uint32_t e = 0; e < es->n_endpoints; e++) {
                        const struct se_slice_endpoint *ep = &es->endpoints[e];
                        if (!endpoint_ready(ep) || ep->addresses.n == 0)
                                continue;
                        char label[128], efqdn[KEY_MAX];
                        if (!endpoint_label(b, ep, ep->addresses.v[0], label, sizeof(label)))
                                continue;
                        keyf(efqdn, sizeof(efqdn), "%s.%s", label, fqdn);
                        struct dns_node *en = get_node(b, efqdn, DNS_NODE_ENDPOINT);
                        const uint8_t *target = wire_name(b, efqdn);
                        if (!en || !target)
                                return -ENOMEM;
                        /* this endpoint's own addresses; the SRV additionals
                         * are all of its name's (two endpoints may share a
                         * hostname: both answer) */
                        struct dns_rr_set own_set = { 0 }, *own = &own_set;
                        for (uint32_t a = 0; a < ep->addresses.n && a < 100; a++) {
                                struct dns_rr rr;
                                if (!addr_rr(b, ep->addresses.v[a], why, &rr))
                                        continue;
                                int r = node_add(en, &rr);
                                if (r == 0)
                                        r = set_push(own, &rr);
                                if (r == 0)
                                        r = add_ptr(b, ep->addresses.v[a], target, false, why);
                                if (r < 0) {
                                        free(own->v);
                                        return r;
                                }
                        }
                        if (own->n == 0)
                                continue;
                        if (headless && !svc && !(svc = get_node(b, fqdn, DNS_NODE_SERVICE))) {
                                free(own->v);
                                return -ENOMEM;
                        }
                        int r = endpoint_records(b, es, svc, fqdn, en, target, own, why);
                        free(own->v);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int build_ptrs_only(struct build *b, const struct se_service *s, const char *fqdn,
                           const char *why)
{
        const char *one[1] = { s->cluster_ip };
        const char *const *v = s->cluster_ips.n ? s->cluster_ips.v : one;
        uint32_t n = s->cluster_ips.n ? s->cluster_ips.n : (s->cluster_ip ? 1 : 0);
        const uint8_t *target = wire_name(b, fqdn);
        int r = target ? 0 : -ENOMEM;
        for (uint32_t i = 0; i < n && r == 0; i++)
                r = add_ptr(b, v[i], target, true, why);
        char key[KEY_MAX];
        (void)ns_key(key, s->obj.meta.namespace, s->obj.meta.name);
        const struct slice_list *sl = se_hashmap_get(&b->slices, key);
        for (size_t i = 0; sl && i < sl->n && r == 0; i++)
                for (uint32_t e = 0; e < sl->v[i]->n_endpoints && r == 0; e++) {
                        const struct se_slice_endpoint *ep = &sl->v[i]->endpoints[e];
                        char label[128], efqdn[KEY_MAX];
                        if (!endpoint_ready(ep) || ep->addresses.n == 0 ||
                            !endpoint_label(b, ep, ep->addresses.v[0], label, sizeof(label)))
                                continue;
                        keyf(efqdn, sizeof(efqdn), "%s.%s", label, fqdn);
                        const uint8_t *etarget = wire_name(b, efqdn);
                        if (!etarget)
                                return -ENOMEM;
                        for (uint32_t a = 0; a < ep->addresses.n && a < 100 && r == 0; a++)
                                r = add_ptr(b, ep->addresses.v[a], etarget, false, why);
                }
        return r;
}

static bool is_ip(const char *s)
{
        uint8_t b[16];
        return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

static int build_external(struct build *b, const struct se_service *s, const char *fqdn,
                          const char *why)
{
        char target[KEY_MAX];
        const char *ext = s->external_name;
        size_t n = ext ? strlen(ext) : 0;
        if (n == 0 || n >= sizeof(target) || is_ip(ext))
                return 0; /* CoreDNS: NXDOMAIN for every type */
        for (size_t i = 0; i < n; i++)
                target[i] = (char)(ext[i] >= 'A' && ext[i] <= 'Z' ? ext[i] + 32 : ext[i]);
        target[n] = '\0';
        if (target[n - 1] == '.')
                target[--n] = '\0';
        for (size_t i = 0; i < n; i++)
                if (!((target[i] >= 'a' && target[i] <= 'z') ||
                      (target[i] >= '0' && target[i] <= '9') || target[i] == '-' ||
                      target[i] == '.' || target[i] == '_'))
                        return 0;
        struct dns_rr rr = { .type = DNS_T_CNAME, .ttl = b->z->ttl, .why = why };
        if (!(rr.name = wire_name(b, target)))
                return 0; /* not a domain name (empty label, too long) */
        struct dns_node *node = get_node(b, fqdn, DNS_NODE_EXTERNAL);
        if (!node || !(node->target = se_arena_strdup(b->arena, target)))
                return -ENOMEM;
        return node_add(node, &rr);
}

static int build_service(struct build *b, const struct se_service *s)
{
        const char *ns = s->obj.meta.namespace, *name = s->obj.meta.name;
        if (!label_ok(ns) || !label_ok(name))
                return 0;
        char fqdn[KEY_MAX];
        keyf(fqdn, sizeof(fqdn), "%s.%s.svc.%s", name, ns, b->z->zone);
        const char *why = why_of(b, "Service", &s->obj);
        if (!why)
                return -ENOMEM;
        if (!se_hashmap_get(&b->ns, ns))
                return s->type == SE_SVC_EXTERNAL_NAME ? 0 : build_ptrs_only(b, s, fqdn, why);
        if (s->type == SE_SVC_EXTERNAL_NAME)
                return build_external(b, s, fqdn, why);
        const char *first = s->cluster_ips.n ? s->cluster_ips.v[0] : s->cluster_ip;
        bool headless = first && strcmp(first, "None") == 0;
        /* a headless service without a ready endpoint gets no node at all:
         * NXDOMAIN for every type (spec 2.4.1) */
        int r = headless ? 0 : build_cluster_ip(b, s, fqdn, why);
        if (r == 0)
                r = build_endpoints(b, s, fqdn, headless);
        return r;
}

/* ---- indexes used while building ---- */

static int cmp_slice_name(const void *x, const void *y)
{
        return strcmp((*(const struct se_endpoint_slice *const *)x)->obj.meta.name,
                      (*(const struct se_endpoint_slice *const *)y)->obj.meta.name);
}

/* Every Service's slices (in namespace ns, NULL: all), in slice name
 * order (as a sorted listing of the store gives them) without sorting the
 * store: a Service has one or a few. Everything in the build's scratch
 * arena: one release at the end. */
static int index_slices(struct build *b, const char *ns)
{
        const struct se_object **v = NULL;
        long n = se_store_list_unordered(b->st, SE_KIND_ENDPOINT_SLICE, ns, &v);
        if (n < 0)
                return (int)n;
        int r = 0;
        for (long i = 0; i < n && r == 0; i++) {
                const struct se_endpoint_slice *es = se_endpoint_slice_of(v[i]);
                const char *svc = se_kvlist_get(&es->obj.meta.labels, LABEL_SERVICE_NAME);
                if (!svc || es->slim || !es->address_type ||
                    (strcmp(es->address_type, "IPv4") != 0 &&
                     strcmp(es->address_type, "IPv6") != 0))
                        continue;
                char key[KEY_MAX];
                if (!ns_key(key, es->obj.meta.namespace, svc))
                        continue; /* (no such Service can exist) */
                struct slice_list *l = se_hashmap_get(&b->slices, key);
                if (!l) {
                        const char *k = se_arena_strdup(&b->scratch, key);
                        l = se_arena_alloc(&b->scratch, sizeof(*l));
                        if (!k || !l || se_hashmap_put(&b->slices, k, l, NULL) < 0) {
                                r = -ENOMEM;
                                break;
                        }
                }
                if (l->n == l->cap) {
                        size_t cap = l->cap ? 2 * l->cap : 1;
                        const struct se_endpoint_slice **nv =
                                se_arena_array(&b->scratch, cap, sizeof(*nv));
                        if (!nv) {
                                r = -ENOMEM;
                                break;
                        }
                        if (l->n)
                                memcpy(nv, l->v, l->n * sizeof(*nv));
                        l->v = nv;
                        l->cap = cap;
                }
                l->v[l->n++] = es;
        }
        free(v);
        void *lv;
        for (size_t it = 0; r == 0 && se_hashmap_next(&b->slices, &it, NULL, &lv);) {
                struct slice_list *l = lv;
                if (l->n > 1)
                        qsort(l->v, l->n, sizeof(*l->v), cmp_slice_name);
        }
        return r;
}

static int add_namespace(struct build *b, const char *ns)
{
        if (!label_ok(ns) || se_hashmap_get(&b->ns, ns))
                return 0;
        char key[KEY_MAX];
        keyf(key, sizeof(key), "%s.svc.%s", ns, b->z->zone);
        struct dns_node *n = get_node(b, key, DNS_NODE_NAMESPACE);
        if (!n)
                return -ENOMEM;
        b->z->n_namespaces++;
        /* <ns>.pod.<zone> is NODATA too, unless pod names are off */
        keyf(key, sizeof(key), "%s.pod.%s", ns, b->z->zone);
        if (b->z->pods != SE_DNS_PODS_DISABLED && !get_node(b, key, DNS_NODE_NAMESPACE))
                return -ENOMEM;
        const char *name = se_arena_strdup(b->arena, ns);
        return name ? se_hashmap_put(&b->ns, name, (void *)1, NULL) : -ENOMEM;
}

/* Namespaces that exist. Manifest files often hold no Namespace objects:
 * then every namespace an object names exists, and the four built in. */
static int index_namespaces(struct build *b)
{
        const struct se_object **v = NULL;
        long n = se_store_list(b->st, SE_KIND_NAMESPACE, NULL, &v);
        if (n < 0)
                return (int)n;
        int r = 0;
        for (long i = 0; i < n && r == 0; i++)
                r = add_namespace(b, v[i]->meta.name);
        free(v);
        if (n > 0 || r < 0)
                return r;
        static const char *const builtin[] = { "default", "kube-system", "kube-public",
                                               "kube-node-lease" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(builtin) && r == 0; i++)
                r = add_namespace(b, builtin[i]);
        static const enum se_kind kinds[] = { SE_KIND_SERVICE, SE_KIND_ENDPOINT_SLICE,
                                              SE_KIND_POD };
        for (size_t k = 0; k < SE_ARRAY_SIZE(kinds) && r == 0; k++) {
                const char **names = NULL;
                long m = se_store_namespaces(b->st, kinds[k], &names);
                if (m < 0)
                        return (int)m;
                for (long i = 0; i < m && r == 0; i++)
                        r = add_namespace(b, names[i]);
                free(names);
        }
        return r;
}

/* ---- pods verified ---- */

static int build_pods(struct build *b)
{
        const struct se_object **v = NULL;
        long n = se_store_list(b->st, SE_KIND_POD, NULL, &v);
        if (n < 0)
                return (int)n;
        int r = 0;
        for (long i = 0; i < n && r == 0; i++) {
                const struct se_pod *p = (const struct se_pod *)v[i];
                const char *ns = p->obj.meta.namespace;
                if (p->obj.meta.deletion_timestamp ||
                    (p->phase && strcmp(p->phase, "Succeeded") == 0) || !se_hashmap_get(&b->ns, ns))
                        continue;
                /* CoreDNS matches status.podIP alone, not every podIPs entry */
                const char *ips[1] = { p->pod_ip };
                uint32_t n_ips = p->pod_ip ? 1 : 0;
                const char *why = why_of(b, "Pod", &p->obj);
                if (!why) {
                        r = -ENOMEM;
                        break;
                }
                for (uint32_t k = 0; k < n_ips && r == 0; k++) {
                        struct dns_rr rr;
                        char label[128], key[KEY_MAX];
                        if (!addr_rr(b, ips[k], why, &rr))
                                continue;
                        struct se_slice_endpoint none = { 0 };
                        bool pod_names = b->endpoint_pod_names;
                        b->endpoint_pod_names = false;
                        bool ok = endpoint_label(b, &none, ips[k], label, sizeof(label));
                        b->endpoint_pod_names = pod_names;
                        if (!ok)
                                continue;
                        keyf(key, sizeof(key), "%s.%s.pod.%s", label, ns, b->z->zone);
                        struct dns_node *node = get_node(b, key, DNS_NODE_POD);
                        r = node ? node_add(node, &rr) : -ENOMEM;
                }
        }
        free(v);
        return r;
}

/* ---- the frame of the zone ---- */

static int build_frame(struct build *b)
{
        struct se_dns_zone *z = b->z;
        char key[KEY_MAX];
        struct dns_node *n;
        if (!get_node(b, z->zone, DNS_NODE_APEX))
                return -ENOMEM;
        static const char *const branches[] = { "svc", "pod", "ns.dns" };
        for (size_t i = 0; i < SE_ARRAY_SIZE(branches); i++) {
                keyf(key, sizeof(key), "%s.%s", branches[i], z->zone);
                if (!get_node(b, key, DNS_NODE_BRANCH))
                        return -ENOMEM;
        }
        keyf(key, sizeof(key), "dns-version.%s", z->zone);
        if (!(n = get_node(b, key, DNS_NODE_VERSION)))
                return -ENOMEM;
        static const uint8_t txt[] = { sizeof(DNS_SCHEMA_VERSION) - 1, '1', '.', '1', '.', '0' };
        struct dns_rr rr = { .type = DNS_T_TXT,
                             .ttl = DNS_VERSION_TTL,
                             .n_fixed = sizeof(txt),
                             .fixed = txt,
                             .why = "the DNS schema version (spec 2.2)" };
        return node_add(n, &rr);
}

/* Weights of SRV answers: CoreDNS divides 100 among the (address, port)
 * pairs it found before it dropped duplicates, at least 1 each. And every
 * record array cut to its size: the zone is read-only from here. */
static void finish(struct dns_node_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                struct dns_node *n = l->v[i];
                free(n->seen);
                n->seen = NULL;
                n->n_seen = 0;
                if (n->rrs.cap > n->rrs.n && n->rrs.n > 0) {
                        struct dns_rr *v = se_reallocarray(n->rrs.v, n->rrs.n, sizeof(*v));
                        if (v) { /* else keep the bigger one */
                                n->rrs.v = v;
                                n->rrs.cap = n->rrs.n;
                        }
                }
                if (!n->srv_pairs)
                        continue;
                uint32_t w = 100 / n->srv_pairs;
                if (w == 0)
                        w = 1;
                for (uint32_t k = 0; k < n->rrs.n; k++)
                        if (n->rrs.v[k].type == DNS_T_SRV)
                                dns_put16(SE_UNCONST(uint8_t, n->rrs.v[k].fixed) + 2, (uint16_t)w);
        }
}

static int check_zone_name(const char *zone, char *out, struct se_diag *diag)
{
        size_t n = strlen(zone);
        while (n > 0 && zone[n - 1] == '.')
                n--;
        if (n == 0 || n > 200) {
                se_diag_set(diag, NULL, 0, 0, "zone \"%s\": %s", zone,
                            n ? "longer than 200 characters" : "empty");
                return -EINVAL;
        }
        for (size_t i = 0; i < n; i++)
                out[i] = (char)(zone[i] >= 'A' && zone[i] <= 'Z' ? zone[i] + 32 : zone[i]);
        out[n] = '\0';
        char copy[256];
        memcpy(copy, out, n + 1);
        for (char *save = NULL, *l = strtok_r(copy, ".", &save); l; l = strtok_r(NULL, ".", &save))
                if (!label_ok(l)) {
                        se_diag_set(diag, NULL, 0, 0,
                                    "zone \"%s\": label \"%s\" is not 1-63 of [a-z0-9-]", zone, l);
                        return -EINVAL;
                }
        if (strstr(out, "..")) {
                se_diag_set(diag, NULL, 0, 0, "zone \"%s\": empty label", zone);
                return -EINVAL;
        }
        return 0;
}

static void build_release(struct build *b)
{
        dns_slab_unref(b->slab);
        free(b->fresh.v); /* (the nodes are the zone's) */
        se_hashmap_release(&b->dirty);
        se_hashmap_release(&b->blk_names);
        se_hashmap_release(&b->slices);
        se_hashmap_release(&b->sliced_ns);
        se_arena_release(&b->scratch);
        se_hashmap_release(&b->ns);
}

/* ---- blocks: a Service's part of the zone, carried over unchanged ---- */

/* The same pointers mean the same contents: store objects are immutable,
 * and the block's references keep an address from being reused. */
static bool same_inputs(const struct dns_block *blk, const struct se_service *s,
                        const struct slice_list *sl, bool ns_exists)
{
        size_t n = sl ? sl->n : 0;
        if (blk->svc != &s->obj || blk->ns_exists != ns_exists || blk->n_slices != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (blk->slices[i] != &sl->v[i]->obj)
                        return false;
        return true;
}

static int cmp_node_key(const void *x, const void *y)
{
        return strcmp((*(const struct dns_node *const *)x)->key,
                      (*(const struct dns_node *const *)y)->key);
}

/* A built block is read-only: its nodes sorted by name (dns_zone_find
 * searches them there, so no zone-wide table of names is copied per
 * build), their records moved into the slab (no malloc header and
 * rounding for each of the many small arrays; cap 0 marks them) and its
 * arrays cut to size. */
static void seal_block(struct dns_block *blk)
{
        struct dns_node_list *l = &blk->nodes;
        if (l->n > 1)
                qsort(l->v, l->n, sizeof(*l->v), cmp_node_key);
        for (size_t i = 0; i < l->n; i++) {
                struct dns_rr_set *rs = &l->v[i]->rrs;
                struct dns_rr *v = rs->n && rs->cap ?
                                           se_arena_array(&blk->slab->arena, rs->n, sizeof(*v)) :
                                           NULL;
                if (!v)
                        continue; /* (none, or no memory: it stays where it is) */
                memcpy(v, rs->v, rs->n * sizeof(*v));
                free(rs->v);
                rs->v = v;
                rs->cap = 0;
        }
        if (l->cap > l->n && l->n > 0) {
                struct dns_node **v = se_reallocarray(l->v, l->n, sizeof(*v));
                if (v) { /* else keep the bigger one */
                        l->v = v;
                        l->cap = l->n;
                }
        }
        if (blk->cap_ptrs > blk->n_ptrs && blk->n_ptrs > 0) {
                struct dns_ptr_want *v = se_reallocarray(blk->ptrs, blk->n_ptrs, sizeof(*v));
                if (v) {
                        blk->ptrs = v;
                        blk->cap_ptrs = blk->n_ptrs;
                }
        }
}

static int new_block(struct build *b, const char *key, const struct se_service *s,
                     const struct slice_list *sl, bool ns_exists, struct dns_block **out)
{
        /* An arena left to double would end in a chunk of tens of MB, up
         * to half of it never used, and huge-page backed (resident) at that
         * size. So a build's first slab grows from small (a change to a few
         * Services needs a few KB) up to SLAB_GROWN; the next ones are one
         * chunk of SLAB_BYTES each, a new one when it is nearly full. */
        if (b->slab &&
            (b->slab_reserved ? (size_t)(b->slab->arena.hi - b->slab->arena.lo) < SLAB_MARGIN :
                                b->slab->arena.total >= SLAB_GROWN)) {
                dns_slab_unref(b->slab);
                b->slab = NULL;
                b->slab_reserved = true;
        }
        if (!b->slab) {
                if (!(b->slab = se_calloc(1, sizeof(*b->slab))))
                        return -ENOMEM;
                b->slab->refs = 1; /* the build's, dropped at its end */
                if (b->slab_reserved && se_arena_reserve(&b->slab->arena, SLAB_BYTES) < 0)
                        return -ENOMEM;
        }
        struct dns_block *blk = se_calloc(1, sizeof(*blk));
        if (!blk)
                return -ENOMEM;
        blk->refs = 1;
        blk->slab = b->slab;
        __atomic_add_fetch(&b->slab->refs, 1, __ATOMIC_RELAXED);
        blk->ns_exists = ns_exists;
        blk->svc = se_object_ref(SE_UNCONST(struct se_object, &s->obj));
        size_t n = sl ? sl->n : 0;
        int r = 0;
        if (n && !(blk->slices = se_calloc(n, sizeof(*blk->slices))))
                r = -ENOMEM;
        for (size_t i = 0; i < n && r == 0; i++)
                blk->slices[blk->n_slices++] =
                        se_object_ref(SE_UNCONST(struct se_object, &sl->v[i]->obj));
        if (r == 0 && !(blk->key = se_arena_strdup(&b->slab->arena, key)))
                r = -ENOMEM;
        if (r == 0) {
                b->arena = &b->slab->arena;
                b->list = &blk->nodes;
                b->blk = blk;
                r = build_service(b, s);
                b->arena = &b->z->arena;
                b->list = &b->z->own;
                b->blk = NULL;
        }
        /* its names were only for finding its own nodes while building */
        se_hashmap_release(&b->blk_names);
        if (r < 0) {
                dns_block_unref(blk);
                return r;
        }
        finish(&blk->nodes);
        seal_block(blk);
        *out = blk;
        return 0;
}

/* The reverse names a block wants are to be made afresh (it is new, or
 * gone since the previous zone); a build without one makes them all. */
static int mark_dirty(struct build *b, const struct dns_block *blk)
{
        for (size_t i = 0; b->prev && i < blk->n_ptrs; i++) {
                uint32_t bit = blk->ptrs[i].hash_hi & 0xffff;
                b->dirty_bits[bit / 64] |= (uint64_t)1 << (bit % 64);
                if (se_hashmap_put(&b->dirty, blk->ptrs[i].key, (void *)1, NULL) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* The Service's block, referenced for the caller: the previous zone's
 * when nothing it was made from changed, else a new one; NULL when the
 * Service has no names. */
static int service_block(struct build *b, const struct se_service *s, struct dns_block **out)
{
        *out = NULL;
        const char *ns = s->obj.meta.namespace, *name = s->obj.meta.name;
        if (!label_ok(ns) || !label_ok(name))
                return 0; /* no names and no PTRs */
        char key[KEY_MAX];
        (void)ns_key(key, ns, name);
        const struct slice_list *sl = se_hashmap_get(&b->slices, key);
        bool ns_exists = se_hashmap_get(&b->ns, ns) != NULL;
        struct dns_block *blk = b->prev ? se_hashmap_get(&b->prev->block_of, key) : NULL;
        bool reused = blk && same_inputs(blk, s, sl, ns_exists);
        if (reused) {
                __atomic_add_fetch(&blk->refs, 1, __ATOMIC_RELAXED);
        } else {
                int r = new_block(b, key, s, sl, ns_exists, &blk);
                if (r < 0)
                        return r;
                if ((r = mark_dirty(b, blk)) < 0) {
                        dns_block_unref(blk);
                        return r;
                }
        }
        *out = blk;
        return 0;
}

static int add_service(struct build *b, const struct se_service *s)
{
        struct dns_block *blk = NULL;
        int r = s ? service_block(b, s, &blk) : 0; /* (a Service list holds only Services) */
        if (r < 0 || !blk)
                return r;
        struct se_dns_zone *z = b->z;
        z->blocks[z->n_blocks++] = blk; /* the zone owns it from here */
        return se_hashmap_put(&z->block_of, blk->key, blk, NULL);
}

/* The PTRs of the previous zone's blocks not in this one (the Service
 * changed or went); their names went with them. */
static int drop_gone(struct build *b)
{
        int r = 0;
        for (size_t i = 0; b->prev && i < b->prev->n_blocks && r == 0; i++) {
                const struct dns_block *old = b->prev->blocks[i];
                if (se_hashmap_get(&b->z->block_of, old->key) != old)
                        r = mark_dirty(b, old);
        }
        return r;
}

/* Reverse names from the blocks' wishes, in Service order as CoreDNS
 * ranks a ClusterIP's Services. With a previous zone only the dirty ones:
 * any other has the same wishes from the same blocks as there, so its node
 * is shared (and its key, in the block that made it, lives as long). */
static int place_ptrs(struct build *b)
{
        struct se_dns_zone *z = b->z;
        bool all = b->prev == NULL;
        if (!all) {
                for (size_t i = 0; i < DNS_REV_SHARDS; i++)
                        if ((z->rev[i] = b->prev->rev[i]))
                                __atomic_add_fetch(&z->rev[i]->refs, 1, __ATOMIC_RELAXED);
                const char *k;
                for (size_t it = 0; se_hashmap_next(&b->dirty, &it, &k, NULL);) {
                        struct dns_rev_shard *s = own_shard(b, dns_rev_shard_of(se_hash_str(k)));
                        if (!s)
                                return -ENOMEM;
                        dns_rev_unref(se_hashmap_remove(&s->names, k));
                }
                if (b->dirty.n == 0)
                        return 0;
        }
        int r = 0;
        for (size_t i = 0; i < z->n_blocks && r == 0; i++) {
                const struct dns_block *blk = z->blocks[i];
                for (size_t k = 0; k < blk->n_ptrs && r == 0; k++) {
                        const struct dns_ptr_want *p = &blk->ptrs[k];
                        uint32_t bit = p->hash_hi & 0xffff;
                        if (all || ((b->dirty_bits[bit / 64] >> (bit % 64) & 1) &&
                                    se_hashmap_get(&b->dirty, p->key)))
                                r = make_ptr(b, p->key, p->target, p->cluster_ip, p->why);
                }
        }
        finish(&b->fresh);
        return r;
}

/* ---- a build from the Services a change touched ---- */

/* The namespaces that exist are those prev was built with, so each of its
 * blocks' ns_exists still holds. */
static bool same_namespaces(const struct build *b)
{
        const struct se_dns_zone *prev = b->prev;
        if (b->ns.n != prev->n_namespaces)
                return false;
        const char *ns;
        char key[KEY_MAX];
        for (size_t it = 0; se_hashmap_next(&b->ns, &it, &ns, NULL);) {
                keyf(key, sizeof(key), "%s.svc.%s", ns, prev->zone);
                const struct dns_node *n = se_hashmap_get(&prev->own_names, key);
                if (!n || n->kind != DNS_NODE_NAMESPACE)
                        return false;
        }
        return true;
}

/* The Service of a changed key as the store has it now (NULL: gone), with
 * the slices of its namespace indexed. */
static int changed_service(struct build *b, const char *key, const struct se_service **out)
{
        char buf[KEY_MAX];
        *out = NULL;
        size_t n = strlen(key);
        const char *slash = strchr(key, '/');
        if (n >= sizeof(buf) || !slash)
                return 0;
        memcpy(buf, key, n + 1);
        buf[slash - key] = '\0';
        const char *ns = buf, *name = buf + (slash - key) + 1;
        const struct se_object *o = se_store_get(b->st, SE_KIND_SERVICE, ns, name);
        if (!o)
                return 0;
        if (!se_hashmap_get(&b->sliced_ns, o->meta.namespace)) {
                int r = index_slices(b, o->meta.namespace);
                if (r == 0)
                        r = se_hashmap_put(&b->sliced_ns, o->meta.namespace, (void *)1, NULL);
                if (r < 0)
                        return r;
        }
        *out = se_service_of(o);
        return 0;
}

/* Store order: namespace, then name. */
static int cmp_block(const struct dns_block *x, const struct dns_block *y)
{
        int c = strcmp(x->svc->meta.namespace, y->svc->meta.namespace);
        return c ? c : strcmp(x->svc->meta.name, y->svc->meta.name);
}

static int cmp_block_ptr(const void *x, const void *y)
{
        return cmp_block(*(const struct dns_block *const *)x, *(const struct dns_block *const *)y);
}

/* The first of prev's blocks not before blk in store order. */
static size_t block_pos(const struct se_dns_zone *prev, const struct dns_block *blk)
{
        size_t lo = 0, hi = prev->n_blocks;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (cmp_block(prev->blocks[mid], blk) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static int cmp_size(const void *x, const void *y)
{
        size_t a = *(const size_t *)x, c = *(const size_t *)y;
        return a < c ? -1 : a > c;
}

/* z->blocks: prev's in order, without those of the changed keys, with
 * fresh (sorted) at their places: found by binary search, so the blocks
 * in between are copied without a comparison. The zone owns them all
 * from here (its release drops them). */
static void merge_blocks(struct build *b, const struct se_dns_changes *ch, struct dns_block **fresh,
                         size_t n_fresh)
{
        struct se_dns_zone *z = b->z;
        const struct se_dns_zone *prev = b->prev;
        /* the indexes of the blocks the changed keys had (fresh's array
         * is free to reuse: its blocks are put in place first) */
        size_t n_rm = 0, *rm = se_calloc(ch->keys.n ? ch->keys.n : 1, sizeof(*rm));
        const char *key;
        for (size_t it = 0; rm && se_hashmap_next(&ch->keys, &it, &key, NULL);) {
                const struct dns_block *old = se_hashmap_get(&prev->block_of, key);
                if (old)
                        rm[n_rm++] = block_pos(prev, old);
        }
        if (rm && n_rm > 1)
                qsort(rm, n_rm, sizeof(*rm), cmp_size);
        size_t i = 0, f = 0, k = 0;
        while (i < prev->n_blocks || f < n_fresh) {
                size_t cut = prev->n_blocks;
                size_t pos_f = f < n_fresh ? block_pos(prev, fresh[f]) : cut;
                if (pos_f < cut)
                        cut = pos_f;
                if (rm && k < n_rm && rm[k] < cut)
                        cut = rm[k];
                for (; i < cut; i++) {
                        struct dns_block *old = prev->blocks[i];
                        if (!rm && se_hashmap_get(&ch->keys, old->key))
                                continue; /* (no memory for rm: the slow way) */
                        __atomic_add_fetch(&old->refs, 1, __ATOMIC_RELAXED);
                        z->blocks[z->n_blocks++] = old;
                }
                if (f < n_fresh && pos_f == i)
                        z->blocks[z->n_blocks++] = fresh[f++];
                else if (rm && k < n_rm && rm[k] == i)
                        i++, k++; /* changed: in fresh, or gone */
        }
        free(rm);
}

/* prev's blocks but those of the changed Services, whose blocks are made
 * (or found unchanged) and merged in at their place in store order; the
 * reverse names of the blocks that went are marked to be made afresh. */
static int build_changed(struct build *b, const struct se_dns_changes *ch)
{
        struct se_dns_zone *z = b->z;
        const struct se_dns_zone *prev = b->prev;
        size_t n_keys = ch->keys.n, n_fresh = 0;
        struct dns_block **fresh = se_calloc(n_keys ? n_keys : 1, sizeof(*fresh));
        if (!fresh || !(z->blocks = se_calloc(prev->n_blocks + n_keys + 1, sizeof(*z->blocks)))) {
                free(fresh);
                return -ENOMEM;
        }
        int r = 0;
        const char *key;
        for (size_t it = 0; r == 0 && se_hashmap_next(&ch->keys, &it, &key, NULL);) {
                const struct se_service *s = NULL;
                struct dns_block *blk = NULL;
                r = changed_service(b, key, &s);
                if (r == 0 && s)
                        r = service_block(b, s, &blk);
                if (r == 0 && blk)
                        fresh[n_fresh++] = blk;
        }
        if (r < 0) {
                for (size_t i = 0; i < n_fresh; i++)
                        dns_block_unref(fresh[i]);
                free(fresh);
                return r;
        }
        if (n_fresh > 1)
                qsort(fresh, n_fresh, sizeof(*fresh), cmp_block_ptr);
        merge_blocks(b, ch, fresh, n_fresh);
        r = se_hashmap_copy(&z->block_of, &prev->block_of);
        for (size_t it = 0; r == 0 && se_hashmap_next(&ch->keys, &it, &key, NULL);)
                (void)se_hashmap_remove(&z->block_of, key);
        for (size_t i = 0; r == 0 && i < n_fresh; i++)
                r = se_hashmap_put(&z->block_of, fresh[i]->key, fresh[i], NULL);
        free(fresh);
        /* what drop_gone does, for the changed Services alone */
        for (size_t it = 0; r == 0 && se_hashmap_next(&ch->keys, &it, &key, NULL);) {
                const struct dns_block *old = se_hashmap_get(&prev->block_of, key);
                if (old && se_hashmap_get(&z->block_of, key) != old)
                        r = mark_dirty(b, old);
        }
        return r;
}

/* Every Service of the store, each block carried over from prev or made. */
static int build_services(struct build *b)
{
        int r = index_slices(b, NULL);
        const struct se_object **v = NULL;
        long n = r == 0 ? se_store_list(b->st, SE_KIND_SERVICE, NULL, &v) : 0;
        if (n < 0)
                r = (int)n;
        if (r == 0 && !(b->z->blocks = se_calloc(n > 0 ? (size_t)n : 1, sizeof(*b->z->blocks))))
                r = -ENOMEM;
        for (long i = 0; i < n && r == 0; i++)
                r = add_service(b, se_service_of(v[i]));
        free(v);
        return r == 0 ? drop_gone(b) : r;
}

static int build_all(struct build *b, enum se_dns_pods pods, const struct se_dns_changes *ch)
{
        int r = build_frame(b);
        if (r == 0)
                r = index_namespaces(b);
        if (r == 0)
                r = ch && !ch->all && b->prev && same_namespaces(b) ? build_changed(b, ch) :
                                                                      build_services(b);
        if (r == 0)
                r = place_ptrs(b);
        if (r == 0 && pods == SE_DNS_PODS_VERIFIED)
                r = build_pods(b);
        if (r == 0)
                finish(&b->z->own);
        return r;
}

int se_dns_zone_build(const struct se_store *st, const struct se_dns_options *o,
                      struct se_dns_zone **out, struct se_diag *diag)
{
        return se_dns_zone_update(st, o, NULL, out, diag);
}

int se_dns_zone_update(const struct se_store *st, const struct se_dns_options *o,
                       const struct se_dns_zone *prev, struct se_dns_zone **out,
                       struct se_diag *diag)
{
        return se_dns_zone_update_changed(st, o, prev, NULL, out, diag);
}

int se_dns_zone_update_changed(const struct se_store *st, const struct se_dns_options *o,
                               const struct se_dns_zone *prev, const struct se_dns_changes *ch,
                               struct se_dns_zone **out, struct se_diag *diag)
{
        static const struct se_dns_options defaults = { .ttl = 5 };
        if (!o)
                o = &defaults;
        char zone[256];
        int r = check_zone_name(o->zone ? o->zone : "cluster.local", zone, diag);
        if (r < 0)
                return r;
        struct se_dns_zone *z = se_calloc(1, sizeof(*z));
        if (!z || !(z->zone = se_strdup(zone))) {
                free(z);
                se_diag_set(diag, NULL, 0, 0, "DNS zone: out of memory");
                return -ENOMEM;
        }
        z->refs = 1;
        z->ttl = o->ttl > 3600 ? 3600 : o->ttl;
        z->pods = o->pods;
        z->reverse_fallthrough = o->reverse_fallthrough;
        z->endpoint_pod_names = o->endpoint_pod_names;
        z->serial = o->serial ? o->serial : (uint32_t)time(NULL);
        z->zone_wire_len = (size_t)dns_name_wire(zone, z->zone_wire);
        /* a block holds records made with these options */
        if (prev && (prev->ttl != z->ttl || prev->endpoint_pod_names != z->endpoint_pod_names ||
                     strcmp(prev->zone, z->zone) != 0))
                prev = NULL;
        struct build b = { .z = z,
                           .st = st,
                           .prev = prev,
                           .arena = &z->arena,
                           .list = &z->own,
                           .endpoint_pod_names = o->endpoint_pod_names };
        se_store_rdlock(st);
        r = build_all(&b, o->pods, ch);
        se_store_unlock(st);
        build_release(&b);
        if (r < 0) {
                se_dns_zone_unref(z);
                se_diag_set(diag, NULL, 0, 0, "DNS zone: out of memory");
                return r;
        }
        *out = z;
        return 0;
}
