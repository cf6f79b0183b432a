/* Event recorder: a bounded queue, one writer thread, client-go's
 * correlation (repeats patched as count + 1) and spam filter. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>
#include <svcenv/kube_events.h>
#include <svcenv/timeutil.h>

#define CACHE_MAX  4096 /* remembered events and spam buckets, each */
#define SPAM_BURST 25.0
#define SPAM_QPS   (1.0 / 300.0)
#define MAX_TRIES  12
#define RETRY_NS   (10ull * 1000000000ull)

static const struct se_kube_resource events_resource = { "/api/v1", "events", true, "Event", "v1" };

struct event {
        struct event *next;
        char *kind, *api_version, *ns, *name, *uid, *rv, *reason, *message;
        enum se_kube_event_severity type;
        int64_t time_ns;
};

/* A written event, found again by its correlation key. */
struct seen {
        char *key;
        char *event_name;
        int64_t first_ns;
        int32_t count;
};

struct bucket {
        char *key;
        double tokens;
        uint64_t last_ns;
};

/* Maps of at most CACHE_MAX entries, forgetting the oldest insert first. */
struct fifo_entry {
        const char *key; /* inside value */
        void *value;
};

struct fifo_map {
        struct se_hashmap map;
        struct fifo_entry ring[CACHE_MAX];
        size_t head, n;
};

struct se_kube_recorder {
        struct se_kube_client *client;
        char *component;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake, idle_cond;
        struct event *first, *last;
        size_t queued;
        bool stop, busy;
        struct se_kube_recorder_stats stats;
        /* writer thread only */
        struct fifo_map seen, buckets;
};

static void event_free(struct event *e)
{
        if (!e)
                return;
        free(e->kind);
        free(e->api_version);
        free(e->ns);
        free(e->name);
        free(e->uid);
        free(e->rv);
        free(e->reason);
        free(e->message);
        free(e);
}

static char *dup_or_empty(const char *s)
{
        return se_strdup(s ? s : "");
}

/* Cuts s to at most max bytes without splitting a UTF-8 sequence. */
static void cut_utf8(char *s, size_t max)
{
        size_t n = strlen(s);
        if (n <= max)
                return;
        while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
                max--;
        s[max] = '\0';
}

int se_kube_recorder_eventf(struct se_kube_recorder *r, const struct se_kube_objref *ref,
                            enum se_kube_event_severity type, const char *reason, const char *fmt,
                            ...)
{
        if (!r)
                return 0;
        struct event *e = se_calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        va_list ap;
        va_start(ap, fmt);
        int n = se_vasprintf(&e->message, fmt, ap);
        va_end(ap);
        if (n < 0)
                e->message = NULL;
        e->kind = dup_or_empty(ref->kind);
        e->api_version = dup_or_empty(ref->api_version);
        e->ns = se_strdup(ref->namespace && *ref->namespace ? ref->namespace : "default");
        e->name = dup_or_empty(ref->name);
        e->uid = dup_or_empty(ref->uid);
        e->rv = dup_or_empty(ref->resource_version);
        e->reason = dup_or_empty(reason);
        e->type = type;
        e->time_ns = se_now_real_ns();
        if (!e->message || !e->kind || !e->api_version || !e->ns || !e->name || !e->uid || !e->rv ||
            !e->reason) {
                event_free(e);
                return -ENOMEM;
        }
        cut_utf8(e->message, SE_KUBE_EVENT_MESSAGE_MAX);
        pthread_mutex_lock(&r->lock);
        if (r->queued >= SE_KUBE_EVENTS_MAX_QUEUED || r->stop) {
                r->stats.dropped++;
                pthread_mutex_unlock(&r->lock);
                event_free(e);
                return -ENOBUFS;
        }
        if (r->last)
                r->last->next = e;
        else
                r->first = e;
        r->last = e;
        r->queued++;
        pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->lock);
        return 0;
}

/* ---- correlation ---- */

