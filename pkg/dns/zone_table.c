/* zone_table.c — the names written from a block's endpoint table when they
 * are asked for: endpoint names, a headless Service's own name and ports,
 * reverse names. The zone keeps one packed entry per endpoint address, not
 * a node and its records: the records are a pure function of the entry. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/store.h>

#include "dns_internal.h"

#define MAX_NODE_RRS (2 * DNS_MAX_RRS_PER_NAME) /* as a built node holds */

/* ---- scratch ---- */

void *dns_scratch_alloc(struct dns_scratch *s, size_t n)
{
        n = (n + 15) & ~(size_t)15;
        if (n <= sizeof(s->buf) - s->used) {
                void *p = s->buf + s->used;
                s->used += n;
                memset(p, 0, n);
                return p;
        }
        void *p = se_arena_alloc(&s->heap, n);
        if (p)
                memset(p, 0, n);
        return p;
}

void dns_scratch_release(struct dns_scratch *s)
{
        se_arena_release(&s->heap);
        s->used = 0;
}

static char *scratch_strdup(struct dns_scratch *s, const char *str)
{
        size_t n = strlen(str) + 1;
        char *p = dns_scratch_alloc(s, n);
        if (p)
                memcpy(p, str, n);
        return p;
}

/* ---- names ---- */

static size_t put_dec(char *out, unsigned v)
{
        size_t n = 0;
        if (v >= 100)
                out[n++] = (char)('0' + v / 100);
        if (v >= 10)
                out[n++] = (char)('0' + v / 10 % 10);
        out[n++] = (char)('0' + v % 10);
        return n;
}

void dns_ep_label(const struct dns_block *blk, const struct dns_ep *e, char out[64])
{
        if (e->labelled) {
                uint32_t i = (uint32_t)(e - blk->eps), lo = 0, hi = blk->n_labels;
                while (lo < hi) {
                        uint32_t mid = lo + (hi - lo) / 2;
                        if (blk->labels[mid].ep < i)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo < blk->n_labels && blk->labels[lo].ep == i) {
                        snprintf(out, 64, "%s", blk->labels[lo].label);
                        return;
                }
        }
        dns_ep_dashed(e, out);
}

void dns_ep_dashed(const struct dns_ep *e, char out[64])
{
        size_t o = 0;
        if (!e->v6) { /* (the common case, without inet_ntop) */
                for (int i = 0; i < 4; i++) {
                        if (i)
                                out[o++] = '-';
                        o += put_dec(out + o, e->addr[i]);
                }
                out[o] = '\0';
                return;
        }
        char ip[INET6_ADDRSTRLEN];
        if (!inet_ntop(AF_INET6, e->addr, ip, sizeof(ip)))
                ip[0] = '\0';
        if (ip[0] == ':')
                out[o++] = '0';
        for (const char *p = ip; *p && o + 2 < 64; p++)
                out[o++] = *p == ':' ? '-' : *p;
        if (o > 0 && out[o - 1] == '-')
                out[o++] = '0';
        out[o] = '\0';
}

static const struct se_endpoint_slice *slice_of(const struct dns_block *blk, const struct dns_ep *e)
{
        /* (the block holds slices alone: no kind check) */
        return (const struct se_endpoint_slice *)blk->slices[e->slice];
}

static const char *why_of(struct dns_scratch *s, const char *kind, const struct se_object *o)
{
        if (!s->why)
                return NULL;
        char buf[600];
        snprintf(buf, sizeof(buf), "%s %s/%s", kind, o->meta.namespace, o->meta.name);
        return scratch_strdup(s, buf);
}

/* "<label>.<fqdn>" as a wire name and, when key, as a key. */
static int ep_name(struct dns_scratch *s, const struct dns_block *blk, const struct dns_ep *e,
                   const char **key, const uint8_t **wire)
{
        char label[64];
        dns_ep_label(blk, e, label);
        size_t ll = strlen(label), fl = dns_wire_len(blk->fqdn_wire);
        if (ll == 0 || ll > 63 || 1 + ll + fl > SE_DNS_MAX_NAME)
                return -EINVAL; /* (the build made sure it is not) */
        uint8_t *w = dns_scratch_alloc(s, 1 + ll + fl);
        if (!w)
                return -ENOMEM;
        w[0] = (uint8_t)ll;
        memcpy(w + 1, label, ll);
        memcpy(w + 1 + ll, blk->fqdn_wire, fl);
        *wire = w;
        if (!key)
                return 0;
        size_t kl = strlen(blk->fqdn);
        char *k = dns_scratch_alloc(s, ll + 1 + kl + 1);
        if (!k)
                return -ENOMEM;
        memcpy(k, label, ll);
        k[ll] = '.';
        memcpy(k + ll + 1, blk->fqdn, kl + 1);
        *key = k;
        return 0;
}

