/* The object store: kind -> namespace -> name, with change callbacks. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>
#include <svcenv/store.h>

#include "ptab_internal.h"

/* Objects of one kind and namespace that carry one label key=value. */
struct posting {
        const struct se_object **objs;
        uint32_t n, cap;
        char label[]; /* "key=value", the index's key */
};

struct ns_bucket {
        char *ns;
        struct ptab by_name; /* objects (one reference each) by meta.name */
        struct ptab by_label; /* struct posting* by label */
        bool index_broken; /* an index update failed: select scans instead */
        bool labels_indexed; /* by_label is kept (its kind's labels_indexed) */
};

static const char *obj_name(const void *entry)
{
        const struct se_object *o = entry;
        return o->meta.name ? o->meta.name : "";
}

static const char *posting_label(const void *entry)
{
        return ((const struct posting *)entry)->label;
}

struct subscriber {
        se_store_fn fn;
        void *data;
};

struct kind_table {
        struct se_hashmap by_ns; /* namespace -> struct ns_bucket* */
        size_t count;
        /* The label indexes exist from the kind's first select on: most
         * kinds of a daemon are never selected (svcenv-dns selects none),
         * and their postings would cost a store of 10,000 slices 1.4 MB.
         * Built by the first select (a reader) under index_lock, which it
         * sets last; writers hold the write lock, so no reader builds
         * meanwhile. */
        bool labels_indexed;
        struct subscriber *subs;
        size_t n_subs;
};

struct se_store {
        struct kind_table kinds[SE_KIND_COUNT];
        /* behind pointers so that const readers can lock */
        pthread_rwlock_t *lock;
        pthread_mutex_t *index_lock; /* readers building a kind's label index */
};

struct se_store *se_store_new(void)
{
        struct se_store *s = se_calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->lock = se_malloc(sizeof(*s->lock));
        s->index_lock = se_malloc(sizeof(*s->index_lock));
        if (!s->lock || !s->index_lock || pthread_rwlock_init(s->lock, NULL) != 0) {
                free(s->lock);
                free(s->index_lock);
                free(s);
                return NULL;
        }
        if (pthread_mutex_init(s->index_lock, NULL) != 0) {
                pthread_rwlock_destroy(s->lock);
                free(s->lock);
                free(s->index_lock);
                free(s);
                return NULL;
        }
        return s;
}

static void posting_free(struct posting *p)
{
        free(p->objs);
        free(p);
}

static void bucket_free(struct ns_bucket *b)
{
        void *v;
        for (uint32_t i = 0; (v = model_ptab_next(&b->by_name, &i));)
                se_object_unref(v);
        model_ptab_release(&b->by_name);
        for (uint32_t i = 0; (v = model_ptab_next(&b->by_label, &i));)
                posting_free(v);
        model_ptab_release(&b->by_label);
        free(b->ns);
        free(b);
}

struct se_store *se_store_free(struct se_store *s)
{
        if (!s)
                return NULL;
        for (int k = 0; k < SE_KIND_COUNT; k++) {
                const char *key;
                void *v;
                for (size_t i = 0; se_hashmap_next(&s->kinds[k].by_ns, &i, &key, &v);)
                        bucket_free(v);
                se_hashmap_release(&s->kinds[k].by_ns);
                free(s->kinds[k].subs);
        }
        pthread_rwlock_destroy(s->lock);
        free(s->lock);
        pthread_mutex_destroy(s->index_lock);
        free(s->index_lock);
        free(s);
        return NULL;
}

void se_store_rdlock(const struct se_store *s)
{
        pthread_rwlock_rdlock(s->lock);
}

void se_store_unlock(const struct se_store *s)
{
        pthread_rwlock_unlock(s->lock);
}

static void notify(struct kind_table *t, enum se_store_event ev, const struct se_object *old,
                   const struct se_object *new_obj)
{
        for (size_t i = 0; i < t->n_subs; i++)
                t->subs[i].fn(t->subs[i].data, ev, old, new_obj);
}

static struct ns_bucket *bucket_get(struct kind_table *t, const char *ns, bool create)
{
        struct ns_bucket *b = se_hashmap_get(&t->by_ns, ns);
        if (b || !create)
                return b;
        b = se_calloc(1, sizeof(*b));
        if (!b)
                return NULL;
        b->by_name = PTAB_INIT(obj_name);
        b->by_label = PTAB_INIT(posting_label);
        b->labels_indexed = __atomic_load_n(&t->labels_indexed, __ATOMIC_ACQUIRE);
        b->ns = se_strdup(ns);
        if (!b->ns || se_hashmap_put(&t->by_ns, b->ns, b, NULL) < 0) {
                free(b->ns);
                free(b);
                return NULL;
        }
        return b;
}

