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
#include <svcenv/strv.h>
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
        struct se_uproxy *uproxy; /* set once (atomically: /metrics reads it) */
        /* iptables/nftables modes: ports routed to the userspace proxy
         * (route.c; sync thread only) */
        bool route_on; /* redirects installed */
        bool other_cleaned; /* the other backend's rules removed (first sync) */
        struct se_strbuf route_bad; /* the invalid annotations said (route.c) */
        struct se_strbuf route_last[2]; /* the redirect rules applied, per family */
        struct se_strv route_flows; /* the routed UDP flows, sorted (route.c) */
        /* Services with a routing annotation, kept by a store callback
         * (under the store's write lock; read under its read lock) */
        long route_annotated;
        pthread_mutex_t us_mu; /* the userspace loop's wake-ups */
        pthread_cond_t us_cond;
        bool us_dirty, us_reload, us_stop; /* a change; SIGHUP with -f; the end */
        unsigned us_bad_said; /* invalid scheduler annotations last logged */

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
/* The redirect rules of one tool or both (iptables: jumps and chains; nft:
 * table svcenv-userspace) and the TPROXY ip rule, both families; quiet. */
void proxyd_redirect_remove(bool iptables, bool nft);
/* The other backend's redirect rules (a run with the other --backend left
 * them), keeping the TPROXY ip rule that ours share; quiet. */
void proxyd_redirect_remove_other(const struct proxyd *d);
/* Starts the userspace proxy's workers (d->uproxy, d->uport). 0 or -errno,
 * logged. */
int proxyd_uproxy_start(struct proxyd *d);
/* Writes and applies the redirect rules of t[] (one table per family of
 * d) for the ports o selects, then the TPROXY route and jumps. last (NULL,
 * or one buffer per family): what was applied before; unchanged rules are
 * not applied again. Returns whether every family applied; logs errors. */
bool proxyd_redirect_apply(struct proxyd *d, const struct se_proxy_table *const *t,
                           const struct se_uproxy_rules_opts *o, struct se_strbuf *last);
/* The TPROXY policy route and the iptables jumps for one family (firewall:
 * the rules have SVCENV-USERSPACE-FIREWALL, jumped to as well). */
void proxyd_redirect_plumbing(const struct proxyd *d, enum se_ip_family fam, bool firewall);
/* iptables/nftables modes: after each sync, the routed ports to the
 * userspace proxy (route.c); proxyd_synced is the proxier's synced hook
 * (health-check ports, then routing). */
void proxyd_route_sync(struct proxyd *d);
/* Keeps d->route_annotated from here on: counts the store's Services and
 * subscribes to their changes. Before informers or SIGHUP can change the
 * store. 0 or -ENOMEM. */
int proxyd_route_watch(struct proxyd *d);
void proxyd_synced(void *data);
/* kube-proxy's platformCleanup: the other backend's rules go (main.c). */
void proxyd_platform_cleanup(const struct proxyd *d);
/* -f: loads the files into d->store (0, or exit code 3/4, logged); on
 * SIGHUP in the rule modes makes the store mirror them again (a bad file
 * keeps the last good state). */
int proxyd_files_load(struct proxyd *d);
void proxyd_files_mirror(struct proxyd *d);
/* Serving (serve.c). */
int proxyd_serve_start(struct proxyd *d);
void proxyd_serve_stop(struct proxyd *d);
/* After a sync: opens and closes the health-check node port servers to
 * match the proxier's list (the proxier's synced hook, sync thread). */
void proxyd_hc_update(void *d);

#endif
