/* ctl_metrics.h — counters and histograms in Prometheus text, lock-free
 * (atomics), for the controller's /metrics. */
#ifndef SVCENV_CTL_METRICS_H
#define SVCENV_CTL_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/strbuf.h>

#define SE_HIST_MAX_BUCKETS 24

struct se_histogram {
        const double *le; /* upper bounds, ascending; static */
        size_t n_le; /* <= SE_HIST_MAX_BUCKETS */
        _Atomic uint64_t buckets[SE_HIST_MAX_BUCKETS + 1]; /* non-cumulative; last: +Inf */
        _Atomic uint64_t count;
        _Atomic uint64_t sum_ns; /* observations are durations */
};

/* Bucket sets: client-go's workqueue duration buckets (1e-8 .. 10 s, x10),
 * and Kubernetes' controller sync buckets (0.001 s .. 15 s, doubling,
 * plus 30 s and 60 s). */
extern const double se_hist_workqueue_le[];
extern const size_t se_hist_workqueue_n;
extern const double se_hist_sync_le[];
extern const size_t se_hist_sync_n;

/* Zeroes h and sets its bounds. */
void se_histogram_init(struct se_histogram *h, const double *le, size_t n_le);
void se_histogram_observe_ns(struct se_histogram *h, uint64_t ns);
/* The value at quantile q (0..1) by linear interpolation within buckets;
 * 0 when empty. */
double se_histogram_quantile(const struct se_histogram *h, double q);
/* Writes `# HELP`/`# TYPE` (when help is not NULL) and the series of name
 * with the extra labels (e.g. `name="x"`, or NULL), values in seconds. */
void se_histogram_render(const struct se_histogram *h, struct se_strbuf *out, const char *name,
                         const char *labels, const char *help);

#endif
