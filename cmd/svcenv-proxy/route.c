/* Per-Service routing in the iptables and nftables modes: the ports whose
 * kernel rules the writers leave out (se_proxy_in_kernel false: a scheduler
 * those rules cannot express, or svcenv.io/retry) are served by the
 * userspace proxy, started the first time one appears and kept until exit.
 * Runs after every successful sync of the proxier, on its thread. With -f,
 * SIGHUP makes the store mirror the files again (the proxier keeps its
 * store, so objects are put and deleted, and its callbacks see them). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/jsonstr.h>
#include <svcenv/lb.h>
#include <svcenv/log.h>
#include <svcenv/macro.h>
#include <svcenv/manifest.h>
#include <svcenv/uproxy.h>

#include "proxyd.h"

static bool routing_annotated(const struct se_object *svc)
{
        const struct se_kvlist *a = &svc->meta.annotations;
        return se_kvlist_get(a, SE_PROXY_SCHED_ANNOTATION) ||
               se_kvlist_get(a, SE_PROXY_RETRY_ANNOTATION);
}

/* The count of annotated Services, so that a sync of a cluster without
 * them costs no walk over every Service (10,000 of them: more than the
 * carried sync that came before it). */
static void count_annotated(void *data, enum se_store_event ev, const struct se_object *old,
                            const struct se_object *new_obj)
{
        (void)ev;
        struct proxyd *d = data;
        d->route_annotated +=
                (new_obj && routing_annotated(new_obj)) - (old && routing_annotated(old));
}

int proxyd_route_watch(struct proxyd *d)
{
        int r = se_store_subscribe(d->store, SE_KIND_SERVICE, count_annotated, d);
        if (r < 0)
                return r;
        const struct se_object **objs = NULL;
        se_store_rdlock(d->store);
        long n = se_store_list_unordered(d->store, SE_KIND_SERVICE, NULL, &objs);
        for (long i = 0; i < n; i++)
                d->route_annotated += routing_annotated(objs[i]);
        se_store_unlock(d->store);
        free(objs);
        return n < 0 ? (int)n : 0;
}

/* view: t's routed ports only, pointing into t (free view->ports alone). */
static int routed_view(const struct se_proxy_table *t, bool nft, struct se_proxy_table *view)
{
        memset(view, 0, sizeof(*view));
        view->family = t->family;
        view->ports = se_calloc((size_t)t->n_ports + 1, sizeof(*view->ports));
        if (!view->ports)
                return -ENOMEM;
        for (uint32_t i = 0; i < t->n_ports; i++)
                if (!se_proxy_in_kernel(&t->ports[i], nft)) {
                        view->ports[view->n_ports++] = t->ports[i];
                        view->n_endpoints += t->ports[i].n_eps;
                }
        return 0;
}

/* Appends to sb one line per invalid routing annotation of svc, in the
 * store's order: "ns\1name\1key\1value" (value JSON-escaped, capped). */
static void bad_lines(const struct se_object *svc, struct se_strbuf *sb)
{
        const struct se_kvlist *a = &svc->meta.annotations;
        const char *sched = se_kvlist_get(a, SE_PROXY_SCHED_ANNOTATION);
        const char *retry = se_kvlist_get(a, SE_PROXY_RETRY_ANNOTATION);
        enum se_lb_kind kind;
        unsigned flags;
        /* in the order of the keys: lines sorted as the store's Services */
        const char *keys[2] = { SE_PROXY_RETRY_ANNOTATION, SE_PROXY_SCHED_ANNOTATION };
        const char *vals[2] = { NULL, NULL };
        if (retry && strcmp(retry, "true") != 0 && strcmp(retry, "false") != 0)
                vals[0] = retry;
        if (sched && se_lb_parse(sched, &kind, &flags) != 0)
                vals[1] = sched;
        for (unsigned i = 0; i < 2; i++) {
                if (!vals[i])
                        continue;
                char capped[65]; /* the log names the value; 64 bytes tell it */
                snprintf(capped, sizeof(capped), "%s", vals[i]);
                se_strbuf_printf(sb, "%s\1%s\1%s\1", svc->meta.namespace ? svc->meta.namespace : "",
                                 svc->meta.name, keys[i]);
                se_json_put_escaped(sb, capped);
                se_strbuf_putc(sb, '\n');
        }
}

