/* ctl_queue.h — the controllers' rate-limited work queue (client-go's
 * workqueue semantics).
 *
 *  - A key is queued at most once: adding a key that waits in the queue does
 *    nothing; adding a key that a worker is processing marks it dirty and it
 *    is queued again when the worker calls done(). So one key is never
 *    processed by two workers at once, and no change is lost.
 *  - add_after() holds a key back until its time (the earliest wins);
 *    add_rate_limited() delays by max(per-key exponential back-off
 *    base·2^failures capped at max, a shared token bucket of qps/burst) and
 *    counts a failure; forget() resets the count.
 *  - shutdown(drain): get() returns NULL at once (no drain) or once the queue
 *    holds nothing ready (drain; delayed keys are dropped).
 *
 * Thread-safe. Keys are copied in; get() returns a malloc'ed copy the caller
 * hands back to done() and then frees. Metrics are kept for Prometheus
 * (workqueue_* names). */
#ifndef SVCENV_CTL_QUEUE_H
#define SVCENV_CTL_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/strbuf.h>

struct se_ctl_queue;

struct se_ctl_queue_opts {
        const char *name; /* the name="..." label of the metrics */
        uint64_t base_delay_ns; /* 0: 5 ms */
        uint64_t max_delay_ns; /* 0: 1000 s */
        double qps; /* 0: 10; < 0: no shared bucket */
        unsigned burst; /* 0: 100 */
};

/* NULL on -ENOMEM. opts may be NULL. */
struct se_ctl_queue *se_ctl_queue_new(const struct se_ctl_queue_opts *opts);
/* NULL-safe; returns NULL. No thread may be inside get(). */
struct se_ctl_queue *se_ctl_queue_free(struct se_ctl_queue *q);

/* 0 or -ENOMEM; after shutdown the key is ignored (0). */
int se_ctl_queue_add(struct se_ctl_queue *q, const char *key);
int se_ctl_queue_add_after(struct se_ctl_queue *q, const char *key, uint64_t delay_ns);
int se_ctl_queue_add_rate_limited(struct se_ctl_queue *q, const char *key);
/* Failures counted for key since the last forget(). */
unsigned se_ctl_queue_num_requeues(struct se_ctl_queue *q, const char *key);
void se_ctl_queue_forget(struct se_ctl_queue *q, const char *key);
/* The per-key delay of the n-th failure (pure: base·2^n capped). */
uint64_t se_ctl_queue_backoff_ns(const struct se_ctl_queue_opts *opts, unsigned n);

/* Blocks until a key is ready; NULL once shut down (see above). */
char *se_ctl_queue_get(struct se_ctl_queue *q);
/* The worker finished key (as returned by get). */
void se_ctl_queue_done(struct se_ctl_queue *q, const char *key);

void se_ctl_queue_shutdown(struct se_ctl_queue *q, bool drain);
/* Keys ready in the queue (not delayed, not processing). */
size_t se_ctl_queue_len(struct se_ctl_queue *q);
/* Keys queued or being processed (delayed ones not counted). */
size_t se_ctl_queue_pending(struct se_ctl_queue *q);

/* Appends the workqueue_* metrics in Prometheus text. */
void se_ctl_queue_metrics(struct se_ctl_queue *q, struct se_strbuf *out);

#endif
