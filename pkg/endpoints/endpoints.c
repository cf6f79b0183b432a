/* The Endpoints controller's sync: desired subsets (upstream's RepackSubsets
 * over one single-address subset per pod and port), truncation at 1000
 * addresses, the no-write equality check and the create/update/delete plan. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "endpoints_internal.h"

struct addr {
        char ip[IP_TEXT_MAX];
        const struct se_pod *pod;
        const char *hostname;
        bool ready;
        uint32_t row; /* this pod's row of resolved ports */
};

/* One distinct EndpointPort (service port j resolved to num) and the
 * addresses serving it: members are (unique address index << 1 | not ready),
 * ascending. */
struct pkey {
        uint32_t j;
        int32_t num;
        uint32_t *m;
        uint32_t n, cap;
        uint64_t hash;
        uint32_t group;
};

static int cmp_addr(const void *pa, const void *pb)
{
        const struct addr *a = pa, *b = pb;
        int c = strcmp(a->ip, b->ip);
        if (c)
                return c;
        /* upstream: an address without targetRef sorts first; ours always have one */
        c = endpoints_nstrcmp(a->pod->obj.meta.uid, b->pod->obj.meta.uid);
        if (c)
                return c;
        return (a->row > b->row) - (a->row < b->row);
}

static bool same_addr(const struct addr *a, const struct addr *b)
{
        return strcmp(a->ip, b->ip) == 0 &&
               endpoints_nstreq(a->pod->obj.meta.uid, b->pod->obj.meta.uid);
}

static int cmp_port_ptr(const void *a, const void *b)
{
        return se_endpoint_port_cmp(*(const struct se_endpoint_port *const *)a,
                                    *(const struct se_endpoint_port *const *)b);
}

static int add_member(struct pkey *k, uint32_t idx, bool not_ready)
{
        /* duplicate (ip, uid): one address; not ready wins for the port */
        if (k->n && (k->m[k->n - 1] >> 1) == idx) {
                k->m[k->n - 1] |= not_ready;
                return 0;
        }
        if (k->n == k->cap) {
                uint32_t cap = k->cap ? k->cap * 2 : 8;
                uint32_t *m = se_reallocarray(k->m, cap, sizeof(*m));
                if (!m)
                        return -ENOMEM;
                k->m = m;
                k->cap = cap;
        }
        k->m[k->n++] = idx << 1 | not_ready;
        return 0;
}

static uint64_t members_hash(const struct pkey *k)
{
        uint64_t h = 1469598103934665603ULL;
        for (uint32_t i = 0; i < k->n; i++) {
                h ^= k->m[i];
                h *= 1099511628211ULL;
        }
        return h ^ k->n;
}

static int cmp_members(const struct pkey *a, const struct pkey *b)
{
        if (a->hash != b->hash)
                return a->hash < b->hash ? -1 : 1;
        if (a->n != b->n)
                return a->n < b->n ? -1 : 1;
        return a->n ? memcmp(a->m, b->m, (size_t)a->n * sizeof(*a->m)) : 0;
}

static int cmp_pkey_ptr(const void *pa, const void *pb)
{
        const struct pkey *a = *(const struct pkey *const *)pa,
                          *b = *(const struct pkey *const *)pb;
        int c = cmp_members(a, b);
        if (c)
                return c;
        return (a > b) - (a < b);
}

static int build_labels(struct se_arena *a, struct se_kvlist *out, const struct se_service *svc,
                        const char *managed_by)
{
        int r = endpoints_kv_copy(a, out, &svc->obj.meta.labels);
        if (r < 0)
                return r;
        if (!endpoints_service_ip_set(svc))
                r = endpoints_kv_set(a, out, SE_HEADLESS_LABEL, "");
        else
                endpoints_kv_del(out, SE_HEADLESS_LABEL);
        if (r == 0)
                r = endpoints_kv_set(a, out, SE_ENDPOINTS_MANAGED_BY_LABEL, managed_by);
        return r;
}

