/* Service and pod predicates shared by both controllers, and small metadata
 * helpers for building objects in an arena. */
#include <errno.h>
#include <string.h>

#include <svcenv/parse.h>
#include <svcenv/store.h>
#include <svcenv/timeutil.h>

#include "endpoints_internal.h"

int endpoints_nstrcmp(const char *a, const char *b)
{
        if (!a || !b)
                return (a != NULL) - (b != NULL);
        return strcmp(a, b);
}

bool endpoints_nstreq(const char *a, const char *b)
{
        return endpoints_nstrcmp(a, b) == 0;
}

bool endpoints_estreq(const char *a, const char *b)
{
        return strcmp(a ? a : "", b ? b : "") == 0;
}

const char *se_ep_action_name(enum se_ep_action a)
{
        static const char *const names[] = { "skip", "unchanged", "create", "update", "delete" };
        return (unsigned)a < SE_ARRAY_SIZE(names) ? names[a] : "?";
}

bool se_endpoints_service_managed(const struct se_service *svc)
{
        /* an empty selector cannot be told from an absent one over the wire */
        return svc && svc->type != SE_SVC_EXTERNAL_NAME && svc->selector.n > 0;
}

bool se_endpoints_pod_included(const struct se_pod *pod, bool include_terminating)
{
        if (se_pod_is_terminal(pod))
                return false;
        if ((!pod->pod_ip || !*pod->pod_ip) && pod->pod_ips.n == 0)
                return false;
        return include_terminating || !pod->obj.meta.deletion_timestamp;
}

static int find_named(const struct se_container *c, uint32_t n, bool sidecars_only,
                      const char *name, enum se_protocol proto)
{
        for (uint32_t i = 0; i < n; i++) {
                if (sidecars_only && !endpoints_nstreq(c[i].restart_policy, "Always"))
                        continue;
                for (uint32_t k = 0; k < c[i].n_ports; k++)
                        if (endpoints_nstreq(c[i].ports[k].name, name) &&
                            c[i].ports[k].protocol == proto)
                                return c[i].ports[k].container_port;
        }
        return -ENOENT;
}

int se_endpoints_find_port(const struct se_pod *pod, const struct se_service_port *sp)
{
        if (!sp->target_port.is_string)
                return sp->target_port.num ? sp->target_port.num : sp->port;
        const char *name = sp->target_port.str;
        int r = find_named(pod->containers, pod->n_containers, false, name, sp->protocol);
        if (r < 0)
                r = find_named(pod->init_containers, pod->n_init_containers, true, name,
                               sp->protocol);
        return r;
}

int se_endpoints_service_family(const struct se_service *svc)
{
        if (svc->ip_families.n)
                return strcmp(svc->ip_families.v[0], "IPv6") == 0 ? 6 : 4;
        if (endpoints_service_ip_set(svc) && se_ip_family_of(svc->cluster_ip) == SE_IPV6)
                return 6;
        return 4;
}

void se_endpoints_format_time(int64_t t_ns, char *buf, size_t size)
{
        se_time_format_rfc3339(t_ns, 9, buf, size);
}

bool endpoints_pod_selected(const struct se_service *svc, const struct se_pod *pod)
{
        return endpoints_nstreq(pod->obj.meta.namespace, svc->obj.meta.namespace) &&
               se_selector_matches(&svc->selector, &pod->obj.meta.labels);
}

bool endpoints_service_ip_set(const struct se_service *svc)
{
        return svc->cluster_ip && *svc->cluster_ip && strcmp(svc->cluster_ip, "None") != 0;
}

uint32_t endpoints_pod_ips_of_family(const struct se_pod *pod, int family, char out[][IP_TEXT_MAX],
                                     uint32_t max)
{
        /* status.podIPs only, as upstream (the API server and our decoder
         * mirror podIP into it) */
        uint32_t n = 0;
        for (uint32_t i = 0; i < pod->pod_ips.n && n < max; i++) {
                struct se_ip ip;
                if (se_parse_ip(pod->pod_ips.v[i], &ip) < 0 || (int)ip.family != family)
                        continue;
                se_ip_format(&ip, out[n++], IP_TEXT_MAX);
        }
        return n;
}

