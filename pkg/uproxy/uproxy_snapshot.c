/* Proxy tables -> the workers' lookup: VIP:port/proto -> service port ->
 * endpoints; and the svcenv.io/scheduler annotation's check. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/macro.h>
#include <svcenv/uproxy.h>

static const char *const schedulers[] = { "rr", "wrr", "lc", "wlc",    "sed", "nq",
                                          "dh", "sh",  "mh", "random", "p2c" };

static const char *trim(char *s)
{
        while (*s == ' ' || *s == '\t')
                s++;
        char *e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                *--e = 0;
        return s;
}

int se_uproxy_parse_scheduler(const char *s, char out[SE_UPROXY_MAX_SCHED], struct se_diag *diag)
{
        char buf[SE_UPROXY_MAX_SCHED * 2];
        size_t len = strnlen(s, sizeof(buf));
        if (len >= sizeof(buf)) {
                se_diag_set(diag, NULL, 0, 0, "scheduler: value longer than %zu bytes",
                            sizeof(buf) - 1);
                return -EINVAL;
        }
        memcpy(buf, s, len + 1);
        char norm[sizeof(buf)] = "";
        size_t n = 0;
        bool hashing = false;
        unsigned item = 0;
        /* split by hand: an empty item is an error, not skipped */
        for (char *p = buf;; item++) {
                char *comma = strchr(p, ',');
                if (comma)
                        *comma = 0;
                const char *it = trim(p);
                bool ok = false;
                if (item == 0) {
                        for (size_t i = 0; i < SE_ARRAY_SIZE(schedulers); i++)
                                ok |= strcmp(it, schedulers[i]) == 0;
                        hashing = strcmp(it, "sh") == 0 || strcmp(it, "mh") == 0;
                } else {
                        ok = hashing && (strcmp(it, "port") == 0 || strcmp(it, "fallback") == 0);
                }
                if (!ok) {
                        se_diag_set(diag, NULL, 0, 0, "scheduler: item %u \"%.40s\" is not %s",
                                    item + 1, it,
                                    item == 0 ? "a known scheduler" :
                                                "a flag (port, fallback; sh and mh only)");
                        return -EINVAL;
                }
                int w = snprintf(norm + n, sizeof(norm) - n, "%s%s", item ? "," : "", it);
                if (w < 0 || (size_t)w >= sizeof(norm) - n)
                        return -EINVAL;
                n += (size_t)w;
                if (!comma)
                        break;
                p = comma + 1;
        }
        if (n >= SE_UPROXY_MAX_SCHED) {
                se_diag_set(diag, NULL, 0, 0, "scheduler: value longer than %d bytes",
                            SE_UPROXY_MAX_SCHED - 1);
                return -EINVAL;
        }
        memcpy(out, norm, n + 1);
        return 0;
}

struct se_uproxy_snapshot *se_uproxy_snapshot_free(struct se_uproxy_snapshot *s)
{
        if (s) {
                se_arena_release(&s->arena);
                free(s);
        }
        return NULL;
}

static int vip_cmp(const struct se_uproxy_vip *a, const struct se_uproxy_vip *b)
{
        if (a->node_port != b->node_port)
                return a->node_port ? 1 : -1;
        if (a->family != b->family)
                return a->family < b->family ? -1 : 1;
        if (a->proto != b->proto)
                return a->proto < b->proto ? -1 : 1;
        if (a->port != b->port)
                return a->port < b->port ? -1 : 1;
        return memcmp(a->addr, b->addr, 16);
}

static int vip_qcmp(const void *a, const void *b)
{
        int c = vip_cmp(a, b);
        if (c)
                return c;
        /* equal VIPs (two services claiming one externalIP): the lower index
         * first, so the choice is deterministic */
        const struct se_uproxy_vip *x = a, *y = b;
        return x->svc < y->svc ? -1 : x->svc > y->svc;
}