struct build {
        struct addr *addrs;
        size_t n_addrs;
        int32_t *res; /* n_addrs x P resolved ports, 0: not found */
        struct pkey *keys;
        size_t n_keys, cap_keys;
        struct pkey **order;
        uint32_t *uniq; /* unique address index -> addrs index */
};

static void build_release(struct build *b)
{
        for (size_t i = 0; i < b->n_keys; i++)
                free(b->keys[i].m);
        free(b->keys);
        free(b->addrs);
        free(b->res);
        free(b->order);
        free(b->uniq);
}

static struct pkey *key_for(struct build *b, uint32_t j, int32_t num)
{
        for (size_t i = 0; i < b->n_keys; i++)
                if (b->keys[i].j == j && b->keys[i].num == num)
                        return &b->keys[i];
        if (b->n_keys == b->cap_keys) {
                size_t cap = b->cap_keys ? b->cap_keys * 2 : 4;
                struct pkey *k = se_reallocarray(b->keys, cap, sizeof(*k));
                if (!k)
                        return NULL;
                b->keys = k;
                b->cap_keys = cap;
        }
        struct pkey *k = &b->keys[b->n_keys++];
        *k = (struct pkey){ .j = j, .num = num };
        return k;
}

/* Collects the selected pods' addresses and resolved ports. */
static int collect(struct build *b, const struct se_endpoints_input *in)
{
        const struct se_service *svc = in->svc;
        uint32_t P = svc->n_ports;
        int family = se_endpoints_service_family(svc);
        b->addrs = se_calloc(in->n_pods ? in->n_pods : 1, sizeof(*b->addrs));
        b->res = se_calloc(in->n_pods && P ? in->n_pods * P : 1, sizeof(*b->res));
        if (!b->addrs || !b->res)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct se_pod *pod = in->pods[i];
                if (!endpoints_pod_selected(svc, pod) ||
                    !se_endpoints_pod_included(pod, svc->publish_not_ready_addresses))
                        continue;
                struct addr *a = &b->addrs[b->n_addrs];
                if (!endpoints_pod_ips_of_family(pod, family, &a->ip, 1))
                        continue;
                a->pod = pod;
                a->hostname = endpoints_pod_hostname_for(pod, svc);
                a->ready = svc->publish_not_ready_addresses || se_pod_is_ready(pod);
                a->row = (uint32_t)b->n_addrs;
                bool any = P == 0;
                for (uint32_t j = 0; j < P; j++) {
                        int port = se_endpoints_find_port(pod, &svc->ports[j]);
                        b->res[(size_t)a->row * P + j] = port > 0 ? port : 0;
                        any |= port > 0;
                }
                if (any)
                        b->n_addrs++;
        }
        qsort(b->addrs, b->n_addrs, sizeof(*b->addrs), cmp_addr);
        return 0;
}

static int copy_address(struct se_arena *a, struct se_endpoint_address *dst, const struct addr *src)
{
        const struct se_meta *m = &src->pod->obj.meta;
        struct se_object_ref *ref = se_arena_alloc(a, sizeof(*ref));
        dst->ip = se_arena_strdup(a, src->ip);
        dst->hostname = se_arena_strdup(a, src->hostname);
        dst->node_name = se_arena_strdup(a, src->pod->node_name ? src->pod->node_name : "");
        if (!ref || !dst->ip || !dst->node_name || (src->hostname && !dst->hostname))
                return -ENOMEM;
        ref->kind = "Pod";
        ref->namespace = se_arena_strdup(a, m->namespace);
        ref->name = se_arena_strdup(a, m->name);
        ref->uid = se_arena_strdup(a, m->uid ? m->uid : "");
        if (!ref->namespace || !ref->name || !ref->uid)
                return -ENOMEM;
        dst->target_ref = ref;
        return 0;
}

