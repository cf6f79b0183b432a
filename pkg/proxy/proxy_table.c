/* Store -> per-family service ports with their endpoints, as kube-proxy's
 * service change tracker and endpoint-slice cache see them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/arena.h>
#include <svcenv/endpoints.h>
#include <svcenv/hashmap.h>
#include <svcenv/proxy.h>
#include <svcenv/strbuf.h>

#include "proxy_internal.h"

#define LABEL_PROXY_NAME   "service.kubernetes.io/service-proxy-name"
#define LABEL_HEADLESS     "service.kubernetes.io/headless"
#define LABEL_SERVICE_NAME "kubernetes.io/service-name"

void se_proxy_options_init(struct se_proxy_options *opt)
{
        memset(opt, 0, sizeof(*opt));
        opt->masquerade_bit = 14;
        opt->localhost_nodeports = true;
}

void se_proxy_options_nft_defaults(struct se_proxy_options *opt)
{
        if (opt->n_nodeport_cidrs == 0)
                opt->nodeport_primary = true;
}

struct se_proxy_table *se_proxy_table_free(struct se_proxy_table *t)
{
        while (t) {
                struct se_proxy_table *next = t->patches;
                se_arena_release(&t->arena);
                free(t);
                t = next;
        }
        return NULL;
}

unsigned se_proxy_families(const struct se_proxy_options *opt, enum se_ip_family fams[2])
{
        bool v4 = false, v6 = false;
        for (unsigned i = 0; i < opt->n_node_ips; i++) {
                v4 |= opt->node_ips[i].family == SE_IPV4;
                v6 |= opt->node_ips[i].family == SE_IPV6;
        }
        unsigned n = 0;
        if (v4 || !v6)
                fams[n++] = SE_IPV4;
        if (v6)
                fams[n++] = SE_IPV6;
        return n;
}

unsigned se_proxy_families_on(const struct se_proxy_options *opt, bool host_ipv6,
                              enum se_ip_family fams[2])
{
        if (!host_ipv6)
                return se_proxy_families(opt, fams);
        fams[0] = SE_IPV4;
        fams[1] = SE_IPV6;
        return 2;
}

/* A dotted quad as se_parse_ip takes it (no leading zeros): the common
 * case, read once without the general parser (one per endpoint). */
static bool dotted_quad(const char *p)
{
        for (int k = 0; k < 4; k++) {
                if (k && *p++ != '.')
                        return false;
                /* each digit read only after the one before it was one */
                unsigned v = (unsigned)(p[0] - '0'), d;
                if (v > 9)
                        return false;
                if ((d = (unsigned)(p[1] - '0')) > 9) {
                        p += 1;
                        continue;
                }
                if (v == 0) /* a leading zero */
                        return false;
                v = v * 10 + d;
                if ((d = (unsigned)(p[2] - '0')) > 9) {
                        p += 2;
                        continue;
                }
                v = v * 10 + d;
                if (v > 255 || (unsigned)(p[3] - '0') <= 9)
                        return false;
                p += 3;
        }
        return *p == 0;
}

static bool is_family(const char *ip, enum se_ip_family fam)
{
        if (!ip)
                return false;
        if (dotted_quad(ip))
                return fam == SE_IPV4;
        return se_ip_family_of(ip) == fam;
}

/* proxyutil.GetClusterIPByFamily */
static const char *cluster_ip_of(const struct se_service *svc, enum se_ip_family fam)
{
        if (svc->cluster_ips.n == 0)
                return is_family(svc->cluster_ip, fam) ? svc->cluster_ip : NULL;
        for (uint32_t i = 0; i < svc->cluster_ips.n; i++)
                if (is_family(svc->cluster_ips.v[i], fam))
                        return svc->cluster_ips.v[i];
        return NULL;
}

/* apiservice.ExternallyAccessible */
static bool externally_accessible(const struct se_service *svc)
{
        return svc->type == SE_SVC_LOAD_BALANCER || svc->type == SE_SVC_NODE_PORT ||
               (svc->type == SE_SVC_CLUSTER_IP && svc->external_ips.n > 0);
}

