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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <svcenv/alloc.h>
#include <svcenv/controller.h>
#include <svcenv/httpd.h>
#include <svcenv/httpd_probes.h>
#include <svcenv/kube.h>
#include <svcenv/kube_lease.h>
#include <svcenv/log.h>
#include <svcenv/macro.h>
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
        "  --metrics-bind-address A:P     /metrics, /livez, /readyz over plain HTTP\n"
        "                                 (default 127.0.0.1:10258, loopback only;\n"
        "                                 port 0: any free port; \"\": off)\n"
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
        struct se_kube_client *client;
        struct se_httpd_check checks[2];
        struct se_httpd_probes probes; /* /livez, /readyz, /healthz, /metrics */
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

/* a standby replica is ready; a leader once its caches are full */
static bool caches_synced(void *data)
{
        struct app *app = data;
        return !atomic_load(&app->leading) || se_controller_synced(app->ctl);
}

/* The API server answered our last request (kube-controller-manager's
 * readiness follows its client the same way: a controller that cannot reach
 * the API server, e.g. stuck acquiring the lease, is not ready). */
static bool api_reachable(void *data)
{
        struct app *app = data;
        return se_kube_client_reachable(app->client);
}

static void write_metrics(void *data, struct se_strbuf *out)
{
        struct app *app = data;
        se_controller_metrics(app->ctl, out);
        se_strbuf_printf(out,
                         "# HELP leader_election_master_status Gauge of if the reporting "
                         "system is master of the relevant lease, 0 indicates backup, 1 "
                         "indicates master.\n# TYPE leader_election_master_status gauge\n"
                         "leader_election_master_status{name=\"svcenv-controller\"} %d\n",
                         atomic_load(&app->leading) ? 1 : 0);
}