/* ---- sets of what was written already ---- */

/* Open addressing over 64-bit keys (never 0), sized for n adds. */
struct seen {
        uint64_t *v;
        size_t mask;
};

static int seen_init(struct seen *h, struct dns_scratch *s, size_t n)
{
        size_t cap = 16;
        while (cap < 2 * n)
                cap *= 2;
        h->mask = cap - 1;
        h->v = dns_scratch_alloc(s, cap * sizeof(*h->v));
        return h->v ? 0 : -ENOMEM;
}

/* True when key is new (and now in the set). */
static bool seen_add(struct seen *h, uint64_t key)
{
        uint64_t x = key * 0x9e3779b97f4a7c15ull;
        for (size_t i = (size_t)(x >> 32) & h->mask;; i = (i + 1) & h->mask) {
                if (h->v[i] == key)
                        return false;
                if (h->v[i] == 0) {
                        h->v[i] = key;
                        return true;
                }
        }
}

static uint64_t addr_key(const struct dns_ep *e)
{
        uint64_t k = se_hash_mem(e->addr, 16) ^ e->v6;
        return k ? k : 1;
}

/* ---- records ---- */

struct rrs {
        struct dns_rr *v;
        uint32_t n, cap;
        uint32_t pairs; /* what SRV weights divide */
};

static int rrs_init(struct rrs *r, struct dns_scratch *s, size_t cap)
{
        if (cap > MAX_NODE_RRS)
                cap = MAX_NODE_RRS;
        r->cap = (uint32_t)cap;
        r->n = r->pairs = 0;
        r->v = dns_scratch_alloc(s, (cap ? cap : 1) * sizeof(*r->v));
        return r->v ? 0 : -ENOMEM;
}

static struct dns_rr *rrs_push(struct rrs *r)
{
        return r->n < r->cap ? &r->v[r->n++] : NULL;
}

static void push_addr(struct rrs *r, const struct se_dns_zone *z, const struct dns_ep *e,
                      const char *why)
{
        struct dns_rr *rr = rrs_push(r);
        if (rr)
                *rr = (struct dns_rr){ .type = e->v6 ? DNS_T_AAAA : DNS_T_A,
                                       .n_fixed = e->v6 ? 16 : 4,
                                       .ttl = z->ttl,
                                       .fixed = e->addr,
                                       .why = why };
}

static int push_srv(struct rrs *r, struct dns_scratch *s, const struct se_dns_zone *z, int32_t port,
                    const uint8_t *target, const struct dns_rr_set *add, const char *why)
{
        struct dns_rr *rr = rrs_push(r);
        if (!rr)
                return 0;
        uint8_t *f = dns_scratch_alloc(s, 6);
        if (!f)
                return -ENOMEM;
        f[4] = (uint8_t)(port >> 8);
        f[5] = (uint8_t)port;
        *rr = (struct dns_rr){ .type = DNS_T_SRV,
                               .n_fixed = 6,
                               .ttl = z->ttl,
                               .fixed = f,
                               .name = target,
                               .add = add,
                               .why = why };
        return 0;
}

/* CoreDNS divides 100 among the (address, port) pairs it found before it
 * dropped duplicates, at least 1 each. */
static void set_weights(struct rrs *r)
{
        uint32_t w = r->pairs ? 100 / r->pairs : 0;
        if (w == 0)
                w = 1;
        for (uint32_t i = 0; i < r->n; i++)
                if (r->v[i].type == DNS_T_SRV)
                        dns_put16(SE_UNCONST(uint8_t, r->v[i].fixed) + 2, (uint16_t)w);
}

static struct dns_node *new_node(struct dns_scratch *s, const char *key, enum dns_node_kind kind,
                                 const struct rrs *r)
{
        struct dns_node *n = dns_scratch_alloc(s, sizeof(*n));
        if (!n)
                return NULL;
        n->key = key;
        n->kind = (uint8_t)kind;
        n->rrs = (struct dns_rr_set){ .v = r->v, .n = r->n };
        return n;
}