/* Logs one line of bad_lines, [line, end): its four fields. */
static void say_bad(const char *line, const char *end)
{
        const char *f[5] = { line };
        for (unsigned k = 1; k < 4; k++) {
                const char *sep = memchr(f[k - 1], '\1', (size_t)(end - f[k - 1]));
                f[k] = sep ? sep + 1 : end; /* (a name with \1 in it: said as it comes) */
        }
        f[4] = end + 1;
        int w[4];
        for (unsigned k = 0; k < 4; k++)
                w[k] = f[k + 1] > f[k] ? (int)(f[k + 1] - f[k] - 1) : 0;
        se_log_warn("service %.*s/%.*s: invalid %.*s value \"%.*s\": served as without it", w[0],
                    f[0], w[1], f[1], w[2], f[2], w[3], f[3]);
}

/* Logs each invalid routing annotation once while it stays: a Service
 * whose value changes to another invalid one is logged again. Runs under
 * the store's read lock. */
static void warn_bad(struct proxyd *d)
{
        struct se_strbuf now;
        se_strbuf_init(&now, 0);
        const struct se_object **objs = NULL;
        long n = se_store_list(d->store, SE_KIND_SERVICE, NULL, &objs);
        for (long i = 0; i < n; i++)
                bad_lines(objs[i], &now);
        free(objs);
        if (n < 0 || se_strbuf_failed(&now)) {
                se_strbuf_release(&now);
                return; /* out of memory: said on the next sync */
        }
        /* both lists in the store's order: one walk finds the new lines */
        const char *old = d->route_bad.len ? d->route_bad.buf : "";
        for (const char *line = now.len ? now.buf : NULL; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t len = (size_t)(end - line);
                while (*old && strncmp(old, line, len + 1) < 0)
                        old = strchr(old, '\n') + 1;
                if (strncmp(old, line, len + 1) != 0)
                        say_bad(line, end);
                line = end + 1;
        }
        se_strbuf_release(&d->route_bad);
        d->route_bad = now;
}

/* The UDP flows of the routed ports of view, one string each, "F IP PORT"
 * (F 4 or 6; IP "-" for a NodePort: any local address), into ret sorted. */
static int routed_flows(const struct se_proxy_table *view, struct se_strv *ret)
{
        int r = 0;
        char f = view->family == SE_IPV6 ? '6' : '4';
        char line[96];
        for (uint32_t i = 0; r == 0 && i < view->n_ports; i++) {
                const struct se_proxy_svcport *sp = &view->ports[i];
                if (sp->protocol != SE_PROTO_UDP)
                        continue;
#define FLOW(ip, port)                                                         \
 do {                                                                          \
  snprintf(line, sizeof(line), "%c %s %d", f, (ip) ? (ip) : "-", (int)(port)); \
  if (r == 0)                                                                  \
   r = se_strv_push(ret, line);                                                \
 } while (0)
                if (sp->cluster_ip)
                        FLOW(sp->cluster_ip, sp->port);
                for (uint32_t k = 0; k < sp->n_external_ips; k++)
                        FLOW(sp->external_ips[k], sp->port);
                for (uint32_t k = 0; k < sp->n_lb_vips; k++)
                        FLOW(sp->lb_vips[k], sp->port);
                if (sp->node_port)
                        FLOW(NULL, sp->node_port);
#undef FLOW
        }
        return r;
}

/* conntrack -D for one flow line of routed_flows, through the proxier (its
 * runner and its deletion count). */
