/* Store -> per-family service ports with their endpoints, as kube-proxy's
 * service change tracker and endpoint-slice cache see them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/proxy.h>

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

struct se_proxy_table *se_proxy_table_free(struct se_proxy_table *t)
{
        if (t) {
                se_arena_release(&t->arena);
                free(t);
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

static bool is_family(const char *ip, enum se_ip_family fam)
{
        return ip && se_ip_family_of(ip) == fam;
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

static bool skip_service(const struct se_service *svc, const struct se_proxy_options *opt)
{
        const char *proxy = se_kvlist_get(&svc->obj.meta.labels, LABEL_PROXY_NAME);
        if (proxy && (!opt->proxy_name || strcmp(proxy, opt->proxy_name) != 0))
                return true;
        if (se_kvlist_get(&svc->obj.meta.labels, LABEL_HEADLESS))
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
        char str[96];
        if (strchr(ip, ':'))
                snprintf(str, sizeof(str), "[%s]:%d", ip, port);
        else
                snprintf(str, sizeof(str), "%s:%d", ip, port);
        ep->ip = ip;
        ep->port = port;
        if (!(ep->str = se_arena_strdup(a, str)))
                return -ENOMEM;
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

/* Endpoints of one service port from the service's EndpointSlices
 * (endpointslicecache: matching port name and protocol, this family,
 * first address of each endpoint, nil conditions count as ready/serving). */
static int slice_endpoints(struct se_arena *a, const struct se_object *const *slices, long n,
                           enum se_ip_family fam, const struct se_service_port *port,
                           struct se_proxy_svcport *sp, const struct se_proxy_options *opt)
{
        size_t cap = 0;
        for (long i = 0; i < n; i++)
                cap += ((const struct se_endpoint_slice *)slices[i])->n_endpoints;
        if (cap == 0)
                return 0;
        if (!(sp->eps = se_arena_array(a, cap, sizeof(*sp->eps))))
                return -ENOMEM;
        const char *pname = port->name ? port->name : "";
        const char *want = fam == SE_IPV4 ? "IPv4" : "IPv6";
        for (long i = 0; i < n; i++) {
                const struct se_endpoint_slice *es = ((const struct se_endpoint_slice *)slices[i]);
                if (!es->address_type || strcmp(es->address_type, want) != 0)
                        continue;
                for (uint32_t p = 0; p < es->n_ports; p++) {
                        const struct se_slice_port *pp = &es->ports[p];
                        enum se_protocol proto = pp->has_protocol ? pp->protocol : SE_PROTO_TCP;
                        if (!pp->has_port || proto != port->protocol ||
                            strcmp(pp->name ? pp->name : "", pname) != 0)
                                continue;
                        for (uint32_t e = 0; e < es->n_endpoints; e++) {
                                const struct se_slice_endpoint *se = &es->endpoints[e];
                                if (se->addresses.n == 0 || !is_family(se->addresses.v[0], fam))
                                        continue;
                                int r = add_endpoint(a, sp, se->addresses.v[0], pp->port,
                                                     se->ready != SE_FALSE, se->serving != SE_FALSE,
                                                     se->terminating == SE_TRUE, se->node_name,
                                                     &se->hint_zones, &se->hint_nodes, opt);
                                if (r < 0)
                                        return r;
                        }
                        break; /* one matching port per slice */
                }
        }
        return 0;
}

/* TEMPORARY (until pkg/endpoints is merged; the lead replaces this with its
 * call): a minimal endpoint selection for a selector service that has no
 * EndpointSlices — non-terminal pods with an IP of the family matching the
 * selector; named target ports resolved from the containers' ports. */
static int32_t resolve_target_port(const struct se_pod *pod, const struct se_service_port *port)
{
        if (!port->target_port.is_string)
                return port->target_port.num ? port->target_port.num : port->port;
        for (int pass = 0; pass < 2; pass++) {
                const struct se_container *cs = pass ? pod->init_containers : pod->containers;
                uint32_t nc = pass ? pod->n_init_containers : pod->n_containers;
                for (uint32_t c = 0; c < nc; c++)
                        for (uint32_t k = 0; k < cs[c].n_ports; k++) {
                                const struct se_container_port *cp = &cs[c].ports[k];
                                if (cp->name && strcmp(cp->name, port->target_port.str) == 0 &&
                                    cp->protocol == port->protocol)
                                        return cp->container_port;
                        }
        }
        return 0;
}

static const char *pod_ip_of(const struct se_pod *pod, enum se_ip_family fam)
{
        for (uint32_t i = 0; i < pod->pod_ips.n; i++)
                if (is_family(pod->pod_ips.v[i], fam))
                        return pod->pod_ips.v[i];
        return is_family(pod->pod_ip, fam) ? pod->pod_ip : NULL;
}

