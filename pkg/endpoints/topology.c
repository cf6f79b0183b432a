/* Topology Aware Routing: upstream's topologycache (topologycache.go,
 * utils.go, sliceinfo.go). Go maps become tables sorted by zone name, so
 * where upstream takes "any" zone svcenv takes the first by name. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>
#include <svcenv/strbuf.h>

#include "endpoints_internal.h"
#include "topology_internal.h"

#define N_TYPES 2 /* IPv4, IPv6: the address types hints are kept for */

/* A recorded zone → endpoints count (upstream EndpointZoneInfo). */
struct zinfo {
        char *zone;
        long n;
};

struct svc_state {
        char *key;
        bool populated; /* upstream hintsPopulatedByService */
        bool has[N_TYPES];
        struct zinfo *zi[N_TYPES];
        size_t n_zi[N_TYPES];
};

struct ratio {
        char *zone;
        double ratio;
};

struct se_topology_cache {
        pthread_mutex_t lock;
        struct ratio *ratios; /* sorted by zone; NULL: none */
        size_t n_ratios;
        struct se_hashmap services; /* key -> struct svc_state */
};

static int type_index(const char *type)
{
        if (type && strcmp(type, "IPv4") == 0)
                return 0;
        if (type && strcmp(type, "IPv6") == 0)
                return 1;
        return -1;
}

static void ratios_free(struct ratio *r, size_t n)
{
        if (!r)
                return;
        for (size_t i = 0; i < n; i++)
                free(r[i].zone);
        free(r);
}

static void zinfo_free(struct zinfo *z, size_t n)
{
        if (!z)
                return;
        for (size_t i = 0; i < n; i++)
                free(z[i].zone);
        free(z);
}

static void svc_free(struct svc_state *s)
{
        for (int i = 0; i < N_TYPES; i++)
                zinfo_free(s->zi[i], s->n_zi[i]);
        free(s->key);
        free(s);
}

struct se_topology_cache *se_topology_cache_new(void)
{
        struct se_topology_cache *t = se_calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        pthread_mutex_init(&t->lock, NULL);
        t->services = (struct se_hashmap)SE_HASHMAP_INIT;
        return t;
}

struct se_topology_cache *se_topology_cache_free(struct se_topology_cache *t)
{
        if (!t)
                return NULL;
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&t->services, &i, &k, &v);)
                svc_free(v);
        se_hashmap_release(&t->services);
        ratios_free(t->ratios, t->n_ratios);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
}

bool se_topology_hints_enabled(const struct se_kvlist *annotations)
{
        const char *v = se_kvlist_get(annotations, SE_TOPOLOGY_HINTS_ANNOTATION);
        if (!v)
                v = se_kvlist_get(annotations, SE_TOPOLOGY_MODE_ANNOTATION);
        return v && (strcmp(v, "Auto") == 0 || strcmp(v, "auto") == 0);
}

bool se_topology_node_ready(const struct se_node *n)
{
        return n->ready == SE_TRUE;
}

static bool excluded_node(const struct se_node *n)
{
        const struct se_kvlist *l = &n->obj.meta.labels;
        return se_kvlist_get(l, "node-role.kubernetes.io/control-plane") ||
               se_kvlist_get(l, "node-role.kubernetes.io/master");
}

static int cmp_ratio(const void *a, const void *b)
{
        return strcmp(((const struct ratio *)a)->zone, ((const struct ratio *)b)->zone);
}

/* nanocores to Quantity.MilliValue (rounded up), saturating */
static int64_t milli_of(int64_t nanos)
{
        if (nanos < -INT64_MAX)
                nanos = -INT64_MAX;
        return nanos > 0 ? nanos / 1000000 + (nanos % 1000000 != 0) : -((-nanos) / 1000000);
}

static int64_t sat_add(int64_t a, int64_t b)
{
        int64_t r;
        if (__builtin_add_overflow(a, b, &r))
                return b > 0 ? INT64_MAX : INT64_MIN;
        return r;
}

/* Replaces the shares (takes r; NULL: none). */
static void ratios_set(struct se_topology_cache *t, struct ratio *r, size_t n)
{
        pthread_mutex_lock(&t->lock);
        struct ratio *old = t->ratios;
        size_t n_old = t->n_ratios;
        t->ratios = r;
        t->n_ratios = n;
        pthread_mutex_unlock(&t->lock);
        ratios_free(old, n_old);
}

