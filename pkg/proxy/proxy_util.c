/* Small pieces shared by the writers: chain-name hashes, probabilities,
 * endpoint categories (pkg/proxy/topology.go), option parsing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/proxy.h>
#include <svcenv/strbuf.h>

#include "proxy_internal.h"

/* base32 of the first 10 digest bytes: the 16 characters kept */
void proxy_base32_8(const uint8_t d[5], char out[8])
{
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        uint64_t bits = ((uint64_t)d[0] << 32) | ((uint64_t)d[1] << 24) | ((uint64_t)d[2] << 16) |
                        ((uint64_t)d[3] << 8) | d[4];
        for (int k = 0; k < 8; k++)
                out[k] = alphabet[(bits >> (35 - 5 * k)) & 31];
}

static void base32_16(const uint8_t d[10], char out[17])
{
        proxy_base32_8(d, out);
        proxy_base32_8(d + 5, out + 8);
        out[16] = 0;
}

int se_proxy_chain_hash(const char *spn, const char *proto, const char *endpoint, char out[17])
{
        uint8_t digest[SE_SHA256_LEN];
        const struct se_sha256_part parts[] = { { spn, strlen(spn) },
                                                { proto, strlen(proto) },
                                                { endpoint, endpoint ? strlen(endpoint) : 0 } };
        int r = se_sha256_parts(parts, endpoint ? 3 : 2, digest);
        if (r < 0)
                return r;
        base32_16(digest, out);
        return 0;
}

/* "%0.10f" of 1/n: Go's and C's formatting agree (correctly rounded) */
void se_proxy_probability(unsigned n, char out[16])
{
        snprintf(out, 16, "%0.10f", 1.0 / (double)(n ? n : 1));
}

void proxy_mark_text(const struct se_proxy_options *opt, char out[16])
{
        if (opt->masquerade_mark) {
                snprintf(out, 16, "%s", opt->masquerade_mark);
                return;
        }
        /* Go's %#08x pads the digits themselves to 8 */
        snprintf(out, 16, "0x%08x", 1u << (opt->masquerade_bit & 31));
}

void proxy_cidr_text(const struct se_cidr *c, char *out, size_t size)
{
        char ip[64];
        se_ip_format(&c->ip, ip, sizeof(ip));
        snprintf(out, size, "%s/%u", ip, c->prefix);
}

const struct se_cidr *proxy_cluster_cidr(const struct se_proxy_options *opt, enum se_ip_family fam)
{
        for (unsigned i = 0; i < opt->n_cluster_cidrs; i++)
                if (opt->cluster_cidrs[i].ip.family == fam)
                        return &opt->cluster_cidrs[i];
        return NULL;
}

static bool loopback(const struct se_ip *ip)
{
        static const uint8_t v6[16] = { [15] = 1 };
        return ip->family == SE_IPV4 ? ip->addr[0] == 127 : memcmp(ip->addr, v6, 16) == 0;
}

/* The primary node IP of the family `primary` stands for, NULL if none. */
static const struct se_ip *primary_ip(const struct se_proxy_options *opt, enum se_ip_family fam)
{
        for (unsigned i = 0; i < opt->n_node_ips; i++)
                if (opt->node_ips[i].family == fam)
                        return loopback(&opt->node_ips[i]) ? NULL : &opt->node_ips[i];
        return NULL;
}

bool proxy_nodeport_all(const struct se_proxy_options *opt, enum se_ip_family fam)
{
        bool any = opt->nodeport_primary && primary_ip(opt, fam);
        for (unsigned k = 0; k < opt->n_nodeport_cidrs; k++) {
                const struct se_cidr *c = &opt->nodeport_cidrs[k];
                if (c->ip.family != fam)
                        continue;
                if (c->prefix == 0)
                        return true;
                any = true;
        }
        return !any;
}

bool proxy_nodeport_ip(const struct se_proxy_options *opt, unsigned i)
{
        const struct se_ip *ip = &opt->node_ips[i];
        if (opt->nodeport_primary && primary_ip(opt, ip->family) == ip)
                return true;
        for (unsigned k = 0; k < opt->n_nodeport_cidrs; k++)
                if (se_cidr_contains(&opt->nodeport_cidrs[k], ip))
                        return true;
        return false;
}

bool proxy_externally_accessible(const struct se_proxy_svcport *sp)
{
        return sp->node_port != 0 || sp->n_lb_vips > 0 || sp->n_external_ips > 0;
}

bool proxy_uses_cluster(const struct se_proxy_svcport *sp)
{
        return !sp->internal_local || proxy_externally_accessible(sp);
}

bool proxy_uses_local(const struct se_proxy_svcport *sp)
{
        return sp->internal_local || (sp->external_local && proxy_externally_accessible(sp));
}

static bool strs_has(const struct se_strs *s, const char *v)
{
        for (uint32_t i = 0; v && i < s->n; i++)
                if (strcmp(s->v[i], v) == 0)
                        return true;
        return false;
}

enum topo { TOPO_NONE, TOPO_NODE, TOPO_ZONE };

/* topologyModeFromHints (PreferSameTrafficDistribution on, as in v1.36) */
static enum topo topology_mode(const struct se_proxy_svcport *sp, const struct se_proxy_options *o)
{
        bool node_for = false, all_node = true, zone_for = false, all_zone = true;
        for (uint32_t i = 0; i < sp->n_eps && (all_node || all_zone); i++) {
                const struct se_proxy_endpoint *ep = &sp->eps[i];
                if (!ep->ready)
                        continue;
                if (ep->node_hints.n == 0)
                        all_node = false;
                else if (strs_has(&ep->node_hints, o->node_name))
                        node_for = true;
                if (ep->zone_hints.n == 0)
                        all_zone = false;
                else if (strs_has(&ep->zone_hints, o->zone))
                        zone_for = true;
        }
        if (sp->n_eps && all_node && node_for)
                return TOPO_NODE;
        if (sp->n_eps && all_zone && zone_for)
                return TOPO_ZONE;
        return TOPO_NONE;
}

