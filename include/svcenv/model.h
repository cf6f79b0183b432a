/* model.h — the typed, slim objects every svcenv computation reads.
 *
 * Each object lives in one arena (its struct, arrays and strings): it is made
 * by se_object_new(), filled by a decoder or a builder, and freed in one call
 * by se_object_unref() when the last reference goes. Objects in a store are
 * immutable: an update replaces the whole object.
 *
 * Conventions of these structs:
 *  - strings are NULL when the field was absent, "" when it was empty;
 *  - arrays are a pointer and a count (`n_`), NULL/0 when absent;
 *  - an int32 that is 0 means "not set" where Kubernetes has no valid 0
 *    (ports, nodePort, healthCheckNodePort);
 *  - label and annotation lists are sorted by key (unique keys);
 *  - fields few cached objects set sit behind a `more` pointer (se_meta.more,
 *    se_pod.more) to a struct in the same arena, NULL when all of its fields
 *    are unset: read them through the NULL-safe accessors, set them after
 *    se_meta_more() / se_pod_more(). */
#ifndef SVCENV_MODEL_H
#define SVCENV_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/arena.h>
#include <svcenv/macro.h>

enum se_kind {
        SE_KIND_SERVICE,
        SE_KIND_POD,
        SE_KIND_NODE,
        SE_KIND_NAMESPACE,
        SE_KIND_ENDPOINTS,
        SE_KIND_ENDPOINT_SLICE,
        SE_KIND_CONFIGMAP,
        SE_KIND_SECRET,
        SE_KIND_SERVICE_CIDR, /* networking.k8s.io/v1 ServiceCIDR (cluster-scoped) */
        SE_KIND_COUNT
};

/* Tri-state boolean for optional API booleans; one byte (packed), so that
 * the three conditions of an EndpointSlice endpoint take 3 bytes, not 12. */
enum __attribute__((packed)) se_opt_bool { SE_UNSET = 0, SE_FALSE, SE_TRUE };

enum se_protocol { SE_PROTO_TCP = 0, SE_PROTO_UDP, SE_PROTO_SCTP };

struct se_kv {
        const char *key;
        const char *value;
};

struct se_kvlist {
        struct se_kv *items;
        uint32_t n;
};

struct se_strs {
        const char **v;
        uint32_t n;
};

struct se_owner_ref {
        const char *api_version;
        const char *kind;
        const char *name;
        const char *uid;
        enum se_opt_bool controller;
        enum se_opt_bool block_owner_deletion;
};

/* The metadata few objects of a cache have (a slim Pod none of it): it lives
 * behind se_meta.more, in the object's arena, and `more` is NULL when every
 * field is unset (NULL, 0). Read it with the se_meta_*() accessors below,
 * which are NULL-safe; write it through se_meta_more(). */
struct se_meta_more {
        const char *generate_name;
        const char *creation_timestamp;
        int64_t generation;
        struct se_owner_ref *owner_refs;
        uint32_t n_owner_refs;
        uint32_t source_line; /* line of `source` */
        const char *source; /* "file" the object came from, NULL when from the API */
};

struct se_meta {
        const char *name;
        const char *namespace; /* "" for cluster-scoped kinds */
        const char *uid;
        const char *resource_version;
        const char *deletion_timestamp; /* NULL unless terminating */
        struct se_kvlist labels;
        struct se_kvlist annotations;
        struct se_meta_more *more; /* NULL: none of its fields set */
};

/* Common head of every object. */
struct se_object {
        enum se_kind kind;
        int refs; /* atomic; see se_object_ref */
        struct se_arena arena;
        struct se_meta meta;
};

/* m->more, allocated (zeroed) in arena a when m has none yet: the way to set
 * one of its fields. NULL on -ENOMEM. a must own m. */
struct se_meta_more *se_meta_more(struct se_meta *m, struct se_arena *a);