int se_topology_cache_set_nodes(struct se_topology_cache *t, const struct se_node *const *nodes,
                                size_t n)
{
        /* zone → nanocores; few zones, so a sorted array is enough */
        struct ratio *zones = NULL; /* ratio unused until the end */
        int64_t *cpu = NULL;
        size_t n_zones = 0;
        int64_t total = 0;
        bool sufficient = true;
        for (size_t i = 0; i < n; i++) {
                const struct se_node *node = nodes[i];
                if (excluded_node(node) || !se_topology_node_ready(node))
                        continue;
                const char *zone = se_kvlist_get(&node->obj.meta.labels, SE_TOPOLOGY_ZONE_LABEL);
                if (!zone || !*zone || node->allocatable_cpu_nanos == 0) {
                        sufficient = false; /* one such node voids all shares */
                        break;
                }
                total = sat_add(total, node->allocatable_cpu_nanos);
                size_t k = 0;
                while (k < n_zones && strcmp(zones[k].zone, zone) != 0)
                        k++;
                if (k == n_zones) {
                        struct ratio *nz = se_reallocarray(zones, n_zones + 1, sizeof(*nz));
                        if (nz)
                                zones = nz;
                        int64_t *nc = nz ? se_reallocarray(cpu, n_zones + 1, sizeof(*nc)) : NULL;
                        if (nc)
                                cpu = nc;
                        char *z = nc ? se_strdup(zone) : NULL;
                        if (!z) {
                                ratios_free(zones, n_zones);
                                free(cpu);
                                return -ENOMEM;
                        }
                        zones[n_zones] = (struct ratio){ z, 0 };
                        cpu[n_zones++] = 0;
                }
                cpu[k] = sat_add(cpu[k], node->allocatable_cpu_nanos);
        }
        if (total == 0 || !sufficient || n_zones < 2) {
                ratios_free(zones, n_zones);
                free(cpu);
                ratios_set(t, NULL, 0);
                return 0;
        }
        double tm = (double)milli_of(total);
        for (size_t k = 0; k < n_zones; k++)
                zones[k].ratio = (double)milli_of(cpu[k]) / tm;
        free(cpu);
        qsort(zones, n_zones, sizeof(*zones), cmp_ratio);
        ratios_set(t, zones, n_zones);
        return 0;
}

int endpoints_topo_set_ratios(struct se_topology_cache *t, const char *const *zones,
                              const double *ratios, size_t n)
{
        struct ratio *r = n ? se_calloc(n, sizeof(*r)) : NULL;
        if (n && !r)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r[i] = (struct ratio){ se_strdup(zones[i]), ratios[i] };
                if (!r[i].zone) {
                        ratios_free(r, i);
                        return -ENOMEM;
                }
        }
        if (n)
                qsort(r, n, sizeof(*r), cmp_ratio);
        ratios_set(t, r, n);
        return 0;
}

size_t se_topology_cache_zones(struct se_topology_cache *t)
{
        pthread_mutex_lock(&t->lock);
        size_t n = t->n_ratios;
        pthread_mutex_unlock(&t->lock);
        return n;
}

double se_topology_cache_ratio(struct se_topology_cache *t, const char *zone)
{
        double r = 0;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->n_ratios; i++)
                if (strcmp(t->ratios[i].zone, zone) == 0)
                        r = t->ratios[i].ratio;
        pthread_mutex_unlock(&t->lock);
        return r;
}

/* 1/(1+threshold), computed as upstream's float64 expression */
static double overload_factor(void)
{
        return 1.0 / (1.0 + SE_TOPOLOGY_OVERLOAD_THRESHOLD);
}

/* upstream serviceOverloaded */
static bool overloaded(const struct zinfo *zi, size_t n, const struct ratio *r, size_t n_r)
{
        if (!n)
                return false;
        if (!n_r)
                return true;
        double total = 0;
        for (size_t i = 0; i < n; i++)
                total += (double)zi[i].n;
        for (size_t k = 0; k < n_r; k++) {
                const struct zinfo *z = NULL;
                for (size_t i = 0; i < n && !z; i++)
                        if (strcmp(zi[i].zone, r[k].zone) == 0)
                                z = &zi[i];
                if (!z)
                        return true;
                double min = ceil(total * r[k].ratio * overload_factor());
                if ((double)z->n < min)
                        return true;
        }
        return false;
}

