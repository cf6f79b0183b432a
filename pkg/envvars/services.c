/* Service variables: which services a pod sees and what each one gives. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <svcenv/alloc.h>
#include <svcenv/hashmap.h>

#include "envvars_internal.h"

struct gen {
        struct se_env_list *out;
        struct se_hashmap *seen; /* name -> index + 1; NULL: no deduplication */
        bool check; /* this service's names may already be taken */
        bool record; /* this service's names may be taken later */
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

/* Decimal of a port number into buf (>= 12 bytes); printf is the hot spot
 * otherwise. */
static const char *utoa(int32_t v, char *buf)
{
        char *p = buf + 11;
        uint32_t u = v < 0 ? 0u - (uint32_t)v : (uint32_t)v;
        *p = '\0';
        do {
                *--p = (char)('0' + u % 10);
                u /= 10;
        } while (u);
        if (v < 0)
                *--p = '-';
        return p;
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
        if (g->seen && g->check) {
                uintptr_t idx = (uintptr_t)se_hashmap_get(g->seen, g->name.buf);
                if (idx) {
                        struct se_env_entry loser = { .name = g->name.buf,
                                                      .value = value,
                                                      .origin = SE_ENV_FROM_SERVICE,
                                                      .object = g->object,
                                                      .key = port_name,
                                                      .port = port };
                        return envvars_list_add_loser(l, &l->items[idx - 1], &loser);
                }
        }
        struct se_env_entry *e = envvars_list_push(l);
        if (!e)
                return -ENOMEM;
        e->name = envvars_list_strdup(l, g->name.buf);
        e->value = envvars_list_strdup(l, value);
        e->origin = SE_ENV_FROM_SERVICE;
        e->object = g->object;
        e->key = port_name && *port_name ? envvars_list_strdup(l, port_name) : NULL;
        e->port = port;
        if (!e->name || !e->value || (port_name && *port_name && !e->key)) {
                l->n--;
                return -ENOMEM;
        }
        if (g->seen && g->record &&
            se_hashmap_put(g->seen, e->name, (void *)(uintptr_t)l->n, NULL) < 0) {
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
        char num[12];
        int r;
        se_strbuf_reset(&g->val);
        se_strbuf_puts(&g->val, svc->obj.meta.namespace ? svc->obj.meta.namespace : "");
        se_strbuf_putc(&g->val, '/');
        se_strbuf_puts(&g->val, svc->obj.meta.name ? svc->obj.meta.name : "");
        g->object = se_strbuf_failed(&g->val) ? NULL : envvars_list_strdup(g->out, g->val.buf);
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
        if ((r = add(g, utoa(svc->ports[0].port, num), 0, svc->ports[0].name)) < 0)
                return r;
        size_t splen = g->name.len;
        for (uint32_t i = 0; i < svc->n_ports; i++) {
                const struct se_service_port *p = &svc->ports[i];
                if (!p->name || !*p->name)
                        continue;
                se_strbuf_truncate(&g->name, splen);
                se_strbuf_putc(&g->name, '_');
                put_mangled(&g->name, p->name);
                if ((r = add(g, utoa(p->port, num), (int32_t)i, p->name)) < 0)
                        return r;
        }
        for (uint32_t i = 0; i < svc->n_ports; i++) {
                const struct se_service_port *p = &svc->ports[i];
                const char *port = utoa(p->port, num);
                se_strbuf_reset(&g->val);
                se_strbuf_puts(&g->val, proto_lower(p->protocol));
                se_strbuf_puts(&g->val, v6 ? "://[" : "://");
                se_strbuf_puts(&g->val, ip);
                se_strbuf_puts(&g->val, v6 ? "]:" : ":");
                se_strbuf_puts(&g->val, port);
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
                se_strbuf_puts(&g->name, "_PORT_");
                se_strbuf_puts(&g->name, port);
                se_strbuf_putc(&g->name, '_');
                se_strbuf_puts(&g->name, proto_upper(p->protocol));
                size_t pp = g->name.len;
                if ((r = add(g, url, (int32_t)i, p->name)) < 0)
                        return r;
                static const char *const suffix[] = { "_PROTO", "_PORT", "_ADDR" };
                const char *vals[] = { proto_lower(p->protocol), port, ip };
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
                struct se_hashmap byname = SE_HASHMAP_INIT;
                sel = se_calloc(in->n_services + 1, sizeof(*sel));
                if (!sel)
                        return -ENOMEM;
                for (size_t i = 0; i < in->n_services; i++) {
                        const struct se_service *s = in->services[i];
                        if (!s || !ip_set(s))
                                continue;
                        /* the kubelet's if / else-if: the master rule (first one
                         * kept) also for pods in default */
                        if (is(s->obj.meta.namespace, "default") &&
                            is(s->obj.meta.name, "kubernetes")) {
                                if (!master)
                                        master = s;
                                continue;
                        }
                        if (links && is(s->obj.meta.namespace, ns) && s->obj.meta.name) {
                                /* a later one of the same name replaces (kubelet map) */
                                uintptr_t k = (uintptr_t)se_hashmap_get(&byname, s->obj.meta.name);
                                if (k) {
                                        sel[k - 1] = s;
                                        continue;
                                }
                                sel[n++] = s;
                                if (se_hashmap_put(&byname, s->obj.meta.name, (void *)(uintptr_t)n,
                                                   NULL) < 0) {
                                        se_hashmap_release(&byname);
                                        free(sel);
                                        return -ENOMEM;
                                }
                        }
                }
                se_hashmap_release(&byname);
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

/* Whether two ports of svc share a name (case folded, as the variable
 * names are) or a port/protocol pair. Linear: the number of ports is not
 * capped by the API server. seen is a zeroed bitmap of PORT_BITS bits, given
 * back zeroed; names a scratch map, given back empty. */
#define PORT_BITS ((size_t)(SE_PROTO_SCTP + 1) * 65536)
static int ports_collide(const struct se_service *svc, uint64_t *seen, struct se_hashmap *names,
                         struct se_arena *tmp, bool *ret)
{
        int r = 0;
        bool hit = false;
        uint32_t i = 0;
        for (; r == 0 && !hit && i < svc->n_ports; i++) {
                const struct se_service_port *p = &svc->ports[i];
                size_t bit = ((size_t)p->protocol % (SE_PROTO_SCTP + 1)) * 65536 +
                             ((unsigned)p->port & 0xffff);
                hit = seen[bit / 64] & (1ull << (bit % 64));
                seen[bit / 64] |= 1ull << (bit % 64);
                if (hit || !p->name || !*p->name)
                        continue;
                char *low = se_arena_strdup(tmp, p->name);
                if (!low) {
                        r = -ENOMEM;
                        break;
                }
                for (char *c = low; *c; c++)
                        *c = (char)tolower((unsigned char)*c);
                hit = se_hashmap_get(names, low) != NULL;
                if (!hit && se_hashmap_put(names, low, low, NULL) < 0)
                        r = -ENOMEM;
        }
        for (uint32_t k = 0; k < i; k++) { /* only the bits set above */
                const struct se_service_port *p = &svc->ports[k];
                size_t bit = ((size_t)p->protocol % (SE_PROTO_SCTP + 1)) * 65536 +
                             ((unsigned)p->port & 0xffff);
                seen[bit / 64] &= ~(1ull << (bit % 64));
        }
        se_hashmap_release(names);
        *ret = hit;
        return r;
}

/* Which services can share a variable name. Every suffix starts with '_',
 * so names of two services can only meet when one mangled service name is
 * the other's up to a '_' (x and x-service), when two names mangle alike, or
 * inside one service with repeated port names or (port, protocol) pairs
 * (invalid, but not trusted). Only those services pay for the name map. */
static int mark_related(const struct se_service **sel, long n, bool *check, bool *record)
{
        struct se_hashmap names = SE_HASHMAP_INIT;
        struct se_arena tmp = SE_ARENA_INIT;
        struct se_strbuf sb;
        char **m = se_calloc((size_t)n + 1, sizeof(*m));
        uint64_t *seen = se_calloc(PORT_BITS / 64, sizeof(*seen));
        struct se_hashmap port_names = SE_HASHMAP_INIT;
        int r = m && seen ? 0 : -ENOMEM;
        se_strbuf_init(&sb, 0);
        for (long i = 0; r == 0 && i < n; i++) {
                se_strbuf_reset(&sb);
                put_mangled(&sb, sel[i]->obj.meta.name);
                if ((r = se_strbuf_failed(&sb)) < 0 || !(m[i] = se_arena_strdup(&tmp, sb.buf)))
                        r = r < 0 ? r : -ENOMEM;
                uintptr_t k = r == 0 ? (uintptr_t)se_hashmap_get(&names, m[i]) : 0;
                if (k) {
                        check[i] = record[i] = check[k - 1] = record[k - 1] = true;
                } else if (r == 0 &&
                           se_hashmap_put(&names, m[i], (void *)(uintptr_t)(i + 1), NULL) < 0) {
                        r = -ENOMEM;
                }
                bool collide = false;
                if (r == 0 && sel[i]->n_ports > 1 &&
                    (r = ports_collide(sel[i], seen, &port_names, &tmp, &collide)) == 0 && collide)
                        check[i] = record[i] = true;
        }
        for (long i = 0; r == 0 && i < n; i++) {
                for (char *u = strchr(m[i], '_'); u; u = strchr(u + 1, '_')) {
                        *u = '\0';
                        uintptr_t k = (uintptr_t)se_hashmap_get(&names, m[i]);
                        *u = '_';
                        if (k) {
                                record[k - 1] = true;
                                check[i] = record[i] = true;
                        }
                }
        }
        se_strbuf_release(&sb);
        se_hashmap_release(&names);
        se_arena_release(&tmp);
        free(seen);
        free(m);
        return r;
}

int envvars_services(const struct se_envvars_input *in, const char *ns, bool service_links,
                     struct se_env_list *out)
{
        const struct se_service **sel;
        long n = select_services(in, ns ? ns : "", service_links, &sel);
        if (n < 0)
                return (int)n;
        struct se_hashmap seen = SE_HASHMAP_INIT;
        struct gen g = { .out = out, .seen = &seen };
        bool *flags = se_calloc(2 * (size_t)n + 2, sizeof(*flags));
        int r = flags ? mark_related(sel, n, flags, flags + n + 1) : -ENOMEM;
        size_t want = out->n;
        for (long i = 0; i < n; i++)
                want += 3 + 5 * (size_t)sel[i]->n_ports;
        if (r == 0 && want > out->alloc) {
                struct se_env_entry *p = se_reallocarray(out->items, want, sizeof(*p));
                if (p) {
                        out->items = p;
                        out->alloc = want;
                } else {
                        r = -ENOMEM;
                }
        }
        se_strbuf_init(&g.name, 0);
        se_strbuf_init(&g.val, 0);
        for (long i = 0; i < n && r == 0; i++) {
                g.check = flags[i];
                g.record = flags[n + 1 + i];
                r = generate(&g, sel[i]);
        }
        se_strbuf_release(&g.name);
        se_strbuf_release(&g.val);
        se_hashmap_release(&seen);
        free(flags);
        free(sel);
        if (r < 0)
                se_env_list_release(out);
        return r;
}

int se_envvars_services(const struct se_envvars_input *in, const char *ns, bool service_links,
                        struct se_env_list *out)
{
        return envvars_services(in, ns, service_links, out);
}

int se_envvars_pod_services(const struct se_envvars_input *in, const struct se_pod *pod,
                            struct se_env_list *out)
{
        return envvars_services(in, pod->obj.meta.namespace, se_pod_service_links(pod), out);
}
