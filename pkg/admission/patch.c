/* The JSON patch that gives a pod's containers their service variables. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/decode.h>
#include <svcenv/hashmap.h>
#include <svcenv/macro.h>
#include <svcenv/store.h>
#include <svcenv/strv.h>

#include "admission_internal.h"

#define MAX_SELECTED 1024 /* services named in svcenv.io/services */

/* Value in the defined-names map for a key of an envFrom source. */
static const char env_from_key;

static const struct se_object *find(const struct se_envvars_input *in, enum se_kind kind,
                                    const char *ns, const char *name)
{
        if (in->store)
                return se_store_get(in->store, kind, ns, name);
        const struct se_object *const *v = NULL;
        size_t n = 0;
        if (kind == SE_KIND_SERVICE) {
                v = (const struct se_object *const *)in->services;
                n = in->n_services;
        } else if (kind == SE_KIND_CONFIGMAP) {
                v = (const struct se_object *const *)in->configmaps;
                n = in->n_configmaps;
        } else if (kind == SE_KIND_SECRET) {
                v = (const struct se_object *const *)in->secrets;
                n = in->n_secrets;
        }
        for (size_t i = 0; i < n; i++)
                if (v[i] && strcmp(v[i]->meta.namespace, ns) == 0 &&
                    strcmp(v[i]->meta.name, name) == 0)
                        return v[i];
        return NULL;
}

/* The services named in the annotation (comma-separated, blanks ignored),
 * as a set of "ns/name" keys, the origin envvars gives their variables.
 * `kubernetes` also names default/kubernetes. Unknown names are kept too:
 * they match no variable. */
static int select_services(const char *ns, const char *list, struct se_hashmap *set,
                           struct se_strv *keys)
{
        char name[SE_MAX_NAME_LEN + 1];
        const char *p = list;
        size_t n = 0;
        while (*p && n < MAX_SELECTED) {
                const char *end = strchr(p, ',');
                if (!end)
                        end = p + strlen(p);
                while (p < end && (*p == ' ' || *p == '\t'))
                        p++;
                const char *q = end;
                while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
                        q--;
                if (q > p && (size_t)(q - p) <= SE_MAX_NAME_LEN) {
                        memcpy(name, p, (size_t)(q - p));
                        name[q - p] = '\0';
                        for (int pass = 0; pass < 2; pass++) {
                                const char *sns = pass == 0 ? ns : "default";
                                if (pass == 1 &&
                                    (strcmp(name, "kubernetes") != 0 || strcmp(ns, "default") == 0))
                                        break;
                                char *key = NULL;
                                if (se_asprintf(&key, "%s/%s", sns, name) < 0 ||
                                    se_strv_push_consume(keys, key) < 0 ||
                                    se_hashmap_put(set, key, SE_UNCONST(char, &env_from_key),
                                                   NULL) < 0)
                                        return -ENOMEM;
                                n++;
                        }
                }
                p = *end ? end + 1 : end;
        }
        return 0;
}