static inline const char *se_meta_generate_name(const struct se_meta *m)
{
        return m->more ? m->more->generate_name : NULL;
}
static inline const char *se_meta_creation_timestamp(const struct se_meta *m)
{
        return m->more ? m->more->creation_timestamp : NULL;
}
static inline int64_t se_meta_generation(const struct se_meta *m)
{
        return m->more ? m->more->generation : 0;
}
static inline uint32_t se_meta_n_owner_refs(const struct se_meta *m)
{
        return m->more ? m->more->n_owner_refs : 0;
}
/* The i-th owner reference; i < se_meta_n_owner_refs(m). */
static inline const struct se_owner_ref *se_meta_owner_ref(const struct se_meta *m, uint32_t i)
{
        return &m->more->owner_refs[i];
}
/* File and line an object was loaded from (manifest.h); NULL/0 from the API. */
static inline const char *se_object_source(const struct se_object *o)
{
        return o->meta.more ? o->meta.more->source : NULL;
}
static inline uint32_t se_object_source_line(const struct se_object *o)
{
        return o->meta.more ? o->meta.more->source_line : 0;
}

struct se_int_or_string {
        bool is_string; /* false: num holds the value (0 = not set) */
        int32_t num;
        const char *str;
};

/* ---- Service ---- */

enum se_service_type {
        SE_SVC_CLUSTER_IP = 0,
        SE_SVC_NODE_PORT,
        SE_SVC_LOAD_BALANCER,
        SE_SVC_EXTERNAL_NAME
};
enum se_traffic_policy { SE_POLICY_CLUSTER = 0, SE_POLICY_LOCAL };
enum se_ip_mode { SE_IPMODE_UNSET = 0, SE_IPMODE_VIP, SE_IPMODE_PROXY };

struct se_service_port {
        const char *name;
        enum se_protocol protocol;
        int32_t port;
        struct se_int_or_string target_port; /* unset = same as port */
        int32_t node_port;
        const char *app_protocol;
};

struct se_lb_ingress {
        const char *ip;
        const char *hostname;
        enum se_ip_mode ip_mode;
};

struct se_service {
        struct se_object obj;
        enum se_service_type type;
        const char *cluster_ip; /* spec.clusterIP: "", "None" or an IP; NULL if absent */
        struct se_strs cluster_ips;
        struct se_strs ip_families; /* "IPv4" / "IPv6" */
        const char *ip_family_policy;
        struct se_service_port *ports;
        uint32_t n_ports;
        struct se_kvlist selector; /* empty: no selector */
        bool client_ip_affinity; /* sessionAffinity: ClientIP */
        int32_t affinity_timeout; /* seconds; 10800 by default with ClientIP */
        struct se_strs external_ips;
        const char *load_balancer_ip;
        struct se_strs lb_source_ranges;
        const char *load_balancer_class;
        struct se_lb_ingress *lb_ingress;
        uint32_t n_lb_ingress;
        enum se_traffic_policy external_policy;
        enum se_traffic_policy internal_policy;
        int32_t health_check_node_port;
        bool publish_not_ready_addresses;
        enum se_opt_bool allocate_lb_node_ports;
        const char *external_name;
        const char *traffic_distribution;
};

/* ---- Pod ---- */

enum se_env_source {
        SE_ENV_VALUE = 0, /* value (possibly empty or absent) */
        SE_ENV_FIELD_REF, /* ref = fieldPath */
        SE_ENV_RESOURCE_REF, /* ref = resource, container, divisor */
        SE_ENV_CONFIGMAP_KEY, /* ref = name, key */
        SE_ENV_SECRET_KEY, /* ref = name, key */
};

struct se_env_var {
        const char *name;
        const char *value;
        enum se_env_source source;
        const char *ref; /* fieldPath, resource or object name */
        const char *key; /* key in the ConfigMap/Secret */
        const char *container; /* resourceFieldRef.containerName */
        const char *divisor; /* resourceFieldRef.divisor */
        enum se_opt_bool optional;
};

struct se_env_from {
        const char *prefix;
        bool secret; /* false: configMapRef */
        const char *name;
        enum se_opt_bool optional;
};

struct se_container_port {
        const char *name;
        int32_t container_port;
        enum se_protocol protocol;
        int32_t host_port;
        const char *host_ip;
};

struct se_container {
        const char *name;
        const char *image;
        const char *restart_policy; /* init containers: "Always" = sidecar */
        struct se_container_port *ports;
        uint32_t n_ports;
        struct se_env_var *env;
        uint32_t n_env;
        struct se_env_from *env_from;
        uint32_t n_env_from;
        struct se_kvlist limits;
        struct se_kvlist requests;
};