static void fifo_put(struct fifo_map *f, const char *key, void *value, void (*drop)(void *))
{
        struct fifo_entry e = { key, value };
        if (f->n == CACHE_MAX) {
                struct fifo_entry old = f->ring[f->head];
                /* the oldest may have been replaced under its key already */
                if (se_hashmap_get(&f->map, old.key) == old.value)
                        se_hashmap_remove(&f->map, old.key);
                drop(old.value);
                f->ring[f->head] = e;
                f->head = (f->head + 1) % CACHE_MAX;
        } else {
                f->ring[(f->head + f->n) % CACHE_MAX] = e;
                f->n++;
        }
        if (se_hashmap_put(&f->map, key, value, NULL) < 0)
                return; /* not remembered: the next repeat is created anew */
}

static void seen_drop(void *p)
{
        struct seen *s = p;
        free(s->key);
        free(s->event_name);
        free(s);
}

static void bucket_drop(void *p)
{
        struct bucket *b = p;
        free(b->key);
        free(b);
}

static void fifo_release(struct fifo_map *f, void (*drop)(void *))
{
        for (size_t i = 0; i < f->n; i++)
                drop(f->ring[(f->head + i) % CACHE_MAX].value);
        se_hashmap_release(&f->map);
}

#define SEP "\x1f"

/* client-go's spam key: source, object, type (not the reason). */
static char *spam_key(const struct se_kube_recorder *r, const struct event *e)
{
        char *k;
        if (se_asprintf(&k, "%s" SEP "%s" SEP "%s" SEP "%s" SEP "%s" SEP "%s" SEP "%d",
                        r->component, e->kind, e->ns, e->name, e->uid, e->api_version,
                        (int)e->type) < 0)
                return NULL;
        return k;
}

static char *event_key(const struct se_kube_recorder *r, const struct event *e)
{
        char *k;
        if (se_asprintf(&k,
                        "%s" SEP "%s" SEP "%s" SEP "%s" SEP "%s" SEP "%s" SEP "%d" SEP "%s" SEP
                        "%s",
                        r->component, e->kind, e->ns, e->name, e->uid, e->api_version, (int)e->type,
                        e->reason, e->message) < 0)
                return NULL;
        return k;
}

/* Takes a token from the object's bucket; false: filtered as spam. */
static bool spam_accept(struct se_kube_recorder *r, const struct event *e)
{
        char *key = spam_key(r, e);
        if (!key)
                return true;
        uint64_t now = se_now_mono_ns();
        struct bucket *b = se_hashmap_get(&r->buckets.map, key);
        if (!b) {
                b = se_calloc(1, sizeof(*b));
                if (!b) {
                        free(key);
                        return true;
                }
                b->key = key;
                b->tokens = SPAM_BURST;
                b->last_ns = now;
                fifo_put(&r->buckets, b->key, b, bucket_drop);
        } else {
                free(key);
                b->tokens += (double)(now - b->last_ns) / 1e9 * SPAM_QPS;
                if (b->tokens > SPAM_BURST)
                        b->tokens = SPAM_BURST;
                b->last_ns = now;
        }
        if (b->tokens < 1.0)
                return false;
        b->tokens -= 1.0;
        return true;
}

/* ---- writing ---- */

static json_t *event_body(const struct se_kube_recorder *r, const struct event *e, const char *name,
                          int64_t first_ns, int32_t count)
{
        char first[40], last[40];
        se_time_format_rfc3339(first_ns, 0, first, sizeof(first));
        se_time_format_rfc3339(e->time_ns, 0, last, sizeof(last));
        json_t *ref =
                json_pack("{s:s, s:s, s:s}", "kind", e->kind, "namespace", e->ns, "name", e->name);
        if (ref && *e->uid)
                json_object_set_new(ref, "uid", json_string(e->uid));
        if (ref && *e->api_version)
                json_object_set_new(ref, "apiVersion", json_string(e->api_version));
        if (ref && *e->rv)
                json_object_set_new(ref, "resourceVersion", json_string(e->rv));
        if (!ref)
                return NULL;
        return json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:{s:s}, s:s, s:s, s:i, s:s, "
                         "s:s, s:s}",
                         "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace",
                         e->ns, "involvedObject", ref, "reason", e->reason, "message", e->message,
                         "source", "component", r->component, "firstTimestamp", first,
                         "lastTimestamp", last, "count", (int)count, "type",
                         e->type == SE_KUBE_EVENT_WARNING ? "Warning" : "Normal",
                         "reportingComponent", r->component, "reportingInstance", "");
}