/* kube-proxy's Service informer leaves out those labelled with a service
 * proxy name (svcenv's --proxy-name serves its own) and ClusterIP None;
 * the headless label is about EndpointSlices only (headless_slice). */
static bool skip_service(const struct se_service *svc, const struct se_proxy_options *opt)
{
        const char *proxy = se_kvlist_get(&svc->obj.meta.labels, LABEL_PROXY_NAME);
        if (proxy && (!opt->proxy_name || strcmp(proxy, opt->proxy_name) != 0))
                return true;
        if (svc->type == SE_SVC_EXTERNAL_NAME)
                return true;
        /* ShouldSkipService: no cluster IP or "None" */
        return !svc->cluster_ip || !svc->cluster_ip[0] || strcmp(svc->cluster_ip, "None") == 0;
}

static const char **filter_ips(struct se_arena *a, const char *const *ips, uint32_t n,
                               enum se_ip_family fam, uint32_t *ret_n)
{
        const char **out = n ? se_arena_array(a, n, sizeof(*out)) : NULL;
        uint32_t k = 0;
        if (n && !out)
                return NULL;
        for (uint32_t i = 0; i < n; i++)
                if (is_family(ips[i], fam))
                        out[k++] = ips[i];
        *ret_n = k;
        return out;
}

static int source_ranges(struct se_arena *a, const struct se_service *svc, enum se_ip_family fam,
                         struct se_proxy_svcport *sp)
{
        uint32_t n = svc->lb_source_ranges.n;
        if (n == 0)
                return 0;
        sp->source_ranges = se_arena_array(a, n, sizeof(*sp->source_ranges));
        sp->source_cidrs = se_arena_array(a, n, sizeof(*sp->source_cidrs));
        if (!sp->source_ranges || !sp->source_cidrs)
                return -ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
                const char *s = svc->lb_source_ranges.v[i];
                char buf[64];
                while (*s == ' ' || *s == '\t')
                        s++;
                size_t len = strlen(s);
                while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
                        len--;
                if (len >= sizeof(buf))
                        continue;
                memcpy(buf, s, len);
                buf[len] = 0;
                struct se_cidr c;
                if (se_parse_cidr(buf, &c) < 0 || c.ip.family != fam)
                        continue;
                char ip[64];
                se_ip_format(&c.ip, ip, sizeof(ip));
                char text[80];
                snprintf(text, sizeof(text), "%s/%u", ip, c.prefix);
                sp->source_cidrs[sp->n_source_ranges] = c;
                if (!(sp->source_ranges[sp->n_source_ranges++] = se_arena_strdup(a, text)))
                        return -ENOMEM;
        }
        return 0;
}

static int add_endpoint(struct se_arena *a, struct se_proxy_svcport *sp, const char *ip,
                        int32_t port, bool ready, bool serving, bool terminating, const char *node,
                        const struct se_strs *zones, const struct se_strs *nodes,
                        const struct se_proxy_options *opt)
{
        struct se_proxy_endpoint *ep = &sp->eps[sp->n_eps];
        /* "ip:port", "[ip]:port" for IPv6 (no printf: one per endpoint) */
        size_t ip_len = strlen(ip);
        bool v6 = memchr(ip, ':', ip_len) != NULL;
        char port_text[12], *pe = port_text + sizeof(port_text);
        uint32_t pv = port < 0 ? 0u - (uint32_t)port : (uint32_t)port;
        do
                *--pe = (char)('0' + pv % 10);
        while ((pv /= 10) != 0);
        if (port < 0)
                *--pe = '-';
        size_t port_len = (size_t)(port_text + sizeof(port_text) - pe);
        /* one block: the ip (owned: the slice is the store's) then str */
        char *own_ip = se_arena_alloc(a, ip_len + 1 + ip_len + port_len + (v6 ? 4 : 2));
        if (!own_ip)
                return -ENOMEM;
        memcpy(own_ip, ip, ip_len + 1);
        char *str = own_ip + ip_len + 1, *w = str;
        if (v6)
                *w++ = '[';
        memcpy(w, ip, ip_len);
        w += ip_len;
        if (v6)
                *w++ = ']';
        *w++ = ':';
        memcpy(w, pe, port_len);
        w[port_len] = 0;
        ep->ip = own_ip;
        ep->port = port;
        ep->str = str;
        ep->ready = ready;
        ep->serving = serving;
        ep->terminating = terminating;
        ep->local = node && opt->node_name && strcmp(node, opt->node_name) == 0;
        if (zones)
                ep->zone_hints = *zones;
        if (nodes)
                ep->node_hints = *nodes;
        sp->n_eps++;
        return 0;
}

