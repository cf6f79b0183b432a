/* The admission decision: reviews in, responses out. Every patch is applied
 * to the pod (RFC 6902 `add`, by a small applier here) and the result is
 * checked against what the kubelet would give the original pod. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include <svcenv/admission.h>
#include <svcenv/decode.h>
#include <svcenv/hash.h>
#include <svcenv/macro.h>
#include <svcenv/manifest.h>

static const char cluster[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default}\n"
        "spec: {clusterIP: 10.96.0.1, ports: [{name: https, port: 443}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.10, ports: [{name: pg, port: 5432}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: cache, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.11, ports: [{port: 6379, protocol: UDP}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: web-api, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.12, ports: [{name: http, port: 80}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: hl, namespace: shop}\n"
        "spec: {clusterIP: None, ports: [{port: 80}]}\n"
        /* web's WEB_SERVICE_PORT and web-service's Docker-links WEB_SERVICE_PORT clash */
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: clash}\n"
        "spec: {clusterIP: 10.0.1.1, ports: [{name: http, port: 80}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: web-service, namespace: clash}\n"
        "spec: {clusterIP: 10.0.1.2, ports: [{port: 8080}]}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: shop}\n"
        "data: {DB_SERVICE_HOST: from-configmap}\n";

static struct se_store *store;
static struct se_admission_cache *cache; /* every review also goes through it */

static int setup(void **state)
{
        (void)state;
        store = se_store_new();
        struct se_diag d = { 0 };
        if (se_manifest_load_buffer(store, "cluster.yaml", cluster, strlen(cluster), NULL, NULL,
                                    &d) < 0) {
                fprintf(stderr, "cluster: %s\n", d.text);
                return -1;
        }
        cache = se_admission_cache_new(store, 0);
        return cache ? 0 : -1;
}

static int teardown(void **state)
{
        (void)state;
        cache = se_admission_cache_free(cache);
        store = se_store_free(store);
        return 0;
}

/* The cached path answers byte for byte what the uncached one does, on a
 * miss (entry built) and on a hit. */
static void same_through_cache(struct se_admission_cache *c, const char *body,
                               const struct se_admission_options *opt,
                               const struct se_admission_result *want)
{
        for (int pass = 0; pass < 2; pass++) {
                struct se_admission_result res;
                assert_int_equal(se_admission_review_cached(c, opt, body, strlen(body), &res), 0);
                assert_int_equal(res.http_status, want->http_status);
                assert_int_equal(res.outcome, want->outcome);
                assert_int_equal(res.patch_bytes, want->patch_bytes);
                assert_int_equal(res.n_vars, want->n_vars);
                assert_int_equal(res.len, want->len);
                assert_memory_equal(res.body, want->body, want->len);
                se_admission_result_release(&res);
        }
}

/* A review of a pod CREATE in namespace ns (the pod JSON given). */
static char *review(const char *api_version, const char *ns, const char *op, const char *pod)
{
        char *s = NULL;
        assert_true(asprintf(&s,
                             "{\"apiVersion\":\"%s\",\"kind\":\"AdmissionReview\",\"request\":{"
                             "\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\","
                             "\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\","
                             "\"resource\":\"pods\"},\"namespace\":\"%s\",\"operation\":\"%s\","
                             "\"object\":%s,\"oldObject\":null,\"dryRun\":false}}",
                             api_version, ns, op, pod) > 0);
        return s;
}

struct answer {
        struct se_admission_result res;
        json_t *root; /* the response review */
        json_t *response;
        json_t *patch; /* decoded patch array or NULL */
};

static void ask_opt(const char *body, const struct se_admission_options *opt, struct answer *a)
{
        memset(a, 0, sizeof(*a));
        assert_int_equal(se_admission_review_store(store, opt, body, strlen(body), &a->res), 0);
        same_through_cache(cache, body, opt, &a->res);
        if (a->res.http_status != 200)
                return;
        json_error_t je;
        a->root = json_loadb(a->res.body, a->res.len, 0, &je);
        assert_non_null(a->root);
        a->response = json_object_get(a->root, "response");
        assert_non_null(a->response);
        const char *p64 = json_string_value(json_object_get(a->response, "patch"));
        const char *pt = json_string_value(json_object_get(a->response, "patchType"));
        assert_true((p64 == NULL) == (pt == NULL));
        if (p64) {
                assert_string_equal(pt, "JSONPatch");
                size_t n = strlen(p64), len = 0;
                char *raw = malloc(n / 4 * 3 + 1);
                assert_int_equal(se_base64_decode(p64, n, raw, &len), 0);
                a->patch = json_loadb(raw, len, 0, &je);
                assert_non_null(a->patch);
                assert_true(json_is_array(a->patch));
                assert_int_equal(a->res.patch_bytes, len);
                free(raw);
        }
}

static void ask(const char *body, struct answer *a)
{
        ask_opt(body, NULL, a);
}

static void answer_release(struct answer *a)
{
        json_decref(a->root);
        json_decref(a->patch);
        se_admission_result_release(&a->res);
}

static bool allowed(const struct answer *a)
{
        return json_is_true(json_object_get(a->response, "allowed"));
}

/* Warnings joined by '|'. */
static char *warnings(const struct answer *a)
{
        char *out = strdup("");
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(a->response, "warnings"), i, w) {
                char *n = NULL;
                assert_true(asprintf(&n, "%s%s%s", out, i ? "|" : "", json_string_value(w)) >= 0);
                free(out);
                out = n;
        }
        return out;
}

/* RFC 6901 token decoding: `~1` then `~0`. */
static char *unescape(const char *s, size_t n)
{
        char *out = malloc(n + 1), *o = out;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
                        *o++ = s[i + 1] == '1' ? '/' : '~';
                        i++;
                } else {
                        *o++ = s[i];
                }
        }
        *o = '\0';
        return out;
}