static void handler(void *data, const struct se_httpd_request *req, struct se_httpd_response *resp)
{
        struct app *app = data;
        if (!se_httpd_probes_serve(&app->probes, req, resp))
                se_httpd_not_found(resp);
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

/* Everything the flags set. */
struct cli {
        struct se_controller_opts copts;
        struct se_kube_config_opts kopts;
        struct se_kube_leader_opts lopts;
        struct se_kube_client_opts client_opts;
        const char *metrics_addr; /* "": no HTTP server */
        char host[256]; /* metrics_addr split */
        int port;
};

#define EXIT_HELP (-1) /* --help: exit 0 */

/* Reads the flags into cli and app: 0 to run, 2 on a usage error, EXIT_HELP. */
static int parse_args(int argc, char **argv, struct cli *cli, struct app *app)
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
        int c, v;
        while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
                switch (c) {
                case O_KUBECONFIG:
                        cli->kopts.kubeconfig = optarg;
                        break;
                case O_MASTER:
                        cli->kopts.master = optarg;
                        break;
                case O_SYNCS:
                        if (se_parse_int(optarg, 1, SE_CONTROLLER_MAX_WORKERS, &v) < 0)
                                goto bad;
                        cli->copts.workers = (unsigned)v;
                        break;
                case O_WRITE:
                        if (strcmp(optarg, "endpoints") == 0)
                                cli->copts.ep.write = SE_EP_WRITE_ENDPOINTS;
                        else if (strcmp(optarg, "slices") == 0)
                                cli->copts.ep.write = SE_EP_WRITE_SLICES;
                        else if (strcmp(optarg, "both") == 0)
                                cli->copts.ep.write = SE_EP_WRITE_ENDPOINTS | SE_EP_WRITE_SLICES;
                        else
                                goto bad;
                        break;
                case O_MANAGED_BY:
                        cli->copts.ep.slices_managed_by = optarg;
                        break;
                case O_EP_MANAGED_BY:
                        cli->copts.ep.endpoints_managed_by = optarg;
                        break;
                case O_MAX_EPS:
                        if (se_parse_int(optarg, 1, SE_SLICES_MAX_ENDPOINTS, &v) < 0)
                                goto bad;
                        cli->copts.ep.max_endpoints_per_slice = (uint32_t)v;
                        break;
                case O_LE:
                        app->leader_elect = true;
                        if (optarg && se_parse_bool(optarg, &app->leader_elect) < 0)
                                goto bad;
                        break;
                case O_LE_NS:
                        cli->lopts.ns = optarg;
                        break;
                case O_LE_NAME:
                        cli->lopts.name = optarg;
                        break;
                case O_LE_LEASE:
                        if (parse_seconds(optarg, &cli->lopts.lease_ms) < 0)
                                goto bad;
                        break;
                case O_LE_RENEW:
                        if (parse_seconds(optarg, &cli->lopts.renew_deadline_ms) < 0)
                                goto bad;
                        break;
                case O_LE_RETRY:
                        if (parse_seconds(optarg, &cli->lopts.retry_ms) < 0)
                                goto bad;
                        break;
                case O_QPS:
                        if (se_parse_int(optarg, 1, 100000, &v) < 0)
                                goto bad;
                        cli->client_opts.qps = v;
                        break;
                case O_BURST:
                        if (se_parse_int(optarg, 1, 100000, &v) < 0)
                                goto bad;
                        cli->client_opts.burst = (unsigned)v;
                        break;
                case O_METRICS:
                        cli->metrics_addr = optarg;
                        break;
                case O_EP_BATCH:
                case O_SLICE_BATCH: {
                        /* one queue serves both: the longer period wins */
                        int64_t ns;
                        if (se_parse_duration(optarg, 3600ll * 1000000000ll, &ns) < 0)
                                goto bad;
                        if ((uint64_t)ns > cli->copts.pod_batch_ns)
                                cli->copts.pod_batch_ns = (uint64_t)ns;
                        break;
                }
                case O_SHUTDOWN:
                        if (se_parse_int(optarg, 0, 3600, &v) < 0)
                                goto bad;
                        app->drain_ns = (uint64_t)v * 1000000000ull;
                        break;
                case O_LOGFMT:
                        if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                                goto bad;
                        se_log_set_json(strcmp(optarg, "json") == 0);
                        break;
                case 'v':
                        if (se_parse_int(optarg, INT32_MIN, INT32_MAX, &v) < 0) /* klog */
                                goto bad;
                        se_log_set_verbosity(v);
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return EXIT_HELP;
                default:
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "svcenv-controller: unexpected argument %s\n", argv[optind]);
                return 2;
        }

        if (*cli->metrics_addr &&
            se_parse_hostport(cli->metrics_addr, cli->host, sizeof(cli->host), &cli->port) < 0) {
                fprintf(stderr, "svcenv-controller: --metrics-bind-address: want HOST:PORT\n");
                return 2;
        }

        return 0;
bad:
        fprintf(stderr, "svcenv-controller: invalid option value: %s\n", optarg);
        fputs(usage, stderr);
        return 2;
}

/* The API client from the kubeconfig (or in-cluster): 0 or 4, logged. */
static int make_client(const struct cli *cli, struct se_kube_client **client)
{
        struct se_diag diag;
        if (se_kube_client_load(&cli->kopts, &cli->client_opts, client, &diag) < 0) {
                char msg[1024];
                se_diag_format(&diag, msg, sizeof(msg));
                se_log_error("%s", msg);
                return 4;
        }
        return 0;
}

/* /metrics, /livez, /readyz, /healthz on --metrics-bind-address (none
 * when it is ""): 0 or 4, logged. */
static int serve_http(struct app *app, const struct cli *cli, struct se_httpd **httpd)
{
        app->checks[0] = (struct se_httpd_check){
                .name = "api-server", .ok = api_reachable, .data = app, .ready_only = true
        };
        app->checks[1] = (struct se_httpd_check){
                .name = "informer-sync", .ok = caches_synced, .data = app, .ready_only = true
        };
        app->probes = (struct se_httpd_probes){ .checks = app->checks,
                                                .n_checks = SE_ARRAY_SIZE(app->checks),
                                                .metrics = write_metrics,
                                                .metrics_data = app };
        if (!*cli->metrics_addr)
                return 0;
        struct se_diag diag = { 0 };
        struct se_httpd_config hc = { .address = cli->host[0] ? cli->host : NULL,
                                      .port = cli->port,
                                      .handler = handler,
                                      .data = app };
        if (se_httpd_start(&hc, httpd, &diag) < 0) {
                se_log_error("--metrics-bind-address %s: %s", cli->metrics_addr, diag.text);
                return 4;
        }
        se_log_info(1, "serving /metrics, /livez and /readyz on %s:%d", cli->host,
                    se_httpd_port(*httpd));
        return 0;
}