static size_t ports_with_port(const struct se_endpoint_slice *es)
{
        size_t n = 0;
        for (uint32_t p = 0; p < es->n_ports; p++)
                n += es->ports[p].has_port;
        return n;
}

/* ---- an endpoint's name ---- */

static bool wants(const struct dns_scratch *s, uint16_t type)
{
        return s->want == 0 || s->want == type ||
               (type == DNS_T_AAAA && s->want == DNS_T_A) || /* (both go together) */
               (type == DNS_T_A && s->want == DNS_T_AAAA);
}

/* The node of an endpoint name; with srv false its addresses alone (what
 * the additional section of an SRV answer needs). */
static const struct dns_node *endpoint_node(const struct se_dns_zone *z,
                                            const struct dns_block *blk, uint32_t lo, uint32_t hi,
                                            bool srv, struct dns_scratch *s)
{
        size_t cap = 0;
        for (uint32_t k = lo; k < hi; k++)
                cap += 1 + (srv ? ports_with_port(slice_of(blk, &blk->eps[blk->by_name[k]])) : 0);
        struct rrs r;
        struct seen addrs, ports = { 0 };
        const char *key;
        const uint8_t *target;
        key = NULL; /* (an answer needs none) */
        if (lo >= hi || rrs_init(&r, s, cap) < 0 || seen_init(&addrs, s, hi - lo) < 0 ||
            (srv && seen_init(&ports, s, cap) < 0) ||
            ep_name(s, blk, &blk->eps[blk->by_name[lo]], s->want ? NULL : &key, &target) < 0)
                return NULL;
        /* the addresses first: the SRV records' additionals are this
         * node's records, which the SRV ones then join */
        for (uint32_t k = lo; k < hi; k++) {
                const struct dns_ep *e = &blk->eps[blk->by_name[k]];
                if (seen_add(&addrs, addr_key(e)))
                        push_addr(&r, z, e, why_of(s, "EndpointSlice", blk->slices[e->slice]));
        }
        struct dns_node *n = new_node(s, key, DNS_NODE_ENDPOINT, &r);
        if (!n)
                return NULL;
        n->wire = target;
        for (uint32_t k = lo; srv && k < hi; k++) {
                const struct dns_ep *e = &blk->eps[blk->by_name[k]];
                const struct se_endpoint_slice *es = slice_of(blk, e);
                for (uint32_t p = 0; p < es->n_ports; p++) {
                        if (!es->ports[p].has_port)
                                continue;
                        r.pairs++;
                        int32_t port = es->ports[p].port;
                        if (seen_add(&ports, (uint64_t)(uint32_t)port + 1) &&
                            push_srv(&r, s, z, port, target, &n->rrs,
                                     why_of(s, "EndpointSlice", &es->obj)) < 0)
                                return NULL;
                }
        }
        set_weights(&r);
        n->rrs.n = r.n;
        return n;
}

const struct dns_node *dns_table_endpoint(const struct se_dns_zone *z, const struct dns_block *blk,
                                          uint32_t lo, uint32_t hi, struct dns_scratch *s)
{
        return endpoint_node(z, blk, lo, hi, wants(s, DNS_T_SRV), s);
}

/* by_name's range of the entries with the name of entry i. */
static void name_range(const struct dns_block *blk, uint32_t i, uint32_t *lo, uint32_t *hi)
{
        uint32_t pos = blk->eps[i].name_pos, k = pos;
        while (k < blk->n_eps && blk->eps[blk->by_name[k]].name_pos == pos)
                k++;
        *lo = pos;
        *hi = k;
}

/* ---- a headless Service's own name and its named ports ---- */

struct table_fill {
        const struct se_dns_zone *z;
        const struct dns_block *blk;
        struct dns_scratch *s;
        /* the endpoint names' nodes (their addresses: the additionals),
         * by where each name starts in by_name */
        const struct dns_node **names;
        struct seen srvs;
        struct rrs r;
};

static const struct dns_node *name_node(struct table_fill *f, uint32_t i)
{
        uint32_t pos = f->blk->eps[i].name_pos, lo, hi;
        if (f->names[pos])
                return f->names[pos];
        name_range(f->blk, i, &lo, &hi);
        return f->names[pos] = endpoint_node(f->z, f->blk, lo, hi, false, f->s);
}

