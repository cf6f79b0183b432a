/* The rate-limited work queue (see ctl_queue.h). One mutex; every key has
 * one entry while it is queued, processing, delayed or has failures. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svcenv/alloc.h>
#include <svcenv/ctl_metrics.h>
#include <svcenv/ctl_queue.h>
#include <svcenv/hashmap.h>
#include <svcenv/kube_client.h>
#include <svcenv/timeutil.h>

#define DUE_BATCH 64

struct entry {
        char *key;
        bool queued; /* in the FIFO (dirty) */
        bool processing;
        bool redo; /* added while processing: queue again on done() */
        uint64_t ready_ns; /* delayed until then; 0: not delayed */
        uint64_t added_ns; /* when it entered the FIFO */
        uint64_t started_ns; /* when get() handed it out */
        unsigned failures;
};

struct se_ctl_queue {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct se_ctl_queue_opts opts;
        char *name;
        struct se_hashmap entries; /* key -> entry */
        struct entry **fifo; /* ring */
        size_t head, len, cap;
        size_t n_delayed, n_processing;
        struct se_token_bucket bucket;
        bool shutting_down, drain;
        /* metrics */
        uint64_t adds, retries;
        struct se_histogram queue_latency, work_duration;
};

struct se_ctl_queue *se_ctl_queue_new(const struct se_ctl_queue_opts *opts)
{
        struct se_ctl_queue *q = calloc(1, sizeof(*q));
        if (!q)
                return NULL;
        if (opts)
                q->opts = *opts;
        q->name = strdup(q->opts.name ? q->opts.name : "queue");
        if (!q->name) {
                free(q);
                return NULL;
        }
        if (!q->opts.base_delay_ns)
                q->opts.base_delay_ns = 5 * 1000 * 1000ull;
        if (!q->opts.max_delay_ns)
                q->opts.max_delay_ns = 1000 * 1000000000ull;
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
        se_histogram_init(&q->queue_latency, se_hist_workqueue_le, se_hist_workqueue_n);
        se_histogram_init(&q->work_duration, se_hist_workqueue_le, se_hist_workqueue_n);
        return q;
}

struct se_ctl_queue *se_ctl_queue_free(struct se_ctl_queue *q)
{
        if (!q)
                return NULL;
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&q->entries, &i, &k, &v);) {
                struct entry *e = v;
                free(e->key);
                free(e);
        }
        se_hashmap_release(&q->entries);
        free(q->fifo);
        free(q->name);
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        free(q);
        return NULL;
}

static struct entry *entry_get(struct se_ctl_queue *q, const char *key, bool create)
{
        struct entry *e = se_hashmap_get(&q->entries, key);
        if (e || !create)
                return e;
        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        e->key = strdup(key);
        if (!e->key || se_hashmap_put(&q->entries, e->key, e, NULL) < 0) {
                free(e->key);
                free(e);
                return NULL;
        }
        return e;
}

/* Drops the entry when nothing refers to it any more. */
static void entry_gc(struct se_ctl_queue *q, struct entry *e)
{
        if (e->queued || e->processing || e->ready_ns || e->failures)
                return;
        se_hashmap_remove(&q->entries, e->key);
        free(e->key);
        free(e);
}

