/* Object lifecycle, kind tables and small shared helpers (see model.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <svcenv/model.h>

struct kind_info {
        const char *name;
        const char *api_version;
        const char *resource;
        const char *short_name;
        bool namespaced;
        size_t size;
};

static const struct kind_info kinds[SE_KIND_COUNT] = {
        [SE_KIND_SERVICE] = { "Service", "v1", "services", "svc", true, sizeof(struct se_service) },
        [SE_KIND_POD] = { "Pod", "v1", "pods", "po", true, sizeof(struct se_pod) },
        [SE_KIND_NODE] = { "Node", "v1", "nodes", "no", false, sizeof(struct se_node) },
        [SE_KIND_NAMESPACE] = { "Namespace", "v1", "namespaces", "ns", false,
                                sizeof(struct se_namespace) },
        [SE_KIND_ENDPOINTS] = { "Endpoints", "v1", "endpoints", "ep", true,
                                sizeof(struct se_endpoints) },
        [SE_KIND_ENDPOINT_SLICE] = { "EndpointSlice", "discovery.k8s.io/v1", "endpointslices",
                                     "eps", true, sizeof(struct se_endpoint_slice) },
        [SE_KIND_CONFIGMAP] = { "ConfigMap", "v1", "configmaps", "cm", true,
                                sizeof(struct se_configmap) },
        [SE_KIND_SECRET] = { "Secret", "v1", "secrets", "secret", true, sizeof(struct se_secret) },
        [SE_KIND_SERVICE_CIDR] = { "ServiceCIDR", "networking.k8s.io/v1", "servicecidrs",
                                   "servicecidr", false, sizeof(struct se_service_cidr) },
};

struct se_object *se_object_new_sized(enum se_kind kind, size_t size)
{
        if ((unsigned)kind >= SE_KIND_COUNT)
                return NULL;
        struct se_arena arena = SE_ARENA_INIT;
        if (se_arena_reserve(&arena, size) < 0)
                return NULL;
        struct se_object *obj = se_arena_alloc(&arena, kinds[kind].size);
        if (!obj) {
                se_arena_release(&arena);
                return NULL;
        }
        obj->kind = kind;
        obj->refs = 1;
        obj->arena = arena;
        return obj;
}

struct se_object *se_object_ref(struct se_object *obj)
{
        if (obj)
                __atomic_add_fetch(&obj->refs, 1, __ATOMIC_RELAXED);
        return obj;
}

struct se_object *se_object_unref(struct se_object *obj)
{
        if (obj && __atomic_sub_fetch(&obj->refs, 1, __ATOMIC_ACQ_REL) == 0)
                se_arena_release(&obj->arena);
        return NULL;
}

struct se_object *se_object_new(enum se_kind kind)
{
        return se_object_new_sized(kind, 0);
}

size_t se_object_memory(const struct se_object *obj)
{
        return obj ? obj->arena.total : 0;
}

struct se_meta_more *se_meta_more(struct se_meta *m, struct se_arena *a)
{
        if (!m->more)
                m->more = se_arena_alloc(a, sizeof(*m->more));
        return m->more;
}

const char *se_kind_name(enum se_kind kind)
{
        return (unsigned)kind < SE_KIND_COUNT ? kinds[kind].name : "Unknown";
}

const char *se_kind_api_version(enum se_kind kind)
{
        return (unsigned)kind < SE_KIND_COUNT ? kinds[kind].api_version : "";
}

const char *se_kind_resource(enum se_kind kind)
{
        return (unsigned)kind < SE_KIND_COUNT ? kinds[kind].resource : "";
}

bool se_kind_namespaced(enum se_kind kind)
{
        return (unsigned)kind < SE_KIND_COUNT && kinds[kind].namespaced;
}

int se_kind_from_name(const char *name)
{
        for (int k = 0; k < SE_KIND_COUNT; k++) {
                size_t rl = strlen(kinds[k].resource);
                if (strcasecmp(name, kinds[k].name) == 0 || strcmp(name, kinds[k].resource) == 0 ||
                    strcmp(name, kinds[k].short_name) == 0 ||
                    /* singular of the resource: "service", "endpointslice" */
                    (strlen(name) + 1 == rl && strncmp(name, kinds[k].resource, rl - 1) == 0))
                        return k;
        }
        return -1;
}

const char *se_protocol_name(enum se_protocol p)
{
        switch (p) {
        case SE_PROTO_UDP:
                return "UDP";
        case SE_PROTO_SCTP:
                return "SCTP";
        default:
                return "TCP";
        }
}

