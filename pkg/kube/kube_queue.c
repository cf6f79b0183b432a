/* Rate-limited work queue (see kube_queue.h). One record per key tracks
 * whether it is queued (dirty), being processed, delayed, and its failures;
 * the record goes away when none of these holds. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>
#include <svcenv/kube_client.h>
#include <svcenv/kube_queue.h>
#include <svcenv/timeutil.h>

struct item {
        char *key;
        bool dirty; /* wanted: in the FIFO, or re-add after processing */
        bool processing;
        unsigned delayed; /* 1 when in the delay list */
        unsigned failures;
        uint64_t added_ns; /* entered the FIFO */
        uint64_t started_ns; /* handed out by get() */
};

struct delayed {
        struct item *it;
        uint64_t due_ns;
};

struct se_kube_queue {
        pthread_mutex_t lock;
        pthread_cond_t cond; /* key ready, delay list changed, shutdown, done */
        struct se_kube_queue_opts opts;
        struct se_hashmap items;
        struct item **fifo; /* ring */
        size_t head, n, cap;
        struct delayed *later;
        size_t n_later, cap_later;
        struct se_token_bucket bucket;
        size_t n_processing;
        bool shutting_down;
        uint64_t adds, retries;
};

struct se_kube_queue *se_kube_queue_new(const struct se_kube_queue_opts *opts)
{
        struct se_kube_queue *q = se_calloc(1, sizeof(*q));
        if (!q)
                return NULL;
        if (opts)
                q->opts = *opts;
        if (!q->opts.base_delay_ns)
                q->opts.base_delay_ns = 5000000ull;
        if (!q->opts.max_delay_ns)
                q->opts.max_delay_ns = 1000ull * 1000000000ull;
        if (q->opts.qps == 0)
                q->opts.qps = 10;
        if (!q->opts.burst)
                q->opts.burst = 100;
        se_token_bucket_init(&q->bucket, q->opts.qps, q->opts.burst, se_now_mono_ns());
        pthread_mutex_init(&q->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&q->cond, &ca);
        pthread_condattr_destroy(&ca);
        return q;
}

struct se_kube_queue *se_kube_queue_free(struct se_kube_queue *q)
{
        if (!q)
                return NULL;
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&q->items, &i, &k, &v);) {
                struct item *it = v;
                free(it->key);
                free(it);
        }
        se_hashmap_release(&q->items);
        free(q->fifo);
        free(q->later);
        pthread_mutex_destroy(&q->lock);
        pthread_cond_destroy(&q->cond);
        free(q);
        return NULL;
}

static struct item *lookup(struct se_kube_queue *q, const char *key, bool create)
{
        struct item *it = se_hashmap_get(&q->items, key);
        if (it || !create)
                return it;
        if (q->items.n >= SE_KUBE_QUEUE_MAX_KEYS)
                return NULL;
        it = se_calloc(1, sizeof(*it));
        if (!it || !(it->key = se_strdup(key)) ||
            se_hashmap_put(&q->items, it->key, it, NULL) < 0) {
                if (it)
                        free(it->key);
                free(it);
                return NULL;
        }
        return it;
}

static void maybe_drop(struct se_kube_queue *q, struct item *it)
{
        if (it->dirty || it->processing || it->delayed || it->failures)
                return;
        se_hashmap_remove(&q->items, it->key);
        free(it->key);
        free(it);
}

static int push(struct se_kube_queue *q, struct item *it)
{
        if (q->n == q->cap) {
                size_t cap = q->cap ? q->cap * 2 : 64;
                struct item **nf = se_calloc(cap, sizeof(*nf));
                if (!nf)
                        return -ENOMEM;
                for (size_t i = 0; i < q->n; i++)
                        nf[i] = q->fifo[(q->head + i) % q->cap];
                free(q->fifo);
                q->fifo = nf;
                q->head = 0;
                q->cap = cap;
        }
        q->fifo[(q->head + q->n) % q->cap] = it;
        q->n++;
        q->adds++;
        it->added_ns = se_now_mono_ns();
        pthread_cond_signal(&q->cond);
        return 0;
}

/* Marks it wanted; queues it unless it is queued or being processed. */
static int add_locked(struct se_kube_queue *q, struct item *it)
{
        if (it->dirty)
                return 0;
        it->dirty = true;
        if (it->processing)
                return 0;
        int r = push(q, it);
        if (r < 0)
                it->dirty = false;
        return r;
}

