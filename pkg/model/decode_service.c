/* Service: spec and status.loadBalancer, validated as the API server would. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>
#include <svcenv/parse.h>

#include "decode_internal.h"

static const char *const service_types[] = { "ClusterIP", "NodePort", "LoadBalancer",
                                             "ExternalName", NULL };
static const char *const policies[] = { "Cluster", "Local", NULL };
static const char *const affinities[] = { "ClientIP", "None", NULL };
static const char *const families[] = { "IPv4", "IPv6", NULL };
static const char *const family_policies[] = { "SingleStack", "PreferDualStack", "RequireDualStack",
                                               NULL };

static int decode_port(struct dctx *d, const json_t *pj, void *out, const void *ctx)
{
        struct se_service_port *p = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, pj, "name", &p->name)) < 0 ||
            (r = model_get_protocol(d, pj, "protocol", &p->protocol, NULL)) < 0 ||
            (r = model_get_int32(d, pj, "port", &p->port, NULL)) < 0 ||
            (r = model_get_int_or_string(d, pj, "targetPort", &p->target_port)) < 0 ||
            (r = model_get_int32(d, pj, "nodePort", &p->node_port, NULL)) < 0 ||
            (r = model_get_string(d, pj, "appProtocol", &p->app_protocol)) < 0)
                return r;
        if (p->port == 0)
                return model_dctx_fail(d, "port", "Required value");
        if ((r = model_check_port(d, "port", p->port, false)) < 0 ||
            (r = model_check_port(d, "nodePort", p->node_port, true)) < 0)
                return r;
        if (p->name && *p->name && (r = model_check_dns_label(d, "name", p->name)) < 0)
                return r;
        if (p->target_port.is_string) {
                if ((r = model_check_iana_svc_name(d, "targetPort", p->target_port.str)) < 0)
                        return r;
        } else if (p->target_port.num != 0 &&
                   (r = model_check_port(d, "targetPort", p->target_port.num, false)) < 0) {
                return r;
        }
        return 0;
}

static char seen_mark; /* the value of a hash-set entry */

/* Names are required and unique in a multi-port Service; so is port/protocol.
 * The API server puts no cap on the number of ports, so both checks are
 * linear: a hash set of names and a bitmap of port/protocol pairs. */
static int check_ports(struct dctx *d, const struct se_service *svc)
{
        uint32_t n = svc->n_ports;
        if (n == 0)
                return 0;
        struct se_hashmap names = SE_HASHMAP_INIT;
        /* one bit per port number and protocol (SE_PROTO_SCTP is the last) */
        _cleanup_free_ uint64_t *seen = se_calloc((size_t)(SE_PROTO_SCTP + 1) * 65536 / 64, 8);
        if (!seen)
                return -ENOMEM;
        int r = 0;
        size_t old = model_dctx_push_key(d, "ports");
        for (uint32_t i = 0; r == 0 && i < n; i++) {
                const struct se_service_port *p = &svc->ports[i];
                const char *name = p->name ? p->name : "";
                size_t o2 = model_dctx_push_index(d, i);
                if (n > 1 && !*name) {
                        r = model_dctx_fail(
                                d, "name",
                                "Required value: every port of a multi-port Service needs a name");
                        break;
                }
                if (*name && se_hashmap_get(&names, name)) {
                        r = model_dctx_fail(d, "name", "Duplicate value: \"%s\"", name);
                        break;
                }
                if (*name && se_hashmap_put(&names, name, &seen_mark, NULL) < 0) {
                        r = -ENOMEM;
                        break;
                }
                size_t bit = (size_t)p->protocol * 65536 + ((unsigned)p->port & 0xffff);
                if (seen[bit / 64] & (1ull << (bit % 64))) {
                        r = model_dctx_fail(d, NULL, "Duplicate value: port %d/%s", p->port,
                                            se_protocol_name(p->protocol));
                        break;
                }
                seen[bit / 64] |= 1ull << (bit % 64);
                model_dctx_pop(d, o2);
        }
        se_hashmap_release(&names);
        if (r == 0)
                model_dctx_pop(d, old);
        return r;
}

static int check_ip_list(struct dctx *d, const char *key, const struct se_strs *l, bool allow_none)
{
        size_t old = model_dctx_push_key(d, key);
        for (uint32_t i = 0; i < l->n; i++) {
                if (allow_none && strcmp(l->v[i], "None") == 0)
                        continue;
                size_t o2 = model_dctx_push_index(d, i);
                int r = model_check_ip(d, NULL, l->v[i]);
                if (r < 0)
                        return r;
                model_dctx_pop(d, o2);
        }
        model_dctx_pop(d, old);
        return 0;
}