static bool topo_ok(const struct se_proxy_endpoint *ep, enum topo t,
                    const struct se_proxy_options *o)
{
        if (t == TOPO_NODE)
                return strs_has(&ep->node_hints, o->node_name);
        if (t == TOPO_ZONE)
                return strs_has(&ep->zone_hints, o->zone);
        return true;
}

void proxy_categories_release(struct proxy_categories *c)
{
        if (c->cluster != c->small)
                free(c->cluster); /* one block for the three */
        c->cluster = c->local = c->reachable = NULL;
        c->n_cluster = c->n_local = c->n_reachable = 0;
        c->has_any = false;
}

int proxy_categorize(const struct se_proxy_svcport *sp, const struct se_proxy_options *opt,
                     struct proxy_categories *c)
{
        size_t n = sp->n_eps ? sp->n_eps : 1;
        c->n_cluster = c->n_local = c->n_reachable = 0;
        c->has_any = false;
        c->cluster = n <= PROXY_CAT_INLINE ? c->small : se_calloc(3 * n, sizeof(*c->cluster));
        if (!c->cluster) {
                c->local = c->reachable = NULL;
                return -ENOMEM;
        }
        c->local = c->cluster + n;
        c->reachable = c->local + n;
        enum topo mode = TOPO_NONE;
        if (proxy_uses_cluster(sp)) {
                mode = topology_mode(sp, opt);
                for (uint32_t i = 0; i < sp->n_eps; i++)
                        if (sp->eps[i].ready && topo_ok(&sp->eps[i], mode, opt))
                                c->cluster[c->n_cluster++] = &sp->eps[i];
                if (c->n_cluster == 0) /* fall back to serving-terminating */
                        for (uint32_t i = 0; i < sp->n_eps; i++)
                                if (sp->eps[i].serving && sp->eps[i].terminating)
                                        c->cluster[c->n_cluster++] = &sp->eps[i];
                c->has_any = c->n_cluster > 0;
        }
        if (!proxy_uses_local(sp)) {
                memcpy(c->reachable, c->cluster, c->n_cluster * sizeof(*c->cluster));
                c->n_reachable = c->n_cluster;
                return 0;
        }
        bool local_ready = false, local_term = false;
        for (uint32_t i = 0; i < sp->n_eps; i++) {
                const struct se_proxy_endpoint *ep = &sp->eps[i];
                if (ep->ready) {
                        c->has_any = true;
                        local_ready |= ep->local;
                } else if (ep->serving && ep->terminating) {
                        c->has_any = true;
                        local_term |= ep->local;
                }
        }
        for (uint32_t i = 0; i < sp->n_eps; i++) {
                const struct se_proxy_endpoint *ep = &sp->eps[i];
                if (!ep->local)
                        continue;
                if ((local_ready && ep->ready) ||
                    (!local_ready && local_term && ep->serving && ep->terminating))
                        c->local[c->n_local++] = ep;
        }
        if (!proxy_uses_cluster(sp)) {
                memcpy(c->reachable, c->local, c->n_local * sizeof(*c->local));
                c->n_reachable = c->n_local;
                return 0;
        }
        /* union of both lists, in endpoint order */
        uint32_t a = 0, b = 0;
        for (uint32_t i = 0; i < sp->n_eps; i++) {
                const struct se_proxy_endpoint *ep = &sp->eps[i];
                bool in = false;
                if (a < c->n_cluster && c->cluster[a] == ep) {
                        a++;
                        in = true;
                }
                if (b < c->n_local && c->local[b] == ep) {
                        b++;
                        in = true;
                }
                if (in)
                        c->reachable[c->n_reachable++] = ep;
        }
        return 0;
}

int se_proxy_parse_cidr_list(const char *s, struct se_cidr *cidrs, unsigned max, bool *ret_primary,
                             struct se_diag *diag)
{
        unsigned n = 0;
        const char *p = s;
        if (!s)
                return -EINVAL;
        for (;;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                const char *q = p;
                while (len && (*q == ' ' || *q == '\t')) {
                        q++;
                        len--;
                }
                while (len && (q[len - 1] == ' ' || q[len - 1] == '\t'))
                        len--;
                char item[64];
                if (len == 0 || len >= sizeof(item)) {
                        se_diag_set(diag, NULL, 0, 0, "invalid CIDR list \"%.80s\"", s);
                        return -EINVAL;
                }
                memcpy(item, q, len);
                item[len] = 0;
                if (ret_primary && strcmp(item, "primary") == 0) {
                        *ret_primary = true;
                } else {
                        struct se_cidr c;
                        if (se_parse_cidr(item, &c) < 0) {
                                se_diag_set(diag, NULL, 0, 0, "invalid CIDR \"%s\"", item);
                                return -EINVAL;
                        }
                        if (n >= max) {
                                se_diag_set(diag, NULL, 0, 0, "more than %u CIDRs", max);
                                return -E2BIG;
                        }
                        cidrs[n++] = c;
                }
                if (!end)
                        break;
                p = end + 1;
        }
        return (int)n;
}

size_t proxy_int_text(int32_t v, char *out)
{
        char d[12], *p = d + sizeof(d);
        uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
        do
                *--p = (char)('0' + u % 10);
        while ((u /= 10) != 0);
        if (v < 0)
                *--p = '-';
        size_t n = (size_t)(d + sizeof(d) - p);
        memcpy(out, p, n);
        return n;
}
