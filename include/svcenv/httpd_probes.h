/* httpd_probes.h — the endpoints every daemon serves beside its own:
 * /healthz, /livez, /readyz and /metrics.
 *
 * The three health paths answer as Kubernetes components do
 * (k8s.io/apiserver's healthz handler): 200 `ok` when every check passes
 * (with `?verbose`: one `[+]name ok` line per check, then `<path> check
 * passed`); else 500 with `[+]name ok` / `[-]name failed: reason withheld`
 * lines and `<path> check failed` (the reasons belong in the daemon's log,
 * not on a public port). Always text/plain; charset=utf-8 with nosniff.
 * /livez runs the checks that are not ready_only, /readyz and /healthz all
 * of them, in order, after the built-in `ping`.
 *
 * Ownership: the probes and checks are borrowed for the server's life.
 * Checks and the metrics writer run on an event-loop thread and must be
 * thread-safe and quick. */
#ifndef SVCENV_HTTPD_PROBES_H
#define SVCENV_HTTPD_PROBES_H

#include <stdbool.h>
#include <stddef.h>

#include <svcenv/httpd.h>
#include <svcenv/strbuf.h>

struct se_httpd_check {
        const char *name;
        bool (*ok)(void *data);
        void *data;
        bool ready_only; /* left out of /livez */
};

struct se_httpd_probes {
        const struct se_httpd_check *checks;
        size_t n_checks;
        /* appends the Prometheus text of /metrics; NULL: no /metrics */
        void (*metrics)(void *data, struct se_strbuf *out);
        void *metrics_data;
};

/* The Content-Type of Prometheus' text format 0.0.4. */
#define SE_HTTPD_METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Answers req when its path is one of the four (any method, as upstream's
 * mux) and returns true; false, resp untouched, for any other path. */
bool se_httpd_probes_serve(const struct se_httpd_probes *p, const struct se_httpd_request *req,
                           struct se_httpd_response *resp);
/* Go's http.NotFound: 404 `404 page not found\n`, text/plain, nosniff. */
void se_httpd_not_found(struct se_httpd_response *resp);

#endif
