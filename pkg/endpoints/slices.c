/* The EndpointSlice controller's sync: upstream's reconciler
 * (reconcileByAddressType, reconcileByPortMapping, finalize) as a plan. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/hashmap.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>
#include <svcenv/topology.h>

#include "endpoints_internal.h"
#include "topology_internal.h"

#define ZONE_LABEL "topology.kubernetes.io/zone"
#define MAX_ADDRS  2 /* podIPs holds at most one IP per family */

struct dep {
        struct se_slice_endpoint ep;
        struct se_slice_endpoint_more_ref more; /* ep's */
        char ips[MAX_ADDRS][IP_TEXT_MAX];
        const char *ipv[MAX_ADDRS];
        struct se_slice_endpoint_digest dg;
        char key[17]; /* dg.identity in hex: the key in by_id */
        bool taken;
};

struct group {
        const int32_t *nums; /* resolved port per service port, 0: none */
        struct se_slice_port *ports;
        uint32_t n_ports;
        struct dep **deps; /* sorted: the order endpoints are placed in */
        uint32_t n_deps, cap_deps, next;
        struct se_hashmap by_id;
        uint32_t n_left;
};

enum wstate { W_UNCHANGED, W_UPDATE, W_DELETE, W_CREATE };

struct work {
        const struct se_endpoint_slice *src; /* NULL: a new slice */
        enum wstate state;
        bool new_labels; /* labels recomputed from the Service */
        bool fresh; /* built as a new slice (also when it takes a deleted slice's name) */
        const char *name; /* fresh slice reusing a deleted slice's name */
        const struct se_slice_port *ports; /* fresh slices */
        uint32_t n_ports;
        /* the endpoints to write: desired ones; the first n_kept stand
         * for src's endpoints 0..n_kept-1 (equal but for their hints,
         * which are src's: upstream writes a deep copy of src) */
        const struct se_slice_endpoint **eps;
        uint32_t n_eps, cap_eps, n_kept;
};

/* Which hints the slices carry: upstream's trafficdist heuristics, or the
 * topology cache's allocation (HINTS_AUTO: endpoints keep what they have
 * until endpoints_topo_add_hints() runs). */
enum hints { HINTS_NONE, HINTS_ZONE, HINTS_ZONE_NODE, HINTS_AUTO };

struct ctx {
        enum hints hints;
        const char *key; /* "ns/name" */
        const struct se_endpoints_input *in;
        const struct se_endpoints_opts *opts;
        const struct se_service *svc;
        uint32_t max;
        int32_t *res; /* n_pods x P */
        bool *included;
        bool *missing_counted;
        struct se_slices_plan *plan;
        /* per address type */
        struct group *groups;
        uint32_t n_groups, cap_groups;
        struct dep *deps;
        size_t n_deps;
        struct work *works;
        uint32_t n_works, cap_works;
        uint32_t name_seq;
        struct se_strv names; /* generated names */
};

/* ---- small helpers ---- */

static int cmp_slice_port(const struct se_slice_port *a, const struct se_slice_port *b)
{
        int c = endpoints_nstrcmp(a->name, b->name);
        if (c)
                return c;
        if (a->has_port != b->has_port)
                return a->has_port - b->has_port;
        if (a->port != b->port)
                return a->port < b->port ? -1 : 1;
        if (a->has_protocol != b->has_protocol)
                return a->has_protocol - b->has_protocol;
        if (a->protocol != b->protocol)
                return a->protocol < b->protocol ? -1 : 1;
        return endpoints_nstrcmp(a->app_protocol, b->app_protocol);
}

/* upstream's order of a slice's ports (order.c); equal digests only for
 * equal ports */
static int cmp_slice_port_order(const struct se_slice_port *a, const struct se_slice_port *b)
{
        uint8_t ka[EP_ORDER_KEY_LEN], kb[EP_ORDER_KEY_LEN];
        endpoints_slice_port_order_key(a, ka);
        endpoints_slice_port_order_key(b, kb);
        int c = memcmp(ka, kb, sizeof(ka));
        return c ? c : cmp_slice_port(a, b);
}

static int cmp_slice_port_q(const void *a, const void *b)
{
        return cmp_slice_port_order(a, b);
}

static int cmp_slice_port_ptr(const void *a, const void *b)
{
        return cmp_slice_port_order(*(const struct se_slice_port *const *)a,
                                    *(const struct se_slice_port *const *)b);
}

/* The slice's port list equals the group's (as sets, as upstream's key:
 * both sides in the same order, then compared in place). */
static int ports_match(const struct se_endpoint_slice *s, const struct group *g, bool *ret)
{
        *ret = false;
        if (s->n_ports != g->n_ports)
                return 0;
        if (!s->n_ports) {
                *ret = true;
                return 0;
        }
        const struct se_slice_port **p = se_calloc(s->n_ports, sizeof(*p));
        if (!p)
                return -ENOMEM;
        for (uint32_t i = 0; i < s->n_ports; i++)
                p[i] = &s->ports[i];
        qsort(p, s->n_ports, sizeof(*p), cmp_slice_port_ptr);
        bool eq = true;
        for (uint32_t i = 0; eq && i < s->n_ports; i++)
                eq = cmp_slice_port(p[i], &g->ports[i]) == 0;
        free(p);
        *ret = eq;
        return 0;
}

static bool owned_by(const struct se_endpoint_slice *s, const struct se_service *svc)
{
        for (uint32_t i = 0; i < se_meta_n_owner_refs(&s->obj.meta); i++) {
                const struct se_owner_ref *o = se_meta_owner_ref(&s->obj.meta, i);
                if (endpoints_estreq(o->uid, svc->obj.meta.uid) &&
                    endpoints_nstreq(o->kind, "Service") && endpoints_nstreq(o->api_version, "v1"))
                        return true;
        }
        return false;
}

static bool reserved_label(const char *k)
{
        return strcmp(k, SE_SLICE_SERVICE_NAME_LABEL) == 0 ||
               strcmp(k, SE_SLICE_MANAGED_BY_LABEL) == 0 || strcmp(k, SE_HEADLESS_LABEL) == 0;
}

/* upstream setEndpointSliceLabels' "updated": non-reserved labels differ */
static bool labels_changed(const struct se_kvlist *have, const struct se_kvlist *svc)
{
        uint32_t i = 0, k = 0;
        for (;;) {
                while (i < have->n && reserved_label(have->items[i].key))
                        i++;
                while (k < svc->n && reserved_label(svc->items[k].key))
                        k++;
                if (i == have->n || k == svc->n)
                        return i != have->n || k != svc->n;
                if (strcmp(have->items[i].key, svc->items[k].key) != 0 ||
                    !endpoints_estreq(have->items[i].value, svc->items[k].value))
                        return true;
                i++;
                k++;
        }
}