/* Applies RFC 6902 `add` operations (the only kind the webhook emits) the
 * way the API server does: the parent must exist, an array index inserts
 * (index <= size), `-` appends, an object member is set. */
static void apply(json_t *doc, const json_t *patch)
{
        size_t i;
        json_t *op;
        json_array_foreach(patch, i, op) {
                assert_string_equal(json_string_value(json_object_get(op, "op")), "add");
                const char *path = json_string_value(json_object_get(op, "path"));
                json_t *value = json_object_get(op, "value");
                assert_non_null(path);
                assert_non_null(value);
                assert_int_equal(path[0], '/');
                json_t *cur = doc;
                const char *p = path + 1;
                for (;;) {
                        const char *slash = strchr(p, '/');
                        size_t n = slash ? (size_t)(slash - p) : strlen(p);
                        char *tok = unescape(p, n);
                        if (!slash) {
                                if (json_is_array(cur)) {
                                        size_t size = json_array_size(cur);
                                        if (strcmp(tok, "-") == 0) {
                                                json_array_append(cur, value);
                                        } else {
                                                size_t idx = strtoul(tok, NULL, 10);
                                                assert_true(idx <= size);
                                                json_array_insert(cur, idx, value);
                                        }
                                } else {
                                        assert_true(json_is_object(cur));
                                        json_object_set(cur, tok, value);
                                }
                                free(tok);
                                break;
                        }
                        json_t *next = json_is_array(cur) ?
                                               json_array_get(cur, strtoul(tok, NULL, 10)) :
                                               json_object_get(cur, tok);
                        if (!next)
                                fail_msg("path %s: %s is missing", path, tok);
                        free(tok);
                        cur = next;
                        p = slash + 1;
                }
        }
}

/* Sorted NAME=VALUE lines the kubelet gives container c of pod (JSON). */
static char *kubelet_env(const json_t *pod, const char *ns, const char *c)
{
        struct se_object *obj = NULL;
        struct se_decode_error err;
        assert_int_equal(se_decode_object_as(pod, SE_KIND_POD, ns, &obj, &err), 0);
        const struct se_pod *p = se_pod_of(obj);
        const struct se_container *con = NULL;
        for (uint32_t i = 0; i < p->n_containers; i++)
                if (strcmp(p->containers[i].name, c) == 0)
                        con = &p->containers[i];
        for (uint32_t i = 0; i < p->n_init_containers; i++)
                if (strcmp(p->init_containers[i].name, c) == 0)
                        con = &p->init_containers[i];
        assert_non_null(con);
        struct se_envvars_input in = { .store = store };
        struct se_env_list l = SE_ENV_LIST_INIT;
        struct se_diag d = { 0 };
        assert_int_equal(se_envvars_build(&in, p, con, &l, &d), 0);
        char **lines = calloc(l.n + 1, sizeof(*lines));
        size_t total = 1;
        for (size_t i = 0; i < l.n; i++) {
                assert_true(asprintf(&lines[i], "%s=%s\n", l.items[i].name, l.items[i].value) > 0);
                total += strlen(lines[i]);
        }
        for (size_t i = 1; i < l.n; i++) /* insertion sort: short lists */
                for (size_t j = i; j > 0 && strcmp(lines[j - 1], lines[j]) > 0; j--) {
                        char *t = lines[j];
                        lines[j] = lines[j - 1];
                        lines[j - 1] = t;
                }
        char *out = calloc(1, total);
        for (size_t i = 0; i < l.n; i++) {
                strcat(out, lines[i]);
                free(lines[i]);
        }
        free(lines);
        se_env_list_release(&l);
        se_object_unref(obj);
        return out;
}

/* Names of a container's env in order, joined by ','. */
static char *env_names(const json_t *pod, const char *list, size_t idx)
{
        const json_t *env = json_object_get(
                json_array_get(json_object_get(json_object_get(pod, "spec"), list), idx), "env");
        char *out = strdup("");
        size_t i;
        json_t *e;
        json_array_foreach(env, i, e) {
                char *n = NULL;
                assert_true(asprintf(&n, "%s%s%s", out, i ? "," : "",
                                     json_string_value(json_object_get(e, "name"))) >= 0);
                free(out);
                out = n;
        }
        return out;
}

static json_t *parse(const char *s)
{
        json_error_t je;
        json_t *j = json_loads(s, 0, &je);
        if (!j)
                fail_msg("fixture: %s", je.text);
        return j;
}

/* Admits pod in ns, applies the patch, checks every named container's
 * environment is what the kubelet gives the original pod; returns the
 * mutated pod. */
static json_t *admit_and_check(const char *ns, const char *pod_json, const char *const *names,
                               size_t n_names, struct answer *a)
{
        char *body = review("admission.k8s.io/v1", ns, "CREATE", pod_json);
        ask(body, a);
        free(body);
        assert_int_equal(a->res.http_status, 200);
        assert_true(allowed(a));
        assert_string_equal(json_string_value(json_object_get(a->response, "uid")), "u-1");
        json_t *pod = parse(pod_json);
        json_t *orig = json_deep_copy(pod);
        if (a->patch)
                apply(pod, a->patch);
        for (size_t i = 0; i < n_names; i++) {
                char *want = kubelet_env(orig, ns, names[i]);
                char *got = kubelet_env(pod, ns, names[i]);
                assert_string_equal(got, want);
                free(want);
                free(got);
        }
        json_decref(orig);
        return pod;
}