static int decode_affinity(struct dctx *d, const json_t *spec, struct se_service *svc)
{
        const char *aff = NULL;
        int r = model_get_string(d, spec, "sessionAffinity", &aff);
        if (r < 0)
                return r;
        if (aff && *aff && (r = model_check_one_of(d, "sessionAffinity", aff, affinities)) < 0)
                return r;
        svc->client_ip_affinity = aff && strcmp(aff, "ClientIP") == 0;
        if (!svc->client_ip_affinity)
                return 0;
        svc->affinity_timeout = 10800; /* the API server's default */
        const json_t *cfg, *client;
        if ((r = model_get_object(d, spec, "sessionAffinityConfig", &cfg)) < 0 || !cfg)
                return r;
        size_t old = model_dctx_push_key(d, "sessionAffinityConfig");
        if ((r = model_get_object(d, cfg, "clientIP", &client)) < 0)
                return r;
        if (client) {
                size_t o2 = model_dctx_push_key(d, "clientIP");
                bool present = false;
                int32_t t = 0;
                if ((r = model_get_int32(d, client, "timeoutSeconds", &t, &present)) < 0)
                        return r;
                if (present && (t < 1 || t > 86400))
                        return model_dctx_fail(
                                d, "timeoutSeconds",
                                "Invalid value: %d: must be greater than 0 and less than 86400", t);
                if (present)
                        svc->affinity_timeout = t;
                model_dctx_pop(d, o2);
        }
        model_dctx_pop(d, old);
        return 0;
}

static int decode_policy(struct dctx *d, const json_t *spec, const char *key,
                         enum se_traffic_policy *ret)
{
        const char *s = NULL;
        int r = model_get_string(d, spec, key, &s);
        if (r < 0 || !s || !*s)
                return r;
        if ((r = model_check_one_of(d, key, s, policies)) < 0)
                return r;
        *ret = strcmp(s, "Local") == 0 ? SE_POLICY_LOCAL : SE_POLICY_CLUSTER;
        return 0;
}

static int decode_lb_ingress(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        static const char *const modes[] = { "VIP", "Proxy", NULL };
        struct se_lb_ingress *ing = out;
        const char *mode = NULL;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "ip", &ing->ip)) < 0 ||
            (r = model_get_string(d, e, "hostname", &ing->hostname)) < 0 ||
            (r = model_get_string(d, e, "ipMode", &mode)) < 0)
                return r;
        if (ing->ip && *ing->ip && (r = model_check_ip(d, "ip", ing->ip)) < 0)
                return r;
        if (!mode)
                return 0;
        if ((r = model_check_one_of(d, "ipMode", mode, modes)) < 0)
                return r;
        ing->ip_mode = strcmp(mode, "VIP") == 0 ? SE_IPMODE_VIP : SE_IPMODE_PROXY;
        return 0;
}

static int decode_lb_status(struct dctx *d, const json_t *json, struct se_service *svc)
{
        const json_t *status, *lb;
        int r;
        if ((r = model_get_object(d, json, "status", &status)) < 0 || !status)
                return r;
        size_t old = model_dctx_push_key(d, "status");
        if ((r = model_get_object(d, status, "loadBalancer", &lb)) < 0)
                return r;
        if (lb) {
                model_dctx_push_key(d, "loadBalancer");
                if ((r = GET_LIST(d, lb, "ingress", decode_lb_ingress, NULL, svc->lb_ingress,
                                  svc->n_lb_ingress)) < 0)
                        return r;
        }
        model_dctx_pop(d, old);
        return 0;
}

static int check_source_ranges(struct dctx *d, const struct se_strs *l)
{
        size_t old = model_dctx_push_key(d, "loadBalancerSourceRanges");
        for (uint32_t i = 0; i < l->n; i++) {
                struct se_cidr c;
                /* the API server trims spaces around each range */
                char buf[64];
                const char *s = l->v[i];
                while (*s == ' ')
                        s++;
                size_t len = strlen(s);
                while (len && s[len - 1] == ' ')
                        len--;
                if (len >= sizeof(buf) ||
                    (memcpy(buf, s, len), buf[len] = '\0', se_parse_cidr(buf, &c) < 0)) {
                        size_t o2 = model_dctx_push_index(d, i);
                        int r = model_dctx_fail(d, NULL, "\"%s\" is not a valid CIDR", l->v[i]);
                        model_dctx_pop(d, o2);
                        return r;
                }
        }
        model_dctx_pop(d, old);
        return 0;
}