static int make_subsets(struct build *b, const struct se_service *svc, struct se_endpoints *ep)
{
        struct se_arena *ar = &ep->obj.arena;
        uint32_t P = svc->n_ports;
        size_t nu = 0;
        b->uniq = se_calloc(b->n_addrs ? b->n_addrs : 1, sizeof(*b->uniq));
        if (!b->uniq)
                return -ENOMEM;
        for (size_t i = 0; i < b->n_addrs; i++) {
                const struct addr *a = &b->addrs[i];
                if (i == 0 || !same_addr(a, &b->addrs[i - 1]))
                        b->uniq[nu++] = (uint32_t)i;
                uint32_t idx = (uint32_t)nu - 1;
                if (P == 0) {
                        /* headless without ports: one port-less group (upstream's sentinel) */
                        struct pkey *k = key_for(b, 0, -1);
                        if (!k || add_member(k, idx, !a->ready) < 0)
                                return -ENOMEM;
                        continue;
                }
                for (uint32_t j = 0; j < P; j++) {
                        int32_t num = b->res[(size_t)a->row * P + j];
                        if (!num)
                                continue;
                        struct pkey *k = key_for(b, j, num);
                        if (!k || add_member(k, idx, !a->ready) < 0)
                                return -ENOMEM;
                }
        }
        if (!b->n_keys)
                return 0;
        /* the addresses once, shared by every subset in this arena */
        struct se_endpoint_address *tmpl = se_arena_array(ar, nu, sizeof(*tmpl));
        if (!tmpl)
                return -ENOMEM;
        for (size_t u = 0; u < nu; u++)
                if (copy_address(ar, &tmpl[u], &b->addrs[b->uniq[u]]) < 0)
                        return -ENOMEM;
        /* group ports by identical (address, readiness) sets */
        b->order = se_calloc(b->n_keys, sizeof(*b->order));
        if (!b->order)
                return -ENOMEM;
        for (size_t i = 0; i < b->n_keys; i++) {
                b->keys[i].hash = members_hash(&b->keys[i]);
                b->order[i] = &b->keys[i];
        }
        qsort(b->order, b->n_keys, sizeof(*b->order), cmp_pkey_ptr);
        uint32_t groups = 0;
        for (size_t i = 0; i < b->n_keys; i++) {
                if (i && cmp_members(b->order[i], b->order[i - 1]) != 0)
                        groups++;
                b->order[i]->group = groups;
        }
        groups++;
        struct se_endpoint_subset *subs = se_arena_array(ar, groups, sizeof(*subs));
        if (!subs)
                return -ENOMEM;
        for (size_t i = 0; i < b->n_keys;) {
                size_t end = i;
                while (end < b->n_keys && b->order[end]->group == b->order[i]->group)
                        end++;
                struct se_endpoint_subset *s = &subs[b->order[i]->group];
                const struct pkey *k0 = b->order[i];
                if (k0->num > 0) {
                        s->ports = se_arena_array(ar, end - i, sizeof(*s->ports));
                        if (!s->ports)
                                return -ENOMEM;
                        for (size_t k = i; k < end; k++) {
                                const struct se_service_port *sp = &svc->ports[b->order[k]->j];
                                s->ports[s->n_ports++] =
                                        (struct se_endpoint_port){ sp->name, b->order[k]->num,
                                                                   sp->protocol, sp->app_protocol };
                        }
                }
                uint32_t nr = 0;
                for (uint32_t m = 0; m < k0->n; m++)
                        nr += !(k0->m[m] & 1);
                s->addresses = nr ? se_arena_array(ar, nr, sizeof(*s->addresses)) : NULL;
                s->not_ready =
                        k0->n - nr ? se_arena_array(ar, k0->n - nr, sizeof(*s->not_ready)) : NULL;
                if ((nr && !s->addresses) || (k0->n - nr && !s->not_ready))
                        return -ENOMEM;
                for (uint32_t m = 0; m < k0->n; m++) {
                        const struct se_endpoint_address *t = &tmpl[k0->m[m] >> 1];
                        if (k0->m[m] & 1)
                                s->not_ready[s->n_not_ready++] = *t;
                        else
                                s->addresses[s->n_addresses++] = *t;
                }
                i = end;
        }
        ep->subsets = subs;
        ep->n_subsets = groups;
        /* upstream's order decides which addresses survive truncation */
        return endpoints_sort_subsets(subs, groups);
}