struct se_pod_condition {
        const char *type;
        const char *status;
        const char *last_transition_time; /* RFC 3339; feeds the trigger-time annotation */
};

/* The Pod fields only the env-var generator and the webhook read: behind
 * se_pod.more, in the pod's arena; `more` is NULL exactly when all of them
 * are unset (a slim Pod: always), which means no serviceAccountName, no
 * hostIP(s), hostNetwork false and enableServiceLinks unset (true). */
struct se_pod_more {
        const char *service_account_name;
        const char *host_ip;
        struct se_strs host_ips;
        bool host_network;
        enum se_opt_bool enable_service_links; /* unset means true */
};

struct se_pod {
        struct se_object obj;
        const char *node_name;
        const char *hostname;
        const char *subdomain;
        struct se_pod_more *more; /* NULL: none of its fields set */
        struct se_container *containers;
        struct se_container *init_containers;
        uint32_t n_containers; /* the counts side by side: no padding */
        uint32_t n_init_containers;
        const char *phase;
        const char *pod_ip;
        struct se_strs pod_ips;
        struct se_pod_condition *conditions;
        uint32_t n_conditions;
};

/* ---- Node, Namespace, ConfigMap, Secret ---- */

struct se_node_address {
        const char *type; /* InternalIP, ExternalIP, Hostname, ... */
        const char *address;
};

#define SE_TAINT_TO_BE_DELETED "ToBeDeletedByClusterAutoscaler"

struct se_node {
        struct se_object obj;
        struct se_node_address *addresses;
        uint32_t n_addresses;
        struct se_strs pod_cidrs;
        bool unschedulable;
        bool to_be_deleted; /* tainted ToBeDeletedByClusterAutoscaler */
        enum se_opt_bool ready; /* the Ready condition */
        /* status.allocatable.cpu in nanocores, rounded up (0: absent or
         * zero), for the EndpointSlice topology cache; allocatable_cpu is
         * the quantity as written (NULL: absent) */
        int64_t allocatable_cpu_nanos;
        const char *allocatable_cpu;
};

struct se_namespace {
        struct se_object obj;
        const char *phase;
};

struct se_configmap {
        struct se_object obj;
        struct se_kvlist data;
};

struct se_secret {
        struct se_object obj;
        const char *type;
        struct se_kvlist data; /* base64-decoded `data` merged with `stringData` */
};

/* The ranges ClusterIPs are allocated from (kube-proxy's nftables mode
 * drops traffic to the unallocated ones). */
struct se_service_cidr {
        struct se_object obj;
        struct se_strs cidrs; /* spec.cidrs: one or two (one per family), checked */
};

/* ---- Endpoints ---- */

struct se_object_ref {
        const char *kind;
        const char *namespace;
        const char *name;
        const char *uid;
        const char *resource_version;
};

struct se_endpoint_address {
        const char *ip;
        const char *hostname;
        const char *node_name;
        struct se_object_ref *target_ref; /* NULL when absent */
};

struct se_endpoint_port {
        const char *name;
        int32_t port;
        enum se_protocol protocol;
        const char *app_protocol;
};

struct se_endpoint_subset {
        struct se_endpoint_address *addresses;
        uint32_t n_addresses;
        struct se_endpoint_address *not_ready;
        uint32_t n_not_ready;
        struct se_endpoint_port *ports;
        uint32_t n_ports;
};

/* Bytes of an Endpoints' subsets digest (the first of a SHA-256). */
#define SE_ENDPOINTS_DIGEST_LEN 16

/* A slim Endpoints (decode.h SE_DECODE_SLIM_ENDPOINTS, the controller's
 * cache) has its metadata but no subsets (NULL/0): n_addresses and digest
 * stand for them. It may only be compared (se_endpoints_equal, whose
 * verdict is the same as for the full object) and have its metadata read;
 * the encoder refuses it. A full object has slim false and the two fields
 * zero. */
struct se_endpoints {
        struct se_object obj;
        struct se_endpoint_subset *subsets;
        uint32_t n_subsets;
        bool slim;
        uint32_t n_addresses; /* slim: ready + not ready, capped at UINT32_MAX */
        uint8_t digest[SE_ENDPOINTS_DIGEST_LEN]; /* slim: se_endpoints_digest() */
};

