/* svcenv-webhook: the mutating admission webhook that writes the service
 * variables into pods at creation. Wiring only: flags, the Service source,
 * the HTTPS server, signals. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <svcenv/admission.h>
#include <svcenv/alloc.h>
#include <svcenv/httpd.h>
#include <svcenv/httpd_probes.h>
#include <svcenv/log.h>
#include <svcenv/parse.h>

#include "metrics.h"
#include "source.h"

static const char usage[] =
        "Usage: svcenv-webhook (-f CLUSTER... | --kubeconfig FILE | --master URL)\n"
        "                      --tls-cert-file CRT --tls-private-key-file KEY [options]\n"
        "\n"
        "Mutating admission webhook: every created pod's containers get the service\n"
        "variables the kubelet would give them (Kubernetes v1.36), written into env.\n"
        "\n"
        "  -f, --filename PATH       read Services from manifests (repeatable)\n"
        "  --kubeconfig FILE         API server credentials (default: kubectl's rules,\n"
        "                            then the in-cluster config)\n"
        "  --master URL              API server address (overrides the kubeconfig's)\n"
        "  --address IP              listen address (default: all)\n"
        "  --port N                  HTTPS port (default 8443)\n"
        "  --tls-cert-file FILE      serving certificate (PEM, re-read on change)\n"
        "  --tls-private-key-file F  its key\n"
        "  --failure-mode M          allow (default) or deny pods on internal failure\n"
        "  --max-env-bytes N         size guard per container (default 1048576)\n"
        "  --max-body-bytes N        request body cap (default 4194304)\n"
        "  --read-timeout S          seconds for a whole request, headers to answer,\n"
        "                            and for a new connection's first headers\n"
        "                            (default 10)\n"
        "  --threads N               event loops serving connections (1-16; default:\n"
        "                            the CPUs this process may run on)\n"
        "  -v N                      log verbosity\n"
        "\n"
        "Routes: POST /mutate (any path), GET /livez, /readyz, /healthz, /metrics.\n"
        "SIGTERM/SIGINT: stop; SIGHUP: re-read the certificate files now.\n";

struct daemon {
        struct source src;
        struct se_admission_options ao;
        struct se_admission_cache *cache; /* rendered service variables per namespace */
        struct se_httpd *httpd;
        struct se_httpd_check ready;
        struct se_httpd_probes probes; /* /livez, /readyz (Services loaded), /metrics */
};

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void text(struct se_httpd_response *resp, int status, const char *msg)
{
        resp->status = status;
        resp->content_type = "text/plain; charset=utf-8";
        resp->body = se_strdup(msg);
        resp->len = resp->body ? strlen(resp->body) : 0;
}

static bool is_json_content_type(const char *ct)
{
        size_t n = strlen("application/json");
        return strncmp(ct, "application/json", n) == 0 && (ct[n] == '\0' || ct[n] == ';');
}

static void admit(struct daemon *d, const struct se_httpd_request *req,
                  struct se_httpd_response *resp)
{
        if (strcmp(req->method, "POST") != 0)
                return text(resp, 405, "POST an AdmissionReview\n");
        if (!is_json_content_type(req->content_type))
                return text(resp, 415, "Content-Type must be application/json\n");
        double t0 = now_s();
        struct se_admission_result res;
        int r = se_admission_review_cached(d->cache, &d->ao, req->body, req->len, &res);
        double dt = now_s() - t0;
        if (r < 0) {
                metrics_observe(SE_ADMIT_ERROR, dt, 0);
                se_log_error("admission: %s", strerror(-r));
                return text(resp, 500, "internal error\n");
        }
        metrics_observe(res.outcome, dt, res.patch_bytes);
        if (res.http_status == 400)
                se_log_info(2, "malformed review: %s", res.body);
        else
                se_log_info(4, "admission: %s, %zu variables, %zu patch bytes, %.3f ms",
                            se_admission_outcome_name(res.outcome), res.n_vars, res.patch_bytes,
                            dt * 1e3);
        resp->status = res.http_status;
        resp->content_type =
                res.http_status == 200 ? "application/json" : "text/plain; charset=utf-8";
        resp->body = res.body;
        resp->len = res.len;
        res.body = NULL;
}