/* kube-proxy's EndpointSlice informer selects "!service.kubernetes.io/headless":
 * a slice carrying the label, whatever its value, is not seen at all. */
static bool headless_slice(const struct se_endpoint_slice *es)
{
        return se_kvlist_get(&es->obj.meta.labels, LABEL_HEADLESS) != NULL;
}

/* Endpoints of one service port from the service's EndpointSlices
 * (endpointslicecache: matching port name and protocol, this family,
 * first address of each endpoint, nil conditions count as ready/serving). */
/* A service with many ports looks each up in each slice: per slice a map
 * from protocol and name to its first port with a number, so that the
 * lookups stay linear in the ports (a service and a slice may have 20,000). */
#define INDEX_FROM_PORTS 16
struct port_index {
        struct se_hashmap *maps; /* one per slice */
        long n;
        struct se_arena keys;
};

static void port_key(struct se_strbuf *sb, enum se_protocol proto, const char *name)
{
        se_strbuf_reset(sb);
        se_strbuf_printf(sb, "%d/%s", (int)proto, name ? name : "");
}

static void port_index_release(struct port_index *ix)
{
        for (long i = 0; ix->maps && i < ix->n; i++)
                se_hashmap_release(&ix->maps[i]);
        free(ix->maps);
        se_arena_release(&ix->keys);
        memset(ix, 0, sizeof(*ix));
}

static int port_index_build(struct port_index *ix, const struct se_object *const *slices, long n)
{
        memset(ix, 0, sizeof(*ix));
        ix->keys = (struct se_arena)SE_ARENA_INIT;
        if (!(ix->maps = se_calloc((size_t)n + 1, sizeof(*ix->maps))))
                return -ENOMEM;
        ix->n = n;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        int r = 0;
        for (long i = 0; r == 0 && i < n; i++) {
                const struct se_endpoint_slice *es = (const struct se_endpoint_slice *)slices[i];
                for (uint32_t p = 0; r == 0 && p < es->n_ports; p++) {
                        const struct se_slice_port *pp = &es->ports[p];
                        if (!pp->has_port)
                                continue;
                        port_key(&sb, pp->has_protocol ? pp->protocol : SE_PROTO_TCP, pp->name);
                        const char *key =
                                se_strbuf_failed(&sb) ? NULL : se_arena_strdup(&ix->keys, sb.buf);
                        if (!key)
                                r = -ENOMEM;
                        else if (!se_hashmap_get(&ix->maps[i], key) &&
                                 se_hashmap_put(&ix->maps[i], key,
                                                SE_UNCONST(struct se_slice_port, pp), NULL) < 0)
                                r = -ENOMEM;
                }
        }
        se_strbuf_release(&sb);
        if (r < 0)
                port_index_release(ix);
        return r;
}

/* The slice's port for the service port: its first with a number, the same
 * protocol and name (through ix when given). */
static const struct se_slice_port *slice_port(const struct se_endpoint_slice *es, long i,
                                              const struct port_index *ix,
                                              const struct se_service_port *port,
                                              struct se_strbuf *key)
{
        const char *pname = port->name ? port->name : "";
        if (ix) {
                port_key(key, port->protocol, pname);
                return se_strbuf_failed(key) ? NULL : se_hashmap_get(&ix->maps[i], key->buf);
        }
        for (uint32_t p = 0; p < es->n_ports; p++) {
                const struct se_slice_port *pp = &es->ports[p];
                enum se_protocol proto = pp->has_protocol ? pp->protocol : SE_PROTO_TCP;
                if (pp->has_port && proto == port->protocol &&
                    strcmp(pp->name ? pp->name : "", pname) == 0)
                        return pp;
        }
        return NULL;
}

