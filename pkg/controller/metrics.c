/* Histograms in Prometheus text (see ctl_metrics.h). */
#include <stdio.h>
#include <string.h>

#include <svcenv/ctl_metrics.h>
#include <svcenv/macro.h>

const double se_hist_workqueue_le[] = { 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10 };
const size_t se_hist_workqueue_n = SE_ARRAY_SIZE(se_hist_workqueue_le);
const double se_hist_sync_le[] = { 0.001, 0.002, 0.004, 0.008, 0.016, 0.032,  0.064, 0.128, 0.256,
                                   0.512, 1.024, 2.048, 4.096, 8.192, 16.384, 30,    60 };
const size_t se_hist_sync_n = SE_ARRAY_SIZE(se_hist_sync_le);

void se_histogram_init(struct se_histogram *h, const double *le, size_t n_le)
{
        memset(h, 0, sizeof(*h));
        h->le = le;
        h->n_le = n_le < SE_HIST_MAX_BUCKETS ? n_le : SE_HIST_MAX_BUCKETS;
}

void se_histogram_observe_ns(struct se_histogram *h, uint64_t ns)
{
        double v = (double)ns / 1e9;
        size_t i = 0;
        while (i < h->n_le && v > h->le[i])
                i++;
        atomic_fetch_add(&h->buckets[i], 1);
        atomic_fetch_add(&h->count, 1);
        atomic_fetch_add(&h->sum_ns, ns);
}

double se_histogram_quantile(const struct se_histogram *h, double q)
{
        uint64_t total = atomic_load(&h->count);
        if (!total)
                return 0;
        double rank = q * (double)total, cum = 0, lower = 0;
        for (size_t i = 0; i <= h->n_le; i++) {
                double c = (double)atomic_load(&h->buckets[i]);
                if (i == h->n_le)
                        return lower; /* +Inf bucket: the highest finite bound */
                if (cum + c >= rank && c > 0)
                        return lower + (h->le[i] - lower) * ((rank - cum) / c);
                cum += c;
                lower = h->le[i];
        }
        return lower;
}

void se_histogram_render(const struct se_histogram *h, struct se_strbuf *out, const char *name,
                         const char *labels, const char *help)
{
        if (help)
                se_strbuf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
        const char *sep = labels && *labels ? "," : "";
        const char *lb = labels ? labels : "";
        uint64_t cum = 0;
        for (size_t i = 0; i <= h->n_le; i++) {
                cum += atomic_load(&h->buckets[i]);
                if (i < h->n_le)
                        se_strbuf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, lb, sep,
                                         h->le[i], (unsigned long long)cum);
                else
                        se_strbuf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, lb, sep,
                                         (unsigned long long)cum);
        }
        const char *open = *lb ? "{" : "", *close = *lb ? "}" : "";
        se_strbuf_printf(out, "%s_sum%s%s%s %.9f\n%s_count%s%s%s %llu\n", name, open, lb, close,
                         (double)atomic_load(&h->sum_ns) / 1e9, name, open, lb, close,
                         (unsigned long long)atomic_load(&h->count));
}
