/* pkg/kube against the real kube-apiserver of test/k8s (KUBE_DIR): config
 * and auth modes, CRUD, pagination, conflicts, RBAC, watch through an API
 * server restart and a forced 410. Prints TAP. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <svcenv/decode.h>
#include <svcenv/hash.h>
#include <svcenv/kube.h>
#include <svcenv/kube_client.h>
#include <svcenv/kube_lease.h>
#include <svcenv/kube_watch.h>
#include <svcenv/store.h>
#include <svcenv/timeutil.h>

extern char **environ;

static int n_test;
static const char *kube_dir;
static char admin_token[1100], server[1100], ca_file[1100];

static void ok(int cond, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        printf("%sok %d - ", cond ? "" : "not ", ++n_test);
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        fflush(stdout);
}

static void note(const struct se_diag *d)
{
        printf("# %s\n", d->text);
}

static void read_env(void)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/env", kube_dir);
        FILE *f = fopen(path, "r");
        char line[1024];
        while (f && fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                if (strncmp(line, "ADMIN_TOKEN=", 12) == 0)
                        snprintf(admin_token, sizeof(admin_token), "%s", line + 12);
                else if (strncmp(line, "APISERVER_URL=", 14) == 0)
                        snprintf(server, sizeof(server), "%s", line + 14);
                else if (strncmp(line, "CA_FILE=", 8) == 0)
                        snprintf(ca_file, sizeof(ca_file), "%s", line + 8);
        }
        if (f)
                fclose(f);
}

static struct se_kube_client *client_from(const char *kubeconfig, double qps, struct se_diag *d)
{
        struct se_kube_config_opts o = { .kubeconfig = kubeconfig };
        struct se_kube_config *cfg = NULL;
        struct se_kube_client *c = NULL;
        struct se_kube_client_opts co = { .qps = qps };
        if (se_kube_config_load(&o, &cfg, d) == 0)
                (void)se_kube_client_new(cfg, &co, &c, d);
        se_kube_config_free(cfg);
        return c;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
        FILE *f = fopen(path, "w");
        if (f) {
                fputs(text, f);
                fclose(f);
        }
        chmod(path, mode);
}

static int controlplane(const char *verb, const char *extra)
{
        char a0[] = "test/k8s/controlplane", a1[64], a2[512], a3[64];
        snprintf(a1, sizeof(a1), "%s", verb);
        snprintf(a2, sizeof(a2), "%s", kube_dir);
        snprintf(a3, sizeof(a3), "%s", extra ? extra : "");
        char *argv[] = { a0, a1, a2, extra ? a3 : NULL, NULL };
        pid_t pid;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        int r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return -1;
        int st;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Starts args (stdio to /dev/null); *ret_pid. 0 or -1. */