/* "key=value" into buf; false when it does not fit (such labels are not
 * indexed: select falls back to a scan for the bucket). */
static bool label_key(char *buf, size_t size, const struct se_kv *kv)
{
        /* no printf: a select per service makes one */
        const char *k = kv->key ? kv->key : "(null)", *v = kv->value ? kv->value : "(null)";
        size_t kl = strlen(k), vl = strlen(v);
        if (kl + vl + 2 > size)
                return false;
        memcpy(buf, k, kl);
        buf[kl] = '=';
        memcpy(buf + kl + 1, v, vl + 1);
        return true;
}

static void index_add(struct ns_bucket *b, const struct se_object *o)
{
        if (!b->labels_indexed)
                return;
        for (uint32_t i = 0; i < o->meta.labels.n && !b->index_broken; i++) {
                char key[512];
                if (!label_key(key, sizeof(key), &o->meta.labels.items[i])) {
                        b->index_broken = true;
                        break;
                }
                struct posting *p = model_ptab_get(&b->by_label, key);
                if (!p) {
                        size_t len = strlen(key) + 1;
                        p = se_calloc(1, sizeof(*p) + len);
                        if (p)
                                memcpy(p->label, key, len);
                        if (!p || model_ptab_put(&b->by_label, p, NULL) < 0) {
                                free(p);
                                b->index_broken = true;
                                break;
                        }
                }
                if (p->n == p->cap) {
                        /* from 1: many labels are one object's own (a
                         * StatefulSet pod's name, a lone pod's hash) */
                        uint32_t cap = p->cap ? p->cap * 2 : 1;
                        const struct se_object **objs =
                                se_reallocarray(p->objs, cap, sizeof(*objs));
                        if (!objs) {
                                b->index_broken = true;
                                break;
                        }
                        p->objs = objs;
                        p->cap = cap;
                }
                p->objs[p->n++] = o;
        }
}

static void index_remove(struct ns_bucket *b, const struct se_object *o)
{
        if (b->index_broken || !b->labels_indexed)
                return;
        for (uint32_t i = 0; i < o->meta.labels.n; i++) {
                char key[512];
                struct posting *p;
                if (!label_key(key, sizeof(key), &o->meta.labels.items[i]) ||
                    !(p = model_ptab_get(&b->by_label, key)))
                        continue;
                for (size_t k = 0; k < p->n; k++) {
                        if (p->objs[k] == o) {
                                p->objs[k] = p->objs[--p->n];
                                break;
                        }
                }
                if (p->n == 0) {
                        model_ptab_remove(&b->by_label, p->label);
                        posting_free(p);
                }
        }
}

/* Inserts under the write lock; replace=false refuses an existing key. */
static int insert(struct se_store *s, struct se_object *obj, bool replace)
{
        struct kind_table *t = &s->kinds[obj->kind];
        const char *ns = obj->meta.namespace ? obj->meta.namespace : "";
        const char *name = obj->meta.name ? obj->meta.name : "";
        struct ns_bucket *b = bucket_get(t, ns, true);
        if (!b)
                return -ENOMEM;
        struct se_object *old = model_ptab_get(&b->by_name, name);
        if (old && !replace)
                return -EEXIST;
        void *replaced = NULL;
        if (model_ptab_put(&b->by_name, obj, &replaced) < 0)
                return -ENOMEM;
        if (old)
                index_remove(b, old);
        index_add(b, obj);
        if (old) {
                notify(t, SE_STORE_UPDATE, old, obj);
                se_object_unref(old);
        } else {
                t->count++;
                notify(t, SE_STORE_ADD, NULL, obj);
        }
        return 0;
}

int se_store_put(struct se_store *s, struct se_object *obj)
{
        pthread_rwlock_wrlock(s->lock);
        int r = insert(s, obj, true);
        pthread_rwlock_unlock(s->lock);
        if (r < 0)
                se_object_unref(obj);
        return r;
}

int se_store_add(struct se_store *s, struct se_object *obj)
{
        pthread_rwlock_wrlock(s->lock);
        int r = insert(s, obj, false);
        pthread_rwlock_unlock(s->lock);
        if (r < 0)
                se_object_unref(obj);
        return r;
}

