/* Prometheus histograms (see histogram.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/histogram.h>
#include <svcenv/macro.h>

const double se_hist_workqueue_le[] = { 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10 };
const size_t se_hist_workqueue_n = SE_ARRAY_SIZE(se_hist_workqueue_le);
const double se_hist_sync_le[] = { 0.001, 0.002, 0.004, 0.008, 0.016, 0.032,  0.064, 0.128, 0.256,
                                   0.512, 1.024, 2.048, 4.096, 8.192, 16.384, 30,    60 };
const size_t se_hist_sync_n = SE_ARRAY_SIZE(se_hist_sync_le);

static uint64_t bits_of(double v)
{
        uint64_t b;
        memcpy(&b, &v, sizeof(b));
        return b;
}

static double double_of(uint64_t b)
{
        double v;
        memcpy(&v, &b, sizeof(v));
        return v;
}

void se_histogram_init(struct se_histogram *h, const double *le, size_t n_le)
{
        memset(h, 0, sizeof(*h));
        h->le = le;
        h->n_le = n_le < SE_HIST_MAX_BUCKETS ? n_le : SE_HIST_MAX_BUCKETS;
        atomic_store(&h->sum_bits, bits_of(0));
}

void se_histogram_observe(struct se_histogram *h, double v)
{
        size_t i = 0;
        while (i < h->n_le && v > h->le[i])
                i++;
        atomic_fetch_add(&h->buckets[i], 1);
        atomic_fetch_add(&h->count, 1);
        /* no atomic add for doubles: retry until nobody added in between */
        uint64_t old = atomic_load(&h->sum_bits);
        while (!atomic_compare_exchange_weak(&h->sum_bits, &old, bits_of(double_of(old) + v)))
                ;
}

void se_histogram_observe_ns(struct se_histogram *h, uint64_t ns)
{
        se_histogram_observe(h, (double)ns / 1e9);
}

uint64_t se_histogram_count(const struct se_histogram *h)
{
        return atomic_load(&h->count);
}

double se_histogram_sum(const struct se_histogram *h)
{
        return double_of(atomic_load(&h->sum_bits));
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

void se_format_go_float(double v, char *buf, size_t size)
{
        if (isnan(v)) {
                snprintf(buf, size, "NaN");
                return;
        }
        if (isinf(v)) {
                snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
                return;
        }
        if (v == 0) {
                snprintf(buf, size, "0");
                return;
        }
        /* the fewest significant digits that read back as v */
        char e[40];
        int digits = 1;
        for (; digits < 17; digits++) {
                snprintf(e, sizeof(e), "%.*e", digits - 1, v);
                if (strtod(e, NULL) == v)
                        break;
        }
        snprintf(e, sizeof(e), "%.*e", digits - 1, v);
        /* our own %e output: the exponent always parses */
        int exp = (int)strtol(strchr(e, 'e') + 1, NULL, 10);
        if (exp < -4 || exp >= 6) { /* Go's %e: two exponent digits at least, as C's */
                snprintf(buf, size, "%s", e);
                return;
        }
        int decimals = digits - 1 - exp;
        snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 0, v);
}

void se_histogram_render(const struct se_histogram *h, struct se_strbuf *out, const char *name,
                         const char *labels, const char *help)
{
        if (help)
                se_strbuf_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
        const char *sep = labels && *labels ? "," : "";
        const char *lb = labels ? labels : "";
        char num[40];
        uint64_t cum = 0;
        for (size_t i = 0; i <= h->n_le; i++) {
                cum += atomic_load(&h->buckets[i]);
                se_format_go_float(i < h->n_le ? h->le[i] : INFINITY, num, sizeof(num));
                se_strbuf_printf(out, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, lb, sep, num,
                                 (unsigned long long)cum);
        }
        const char *open = *lb ? "{" : "", *close = *lb ? "}" : "";
        se_format_go_float(se_histogram_sum(h), num, sizeof(num));
        se_strbuf_printf(out, "%s_sum%s%s%s %s\n%s_count%s%s%s %llu\n", name, open, lb, close, num,
                         name, open, lb, close, (unsigned long long)atomic_load(&h->count));
}