int se_topology_cache_overloaded(struct se_topology_cache *t, struct se_strv *ret)
{
        struct se_strv keys = SE_STRV_INIT;
        int r = 0;
        pthread_mutex_lock(&t->lock);
        const char *k;
        void *v;
        for (size_t i = 0; r == 0 && se_hashmap_next(&t->services, &i, &k, &v);) {
                const struct svc_state *s = v;
                for (int ty = 0; ty < N_TYPES; ty++)
                        if (s->has[ty] &&
                            overloaded(s->zi[ty], s->n_zi[ty], t->ratios, t->n_ratios)) {
                                r = se_strv_push(&keys, k);
                                break;
                        }
        }
        pthread_mutex_unlock(&t->lock);
        se_strv_sort(&keys);
        for (size_t i = 0; r == 0 && i < keys.n; i++)
                r = se_strv_push(ret, keys.v[i]);
        se_strv_release(&keys);
        return r;
}

bool se_topology_cache_has_hints(struct se_topology_cache *t, const char *key)
{
        pthread_mutex_lock(&t->lock);
        const struct svc_state *s = se_hashmap_get(&t->services, key);
        bool r = s && s->populated;
        pthread_mutex_unlock(&t->lock);
        return r;
}

static void remove_locked(struct se_topology_cache *t, const char *key, const char *type)
{
        struct svc_state *s = se_hashmap_get(&t->services, key);
        if (!s)
                return;
        int ty = type_index(type);
        if (ty >= 0) {
                zinfo_free(s->zi[ty], s->n_zi[ty]);
                s->zi[ty] = NULL;
                s->n_zi[ty] = 0;
                s->has[ty] = false;
        }
        s->populated = false;
        bool any = false;
        for (int i = 0; i < N_TYPES; i++)
                any |= s->has[i];
        if (!any) {
                se_hashmap_remove(&t->services, key);
                svc_free(s);
        }
}

void se_topology_cache_remove_hints(struct se_topology_cache *t, const char *key,
                                    const char *address_type)
{
        pthread_mutex_lock(&t->lock);
        remove_locked(t, key, address_type);
        pthread_mutex_unlock(&t->lock);
}

bool endpoints_topo_recorded(struct se_topology_cache *t, const char *key, const char *type,
                             char *buf, size_t size)
{
        bool found = false;
        size_t len = 0;
        buf[0] = 0;
        pthread_mutex_lock(&t->lock);
        const struct svc_state *s = se_hashmap_get(&t->services, key);
        int ty = type_index(type);
        if (s && ty >= 0 && s->has[ty]) {
                found = true;
                for (size_t i = 0; i < s->n_zi[ty] && len < size; i++)
                        len += (size_t)snprintf(buf + len, size - len, "%s%s=%ld", i ? "," : "",
                                                s->zi[ty][i].zone, s->zi[ty][i].n);
        }
        pthread_mutex_unlock(&t->lock);
        return found;
}

int endpoints_topo_event(struct se_slices_event **v, uint32_t *n, bool warning, const char *reason,
                         const char *fmt, ...)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        va_list ap;
        va_start(ap, fmt);
        se_strbuf_vprintf(&sb, fmt, ap);
        va_end(ap);
        if (se_strbuf_failed(&sb)) {
                se_strbuf_release(&sb);
                return -ENOMEM;
        }
        struct se_slices_event *nv = se_reallocarray(*v, (size_t)*n + 1, sizeof(*nv));
        if (!nv) {
                se_strbuf_release(&sb);
                return -ENOMEM;
        }
        *v = nv;
        nv[(*n)++] = (struct se_slices_event){ warning, reason, se_strbuf_detach(&sb, NULL) };
        return 0;
}

/* ---- the allocation of one sync (upstream AddHints) ---- */

