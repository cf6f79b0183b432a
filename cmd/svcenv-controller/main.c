/* svcenv-controller: the Endpoints and EndpointSlice controllers of
 * kube-controller-manager, leader-elected. Wiring only: flags, the API
 * client, the lease, the HTTP endpoints, signals. The logic is in
 * pkg/controller (controller.h). */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/controller.h>
#include <svcenv/httpd.h>
#include <svcenv/kube.h>
#include <svcenv/kube_lease.h>
#include <svcenv/log.h>
#include <svcenv/parse.h>
#include <svcenv/timeutil.h>

static const char usage[] =
        "Usage: svcenv-controller [--kubeconfig FILE] [--master URL] [options]\n"
        "\n"
        "Writes the Endpoints and EndpointSlices of every Service with a selector, as\n"
        "kube-controller-manager's endpoint and endpointslice controllers (v1.36) do.\n"
        "Run kube-controller-manager with --controllers=*,-endpoints-controller,\n"
        "-endpointslice-controller beside it.\n"
        "\n"
        "  --kubeconfig FILE              credentials (default: $KUBECONFIG, ~/.kube/config,\n"
        "                                 in-cluster)\n"
        "  --master URL                   API server address (overrides the kubeconfig's)\n"
        "  --concurrent-syncs N           workers (default 5, 1..50)\n"
        "  --write endpoints|slices|both  what to write (default both)\n"
        "  --managed-by VALUE             endpointslice.kubernetes.io/managed-by of our\n"
        "                                 slices (default endpointslice-controller.k8s.io)\n"
        "  --endpoints-managed-by VALUE   endpoints.kubernetes.io/managed-by of our\n"
        "                                 Endpoints (default endpoint-controller)\n"
        "  --max-endpoints-per-slice N    default 100, 1..1000\n"
        "  --endpoint-updates-batch-period D, --endpointslice-updates-batch-period D\n"
        "                                 pod changes wait D (e.g. 500ms) before their\n"
        "                                 Service syncs, so changes batch (default 0;\n"
        "                                 one queue: the longer of the two applies)\n"
        "  --leader-elect[=BOOL]          default true\n"
        "  --leader-elect-namespace NS    namespace of the Lease (default kube-system;\n"
        "                                 also --leader-elect-resource-namespace)\n"
        "  --leader-elect-resource-name N Lease name (default svcenv-controller)\n"
        "  --leader-elect-lease-duration S   default 15\n"
        "  --leader-elect-renew-deadline S   default 10\n"
        "  --leader-elect-retry-period S     default 2\n"
        "  --kube-api-qps N               client rate limit (default 40: upstream's two\n"
        "                                 controllers have 20 each)\n"
        "  --kube-api-burst N             default 60\n"
        "  --metrics-bind-address A:P     /metrics, /livez, /readyz over HTTP\n"
        "                                 (default 0.0.0.0:10258; port 0: any free\n"
        "                                 port; \"\": off)\n"
        "  --shutdown-timeout S           queue drain on SIGTERM (default 10)\n"
        "  -v N                           log verbosity\n"
        "  --logging-format text|json\n";

enum {
        O_KUBECONFIG = 256,
        O_MASTER,
        O_SYNCS,
        O_WRITE,
        O_MANAGED_BY,
        O_EP_MANAGED_BY,
        O_MAX_EPS,
        O_LE,
        O_LE_NS,
        O_LE_NAME,
        O_LE_LEASE,
        O_LE_RENEW,
        O_LE_RETRY,
        O_QPS,
        O_BURST,
        O_METRICS,
        O_SHUTDOWN,
        O_LOGFMT,
        O_EP_BATCH,
        O_SLICE_BATCH,
};

struct app {
        struct se_controller *ctl;
        struct se_kube_leader *lease;
        atomic_bool stop;
        atomic_bool leading;
        atomic_bool lost; /* the lease was lost: exit 1 without draining */
        pthread_mutex_t life_lock; /* start_controller vs stop_controller */
        bool leader_elect;
        pthread_t main_thread;
        pthread_t run_thread;
        bool run_started;
        uint64_t drain_ns;
        atomic_int exit_code;
};

static void log_cb(void *data, enum se_controller_log sev, int v, const char *msg)
{
        (void)data;
        switch (sev) {
        case SE_CTL_LOG_ERROR:
                se_log_error("%s", msg);
                break;
        case SE_CTL_LOG_WARN:
                se_log_warn("%s", msg);
                break;
        default:
                se_log_info(v, "%s", msg);
                break;
        }
}