static void put_uint(struct se_strbuf *sb, size_t v)
{
        char buf[24], *p = buf + sizeof(buf);
        do {
                *--p = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        se_strbuf_add(sb, p, (size_t)(buf + sizeof(buf) - p));
}

/* `{"op":"add","path":"/spec/FIELD/IDX/env` (printf was the hot spot) */
static void put_path(struct se_strbuf *sb, const char *field, size_t idx)
{
        se_strbuf_puts(sb, "{\"op\":\"add\",\"path\":\"/spec/");
        se_strbuf_puts(sb, field);
        se_strbuf_putc(sb, '/');
        put_uint(sb, idx);
        se_strbuf_puts(sb, "/env");
}

struct ctx {
        const struct se_envvars_input *in;
        const struct se_admission_options *opt;
        const char *ns;
        const struct nsvars *svc;
        struct patch_out *po;
        struct se_strbuf *patch; /* po->stage */
        struct warnings *w;
        struct patch_stats *st;
        bool first; /* no operation written yet */
        struct se_hashmap defined; /* scratch: names the container sets */
        struct se_strv owned; /* scratch: envFrom names */
        bool *add; /* scratch: per service variable, to be added */
        /* svcenv.io/services: the "ns/name" of the Services whose variables
         * may be injected; NULL: all */
        const struct se_hashmap *only;
};

static void op_begin(struct ctx *x)
{
        if (!x->first)
                se_strbuf_putc(x->patch, ',');
        x->first = false;
}

/* Names the container sets itself: env, and the keys of envFrom sources
 * the input holds. 1 when an envFrom source is unknown: its keys, which
 * would beat service variables under the kubelet but lose to injected
 * ones, cannot be told apart, so the container must be left alone. */
static int collect_defined(struct ctx *x, const struct se_container *c)
{
        for (uint32_t i = 0; i < c->n_env; i++)
                if (c->env[i].name &&
                    se_hashmap_put(&x->defined, c->env[i].name, &c->env[i], NULL) < 0)
                        return -ENOMEM;
        for (uint32_t i = 0; i < c->n_env_from; i++) {
                const struct se_env_from *f = &c->env_from[i];
                const struct se_kvlist *data = NULL;
                if (f->name) {
                        const struct se_object *o =
                                find(x->in, f->secret ? SE_KIND_SECRET : SE_KIND_CONFIGMAP, x->ns,
                                     f->name);
                        const struct se_configmap *cm = se_configmap_of(o);
                        const struct se_secret *sec = se_secret_of(o);
                        data = cm ? &cm->data : sec ? &sec->data : NULL;
                }
                if (!data) {
                        admission_warnings_add(
                                x->w,
                                "svcenv: container %s: envFrom %s %s is not known to the "
                                "webhook; the container is left to the kubelet",
                                c->name, f->secret ? "secret" : "configMap",
                                f->name ? f->name : "");
                        return 1;
                }
                for (uint32_t k = 0; k < data->n; k++) {
                        char *name = NULL;
                        if (se_asprintf(&name, "%s%s", f->prefix ? f->prefix : "",
                                        data->items[k].key) < 0)
                                return -ENOMEM;
                        if (se_strv_push_consume(&x->owned, name) < 0)
                                return -ENOMEM;
                        /* env entries win over envFrom keys of the same name */
                        if (!se_hashmap_get(&x->defined, name) &&
                            se_hashmap_put(&x->defined, name, SE_UNCONST(char, &env_from_key),
                                           NULL) < 0)
                                return -ENOMEM;
                }
        }
        return 0;
}

static size_t exec_size(const char *name, const char *value)
{
        return strlen(name) + 1 + (value ? strlen(value) : 0) + 1 + sizeof(char *);
}

/* Service variable i: what is staged goes first, then the variable. */
static void out_var(struct ctx *x, size_t i)
{
        admission_b64w_add(&x->po->b64, x->patch->buf, x->patch->len);
        se_strbuf_reset(x->patch);
        admission_b64w_add_var(&x->po->b64, &x->svc->v[i]);
}

/* Variable i is defined by the container (d: its env entry or an envFrom
 * key): not added; a different value is a clash to report. */
static void skip_defined(struct ctx *x, size_t i, const void *d, size_t *n_add, size_t *add_bytes,
                         size_t *clashes)
{
        const struct rvar *e = &x->svc->v[i];
        const struct se_env_var *v = d;
        if (!x->add[i])
                return; /* not selected: nothing to skip or report */
        if (d != &env_from_key &&
            (v->source != SE_ENV_VALUE || strcmp(v->value ? v->value : "", e->value) != 0))
                (*clashes)++;
        x->add[i] = false;
        (*n_add)--;
        *add_bytes -= e->exec_size;
}

static int patch_container(struct ctx *x, const char *field, size_t idx,
                           const struct se_container *c, const json_t *jc)
{
        se_hashmap_release(&x->defined);
        se_strv_release(&x->owned);
        int r = collect_defined(x, c);
        if (r != 0)
                return r < 0 ? r : 0;

        /* every variable, minus the names the container defines */
        size_t n_add = x->svc->n, add_bytes = x->svc->exec_total, own_bytes = 0, clashes = 0;
        memset(x->add, 1, x->svc->n * sizeof(*x->add));
        /* Only the variables a selected Service won: a name whose winner among
         * all Services is not selected is left to the kubelet, which gives
         * the winner's value, as `svcenv env` says. */
        for (size_t i = 0; x->only && i < x->svc->n; i++) {
                const char *origin = x->svc->list.items[i].object;
                if (!origin || !se_hashmap_get(x->only, origin)) {
                        x->add[i] = false;
                        n_add--;
                        add_bytes -= x->svc->v[i].exec_size;
                }
        }
        const char *name;
        void *d;
        if (x->svc->indexed) { /* look up the container's few names */
                for (size_t it = 0; se_hashmap_next(&x->defined, &it, &name, &d);) {
                        uintptr_t k = (uintptr_t)se_hashmap_get(&x->svc->index, name);
                        if (k)
                                skip_defined(x, k - 1, d, &n_add, &add_bytes, &clashes);
                }
        } else {
                for (size_t i = 0; i < x->svc->n; i++)
                        if ((d = se_hashmap_get(&x->defined, x->svc->v[i].name)))
                                skip_defined(x, i, d, &n_add, &add_bytes, &clashes);
        }
        if (n_add == 0)
                return 0;
        for (uint32_t i = 0; i < c->n_env; i++)
                if (c->env[i].name)
                        own_bytes += exec_size(c->env[i].name, c->env[i].value);
        size_t max = x->opt->max_env_bytes ? x->opt->max_env_bytes : SE_ADMISSION_DEFAULT_ENV_BYTES;
        if (add_bytes + own_bytes > max) {
                admission_warnings_add(
                        x->w,
                        "svcenv: container %s: env of %zu bytes (%zu service variables) "
                        "passes the %zu-byte limit; none injected",
                        c->name, add_bytes + own_bytes, n_add, max);
                x->st->guarded = true;
                return 0;
        }
        if (clashes)
                admission_warnings_add(
                        x->w,
                        "svcenv: container %s: %zu service variables already set by the pod "
                        "were left unchanged",
                        c->name, clashes);

        const json_t *jenv = json_object_get(jc, "env");
        bool whole = !json_is_array(jenv) || json_array_size(jenv) == 0;
        const struct rvar *run = &x->svc->run[whole ? RUN_WHOLE : RUN_OPS];
        if (n_add == x->svc->n && idx == 0 && strcmp(field, "containers") == 0 && run->json) {
                /* the usual pod: its first container gets everything */
                op_begin(x);
                admission_b64w_add(&x->po->b64, x->patch->buf, x->patch->len);
                se_strbuf_reset(x->patch);
                admission_b64w_add_var(&x->po->b64, run);
        } else if (whole) {
                op_begin(x);
                put_path(x->patch, field, idx);
                se_strbuf_puts(x->patch, "\",\"value\":[");
                bool first = true;
                for (size_t i = 0; i < x->svc->n; i++) {
                        if (!x->add[i])
                                continue;
                        if (!first)
                                se_strbuf_putc(x->patch, ',');
                        first = false;
                        out_var(x, i);
                }
                se_strbuf_puts(x->patch, "]}");
        } else {
                size_t k = 0;
                for (size_t i = 0; i < x->svc->n; i++) {
                        if (!x->add[i])
                                continue;
                        op_begin(x);
                        put_path(x->patch, field, idx);
                        se_strbuf_putc(x->patch, '/');
                        put_uint(x->patch, k++);
                        se_strbuf_puts(x->patch, "\",\"value\":");
                        out_var(x, i);
                        se_strbuf_putc(x->patch, '}');
                }
        }
        x->st->n_vars += n_add;
        return se_strbuf_failed(x->patch) ? se_strbuf_failed(x->patch) :
                                            se_strbuf_failed(x->po->b64.out);
}

void admission_render_run(struct se_strbuf *sb, const struct nsvars *nv, const char *field,
                          size_t idx, bool whole)
{
        if (whole) {
                put_path(sb, field, idx);
                se_strbuf_puts(sb, "\",\"value\":[");
                for (size_t i = 0; i < nv->n; i++) {
                        if (i)
                                se_strbuf_putc(sb, ',');
                        se_strbuf_add(sb, nv->v[i].json, nv->v[i].json_len);
                }
                se_strbuf_puts(sb, "]}");
                return;
        }
        for (size_t i = 0; i < nv->n; i++) {
                if (i)
                        se_strbuf_putc(sb, ',');
                put_path(sb, field, idx);
                se_strbuf_putc(sb, '/');
                put_uint(sb, i);
                se_strbuf_puts(sb, "\",\"value\":");
                se_strbuf_add(sb, nv->v[i].json, nv->v[i].json_len);
                se_strbuf_putc(sb, '}');
        }
}

static int patch_list(struct ctx *x, const json_t *spec, const char *field,
                      const struct se_container *cs, uint32_t n)
{
        const json_t *arr = json_object_get(spec, field);
        if (!json_is_array(arr) || json_array_size(arr) != n)
                return n == 0 ? 0 : -EINVAL;
        for (uint32_t i = 0; i < n; i++) {
                int r = patch_container(x, field, i, &cs[i], json_array_get(arr, i));
                if (r < 0)
                        return r;
        }
        return 0;
}

static void mark_injected(struct ctx *x, const json_t *object)
{
        const json_t *meta = json_object_get(object, "metadata");
        if (!json_is_object(meta))
                return;
        const json_t *ann = json_object_get(meta, "annotations");
        if (json_is_object(ann)) {
                const json_t *jv = json_object_get(ann, SE_ADMISSION_ANN_INJECTED);
                const char *v = json_string_value(jv);
                if (v && json_string_length(jv) == 4 && strcmp(v, "true") == 0)
                        return;
                op_begin(x);
                se_strbuf_puts(x->patch, "{\"op\":\"add\",\"path\":\"/metadata/annotations/");
                se_json_pointer_escape(x->patch, SE_ADMISSION_ANN_INJECTED);
                se_strbuf_puts(x->patch, "\",\"value\":\"true\"}");
        } else {
                op_begin(x);
                se_strbuf_puts(x->patch, "{\"op\":\"add\",\"path\":\"/metadata/annotations\","
                                         "\"value\":{");
                se_json_put_string(x->patch, SE_ADMISSION_ANN_INJECTED);
                se_strbuf_puts(x->patch, ":\"true\"}}");
        }
}

int admission_build_patch(const struct se_envvars_input *in, struct se_admission_cache *cache,
                          const struct se_admission_options *opt, const json_t *object,
                          const char *ns, struct patch_out *po, struct warnings *w,
                          struct patch_stats *st, char *msg, size_t msg_size)
{
        struct se_object *obj = NULL;
        struct se_decode_error err = { 0 };
        int r = se_decode_object_flags(object, SE_KIND_POD, ns, SE_DECODE_NUL_AS_C080, &obj, &err);
        if (r < 0) {
                if (r != -ENOMEM)
                        snprintf(msg, msg_size, "pod does not decode: %s%s%s", err.path,
                                 *err.path ? ": " : "", err.message);
                return r == -ENOMEM ? r : -EINVAL;
        }
        const struct se_pod *pod = se_pod_of(obj);
        const struct se_kvlist *ann = &pod->obj.meta.annotations;
        const char *inject = se_kvlist_get(ann, SE_ADMISSION_ANN_INJECT);
        if ((inject && strcmp(inject, "false") == 0) ||
            se_kvlist_get(ann, "kubernetes.io/config.mirror")) {
                se_object_unref(obj);
                return 1;
        }

        struct se_hashmap only = SE_HASHMAP_INIT;
        struct se_strv only_keys = SE_STRV_INIT;
        const char *names = se_kvlist_get(ann, SE_ADMISSION_ANN_SERVICES);
        r = names ? select_services(ns, names, &only, &only_keys) : 0;
        struct nsvars *svc = NULL;
        bool links = se_pod_service_links(pod);
        if (r == 0)
                r = cache ? admission_cache_get(cache, in, ns, links, &svc) :
                            admission_nsvars_build(in, ns, links, false, &svc);
        if (r < 0 || svc->n == 0) {
                se_hashmap_release(&only);
                se_strv_release(&only_keys);
                admission_nsvars_unref(svc);
                se_object_unref(obj);
                return r;
        }

        struct ctx x = { .in = in,
                         .opt = opt,
                         .ns = ns,
                         .svc = svc,
                         .po = po,
                         .patch = &po->stage,
                         .w = w,
                         .st = st,
                         .first = true,
                         .defined = SE_HASHMAP_INIT,
                         .owned = SE_STRV_INIT,
                         .only = names ? &only : NULL };
        x.add = se_calloc(svc->n, sizeof(*x.add));
        if (!x.add)
                r = -ENOMEM;
        const json_t *spec = json_object_get(object, "spec");
        if (r == 0)
                r = patch_list(&x, spec, "initContainers", pod->init_containers,
                               pod->n_init_containers);
        if (r == 0)
                r = patch_list(&x, spec, "containers", pod->containers, pod->n_containers);
        if (r == -EINVAL)
                snprintf(msg, msg_size, "pod containers do not match the decoded pod");
        if (r == 0 && st->n_vars > 0)
                mark_injected(&x, object);
        free(x.add);
        se_hashmap_release(&x.defined);
        se_strv_release(&x.owned);
        se_hashmap_release(&only);
        se_strv_release(&only_keys);
        admission_nsvars_unref(svc);
        se_object_unref(obj);
        if (r == 0)
                r = se_strbuf_failed(&po->stage);
        return r;
}
