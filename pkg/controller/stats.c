/* The controller's metrics (Prometheus text); upstream names where upstream
 * measures the same thing. */
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/kube_watch.h>

#include "controller_internal.h"

struct gauge {
        char *key;
        long endpoints, slices;
};

void ctl_metrics_init(struct se_controller *ctl)
{
        se_histogram_init(&ctl->sync_duration, se_hist_sync_le, se_hist_sync_n);
        se_histogram_init(&ctl->change_to_write, se_hist_sync_le, se_hist_sync_n);
        se_histogram_init(&ctl->queue_latency, se_hist_workqueue_le, se_hist_workqueue_n);
        se_histogram_init(&ctl->work_duration, se_hist_workqueue_le, se_hist_workqueue_n);
}

void ctl_queue_observe(void *data, enum se_kube_queue_phase phase, uint64_t ns)
{
        struct se_controller *ctl = data;
        se_histogram_observe_ns(
                phase == SE_KUBE_QUEUE_WAITED ? &ctl->queue_latency : &ctl->work_duration, ns);
}

/* client-go's workqueue metrics of the controller's queue, name="endpoint". */
static void queue_metrics(struct se_controller *ctl, struct se_strbuf *out)
{
        static const char labels[] = "name=\"endpoint\"";
        struct se_kube_queue_stats st;
        se_kube_queue_stats(ctl->queue, &st);
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
                         labels, st.depth, labels, (unsigned long long)st.adds, labels,
                         (unsigned long long)st.retries, labels, (double)st.unfinished_ns / 1e9,
                         labels, (double)st.longest_ns / 1e9);
        se_histogram_render(&ctl->queue_latency, out, "workqueue_queue_duration_seconds", labels,
                            "How long in seconds an item stays in workqueue before being "
                            "requested.");
        se_histogram_render(&ctl->work_duration, out, "workqueue_work_duration_seconds", labels,
                            "How long in seconds processing an item from workqueue takes.");
}

void ctl_gauges_set(struct se_controller *ctl, const char *key, long endpoints, long slices)
{
        pthread_mutex_lock(&ctl->gauge_lock);
        struct gauge *g = se_hashmap_get(&ctl->gauges, key);
        if (g) {
                ctl->endpoints_desired -= g->endpoints;
                ctl->slices_current -= g->slices;
        }
        if (endpoints < 0) {
                if (g) {
                        se_hashmap_remove(&ctl->gauges, key);
                        free(g->key);
                        free(g);
                }
        } else {
                if (!g && (g = se_calloc(1, sizeof(*g))) != NULL) {
                        g->key = se_strdup(key);
                        if (!g->key || se_hashmap_put(&ctl->gauges, g->key, g, NULL) < 0) {
                                free(g->key);
                                free(g);
                                g = NULL;
                        }
                }
                if (g) {
                        g->endpoints = endpoints;
                        g->slices = slices;
                        ctl->endpoints_desired += endpoints;
                        ctl->slices_current += slices;
                }
        }
        pthread_mutex_unlock(&ctl->gauge_lock);
}

void ctl_gauges_release(struct se_controller *ctl)
{
        const char *k;
        void *v;
        for (size_t i = 0; se_hashmap_next(&ctl->gauges, &i, &k, &v);) {
                struct gauge *g = v;
                free(g->key);
                free(g);
        }
        se_hashmap_release(&ctl->gauges);
}

static const char *const res_names[CTL_RES_COUNT] = { "endpoints", "endpointslices" };
static const char *const op_names[CTL_OP_COUNT] = { "create", "update", "delete" };
static const char *const result_names[CTL_RESULT_COUNT] = { "success", "conflict", "error" };