const struct se_uproxy_vip *se_uproxy_snapshot_find(const struct se_uproxy_snapshot *s, int family,
                                                    const uint8_t *addr, uint16_t port, int proto)
{
        struct se_uproxy_vip key = { .family = family, .port = port, .proto = (uint8_t)proto };
        memcpy(key.addr, addr, family == AF_INET ? 4 : 16);
        for (int pass = 0; pass < 2; pass++) {
                if (pass == 1) {
                        memset(key.addr, 0, sizeof(key.addr));
                        key.node_port = true;
                }
                /* lower bound: the first equal entry wins */
                size_t lo = 0, hi = s->n_vips;
                while (lo < hi) {
                        size_t mid = lo + (hi - lo) / 2;
                        if (vip_cmp(&s->vips[mid], &key) < 0)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                if (lo < s->n_vips && vip_cmp(&s->vips[lo], &key) == 0)
                        return &s->vips[lo];
        }
        return NULL;
}

static int ep_sockaddr(struct se_uproxy_ep *ep, const struct se_proxy_endpoint *pe)
{
        memset(&ep->addr, 0, sizeof(ep->addr));
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ep->addr;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ep->addr;
        if (pe->port <= 0 || pe->port > 65535)
                return -EINVAL;
        if (inet_pton(AF_INET, pe->ip, &a4->sin_addr) == 1) {
                a4->sin_family = AF_INET;
                a4->sin_port = htons((uint16_t)pe->port);
                ep->addr_len = sizeof(*a4);
        } else if (inet_pton(AF_INET6, pe->ip, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons((uint16_t)pe->port);
                ep->addr_len = sizeof(*a6);
        } else {
                return -EINVAL;
        }
        return 0;
}

static bool add_vip(struct se_uproxy_vip *v, int family, const char *ip, uint16_t port,
                    uint8_t proto, uint32_t svc)
{
        memset(v, 0, sizeof(*v));
        v->family = family;
        v->port = port;
        v->proto = proto;
        v->svc = svc;
        if (!ip) {
                v->node_port = true;
                return true;
        }
        return inet_pton(family, ip, v->addr) == 1;
}

static const char *scheduler_of(const struct se_store *store, const struct se_proxy_svcport *sp,
                                const char *def, char out[SE_UPROXY_MAX_SCHED], bool *bad)
{
        snprintf(out, SE_UPROXY_MAX_SCHED, "%s", def);
        if (!store)
                return out;
        const struct se_object *o = se_store_get(store, SE_KIND_SERVICE, sp->ns, sp->name);
        const char *v = o ? se_kvlist_get(&o->meta.annotations, SE_UPROXY_SCHED_ANNOTATION) : NULL;
        struct se_diag d;
        if (v && se_uproxy_parse_scheduler(v, out, &d) < 0) {
                snprintf(out, SE_UPROXY_MAX_SCHED, "%s", def);
                *bad = true;
        }
        return out;
}

int se_uproxy_snapshot_build(const struct se_proxy_table *const *tables, unsigned n,
                             const struct se_store *store, const char *default_sched,
                             struct se_uproxy_snapshot **ret)
{
        const char *def = default_sched ? default_sched : "rr";
        struct se_uproxy_snapshot *s = se_calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        size_t n_svcs = 0, n_vips = 0;
        for (unsigned t = 0; t < n; t++)
                for (uint32_t i = 0; i < tables[t]->n_ports; i++) {
                        const struct se_proxy_svcport *sp = &tables[t]->ports[i];
                        if (sp->n_eps > SE_UPROXY_MAX_EPS) {
                                se_uproxy_snapshot_free(s);
                                return -E2BIG;
                        }
                        n_svcs++;
                        n_vips += 2 + sp->n_external_ips + sp->n_lb_vips;
                }
        s->svcs = se_arena_array(&s->arena, n_svcs ? n_svcs : 1, sizeof(*s->svcs));
        s->vips = se_arena_array(&s->arena, n_vips ? n_vips : 1, sizeof(*s->vips));
        if (!s->svcs || !s->vips)
                goto oom;
        for (unsigned t = 0; t < n; t++) {
                int family = tables[t]->family == SE_IPV6 ? AF_INET6 : AF_INET;
                for (uint32_t i = 0; i < tables[t]->n_ports; i++) {
                        const struct se_proxy_svcport *sp = &tables[t]->ports[i];
                        uint8_t proto;
                        if (sp->protocol == SE_PROTO_TCP)
                                proto = IPPROTO_TCP;
                        else if (sp->protocol == SE_PROTO_UDP)
                                proto = IPPROTO_UDP;
                        else
                                continue;
                        struct se_uproxy_svc *sv = &s->svcs[s->n_svcs];
                        char key[600];
                        snprintf(key, sizeof(key), "%s/%s%s", sp->spn, sp->proto,
                                 family == AF_INET6 ? "/v6" : "");
                        sv->key = se_arena_strdup(&s->arena, key);
                        sv->spn = se_arena_strdup(&s->arena, sp->spn);
                        if (!sv->key || !sv->spn)
                                goto oom;
                        sv->proto = proto;
                        bool bad = false;
                        scheduler_of(store, sp, def, sv->scheduler, &bad);
                        s->n_bad_sched += bad;
                        sv->affinity = sp->affinity;
                        sv->affinity_timeout = sp->affinity_timeout;
                        sv->eps = se_arena_array(&s->arena, sp->n_eps ? sp->n_eps : 1,
                                                 sizeof(*sv->eps));
                        if (!sv->eps)
                                goto oom;
                        for (uint32_t e = 0; e < sp->n_eps; e++) {
                                const struct se_proxy_endpoint *pe = &sp->eps[e];
                                struct se_uproxy_ep *ep = &sv->eps[sv->n_eps];
                                if (ep_sockaddr(ep, pe) < 0)
                                        continue; /* not of an address we can reach */
                                if (!(ep->str = se_arena_strdup(&s->arena, pe->str)))
                                        goto oom;
                                ep->ready = pe->ready;
                                ep->serving = pe->serving;
                                ep->terminating = pe->terminating;
                                sv->n_eps++;
                        }
                        uint32_t idx = s->n_svcs++;
                        uint16_t port = (uint16_t)sp->port;
                        if (sp->cluster_ip &&
                            add_vip(&s->vips[s->n_vips], family, sp->cluster_ip, port, proto, idx))
                                s->n_vips++;
                        for (uint32_t k = 0; k < sp->n_external_ips; k++)
                                if (add_vip(&s->vips[s->n_vips], family, sp->external_ips[k], port,
                                            proto, idx))
                                        s->n_vips++;
                        for (uint32_t k = 0; k < sp->n_lb_vips; k++)
                                if (add_vip(&s->vips[s->n_vips], family, sp->lb_vips[k], port,
                                            proto, idx))
                                        s->n_vips++;
                        if (sp->node_port > 0 && sp->node_port <= 65535)
                                add_vip(&s->vips[s->n_vips++], family, NULL,
                                        (uint16_t)sp->node_port, proto, idx);
                }
        }
        qsort(s->vips, s->n_vips, sizeof(*s->vips), vip_qcmp);
        *ret = s;
        return 0;
oom:
        se_uproxy_snapshot_free(s);
        return -ENOMEM;
}
