/* Informer: list + watch one kind into the store (see kube_watch.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/backoff.h>
#include <svcenv/decode.h>
#include <svcenv/kube_watch.h>
#include <svcenv/strv.h>
#include <svcenv/timeutil.h>

#include "kube_internal.h"

struct se_kube_informer {
        struct se_kube_client *c;
        enum se_kind kind;
        struct se_store *store;
        char *ns, *label_selector, *field_selector;
        unsigned watch_timeout_s;
        unsigned decode_flags;
        se_kube_informer_error_fn on_error;
        void *data;
        pthread_t thread;
        bool started;
        atomic_bool stop;
        atomic_bool synced;
        atomic_uint lists;
        char rv[SE_KUBE_RV_MAX];
};

struct se_kube_informer *se_kube_informer_new(struct se_kube_client *c, enum se_kind kind,
                                              struct se_store *store,
                                              const struct se_kube_informer_opts *opts,
                                              se_kube_informer_error_fn on_error, void *data)
{
        struct se_kube_informer *inf = se_calloc(1, sizeof(*inf));
        if (!inf)
                return NULL;
        inf->c = c;
        inf->kind = kind;
        inf->store = store;
        inf->on_error = on_error;
        inf->data = data;
        bool ok = true;
        if (opts) {
                ok &= !opts->ns || (inf->ns = se_strdup(opts->ns));
                ok &= !opts->label_selector ||
                      (inf->label_selector = se_strdup(opts->label_selector));
                ok &= !opts->field_selector ||
                      (inf->field_selector = se_strdup(opts->field_selector));
                inf->watch_timeout_s = opts->watch_timeout_s;
                inf->decode_flags = opts->decode_flags;
        }
        /* One object with a NUL in a value (valid for the API server) must
         * not keep the whole list failing, and so the informer unsynced. */
        inf->decode_flags |= SE_DECODE_NUL_AS_C080;
        if (!ok)
                return se_kube_informer_free(inf);
        return inf;
}

static char *key_of(const struct se_object *o)
{
        char *k;
        return se_asprintf(&k, "%s/%s", o->meta.namespace, o->meta.name) < 0 ? NULL : k;
}

/* What one relist put into the store: a reference to each object, sorted
 * by namespace and name afterwards (by key, not address: the controller may
 * have replaced a listed object with its own write meanwhile). No per-item key strings: 150,000
 * small copies freed at the end of a list would stay as holes among the new objects. */
struct relist {
        struct se_kube_informer *inf;
        bool track; /* false on the first list: nothing can be gone yet */
        struct se_object **put;
        size_t n, cap;
};

static int relist_item(void *data, struct se_object *obj)
{
        struct relist *rl = data;
        if (!rl->track)
                return se_store_put(rl->inf->store, obj);
        if (rl->n == rl->cap) {
                size_t cap = rl->cap ? rl->cap * 2 : 1024;
                struct se_object **v = se_reallocarray(rl->put, cap, sizeof(*v));
                if (!v) {
                        se_object_unref(obj);
                        return -ENOMEM;
                }
                rl->put = v;
                rl->cap = cap;
        }
        rl->put[rl->n++] = se_object_ref(obj);
        return se_store_put(rl->inf->store, obj);
}

static int cmp_key(const void *a, const void *b)
{
        const struct se_meta *x = &(*(const struct se_object *const *)a)->meta,
                             *y = &(*(const struct se_object *const *)b)->meta;
        int c = strcmp(x->namespace, y->namespace);
        return c ? c : strcmp(x->name, y->name);
}

/* Lists everything, puts it into the store and drops what is gone. */
static int relist(struct se_kube_informer *inf, struct se_diag *diag)
{
        se_store_rdlock(inf->store);
        bool had = se_store_count(inf->store, inf->kind, inf->ns) > 0;
        se_store_unlock(inf->store);
        struct relist rl = { inf, had, NULL, 0, 0 };
        struct se_kube_list_opts lo = { .label_selector = inf->label_selector,
                                        .field_selector = inf->field_selector,
                                        .decode_flags = inf->decode_flags };
        char rv[SE_KUBE_RV_MAX];
        int r = se_kube_list(inf->c, inf->kind, inf->ns, &lo, relist_item, &rl, rv, diag);
        if (r == 0 && rl.track) {
                if (rl.n > 1)
                        qsort(rl.put, rl.n, sizeof(*rl.put), cmp_key);
                const struct se_object **objs;
                se_store_rdlock(inf->store);
                long n = se_store_list(inf->store, inf->kind, inf->ns, &objs);
                struct se_strv gone = SE_STRV_INIT;
                for (long i = 0; i < n; i++) {
                        if (bsearch(&objs[i], rl.put, rl.n, sizeof(*rl.put), cmp_key))
                                continue;
                        char *k = key_of(objs[i]);
                        if (k)
                                (void)se_strv_push_consume(&gone, k);
                }
                free(objs);
                se_store_unlock(inf->store);
                for (size_t i = 0; i < gone.n; i++) {
                        char *slash = strchr(gone.v[i], '/');
                        *slash = '\0';
                        (void)se_store_delete(inf->store, inf->kind, gone.v[i], slash + 1);
                }
                se_strv_release(&gone);
        }
        if (r == 0) {
                snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
                atomic_fetch_add(&inf->lists, 1);
                atomic_store(&inf->synced, true);
        }
        for (size_t i = 0; i < rl.n; i++)
                se_object_unref(rl.put[i]);
        free(rl.put);
        return r;
}