static int slice_endpoints(struct se_arena *a, const struct se_object *const *slices, long n,
                           const struct port_index *ix, enum se_ip_family fam,
                           const struct se_service_port *port, struct se_proxy_svcport *sp,
                           const struct se_proxy_options *opt)
{
        size_t cap = 0;
        for (long i = 0; i < n; i++)
                cap += ((const struct se_endpoint_slice *)slices[i])->n_endpoints;
        if (cap == 0)
                return 0;
        if (!(sp->eps = se_arena_array(a, cap, sizeof(*sp->eps))))
                return -ENOMEM;
        const char *want = fam == SE_IPV4 ? "IPv4" : "IPv6";
        struct se_strbuf key;
        se_strbuf_init(&key, 0);
        int r = 0;
        for (long i = 0; r == 0 && i < n; i++) {
                const struct se_endpoint_slice *es = ((const struct se_endpoint_slice *)slices[i]);
                if (!es->address_type || strcmp(es->address_type, want) != 0 || headless_slice(es))
                        continue;
                const struct se_slice_port *pp = slice_port(es, i, ix, port, &key);
                for (uint32_t e = 0; pp && r == 0 && e < es->n_endpoints; e++) {
                        const struct se_slice_endpoint *se = &es->endpoints[e];
                        if (se->addresses.n == 0 || !is_family(se->addresses.v[0], fam))
                                continue;
                        r = add_endpoint(a, sp, se->addresses.v[0], pp->port, se->ready != SE_FALSE,
                                         se->serving != SE_FALSE, se->terminating == SE_TRUE,
                                         se_slice_endpoint_node(se),
                                         se_slice_endpoint_hint_zones(se),
                                         se_slice_endpoint_hint_nodes(se), opt);
                }
        }
        se_strbuf_release(&key);
        return r;
}

/* A selector service without EndpointSlices: the slices the EndpointSlice
 * controller would write for it (pkg/endpoints, nothing existing yet), read
 * as kube-proxy reads slices. Pods on nodes the store does not know are left
 * out as the controller does, unless the store has no Nodes at all. */
static const struct se_node *node_by_name(void *data, const char *name)
{
        const struct se_object *o = se_store_get(data, SE_KIND_NODE, "", name);
        return o ? (const struct se_node *)o : NULL;
}

