/* svcenv-proxy's state shared by its parts: the sync loop (sync.c), the
 * HTTP endpoints (serve.c) and the wiring (main.c). */
#ifndef SVCENV_PROXYD_H
#define SVCENV_PROXYD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <svcenv/histogram.h>
#include <svcenv/httpd.h>
#include <svcenv/httpd_probes.h>
#include <svcenv/kube_watch.h>
#include <svcenv/proxy.h>
#include <svcenv/store.h>

#define MAX_TRIGGERS 4096 /* pending trigger times kept for the latency metric */
#define MAX_HC_PORTS 256 /* health-check node ports served */

struct hc_port {
        int port;
        char ns[64], name[254];
        unsigned local; /* ready local endpoints over the service's ports */
        struct se_httpd *httpd;
        struct proxyd *d;
};

struct proxyd {
        /* configuration */
        struct se_proxy_options opt;
        bool nft, node_ip_flag;
        int nfacct_mode; /* 0 off, 1 auto/on */
        bool minimal; /* --partial-sync minimal */
        const char *hostname;
        int64_t sync_period_ns, min_sync_period_ns;
        const char *healthz_addr, *metrics_addr;
        enum se_ip_family fams[2];
        unsigned n_fams;

        struct se_store *store;
        struct se_kube_client *client;
        struct se_kube_informer *inf[4]; /* the last, ServiceCIDRs, with nftables only */
        unsigned n_inf;

        pthread_mutex_t mu; /* guards everything below */
        pthread_cond_t cond;
        bool dirty, stop, node_changed, cidrs_changed;
        struct se_proxy_health health;
        int64_t start_mono_ns;
        int64_t triggers[MAX_TRIGGERS];
        size_t n_triggers;
        /* metrics (the histograms are atomic and need no lock) */
        struct se_histogram sync_all, sync_full, sync_partial, netprog;
        double last_sync_ts, last_queued_ts;
        uint64_t restore_failures, partial_restore_failures, syncs_full, syncs_partial;
        uint64_t bytes_last, bytes_total, rules_written_total, canary_repairs, ct_deletes;
        uint64_t conntrack_missing; /* conntrack runs that found no conntrack tool */
        struct hc_port *hc[MAX_HC_PORTS]; /* changed by the sync thread only */
        unsigned n_hc;

        /* sync thread only */
        struct se_proxy_tracker *tr[2];
        struct se_proxy_table *last[2];
        int64_t last_full_mono, last_sync_mono, last_canary_mono;
        bool need_full;

        struct se_httpd *healthz, *metrics;
        struct se_httpd_probes probes; /* of the metrics server */
};

void proxyd_now(const struct proxyd *d, struct se_proxy_instant *now);
/* Store callbacks (subscribed by main). */
void proxyd_on_change(void *data, enum se_store_event ev, const struct se_object *old,
                      const struct se_object *new_obj);
/* The loop: returns when d->stop is set. */
void proxyd_run(struct proxyd *d);
/* Serving (serve.c). */
int proxyd_serve_start(struct proxyd *d);
void proxyd_serve_stop(struct proxyd *d);
/* Re-points the health-check node ports at the tables (sync thread, mu not held). */
void proxyd_hc_update(struct proxyd *d, struct se_proxy_table *const *tables, unsigned n);

#endif
