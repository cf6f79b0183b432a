/* Pod: the spec and status fields envvars and endpoints read. */
#include <errno.h>
#include <string.h>

#include <svcenv/hashmap.h>

#include "decode_internal.h"

static const char *const phases[] = {
        "Pending", "Running", "Succeeded", "Failed", "Unknown", NULL
};
static const char *const cond_status[] = { "True", "False", "Unknown", NULL };

/* Environment variable names: since RelaxedEnvironmentVariableValidation (GA)
 * any printable ASCII except '=' is allowed. */
static int check_env_name(struct dctx *d, const char *key, const char *s)
{
        if (!*s)
                return model_dctx_fail(d, key, "Required value");
        for (const char *p = s; *p; p++)
                if (*p < 32 || *p > 126 || *p == '=')
                        return model_dctx_fail(
                                d, key,
                                "Invalid value: \"%s\": a valid environment variable name must consist only of printable ASCII characters other than '='",
                                s);
        return 0;
}

static int decode_key_ref(struct dctx *d, const json_t *vf, const char *key, struct se_env_var *e,
                          enum se_env_source source)
{
        const json_t *ref;
        int r = model_get_object(d, vf, key, &ref);
        if (r < 0 || !ref)
                return r;
        size_t old = model_dctx_push_key(d, key);
        e->source = source;
        if ((r = model_get_string(d, ref, "name", &e->ref)) < 0 ||
            (r = model_get_string(d, ref, "key", &e->key)) < 0 ||
            (r = model_get_bool(d, ref, "optional", &e->optional)) < 0)
                return r;
        if (!e->key || !*e->key)
                return model_dctx_fail(d, "key", "Required value");
        if (!e->ref)
                e->ref = "";
        model_dctx_pop(d, old);
        return 1;
}

static int decode_value_from(struct dctx *d, const json_t *ej, struct se_env_var *e)
{
        const json_t *vf, *ref;
        int r = model_get_object(d, ej, "valueFrom", &vf);
        if (r < 0 || !vf)
                return r;
        size_t old = model_dctx_push_key(d, "valueFrom");
        int found = 0;
        if ((r = model_get_object(d, vf, "fieldRef", &ref)) < 0)
                return r;
        if (ref) {
                size_t o2 = model_dctx_push_key(d, "fieldRef");
                e->source = SE_ENV_FIELD_REF;
                if ((r = model_get_string(d, ref, "fieldPath", &e->ref)) < 0)
                        return r;
                if (!e->ref || !*e->ref)
                        return model_dctx_fail(d, "fieldPath", "Required value");
                model_dctx_pop(d, o2);
                found++;
        }
        if ((r = model_get_object(d, vf, "resourceFieldRef", &ref)) < 0)
                return r;
        if (ref) {
                size_t o2 = model_dctx_push_key(d, "resourceFieldRef");
                const json_t *div = json_object_get(ref, "divisor");
                e->source = SE_ENV_RESOURCE_REF;
                if ((r = model_get_string(d, ref, "resource", &e->ref)) < 0 ||
                    (r = model_get_string(d, ref, "containerName", &e->container)) < 0)
                        return r;
                /* a quantity may be written as a number in YAML */
                if (json_is_integer(div)) {
                        char buf[32];
                        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(div));
                        e->divisor = model_dctx_strdup(d, buf);
                } else if ((r = model_get_string(d, ref, "divisor", &e->divisor)) < 0) {
                        return r;
                }
                if (!e->ref || !*e->ref)
                        return model_dctx_fail(d, "resource", "Required value");
                model_dctx_pop(d, o2);
                found++;
        }
        if ((r = decode_key_ref(d, vf, "configMapKeyRef", e, SE_ENV_CONFIGMAP_KEY)) < 0)
                return r;
        found += r;
        if ((r = decode_key_ref(d, vf, "secretKeyRef", e, SE_ENV_SECRET_KEY)) < 0)
                return r;
        found += r;
        if (found != 1)
                return model_dctx_fail(
                        d, NULL,
                        found ? "Invalid value: may not have more than one field specified at a time" :
                                "Invalid value: must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`");
        model_dctx_pop(d, old);
        return 0;
}