static int on_event(void *data, enum se_kube_event_type type, const json_t *object)
{
        struct se_kube_informer *inf = data;
        if (type == SE_KUBE_BOOKMARK)
                return 0;
        struct se_object *obj;
        struct se_decode_error e;
        int r = se_decode_object_flags(object, inf->kind, NULL, inf->decode_flags, &obj, &e);
        if (r < 0)
                return r == -ENOMEM ? r : 0; /* a malformed object cannot be acted on */
        if (type == SE_KUBE_DELETED) {
                (void)se_store_delete(inf->store, inf->kind, obj->meta.namespace, obj->meta.name);
                se_object_unref(obj);
                return 0;
        }
        return se_store_put(inf->store, obj);
}

static void report(struct se_kube_informer *inf, int r, const struct se_diag *d)
{
        if (inf->on_error)
                inf->on_error(inf->data, r, d->text);
}

static void *run(void *arg)
{
        struct se_kube_informer *inf = arg;
        struct se_backoff bo;
        se_backoff_init(&bo, 800000000ull, 30000000000ull, 2.0, 1.0);
        bool need_list = true;
        while (!atomic_load(&inf->stop)) {
                struct se_diag d = { 0 };
                int r;
                uint64_t started = se_now_mono_ns();
                if (need_list) {
                        r = relist(inf, &d);
                        if (r == 0)
                                need_list = false;
                } else {
                        struct se_kube_watch_opts wo = { inf->label_selector, inf->field_selector,
                                                         inf->watch_timeout_s, 0 };
                        r = se_kube_watch(inf->c, se_kube_resource_of(inf->kind), inf->ns, &wo,
                                          inf->rv, on_event, inf, &inf->stop, &d);
                        if (r == -ESTALE)
                                need_list = true; /* 410: our version is gone */
                }
                if (atomic_load(&inf->stop) || r == -ECANCELED)
                        break;
                if (r == 0 || (r == -ESTALE && !need_list)) {
                        /* a watch that lasted is healthy again */
                        if (se_now_mono_ns() - started > 60000000000ull)
                                se_backoff_reset(&bo);
                        if (r == 0 && !need_list && se_now_mono_ns() - started > 1000000000ull)
                                continue;
                }
                if (r < 0)
                        report(inf, r, &d);
                if (r == -ESTALE)
                        continue; /* relist right away */
                (void)kube_sleep(inf->c, se_backoff_next(&bo), &inf->stop);
        }
        return NULL;
}

int se_kube_informer_start(struct se_kube_informer *inf)
{
        int r = pthread_create(&inf->thread, NULL, run, inf);
        if (r != 0)
                return -r;
        inf->started = true;
        return 0;
}

bool se_kube_informer_has_synced(const struct se_kube_informer *inf)
{
        return atomic_load(&inf->synced);
}

unsigned se_kube_informer_lists(const struct se_kube_informer *inf)
{
        return atomic_load(&inf->lists);
}

int se_kube_informer_wait_synced(const struct se_kube_informer *inf, unsigned timeout_ms)
{
        uint64_t end = se_now_mono_ns() + (uint64_t)timeout_ms * 1000000u;
        while (!atomic_load(&inf->synced)) {
                if (se_now_mono_ns() >= end)
                        return -ETIMEDOUT;
                struct timespec ts = { 0, 10000000 };
                nanosleep(&ts, NULL);
        }
        return 0;
}

struct se_kube_informer *se_kube_informer_free(struct se_kube_informer *inf)
{
        if (!inf)
                return NULL;
        atomic_store(&inf->stop, true);
        if (inf->started)
                pthread_join(inf->thread, NULL);
        free(inf->ns);
        free(inf->label_selector);
        free(inf->field_selector);
        free(inf);
        return NULL;
}
