/* The per-namespace cache of rendered service variables.
 *
 * Why: computing the variables (sorting, formatting, deduplicating) and
 * escaping them into JSON and base64 was most of an admission's cost, and it
 * is the same for every pod of a namespace. An entry lives until a Service
 * of its namespace changes (the store's change callbacks) or the cache
 * passes its size cap (least recently used first). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/hashmap.h>
#include <svcenv/store.h>

#include "admission_internal.h"

#define DEFAULT_CACHE_BYTES ((size_t)64 << 20)
#define MAX_KEY             (SE_MAX_NAME_LEN + 2) /* links flag, namespace, NUL */

struct se_admission_cache {
        struct se_store *store;
        pthread_mutex_t lock;
        struct se_hashmap map; /* key -> struct nsvars* (one reference each) */
        size_t bytes, max_bytes;
        uint64_t clock;
        _Atomic uint64_t hits, misses, invalidations;
};

static void drop(struct se_admission_cache *c, const char *key)
{
        struct nsvars *nv = se_hashmap_remove(&c->map, key);
        if (nv) {
                c->bytes -= nv->bytes;
                atomic_fetch_add(&c->invalidations, 1);
                admission_nsvars_unref(nv);
        }
}

static void drop_all(struct se_admission_cache *c)
{
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&c->map, &i, &k, &v);) {
                atomic_fetch_add(&c->invalidations, 1);
                admission_nsvars_unref(v);
        }
        se_hashmap_release(&c->map);
        c->bytes = 0;
}

/* Runs inside the store's write lock, so no admission is reading the store
 * (they hold its read lock from lookup to response): an entry built under
 * the read lock can never outlive the state it was built from. */
static void on_service(void *data, enum se_store_event ev, const struct se_object *old,
                       const struct se_object *new_obj)
{
        (void)ev;
        struct se_admission_cache *c = data;
        const struct se_object *o = new_obj ? new_obj : old;
        /* an informer resync puts the same object again */
        if (old && new_obj && old->meta.resource_version && new_obj->meta.resource_version &&
            *old->meta.resource_version &&
            strcmp(old->meta.resource_version, new_obj->meta.resource_version) == 0)
                return;
        pthread_mutex_lock(&c->lock);
        if (strcmp(o->meta.namespace, "default") == 0 && strcmp(o->meta.name, "kubernetes") == 0) {
                drop_all(c); /* every namespace has the master service's variables */
        } else if (strlen(o->meta.namespace) + 2 <= MAX_KEY) {
                char key[MAX_KEY];
                for (int links = 0; links < 2; links++) {
                        key[0] = links ? '1' : '0';
                        memcpy(key + 1, o->meta.namespace, strlen(o->meta.namespace) + 1);
                        drop(c, key);
                }
        }
        pthread_mutex_unlock(&c->lock);
}

struct se_admission_cache *se_admission_cache_new(struct se_store *store, size_t max_bytes)
{
        struct se_admission_cache *c = se_calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->store = store;
        c->max_bytes = max_bytes ? max_bytes : DEFAULT_CACHE_BYTES;
        c->map = (struct se_hashmap)SE_HASHMAP_INIT;
        pthread_mutex_init(&c->lock, NULL);
        if (se_store_subscribe(store, SE_KIND_SERVICE, on_service, c) < 0) {
                pthread_mutex_destroy(&c->lock);
                free(c);
                return NULL;
        }
        return c;
}

struct se_admission_cache *se_admission_cache_free(struct se_admission_cache *c)
{
        if (!c)
                return NULL;
        se_store_unsubscribe(c->store, SE_KIND_SERVICE, on_service, c);
        drop_all(c);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

void se_admission_cache_stats(struct se_admission_cache *c, struct se_admission_cache_stats *ret)
{
        pthread_mutex_lock(&c->lock);
        ret->bytes = c->bytes;
        ret->entries = 0;
        for (size_t i = 0; se_hashmap_next(&c->map, &i, NULL, NULL);)
                ret->entries++;
        pthread_mutex_unlock(&c->lock);
        ret->hits = atomic_load(&c->hits);
        ret->misses = atomic_load(&c->misses);
        ret->invalidations = atomic_load(&c->invalidations);
}

const struct se_store *admission_cache_store(const struct se_admission_cache *c)
{
        return c->store;
}

/* Drops the least recently used entries until the cache fits (keep stays). */
static void evict(struct se_admission_cache *c, const struct nsvars *keep)
{
        while (c->bytes > c->max_bytes) {
                const char *k, *oldest = NULL;
                void *v;
                uint64_t min = UINT64_MAX;
                for (size_t i = 0; se_hashmap_next(&c->map, &i, &k, &v);) {
                        const struct nsvars *nv = v;
                        if (nv != keep && nv->used < min) {
                                min = nv->used;
                                oldest = k;
                        }
                }
                if (!oldest)
                        return;
                drop(c, oldest);
        }
}

int admission_cache_get(struct se_admission_cache *c, const struct se_envvars_input *in,
                        const char *ns, bool links, struct nsvars **ret)
{
        char key[MAX_KEY];
        if (strlen(ns) + 2 > MAX_KEY) /* not a namespace name: not cached */
                return admission_nsvars_build(in, ns, links, false, ret);
        key[0] = links ? '1' : '0';
        memcpy(key + 1, ns, strlen(ns) + 1); /* fits: checked above */
        pthread_mutex_lock(&c->lock);
        struct nsvars *nv = se_hashmap_get(&c->map, key);
        if (nv) {
                atomic_fetch_add(&nv->refs, 1);
                nv->used = ++c->clock;
        }
        pthread_mutex_unlock(&c->lock);
        if (nv) {
                atomic_fetch_add(&c->hits, 1);
                *ret = nv;
                return 0;
        }
        atomic_fetch_add(&c->misses, 1);
        /* built outside the cache lock (the store's read lock is held) */
        int r = admission_nsvars_build(in, ns, links, true, &nv);
        if (r < 0)
                return r;
        nv->key = se_strdup(key);
        pthread_mutex_lock(&c->lock);
        struct nsvars *other = se_hashmap_get(&c->map, key);
        if (other) { /* another thread built it meanwhile: use that one */
                atomic_fetch_add(&other->refs, 1);
                other->used = ++c->clock;
                pthread_mutex_unlock(&c->lock);
                admission_nsvars_unref(nv);
                *ret = other;
                return 0;
        }
        if (nv->key && nv->bytes <= c->max_bytes &&
            se_hashmap_put(&c->map, nv->key, nv, NULL) == 0) {
                atomic_fetch_add(&nv->refs, 1);
                nv->used = ++c->clock;
                c->bytes += nv->bytes;
                evict(c, nv);
        }
        pthread_mutex_unlock(&c->lock);
        *ret = nv;
        return 0;
}