int model_decode_service(struct dctx *d, const json_t *json, struct se_service *svc)
{
        const json_t *spec;
        const char *type = NULL;
        int r;
        if ((r = model_get_object(d, json, "spec", &spec)) < 0)
                return r;
        if (spec) {
                size_t old = model_dctx_push_key(d, "spec");
                if ((r = model_get_string(d, spec, "type", &type)) < 0 ||
                    (r = model_get_string(d, spec, "clusterIP", &svc->cluster_ip)) < 0 ||
                    (r = model_get_strarray(d, spec, "clusterIPs", &svc->cluster_ips)) < 0 ||
                    (r = model_get_strarray(d, spec, "ipFamilies", &svc->ip_families)) < 0 ||
                    (r = model_get_string(d, spec, "ipFamilyPolicy", &svc->ip_family_policy)) < 0 ||
                    (r = GET_LIST(d, spec, "ports", decode_port, NULL, svc->ports, svc->n_ports)) <
                            0 ||
                    (r = check_ports(d, svc)) < 0 ||
                    (!(d->flags & SE_DECODE_DNS_SERVICES) &&
                     (r = model_get_shared_strmap(d, spec, "selector", &svc->selector)) < 0) ||
                    (r = decode_affinity(d, spec, svc)) < 0 ||
                    (r = model_get_strarray(d, spec, "externalIPs", &svc->external_ips)) < 0 ||
                    (r = model_get_string(d, spec, "loadBalancerIP", &svc->load_balancer_ip)) < 0 ||
                    (r = model_get_strarray(d, spec, "loadBalancerSourceRanges",
                                            &svc->lb_source_ranges)) < 0 ||
                    (r = model_get_string(d, spec, "loadBalancerClass",
                                          &svc->load_balancer_class)) < 0 ||
                    (r = decode_policy(d, spec, "externalTrafficPolicy", &svc->external_policy)) <
                            0 ||
                    (r = decode_policy(d, spec, "internalTrafficPolicy", &svc->internal_policy)) <
                            0 ||
                    (r = model_get_int32(d, spec, "healthCheckNodePort",
                                         &svc->health_check_node_port, NULL)) < 0 ||
                    (r = model_get_bool(d, spec, "publishNotReadyAddresses",
                                        &(enum se_opt_bool){ 0 })) < 0 ||
                    (r = model_get_bool(d, spec, "allocateLoadBalancerNodePorts",
                                        &svc->allocate_lb_node_ports)) < 0 ||
                    (r = model_get_string(d, spec, "externalName", &svc->external_name)) < 0 ||
                    (r = model_get_string(d, spec, "trafficDistribution",
                                          &svc->traffic_distribution)) < 0)
                        return r;
                svc->publish_not_ready_addresses =
                        json_is_true(json_object_get(spec, "publishNotReadyAddresses"));
                if (type && *type) {
                        if ((r = model_check_one_of(d, "type", type, service_types)) < 0)
                                return r;
                        for (int t = 0; service_types[t]; t++)
                                if (strcmp(type, service_types[t]) == 0)
                                        svc->type = (enum se_service_type)t;
                }
                if (svc->cluster_ip && *svc->cluster_ip && strcmp(svc->cluster_ip, "None") != 0 &&
                    (r = model_check_ip(d, "clusterIP", svc->cluster_ip)) < 0)
                        return r;
                if ((r = check_ip_list(d, "clusterIPs", &svc->cluster_ips, true)) < 0 ||
                    (r = check_ip_list(d, "externalIPs", &svc->external_ips, false)) < 0 ||
                    (r = check_source_ranges(d, &svc->lb_source_ranges)) < 0)
                        return r;
                if (svc->cluster_ip && *svc->cluster_ip && svc->cluster_ips.n &&
                    strcmp(svc->cluster_ip, svc->cluster_ips.v[0]) != 0)
                        return model_dctx_fail(
                                d, "clusterIPs[0]",
                                "Invalid value: \"%s\": must be equal to clusterIP \"%s\"",
                                svc->cluster_ips.v[0], svc->cluster_ip);
                /* clusterIPs alone implies clusterIP, as the API server defaults it */
                if ((!svc->cluster_ip || !*svc->cluster_ip) && svc->cluster_ips.n)
                        svc->cluster_ip = svc->cluster_ips.v[0];
                size_t o2 = model_dctx_push_key(d, "ipFamilies");
                for (uint32_t i = 0; i < svc->ip_families.n; i++) {
                        size_t o3 = model_dctx_push_index(d, i);
                        if ((r = model_check_one_of(d, NULL, svc->ip_families.v[i], families)) < 0)
                                return r;
                        model_dctx_pop(d, o3);
                }
                model_dctx_pop(d, o2);
                if (svc->ip_family_policy &&
                    (r = model_check_one_of(d, "ipFamilyPolicy", svc->ip_family_policy,
                                            family_policies)) < 0)
                        return r;
                if ((r = model_check_port(d, "healthCheckNodePort", svc->health_check_node_port,
                                          true)) < 0)
                        return r;
                if (svc->type == SE_SVC_EXTERNAL_NAME &&
                    (!svc->external_name || !*svc->external_name))
                        return model_dctx_fail(
                                d, "externalName",
                                "Required value: an ExternalName Service needs spec.externalName");
                model_dctx_pop(d, old);
        }
        return decode_lb_status(d, json, svc);
}
