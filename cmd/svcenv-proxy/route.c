/* Per-Service routing in the iptables and nftables modes: the ports whose
 * kernel rules the writers leave out (se_proxy_in_kernel false: a scheduler
 * those rules cannot express, or svcenv.io/retry) are served by the
 * userspace proxy, started the first time one appears and kept until exit.
 * Runs after every successful sync of the proxier, on its thread. With -f,
 * SIGHUP makes the store mirror the files again (the proxier keeps its
 * store, so objects are put and deleted, and its callbacks see them). */
#include <errno.h>
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

/* Whether some Service carries one of the routing annotations: the cheap
 * test that spares clusters without them a second table build per sync. */
static bool annotated(const struct se_store *store)
{
        const struct se_object **objs = NULL;
        long n = se_store_list_unordered(store, SE_KIND_SERVICE, NULL, &objs);
        bool any = n < 0; /* out of memory: look properly */
        for (long i = 0; i < n && !any; i++) {
                const struct se_kvlist *a = &objs[i]->meta.annotations;
                any = se_kvlist_get(a, SE_PROXY_SCHED_ANNOTATION) ||
                      se_kvlist_get(a, SE_PROXY_RETRY_ANNOTATION);
        }
        free(objs);
        return any;
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
}

void proxyd_route_sync(struct proxyd *d)
{
        bool nft = d->flags.nft;
        const struct se_proxy_table *t[2] = { NULL, NULL };
        struct se_proxy_table view[2];
        struct se_uproxy_snapshot *snap = NULL;
        bool any = false;
        int r = 0;
        memset(view, 0, sizeof(view));
        se_store_rdlock(d->store);
        if (!d->route_on && !annotated(d->store)) {
                se_store_unlock(d->store);
                se_strbuf_reset(&d->route_bad);
                return;
        }
        /* the tables the proxier just synced: no second build */
        unsigned n_t = se_proxy_proxier_last_tables(d->proxier, t);
        for (unsigned i = 0; r == 0 && i < n_t; i++)
                if ((r = routed_view(t[i], nft, &view[i])) == 0)
                        any |= view[i].n_ports > 0;
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
                                          .data = &nft };
        if (!d->route_on)
                se_log_info(0, "Services routed to the userspace proxy on port %d", d->uport);
        d->route_on = true;
        (void)proxyd_redirect_apply(d, t, &o, d->route_last);
out:
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