static bool services_synced(void *data)
{
        struct daemon *d = data;
        return source_synced(&d->src);
}

static void write_metrics(void *data, struct se_strbuf *out)
{
        struct daemon *d = data;
        struct se_httpd_stats st;
        se_httpd_stats(d->httpd, &st);
        se_store_rdlock(d->src.store);
        long n = (long)se_store_count(d->src.store, SE_KIND_SERVICE, NULL);
        se_store_unlock(d->src.store);
        struct se_admission_cache_stats cs;
        se_admission_cache_stats(d->cache, &cs);
        metrics_render(out, &st, &cs, n, source_synced(&d->src));
}

static void handle(void *data, const struct se_httpd_request *req, struct se_httpd_response *resp)
{
        struct daemon *d = data;
        if (!se_httpd_probes_serve(&d->probes, req, resp))
                admit(d, req, resp);
}

/* One event loop per CPU we may run on (the cgroup's cpuset included). */
static unsigned default_threads(void)
{
        cpu_set_t set;
        int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
        return n < 1 ? 1 : n > SE_HTTPD_MAX_THREADS ? SE_HTTPD_MAX_THREADS : (unsigned)n;
}

static int number(const char *flag, const char *arg, int64_t min, int64_t max, int64_t *ret)
{
        if (se_parse_i64(arg, min, max, ret) == 0)
                return 0;
        fprintf(stderr, "svcenv-webhook: %s: not an integer in [%lld, %lld]: \"%s\"\n", flag,
                (long long)min, (long long)max, arg);
        return -EINVAL;
}

#define EXIT_HELP (-1) /* --help: exit 0 */