static bool retryable(int err)
{
        return err == -EIO || err == -ECONNREFUSED || err == -EHOSTUNREACH || err == -ETIMEDOUT ||
               err == -EAGAIN;
}

/* One write of e: a patch of the Event seen before, else a create. */
static int write_once(struct se_kube_recorder *r, const struct event *e, struct seen *prev,
                      bool *ret_patched, char **ret_name)
{
        struct se_diag diag = { 0 };
        json_t *out = NULL;
        int err;
        *ret_patched = false;
        if (prev) {
                char last[40];
                se_time_format_rfc3339(e->time_ns, 0, last, sizeof(last));
                json_t *patch = json_pack("{s:i, s:s, s:s}", "count", (int)(prev->count + 1),
                                          "lastTimestamp", last, "message", e->message);
                struct se_kube_patch_opts po = { .type = SE_KUBE_PATCH_MERGE };
                err = patch ? se_kube_patch(r->client, &events_resource, e->ns, prev->event_name,
                                            &po, patch, NULL, &diag) :
                              -ENOMEM;
                json_decref(patch);
                if (err == 0) {
                        *ret_patched = true;
                        return 0;
                }
                if (err != -ENOENT)
                        return err;
                /* the Event expired or was deleted: a new one */
        }
        char name[400];
        snprintf(name, sizeof(name), "%.250s.%llx", e->name, (unsigned long long)e->time_ns);
        json_t *body = event_body(r, e, name, e->time_ns, 1);
        err = body ? se_kube_create(r->client, &events_resource, e->ns, body, &out, &diag) :
                     -ENOMEM;
        json_decref(body);
        if (err == 0) {
                const char *got = json_string_value(
                        json_object_get(json_object_get(out, "metadata"), "name"));
                *ret_name = se_strdup(got ? got : name);
        }
        json_decref(out);
        return err;
}

/* Sleeps up to ns unless stopped; true when stopped. Called locked. */
static bool sleep_unless_stopped(struct se_kube_recorder *r, uint64_t ns)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + ns;
        ts.tv_sec = (time_t)(t / 1000000000ull);
        ts.tv_nsec = (long)(t % 1000000000ull);
        while (!r->stop && pthread_cond_timedwait(&r->wake, &r->lock, &ts) == 0)
                ;
        return r->stop;
}

static void record(struct se_kube_recorder *r, struct event *e)
{
        if (!spam_accept(r, e)) {
                pthread_mutex_lock(&r->lock);
                r->stats.dropped++;
                pthread_mutex_unlock(&r->lock);
                return;
        }
        char *key = event_key(r, e);
        struct seen *prev = key ? se_hashmap_get(&r->seen.map, key) : NULL;
        for (int tries = 1;; tries++) {
                bool patched = false;
                char *name = NULL;
                int err = write_once(r, e, prev, &patched, &name);
                if (err == 0) {
                        pthread_mutex_lock(&r->lock);
                        if (patched)
                                r->stats.patched++;
                        else
                                r->stats.created++;
                        pthread_mutex_unlock(&r->lock);
                        if (patched) {
                                prev->count++;
                        } else if (key && name) {
                                struct seen *s = se_calloc(1, sizeof(*s));
                                if (s) {
                                        s->key = key;
                                        key = NULL;
                                        s->event_name = name;
                                        name = NULL;
                                        s->first_ns = e->time_ns;
                                        s->count = 1;
                                        fifo_put(&r->seen, s->key, s, seen_drop);
                                }
                        }
                        free(name);
                        break;
                }
                pthread_mutex_lock(&r->lock);
                bool stop = !retryable(err) || tries >= MAX_TRIES;
                if (!stop) {
                        /* client-go: a random part of the period first */
                        uint64_t wait = tries == 1 ? (uint64_t)rand() % RETRY_NS : RETRY_NS;
                        stop = sleep_unless_stopped(r, wait);
                }
                if (stop)
                        r->stats.dropped++;
                pthread_mutex_unlock(&r->lock);
                if (stop)
                        break;
        }
        free(key);
}