static struct zrow *zt_find(struct ztab *t, const char *zone)
{
        size_t lo = 0, hi = t->n;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcmp(t->v[mid].zone, zone);
                if (c == 0)
                        return &t->v[mid];
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

struct zrow *endpoints_topo_zone_get(struct ztab *t, const char *zone)
{
        struct zrow *r = zt_find(t, zone);
        if (r)
                return r;
        if (t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 8;
                struct zrow *v = se_reallocarray(t->v, cap, sizeof(*v));
                if (!v)
                        return NULL;
                t->v = v;
                t->cap = cap;
        }
        size_t i = 0;
        while (i < t->n && strcmp(t->v[i].zone, zone) < 0)
                i++;
        memmove(t->v + i + 1, t->v + i, (t->n - i) * sizeof(*t->v));
        t->v[i] = (struct zrow){ .zone = zone };
        t->n++;
        return &t->v[i];
}

static bool ready(const struct se_slice_endpoint *e)
{
        return e->ready == SE_TRUE;
}

/* (unchanged slices may be slim: their endpoints are read through
 * endpoints_slice_ep_ready and endpoints_slice_ep_hints) */
static long ready_count(const struct se_endpoint_slice *s)
{
        long n = 0;
        for (uint32_t i = 0; i < s->n_endpoints; i++)
                n += endpoints_slice_ep_ready(s, i) == SE_TRUE;
        return n;
}

/* upstream getAllocations, under the lock. 0 and *ok true: the rows hold
 * the allocations; *ok false: an event was added. */
static int get_allocations(struct se_topology_cache *t, struct topo_slices *si, long n_eps,
                           struct ztab *zt, bool *ok)
{
        *ok = false;
        const char *sfx = si->type;
        if (!t->ratios)
                return endpoints_topo_event(si->events, si->n_events, true, TOPO_REASON_DISABLED,
                                            "%s, addressType: %s", TOPO_INSUFFICIENT_NODE_INFO,
                                            sfx);
        long nz = (long)t->n_ratios;
        if (nz < 2)
                return endpoints_topo_event(si->events, si->n_events, true, TOPO_REASON_DISABLED,
                                            "%s, addressType: %s", TOPO_ONE_ZONE_ONLY, sfx);
        if (nz > n_eps)
                return endpoints_topo_event(si->events, si->n_events, true, TOPO_REASON_DISABLED,
                                            "%s (%ld endpoints, %ld zones), addressType: %s",
                                            TOPO_INSUFFICIENT_ENDPOINTS, n_eps, nz, sfx);
        long remaining = n_eps, min_total = 0;
        for (size_t k = 0; k < t->n_ratios; k++) {
                double desired = t->ratios[k].ratio * (double)n_eps;
                long minimum = (long)ceil(desired * overload_factor());
                struct zrow *r = endpoints_topo_zone_get(zt, t->ratios[k].zone);
                if (!r)
                        return -ENOMEM;
                r->alloc = true;
                r->minimum = minimum;
                r->desired = fmax(desired, (double)minimum);
                min_total += minimum;
                remaining -= minimum;
                if (remaining < 0)
                        return endpoints_topo_event(
                                si->events, si->n_events, true, TOPO_REASON_DISABLED,
                                "%s (%ld endpoints, %ld zones), addressType: %s",
                                TOPO_MIN_EXCEEDS_THRESHOLD, n_eps, nz, sfx);
        }
        for (size_t i = 0; i < zt->n; i++)
                if (zt->v[i].alloc)
                        zt->v[i].maximum = zt->v[i].minimum + n_eps - min_total;
        *ok = true;
        return 0;
}

static int push_update(struct topo_slices *si, struct se_endpoint_slice *s)
{
        struct se_endpoint_slice **v =
                se_reallocarray(si->update, (size_t)si->n_update + 1, sizeof(*v));
        if (!v) {
                se_object_unref(&s->obj);
                return -ENOMEM;
        }
        v[si->n_update++] = s;
        si->update = v;
        return 0;
}

/* Removes the hints of s's endpoints. 0 or -ENOMEM. */
static int drop_hints(struct se_endpoint_slice *s)
{
        static const struct se_strs none;
        for (uint32_t k = 0; k < s->n_endpoints; k++) {
                struct se_slice_endpoint *e = &s->endpoints[k];
                int r;
                if (se_slice_endpoint_hints(e) &&
                    (r = se_slice_endpoint_set_hints(e, &s->obj.arena, none, none)) < 0)
                        return r;
        }
        return 0;
}

/* upstream RemoveHintsFromSlices: no hints on create and update; unchanged
 * slices with hints are copied to update without them. 0 or -ENOMEM. */
static int topo_remove_from_slices(struct topo_slices *si)
{
        for (int pass = 0; pass < 2; pass++) {
                struct se_endpoint_slice **v = pass ? si->update : si->create;
                uint32_t n = pass ? si->n_update : si->n_create;
                for (uint32_t i = 0; i < n; i++) {
                        int r = drop_hints(v[i]);
                        if (r < 0)
                                return r;
                }
        }
        uint32_t j = 0;
        for (uint32_t i = 0; i < si->n_unchanged; i++) {
                const struct se_endpoint_slice *s = si->unchanged[i];
                bool any = false;
                for (uint32_t k = 0; k < s->n_endpoints && !any; k++) {
                        struct se_strs zones, nodes;
                        endpoints_slice_ep_hints(s, k, &zones, &nodes);
                        any = zones.n || nodes.n;
                }
                if (!any) {
                        si->unchanged[j++] = s;
                        continue;
                }
                struct se_endpoint_slice *c;
                int r = si->copy(si->copy_data, s, &c);
                if (r < 0)
                        return r;
                if ((r = drop_hints(c)) < 0 || (r = push_update(si, c)) < 0)
                        return r;
        }
        si->n_unchanged = j;
        return 0;
}

/* upstream getHintsByZone: false when the slice's hints no longer fit (a
 * ready endpoint without zone hints, a hint for a zone without allocation,
 * or more than a zone's maximum); else the counts are in scratch. */
bool endpoints_topo_hints_fit(const struct se_endpoint_slice *s, struct ztab *zt)
{
        for (size_t i = 0; i < zt->n; i++)
                zt->v[i].scratch = 0;
        for (uint32_t k = 0; k < s->n_endpoints; k++) {
                struct se_strs zones, nodes;
                if (endpoints_slice_ep_ready(s, k) != SE_TRUE)
                        continue;
                endpoints_slice_ep_hints(s, k, &zones, &nodes);
                if (!zones.n)
                        return false;
                for (uint32_t h = 0; h < zones.n; h++) {
                        struct zrow *r = zones.v[h] ? zt_find(zt, zones.v[h]) : NULL;
                        if (!r || !r->alloc)
                                return false;
                        r->scratch++;
                }
        }
        for (size_t i = 0; i < zt->n; i++) {
                const struct zrow *r = &zt->v[i];
                if (r->scratch && r->scratch + (r->has_hints ? r->hints : 0) > r->maximum)
                        return false;
        }
        return true;
}

/* upstream getAllocatedHintsByZone: counts the hints of unchanged slices
 * that still fit; the others move to update. */
static int count_unchanged(struct topo_slices *si, struct ztab *zt)
{
        uint32_t j = 0;
        for (uint32_t i = 0; i < si->n_unchanged; i++) {
                const struct se_endpoint_slice *s = si->unchanged[i];
                if (!endpoints_topo_hints_fit(s, zt)) {
                        struct se_endpoint_slice *c;
                        int r = si->copy(si->copy_data, s, &c);
                        if (r < 0 || (r = push_update(si, c)) < 0)
                                return r;
                        continue;
                }
                si->unchanged[j++] = s;
                for (size_t z = 0; z < zt->n; z++)
                        if (zt->v[z].scratch) {
                                zt->v[z].has_hints = true;
                                zt->v[z].hints += zt->v[z].scratch;
                        }
        }
        si->n_unchanged = j;
        return 0;
}

static int set_zone_hint(struct se_endpoint_slice *s, struct se_slice_endpoint *e, const char *zone)
{
        const char **v = se_arena_array(&s->obj.arena, 1, sizeof(*v));
        const char *z = se_arena_strdup(&s->obj.arena, zone);
        if (!v || !z)
                return -ENOMEM;
        v[0] = z;
        return se_slice_endpoint_set_hints(e, &s->obj.arena, (struct se_strs){ v, 1 },
                                           (struct se_strs){ NULL, 0 });
}

/* upstream getMost: the zone with the greatest positive value (first by
 * name on a tie), NULL when none */
static struct zrow *most(struct ztab *zt, bool giving, double *ret)
{
        struct zrow *best = NULL;
        double num = 0;
        for (size_t i = 0; i < zt->n; i++) {
                struct zrow *r = &zt->v[i];
                bool has = giving ? r->has_gd : r->has_rd;
                double n = giving ? r->gd : r->rd;
                if (has && n > num) {
                        best = r;
                        num = n;
                }
        }
        *ret = num;
        return best;
}

/* upstream getGivingAndReceivingZones */
void endpoints_topo_giving_receiving(struct ztab *zt)
{
        for (size_t i = 0; i < zt->n; i++) {
                struct zrow *r = &zt->v[i];
                if (!r->alloc)
                        continue;
                double have = (double)(r->has_hints ? r->hints : 0);
                if (have > r->desired) {
                        r->has_gd = true;
                        r->gd = have - r->desired;
                } else if (have < r->desired) {
                        r->has_rd = true;
                        r->rd = r->desired - have;
                }
        }
        for (;;) {
                double ng, nr;
                struct zrow *g = most(zt, true, &ng), *rc = most(zt, false, &nr);
                if (!g || !rc || (ng < 1.0 && nr < 1.0) || ng < 0.5 || nr < 0.5)
                        break;
                g->give++;
                g->gd--;
                rc->recv++;
                rc->rd--;
        }
}

/* upstream redistributeHints over create then update */
int endpoints_topo_redistribute(struct topo_slices *si, struct ztab *zt)
{
        for (int pass = 0; pass < 2; pass++) {
                struct se_endpoint_slice **v = pass ? si->update : si->create;
                uint32_t n = pass ? si->n_update : si->n_create;
                for (uint32_t i = 0; i < n; i++)
                        for (uint32_t k = 0; k < v[i]->n_endpoints; k++) {
                                struct se_slice_endpoint *e = &v[i]->endpoints[k];
                                if (!ready(e))
                                        continue;
                                bool giving = false, receiving = false;
                                for (size_t z = 0; z < zt->n; z++) {
                                        giving |= zt->v[z].give > 0;
                                        receiving |= zt->v[z].recv > 0;
                                }
                                if (!giving || !receiving)
                                        return 0;
                                const char *zone = se_slice_endpoint_zone(e);
                                if (!zone || !*zone)
                                        continue;
                                struct zrow *g = zt_find(zt, zone);
                                if (!g || g->give <= 0)
                                        continue;
                                for (size_t z = 0; z < zt->n; z++) {
                                        struct zrow *rc = &zt->v[z];
                                        if (rc->recv <= 0)
                                                continue;
                                        int r = set_zone_hint(v[i], e, rc->zone);
                                        if (r < 0)
                                                return r;
                                        g->give--;
                                        rc->recv--;
                                        rc->has_redist = g->has_redist = true;
                                        rc->redist++;
                                        g->redist--;
                                        break;
                                }
                        }
        }
        return 0;
}

/* setHintsLocked: records the hints of key/type and marks key populated */
static int record_locked(struct se_topology_cache *t, const struct topo_slices *si,
                         const struct ztab *zt)
{
        int ty = type_index(si->type);
        size_t n = 0;
        for (size_t i = 0; i < zt->n; i++)
                n += zt->v[i].has_hints;
        struct zinfo *zi = se_calloc(n ? n : 1, sizeof(*zi));
        if (!zi)
                return -ENOMEM;
        n = 0;
        for (size_t i = 0; i < zt->n; i++) {
                if (!zt->v[i].has_hints)
                        continue;
                zi[n] = (struct zinfo){ se_strdup(zt->v[i].zone), zt->v[i].hints };
                if (!zi[n++].zone) {
                        zinfo_free(zi, n);
                        return -ENOMEM;
                }
        }
        struct svc_state *s = se_hashmap_get(&t->services, si->key);
        if (!s) {
                s = se_calloc(1, sizeof(*s));
                if (s && !(s->key = se_strdup(si->key))) {
                        free(s);
                        s = NULL;
                }
                if (!s || se_hashmap_put(&t->services, s->key, s, NULL) < 0) {
                        if (s)
                                svc_free(s);
                        zinfo_free(zi, n);
                        return -ENOMEM;
                }
        }
        if (ty >= 0) {
                zinfo_free(s->zi[ty], s->n_zi[ty]);
                s->zi[ty] = zi;
                s->n_zi[ty] = n;
                s->has[ty] = true;
        } else {
                zinfo_free(zi, n);
        }
        s->populated = true;
        return 0;
}

/* All hints off: the cache forgets them, the slices lose them. */
static int disable_locked(struct se_topology_cache *t, struct topo_slices *si)
{
        remove_locked(t, si->key, si->type);
        return topo_remove_from_slices(si);
}

int endpoints_topo_add_hints(struct se_topology_cache *t, struct topo_slices *si)
{
        long n_eps = 0;
        for (uint32_t i = 0; i < si->n_create; i++)
                n_eps += ready_count(si->create[i]);
        for (uint32_t i = 0; i < si->n_update; i++)
                n_eps += ready_count(si->update[i]);
        for (uint32_t i = 0; i < si->n_unchanged; i++)
                n_eps += ready_count(si->unchanged[i]);
        struct ztab zt = { 0 };
        bool ok;
        /* held throughout: the rows borrow the shares' zone names */
        pthread_mutex_lock(&t->lock);
        int r = get_allocations(t, si, n_eps, &zt, &ok);
        if (r < 0 || !ok) {
                if (r == 0)
                        r = disable_locked(t, si);
                goto out;
        }
        if ((r = count_unchanged(si, &zt)) < 0)
                goto out;
        /* step 1: every ready endpoint hinted for its own zone */
        for (int pass = 0; pass < 2; pass++) {
                struct se_endpoint_slice **v = pass ? si->update : si->create;
                uint32_t n = pass ? si->n_update : si->n_create;
                for (uint32_t i = 0; i < n; i++)
                        for (uint32_t k = 0; k < v[i]->n_endpoints; k++) {
                                struct se_slice_endpoint *e = &v[i]->endpoints[k];
                                if (!ready(e))
                                        continue; /* upstream leaves their hints as they are */
                                const char *zone = se_slice_endpoint_zone(e);
                                if (!zone || !*zone) {
                                        r = endpoints_topo_event(si->events, si->n_events, true,
                                                                 TOPO_REASON_DISABLED,
                                                                 "%s, addressType: %s",
                                                                 TOPO_NO_ZONE_SPECIFIED, si->type);
                                        if (r == 0)
                                                r = disable_locked(t, si);
                                        goto out;
                                }
                                struct zrow *row = endpoints_topo_zone_get(&zt, zone);
                                if (!row || (r = set_zone_hint(v[i], e, zone)) < 0) {
                                        r = -ENOMEM;
                                        goto out;
                                }
                                row->has_hints = true;
                                row->hints++;
                        }
        }
        /* steps 2 and 3: zones above their share give endpoints to those below */
        endpoints_topo_giving_receiving(&zt);
        if ((r = endpoints_topo_redistribute(si, &zt)) < 0)
                goto out;
        bool any = false;
        for (size_t i = 0; i < zt.n; i++) {
                struct zrow *row = &zt.v[i];
                if (row->has_redist) {
                        row->has_hints = true;
                        row->hints += row->redist;
                }
                any |= row->has_hints;
        }
        if (!any) {
                r = endpoints_topo_event(si->events, si->n_events, true, TOPO_REASON_DISABLED,
                                         "%s, addressType: %s", TOPO_NO_ALLOCATED_HINTS, si->type);
                if (r == 0)
                        r = disable_locked(t, si);
                goto out;
        }
        const struct svc_state *s = se_hashmap_get(&t->services, si->key);
        bool was = s && s->populated;
        r = record_locked(t, si, &zt);
        if (r == 0 && !was)
                r = endpoints_topo_event(si->events, si->n_events, false, TOPO_REASON_ENABLED,
                                         "%s, addressType: %s", TOPO_HINTS_ENABLED, si->type);
out:
        pthread_mutex_unlock(&t->lock);
        free(zt.v);
        return r;
}