int se_store_delete(struct se_store *s, enum se_kind kind, const char *ns, const char *name)
{
        if ((unsigned)kind >= SE_KIND_COUNT)
                return -EINVAL;
        pthread_rwlock_wrlock(s->lock);
        struct kind_table *t = &s->kinds[kind];
        struct ns_bucket *b = bucket_get(t, ns ? ns : "", false);
        struct se_object *old = b ? model_ptab_remove(&b->by_name, name ? name : "") : NULL;
        if (old) {
                t->count--;
                index_remove(b, old);
                notify(t, SE_STORE_DELETE, old, NULL);
                if (b->by_name.n == 0) {
                        se_hashmap_remove(&t->by_ns, b->ns);
                        bucket_free(b);
                }
        }
        pthread_rwlock_unlock(s->lock);
        se_object_unref(old);
        return old ? 0 : -ENOENT;
}

const struct se_object *se_store_get(const struct se_store *s, enum se_kind kind, const char *ns,
                                     const char *name)
{
        if ((unsigned)kind >= SE_KIND_COUNT)
                return NULL;
        const struct ns_bucket *b = se_hashmap_get(&s->kinds[kind].by_ns, ns ? ns : "");
        return b ? model_ptab_get(&b->by_name, name ? name : "") : NULL;
}

static int cmp_obj(const void *a, const void *b)
{
        const struct se_object *x = *(const struct se_object *const *)a;
        const struct se_object *y = *(const struct se_object *const *)b;
        int c = strcmp(x->meta.namespace, y->meta.namespace);
        return c ? c : strcmp(x->meta.name, y->meta.name);
}

/* The shortest posting list of the selector's labels in b; NULL when
 * some label has none (nothing matches). */
static const struct posting *best_posting(const struct ns_bucket *b,
                                          const struct se_kvlist *selector)
{
        const struct posting *best = NULL;
        for (uint32_t i = 0; i < selector->n; i++) {
                char key[512];
                if (!label_key(key, sizeof(key), &selector->items[i]))
                        return NULL; /* no indexed label is that long: none match */
                const struct posting *p = model_ptab_get(&b->by_label, key);
                if (!p)
                        return NULL;
                if (!best || p->n < best->n)
                        best = p;
        }
        return best;
}

/* Appends the bucket's objects that match (selector may be NULL). With a
 * selector, only the shortest posting list of its labels (best) is
 * checked; a one-label selector matches all of it. */
static void collect(const struct ns_bucket *b, const struct se_kvlist *selector,
                    const struct posting *best, const struct se_object **out, size_t *n)
{
        const struct se_object *o;
        if (selector && selector->n && !b->index_broken) {
                if (best && selector->n == 1) {
                        memcpy(out + *n, best->objs, best->n * sizeof(*out));
                        *n += best->n;
                        return;
                }
                for (size_t i = 0; best && i < best->n; i++)
                        if (se_selector_matches(selector, &best->objs[i]->meta.labels))
                                out[(*n)++] = best->objs[i];
                return;
        }
        for (uint32_t i = 0; (o = model_ptab_next(&b->by_name, &i));) {
                if (!selector || se_selector_matches(selector, &o->meta.labels))
                        out[(*n)++] = o;
        }
}

