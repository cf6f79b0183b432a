/* histogram.h — Prometheus histograms, lock-free (atomics), any thread.
 *
 * The one histogram of every daemon's /metrics: fixed upper bounds given at
 * init (static storage, ascending), observations counted in the first
 * bucket whose bound is >= the value (Prometheus' `le`), plus +Inf.
 * Rendering follows the Prometheus text format as client_golang writes it
 * (cumulative buckets, floats in Go's shortest %g form), so the series
 * read the same as upstream's. */
#ifndef SVCENV_HISTOGRAM_H
#define SVCENV_HISTOGRAM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/strbuf.h>

/* kube-proxy's network programming histogram has 80 bounds, the most. */
#define SE_HIST_MAX_BUCKETS 80

struct se_histogram {
        const double *le; /* upper bounds, ascending; borrowed, static */
        size_t n_le; /* <= SE_HIST_MAX_BUCKETS */
        _Atomic uint64_t buckets[SE_HIST_MAX_BUCKETS + 1]; /* non-cumulative; last: +Inf */
        _Atomic uint64_t count;
        _Atomic uint64_t sum_bits; /* the sum, a double's bits (CAS-added) */
};

/* Bucket sets: client-go's workqueue duration buckets (1e-8 .. 10 s, x10),
 * and Kubernetes' controller sync buckets (0.001 s .. 16.384 s doubling,
 * plus 30 s and 60 s). */
extern const double se_hist_workqueue_le[];
extern const size_t se_hist_workqueue_n;
extern const double se_hist_sync_le[];
extern const size_t se_hist_sync_n;

/* Zeroes h and sets its bounds (more than SE_HIST_MAX_BUCKETS: the first
 * ones only). */
void se_histogram_init(struct se_histogram *h, const double *le, size_t n_le);
void se_histogram_observe(struct se_histogram *h, double v);
/* A duration in nanoseconds, observed in seconds. */
void se_histogram_observe_ns(struct se_histogram *h, uint64_t ns);
uint64_t se_histogram_count(const struct se_histogram *h);
double se_histogram_sum(const struct se_histogram *h);
/* The value at quantile q (0..1) by linear interpolation within buckets;
 * 0 when empty. */
double se_histogram_quantile(const struct se_histogram *h, double q);
/* Writes `# HELP`/`# TYPE` (when help is not NULL) and the series of name
 * with the extra labels (e.g. `name="x"`, or NULL). */
void se_histogram_render(const struct se_histogram *h, struct se_strbuf *out, const char *name,
                         const char *labels, const char *help);

/* v as client_golang's text format writes it: Go's
 * strconv.FormatFloat(v, 'g', -1, 64), the shortest text that reads back
 * as v, in exponent form below 1e-4 and from 1e6 on ("0.005", "1e-08",
 * "16.384", "1.234567e+06"), and "+Inf", "-Inf", "NaN". buf >= 32 bytes. */
void se_format_go_float(double v, char *buf, size_t size);

#endif