static int decode_env_var(struct dctx *d, const json_t *ej, void *out, const void *ctx)
{
        struct se_env_var *e = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, ej, "name", &e->name)) < 0 ||
            (r = model_get_string(d, ej, "value", &e->value)) < 0)
                return r;
        if ((r = check_env_name(d, "name", e->name ? e->name : "")) < 0)
                return r;
        if ((r = decode_value_from(d, ej, e)) < 0)
                return r;
        if (e->source != SE_ENV_VALUE && e->value && *e->value)
                return model_dctx_fail(
                        d, "valueFrom",
                        "Invalid value: may not be specified when `value` is not empty");
        return 0;
}

static int decode_env_from(struct dctx *d, const json_t *ej, void *out, const void *ctx)
{
        struct se_env_from *f = out;
        const json_t *cm, *sec;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, ej, "prefix", &f->prefix)) < 0 ||
            (r = model_get_object(d, ej, "configMapRef", &cm)) < 0 ||
            (r = model_get_object(d, ej, "secretRef", &sec)) < 0)
                return r;
        if (f->prefix && *f->prefix && (r = check_env_name(d, "prefix", f->prefix)) < 0)
                return r;
        if (!cm == !sec)
                return model_dctx_fail(
                        d, NULL,
                        cm ? "Invalid value: may not have more than one field specified at a time" :
                             "Invalid value: must specify one of: `configMapRef` or `secretRef`");
        f->secret = sec != NULL;
        const json_t *ref = cm ? cm : sec;
        size_t old = model_dctx_push_key(d, cm ? "configMapRef" : "secretRef");
        if ((r = model_get_string(d, ref, "name", &f->name)) < 0 ||
            (r = model_get_bool(d, ref, "optional", &f->optional)) < 0)
                return r;
        if (!f->name)
                f->name = "";
        model_dctx_pop(d, old);
        return 0;
}

static int decode_container_port(struct dctx *d, const json_t *pj, void *out, const void *ctx)
{
        struct se_container_port *p = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, pj, "name", &p->name)) < 0 ||
            (r = model_get_int32(d, pj, "containerPort", &p->container_port, NULL)) < 0 ||
            (r = model_get_protocol(d, pj, "protocol", &p->protocol, NULL)) < 0 ||
            (r = model_get_int32(d, pj, "hostPort", &p->host_port, NULL)) < 0 ||
            (r = model_get_string(d, pj, "hostIP", &p->host_ip)) < 0)
                return r;
        if (p->container_port == 0)
                return model_dctx_fail(d, "containerPort", "Required value");
        if ((r = model_check_port(d, "containerPort", p->container_port, false)) < 0 ||
            (r = model_check_port(d, "hostPort", p->host_port, true)) < 0)
                return r;
        if (p->name && *p->name && (r = model_check_iana_svc_name(d, "name", p->name)) < 0)
                return r;
        return 0;
}

