/* svcenv-proxy's state shared by its parts: the HTTP endpoints (serve.c)
 * and the wiring (main.c). The sync loop is the proxier of pkg/proxy. */
#ifndef SVCENV_PROXYD_H
#define SVCENV_PROXYD_H

#include <stdbool.h>
#include <stdint.h>

#include <svcenv/httpd.h>
#include <svcenv/httpd_probes.h>
#include <svcenv/kube_watch.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/store.h>

struct hc_server {
        int port;
        char ns[64], name[254];
        struct se_httpd *httpd;
        struct proxyd *d;
};

struct proxyd {
        /* configuration */
        struct se_proxy_flags flags;
        struct se_proxy_proxier_config pcfg;
        const char *hostname;
        const char *healthz_addr, *metrics_addr;
        enum se_ip_family fams[2];
        unsigned n_fams;

        struct se_proxy_proxier *proxier;
        struct se_store *store;
        struct se_kube_client *client;
        struct se_kube_informer *inf[4]; /* the last, ServiceCIDRs, with nftables only */
        unsigned n_inf;

        /* the health-check node port servers: changed by the sync thread only */
        struct hc_server *hc[SE_PROXY_MAX_HC_PORTS];
        unsigned n_hc;

        struct se_httpd *healthz, *metrics;
        struct se_httpd_probes probes; /* of the metrics server */
};

/* Serving (serve.c). */
int proxyd_serve_start(struct proxyd *d);
void proxyd_serve_stop(struct proxyd *d);
/* After a sync: opens and closes the health-check node port servers to
 * match the proxier's list (the proxier's synced hook, sync thread). */
void proxyd_hc_update(void *d);

#endif