int se_endpoints_build(const struct se_endpoints_input *in, const struct se_endpoints_opts *opts,
                       struct se_endpoints **ret)
{
        const struct se_service *svc = in->svc;
        *ret = NULL;
        if (!se_endpoints_service_managed(svc))
                return -EINVAL;
        struct se_object *o = se_object_new(SE_KIND_ENDPOINTS);
        if (!o)
                return -ENOMEM;
        struct se_endpoints *ep = (struct se_endpoints *)o;
        struct build b = { 0 };
        int r = 0;
        o->meta.name = se_arena_strdup(&o->arena, svc->obj.meta.name);
        o->meta.namespace = se_arena_strdup(&o->arena, svc->obj.meta.namespace);
        if (!o->meta.name || !o->meta.namespace ||
            build_labels(&o->arena, &o->meta.labels, svc,
                         endpoints_opt_endpoints_managed_by(opts)) < 0)
                r = -ENOMEM;
        if (r == 0 && (svc->n_ports || !endpoints_service_ip_set(svc)))
                r = collect(&b, in);
        if (r == 0 && b.n_addrs)
                r = make_subsets(&b, svc, ep);
        build_release(&b);
        if (r < 0) {
                se_object_unref(o);
                return r;
        }
        *ret = ep;
        return 0;
}

/* ---- equality ---- */

static bool addr_equal(const struct se_endpoint_address *a, const struct se_endpoint_address *b)
{
        return endpoints_nstreq(a->ip, b->ip) && endpoints_estreq(a->hostname, b->hostname) &&
               endpoints_estreq(a->node_name, b->node_name) &&
               endpoints_objref_equal(a->target_ref, b->target_ref);
}

static bool addrs_equal(const struct se_endpoint_address *a, uint32_t na,
                        const struct se_endpoint_address *b, uint32_t nb)
{
        if (na != nb)
                return false;
        for (uint32_t i = 0; i < na; i++)
                if (!addr_equal(&a[i], &b[i]))
                        return false;
        return true;
}

struct sorted_subset {
        const struct se_endpoint_subset *s;
        const struct se_endpoint_port **ports;
};

static int cmp_sorted_subset(const void *pa, const void *pb)
{
        const struct sorted_subset *a = pa, *b = pb;
        if (!a->s->n_ports || !b->s->n_ports)
                return (a->s->n_ports != 0) - (b->s->n_ports != 0);
        return se_endpoint_port_cmp(a->ports[0], b->ports[0]);
}

/* A slim existing object (the controller's cache) holds only the digest of
 * its subsets, which is equal exactly when the comparison below is. */
static bool subsets_equal_slim(const struct se_endpoints *want, const struct se_endpoints *have)
{
        uint8_t w[SE_ENDPOINTS_DIGEST_LEN], h[SE_ENDPOINTS_DIGEST_LEN];
        if (se_endpoints_n_addresses(want) != se_endpoints_n_addresses(have))
                return false;
        /* on -ENOMEM: not equal, a write, as the comparison below does */
        return se_endpoints_digest(want, w) == 0 && se_endpoints_digest(have, h) == 0 &&
               memcmp(w, h, sizeof(w)) == 0;
}

/* A view of ep's subsets with each one's ports sorted by value and the
 * subsets by their first port: the same for any order of either. */
struct sorted_view {
        struct sorted_subset *ss;
        const struct se_endpoint_port **pp;
};

