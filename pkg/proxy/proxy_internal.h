/* Private helpers shared by the proxy writers. */
#ifndef SVCENV_PROXY_INTERNAL_H
#define SVCENV_PROXY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <svcenv/proxy.h>

/* The endpoint sets kube-proxy's CategorizeEndpoints gives one service
 * port: arrays of pointers into sp->eps, in sp->eps order (so "ip:port"
 * order; upstream's merged list is in map order, ours is sorted). */
struct proxy_categories {
        const struct se_proxy_endpoint **cluster, **local, **reachable;
        uint32_t n_cluster, n_local, n_reachable;
        bool has_any;
};

/* Fills c (arrays allocated with malloc; release with
 * proxy_categories_release). 0 or -ENOMEM. */
int proxy_categorize(const struct se_proxy_svcport *sp, const struct se_proxy_options *opt,
                     struct proxy_categories *c);
void proxy_categories_release(struct proxy_categories *c);

/* ServicePort.ExternallyAccessible / UsesClusterEndpoints / UsesLocalEndpoints */
bool proxy_externally_accessible(const struct se_proxy_svcport *sp);
bool proxy_uses_cluster(const struct se_proxy_svcport *sp);
bool proxy_uses_local(const struct se_proxy_svcport *sp);

/* The local-traffic detector's CIDR for the family, NULL when none. */
const struct se_cidr *proxy_cluster_cidr(const struct se_proxy_options *opt, enum se_ip_family fam);
/* Text of the masquerade mark ("0x00004000" for bit 14, like Go's %#08x). */
void proxy_mark_text(const struct se_proxy_options *opt, char out[16]);
/* Canonical "ip/prefix" text of c. */
void proxy_cidr_text(const struct se_cidr *c, char *out, size_t size);

#endif