static int spawn_quiet(const char *const *args, pid_t *ret_pid)
{
        char *argv[32];
        size_t n = 0;
        for (; args[n] && n < 31; n++)
                argv[n] = strdup(args[n]);
        argv[n] = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        int r = posix_spawnp(ret_pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        for (size_t i = 0; i < n; i++)
                free(argv[i]);
        return r == 0 ? 0 : -1;
}

/* Runs args to completion: exit status or -1. */
static int run_quiet(const char *const *args)
{
        pid_t pid;
        if (spawn_quiet(args, &pid) < 0)
                return -1;
        int st;
        waitpid(pid, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void sleep_ms(unsigned ms);

static json_t *configmap(const char *name, const char *value)
{
        return json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                         "metadata", "name", name, "data", "k", value);
}

static void ensure_ns(struct se_kube_client *c, const char *ns)
{
        json_t *b = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                              "metadata", "name", ns);
        (void)se_kube_create(c, se_kube_resource_of(SE_KIND_NAMESPACE), NULL, b, NULL, NULL);
        json_decref(b);
}

static void test_crud(struct se_kube_client *c)
{
        struct se_diag d;
        const struct se_kube_resource *cm = se_kube_resource_of(SE_KIND_CONFIGMAP);
        ensure_ns(c, "crud");
        json_t *body = configmap("one", "v1"), *got = NULL;
        int r = se_kube_create(c, cm, "crud", body, &got, &d);
        ok(r == 0 && got, "create ConfigMap");
        r = se_kube_create(c, cm, "crud", body, NULL, &d);
        ok(r == -EEXIST && strstr(d.text, "already exists"), "create twice: -EEXIST (%s)", d.text);
        json_decref(body);
        struct se_object *obj = NULL;
        r = se_kube_get(c, SE_KIND_CONFIGMAP, "crud", "one", &obj, &d);
        ok(r == 0 && obj && strcmp(se_kvlist_get(&se_configmap_of(obj)->data, "k"), "v1") == 0,
           "get decodes into the model");
        se_object_unref(obj);
        /* update with the version read: ok; again with the old one: conflict */
        json_t *upd = json_deep_copy(got);
        json_object_set_new(json_object_get(upd, "data"), "k", json_string("v2"));
        json_t *after = NULL;
        r = se_kube_update(c, cm, "crud", upd, &after, &d);
        ok(r == 0, "update with resourceVersion");
        json_object_set_new(json_object_get(upd, "data"), "k", json_string("v3"));
        r = se_kube_update(c, cm, "crud", upd, NULL, &d);
        ok(r == -ESTALE && strstr(d.text, "Conflict (409)"), "stale update: -ESTALE (%s)", d.text);
        json_decref(upd);
        /* patches */
        json_t *mp = json_pack("{s:{s:s}}", "data", "m", "merged");
        struct se_kube_patch_opts po = { SE_KUBE_PATCH_MERGE, NULL, false, NULL };
        json_t *res = NULL;
        r = se_kube_patch(c, cm, "crud", "one", &po, mp, &res, &d);
        ok(r == 0 && json_is_string(json_object_get(json_object_get(res, "data"), "m")),
           "merge patch");
        json_decref(mp);
        json_decref(res);
        json_t *jp = json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s}]", "op", "test", "path", "/data/k",
                               "value", "v2", "op", "replace", "path", "/data/k", "value", "jp");
        po.type = SE_KUBE_PATCH_JSON;
        r = se_kube_patch(c, cm, "crud", "one", &po, jp, NULL, &d);
        ok(r == 0, "JSON patch with a test op");
        r = se_kube_patch(c, cm, "crud", "one", &po, jp, NULL, &d);
        ok(r < 0, "JSON patch whose test fails is refused (%d: %s)", r, d.text);
        json_decref(jp);
        json_t *ap = json_pack("{s:s,s:s,s:{s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                               "metadata", "name", "one", "data", "k", "applied");
        struct se_kube_patch_opts apo = { SE_KUBE_PATCH_APPLY, "svcenv-test", false, NULL };
        r = se_kube_patch(c, cm, "crud", "one", &apo, ap, NULL, &d);
        ok(r == -ESTALE && strstr(d.text, "conflict"),
           "apply over another manager's field: -ESTALE (%s)", d.text);
        apo.force = true;
        r = se_kube_patch(c, cm, "crud", "one", &apo, ap, &res, &d);
        ok(r == 0 && strcmp(json_string_value(json_object_get(json_object_get(res, "data"), "k")),
                            "applied") == 0,
           "server-side apply with force");
        json_decref(res);
        json_decref(ap);
        struct se_kube_delete_opts dop = { .uid = "00000000-0000-0000-0000-000000000000" };
        r = se_kube_delete(c, cm, "crud", "one", &dop, &d);
        ok(r == -ESTALE, "delete with a wrong uid precondition: -ESTALE (%s)", d.text);
        dop.uid = json_string_value(json_object_get(json_object_get(got, "metadata"), "uid"));
        r = se_kube_delete(c, cm, "crud", "one", &dop, &d);
        ok(r == 0, "delete with the right uid");
        r = se_kube_get(c, SE_KIND_CONFIGMAP, "crud", "one", &obj, &d);
        ok(r == -ENOENT && strstr(d.text, "NotFound (404)"), "get after delete: -ENOENT (%s)",
           d.text);
        json_decref(got);
        json_decref(after);

        /* the other kinds the daemons write or read */
        json_t *svc = json_pack("{s:s,s:s,s:{s:s},s:{s:{s:s},s:[{s:i}]}}", "apiVersion", "v1",
                                "kind", "Service", "metadata", "name", "web", "spec", "selector",
                                "app", "web", "ports", "port", 80);
        r = se_kube_create(c, se_kube_resource_of(SE_KIND_SERVICE), "crud", svc, NULL, &d);
        r = r ? r : se_kube_get(c, SE_KIND_SERVICE, "crud", "web", &obj, &d);
        ok(r == 0 && se_service_of(obj)->cluster_ip && se_service_of(obj)->n_ports == 1,
           "Service create and get (clusterIP allocated)");
        se_object_unref(obj);
        json_decref(svc);
        json_t *sl = json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:s,s:[{s:[s],s:{s:b}}],s:[{s:s,s:i}]}",
                               "apiVersion", "discovery.k8s.io/v1", "kind", "EndpointSlice",
                               "metadata", "name", "web-1", "labels", "kubernetes.io/service-name",
                               "web", "addressType", "IPv4", "endpoints", "addresses", "10.0.0.1",
                               "conditions", "ready", 1, "ports", "name", "http", "port", 8080);
        r = se_kube_create(c, se_kube_resource_of(SE_KIND_ENDPOINT_SLICE), "crud", sl, NULL, &d);
        r = r ? r : se_kube_get(c, SE_KIND_ENDPOINT_SLICE, "crud", "web-1", &obj, &d);
        ok(r == 0 && se_endpoint_slice_of(obj)->n_endpoints == 1, "EndpointSlice create and get");
        se_object_unref(obj);
        json_decref(sl);
        r = se_kube_delete(c, se_kube_resource_of(SE_KIND_ENDPOINT_SLICE), "crud", "web-1", NULL,
                           &d);
        ok(r == 0, "EndpointSlice delete");
        json_t *ep = json_pack("{s:s,s:s,s:{s:s},s:[{s:[{s:s}],s:[{s:i}]}]}", "apiVersion", "v1",
                               "kind", "Endpoints", "metadata", "name", "web", "subsets",
                               "addresses", "ip", "10.0.0.1", "ports", "port", 8080);
        r = se_kube_create(c, se_kube_resource_of(SE_KIND_ENDPOINTS), "crud", ep, NULL, &d);
        r = r ? r : se_kube_get(c, SE_KIND_ENDPOINTS, "crud", "web", &obj, &d);
        ok(r == 0 && se_endpoints_of(obj)->n_subsets == 1, "Endpoints create and get");
        se_object_unref(obj);
        json_decref(ep);
        json_t *lease =
                json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:i}}", "apiVersion", "coordination.k8s.io/v1",
                          "kind", "Lease", "metadata", "name", "lock", "spec", "holderIdentity",
                          "me", "leaseDurationSeconds", 15);
        r = se_kube_create(c, &se_kube_leases, "crud", lease, NULL, &d);
        json_t *lj = NULL;
        r = r ? r : se_kube_get_json(c, &se_kube_leases, "crud", "lock", &lj, &d);
        ok(r == 0 && strcmp(json_string_value(
                                    json_object_get(json_object_get(lj, "spec"), "holderIdentity")),
                            "me") == 0,
           "Lease create and get");
        json_decref(lj);
        json_decref(lease);
        r = se_kube_get(c, SE_KIND_NODE, NULL, "nope", &obj, &d);
        ok(r == -ENOENT, "cluster-scoped get of a missing Node: -ENOENT");
}

