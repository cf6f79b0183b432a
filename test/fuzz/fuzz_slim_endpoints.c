/* Fuzz target: slim Endpoints (SE_DECODE_SLIM_ENDPOINTS) against full ones.
 * A JSON object is decoded as Endpoints both ways: the same verdict and
 * error, the digest and address count of the full object. Anything else is
 * a cluster manifest: every Service (and Endpoints) is planned against the
 * stored Endpoints full and slim, and the plans must be the same. A
 * difference aborts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/endpoints.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "fuzz.h"

static void check(bool ok)
{
        if (!ok)
                abort();
}

static void decode_both(const json_t *j)
{
        struct se_object *full = NULL, *slim = NULL;
        struct se_decode_error e1, e2;
        int r1 = se_decode_object_flags(j, SE_KIND_ENDPOINTS, NULL, 0, &full, &e1);
        int r2 = se_decode_object_flags(j, SE_KIND_ENDPOINTS, NULL, SE_DECODE_SLIM_ENDPOINTS, &slim,
                                        &e2);
        check(r1 == r2);
        if (r1 == -EINVAL)
                check(strcmp(e1.path, e2.path) == 0 && strcmp(e1.message, e2.message) == 0);
        if (r1 == 0) {
                const struct se_endpoints *f = se_endpoints_of(full), *s = se_endpoints_of(slim);
                uint8_t d[SE_ENDPOINTS_DIGEST_LEN];
                check(s->slim && !s->subsets && !s->n_subsets && !f->slim);
                if (se_endpoints_digest(f, d) == 0)
                        check(memcmp(d, s->digest, sizeof(d)) == 0);
                size_t n = se_endpoints_n_addresses(f);
                check(s->n_addresses == (n > UINT32_MAX ? UINT32_MAX : n));
                check(se_encode_object(slim) == NULL);
        }
        se_object_unref(full);
        se_object_unref(slim);
}

static char *dump(const struct se_endpoints *ep)
{
        json_t *j = ep ? se_encode_object(&ep->obj) : NULL;
        char *s = j ? json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
        json_decref(j);
        return s;
}

static const struct se_node *get_node(void *data, const char *name)
{
        return se_node_of(se_store_get(data, SE_KIND_NODE, "", name));
}

static void plan_both(struct se_store *s, const char *ns, const char *name)
{
        const struct se_endpoints *existing =
                se_endpoints_of(se_store_get(s, SE_KIND_ENDPOINTS, ns, name));
        if (!existing)
                return;
        json_t *j = se_encode_object(&existing->obj);
        struct se_object *slim = NULL;
        struct se_decode_error e;
        /* what the encoder writes decodes again; otherwise nothing to compare */
        if (!j || se_decode_object_flags(j, SE_KIND_ENDPOINTS, NULL, SE_DECODE_SLIM_ENDPOINTS,
                                         &slim, &e) != 0) {
                json_decref(j);
                return;
        }
        struct se_object *full = NULL;
        int r = se_decode_object_flags(j, SE_KIND_ENDPOINTS, NULL, 0, &full, &e);
        json_decref(j);
        check(r == 0);
        const struct se_object **pods = NULL;
        long n_pods = se_store_list(s, SE_KIND_POD, ns, &pods);
        struct se_endpoints_input in = {
                .namespace = ns,
                .name = name,
                .svc = se_service_of(se_store_get(s, SE_KIND_SERVICE, ns, name)),
                .pods = (const struct se_pod *const *)pods,
                .n_pods = n_pods > 0 ? (size_t)n_pods : 0,
                .get_node = get_node,
                .node_data = s,
                .trigger_time_ns = 1,
        };
        struct se_endpoints_plan a, b;
        if (se_endpoints_plan(&in, se_endpoints_of(full), NULL, &a) == 0) {
                if (se_endpoints_plan(&in, se_endpoints_of(slim), NULL, &b) == 0) {
                        char *x = dump(a.obj), *y = dump(b.obj);
                        check(a.action == b.action);
                        check((!x && !y) || (x && y && strcmp(x, y) == 0));
                        free(x);
                        free(y);
                        se_endpoints_plan_release(&b);
                }
                se_endpoints_plan_release(&a);
        }
        free(pods);
        se_object_unref(full);
        se_object_unref(slim);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t je;
        json_t *j = json_loadb((const char *)data, size, 0, &je);
        if (json_is_object(j)) {
                decode_both(j);
                json_decref(j);
                return 0;
        }
        json_decref(j);
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (s &&
            se_manifest_load_buffer(s, "fuzz", (const char *)data, size, NULL, NULL, &d) == 0) {
                const struct se_object **eps = NULL;
                long n = se_store_list(s, SE_KIND_ENDPOINTS, NULL, &eps);
                for (long i = 0; i < n; i++)
                        plan_both(s, eps[i]->meta.namespace, eps[i]->meta.name);
                free(eps);
        }
        se_store_free(s);
        return 0;
}
