/* endpoints.h — the Endpoints and EndpointSlice controllers' computation,
 * pure: a Service, its candidate Pods (and Nodes) in; the objects to write
 * and the action (create/update/unchanged/delete) out. No I/O, no clock.
 *
 * Behaviour is kube-controller-manager v1.36's (endpoints_controller.go and
 * the k8s.io/endpointslice reconciler); where upstream is non-deterministic
 * svcenv fixes an order:
 *  - Endpoints: upstream's own order, bit for bit: addresses sorted by IP
 *    text bytewise then pod UID; the ports of a subset, then the subsets,
 *    by the FNV-1a 128 digest of Go's spew dump of each (SortSubsets), so
 *    truncation at 1000 addresses keeps the same addresses as upstream.
 *    Equality with an existing object compares ports and subsets as sets,
 *    addresses in order, so an object in another order is not rewritten
 *    for its order alone (upstream compares positionally).
 *  - EndpointSlices: ports in upstream's order too (portsInOrder: the
 *    FNV-1a 128 digest of the discovery/v1 port's dump); endpoints are
 *    placed in the order (first address, pod UID) where upstream pops
 *    them from a set; existing slices are visited by name.
 *  - New slices get a name at once (the API server is not there to expand
 *    generateName offline): generateName "<service>-" (base cut to 58
 *    characters) + 5 characters from the API server's alphabet
 *    "bcdfghjklmnpqrstvwxz2456789", chosen by the bytes of
 *    sha256("<namespace>/<service>/<n>") where n counts 0, 1, ... over the
 *    service's new slices, skipping names already taken. generateName is
 *    kept too.
 *
 * Which services: a Service with a non-empty selector that is not
 * ExternalName. Endpoints of other services are never touched. When the
 * Service is gone (in->svc == NULL) the Endpoints planner returns
 * SE_EP_DELETE for any existing object, whoever wrote it (labels are not
 * looked at), except one carrying the leader-election annotation
 * (SE_LEADER_ANNOTATION): upstream's syncService and checkLeftoverEndpoints
 * together. (Upstream's start-up pass skips those records; a Service delete
 * event for the same name would delete one, which no real cluster has.)
 *
 * Addresses come from status.podIPs (the decoder mirrors podIP into it), in
 * canonical text. IP family: spec.ipFamilies; when absent (manifests written by hand) the
 * API server's defaulting is applied: the family of clusterIP, else IPv4.
 * The same single family is used for EndpointSlices.
 *
 * Trigger time: the caller passes the `last-change-trigger-time` in
 * (upstream: the Service's creationTimestamp on the first sync after the
 * controller starts, then the oldest Ready transition that changed since
 * the previous sync). 0 means none: the annotation is removed. It is never
 * compared, so a differing trigger time alone does not cause a write.
 *
 * Ownership: results are new objects (se_object_unref them, or use the
 * _release functions); input objects are borrowed and not kept. */
#ifndef SVCENV_ENDPOINTS_H
#define SVCENV_ENDPOINTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/model.h>
#include <svcenv/strv.h>

#define SE_ENDPOINTS_MAX_CAPACITY     1000
#define SE_ENDPOINTS_MANAGED_BY_LABEL "endpoints.kubernetes.io/managed-by"
#define SE_SLICE_MANAGED_BY_LABEL     "endpointslice.kubernetes.io/managed-by"
#define SE_SLICE_SERVICE_NAME_LABEL   "kubernetes.io/service-name"
#define SE_HEADLESS_LABEL             "service.kubernetes.io/headless"
#define SE_TRIGGER_TIME_ANNOTATION    "endpoints.kubernetes.io/last-change-trigger-time"
#define SE_OVER_CAPACITY_ANNOTATION   "endpoints.kubernetes.io/over-capacity"
#define SE_LEADER_ANNOTATION          "control-plane.alpha.kubernetes.io/leader"
/* Defaults are upstream's own values, so svcenv can replace the upstream
 * controllers and adopt their objects; change them to run side by side. */
#define SE_ENDPOINTS_DEFAULT_MANAGED_BY "endpoint-controller"
#define SE_SLICES_DEFAULT_MANAGED_BY    "endpointslice-controller.k8s.io"
#define SE_SLICES_DEFAULT_MAX_ENDPOINTS 100
#define SE_SLICES_MAX_ENDPOINTS         1000
/* Error texts kept per plan for pods on unknown nodes (the count is exact),
 * and the cap of their joined text in an event */
#define SE_SLICES_MAX_NODE_ERRORS  256
#define SE_SLICES_ERRORS_MAX_BYTES (64 * 1024)

