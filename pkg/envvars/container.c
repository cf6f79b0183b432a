/* The container's own variables: envFrom, env with valueFrom, expansion,
 * and the merge with the service variables (kubelet makeEnvironmentVariables). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>
#include <svcenv/parse.h>

#include "envvars_internal.h"

struct cctx {
        const struct se_envvars_input *in;
        const struct se_pod *pod;
        const struct se_container *c;
        const struct se_env_list *svc;
        struct se_hashmap svc_map; /* name -> index + 1 in svc, built on need */
        unsigned svc_scans; /* lookups answered by scanning svc so far */
        size_t total; /* bytes of values set so far (capped) */
        int lookup_err; /* a lookup that could not allocate */
        struct se_env_list *out;
        struct se_hashmap map; /* name -> index + 1 in out */
        struct se_strbuf key; /* scratch for lookups */
        struct se_strbuf val; /* scratch for values */
        struct se_diag *diag;
};

static const char *pod_ns(const struct cctx *x)
{
        return x->pod->obj.meta.namespace ? x->pod->obj.meta.namespace : "";
}

static const struct se_object *find_object(const struct cctx *x, enum se_kind kind,
                                           const char *name)
{
        const char *ns = pod_ns(x);
        if (x->in->store)
                return se_store_get(x->in->store, kind, ns, name);
        size_t n = kind == SE_KIND_CONFIGMAP ? x->in->n_configmaps : x->in->n_secrets;
        for (size_t i = 0; i < n; i++) {
                const struct se_object *o = kind == SE_KIND_CONFIGMAP ? &x->in->configmaps[i]->obj :
                                                                        &x->in->secrets[i]->obj;
                if (o->meta.namespace && o->meta.name && strcmp(o->meta.namespace, ns) == 0 &&
                    strcmp(o->meta.name, name) == 0)
                        return o;
        }
        return NULL;
}

static const struct se_kvlist *object_data(const struct se_object *o)
{
        const struct se_configmap *cm = se_configmap_of(o);
        const struct se_secret *s = se_secret_of(o);
        return cm ? &cm->data : s ? &s->data : NULL;
}

/* Sets name = value in out. A name set before keeps its place, takes the
 * new value and remembers the old one as a loser. */
static int set_var(struct cctx *x, const char *name, const char *value, enum se_env_origin origin,
                   const char *object, const char *key, uint32_t index)
{
        struct se_env_list *l = x->out;
        x->total += strlen(name) + strlen(value) + 2;
        if (x->total > SE_ENVVARS_MAX_TOTAL) {
                se_diag_set(x->diag, NULL, 0, 0,
                            "the container's variables are over %zu bytes (at %s)",
                            SE_ENVVARS_MAX_TOTAL, name);
                return -E2BIG;
        }
        uintptr_t idx = (uintptr_t)se_hashmap_get(&x->map, name);
        struct se_env_entry *e;
        if (idx) {
                e = &l->items[idx - 1];
                int r = envvars_list_add_loser(l, e, e);
                if (r < 0)
                        return r;
        } else {
                if (!(e = envvars_list_push(l)))
                        return -ENOMEM;
                if (!(e->name = envvars_list_strdup(l, name)) ||
                    se_hashmap_put(&x->map, e->name, (void *)(uintptr_t)l->n, NULL) < 0) {
                        l->n--;
                        return -ENOMEM;
                }
        }
        e->value = envvars_list_strdup(l, value);
        e->origin = origin;
        e->object = envvars_list_strdup(l, object);
        e->key = envvars_list_strdup(l, key);
        e->port = -1;
        e->index = index;
        if (!e->value || (object && !e->object) || (key && !e->key))
                return -ENOMEM;
        return 0;
}

static int index_list(struct se_hashmap *m, const struct se_env_list *l)
{
        for (size_t i = 0; l && i < l->n; i++)
                if (se_hashmap_put(m, l->items[i].name, (void *)(uintptr_t)(i + 1), NULL) < 0)
                        return -ENOMEM;
        return 0;
}

