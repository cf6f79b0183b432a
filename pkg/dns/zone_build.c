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
        /* the reverse shards to make afresh (an address of a block made
         * or gone is in them) */
        bool dirty_shard[DNS_REV_SHARDS];
        struct dns_block **made; /* the blocks this build made */
        size_t n_made, cap_made;
        /* the block being built: its endpoint table and ClusterIPs */
        struct dns_ep *eps;
        size_t n_eps, cap_eps;
        struct dns_ep_name *labels; /* of the labelled eps, in order */
        size_t n_labels, cap_labels;
        struct dns_cip cips[8];
        uint32_t n_cips;
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
/* The name an endpoint has besides its address: its hostname; with
 * endpoint_pod_names the pod's name next; else NULL. */
static const char *endpoint_own_name(const struct build *b, const struct se_slice_endpoint *e)
{
        if (dns_label_ok(e->hostname))
                return e->hostname;
        const struct se_object_ref *ref = se_slice_endpoint_target_ref(e);
        if (b->endpoint_pod_names && ref && dns_label_ok(ref->name) &&
            (!ref->kind || strcmp(ref->kind, "Pod") == 0))
                return ref->name;
        return NULL;
}

/* The name CoreDNS gives an endpoint: endpoint_own_name, else the address
 * with '-' for '.' and ':' (an IPv6 name that would start or end with '-'
 * gets a 0 there). */