static int count_item(void *data, struct se_object *obj)
{
        (*(size_t *)data)++;
        se_object_unref(obj);
        return 0;
}

static void test_pagination(struct se_kube_client *c)
{
        struct se_diag d;
        ensure_ns(c, "page");
        const struct se_kube_resource *cm = se_kube_resource_of(SE_KIND_CONFIGMAP);
        uint64_t t0 = se_now_mono_ns();
        int bad = 0;
        for (int i = 0; i < 2000; i++) {
                char name[32];
                snprintf(name, sizeof(name), "cm-%04d", i);
                json_t *b = configmap(name, "x");
                if (se_kube_create(c, cm, "page", b, NULL, &d) < 0 && bad++ == 0)
                        note(&d);
                json_decref(b);
        }
        double secs = (double)(se_now_mono_ns() - t0) / 1e9;
        ok(bad == 0, "created 2000 ConfigMaps in %.1f s", secs);
        size_t n = 0;
        char rv[SE_KUBE_RV_MAX];
        struct se_kube_list_opts lo = { .limit = 170 };
        int r = se_kube_list(c, SE_KIND_CONFIGMAP, "page", &lo, count_item, &n, rv, &d);
        ok(r == 0 && n >= 2000 && rv[0], "paginated list (limit 170) gives all %zu objects", n);
        n = 0;
        lo.label_selector = "nothing=here";
        r = se_kube_list(c, SE_KIND_CONFIGMAP, "page", &lo, count_item, &n, NULL, &d);
        ok(r == 0 && n == 0, "label selector is sent (no match)");
}

static void test_rbac(void)
{
        struct se_diag d;
        char path[512];
        snprintf(path, sizeof(path), "%s/kubeconfig-limited", kube_dir);
        struct se_kube_client *c = client_from(path, 0, &d);
        size_t n = 0;
        int r = c ? se_kube_list(c, SE_KIND_SERVICE, NULL, NULL, count_item, &n, NULL, &d) : -1;
        ok(r == -EACCES && strstr(d.text, "Forbidden (403)") &&
                   strstr(d.text, "User \"limited\" cannot list"),
           "limited user: -EACCES with the server's message (%s)", d.text);
        se_kube_client_free(c);
}

/* Lists namespaces with a kubeconfig text written to dir/name. */
static int try_kubeconfig(const char *dir, const char *name, const char *text, struct se_diag *d)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        write_file(path, text, 0600);
        struct se_kube_client *c = client_from(path, 0, d);
        if (!c)
                return -EINVAL;
        struct se_object *obj = NULL;
        int r = se_kube_get(c, SE_KIND_NAMESPACE, NULL, "default", &obj, d);
        se_object_unref(obj);
        se_kube_client_free(c);
        return r;
}