static int copy_strs(struct se_arena *a, struct se_strs *s)
{
        if (s->n == 0)
                return 0;
        const char **v = se_arena_array(a, s->n, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (uint32_t i = 0; i < s->n; i++)
                if (!(v[i] = se_arena_strdup(a, s->v[i])))
                        return -ENOMEM;
        s->v = v;
        return 0;
}

/* The slices the controller would write for a selector service without
 * any: planned once per service (not per port: a service may have 20,000
 * ports). *have is false when there is nothing to plan. */
static int computed_slices(const struct se_store *store, const struct se_service *svc,
                           struct se_slices_plan *plan, bool *have)
{
        *have = false;
        if (!se_endpoints_service_managed(svc))
                return 0;
        _cleanup_free_ const struct se_object **pods = NULL;
        long n =
                se_store_select(store, SE_KIND_POD, svc->obj.meta.namespace, &svc->selector, &pods);
        if (n <= 0)
                return (int)n;
        bool nodes = se_store_count(store, SE_KIND_NODE, NULL) > 0;
        struct se_endpoints_input in = {
                .namespace = svc->obj.meta.namespace,
                .name = svc->obj.meta.name,
                .svc = svc,
                .pods = (const struct se_pod *const *)pods,
                .n_pods = (size_t)n,
                .get_node = nodes ? node_by_name : NULL,
                .node_data = SE_UNCONST(struct se_store, store),
        };
        struct se_endpoints_opts eo = { .write = SE_EP_WRITE_SLICES };
        int r = se_slices_plan(&in, NULL, 0, &eo, plan);
        *have = r == 0;
        return r;
}

static int cmp_ep(const void *x, const void *y)
{
        const struct se_proxy_endpoint *a = x, *b = y;
        int c = strcmp(a->str, b->str);
        if (c)
                return c;
        return (int)b->ready - (int)a->ready; /* ready first among duplicates */
}

/* Whether v is in strictly increasing order: qsort would leave it as it is
 * (the slices and the store usually give it so). */
static bool strictly_sorted(const void *v, size_t n, size_t size,
                            int (*cmp)(const void *, const void *))
{
        const char *p = v;
        for (size_t i = 1; i < n; i++)
                if (cmp(p + (i - 1) * size, p + i * size) >= 0)
                        return false;
        return true;
}

static void sort_unique(struct se_proxy_svcport *sp)
{
        if (sp->n_eps < 2)
                return;
        if (!strictly_sorted(sp->eps, sp->n_eps, sizeof(*sp->eps), cmp_ep))
                qsort(sp->eps, sp->n_eps, sizeof(*sp->eps), cmp_ep);
        uint32_t k = 1;
        for (uint32_t i = 1; i < sp->n_eps; i++)
                if (strcmp(sp->eps[i].str, sp->eps[k - 1].str) != 0)
                        sp->eps[k++] = sp->eps[i];
        sp->n_eps = k;
}

static int cmp_port(const void *x, const void *y)
{
        const struct se_proxy_svcport *a = x, *b = y;
        int c = strcmp(a->spn, b->spn);
        return c ? c : (int)a->protocol - (int)b->protocol;
}

bool se_proxy_in_kernel(const struct se_proxy_svcport *sp, bool nft)
{
        if (sp->protocol == SE_PROTO_SCTP) /* the userspace proxy has no SCTP */
                return true;
        if (sp->retry)
                return false;
        if (!sp->sched_set || sp->sched == SE_LB_RANDOM)
                return true;
        if (!nft)
                return false;
        return sp->sched == SE_LB_RR || sp->sched == SE_LB_SH || sp->sched == SE_LB_DH ||
               sp->sched == SE_LB_MH;
}

static int build_port(struct se_arena *a, const struct se_service *svc,
                      const struct se_object *const *slices, long n_slices,
                      const struct port_index *ix, const char *cip, enum se_ip_family fam,
                      uint32_t idx, const struct se_proxy_options *opt, struct se_proxy_svcport *sp)
{
        const struct se_service_port *port = &svc->ports[idx];
        const struct se_meta *m = &svc->obj.meta;
        sp->ns = m->namespace;
        sp->name = m->name;
        sp->port_name = port->name ? port->name : "";
        /* "ns/name:port" or "ns/name" (no printf: one per service port) */
        const char *parts[] = { m->namespace ? m->namespace : "", "/", m->name ? m->name : "", ":",
                                sp->port_name };
        size_t lens[SE_ARRAY_SIZE(parts)], total = 0;
        size_t n_parts = sp->port_name[0] ? SE_ARRAY_SIZE(parts) : 3;
        for (size_t i = 0; i < n_parts; i++)
                total += lens[i] = strlen(parts[i]);
        char *spn = se_arena_alloc(a, total + 1);
        if (!spn)
                return -ENOMEM;
        for (size_t i = 0, at = 0; i < n_parts; at += lens[i++])
                memcpy(spn + at, parts[i], lens[i]);
        spn[total] = 0;
        sp->spn = spn;
        sp->protocol = port->protocol;
        sp->proto = port->protocol == SE_PROTO_UDP  ? "udp" :
                    port->protocol == SE_PROTO_SCTP ? "sctp" :
                                                      "tcp";
        sp->cluster_ip = cip;
        sp->port = port->port;
        sp->node_port = port->node_port;
        bool ext = externally_accessible(svc);
        sp->external_local = ext && svc->external_policy == SE_POLICY_LOCAL;
        sp->internal_local = svc->internal_policy == SE_POLICY_LOCAL;
        if (svc->type == SE_SVC_LOAD_BALANCER && sp->external_local)
                sp->health_check_node_port = svc->health_check_node_port;
        const char *sched = se_kvlist_get(&m->annotations, SE_PROXY_SCHED_ANNOTATION);
        if (sched) {
                sp->sched_set = se_lb_parse(sched, &sp->sched, &sp->sched_flags) == 0;
                sp->sched_bad = !sp->sched_set;
        }
        const char *retry = se_kvlist_get(&m->annotations, SE_PROXY_RETRY_ANNOTATION);
        if (retry) {
                sp->retry = strcmp(retry, "true") == 0;
                sp->retry_bad = !sp->retry && strcmp(retry, "false") != 0;
        }
        sp->affinity = svc->client_ip_affinity;
        sp->affinity_timeout = svc->affinity_timeout > 0 ? svc->affinity_timeout : 10800;
        sp->external_ips =
                filter_ips(a, svc->external_ips.v, svc->external_ips.n, fam, &sp->n_external_ips);
        if (svc->external_ips.n && !sp->external_ips)
                return -ENOMEM;
        if (svc->n_lb_ingress) {
                if (!(sp->lb_vips = se_arena_array(a, svc->n_lb_ingress, sizeof(char *))))
                        return -ENOMEM;
                for (uint32_t i = 0; i < svc->n_lb_ingress; i++) {
                        const struct se_lb_ingress *ing = &svc->lb_ingress[i];
                        if (ing->ip && ing->ip_mode != SE_IPMODE_PROXY && is_family(ing->ip, fam))
                                sp->lb_vips[sp->n_lb_vips++] = ing->ip;
                }
        }
        int r = source_ranges(a, svc, fam, sp);
        if (r < 0)
                return r;
        if (n_slices > 0) /* the API's, or computed_slices' (own_strings copies their hints) */
                r = slice_endpoints(a, slices, n_slices, ix, fam, port, sp, opt);
        if (r < 0)
                return r;
        sort_unique(sp);
        return 0;
}

/* The table outlives the store's objects (the daemon keeps the last one
 * to compare with the next): copy every string borrowed from them. */
static int own_strings(struct se_arena *a, struct se_proxy_svcport *sp)
{
        const char **fields[] = { &sp->ns, &sp->name, &sp->port_name, &sp->cluster_ip };
        for (size_t i = 0; i < SE_ARRAY_SIZE(fields); i++)
                if (*fields[i] && !(*fields[i] = se_arena_strdup(a, *fields[i])))
                        return -ENOMEM;
        for (uint32_t i = 0; i < sp->n_external_ips; i++)
                if (!(sp->external_ips[i] = se_arena_strdup(a, sp->external_ips[i])))
                        return -ENOMEM;
        for (uint32_t i = 0; i < sp->n_lb_vips; i++)
                if (!(sp->lb_vips[i] = se_arena_strdup(a, sp->lb_vips[i])))
                        return -ENOMEM;
        for (uint32_t i = 0; i < sp->n_eps; i++) {
                struct se_proxy_endpoint *ep = &sp->eps[i];
                int r; /* ep->ip is the table's already (add_endpoint) */
                if ((r = copy_strs(a, &ep->zone_hints)) < 0 ||
                    (r = copy_strs(a, &ep->node_hints)) < 0)
                        return r;
        }
        return 0;
}

/* A service the table takes, with its EndpointSlices (first pass). */
struct pick {
        const struct se_service *svc;
        const char *cip;
        const struct se_object **slices; /* owned */
        long n_slices;
};

/* What build_port and own_strings will take from the arena for svc's
 * ports, a little over: the table is then one chunk, allocated once
 * (huge pages when big) instead of a chain of doubling ones. Endpoints of
 * a selector service without slices are not counted (the arena grows). */
static size_t table_bytes(const struct pick *p, enum se_ip_family fam)
{
        const struct se_service *svc = p->svc;
        const struct se_meta *m = &svc->obj.meta;
        size_t names = (m->namespace ? strlen(m->namespace) : 0) + (m->name ? strlen(m->name) : 0) +
                       strlen(p->cip) + 16;
        size_t eps = 0, per_ep = sizeof(struct se_proxy_endpoint) + 8 + (fam == SE_IPV6 ? 110 : 48);
        for (long i = 0; i < p->n_slices; i++)
                eps += ((const struct se_endpoint_slice *)p->slices[i])->n_endpoints;
        size_t per_port = sizeof(struct se_proxy_svcport) + 3 * names + eps * per_ep +
                          (svc->external_ips.n + svc->n_lb_ingress) * (8 + 56) +
                          svc->lb_source_ranges.n * (8 + sizeof(struct se_cidr) + 88);
        size_t total = 0;
        for (uint32_t i = 0; i < svc->n_ports; i++)
                total += per_port + 2 * (svc->ports[i].name ? strlen(svc->ports[i].name) : 0);
        return total;
}

static int cmp_str(const void *x, const void *y)
{
        return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* kube-proxy's ServiceCIDR handler: the union of every object's
 * spec.cidrs, those of the proxier's family. */
static int service_cidrs(const struct se_store *store, struct se_proxy_table *t)
{
        _cleanup_free_ const struct se_object **objs = NULL;
        long n = se_store_list_unordered(store, SE_KIND_SERVICE_CIDR, NULL, &objs);
        if (n <= 0)
                return (int)n;
        if (!(t->service_cidrs = se_arena_array(&t->arena, 2 * (size_t)n, sizeof(char *))))
                return -ENOMEM;
        for (long i = 0; i < n; i++) {
                const struct se_service_cidr *sc = se_service_cidr_of(objs[i]);
                for (uint32_t k = 0; sc && k < sc->cidrs.n && k < 2; k++) {
                        struct se_cidr c;
                        char text[80];
                        if (se_parse_cidr(sc->cidrs.v[k], &c) < 0 || c.ip.family != t->family)
                                continue;
                        proxy_cidr_text(&c, text, sizeof(text));
                        const char *own = se_arena_strdup(&t->arena, text);
                        if (!own)
                                return -ENOMEM;
                        t->service_cidrs[t->n_service_cidrs++] = own;
                }
        }
        qsort(t->service_cidrs, t->n_service_cidrs, sizeof(char *), cmp_str);
        uint32_t k = 0;
        for (uint32_t i = 0; i < t->n_service_cidrs; i++)
                if (k == 0 || strcmp(t->service_cidrs[i], t->service_cidrs[k - 1]) != 0)
                        t->service_cidrs[k++] = t->service_cidrs[i];
        t->n_service_cidrs = k;
        return 0;
}

static void picks_free(struct pick *picks, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(picks[i].slices);
        free(picks);
}

/* The table of services svcs[0..n) (any order; NULL entries skipped);
 * with_cidrs: the ServiceCIDRs too. */
static int build(const struct se_store *store, const struct se_proxy_options *opt,
                 enum se_ip_family family, const struct se_object *const *svcs, long n,
                 bool with_cidrs, struct se_proxy_table **ret)
{
        struct pick *picks = NULL;
        size_t n_picks = 0;
        struct se_proxy_table *t = se_calloc(1, sizeof(*t));
        int r = -ENOMEM;
        if (!t)
                return -ENOMEM;
        t->family = family;
        if (n > 0 && !(picks = se_calloc((size_t)n, sizeof(*picks))))
                goto fail;
        /* first the services taken and their slices, to size the arena */
        size_t cap = 0, bytes = 0;
        for (long i = 0; i < n; i++) {
                const struct se_service *svc = ((const struct se_service *)svcs[i]);
                const char *cip = svc ? cluster_ip_of(svc, family) : NULL;
                if (!svc || skip_service(svc, opt) || !cip)
                        continue;
                struct se_kv sel_kv = { LABEL_SERVICE_NAME, svc->obj.meta.name };
                struct se_kvlist sel = { &sel_kv, 1 };
                struct pick *p = &picks[n_picks++];
                p->svc = svc;
                p->cip = cip;
                p->n_slices = se_store_select(store, SE_KIND_ENDPOINT_SLICE,
                                              svc->obj.meta.namespace, &sel, &p->slices);
                if (p->n_slices < 0)
                        goto fail;
                cap += svc->n_ports;
                bytes += table_bytes(p, family);
        }
        if (cap && (se_arena_reserve(&t->arena, cap * sizeof(*t->ports) + bytes) < 0 ||
                    !(t->ports = se_arena_array(&t->arena, cap, sizeof(*t->ports)))))
                goto fail;
        for (size_t i = 0; i < n_picks; i++) {
                const struct pick *p = &picks[i];
                const struct se_object *const *slices = (const struct se_object *const *)p->slices;
                long n_slices = p->n_slices;
                struct se_slices_plan plan;
                bool planned = false;
                if (n_slices == 0 && (r = computed_slices(store, p->svc, &plan, &planned)) < 0)
                        goto fail;
                if (planned) {
                        slices = (const struct se_object *const *)plan.create;
                        n_slices = (long)plan.n_create;
                }
                struct port_index ix;
                bool indexed = n_slices > 0 && p->svc->n_ports > INDEX_FROM_PORTS;
                if (indexed && (r = port_index_build(&ix, slices, n_slices)) < 0) {
                        if (planned)
                                se_slices_plan_release(&plan);
                        goto fail;
                }
                for (uint32_t k = 0; k < p->svc->n_ports; k++) {
                        struct se_proxy_svcport *sp = &t->ports[t->n_ports];
                        r = build_port(&t->arena, p->svc, slices, n_slices, indexed ? &ix : NULL,
                                       p->cip, family, k, opt, sp);
                        if (r == 0)
                                r = own_strings(&t->arena, sp);
                        if (r < 0) {
                                if (indexed)
                                        port_index_release(&ix);
                                if (planned)
                                        se_slices_plan_release(&plan);
                                goto fail;
                        }
                        t->n_ports++;
                        t->n_endpoints += sp->n_eps;
                }
                if (indexed)
                        port_index_release(&ix);
                if (planned)
                        se_slices_plan_release(&plan);
        }
        picks_free(picks, n_picks);
        picks = NULL;
        n_picks = 0;
        if (with_cidrs && (r = service_cidrs(store, t)) < 0)
                goto fail;
        if (t->n_ports > 1 && !strictly_sorted(t->ports, t->n_ports, sizeof(*t->ports), cmp_port))
                qsort(t->ports, t->n_ports, sizeof(*t->ports), cmp_port);
        *ret = t;
        return 0;
fail:
        picks_free(picks, n_picks);
        se_proxy_table_free(t);
        return r < 0 ? r : -ENOMEM;
}

int se_proxy_table_build(const struct se_store *store, const struct se_proxy_options *opt,
                         enum se_ip_family family, struct se_proxy_table **ret)
{
        _cleanup_free_ const struct se_object **svcs = NULL;
        /* in any order: the ports are sorted by spn at the end */
        long n = se_store_list_unordered(store, SE_KIND_SERVICE, NULL, &svcs);
        if (n < 0)
                return (int)n;
        return build(store, opt, family, svcs, n, true, ret);
}

int se_proxy_table_build_services(const struct se_store *store, const struct se_proxy_options *opt,
                                  enum se_ip_family family, const char *const *keys, size_t n_keys,
                                  struct se_proxy_table **ret)
{
        _cleanup_free_ const struct se_object **svcs = se_calloc(n_keys + 1, sizeof(*svcs));
        if (!svcs)
                return -ENOMEM;
        for (size_t i = 0; i < n_keys; i++) {
                char ns[254];
                const char *slash = strchr(keys[i], '/');
                size_t nl = slash ? (size_t)(slash - keys[i]) : 0;
                if (!slash || nl >= sizeof(ns))
                        continue; /* not a key any service has */
                memcpy(ns, keys[i], nl);
                ns[nl] = 0;
                svcs[i] = se_store_get(store, SE_KIND_SERVICE, ns, slash + 1);
        }
        return build(store, opt, family, svcs, (long)n_keys, false, ret);
}