static int sorted_view(const struct se_endpoints *ep, struct sorted_view *v)
{
        uint32_t n = ep->n_subsets, total_ports = 0;
        for (uint32_t i = 0; i < n; i++)
                total_ports += ep->subsets[i].n_ports;
        v->ss = se_calloc(n ? n : 1, sizeof(*v->ss));
        v->pp = se_calloc(total_ports ? total_ports : 1, sizeof(*v->pp));
        if (!v->ss || !v->pp)
                return -ENOMEM;
        for (uint32_t i = 0, off = 0; i < n; i++) {
                const struct se_endpoint_subset *s = &ep->subsets[i];
                v->ss[i].s = s;
                v->ss[i].ports = v->pp + off;
                for (uint32_t k = 0; k < s->n_ports; k++)
                        v->pp[off + k] = &s->ports[k];
                qsort(v->pp + off, s->n_ports, sizeof(*v->pp), cmp_port_ptr);
                off += s->n_ports;
        }
        qsort(v->ss, n, sizeof(*v->ss), cmp_sorted_subset);
        return 0;
}

static void sorted_view_release(struct sorted_view *v)
{
        free(v->ss);
        free(v->pp);
}

/* Ports and subsets compare as sets, addresses in order (both sides keep
 * them sorted by IP and UID): an object written in another subset or port
 * order is not rewritten for its order alone. */
static bool subsets_equal(const struct se_endpoints *want, const struct se_endpoints *have)
{
        if (want->slim || have->slim)
                return subsets_equal_slim(want, have);
        if (want->n_subsets != have->n_subsets)
                return false;
        struct sorted_view wv = { 0 }, hv = { 0 };
        /* on -ENOMEM: not equal, a write */
        bool eq = sorted_view(want, &wv) == 0 && sorted_view(have, &hv) == 0;
        for (uint32_t i = 0; eq && i < want->n_subsets; i++) {
                const struct se_endpoint_subset *w = wv.ss[i].s, *h = hv.ss[i].s;
                eq = w->n_ports == h->n_ports &&
                     addrs_equal(w->addresses, w->n_addresses, h->addresses, h->n_addresses) &&
                     addrs_equal(w->not_ready, w->n_not_ready, h->not_ready, h->n_not_ready);
                for (uint32_t k = 0; eq && k < w->n_ports; k++)
                        eq = se_endpoint_port_cmp(wv.ss[i].ports[k], hv.ss[i].ports[k]) == 0 &&
                             endpoints_estreq(wv.ss[i].ports[k]->name, hv.ss[i].ports[k]->name);
        }
        sorted_view_release(&wv);
        sorted_view_release(&hv);
        return eq;
}

/* upstream labelsCorrectForEndpoints, after dropping the headless label */
static bool labels_correct(const struct se_kvlist *have, const struct se_service *svc,
                           const char *managed_by)
{
        if (!endpoints_nstreq(se_kvlist_get(have, SE_ENDPOINTS_MANAGED_BY_LABEL), managed_by))
                return false;
        uint32_t skipped = 0;
        for (uint32_t i = 0; i < have->n; i++) {
                const char *k = have->items[i].key;
                if (strcmp(k, SE_HEADLESS_LABEL) == 0 ||
                    strcmp(k, SE_ENDPOINTS_MANAGED_BY_LABEL) == 0) {
                        skipped++;
                        continue;
                }
                const char *sv = se_kvlist_get(&svc->obj.meta.labels, k);
                if (!sv || !endpoints_estreq(sv, have->items[i].value))
                        return false;
        }
        return have->n == svc->obj.meta.labels.n + skipped;
}

bool se_endpoints_equal(const struct se_endpoints *desired, const struct se_endpoints *existing,
                        const struct se_service *svc, const struct se_endpoints_opts *opts)
{
        return subsets_equal(desired, existing) &&
               labels_correct(&existing->obj.meta.labels, svc,
                              endpoints_opt_endpoints_managed_by(opts)) &&
               se_endpoints_n_addresses(existing) <= SE_ENDPOINTS_MAX_CAPACITY &&
               !se_kvlist_get(&existing->obj.meta.annotations, SE_OVER_CAPACITY_ANNOTATION);
}

/* ---- truncation (upstream truncateEndpoints) ---- */