const char *se_kvlist_get(const struct se_kvlist *l, const char *key)
{
        uint32_t lo = 0, hi = l->n;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                int c = strcmp(l->items[mid].key, key);
                if (c == 0)
                        return l->items[mid].value;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

struct se_pod_more *se_pod_more(struct se_pod *pod)
{
        struct se_object *o = &pod->obj;
        if (!pod->more)
                pod->more = se_arena_alloc(&o->arena, sizeof(*pod->more));
        return pod->more;
}

void se_slice_endpoint_get_more(const struct se_slice_endpoint *e,
                                struct se_slice_endpoint_fields *f)
{
        *f = (struct se_slice_endpoint_fields){
                .node_name = se_slice_endpoint_node(e),
                .zone = se_slice_endpoint_zone(e),
                .target_ref = se_slice_endpoint_target_ref(e),
                .hint_zones = *se_slice_endpoint_hint_zones(e),
                .hint_nodes = *se_slice_endpoint_hint_nodes(e),
        };
}

static bool str_eq(const char *a, const char *b)
{
        return a == b || (a && b && strcmp(a, b) == 0);
}

static bool strs_eq(const struct se_strs *a, const struct se_strs *b)
{
        if (a->n != b->n)
                return false;
        for (uint32_t i = 0; i < a->n; i++)
                if (!str_eq(a->v[i], b->v[i]))
                        return false;
        return true;
}

/* Whether the `more` of an endpoint with bits `has` (no targetRef) holds
 * exactly *f. */
static bool more_holds(const struct se_slice_endpoint_more *m, uint8_t has,
                       const struct se_slice_endpoint_fields *f)
{
        struct se_slice_endpoint probe = { .more = m, .more_has = has };
        return str_eq(m->node_name, f->node_name) && str_eq(m->zone, f->zone) &&
               strs_eq(se_slice_endpoint_hint_zones(&probe), &f->hint_zones) &&
               strs_eq(se_slice_endpoint_hint_nodes(&probe), &f->hint_nodes);
}

int se_slice_endpoint_set_more(struct se_slice_endpoint *e, struct se_arena *a,
                               const struct se_slice_endpoint_fields *f,
                               struct se_slice_more_cache *cache)
{
        uint8_t has = (f->hint_zones.n || f->hint_nodes.n ? SE_SLICE_EP_HINTS : 0) |
                      (f->target_ref ? SE_SLICE_EP_TARGET_REF : 0);
        if (!has && !f->node_name && !f->zone) {
                e->more = NULL;
                e->more_has = 0;
                return 0;
        }
        if (has & SE_SLICE_EP_TARGET_REF)
                cache = NULL; /* one pod's: no other endpoint has it */
        for (uint32_t i = 0; cache && i < SE_SLICE_MORE_CACHE; i++)
                if (cache->more[i] && cache->has[i] == has && more_holds(cache->more[i], has, f)) {
                        e->more = cache->more[i];
                        e->more_has = has;
                        return 0;
                }
        size_t size = sizeof(struct se_slice_endpoint_more) +
                      (has & SE_SLICE_EP_HINTS ? sizeof(struct se_slice_endpoint_hints) : 0) +
                      (has & SE_SLICE_EP_TARGET_REF ? sizeof(struct se_object_ref) : 0);
        struct se_slice_endpoint_more *m = se_arena_alloc(a, size);
        if (!m)
                return -ENOMEM;
        *m = (struct se_slice_endpoint_more){ f->node_name, f->zone };
        char *tail = (char *)(m + 1);
        if (has & SE_SLICE_EP_HINTS) {
                struct se_slice_endpoint_hints h = { f->hint_zones, f->hint_nodes };
                memcpy(tail, &h, sizeof(h));
                tail += sizeof(h);
        }
        if (has & SE_SLICE_EP_TARGET_REF)
                memcpy(tail, f->target_ref, sizeof(*f->target_ref));
        e->more = m;
        e->more_has = has;
        if (cache) {
                cache->more[cache->next] = m;
                cache->has[cache->next] = has;
                cache->next = (cache->next + 1) % SE_SLICE_MORE_CACHE;
        }
        return 0;
}

int se_slice_endpoint_set_hints(struct se_slice_endpoint *e, struct se_arena *a,
                                struct se_strs zones, struct se_strs nodes)
{
        struct se_slice_endpoint_fields f;
        se_slice_endpoint_get_more(e, &f);
        f.hint_zones = zones;
        f.hint_nodes = nodes;
        return se_slice_endpoint_set_more(e, a, &f, NULL);
}

int se_slice_endpoint_set_node(struct se_slice_endpoint *e, struct se_arena *a, const char *node)
{
        struct se_slice_endpoint_fields f;
        se_slice_endpoint_get_more(e, &f);
        f.node_name = node;
        return se_slice_endpoint_set_more(e, a, &f, NULL);
}

int se_slice_endpoint_set_zone(struct se_slice_endpoint *e, struct se_arena *a, const char *zone)
{
        struct se_slice_endpoint_fields f;
        se_slice_endpoint_get_more(e, &f);
        f.zone = zone;
        return se_slice_endpoint_set_more(e, a, &f, NULL);
}

int se_slice_endpoint_set_target_ref(struct se_slice_endpoint *e, struct se_arena *a,
                                     const struct se_object_ref *ref)
{
        struct se_slice_endpoint_fields f;
        se_slice_endpoint_get_more(e, &f);
        f.target_ref = ref;
        return se_slice_endpoint_set_more(e, a, &f, NULL);
}

bool se_pod_is_ready(const struct se_pod *pod)
{
        for (uint32_t i = 0; i < pod->n_conditions; i++)
                if (strcmp(pod->conditions[i].type, "Ready") == 0)
                        return pod->conditions[i].status &&
                               strcmp(pod->conditions[i].status, "True") == 0;
        return false;
}

bool se_pod_is_terminal(const struct se_pod *pod)
{
        return pod->phase &&
               (strcmp(pod->phase, "Succeeded") == 0 || strcmp(pod->phase, "Failed") == 0);
}
