/* svcenv-proxy: the node proxy daemon. Wiring only: flags, informers on
 * Services, EndpointSlices and our Node, the sync loop thread, HTTP, signals. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/log.h>
#include <svcenv/parse.h>
#include <svcenv/strv.h>
#include <svcenv/timeutil.h>

#include "proxyd.h"

#define MAX_PERIOD_NS (366LL * 24 * 3600 * 1000000000LL) /* a year: surely a typo beyond */

static const char usage[] =
        "Usage: svcenv-proxy [--kubeconfig FILE] [--master URL] [options]\n"
        "\n"
        "Programs this node's packet filter for the cluster's Services as kube-proxy\n"
        "v1.36 does (iptables or nftables), watching Services, EndpointSlices and the\n"
        "Node (with nftables also the ServiceCIDRs) through the API server.\n"
        "\n"
        "  --hostname-override NAME   the Node we run on (default: the hostname)\n"
        "  --backend iptables|nftables (default iptables)\n"
        "  --cluster-cidr CIDR[,CIDR] local-traffic detection\n"
        "  --node-ip IP[,IP]          node IPs (default: from the Node)\n"
        "  --masquerade-bit N         (default 14)\n"
        "  --masquerade-all\n"
        "  --nodeport-addresses CIDRS|primary (default: all local addresses with\n"
        "                             iptables, primary with nftables; 0.0.0.0/0,::/0: all)\n"
        "  --localhost-nodeports true|false (default true)\n"
        "  --random-fully auto|on|off\n"
        "  --nfacct auto|on|off       nfacct counters in rules (auto: made over netlink if\n"
        "                             the kernel has nfacct, as kube-proxy; on = auto)\n"
        "  --proxy-name NAME          serve services labelled service-proxy-name=NAME\n"
        "  --sync-period DUR          full resync interval (default 30s; none in\n"
        "                             large-cluster mode, over 1000 endpoints)\n"
        "  --min-sync-period DUR      at most one sync per DUR (default 1s)\n"
        "  --partial-sync MODE        minimal (default: top-level chains edited rule by\n"
        "                             rule, left out when unchanged) or kube-proxy\n"
        "                             (rewritten on every sync, as kube-proxy)\n"
        "  --healthz-bind-address A   (default 0.0.0.0:10256; \"\" disables)\n"
        "  --metrics-bind-address A   (default 127.0.0.1:10249; \"\" disables)\n"
        "  --cleanup                  remove every rule and chain we made, then exit\n"
        "  -v N                       log verbosity\n"
        "\n"
        "SIGTERM/SIGINT: stop (the rules stay, as kube-proxy's).\n";

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        fputs("svcenv-proxy: ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return 2;
}

static int tristate(const char *v, bool auto_value, bool *ret)
{
        if (strcmp(v, "auto") == 0) {
                *ret = auto_value;
                return 0;
        }
        return se_parse_bool(v, ret);
}

static int add_node_ips(struct proxyd *d, const char *list)
{
        struct se_strv parts = SE_STRV_INIT;
        int rc = 0;
        if (se_strv_split(&parts, list, ',', true) < 0)
                return 4;
        se_strv_foreach(s, &parts) {
                struct se_ip ip;
                if (se_parse_ip(*s, &ip) < 0 || d->opt.n_node_ips >= SE_PROXY_MAX_NODE_IPS) {
                        rc = usage_error("--node-ip: invalid or too many: \"%s\"", *s);
                        break;
                }
                d->opt.node_ips[d->opt.n_node_ips++] = ip;
        }
        se_strv_release(&parts);
        d->node_ip_flag = d->opt.n_node_ips > 0;
        return rc;
}