enum se_ep_action {
        SE_EP_SKIP = 0, /* not ours: nothing to do, nothing to show */
        SE_EP_UNCHANGED,
        SE_EP_CREATE,
        SE_EP_UPDATE,
        SE_EP_DELETE,
};

/* "skip", "unchanged", "create", "update", "delete". */
const char *se_ep_action_name(enum se_ep_action a);

struct se_topology_cache; /* topology.h */

/* Node by name (borrowed) or NULL when the cluster has no such node. */
typedef const struct se_node *(*se_endpoints_node_fn)(void *data, const char *name);

enum se_ep_write { SE_EP_WRITE_ENDPOINTS = 1 << 0, SE_EP_WRITE_SLICES = 1 << 1 };

struct se_endpoints_opts {
        const char *endpoints_managed_by; /* NULL: SE_ENDPOINTS_DEFAULT_MANAGED_BY */
        const char *slices_managed_by; /* NULL: SE_SLICES_DEFAULT_MANAGED_BY */
        uint32_t max_endpoints_per_slice; /* 0: 100; capped to 1..1000 */
        unsigned write; /* enum se_ep_write bits for se_service_plan(); 0: both */
};

/* One sync of the service key namespace/name. */
struct se_endpoints_input {
        const char *namespace;
        const char *name;
        const struct se_service *svc; /* NULL: the Service is gone */
        /* Candidates; pods of other namespaces or not matching the selector
         * are ignored, so a superset is fine. */
        const struct se_pod *const *pods;
        size_t n_pods;
        /* For slices: zone of the pod's node, and the rule that a pod on an
         * unknown node is left out (unless publishNotReadyAddresses). NULL:
         * nodes unknown, every pod kept without zone. */
        se_endpoints_node_fn get_node;
        void *node_data;
        int64_t trigger_time_ns; /* ns since the epoch; 0: none */
        /* For slices: the controller's topology cache (topology.h), read and
         * updated by the sync. NULL: no cache, so a Service in topology-mode
         * Auto gets no hints (nor trafficDistribution's). */
        struct se_topology_cache *topology;
};

/* True when the controllers manage this Service: selector set and not
 * ExternalName. */
bool se_endpoints_service_managed(const struct se_service *svc);
/* Upstream ShouldPodBeInEndpoints: not Succeeded/Failed, has an IP, and not
 * terminating unless include_terminating. */
bool se_endpoints_pod_included(const struct se_pod *pod, bool include_terminating);
/* Upstream FindPort: numeric targetPort as is (unset = port); a named one
 * looked up by name and protocol in the containers, then in sidecar init
 * containers (restartPolicy Always). The port number, or -ENOENT. */
int se_endpoints_find_port(const struct se_pod *pod, const struct se_service_port *sp);
/* The Service's primary family, 4 or 6 (see the IP family rule above). */
int se_endpoints_service_family(const struct se_service *svc);
/* Formats ns since the epoch as Go's RFC3339Nano in UTC into buf (>= 40). */
void se_endpoints_format_time(int64_t t_ns, char *buf, size_t size);

/* The desired Endpoints of in->svc (which must be managed): name,
 * namespace, labels (Service labels, the headless label when clusterIP is
 * ""/None, the managed-by label) and canonical, untruncated subsets; no
 * annotations. *ret is a new object. 0, -EINVAL (svc NULL or not managed)
 * or -ENOMEM. */
int se_endpoints_build(const struct se_endpoints_input *in, const struct se_endpoints_opts *opts,
                       struct se_endpoints **ret);

/* True when writing desired over existing is a no-op by upstream's rules:
 * subsets equal (targetRef.resourceVersion ignored; see ordering above),
 * labels correct for the Service (headless label ignored, managed-by ours)
 * and the over-capacity annotation absent with at most 1000 addresses.
 * Annotations (the trigger time) are not compared. existing may be slim
 * (model.h): its subsets digest is compared, with the same verdict. */
bool se_endpoints_equal(const struct se_endpoints *desired, const struct se_endpoints *existing,
                        const struct se_service *svc, const struct se_endpoints_opts *opts);

struct se_endpoints_plan {
        enum se_ep_action action;
        /* CREATE/UPDATE: the object to write (new reference): existing
         * metadata kept (foreign annotations, resourceVersion, ...), labels
         * and subsets replaced, trigger-time set or removed, truncated to
         * 1000 addresses (ready first, each subset in proportion) with
         * over-capacity: truncated. UNCHANGED/DELETE/SKIP: NULL. */
        struct se_endpoints *obj;
};

