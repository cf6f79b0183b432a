/* Prometheus text exposition of the webhook's counters and histograms. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <svcenv/histogram.h>
#include <svcenv/macro.h>
#include <svcenv/strbuf.h>

#include "metrics.h"

static const double latency_le[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                     0.05,   0.1,   0.25,   0.5,   1 };
static const double bytes_le[] = { 1024, 4096, 16384, 65536, 262144, 1048576, 4194304 };

static _Atomic uint64_t admissions[SE_ADMIT_OUTCOME_COUNT];
static struct se_histogram latency, patch_size;

void metrics_init(void)
{
        se_histogram_init(&latency, latency_le, SE_ARRAY_SIZE(latency_le));
        se_histogram_init(&patch_size, bytes_le, SE_ARRAY_SIZE(bytes_le));
}

void metrics_observe(enum se_admission_outcome outcome, double seconds, size_t patch_bytes)
{
        if ((unsigned)outcome < SE_ADMIT_OUTCOME_COUNT)
                atomic_fetch_add(&admissions[outcome], 1);
        se_histogram_observe(&latency, seconds);
        if (outcome == SE_ADMIT_PATCHED)
                se_histogram_observe(&patch_size, (double)patch_bytes);
}

void metrics_render(struct se_strbuf *out, const struct se_httpd_stats *tls,
                    const struct se_admission_cache_stats *cache, long services, int ready)
{
        se_strbuf_puts(out, "# HELP svcenv_webhook_admissions_total Admission reviews answered, "
                            "by result.\n# TYPE svcenv_webhook_admissions_total counter\n");
        for (int i = 0; i < SE_ADMIT_OUTCOME_COUNT; i++)
                se_strbuf_printf(out, "svcenv_webhook_admissions_total{result=\"%s\"} %llu\n",
                                 se_admission_outcome_name((enum se_admission_outcome)i),
                                 (unsigned long long)atomic_load(&admissions[i]));
        se_histogram_render(&latency, out, "svcenv_webhook_admission_duration_seconds", NULL,
                            "Time to answer one admission review, body received to response "
                            "built.");
        se_histogram_render(&patch_size, out, "svcenv_webhook_patch_bytes", NULL,
                            "Size of the JSON patch of mutated pods, before base64.");
        se_strbuf_printf(out,
                         "# HELP svcenv_webhook_cert_reloads_total Serving certificate reloads.\n"
                         "# TYPE svcenv_webhook_cert_reloads_total counter\n"
                         "svcenv_webhook_cert_reloads_total{result=\"success\"} %llu\n"
                         "svcenv_webhook_cert_reloads_total{result=\"error\"} %llu\n",
                         (unsigned long long)tls->cert_reloads,
                         (unsigned long long)tls->cert_reload_errors);
        se_strbuf_printf(out,
                         "# HELP svcenv_webhook_services Services known to the webhook.\n"
                         "# TYPE svcenv_webhook_services gauge\nsvcenv_webhook_services %ld\n"
                         "# HELP svcenv_webhook_ready 1 once the Service source has synced.\n"
                         "# TYPE svcenv_webhook_ready gauge\nsvcenv_webhook_ready %d\n",
                         services, ready);
        se_strbuf_printf(
                out,
                "# HELP svcenv_webhook_cache_lookups_total Service variables of a "
                "namespace looked up in the cache, by result.\n"
                "# TYPE svcenv_webhook_cache_lookups_total counter\n"
                "svcenv_webhook_cache_lookups_total{result=\"hit\"} %llu\n"
                "svcenv_webhook_cache_lookups_total{result=\"miss\"} %llu\n"
                "# HELP svcenv_webhook_cache_invalidations_total Cached namespaces "
                "dropped (Service changes, size cap).\n"
                "# TYPE svcenv_webhook_cache_invalidations_total counter\n"
                "svcenv_webhook_cache_invalidations_total %llu\n"
                "# HELP svcenv_webhook_cache_bytes Memory held by the cache.\n"
                "# TYPE svcenv_webhook_cache_bytes gauge\nsvcenv_webhook_cache_bytes %zu\n",
                (unsigned long long)cache->hits, (unsigned long long)cache->misses,
                (unsigned long long)cache->invalidations, cache->bytes);
}