/* The label indexes of kind t, built on its first select. */
static void ensure_label_index(const struct se_store *s, const struct kind_table *t)
{
        if (__atomic_load_n(&t->labels_indexed, __ATOMIC_ACQUIRE))
                return;
        pthread_mutex_lock(s->index_lock);
        struct kind_table *w = SE_UNCONST(struct kind_table, t);
        if (!w->labels_indexed) {
                const char *k;
                void *v;
                for (size_t i = 0; se_hashmap_next(&w->by_ns, &i, &k, &v);) {
                        struct ns_bucket *b = v;
                        const struct se_object *o;
                        b->labels_indexed = true;
                        for (uint32_t j = 0; (o = model_ptab_next(&b->by_name, &j));)
                                index_add(b, o);
                }
                __atomic_store_n(&w->labels_indexed, true, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(s->index_lock);
}

static long list_matching(const struct se_store *s, enum se_kind kind, const char *ns,
                          const struct se_kvlist *selector, bool sorted,
                          const struct se_object ***ret)
{
        *ret = NULL;
        if ((unsigned)kind >= SE_KIND_COUNT)
                return -EINVAL;
        const struct kind_table *t = &s->kinds[kind];
        if (selector && selector->n)
                ensure_label_index(s, t);
        const struct ns_bucket *b = ns ? se_hashmap_get(&t->by_ns, ns) : NULL;
        const struct posting *best = NULL;
        size_t cap = ns ? (b ? b->by_name.n : 0) : t->count;
        if (cap && b && selector && selector->n && !b->index_broken) {
                /* only the posting list is checked: room for it (a label
                 * select per service must not cost the namespace's size) */
                best = best_posting(b, selector);
                cap = best ? best->n : 0;
        }
        if (cap == 0)
                return 0;
        const struct se_object **out = se_calloc(cap, sizeof(*out));
        if (!out)
                return -ENOMEM;
        size_t n = 0;
        if (ns) {
                collect(b, selector, best, out, &n);
        } else {
                const char *k;
                void *v;
                for (size_t i = 0; se_hashmap_next(&t->by_ns, &i, &k, &v);) {
                        const struct ns_bucket *nb = v;
                        bool indexed = selector && selector->n && !nb->index_broken;
                        collect(nb, selector, indexed ? best_posting(nb, selector) : NULL, out, &n);
                }
        }
        if (n == 0) {
                free(out);
                return 0;
        }
        if (sorted && n > 1)
                qsort(out, n, sizeof(*out), cmp_obj);
        *ret = out;
        return (long)n;
}

long se_store_list(const struct se_store *s, enum se_kind kind, const char *ns,
                   const struct se_object ***ret)
{
        return list_matching(s, kind, ns, NULL, true, ret);
}

long se_store_list_unordered(const struct se_store *s, enum se_kind kind, const char *ns,
                             const struct se_object ***ret)
{
        return list_matching(s, kind, ns, NULL, false, ret);
}

long se_store_select(const struct se_store *s, enum se_kind kind, const char *ns,
                     const struct se_kvlist *selector, const struct se_object ***ret)
{
        return list_matching(s, kind, ns, selector, true, ret);
}

size_t se_store_count(const struct se_store *s, enum se_kind kind, const char *ns)
{
        if ((unsigned)kind >= SE_KIND_COUNT)
                return 0;
        if (!ns)
                return s->kinds[kind].count;
        const struct ns_bucket *b = se_hashmap_get(&s->kinds[kind].by_ns, ns);
        return b ? b->by_name.n : 0;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(const char *const *)a, *(const char *const *)b);
}

long se_store_namespaces(const struct se_store *s, enum se_kind kind, const char ***ret)
{
        *ret = NULL;
        if ((unsigned)kind >= SE_KIND_COUNT)
                return -EINVAL;
        const struct se_hashmap *m = &s->kinds[kind].by_ns;
        if (m->n == 0)
                return 0;
        const char **out = se_calloc(m->n, sizeof(*out));
        if (!out)
                return -ENOMEM;
        size_t n = 0;
        const char *k;
        for (size_t i = 0; se_hashmap_next(m, &i, &k, NULL);)
                out[n++] = k;
        qsort(out, n, sizeof(*out), cmp_str);
        *ret = out;
        return (long)n;
}

int se_store_subscribe(struct se_store *s, enum se_kind kind, se_store_fn fn, void *data)
{
        if ((unsigned)kind >= SE_KIND_COUNT)
                return -EINVAL;
        pthread_rwlock_wrlock(s->lock);
        struct kind_table *t = &s->kinds[kind];
        struct subscriber *subs = se_reallocarray(t->subs, t->n_subs + 1, sizeof(*subs));
        if (subs) {
                subs[t->n_subs++] = (struct subscriber){ fn, data };
                t->subs = subs;
        }
        pthread_rwlock_unlock(s->lock);
        return subs ? 0 : -ENOMEM;
}

int se_store_unsubscribe(struct se_store *s, enum se_kind kind, se_store_fn fn, void *data)
{
        if ((unsigned)kind >= SE_KIND_COUNT)
                return -EINVAL;
        pthread_rwlock_wrlock(s->lock);
        struct kind_table *t = &s->kinds[kind];
        int r = -ENOENT;
        for (size_t i = 0; i < t->n_subs; i++) {
                if (t->subs[i].fn == fn && t->subs[i].data == data) {
                        memmove(&t->subs[i], &t->subs[i + 1],
                                (t->n_subs - i - 1) * sizeof(*t->subs));
                        t->n_subs--;
                        r = 0;
                        break;
                }
        }
        pthread_rwlock_unlock(s->lock);
        return r;
}

bool se_selector_matches(const struct se_kvlist *selector, const struct se_kvlist *labels)
{
        for (uint32_t i = 0; i < selector->n; i++) {
                const char *v = se_kvlist_get(labels, selector->items[i].key);
                if (!v || strcmp(v, selector->items[i].value) != 0)
                        return false;
        }
        return true;
}
