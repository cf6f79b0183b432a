/* Which UDP conntrack entries a sync makes stale (kube-proxy's
 * conntrack.CleanStaleEntries), pure: entries DNATed to a UDP endpoint that
 * went away would keep sending there; entries of a service port that had no
 * endpoints and now has some were blackholed (REJECT) and must be redone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/proxy.h>

#include "proxy_internal.h"

static const struct se_proxy_svcport *find_port(const struct se_proxy_table *t,
                                                const struct se_proxy_svcport *sp)
{
        uint32_t lo = 0, hi = t ? t->n_ports : 0;
        while (lo < hi) { /* ports are sorted by spn, then protocol */
                uint32_t mid = lo + (hi - lo) / 2;
                const struct se_proxy_svcport *m = &t->ports[mid];
                int c = strcmp(m->spn, sp->spn);
                if (c == 0)
                        c = (int)m->protocol - (int)sp->protocol;
                if (c == 0)
                        return m;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

/* Endpoints kube-proxy would send traffic to (ready, or serving-terminating
 * as fallback): the same set the writers use, by "ip:port". */
static bool has_ep(const struct se_proxy_svcport *sp, const char *str)
{
        /* eps are sorted by str and unique (proxy.h): a binary search keeps
         * the plan linear-logarithmic in a port's endpoints */
        uint32_t lo = 0, hi = sp ? sp->n_eps : 0;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                int c = strcmp(sp->eps[mid].str, str);
                if (c == 0)
                        return sp->eps[mid].ready || sp->eps[mid].serving;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return false;
}

static bool any_ep(const struct se_proxy_svcport *sp)
{
        for (uint32_t i = 0; sp && i < sp->n_eps; i++)
                if (sp->eps[i].ready || sp->eps[i].serving)
                        return true;
        return false;
}

static int add(struct se_proxy_ct_plan *p, const char *dst, int32_t port, const char *nat)
{
        if (p->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 16;
                if (cap > SE_PROXY_MAX_CT_FLOWS)
                        return -E2BIG;
                struct se_proxy_ct_flow *f = se_reallocarray(p->flows, cap, sizeof(*f));
                if (!f)
                        return -ENOMEM;
                p->flows = f;
                p->cap = cap;
        }
        struct se_proxy_ct_flow *f = &p->flows[p->n++];
        memset(f, 0, sizeof(*f));
        snprintf(f->orig_dst, sizeof(f->orig_dst), "%s", dst ? dst : "");
        f->orig_port_dst = port;
        snprintf(f->dst_nat, sizeof(f->dst_nat), "%s", nat ? nat : "");
        return 0;
}

/* One service port's flows: its cluster IP, external IPs and LB IPs by
 * address, its node port by port, each optionally narrowed to an endpoint. */
static int flows_of(struct se_proxy_ct_plan *p, const struct se_proxy_svcport *sp, const char *nat)
{
        int r = add(p, sp->cluster_ip, 0, nat);
        for (uint32_t i = 0; r == 0 && i < sp->n_external_ips; i++)
                r = add(p, sp->external_ips[i], 0, nat);
        for (uint32_t i = 0; r == 0 && i < sp->n_lb_vips; i++)
                r = add(p, sp->lb_vips[i], 0, nat);
        if (r == 0 && sp->node_port)
                r = add(p, NULL, sp->node_port, nat);
        return r;
}

int se_proxy_ct_plan(const struct se_proxy_table *old, const struct se_proxy_table *cur,
                     struct se_proxy_ct_plan *ret)
{
        int r = 0;
        memset(ret, 0, sizeof(*ret));
        /* endpoints gone (their service port gone too, or not) */
        for (uint32_t i = 0; old && r == 0 && i < old->n_ports; i++) {
                const struct se_proxy_svcport *o = &old->ports[i];
                if (o->protocol != SE_PROTO_UDP)
                        continue;
                const struct se_proxy_svcport *c = find_port(cur, o);
                for (uint32_t e = 0; r == 0 && e < o->n_eps; e++)
                        if ((o->eps[e].ready || o->eps[e].serving) && !has_ep(c, o->eps[e].str))
                                r = flows_of(ret, o, o->eps[e].ip);
        }
        /* service ports that now have endpoints and had none */
        for (uint32_t i = 0; cur && r == 0 && i < cur->n_ports; i++) {
                const struct se_proxy_svcport *c = &cur->ports[i];
                if (c->protocol == SE_PROTO_UDP && any_ep(c) && !any_ep(find_port(old, c)))
                        r = flows_of(ret, c, NULL);
        }
        if (r < 0)
                se_proxy_ct_plan_release(ret);
        return r;
}

void se_proxy_ct_plan_release(struct se_proxy_ct_plan *p)
{
        free(p->flows);
        memset(p, 0, sizeof(*p));
}

int se_proxy_ct_argv(const struct se_proxy_ct_flow *f, enum se_ip_family fam, char port[12],
                     const char *argv[16])
{
        size_t n = 0;
        argv[n++] = "conntrack";
        argv[n++] = "-D";
        argv[n++] = "-p";
        argv[n++] = "udp";
        argv[n++] = "-f";
        argv[n++] = fam == SE_IPV6 ? "ipv6" : "ipv4";
        if (f->orig_dst[0]) {
                argv[n++] = "--orig-dst";
                argv[n++] = f->orig_dst;
        }
        if (f->orig_port_dst) {
                snprintf(port, 12, "%d", f->orig_port_dst);
                argv[n++] = "--orig-port-dst";
                argv[n++] = port;
        }
        if (f->dst_nat[0]) {
                argv[n++] = "--dst-nat";
                argv[n++] = f->dst_nat;
        }
        argv[n] = NULL;
        return (int)n;
}