static int pod_endpoints(struct se_arena *a, const struct se_store *store,
                         const struct se_service *svc, enum se_ip_family fam,
                         const struct se_service_port *port, struct se_proxy_svcport *sp,
                         const struct se_proxy_options *opt)
{
        if (svc->selector.n == 0)
                return 0;
        _cleanup_free_ const struct se_object **pods = NULL;
        long n =
                se_store_select(store, SE_KIND_POD, svc->obj.meta.namespace, &svc->selector, &pods);
        if (n <= 0)
                return (int)n;
        if (!(sp->eps = se_arena_array(a, (size_t)n, sizeof(*sp->eps))))
                return -ENOMEM;
        for (long i = 0; i < n; i++) {
                const struct se_pod *pod = (const struct se_pod *)pods[i];
                const char *ip = pod_ip_of(pod, fam);
                if (!ip || se_pod_is_terminal(pod))
                        continue;
                int32_t tp = resolve_target_port(pod, port);
                if (tp <= 0)
                        continue;
                bool terminating = pod->obj.meta.deletion_timestamp != NULL;
                bool pod_ready = se_pod_is_ready(pod);
                bool pub = svc->publish_not_ready_addresses;
                int r = add_endpoint(a, sp, ip, tp, pub || (pod_ready && !terminating),
                                     pub || pod_ready, terminating, pod->node_name, NULL, NULL,
                                     opt);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmp_ep(const void *x, const void *y)
{
        const struct se_proxy_endpoint *a = x, *b = y;
        int c = strcmp(a->str, b->str);
        if (c)
                return c;
        return (int)b->ready - (int)a->ready; /* ready first among duplicates */
}

static void sort_unique(struct se_proxy_svcport *sp)
{
        if (sp->n_eps < 2)
                return;
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

static int build_port(struct se_arena *a, const struct se_store *store,
                      const struct se_service *svc, const struct se_object *const *slices,
                      long n_slices, const char *cip, enum se_ip_family fam, uint32_t idx,
                      const struct se_proxy_options *opt, struct se_proxy_svcport *sp)
{
        const struct se_service_port *port = &svc->ports[idx];
        const struct se_meta *m = &svc->obj.meta;
        char spn[600];
        sp->ns = m->namespace;
        sp->name = m->name;
        sp->port_name = port->name ? port->name : "";
        if (sp->port_name[0])
                snprintf(spn, sizeof(spn), "%s/%s:%s", m->namespace, m->name, sp->port_name);
        else
                snprintf(spn, sizeof(spn), "%s/%s", m->namespace, m->name);
        if (!(sp->spn = se_arena_strdup(a, spn)))
                return -ENOMEM;
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
        if (n_slices > 0)
                r = slice_endpoints(a, slices, n_slices, fam, port, sp, opt);
        else
                r = pod_endpoints(a, store, svc, fam, port, sp, opt);
        if (r < 0)
                return r;
        sort_unique(sp);
        return 0;
}

int se_proxy_table_build(const struct se_store *store, const struct se_proxy_options *opt,
                         enum se_ip_family family, struct se_proxy_table **ret)
{
        _cleanup_free_ const struct se_object **svcs = NULL;
        struct se_proxy_table *t = calloc(1, sizeof(*t));
        int r = -ENOMEM;
        if (!t)
                return -ENOMEM;
        t->family = family;
        long n = se_store_list(store, SE_KIND_SERVICE, NULL, &svcs);
        if (n < 0)
                goto fail;
        size_t cap = 0;
        for (long i = 0; i < n; i++)
                cap += ((const struct se_service *)svcs[i])->n_ports;
        if (cap && !(t->ports = se_arena_array(&t->arena, cap, sizeof(*t->ports))))
                goto fail;
        for (long i = 0; i < n; i++) {
                const struct se_service *svc = ((const struct se_service *)svcs[i]);
                const char *cip = cluster_ip_of(svc, family);
                if (skip_service(svc, opt) || !cip)
                        continue;
                struct se_kv sel_kv = { LABEL_SERVICE_NAME, svc->obj.meta.name };
                struct se_kvlist sel = { &sel_kv, 1 };
                _cleanup_free_ const struct se_object **slices = NULL;
                long ns = se_store_select(store, SE_KIND_ENDPOINT_SLICE, svc->obj.meta.namespace,
                                          &sel, &slices);
                if (ns < 0)
                        goto fail;
                for (uint32_t p = 0; p < svc->n_ports; p++) {
                        struct se_proxy_svcport *sp = &t->ports[t->n_ports];
                        r = build_port(&t->arena, store, svc, slices, ns, cip, family, p, opt, sp);
                        if (r < 0)
                                goto fail;
                        t->n_ports++;
                        t->n_endpoints += sp->n_eps;
                }
        }
        if (t->n_ports > 1)
                qsort(t->ports, t->n_ports, sizeof(*t->ports), cmp_port);
        *ret = t;
        return 0;
fail:
        se_proxy_table_free(t);
        return r < 0 ? r : -ENOMEM;
}
