/* Service variables: which services a pod sees and what each one gives. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "envvars_internal.h"

struct gen {
        struct se_env_list *out;
        struct se_hashmap *seen; /* name -> index + 1; NULL: no deduplication */
        struct se_strbuf name;
        struct se_strbuf val; /* scratch for the URL values */
        const char *object; /* "ns/name" of the service, in out's arena */
};

static bool ip_set(const struct se_service *svc)
{
        return svc->cluster_ip && *svc->cluster_ip && strcmp(svc->cluster_ip, "None") != 0;
}

/* Service and port names: '-' becomes '_', letters go upper case. */
static void put_mangled(struct se_strbuf *sb, const char *s)
{
        for (; *s; s++) {
                char c = *s;
                if (c == '-')
                        c = '_';
                else if (c >= 'a' && c <= 'z')
                        c = (char)(c - 'a' + 'A');
                se_strbuf_putc(sb, c);
        }
}

static const char *proto_upper(enum se_protocol p)
{
        return p == SE_PROTO_UDP ? "UDP" : p == SE_PROTO_SCTP ? "SCTP" : "TCP";
}

static const char *proto_lower(enum se_protocol p)
{
        return p == SE_PROTO_UDP ? "udp" : p == SE_PROTO_SCTP ? "sctp" : "tcp";
}

/* Adds g->name = value; a name already present keeps its first value and
 * records this one as the loser. */
static int add(struct gen *g, const char *value, int32_t port, const char *port_name)
{
        if (se_strbuf_failed(&g->name))
                return se_strbuf_failed(&g->name);
        struct se_env_list *l = g->out;
        if (g->seen) {
                uintptr_t idx = (uintptr_t)se_hashmap_get(g->seen, g->name.buf);
                if (idx) {
                        struct se_env_entry loser = { .name = g->name.buf,
                                                      .value = value,
                                                      .origin = SE_ENV_FROM_SERVICE,
                                                      .object = g->object,
                                                      .key = port_name,
                                                      .port = port };
                        return env_list_add_loser(l, &l->items[idx - 1], &loser);
                }
        }
        struct se_env_entry *e = env_list_push(l);
        if (!e)
                return -ENOMEM;
        e->name = env_list_strdup(l, g->name.buf);
        e->value = env_list_strdup(l, value);
        e->origin = SE_ENV_FROM_SERVICE;
        e->object = g->object;
        e->key = port_name && *port_name ? env_list_strdup(l, port_name) : NULL;
        e->port = port;
        if (!e->name || !e->value || (port_name && *port_name && !e->key)) {
                l->n--;
                return -ENOMEM;
        }
        if (g->seen && se_hashmap_put(g->seen, e->name, (void *)(uintptr_t)l->n, NULL) < 0) {
                l->n--;
                return -ENOMEM;
        }
        return 0;
}

static int generate(struct gen *g, const struct se_service *svc)
{
        if (!ip_set(svc) || svc->n_ports == 0)
                return 0;
        const char *ip = svc->cluster_ip;
        bool v6 = strchr(ip, ':') != NULL;
        char num[16];
        int r;
        se_strbuf_reset(&g->val);
        se_strbuf_printf(&g->val, "%s/%s", svc->obj.meta.namespace ? svc->obj.meta.namespace : "",
                         svc->obj.meta.name ? svc->obj.meta.name : "");
        g->object = se_strbuf_failed(&g->val) ? NULL : env_list_strdup(g->out, g->val.buf);
        if (!g->object)
                return -ENOMEM;
        const char *svc_name = svc->obj.meta.name ? svc->obj.meta.name : "";
        se_strbuf_reset(&g->name);
        put_mangled(&g->name, svc_name);
        size_t plen = g->name.len;

        se_strbuf_puts(&g->name, "_SERVICE_HOST");
        if ((r = add(g, ip, -1, NULL)) < 0)
                return r;
        se_strbuf_truncate(&g->name, plen);
        se_strbuf_puts(&g->name, "_SERVICE_PORT");
        snprintf(num, sizeof(num), "%d", (int)svc->ports[0].port);
        if ((r = add(g, num, 0, svc->ports[0].name)) < 0)
                return r;
        size_t splen = g->name.len;
        for (uint32_t i = 0; i < svc->n_ports; i++) {
                const struct se_service_port *p = &svc->ports[i];
                if (!p->name || !*p->name)
                        continue;
                se_strbuf_truncate(&g->name, splen);
                se_strbuf_putc(&g->name, '_');
                put_mangled(&g->name, p->name);
                snprintf(num, sizeof(num), "%d", (int)p->port);
                if ((r = add(g, num, (int32_t)i, p->name)) < 0)
                        return r;
        }
        for (uint32_t i = 0; i < svc->n_ports; i++) {
                const struct se_service_port *p = &svc->ports[i];
                snprintf(num, sizeof(num), "%d", (int)p->port);
                se_strbuf_reset(&g->val);
                se_strbuf_printf(&g->val, v6 ? "%s://[%s]:%d" : "%s://%s:%d",
                                 proto_lower(p->protocol), ip, (int)p->port);
                if (se_strbuf_failed(&g->val))
                        return se_strbuf_failed(&g->val);
                const char *url = g->val.buf;
                if (i == 0) {
                        se_strbuf_truncate(&g->name, plen);
                        se_strbuf_puts(&g->name, "_PORT");
                        if ((r = add(g, url, 0, p->name)) < 0)
                                return r;
                }
                se_strbuf_truncate(&g->name, plen);
                se_strbuf_printf(&g->name, "_PORT_%d_%s", (int)p->port, proto_upper(p->protocol));
                size_t pp = g->name.len;
                if ((r = add(g, url, (int32_t)i, p->name)) < 0)
                        return r;
                static const char *const suffix[] = { "_PROTO", "_PORT", "_ADDR" };
                const char *vals[] = { proto_lower(p->protocol), num, ip };
                for (size_t k = 0; k < 3; k++) {
                        se_strbuf_truncate(&g->name, pp);
                        se_strbuf_puts(&g->name, suffix[k]);
                        if ((r = add(g, vals[k], (int32_t)i, p->name)) < 0)
                                return r;
                }
        }
        return 0;
}