void se_controller_metrics(struct se_controller *ctl, struct se_strbuf *out)
{
        se_strbuf_puts(out, "# HELP svcenv_controller_writes_total API writes of Endpoints and "
                            "EndpointSlices, by operation and result.\n"
                            "# TYPE svcenv_controller_writes_total counter\n");
        for (int r = 0; r < CTL_RES_COUNT; r++)
                for (int o = 0; o < CTL_OP_COUNT; o++)
                        for (int x = 0; x < CTL_RESULT_COUNT; x++)
                                se_strbuf_printf(
                                        out,
                                        "svcenv_controller_writes_total{resource=\"%s\","
                                        "operation=\"%s\",result=\"%s\"} %llu\n",
                                        res_names[r], op_names[o], result_names[x],
                                        (unsigned long long)atomic_load(&ctl->writes[r][o][x]));
        se_strbuf_puts(out, "# HELP endpoint_slice_controller_changes Number of EndpointSlice "
                            "changes\n# TYPE endpoint_slice_controller_changes counter\n");
        for (int o = 0; o < CTL_OP_COUNT; o++)
                se_strbuf_printf(
                        out, "endpoint_slice_controller_changes{operation=\"%s\"} %llu\n",
                        op_names[o],
                        (unsigned long long)atomic_load(&ctl->writes[CTL_RES_SLICES][o][CTL_OK]));
        se_strbuf_printf(out,
                         "# HELP endpoint_slice_controller_syncs Number of EndpointSlice syncs\n"
                         "# TYPE endpoint_slice_controller_syncs counter\n"
                         "endpoint_slice_controller_syncs{result=\"success\"} %llu\n"
                         "endpoint_slice_controller_syncs{result=\"error\"} %llu\n",
                         (unsigned long long)atomic_load(&ctl->syncs[CTL_SYNC_SUCCESS]),
                         (unsigned long long)atomic_load(&ctl->syncs[CTL_SYNC_ERROR]));
        pthread_mutex_lock(&ctl->gauge_lock);
        long desired = (long)ctl->endpoints_desired, slices = (long)ctl->slices_current;
        pthread_mutex_unlock(&ctl->gauge_lock);
        se_strbuf_printf(out,
                         "# HELP endpoint_slice_controller_endpoints_desired Number of endpoints "
                         "desired\n# TYPE endpoint_slice_controller_endpoints_desired gauge\n"
                         "endpoint_slice_controller_endpoints_desired %ld\n"
                         "# HELP endpoint_slice_controller_num_endpoint_slices Number of "
                         "EndpointSlices\n# TYPE endpoint_slice_controller_num_endpoint_slices "
                         "gauge\nendpoint_slice_controller_num_endpoint_slices %ld\n",
                         desired, slices);
        se_strbuf_printf(out,
                         "# HELP svcenv_controller_syncs_without_write_total Syncs that found "
                         "every object right.\n"
                         "# TYPE svcenv_controller_syncs_without_write_total counter\n"
                         "svcenv_controller_syncs_without_write_total %llu\n"
                         "# HELP svcenv_controller_dropped_keys_total Keys dropped after 15 "
                         "failed syncs.\n# TYPE svcenv_controller_dropped_keys_total counter\n"
                         "svcenv_controller_dropped_keys_total %llu\n"
                         "# HELP svcenv_controller_pod_events_total Pod events seen.\n"
                         "# TYPE svcenv_controller_pod_events_total counter\n"
                         "svcenv_controller_pod_events_total %llu\n"
                         "# HELP svcenv_controller_cache_synced 1 once every informer listed.\n"
                         "# TYPE svcenv_controller_cache_synced gauge\n"
                         "svcenv_controller_cache_synced %d\n"
                         "# HELP svcenv_controller_cache_sync_seconds Time to the first full "
                         "list of every informer.\n"
                         "# TYPE svcenv_controller_cache_sync_seconds gauge\n"
                         "svcenv_controller_cache_sync_seconds %.6f\n",
                         (unsigned long long)atomic_load(&ctl->skipped_writes),
                         (unsigned long long)atomic_load(&ctl->drops),
                         (unsigned long long)atomic_load(&ctl->pod_events),
                         atomic_load(&ctl->synced) ? 1 : 0, (double)ctl->synced_ns / 1e9);
        /* what the cache holds: objects and the bytes of their arenas */
        static const enum se_kind kinds[] = { SE_KIND_SERVICE, SE_KIND_POD, SE_KIND_NODE,
                                              SE_KIND_ENDPOINTS, SE_KIND_ENDPOINT_SLICE };
        se_strbuf_puts(out, "# HELP svcenv_controller_cache_objects Objects in the informer "
                            "cache.\n# TYPE svcenv_controller_cache_objects gauge\n"
                            "# HELP svcenv_controller_cache_bytes Bytes the cached objects "
                            "take.\n# TYPE svcenv_controller_cache_bytes gauge\n");
        se_store_rdlock(ctl->store);
        for (size_t k = 0; k < SE_ARRAY_SIZE(kinds); k++) {
                const struct se_object **objs = NULL;
                long n = se_store_list(ctl->store, kinds[k], NULL, &objs);
                size_t bytes = 0;
                for (long i = 0; i < n; i++)
                        bytes += se_object_memory(objs[i]);
                free(objs);
                se_strbuf_printf(out,
                                 "svcenv_controller_cache_objects{kind=\"%s\"} %ld\n"
                                 "svcenv_controller_cache_bytes{kind=\"%s\"} %zu\n",
                                 se_kind_name(kinds[k]), n > 0 ? n : 0, se_kind_name(kinds[k]),
                                 bytes);
        }
        se_store_unlock(ctl->store);
        se_histogram_render(&ctl->sync_duration, out, "svcenv_controller_sync_duration_seconds",
                            NULL, "Time of one sync of a service key, planning and writes.");
        se_histogram_render(&ctl->change_to_write, out,
                            "svcenv_controller_pod_change_to_write_seconds", NULL,
                            "From a pod event that changes a service's endpoints to the end "
                            "of the write that publishes it.");
        queue_metrics(ctl, out);
}