/* An SRV to the name of entry e unless one to it and port is there. */
static int add_srv(struct table_fill *f, const struct dns_ep *e, int32_t port, const char *why)
{
        f->r.pairs++;
        if (!seen_add(&f->srvs, ((uint64_t)e->name_pos + 1) << 32 | (uint32_t)port))
                return 0;
        const struct dns_node *en = name_node(f, (uint32_t)(e - f->blk->eps));
        if (!en)
                return -ENOMEM;
        return push_srv(&f->r, f->s, f->z, port, en->wire, &en->rrs, why);
}

static const char *proto_label(enum se_protocol p)
{
        return p == SE_PROTO_UDP ? "udp" : p == SE_PROTO_SCTP ? "sctp" : "tcp";
}

/* A port of a slice that the port node "<pname>.<proto>.…" names. */
static bool port_is(const struct se_slice_port *sp, const char *pname, size_t pl, const char *proto,
                    size_t prl)
{
        if (!sp->has_port || !sp->name || strlen(sp->name) != pl ||
            memcmp(sp->name, pname, pl) != 0)
                return false;
        const char *p = proto_label(sp->has_protocol ? sp->protocol : SE_PROTO_TCP);
        return strlen(p) == prl && memcmp(p, proto, prl) == 0;
}

const struct dns_node *dns_table_fill(const struct se_dns_zone *z, const struct dns_block *blk,
                                      const struct dns_node *n, struct dns_scratch *s)
{
        struct table_fill f = { .z = z, .blk = blk, .s = s };
        bool port_node = n->kind == DNS_NODE_PORT;
        const char *pname = n->key, *dot1 = strchr(pname, '.');
        const char *proto = dot1 ? dot1 + 1 : "", *dot2 = strchr(proto, '.');
        size_t pl = dot1 ? (size_t)(dot1 - pname) : 0, prl = dot2 ? (size_t)(dot2 - proto) : 0;
        bool addrs = wants(s, DNS_T_A), srvs = wants(s, DNS_T_SRV);
        size_t cap = 0;
        for (uint32_t i = 0; i < blk->n_eps; i++)
                cap += 1 + (srvs ? 2 * (size_t)slice_of(blk, &blk->eps[i])->n_ports : 0);
        if (rrs_init(&f.r, s, cap) < 0 || (srvs && seen_init(&f.srvs, s, cap) < 0) ||
            !(f.names = dns_scratch_alloc(s, (blk->n_eps ? blk->n_eps : 1) * sizeof(*f.names))))
                return NULL;
        for (uint32_t i = 0; i < blk->n_eps; i++) {
                const struct dns_ep *e = &blk->eps[i];
                const struct se_endpoint_slice *es = slice_of(blk, e);
                const char *why = why_of(s, "EndpointSlice", &es->obj);
                if (!port_node && addrs)
                        push_addr(&f.r, z, e, why);
                for (uint32_t p = 0; (port_node || srvs) && p < es->n_ports; p++) {
                        const struct se_slice_port *sp = &es->ports[p];
                        if (port_node ? !port_is(sp, pname, pl, proto, prl) : !sp->has_port)
                                continue;
                        if (port_node && addrs)
                                push_addr(&f.r, z, e, why);
                        if (srvs && add_srv(&f, e, sp->port, why) < 0)
                                return NULL;
                }
        }
        set_weights(&f.r);
        struct dns_node *out = new_node(s, n->key, (enum dns_node_kind)n->kind, &f.r);
        if (out)
                out->from_table = true;
        return out;
}

/* ---- a ClusterIP Service's own name and its named ports ---- */

/* The Service's cluster IPs as A/AAAA records, each address once, in
 * spec.clusterIPs order (spec.clusterIP when that is empty). */
static int push_cluster_ips(struct rrs *r, struct dns_scratch *s, const struct se_dns_zone *z,
                            const struct se_service *svc, const char *why)
{
        const char *one[1] = { svc->cluster_ip };
        const char *const *v = svc->cluster_ips.n ? svc->cluster_ips.v : one;
        uint32_t n = svc->cluster_ips.n ? svc->cluster_ips.n : (svc->cluster_ip ? 1 : 0);
        for (uint32_t i = 0; i < n; i++) {
                uint8_t b[16];
                bool v6 = false;
                if (inet_pton(AF_INET, v[i], b) != 1) {
                        if (inet_pton(AF_INET6, v[i], b) != 1)
                                continue;
                        v6 = true;
                }
                uint8_t len = v6 ? 16 : 4;
                bool dup = false;
                for (uint32_t k = 0; k < r->n && !dup; k++)
                        dup = r->v[k].n_fixed == len && memcmp(r->v[k].fixed, b, len) == 0;
                struct dns_rr *rr = dup ? NULL : rrs_push(r);
                if (!rr)
                        continue;
                uint8_t *f = dns_scratch_alloc(s, len);
                if (!f)
                        return -ENOMEM;
                memcpy(f, b, len);
                *rr = (struct dns_rr){ .type = v6 ? DNS_T_AAAA : DNS_T_A,
                                       .n_fixed = len,
                                       .ttl = z->ttl,
                                       .fixed = f,
                                       .why = why };
        }
        return 0;
}