static int decode_resources(struct dctx *d, const json_t *cj, struct se_container *c)
{
        const json_t *res;
        int r = model_get_object(d, cj, "resources", &res);
        if (r < 0 || !res)
                return r;
        size_t old = model_dctx_push_key(d, "resources");
        /* quantities may be plain numbers in YAML: keep their text */
        const char *keys[] = { "limits", "requests" };
        struct se_kvlist *out[] = { &c->limits, &c->requests };
        for (int k = 0; k < 2; k++) {
                const json_t *m;
                if ((r = model_get_object(d, res, keys[k], &m)) < 0)
                        return r;
                if (!m)
                        continue;
                size_t n = json_object_size(m), i = 0;
                out[k]->items = model_dctx_array(d, n, sizeof(struct se_kv));
                if (n && !out[k]->items)
                        return -ENOMEM;
                const char *rk;
                const json_t *v;
                json_object_foreach(SE_UNCONST(json_t, m), rk, v) {
                        char buf[64];
                        const char *text;
                        if (json_is_string(v)) {
                                text = json_string_value(v);
                        } else if (json_is_integer(v)) {
                                snprintf(buf, sizeof(buf), "%lld",
                                         (long long)json_integer_value(v));
                                text = buf;
                        } else if (json_is_real(v)) {
                                snprintf(buf, sizeof(buf), "%g", json_real_value(v));
                                text = buf;
                        } else {
                                model_dctx_push_key(d, keys[k]);
                                return model_dctx_fail(d, rk, "expected a quantity, got %s",
                                                       model_json_type_name(v));
                        }
                        out[k]->items[i].key = model_dctx_strdup(d, rk);
                        out[k]->items[i].value = model_dctx_strdup(d, text);
                        if (!out[k]->items[i].key || !out[k]->items[i].value)
                                return -ENOMEM;
                        i++;
                }
                out[k]->n = (uint32_t)i;
                model_kvlist_sort(out[k]);
        }
        model_dctx_pop(d, old);
        return 0;
}

/* The controllers' view of a port: what a named targetPort resolves by. */
static int decode_slim_port(struct dctx *d, const json_t *pj, void *out, const void *ctx)
{
        struct se_container_port *p = out;
        int r;
        (void)ctx;
        if ((r = model_get_shared_string(d, pj, "name", &p->name)) < 0 ||
            (r = model_get_int32(d, pj, "containerPort", &p->container_port, NULL)) < 0 ||
            (r = model_get_protocol(d, pj, "protocol", &p->protocol, NULL)) < 0)
                return r;
        return model_check_port(d, "containerPort", p->container_port, false);
}

static int decode_slim_container(struct dctx *d, const json_t *cj, void *out, const void *ctx)
{
        struct se_container *c = out;
        int r;
        (void)ctx;
        if ((r = model_get_shared_string(d, cj, "name", &c->name)) < 0 ||
            (r = model_get_string(d, cj, "restartPolicy", &c->restart_policy)) < 0 ||
            (r = GET_LIST(d, cj, "ports", decode_slim_port, NULL, c->ports, c->n_ports)) < 0)
                return r;
        if (!c->name)
                c->name = "";
        return 0;
}

/* Slim pods keep the containers a named port can resolve to. */
static bool has_ports(const json_t *c)
{
        return !json_is_object(c) || json_array_size(json_object_get(c, "ports")) > 0;
}

static bool is_sidecar_with_ports(const json_t *c)
{
        const char *policy = json_string_value(json_object_get(c, "restartPolicy"));
        return !json_is_object(c) || (has_ports(c) && policy && strcmp(policy, "Always") == 0);
}

static bool is_ready_condition(const json_t *c)
{
        const char *type = json_string_value(json_object_get(c, "type"));
        return !json_is_object(c) || (type && strcmp(type, "Ready") == 0);
}

static int decode_slim_spec(struct dctx *d, const json_t *spec, struct se_pod *pod)
{
        int r;
        if ((r = model_get_shared_string(d, spec, "nodeName", &pod->node_name)) < 0 ||
            (r = model_get_string(d, spec, "hostname", &pod->hostname)) < 0 ||
            (r = model_get_string(d, spec, "subdomain", &pod->subdomain)) < 0 ||
            (r = model_get_list_if(d, spec, "containers", sizeof(struct se_container), has_ports,
                                   decode_slim_container, NULL, (void **)&pod->containers,
                                   &pod->n_containers)) < 0 ||
            (r = model_get_list_if(d, spec, "initContainers", sizeof(struct se_container),
                                   is_sidecar_with_ports, decode_slim_container, NULL,
                                   (void **)&pod->init_containers, &pod->n_init_containers)) < 0)
                return r;
        return 0;
}

