/* svcenv-proxy's state shared by its parts: the HTTP endpoints (serve.c)
 * and the wiring (main.c). The sync loop is the proxier of pkg/proxy. */
#ifndef SVCENV_PROXYD_H
#define SVCENV_PROXYD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <svcenv/httpd.h>
#include <svcenv/httpd_probes.h>
#include <svcenv/kube_watch.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/store.h>
#include <svcenv/uproxy.h>

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
        /* --mode userspace */
        bool userspace;
        int uport;
        int64_t udp_timeout_ns;
        char scheduler[SE_UPROXY_MAX_SCHED]; /* --scheduler: for Services without the annotation */
        const char *files[64]; /* -f: serve from manifests, no API server */
        size_t n_files;
        struct se_uproxy *uproxy;
        pthread_mutex_t us_mu; /* the userspace loop's wake-ups */
        pthread_cond_t us_cond;
        bool us_dirty, us_reload, us_stop; /* a change; SIGHUP with -f; the end */

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

/* The userspace mode's loop (userspace.c): returns after
 * proxyd_userspace_stop. */
void proxyd_userspace_run(struct proxyd *d);
/* Its store callback (data is the proxyd), SIGHUP (-f: read the files
 * again) and stop. */
void proxyd_userspace_on_change(void *data, enum se_store_event ev, const struct se_object *old,
                                const struct se_object *new_obj);
void proxyd_userspace_reload(struct proxyd *d);
void proxyd_userspace_stop(struct proxyd *d);
/* --cleanup's part for the userspace mode: jumps, chains, nft table, ip rule. */
void proxyd_userspace_cleanup(void);
/* Serving (serve.c). */
int proxyd_serve_start(struct proxyd *d);
void proxyd_serve_stop(struct proxyd *d);
/* After a sync: opens and closes the health-check node port servers to
 * match the proxier's list (the proxier's synced hook, sync thread). */
void proxyd_hc_update(void *d);

#endif
