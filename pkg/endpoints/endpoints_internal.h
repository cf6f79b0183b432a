/* Helpers shared by the Endpoints and EndpointSlice planners. */
#ifndef SVCENV_ENDPOINTS_INTERNAL_H
#define SVCENV_ENDPOINTS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/endpoints.h>

#define IP_TEXT_MAX 46

/* NULL-safe string compare and equality (NULL sorts first). */
int endpoints_nstrcmp(const char *a, const char *b);
bool endpoints_nstreq(const char *a, const char *b);
/* "" and NULL are the same. */
bool endpoints_estreq(const char *a, const char *b);

/* True when the pod is one the Service selects (namespace + selector). */
bool endpoints_pod_selected(const struct se_service *svc, const struct se_pod *pod);
/* True when clusterIP is set (not "" / "None"). */
bool endpoints_service_ip_set(const struct se_service *svc);
/* The pod's IPs of the family (status.podIPs, in order), in canonical
 * text, at most max of them; returns how many. */
uint32_t endpoints_pod_ips_of_family(const struct se_pod *pod, int family, char out[][IP_TEXT_MAX],
                                     uint32_t max);
/* Hostname to publish for the pod, NULL when none (ShouldSetHostname). */
const char *endpoints_pod_hostname_for(const struct se_pod *pod, const struct se_service *svc);

/* Sorted-kvlist editing in an arena: set (insert or replace) and delete.
 * Lists stay sorted by key. set returns 0 or -ENOMEM. */
int endpoints_kv_set(struct se_arena *a, struct se_kvlist *l, const char *key, const char *value);
void endpoints_kv_del(struct se_kvlist *l, const char *key);
/* Deep copy of src into a's strings. 0 or -ENOMEM. */
int endpoints_kv_copy(struct se_arena *a, struct se_kvlist *dst, const struct se_kvlist *src);
bool endpoints_kv_equal(const struct se_kvlist *x, const struct se_kvlist *y);
/* Deep copy of metadata into the arena. 0 or -ENOMEM. */
int endpoints_meta_copy(struct se_arena *a, struct se_meta *dst, const struct se_meta *src);
/* Copy of an object reference (NULL gives NULL); *ok false on -ENOMEM. */
struct se_object_ref *endpoints_objref_copy(struct se_arena *a, const struct se_object_ref *r,
                                            bool *ok);
/* targetRefs equal, resourceVersion ignored (NULL only equals NULL). */
bool endpoints_objref_equal(const struct se_object_ref *x, const struct se_object_ref *y);

/* The Ready condition and the hints of endpoint k of an existing slice,
 * full or slim (SE_DECODE_SLIM_SLICES); the hints are borrowed. */
enum se_opt_bool endpoints_slice_ep_ready(const struct se_endpoint_slice *s, uint32_t k);
void endpoints_slice_ep_hints(const struct se_endpoint_slice *s, uint32_t k, struct se_strs *zones,
                              struct se_strs *nodes);
/* Its digest (stored when slim, computed when full). */
void endpoints_slice_ep_digest(const struct se_endpoint_slice *s, uint32_t k,
                               struct se_slice_endpoint_digest *ret);

/* Upstream's canonical Endpoints order (order.c): the FNV-1a 128 digest
 * of Go's spew dump of a port or a subset (its ports and addresses as they
 * stand), big-endian. */
#define EP_ORDER_KEY_LEN 16
void endpoints_port_order_key(const struct se_endpoint_port *p, uint8_t out[EP_ORDER_KEY_LEN]);
void endpoints_subset_order_key(const struct se_endpoint_subset *s, uint8_t out[EP_ORDER_KEY_LEN]);
/* The same for an EndpointSlice port (discovery/v1's struct). */
void endpoints_slice_port_order_key(const struct se_slice_port *p, uint8_t out[EP_ORDER_KEY_LEN]);
/* Sorts each subset's ports, then the subsets, by those digests (the
 * addresses must already be in order). 0 or -ENOMEM. */
int endpoints_sort_subsets(struct se_endpoint_subset *subs, uint32_t n);

/* Upstream's truncateEndpoints: above 1000 addresses, keeps ready ones
 * first and gives each subset, in the order they stand, its proportional
 * share (rounded up, capped by what is left). True when it cut. */
bool endpoints_truncate(struct se_endpoints *ep);

const char *endpoints_opt_endpoints_managed_by(const struct se_endpoints_opts *o);
const char *endpoints_opt_slices_managed_by(const struct se_endpoints_opts *o);
uint32_t endpoints_opt_max_per_slice(const struct se_endpoints_opts *o);

#endif