/* Starts the elector as "<hostname>_<random>" (identity: its storage):
 * 0, 2 (bad lease timings) or 4, logged. */
static int start_election(struct app *app, struct se_kube_client *client, struct cli *cli,
                          char *identity, size_t size)
{
        char hostname[200] = "unknown";
        uint8_t rnd[8];
        gethostname(hostname, sizeof(hostname) - 1);
        FILE *ur = fopen("/dev/urandom", "re");
        if (!ur || fread(rnd, 1, sizeof(rnd), ur) != sizeof(rnd))
                memset(rnd, (int)getpid(), sizeof(rnd));
        if (ur)
                fclose(ur);
        snprintf(identity, size, "%s_%02x%02x%02x%02x%02x%02x%02x%02x", hostname, rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        cli->lopts.identity = identity;
        cli->lopts.data = app;
        struct se_diag diag = { 0 };
        int r = se_kube_leader_new(client, &cli->lopts, &app->lease, &diag);
        if (r == -EINVAL) {
                fprintf(stderr, "svcenv-controller: %s\n", diag.text);
                return 2;
        }
        if (r < 0 || se_kube_leader_start(app->lease) < 0) {
                se_log_error("cannot start leader election");
                return 4;
        }
        se_log_info(0, "attempting to acquire leader lease %s/%s as %s", cli->lopts.ns,
                    cli->lopts.name, identity);
        return 0;
}

int main(int argc, char **argv)
{
        struct cli cli = {
                .lopts = { .ns = "kube-system",
                           .name = "svcenv-controller",
                           .on_started = start_controller,
                           .on_stopped = lease_stopped,
                           .on_new_leader = lease_new_leader },
                /* upstream's two controllers have a client each, 20 qps / burst 30 apiece */
                .client_opts = { .qps = 40, .burst = 60 },
                /* loopback: plain HTTP without authentication (kube-controller-manager
                 * serves its metrics over HTTPS with authn/authz instead) */
                .metrics_addr = "127.0.0.1:10258",
        };
        struct app app = { .leader_elect = true,
                           .drain_ns = 10000000000ull,
                           .life_lock = PTHREAD_MUTEX_INITIALIZER };
        int r = parse_args(argc, argv, &cli, &app);
        if (r != 0)
                return r == EXIT_HELP ? 0 : r;

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

        struct se_kube_client *client = NULL;
        if ((r = make_client(&cli, &client)) != 0)
                return r;
        cli.copts.log = log_cb;
        app.client = client;
        app.ctl = se_controller_new(client, &cli.copts);
        if (!app.ctl) {
                se_log_error("out of memory");
                se_kube_client_free(client);
                return 4;
        }
        struct se_httpd *httpd = NULL;
        if ((r = serve_http(&app, &cli, &httpd)) != 0) {
                se_controller_free(app.ctl);
                se_kube_client_free(client);
                return r;
        }
        char identity[300];
        if (app.leader_elect) {
                if ((r = start_election(&app, client, &cli, identity, sizeof(identity))) != 0)
                        return r;
        } else {
                start_controller(&app);
        }

        int sig = 0;
        sigwait(&sigs, &sig);
        se_log_info(0, "received signal %d, shutting down", sig);
        atomic_store(&app.stop, true);
        /* drain while still holding the lease, then release it */
        stop_controller(&app);
        if (app.lease)
                se_log_info(1, "releasing the lease");
        app.lease = se_kube_leader_free(app.lease);
        se_httpd_stop(httpd);
        se_controller_free(app.ctl);
        se_kube_client_free(client);
        return atomic_load(&app.exit_code);
}