/* The digest of ep's subsets (a slim ep: the stored one). Two Endpoints get
 * the same digest exactly when the controller counts their subsets equal:
 * subsets and each subset's ports in any order (sorted by first port, then
 * by port name, number, protocol, appProtocol), addresses in order;
 * an absent hostname, nodeName or targetRef field is the same as an empty
 * one, an absent ip or appProtocol is not; targetRef compares kind,
 * namespace, name and uid only (not resourceVersion). Subsets tied on their
 * first port are ordered by content. 0, -ENOMEM or -EIO (libcrypto). */
int se_endpoints_digest(const struct se_endpoints *ep, uint8_t out[SE_ENDPOINTS_DIGEST_LEN]);
/* Ready plus not-ready addresses of all subsets (a slim ep: stored). */
size_t se_endpoints_n_addresses(const struct se_endpoints *ep);
/* The order Endpoints ports are compared and digested in: name (absent as
 * ""), port, protocol, appProtocol (absent first). <0, 0 or >0. */
int se_endpoint_port_cmp(const struct se_endpoint_port *a, const struct se_endpoint_port *b);

/* ---- EndpointSlice (discovery.k8s.io/v1) ---- */

/* The topology hints of an endpoint: hints.forZones and forNodes names. */
struct se_slice_endpoint_hints {
        struct se_strs zones;
        struct se_strs nodes;
};

/* What few endpoints carry beyond addresses and conditions: read-only once
 * made, and shared by the endpoints of a slice whose fields are equal. */
struct se_slice_endpoint_more {
        const char *node_name;
        const char *zone;
        /* Followed by, as the endpoint's more_has bits say (so that a
         * proxy's nodeName/zone costs 16 bytes, not 64): its hints (struct
         * se_slice_endpoint_hints), then its targetRef (struct
         * se_object_ref). Read them with the accessors below. */
};

/* A `more` with a targetRef and no hints, for an endpoint built in place
 * (more_has SE_SLICE_EP_TARGET_REF, more &x.more). */
struct se_slice_endpoint_more_ref {
        struct se_slice_endpoint_more more;
        struct se_object_ref target_ref;
};
_Static_assert(offsetof(struct se_slice_endpoint_more_ref, target_ref) ==
                       sizeof(struct se_slice_endpoint_more),
               "a targetRef right after its more");

/* se_slice_endpoint.more_has bits: what follows *more. */
enum { SE_SLICE_EP_HINTS = 1, SE_SLICE_EP_TARGET_REF = 2 };

/* 40 bytes: a store of 150,000 endpoints keeps 150,000 of them, and cluster
 * DNS reads only addresses, hostname and conditions. Read nodeName, zone,
 * targetRef and hints with the accessors below; set them with
 * se_slice_endpoint_set_more / _set_hints, never by writing `more`. */
struct se_slice_endpoint {
        struct se_strs addresses;
        const char *hostname;
        const struct se_slice_endpoint_more *more; /* NULL: none of them */
        enum se_opt_bool ready;
        enum se_opt_bool serving;
        enum se_opt_bool terminating;
        uint8_t more_has; /* SE_SLICE_EP_* */
};
#if defined(__LP64__)
_Static_assert(sizeof(struct se_slice_endpoint) == 40, "a slice endpoint is 40 bytes");
#endif

static inline const char *se_slice_endpoint_node(const struct se_slice_endpoint *e)
{
        return e->more ? e->more->node_name : NULL;
}
static inline const char *se_slice_endpoint_zone(const struct se_slice_endpoint *e)
{
        return e->more ? e->more->zone : NULL;
}
/* e's hints (NULL when it has none). */
static inline const struct se_slice_endpoint_hints *
se_slice_endpoint_hints(const struct se_slice_endpoint *e)
{
        if (!(e->more_has & SE_SLICE_EP_HINTS))
                return NULL;
        return (const struct se_slice_endpoint_hints *)(const void *)(e->more + 1);
}
/* e's targetRef (NULL when absent). */
static inline const struct se_object_ref *
se_slice_endpoint_target_ref(const struct se_slice_endpoint *e)
{
        if (!(e->more_has & SE_SLICE_EP_TARGET_REF))
                return NULL;
        const char *p = (const char *)(e->more + 1);
        if (e->more_has & SE_SLICE_EP_HINTS)
                p += sizeof(struct se_slice_endpoint_hints);
        return (const struct se_object_ref *)(const void *)p;
}
/* e's hints.forZones / forNodes names (an empty list when it has none). */
static inline const struct se_strs *se_slice_endpoint_hint_zones(const struct se_slice_endpoint *e)
{
        static const struct se_strs none;
        const struct se_slice_endpoint_hints *h = se_slice_endpoint_hints(e);
        return h ? &h->zones : &none;
}
static inline const struct se_strs *se_slice_endpoint_hint_nodes(const struct se_slice_endpoint *e)
{
        static const struct se_strs none;
        const struct se_slice_endpoint_hints *h = se_slice_endpoint_hints(e);
        return h ? &h->nodes : &none;
}

