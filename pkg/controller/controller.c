/* The controller: informers → store events → keys → workers (see
 * controller.h). The sync of one key lives in sync.c. */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/controller.h>
#include <svcenv/decode.h>
#include <svcenv/endpoints_sync.h>
#include <svcenv/kube_watch.h>
#include <svcenv/timeutil.h>

#include "controller_internal.h"

/* Listed one after the other in this order: the kinds with the largest
 * pages of text (a page of slices is ~2.4 MB, of pods ~1 MB) go while the
 * cache is still small, so the peak is the pods' page over the full cache. */
static const enum se_kind informer_kinds[CTL_N_INFORMERS] = {
        SE_KIND_ENDPOINT_SLICE, SE_KIND_ENDPOINTS, SE_KIND_SERVICE, SE_KIND_NODE, SE_KIND_POD,
};

void ctl_log(struct se_controller *ctl, enum se_controller_log sev, int v, const char *fmt, ...)
{
        if (!ctl->opts.log)
                return;
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        ctl->opts.log(ctl->opts.log_data, sev, v, msg);
}

int se_controller_split_key(const char *key, char *buf, size_t size, const char **ret_ns,
                            const char **ret_name)
{
        size_t len = strlen(key);
        const char *slash = strchr(key, '/');
        if (!slash || slash == key || !slash[1] || strchr(slash + 1, '/') || len >= size)
                return -EINVAL;
        memcpy(buf, key, len + 1);
        buf[slash - key] = '\0';
        *ret_ns = buf;
        *ret_name = buf + (slash - key) + 1;
        return 0;
}

bool se_controller_namespace_terminating(int err, const char *message)
{
        return err == -EACCES && message && strstr(message, "because it is being terminated");
}

/* ---- pending pod changes, for the change-to-write latency ---- */

struct pending {
        char *key;
        uint64_t since_ns;
};

static void note_pod_change(struct se_controller *ctl, const char *key, uint64_t now)
{
        pthread_mutex_lock(&ctl->pending_lock);
        if (!se_hashmap_get(&ctl->pending, key)) {
                struct pending *p = se_malloc(sizeof(*p));
                if (p && (p->key = se_strdup(key)) != NULL) {
                        p->since_ns = now;
                        if (se_hashmap_put(&ctl->pending, p->key, p, NULL) < 0) {
                                free(p->key);
                                free(p);
                        }
                } else {
                        free(p);
                }
        }
        pthread_mutex_unlock(&ctl->pending_lock);
}

uint64_t ctl_take_pod_change(struct se_controller *ctl, const char *key)
{
        pthread_mutex_lock(&ctl->pending_lock);
        struct pending *p = se_hashmap_remove(&ctl->pending, key);
        pthread_mutex_unlock(&ctl->pending_lock);
        uint64_t t = p ? p->since_ns : 0;
        if (p) {
                free(p->key);
                free(p);
        }
        return t;
}

/* ---- store events (called inside the store's write lock) ---- */

static void queue_key(struct se_controller *ctl, const char *ns, const char *name)
{
        char key[512];
        if ((size_t)snprintf(key, sizeof(key), "%s/%s", ns, name) >= sizeof(key))
                return;
        int r = se_kube_queue_add(ctl->queue, key);
        if (r < 0 && r != -ESHUTDOWN)
                ctl_log(ctl, SE_CTL_LOG_ERROR, 0, "cannot queue %s: %s", key, strerror(-r));
}

static void on_service(void *data, enum se_store_event ev, const struct se_object *old,
                       const struct se_object *new_obj)
{
        (void)ev;
        const struct se_object *o = new_obj ? new_obj : old;
        queue_key(data, o->meta.namespace, o->meta.name);
}

static void on_pod(void *data, enum se_store_event ev, const struct se_object *old,
                   const struct se_object *new_obj)
{
        (void)ev;
        struct se_controller *ctl = data;
        struct se_strv keys = SE_STRV_INIT;
        atomic_fetch_add(&ctl->pod_events, 1);
        if (se_endpoints_services_for_pod_event(ctl->store, se_pod_of(old), se_pod_of(new_obj),
                                                &keys) < 0)
                ctl_log(ctl, SE_CTL_LOG_ERROR, 0, "out of memory on a pod event");
        uint64_t now = se_now_mono_ns();
        for (size_t i = 0; i < keys.n; i++) {
                if (atomic_load(&ctl->started))
                        note_pod_change(ctl, keys.v[i], now);
                int r = ctl->opts.pod_batch_ns ? se_kube_queue_add_after(ctl->queue, keys.v[i],
                                                                         ctl->opts.pod_batch_ns) :
                                                 se_kube_queue_add(ctl->queue, keys.v[i]);
                if (r < 0 && r != -ESHUTDOWN)
                        ctl_log(ctl, SE_CTL_LOG_ERROR, 0, "cannot queue %s: %s", keys.v[i],
                                strerror(-r));
        }
        se_strv_release(&keys);
}