static const char svc_names[] =
        "CACHE_SERVICE_HOST,CACHE_SERVICE_PORT,CACHE_PORT,CACHE_PORT_6379_UDP,"
        "CACHE_PORT_6379_UDP_PROTO,CACHE_PORT_6379_UDP_PORT,CACHE_PORT_6379_UDP_ADDR,"
        "DB_SERVICE_HOST,DB_SERVICE_PORT,DB_SERVICE_PORT_PG,DB_PORT,DB_PORT_5432_TCP,"
        "DB_PORT_5432_TCP_PROTO,DB_PORT_5432_TCP_PORT,DB_PORT_5432_TCP_ADDR,"
        "KUBERNETES_SERVICE_HOST,KUBERNETES_SERVICE_PORT,KUBERNETES_SERVICE_PORT_HTTPS,"
        "KUBERNETES_PORT,KUBERNETES_PORT_443_TCP,KUBERNETES_PORT_443_TCP_PROTO,"
        "KUBERNETES_PORT_443_TCP_PORT,KUBERNETES_PORT_443_TCP_ADDR,"
        "WEB_API_SERVICE_HOST,WEB_API_SERVICE_PORT,WEB_API_SERVICE_PORT_HTTP,WEB_API_PORT,"
        "WEB_API_PORT_80_TCP,WEB_API_PORT_80_TCP_PROTO,WEB_API_PORT_80_TCP_PORT,"
        "WEB_API_PORT_80_TCP_ADDR";

static void test_admission__no_env_gets_whole_array(void **state)
{
        (void)state;
        const char *names[] = { "app" };
        struct answer a;
        json_t *pod =
                admit_and_check("shop",
                                "{\"metadata\":{\"generateName\":\"web-\"},"
                                "\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\"}]}}",
                                names, 1, &a);
        /* one op for the env, one for the annotations map */
        assert_int_equal(json_array_size(a.patch), 2);
        json_t *op = json_array_get(a.patch, 0);
        assert_string_equal(json_string_value(json_object_get(op, "path")),
                            "/spec/containers/0/env");
        op = json_array_get(a.patch, 1);
        assert_string_equal(json_string_value(json_object_get(op, "path")),
                            "/metadata/annotations");
        assert_string_equal(json_string_value(json_object_get(json_object_get(op, "value"),
                                                              "svcenv.io/injected")),
                            "true");
        char *got = env_names(pod, "containers", 0);
        assert_string_equal(got, svc_names);
        free(got);
        assert_int_equal(a.res.outcome, SE_ADMIT_PATCHED);
        assert_int_equal(a.res.n_vars, 31);
        assert_null(json_object_get(a.response, "warnings"));
        json_decref(pod);
        answer_release(&a);
}

static void test_admission__inserted_before_own_env(void **state)
{
        (void)state;
        const char *names[] = { "app" };
        struct answer a;
        /* $(DB_SERVICE_HOST) must resolve from the injected entries; the
         * pod's own DB_SERVICE_PORT wins and is not duplicated */
        json_t *pod = admit_and_check(
                "shop",
                "{\"metadata\":{\"generateName\":\"web-\",\"annotations\":{\"a\":\"b\"}},"
                "\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"env\":["
                "{\"name\":\"DSN\",\"value\":\"pg://$(DB_SERVICE_HOST):$(DB_SERVICE_PORT)\"},"
                "{\"name\":\"DB_SERVICE_PORT\",\"value\":\"6432\"},"
                "{\"name\":\"CACHE_PORT\",\"value\":\"udp://10.0.0.11:6379\"}]}]}}",
                names, 1, &a);
        json_t *op = json_array_get(a.patch, 0);
        assert_string_equal(json_string_value(json_object_get(op, "path")),
                            "/spec/containers/0/env/0");
        op = json_array_get(a.patch, 1);
        assert_string_equal(json_string_value(json_object_get(op, "path")),
                            "/spec/containers/0/env/1");
        char *got = env_names(pod, "containers", 0);
        assert_string_equal(
                got, "CACHE_SERVICE_HOST,CACHE_SERVICE_PORT,CACHE_PORT_6379_UDP,"
                     "CACHE_PORT_6379_UDP_PROTO,CACHE_PORT_6379_UDP_PORT,CACHE_PORT_6379_UDP_ADDR,"
                     "DB_SERVICE_HOST,DB_SERVICE_PORT_PG,DB_PORT,DB_PORT_5432_TCP,"
                     "DB_PORT_5432_TCP_PROTO,DB_PORT_5432_TCP_PORT,DB_PORT_5432_TCP_ADDR,"
                     "KUBERNETES_SERVICE_HOST,KUBERNETES_SERVICE_PORT,"
                     "KUBERNETES_SERVICE_PORT_HTTPS,KUBERNETES_PORT,KUBERNETES_PORT_443_TCP,"
                     "KUBERNETES_PORT_443_TCP_PROTO,KUBERNETES_PORT_443_TCP_PORT,"
                     "KUBERNETES_PORT_443_TCP_ADDR,WEB_API_SERVICE_HOST,WEB_API_SERVICE_PORT,"
                     "WEB_API_SERVICE_PORT_HTTP,WEB_API_PORT,WEB_API_PORT_80_TCP,"
                     "WEB_API_PORT_80_TCP_PROTO,WEB_API_PORT_80_TCP_PORT,WEB_API_PORT_80_TCP_ADDR,"
                     "DSN,DB_SERVICE_PORT,CACHE_PORT");
        free(got);
        char *env = kubelet_env(pod, "shop", "app");
        /* DB_SERVICE_PORT is defined after DSN: the service's value expands */
        assert_non_null(strstr(env, "DSN=pg://10.0.0.10:5432\n"));
        free(env);
        /* one clash with a different value (DB_SERVICE_PORT), the equal one is silent */
        char *w = warnings(&a);
        assert_string_equal(w, "svcenv: container app: 1 service variables already set by the "
                               "pod were left unchanged");
        free(w);
        /* the annotations map exists: one escaped key */
        op = json_array_get(a.patch, json_array_size(a.patch) - 1);
        assert_string_equal(json_string_value(json_object_get(op, "path")),
                            "/metadata/annotations/svcenv.io~1injected");
        json_decref(pod);
        answer_release(&a);
}