static int fifo_push(struct se_ctl_queue *q, struct entry *e, uint64_t now)
{
        if (q->len == q->cap) {
                size_t cap = q->cap ? q->cap * 2 : 64;
                struct entry **n = malloc(cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                for (size_t i = 0; i < q->len; i++)
                        n[i] = q->fifo[(q->head + i) % q->cap];
                free(q->fifo);
                q->fifo = n;
                q->cap = cap;
                q->head = 0;
        }
        q->fifo[(q->head + q->len) % q->cap] = e;
        q->len++;
        e->queued = true;
        e->added_ns = now;
        q->adds++;
        pthread_cond_signal(&q->cond);
        return 0;
}

/* Puts e in the FIFO unless it is already there or being processed. */
static int enqueue(struct se_ctl_queue *q, struct entry *e, uint64_t now)
{
        if (e->ready_ns) {
                e->ready_ns = 0;
                q->n_delayed--;
        }
        if (e->queued)
                return 0;
        if (e->processing) {
                e->redo = true;
                return 0;
        }
        return fifo_push(q, e, now);
}

int se_ctl_queue_add(struct se_ctl_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        int r = 0;
        if (!q->shutting_down) {
                struct entry *e = entry_get(q, key, true);
                r = e ? enqueue(q, e, se_now_mono_ns()) : -ENOMEM;
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

static int add_after_locked(struct se_ctl_queue *q, const char *key, uint64_t delay_ns)
{
        if (q->shutting_down)
                return 0;
        struct entry *e = entry_get(q, key, true);
        if (!e)
                return -ENOMEM;
        uint64_t now = se_now_mono_ns();
        if (!delay_ns)
                return enqueue(q, e, now);
        if (e->queued)
                return 0; /* it runs sooner anyway */
        uint64_t at = now + delay_ns;
        if (!e->ready_ns) {
                q->n_delayed++;
                e->ready_ns = at;
        } else if (at < e->ready_ns) {
                e->ready_ns = at;
        }
        pthread_cond_broadcast(&q->cond); /* a sleeper may need to wake sooner */
        return 0;
}

int se_ctl_queue_add_after(struct se_ctl_queue *q, const char *key, uint64_t delay_ns)
{
        pthread_mutex_lock(&q->lock);
        int r = add_after_locked(q, key, delay_ns);
        pthread_mutex_unlock(&q->lock);
        return r;
}

uint64_t se_ctl_queue_backoff_ns(const struct se_ctl_queue_opts *opts, unsigned n)
{
        uint64_t base = opts->base_delay_ns ? opts->base_delay_ns : 5 * 1000 * 1000ull;
        uint64_t max = opts->max_delay_ns ? opts->max_delay_ns : 1000 * 1000000000ull;
        if (n >= 63)
                return max;
        uint64_t d = base;
        for (unsigned i = 0; i < n; i++) {
                if (d > max / 2)
                        return max;
                d *= 2;
        }
        return d < max ? d : max;
}

int se_ctl_queue_add_rate_limited(struct se_ctl_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        int r = 0;
        struct entry *e = entry_get(q, key, true);
        if (!e) {
                r = -ENOMEM;
        } else {
                uint64_t d = se_ctl_queue_backoff_ns(&q->opts, e->failures);
                e->failures++;
                q->retries++;
                if (q->opts.qps > 0) {
                        uint64_t b = se_token_bucket_reserve(&q->bucket, se_now_mono_ns());
                        if (b > d)
                                d = b;
                }
                r = add_after_locked(q, key, d);
                entry_gc(q, e);
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

unsigned se_ctl_queue_num_requeues(struct se_ctl_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        struct entry *e = entry_get(q, key, false);
        unsigned n = e ? e->failures : 0;
        pthread_mutex_unlock(&q->lock);
        return n;
}

void se_ctl_queue_forget(struct se_ctl_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        struct entry *e = entry_get(q, key, false);
        if (e) {
                e->failures = 0;
                entry_gc(q, e);
        }
        pthread_mutex_unlock(&q->lock);
}

/* Moves delayed entries whose time came into the FIFO; the earliest
 * remaining time in *next (0: none). */
static void promote_delayed(struct se_ctl_queue *q, uint64_t now, uint64_t *next)
{
        *next = 0;
        if (!q->n_delayed)
                return;
        const char *k;
        void *v;
        /* collect first: enqueue must not run while iterating the map */
        struct entry *due[DUE_BATCH];
        size_t n_due;
        do {
                n_due = 0;
                *next = 0;
                for (size_t i = 0; se_hashmap_next(&q->entries, &i, &k, &v);) {
                        struct entry *e = v;
                        if (!e->ready_ns)
                                continue;
                        if (e->ready_ns <= now) {
                                if (n_due < DUE_BATCH)
                                        due[n_due++] = e;
                        } else if (!*next || e->ready_ns < *next) {
                                *next = e->ready_ns;
                        }
                }
                for (size_t i = 0; i < n_due; i++)
                        (void)enqueue(q, due[i], now);
        } while (n_due == DUE_BATCH);
}

char *se_ctl_queue_get(struct se_ctl_queue *q)
{
        pthread_mutex_lock(&q->lock);
        for (;;) {
                uint64_t now = se_now_mono_ns(), next = 0;
                if (q->shutting_down && !q->drain)
                        break;
                promote_delayed(q, now, &next);
                if (q->len)
                        break;
                if (q->shutting_down)
                        break; /* drained: delayed keys are dropped */
                if (next) {
                        struct timespec ts = { (time_t)(next / 1000000000ull),
                                               (long)(next % 1000000000ull) };
                        pthread_cond_timedwait(&q->cond, &q->lock, &ts);
                } else {
                        pthread_cond_wait(&q->cond, &q->lock);
                }
        }
        char *key = NULL;
        if (q->len && !(q->shutting_down && !q->drain)) {
                struct entry *e = q->fifo[q->head];
                q->head = (q->head + 1) % q->cap;
                q->len--;
                e->queued = false;
                e->processing = true;
                q->n_processing++;
                uint64_t now = se_now_mono_ns();
                se_histogram_observe_ns(&q->queue_latency, now - e->added_ns);
                e->started_ns = now;
                key = strdup(e->key);
                if (!key) {
                        /* give it back; the caller sees NULL only at shutdown, so retry */
                        e->processing = false;
                        q->n_processing--;
                        (void)fifo_push(q, e, now);
                }
        }
        pthread_mutex_unlock(&q->lock);
        return key;
}

void se_ctl_queue_done(struct se_ctl_queue *q, const char *key)
{
        pthread_mutex_lock(&q->lock);
        struct entry *e = entry_get(q, key, false);
        if (e && e->processing) {
                uint64_t now = se_now_mono_ns();
                se_histogram_observe_ns(&q->work_duration, now - e->started_ns);
                e->processing = false;
                q->n_processing--;
                if (e->redo && !q->shutting_down) {
                        e->redo = false;
                        (void)fifo_push(q, e, now);
                }
                e->redo = false;
                entry_gc(q, e);
        }
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

void se_ctl_queue_shutdown(struct se_ctl_queue *q, bool drain)
{
        pthread_mutex_lock(&q->lock);
        q->shutting_down = true;
        q->drain = drain;
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

size_t se_ctl_queue_len(struct se_ctl_queue *q)
{
        pthread_mutex_lock(&q->lock);
        size_t n = q->len;
        pthread_mutex_unlock(&q->lock);
        return n;
}

size_t se_ctl_queue_pending(struct se_ctl_queue *q)
{
        pthread_mutex_lock(&q->lock);
        size_t n = q->len + q->n_processing;
        pthread_mutex_unlock(&q->lock);
        return n;
}

void se_ctl_queue_metrics(struct se_ctl_queue *q, struct se_strbuf *out)
{
        pthread_mutex_lock(&q->lock);
        size_t depth = q->len, busy = q->n_processing;
        uint64_t adds = q->adds, retries = q->retries, oldest = 0, now = se_now_mono_ns();
        uint64_t unfinished = 0;
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&q->entries, &i, &k, &v);) {
                const struct entry *e = v;
                if (e->processing) {
                        unfinished += now - e->started_ns;
                        if (now - e->started_ns > oldest)
                                oldest = now - e->started_ns;
                }
        }
        pthread_mutex_unlock(&q->lock);
        char labels[160];
        snprintf(labels, sizeof(labels), "name=\"%s\"", q->name);
        se_strbuf_printf(out,
                         "# HELP workqueue_depth Current depth of workqueue.\n"
                         "# TYPE workqueue_depth gauge\nworkqueue_depth{%s} %zu\n"
                         "# HELP workqueue_adds_total Total number of adds handled by workqueue.\n"
                         "# TYPE workqueue_adds_total counter\nworkqueue_adds_total{%s} %llu\n"
                         "# HELP workqueue_retries_total Total number of retries handled by "
                         "workqueue.\n# TYPE workqueue_retries_total counter\n"
                         "workqueue_retries_total{%s} %llu\n"
                         "# HELP workqueue_unfinished_work_seconds Seconds of work in progress.\n"
                         "# TYPE workqueue_unfinished_work_seconds gauge\n"
                         "workqueue_unfinished_work_seconds{%s} %.6f\n"
                         "# HELP workqueue_longest_running_processor_seconds Seconds the "
                         "longest running processor has been running.\n"
                         "# TYPE workqueue_longest_running_processor_seconds gauge\n"
                         "workqueue_longest_running_processor_seconds{%s} %.6f\n",
                         labels, depth, labels, (unsigned long long)adds, labels,
                         (unsigned long long)retries, labels, (double)unfinished / 1e9, labels,
                         (double)oldest / 1e9);
        (void)busy;
        se_histogram_render(&q->queue_latency, out, "workqueue_queue_duration_seconds", labels,
                            "How long in seconds an item stays in workqueue before being "
                            "requested.");
        se_histogram_render(&q->work_duration, out, "workqueue_work_duration_seconds", labels,
                            "How long in seconds processing an item from workqueue takes.");
}