static void handler(void *data, const struct se_httpd_request *req, struct se_httpd_response *resp)
{
        struct app *app = data;
        resp->content_type = "text/plain; charset=utf-8";
        const char *text = NULL;
        if (strcmp(req->path, "/livez") == 0 || strcmp(req->path, "/healthz") == 0) {
                text = "ok";
        } else if (strcmp(req->path, "/readyz") == 0) {
                /* a standby replica is ready; a leader once its caches are full */
                bool ready = !atomic_load(&app->leading) || se_controller_synced(app->ctl);
                resp->status = ready ? 200 : 503;
                text = ready ? "ok" : "caches not synced";
        } else if (strcmp(req->path, "/metrics") == 0) {
                struct se_strbuf sb;
                se_strbuf_init(&sb, 8 << 20);
                se_controller_metrics(app->ctl, &sb);
                int leader = atomic_load(&app->leading) ? 1 : 0;
                se_strbuf_printf(&sb,
                                 "# HELP leader_election_master_status Gauge of if the reporting "
                                 "system is master of the relevant lease, 0 indicates backup, 1 "
                                 "indicates master.\n# TYPE leader_election_master_status gauge\n"
                                 "leader_election_master_status{name=\"svcenv-controller\"} %d\n",
                                 leader);
                resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
                resp->body = se_strbuf_detach(&sb, &resp->len);
                return;
        } else {
                resp->status = 404;
                text = "not found";
        }
        resp->body = se_strdup(text);
        resp->len = resp->body ? strlen(resp->body) : 0;
}

static void *run_main(void *arg)
{
        struct app *app = arg;
        int r = se_controller_run(app->ctl, 0);
        if (r < 0 && r != -ECANCELED) {
                se_log_error("controller failed to start: %s", strerror(-r));
                atomic_store(&app->exit_code, 1);
                pthread_kill(app->main_thread, SIGTERM);
        }
        return NULL;
}

static void start_controller(void *data)
{
        struct app *app = data;
        pthread_mutex_lock(&app->life_lock);
        /* once lost or shutting down, never again (upstream exits) */
        if (!atomic_load(&app->lost) && !atomic_load(&app->stop) && !app->run_started) {
                atomic_store(&app->leading, true);
                se_log_info(0, "became the leader: starting the controllers");
                if (pthread_create(&app->run_thread, NULL, run_main, app) == 0)
                        app->run_started = true;
        }
        pthread_mutex_unlock(&app->life_lock);
}

static void stop_controller(void *data)
{
        struct app *app = data;
        pthread_mutex_lock(&app->life_lock);
        uint64_t drain = atomic_load(&app->lost) ? 0 : app->drain_ns;
        if (atomic_load(&app->leading))
                se_log_info(0, "stopping the controllers (draining the queue for up to %.0f s)",
                            (double)drain / 1e9);
        /* the start-up must be over before the parts it starts are stopped */
        se_controller_cancel(app->ctl);
        if (app->run_started)
                pthread_join(app->run_thread, NULL);
        app->run_started = false;
        se_controller_stop(app->ctl, drain ? se_now_mono_ns() + drain : 0);
        atomic_store(&app->leading, false);
        pthread_mutex_unlock(&app->life_lock);
}

/* The elector stopped leading. On shutdown main() stops the controller
 * itself (draining) before the lease is released; a lost lease ends the
 * process with 1 at once, as upstream's OnStoppedLeading does. */
static void lease_stopped(void *data)
{
        struct app *app = data;
        if (atomic_load(&app->stop))
                return;
        se_log_error("leader election lost");
        atomic_store(&app->lost, true);
        atomic_store(&app->exit_code, 1);
        pthread_kill(app->main_thread, SIGTERM);
}

static void lease_new_leader(void *data, const char *identity)
{
        (void)data;
        if (*identity)
                se_log_info(0, "new leader elected: %s", identity);
}

