/* Prometheus text exposition of the webhook's counters and histograms. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <svcenv/macro.h>
#include <svcenv/strbuf.h>

#include "metrics.h"

static const double latency_le[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                     0.05,   0.1,   0.25,   0.5,   1 };
static const double bytes_le[] = { 1024, 4096, 16384, 65536, 262144, 1048576, 4194304 };

struct histogram {
        _Atomic uint64_t buckets[16]; /* non-cumulative; last = +Inf */
        _Atomic uint64_t count;
        _Atomic uint64_t sum_micro; /* sum in 1e-6 units */
};

static _Atomic uint64_t admissions[SE_ADMIT_OUTCOME_COUNT];
static struct histogram latency, patch_size;

static void observe(struct histogram *h, const double *le, size_t n, double v, double scale)
{
        size_t i = 0;
        while (i < n && v > le[i])
                i++;
        atomic_fetch_add(&h->buckets[i], 1);
        atomic_fetch_add(&h->count, 1);
        atomic_fetch_add(&h->sum_micro, (uint64_t)(v * scale));
}

void metrics_observe(enum se_admission_outcome outcome, double seconds, size_t patch_bytes)
{
        if ((unsigned)outcome < SE_ADMIT_OUTCOME_COUNT)
                atomic_fetch_add(&admissions[outcome], 1);
        observe(&latency, latency_le, SE_ARRAY_SIZE(latency_le), seconds, 1e6);
        if (outcome == SE_ADMIT_PATCHED)
                observe(&patch_size, bytes_le, SE_ARRAY_SIZE(bytes_le), (double)patch_bytes, 1);
}

static void render_histogram(struct se_strbuf *sb, const char *name, const char *help,
                             struct histogram *h, const double *le, size_t n, double scale)
{
        se_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
        uint64_t cum = 0;
        for (size_t i = 0; i <= n; i++) {
                cum += atomic_load(&h->buckets[i]);
                if (i < n)
                        se_strbuf_printf(sb, "%s_bucket{le=\"%g\"} %llu\n", name, le[i],
                                         (unsigned long long)cum);
                else
                        se_strbuf_printf(sb, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                                         (unsigned long long)cum);
        }
        se_strbuf_printf(sb, "%s_sum %.6f\n%s_count %llu\n", name,
                         (double)atomic_load(&h->sum_micro) / scale, name,
                         (unsigned long long)atomic_load(&h->count));
}

char *metrics_render(size_t *ret_len, const struct se_httpd_stats *tls, long services, int ready)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 1 << 20);
        se_strbuf_puts(&sb, "# HELP svcenv_webhook_admissions_total Admission reviews answered, "
                            "by result.\n# TYPE svcenv_webhook_admissions_total counter\n");
        for (int i = 0; i < SE_ADMIT_OUTCOME_COUNT; i++)
                se_strbuf_printf(&sb, "svcenv_webhook_admissions_total{result=\"%s\"} %llu\n",
                                 se_admission_outcome_name((enum se_admission_outcome)i),
                                 (unsigned long long)atomic_load(&admissions[i]));
        render_histogram(&sb, "svcenv_webhook_admission_duration_seconds",
                         "Time to answer one admission review, body received to response built.",
                         &latency, latency_le, SE_ARRAY_SIZE(latency_le), 1e6);
        render_histogram(&sb, "svcenv_webhook_patch_bytes",
                         "Size of the JSON patch of mutated pods, before base64.", &patch_size,
                         bytes_le, SE_ARRAY_SIZE(bytes_le), 1);
        se_strbuf_printf(&sb,
                         "# HELP svcenv_webhook_cert_reloads_total Serving certificate reloads.\n"
                         "# TYPE svcenv_webhook_cert_reloads_total counter\n"
                         "svcenv_webhook_cert_reloads_total{result=\"success\"} %llu\n"
                         "svcenv_webhook_cert_reloads_total{result=\"error\"} %llu\n",
                         (unsigned long long)tls->cert_reloads,
                         (unsigned long long)tls->cert_reload_errors);
        se_strbuf_printf(&sb,
                         "# HELP svcenv_webhook_services Services known to the webhook.\n"
                         "# TYPE svcenv_webhook_services gauge\nsvcenv_webhook_services %ld\n"
                         "# HELP svcenv_webhook_ready 1 once the Service source has synced.\n"
                         "# TYPE svcenv_webhook_ready gauge\nsvcenv_webhook_ready %d\n",
                         services, ready);
        if (se_strbuf_failed(&sb)) {
                se_strbuf_release(&sb);
                return NULL;
        }
        return se_strbuf_detach(&sb, ret_len);
}
