/* Typed objects to Kubernetes JSON, in the API server's field order. */
#include <errno.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/encode.h>
#include <svcenv/hash.h>

/* Setters that skip absent values; each returns false on allocation failure. */
static bool set_str(json_t *o, const char *key, const char *v)
{
        return !v || json_object_set_new(o, key, json_string(v)) == 0;
}

static bool set_str_nonempty(json_t *o, const char *key, const char *v)
{
        return !v || !*v || set_str(o, key, v);
}

static bool set_int(json_t *o, const char *key, long long v)
{
        return json_object_set_new(o, key, json_integer(v)) == 0;
}

static bool set_bool(json_t *o, const char *key, enum se_opt_bool v)
{
        return v == SE_UNSET || json_object_set_new(o, key, json_boolean(v == SE_TRUE)) == 0;
}

static bool set_new(json_t *o, const char *key, json_t *v)
{
        return v && json_object_set_new(o, key, v) == 0;
}

static json_t *kv_object(const struct se_kvlist *l)
{
        json_t *o = json_object();
        for (uint32_t i = 0; o && i < l->n; i++)
                if (!set_str(o, l->items[i].key, l->items[i].value)) {
                        json_decref(o);
                        return NULL;
                }
        return o;
}

static json_t *str_array(const struct se_strs *s)
{
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < s->n; i++)
                if (json_array_append_new(a, json_string(s->v[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *encode_meta(const struct se_meta *m, enum se_kind kind)
{
        json_t *o = json_object();
        if (!o)
                return NULL;
        bool ok = set_str_nonempty(o, "name", m->name) &&
                  set_str_nonempty(o, "generateName", se_meta_generate_name(m)) &&
                  (!se_kind_namespaced(kind) || set_str_nonempty(o, "namespace", m->namespace)) &&
                  set_str_nonempty(o, "uid", m->uid) &&
                  set_str_nonempty(o, "resourceVersion", m->resource_version) &&
                  (!se_meta_generation(m) || set_int(o, "generation", se_meta_generation(m))) &&
                  set_str_nonempty(o, "creationTimestamp", se_meta_creation_timestamp(m)) &&
                  set_str_nonempty(o, "deletionTimestamp", m->deletion_timestamp) &&
                  (!m->labels.n || set_new(o, "labels", kv_object(&m->labels))) &&
                  (!m->annotations.n || set_new(o, "annotations", kv_object(&m->annotations)));
        if (ok && se_meta_n_owner_refs(m)) {
                json_t *refs = json_array();
                ok = set_new(o, "ownerReferences", refs);
                for (uint32_t i = 0; ok && i < m->more->n_owner_refs; i++) {
                        const struct se_owner_ref *r = &m->more->owner_refs[i];
                        json_t *j = json_object();
                        ok = json_array_append_new(refs, j) == 0 && j &&
                             set_str(j, "apiVersion", r->api_version) &&
                             set_str(j, "kind", r->kind) && set_str(j, "name", r->name) &&
                             set_str(j, "uid", r->uid) &&
                             set_bool(j, "controller", r->controller) &&
                             set_bool(j, "blockOwnerDeletion", r->block_owner_deletion);
                }
        }
        if (!ok) {
                json_decref(o);
                return NULL;
        }
        return o;
}

static json_t *object_ref(const struct se_object_ref *r)
{
        json_t *o = json_object();
        if (o && set_str_nonempty(o, "kind", r->kind) &&
            set_str_nonempty(o, "namespace", r->namespace) &&
            set_str_nonempty(o, "name", r->name) && set_str_nonempty(o, "uid", r->uid) &&
            set_str_nonempty(o, "resourceVersion", r->resource_version))
                return o;
        json_decref(o);
        return NULL;
}

static bool encode_addresses(json_t *subset, const char *key, const struct se_endpoint_address *a,
                             uint32_t n)
{
        if (!n)
                return true;
        json_t *arr = json_array();
        if (!set_new(subset, key, arr))
                return false;
        for (uint32_t i = 0; i < n; i++) {
                json_t *j = json_object();
                if (json_array_append_new(arr, j) < 0 || !j || !set_str(j, "ip", a[i].ip) ||
                    !set_str_nonempty(j, "hostname", a[i].hostname) ||
                    !set_str_nonempty(j, "nodeName", a[i].node_name) ||
                    (a[i].target_ref && !set_new(j, "targetRef", object_ref(a[i].target_ref))))
                        return false;
        }
        return true;
}

static bool encode_endpoints(json_t *o, const struct se_endpoints *ep)
{
        if (!ep->n_subsets)
                return true;
        json_t *subsets = json_array();
        if (!set_new(o, "subsets", subsets))
                return false;
        for (uint32_t i = 0; i < ep->n_subsets; i++) {
                const struct se_endpoint_subset *s = &ep->subsets[i];
                json_t *j = json_object();
                if (json_array_append_new(subsets, j) < 0 || !j ||
                    !encode_addresses(j, "addresses", s->addresses, s->n_addresses) ||
                    !encode_addresses(j, "notReadyAddresses", s->not_ready, s->n_not_ready))
                        return false;
                if (!s->n_ports)
                        continue;
                json_t *ports = json_array();
                if (!set_new(j, "ports", ports))
                        return false;
                for (uint32_t k = 0; k < s->n_ports; k++) {
                        const struct se_endpoint_port *p = &s->ports[k];
                        json_t *pj = json_object();
                        if (json_array_append_new(ports, pj) < 0 || !pj ||
                            !set_str_nonempty(pj, "name", p->name) ||
                            !set_int(pj, "port", p->port) ||
                            !set_str(pj, "protocol", se_protocol_name(p->protocol)) ||
                            !set_str(pj, "appProtocol", p->app_protocol))
                                return false;
                }
        }
        return true;
}

static json_t *hint_list(const struct se_strs *s)
{
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < s->n; i++) {
                json_t *h = json_object();
                if (json_array_append_new(a, h) < 0 || !h || !set_str(h, "name", s->v[i])) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

static bool encode_slice(json_t *o, const struct se_endpoint_slice *es)
{
        if (es->slim)
                return false; /* its endpoints are digests: nothing to write */
        json_t *eps = json_array();
        if (!set_str(o, "addressType", es->address_type) || !set_new(o, "endpoints", eps))
                return false;
        for (uint32_t i = 0; i < es->n_endpoints; i++) {
                const struct se_slice_endpoint *e = &es->endpoints[i];
                const struct se_object_ref *ref = se_slice_endpoint_target_ref(e);
                const struct se_slice_endpoint_hints *h = se_slice_endpoint_hints(e);
                json_t *j = json_object(), *cond = json_object();
                if (json_array_append_new(eps, j) < 0 || !j ||
                    !set_new(j, "addresses", str_array(&e->addresses)) ||
                    !set_new(j, "conditions", cond) || !set_bool(cond, "ready", e->ready) ||
                    !set_bool(cond, "serving", e->serving) ||
                    !set_bool(cond, "terminating", e->terminating) ||
                    !set_str(j, "hostname", e->hostname) ||
                    (ref && !set_new(j, "targetRef", object_ref(ref))) ||
                    !set_str(j, "nodeName", se_slice_endpoint_node(e)) ||
                    !set_str(j, "zone", se_slice_endpoint_zone(e)))
                        return false;
                if (h) {
                        json_t *hints = json_object();
                        const struct se_strs *zones = &h->zones, *nodes = &h->nodes;
                        if (!set_new(j, "hints", hints) ||
                            (zones->n && !set_new(hints, "forZones", hint_list(zones))) ||
                            (nodes->n && !set_new(hints, "forNodes", hint_list(nodes))))
                                return false;
                }
        }
        if (!es->has_ports && !es->n_ports)
                return true;
        json_t *ports = json_array();
        if (!set_new(o, "ports", ports))
                return false;
        for (uint32_t i = 0; i < es->n_ports; i++) {
                const struct se_slice_port *p = &es->ports[i];
                json_t *pj = json_object();
                if (json_array_append_new(ports, pj) < 0 || !pj || !set_str(pj, "name", p->name) ||
                    (p->has_protocol && !set_str(pj, "protocol", se_protocol_name(p->protocol))) ||
                    (p->has_port && !set_int(pj, "port", p->port)) ||
                    !set_str(pj, "appProtocol", p->app_protocol))
                        return false;
        }
        return true;
}

static bool encode_service(json_t *o, const struct se_service *s)
{
        static const char *const types[] = { "ClusterIP", "NodePort", "LoadBalancer",
                                             "ExternalName" };
        json_t *spec = json_object();
        if (!set_new(o, "spec", spec))
                return false;
        if (s->n_ports) {
                json_t *ports = json_array();
                if (!set_new(spec, "ports", ports))
                        return false;
                for (uint32_t i = 0; i < s->n_ports; i++) {
                        const struct se_service_port *p = &s->ports[i];
                        json_t *pj = json_object();
                        if (json_array_append_new(ports, pj) < 0 || !pj ||
                            !set_str_nonempty(pj, "name", p->name) ||
                            !set_str(pj, "protocol", se_protocol_name(p->protocol)) ||
                            !set_str(pj, "appProtocol", p->app_protocol) ||
                            !set_int(pj, "port", p->port))
                                return false;
                        if (p->target_port.is_string ?
                                    !set_str(pj, "targetPort", p->target_port.str) :
                                    !set_int(pj, "targetPort",
                                             p->target_port.num ? p->target_port.num : p->port))
                                return false;
                        if (p->node_port && !set_int(pj, "nodePort", p->node_port))
                                return false;
                }
        }
        bool ok =
                (!s->selector.n || set_new(spec, "selector", kv_object(&s->selector))) &&
                set_str(spec, "clusterIP", s->cluster_ip) &&
                (!s->cluster_ips.n || set_new(spec, "clusterIPs", str_array(&s->cluster_ips))) &&
                set_str(spec, "type", types[s->type]) &&
                (!s->external_ips.n || set_new(spec, "externalIPs", str_array(&s->external_ips))) &&
                set_str(spec, "sessionAffinity", s->client_ip_affinity ? "ClientIP" : "None") &&
                set_str(spec, "loadBalancerIP", s->load_balancer_ip) &&
                (!s->lb_source_ranges.n ||
                 set_new(spec, "loadBalancerSourceRanges", str_array(&s->lb_source_ranges))) &&
                set_str(spec, "externalName", s->external_name) &&
                (s->type == SE_SVC_CLUSTER_IP || s->type == SE_SVC_EXTERNAL_NAME ||
                 set_str(spec, "externalTrafficPolicy",
                         s->external_policy == SE_POLICY_LOCAL ? "Local" : "Cluster")) &&
                (!s->health_check_node_port ||
                 set_int(spec, "healthCheckNodePort", s->health_check_node_port)) &&
                (!s->publish_not_ready_addresses ||
                 json_object_set_new(spec, "publishNotReadyAddresses", json_true()) == 0);
        if (ok && s->client_ip_affinity) {
                json_t *cfg = json_object(), *client = json_object();
                ok = set_new(spec, "sessionAffinityConfig", cfg) &&
                     set_new(cfg, "clientIP", client) &&
                     set_int(client, "timeoutSeconds", s->affinity_timeout);
        }
        ok = ok && (!s->ip_families.n || set_new(spec, "ipFamilies", str_array(&s->ip_families))) &&
             set_str(spec, "ipFamilyPolicy", s->ip_family_policy) &&
             (s->type == SE_SVC_EXTERNAL_NAME ||
              set_str(spec, "internalTrafficPolicy",
                      s->internal_policy == SE_POLICY_LOCAL ? "Local" : "Cluster"));
        if (ok && s->n_lb_ingress) {
                json_t *status = json_object(), *lb = json_object(), *ing = json_array();
                ok = set_new(o, "status", status) && set_new(status, "loadBalancer", lb) &&
                     set_new(lb, "ingress", ing);
                for (uint32_t i = 0; ok && i < s->n_lb_ingress; i++) {
                        json_t *j = json_object();
                        ok = json_array_append_new(ing, j) == 0 && j &&
                             set_str(j, "ip", s->lb_ingress[i].ip) &&
                             set_str(j, "hostname", s->lb_ingress[i].hostname) &&
                             (s->lb_ingress[i].ip_mode == SE_IPMODE_UNSET ||
                              set_str(j, "ipMode",
                                      s->lb_ingress[i].ip_mode == SE_IPMODE_VIP ? "VIP" : "Proxy"));
                }
        }
        return ok;
}

static json_t *encode_env(const struct se_env_var *e)
{
        static const char *const kinds[] = { NULL, "fieldRef", "resourceFieldRef",
                                             "configMapKeyRef", "secretKeyRef" };
        json_t *j = json_object();
        if (!j || !set_str(j, "name", e->name) || !set_str_nonempty(j, "value", e->value))
                goto fail;
        if (e->source != SE_ENV_VALUE) {
                json_t *vf = json_object(), *ref = json_object();
                if (!set_new(j, "valueFrom", vf) || !set_new(vf, kinds[e->source], ref))
                        goto fail;
                bool ok;
                if (e->source == SE_ENV_FIELD_REF)
                        ok = set_str(ref, "fieldPath", e->ref);
                else if (e->source == SE_ENV_RESOURCE_REF)
                        ok = set_str(ref, "containerName", e->container) &&
                             set_str(ref, "resource", e->ref) &&
                             set_str(ref, "divisor", e->divisor);
                else
                        ok = set_str(ref, "name", e->ref) && set_str(ref, "key", e->key) &&
                             set_bool(ref, "optional", e->optional);
                if (!ok)
                        goto fail;
        }
        return j;
fail:
        json_decref(j);
        return NULL;
}

static json_t *encode_containers(const struct se_container *cs, uint32_t n)
{
        json_t *arr = json_array();
        for (uint32_t i = 0; arr && i < n; i++) {
                const struct se_container *c = &cs[i];
                json_t *j = json_object();
                bool ok = json_array_append_new(arr, j) == 0 && j && set_str(j, "name", c->name) &&
                          set_str(j, "image", c->image);
                if (ok && c->n_ports) {
                        json_t *ports = json_array();
                        ok = set_new(j, "ports", ports);
                        for (uint32_t k = 0; ok && k < c->n_ports; k++) {
                                const struct se_container_port *p = &c->ports[k];
                                json_t *pj = json_object();
                                ok = json_array_append_new(ports, pj) == 0 && pj &&
                                     set_str_nonempty(pj, "name", p->name) &&
                                     (!p->host_port || set_int(pj, "hostPort", p->host_port)) &&
                                     set_int(pj, "containerPort", p->container_port) &&
                                     set_str(pj, "protocol", se_protocol_name(p->protocol));
                        }
                }
                if (ok && c->n_env_from) {
                        json_t *ef = json_array();
                        ok = set_new(j, "envFrom", ef);
                        for (uint32_t k = 0; ok && k < c->n_env_from; k++) {
                                const struct se_env_from *f = &c->env_from[k];
                                json_t *fj = json_object(), *ref = json_object();
                                ok = json_array_append_new(ef, fj) == 0 && fj &&
                                     set_str_nonempty(fj, "prefix", f->prefix) &&
                                     set_new(fj, f->secret ? "secretRef" : "configMapRef", ref) &&
                                     set_str(ref, "name", f->name) &&
                                     set_bool(ref, "optional", f->optional);
                        }
                }
                if (ok && c->n_env) {
                        json_t *env = json_array();
                        ok = set_new(j, "env", env);
                        for (uint32_t k = 0; ok && k < c->n_env; k++)
                                ok = json_array_append_new(env, encode_env(&c->env[k])) == 0;
                }
                ok = ok && set_str(j, "restartPolicy", c->restart_policy);
                if (!ok) {
                        json_decref(arr);
                        return NULL;
                }
        }
        return arr;
}

static json_t *ip_list(const struct se_strs *s)
{
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < s->n; i++) {
                json_t *j = json_object();
                if (json_array_append_new(a, j) < 0 || !j || !set_str(j, "ip", s->v[i])) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

static bool encode_pod(json_t *o, const struct se_pod *p)
{
        static const struct se_pod_more unset = { 0 };
        const struct se_pod_more *more = p->more ? p->more : &unset;
        json_t *spec = json_object(), *status = json_object();
        bool ok = set_new(o, "spec", spec) &&
                  (!p->n_init_containers ||
                   set_new(spec, "initContainers",
                           encode_containers(p->init_containers, p->n_init_containers))) &&
                  set_new(spec, "containers", encode_containers(p->containers, p->n_containers)) &&
                  set_str(spec, "serviceAccountName", more->service_account_name) &&
                  set_str(spec, "nodeName", p->node_name) &&
                  (!more->host_network ||
                   json_object_set_new(spec, "hostNetwork", json_true()) == 0) &&
                  set_str(spec, "hostname", p->hostname) &&
                  set_str(spec, "subdomain", p->subdomain) &&
                  set_bool(spec, "enableServiceLinks", more->enable_service_links) &&
                  set_new(o, "status", status) && set_str(status, "phase", p->phase);
        if (ok && p->n_conditions) {
                json_t *conds = json_array();
                ok = set_new(status, "conditions", conds);
                for (uint32_t i = 0; ok && i < p->n_conditions; i++) {
                        json_t *c = json_object();
                        ok = json_array_append_new(conds, c) == 0 && c &&
                             set_str(c, "type", p->conditions[i].type) &&
                             set_str(c, "status", p->conditions[i].status) &&
                             set_str(c, "lastTransitionTime",
                                     p->conditions[i].last_transition_time);
                }
        }
        return ok && set_str(status, "hostIP", more->host_ip) &&
               (!more->host_ips.n || set_new(status, "hostIPs", ip_list(&more->host_ips))) &&
               set_str(status, "podIP", p->pod_ip) &&
               (!p->pod_ips.n || set_new(status, "podIPs", ip_list(&p->pod_ips)));
}

static bool encode_node(json_t *o, const struct se_node *n)
{
        json_t *spec = json_object(), *status = json_object();
        bool ok = set_new(o, "spec", spec) &&
                  (!n->pod_cidrs.n || (set_str(spec, "podCIDR", n->pod_cidrs.v[0]) &&
                                       set_new(spec, "podCIDRs", str_array(&n->pod_cidrs)))) &&
                  (!n->unschedulable ||
                   json_object_set_new(spec, "unschedulable", json_true()) == 0) &&
                  set_new(o, "status", status);
        if (ok && n->allocatable_cpu) {
                json_t *alloc = json_object();
                ok = set_new(status, "allocatable", alloc) &&
                     set_str(alloc, "cpu", n->allocatable_cpu);
        }
        if (ok && n->ready != SE_UNSET) {
                json_t *conds = json_array(), *c = json_object();
                ok = set_new(status, "conditions", conds) && json_array_append_new(conds, c) == 0 &&
                     c && set_str(c, "type", "Ready") &&
                     set_str(c, "status", n->ready == SE_TRUE ? "True" : "False");
        }
        if (ok && n->n_addresses) {
                json_t *addrs = json_array();
                ok = set_new(status, "addresses", addrs);
                for (uint32_t i = 0; ok && i < n->n_addresses; i++) {
                        json_t *a = json_object();
                        ok = json_array_append_new(addrs, a) == 0 && a &&
                             set_str(a, "type", n->addresses[i].type) &&
                             set_str(a, "address", n->addresses[i].address);
                }
        }
        return ok;
}

static bool encode_secret(json_t *o, const struct se_secret *s)
{
        if (s->data.n) {
                json_t *data = json_object();
                if (!set_new(o, "data", data))
                        return false;
                for (uint32_t i = 0; i < s->data.n; i++) {
                        size_t n = strlen(s->data.items[i].value);
                        char *b64 = se_malloc((n + 2) / 3 * 4 + 1);
                        if (!b64)
                                return false;
                        se_base64_encode(s->data.items[i].value, n, b64);
                        bool ok = set_str(data, s->data.items[i].key, b64);
                        free(b64);
                        if (!ok)
                                return false;
                }
        }
        return set_str(o, "type", s->type);
}

json_t *se_encode_object(const struct se_object *obj)
{
        json_t *o = json_object();
        if (!o)
                return NULL;
        bool ok = set_str(o, "kind", se_kind_name(obj->kind)) &&
                  set_str(o, "apiVersion", se_kind_api_version(obj->kind)) &&
                  set_new(o, "metadata", encode_meta(&obj->meta, obj->kind));
        if (ok) {
                switch (obj->kind) {
                case SE_KIND_SERVICE:
                        ok = encode_service(o, se_service_of(obj));
                        break;
                case SE_KIND_POD:
                        ok = encode_pod(o, se_pod_of(obj));
                        break;
                case SE_KIND_NODE:
                        ok = encode_node(o, se_node_of(obj));
                        break;
                case SE_KIND_NAMESPACE: {
                        const struct se_namespace *ns = se_namespace_of(obj);
                        json_t *status = json_object();
                        ok = !ns->phase ||
                             (set_new(o, "status", status) && set_str(status, "phase", ns->phase));
                        if (ns->phase == NULL)
                                json_decref(status);
                        break;
                }
                case SE_KIND_ENDPOINTS:
                        /* a slim one has no subsets to write */
                        ok = !se_endpoints_of(obj)->slim &&
                             encode_endpoints(o, se_endpoints_of(obj));
                        break;
                case SE_KIND_ENDPOINT_SLICE:
                        ok = encode_slice(o, se_endpoint_slice_of(obj));
                        break;
                case SE_KIND_CONFIGMAP: {
                        const struct se_configmap *cm = se_configmap_of(obj);
                        ok = !cm->data.n || set_new(o, "data", kv_object(&cm->data));
                        break;
                }
                case SE_KIND_SECRET:
                        ok = encode_secret(o, se_secret_of(obj));
                        break;
                case SE_KIND_SERVICE_CIDR: {
                        json_t *spec = json_object();
                        ok = set_new(o, "spec", spec) &&
                             set_new(spec, "cidrs", str_array(&se_service_cidr_of(obj)->cidrs));
                        break;
                }
                default:
                        ok = false;
                }
        }
        if (!ok) {
                json_decref(o);
                return NULL;
        }
        return o;
}

json_t *se_encode_list(const struct se_object *const *objs, size_t n)
{
        json_t *o = json_object(), *items = json_array();
        if (!o || !items || !set_str(o, "apiVersion", "v1") || !set_str(o, "kind", "List") ||
            !set_new(o, "metadata", json_object()) || json_object_set(o, "items", items) < 0)
                goto fail;
        for (size_t i = 0; i < n; i++)
                if (json_array_append_new(items, se_encode_object(objs[i])) < 0)
                        goto fail;
        json_decref(items);
        return o;
fail:
        json_decref(items);
        json_decref(o);
        return NULL;
}
