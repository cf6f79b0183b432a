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

int se_slice_endpoint_set_hints(struct se_slice_endpoint *e, struct se_arena *a,
                                struct se_strs zones, struct se_strs nodes)
{
        e->hints = NULL;
        if (!zones.n && !nodes.n)
                return 0;
        struct se_slice_endpoint_hints *h = se_arena_alloc(a, sizeof(*h));
        if (!h)
                return -ENOMEM;
        *h = (struct se_slice_endpoint_hints){ zones, nodes };
        e->hints = h;
        return 0;
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