static int decode_container(struct dctx *d, const json_t *cj, void *out, const void *ctx)
{
        struct se_container *c = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, cj, "name", &c->name)) < 0 ||
            (r = model_get_string(d, cj, "image", &c->image)) < 0 ||
            (r = model_get_string(d, cj, "restartPolicy", &c->restart_policy)) < 0 ||
            (r = GET_LIST(d, cj, "ports", decode_container_port, NULL, c->ports, c->n_ports)) < 0 ||
            (r = GET_LIST(d, cj, "env", decode_env_var, NULL, c->env, c->n_env)) < 0 ||
            (r = GET_LIST(d, cj, "envFrom", decode_env_from, NULL, c->env_from, c->n_env_from)) <
                    0 ||
            (r = decode_resources(d, cj, c)) < 0)
                return r;
        if (!c->name || !*c->name)
                return model_dctx_fail(d, "name", "Required value");
        return model_check_dns_label(d, "name", c->name);
}

static char seen_mark; /* the value of a hash-set entry */

/* Container names are unique across containers and init containers; a hash
 * set keeps the check linear in their number. */
static int check_unique_names(struct dctx *d, const struct se_pod *pod)
{
        uint32_t total = pod->n_containers + pod->n_init_containers;
        struct se_hashmap names = SE_HASHMAP_INIT;
        int r = 0;
        for (uint32_t i = 0; r == 0 && i < total; i++) {
                bool init = i < pod->n_init_containers;
                const struct se_container *a = init ? &pod->init_containers[i] :
                                                      &pod->containers[i - pod->n_init_containers];
                if (se_hashmap_get(&names, a->name)) {
                        model_dctx_push_key(d, init ? "initContainers" : "containers");
                        model_dctx_push_index(d, init ? i : i - pod->n_init_containers);
                        r = model_dctx_fail(d, "name", "Duplicate value: \"%s\"", a->name);
                } else if (se_hashmap_put(&names, a->name, &seen_mark, NULL) < 0) {
                        r = -ENOMEM;
                }
        }
        se_hashmap_release(&names);
        return r;
}

/* podIPs[] and hostIPs[] entries: {ip: ...}. */
static int decode_ip_entry(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        const char **ip = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "ip", ip)) < 0)
                return r;
        return model_check_ip(d, "ip", *ip ? *ip : "");
}

static int decode_condition(struct dctx *d, const json_t *e, void *out, const void *ctx)
{
        struct se_pod_condition *c = out;
        int r;
        (void)ctx;
        if ((r = model_get_string(d, e, "type", &c->type)) < 0 ||
            (r = model_get_string(d, e, "status", &c->status)) < 0 ||
            (r = model_get_string(d, e, "lastTransitionTime", &c->last_transition_time)) < 0)
                return r;
        if (!c->type || !*c->type)
                return model_dctx_fail(d, "type", "Required value");
        return model_check_one_of(d, "status", c->status ? c->status : "", cond_status);
}