static const char *lookup(void *data, const char *name, size_t len)
{
        struct cctx *x = data;
        se_strbuf_reset(&x->key);
        if ((x->lookup_err = se_strbuf_add(&x->key, name, len)) < 0)
                return NULL;
        uintptr_t idx = (uintptr_t)se_hashmap_get(&x->map, x->key.buf);
        if (idx)
                return x->out->items[idx - 1].value;
        if (!x->svc || !x->svc->n)
                return NULL;
        /* a container refers to a few service variables: scanning is cheaper
         * than indexing thousands of names, until it is not */
        if (!x->svc_map.n && x->svc_scans < 8) {
                x->svc_scans++;
                const char *k = x->key.buf;
                for (size_t i = 0; i < x->svc->n; i++) {
                        const char *nm = x->svc->items[i].name;
                        if (nm[0] == k[0] && strcmp(nm, k) == 0)
                                return x->svc->items[i].value;
                }
                return NULL;
        }
        if (!x->svc_map.n && (x->lookup_err = index_list(&x->svc_map, x->svc)) < 0) {
                se_hashmap_release(&x->svc_map);
                return NULL; /* the caller sees lookup_err */
        }
        idx = (uintptr_t)se_hashmap_get(&x->svc_map, x->key.buf);
        return idx ? x->svc->items[idx - 1].value : NULL;
}

static int not_found(struct cctx *x, bool secret, const char *name)
{
        se_diag_set(x->diag, NULL, 0, 0, "%s \"%s\" not found", secret ? "secrets" : "configmaps",
                    name);
        return -ENOENT;
}

static int env_from(struct cctx *x)
{
        for (uint32_t i = 0; i < x->c->n_env_from; i++) {
                const struct se_env_from *f = &x->c->env_from[i];
                const char *name = f->name ? f->name : "";
                const struct se_object *o =
                        find_object(x, f->secret ? SE_KIND_SECRET : SE_KIND_CONFIGMAP, name);
                if (!o) {
                        if (f->optional == SE_TRUE)
                                continue;
                        return not_found(x, f->secret, name);
                }
                const struct se_kvlist *data = object_data(o);
                se_strbuf_reset(&x->val);
                se_strbuf_printf(&x->val, "%s/%s", pod_ns(x), name);
                char *object = se_arena_strdup(&x->out->arena, x->val.buf);
                if (!object || se_strbuf_failed(&x->val))
                        return -ENOMEM;
                /* v1.36 sets every key: the invalid-name filter went with
                 * RelaxedEnvironmentVariableValidation's GA. */
                for (uint32_t k = 0; k < data->n; k++) {
                        se_strbuf_reset(&x->key);
                        se_strbuf_puts(&x->key, f->prefix ? f->prefix : "");
                        se_strbuf_puts(&x->key, data->items[k].key);
                        if (se_strbuf_failed(&x->key))
                                return se_strbuf_failed(&x->key);
                        int r = set_var(x, x->key.buf, data->items[k].value,
                                        f->secret ? SE_ENV_FROM_ENVFROM_SECRET :
                                                    SE_ENV_FROM_ENVFROM_CONFIGMAP,
                                        object, data->items[k].key, i);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* ---- fieldRef (kubelet podFieldSelectorRuntimeValue + pkg/fieldpath) ---- */

/* Go's %q for one value (printable ASCII and valid UTF-8 kept as is). */
static void put_go_quoted(struct se_strbuf *sb, const char *s)
{
        se_strbuf_putc(sb, '"');
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                switch (*p) {
                case '"':
                        se_strbuf_puts(sb, "\\\"");
                        break;
                case '\\':
                        se_strbuf_puts(sb, "\\\\");
                        break;
                case '\a':
                        se_strbuf_puts(sb, "\\a");
                        break;
                case '\b':
                        se_strbuf_puts(sb, "\\b");
                        break;
                case '\f':
                        se_strbuf_puts(sb, "\\f");
                        break;
                case '\n':
                        se_strbuf_puts(sb, "\\n");
                        break;
                case '\r':
                        se_strbuf_puts(sb, "\\r");
                        break;
                case '\t':
                        se_strbuf_puts(sb, "\\t");
                        break;
                case '\v':
                        se_strbuf_puts(sb, "\\v");
                        break;
                default:
                        if (*p < 0x20 || *p == 0x7f)
                                se_strbuf_printf(sb, "\\x%02x", *p);
                        else
                                se_strbuf_putc(sb, (char)*p);
                }
        }
        se_strbuf_putc(sb, '"');
}

/* FormatMap: key="value" lines, sorted by key (kvlists are sorted). */
static void format_map(struct se_strbuf *sb, const struct se_kvlist *m)
{
        for (uint32_t i = 0; i < m->n; i++) {
                if (i)
                        se_strbuf_putc(sb, '\n');
                se_strbuf_puts(sb, m->items[i].key);
                se_strbuf_putc(sb, '=');
                put_go_quoted(sb, m->items[i].value);
        }
}

static bool dns1123_subdomain(const char *s, size_t n)
{
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && c != '-' && c != '.')
                        return false;
                if ((i == 0 || i == n - 1) && !alnum)
                        return false;
        }
        return true;
}