static int slice_labels(struct se_arena *a, struct se_kvlist *out, const struct se_service *svc,
                        const char *managed_by)
{
        *out = (struct se_kvlist){ NULL, 0 };
        const struct se_kvlist *l = &svc->obj.meta.labels;
        int r = 0;
        for (uint32_t i = 0; r == 0 && i < l->n; i++)
                if (!reserved_label(l->items[i].key))
                        r = endpoints_kv_set(a, out, l->items[i].key, l->items[i].value);
        if (r == 0 && !endpoints_service_ip_set(svc))
                r = endpoints_kv_set(a, out, SE_HEADLESS_LABEL, "");
        if (r == 0)
                r = endpoints_kv_set(a, out, SE_SLICE_SERVICE_NAME_LABEL, svc->obj.meta.name);
        if (r == 0)
                r = endpoints_kv_set(a, out, SE_SLICE_MANAGED_BY_LABEL, managed_by);
        return r;
}

/* The key of an endpoint identity in a group's by_id. */
static void id_key(uint64_t identity, char out[17])
{
        snprintf(out, 17, "%016llx", (unsigned long long)identity);
}

/* ---- desired state ---- */

static int cmp_dep(const void *pa, const void *pb)
{
        const struct dep *a = *(const struct dep *const *)pa, *b = *(const struct dep *const *)pb;
        int c = strcmp(a->ips[0], b->ips[0]);
        if (c)
                return c;
        c = endpoints_nstrcmp(a->more.target_ref.uid, b->more.target_ref.uid);
        return c ? c : endpoints_nstrcmp(a->more.target_ref.name, b->more.target_ref.name);
}

static struct group *group_for(struct ctx *c, const int32_t *nums)
{
        uint32_t P = c->svc->n_ports;
        for (uint32_t i = 0; i < c->n_groups; i++)
                if (!P || memcmp(c->groups[i].nums, nums, P * sizeof(*nums)) == 0)
                        return &c->groups[i];
        if (c->n_groups == c->cap_groups) {
                uint32_t cap = c->cap_groups ? c->cap_groups * 2 : 4;
                struct group *g = se_reallocarray(c->groups, cap, sizeof(*g));
                if (!g)
                        return NULL;
                c->groups = g;
                c->cap_groups = cap;
        }
        struct group *g = &c->groups[c->n_groups];
        *g = (struct group){ .nums = nums, .by_id = SE_HASHMAP_INIT };
        uint32_t n = 0;
        for (uint32_t j = 0; j < P; j++)
                n += nums[j] > 0;
        g->ports = se_calloc(n ? n : 1, sizeof(*g->ports));
        if (!g->ports)
                return NULL;
        for (uint32_t j = 0; j < P; j++) {
                const struct se_service_port *sp = &c->svc->ports[j];
                if (nums[j] <= 0)
                        continue;
                g->ports[g->n_ports++] = (struct se_slice_port){
                        .name = sp->name ? sp->name : "",
                        .has_port = true,
                        .port = nums[j],
                        .has_protocol = true,
                        .protocol = sp->protocol,
                        .app_protocol = sp->app_protocol,
                };
        }
        qsort(g->ports, g->n_ports, sizeof(*g->ports), cmp_slice_port_q);
        c->n_groups++;
        return g;
}

static int group_add(struct group *g, struct dep *d)
{
        if (g->n_deps == g->cap_deps) {
                uint32_t cap = g->cap_deps ? g->cap_deps * 2 : 8;
                struct dep **v = se_reallocarray(g->deps, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                g->deps = v;
                g->cap_deps = cap;
        }
        g->deps[g->n_deps++] = d;
        return 0;
}

/* upstream's reconciler error for a pod whose node is not found */
static int note_missing_node(struct ctx *c, const struct se_pod *pod)
{
        struct se_slices_plan *p = c->plan;
        p->pods_missing_node++;
        if (p->node_errors.n >= SE_SLICES_MAX_NODE_ERRORS)
                return 0;
        char *msg;
        if (se_asprintf(&msg, "skipping Pod %s for Service %s/%s: Node %s Not Found",
                        pod->obj.meta.name, c->svc->obj.meta.namespace, c->svc->obj.meta.name,
                        pod->node_name ? pod->node_name : "") < 0)
                return -ENOMEM;
        return se_strv_push_consume(&p->node_errors, msg);
}

static int collect_desired(struct ctx *c, int family, bool first_type)
{
        const struct se_endpoints_input *in = c->in;
        const struct se_service *svc = c->svc;
        uint32_t P = svc->n_ports;
        static const int32_t no_ports[1] = { 0 };
        c->deps = se_calloc(in->n_pods ? in->n_pods : 1, sizeof(*c->deps));
        if (!c->deps)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_pods; i++) {
                if (!c->included[i])
                        continue;
                const struct se_pod *pod = in->pods[i];
                const int32_t *nums = P ? &c->res[i * P] : no_ports;
                struct group *g = group_for(c, nums);
                if (!g)
                        return -ENOMEM;
                const struct se_node *node = NULL;
                if (in->get_node) {
                        node = pod->node_name && *pod->node_name ?
                                       in->get_node(in->node_data, pod->node_name) :
                                       NULL;
                        if (!node && !svc->publish_not_ready_addresses) {
                                /* upstream checks per address type; its
                                 * error aggregate shows a repeat once */
                                if (first_type && note_missing_node(c, pod) < 0)
                                        return -ENOMEM;
                                continue;
                        }
                }
                struct dep *d = &c->deps[c->n_deps];
                uint32_t n = endpoints_pod_ips_of_family(pod, family, d->ips, MAX_ADDRS);
                for (uint32_t k = 0; k < n; k++)
                        d->ipv[k] = d->ips[k];
                if (!n)
                        continue;
                bool serving = se_pod_is_ready(pod);
                bool terminating = pod->obj.meta.deletion_timestamp != NULL;
                bool ready = svc->publish_not_ready_addresses || (serving && !terminating);
                const char *zone = node ? se_kvlist_get(&node->obj.meta.labels, ZONE_LABEL) : NULL;
                d->more = (struct se_slice_endpoint_more_ref){
                        .more = { pod->node_name && *pod->node_name ? pod->node_name : NULL,
                                  zone && *zone ? zone : NULL },
                        .target_ref = { "Pod", pod->obj.meta.namespace, pod->obj.meta.name,
                                        pod->obj.meta.uid ? pod->obj.meta.uid : "", NULL },
                };
                d->ep = (struct se_slice_endpoint){
                        .addresses = { d->ipv, n },
                        .ready = ready ? SE_TRUE : SE_FALSE,
                        .serving = serving ? SE_TRUE : SE_FALSE,
                        .terminating = terminating ? SE_TRUE : SE_FALSE,
                        .hostname = endpoints_pod_hostname_for(pod, svc),
                        .more = &d->more.more,
                        .more_has = SE_SLICE_EP_TARGET_REF,
                };
                se_slice_endpoint_digest(&d->ep, &d->dg);
                id_key(d->dg.identity, d->key);
                c->n_deps++;
                void *old = NULL;
                if (se_hashmap_put(&g->by_id, d->key, d, &old) < 0)
                        return -ENOMEM;
                if (old) /* the same endpoint twice: the later one wins, as a set insert */
                        ((struct dep *)old)->taken = true;
                if (group_add(g, d) < 0)
                        return -ENOMEM;
        }
        for (uint32_t i = 0; i < c->n_groups; i++) {
                struct group *g = &c->groups[i];
                if (g->n_deps)
                        qsort(g->deps, g->n_deps, sizeof(*g->deps), cmp_dep);
                g->n_left = 0;
                for (uint32_t k = 0; k < g->n_deps; k++)
                        g->n_left += !g->deps[k]->taken;
        }
        return 0;
}