static void forget_flow(struct proxyd *d, const char *line)
{
        struct se_proxy_ct_flow fl;
        char ip[48];
        int port = 0;
        memset(&fl, 0, sizeof(fl));
        if (sscanf(line + 2, "%47s %d", ip, &port) != 2)
                return;
        if (strcmp(ip, "-") != 0)
                snprintf(fl.orig_dst, sizeof(fl.orig_dst), "%s", ip);
        fl.orig_port_dst = port;
        (void)se_proxy_proxier_ct_delete(d->proxier, &fl, line[0] == '6' ? SE_IPV6 : SE_IPV4);
}

/* A UDP port that moved between the kernel rules and the proxy: its
 * conntrack entries would keep a client's next datagrams on the old path
 * (a TPROXY'd flow has no NAT, a DNATed one keeps its endpoint) until they
 * time out, so they go, after the new rules are in place. Old and now are
 * sorted; now becomes d->route_flows. TCP is left alone: a deleted entry
 * would cut its established connections, which finish on their path. */
static void flows_flipped(struct proxyd *d, struct se_strv *now)
{
        struct se_strv *old = &d->route_flows;
        size_t i = 0, k = 0;
        while (i < old->n || k < now->n) {
                int c = i == old->n ? 1 : k == now->n ? -1 : strcmp(old->v[i], now->v[k]);
                if (c < 0)
                        forget_flow(d, old->v[i++]); /* back on kernel rules */
                else if (c > 0)
                        forget_flow(d, now->v[k++]); /* now through the proxy */
                else
                        i++, k++;
        }
        se_strv_release(old);
        *old = *now;
        memset(now, 0, sizeof(*now));
}

/* Nothing routed any more: the redirects go (the proxy stays, empty). */
static void route_off(struct proxyd *d, struct se_uproxy_snapshot *empty)
{
        proxyd_redirect_remove(!d->flags.nft, d->flags.nft);
        for (unsigned i = 0; i < 2; i++)
                se_strbuf_reset(&d->route_last[i]);
        if (d->uproxy)
                (void)se_uproxy_update(d->uproxy, empty);
        else
                se_uproxy_snapshot_free(empty);
        if (d->route_on)
                se_log_info(0, "no Service routed to the userspace proxy: redirects removed");
        d->route_on = false;
        struct se_strv none = SE_STRV_INIT;
        flows_flipped(d, &none);
}

void proxyd_route_sync(struct proxyd *d)
{
        bool nft = d->flags.nft;
        const struct se_proxy_table *t[2] = { NULL, NULL };
        struct se_proxy_table view[2];
        struct se_uproxy_snapshot *snap = NULL;
        struct se_strv flows = SE_STRV_INIT;
        bool any = false;
        int r = 0;
        memset(view, 0, sizeof(view));
        se_store_rdlock(d->store);
        if (!d->route_on && d->route_annotated == 0) {
                se_store_unlock(d->store);
                se_strbuf_reset(&d->route_bad);
                return;
        }
        /* the tables the proxier just synced: no second build */
        unsigned n_t = se_proxy_proxier_last_tables(d->proxier, t);
        for (unsigned i = 0; r == 0 && i < n_t; i++)
                if ((r = routed_view(t[i], nft, &view[i])) == 0 &&
                    (r = routed_flows(&view[i], &flows)) == 0)
                        any |= view[i].n_ports > 0;
        se_strv_sort(&flows);
        const struct se_proxy_table *views[2] = { &view[0], &view[1] };
        if (r == 0)
                r = se_uproxy_snapshot_build(views, n_t, d->store, d->scheduler, &snap);
        warn_bad(d);
        se_store_unlock(d->store);
        if (r < 0) {
                se_log_error("routing to the userspace proxy: %s", strerror(-r));
                goto out;
        }
        if (!any) {
                route_off(d, snap);
                snap = NULL;
                goto out;
        }
        if (!d->uproxy && proxyd_uproxy_start(d) < 0)
                goto out; /* tried again on the next sync */
        if ((r = se_uproxy_update(d->uproxy, snap)) < 0)
                se_log_error("userspace proxy update: %s", strerror(-r));
        snap = NULL;
        struct se_uproxy_rules_opts o = { .port = (uint16_t)d->uport,
                                          .mark = SE_UPROXY_DEFAULT_MARK,
                                          .want = se_uproxy_routed,
                                          .data = &nft,
                                          .node = &d->flags.opt };
        if (!d->route_on)
                se_log_info(0, "Services routed to the userspace proxy on port %d", d->uport);
        d->route_on = true;
        if (proxyd_redirect_apply(d, t, &o, d->route_last))
                flows_flipped(d, &flows);
out:
        se_strv_release(&flows);
        se_uproxy_snapshot_free(snap);
        for (unsigned i = 0; i < 2; i++)
                free(view[i].ports);
}