/* more: where hostIP and hostIPs go; NULL for a slim pod (not decoded). */
static int decode_status(struct dctx *d, const json_t *json, struct se_pod *pod,
                         struct se_pod_more *more)
{
        const json_t *status;
        int r;
        if ((r = model_get_object(d, json, "status", &status)) < 0 || !status)
                return r;
        size_t old = model_dctx_push_key(d, "status");
        bool slim = !more;
        if ((r = model_get_string(d, status, "phase", &pod->phase)) < 0 ||
            (r = model_get_string(d, status, "podIP", &pod->pod_ip)) < 0 ||
            (!slim && (r = model_get_string(d, status, "hostIP", &more->host_ip)) < 0))
                return r;
        if (pod->phase && *pod->phase &&
            (r = model_check_one_of(d, "phase", pod->phase, phases)) < 0)
                return r;
        if (pod->pod_ip && *pod->pod_ip && (r = model_check_ip(d, "podIP", pod->pod_ip)) < 0)
                return r;
        if (more && more->host_ip && *more->host_ip &&
            (r = model_check_ip(d, "hostIP", more->host_ip)) < 0)
                return r;
        if ((r = GET_LIST(d, status, "podIPs", decode_ip_entry, NULL, pod->pod_ips.v,
                          pod->pod_ips.n)) < 0 ||
            (!slim && (r = GET_LIST(d, status, "hostIPs", decode_ip_entry, NULL, more->host_ips.v,
                                    more->host_ips.n)) < 0) ||
            (r = model_get_list_if(d, status, "conditions", sizeof(struct se_pod_condition),
                                   slim ? is_ready_condition : NULL, decode_condition, NULL,
                                   (void **)&pod->conditions, &pod->n_conditions)) < 0)
                return r;
        /* the API server keeps podIP == podIPs[0]; fill whichever is missing */
        if ((!pod->pod_ip || !*pod->pod_ip) && pod->pod_ips.n)
                pod->pod_ip = pod->pod_ips.v[0];
        if (pod->pod_ip && *pod->pod_ip && !pod->pod_ips.n) {
                pod->pod_ips.v = model_dctx_array(d, 1, sizeof(char *));
                if (!pod->pod_ips.v)
                        return -ENOMEM;
                pod->pod_ips.v[0] = pod->pod_ip;
                pod->pod_ips.n = 1;
        }
        if (more && (!more->host_ip || !*more->host_ip) && more->host_ips.n)
                more->host_ip = more->host_ips.v[0];
        model_dctx_pop(d, old);
        return 0;
}

int model_decode_pod(struct dctx *d, const json_t *json, struct se_pod *pod)
{
        const json_t *spec;
        enum se_opt_bool host_network = SE_UNSET;
        int r;
        if ((r = model_get_object(d, json, "spec", &spec)) < 0)
                return r;
        if (!spec)
                return model_dctx_fail(d, "spec", "Required value");
        size_t old = model_dctx_push_key(d, "spec");
        if (d->flags & SE_DECODE_SLIM_POD) {
                if ((r = decode_slim_spec(d, spec, pod)) < 0)
                        return r;
                model_dctx_pop(d, old);
                return decode_status(d, json, pod, NULL);
        }
        struct se_pod_more more = { 0 };
        if ((r = model_get_shared_string(d, spec, "nodeName", &pod->node_name)) < 0 ||
            (r = model_get_string(d, spec, "hostname", &pod->hostname)) < 0 ||
            (r = model_get_string(d, spec, "subdomain", &pod->subdomain)) < 0 ||
            (r = model_get_string(d, spec, "serviceAccountName", &more.service_account_name)) < 0 ||
            (r = model_get_bool(d, spec, "hostNetwork", &host_network)) < 0 ||
            (r = model_get_bool(d, spec, "enableServiceLinks", &more.enable_service_links)) < 0 ||
            (r = GET_LIST(d, spec, "containers", decode_container, NULL, pod->containers,
                          pod->n_containers)) < 0 ||
            (r = GET_LIST(d, spec, "initContainers", decode_container, NULL, pod->init_containers,
                          pod->n_init_containers)) < 0)
                return r;
        more.host_network = host_network == SE_TRUE;
        if (pod->n_containers == 0)
                return model_dctx_fail(d, "containers", "Required value");
        if (pod->hostname && *pod->hostname &&
            (r = model_check_dns_label(d, "hostname", pod->hostname)) < 0)
                return r;
        if (pod->subdomain && *pod->subdomain &&
            (r = model_check_dns_label(d, "subdomain", pod->subdomain)) < 0)
                return r;
        if ((r = check_unique_names(d, pod)) < 0)
                return r;
        model_dctx_pop(d, old);
        if ((r = decode_status(d, json, pod, &more)) < 0)
                return r;
        if (more.service_account_name || more.host_ip || more.host_ips.n || more.host_network ||
            more.enable_service_links != SE_UNSET) {
                pod->more = model_dctx_array(d, 1, sizeof(*pod->more));
                if (!pod->more)
                        return -ENOMEM;
                *pod->more = more;
        }
        return 0;
}