/* Node IPs (InternalIP, then ExternalIP) and zone from our Node. */
static void node_facts(struct proxyd *d)
{
        se_store_rdlock(d->store);
        const struct se_object *obj = se_store_get(d->store, SE_KIND_NODE, "", d->hostname);
        if (obj) {
                const struct se_node *node = (const struct se_node *)obj;
                const char *zone = se_kvlist_get(&obj->meta.labels, "topology.kubernetes.io/zone");
                d->opt.zone = zone ? se_strdup(zone) : NULL;
                static const char *const types[] = { "InternalIP", "ExternalIP" };
                for (size_t t = 0; !d->node_ip_flag && t < 2; t++)
                        for (uint32_t i = 0; i < node->n_addresses; i++) {
                                struct se_ip ip;
                                const struct se_node_address *na = &node->addresses[i];
                                if (na->type && strcmp(na->type, types[t]) == 0 && na->address &&
                                    se_parse_ip(na->address, &ip) == 0 &&
                                    d->opt.n_node_ips < SE_PROXY_MAX_NODE_IPS)
                                        d->opt.node_ips[d->opt.n_node_ips++] = ip;
                        }
                pthread_mutex_lock(&d->mu); /* the health server runs already */
                d->health.node_eligible = se_proxy_node_eligible(se_node_of(obj));
                pthread_mutex_unlock(&d->mu);
        } else {
                se_log_warn("node \"%s\" not found: no node IPs known", d->hostname);
        }
        se_store_unlock(d->store);
}

/* The iptables backend's chains and jumps, both families; 1 on an error. */
static int cleanup_iptables(void)
{
        static const char *const saves[2][2] = { { "iptables-save", NULL },
                                                 { "ip6tables-save", NULL } };
        int rc = 0;
        for (int f = 0; f < 2; f++) {
                struct se_strbuf saved, out;
                char err[1024];
                se_strbuf_init(&saved, 0);
                se_strbuf_init(&out, 0);
                int r = se_proxy_run(saves[f], &saved, err, sizeof(err));
                if (r == 0)
                        r = se_proxy_cleanup_text(saved.buf, saved.len, &out);
                if (r == 0 && out.len)
                        r = se_proxy_apply(f ? SE_PROXY_IP6TABLES_RESTORE :
                                               SE_PROXY_IPTABLES_RESTORE,
                                           out.buf, out.len, err, sizeof(err));
                if (r < 0 && r != -ENOENT) {
                        se_log_error("cleanup (%s): %s", saves[f][0], err[0] ? err : strerror(-r));
                        rc = 1;
                }
                se_strbuf_release(&saved);
                se_strbuf_release(&out);
        }
        return rc;
}

/* The nftables backend's tables, both families (absent: fine). */
static void cleanup_nftables(void)
{
        static const char *const fams[] = { "ip", "ip6" };
        for (int f = 0; f < 2; f++) {
                const char *argv[] = { "nft", "delete", "table", fams[f], "svcenv", NULL };
                char err[256];
                (void)se_proxy_run(argv, NULL, err, sizeof(err));
        }
}

/* --cleanup: everything we made, in every family and both backends. */
static int cleanup(void)
{
        int rc = cleanup_iptables();
        cleanup_nftables();
        return rc;
}

static void on_error(void *data, int err, const char *message)
{
        (void)data;
        (void)err;
        se_log_warn("informer: %s", message);
}

static int start_informers(struct proxyd *d, const char *kubeconfig, const char *master)
{
        struct se_kube_config_opts o = { .kubeconfig = kubeconfig, .master = master };
        struct se_kube_client_opts co = { .qps = 20, .burst = 40 };
        struct se_diag diag;
        int r = se_kube_client_load(&o, &co, &d->client, &diag);
        if (r < 0) {
                char buf[1024];
                se_diag_format(&diag, buf, sizeof(buf));
                se_log_error("%s", buf);
                return r;
        }
        char field[300];
        snprintf(field, sizeof(field), "metadata.name=%s", d->hostname);
        /* kube-proxy's selectors: no headless slices; no ClusterIP None
         * Services and none of another proxy (--proxy-name must see its own) */
        const struct se_kube_informer_opts opts[] = {
                { .field_selector = field },
                { .field_selector = "spec.clusterIP!=None",
                  .label_selector =
                          d->opt.proxy_name ? NULL : "!service.kubernetes.io/service-proxy-name" },
                { .label_selector = "!service.kubernetes.io/headless" },
                { 0 },
        };
        static const enum se_kind kinds[] = { SE_KIND_NODE, SE_KIND_SERVICE, SE_KIND_ENDPOINT_SLICE,
                                              SE_KIND_SERVICE_CIDR };
        /* the service CIDRs matter to nftables' cluster-ips-check only */
        d->n_inf = d->nft ? 4 : 3;
        for (unsigned i = 0; i < d->n_inf; i++) {
                if ((r = se_store_subscribe(d->store, kinds[i], proxyd_on_change, d)) < 0)
                        return r;
                d->inf[i] =
                        se_kube_informer_new(d->client, kinds[i], d->store, &opts[i], on_error, d);
                if (!d->inf[i])
                        return -ENOMEM;
                if ((r = se_kube_informer_start(d->inf[i])) < 0)
                        return r;
        }
        return 0;
}

