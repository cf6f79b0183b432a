/* State shared by controller.c, sync.c and stats.c. */
#ifndef SVCENV_CONTROLLER_INTERNAL_H
#define SVCENV_CONTROLLER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <svcenv/controller.h>
#include <svcenv/endpoints_sync.h>
#include <svcenv/hashmap.h>
#include <svcenv/histogram.h>
#include <svcenv/kube_events.h>
#include <svcenv/kube_queue.h>
#include <svcenv/kube_watch.h>
#include <svcenv/macro.h>
#include <svcenv/topology.h>

#define CTL_N_INFORMERS 5
/* The work queue key of a topology cache refresh (upstream's separate
 * topology queue, one key): no Service key lacks a '/'. */
#define CTL_TOPOLOGY_KEY "topology"

enum ctl_res { CTL_RES_ENDPOINTS, CTL_RES_SLICES, CTL_RES_COUNT };
enum ctl_op { CTL_OP_CREATE, CTL_OP_UPDATE, CTL_OP_DELETE, CTL_OP_COUNT };
enum ctl_result { CTL_OK, CTL_CONFLICT, CTL_ERROR, CTL_RESULT_COUNT };
enum ctl_sync_result { CTL_SYNC_SUCCESS, CTL_SYNC_ERROR, CTL_SYNC_RESULT_COUNT };

struct se_controller {
        struct se_controller_opts opts;
        const char *slices_managed_by;
        struct se_kube_client *client;
        struct se_store *store;
        struct se_kube_queue *queue;
        struct se_trigger_tracker *tracker;
        /* zone CPU shares and the hints given (topology-mode Auto) */
        struct se_topology_cache *topology;
        /* Warning events on failed writes, as upstream's two controllers */
        struct se_kube_recorder *ep_events, *slice_events;
        struct se_kube_informer *informers[CTL_N_INFORMERS];
        pthread_t workers[SE_CONTROLLER_MAX_WORKERS];
        unsigned n_workers;
        atomic_bool synced, started, stopping;
        uint64_t synced_ns;
        /* keys with a pod change not yet written: key -> first change time */
        pthread_mutex_t pending_lock;
        struct se_hashmap pending;
        /* generation of every slice we wrote (-1: we deleted it), so that
         * only changes made by others re-sync a service (upstream's
         * EndpointSliceTracker) */
        pthread_mutex_t slices_lock;
        struct se_hashmap slices_written; /* "ns/name" -> struct ctl_written */
        /* metrics */
        _Atomic uint64_t writes[CTL_RES_COUNT][CTL_OP_COUNT][CTL_RESULT_COUNT];
        _Atomic uint64_t syncs[CTL_SYNC_RESULT_COUNT];
        _Atomic uint64_t drops, pod_events, skipped_writes;
        struct se_histogram sync_duration, change_to_write;
        struct se_histogram queue_latency, work_duration; /* workqueue_* */
        /* per-service desired endpoints and slices (gauges are their sums) */
        pthread_mutex_t gauge_lock;
        struct se_hashmap gauges; /* key -> struct ctl_gauge */
        int64_t endpoints_desired, slices_current;
};

void ctl_log(struct se_controller *ctl, enum se_controller_log sev, int v, const char *fmt, ...)
        SE_PRINTF(4, 5);
/* Refreshes the topology cache from the Nodes and queues the Services
 * whose hints the change overloads (upstream checkNodeTopologyDistribution).
 * 0 or -ENOMEM. */
int ctl_topology_sync(struct se_controller *ctl);
/* One sync of a service key: 0 or -errno (the key is retried). */
int ctl_sync(struct se_controller *ctl, const char *key);
/* The SE_DECODE_* flags the cache's objects of a kind are decoded with. */
unsigned ctl_decode_flags(enum se_kind kind);
/* The time of the oldest unwritten pod change of key (0: none), forgotten. */
uint64_t ctl_take_pod_change(struct se_controller *ctl, const char *key);

/* Records that we wrote (generation >= 0) or deleted (-1) slice ns/name. */
void ctl_slice_written(struct se_controller *ctl, const char *ns, const char *name,
                       int64_t generation);

void ctl_metrics_init(struct se_controller *ctl);
/* The queue's timing hook: feeds queue_latency and work_duration. */
void ctl_queue_observe(void *data, enum se_kube_queue_phase phase, uint64_t ns);
/* Records the desired endpoint and slice counts of key (removes with -1). */
void ctl_gauges_set(struct se_controller *ctl, const char *key, long endpoints, long slices);
void ctl_gauges_release(struct se_controller *ctl);

#endif