/* The fields behind an endpoint's `more`, as one value to read or set.
 * Absent strings and targetRef are NULL, absent hints empty lists. */
struct se_slice_endpoint_fields {
        const char *node_name;
        const char *zone;
        const struct se_object_ref *target_ref;
        struct se_strs hint_zones;
        struct se_strs hint_nodes;
};

/* The last `more`s without targetRef set with a cache, to share among one
 * slice's endpoints (a targetRef names one pod: it is never shared); start
 * it zeroed, one per slice (its entries point into that slice). */
#define SE_SLICE_MORE_CACHE 16
struct se_slice_more_cache {
        const struct se_slice_endpoint_more *more[SE_SLICE_MORE_CACHE];
        uint8_t has[SE_SLICE_MORE_CACHE];
        uint32_t next;
};

/* e's fields into *f (pointers into e's `more`). */
void se_slice_endpoint_get_more(const struct se_slice_endpoint *e,
                                struct se_slice_endpoint_fields *f);
/* Makes *f e's fields: e->more is NULL when all are absent, else a new
 * `more` allocated in a (the arena of e's slice), or, with a cache and no
 * targetRef, one of the cache's whose fields are all equal (strings
 * compared by content).
 * The old `more` is left as it was (other endpoints may share it). The
 * targetRef struct is copied; strings and hint arrays are not: they must
 * live as long as e, in a or elsewhere. 0 or -ENOMEM. */
int se_slice_endpoint_set_more(struct se_slice_endpoint *e, struct se_arena *a,
                               const struct se_slice_endpoint_fields *f,
                               struct se_slice_more_cache *cache);
/* Replaces e's hints by zones and nodes (not copied), keeping its other
 * fields, as se_slice_endpoint_set_more does. 0 or -ENOMEM. */
int se_slice_endpoint_set_hints(struct se_slice_endpoint *e, struct se_arena *a,
                                struct se_strs zones, struct se_strs nodes);
/* The same for one field: nodeName, zone (strings not copied), targetRef
 * (NULL: absent; the struct is copied, its strings not). */
int se_slice_endpoint_set_node(struct se_slice_endpoint *e, struct se_arena *a, const char *node);
int se_slice_endpoint_set_zone(struct se_slice_endpoint *e, struct se_arena *a, const char *zone);
int se_slice_endpoint_set_target_ref(struct se_slice_endpoint *e, struct se_arena *a,
                                     const struct se_object_ref *ref);

struct se_slice_port {
        const char *name; /* NULL: unnamed (nil in the API) */
        bool has_port; /* false: nil port (all ports) */
        int32_t port;
        bool has_protocol;
        enum se_protocol protocol;
        const char *app_protocol;
};

/* What the EndpointSlice controller needs of an endpoint it compares (the
 * slim form, SE_DECODE_SLIM_SLICES): two 64-bit hashes of canonical
 * serialisations, the Ready condition and the hints. */
struct se_slice_endpoint_digest {
        /* upstream's endpoint hash: addresses as a sorted list, hostname
         * (absent = ""), targetRef namespace and name (absent = "") */
        uint64_t identity;
        /* upstream EndpointsEqualBeyondHash: nodeName and zone (absent and
         * "" differ), ready/serving/terminating (tri-state), targetRef
         * present or not, its kind, namespace, name and uid (absent = "") */
        uint64_t beyond;
        enum se_opt_bool ready;
        uint32_t hints; /* 0: none; else 1 + index in the slice's `hints` */
};

