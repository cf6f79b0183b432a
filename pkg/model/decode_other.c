/* Node, Namespace, ConfigMap and Secret. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/hash.h>
#include <svcenv/parse.h>

#include "decode_internal.h"

static int decode_node_address(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        struct se_node_address *a = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "type", &a->type)) < 0 ||
            (r = model_get_string(d, e, "address", &a->address)) < 0)
                return r;
        if (!a->type || !a->address)
                return model_dctx_fail(d, a->type ? "address" : "type", "Required value");
        return strstr(a->type, "IP") ? model_check_ip(d, "address", a->address) : 0;
}

/* The one taint anyone here reads: the cluster autoscaler's (kube-proxy's
 * node eligibility). */
static int decode_taints(struct dctx *d, const json_t *spec, struct se_node *node)
{
        const json_t *arr;
        int r = model_get_array(d, spec, "taints", &arr);
        for (size_t i = 0; r == 0 && arr && i < json_array_size(arr); i++) {
                const json_t *key = json_object_get(json_array_get(arr, i), "key");
                if (json_is_string(key) &&
                    strcmp(json_string_value(key), SE_TAINT_TO_BE_DELETED) == 0)
                        node->to_be_deleted = true;
        }
        return r;
}

/* status.allocatable.cpu: a quantity, which YAML may give as a number */
static int decode_allocatable_cpu(struct dctx *d, const json_t *status, struct se_node *node)
{
        const json_t *alloc;
        int r = model_get_object(d, status, "allocatable", &alloc);
        if (r < 0 || !alloc)
                return r;
        const json_t *v = json_object_get(alloc, "cpu");
        if (!v || json_is_null(v))
                return 0;
        char buf[64];
        const char *text = buf;
        if (json_is_string(v))
                text = json_string_value(v);
        else if (json_is_integer(v))
                snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        else if (json_is_real(v))
                snprintf(buf, sizeof(buf), "%.15g", json_real_value(v));
        else
                text = NULL;
        size_t old = model_dctx_push_key(d, "allocatable");
        if (!text || se_parse_quantity(text, 9, &node->allocatable_cpu_nanos) < 0)
                return model_dctx_fail(
                        d, "cpu",
                        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
        node->allocatable_cpu = model_dctx_strdup(d, text);
        if (!node->allocatable_cpu)
                return -ENOMEM;
        model_dctx_pop(d, old);
        return 0;
}

int model_decode_node(struct dctx *d, const json_t *json, struct se_node *node)
{
        const json_t *spec, *status, *arr;
        enum se_opt_bool unsched = SE_UNSET;
        int r;
        if ((r = model_get_object(d, json, "spec", &spec)) < 0)
                return r;
        if (spec) {
                size_t old = model_dctx_push_key(d, "spec");
                if ((r = model_get_strarray(d, spec, "podCIDRs", &node->pod_cidrs)) < 0 ||
                    (r = model_get_bool(d, spec, "unschedulable", &unsched)) < 0 ||
                    (r = decode_taints(d, spec, node)) < 0)
                        return r;
                if (!node->pod_cidrs.n) {
                        const char *cidr = NULL;
                        if ((r = model_get_string(d, spec, "podCIDR", &cidr)) < 0)
                                return r;
                        if (cidr && *cidr) {
                                node->pod_cidrs.v = model_dctx_array(d, 2, sizeof(char *));
                                if (!node->pod_cidrs.v)
                                        return -ENOMEM;
                                node->pod_cidrs.v[0] = cidr;
                                node->pod_cidrs.n = 1;
                        }
                }
                model_dctx_pop(d, old);
        }
        node->unschedulable = unsched == SE_TRUE;
        if ((r = model_get_object(d, json, "status", &status)) < 0 || !status)
                return r;
        size_t old = model_dctx_push_key(d, "status");
        if ((r = GET_LIST(d, status, "addresses", decode_node_address, NULL, node->addresses,
                          node->n_addresses)) < 0)
                return r;
        if ((r = decode_allocatable_cpu(d, status, node)) < 0)
                return r;
        if ((r = model_get_array(d, status, "conditions", &arr)) < 0)
                return r;
        for (size_t i = 0; arr && i < json_array_size(arr); i++) {
                const json_t *e = json_array_get(arr, i);
                const json_t *type = json_object_get(e, "type");
                const json_t *st = json_object_get(e, "status");
                if (json_is_string(type) && strcmp(json_string_value(type), "Ready") == 0 &&
                    json_is_string(st))
                        node->ready =
                                strcmp(json_string_value(st), "True") == 0 ? SE_TRUE : SE_FALSE;
        }
        model_dctx_pop(d, old);
        return 0;
}

int model_decode_namespace(struct dctx *d, const json_t *json, struct se_namespace *ns)
{
        const json_t *status;
        int r = model_get_object(d, json, "status", &status);
        if (r < 0 || !status)
                return r;
        size_t old = model_dctx_push_key(d, "status");
        if ((r = model_get_string(d, status, "phase", &ns->phase)) < 0)
                return r;
        model_dctx_pop(d, old);
        return 0;
}

int model_decode_configmap(struct dctx *d, const json_t *json, struct se_configmap *cm)
{
        return model_get_strmap(d, json, "data", &cm->data);
}

/* spec.cidrs: at most two, each a CIDR (the API server allows one per
 * family; the proxy parses them again, so a bad one must not get in). */
int model_decode_service_cidr(struct dctx *d, const json_t *json, struct se_service_cidr *sc)
{
        const json_t *spec;
        int r = model_get_object(d, json, "spec", &spec);
        if (r < 0 || !spec)
                return r;
        size_t old = model_dctx_push_key(d, "spec");
        if ((r = model_get_strarray(d, spec, "cidrs", &sc->cidrs)) < 0)
                return r;
        if (sc->cidrs.n > 2)
                return model_dctx_fail(d, "cidrs", "Too many: %u: must have at most 2 items",
                                       sc->cidrs.n);
        for (uint32_t i = 0; i < sc->cidrs.n; i++) {
                struct se_cidr c;
                if (se_parse_cidr(sc->cidrs.v[i], &c) < 0) {
                        size_t o2 = model_dctx_push_key(d, "cidrs");
                        size_t o3 = model_dctx_push_index(d, i);
                        r = model_dctx_fail(d, NULL, "Invalid value: \"%s\": must be a valid CIDR",
                                            sc->cidrs.v[i]);
                        model_dctx_pop(d, o3);
                        model_dctx_pop(d, o2);
                        return r;
                }
        }
        model_dctx_pop(d, old);
        return 0;
}

/* data is base64; stringData (write-only in the API) overrides it key by key,
 * as the API server merges them. */
int model_decode_secret(struct dctx *d, const json_t *json, struct se_secret *sec)
{
        struct se_kvlist data = { 0 }, sdata = { 0 };
        int r;
        if ((r = model_get_string(d, json, "type", &sec->type)) < 0 ||
            (r = model_get_strmap(d, json, "data", &data)) < 0 ||
            (r = model_get_strmap(d, json, "stringData", &sdata)) < 0)
                return r;
        size_t old = model_dctx_push_key(d, "data");
        for (uint32_t i = 0; i < data.n; i++) {
                size_t len = strlen(data.items[i].value);
                char *out = se_arena_alloc(d->arena, len / 4 * 3 + 4);
                size_t outlen;
                if (!out)
                        return -ENOMEM;
                if (se_base64_decode(data.items[i].value, len, out, &outlen) < 0)
                        return model_dctx_fail(d, data.items[i].key, "illegal base64 data");
                data.items[i].value = out;
        }
        model_dctx_pop(d, old);
        uint32_t n = data.n + sdata.n;
        struct se_kv *items = model_dctx_array(d, n, sizeof(*items));
        if (n && !items)
                return -ENOMEM;
        uint32_t k = 0;
        for (uint32_t i = 0; i < data.n; i++)
                if (!se_kvlist_get(&sdata, data.items[i].key))
                        items[k++] = data.items[i];
        for (uint32_t i = 0; i < sdata.n; i++)
                items[k++] = sdata.items[i];
        sec->data.items = items;
        sec->data.n = k;
        model_kvlist_sort(&sec->data);
        return 0;
}