static void on_endpoints(void *data, enum se_store_event ev, const struct se_object *old,
                         const struct se_object *new_obj)
{
        (void)new_obj;
        /* upstream: a deleted Endpoints is recreated when its Service wants it */
        if (ev == SE_STORE_DELETE)
                queue_key(data, old->meta.namespace, old->meta.name);
}

struct written {
        char *key;
        int64_t generation;
};

void ctl_slice_written(struct se_controller *ctl, const char *ns, const char *name,
                       int64_t generation)
{
        char key[512];
        if ((size_t)snprintf(key, sizeof(key), "%s/%s", ns, name) >= sizeof(key))
                return;
        pthread_mutex_lock(&ctl->slices_lock);
        struct written *w = se_hashmap_get(&ctl->slices_written, key);
        if (!w && (w = se_calloc(1, sizeof(*w))) != NULL) {
                w->key = se_strdup(key);
                if (!w->key || se_hashmap_put(&ctl->slices_written, w->key, w, NULL) < 0) {
                        free(w->key);
                        free(w);
                        w = NULL;
                }
        }
        if (w)
                w->generation = generation;
        pthread_mutex_unlock(&ctl->slices_lock);
}

/* Did we cause this event? A change at or below the generation we wrote,
 * or the delete we made. A delete forgets the slice either way. */
static bool slice_event_ours(struct se_controller *ctl, enum se_store_event ev,
                             const struct se_object *o)
{
        char key[512];
        if ((size_t)snprintf(key, sizeof(key), "%s/%s", o->meta.namespace, o->meta.name) >=
            sizeof(key))
                return false;
        bool ours = false;
        pthread_mutex_lock(&ctl->slices_lock);
        struct written *w = se_hashmap_get(&ctl->slices_written, key);
        if (w && ev == SE_STORE_DELETE) {
                ours = w->generation < 0;
                se_hashmap_remove(&ctl->slices_written, key);
                free(w->key);
                free(w);
        } else if (w) {
                ours = w->generation >= 0 && se_meta_generation(&o->meta) <= w->generation;
        }
        pthread_mutex_unlock(&ctl->slices_lock);
        return ours;
}

static const char *slice_service(const struct se_controller *ctl, const struct se_object *o)
{
        const char *mb = o ? se_kvlist_get(&o->meta.labels, SE_SLICE_MANAGED_BY_LABEL) : NULL;
        if (!mb || strcmp(mb, ctl->slices_managed_by) != 0)
                return NULL;
        return se_kvlist_get(&o->meta.labels, SE_SLICE_SERVICE_NAME_LABEL);
}

/* Upstream: node add and delete, and an update that flips the Ready
 * condition or changes the zone label, refresh the topology cache (an
 * allocatable change alone does not). */
static void on_node(void *data, enum se_store_event ev, const struct se_object *old,
                    const struct se_object *new_obj)
{
        struct se_controller *ctl = data;
        if (ev == SE_STORE_UPDATE) {
                const struct se_node *a = se_node_of(old), *b = se_node_of(new_obj);
                const char *za = se_kvlist_get(&a->obj.meta.labels, SE_TOPOLOGY_ZONE_LABEL);
                const char *zb = se_kvlist_get(&b->obj.meta.labels, SE_TOPOLOGY_ZONE_LABEL);
                if (se_topology_node_ready(a) == se_topology_node_ready(b) &&
                    strcmp(za ? za : "", zb ? zb : "") == 0)
                        return;
        }
        int r = se_kube_queue_add(ctl->queue, CTL_TOPOLOGY_KEY);
        if (r < 0 && r != -ESHUTDOWN)
                ctl_log(ctl, SE_CTL_LOG_ERROR, 0, "cannot queue the topology refresh: %s",
                        strerror(-r));
}

