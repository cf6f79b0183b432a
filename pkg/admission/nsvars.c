/* The service variables of a namespace, rendered once for the patch, and
 * the cache that keeps them per namespace until a Service there changes.
 *
 * Why: computing the variables (sorting, formatting, deduplicating) and
 * escaping them into JSON and base64 was most of an admission's cost, and it
 * is the same for every pod of a namespace. The cached form holds each
 * variable's JSON and that JSON in base64 at each of the three alignments a
 * base64 stream can be at when it reaches the variable, so that a response
 * is mostly memcpy. The bytes are the same as when computed afresh: the
 * same rendering code makes both. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/hash.h>
#include <svcenv/hashmap.h>
#include <svcenv/store.h>

#include "admission_internal.h"

#define DEFAULT_CACHE_BYTES ((size_t)64 << 20)
#define MAX_KEY             (SE_MAX_NAME_LEN + 2) /* links flag, namespace, NUL */

void put_var(struct se_strbuf *sb, const char *name, const char *value)
{
        se_strbuf_puts(sb, "{\"name\":");
        json_put_string(sb, name);
        se_strbuf_puts(sb, ",\"value\":");
        json_put_string(sb, value);
        se_strbuf_putc(sb, '}');
}

static size_t exec_size(const char *name, const char *value)
{
        return strlen(name) + 1 + (value ? strlen(value) : 0) + 1 + sizeof(char *);
}

static size_t b64_len(size_t n)
{
        return (n + 2) / 3 * 4;
}

struct nsvars *nsvars_unref(struct nsvars *nv)
{
        if (!nv || atomic_fetch_sub(&nv->refs, 1) != 1)
                return NULL;
        se_env_list_release(&nv->list);
        se_hashmap_release(&nv->index);
        free(nv->run_blob[0]);
        free(nv->run_blob[1]);
        free(nv->v);
        free(nv->blob);
        free(nv->key);
        free(nv);
        return NULL;
}

/* nv->run[mode]: its JSON, then its base64 at the three alignments. */
static int make_run(struct nsvars *nv, int mode)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        render_run(&sb, nv, "containers", 0, mode == RUN_WHOLE);
        size_t json_len = sb.len, off[3];
        se_strbuf_putc(&sb, '\0');
        for (unsigned h = 0; h < 3; h++) {
                size_t whole = (json_len - h) / 3 * 3; /* json_len > 2 */
                off[h] = sb.len;
                nv->run[mode].b64_len[h] = b64_len(whole);
                if (se_strbuf_grow(&sb, b64_len(whole) + 1) < 0)
                        break;
                se_base64_encode(sb.buf + h, whole, sb.buf + sb.len);
                sb.len += b64_len(whole) + 1;
        }
        if (se_strbuf_failed(&sb)) {
                int r = se_strbuf_failed(&sb);
                se_strbuf_release(&sb);
                return r;
        }
        sb.buf[sb.len] = '\0';
        size_t len = 0;
        char *blob = se_strbuf_detach(&sb, &len);
        if (!blob)
                return -ENOMEM;
        nv->run_blob[mode] = blob;
        nv->run[mode].json = blob;
        nv->run[mode].json_len = json_len;
        for (unsigned h = 0; h < 3; h++)
                nv->run[mode].b64[h] = blob + off[h];
        nv->bytes += len;
        return 0;
}

