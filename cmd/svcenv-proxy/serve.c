/* HTTP as kube-proxy's: /healthz and /livez on the health address,
 * /metrics (with a /healthz ping and /proxyMode) on the metrics address,
 * and one small server per health-check node port of
 * externalTrafficPolicy: Local services. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/httpd_probes.h>
#include <svcenv/log.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>

#include "proxyd.h"

static void reply(struct se_httpd_response *resp, int status, const char *type,
                  struct se_strbuf *sb)
{
        resp->status = status;
        resp->content_type = type;
        if (se_strbuf_failed(sb)) {
                se_strbuf_release(sb);
                resp->status = 500;
                return;
        }
        resp->body = se_strbuf_detach(sb, &resp->len);
}

static void gauge(struct se_strbuf *sb, const char *type, const char *name, const char *help,
                  double v)
{
        se_strbuf_printf(sb, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name,
                         v);
}

static void metrics(void *data, struct se_strbuf *sb)
{
        struct proxyd *d = data;
        se_histogram_render(&d->sync_all, sb, "kubeproxy_sync_proxy_rules_duration_seconds", NULL,
                            "SyncProxyRules latency in seconds");
        se_histogram_render(&d->sync_full, sb, "kubeproxy_sync_full_proxy_rules_duration_seconds",
                            NULL, "SyncProxyRules latency in seconds for full resyncs");
        se_histogram_render(&d->sync_partial, sb,
                            "kubeproxy_sync_partial_proxy_rules_duration_seconds", NULL,
                            "SyncProxyRules latency in seconds for partial resyncs");
        se_histogram_render(&d->netprog, sb, "kubeproxy_network_programming_duration_seconds", NULL,
                            "In Cluster Network Programming Latency in seconds");
        pthread_mutex_lock(&d->mu);
        gauge(sb, "gauge", "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
              "The last time proxy rules were successfully synced", d->last_sync_ts);
        gauge(sb, "gauge", "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
              "The last time a sync of proxy rules was queued", d->last_queued_ts);
        gauge(sb, "counter", "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
              "Cumulative proxy iptables restore failures", (double)d->restore_failures);
        gauge(sb, "counter", "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
              "Cumulative proxy iptables partial restore failures",
              (double)d->partial_restore_failures);
        se_strbuf_printf(sb,
                         "# HELP svcenv_proxy_syncs_total Syncs applied, by kind.\n"
                         "# TYPE svcenv_proxy_syncs_total counter\n"
                         "svcenv_proxy_syncs_total{kind=\"full\"} %llu\n"
                         "svcenv_proxy_syncs_total{kind=\"partial\"} %llu\n",
                         (unsigned long long)d->syncs_full, (unsigned long long)d->syncs_partial);
        gauge(sb, "gauge", "svcenv_proxy_restore_bytes",
              "Bytes of restore input (nft script) the last sync wrote", (double)d->bytes_last);
        gauge(sb, "counter", "svcenv_proxy_restore_bytes_total",
              "Bytes of restore input written in all", (double)d->bytes_total);
        gauge(sb, "counter", "svcenv_proxy_rules_written_total",
              "Rules (-A/-I/-D lines) written in all syncs", (double)d->rules_written_total);
        gauge(sb, "counter", "svcenv_proxy_canary_resyncs_total",
              "Full resyncs because our rules were flushed or the canary deleted",
              (double)d->canary_repairs);
        gauge(sb, "counter", "svcenv_proxy_conntrack_deletions_total",
              "conntrack -D runs that deleted stale UDP entries", (double)d->ct_deletes);
        se_strbuf_printf(sb,
                         "# HELP svcenv_proxy_tool_missing_total Runs of a tool that is not "
                         "installed (its work left undone)\n"
                         "# TYPE svcenv_proxy_tool_missing_total counter\n"
                         "svcenv_proxy_tool_missing_total{tool=\"conntrack\"} %llu\n",
                         (unsigned long long)d->conntrack_missing);
        pthread_mutex_unlock(&d->mu);
}

/* The --healthz-bind-address server: kube-proxy's /healthz and /livez. */
static void healthz_handle(void *data, const struct se_httpd_request *req,
                           struct se_httpd_response *resp)
{
        struct proxyd *d = data;
        bool livez = strcmp(req->path, "/livez") == 0;
        if (!livez && strcmp(req->path, "/healthz") != 0)
                return se_httpd_not_found(resp);
        struct se_strbuf sb;
        struct se_proxy_instant now;
        se_strbuf_init(&sb, 4096);
        proxyd_now(d, &now);
        pthread_mutex_lock(&d->mu);
        struct se_proxy_health h = d->health;
        pthread_mutex_unlock(&d->mu);
        bool ok = se_proxy_health_body(&h, &now, livez, &sb);
        resp->nosniff = true; /* as kube-proxy's health server */
        reply(resp, ok ? 200 : 503, "application/json", &sb);
}

/* The --metrics-bind-address server: /metrics, /healthz (a ping, as
 * kube-proxy's), /proxyMode. */
static void metrics_handle(void *data, const struct se_httpd_request *req,
                           struct se_httpd_response *resp)
{
        struct proxyd *d = data;
        if (se_httpd_probes_serve(&d->probes, req, resp))
                return;
        if (strcmp(req->path, "/proxyMode") == 0) {
                struct se_strbuf sb;
                se_strbuf_init(&sb, 64);
                se_strbuf_puts(&sb, d->nft ? "nftables" : "iptables");
                resp->nosniff = true;
                return reply(resp, 200, "text/plain; charset=utf-8", &sb);
        }
        se_httpd_not_found(resp);
}

