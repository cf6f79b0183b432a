/* metadata: name, namespace, labels, annotations, owner references. */
#include <errno.h>
#include <string.h>

#include "decode_internal.h"

/* DNS-1123 subdomain: what most object names must be. */
static int check_subdomain(struct dctx *d, const char *key, const char *s)
{
        size_t n = strlen(s);
        bool ok = n >= 1 && n <= SE_MAX_NAME_LEN;
        for (size_t i = 0; ok && i < n; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                bool edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';
                ok = alnum || (!edge && (c == '-' || c == '.'));
        }
        if (ok)
                return 0;
        return model_dctx_fail(
                d, key,
                "\"%s\" is not a valid name: lower case letters, digits, '-' and '.', "
                "at most 253, starting and ending with a letter or digit",
                s);
}

/* Service names must be DNS-1035 labels: they start with a letter. */
static int check_service_name(struct dctx *d, const char *key, const char *s)
{
        int r = model_check_dns_label(d, key, s);
        if (r == 0 && !(s[0] >= 'a' && s[0] <= 'z'))
                return model_dctx_fail(
                        d, key, "\"%s\" is not a valid Service name: it must start with a letter",
                        s);
        return r;
}

static int decode_owner_ref(struct dctx *d, const json_t *o, void *out, const void *ctx)
{
        struct se_owner_ref *ref = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, o, "apiVersion", &ref->api_version)) < 0 ||
            (r = model_get_string(d, o, "kind", &ref->kind)) < 0 ||
            (r = model_get_string(d, o, "name", &ref->name)) < 0 ||
            (r = model_get_string(d, o, "uid", &ref->uid)) < 0 ||
            (r = model_get_bool(d, o, "controller", &ref->controller)) < 0)
                return r;
        return model_get_bool(d, o, "blockOwnerDeletion", &ref->block_owner_deletion);
}

int model_decode_meta(struct dctx *d, const json_t *json, enum se_kind kind, const char *default_ns,
                      struct se_meta *m)
{
        const json_t *meta;
        int r = model_get_object(d, json, "metadata", &meta);
        if (r < 0)
                return r;
        if (!meta)
                return model_dctx_fail(d, "metadata.name", "Required value: name is required");
        size_t old = model_dctx_push_key(d, "metadata");
        /* (each flag reaches only its own kind: decode.c kind_flags) */
        bool dns = d->flags & (SE_DECODE_DNS_SLICES | SE_DECODE_DNS_SERVICES);
        bool proxy = d->flags & SE_DECODE_PROXY_SLICES;
        bool slim = dns || proxy || (d->flags & SE_DECODE_SLIM_POD);
        /* a DNS server reads the labels of slices (the service name), not
         * of Services, and no uid */
        bool labels = !(d->flags & SE_DECODE_DNS_SERVICES);
        struct se_meta_more more = { 0 };
        if ((r = model_get_string(d, meta, "name", &m->name)) < 0 ||
            (!slim && (r = model_get_string(d, meta, "generateName", &more.generate_name)) < 0) ||
            (r = model_get_shared_string(d, meta, "namespace", &m->namespace)) < 0 ||
            (!dns && !proxy && (r = model_get_string(d, meta, "uid", &m->uid)) < 0) ||
            (r = model_get_string(d, meta, "resourceVersion", &m->resource_version)) < 0 ||
            (!slim &&
             (r = model_get_string(d, meta, "creationTimestamp", &more.creation_timestamp)) < 0) ||
            (r = model_get_string(d, meta, "deletionTimestamp", &m->deletion_timestamp)) < 0 ||
            (r = model_get_int64(d, meta, "generation", &more.generation)) < 0 ||
            (labels && (r = model_get_shared_strmap(d, meta, "labels", &m->labels)) < 0) ||
            ((!slim || proxy) &&
             (r = model_get_strmap(d, meta, "annotations", &m->annotations)) < 0) ||
            (!slim && (r = GET_LIST(d, meta, "ownerReferences", decode_owner_ref, NULL,
                                    more.owner_refs, more.n_owner_refs)) < 0))
                return r;
        if (slim) /* checked, not kept: nothing reads a slim object's generation */
                more.generation = 0;
        if (more.generate_name || more.creation_timestamp || more.generation || more.n_owner_refs) {
                m->more = model_dctx_array(d, 1, sizeof(*m->more));
                if (!m->more)
                        return -ENOMEM;
                *m->more = more;
        }
        if (!m->name || !*m->name) {
                /* generated objects (a Pod under admission) have only generateName */
                if (!more.generate_name || !*more.generate_name)
                        return model_dctx_fail(d, "name",
                                               "Required value: name or generateName is required");
                m->name = "";
        } else if (kind == SE_KIND_SERVICE) {
                if ((r = check_service_name(d, "name", m->name)) < 0)
                        return r;
        } else if (kind == SE_KIND_NAMESPACE) {
                if ((r = model_check_dns_label(d, "name", m->name)) < 0)
                        return r;
        } else if ((r = check_subdomain(d, "name", m->name)) < 0) {
                return r;
        }
        if (!se_kind_namespaced(kind)) {
                m->namespace = "";
        } else if (!m->namespace || !*m->namespace) {
                m->namespace = model_dctx_strdup(d, default_ns ? default_ns : "default");
                if (!m->namespace)
                        return -ENOMEM;
        } else if ((r = model_check_dns_label(d, "namespace", m->namespace)) < 0) {
                return r;
        }
        model_dctx_pop(d, old);
        return 0;
}