static const char three_containers[] =
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{"
        "\"initContainers\":[{\"name\":\"init\",\"image\":\"x\"},"
        "{\"name\":\"sidecar\",\"image\":\"x\",\"restartPolicy\":\"Always\",\"env\":[]}],"
        "\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"env\":[{\"name\":\"A\","
        "\"value\":\"$(WEB_API_PORT)\"}]},{\"name\":\"two\",\"image\":\"x\",\"env\":null}],"
        "\"ephemeralContainers\":[{\"name\":\"debug\",\"image\":\"x\"}]}}";

static void test_admission__init_containers_not_ephemeral(void **state)
{
        (void)state;
        const char *names[] = { "init", "sidecar", "app", "two" };
        struct answer a;
        json_t *pod = admit_and_check("shop", three_containers, names, 4, &a);
        size_t i;
        json_t *op;
        json_array_foreach(a.patch, i, op) {
                const char *path = json_string_value(json_object_get(op, "path"));
                assert_null(strstr(path, "ephemeral"));
        }
        assert_int_equal(a.res.n_vars, 4 * 31);
        for (int k = 0; k < 2; k++) {
                char *got = env_names(pod, "initContainers", (size_t)k);
                assert_string_equal(got, svc_names);
                free(got);
        }
        char *got = env_names(pod, "containers", 1);
        assert_string_equal(got, svc_names);
        free(got);
        assert_null(json_object_get(
                json_array_get(json_object_get(json_object_get(pod, "spec"), "ephemeralContainers"),
                               0),
                "env"));
        json_decref(pod);
        answer_release(&a);
}

static void test_admission__reinvocation_adds_nothing_then_serves_new_container(void **state)
{
        (void)state;
        const char *names[] = { "init", "sidecar", "app", "two" };
        struct answer a;
        json_t *pod = admit_and_check("shop", three_containers, names, 4, &a);
        answer_release(&a);

        char *pod_json = json_dumps(pod, JSON_COMPACT);
        char *body = review("admission.k8s.io/v1", "shop", "CREATE", pod_json);
        ask(body, &a);
        assert_true(allowed(&a));
        assert_null(a.patch);
        assert_int_equal(a.res.outcome, SE_ADMIT_UNCHANGED);
        assert_null(json_object_get(a.response, "warnings"));
        answer_release(&a);
        free(body);
        free(pod_json);

        /* another webhook adds a container, then we are called again */
        json_array_append_new(json_object_get(json_object_get(pod, "spec"), "containers"),
                              json_pack("{s:s, s:s}", "name", "late", "image", "y"));
        pod_json = json_dumps(pod, JSON_COMPACT);
        body = review("admission.k8s.io/v1", "shop", "CREATE", pod_json);
        ask(body, &a);
        assert_int_equal(json_array_size(a.patch), 1);
        assert_string_equal(json_string_value(json_object_get(json_array_get(a.patch, 0), "path")),
                            "/spec/containers/2/env");
        assert_int_equal(a.res.n_vars, 31);
        answer_release(&a);
        free(body);
        free(pod_json);
        json_decref(pod);
}

static void test_admission__service_links_off(void **state)
{
        (void)state;
        const char *names[] = { "app" };
        struct answer a;
        json_t *pod = admit_and_check(
                "shop",
                "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"enableServiceLinks\":false,"
                "\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"env\":[{\"name\":\"X\","
                "\"value\":\"$(DB_SERVICE_HOST)\"}]}]}}",
                names, 1, &a);
        char *got = env_names(pod, "containers", 0);
        assert_string_equal(got, "KUBERNETES_SERVICE_HOST,KUBERNETES_SERVICE_PORT,"
                                 "KUBERNETES_SERVICE_PORT_HTTPS,KUBERNETES_PORT,"
                                 "KUBERNETES_PORT_443_TCP,KUBERNETES_PORT_443_TCP_PROTO,"
                                 "KUBERNETES_PORT_443_TCP_PORT,KUBERNETES_PORT_443_TCP_ADDR,X");
        free(got);
        char *env = kubelet_env(pod, "shop", "app");
        assert_non_null(strstr(env, "X=$(DB_SERVICE_HOST)\n"));
        free(env);
        json_decref(pod);
        answer_release(&a);
}

static void test_admission__opt_out_and_mirror_pods(void **state)
{
        (void)state;
        const char *pods[] = {
                "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"svcenv.io/inject\":\"false\"}},"
                "\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\"}]}}",
                "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"kubernetes.io/config.mirror\":"
                "\"abc\"}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\"}]}}",
        };
        for (size_t i = 0; i < 2; i++) {
                char *body = review("admission.k8s.io/v1", "shop", "CREATE", pods[i]);
                struct answer a;
                ask(body, &a);
                assert_true(allowed(&a));
                assert_null(a.patch);
                assert_int_equal(a.res.outcome, SE_ADMIT_SKIPPED);
                answer_release(&a);
                free(body);
        }
        /* any other value injects */
        char *body = review("admission.k8s.io/v1", "shop", "CREATE",
                            "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"svcenv.io/inject\":"
                            "\"true\"}},\"spec\":{\"containers\":[{\"name\":\"app\"}]}}");
        struct answer a;
        ask(body, &a);
        assert_non_null(a.patch);
        answer_release(&a);
        free(body);
}

static void test_admission__selected_services(void **state)
{
        (void)state;
        struct answer a;
        const char *names[] = { "app" };
        json_t *pod = admit_and_check(
                "shop",
                "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"svcenv.io/services\":"
                "\" db ,nope,,kubernetes,db\"}},\"spec\":{\"containers\":[{\"name\":\"app\"}]}}",
                NULL, 0, &a);
        (void)names;
        char *got = env_names(pod, "containers", 0);
        assert_string_equal(got, "DB_SERVICE_HOST,DB_SERVICE_PORT,DB_SERVICE_PORT_PG,DB_PORT,"
                                 "DB_PORT_5432_TCP,DB_PORT_5432_TCP_PROTO,DB_PORT_5432_TCP_PORT,"
                                 "DB_PORT_5432_TCP_ADDR,KUBERNETES_SERVICE_HOST,"
                                 "KUBERNETES_SERVICE_PORT,KUBERNETES_SERVICE_PORT_HTTPS,"
                                 "KUBERNETES_PORT,KUBERNETES_PORT_443_TCP,"
                                 "KUBERNETES_PORT_443_TCP_PROTO,KUBERNETES_PORT_443_TCP_PORT,"
                                 "KUBERNETES_PORT_443_TCP_ADDR");
        free(got);
        json_decref(pod);
        answer_release(&a);

        /* only an unknown name: nothing at all */
        char *body = review("admission.k8s.io/v1", "shop", "CREATE",
                            "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"svcenv.io/services\":"
                            "\"nope\"}},\"spec\":{\"containers\":[{\"name\":\"app\"}]}}");
        ask(body, &a);
        assert_null(a.patch);
        assert_int_equal(a.res.outcome, SE_ADMIT_UNCHANGED);
        answer_release(&a);
        free(body);
}

/* svcenv.io/services naming only one side of a clash: a name the other
 * (unselected) Service wins is not injected, so the container sees the
 * winner's value from the kubelet, as without the webhook. */
static void test_admission__selected_services_clash(void **state)
{
        (void)state;
        const char *names[] = { "app" };
        const char *picks[] = { "web", "web-service" };
        const char *own[] = { "WEB_SERVICE_HOST", "WEB_SERVICE_SERVICE_HOST" };
        for (size_t i = 0; i < 2; i++) {
                char *pod_json = NULL;
                assert_true(asprintf(&pod_json,
                                     "{\"metadata\":{\"name\":\"p\",\"annotations\":"
                                     "{\"svcenv.io/services\":\"%s\"}},\"spec\":{"
                                     "\"containers\":[{\"name\":\"app\"}]}}",
                                     picks[i]) > 0);
                struct answer a;
                json_t *pod = admit_and_check("clash", pod_json, names, 1, &a);
                char *got = env_names(pod, "containers", 0);
                /* the selected Service's own names are there, not the other's */
                assert_non_null(strstr(got, own[i]));
                assert_null(strstr(got, own[1 - i]));
                free(got);
                json_decref(pod);
                answer_release(&a);
                free(pod_json);
        }
}

/* \u0000 is valid JSON and the API server admits it in env and annotation
 * values: the pod is served like any other, and a value that differs from
 * the service's only after the NUL is still a clash. */
static void test_admission__nul_in_values(void **state)
{
        (void)state;
        const char pod[] =
                "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"note\":\"a\\u0000b\"}},"
                "\"spec\":{\"containers\":[{\"name\":\"app\",\"env\":["
                "{\"name\":\"DB_SERVICE_HOST\",\"value\":\"10.0.0.10\\u0000x\"},"
                "{\"name\":\"OTHER\",\"value\":\"\\u0000\"}]}]}}";
        char *body = review("admission.k8s.io/v1", "shop", "CREATE", pod);
        struct answer a;
        ask(body, &a);
        assert_int_equal(a.res.http_status, 200);
        assert_true(allowed(&a));
        assert_int_equal(a.res.outcome, SE_ADMIT_PATCHED);
        /* every variable but the one the pod sets */
        assert_int_equal(a.res.n_vars, 30);
        char *w = warnings(&a);
        assert_string_equal(w, "svcenv: container app: 1 service variables already set by the "
                               "pod were left unchanged");
        free(w);
        answer_release(&a);
        free(body);
}

static void test_admission__size_guard(void **state)
{
        (void)state;
        const char pod[] = "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":["
                           "{\"name\":\"app\",\"env\":[{\"name\":\"BIG\",\"value\":"
                           "\"0123456789012345678901234567890123456789\"}]},"
                           "{\"name\":\"small\"}]}}";
        char *body = review("admission.k8s.io/v1", "shop", "CREATE", pod);
        /* 31 variables take 1,223 bytes (NAME=VALUE, NUL, pointer); BIG adds 53 */
        struct se_admission_options opt = { .max_env_bytes = 1250 };
        struct answer a;
        ask_opt(body, &opt, &a);
        assert_true(allowed(&a));
        /* app passes the limit with its own variable, small does not */
        assert_int_equal(json_array_size(a.patch), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(a.patch, 0), "path")),
                            "/spec/containers/1/env");
        char *w = warnings(&a);
        assert_string_equal(w, "svcenv: container app: env of 1276 bytes (31 service variables) "
                               "passes the 1250-byte limit; none injected");
        free(w);
        answer_release(&a);

        opt.max_env_bytes = 100;
        ask_opt(body, &opt, &a);
        assert_null(a.patch);
        assert_int_equal(a.res.outcome, SE_ADMIT_GUARDED);
        w = warnings(&a);
        assert_non_null(strstr(w, "container small: env of 1223 bytes (31 service variables)"));
        free(w);
        answer_release(&a);
        free(body);
}