/* IsQualifiedName: [prefix/]name, name 1..63 of [-A-Za-z0-9_.] starting and
 * ending alphanumeric, prefix a DNS-1123 subdomain (checked in lower case
 * when fold, as for annotation keys). */
static bool qualified_name(const char *s, bool fold)
{
        const char *slash = strchr(s, '/');
        const char *name = s;
        if (slash) {
                char prefix[254];
                size_t plen = (size_t)(slash - s);
                if (strchr(slash + 1, '/') || plen >= sizeof(prefix))
                        return false;
                for (size_t i = 0; i < plen; i++)
                        prefix[i] = fold && s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + 32) : s[i];
                if (!dns1123_subdomain(prefix, plen))
                        return false;
                name = slash + 1;
        }
        size_t n = strlen(name);
        if (n == 0 || n > 63)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                bool alnum =
                        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
                if (!alnum && c != '-' && c != '_' && c != '.')
                        return false;
                if ((i == 0 || i == n - 1) && !alnum)
                        return false;
        }
        return true;
}

struct host_ips {
        char text[2][64];
        size_t n;
};

/* The kubelet's host IPs: its Node's InternalIPs, then ExternalIPs; the
 * first, and the first of the other family (utilnode.GetNodeHostIPs), in
 * canonical form. Without the Node in the store: the pod's status. */
static void host_ips(const struct cctx *x, struct host_ips *h)
{
        const struct se_pod *pod = x->pod;
        const struct se_node *node = NULL;
        h->n = 0;
        if (x->in->store && pod->node_name)
                node = se_node_of(se_store_get(x->in->store, SE_KIND_NODE, "", pod->node_name));
        struct se_ip first = { 0 };
        for (int pass = 0; node && pass < 2 && h->n < 2; pass++) {
                const char *type = pass == 0 ? "InternalIP" : "ExternalIP";
                for (uint32_t i = 0; i < node->n_addresses && h->n < 2; i++) {
                        const struct se_node_address *a = &node->addresses[i];
                        struct se_ip ip;
                        if (!a->type || strcmp(a->type, type) != 0 || !a->address ||
                            se_parse_ip(a->address, &ip) < 0)
                                continue;
                        if (h->n == 1 && ip.family == first.family)
                                continue;
                        if (h->n == 0)
                                first = ip;
                        se_ip_format(&ip, h->text[h->n++], sizeof(h->text[0]));
                }
        }
        if (h->n)
                return;
        const struct se_pod_more *more = pod->more;
        for (uint32_t i = 0; more && i < more->host_ips.n && h->n < 2; i++)
                snprintf(h->text[h->n++], sizeof(h->text[0]), "%s", more->host_ips.v[i]);
        if (!h->n && more && more->host_ip && *more->host_ip)
                snprintf(h->text[h->n++], sizeof(h->text[0]), "%s", more->host_ip);
}