static void *writer_main(void *arg)
{
        struct se_kube_recorder *r = arg;
        pthread_mutex_lock(&r->lock);
        for (;;) {
                while (!r->stop && !r->first)
                        pthread_cond_wait(&r->wake, &r->lock);
                if (r->stop)
                        break;
                struct event *e = r->first;
                r->first = e->next;
                if (!r->first)
                        r->last = NULL;
                r->queued--;
                r->busy = true;
                pthread_mutex_unlock(&r->lock);
                record(r, e);
                event_free(e);
                pthread_mutex_lock(&r->lock);
                r->busy = false;
                pthread_cond_broadcast(&r->idle_cond);
        }
        pthread_mutex_unlock(&r->lock);
        return NULL;
}

/* Frees what new() set up; the writer thread is not running. */
static struct se_kube_recorder *destroy(struct se_kube_recorder *r)
{
        fifo_release(&r->seen, seen_drop);
        fifo_release(&r->buckets, bucket_drop);
        pthread_cond_destroy(&r->idle_cond);
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        free(r->component);
        free(r);
        return NULL;
}

struct se_kube_recorder *se_kube_recorder_new(struct se_kube_client *c, const char *component)
{
        struct se_kube_recorder *r = se_calloc(1, sizeof(*r));
        if (!r)
                return NULL;
        r->client = c;
        r->component = se_strdup(component ? component : "");
        pthread_mutex_init(&r->lock, NULL);
        pthread_cond_init(&r->wake, NULL);
        pthread_cond_init(&r->idle_cond, NULL);
        if (!r->component || pthread_create(&r->thread, NULL, writer_main, r) != 0)
                return destroy(r);
        return r;
}

struct se_kube_recorder *se_kube_recorder_free(struct se_kube_recorder *r)
{
        if (!r)
                return NULL;
        pthread_mutex_lock(&r->lock);
        r->stop = true;
        pthread_cond_broadcast(&r->wake);
        pthread_mutex_unlock(&r->lock);
        pthread_join(r->thread, NULL);
        while (r->first) {
                struct event *e = r->first;
                r->first = e->next;
                event_free(e);
        }
        return destroy(r);
}

void se_kube_recorder_stats(struct se_kube_recorder *r, struct se_kube_recorder_stats *ret)
{
        *ret = (struct se_kube_recorder_stats){ 0 };
        if (!r)
                return;
        pthread_mutex_lock(&r->lock);
        *ret = r->stats;
        pthread_mutex_unlock(&r->lock);
}

bool se_kube_recorder_flush(struct se_kube_recorder *r, unsigned timeout_ms)
{
        if (!r)
                return true;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                     (uint64_t)timeout_ms * 1000000ull;
        ts.tv_sec = (time_t)(t / 1000000000ull);
        ts.tv_nsec = (long)(t % 1000000000ull);
        pthread_mutex_lock(&r->lock);
        int rc = 0;
        while ((r->first || r->busy) && rc == 0)
                rc = pthread_cond_timedwait(&r->idle_cond, &r->lock, &ts);
        bool idle = !r->first && !r->busy;
        pthread_mutex_unlock(&r->lock);
        return idle;
}