static void test_admission__env_from(void **state)
{
        (void)state;
        const char *names[] = { "app" };
        /* a known ConfigMap's keys are the pod's: not overridden */
        struct answer a;
        json_t *pod = admit_and_check("shop",
                                      "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":"
                                      "[{\"name\":\"app\",\"envFrom\":[{\"configMapRef\":"
                                      "{\"name\":\"cfg\"}}]}]}}",
                                      names, 1, &a);
        char *got = env_names(pod, "containers", 0);
        assert_null(strstr(got, "DB_SERVICE_HOST"));
        assert_non_null(strstr(got, "DB_SERVICE_PORT"));
        free(got);
        json_decref(pod);
        answer_release(&a);

        /* An unknown source may hold any name, which under the kubelet beats
         * a service variable and would lose to an injected one: that
         * container gets nothing (the kubelet still gives it the services'
         * variables, under its own), the other one is served. */
        const char *both[] = { "app", "side" };
        pod = admit_and_check(
                "shop",
                "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":["
                "{\"name\":\"app\",\"envFrom\":[{\"configMapRef\":{\"name\":"
                "\"cfg\"}},{\"secretRef\":{\"name\":\"unknown\",\"optional\":true}}]},"
                "{\"name\":\"side\"}]}}",
                both, 2, &a);
        assert_null(json_object_get(
                json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0),
                "env"));
        got = env_names(pod, "containers", 1);
        assert_string_equal(got, svc_names);
        free(got);
        char *w = warnings(&a);
        assert_string_equal(w, "svcenv: container app: envFrom secret unknown is not known to the "
                               "webhook; the container is left to the kubelet");
        free(w);
        json_decref(pod);
        answer_release(&a);
}

