/* controller.h — the Endpoints + EndpointSlice controller daemon's logic:
 * informers on Services, Pods, Nodes, Endpoints and EndpointSlices feeding
 * one store; store events turned into service keys on a rate-limited work
 * queue; workers that plan each key with se_service_plan() and write the
 * result through the REST client.
 *
 * Behaviour is kube-controller-manager v1.36's endpoint and endpointslice
 * controllers' (shared/reference/endpoints.md):
 *  - Service add/update/delete → its key; pod add/update/delete → the keys
 *    of upstream's GetServicesToUpdateOnPodChange, found through the
 *    store's namespace and label indexes (no scan of other namespaces);
 *    Endpoints delete → its key; delete of one of our slices → its
 *    service's key;
 *  - start-up: wait for every informer's first list, start the workers,
 *    queue every Service and every Endpoints key once (Endpoints whose
 *    Service is gone are deleted, except leader-election ones);
 *  - writes: create when absent, PUT with the cached resourceVersion,
 *    delete (NotFound is success); a failed key is requeued rate-limited
 *    (5 ms doubling to 1000 s, and 10 qps / burst 100 overall) and dropped
 *    after 15 tries; a create refused because the namespace is terminating
 *    is dropped at once. Nothing is written when the planner finds the
 *    stored objects right. A written object is put into the store at once,
 *    so the next sync of the key does not plan against the older copy.
 *
 * Threads: the informers' (one each), the workers (opts.workers), and the
 * caller's. Library code: no logging except through opts.log (may be
 * NULL). */
#ifndef SVCENV_CONTROLLER_H
#define SVCENV_CONTROLLER_H

#include <stdbool.h>
#include <stdint.h>

#include <svcenv/endpoints.h>
#include <svcenv/kube_client.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

#define SE_CONTROLLER_MAX_RETRIES 15
#define SE_CONTROLLER_MAX_WORKERS 50

enum se_controller_log { SE_CTL_LOG_INFO, SE_CTL_LOG_WARN, SE_CTL_LOG_ERROR };
typedef void (*se_controller_log_fn)(void *data, enum se_controller_log sev, int v,
                                     const char *msg);

struct se_controller_opts {
        unsigned workers; /* --concurrent-syncs; 0: 5; capped at 50 */
        struct se_endpoints_opts ep; /* what to write, managed-by values, slice size */
        /* pod-triggered syncs wait this long (upstream's
         * --endpoint(slice)-updates-batch-period); 0: at once */
        uint64_t pod_batch_ns;
        se_controller_log_fn log; /* NULL: silent */
        void *log_data;
};

struct se_controller;

/* c is borrowed and must outlive the controller. NULL on -ENOMEM. */
struct se_controller *se_controller_new(struct se_kube_client *c,
                                        const struct se_controller_opts *opts);
/* Stops everything still running and frees. NULL-safe; returns NULL. */
struct se_controller *se_controller_free(struct se_controller *ctl);

/* Starts the informers, waits for their first lists (timeout_ms; 0: no
 * limit, returns -ECANCELED when se_controller_stop was called), starts the
 * workers and queues the start-up keys. 0 or -errno. */
int se_controller_run(struct se_controller *ctl, unsigned timeout_ms);
/* True once every informer listed. */
bool se_controller_synced(const struct se_controller *ctl);
/* Makes a se_controller_run() that still waits for the caches return
 * -ECANCELED soon. Safe from any thread. */
void se_controller_cancel(struct se_controller *ctl);
/* Stops: no new keys; the workers finish the queued keys until deadline_ns
 * (monotonic, 0: no drain), then stop; informers stop. Idempotent. */
void se_controller_stop(struct se_controller *ctl, uint64_t deadline_ns);

/* Appends the controller's metrics (Prometheus text). */
void se_controller_metrics(struct se_controller *ctl, struct se_strbuf *out);
/* The store the informers feed (borrowed). */
struct se_store *se_controller_store(struct se_controller *ctl);

/* Pure helpers, exposed for tests. */
/* Splits "ns/name" into its parts (borrowed into buf). 0 or -EINVAL. */
int se_controller_split_key(const char *key, char *buf, size_t size, const char **ret_ns,
                            const char **ret_name);
/* True when an API error of a create means "namespace terminating: drop the
 * key" (403 with that cause's message). */
bool se_controller_namespace_terminating(int err, const char *message);

#endif
