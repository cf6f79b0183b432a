/* Fuzz target: any request body through the admission decision, against a
 * fixed cluster. Checks that every 200 answer is a well-formed
 * AdmissionReview whose patch (if any) is base64 of a JSON array. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/admission.h>
#include <svcenv/hash.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "fuzz.h"

static const char cluster[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: kubernetes, namespace: default}\n"
        "spec: {clusterIP: 10.96.0.1, ports: [{name: https, port: 443}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.10, ports: [{name: pg, port: 5432}, {name: dns, port: 53, protocol: UDP}]}\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: db-service, namespace: shop}\n"
        "spec: {clusterIP: 10.0.0.11, ports: [{port: 80}]}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: shop}\n"
        "data: {A: b}\n";

static struct se_store *store;

static void check(const struct se_admission_result *res)
{
        if (res->http_status != 200)
                return;
        json_error_t je;
        json_t *root = json_loadb(res->body, res->len, 0, &je);
        if (!root)
                abort();
        json_t *resp = json_object_get(root, "response");
        if (!json_is_string(json_object_get(resp, "uid")) ||
            !json_is_boolean(json_object_get(resp, "allowed")))
                abort();
        const char *p = json_string_value(json_object_get(resp, "patch"));
        if (p) {
                size_t n = strlen(p), len = 0;
                char *raw = malloc(n / 4 * 3 + 1);
                if (!raw || se_base64_decode(p, n, raw, &len) < 0)
                        abort();
                json_t *patch = json_loadb(raw, len, 0, &je);
                if (!json_is_array(patch))
                        abort();
                json_decref(patch);
                free(raw);
        }
        json_decref(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!store) {
                struct se_diag d;
                store = se_store_new();
                if (!store || se_manifest_load_buffer(store, "cluster", cluster, strlen(cluster),
                                                      NULL, NULL, &d) < 0)
                        abort();
        }
        struct se_admission_options opt = { .max_env_bytes = size % 2 ? 4096 : 0,
                                            .failure_deny = size % 3 == 0 };
        struct se_admission_result res;
        if (se_admission_review_store(store, &opt, (const char *)data, size, &res) == 0) {
                check(&res);
                se_admission_result_release(&res);
        }
        return 0;
}