static void test_admission__warnings_capped(void **state)
{
        (void)state;
        struct se_strbuf pod;
        se_strbuf_init(&pod, 0);
        se_strbuf_puts(&pod, "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[");
        for (int i = 0; i < 20; i++)
                se_strbuf_printf(&pod,
                                 "%s{\"name\":\"c%d\",\"envFrom\":[{\"secretRef\":{\"name\":"
                                 "\"s\"}}]}",
                                 i ? "," : "", i);
        se_strbuf_puts(&pod, "]}}");
        char *body = review("admission.k8s.io/v1", "shop", "CREATE", pod.buf);
        struct answer a;
        ask(body, &a);
        json_t *w = json_object_get(a.response, "warnings");
        assert_int_equal(json_array_size(w), SE_ADMISSION_MAX_WARNINGS);
        assert_string_equal(json_string_value(json_array_get(w, SE_ADMISSION_MAX_WARNINGS - 1)),
                            "svcenv: 5 more warnings");
        assert_int_equal(a.res.n_vars, 0); /* unknown envFrom: each container left alone */
        answer_release(&a);
        free(body);
        se_strbuf_release(&pod);
}

static void test_admission__not_a_pod_create(void **state)
{
        (void)state;
        const char pod[] = "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":"
                           "\"app\"}]}}";
        char *body = review("admission.k8s.io/v1", "shop", "UPDATE", pod);
        struct answer a;
        ask(body, &a);
        assert_true(allowed(&a));
        assert_null(a.patch);
        answer_release(&a);
        free(body);

        /* a subresource and another kind are let through untouched */
        const char *variants[] = {
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
                "{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},"
                "\"resource\":{\"resource\":\"pods\"},\"subResource\":\"ephemeralcontainers\","
                "\"namespace\":\"shop\",\"operation\":\"CREATE\",\"object\":{}}}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
                "{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
                "\"Service\"},\"resource\":{\"resource\":\"services\"},\"namespace\":\"shop\","
                "\"operation\":\"CREATE\",\"object\":{}}}",
        };
        for (size_t i = 0; i < 2; i++) {
                ask(variants[i], &a);
                assert_true(allowed(&a));
                assert_null(a.patch);
                assert_int_equal(a.res.outcome, SE_ADMIT_UNCHANGED);
                answer_release(&a);
        }

        /* v1beta1 is answered in v1beta1 */
        body = review("admission.k8s.io/v1beta1", "shop", "CREATE", pod);
        ask(body, &a);
        assert_string_equal(json_string_value(json_object_get(a.root, "apiVersion")),
                            "admission.k8s.io/v1beta1");
        assert_non_null(a.patch);
        answer_release(&a);
        free(body);
}

static void test_admission__dry_run_and_namespace(void **state)
{
        (void)state;
        const char pod[] = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\"},\"spec\":{"
                           "\"containers\":[{\"name\":\"app\"}]}}";
        char *body = review("admission.k8s.io/v1", "shop", "CREATE", pod);
        struct answer a, b;
        ask(body, &a);
        char *dry = strdup(body);
        char *p = strstr(dry, "\"dryRun\":false");
        assert_non_null(p);
        memcpy(p, "\"dryRun\":true ", 14);
        ask(dry, &b);
        assert_string_equal(a.res.body, b.res.body);
        /* request.namespace decides (shop has DB_*) */
        assert_int_equal(a.res.n_vars, 31);
        answer_release(&a);
        answer_release(&b);
        free(body);
        free(dry);
}