static bool endpoint_label(const struct build *b, const struct se_slice_endpoint *e, const char *ip,
                           char *out, size_t cap)
{
        const char *own = endpoint_own_name(b, e);
        if (own) {
                snprintf(out, cap, "%s", own);
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
        return dns_label_ok(out);
}

static bool endpoint_ready(const struct se_slice_endpoint *e)
{
        return e->ready != SE_FALSE; /* absent counts as ready */
}

/* ---- services ---- */

/* An address of the block's for PTRs; false when ip is not one. */
static bool parse_addr(const char *ip, uint8_t addr[16], uint8_t *v6)
{
        memset(addr, 0, 16);
        if (!ip)
                return false;
        if (inet_pton(AF_INET, ip, addr) == 1) {
                *v6 = 0;
                return true;
        }
        *v6 = 1;
        return inet_pton(AF_INET6, ip, addr) == 1;
}

/* The Service's ClusterIPs that are addresses, for their PTRs. */
static void note_cluster_ips(struct build *b, const struct se_service *s)
{
        const char *one[1] = { s->cluster_ip };
        const char *const *v = s->cluster_ips.n ? s->cluster_ips.v : one;
        uint32_t n = s->cluster_ips.n ? s->cluster_ips.n : (s->cluster_ip ? 1 : 0);
        for (uint32_t i = 0; i < n && b->n_cips < SE_ARRAY_SIZE(b->cips); i++) {
                struct dns_cip *c = &b->cips[b->n_cips];
                if (parse_addr(v[i], c->addr, &c->v6))
                        b->n_cips++;
        }
}

/* A headless Service's own name and named ports (of a slice with an
 * endpoint in the table): nodes whose records the table writes. */
static int headless_nodes(struct build *b, const struct se_endpoint_slice *es, const char *fqdn)
{
        struct dns_node *n = get_node(b, fqdn, DNS_NODE_SERVICE);
        if (!n)
                return -ENOMEM;
        n->from_table = true;
        for (uint32_t p = 0; p < es->n_ports; p++) {
                const struct se_slice_port *sp = &es->ports[p];
                if (!sp->has_port || !sp->name || !dns_label_ok(sp->name))
                        continue;
                char key[KEY_MAX];
                enum se_protocol proto = sp->has_protocol ? sp->protocol : SE_PROTO_TCP;
                keyf(key, sizeof(key), "%s.%s.%s", sp->name, proto_label(proto), fqdn);
                if (!(n = get_node(b, key, DNS_NODE_PORT)))
                        return -ENOMEM;
                n->from_table = true;
        }
        return 0;
}

static int push_ep(struct build *b, const struct dns_ep *e, const char *label)
{
        if (b->n_eps == b->cap_eps) {
                size_t cap = b->cap_eps ? 2 * b->cap_eps : 64;
                struct dns_ep *v = se_reallocarray(b->eps, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                b->eps = v;
                b->cap_eps = cap;
        }
        if (label && b->n_labels == b->cap_labels) {
                size_t cap = b->cap_labels ? 2 * b->cap_labels : 16;
                struct dns_ep_name *v = se_reallocarray(b->labels, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                b->labels = v;
                b->cap_labels = cap;
        }
        if (label)
                b->labels[b->n_labels++] = (struct dns_ep_name){ (uint32_t)b->n_eps, label };
        b->eps[b->n_eps] = *e;
        b->eps[b->n_eps++].labelled = label != NULL;
        return 0;
}

/* The table of the ready endpoints' addresses (their names, A/AAAA, SRV,
 * PTRs, and a headless Service's records are written from it); for a
 * headless Service with names also the nodes of its own name and ports. */
static int collect_endpoints(struct build *b, const struct se_service *s, const char *fqdn,
                             bool headless)
{
        char key[KEY_MAX];
        (void)ns_key(key, s->obj.meta.namespace, s->obj.meta.name);
        const struct slice_list *sl = se_hashmap_get(&b->slices, key);
        for (size_t i = 0; sl && i < sl->n && i <= UINT16_MAX; i++) {
                const struct se_endpoint_slice *es = sl->v[i];
                bool any = false;
                for (uint32_t k = 0; k < es->n_endpoints; k++) {
                        const struct se_slice_endpoint *ep = &es->endpoints[k];
                        char label[128], dashed[64];
                        if (!endpoint_ready(ep) || ep->addresses.n == 0 ||
                            !endpoint_label(b, ep, ep->addresses.v[0], label, sizeof(label)))
                                continue;
                        /* the name as the table would spell it, else kept */
                        const char *kept = endpoint_own_name(b, ep);
                        /* a name too long is taken for no memory, as
                         * every record to it would be */
                        if (!b->blk->fqdn_wire ||
                            dns_wire_len(b->blk->fqdn_wire) + 1 + strlen(label) > SE_DNS_MAX_NAME)
                                return -ENOMEM;
                        for (uint32_t a = 0; a < ep->addresses.n && a < 100; a++) {
                                struct dns_ep e = { .slice = (uint16_t)i };
                                if (!parse_addr(ep->addresses.v[a], e.addr, &e.v6))
                                        continue;
                                const char *own = kept;
                                if (!kept) {
                                        dns_ep_dashed(&e, dashed);
                                        if (strcmp(dashed, label) != 0 &&
                                            !(own = se_arena_strdup(b->arena, label)))
                                                return -ENOMEM;
                                }
                                if (push_ep(b, &e, own) < 0)
                                        return -ENOMEM;
                                any = true;
                        }
                }
                int r = any && headless ? headless_nodes(b, es, fqdn) : 0;
                if (r < 0)
                        return r;
        }
        return 0;
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

/* A Service whose namespace does not exist has no names, but CoreDNS
 * still answers PTR for its addresses (its reverse index ignores
 * namespaces). A ClusterIP Service without ports (possible in a manifest,
 * not in the API) has no name of its own: CoreDNS finds one through its
 * ports. A headless one without a ready endpoint has none either:
 * NXDOMAIN for every type (spec 2.4.1). */
static int build_service(struct build *b, const struct se_service *s)
{
        const char *ns = s->obj.meta.namespace, *name = s->obj.meta.name;
        if (!dns_label_ok(ns) || !dns_label_ok(name))
                return 0;
        char fqdn[KEY_MAX];
        keyf(fqdn, sizeof(fqdn), "%s.%s.svc.%s", name, ns, b->z->zone);
        if (!(b->blk->fqdn = se_arena_strdup(b->arena, fqdn)))
                return -ENOMEM;
        /* (NULL when too long: no record can name it) */
        b->blk->fqdn_wire = wire_name(b, fqdn);
        bool names = se_hashmap_get(&b->ns, ns) != NULL;
        if (s->type == SE_SVC_EXTERNAL_NAME) {
                const char *why = names ? why_of(b, "Service", &s->obj) : NULL;
                return names ? (why ? build_external(b, s, fqdn, why) : -ENOMEM) : 0;
        }
        const char *first = s->cluster_ips.n ? s->cluster_ips.v[0] : s->cluster_ip;
        bool headless = first && strcmp(first, "None") == 0;
        /* a name too long is taken for no memory, as every record to it
         * would be */
        if (!b->blk->fqdn_wire && !(names && headless))
                return -ENOMEM;
        b->blk->names = names;
        b->blk->ptrs_by_service = !names || (!headless && s->n_ports == 0);
        if (!names || !headless)
                note_cluster_ips(b, s);
        b->blk->cluster_ip = names && !headless && s->n_ports;
        return collect_endpoints(b, s, fqdn, names && headless);
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
        if (!dns_label_ok(ns) || se_hashmap_get(&b->ns, ns))
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

/* Every record array cut to its size: the zone is read-only from here
 * (SRV records, whose weights depend on the whole set, are all written
 * when asked: zone_table.c). */
static void finish(struct dns_node_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                struct dns_node *n = l->v[i];
                if (n->rrs.cap > n->rrs.n && n->rrs.n > 0) {
                        struct dns_rr *v = se_reallocarray(n->rrs.v, n->rrs.n, sizeof(*v));
                        if (v) { /* else keep the bigger one */
                                n->rrs.v = v;
                                n->rrs.cap = n->rrs.n;
                        }
                }
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
                if (!dns_label_ok(l)) {
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
        free(b->made); /* (the blocks are the zone's) */
        free(b->eps);
        free(b->labels);
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
}

static int cmp_by_name(const void *x, const void *y, void *labels)
{
        uint32_t a = *(const uint32_t *)x, c = *(const uint32_t *)y;
        const char(*l)[64] = labels;
        int d = strcmp(l[a], l[c]);
        return d ? d : (a > c) - (a < c);
}

/* The block's endpoint table and ClusterIPs into its slab, with the
 * index of the table by name. */
static int seal_table(struct build *b, struct dns_block *blk)
{
        struct se_arena *a = &blk->slab->arena;
        uint32_t n = (uint32_t)b->n_eps;
        if (b->n_cips) {
                if (!(blk->cips = se_arena_array(a, b->n_cips, sizeof(*blk->cips))))
                        return -ENOMEM;
                memcpy(blk->cips, b->cips, b->n_cips * sizeof(*blk->cips));
                blk->n_cips = b->n_cips;
        }
        if (n == 0)
                return 0;
        char(*labels)[64] = se_calloc(n, sizeof(*labels));
        blk->eps = se_arena_array(a, n, sizeof(*blk->eps));
        blk->by_name = se_arena_array(a, n, sizeof(*blk->by_name));
        if (!labels || !blk->eps || !blk->by_name) {
                free(labels);
                return -ENOMEM;
        }
        memcpy(blk->eps, b->eps, n * sizeof(*blk->eps));
        if (b->n_labels) {
                if (!(blk->labels = se_arena_array(a, b->n_labels, sizeof(*blk->labels)))) {
                        free(labels);
                        return -ENOMEM;
                }
                memcpy(blk->labels, b->labels, b->n_labels * sizeof(*blk->labels));
                blk->n_labels = (uint32_t)b->n_labels;
        }
        for (uint32_t i = 0; i < n; i++) {
                dns_ep_label(blk, &blk->eps[i], labels[i]);
                blk->by_name[i] = i;
        }
        qsort_r(blk->by_name, n, sizeof(*blk->by_name), cmp_by_name, labels);
        for (uint32_t k = 0, pos = 0; k < n; k++) {
                uint32_t i = blk->by_name[k];
                if (k > 0 && strcmp(labels[i], labels[blk->by_name[k - 1]]) != 0)
                        pos = k;
                blk->eps[i].name_pos = pos;
        }
        blk->n_eps = n;
        free(labels);
        return 0;
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
        /* the block and its slice array live in the slab too: one malloc
         * header and rounding less each, 10,000 times at 10,000 Services */
        struct dns_block *blk = se_arena_alloc(&b->slab->arena, sizeof(*blk));
        if (!blk)
                return -ENOMEM;
        blk->refs = 1;
        blk->slab = b->slab;
        __atomic_add_fetch(&b->slab->refs, 1, __ATOMIC_RELAXED);
        blk->ns_exists = ns_exists;
        blk->svc = se_object_ref(SE_UNCONST(struct se_object, &s->obj));
        size_t n = sl ? sl->n : 0;
        int r = 0;
        if (n && !(blk->slices = se_arena_array(&b->slab->arena, n, sizeof(*blk->slices))))
                r = -ENOMEM;
        for (size_t i = 0; i < n && r == 0; i++)
                blk->slices[blk->n_slices++] =
                        se_object_ref(SE_UNCONST(struct se_object, &sl->v[i]->obj));
        if (r == 0 && !(blk->key = se_arena_strdup(&b->slab->arena, key)))
                r = -ENOMEM;
        b->n_eps = 0;
        b->n_labels = 0;
        b->n_cips = 0;
        if (r == 0) {
                b->arena = &b->slab->arena;
                b->list = &blk->nodes;
                b->blk = blk;
                r = build_service(b, s);
                if (r == 0)
                        r = seal_table(b, blk);
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

/* The reverse shards with an address of blk are to be made afresh (it
 * is new, or gone since the previous zone); a build without a previous
 * zone makes them all. */
static void mark_dirty(struct build *b, const struct dns_block *blk)
{
        for (uint32_t i = 0; b->prev && i < blk->n_cips; i++)
                b->dirty_shard[dns_rev_shard_of(blk->cips[i].addr, blk->cips[i].v6)] = true;
        for (uint32_t i = 0; b->prev && i < blk->n_eps; i++)
                b->dirty_shard[dns_rev_shard_of(blk->eps[i].addr, blk->eps[i].v6)] = true;
}

/* The Service's block, referenced for the caller: the previous zone's
 * when nothing it was made from changed, else a new one; NULL when the
 * Service has no names. */
static int service_block(struct build *b, const struct se_service *s, struct dns_block **out)
{
        *out = NULL;
        const char *ns = s->obj.meta.namespace, *name = s->obj.meta.name;
        if (!dns_label_ok(ns) || !dns_label_ok(name))
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
                if (b->n_made == b->cap_made) {
                        size_t cap = b->cap_made ? 2 * b->cap_made : 16;
                        struct dns_block **v = se_reallocarray(b->made, cap, sizeof(*v));
                        if (!v) {
                                dns_block_unref(blk);
                                return -ENOMEM;
                        }
                        b->made = v;
                        b->cap_made = cap;
                }
                b->made[b->n_made++] = blk; /* (the zone's reference) */
                mark_dirty(b, blk);
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
        for (size_t i = 0; b->prev && i < b->prev->n_blocks; i++) {
                const struct dns_block *old = b->prev->blocks[i];
                if (se_hashmap_get(&b->z->block_of, old->key) != old)
                        mark_dirty(b, old);
        }
        return 0;
}

/* Store order: namespace, then name. */
static int cmp_block(const struct dns_block *x, const struct dns_block *y)
{
        int c = strcmp(x->svc->meta.namespace, y->svc->meta.namespace);
        return c ? c : strcmp(x->svc->meta.name, y->svc->meta.name);
}

/* By address, then in Service order as CoreDNS ranks a ClusterIP's
 * Services, a block's ClusterIPs before its endpoints. */
static int cmp_rev(const void *x, const void *y)
{
        const struct dns_rev *a = x, *c = y;
        uint8_t v6;
        const uint8_t *addr = dns_rev_addr(c, &v6);
        int d = a->head != c->head ? (a->head < c->head ? -1 : 1) :
                                     dns_rev_cmp_addr(a, c->head, addr, v6);
        if (d == 0 && a->blk != c->blk)
                d = cmp_block(a->blk, c->blk);
        if (d == 0 && (a->idx & DNS_REV_CIP) != (c->idx & DNS_REV_CIP))
                d = a->idx & DNS_REV_CIP ? -1 : 1;
        return d ? d : (a->idx > c->idx) - (a->idx < c->idx);
}

struct rev_fill {
        struct dns_rev *v[DNS_REV_SHARDS];
        size_t n[DNS_REV_SHARDS], cap[DNS_REV_SHARDS];
};

static int rev_push(struct rev_fill *f, const struct dns_block *blk, uint32_t idx)
{
        struct dns_rev e = { .blk = blk, .idx = idx };
        uint8_t v6;
        const uint8_t *addr = dns_rev_addr(&e, &v6);
        e.head = dns_rev_head(addr);
        size_t i = dns_rev_shard_of(addr, v6);
        if (f->n[i] == f->cap[i]) {
                size_t cap = f->cap[i] ? 2 * f->cap[i] : 16;
                struct dns_rev *v = se_reallocarray(f->v[i], cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                f->v[i] = v;
                f->cap[i] = cap;
        }
        f->v[i][f->n[i]++] = e;
        return 0;
}

/* A block's addresses into the shards being made (dirty only, or all). */
static int rev_add_block(struct rev_fill *f, const struct build *b, const struct dns_block *blk,
                         bool all)
{
        int r = 0;
        for (uint32_t i = 0; i < blk->n_cips && r == 0; i++) {
                const struct dns_cip *c = &blk->cips[i];
                if (all || b->dirty_shard[dns_rev_shard_of(c->addr, c->v6)])
                        r = rev_push(f, blk, DNS_REV_CIP | i);
        }
        for (uint32_t i = 0; i < blk->n_eps && r == 0; i++) {
                const struct dns_ep *e = &blk->eps[i];
                if (all || b->dirty_shard[dns_rev_shard_of(e->addr, e->v6)])
                        r = rev_push(f, blk, i);
        }
        return r;
}

/* The reverse index. With a previous zone its shards are shared but
 * those with an address of a block made or gone: those are its entries of
 * the blocks still here, and the made blocks' ones. */
static int place_reverse(struct build *b)
{
        struct se_dns_zone *z = b->z;
        bool all = b->prev == NULL;
        struct rev_fill *f = se_calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        int r = 0;
        for (size_t i = 0; !all && i < DNS_REV_SHARDS && r == 0; i++) {
                const struct dns_rev_shard *old = b->prev->rev[i];
                if (!b->dirty_shard[i]) {
                        if ((z->rev[i] = SE_UNCONST(struct dns_rev_shard, old)))
                                __atomic_add_fetch(&z->rev[i]->refs, 1, __ATOMIC_RELAXED);
                        continue;
                }
                for (size_t k = 0; old && k < old->n && r == 0; k++) {
                        const struct dns_rev *e = &old->v[k];
                        if (se_hashmap_get(&z->block_of, e->blk->key) == e->blk)
                                r = rev_push(f, e->blk, e->idx);
                }
        }
        if (all)
                for (size_t i = 0; i < z->n_blocks && r == 0; i++)
                        r = rev_add_block(f, b, z->blocks[i], true);
        else
                for (size_t i = 0; i < b->n_made && r == 0; i++)
                        r = rev_add_block(f, b, b->made[i], false);
        for (size_t i = 0; i < DNS_REV_SHARDS; i++) {
                if (r == 0 && f->n[i]) {
                        struct dns_rev_shard *sh = se_calloc(1, sizeof(*sh));
                        struct dns_rev *v = se_reallocarray(f->v[i], f->n[i], sizeof(*v));
                        if (!sh || !v) {
                                free(sh);
                                r = -ENOMEM;
                        } else {
                                qsort(v, f->n[i], sizeof(*v), cmp_rev);
                                *sh = (struct dns_rev_shard){ .refs = 1, .v = v, .n = f->n[i] };
                                z->rev[i] = sh;
                                f->v[i] = NULL;
                        }
                }
                free(f->v[i]);
        }
        free(f);
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
                        mark_dirty(b, old);
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
                r = place_reverse(b);
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