void proxyd_synced(void *data)
{
        struct proxyd *d = data;
        /* unlike kube-proxy, which removes them before its first sync */
        if (!d->other_cleaned) {
                proxyd_platform_cleanup(d);
                d->other_cleaned = true;
        }
        proxyd_hc_update(d);
        proxyd_route_sync(d);
}

int proxyd_files_load(struct proxyd *d)
{
        struct se_diag diag;
        int r = se_manifest_load(d->store, d->files, d->n_files, "default", NULL, &diag);
        if (r < 0) {
                char buf[1024];
                se_diag_format(&diag, buf, sizeof(buf));
                se_log_error("%s", buf);
                return r == -ENOMEM ? 4 : 3;
        }
        return 0;
}

/* Deletes the objects of d->store that fresh does not have. */
static int drop_missing(struct proxyd *d, const struct se_store *fresh)
{
        for (int k = 0; k < SE_KIND_COUNT; k++) {
                const struct se_object **objs = NULL;
                long n = se_store_list(d->store, (enum se_kind)k, NULL, &objs);
                if (n < 0)
                        return (int)n;
                /* keys copied first: a delete frees the object */
                for (long i = 0; i < n; i++) {
                        const struct se_meta *m = &objs[i]->meta;
                        const char *ns = m->namespace ? m->namespace : "";
                        if (se_store_get(fresh, (enum se_kind)k, ns, m->name))
                                continue;
                        char nsb[256], nameb[256];
                        snprintf(nsb, sizeof(nsb), "%s", ns);
                        snprintf(nameb, sizeof(nameb), "%s", m->name);
                        objs[i] = NULL;
                        (void)se_store_delete(d->store, (enum se_kind)k, nsb, nameb);
                }
                free(objs);
        }
        return 0;
}

/* Puts every object of fresh into d->store (shared, not copied). */
static int put_all(struct proxyd *d, const struct se_store *fresh)
{
        for (int k = 0; k < SE_KIND_COUNT; k++) {
                const struct se_object **objs = NULL;
                long n = se_store_list(fresh, (enum se_kind)k, NULL, &objs);
                if (n < 0)
                        return (int)n;
                int r = 0;
                for (long i = 0; i < n && r == 0; i++)
                        r = se_store_put(d->store,
                                         se_object_ref(SE_UNCONST(struct se_object, objs[i])));
                free(objs);
                if (r < 0)
                        return r;
        }
        return 0;
}

void proxyd_files_mirror(struct proxyd *d)
{
        struct se_store *fresh = se_store_new();
        struct se_diag diag;
        int r = fresh ? se_manifest_load(fresh, d->files, d->n_files, "default", NULL, &diag) :
                        -ENOMEM;
        if (r < 0) {
                char buf[1024];
                se_diag_format(&diag, buf, sizeof(buf));
                se_log_error("reload: %s; serving the last good files",
                             r == -ENOMEM ? "out of memory" : buf);
                se_store_free(fresh);
                return;
        }
        /* gone objects deleted, then the files' put again (a put of an
         * unchanged object is a change the proxier looks at and finds none) */
        if ((r = drop_missing(d, fresh)) == 0)
                r = put_all(d, fresh);
        se_store_free(fresh);
        if (r < 0)
                se_log_error("reload: %s", strerror(-r));
        else
                se_log_info(0, "reloaded %zu manifest path(s)", d->n_files);
}