static void hc_handle(void *data, const struct se_httpd_request *req,
                      struct se_httpd_response *resp)
{
        struct hc_port *hp = data;
        struct proxyd *d = hp->d;
        struct se_strbuf sb;
        struct se_proxy_instant now;
        (void)req;
        se_strbuf_init(&sb, 4096);
        proxyd_now(d, &now);
        pthread_mutex_lock(&d->mu);
        bool healthy = se_proxy_health_ok(&d->health, &now);
        unsigned local = hp->local;
        pthread_mutex_unlock(&d->mu);
        bool ok = se_proxy_hc_body(hp->ns, hp->name, local, healthy, &sb);
        resp->nosniff = true;
        reply(resp, ok ? 200 : 503, "application/json", &sb);
}

static int start_one(struct proxyd *d, const char *addr, se_httpd_handler handler,
                     struct se_httpd **ret)
{
        char host[128];
        struct se_httpd_config cfg = { .handler = handler, .data = d, .timeout_s = 10 };
        struct se_diag diag = { 0 };
        if (!addr || !addr[0])
                return 0; /* disabled */
        if (se_parse_hostport(addr, host, sizeof(host), &cfg.port) < 0) {
                se_log_error("bad bind address \"%s\" (want HOST:PORT)", addr);
                return -EINVAL;
        }
        cfg.address =
                host[0] && strcmp(host, "0.0.0.0") != 0 && strcmp(host, "::") != 0 ? host : NULL;
        int r = se_httpd_start(&cfg, ret, &diag);
        if (r < 0) {
                char buf[512];
                se_diag_format(&diag, buf, sizeof(buf));
                se_log_error("cannot serve on %s: %s", addr, buf);
        }
        return r;
}

int proxyd_serve_start(struct proxyd *d)
{
        d->probes = (struct se_httpd_probes){ .metrics = metrics, .metrics_data = d };
        int r = start_one(d, d->healthz_addr, healthz_handle, &d->healthz);
        if (r == 0)
                r = start_one(d, d->metrics_addr, metrics_handle, &d->metrics);
        return r;
}

void proxyd_serve_stop(struct proxyd *d)
{
        d->healthz = se_httpd_stop(d->healthz);
        d->metrics = se_httpd_stop(d->metrics);
        for (unsigned i = 0; i < d->n_hc; i++) {
                se_httpd_stop(d->hc[i]->httpd);
                free(d->hc[i]);
        }
        d->n_hc = 0;
}

struct want {
        int port;
        const char *ns, *name;
        unsigned local;
};

static struct want *find_want(struct want *w, size_t n, int port)
{
        for (size_t i = 0; i < n; i++)
                if (w[i].port == port)
                        return &w[i];
        return NULL;
}

void proxyd_hc_update(struct proxyd *d, struct se_proxy_table *const *tables, unsigned nt)
{
        struct want want[MAX_HC_PORTS];
        size_t n = 0;
        for (unsigned f = 0; f < nt; f++)
                for (uint32_t i = 0; tables[f] && i < tables[f]->n_ports; i++) {
                        const struct se_proxy_svcport *sp = &tables[f]->ports[i];
                        if (!sp->health_check_node_port)
                                continue;
                        struct want *w = find_want(want, n, sp->health_check_node_port);
                        if (!w) {
                                if (n == MAX_HC_PORTS)
                                        continue;
                                w = &want[n++];
                                *w = (struct want){ sp->health_check_node_port, sp->ns, sp->name,
                                                    0 };
                        }
                        /* LocalReadyEndpoints: local ready endpoints summed over ports */
                        for (uint32_t e = 0; e < sp->n_eps; e++)
                                w->local += sp->eps[e].local && sp->eps[e].ready;
                }
        /* close the ports no longer wanted (outside the lock: a handler may wait on it) */
        for (unsigned i = 0; i < d->n_hc;) {
                struct hc_port *hp = d->hc[i];
                struct want *w = find_want(want, n, hp->port);
                if (w && strcmp(w->ns, hp->ns) == 0 && strcmp(w->name, hp->name) == 0) {
                        i++;
                        continue;
                }
                se_log_info(2, "closing health check port %d of %s/%s", hp->port, hp->ns, hp->name);
                se_httpd_stop(hp->httpd);
                free(hp);
                d->hc[i] = d->hc[--d->n_hc];
        }
        for (size_t k = 0; k < n; k++) {
                bool have = false;
                for (unsigned i = 0; i < d->n_hc; i++)
                        have |= d->hc[i]->port == want[k].port;
                if (have)
                        continue;
                struct hc_port *hp = se_calloc(1, sizeof(*hp));
                if (!hp)
                        continue;
                hp->port = want[k].port;
                hp->d = d;
                snprintf(hp->ns, sizeof(hp->ns), "%s", want[k].ns);
                snprintf(hp->name, sizeof(hp->name), "%s", want[k].name);
                hp->local = want[k].local;
                struct se_httpd_config cfg = { .port = hp->port, .handler = hc_handle, .data = hp };
                struct se_diag diag = { 0 };
                if (se_httpd_start(&cfg, &hp->httpd, &diag) < 0) {
                        char buf[512];
                        se_diag_format(&diag, buf, sizeof(buf));
                        se_log_error("failed to start healthcheck %s/%s on port %d: %s", hp->ns,
                                     hp->name, hp->port, buf);
                        free(hp);
                        continue;
                }
                se_log_info(2, "opening health check port %d of %s/%s", hp->port, hp->ns, hp->name);
                d->hc[d->n_hc++] = hp;
        }
        pthread_mutex_lock(&d->mu);
        for (unsigned i = 0; i < d->n_hc; i++) {
                struct want *w = find_want(want, n, d->hc[i]->port);
                d->hc[i]->local = w ? w->local : 0;
        }
        pthread_mutex_unlock(&d->mu);
}
