/* svcenv-proxy: the node proxy daemon. Wiring only: flags, informers on
 * Services, EndpointSlices and our Node, the sync loop thread, HTTP, signals. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/log.h>
#include <svcenv/macro.h>
#include <svcenv/manifest.h>
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
        "  --mode iptables|nftables|userspace\n"
        "                             userspace: every Service through svcenv's own L4\n"
        "                             proxy (retries, affinity), reached by redirect rules\n"
        "                             written with --backend. In the iptables and\n"
        "                             nftables modes, Services annotated\n"
        "                             svcenv.io/retry: \"true\" or with a scheduler\n"
        "                             the rules cannot express go to that proxy\n"
        "  --userspace-port N         the proxy's one port (default 10262)\n"
        "  --udp-timeout DUR          idle UDP sessions end (userspace; default 250ms)\n"
        "  --nft-apply netlink|nft    how nftables is programmed (default netlink, nft -f\n"
        "                             when a script has what the translator lacks)\n"
        "  --scheduler NAME[,FLAGS]   userspace proxy: for Services without\n"
        "                             svcenv.io/scheduler\n"
        "                             (rr wrr lc wlc sed nq dh sh mh random p2c; default rr)\n"
        "  -f FILE|DIR                serve from manifests instead of the API server\n"
        "                             (repeatable; SIGHUP reads them again)\n"
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

/* Node IPs (InternalIP, then ExternalIP; --node-ip wins) and zone from
 * our Node, as `svcenv rules` takes them. */