/* Both hashes of e; ret->ready is e's, ret->hints 0. */
void se_slice_endpoint_digest(const struct se_slice_endpoint *e,
                              struct se_slice_endpoint_digest *ret);

struct se_endpoint_slice {
        struct se_object obj;
        const char *address_type; /* IPv4, IPv6, FQDN */
        struct se_slice_endpoint *endpoints; /* NULL when slim */
        uint32_t n_endpoints; /* also when slim */
        struct se_slice_port *ports;
        uint32_t n_ports;
        bool has_ports; /* false: `ports` was null */
        /* Slim (SE_DECODE_SLIM_SLICES, for the controller's cache): the
         * metadata, addressType and ports are kept, the endpoints are
         * replaced by n_endpoints digests (in order) plus the hints of those
         * that have some. Only the EndpointSlice planner reads such a slice;
         * the encoder refuses it. */
        bool slim;
        const struct se_slice_endpoint_digest *digests;
        const struct se_slice_endpoint_hints *hints;
};

/* ---- lifecycle ---- */

/* New empty object of the kind, refcount 1, its struct allocated in its own
 * arena. NULL on -ENOMEM. */
struct se_object *se_object_new(enum se_kind kind);
/* The same with room for `size` bytes of arena (the struct included) in one
 * chunk: pass what an earlier build of the same object requested. */
struct se_object *se_object_new_sized(enum se_kind kind, size_t size);
/* Adds a reference (thread-safe); returns obj. */
struct se_object *se_object_ref(struct se_object *obj);
/* Drops a reference; frees the object at zero. NULL-safe; returns NULL. */
struct se_object *se_object_unref(struct se_object *obj);
/* Bytes of memory the object holds (its arena). */
size_t se_object_memory(const struct se_object *obj);

/* Kind names: "Service", ..., and their apiVersion ("v1", "discovery.k8s.io/v1"). */
const char *se_kind_name(enum se_kind kind);
const char *se_kind_api_version(enum se_kind kind);
/* Lower-case plural resource name ("services", "endpointslices"). */
const char *se_kind_resource(enum se_kind kind);
bool se_kind_namespaced(enum se_kind kind);
/* Kind from "Service", "service", "services", "svc", "endpointslices", ...;
 * -1 when unknown. */
int se_kind_from_name(const char *name);

const char *se_protocol_name(enum se_protocol p);

/* Value of key in a sorted kvlist, NULL when absent. */
const char *se_kvlist_get(const struct se_kvlist *l, const char *key);

/* Typed views; each returns NULL when obj is NULL or of another kind. */
#define SE_DEFINE_VIEW(type, kindval)                                  \
 static inline const struct type *type##_of(const struct se_object *o) \
 {                                                                     \
  return o && o->kind == (kindval) ? (const struct type *)o : NULL;    \
 }
SE_DEFINE_VIEW(se_service, SE_KIND_SERVICE)
SE_DEFINE_VIEW(se_pod, SE_KIND_POD)
SE_DEFINE_VIEW(se_node, SE_KIND_NODE)
SE_DEFINE_VIEW(se_namespace, SE_KIND_NAMESPACE)
SE_DEFINE_VIEW(se_endpoints, SE_KIND_ENDPOINTS)
SE_DEFINE_VIEW(se_endpoint_slice, SE_KIND_ENDPOINT_SLICE)
SE_DEFINE_VIEW(se_configmap, SE_KIND_CONFIGMAP)
SE_DEFINE_VIEW(se_secret, SE_KIND_SECRET)
SE_DEFINE_VIEW(se_service_cidr, SE_KIND_SERVICE_CIDR)
#undef SE_DEFINE_VIEW

/* Pod helpers shared by envvars and endpoints. */
/* pod->more, allocated (zeroed) in the pod's arena when it has none yet: the
 * way to set one of its fields. NULL on -ENOMEM. */
struct se_pod_more *se_pod_more(struct se_pod *pod);
/* spec.enableServiceLinks: unset (the default) means true. */
static inline bool se_pod_service_links(const struct se_pod *pod)
{
        return !pod->more || pod->more->enable_service_links != SE_FALSE;
}
/* True when the Ready condition is "True". */
bool se_pod_is_ready(const struct se_pod *pod);
/* True when status.phase is Succeeded or Failed. */
bool se_pod_is_terminal(const struct se_pod *pod);

#endif