/* A port the node "<pname>.<proto>.<fqdn>" names (pname empty: the
 * Service's own name, which every port's SRV is on). */
static bool cluster_port_is(const struct se_service_port *sp, const char *pname, size_t pl,
                            const char *proto, size_t prl)
{
        if (pl == 0)
                return true;
        if (!dns_label_ok(sp->name) || strlen(sp->name) != pl || memcmp(sp->name, pname, pl) != 0)
                return false;
        const char *p = proto_label(sp->protocol);
        return strlen(p) == prl && memcmp(p, proto, prl) == 0;
}

/* The node of the Service's name (pl 0) or of one of its named ports:
 * the cluster IPs, then one SRV to the Service's name per port number;
 * CoreDNS counts one (address, port) pair per cluster IP. */
static const struct dns_node *cluster_node(const struct se_dns_zone *z, const struct dns_block *blk,
                                           const char *key, const char *pname, size_t pl,
                                           const char *proto, size_t prl, struct dns_scratch *s)
{
        const struct se_service *svc = (const struct se_service *)blk->svc;
        uint32_t matched = 0;
        for (uint32_t p = 0; p < svc->n_ports; p++)
                matched += cluster_port_is(&svc->ports[p], pname, pl, proto, prl);
        if (matched == 0)
                return NULL;
        const char *why = why_of(s, "Service", blk->svc);
        bool srvs = wants(s, DNS_T_SRV);
        struct rrs r;
        struct seen ports = { 0 };
        uint32_t n_ips = svc->cluster_ips.n ? svc->cluster_ips.n : 1;
        if (rrs_init(&r, s, n_ips + (srvs ? matched : 0)) < 0 ||
            (srvs && seen_init(&ports, s, matched) < 0) || push_cluster_ips(&r, s, z, svc, why) < 0)
                return NULL;
        struct dns_node *n = new_node(s, key, pl ? DNS_NODE_PORT : DNS_NODE_SERVICE, &r);
        if (!n)
                return NULL;
        uint32_t addrs = r.n;
        for (uint32_t p = 0; srvs && p < svc->n_ports; p++) {
                const struct se_service_port *sp = &svc->ports[p];
                if (!cluster_port_is(sp, pname, pl, proto, prl))
                        continue;
                r.pairs += addrs ? addrs : 1;
                if (seen_add(&ports, (uint64_t)(uint32_t)sp->port + 1) &&
                    push_srv(&r, s, z, sp->port, blk->fqdn_wire, &n->rrs, why) < 0)
                        return NULL;
        }
        set_weights(&r);
        n->rrs.n = r.n;
        return n;
}

const struct dns_node *dns_table_cluster(const struct se_dns_zone *z, const struct dns_block *blk,
                                         const char *key, size_t len, struct dns_scratch *s)
{
        size_t fl = strlen(blk->fqdn);
        if (len == fl)
                return memcmp(key, blk->fqdn, fl) == 0 ?
                               cluster_node(z, blk, blk->fqdn, "", 0, "", 0, s) :
                               NULL;
        /* "<pname>.<proto>.<fqdn>" */
        if (len < fl + 4 || key[len - fl - 1] != '.' || memcmp(key + len - fl, blk->fqdn, fl) != 0)
                return NULL;
        size_t rest = len - fl - 1;
        const char *dot = memchr(key, '.', rest);
        if (!dot || dot == key || memchr(dot + 1, '.', rest - (size_t)(dot + 1 - key)))
                return NULL;
        size_t pl = (size_t)(dot - key), prl = rest - pl - 1;
        /* (an answer needs no key) */
        const char *k = NULL;
        if (!s->want && !(k = scratch_strdup(s, key)))
                return NULL;
        return prl ? cluster_node(z, blk, k, key, pl, dot + 1, prl, s) : NULL;
}