/* The pod's IPs as the kubelet passes them: at most one per family, the
 * node's primary family (that of the host IP; IPv4 when unknown) first. */
static void pod_ips(const struct cctx *x, const char *ips[2], size_t *n)
{
        const struct se_pod *pod = x->pod;
        struct host_ips h;
        host_ips(x, &h);
        const char *host = h.n ? h.text[0] : NULL;
        enum se_ip_family primary = host && se_ip_family_of(host) == SE_IPV6 ? SE_IPV6 : SE_IPV4;
        enum se_ip_family fams[2] = { primary, primary == SE_IPV4 ? SE_IPV6 : SE_IPV4 };
        const char *one[1] = { pod->pod_ip };
        const char *const *v = pod->pod_ips.n ? pod->pod_ips.v : one;
        size_t nv = pod->pod_ips.n ? pod->pod_ips.n : (pod->pod_ip ? 1 : 0);
        *n = 0;
        for (size_t f = 0; f < 2; f++)
                for (size_t i = 0; i < nv; i++)
                        if (v[i] && se_ip_family_of(v[i]) == fams[f]) {
                                ips[(*n)++] = v[i];
                                break;
                        }
}

static int field_value(struct cctx *x, const char *path, struct se_strbuf *sb)
{
        const struct se_pod *pod = x->pod;
        const struct se_meta *m = &pod->obj.meta;
        size_t n = strlen(path);
        /* subscripted: metadata.labels['k'], metadata.annotations['k'] */
        const char *open = n >= 2 && strcmp(path + n - 2, "']") == 0 ? strstr(path, "['") : NULL;
        if (open && open > path) {
                size_t plen = (size_t)(open - path);
                bool labels = plen == 15 && strncmp(path, "metadata.labels", 15) == 0;
                bool annotations = plen == 20 && strncmp(path, "metadata.annotations", 20) == 0;
                if (!labels && !annotations) {
                        se_diag_set(x->diag, NULL, 0, 0,
                                    "field label does not support subscript: %s", path);
                        return -EINVAL;
                }
                se_strbuf_reset(&x->key);
                se_strbuf_add(&x->key, open + 2, n - plen - 4);
                if (se_strbuf_failed(&x->key))
                        return se_strbuf_failed(&x->key);
                const char *k = x->key.buf;
                /* annotation keys are checked in lower case, looked up as written */
                if (!qualified_name(k, annotations)) {
                        se_diag_set(x->diag, NULL, 0, 0,
                                    "invalid key subscript in %s: must be a qualified name", path);
                        return -EINVAL;
                }
                const char *v = se_kvlist_get(labels ? &m->labels : &m->annotations, k);
                return se_strbuf_puts(sb, v ? v : "");
        }
        const char *v = NULL;
        if (strcmp(path, "spec.nodeName") == 0 || strcmp(path, "spec.host") == 0) {
                v = pod->node_name;
        } else if (strcmp(path, "spec.serviceAccountName") == 0) {
                v = pod->more ? pod->more->service_account_name : NULL;
        } else if (strcmp(path, "status.podIP") == 0 || strcmp(path, "status.podIPs") == 0) {
                const char *ips[2];
                size_t k;
                pod_ips(x, ips, &k);
                if (path[12] == 's') {
                        for (size_t i = 0; i < k; i++)
                                se_strbuf_printf(sb, "%s%s", i ? "," : "", ips[i]);
                        return se_strbuf_failed(sb);
                }
                v = k ? ips[0] : pod->pod_ip;
        } else if (strcmp(path, "status.hostIP") == 0 || strcmp(path, "status.hostIPs") == 0) {
                struct host_ips h;
                host_ips(x, &h);
                size_t k = path[13] == 's' ? h.n : (h.n ? 1 : 0);
                for (size_t i = 0; i < k; i++)
                        se_strbuf_printf(sb, "%s%s", i ? "," : "", h.text[i]);
                return se_strbuf_failed(sb);
        } else if (strcmp(path, "metadata.name") == 0) {
                v = m->name;
        } else if (strcmp(path, "metadata.namespace") == 0) {
                v = m->namespace;
        } else if (strcmp(path, "metadata.uid") == 0) {
                v = m->uid;
        } else if (strcmp(path, "metadata.labels") == 0 ||
                   strcmp(path, "metadata.annotations") == 0) {
                format_map(sb, path[9] == 'l' ? &m->labels : &m->annotations);
                return se_strbuf_failed(sb);
        } else if (strcmp(path, "spec.restartPolicy") == 0 ||
                   strcmp(path, "spec.schedulerName") == 0 || strcmp(path, "status.phase") == 0) {
                /* accepted by the label conversion, not by the extractor */
                se_diag_set(x->diag, NULL, 0, 0, "unsupported fieldPath: %s", path);
                return -EINVAL;
        } else {
                se_diag_set(x->diag, NULL, 0, 0, "field label not supported: %s", path);
                return -EINVAL;
        }
        return se_strbuf_puts(sb, v ? v : "");
}