static void test_auth_modes(const char *tmp)
{
        struct se_diag d;
        char text[8192], path[512];
        static const char head[] = "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                                   "contexts: [{name: c, context: {cluster: k, user: u}}]\n";
        /* tokenFile, relative to the kubeconfig */
        snprintf(path, sizeof(path), "%s/token", tmp);
        write_file(path, admin_token, 0600);
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: '%s', certificate-authority: '%s'}}]\n"
                 "users: [{name: u, user: {tokenFile: token}}]\n",
                 head, server, ca_file);
        int r = try_kubeconfig(tmp, "kc-tokenfile", text, &d);
        ok(r == 0, "tokenFile (relative path) authenticates (%s)", r ? d.text : "");
        /* certificate-authority-data inline + wrong token: 401 is -EPERM */
        char *pem = NULL;
        FILE *f = fopen(ca_file, "r");
        size_t plen = 0;
        if (f) {
                pem = calloc(1, 65536);
                plen = fread(pem, 1, 65535, f);
                fclose(f);
        }
        char *b64 = calloc(1, plen * 2 + 8);
        se_base64_encode(pem, plen, b64);
        snprintf(
                text, sizeof(text),
                "%sclusters: [{name: k, cluster: {server: '%s', certificate-authority-data: %s}}]\n"
                "users: [{name: u, user: {token: %s}}]\n",
                head, server, b64, admin_token);
        r = try_kubeconfig(tmp, "kc-cadata", text, &d);
        ok(r == 0, "certificate-authority-data and token authenticate (%s)", r ? d.text : "");
        snprintf(
                text, sizeof(text),
                "%sclusters: [{name: k, cluster: {server: '%s', certificate-authority-data: %s}}]\n"
                "users: [{name: u, user: {token: wrong}}]\n",
                head, server, b64);
        r = try_kubeconfig(tmp, "kc-badtoken", text, &d);
        ok(r == -EPERM && strstr(d.text, "Unauthorized (401)"), "a wrong token: -EPERM (%s)",
           d.text);
        free(b64);
        free(pem);
        /* insecure-skip-tls-verify, and without it no CA fails TLS */
        snprintf(
                text, sizeof(text),
                "%sclusters: [{name: k, cluster: {server: '%s', insecure-skip-tls-verify: true}}]\n"
                "users: [{name: u, user: {token: %s}}]\n",
                head, server, admin_token);
        r = try_kubeconfig(tmp, "kc-insecure", text, &d);
        ok(r == 0, "insecure-skip-tls-verify (%s)", r ? d.text : "");
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: '%s'}}]\n"
                 "users: [{name: u, user: {token: %s}}]\n",
                 head, server, admin_token);
        r = try_kubeconfig(tmp, "kc-noca", text, &d);
        ok(r == -EIO, "no CA: the self-signed server is refused (%s)", d.text);
        /* tls-server-name: the certificate is checked against that name */
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: '%s', certificate-authority: '%s', "
                 "tls-server-name: kubernetes.default.svc}}]\n"
                 "users: [{name: u, user: {token: %s}}]\n",
                 head, server, ca_file, admin_token);
        r = try_kubeconfig(tmp, "kc-sni", text, &d);
        ok(r == 0, "tls-server-name in the certificate is accepted (%s)", r ? d.text : "");
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: '%s', certificate-authority: '%s', "
                 "tls-server-name: not-the-server.example}}]\n"
                 "users: [{name: u, user: {token: %s}}]\n",
                 head, server, ca_file, admin_token);
        r = try_kubeconfig(tmp, "kc-sni-bad", text, &d);
        ok(r == -EIO && strstr(d.text, "not-the-server.example"),
           "a tls-server-name the certificate lacks is refused (%s)", d.text);
        /* exec plugin: a script printing an ExecCredential; env and args pass */
        snprintf(path, sizeof(path), "%s/plugin.sh", tmp);
        snprintf(text, sizeof(text),
                 "#!/bin/sh\n[ \"$1\" = --flag ] && [ \"$SE_X\" = y ] || exit 7\n"
                 "case \"$KUBERNETES_EXEC_INFO\" in *ExecCredential*) ;; *) exit 8;; esac\n"
                 "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":"
                 "\"ExecCredential\",\"status\":{\"token\":\"%s\","
                 "\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}'\n",
                 admin_token);
        write_file(path, text, 0700);
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: '%s', certificate-authority: '%s'}}]\n"
                 "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                 "command: ./plugin.sh, args: [--flag], env: [{name: SE_X, value: \"y\"}]}}}]\n",
                 head, server, ca_file);
        r = try_kubeconfig(tmp, "kc-exec", text, &d);
        ok(r == 0, "exec plugin credential authenticates (%s)", r ? d.text : "");
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: '%s', certificate-authority: '%s'}}]\n"
                 "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                 "command: ./plugin.sh}}}]\n",
                 head, server, ca_file);
        r = try_kubeconfig(tmp, "kc-exec-fail", text, &d);
        ok(r == -EIO && strstr(d.text, "users[0].user.exec: ") && strstr(d.text, "status 7"),
           "failing exec plugin: one-line error naming the field (%s)", d.text);
}

/* Client certificates: the test API server has no client CA, so an
 * `openssl s_server` that requires a certificate signed by the test CA
 * stands in for it. */