int dns_table_cluster_nodes(const struct se_dns_zone *z, const struct dns_block *blk,
                            struct dns_scratch *s, const struct dns_node **out, size_t *n)
{
        const struct se_service *svc = (const struct se_service *)blk->svc;
        size_t k = 0;
        if (!(out[k++] = cluster_node(z, blk, blk->fqdn, "", 0, "", 0, s)))
                return -ENOMEM;
        for (uint32_t p = 0; p < svc->n_ports; p++) {
                const struct se_service_port *sp = &svc->ports[p];
                const char *proto = proto_label(sp->protocol);
                bool first = dns_label_ok(sp->name);
                for (uint32_t q = 0; first && q < p; q++) /* one node per name */
                        first = !cluster_port_is(&svc->ports[q], sp->name, strlen(sp->name), proto,
                                                 strlen(proto));
                if (!first)
                        continue;
                char key[512]; /* (labels ≤ 63 and a zone ≤ 200 bytes) */
                snprintf(key, sizeof(key), "%s.%s.%s", sp->name, proto, blk->fqdn);
                const char *kk = scratch_strdup(s, key);
                if (!kk || !(out[k++] = cluster_node(z, blk, kk, sp->name, strlen(sp->name), proto,
                                                     strlen(proto), s)))
                        return -ENOMEM;
        }
        *n = k;
        return 0;
}

/* ---- reverse names ---- */

size_t dns_rev_shard_of(const uint8_t addr[16], bool v6)
{
        return (size_t)((se_hash_mem(addr, 16) ^ v6) >> 54); /* the top 10 bits */
}

static const char *reverse_key(struct dns_scratch *s, const struct dns_rev *r)
{
        char buf[80];
        uint8_t v6;
        const uint8_t *b = dns_rev_addr(r, &v6);
        if (!v6) {
                snprintf(buf, sizeof(buf), "%u.%u.%u.%u.in-addr.arpa", b[3], b[2], b[1], b[0]);
                return scratch_strdup(s, buf);
        }
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        for (int i = 15; i >= 0; i--) {
                buf[o++] = hex[b[i] & 0xf];
                buf[o++] = '.';
                buf[o++] = hex[b[i] >> 4];
                buf[o++] = '.';
        }
        memcpy(buf + o, "ip6.arpa", 9);
        return scratch_strdup(s, buf);
}

/* A ClusterIP answers with the first Service that has it alone (in
 * namespace/name order, as CoreDNS); an address that is no ClusterIP gets
 * one PTR per endpoint name that has it. */
const struct dns_node *dns_table_reverse(const struct se_dns_zone *z, const struct dns_rev *v,
                                         size_t n, struct dns_scratch *s)
{
        struct rrs r;
        struct seen names = { 0 };
        /* (an answer needs no key) */
        const char *key = n && !s->want ? reverse_key(s, &v[0]) : NULL;
        if (n == 0 || (!s->want && !key) || rrs_init(&r, s, n) < 0 ||
            (n > 1 && seen_init(&names, s, n) < 0))
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (!(v[i].idx & DNS_REV_CIP))
                        continue;
                struct dns_rr *rr = rrs_push(&r);
                rr->name = v[i].blk->fqdn_wire;
                rr->type = DNS_T_PTR;
                rr->ttl = z->ttl;
                rr->why = why_of(s, "Service", v[i].blk->svc);
                return new_node(s, key, DNS_NODE_REVERSE, &r);
        }
        uint32_t run = 0;
        for (size_t i = 0; i < n; i++) {
                const struct dns_block *blk = v[i].blk;
                const struct dns_ep *e = &blk->eps[v[i].idx];
                run += i == 0 || blk != v[i - 1].blk;
                if (n > 1 && !seen_add(&names, ((uint64_t)e->name_pos + 1) << 32 | run))
                        continue;
                struct dns_rr *rr = rrs_push(&r);
                if (!rr)
                        break;
                if (ep_name(s, blk, e, NULL, &rr->name) < 0)
                        return NULL;
                rr->type = DNS_T_PTR;
                rr->ttl = z->ttl;
                rr->why = blk->ptrs_by_service ? why_of(s, "Service", blk->svc) :
                                                 why_of(s, "EndpointSlice", blk->slices[e->slice]);
        }
        return new_node(s, key, DNS_NODE_REVERSE, &r);
}
