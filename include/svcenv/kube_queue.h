/* kube_queue.h — a rate-limited work queue of string keys (client-go's
 * workqueue), and a pool of workers draining it.
 *
 * Semantics:
 *  - a key is queued at most once (adding a queued key does nothing);
 *  - a key being processed is never handed to a second worker: adding it
 *    meanwhile marks it dirty, and done() queues it again;
 *  - add_rate_limited waits max(per-key exponential back-off, an overall
 *    token bucket) before queueing: client-go's default controller limiter
 *    (5 ms doubling to 1000 s per key; 10 qps, burst 100 overall);
 *  - after shutdown, get() hands out what is still queued, then fails.
 * Thread-safe. Keys are copied; get() returns a borrowed key valid until
 * done() for it. Counters and optional timing hooks feed client-go's
 * workqueue_* metrics (the caller renders them). */
#ifndef SVCENV_KUBE_QUEUE_H
#define SVCENV_KUBE_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#define SE_KUBE_QUEUE_MAX_KEYS 1000000u /* distinct keys tracked at once */

struct se_kube_queue;

/* What a timing hook measures: how long a key waited in the FIFO before a
 * get() (workqueue_queue_duration_seconds), or from get() to done()
 * (workqueue_work_duration_seconds). */
enum se_kube_queue_phase { SE_KUBE_QUEUE_WAITED, SE_KUBE_QUEUE_WORKED };

/* Called with the queue's lock held: must be quick and must not call into
 * the queue. */
typedef void (*se_kube_queue_observe_fn)(void *data, enum se_kube_queue_phase phase, uint64_t ns);

struct se_kube_queue_opts {
        uint64_t base_delay_ns; /* 0: 5 ms */
        uint64_t max_delay_ns; /* 0: 1000 s */
        double qps; /* overall limit of rate-limited adds; 0: 10; < 0: none */
        unsigned burst; /* 0: 100 */
        se_kube_queue_observe_fn observe; /* may be NULL */
        void *observe_data;
};

/* A snapshot for metrics. */
struct se_kube_queue_stats {
        size_t depth; /* keys ready in the FIFO (workqueue_depth) */
        size_t processing; /* keys between get() and done() */
        size_t delayed; /* keys waiting for their time */
        uint64_t adds; /* keys put into the FIFO (workqueue_adds_total) */
        uint64_t retries; /* add_rate_limited calls (workqueue_retries_total) */
        uint64_t unfinished_ns; /* summed time of the keys being processed */
        uint64_t longest_ns; /* the longest of them */
};

/* opts may be NULL. NULL on -ENOMEM. */
struct se_kube_queue *se_kube_queue_new(const struct se_kube_queue_opts *opts);
/* Frees the queue; no thread may use it any more. NULL-safe; NULL. */
struct se_kube_queue *se_kube_queue_free(struct se_kube_queue *q);

/* Queues key now. 0, -ENOMEM, -E2BIG (too many keys), -ESHUTDOWN. */
int se_kube_queue_add(struct se_kube_queue *q, const char *key);
/* Queues key after delay_ns. Same results. */
int se_kube_queue_add_after(struct se_kube_queue *q, const char *key, uint64_t delay_ns);
/* Queues key after its rate-limited delay and counts a failure. Same. */
int se_kube_queue_add_rate_limited(struct se_kube_queue *q, const char *key);
/* Clears the failure count of key (after a success). */
void se_kube_queue_forget(struct se_kube_queue *q, const char *key);
/* Failures counted for key. */
unsigned se_kube_queue_requeues(struct se_kube_queue *q, const char *key);
/* The delay add_rate_limited would use next for key (for tests/metrics);
 * does not change anything. */
uint64_t se_kube_queue_when(struct se_kube_queue *q, const char *key);

/* Blocks until a key is ready: 0 and *ret_key (borrowed until done), or
 * -ESHUTDOWN once shut down and empty. timeout_ms 0: wait forever; else
 * -ETIMEDOUT after it. */
int se_kube_queue_get(struct se_kube_queue *q, unsigned timeout_ms, const char **ret_key);
/* Ends processing of key (the pointer get() gave). */
void se_kube_queue_done(struct se_kube_queue *q, const char *key);
/* Keys ready now (not counting delayed ones). */
size_t se_kube_queue_len(struct se_kube_queue *q);
/* Counters and gauges now. */
void se_kube_queue_stats(struct se_kube_queue *q, struct se_kube_queue_stats *ret);
/* Stops accepting keys and wakes every get(). Delayed keys are dropped. */
void se_kube_queue_shutdown(struct se_kube_queue *q);
/* Shutdown that also drops the queued keys: get() fails at once; keys
 * being processed are not queued again by done(). */
void se_kube_queue_shutdown_now(struct se_kube_queue *q);
/* Shutdown, then waits up to timeout_ms for keys being processed to be
 * done. 0 or -ETIMEDOUT. */
int se_kube_queue_shutdown_drain(struct se_kube_queue *q, unsigned timeout_ms);

/* ---- workers ---- */

/* Processes one key. 0: success (forget); < 0: retry with back-off. */
typedef int (*se_kube_work_fn)(void *data, const char *key);

struct se_kube_workers;

/* Starts n threads that get → fn → forget or add_rate_limited → done until
 * the queue shuts down. NULL on failure (nothing started). */
struct se_kube_workers *se_kube_workers_start(struct se_kube_queue *q, unsigned n,
                                              se_kube_work_fn fn, void *data);
/* Joins the threads (shut the queue down first). NULL-safe; NULL. */
struct se_kube_workers *se_kube_workers_join(struct se_kube_workers *w);

#endif