/* Reads the flags into d and cfg: 0 to run, 2 or 4 to exit with, EXIT_HELP. */
static int parse_args(int argc, char **argv, struct daemon *d, struct se_httpd_config *cfg)
{
        enum {
                O_KUBECONFIG = 256,
                O_MASTER,
                O_ADDRESS,
                O_PORT,
                O_CERT,
                O_KEY,
                O_FAILURE,
                O_MAXENV,
                O_MAXBODY,
                O_TIMEOUT,
                O_THREADS
        };
        static const struct option opts[] = {
                { "filename", required_argument, NULL, 'f' },
                { "kubeconfig", required_argument, NULL, O_KUBECONFIG },
                { "master", required_argument, NULL, O_MASTER },
                { "address", required_argument, NULL, O_ADDRESS },
                { "port", required_argument, NULL, O_PORT },
                { "tls-cert-file", required_argument, NULL, O_CERT },
                { "tls-private-key-file", required_argument, NULL, O_KEY },
                { "failure-mode", required_argument, NULL, O_FAILURE },
                { "max-env-bytes", required_argument, NULL, O_MAXENV },
                { "max-body-bytes", required_argument, NULL, O_MAXBODY },
                { "read-timeout", required_argument, NULL, O_TIMEOUT },
                { "threads", required_argument, NULL, O_THREADS },
                { "v", required_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        int64_t v;
        int c;
        while ((c = getopt_long(argc, argv, "f:v:h", opts, NULL)) != -1) {
                switch (c) {
                case 'f':
                        if (se_strv_push(&d->src.files, optarg) < 0)
                                return 4;
                        break;
                case O_KUBECONFIG:
                        d->src.kubeconfig = optarg;
                        break;
                case O_MASTER:
                        d->src.master = optarg;
                        break;
                case O_ADDRESS:
                        cfg->address = optarg;
                        break;
                case O_PORT:
                        if (number("--port", optarg, 0, 65535, &v) < 0)
                                return 2;
                        cfg->port = (int)v;
                        break;
                case O_CERT:
                        cfg->cert_file = optarg;
                        break;
                case O_KEY:
                        cfg->key_file = optarg;
                        break;
                case O_FAILURE:
                        if (strcmp(optarg, "allow") != 0 && strcmp(optarg, "deny") != 0) {
                                fprintf(stderr, "svcenv-webhook: --failure-mode must be allow "
                                                "or deny\n");
                                return 2;
                        }
                        d->ao.failure_deny = strcmp(optarg, "deny") == 0;
                        break;
                case O_MAXENV:
                        if (number("--max-env-bytes", optarg, 1, INT64_MAX, &v) < 0)
                                return 2;
                        d->ao.max_env_bytes = (size_t)v;
                        break;
                case O_MAXBODY:
                        if (number("--max-body-bytes", optarg, 1024, (int64_t)SE_ADMISSION_MAX_BODY,
                                   &v) < 0)
                                return 2;
                        cfg->max_body = (size_t)v;
                        break;
                case O_TIMEOUT:
                        if (number("--read-timeout", optarg, 1, 3600, &v) < 0)
                                return 2;
                        cfg->timeout_s = (unsigned)v;
                        break;
                case O_THREADS:
                        if (number("--threads", optarg, 1, SE_HTTPD_MAX_THREADS, &v) < 0)
                                return 2;
                        cfg->threads = (unsigned)v;
                        break;
                case 'v':
                        if (number("-v", optarg, INT32_MIN, INT32_MAX, &v) < 0) /* klog */
                                return 2;
                        se_log_set_verbosity((int)v);
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return EXIT_HELP;
                default:
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (optind < argc || !cfg->cert_file || !cfg->key_file) {
                fprintf(stderr, "svcenv-webhook: %s\n",
                        optind < argc ? "unexpected argument" :
                                        "--tls-cert-file and --tls-private-key-file are required");
                return 2;
        }

        return 0;
}

/* Until SIGTERM or SIGINT; SIGHUP re-reads the certificates. */
static void wait_for_signals(struct daemon *d, const sigset_t *set)
{
        for (;;) {
                int sig = 0;
                if (sigwait(set, &sig) != 0)
                        continue;
                if (sig == SIGHUP) {
                        struct se_diag hd = { 0 };
                        if (se_httpd_reload_certs(d->httpd, &hd) < 0) {
                                char buf[1024];
                                se_diag_format(&hd, buf, sizeof(buf));
                                se_log_warn("certificate reload: %s", buf);
                        } else {
                                se_log_info(0, "certificates re-read");
                        }
                        continue;
                }
                se_log_info(0, "signal %d: shutting down", sig);
                break;
        }
}

int main(int argc, char **argv)
{
        static struct daemon d;
        struct se_httpd_config cfg = {
                .port = 8443, .threads = default_threads(), .handler = handle, .data = &d
        };
        int r = parse_args(argc, argv, &d, &cfg);
        if (r != 0)
                return r == EXIT_HELP ? 0 : r;

        /* Signals are taken by sigwait in this thread only. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = source_start(&d.src);
        if (r < 0) {
                source_stop(&d.src);
                se_strv_release(&d.src.files);
                return d.src.files.n ? 3 : 4;
        }
        d.cache = se_admission_cache_new(d.src.store, 0);
        if (!d.cache) {
                se_log_error("admission cache: %s", strerror(ENOMEM));
                source_stop(&d.src);
                se_strv_release(&d.src.files);
                return 4;
        }
        d.ready = (struct se_httpd_check){
                .name = "services-synced", .ok = services_synced, .data = &d, .ready_only = true
        };
        d.probes = (struct se_httpd_probes){
                .checks = &d.ready, .n_checks = 1, .metrics = write_metrics, .metrics_data = &d
        };
        metrics_init();
        struct se_diag diag = { 0 };
        r = se_httpd_start(&cfg, &d.httpd, &diag);
        if (r < 0) {
                char buf[1024];
                se_diag_format(&diag, buf, sizeof(buf));
                se_log_error("%s", buf);
                d.cache = se_admission_cache_free(d.cache);
                source_stop(&d.src);
                se_strv_release(&d.src.files);
                return 4;
        }
        se_log_info(0, "serving admission reviews on %s:%d (%u threads)",
                    cfg.address ? cfg.address : "*", se_httpd_port(d.httpd), cfg.threads);
        wait_for_signals(&d, &set);
        d.httpd = se_httpd_stop(d.httpd);
        d.cache = se_admission_cache_free(d.cache);
        source_stop(&d.src);
        se_strv_release(&d.src.files);
        return 0;
}