int ctl_topology_sync(struct se_controller *ctl)
{
        se_store_rdlock(ctl->store);
        const struct se_object **nodes = NULL;
        long n = se_store_list(ctl->store, SE_KIND_NODE, NULL, &nodes);
        int r = n < 0 ? (int)n :
                        se_topology_cache_set_nodes(
                                ctl->topology, (const struct se_node *const *)nodes, (size_t)n);
        se_store_unlock(ctl->store);
        free(nodes);
        struct se_strv keys = SE_STRV_INIT;
        if (r == 0)
                r = se_topology_cache_overloaded(ctl->topology, &keys);
        for (size_t i = 0; r == 0 && i < keys.n; i++) {
                ctl_log(ctl, SE_CTL_LOG_INFO, 2,
                        "queuing service %s after a node change: its zones are overloaded",
                        keys.v[i]);
                int rq = se_kube_queue_add(ctl->queue, keys.v[i]);
                if (rq < 0 && rq != -ESHUTDOWN)
                        r = rq;
        }
        se_strv_release(&keys);
        return r;
}

/* Upstream: a managed slice changed by someone else (newer generation than
 * we wrote, or unknown), relabelled, or deleted unexpectedly re-syncs its
 * service after a second. */
static void on_slice(void *data, enum se_store_event ev, const struct se_object *old,
                     const struct se_object *new_obj)
{
        struct se_controller *ctl = data;
        const struct se_object *o = new_obj ? new_obj : old;
        const char *svc_new = slice_service(ctl, new_obj), *svc_old = slice_service(ctl, old);
        if (!svc_new && !svc_old)
                return;
        bool relabelled = old && new_obj && !(svc_new && svc_old && strcmp(svc_new, svc_old) == 0);
        if (slice_event_ours(ctl, ev, o) && !relabelled)
                return;
        if (ev == SE_STORE_DELETE) {
                queue_key(ctl, o->meta.namespace, svc_old);
                return;
        }
        char key[512];
        const char *names[2] = { svc_new, relabelled ? svc_old : NULL };
        for (int i = 0; i < 2; i++) {
                if (!names[i] || (size_t)snprintf(key, sizeof(key), "%s/%s", o->meta.namespace,
                                                  names[i]) >= sizeof(key))
                        continue;
                (void)se_kube_queue_add_after(ctl->queue, key, 1000000000ull);
        }
}

/* ---- life cycle ---- */

struct se_controller *se_controller_new(struct se_kube_client *c,
                                        const struct se_controller_opts *opts)
{
        struct se_controller *ctl = se_calloc(1, sizeof(*ctl));
        if (!ctl)
                return NULL;
        ctl->client = c;
        if (opts)
                ctl->opts = *opts;
        if (!ctl->opts.workers)
                ctl->opts.workers = 5;
        if (ctl->opts.workers > SE_CONTROLLER_MAX_WORKERS)
                ctl->opts.workers = SE_CONTROLLER_MAX_WORKERS;
        ctl->slices_managed_by = ctl->opts.ep.slices_managed_by ? ctl->opts.ep.slices_managed_by :
                                                                  SE_SLICES_DEFAULT_MANAGED_BY;
        pthread_mutex_init(&ctl->pending_lock, NULL);
        pthread_mutex_init(&ctl->gauge_lock, NULL);
        pthread_mutex_init(&ctl->slices_lock, NULL);
        ctl_metrics_init(ctl);
        struct se_kube_queue_opts qo = { .observe = ctl_queue_observe, .observe_data = ctl };
        ctl->store = se_store_new();
        ctl->queue = se_kube_queue_new(&qo);
        ctl->tracker = se_trigger_tracker_new();
        ctl->topology = se_topology_cache_new();
        /* upstream's event sources, one per controller */
        ctl->ep_events = se_kube_recorder_new(c, "endpoint-controller");
        ctl->slice_events = se_kube_recorder_new(c, "endpoint-slice-controller");
        if (!ctl->store || !ctl->queue || !ctl->tracker || !ctl->topology || !ctl->ep_events ||
            !ctl->slice_events)
                return se_controller_free(ctl);
        if (se_store_subscribe(ctl->store, SE_KIND_SERVICE, on_service, ctl) < 0 ||
            se_store_subscribe(ctl->store, SE_KIND_POD, on_pod, ctl) < 0 ||
            se_store_subscribe(ctl->store, SE_KIND_NODE, on_node, ctl) < 0 ||
            se_store_subscribe(ctl->store, SE_KIND_ENDPOINTS, on_endpoints, ctl) < 0 ||
            se_store_subscribe(ctl->store, SE_KIND_ENDPOINT_SLICE, on_slice, ctl) < 0)
                return se_controller_free(ctl);
        return ctl;
}