static void test_admission__malformed(void **state)
{
        (void)state;
        const char *bad[] = {
                "",
                "not json",
                "[1,2]",
                "{\"apiVersion\":\"admission.k8s.io/v2\",\"kind\":\"AdmissionReview\","
                "\"request\":{\"uid\":\"x\"}}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"Pod\",\"request\":{\"uid\":"
                "\"x\"}}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                "\"request\":{\"operation\":\"CREATE\"}}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
                "{\"uid\":\"u\",\"kind\":{\"kind\":\"Pod\"},\"operation\":\"CREATE\","
                "\"namespace\":\"shop\"}}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
                "{\"uid\":\"u\",\"kind\":{\"kind\":\"Pod\"},\"operation\":\"CREATE\","
                "\"object\":{\"spec\":{}}}}",
        };
        const char *msgs[] = {
                "request body is not JSON",
                "request body is not JSON",
                "request body is not a JSON object",
                "apiVersion \"admission.k8s.io/v2\" is not admission.k8s.io/v1 or v1beta1",
                "kind is not AdmissionReview",
                "request: missing or not an object",
                "request.uid: missing",
                "request.object: missing or not an object",
                "request.namespace: missing",
        };
        for (size_t i = 0; i < SE_ARRAY_SIZE(bad); i++) {
                struct se_admission_result res;
                assert_int_equal(
                        se_admission_review_store(store, NULL, bad[i], strlen(bad[i]), &res), 0);
                assert_int_equal(res.http_status, 400);
                assert_int_equal(res.outcome, SE_ADMIT_INVALID);
                if (strncmp(res.body, msgs[i], strlen(msgs[i])) != 0)
                        fail_msg("case %zu: got \"%s\", want \"%s\"", i, res.body, msgs[i]);
                se_admission_result_release(&res);
        }
        /* over the body cap: refused before parsing */
        size_t n = SE_ADMISSION_MAX_BODY + 1;
        char *big = malloc(n);
        memset(big, ' ', n);
        struct se_admission_result res;
        assert_int_equal(se_admission_review_store(store, NULL, big, n, &res), 0);
        assert_int_equal(res.http_status, 400);
        assert_non_null(strstr(res.body, "limit"));
        se_admission_result_release(&res);
        free(big);
}

static void test_admission__failure_mode(void **state)
{
        (void)state;
        /* containers that are not an array: the pod does not decode */
        char *body = review("admission.k8s.io/v1", "shop", "CREATE",
                            "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":5}}");
        struct answer a;
        ask(body, &a);
        assert_true(allowed(&a));
        assert_null(a.patch);
        assert_int_equal(a.res.outcome, SE_ADMIT_ERROR);
        char *w = warnings(&a);
        assert_string_equal(w, "svcenv: service variables not injected: pod does not decode: "
                               "spec.containers: expected a list, got an integer");
        free(w);
        answer_release(&a);

        struct se_admission_options deny = { .failure_deny = true };
        ask_opt(body, &deny, &a);
        assert_false(allowed(&a));
        json_t *status = json_object_get(a.response, "status");
        assert_int_equal(json_integer_value(json_object_get(status, "code")), 500);
        assert_non_null(strstr(json_string_value(json_object_get(status, "message")),
                               "pod does not decode"));
        assert_int_equal(a.res.outcome, SE_ADMIT_ERROR);
        answer_release(&a);
        free(body);
}

static const char plain_pod[] =
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\"},"
        "{\"name\":\"b\",\"env\":[{\"name\":\"X\",\"value\":\"1\"}]}]}}";
/* containers[0] with env of its own: one op per variable */
static const char env_pod[] =
        "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"a\":\"b\"}},\"spec\":{"
        "\"initContainers\":[{\"name\":\"i\"}],\"containers\":[{\"name\":\"a\",\"env\":"
        "[{\"name\":\"X\",\"value\":\"1\"}]},{\"name\":\"b\"}]}}";

/* Puts the Services of yaml into s (adds or replaces, as an informer). */
static void load(struct se_store *s, const char *yaml)
{
        struct se_diag d = { 0 };
        struct se_store *tmp = se_store_new();
        assert_int_equal(se_manifest_load_buffer(tmp, "t.yaml", yaml, strlen(yaml), NULL, NULL, &d),
                         0);
        const struct se_object **v = NULL;
        long n = se_store_list(tmp, SE_KIND_SERVICE, NULL, &v);
        for (long i = 0; i < n; i++)
                assert_int_equal(se_store_put(s, se_object_ref(SE_UNCONST(struct se_object, v[i]))),
                                 0);
        free(v);
        se_store_free(tmp);
}

/* Reviews ns through the cache and without it; returns the (identical)
 * response body. */
static char *both_pod(struct se_store *s, struct se_admission_cache *c, const char *ns,
                      const char *pod)
{
        char *body = review("admission.k8s.io/v1", ns, "CREATE", pod);
        struct se_admission_result want;
        assert_int_equal(se_admission_review_store(s, NULL, body, strlen(body), &want), 0);
        same_through_cache(c, body, NULL, &want);
        free(body);
        char *out = want.body;
        want.body = NULL;
        se_admission_result_release(&want);
        return out;
}

static char *both(struct se_store *s, struct se_admission_cache *c, const char *ns)
{
        free(both_pod(s, c, ns, env_pod));
        return both_pod(s, c, ns, plain_pod);
}

static void test_admission__cache_follows_service_changes(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        load(s, cluster);
        struct se_admission_cache *c = se_admission_cache_new(s, 0);
        assert_non_null(c);
        char *shop0 = both(s, c, "shop"), *other0 = both(s, c, "other");
        struct se_admission_cache_stats st;
        se_admission_cache_stats(c, &st);
        assert_int_equal(st.entries, 2);
        assert_true(st.hits >= 2);

        /* a new Service in shop: shop's answer changes, other's entry stays */
        load(s, "apiVersion: v1\nkind: Service\nmetadata: {name: queue, namespace: shop}\n"
                "spec: {clusterIP: 10.0.0.20, ports: [{port: 5672}]}\n");
        se_admission_cache_stats(c, &st);
        assert_int_equal(st.entries, 1);
        char *shop1 = both(s, c, "shop");
        assert_string_not_equal(shop1, shop0);
        assert_non_null(strstr(shop1, "\"patch\""));
        /* an update (new clusterIP) and a delete are seen too */
        load(s, "apiVersion: v1\nkind: Service\nmetadata: {name: queue, namespace: shop}\n"
                "spec: {clusterIP: 10.0.0.21, ports: [{port: 5672}]}\n");
        char *shop2 = both(s, c, "shop");
        assert_string_not_equal(shop2, shop1);
        assert_int_equal(se_store_delete(s, SE_KIND_SERVICE, "shop", "queue"), 0);
        char *shop3 = both(s, c, "shop");
        assert_string_equal(shop3, shop0);

        /* the master service is in every namespace's variables */
        load(s, "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default}\n"
                "spec: {clusterIP: 10.96.0.2, ports: [{name: https, port: 443}]}\n");
        se_admission_cache_stats(c, &st);
        assert_int_equal(st.entries, 0);
        char *other1 = both(s, c, "other");
        assert_string_not_equal(other1, other0);
        assert_non_null(strstr(other1, "\"patch\""));
        se_admission_cache_stats(c, &st);
        assert_true(st.invalidations >= 4);

        free(shop0);
        free(shop1);
        free(shop2);
        free(shop3);
        free(other0);
        free(other1);
        se_admission_cache_free(c);
        /* freed before the store: later changes call nothing */
        load(s, "apiVersion: v1\nkind: Service\nmetadata: {name: late, namespace: shop}\n"
                "spec: {clusterIP: 10.0.0.30, ports: [{port: 1}]}\n");
        se_store_free(s);
}