int se_envvars_from_service(const struct se_service *svc, struct se_env_list *out)
{
        struct gen g = { .out = out };
        se_strbuf_init(&g.name, 0);
        se_strbuf_init(&g.val, 0);
        int r = generate(&g, svc);
        se_strbuf_release(&g.name);
        se_strbuf_release(&g.val);
        return r;
}

static int cmp_svc(const void *a, const void *b)
{
        const struct se_service *x = *(const struct se_service *const *)a;
        const struct se_service *y = *(const struct se_service *const *)b;
        return strcmp(x->obj.meta.name, y->obj.meta.name);
}

static bool is(const char *a, const char *b)
{
        return a && strcmp(a, b) == 0;
}

/* The services of ns (when links) and the master service, keyed by name
 * as the kubelet keys them. *ret is a new array sorted by name. */
static long select_services(const struct se_envvars_input *in, const char *ns, bool links,
                            const struct se_service ***ret)
{
        const struct se_service **sel = NULL;
        const struct se_service *master = NULL;
        long n = 0;
        *ret = NULL;
        if (in->store) {
                const struct se_object **objs = NULL;
                long m = 0;
                if (links && (m = se_store_list(in->store, SE_KIND_SERVICE, ns, &objs)) < 0)
                        return m;
                sel = se_calloc((size_t)m + 1, sizeof(*sel));
                if (!sel) {
                        free(objs);
                        return -ENOMEM;
                }
                for (long i = 0; i < m; i++) {
                        const struct se_service *s = se_service_of(objs[i]);
                        if (s && ip_set(s))
                                sel[n++] = s;
                }
                free(objs);
                master = se_service_of(
                        se_store_get(in->store, SE_KIND_SERVICE, "default", "kubernetes"));
        } else {
                sel = se_calloc(in->n_services + 1, sizeof(*sel));
                if (!sel)
                        return -ENOMEM;
                for (size_t i = 0; i < in->n_services; i++) {
                        const struct se_service *s = in->services[i];
                        if (!s || !ip_set(s))
                                continue;
                        if (is(s->obj.meta.namespace, "default") &&
                            is(s->obj.meta.name, "kubernetes")) {
                                if (!master)
                                        master = s;
                        }
                        if (links && is(s->obj.meta.namespace, ns)) {
                                /* a later one of the same name replaces (kubelet map) */
                                long k = 0;
                                while (k < n && strcmp(sel[k]->obj.meta.name, s->obj.meta.name))
                                        k++;
                                sel[k] = s;
                                n += k == n;
                        }
                }
        }
        if (master && ip_set(master)) {
                bool have = false;
                for (long i = 0; i < n && !have; i++)
                        have = is(sel[i]->obj.meta.name, "kubernetes");
                if (!have)
                        sel[n++] = master;
        }
        qsort(sel, (size_t)n, sizeof(*sel), cmp_svc);
        *ret = sel;
        return n;
}

int se_envvars_services(const struct se_envvars_input *in, const char *ns, bool service_links,
                        struct se_env_list *out)
{
        const struct se_service **sel;
        long n = select_services(in, ns ? ns : "", service_links, &sel);
        if (n < 0)
                return (int)n;
        struct se_hashmap seen = SE_HASHMAP_INIT;
        struct gen g = { .out = out, .seen = &seen };
        se_strbuf_init(&g.name, 0);
        se_strbuf_init(&g.val, 0);
        int r = 0;
        for (long i = 0; i < n && r == 0; i++)
                r = generate(&g, sel[i]);
        se_strbuf_release(&g.name);
        se_strbuf_release(&g.val);
        se_hashmap_release(&seen);
        free(sel);
        if (r < 0)
                se_env_list_release(out);
        return r;
}
