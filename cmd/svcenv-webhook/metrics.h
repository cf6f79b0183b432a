/* The webhook's Prometheus metrics (atomics; any thread). */
#ifndef SVCENV_WEBHOOK_METRICS_H
#define SVCENV_WEBHOOK_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <svcenv/admission.h>
#include <svcenv/httpd.h>

void metrics_observe(enum se_admission_outcome outcome, double seconds, size_t patch_bytes);
/* The exposition text (malloc'ed) with the extra gauges given. */
char *metrics_render(size_t *ret_len, const struct se_httpd_stats *tls, long services, int ready);

#endif