static void test_client_certs(const char *tmp)
{
        char key[600], csr[600], crt[600], srl[600], cakey[600];
        snprintf(key, sizeof(key), "%s/client.key", tmp);
        snprintf(csr, sizeof(csr), "%s/client.csr", tmp);
        snprintf(crt, sizeof(crt), "%s/client.crt", tmp);
        snprintf(srl, sizeof(srl), "%s/ca.srl", tmp);
        snprintf(cakey, sizeof(cakey), "%s/pki/ca.key", kube_dir);
        const char *req[] = { "openssl", "req",   "-newkey",    "rsa:2048", "-nodes", "-keyout",
                              key,       "-subj", "/CN=tester", "-out",     csr,      NULL };
        const char *sign[] = { "openssl", "x509",   "-req", "-in",       csr, "-CA",
                               ca_file,   "-CAkey", cakey,  "-CAserial", srl, "-CAcreateserial",
                               "-days",   "1",      "-out", crt,         NULL };
        int r = run_quiet(req) == 0 && run_quiet(sign) == 0 ? 0 : -1;
        ok(r == 0, "client certificate made with openssl");
        char srv_crt[600], srv_key[600], accept[32];
        snprintf(srv_crt, sizeof(srv_crt), "%s/pki/apiserver.crt", kube_dir);
        snprintf(srv_key, sizeof(srv_key), "%s/pki/apiserver.key", kube_dir);
        int port = 20000 + (int)(se_now_mono_ns() / 1000 % 20000);
        snprintf(accept, sizeof(accept), "127.0.0.1:%d", port);
        const char *srv[] = { "openssl",
                              "s_server",
                              "-accept",
                              accept,
                              "-cert",
                              srv_crt,
                              "-key",
                              srv_key,
                              "-CAfile",
                              ca_file,
                              "-Verify",
                              "1",
                              "-verify_return_error",
                              "-www",
                              "-quiet",
                              NULL };
        pid_t pid = 0;
        if (spawn_quiet(srv, &pid) < 0)
                pid = 0;
        char kc[600], text[8192];
        snprintf(kc, sizeof(kc), "%s/kc-cert", tmp);
        static const char head[] = "current-context: c\n"
                                   "contexts: [{name: c, context: {cluster: k, user: u}}]\n";
        struct se_diag d;
        /* files, relative to the kubeconfig */
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: 'https://127.0.0.1:%d', "
                 "certificate-authority: '%s'}}]\n"
                 "users: [{name: u, user: {client-certificate: client.crt, client-key: "
                 "client.key}}]\n",
                 head, port, ca_file);
        write_file(kc, text, 0600);
        struct se_kube_client *c = client_from(kc, 0, &d);
        r = -1;
        for (int i = 0; c && i < 40 && r != 0; i++) {
                r = se_kube_request(c, "GET", "/", NULL, NULL, 0, NULL, NULL, NULL, &d);
                if (r != 0)
                        sleep_ms(100); /* s_server still starting */
        }
        ok(r == 0, "client-certificate/client-key files are presented (%s)", r ? d.text : "");
        se_kube_client_free(c);
        /* inline data */
        char *pems[2] = { NULL, NULL }, *b64[2] = { NULL, NULL };
        const char *files[2] = { crt, key };
        for (int i = 0; i < 2; i++) {
                FILE *f = fopen(files[i], "r");
                pems[i] = calloc(1, 16384);
                size_t n = f ? fread(pems[i], 1, 16383, f) : 0;
                if (f)
                        fclose(f);
                b64[i] = calloc(1, n * 2 + 8);
                se_base64_encode(pems[i], n, b64[i]);
        }
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: 'https://127.0.0.1:%d', "
                 "certificate-authority: '%s'}}]\n"
                 "users: [{name: u, user: {client-certificate-data: %s, client-key-data: %s}}]\n",
                 head, port, ca_file, b64[0], b64[1]);
        write_file(kc, text, 0600);
        c = client_from(kc, 0, &d);
        r = c ? se_kube_request(c, "GET", "/", NULL, NULL, 0, NULL, NULL, NULL, &d) : -1;
        ok(r == 0, "client-certificate-data/client-key-data are presented (%s)", r ? d.text : "");
        se_kube_client_free(c);
        /* from an exec plugin */
        char cred[600], plugin[600];
        snprintf(cred, sizeof(cred), "%s/cred.json", tmp);
        snprintf(plugin, sizeof(plugin), "%s/cert-plugin.sh", tmp);
        json_t *ec =
                json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "client.authentication.k8s.io/v1",
                          "kind", "ExecCredential", "status", "clientCertificateData", pems[0],
                          "clientKeyData", pems[1]);
        json_dump_file(ec, cred, 0);
        json_decref(ec);
        snprintf(text, sizeof(text), "#!/bin/sh\nexec cat '%s'\n", cred);
        write_file(plugin, text, 0700);
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: 'https://127.0.0.1:%d', "
                 "certificate-authority: '%s'}}]\n"
                 "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
                 "command: '%s'}}}]\n",
                 head, port, ca_file, plugin);
        write_file(kc, text, 0600);
        c = client_from(kc, 0, &d);
        r = c ? se_kube_request(c, "GET", "/", NULL, NULL, 0, NULL, NULL, NULL, &d) : -1;
        ok(r == 0, "exec plugin client certificate is presented (%s)", r ? d.text : "");
        se_kube_client_free(c);
        /* and without one the server refuses the handshake */
        snprintf(text, sizeof(text),
                 "%sclusters: [{name: k, cluster: {server: 'https://127.0.0.1:%d', "
                 "certificate-authority: '%s'}}]\nusers: [{name: u, user: {}}]\n",
                 head, port, ca_file);
        write_file(kc, text, 0600);
        c = client_from(kc, 0, &d);
        r = c ? se_kube_request(c, "GET", "/", NULL, NULL, 0, NULL, NULL, NULL, &d) : -1;
        ok(r == -EIO, "no client certificate: the TLS server refuses (%s)", d.text);
        se_kube_client_free(c);
        for (int i = 0; i < 2; i++) {
                free(pems[i]);
                free(b64[i]);
        }
        if (pid > 0) {
                kill(pid, SIGTERM);
                waitpid(pid, NULL, 0);
        }
}