static void *sync_thread(void *data)
{
        proxyd_run(data);
        return NULL;
}

static int parse_flags(struct proxyd *d, int argc, char **argv, const char **kubeconfig,
                       const char **master, bool *do_cleanup)
{
        enum {
                O_KUBECONFIG = 256,
                O_MASTER,
                O_HOSTNAME,
                O_BACKEND,
                O_CCIDR,
                O_NODEIP,
                O_MASQBIT,
                O_MASQALL,
                O_NPADDR,
                O_LOCALHOST,
                O_RANDOM,
                O_NFACCT,
                O_PROXYNAME,
                O_SYNC,
                O_MINSYNC,
                O_HEALTHZ,
                O_METRICS,
                O_CLEANUP,
                O_PARTIAL,
        };
        static const struct option opts[] = {
                { "kubeconfig", required_argument, NULL, O_KUBECONFIG },
                { "master", required_argument, NULL, O_MASTER },
                { "hostname-override", required_argument, NULL, O_HOSTNAME },
                { "backend", required_argument, NULL, O_BACKEND },
                { "cluster-cidr", required_argument, NULL, O_CCIDR },
                { "node-ip", required_argument, NULL, O_NODEIP },
                { "masquerade-bit", required_argument, NULL, O_MASQBIT },
                { "masquerade-all", no_argument, NULL, O_MASQALL },
                { "nodeport-addresses", required_argument, NULL, O_NPADDR },
                { "localhost-nodeports", required_argument, NULL, O_LOCALHOST },
                { "random-fully", required_argument, NULL, O_RANDOM },
                { "nfacct", required_argument, NULL, O_NFACCT },
                { "proxy-name", required_argument, NULL, O_PROXYNAME },
                { "sync-period", required_argument, NULL, O_SYNC },
                { "min-sync-period", required_argument, NULL, O_MINSYNC },
                { "healthz-bind-address", required_argument, NULL, O_HEALTHZ },
                { "metrics-bind-address", required_argument, NULL, O_METRICS },
                { "cleanup", no_argument, NULL, O_CLEANUP },
                { "partial-sync", required_argument, NULL, O_PARTIAL },
                { "v", required_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct se_diag diag = { 0 };
        int c, r, v;
        while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
                switch (c) {
                case O_KUBECONFIG:
                        *kubeconfig = optarg;
                        break;
                case O_MASTER:
                        *master = optarg;
                        break;
                case O_HOSTNAME:
                        d->hostname = optarg;
                        break;
                case O_BACKEND:
                        if (strcmp(optarg, "iptables") != 0 && strcmp(optarg, "nftables") != 0)
                                return usage_error("--backend wants iptables or nftables, not "
                                                   "\"%s\"",
                                                   optarg);
                        d->nft = strcmp(optarg, "nftables") == 0;
                        break;
                case O_CCIDR:
                        r = se_proxy_parse_cidr_list(optarg, d->opt.cluster_cidrs, 2, NULL, &diag);
                        if (r < 0)
                                return usage_error("--cluster-cidr: %s", diag.text);
                        d->opt.n_cluster_cidrs = (unsigned)r;
                        break;
                case O_NODEIP:
                        if ((r = add_node_ips(d, optarg)) != 0)
                                return r;
                        break;
                case O_MASQBIT:
                        if (se_parse_int(optarg, 0, 31, &d->opt.masquerade_bit) < 0)
                                return usage_error("--masquerade-bit wants 0..31, not \"%s\"",
                                                   optarg);
                        break;
                case O_MASQALL:
                        d->opt.masquerade_all = true;
                        break;
                case O_NPADDR:
                        r = se_proxy_parse_cidr_list(optarg, d->opt.nodeport_cidrs,
                                                     SE_PROXY_MAX_CIDRS, &d->opt.nodeport_primary,
                                                     &diag);
                        if (r < 0)
                                return usage_error("--nodeport-addresses: %s", diag.text);
                        d->opt.n_nodeport_cidrs = (unsigned)r;
                        break;
                case O_LOCALHOST:
                        if (se_parse_bool(optarg, &d->opt.localhost_nodeports) < 0)
                                return usage_error("--localhost-nodeports wants true or false, "
                                                   "not \"%s\"",
                                                   optarg);
                        break;
                case O_RANDOM:
                        if (tristate(optarg, true, &d->opt.random_fully) < 0)
                                return usage_error("--random-fully wants auto, on or off, not "
                                                   "\"%s\"",
                                                   optarg);
                        break;
                case O_NFACCT:
                        if (strcmp(optarg, "auto") == 0 || strcmp(optarg, "on") == 0)
                                d->nfacct_mode = 1;
                        else if (strcmp(optarg, "off") == 0)
                                d->nfacct_mode = 0;
                        else
                                return usage_error("--nfacct wants auto, on or off, not \"%s\"",
                                                   optarg);
                        break;
                case O_PROXYNAME:
                        d->opt.proxy_name = optarg;
                        break;
                case O_SYNC:
                case O_MINSYNC: {
                        int64_t ns;
                        if (se_parse_duration(optarg, MAX_PERIOD_NS, &ns) < 0 || ns < 0 ||
                            (c == O_SYNC && ns == 0))
                                return usage_error("not a duration: \"%s\"", optarg);
                        *(c == O_SYNC ? &d->sync_period_ns : &d->min_sync_period_ns) = ns;
                        break;
                }
                case O_HEALTHZ:
                        d->healthz_addr = optarg;
                        break;
                case O_METRICS:
                        d->metrics_addr = optarg;
                        break;
                case O_CLEANUP:
                        *do_cleanup = true;
                        break;
                case O_PARTIAL:
                        if (strcmp(optarg, "minimal") != 0 && strcmp(optarg, "kube-proxy") != 0)
                                return usage_error("--partial-sync wants minimal or kube-proxy, "
                                                   "not \"%s\"",
                                                   optarg);
                        d->minimal = strcmp(optarg, "minimal") == 0;
                        break;
                case 'v':
                        if (se_parse_int(optarg, INT32_MIN, INT32_MAX, &v) < 0) /* klog */
                                return usage_error("-v wants a level, not \"%s\"", optarg);
                        se_log_set_verbosity(v);
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return -1;
                default:
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (optind < argc)
                return usage_error("unexpected argument \"%s\"", argv[optind]);
        if (d->nft)
                se_proxy_options_nft_defaults(&d->opt);
        return 0;
}

/* Waits for informer i to sync: 0, or -EINTR when a signal came first. */
static int wait_synced(struct proxyd *d, int i, const sigset_t *set)
{
        while (se_kube_informer_wait_synced(d->inf[i], 1000) < 0) {
                se_log_info(1, "waiting for the informers to sync");
                struct timespec zero = { 0, 0 };
                if (sigtimedwait(set, NULL, &zero) > 0)
                        return -EINTR;
        }
        return 0;
}

/* What kube-proxy's SyncLoop does first: the health server counts every
 * family as updated now (in case no sync ever succeeds), and the last
 * queued time is "now" while the informers sync. */
static void proxy_loop_started(struct proxyd *d)
{
        struct se_proxy_instant now;
        proxyd_now(d, &now);
        pthread_mutex_lock(&d->mu);
        se_proxy_health_families(&d->health, d->fams, d->n_fams);
        se_proxy_health_updated(&d->health, &now);
        d->last_queued_ts = (double)now.real_ns / 1e9;
        pthread_mutex_unlock(&d->mu);
}

int main(int argc, char **argv)
{
        static struct proxyd d;
        const char *kubeconfig = NULL, *master = NULL;
        bool do_cleanup = false;
        char host[256];
        se_proxy_options_init(&d.opt);
        d.opt.random_fully = true;
        d.sync_period_ns = 30000000000LL;
        d.min_sync_period_ns = 1000000000LL;
        d.minimal = true;
        d.nfacct_mode = 1; /* auto: as kube-proxy, when the kernel has nfacct */
        d.healthz_addr = "0.0.0.0:10256";
        d.metrics_addr = "127.0.0.1:10249";
        int r = parse_flags(&d, argc, argv, &kubeconfig, &master, &do_cleanup);
        if (r != 0)
                return r < 0 ? 0 : r;
        if (do_cleanup)
                return cleanup();
        if (!d.hostname) {
                if (gethostname(host, sizeof(host)) < 0)
                        return 4;
                host[sizeof(host) - 1] = 0;
                for (char *p = host; *p; p++) /* kube-proxy lower-cases it */
                        if (*p >= 'A' && *p <= 'Z')
                                *p = (char)(*p - 'A' + 'a');
                d.hostname = host;
        }
        d.opt.node_name = d.hostname;
        /* As kube-proxy's platformCleanup at start: the other backend's rules
         * (left by a run in the other mode) go, or they would keep catching
         * Service traffic with stale endpoints; a failure is only logged. */
        if (d.nft) {
                if (cleanup_iptables())
                        se_log_warn("could not remove the iptables backend's rules");
        } else {
                cleanup_nftables();
        }
        d.start_mono_ns = (int64_t)se_now_mono_ns();
        se_proxy_health_init(&d.health, 2 * d.sync_period_ns);
        static const double sync_le[] = { 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128,
                                          0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384 };
        static double net_le[80];
        size_t nl = 0;
        net_le[nl++] = 0.25;
        net_le[nl++] = 0.5;
        for (int i = 1; i <= 59; i++)
                net_le[nl++] = i;
        for (int i = 0; i < 12; i++)
                net_le[nl++] = 60 + 5 * i;
        for (int i = 0; i < 7; i++)
                if (nl < 79)
                        net_le[nl++] = 120 + 30 * i;
        struct se_histogram *hs[] = { &d.sync_all, &d.sync_full, &d.sync_partial };
        for (int i = 0; i < 3; i++)
                se_histogram_init(hs[i], sync_le, SE_ARRAY_SIZE(sync_le));
        se_histogram_init(&d.netprog, net_le, nl);

        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&d.cond, &ca);
        pthread_mutex_init(&d.mu, NULL);

        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);

        int rc = 0;
        pthread_t tid;
        bool started = false;
        /* kube-proxy serves its health before its informers sync (healthy,
         * no family synced yet) */
        if (!(d.store = se_store_new()) || proxyd_serve_start(&d) < 0 ||
            start_informers(&d, kubeconfig, master) < 0) {
                rc = 4;
                goto out;
        }
        /* kube-proxy waits for its Node first (NodeManager); then its sync
         * loop starts, which counts as an update of every family for the
         * health server, while the other informers sync */
        if (wait_synced(&d, 0, &set) < 0)
                goto out;
        node_facts(&d);
        /* as kube-proxy: both families wherever the host has IPv6 */
        d.n_fams = se_proxy_families_on(&d.opt, se_proxy_host_ipv6(d.nft), d.fams);
        proxy_loop_started(&d);
        for (unsigned i = 1; i < d.n_inf; i++)
                if (wait_synced(&d, (int)i, &set) < 0)
                        goto out;
        if (d.nfacct_mode != 0 && !d.nft) { /* auto or on: the counters first */
                int r1 = se_proxy_nfacct_ensure("localhost_nps_accepted_pkts");
                int r2 = se_proxy_nfacct_ensure("ct_state_invalid_dropped_pkts");
                d.opt.nfacct = r1 == 0 && r2 == 0;
                if (!d.opt.nfacct)
                        se_log_warn("nfacct counters unavailable (%s): rules without them",
                                    strerror(-(r1 ? r1 : r2)));
        }
        if (pthread_create(&tid, NULL, sync_thread, &d) != 0) {
                rc = 4;
                goto out;
        }
        started = true;
        se_log_info(0, "svcenv-proxy on node %s (%s, %u famil%s)", d.hostname,
                    d.nft ? "nftables" : "iptables", d.n_fams, d.n_fams > 1 ? "ies" : "y");
        for (;;) {
                int sig = 0;
                if (sigwait(&set, &sig) == 0)
                        break;
        }
        se_log_info(0, "shutting down");
out:
        pthread_mutex_lock(&d.mu);
        d.stop = true;
        pthread_cond_signal(&d.cond);
        pthread_mutex_unlock(&d.mu);
        if (started)
                pthread_join(tid, NULL);
        proxyd_serve_stop(&d);
        for (unsigned i = 0; i < d.n_inf; i++)
                d.inf[i] = se_kube_informer_free(d.inf[i]);
        d.client = se_kube_client_free(d.client);
        d.store = se_store_free(d.store);
        free(SE_UNCONST(char, d.opt.zone));
        return rc;
}