static void informer_error(void *data, int err, const char *message)
{
        ctl_log(data, SE_CTL_LOG_WARN, 0, "list/watch failed (%s): %s", strerror(-err),
                message ? message : "");
}

bool se_controller_synced(const struct se_controller *ctl)
{
        return atomic_load(&ctl->synced);
}

static void *worker_main(void *arg)
{
        struct se_controller *ctl = arg;
        const char *key; /* the queue's, valid until done() */
        while (se_kube_queue_get(ctl->queue, 0, &key) == 0) {
                if (strcmp(key, CTL_TOPOLOGY_KEY) == 0) {
                        int r = ctl_topology_sync(ctl);
                        if (r < 0)
                                ctl_log(ctl, SE_CTL_LOG_ERROR, 0, "topology refresh failed: %s",
                                        strerror(-r));
                        se_kube_queue_forget(ctl->queue, key);
                        se_kube_queue_done(ctl->queue, key);
                        continue;
                }
                int r = ctl_sync(ctl, key);
                if (r == 0) {
                        se_kube_queue_forget(ctl->queue, key);
                } else if (se_kube_queue_requeues(ctl->queue, key) < SE_CONTROLLER_MAX_RETRIES) {
                        ctl_log(ctl, SE_CTL_LOG_INFO, 2, "sync of %s failed, retrying: %s", key,
                                strerror(-r));
                        (void)se_kube_queue_add_rate_limited(ctl->queue, key);
                } else {
                        ctl_log(ctl, SE_CTL_LOG_WARN, 0,
                                "dropping service %s out of the queue after %d retries: %s", key,
                                SE_CONTROLLER_MAX_RETRIES, strerror(-r));
                        atomic_fetch_add(&ctl->drops, 1);
                        se_kube_queue_forget(ctl->queue, key);
                }
                se_kube_queue_done(ctl->queue, key);
        }
        return NULL;
}

/* Every existing Endpoints key once: those of deleted Services go away. */
static void queue_startup_keys(struct se_controller *ctl)
{
        se_store_rdlock(ctl->store);
        const struct se_object **objs = NULL;
        long n = se_store_list(ctl->store, SE_KIND_ENDPOINTS, NULL, &objs);
        for (long i = 0; i < n; i++)
                if (!se_kvlist_get(&objs[i]->meta.annotations, SE_LEADER_ANNOTATION))
                        queue_key(ctl, objs[i]->meta.namespace, objs[i]->meta.name);
        free(objs);
        objs = NULL;
        n = se_store_list(ctl->store, SE_KIND_SERVICE, NULL, &objs);
        for (long i = 0; i < n; i++)
                queue_key(ctl, objs[i]->meta.namespace, objs[i]->meta.name);
        free(objs);
        se_store_unlock(ctl->store);
}

/* The cache keeps only what the syncs read: most of its bytes are pods,
 * and the Endpoints and slices are compared, never copied; strings shared
 * everywhere (the namespaces, labels, selectors and node names of a big
 * cluster). The informers and the write responses kept (sync.c) use it. */
unsigned ctl_decode_flags(enum se_kind kind)
{
        switch (kind) {
        case SE_KIND_POD:
                return SE_DECODE_INTERN | SE_DECODE_SLIM_POD;
        case SE_KIND_ENDPOINTS:
                return SE_DECODE_INTERN | SE_DECODE_SLIM_ENDPOINTS;
        case SE_KIND_ENDPOINT_SLICE:
                return SE_DECODE_INTERN | SE_DECODE_SLIM_SLICES;
        default:
                return SE_DECODE_INTERN;
        }
}