bool endpoints_truncate(struct se_endpoints *ep)
{
        size_t ready = 0, not_ready = 0;
        for (uint32_t i = 0; i < ep->n_subsets; i++) {
                ready += ep->subsets[i].n_addresses;
                not_ready += ep->subsets[i].n_not_ready;
        }
        if (ready + not_ready <= SE_ENDPOINTS_MAX_CAPACITY)
                return false;
        bool trunc_ready = ready > SE_ENDPOINTS_MAX_CAPACITY;
        size_t max = trunc_ready ? SE_ENDPOINTS_MAX_CAPACITY : SE_ENDPOINTS_MAX_CAPACITY - ready;
        size_t total = trunc_ready ? ready : not_ready;
        size_t left = max;
        for (uint32_t i = 0; i < ep->n_subsets; i++) {
                struct se_endpoint_subset *s = &ep->subsets[i];
                size_t in = trunc_ready ? s->n_addresses : s->n_not_ready;
                /* ceil(in / total * max) in doubles, as upstream's float64 */
                double share = (double)in / (double)total * (double)max;
                size_t take = (size_t)share;
                if ((double)take < share)
                        take++;
                if (take > left)
                        take = left;
                if (trunc_ready) {
                        if (s->n_addresses > take)
                                s->n_addresses = (uint32_t)take;
                        s->n_not_ready = 0;
                        left -= s->n_addresses;
                } else {
                        if (s->n_not_ready > take)
                                s->n_not_ready = (uint32_t)take;
                        left -= s->n_not_ready;
                }
        }
        return true;
}

/* ---- plan ---- */

void se_endpoints_plan_release(struct se_endpoints_plan *p)
{
        if (!p)
                return;
        se_object_unref(p->obj ? &p->obj->obj : NULL);
        *p = (struct se_endpoints_plan){ 0 };
}

int se_endpoints_plan(const struct se_endpoints_input *in, const struct se_endpoints *existing,
                      const struct se_endpoints_opts *opts, struct se_endpoints_plan *ret)
{
        *ret = (struct se_endpoints_plan){ SE_EP_SKIP, NULL };
        const struct se_service *svc = in->svc;
        if (!svc) {
                /* upstream deletes whatever Endpoints outlive their Service,
                 * whoever wrote them; only leader-election records are spared
                 * (its start-up pass never queues them) */
                if (existing &&
                    !se_kvlist_get(&existing->obj.meta.annotations, SE_LEADER_ANNOTATION))
                        ret->action = SE_EP_DELETE;
                return 0;
        }
        if (!se_endpoints_service_managed(svc))
                return 0;
        struct se_endpoints *ep;
        int r = se_endpoints_build(in, opts, &ep);
        if (r < 0)
                return r;
        if (existing && se_endpoints_equal(ep, existing, svc, opts)) {
                se_object_unref(&ep->obj);
                ret->action = SE_EP_UNCHANGED;
                return 0;
        }
        struct se_object *o = &ep->obj;
        struct se_meta *m = &o->meta;
        if (existing) {
                /* a modified copy of the stored object: its other metadata stays */
                struct se_kvlist labels = m->labels;
                const char *name = m->name, *ns = m->namespace;
                if (endpoints_meta_copy(&o->arena, m, &existing->obj.meta) < 0)
                        r = -ENOMEM;
                m->labels = labels;
                m->name = name;
                m->namespace = ns;
        }
        if (r == 0 && in->trigger_time_ns) {
                char t[48];
                se_endpoints_format_time(in->trigger_time_ns, t, sizeof(t));
                r = endpoints_kv_set(&o->arena, &m->annotations, SE_TRIGGER_TIME_ANNOTATION, t);
        } else {
                endpoints_kv_del(&m->annotations, SE_TRIGGER_TIME_ANNOTATION);
        }
        if (r == 0 && endpoints_truncate(ep))
                r = endpoints_kv_set(&o->arena, &m->annotations, SE_OVER_CAPACITY_ANNOTATION,
                                     "truncated");
        else
                endpoints_kv_del(&m->annotations, SE_OVER_CAPACITY_ANNOTATION);
        if (r < 0) {
                se_object_unref(o);
                return r;
        }
        ret->action = existing ? SE_EP_UPDATE : SE_EP_CREATE;
        ret->obj = ep;
        return 0;
}