int nsvars_build(const struct se_envvars_input *in, const char *ns, bool links, bool with_b64,
                 struct nsvars **ret)
{
        *ret = NULL;
        struct nsvars *nv = calloc(1, sizeof(*nv));
        if (!nv)
                return -ENOMEM;
        atomic_init(&nv->refs, 1);
        se_env_list_init(&nv->list);
        nv->index = (struct se_hashmap)SE_HASHMAP_INIT;
        int r = se_envvars_services(in, ns, links, &nv->list);
        if (r < 0) {
                free(nv);
                return r;
        }
        nv->n = nv->list.n;
        size_t *off = nv->n ? calloc(nv->n * 4, sizeof(*off)) : NULL;
        nv->v = nv->n ? calloc(nv->n, sizeof(*nv->v)) : NULL;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        if (nv->n && (!off || !nv->v)) {
                free(off);
                nsvars_unref(nv);
                return -ENOMEM;
        }
        int index_err = 0;
        /* offsets first: the buffer moves while it grows */
        for (size_t i = 0; i < nv->n; i++) {
                const struct se_env_entry *e = &nv->list.items[i];
                struct rvar *v = &nv->v[i];
                v->name = e->name;
                v->value = e->value;
                v->exec_size = exec_size(e->name, e->value);
                nv->exec_total += v->exec_size;
                /* the index pays off only when reused (cached entries) */
                if (with_b64 &&
                    se_hashmap_put(&nv->index, e->name, (void *)(uintptr_t)(i + 1), NULL) < 0)
                        index_err = -ENOMEM;
                off[i * 4] = sb.len;
                put_var(&sb, e->name, e->value);
                v->json_len = sb.len - off[i * 4];
                se_strbuf_putc(&sb, '\0');
        }
        for (unsigned h = 0; with_b64 && h < 3; h++) {
                for (size_t i = 0; i < nv->n; i++) {
                        struct rvar *v = &nv->v[i];
                        size_t whole = v->json_len < h ? 0 : (v->json_len - h) / 3 * 3;
                        off[i * 4 + 1 + h] = sb.len;
                        v->b64_len[h] = b64_len(whole);
                        if (se_strbuf_grow(&sb, v->b64_len[h] + 1) < 0)
                                break;
                        /* the JSON is in sb too: encode from its offset */
                        se_base64_encode(sb.buf + off[i * 4] + h, whole, sb.buf + sb.len);
                        sb.len += v->b64_len[h] + 1;
                }
        }
        r = index_err ? index_err : se_strbuf_failed(&sb);
        if (r < 0) {
                se_strbuf_release(&sb);
                free(off);
                nsvars_unref(nv);
                return r;
        }
        sb.buf[sb.len] = '\0';
        nv->blob = se_strbuf_detach(&sb, &nv->bytes);
        if (!nv->blob) {
                free(off);
                nsvars_unref(nv);
                return -ENOMEM;
        }
        for (size_t i = 0; i < nv->n; i++) {
                nv->v[i].json = nv->blob + off[i * 4];
                for (unsigned h = 0; with_b64 && h < 3; h++)
                        nv->v[i].b64[h] = nv->blob + off[i * 4 + 1 + h];
        }
        free(off);
        nv->indexed = with_b64;
        nv->bytes += sizeof(*nv) + nv->n * sizeof(*nv->v) + nv->list.arena.total +
                     nv->list.alloc * sizeof(*nv->list.items) +
                     nv->n * 2 * sizeof(struct se_hashmap_slot);
        for (int m = 0; with_b64 && nv->n && m < 2; m++) {
                r = make_run(nv, m);
                if (r < 0) {
                        nsvars_unref(nv);
                        return r;
                }
        }
        *ret = nv;
        return 0;
}

/* --- base64 output stream --- */

void b64w_add(struct b64w *w, const void *data, size_t n)
{
        const unsigned char *p = data;
        w->raw += n;
        while (w->npend && n) {
                w->pend[w->npend++] = *p++;
                n--;
                if (w->npend == 3) {
                        if (se_strbuf_grow(w->out, 5) == 0) {
                                se_base64_encode(w->pend, 3, w->out->buf + w->out->len);
                                w->out->len += 4;
                        }
                        w->npend = 0;
                }
        }
        size_t whole = n / 3 * 3;
        if (whole && se_strbuf_grow(w->out, b64_len(whole) + 1) == 0) {
                se_base64_encode(p, whole, w->out->buf + w->out->len);
                w->out->len += b64_len(whole);
        }
        for (size_t i = whole; i < n; i++)
                w->pend[w->npend++] = p[i];
}

void b64w_add_var(struct b64w *w, const struct rvar *v)
{
        unsigned h = (3 - w->npend) % 3; /* bytes that complete the pending group */
        if (!v->b64[h] || v->json_len < h) {
                b64w_add(w, v->json, v->json_len);
                return;
        }
        b64w_add(w, v->json, h);
        size_t whole = (v->json_len - h) / 3 * 3;
        se_strbuf_add(w->out, v->b64[h], v->b64_len[h]);
        w->raw += whole;
        b64w_add(w, v->json + h + whole, v->json_len - h - whole);
}

void b64w_finish(struct b64w *w)
{
        if (w->npend && se_strbuf_grow(w->out, 5) == 0) {
                se_base64_encode(w->pend, w->npend, w->out->buf + w->out->len);
                w->out->len += 4;
        }
        w->npend = 0;
}

/* --- the cache --- */

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
                nsvars_unref(nv);
        }
}

static void drop_all(struct se_admission_cache *c)
{
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&c->map, &i, &k, &v);) {
                atomic_fetch_add(&c->invalidations, 1);
                nsvars_unref(v);
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
                        strcpy(key + 1, o->meta.namespace);
                        drop(c, key);
                }
        }
        pthread_mutex_unlock(&c->lock);
}

struct se_admission_cache *se_admission_cache_new(struct se_store *store, size_t max_bytes)
{
        struct se_admission_cache *c = calloc(1, sizeof(*c));
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

const struct se_store *cache_store(const struct se_admission_cache *c)
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

int cache_get(struct se_admission_cache *c, const struct se_envvars_input *in, const char *ns,
              bool links, struct nsvars **ret)
{
        char key[MAX_KEY];
        if (strlen(ns) + 2 > MAX_KEY) /* not a namespace name: not cached */
                return nsvars_build(in, ns, links, false, ret);
        key[0] = links ? '1' : '0';
        strcpy(key + 1, ns);
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
        int r = nsvars_build(in, ns, links, true, &nv);
        if (r < 0)
                return r;
        nv->key = strdup(key);
        pthread_mutex_lock(&c->lock);
        struct nsvars *other = se_hashmap_get(&c->map, key);
        if (other) { /* another thread built it meanwhile: use that one */
                atomic_fetch_add(&other->refs, 1);
                other->used = ++c->clock;
                pthread_mutex_unlock(&c->lock);
                nsvars_unref(nv);
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