int se_kube_queue_add(struct se_kube_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        int r = -ESHUTDOWN;
        if (!q->shutting_down) {
                struct item *it = lookup(q, key, true);
                r = it                                   ? add_locked(q, it) :
                    q->items.n >= SE_KUBE_QUEUE_MAX_KEYS ? -E2BIG :
                                                           -ENOMEM;
                if (it && r < 0)
                        maybe_drop(q, it);
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

static int add_after_locked(struct se_kube_queue *q, struct item *it, uint64_t delay_ns)
{
        if (delay_ns == 0)
                return add_locked(q, it);
        uint64_t due = se_now_mono_ns() + delay_ns;
        if (it->delayed) {
                /* one waiting entry per key: the earliest wins (client-go) */
                for (size_t i = 0; i < q->n_later; i++)
                        if (q->later[i].it == it && due < q->later[i].due_ns) {
                                q->later[i].due_ns = due;
                                pthread_cond_broadcast(&q->cond);
                        }
                return 0;
        }
        if (q->n_later == q->cap_later) {
                size_t cap = q->cap_later ? q->cap_later * 2 : 16;
                struct delayed *nl = se_reallocarray(q->later, cap, sizeof(*nl));
                if (!nl)
                        return -ENOMEM;
                q->later = nl;
                q->cap_later = cap;
        }
        q->later[q->n_later++] = (struct delayed){ it, due };
        it->delayed++;
        pthread_cond_broadcast(&q->cond); /* a sleeper may need to wake earlier */
        return 0;
}

int se_kube_queue_add_after(struct se_kube_queue *q, const char *key, uint64_t delay_ns)
{
        pthread_mutex_lock(&q->lock);
        int r = -ESHUTDOWN;
        if (!q->shutting_down) {
                struct item *it = lookup(q, key, true);
                r = it ? add_after_locked(q, it, delay_ns) : -ENOMEM;
                if (it && r < 0)
                        maybe_drop(q, it);
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

static uint64_t item_delay(const struct se_kube_queue *q, unsigned failures)
{
        uint64_t d = q->opts.base_delay_ns;
        for (unsigned i = 0; i < failures && d < q->opts.max_delay_ns; i++)
                d *= 2;
        return d > q->opts.max_delay_ns ? q->opts.max_delay_ns : d;
}

int se_kube_queue_add_rate_limited(struct se_kube_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        int r = -ESHUTDOWN;
        if (!q->shutting_down) {
                struct item *it = lookup(q, key, true);
                r = -ENOMEM;
                if (it) {
                        uint64_t per = item_delay(q, it->failures);
                        uint64_t all = se_token_bucket_reserve(&q->bucket, se_now_mono_ns());
                        it->failures++;
                        q->retries++;
                        r = add_after_locked(q, it, per > all ? per : all);
                        if (r < 0)
                                maybe_drop(q, it);
                }
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

void se_kube_queue_forget(struct se_kube_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        struct item *it = lookup(q, key, false);
        if (it) {
                it->failures = 0;
                maybe_drop(q, it);
        }
        pthread_mutex_unlock(&q->lock);
}

unsigned se_kube_queue_requeues(struct se_kube_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        const struct item *it = lookup(q, key, false);
        unsigned n = it ? it->failures : 0;
        pthread_mutex_unlock(&q->lock);
        return n;
}

uint64_t se_kube_queue_when(struct se_kube_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        const struct item *it = lookup(q, key, false);
        uint64_t d = item_delay(q, it ? it->failures : 0);
        pthread_mutex_unlock(&q->lock);
        return d;
}

/* Moves due delayed keys into the FIFO; returns the next due time (0: none). */
static uint64_t promote(struct se_kube_queue *q, uint64_t now)
{
        uint64_t next = 0;
        for (size_t i = 0; i < q->n_later;) {
                struct delayed *d = &q->later[i];
                if (d->due_ns <= now) {
                        struct item *it = d->it;
                        it->delayed--;
                        q->later[i] = q->later[--q->n_later];
                        if (add_locked(q, it) < 0)
                                maybe_drop(q, it);
                        continue;
                }
                if (!next || d->due_ns < next)
                        next = d->due_ns;
                i++;
        }
        return next;
}

static void wait_until(struct se_kube_queue *q, uint64_t when_ns)
{
        if (!when_ns) {
                pthread_cond_wait(&q->cond, &q->lock);
                return;
        }
        struct timespec ts = { (time_t)(when_ns / 1000000000u), (long)(when_ns % 1000000000u) };
        pthread_cond_timedwait(&q->cond, &q->lock, &ts);
}

int se_kube_queue_get(struct se_kube_queue *q, unsigned timeout_ms, const char **ret_key)
{
        pthread_mutex_lock(&q->lock);
        uint64_t deadline = timeout_ms ? se_now_mono_ns() + (uint64_t)timeout_ms * 1000000u : 0;
        int r = 0;
        for (;;) {
                uint64_t now = se_now_mono_ns();
                uint64_t next = q->shutting_down ? 0 : promote(q, now);
                if (q->n > 0)
                        break;
                if (q->shutting_down) {
                        r = -ESHUTDOWN;
                        break;
                }
                if (deadline && now >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                uint64_t when = next;
                if (deadline && (!when || deadline < when))
                        when = deadline;
                wait_until(q, when);
        }
        if (r == 0) {
                struct item *it = q->fifo[q->head];
                q->head = (q->head + 1) % q->cap;
                q->n--;
                it->dirty = false;
                it->processing = true;
                q->n_processing++;
                it->started_ns = se_now_mono_ns();
                if (q->opts.observe)
                        q->opts.observe(q->opts.observe_data, SE_KUBE_QUEUE_WAITED,
                                        it->started_ns - it->added_ns);
                *ret_key = it->key;
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

void se_kube_queue_done(struct se_kube_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        struct item *it = lookup(q, key, false);
        if (it && it->processing) {
                if (q->opts.observe)
                        q->opts.observe(q->opts.observe_data, SE_KUBE_QUEUE_WORKED,
                                        se_now_mono_ns() - it->started_ns);
                it->processing = false;
                q->n_processing--;
                if (it->dirty && !q->shutting_down) {
                        if (push(q, it) < 0)
                                it->dirty = false;
                } else
                        it->dirty = false;
                maybe_drop(q, it);
                pthread_cond_broadcast(&q->cond);
        }
        pthread_mutex_unlock(&q->lock);
}

size_t se_kube_queue_len(struct se_kube_queue *q)
{
        pthread_mutex_lock(&q->lock);
        size_t n = q->n;
        pthread_mutex_unlock(&q->lock);
        return n;
}

void se_kube_queue_stats(struct se_kube_queue *q, struct se_kube_queue_stats *ret)
{
        pthread_mutex_lock(&q->lock);
        uint64_t now = se_now_mono_ns();
        *ret = (struct se_kube_queue_stats){ .depth = q->n,
                                             .processing = q->n_processing,
                                             .delayed = q->n_later,
                                             .adds = q->adds,
                                             .retries = q->retries };
        const char *k;
        void *v;
        for (size_t i = 0; ret->processing && se_hashmap_next(&q->items, &i, &k, &v);) {
                const struct item *it = v;
                if (!it->processing)
                        continue;
                uint64_t d = now - it->started_ns;
                ret->unfinished_ns += d;
                if (d > ret->longest_ns)
                        ret->longest_ns = d;
        }
        pthread_mutex_unlock(&q->lock);
}

void se_kube_queue_shutdown_now(struct se_kube_queue *q)
{
        se_kube_queue_shutdown(q);
        pthread_mutex_lock(&q->lock);
        while (q->n > 0) {
                struct item *it = q->fifo[q->head];
                q->head = (q->head + 1) % q->cap;
                q->n--;
                it->dirty = false;
                maybe_drop(q, it);
        }
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

void se_kube_queue_shutdown(struct se_kube_queue *q)
{
        pthread_mutex_lock(&q->lock);
        if (!q->shutting_down) {
                q->shutting_down = true;
                for (size_t i = 0; i < q->n_later; i++) {
                        q->later[i].it->delayed--;
                        maybe_drop(q, q->later[i].it);
                }
                q->n_later = 0;
        }
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

int se_kube_queue_shutdown_drain(struct se_kube_queue *q, unsigned timeout_ms)
{
        se_kube_queue_shutdown(q);
        uint64_t deadline = se_now_mono_ns() + (uint64_t)timeout_ms * 1000000u;
        pthread_mutex_lock(&q->lock);
        int r = 0;
        while (q->n_processing > 0 || q->n > 0) {
                if (se_now_mono_ns() >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                wait_until(q, deadline);
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

/* ---- workers ---- */

struct se_kube_workers {
        struct se_kube_queue *q;
        se_kube_work_fn fn;
        void *data;
        pthread_t *threads;
        unsigned n;
};

static void *worker(void *arg)
{
        struct se_kube_workers *w = arg;
        const char *key;
        while (se_kube_queue_get(w->q, 0, &key) == 0) {
                int r = w->fn(w->data, key);
                if (r < 0)
                        (void)se_kube_queue_add_rate_limited(w->q, key);
                else
                        se_kube_queue_forget(w->q, key);
                se_kube_queue_done(w->q, key);
        }
        return NULL;
}

struct se_kube_workers *se_kube_workers_start(struct se_kube_queue *q, unsigned n,
                                              se_kube_work_fn fn, void *data)
{
        struct se_kube_workers *w = se_calloc(1, sizeof(*w));
        if (!w || !(w->threads = se_calloc(n ? n : 1, sizeof(*w->threads)))) {
                free(w);
                return NULL;
        }
        w->q = q;
        w->fn = fn;
        w->data = data;
        for (; w->n < n; w->n++)
                if (pthread_create(&w->threads[w->n], NULL, worker, w) != 0)
                        break;
        if (w->n < n) {
                se_kube_queue_shutdown(q);
                return se_kube_workers_join(w);
        }
        return w;
}

struct se_kube_workers *se_kube_workers_join(struct se_kube_workers *w)
{
        if (!w)
                return NULL;
        for (unsigned i = 0; i < w->n; i++)
                pthread_join(w->threads[i], NULL);
        free(w->threads);
        free(w);
        return NULL;
}
