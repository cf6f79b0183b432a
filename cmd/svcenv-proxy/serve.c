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

static void metrics(void *data, struct se_strbuf *sb)
{
        struct proxyd *d = data;
        /* --mode userspace, or started for a routed Service */
        struct se_uproxy *up = __atomic_load_n(&d->uproxy, __ATOMIC_ACQUIRE);
        if (up)
                se_uproxy_metrics(up, sb);
        se_proxy_proxier_metrics(d->proxier, sb);
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
        se_strbuf_init(&sb, 4096);
        bool ok = se_proxy_proxier_health_body(d->proxier, livez, &sb);
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
                se_strbuf_puts(&sb, d->userspace ? "userspace" :
                                    d->pcfg.nft  ? "nftables" :
                                                   "iptables");
                resp->nosniff = true;
                return reply(resp, 200, "text/plain; charset=utf-8", &sb);
        }
        se_httpd_not_found(resp);
}

static void hc_handle(void *data, const struct se_httpd_request *req,
                      struct se_httpd_response *resp)
{
        struct hc_server *hp = data;
        struct se_strbuf sb;
        (void)req;
        se_strbuf_init(&sb, 4096);
        bool ok = se_proxy_proxier_hc_body(hp->d->proxier, hp->port, &sb);
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

static const struct se_proxy_hc_port *find_want(const struct se_proxy_hc_port *w, size_t n,
                                                int port)
{
        for (size_t i = 0; i < n; i++)
                if (w[i].port == port)
                        return &w[i];
        return NULL;
}

void proxyd_hc_update(void *data)
{
        struct proxyd *d = data;
        static struct se_proxy_hc_port want[SE_PROXY_MAX_HC_PORTS]; /* sync thread only */
        size_t n = se_proxy_proxier_hc_ports(d->proxier, want, SE_PROXY_MAX_HC_PORTS);
        /* close the ports no longer wanted, or now of another service */
        for (unsigned i = 0; i < d->n_hc;) {
                struct hc_server *hp = d->hc[i];
                const struct se_proxy_hc_port *w = find_want(want, n, hp->port);
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
                struct hc_server *hp = se_calloc(1, sizeof(*hp));
                if (!hp)
                        continue;
                hp->port = want[k].port;
                hp->d = d;
                memcpy(hp->ns, want[k].ns, sizeof(hp->ns));
                memcpy(hp->name, want[k].name, sizeof(hp->name));
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
}