const char *endpoints_pod_hostname_for(const struct se_pod *pod, const struct se_service *svc)
{
        if (pod->hostname && *pod->hostname &&
            endpoints_nstreq(pod->subdomain, svc->obj.meta.name) &&
            endpoints_nstreq(pod->obj.meta.namespace, svc->obj.meta.namespace))
                return pod->hostname;
        return NULL;
}

/* ---- sorted kvlists ---- */

static uint32_t kv_lower_bound(const struct se_kvlist *l, const char *key)
{
        uint32_t lo = 0, hi = l->n;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (strcmp(l->items[mid].key, key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

int endpoints_kv_set(struct se_arena *a, struct se_kvlist *l, const char *key, const char *value)
{
        uint32_t i = kv_lower_bound(l, key);
        const char *v = se_arena_strdup(a, value);
        if (!v)
                return -ENOMEM;
        if (i < l->n && strcmp(l->items[i].key, key) == 0) {
                l->items[i].value = v;
                return 0;
        }
        /* arena memory is never freed one by one: grow by copying */
        struct se_kv *items = se_arena_array(a, (size_t)l->n + 1, sizeof(*items));
        const char *k = se_arena_strdup(a, key);
        if (!items || !k)
                return -ENOMEM;
        if (l->n)
                memcpy(items, l->items, (size_t)i * sizeof(*items));
        items[i] = (struct se_kv){ k, v };
        if (l->n > i)
                memcpy(items + i + 1, l->items + i, (size_t)(l->n - i) * sizeof(*items));
        l->items = items;
        l->n++;
        return 0;
}

void endpoints_kv_del(struct se_kvlist *l, const char *key)
{
        uint32_t i = kv_lower_bound(l, key);
        if (i >= l->n || strcmp(l->items[i].key, key) != 0)
                return;
        memmove(l->items + i, l->items + i + 1, (size_t)(l->n - i - 1) * sizeof(*l->items));
        l->n--;
        if (!l->n)
                l->items = NULL;
}

int endpoints_kv_copy(struct se_arena *a, struct se_kvlist *dst, const struct se_kvlist *src)
{
        *dst = (struct se_kvlist){ NULL, 0 };
        if (!src->n)
                return 0;
        struct se_kv *items = se_arena_array(a, src->n, sizeof(*items));
        if (!items)
                return -ENOMEM;
        for (uint32_t i = 0; i < src->n; i++) {
                items[i].key = se_arena_strdup(a, src->items[i].key);
                items[i].value = se_arena_strdup(a, src->items[i].value);
                if (!items[i].key || (src->items[i].value && !items[i].value))
                        return -ENOMEM;
        }
        dst->items = items;
        dst->n = src->n;
        return 0;
}

bool endpoints_kv_equal(const struct se_kvlist *x, const struct se_kvlist *y)
{
        if (x->n != y->n)
                return false;
        for (uint32_t i = 0; i < x->n; i++)
                if (strcmp(x->items[i].key, y->items[i].key) != 0 ||
                    !endpoints_estreq(x->items[i].value, y->items[i].value))
                        return false;
        return true;
}

int endpoints_meta_copy(struct se_arena *a, struct se_meta *dst, const struct se_meta *src)
{
#define DUP(f)                         \
 do {                                  \
  dst->f = se_arena_strdup(a, src->f); \
  if (src->f && !dst->f)               \
   return -ENOMEM;                     \
 } while (0)
        *dst = (struct se_meta){ 0 };
        DUP(name);
        DUP(namespace);
        DUP(uid);
        DUP(resource_version);
        DUP(deletion_timestamp);
        int r;
        if ((r = endpoints_kv_copy(a, &dst->labels, &src->labels)) < 0 ||
            (r = endpoints_kv_copy(a, &dst->annotations, &src->annotations)) < 0)
                return r;
        const struct se_meta_more *sm = src->more;
        if (!sm ||
            !(sm->generate_name || sm->creation_timestamp || sm->generation || sm->n_owner_refs))
                return 0; /* not the source file and line: they are not metadata */
        struct se_meta_more *dm = se_meta_more(dst, a);
        if (!dm)
                return -ENOMEM;
        dm->generate_name = se_arena_strdup(a, sm->generate_name);
        dm->creation_timestamp = se_arena_strdup(a, sm->creation_timestamp);
        if ((sm->generate_name && !dm->generate_name) ||
            (sm->creation_timestamp && !dm->creation_timestamp))
                return -ENOMEM;
        dm->generation = sm->generation;
        if (sm->n_owner_refs) {
                dm->owner_refs = se_arena_array(a, sm->n_owner_refs, sizeof(*dm->owner_refs));
                if (!dm->owner_refs)
                        return -ENOMEM;
                dm->n_owner_refs = sm->n_owner_refs;
                for (uint32_t i = 0; i < sm->n_owner_refs; i++) {
                        const struct se_owner_ref *s = &sm->owner_refs[i];
                        struct se_owner_ref *d = &dm->owner_refs[i];
                        *d = *s;
                        d->api_version = se_arena_strdup(a, s->api_version);
                        d->kind = se_arena_strdup(a, s->kind);
                        d->name = se_arena_strdup(a, s->name);
                        d->uid = se_arena_strdup(a, s->uid);
                        if ((s->api_version && !d->api_version) || (s->kind && !d->kind) ||
                            (s->name && !d->name) || (s->uid && !d->uid))
                                return -ENOMEM;
                }
        }
        return 0;
#undef DUP
}

struct se_object_ref *endpoints_objref_copy(struct se_arena *a, const struct se_object_ref *r,
                                            bool *ok)
{
        if (!r)
                return NULL;
        struct se_object_ref *c = se_arena_alloc(a, sizeof(*c));
        if (!c) {
                *ok = false;
                return NULL;
        }
        c->kind = se_arena_strdup(a, r->kind);
        c->namespace = se_arena_strdup(a, r->namespace);
        c->name = se_arena_strdup(a, r->name);
        c->uid = se_arena_strdup(a, r->uid);
        c->resource_version = se_arena_strdup(a, r->resource_version);
        if ((r->kind && !c->kind) || (r->namespace && !c->namespace) || (r->name && !c->name) ||
            (r->uid && !c->uid) || (r->resource_version && !c->resource_version))
                *ok = false;
        return c;
}

bool endpoints_objref_equal(const struct se_object_ref *x, const struct se_object_ref *y)
{
        if (!x || !y)
                return x == y;
        return endpoints_estreq(x->kind, y->kind) && endpoints_estreq(x->namespace, y->namespace) &&
               endpoints_estreq(x->name, y->name) && endpoints_estreq(x->uid, y->uid);
}

enum se_opt_bool endpoints_slice_ep_ready(const struct se_endpoint_slice *s, uint32_t k)
{
        return s->slim ? s->digests[k].ready : s->endpoints[k].ready;
}

void endpoints_slice_ep_hints(const struct se_endpoint_slice *s, uint32_t k, struct se_strs *zones,
                              struct se_strs *nodes)
{
        if (!s->slim) {
                *zones = *se_slice_endpoint_hint_zones(&s->endpoints[k]);
                *nodes = *se_slice_endpoint_hint_nodes(&s->endpoints[k]);
                return;
        }
        uint32_t h = s->digests[k].hints;
        *zones = h ? s->hints[h - 1].zones : (struct se_strs){ NULL, 0 };
        *nodes = h ? s->hints[h - 1].nodes : (struct se_strs){ NULL, 0 };
}

void endpoints_slice_ep_digest(const struct se_endpoint_slice *s, uint32_t k,
                               struct se_slice_endpoint_digest *ret)
{
        if (s->slim)
                *ret = s->digests[k];
        else
                se_slice_endpoint_digest(&s->endpoints[k], ret);
}

const char *endpoints_opt_endpoints_managed_by(const struct se_endpoints_opts *o)
{
        return o && o->endpoints_managed_by ? o->endpoints_managed_by :
                                              SE_ENDPOINTS_DEFAULT_MANAGED_BY;
}

const char *endpoints_opt_slices_managed_by(const struct se_endpoints_opts *o)
{
        return o && o->slices_managed_by ? o->slices_managed_by : SE_SLICES_DEFAULT_MANAGED_BY;
}

uint32_t endpoints_opt_max_per_slice(const struct se_endpoints_opts *o)
{
        uint32_t m = o ? o->max_endpoints_per_slice : 0;
        if (!m)
                return SE_SLICES_DEFAULT_MAX_ENDPOINTS;
        return m > SE_SLICES_MAX_ENDPOINTS ? SE_SLICES_MAX_ENDPOINTS : m;
}