int se_controller_run(struct se_controller *ctl, unsigned timeout_ms)
{
        uint64_t t0 = se_now_mono_ns();
        /* one informer lists at a time: each holds a page of text (up to
         * 500 objects) while it decodes it, and five at once would set the
         * peak memory */
        for (size_t i = 0; i < CTL_N_INFORMERS; i++) {
                struct se_kube_informer_opts io = { .decode_flags =
                                                            ctl_decode_flags(informer_kinds[i]) };
                ctl->informers[i] = se_kube_informer_new(ctl->client, informer_kinds[i], ctl->store,
                                                         &io, informer_error, ctl);
                if (!ctl->informers[i])
                        return -ENOMEM;
                int r = se_kube_informer_start(ctl->informers[i]);
                if (r < 0)
                        return r;
                while (!se_kube_informer_has_synced(ctl->informers[i])) {
                        if (atomic_load(&ctl->stopping))
                                return -ECANCELED;
                        if (timeout_ms && se_now_mono_ns() - t0 > (uint64_t)timeout_ms * 1000000ull)
                                return -ETIMEDOUT;
                        struct timespec ts = { 0, 5 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                }
        }
        ctl->synced_ns = se_now_mono_ns() - t0;
        /* the zone shares before any sync (upstream may sync a Service first
         * and remove its hints for want of node information) */
        int rt = ctl_topology_sync(ctl);
        if (rt < 0)
                return rt;
        /* the lists' pages and item trees are gone: hand their memory back */
        malloc_trim(0);
        atomic_store(&ctl->synced, true);
        ctl_log(ctl, SE_CTL_LOG_INFO, 0, "caches synced in %.3f s; starting %u workers",
                (double)ctl->synced_ns / 1e9, ctl->opts.workers);
        atomic_store(&ctl->started, true);
        for (unsigned i = 0; i < ctl->opts.workers; i++) {
                int r = pthread_create(&ctl->workers[i], NULL, worker_main, ctl);
                if (r != 0)
                        return -r;
                ctl->n_workers++;
        }
        queue_startup_keys(ctl);
        return 0;
}

void se_controller_cancel(struct se_controller *ctl)
{
        atomic_store(&ctl->stopping, true);
}

void se_controller_stop(struct se_controller *ctl, uint64_t deadline_ns)
{
        atomic_store(&ctl->stopping, true);
        /* watches first, so the queue only shrinks while it drains */
        for (size_t i = 0; i < CTL_N_INFORMERS; i++)
                ctl->informers[i] = se_kube_informer_free(ctl->informers[i]);
        if (deadline_ns && ctl->n_workers) {
                struct se_kube_queue_stats st;
                for (;;) {
                        se_kube_queue_stats(ctl->queue, &st);
                        if (!(st.depth + st.processing) || se_now_mono_ns() >= deadline_ns)
                                break;
                        struct timespec ts = { 0, 10 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                }
        }
        /* what is still queued is not synced: the next leader lists anew */
        se_kube_queue_shutdown_now(ctl->queue);
        for (unsigned i = 0; i < ctl->n_workers; i++)
                pthread_join(ctl->workers[i], NULL);
        ctl->n_workers = 0;
        if (deadline_ns) { /* a moment for the last events */
                se_kube_recorder_flush(ctl->ep_events, 1000);
                se_kube_recorder_flush(ctl->slice_events, 1000);
        }
}

struct se_controller *se_controller_free(struct se_controller *ctl)
{
        if (!ctl)
                return NULL;
        se_controller_stop(ctl, 0);
        /* informers are gone: no more callbacks into the queue */
        ctl->store = se_store_free(ctl->store);
        ctl->queue = se_kube_queue_free(ctl->queue);
        ctl->tracker = se_trigger_tracker_free(ctl->tracker);
        ctl->topology = se_topology_cache_free(ctl->topology);
        ctl->ep_events = se_kube_recorder_free(ctl->ep_events);
        ctl->slice_events = se_kube_recorder_free(ctl->slice_events);
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&ctl->pending, &i, &k, &v);) {
                struct pending *p = v;
                free(p->key);
                free(p);
        }
        se_hashmap_release(&ctl->pending);
        for (size_t i = 0; se_hashmap_next(&ctl->slices_written, &i, &k, &v);) {
                struct written *w = v;
                free(w->key);
                free(w);
        }
        se_hashmap_release(&ctl->slices_written);
        pthread_mutex_destroy(&ctl->slices_lock);
        ctl_gauges_release(ctl);
        pthread_mutex_destroy(&ctl->pending_lock);
        pthread_mutex_destroy(&ctl->gauge_lock);
        free(ctl);
        return NULL;
}

struct se_store *se_controller_store(struct se_controller *ctl)
{
        return ctl->store;
}