static void test_admission__cache_cap(void **state)
{
        (void)state;
        struct se_store *s = se_store_new();
        load(s, cluster);
        /* too small for any entry: answers the same, keeps nothing */
        struct se_admission_cache *c = se_admission_cache_new(s, 64);
        assert_non_null(c);
        free(both(s, c, "shop"));
        struct se_admission_cache_stats st;
        se_admission_cache_stats(c, &st);
        assert_int_equal(st.entries, 0);
        assert_int_equal(st.bytes, 0);
        se_admission_cache_free(c);
        /* room for about one namespace: the least recently used goes */
        c = se_admission_cache_new(s, 0);
        free(both(s, c, "shop"));
        se_admission_cache_stats(c, &st);
        size_t one = st.bytes;
        se_admission_cache_free(c);
        c = se_admission_cache_new(s, one + one / 2);
        free(both(s, c, "shop"));
        free(both(s, c, "a"));
        free(both(s, c, "b"));
        se_admission_cache_stats(c, &st);
        assert_true(st.bytes <= one + one / 2);
        assert_true(st.entries >= 1);
        se_admission_cache_free(c);
        se_store_free(s);
}

/* Reviewers in several threads while Services change: every answer is one
 * the uncached path gives for some state of the store (the variable count
 * is that of the namespace with or without the extra Service). */
struct racer {
        struct se_store *s;
        struct se_admission_cache *c;
        int bad;
};

static void *reviewer(void *arg)
{
        struct racer *r = arg;
        char *body = review("admission.k8s.io/v1", "shop", "CREATE", plain_pod);
        for (int i = 0; i < 300; i++) {
                struct se_admission_result res;
                if (se_admission_review_cached(r->c, NULL, body, strlen(body), &res) != 0 ||
                    res.outcome != SE_ADMIT_PATCHED || (res.n_vars != 62 && res.n_vars != 76))
                        r->bad++;
                se_admission_result_release(&res);
        }
        free(body);
        return NULL;
}

static void test_admission__cache_threads(void **state)
{
        (void)state;
        struct racer r = { .s = se_store_new() };
        load(r.s, cluster);
        r.c = se_admission_cache_new(r.s, 0);
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
                assert_int_equal(pthread_create(&t[i], NULL, reviewer, &r), 0);
        for (int i = 0; i < 50; i++) {
                load(r.s, "apiVersion: v1\nkind: Service\nmetadata: {name: queue, namespace: "
                          "shop}\nspec: {clusterIP: 10.0.0.20, ports: [{port: 5672}]}\n");
                assert_int_equal(se_store_delete(r.s, SE_KIND_SERVICE, "shop", "queue"), 0);
        }
        for (int i = 0; i < 3; i++)
                pthread_join(t[i], NULL);
        assert_int_equal(r.bad, 0);
        /* settled: the cache agrees with the store again */
        free(both(r.s, r.c, "shop"));
        se_admission_cache_free(r.c);
        se_store_free(r.s);
}

static void test_admission__json_pointer_escape(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_json_pointer_escape(&sb, "svcenv.io/a~b/~1"), 0);
        assert_string_equal(sb.buf, "svcenv.io~1a~0b~1~01");
        char *back = unescape(sb.buf, sb.len);
        assert_string_equal(back, "svcenv.io/a~b/~1");
        free(back);
        se_strbuf_release(&sb);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_admission__no_env_gets_whole_array),
                cmocka_unit_test(test_admission__inserted_before_own_env),
                cmocka_unit_test(test_admission__init_containers_not_ephemeral),
                cmocka_unit_test(
                        test_admission__reinvocation_adds_nothing_then_serves_new_container),
                cmocka_unit_test(test_admission__service_links_off),
                cmocka_unit_test(test_admission__opt_out_and_mirror_pods),
                cmocka_unit_test(test_admission__selected_services),
                cmocka_unit_test(test_admission__selected_services_clash),
                cmocka_unit_test(test_admission__nul_in_values),
                cmocka_unit_test(test_admission__size_guard),
                cmocka_unit_test(test_admission__env_from),
                cmocka_unit_test(test_admission__warnings_capped),
                cmocka_unit_test(test_admission__not_a_pod_create),
                cmocka_unit_test(test_admission__dry_run_and_namespace),
                cmocka_unit_test(test_admission__malformed),
                cmocka_unit_test(test_admission__failure_mode),
                cmocka_unit_test(test_admission__cache_follows_service_changes),
                cmocka_unit_test(test_admission__cache_cap),
                cmocka_unit_test(test_admission__cache_threads),
                cmocka_unit_test(test_admission__json_pointer_escape),
        };
        return cmocka_run_group_tests_name("admission", tests, setup, teardown);
}