static void test_incluster(const char *tmp)
{
        char root[512], path[600], port[16];
        snprintf(root, sizeof(root), "%s/sa", tmp);
        mkdir(root, 0700);
        snprintf(path, sizeof(path), "%s/token", root);
        write_file(path, "stale-token\n", 0600);
        snprintf(path, sizeof(path), "%s/namespace", root);
        write_file(path, "kube-system\n", 0600);
        snprintf(path, sizeof(path), "%s/ca.crt", root);
        FILE *in = fopen(ca_file, "r"), *out = fopen(path, "w");
        int ch;
        while (in && out && (ch = fgetc(in)) != EOF)
                fputc(ch, out);
        if (in)
                fclose(in);
        if (out)
                fclose(out);
        const char *p = strrchr(server, ':');
        snprintf(port, sizeof(port), "%s", p ? p + 1 : "");
        setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", port, 1);
        struct se_diag d;
        struct se_kube_config *cfg = NULL;
        struct se_kube_client *c = NULL;
        int r = se_kube_config_incluster(root, &cfg, &d);
        ok(r == 0 && strcmp(cfg->namespace, "kube-system") == 0,
           "in-cluster config reads the namespace file");
        if (r == 0)
                r = se_kube_client_new(cfg, NULL, &c, &d);
        struct se_object *obj = NULL;
        r = r ? r : se_kube_get(c, SE_KIND_NAMESPACE, NULL, "default", &obj, &d);
        ok(r == -EPERM, "in-cluster with a stale token: -EPERM after re-reading it once");
        /* the kubelet rotates the token: the client re-reads it after a 401 */
        snprintf(path, sizeof(path), "%s/token", root);
        write_file(path, admin_token, 0600);
        r = c ? se_kube_get(c, SE_KIND_NAMESPACE, NULL, "default", &obj, &d) : -1;
        ok(r == 0, "in-cluster token rotated on disk is picked up (%s)", r ? d.text : "");
        se_object_unref(obj);
        se_kube_client_free(c);
        se_kube_config_free(cfg);
        unsetenv("KUBERNETES_SERVICE_HOST");
        /* load rules fall back to in-cluster when there is no kubeconfig */
        setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
        struct se_kube_config_opts o = { .kubeconfig_env = "",
                                         .home = "/nonexistent",
                                         .incluster_root = root };
        r = se_kube_config_load(&o, &cfg, &d);
        ok(r == 0 && cfg->context == NULL && strstr(cfg->server, "https://127.0.0.1:"),
           "no kubeconfig anywhere: in-cluster config");
        se_kube_config_free(cfg);
        unsetenv("KUBERNETES_SERVICE_HOST");
        unsetenv("KUBERNETES_SERVICE_PORT");
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

/* Waits until the store holds ns/name of kind with data k=value. */
static int wait_cm(struct se_store *s, const char *ns, const char *name, const char *value,
                   unsigned ms)
{
        for (unsigned t = 0; t < ms; t += 50) {
                se_store_rdlock(s);
                const struct se_configmap *cm =
                        se_configmap_of(se_store_get(s, SE_KIND_CONFIGMAP, ns, name));
                const char *v = cm ? se_kvlist_get(&cm->data, "k") : NULL;
                int found = value ? v && strcmp(v, value) == 0 : cm == NULL;
                se_store_unlock(s);
                if (found)
                        return 0;
                sleep_ms(50);
        }
        return -ETIMEDOUT;
}

static int check_item(void *data, struct se_object *obj)
{
        struct se_store *s = data;
        se_store_rdlock(s);
        const struct se_configmap *have = se_configmap_of(
                se_store_get(s, SE_KIND_CONFIGMAP, obj->meta.namespace, obj->meta.name));
        const char *want = se_kvlist_get(&se_configmap_of(obj)->data, "k");
        const char *got = have ? se_kvlist_get(&have->data, "k") : NULL;
        int same = want && got && strcmp(want, got) == 0;
        se_store_unlock(s);
        se_object_unref(obj);
        return same ? 0 : -ESTALE;
}

static int store_matches_server(struct se_kube_client *c, struct se_store *s)
{
        size_t n = 0;
        struct se_diag d;
        /* the informer's decoding: the "nul" object's value as C0 80 */
        struct se_kube_list_opts lo = { .decode_flags = SE_DECODE_NUL_AS_C080 };
        if (se_kube_list(c, SE_KIND_CONFIGMAP, "watch", &lo, count_item, &n, NULL, &d) < 0)
                return 0;
        if (n != se_store_count(s, SE_KIND_CONFIGMAP, "watch"))
                return 0;
        return se_kube_list(c, SE_KIND_CONFIGMAP, "watch", &lo, check_item, s, NULL, &d) == 0;
}

static int on_event_count(void *data, enum se_kube_event_type type, const json_t *obj)
{
        (void)obj;
        if (type != SE_KUBE_BOOKMARK)
                (*(int *)data)++;
        return 0;
}

static void test_watch(struct se_kube_client *c)
{
        struct se_diag d;
        size_t n;
        const struct se_kube_resource *cm = se_kube_resource_of(SE_KIND_CONFIGMAP);
        ensure_ns(c, "watch");
        struct se_store *s = se_store_new();
        json_t *b = configmap("before", "1");
        (void)se_kube_create(c, cm, "watch", b, NULL, &d);
        json_decref(b);
        /* a cached object the server does not have: the list must drop it */
        struct se_object *stale = NULL;
        b = configmap("stale-cached", "x");
        int r = se_decode_object_as(b, SE_KIND_CONFIGMAP, "watch", &stale, NULL);
        json_decref(b);
        r = r ? r : se_store_put(s, stale);
        struct se_kube_informer_opts io = { .ns = "watch" };
        struct se_kube_informer *inf =
                se_kube_informer_new(c, SE_KIND_CONFIGMAP, s, &io, NULL, NULL);
        r = r ? r : se_kube_informer_start(inf);
        r = r ? r : se_kube_informer_wait_synced(inf, 10000);
        ok(r == 0 && wait_cm(s, "watch", "before", "1", 100) == 0, "informer syncs the list");
        ok(wait_cm(s, "watch", "stale-cached", NULL, 100) == 0,
           "the list drops a cached object the server does not have");
        b = configmap("added", "a");
        (void)se_kube_create(c, cm, "watch", b, NULL, &d);
        json_decref(b);
        ok(wait_cm(s, "watch", "added", "a", 5000) == 0, "informer sees an ADDED event");
        (void)se_kube_delete(c, cm, "watch", "before", NULL, &d);
        ok(wait_cm(s, "watch", "before", NULL, 5000) == 0, "informer sees a DELETED event");

        /* \u0000 is valid JSON and the API server stores it in values: the
         * watch event (and every later list) must not wedge the informer */
        b = configmap("nul", "x");
        json_object_set_new(json_object_get(b, "data"), "k", json_stringn("a\0b", 3));
        r = se_kube_create(c, cm, "watch", b, NULL, &d);
        json_decref(b);
        ok(r == 0 && wait_cm(s, "watch", "nul",
                             "a\xC0\x80"
                             "b",
                             5000) == 0,
           "informer takes an object with a NUL in a value (as C0 80)");
        b = configmap("after-nul", "n");
        (void)se_kube_create(c, cm, "watch", b, NULL, &d);
        json_decref(b);
        ok(wait_cm(s, "watch", "after-nul", "n", 5000) == 0, "... and goes on watching");
        n = 0;
        ok(se_kube_list(c, SE_KIND_CONFIGMAP, "watch", NULL, count_item, &n, NULL, &d) < 0 &&
                   strstr(d.text, "NUL"),
           "a plain list names the NUL instead of failing on the JSON (%s)", d.text);

        /* API server restart: the watch resumes from its version */
        int rc = controlplane("restart-apiserver", NULL);
        ok(rc == 0, "controlplane restart-apiserver");
        b = configmap("after-restart", "r");
        r = se_kube_create(c, cm, "watch", b, NULL, &d);
        json_decref(b);
        json_t *mp = json_pack("{s:{s:s}}", "data", "k", "changed");
        struct se_kube_patch_opts po = { SE_KUBE_PATCH_MERGE, NULL, false, NULL };
        r = r ? r : se_kube_patch(c, cm, "watch", "added", &po, mp, NULL, &d);
        json_decref(mp);
        ok(r == 0 && wait_cm(s, "watch", "after-restart", "r", 40000) == 0 &&
                   wait_cm(s, "watch", "added", "changed", 1000) == 0,
           "after the restart the informer gets every change");
        ok(store_matches_server(c, s),
           "the store equals a fresh list after the restart "
           "(lists so far: %u)",
           se_kube_informer_lists(inf));

        /* forced 410: writes elsewhere move the revision, compact, restart */
        char old_rv[SE_KUBE_RV_MAX];
        n = 0;
        struct se_kube_list_opts nul_ok = { .decode_flags = SE_DECODE_NUL_AS_C080 };
        (void)se_kube_list(c, SE_KIND_CONFIGMAP, "watch", &nul_ok, count_item, &n, old_rv, &d);
        for (int i = 0; i < 5; i++) {
                char name[32];
                snprintf(name, sizeof(name), "other-%d", i);
                b = configmap(name, "o");
                (void)se_kube_create(c, cm, "crud", b, NULL, &d);
                json_decref(b);
        }
        rc = controlplane("compact", "--restart-apiserver");
        ok(rc == 0, "controlplane compact --restart-apiserver");
        int events = 0;
        struct se_kube_watch_opts wo = { .timeout_s = 5 };
        uint64_t t0 = se_now_mono_ns();
        r = se_kube_watch(c, cm, "watch", &wo, old_rv, on_event_count, &events, NULL, &d);
        for (int i = 0; i < 20 && r != -ESTALE && se_now_mono_ns() - t0 < 30000000000ull; i++) {
                sleep_ms(500);
                r = se_kube_watch(c, cm, "watch", &wo, old_rv, on_event_count, &events, NULL, &d);
        }
        ok(r == -ESTALE, "watch from a compacted version: -ESTALE (%s)", d.text);
        b = configmap("after-compact", "c");
        (void)se_kube_create(c, cm, "watch", b, NULL, &d);
        json_decref(b);
        ok(wait_cm(s, "watch", "after-compact", "c", 40000) == 0,
           "informer recovers after the compaction");
        ok(se_kube_informer_lists(inf) >= 2, "informer relisted after 410 (lists=%u)",
           se_kube_informer_lists(inf));
        uint64_t t1 = se_now_mono_ns();
        inf = se_kube_informer_free(inf);
        double stop_s = (double)(se_now_mono_ns() - t1) / 1e9;
        ok(stop_s < 2.5, "informer stops from another thread in %.2f s", stop_s);
        se_store_free(s);
}

struct who {
        atomic_int started, stopped;
};

static void on_started(void *data)
{
        atomic_fetch_add(&((struct who *)data)->started, 1);
}

static void on_stopped(void *data)
{
        atomic_fetch_add(&((struct who *)data)->stopped, 1);
}

static struct se_kube_leader *candidate(struct se_kube_client *c, const char *id, struct who *w)
{
        struct se_kube_leader_opts o = { .ns = "crud",
                                         .name = "svcenv-test-leader",
                                         .identity = id,
                                         .lease_ms = 3000,
                                         .renew_deadline_ms = 2000,
                                         .retry_ms = 300,
                                         .on_started = on_started,
                                         .on_stopped = on_stopped,
                                         .data = w };
        struct se_kube_leader *l = NULL;
        struct se_diag d;
        if (se_kube_leader_new(c, &o, &l, &d) < 0 || se_kube_leader_start(l) < 0)
                note(&d);
        return l;
}

static int lease_holder(struct se_kube_client *c, char *buf, size_t size, int *transitions)
{
        json_t *j = NULL;
        struct se_kube_lease_record rec;
        buf[0] = '\0';
        if (se_kube_get_json(c, &se_kube_leases, "crud", "svcenv-test-leader", &j, NULL) < 0 ||
            se_kube_lease_record_decode(j, &rec) < 0) {
                json_decref(j);
                return -1;
        }
        snprintf(buf, size, "%s", rec.holder ? rec.holder : "");
        *transitions = rec.transitions;
        se_kube_lease_record_release(&rec);
        json_decref(j);
        return 0;
}

static void test_leader(struct se_kube_client *c)
{
        struct who wa = { 0 }, wb = { 0 };
        struct se_kube_leader *a = candidate(c, "cand-a", &wa);
        for (int i = 0; i < 100 && !se_kube_leader_is_leader(a); i++)
                sleep_ms(50);
        struct se_kube_leader *b = candidate(c, "cand-b", &wb);
        sleep_ms(1500); /* several retry periods of b */
        char holder[64];
        int tr0 = -1, tr1 = -1;
        lease_holder(c, holder, sizeof(holder), &tr0);
        ok(se_kube_leader_is_leader(a) && !se_kube_leader_is_leader(b) &&
                   strcmp(holder, "cand-a") == 0 && atomic_load(&wa.started) == 1,
           "first candidate leads, second waits (holder %s)", holder);
        uint64_t t0 = se_now_mono_ns();
        a = se_kube_leader_free(a); /* releases the lease */
        ok(atomic_load(&wa.stopped) == 1, "shutdown calls on_stopped");
        while (!se_kube_leader_is_leader(b) && se_now_mono_ns() - t0 < 5000000000ull)
                sleep_ms(20);
        double took = (double)(se_now_mono_ns() - t0) / 1e9;
        lease_holder(c, holder, sizeof(holder), &tr1);
        ok(se_kube_leader_is_leader(b) && strcmp(holder, "cand-b") == 0 && tr1 == tr0 + 1,
           "after release the other takes over in %.2f s (< lease 3 s), transitions %d -> %d", took,
           tr0, tr1);
        ok(took < 2.5, "takeover did not wait for the lease to expire");
        b = se_kube_leader_free(b);
        lease_holder(c, holder, sizeof(holder), &tr1);
        ok(holder[0] == '\0', "released lease has no holder");
}

int main(void)
{
        kube_dir = getenv("KUBE_DIR");
        if (!kube_dir) {
                printf("not ok 1 - KUBE_DIR is not set\n");
                return 1;
        }
        read_env();
        char tmp[] = "/tmp/svcenv-kit.XXXXXX";
        if (!mkdtemp(tmp))
                return 1;
        struct se_diag d;
        char path[512];
        snprintf(path, sizeof(path), "%s/kubeconfig", kube_dir);
        struct se_kube_client *c = client_from(path, -1, &d);
        ok(c != NULL, "client from the admin kubeconfig");
        if (!c) {
                note(&d);
                return 1;
        }
        test_crud(c);
        test_rbac();
        test_auth_modes(tmp);
        test_incluster(tmp);
        test_client_certs(tmp);
        test_pagination(c);
        test_watch(c);
        test_leader(c);
        se_kube_client_free(c);
        char rm0[] = "rm", rm1[] = "-rf";
        char *rm[] = { rm0, rm1, tmp, NULL };
        pid_t pid;
        if (posix_spawnp(&pid, "rm", NULL, NULL, rm, environ) == 0)
                waitpid(pid, NULL, 0);
        printf("1..%d\n", n_test);
        return 0;
}