static int key_ref(struct cctx *x, const struct se_env_var *e, bool secret, bool *skip)
{
        const char *name = e->ref ? e->ref : "";
        const struct se_object *o =
                find_object(x, secret ? SE_KIND_SECRET : SE_KIND_CONFIGMAP, name);
        *skip = false;
        if (!o) {
                if (e->optional == SE_TRUE) {
                        *skip = true;
                        return 0;
                }
                return not_found(x, secret, name);
        }
        const char *v = se_kvlist_get(object_data(o), e->key ? e->key : "");
        if (!v) {
                if (e->optional == SE_TRUE) {
                        *skip = true;
                        return 0;
                }
                se_diag_set(x->diag, NULL, 0, 0, "couldn't find key %s in %s %s/%s", e->key,
                            secret ? "Secret" : "ConfigMap", pod_ns(x), name);
                return -ENOENT;
        }
        return se_strbuf_puts(&x->val, v);
}

static int env(struct cctx *x)
{
        for (uint32_t i = 0; i < x->c->n_env; i++) {
                const struct se_env_var *e = &x->c->env[i];
                enum se_env_origin origin = SE_ENV_FROM_VALUE;
                const char *object = NULL, *key = NULL;
                bool skip = false;
                int r = 0;
                se_strbuf_reset(&x->val);
                if (e->value && *e->value) {
                        r = se_envvars_expand(e->value, strlen(e->value), lookup, x, &x->val);
                        if (r == 0 && x->lookup_err < 0)
                                r = x->lookup_err;
                        if (r == -E2BIG)
                                se_diag_set(x->diag, NULL, 0, 0,
                                            "value of %s is over %zu bytes after expansion",
                                            e->name, SE_ENVVARS_MAX_VALUE);
                } else if (e->source == SE_ENV_FIELD_REF) {
                        origin = SE_ENV_FROM_FIELD;
                        key = e->ref;
                        r = field_value(x, e->ref ? e->ref : "", &x->val);
                } else if (e->source == SE_ENV_RESOURCE_REF) {
                        char buf[32];
                        origin = SE_ENV_FROM_RESOURCE;
                        key = e->ref;
                        object = e->container && *e->container ? e->container : x->c->name;
                        r = envvars_resource_value(x->pod, x->c, e->ref, e->container, e->divisor,
                                                   buf, sizeof(buf), x->diag);
                        if (r == 0)
                                r = se_strbuf_puts(&x->val, buf);
                } else if (e->source == SE_ENV_CONFIGMAP_KEY || e->source == SE_ENV_SECRET_KEY) {
                        bool secret = e->source == SE_ENV_SECRET_KEY;
                        origin = secret ? SE_ENV_FROM_SECRET_KEY : SE_ENV_FROM_CONFIGMAP_KEY;
                        r = key_ref(x, e, secret, &skip);
                        key = e->key;
                        se_strbuf_reset(&x->key);
                        se_strbuf_printf(&x->key, "%s/%s", pod_ns(x), e->ref ? e->ref : "");
                        if (se_strbuf_failed(&x->key))
                                return se_strbuf_failed(&x->key);
                        object = x->key.buf;
                }
                if (r < 0)
                        return r;
                if (skip)
                        continue;
                if ((r = set_var(x, e->name, x->val.buf, origin, object, key, i)) < 0)
                        return r;
        }
        return 0;
}