static int parse_seconds(const char *s, unsigned *ret)
{
        int v;
        if (se_parse_int(s, 1, 3600, &v) < 0)
                return -EINVAL;
        *ret = (unsigned)v * 1000u;
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "kubeconfig", required_argument, NULL, O_KUBECONFIG },
                { "master", required_argument, NULL, O_MASTER },
                { "concurrent-syncs", required_argument, NULL, O_SYNCS },
                { "write", required_argument, NULL, O_WRITE },
                { "managed-by", required_argument, NULL, O_MANAGED_BY },
                { "endpoints-managed-by", required_argument, NULL, O_EP_MANAGED_BY },
                { "max-endpoints-per-slice", required_argument, NULL, O_MAX_EPS },
                { "leader-elect", optional_argument, NULL, O_LE },
                { "leader-elect-namespace", required_argument, NULL, O_LE_NS },
                /* kube-controller-manager's spelling */
                { "leader-elect-resource-namespace", required_argument, NULL, O_LE_NS },
                { "leader-elect-resource-name", required_argument, NULL, O_LE_NAME },
                { "leader-elect-lease-duration", required_argument, NULL, O_LE_LEASE },
                { "leader-elect-renew-deadline", required_argument, NULL, O_LE_RENEW },
                { "leader-elect-retry-period", required_argument, NULL, O_LE_RETRY },
                { "kube-api-qps", required_argument, NULL, O_QPS },
                { "kube-api-burst", required_argument, NULL, O_BURST },
                { "metrics-bind-address", required_argument, NULL, O_METRICS },
                { "shutdown-timeout", required_argument, NULL, O_SHUTDOWN },
                { "logging-format", required_argument, NULL, O_LOGFMT },
                { "endpoint-updates-batch-period", required_argument, NULL, O_EP_BATCH },
                { "endpointslice-updates-batch-period", required_argument, NULL, O_SLICE_BATCH },
                { "v", required_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        struct se_controller_opts copts = { 0 };
        struct se_kube_config_opts kopts = { 0 };
        struct se_kube_leader_opts lopts = { .ns = "kube-system",
                                             .name = "svcenv-controller",
                                             .on_started = start_controller,
                                             .on_stopped = lease_stopped,
                                             .on_new_leader = lease_new_leader };
        /* upstream's two controllers have a client each, 20 qps / burst 30 apiece */
        struct se_kube_client_opts client_opts = { .qps = 40, .burst = 60 };
        struct app app = { .leader_elect = true,
                           .drain_ns = 10000000000ull,
                           .life_lock = PTHREAD_MUTEX_INITIALIZER };
        const char *metrics_addr = "0.0.0.0:10258";
        int c, v;
        while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
                switch (c) {
                case O_KUBECONFIG:
                        kopts.kubeconfig = optarg;
                        break;
                case O_MASTER:
                        kopts.master = optarg;
                        break;
                case O_SYNCS:
                        if (se_parse_int(optarg, 1, SE_CONTROLLER_MAX_WORKERS, &v) < 0)
                                goto bad;
                        copts.workers = (unsigned)v;
                        break;
                case O_WRITE:
                        if (strcmp(optarg, "endpoints") == 0)
                                copts.ep.write = SE_EP_WRITE_ENDPOINTS;
                        else if (strcmp(optarg, "slices") == 0)
                                copts.ep.write = SE_EP_WRITE_SLICES;
                        else if (strcmp(optarg, "both") == 0)
                                copts.ep.write = SE_EP_WRITE_ENDPOINTS | SE_EP_WRITE_SLICES;
                        else
                                goto bad;
                        break;
                case O_MANAGED_BY:
                        copts.ep.slices_managed_by = optarg;
                        break;
                case O_EP_MANAGED_BY:
                        copts.ep.endpoints_managed_by = optarg;
                        break;
                case O_MAX_EPS:
                        if (se_parse_int(optarg, 1, SE_SLICES_MAX_ENDPOINTS, &v) < 0)
                                goto bad;
                        copts.ep.max_endpoints_per_slice = (uint32_t)v;
                        break;
                case O_LE:
                        app.leader_elect = true;
                        if (optarg && se_parse_bool(optarg, &app.leader_elect) < 0)
                                goto bad;
                        break;
                case O_LE_NS:
                        lopts.ns = optarg;
                        break;
                case O_LE_NAME:
                        lopts.name = optarg;
                        break;
                case O_LE_LEASE:
                        if (parse_seconds(optarg, &lopts.lease_ms) < 0)
                                goto bad;
                        break;
                case O_LE_RENEW:
                        if (parse_seconds(optarg, &lopts.renew_deadline_ms) < 0)
                                goto bad;
                        break;
                case O_LE_RETRY:
                        if (parse_seconds(optarg, &lopts.retry_ms) < 0)
                                goto bad;
                        break;
                case O_QPS:
                        if (se_parse_int(optarg, 1, 100000, &v) < 0)
                                goto bad;
                        client_opts.qps = v;
                        break;
                case O_BURST:
                        if (se_parse_int(optarg, 1, 100000, &v) < 0)
                                goto bad;
                        client_opts.burst = (unsigned)v;
                        break;
                case O_METRICS:
                        metrics_addr = optarg;
                        break;
                case O_EP_BATCH:
                case O_SLICE_BATCH: {
                        /* one queue serves both: the longer period wins */
                        int64_t ns;
                        if (se_parse_duration(optarg, 3600ll * 1000000000ll, &ns) < 0)
                                goto bad;
                        if ((uint64_t)ns > copts.pod_batch_ns)
                                copts.pod_batch_ns = (uint64_t)ns;
                        break;
                }
                case O_SHUTDOWN:
                        if (se_parse_int(optarg, 0, 3600, &v) < 0)
                                goto bad;
                        app.drain_ns = (uint64_t)v * 1000000000ull;
                        break;
                case O_LOGFMT:
                        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                                goto bad;
                        se_log_set_json(strcmp(optarg, "json") == 0);
                        break;
                case 'v':
                        if (se_parse_int(optarg, 0, 10, &v) < 0)
                                goto bad;
                        se_log_set_verbosity(v);
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return 0;
                default:
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "svcenv-controller: unexpected argument %s\n", argv[optind]);
                return 2;
        }

        /* metrics address: HOST:PORT (the last ':' splits, for IPv6 too) */
        char host[256];
        int port = 0;
        const char *colon = strrchr(metrics_addr, ':');
        bool serve = *metrics_addr != '\0';
        if (serve && (!colon || (size_t)(colon - metrics_addr) >= sizeof(host) ||
                      se_parse_int(colon + 1, 0, 65535, &port) < 0)) {
                fprintf(stderr, "svcenv-controller: --metrics-bind-address: want HOST:PORT\n");
                return 2;
        }
        if (serve) {
                memcpy(host, metrics_addr, (size_t)(colon - metrics_addr));
                host[colon - metrics_addr] = '\0';
        }

        /* a few threads, small objects: two malloc arenas keep RSS down */
        mallopt(M_ARENA_MAX, 2);
        /* list pages (about 1 MB of text each) always in their own mapping,
         * handed back whole when freed; without a fixed threshold glibc
         * raises it after the first free and takes them from the heap,
         * where they fragment it (measured: peak RSS -2 MB at 40k pods) */
        mallopt(M_MMAP_THRESHOLD, 128 * 1024);

        /* signals go to sigwait below, in every thread made from here on */
        sigset_t sigs;
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
        signal(SIGPIPE, SIG_IGN);
        app.main_thread = pthread_self();

        struct se_diag diag = { 0 };
        struct se_kube_config *cfg = NULL;
        struct se_kube_client *client = NULL;
        int r = se_kube_config_load(&kopts, &cfg, &diag);
        if (r == 0)
                r = se_kube_client_new(cfg, &client_opts, &client, &diag);
        se_kube_config_free(cfg);
        if (r < 0) {
                char msg[1024];
                se_diag_format(&diag, msg, sizeof(msg));
                se_log_error("%s", msg[0] ? msg : strerror(-r));
                return 4;
        }
        copts.log = log_cb;
        app.ctl = se_controller_new(client, &copts);
        if (!app.ctl) {
                se_log_error("out of memory");
                return 4;
        }

        struct se_httpd *httpd = NULL;
        if (serve) {
                struct se_httpd_config hc = { .address = host[0] ? host : NULL,
                                              .port = port,
                                              .handler = handler,
                                              .data = &app };
                if (se_httpd_start(&hc, &httpd, &diag) < 0) {
                        se_log_error("--metrics-bind-address %s: %s", metrics_addr, diag.text);
                        se_controller_free(app.ctl);
                        se_kube_client_free(client);
                        return 4;
                }
                se_log_info(1, "serving /metrics, /livez and /readyz on %s:%d", host,
                            se_httpd_port(httpd));
        }

        char identity[300];
        bool lease_running = false;
        if (app.leader_elect) {
                char hostname[200] = "unknown";
                uint8_t rnd[8];
                gethostname(hostname, sizeof(hostname) - 1);
                FILE *ur = fopen("/dev/urandom", "re");
                if (!ur || fread(rnd, 1, sizeof(rnd), ur) != sizeof(rnd))
                        memset(rnd, (int)getpid(), sizeof(rnd));
                if (ur)
                        fclose(ur);
                snprintf(identity, sizeof(identity), "%s_%02x%02x%02x%02x%02x%02x%02x%02x",
                         hostname, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
                lopts.identity = identity;
                lopts.data = &app;
                r = se_kube_leader_new(client, &lopts, &app.lease, &diag);
                if (r == -EINVAL) {
                        fprintf(stderr, "svcenv-controller: %s\n", diag.text);
                        return 2;
                }
                if (r < 0 || se_kube_leader_start(app.lease) < 0) {
                        se_log_error("cannot start leader election");
                        return 4;
                }
                lease_running = true;
                se_log_info(0, "attempting to acquire leader lease %s/%s as %s", lopts.ns,
                            lopts.name, identity);
        } else {
                start_controller(&app);
        }

        int sig = 0;
        sigwait(&sigs, &sig);
        se_log_info(0, "received signal %d, shutting down", sig);
        atomic_store(&app.stop, true);
        /* drain while still holding the lease, then release it */
        stop_controller(&app);
        if (lease_running)
                se_log_info(1, "releasing the lease");
        app.lease = se_kube_leader_free(app.lease);
        se_httpd_stop(httpd);
        se_controller_free(app.ctl);
        se_kube_client_free(client);
        return atomic_load(&app.exit_code);
bad:
        fprintf(stderr, "svcenv-controller: invalid option value: %s\n", optarg);
        fputs(usage, stderr);
        return 2;
}
