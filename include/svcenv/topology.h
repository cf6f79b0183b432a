/* topology.h — the EndpointSlice controller's topology cache, for
 * Topology Aware Routing (`service.kubernetes.io/topology-mode: Auto`, or
 * the older `service.kubernetes.io/topology-aware-hints: Auto|auto`,
 * which wins when both are set).
 *
 * Upstream k8s.io/endpointslice/topologycache (Kubernetes v1.36), pure:
 *  - from the Nodes, each zone's share of the allocatable CPU of the ready
 *    nodes (control-plane and master nodes left out). Any counted node
 *    without a zone label or with zero allocatable CPU, a total of zero, or
 *    fewer than two zones leave the cache without shares: every Service in
 *    Auto mode then has its hints removed ("Insufficient Node information").
 *  - per Service and address type, the hints it was last given (zone →
 *    number of endpoints), to tell which Services a Node change overloads
 *    and when to emit the TopologyAwareHintsEnabled/Disabled events.
 * The hints themselves are written by se_slices_plan() (endpoints.h) when
 * the input carries a cache. Where upstream iterates Go maps (which zone
 * gives or receives an endpoint first), svcenv takes zones by name.
 *
 * Thread safety: every function locks the cache; several planners may share
 * one. No I/O. */
#ifndef SVCENV_TOPOLOGY_H
#define SVCENV_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>

#include <svcenv/model.h>
#include <svcenv/strv.h>

#define SE_TOPOLOGY_ZONE_LABEL       "topology.kubernetes.io/zone"
#define SE_TOPOLOGY_MODE_ANNOTATION  "service.kubernetes.io/topology-mode"
#define SE_TOPOLOGY_HINTS_ANNOTATION "service.kubernetes.io/topology-aware-hints"
/* upstream's overloadThreshold: no zone may get more than 20 % above its share */
#define SE_TOPOLOGY_OVERLOAD_THRESHOLD 0.2

struct se_topology_cache;

/* New empty cache (no shares: as before the first Node list); NULL on
 * -ENOMEM. */
struct se_topology_cache *se_topology_cache_new(void);
/* NULL-safe; returns NULL. */
struct se_topology_cache *se_topology_cache_free(struct se_topology_cache *t);

/* upstream SetNodes: recomputes the zone shares from all the Nodes
 * (borrowed, not kept). 0 or -ENOMEM (the cache is then unchanged). */
int se_topology_cache_set_nodes(struct se_topology_cache *t, const struct se_node *const *nodes,
                                size_t n);
/* Number of zones with a share (0 when node information is insufficient). */
size_t se_topology_cache_zones(struct se_topology_cache *t);
/* The share of zone (0 when it has none). */
double se_topology_cache_ratio(struct se_topology_cache *t, const char *zone);

/* upstream GetOverloadedServices: appends to ret the keys ("ns/name",
 * sorted) of the Services with hints of which some zone now gets fewer
 * endpoints than ceil(total * share / 1.2), lacks any, or (with no shares)
 * all of them. 0 or -ENOMEM. */
int se_topology_cache_overloaded(struct se_topology_cache *t, struct se_strv *ret);
/* True when key's hints were last enabled (upstream HasPopulatedHints). */
bool se_topology_cache_has_hints(struct se_topology_cache *t, const char *key);
/* Forgets key's hints of one address type and its enabled state (upstream
 * RemoveHints). */
void se_topology_cache_remove_hints(struct se_topology_cache *t, const char *key,
                                    const char *address_type);

/* True when the annotations ask for topology hints (upstream hintsEnabled):
 * the deprecated topology-aware-hints annotation if present, else
 * topology-mode, equal to "Auto" or "auto". */
bool se_topology_hints_enabled(const struct se_kvlist *annotations);
/* upstream isNodeReady: the Ready condition is True. */
bool se_topology_node_ready(const struct se_node *n);

#endif