static const struct se_slice_endpoint *pop(struct group *g)
{
        while (g->next < g->n_deps && g->deps[g->next]->taken)
                g->next++;
        if (g->next == g->n_deps)
                return NULL;
        struct dep *d = g->deps[g->next++];
        d->taken = true;
        g->n_left--;
        return &d->ep;
}

/* ---- work slices ---- */

static struct work *work_new(struct ctx *c, const struct se_endpoint_slice *src, enum wstate st)
{
        if (c->n_works == c->cap_works) {
                uint32_t cap = c->cap_works ? c->cap_works * 2 : 8;
                struct work *w = se_reallocarray(c->works, cap, sizeof(*w));
                if (!w)
                        return NULL;
                c->works = w;
                c->cap_works = cap;
        }
        struct work *w = &c->works[c->n_works++];
        *w = (struct work){ .src = src, .state = st };
        return w;
}

static int work_push(struct work *w, const struct se_slice_endpoint *e)
{
        if (w->n_eps == w->cap_eps) {
                uint32_t cap = w->cap_eps ? w->cap_eps * 2 : 8;
                const struct se_slice_endpoint **v =
                        se_reallocarray(SE_UNCONST(void, w->eps), cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                w->eps = v;
                w->cap_eps = cap;
        }
        w->eps[w->n_eps++] = e;
        return 0;
}

static uint32_t work_len(const struct work *w)
{
        return w->n_eps;
}

static int cmp_work_fullest(const void *pa, const void *pb)
{
        const struct work *a = *(const struct work *const *)pa,
                          *b = *(const struct work *const *)pb;
        uint32_t la = work_len(a), lb = work_len(b);
        if (la != lb)
                return la > lb ? -1 : 1;
        return endpoints_nstrcmp(a->src->obj.meta.name, b->src->obj.meta.name);
}

/* upstream reconcileByPortMapping for one group; existing holds the
 * group's owned slices, by name. */
static int reconcile_group(struct ctx *c, struct group *g,
                           const struct se_endpoint_slice **existing, uint32_t n_existing,
                           struct se_kvlist *svc_labels)
{
        uint32_t first = c->n_works;
        for (uint32_t i = 0; i < n_existing; i++) {
                const struct se_endpoint_slice *s = existing[i];
                struct work *w = work_new(c, s, W_UNCHANGED);
                if (!w)
                        return -ENOMEM;
                bool updated = false;
                for (uint32_t k = 0; k < s->n_endpoints; k++) {
                        struct se_slice_endpoint_digest dg;
                        char key[17];
                        endpoints_slice_ep_digest(s, k, &dg);
                        id_key(dg.identity, key);
                        struct dep *d = se_hashmap_get(&g->by_id, key);
                        if (!d || d->taken)
                                continue;
                        if (work_push(w, &d->ep) < 0)
                                return -ENOMEM;
                        /* upstream EndpointsEqualBeyondHash */
                        updated |= d->dg.beyond != dg.beyond;
                        d->taken = true;
                        g->n_left--;
                }
                bool lchanged = labels_changed(&s->obj.meta.labels, svc_labels);
                if (updated || w->n_eps != s->n_endpoints) {
                        if (s->n_endpoints > w->n_eps)
                                c->plan->endpoints_removed += s->n_endpoints - w->n_eps;
                        w->state = w->n_eps ? W_UPDATE : W_DELETE;
                        w->new_labels = true;
                } else {
                        /* every endpoint matched, in src's order: a copy of
                         * src, relabelled when the labels changed */
                        w->n_kept = w->n_eps;
                        if (lchanged) {
                                w->state = W_UPDATE;
                                w->new_labels = true;
                        }
                }
        }
        c->plan->endpoints_added += g->n_left;
        /* fill the slices already being updated, fullest first */
        uint32_t n_upd = 0;
        for (uint32_t i = first; i < c->n_works; i++)
                n_upd += c->works[i].state == W_UPDATE;
        if (g->n_left && n_upd) {
                struct work **v = se_calloc(n_upd, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                uint32_t k = 0;
                for (uint32_t i = first; i < c->n_works; i++)
                        if (c->works[i].state == W_UPDATE)
                                v[k++] = &c->works[i];
                qsort(v, n_upd, sizeof(*v), cmp_work_fullest);
                int r = 0;
                for (k = 0; r == 0 && k < n_upd; k++)
                        while (r == 0 && g->n_left && v[k]->n_eps < c->max)
                                r = work_push(v[k], pop(g));
                free(v);
                if (r < 0)
                        return r;
        }
        /* then the unchanged slice that ends closest to full, else new slices */
        uint32_t last = c->n_works;
        while (g->n_left) {
                struct work *fill = NULL;
                if (g->n_left < c->max) {
                        uint32_t closest = c->max;
                        for (uint32_t i = first; i < last; i++) {
                                struct work *w = &c->works[i];
                                if (w->state != W_UNCHANGED)
                                        continue;
                                uint32_t len = work_len(w);
                                if (g->n_left + len > c->max)
                                        continue;
                                uint32_t diff = c->max - (g->n_left + len);
                                if (diff < closest) {
                                        closest = diff;
                                        fill = w;
                                        if (!diff)
                                                break;
                                }
                        }
                }
                if (fill) {
                        fill->state = W_UPDATE;
                } else {
                        fill = work_new(c, NULL, W_CREATE);
                        if (!fill)
                                return -ENOMEM;
                        fill->fresh = true;
                        fill->ports = g->ports;
                        fill->n_ports = g->n_ports;
                }
                while (g->n_left && fill->n_eps < c->max)
                        if (work_push(fill, pop(g)) < 0)
                                return -ENOMEM;
        }
        return 0;
}

static enum hints hints_mode(const struct se_service *svc, bool have_cache)
{
        /* topology-mode Auto takes precedence over trafficDistribution; with
         * no cache upstream removes every hint */
        if (se_topology_hints_enabled(&svc->obj.meta.annotations))
                return have_cache ? HINTS_AUTO : HINTS_NONE;
        const char *td = svc->traffic_distribution;
        if (endpoints_nstreq(td, "PreferClose") || endpoints_nstreq(td, "PreferSameZone"))
                return HINTS_ZONE;
        if (endpoints_nstreq(td, "PreferSameNode"))
                return HINTS_ZONE_NODE;
        return HINTS_NONE;
}

static bool one_hint(const struct se_strs *h, const char *want)
{
        return h->n == 1 && endpoints_nstreq(h->v[0], want);
}

/* upstream heuristic needsUpdate on an unchanged slice: a ready
 * endpoint's hints are missing or wrong (or, without hints wanted, any
 * endpoint has some). Its endpoints equal the matched desired ones but for
 * the hints, which are src's. */
static bool hints_need_update(enum hints mode, const struct work *w)
{
        for (uint32_t i = 0; i < w->n_kept; i++) {
                const struct se_slice_endpoint *e = w->eps[i];
                struct se_strs zones, nodes;
                endpoints_slice_ep_hints(w->src, i, &zones, &nodes);
                if (mode == HINTS_NONE) {
                        if (zones.n || nodes.n)
                                return true;
                        continue;
                }
                if (e->ready != SE_TRUE)
                        continue;
                const char *zone = se_slice_endpoint_zone(e), *node = se_slice_endpoint_node(e);
                if (zone ? !one_hint(&zones, zone) : zones.n > 0)
                        return true;
                if (node && mode == HINTS_ZONE_NODE ? !one_hint(&nodes, node) : nodes.n > 0)
                        return true;
        }
        return false;
}

/* upstream heuristic update, on the fields of an endpoint being written */
static int hints_update(struct se_arena *a, enum hints mode, enum se_opt_bool ready,
                        struct se_slice_endpoint_fields *f)
{
        if (mode == HINTS_AUTO)
                return 0;
        if (mode == HINTS_NONE) {
                f->hint_zones = f->hint_nodes = (struct se_strs){ NULL, 0 };
                return 0;
        }
        if (ready != SE_TRUE)
                return 0; /* not-ready endpoints keep what they have */
        struct se_strs zones = { NULL, 0 }, nodes = { NULL, 0 };
        if (f->zone) {
                zones.v = se_arena_array(a, 1, sizeof(char *));
                if (!zones.v)
                        return -ENOMEM;
                zones.v[0] = f->zone;
                zones.n = 1;
        }
        if (f->node_name && mode == HINTS_ZONE_NODE) {
                nodes.v = se_arena_array(a, 1, sizeof(char *));
                if (!nodes.v)
                        return -ENOMEM;
                nodes.v[0] = f->node_name;
                nodes.n = 1;
        }
        f->hint_zones = zones;
        f->hint_nodes = nodes;
        return 0;
}

static int copy_strs(struct se_arena *a, struct se_strs *dst, const struct se_strs *src)
{
        *dst = (struct se_strs){ NULL, 0 };
        if (!src->n)
                return 0;
        dst->v = se_arena_array(a, src->n, sizeof(char *));
        if (!dst->v)
                return -ENOMEM;
        for (uint32_t i = 0; i < src->n; i++)
                if (!(dst->v[i] = se_arena_strdup(a, src->v[i])))
                        return -ENOMEM;
        dst->n = src->n;
        return 0;
}

static int cmp_slice_name(const void *a, const void *b)
{
        return endpoints_nstrcmp((*(const struct se_endpoint_slice *const *)a)->obj.meta.name,
                                 (*(const struct se_endpoint_slice *const *)b)->obj.meta.name);
}

/* ---- objects ---- */

/* Copies src's addresses, hostname and conditions into dst, and its other
 * fields into *f (ref: storage for the targetRef), all in a. */
static int copy_endpoint(struct se_arena *a, struct se_slice_endpoint *dst,
                         const struct se_slice_endpoint *src, struct se_slice_endpoint_fields *f,
                         struct se_object_ref *ref)
{
        bool ok = true;
        *dst = (struct se_slice_endpoint){ .ready = src->ready,
                                           .serving = src->serving,
                                           .terminating = src->terminating };
        if (src->addresses.n) {
                dst->addresses.v = se_arena_array(a, src->addresses.n, sizeof(char *));
                if (!dst->addresses.v)
                        return -ENOMEM;
                for (uint32_t i = 0; i < src->addresses.n; i++)
                        if (!(dst->addresses.v[i] = se_arena_strdup(a, src->addresses.v[i])))
                                ok = false;
                dst->addresses.n = src->addresses.n;
        }
        dst->hostname = se_arena_strdup(a, src->hostname);
        struct se_slice_endpoint_fields g;
        se_slice_endpoint_get_more(src, &g);
        *f = (struct se_slice_endpoint_fields){ .node_name = se_arena_strdup(a, g.node_name),
                                                .zone = se_arena_strdup(a, g.zone) };
        if (g.target_ref) {
                struct se_object_ref *c = endpoints_objref_copy(a, g.target_ref, &ok);
                if (c) {
                        *ref = *c;
                        f->target_ref = ref;
                }
        }
        if (!ok || (src->hostname && !dst->hostname) || (g.node_name && !f->node_name) ||
            (g.zone && !f->zone))
                return -ENOMEM;
        if (copy_strs(a, &f->hint_zones, &g.hint_zones) < 0 ||
            copy_strs(a, &f->hint_nodes, &g.hint_nodes) < 0)
                return -ENOMEM;
        return 0;
}

static int copy_ports(struct se_arena *a, struct se_endpoint_slice *s,
                      const struct se_slice_port *p, uint32_t n)
{
        s->has_ports = true;
        if (!n)
                return 0;
        s->ports = se_arena_array(a, n, sizeof(*s->ports));
        if (!s->ports)
                return -ENOMEM;
        for (uint32_t i = 0; i < n; i++) {
                s->ports[i] = p[i];
                s->ports[i].name = se_arena_strdup(a, p[i].name);
                s->ports[i].app_protocol = se_arena_strdup(a, p[i].app_protocol);
                if ((p[i].name && !s->ports[i].name) ||
                    (p[i].app_protocol && !s->ports[i].app_protocol))
                        return -ENOMEM;
        }
        s->n_ports = n;
        return 0;
}

static bool name_taken(const struct ctx *c, const char *name)
{
        return se_strv_contains(&c->names, name);
}

static int set_fresh_meta(struct ctx *c, struct se_endpoint_slice *s, const char *name,
                          const char *family)
{
        struct se_arena *a = &s->obj.arena;
        struct se_meta *m = &s->obj.meta;
        const struct se_service *svc = c->svc;
        char prefix[80];
        snprintf(prefix, sizeof(prefix), "%.58s-", svc->obj.meta.name);
        struct se_meta_more *more = se_meta_more(m, a);
        if (!more)
                return -ENOMEM;
        more->generate_name = se_arena_strdup(a, prefix);
        m->namespace = se_arena_strdup(a, svc->obj.meta.namespace);
        more->owner_refs = se_arena_alloc(a, sizeof(*more->owner_refs));
        if (!more->generate_name || !m->namespace || !more->owner_refs)
                return -ENOMEM;
        more->n_owner_refs = 1;
        more->owner_refs[0] = (struct se_owner_ref){ "v1",
                                                     "Service",
                                                     se_arena_strdup(a, svc->obj.meta.name),
                                                     se_arena_strdup(a, svc->obj.meta.uid),
                                                     SE_TRUE,
                                                     SE_TRUE };
        s->address_type = family;
        if (!more->owner_refs[0].name || (svc->obj.meta.uid && !more->owner_refs[0].uid))
                return -ENOMEM;
        if (name) {
                m->name = se_arena_strdup(a, name);
                return m->name ? 0 : -ENOMEM;
        }
        /* a deterministic stand-in for the API server's 5 random characters */
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
        char key[600], full[96];
        for (;;) {
                uint8_t h[SE_SHA256_LEN];
                int n = snprintf(key, sizeof(key), "%s/%s/%u", svc->obj.meta.namespace,
                                 svc->obj.meta.name, c->name_seq++);
                int r = se_sha256(key, (size_t)n, h);
                if (r < 0)
                        return r;
                char suffix[6];
                for (int i = 0; i < 5; i++)
                        suffix[i] = alphabet[h[i] % (sizeof(alphabet) - 1)];
                suffix[5] = 0;
                snprintf(full, sizeof(full), "%s%s", prefix, suffix);
                if (!name_taken(c, full))
                        break;
        }
        m->name = se_arena_strdup(a, full);
        if (!m->name || se_strv_push(&c->names, full) < 0)
                return -ENOMEM;
        return 0;
}

static int set_trigger(struct ctx *c, struct se_endpoint_slice *s)
{
        struct se_meta *m = &s->obj.meta;
        if (!c->in->trigger_time_ns) {
                endpoints_kv_del(&m->annotations, SE_TRIGGER_TIME_ANNOTATION);
                return 0;
        }
        char t[48];
        se_endpoints_format_time(c->in->trigger_time_ns, t, sizeof(t));
        return endpoints_kv_set(&s->obj.arena, &m->annotations, SE_TRIGGER_TIME_ANNOTATION, t);
}

/* The object a create/update work item writes, with its hints set. */
static int materialize(struct ctx *c, const struct work *w, const char *family,
                       struct se_endpoint_slice **ret)
{
        struct se_object *o = se_object_new(SE_KIND_ENDPOINT_SLICE);
        if (!o)
                return -ENOMEM;
        struct se_endpoint_slice *s = (struct se_endpoint_slice *)o;
        struct se_arena *a = &o->arena;
        int r;
        if (w->fresh) {
                r = set_fresh_meta(c, s, w->name, family);
                if (r == 0)
                        r = slice_labels(a, &o->meta.labels, c->svc,
                                         endpoints_opt_slices_managed_by(c->opts));
                if (r == 0)
                        r = copy_ports(a, s, w->ports, w->n_ports);
        } else {
                r = endpoints_meta_copy(a, &o->meta, &w->src->obj.meta);
                s->address_type = se_arena_strdup(a, w->src->address_type);
                if (r == 0 && w->new_labels)
                        r = slice_labels(a, &o->meta.labels, c->svc,
                                         endpoints_opt_slices_managed_by(c->opts));
                if (r == 0 && (w->src->has_ports || w->src->n_ports))
                        r = copy_ports(a, s, w->src->ports, w->src->n_ports);
        }
        uint32_t n = work_len(w);
        if (r == 0 && n) {
                s->endpoints = se_arena_array(a, n, sizeof(*s->endpoints));
                if (!s->endpoints)
                        r = -ENOMEM;
                struct se_slice_more_cache mores = { 0 };
                for (uint32_t i = 0; r == 0 && i < n; i++) {
                        struct se_slice_endpoint *e = &s->endpoints[i];
                        struct se_slice_endpoint_fields f;
                        struct se_object_ref ref;
                        r = copy_endpoint(a, e, w->eps[i], &f, &ref);
                        if (r == 0 && i < w->n_kept) {
                                struct se_strs zones, nodes;
                                endpoints_slice_ep_hints(w->src, i, &zones, &nodes);
                                if (copy_strs(a, &f.hint_zones, &zones) < 0 ||
                                    copy_strs(a, &f.hint_nodes, &nodes) < 0)
                                        r = -ENOMEM;
                        }
                        if (r == 0)
                                r = hints_update(a, c->hints, e->ready, &f);
                        if (r == 0)
                                r = se_slice_endpoint_set_more(e, a, &f, &mores);
                }
                s->n_endpoints = n;
        }
        if (r == 0)
                r = set_trigger(c, s);
        if (r < 0) {
                se_object_unref(o);
                return r;
        }
        *ret = s;
        return 0;
}

static int push_obj(struct se_endpoint_slice ***v, uint32_t *n, struct se_endpoint_slice *s)
{
        struct se_endpoint_slice **nv = se_reallocarray(*v, (size_t)*n + 1, sizeof(*nv));
        if (!nv) {
                se_object_unref(&s->obj);
                return -ENOMEM;
        }
        nv[(*n)++] = s;
        *v = nv;
        return 0;
}

static int push_ref(const struct se_endpoint_slice ***v, uint32_t *n,
                    const struct se_endpoint_slice *s)
{
        const struct se_endpoint_slice **nv =
                se_reallocarray(SE_UNCONST(void, *v), (size_t)*n + 1, sizeof(*nv));
        if (!nv)
                return -ENOMEM;
        nv[(*n)++] = s;
        *v = nv;
        return 0;
}

static void type_release(struct ctx *c)
{
        for (uint32_t i = 0; i < c->n_groups; i++) {
                free(c->groups[i].ports);
                free(c->groups[i].deps);
                se_hashmap_release(&c->groups[i].by_id);
        }
        free(c->groups);
        free(c->deps);
        for (uint32_t i = 0; i < c->n_works; i++)
                free(SE_UNCONST(void, c->works[i].eps));
        free(c->works);
        c->groups = NULL;
        c->n_groups = c->cap_groups = 0;
        c->deps = NULL;
        c->n_deps = 0;
        c->works = NULL;
        c->n_works = c->cap_works = 0;
}

struct copy_ctx {
        struct ctx *c;
        const char *type;
};

/* A writable copy of an unchanged slice, hints kept, for an update: its
 * work item has the endpoints (none for the kept placeholder slice). */
static int copy_unchanged(void *data, const struct se_endpoint_slice *src,
                          struct se_endpoint_slice **ret)
{
        const struct copy_ctx *cc = data;
        struct work w = { .src = src, .state = W_UPDATE };
        for (uint32_t i = 0; i < cc->c->n_works; i++) {
                const struct work *u = &cc->c->works[i];
                if (u->src == src && u->state == W_UNCHANGED) {
                        w = *u;
                        w.state = W_UPDATE;
                        break;
                }
        }
        if (w.n_kept != src->n_endpoints)
                return -EINVAL; /* not an unchanged slice of this sync */
        return materialize(cc->c, &w, cc->type, ret);
}

/* The topology cache's hints on this type's slices: p->create from c0,
 * p->update from u0 and p->unchanged from k0 (upstream AddHints). */
static int auto_hints(struct ctx *c, const char *type, uint32_t c0, uint32_t u0, uint32_t k0)
{
        struct se_slices_plan *p = c->plan;
        struct copy_ctx cc = { c, type };
        struct topo_slices si = {
                .key = c->key,
                .type = type,
                .create = p->n_create > c0 ? p->create + c0 : NULL,
                .n_create = p->n_create - c0,
                .n_update = p->n_update - u0,
                .n_unchanged = p->n_unchanged - k0,
                .copy = copy_unchanged,
                .copy_data = &cc,
                .events = &p->events,
                .n_events = &p->n_events,
        };
        si.update = se_calloc(si.n_update ? si.n_update : 1, sizeof(*si.update));
        si.unchanged = se_calloc(si.n_unchanged ? si.n_unchanged : 1, sizeof(*si.unchanged));
        int r = si.update && si.unchanged ? 0 : -ENOMEM;
        if (r == 0) {
                if (si.n_update)
                        memcpy(si.update, p->update + u0, si.n_update * sizeof(*si.update));
                if (si.n_unchanged)
                        memcpy(SE_UNCONST(void, si.unchanged), p->unchanged + k0,
                               si.n_unchanged * sizeof(*si.unchanged));
                r = endpoints_topo_add_hints(c->in->topology, &si);
        }
        /* the plan takes back every object, copies included */
        uint32_t n_old = p->n_update - u0;
        p->n_update = u0;
        p->n_unchanged = k0;
        for (uint32_t i = 0; si.update && i < si.n_update; i++) {
                if (r < 0 && i >= n_old) {
                        se_object_unref(&si.update[i]->obj);
                        continue;
                }
                int rr = push_obj(&p->update, &p->n_update, si.update[i]);
                if (rr < 0 && r == 0)
                        r = rr;
        }
        if (r < 0 && !si.update) /* the original updates, as they were */
                p->n_update = u0 + n_old;
        for (uint32_t i = 0; r == 0 && i < si.n_unchanged; i++)
                r = push_ref(&p->unchanged, &p->n_unchanged, si.unchanged[i]);
        free(si.update);
        free(SE_UNCONST(void, si.unchanged));
        return r;
}

/* upstream reconcileByAddressType + finalize for one family; mine holds the
 * slices of this type that carry our labels, sorted by name. */
static int plan_type(struct ctx *c, int family, bool first_type,
                     const struct se_endpoint_slice **mine, uint32_t n_mine)
{
        const char *type = family == 6 ? "IPv6" : "IPv4";
        const struct se_service *svc = c->svc;
        struct se_slices_plan *p = c->plan;
        struct se_topology_cache *topo = c->in->topology;
        uint32_t k0 = p->n_unchanged; /* this type's unchanged slices start here */
        int r = 0;
        /* not in Auto mode: hints the cache gave before are forgotten */
        if (topo && c->hints != HINTS_AUTO) {
                if (se_topology_cache_has_hints(topo, c->key))
                        r = endpoints_topo_event(&p->events, &p->n_events, true,
                                                 TOPO_REASON_DISABLED, "%s, addressType: %s",
                                                 TOPO_HINTS_DISABLED, type);
                se_topology_cache_remove_hints(topo, c->key, type);
        }
        if (r == 0)
                r = collect_desired(c, family, first_type);
        if (r < 0)
                return r;
        /* deletes, in upstream's order: not owned first */
        const struct se_endpoint_slice **dels = se_calloc(n_mine ? n_mine : 1, sizeof(*dels));
        const struct se_endpoint_slice **in_group = se_calloc(n_mine ? n_mine : 1, sizeof(*dels));
        uint32_t n_dels = 0;
        struct se_object *lab = se_object_new(SE_KIND_ENDPOINT_SLICE);
        if (!dels || !in_group || !lab) {
                r = -ENOMEM;
                goto out;
        }
        struct se_kvlist svc_labels; /* for labels_changed: the Service's */
        svc_labels = svc->obj.meta.labels;
        int8_t *gi = se_calloc(n_mine ? n_mine : 1, sizeof(*gi));
        uint32_t *gidx = se_calloc(n_mine ? n_mine : 1, sizeof(*gidx));
        if (!gi || !gidx) {
                free(gi);
                free(gidx);
                r = -ENOMEM;
                goto out;
        }
        for (uint32_t i = 0; i < n_mine; i++) {
                if (!owned_by(mine[i], svc)) {
                        dels[n_dels++] = mine[i];
                        gi[i] = -1;
                        continue;
                }
                gi[i] = 0;
                for (uint32_t k = 0; k < c->n_groups; k++) {
                        bool eq;
                        if ((r = ports_match(mine[i], &c->groups[k], &eq)) < 0)
                                break;
                        if (eq) {
                                gi[i] = 1;
                                gidx[i] = k;
                                break;
                        }
                }
        }
        for (uint32_t k = 0; r == 0 && k < c->n_groups; k++) {
                uint32_t n = 0;
                for (uint32_t i = 0; i < n_mine; i++)
                        if (gi[i] == 1 && gidx[i] == k)
                                in_group[n++] = mine[i];
                r = reconcile_group(c, &c->groups[k], in_group, n, &svc_labels);
        }
        for (uint32_t i = 0; r == 0 && i < c->n_works; i++)
                if (c->works[i].state == W_DELETE)
                        dels[n_dels++] = c->works[i].src;
        /* owned slices whose port set is no longer desired */
        for (uint32_t i = 0; r == 0 && i < n_mine; i++)
                if (gi[i] == 0)
                        dels[n_dels++] = mine[i];
        free(gi);
        free(gidx);
        if (r < 0)
                goto out;
        uint32_t n_create = 0;
        for (uint32_t i = 0; i < c->n_works; i++)
                n_create += c->works[i].state == W_CREATE;
        /* a Service with no endpoints keeps exactly one placeholder slice */
        if (n_mine == n_dels && n_create == 0) {
                r = slice_labels(&lab->arena, &lab->meta.labels, svc,
                                 endpoints_opt_slices_managed_by(c->opts));
                if (r < 0)
                        goto out;
                const struct se_endpoint_slice *d = n_dels == 1 ? dels[0] : NULL;
                if (d && endpoints_nstreq(d->obj.meta.namespace, svc->obj.meta.namespace) &&
                    endpoints_kv_equal(&d->obj.meta.labels, &lab->meta.labels) &&
                    endpoints_nstreq(d->address_type, type) && !d->n_endpoints && !d->n_ports) {
                        n_dels = 0;
                        if ((r = push_ref(&p->unchanged, &p->n_unchanged, d)) < 0)
                                goto out;
                } else {
                        struct work *w = work_new(c, NULL, W_CREATE);
                        if (!w) {
                                r = -ENOMEM;
                                goto out;
                        }
                        w->fresh = true;
                        n_create++;
                }
        }
        /* unchanged slices whose hints are wrong are rewritten (in Auto
         * mode the topology cache decides, below) */
        for (uint32_t i = 0; c->hints != HINTS_AUTO && i < c->n_works; i++) {
                struct work *w = &c->works[i];
                if (w->state == W_UNCHANGED && hints_need_update(c->hints, w))
                        w->state = W_UPDATE;
        }
        /* finalize: a create and a delete of our own slice become one update */
        for (uint32_t i = 0; i < n_dels && n_create;) {
                struct work *last = NULL;
                for (uint32_t k = c->n_works; k-- > 0;)
                        if (c->works[k].state == W_CREATE) {
                                last = &c->works[k];
                                break;
                        }
                if (owned_by(dels[i], svc) && endpoints_nstreq(dels[i]->address_type, type)) {
                        last->state = W_UPDATE;
                        last->name = dels[i]->obj.meta.name;
                        n_create--;
                        memmove(dels + i, dels + i + 1, (n_dels - i - 1) * sizeof(*dels));
                        n_dels--;
                        /* an update made of a create goes after the others */
                        struct work moved = *last;
                        *last = (struct work){ .state = W_DELETE };
                        struct work *w = work_new(c, NULL, W_UPDATE);
                        if (!w) {
                                free(SE_UNCONST(void, moved.eps));
                                r = -ENOMEM;
                                goto out;
                        }
                        *w = moved;
                } else {
                        i++;
                }
        }
        uint32_t c0 = p->n_create, u0 = p->n_update;
        for (uint32_t i = 0; r == 0 && i < c->n_works; i++) {
                const struct work *w = &c->works[i];
                struct se_endpoint_slice *obj;
                if (w->state == W_UNCHANGED) {
                        r = push_ref(&p->unchanged, &p->n_unchanged, w->src);
                        continue;
                }
                if (w->state == W_DELETE)
                        continue;
                if ((r = materialize(c, w, type, &obj)) < 0)
                        break;
                r = w->state == W_CREATE ? push_obj(&p->create, &p->n_create, obj) :
                                           push_obj(&p->update, &p->n_update, obj);
        }
        if (r == 0 && c->hints == HINTS_AUTO)
                r = auto_hints(c, type, c0, u0, k0);
        /* creates are skipped while the Service is being deleted (after the
         * hints: upstream counts their endpoints) */
        if (r == 0 && svc->obj.meta.deletion_timestamp) {
                for (uint32_t i = c0; i < p->n_create; i++)
                        se_object_unref(&p->create[i]->obj);
                p->n_create = c0;
        }
        for (uint32_t i = 0; r == 0 && i < n_dels; i++)
                r = push_ref(&p->remove, &p->n_remove, dels[i]);
out:
        se_object_unref(lab);
        free(dels);
        free(in_group);
        type_release(c);
        return r;
}

void se_slices_plan_release(struct se_slices_plan *p)
{
        if (!p)
                return;
        for (uint32_t i = 0; i < p->n_create; i++)
                se_object_unref(&p->create[i]->obj);
        for (uint32_t i = 0; i < p->n_update; i++)
                se_object_unref(&p->update[i]->obj);
        free(p->create);
        free(p->update);
        free(SE_UNCONST(void, p->remove));
        free(SE_UNCONST(void, p->unchanged));
        for (uint32_t i = 0; i < p->n_events; i++)
                free(p->events[i].message);
        free(p->events);
        se_strv_release(&p->node_errors);
        *p = (struct se_slices_plan){ 0 };
}

char *se_errors_join(const struct se_strv *errs, size_t max)
{
        struct se_strv seen = SE_STRV_INIT;
        struct se_strbuf all;
        se_strbuf_init(&all, max);
        int r = 0;
        for (size_t i = 0; r == 0 && i < errs->n; i++) {
                if (se_strv_contains(&seen, errs->v[i]))
                        continue;
                if (seen.n)
                        se_strbuf_puts(&all, ", ");
                se_strbuf_puts(&all, errs->v[i]);
                r = se_strv_push(&seen, errs->v[i]);
        }
        char *out = NULL;
        if (r == 0 && seen.n && !se_strbuf_failed(&all) &&
            se_asprintf(&out, "%s%s%s", seen.n > 1 ? "[" : "", all.buf, seen.n > 1 ? "]" : "") < 0)
                out = NULL;
        se_strbuf_release(&all);
        se_strv_release(&seen);
        return out;
}

static bool slice_is_ours(const struct se_endpoint_slice *s, const char *ns, const char *name,
                          const char *managed_by)
{
        const struct se_meta *m = &s->obj.meta;
        return !m->deletion_timestamp && endpoints_nstreq(m->namespace, ns) &&
               endpoints_nstreq(se_kvlist_get(&m->labels, SE_SLICE_SERVICE_NAME_LABEL), name) &&
               endpoints_nstreq(se_kvlist_get(&m->labels, SE_SLICE_MANAGED_BY_LABEL), managed_by);
}

int se_slices_plan(const struct se_endpoints_input *in,
                   const struct se_endpoint_slice *const *existing, size_t n_existing,
                   const struct se_endpoints_opts *opts, struct se_slices_plan *ret)
{
        *ret = (struct se_slices_plan){ 0 };
        const struct se_service *svc = in->svc;
        const char *managed_by = endpoints_opt_slices_managed_by(opts);
        const char *ns = svc ? svc->obj.meta.namespace : in->namespace;
        const char *name = svc ? svc->obj.meta.name : in->name;
        const struct se_endpoint_slice **mine =
                se_calloc(n_existing ? n_existing : 1, sizeof(*mine));
        if (!mine)
                return -ENOMEM;
        uint32_t n_mine = 0;
        for (size_t i = 0; i < n_existing; i++)
                if (slice_is_ours(existing[i], ns, name, managed_by))
                        mine[n_mine++] = existing[i];
        qsort(mine, n_mine, sizeof(*mine), cmp_slice_name);
        int r = 0;
        if (!svc) {
                /* upstream leaves this to the garbage collector; the plan says it */
                for (uint32_t i = 0; r == 0 && i < n_mine; i++)
                        r = push_ref(&ret->remove, &ret->n_remove, mine[i]);
                ret->action = ret->n_remove ? SE_EP_DELETE : SE_EP_SKIP;
                goto out;
        }
        if (!se_endpoints_service_managed(svc))
                goto out;
        char key[600];
        snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "");
        struct ctx c = { .hints = hints_mode(svc, in->topology != NULL),
                         .key = key,
                         .in = in,
                         .opts = opts,
                         .svc = svc,
                         .max = endpoints_opt_max_per_slice(opts),
                         .plan = ret,
                         .names = SE_STRV_INIT };
        for (size_t i = 0; i < n_existing; i++)
                if (existing[i]->obj.meta.name &&
                    (r = se_strv_push(&c.names, existing[i]->obj.meta.name)) < 0)
                        break;
        uint32_t P = svc->n_ports;
        c.res = se_calloc(in->n_pods && P ? in->n_pods * P : 1, sizeof(*c.res));
        c.included = se_calloc(in->n_pods ? in->n_pods : 1, sizeof(*c.included));
        if (r == 0 && (!c.res || !c.included))
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < in->n_pods; i++) {
                const struct se_pod *pod = in->pods[i];
                c.included[i] =
                        endpoints_pod_selected(svc, pod) && se_endpoints_pod_included(pod, true);
                if (!c.included[i] || (P == 0 && !endpoints_service_ip_set(svc)))
                        continue;
                for (uint32_t j = 0; j < P; j++) {
                        int port = se_endpoints_find_port(pod, &svc->ports[j]);
                        c.res[i * P + j] = port > 0 ? port : 0;
                }
        }
        int family = se_endpoints_service_family(svc);
        int families[2] = { family, 0 };
        for (uint32_t i = 0; i < svc->ip_families.n && i < 2; i++)
                families[i] = strcmp(svc->ip_families.v[i], "IPv6") == 0 ? 6 : 4;
        uint32_t n_fam = svc->ip_families.n >= 2 && families[1] != families[0] ? 2 : 1;
        /* slices of a type the Service no longer has are removed */
        const struct se_endpoint_slice **stale = se_calloc(n_mine ? n_mine : 1, sizeof(*stale));
        const struct se_endpoint_slice **of_type = se_calloc(n_mine ? n_mine : 1, sizeof(*of_type));
        uint32_t n_stale = 0;
        if (r == 0 && (!stale || !of_type))
                r = -ENOMEM;
        for (uint32_t i = 0; r == 0 && i < n_mine; i++) {
                bool ok = false;
                for (uint32_t f = 0; f < n_fam; f++)
                        ok |= endpoints_nstreq(mine[i]->address_type,
                                               families[f] == 6 ? "IPv6" : "IPv4");
                if (!ok)
                        stale[n_stale++] = mine[i];
        }
        /* upstream forgets the hints of a type the Service no longer has */
        for (uint32_t i = 0; r == 0 && in->topology && i < n_stale; i++)
                se_topology_cache_remove_hints(in->topology, key, stale[i]->address_type);
        for (uint32_t f = 0; r == 0 && f < n_fam; f++) {
                const char *type = families[f] == 6 ? "IPv6" : "IPv4";
                uint32_t n = 0;
                for (uint32_t i = 0; i < n_mine; i++)
                        if (endpoints_nstreq(mine[i]->address_type, type))
                                of_type[n++] = mine[i];
                r = plan_type(&c, families[f], f == 0, of_type, n);
        }
        for (uint32_t i = 0; r == 0 && i < n_stale; i++)
                r = push_ref(&ret->remove, &ret->n_remove, stale[i]);
        free(stale);
        free(of_type);
        free(c.res);
        free(c.included);
        se_strv_release(&c.names);
        if (r == 0) {
                bool changed = ret->n_create || ret->n_update || ret->n_remove;
                if (!changed)
                        ret->action = SE_EP_UNCHANGED;
                else if (n_mine == 0)
                        ret->action = SE_EP_CREATE;
                else
                        ret->action = SE_EP_UPDATE;
        }
out:
        free(mine);
        if (r < 0)
                se_slices_plan_release(ret);
        return r;
}

int se_service_plan(const struct se_endpoints_input *in, const struct se_endpoints *existing_ep,
                    const struct se_endpoint_slice *const *existing_slices, size_t n_slices,
                    const struct se_endpoints_opts *opts, struct se_service_plan *ret)
{
        *ret = (struct se_service_plan){ 0 };
        unsigned w = opts && opts->write ? opts->write : SE_EP_WRITE_ENDPOINTS | SE_EP_WRITE_SLICES;
        int r = 0;
        if (w & SE_EP_WRITE_ENDPOINTS)
                r = se_endpoints_plan(in, existing_ep, opts, &ret->endpoints);
        if (r == 0 && (w & SE_EP_WRITE_SLICES))
                r = se_slices_plan(in, existing_slices, n_slices, opts, &ret->slices);
        if (r < 0)
                se_service_plan_release(ret);
        return r;
}

void se_service_plan_release(struct se_service_plan *p)
{
        if (!p)
                return;
        se_endpoints_plan_release(&p->endpoints);
        se_slices_plan_release(&p->slices);
}