/* Plans one sync of the Endpoints in->namespace/in->name against existing
 * (NULL when there is none). 0 or -ENOMEM; *ret is always set on 0. */
int se_endpoints_plan(const struct se_endpoints_input *in, const struct se_endpoints *existing,
                      const struct se_endpoints_opts *opts, struct se_endpoints_plan *ret);
void se_endpoints_plan_release(struct se_endpoints_plan *p);

/* An event the EndpointSlice controller records on the Service: upstream's
 * topology events, reason TopologyAwareHintsEnabled (Normal) or
 * TopologyAwareHintsDisabled (Warning), message as upstream's, ending in
 * ", addressType: IPv4|IPv6". */
struct se_slices_event {
        bool warning; /* Warning, else Normal */
        const char *reason; /* static */
        char *message; /* owned by the plan */
};

struct se_slices_plan {
        enum se_ep_action action; /* summary for the service */
        struct se_endpoint_slice **create; /* new objects, named as above */
        uint32_t n_create;
        struct se_endpoint_slice **update; /* full objects to PUT */
        uint32_t n_update;
        const struct se_endpoint_slice **remove; /* borrowed from existing */
        uint32_t n_remove;
        const struct se_endpoint_slice **unchanged; /* borrowed from existing */
        uint32_t n_unchanged;
        /* Pods left out because their node is unknown: upstream writes the
         * slices and then returns an error so the key is retried. */
        uint32_t pods_missing_node;
        /* upstream's error for each of them, in pod order: "skipping Pod P
         * for Service NS/S: Node N Not Found" (the first
         * SE_SLICES_MAX_NODE_ERRORS only); the controller reports them in
         * its FailedToUpdateEndpointSlices event */
        struct se_strv node_errors;
        uint32_t endpoints_added, endpoints_removed;
        /* Events for the Service, in upstream's order (after the writes) */
        struct se_slices_event *events;
        uint32_t n_events;
};

/* The text of Go's error aggregate over errs (upstream's reconciler joins
 * its errors so): one distinct text as it is, several joined by ", " in
 * brackets, each repeat shown once, in order. A new string (free() it);
 * NULL when errs is empty, on -ENOMEM, or when longer than max bytes. */
char *se_errors_join(const struct se_strv *errs, size_t max);

/* Plans one sync of the service's EndpointSlices, upstream's reconciler:
 * existing are the slices of the namespace (others are ignored: only those
 * labelled with the service name and our managed-by value and not being
 * deleted count). Slices of another owner UID or an address type the
 * Service no longer has are removed; per port set, existing slices keep
 * their endpoints, updated ones are filled first (fullest first), then the
 * unchanged slice closest to full that takes all the rest, else new slices;
 * a create and a delete of the same type become one update; a placeholder
 * slice (no ports, no endpoints) is kept when nothing else would exist.
 * Hints, as upstream's reconciler with a topology cache: with the
 * topology-mode Auto annotation (topology.h) and in->topology set, zones
 * get endpoints in proportion to their CPU share (upstream AddHints, events
 * in the plan); otherwise a cache that had hints for the Service forgets
 * them (a TopologyAwareHintsDisabled event) and spec.trafficDistribution
 * rules (PreferClose/PreferSameZone: ready endpoints get their zone;
 * PreferSameNode: also their node; otherwise none). The annotation takes
 * precedence over trafficDistribution; without a cache it gives no hints.
 * existing slices may be slim (SE_DECODE_SLIM_SLICES, decode.h): endpoints
 * are matched and compared by their digests, and a slice written from an
 * existing one takes its matched desired endpoints plus its hints, so the
 * plan is the same as from the full slices.
 * 0 or -ENOMEM; *ret is always set on 0. */
int se_slices_plan(const struct se_endpoints_input *in,
                   const struct se_endpoint_slice *const *existing, size_t n_existing,
                   const struct se_endpoints_opts *opts, struct se_slices_plan *ret);
void se_slices_plan_release(struct se_slices_plan *p);

/* Both planners for one key, as opts->write selects (the other part is left
 * zero: action SE_EP_SKIP). */
struct se_service_plan {
        struct se_endpoints_plan endpoints;
        struct se_slices_plan slices;
};
int se_service_plan(const struct se_endpoints_input *in, const struct se_endpoints *existing_ep,
                    const struct se_endpoint_slice *const *existing_slices, size_t n_slices,
                    const struct se_endpoints_opts *opts, struct se_service_plan *ret);
void se_service_plan_release(struct se_service_plan *p);

#endif
