/* The webhook's Prometheus metrics (atomics; any thread). */
#ifndef SVCENV_WEBHOOK_METRICS_H
#define SVCENV_WEBHOOK_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <svcenv/admission.h>
#include <svcenv/httpd.h>
#include <svcenv/strbuf.h>

/* Sets the histograms' bounds; before the first observation. */
void metrics_init(void);
void metrics_observe(enum se_admission_outcome outcome, double seconds, size_t patch_bytes);
/* Appends the exposition text with the extra gauges given. */
void metrics_render(struct se_strbuf *out, const struct se_httpd_stats *tls,
                    const struct se_admission_cache_stats *cache, long services, int ready);

#endif