static void node_facts(struct proxyd *d)
{
        const char *zone = NULL;
        se_store_rdlock(d->store);
        if (se_proxy_node_facts(d->store, d->hostname, &d->flags.opt, &zone) < 0)
                se_log_warn("node \"%s\" not found: no node IPs known", d->hostname);
        d->flags.opt.zone = zone ? se_strdup(zone) : NULL;
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

/* As kube-proxy's platformCleanup: the other backend's rules (left by a
 * run in the other mode) go, or they would keep catching Service traffic
 * with stale endpoints; a failure is only logged. In the userspace mode
 * both go. */
void proxyd_platform_cleanup(const struct proxyd *d)
{
        if (d->flags.nft || d->userspace) {
                if (cleanup_iptables())
                        se_log_warn("could not remove the iptables backend's rules");
        }
        if (!d->flags.nft || d->userspace)
                cleanup_nftables();
        /* the userspace proxy's redirects written for the other tool go
         * by the same rule (ours are the proxy's to rewrite) */
        proxyd_redirect_remove_other(d);
}

/* --cleanup: everything we made, in every family and all modes. */
static int cleanup(void)
{
        int rc = cleanup_iptables();
        cleanup_nftables();
        proxyd_userspace_cleanup();
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
        /* Services and slices share many short strings (namespaces, labels,
         * node names, zones); of a slice only what a proxy reads is kept */
        const unsigned flags = SE_DECODE_INTERN;
        const struct se_kube_informer_opts opts[] = {
                { .field_selector = field, .decode_flags = flags },
                { .field_selector = "spec.clusterIP!=None",
                  .label_selector = d->flags.opt.proxy_name ?
                                            NULL :
                                            "!service.kubernetes.io/service-proxy-name",
                  .decode_flags = flags },
                { .label_selector = "!service.kubernetes.io/headless",
                  .decode_flags = flags | SE_DECODE_PROXY_SLICES },
                { .decode_flags = flags },
        };
        static const enum se_kind kinds[] = { SE_KIND_NODE, SE_KIND_SERVICE, SE_KIND_ENDPOINT_SLICE,
                                              SE_KIND_SERVICE_CIDR };
        /* the service CIDRs matter to nftables' cluster-ips-check only */
        d->n_inf = d->flags.nft ? 4 : 3;
        for (unsigned i = 0; i < d->n_inf; i++) {
                /* the userspace mode has a loop of its own */
                if ((r = d->userspace ?
                                 se_store_subscribe(d->store, kinds[i], proxyd_userspace_on_change,
                                                    d) :
                                 se_store_subscribe(d->store, kinds[i], se_proxy_proxier_on_change,
                                                    d->proxier)) < 0)
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
        struct proxyd *d = data;
        if (d->userspace)
                proxyd_userspace_run(d);
        else
                se_proxy_proxier_run(d->proxier, d->store);
        return NULL;
}

static int parse_flags(struct proxyd *d, int argc, char **argv, const char **kubeconfig,
                       const char **master, bool *do_cleanup)
{
        enum {
                O_KUBECONFIG = 256,
                O_MASTER,
                O_HOSTNAME,
                O_SYNC,
                O_MINSYNC,
                O_HEALTHZ,
                O_METRICS,
                O_CLEANUP,
                O_PARTIAL,
                O_MODE,
                O_UPORT,
                O_UDPTIMEOUT,
                O_SCHEDULER,
                O_NFTAPPLY,
        };
        static const struct option opts[] = {
                { "kubeconfig", required_argument, NULL, O_KUBECONFIG },
                { "master", required_argument, NULL, O_MASTER },
                { "hostname-override", required_argument, NULL, O_HOSTNAME },
                SE_PROXY_LONG_OPTIONS,
                { "sync-period", required_argument, NULL, O_SYNC },
                { "min-sync-period", required_argument, NULL, O_MINSYNC },
                { "healthz-bind-address", required_argument, NULL, O_HEALTHZ },
                { "metrics-bind-address", required_argument, NULL, O_METRICS },
                { "cleanup", no_argument, NULL, O_CLEANUP },
                { "partial-sync", required_argument, NULL, O_PARTIAL },
                { "mode", required_argument, NULL, O_MODE },
                { "userspace-port", required_argument, NULL, O_UPORT },
                { "udp-timeout", required_argument, NULL, O_UDPTIMEOUT },
                { "scheduler", required_argument, NULL, O_SCHEDULER },
                { "nft-apply", required_argument, NULL, O_NFTAPPLY },
                { "v", required_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct se_diag diag = { 0 };
        int c, v;
        while ((c = getopt_long(argc, argv, "v:hf:", opts, NULL)) != -1) {
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
                case O_SYNC:
                case O_MINSYNC: {
                        int64_t ns;
                        if (se_parse_duration(optarg, MAX_PERIOD_NS, &ns) < 0 || ns < 0 ||
                            (c == O_SYNC && ns == 0))
                                return usage_error("not a duration: \"%s\"", optarg);
                        *(c == O_SYNC ? &d->pcfg.sync_period_ns : &d->pcfg.min_sync_period_ns) = ns;
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
                        d->pcfg.minimal = strcmp(optarg, "minimal") == 0;
                        break;
                case O_MODE:
                        if (strcmp(optarg, "userspace") == 0) {
                                d->userspace = true;
                                break;
                        }
                        if (strcmp(optarg, "iptables") != 0 && strcmp(optarg, "nftables") != 0)
                                return usage_error("--mode wants iptables, nftables or "
                                                   "userspace, not \"%s\"",
                                                   optarg);
                        if (se_proxy_flag(&d->flags, SE_PROXY_FLAG_BACKEND, optarg, &diag) < 0)
                                return usage_error("%s", diag.text);
                        break;
                case O_UPORT:
                        if (se_parse_int(optarg, 1, 65535, &d->uport) < 0)
                                return usage_error("--userspace-port wants 1..65535, not \"%s\"",
                                                   optarg);
                        break;
                case O_UDPTIMEOUT:
                        /* as upstream: "Must be greater than 0" */
                        if (se_parse_duration(optarg, MAX_PERIOD_NS, &d->udp_timeout_ns) < 0 ||
                            d->udp_timeout_ns <= 0)
                                return usage_error("--udp-timeout wants a duration over 0, not "
                                                   "\"%s\"",
                                                   optarg);
                        break;
                case O_NFTAPPLY:
                        if (strcmp(optarg, "netlink") != 0 && strcmp(optarg, "nft") != 0)
                                return usage_error("--nft-apply wants netlink or nft, not \"%s\"",
                                                   optarg);
                        se_proxy_nft_set_how(strcmp(optarg, "nft") == 0 ? SE_PROXY_NFT_TOOL :
                                                                          SE_PROXY_NFT_NETLINK);
                        break;
                case O_SCHEDULER:
                        if (se_uproxy_parse_scheduler(optarg, d->scheduler, &diag) < 0)
                                return usage_error("--%s", diag.text);
                        break;
                case 'f':
                        if (d->n_files >= SE_ARRAY_SIZE(d->files))
                                return usage_error("-f: at most %zu", SE_ARRAY_SIZE(d->files));
                        d->files[d->n_files++] = optarg;
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
                        if (c >= SE_PROXY_FLAG_FIRST && c <= SE_PROXY_FLAG_LAST) {
                                if (se_proxy_flag(&d->flags, c, optarg, &diag) < 0)
                                        return usage_error("%s", diag.text);
                                break;
                        }
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (optind < argc)
                return usage_error("unexpected argument \"%s\"", argv[optind]);
        se_proxy_flags_finish(&d->flags);
        d->pcfg.nft = d->flags.nft;
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

int main(int argc, char **argv)
{
        static struct proxyd d;
        pthread_condattr_t ca; /* the userspace loop waits on the monotonic clock */
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&d.us_cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&d.us_mu, NULL);
        const char *kubeconfig = NULL, *master = NULL;
        bool do_cleanup = false;
        char host[256];
        se_proxy_flags_init(&d.flags);
        d.pcfg.sync_period_ns = 30000000000LL;
        d.pcfg.min_sync_period_ns = 1000000000LL;
        d.pcfg.minimal = true;
        d.pcfg.synced = proxyd_synced;
        se_strbuf_init(&d.route_last[0], 0);
        se_strbuf_init(&d.route_last[1], 0);
        se_strbuf_init(&d.route_bad, 0);
        d.pcfg.synced_data = &d;
        d.healthz_addr = "0.0.0.0:10256";
        memcpy(d.scheduler, "rr", 3);
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
        d.flags.opt.node_name = d.hostname;
        /* -f: bad files fail before anything is touched or listens */
        if (d.n_files) {
                if (!(d.store = se_store_new()))
                        return 4;
                if ((r = proxyd_files_load(&d)) != 0) {
                        se_store_free(d.store);
                        return r;
                }
        }
        /* The userspace mode redirects before either backend would: theirs
         * go at once. The rule modes remove the other backend's after their
         * own first sync (proxyd_synced), so a switch of mode leaves no
         * moment with neither in place. */
        if (d.userspace)
                proxyd_platform_cleanup(&d);
        /* the rule modes: a last run's redirects for routed Services point at
         * a proxy that is gone; the first sync puts back those still routed
         * (the other tool's go after it, with that backend's rules) */
        if (!d.userspace)
                proxyd_redirect_remove(!d.flags.nft, d.flags.nft);

        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        if (d.n_files)
                sigaddset(&set, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);

        int rc = 0;
        pthread_t tid;
        bool started = false;
        /* kube-proxy serves its health before its informers sync (healthy,
         * no family synced yet) */
        if (!(d.proxier = se_proxy_proxier_new(&d.pcfg, se_proxy_runner_system())) ||
            (!d.store && !(d.store = se_store_new()))) {
                rc = 4;
                goto out;
        }
        /* --mode userspace: the proxy's workers first (their metrics are served) */
        if (d.userspace && proxyd_uproxy_start(&d) < 0) {
                rc = 4;
                goto out;
        }
        if (!d.userspace && d.n_files) {
                /* no informers: the proxier hears of changes (SIGHUP) here */
                for (int k = 0; k < SE_KIND_COUNT; k++)
                        if (se_store_subscribe(d.store, (enum se_kind)k, se_proxy_proxier_on_change,
                                               d.proxier) < 0) {
                                rc = 4;
                                goto out;
                        }
        }
        if ((!d.userspace && proxyd_route_watch(&d) < 0) || proxyd_serve_start(&d) < 0 ||
            (!d.n_files && start_informers(&d, kubeconfig, master) < 0)) {
                rc = 4;
                goto out;
        }
        /* kube-proxy waits for its Node first (NodeManager); then its sync
         * loop starts, which counts as an update of every family for the
         * health server, while the other informers sync */
        if (!d.n_files && wait_synced(&d, 0, &set) < 0)
                goto out;
        node_facts(&d);
        /* as kube-proxy: both families wherever the host has IPv6 */
        d.n_fams = se_proxy_families_on(&d.flags.opt, se_proxy_host_ipv6(d.flags.nft), d.fams);
        if (d.flags.nfacct != 0 && !d.flags.nft &&
            !d.userspace) { /* auto or on: the counters first */
                int r1 = se_proxy_nfacct_ensure("localhost_nps_accepted_pkts");
                int r2 = se_proxy_nfacct_ensure("ct_state_invalid_dropped_pkts");
                d.flags.opt.nfacct = r1 == 0 && r2 == 0;
                if (!d.flags.opt.nfacct)
                        se_log_warn("nfacct counters unavailable (%s): rules without them",
                                    strerror(-(r1 ? r1 : r2)));
        }
        /* the loop's start: the health server counts every family as updated */
        if (se_proxy_proxier_begin(d.proxier, &d.flags.opt, d.fams, d.n_fams) < 0) {
                rc = 4;
                goto out;
        }
        for (unsigned i = 1; i < d.n_inf; i++)
                if (wait_synced(&d, (int)i, &set) < 0)
                        goto out;
        if (pthread_create(&tid, NULL, sync_thread, &d) != 0) {
                rc = 4;
                goto out;
        }
        started = true;
        se_log_info(0, "svcenv-proxy on node %s (%s, %u famil%s)", d.hostname,
                    d.userspace ? "userspace" :
                    d.flags.nft ? "nftables" :
                                  "iptables",
                    d.n_fams, d.n_fams > 1 ? "ies" : "y");
        for (;;) {
                int sig = 0;
                if (sigwait(&set, &sig) != 0)
                        continue;
                if (sig != SIGHUP)
                        break;
                if (d.userspace) /* -f: the sync thread reads the files again */
                        proxyd_userspace_reload(&d);
                else
                        proxyd_files_mirror(&d);
        }
        se_log_info(0, "shutting down");
out:
        if (d.userspace)
                proxyd_userspace_stop(&d);
        else if (d.proxier)
                se_proxy_proxier_stop(d.proxier);
        if (started)
                pthread_join(tid, NULL);
        proxyd_serve_stop(&d);
        d.uproxy = se_uproxy_stop(d.uproxy);
        for (unsigned i = 0; i < d.n_inf; i++)
                d.inf[i] = se_kube_informer_free(d.inf[i]);
        d.client = se_kube_client_free(d.client);
        d.store = se_store_free(d.store);
        d.proxier = se_proxy_proxier_free(d.proxier);
        free(SE_UNCONST(char, d.flags.opt.zone));
        se_strbuf_release(&d.route_last[0]);
        se_strbuf_release(&d.route_last[1]);
        se_strbuf_release(&d.route_bad);
        se_strv_release(&d.route_flows);
        return rc;
}