int se_envvars_container(const struct se_envvars_input *in, const struct se_pod *pod,
                         const struct se_container *c, const struct se_env_list *svc,
                         struct se_env_list *out, struct se_diag *diag)
{
        struct cctx x = { .in = in, .pod = pod, .c = c, .svc = svc, .out = out, .diag = diag };
        x.svc_map = (struct se_hashmap)SE_HASHMAP_INIT;
        x.map = (struct se_hashmap)SE_HASHMAP_INIT;
        se_strbuf_init(&x.key, 0);
        se_strbuf_init(&x.val, SE_ENVVARS_MAX_VALUE);
        int r = env_from(&x);
        if (r == 0)
                r = env(&x);
        se_strbuf_release(&x.key);
        se_strbuf_release(&x.val);
        se_hashmap_release(&x.svc_map);
        se_hashmap_release(&x.map);
        if (r < 0)
                se_env_list_release(out);
        return r;
}

static uint64_t name_bit(const char *s)
{
        return (uint64_t)1 << ((strlen(s) * 7 + (unsigned char)s[0]) & 63);
}

int se_envvars_build(const struct se_envvars_input *in, const struct se_pod *pod,
                     const struct se_container *c, struct se_env_list *out, struct se_diag *diag)
{
        struct se_env_list svc = SE_ENV_LIST_INIT;
        struct se_hashmap own = SE_HASHMAP_INIT;
        int r = se_envvars_pod_services(in, pod, &svc);
        if (r == 0)
                r = se_envvars_container(in, pod, c, &svc, out, diag);
        if (r == 0)
                r = index_list(&own, out);
        /* most service names are not the container's: a one-word filter on
         * length and first letter saves hashing each of them */
        uint64_t own_bits = 0;
        for (size_t i = 0; r == 0 && i < out->n; i++)
                own_bits |= name_bit(out->items[i].name);
        if (r == 0 && out->alloc < out->n + svc.n) {
                struct se_env_entry *p = se_reallocarray(out->items, out->n + svc.n, sizeof(*p));
                if (p) {
                        out->items = p;
                        out->alloc = out->n + svc.n;
                } else {
                        r = -ENOMEM;
                }
        }
        for (size_t i = 0; r == 0 && i < svc.n; i++) {
                const struct se_env_entry *s = &svc.items[i];
                uintptr_t idx = 0;
                if (own_bits & name_bit(s->name))
                        idx = (uintptr_t)se_hashmap_get(&own, s->name);
                if (idx) {
                        /* env and envFrom beat service variables, even when empty */
                        r = envvars_list_add_loser(out, &out->items[idx - 1], s);
                        continue;
                }
                /* strings stay in svc's arena, which out adopts below */
                out->items[out->n++] = *s;
        }
        se_hashmap_release(&own);
        if (r == 0) {
                out->adopted = svc.arena;
                svc.arena = (struct se_arena)SE_ARENA_INIT;
        }
        se_env_list_release(&svc);
        if (r < 0)
                se_env_list_release(out);
        return r;
}
