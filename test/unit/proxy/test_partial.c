/* svcenv's smaller partial syncs (se_proxy_tracker_set_minimal): what the
 * restore input holds, and — root only, in network namespaces — that a
 * sequence of them applied by the real iptables-restore leaves exactly the
 * rules (and their order) of a full sync from scratch. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <svcenv/manifest.h>
#include <svcenv/proxy.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>

/* A cluster from a compact spec: one service per line,
 * "NS/NAME IP [PROTO] EP,EP,..." ("-" for no endpoints; an EP ending in
 * '!' is on another node); a NAME ending in '*' has ClientIP session
 * affinity; "NAME~SCHED" (before the '*') asks for svcenv.io/scheduler
 * SCHED; "NAME@TYPE" (before both) makes it a NodePort ("np"), or a
 * LoadBalancer with source ranges ("lb"), externalTrafficPolicy Local with
 * an 'l' after either ("npl", "lbl"); node and health-check ports follow
 * from the last byte of IP. */
static char *cluster(const char *spec)
{
        struct se_strbuf sb;
        char ns[64], name[64], ip[32], eps[4096], proto[8];
        se_strbuf_init(&sb, 0);
        for (const char *p = spec; *p;) {
                size_t len = strcspn(p, "\n");
                char line[4300];
                assert_true(len < sizeof(line));
                memcpy(line, p, len);
                line[len] = 0;
                p += len + (p[len] == '\n');
                char *save = NULL, *nsname = strtok_r(line, " ", &save);
                char *tip = strtok_r(NULL, " ", &save), *t3 = strtok_r(NULL, " ", &save);
                char *t4 = strtok_r(NULL, " ", &save);
                assert_non_null(nsname);
                assert_non_null(tip);
                assert_non_null(t3);
                assert_int_equal(sscanf(nsname, "%63[^/]/%63s", ns, name), 2);
                bool aff = name[strlen(name) - 1] == '*';
                if (aff)
                        name[strlen(name) - 1] = 0;
                char ann[96] = "";
                char *tilde = strchr(name, '~');
                if (tilde) {
                        snprintf(ann, sizeof(ann), ", annotations: {svcenv.io/scheduler: '%s'}",
                                 tilde + 1);
                        *tilde = 0;
                }
                /* "@TYPE": a NodePort or LoadBalancer */
                char type[200] = "", status[80] = "", portspec[120];
                int node_port = 0;
                char *at = strchr(name, '@');
                if (at) {
                        const char *last = strrchr(tip, '.');
                        int octet = last ? atoi(last + 1) : 0;
                        bool lb = strncmp(at + 1, "lb", 2) == 0, local = at[3] == 'l';
                        node_port = 30000 + octet;
                        snprintf(type, sizeof(type), ", type: %s",
                                 lb ? "LoadBalancer" : "NodePort");
                        if (lb) {
                                snprintf(type + strlen(type), sizeof(type) - strlen(type),
                                         ", loadBalancerSourceRanges: [203.0.113.0/25]");
                                snprintf(status, sizeof(status),
                                         "status: {loadBalancer: {ingress: [{ip: 5.6.7.%d}]}}\n",
                                         octet);
                        }
                        if (local)
                                snprintf(type + strlen(type), sizeof(type) - strlen(type),
                                         ", externalTrafficPolicy: Local, healthCheckNodePort: %d",
                                         32000 + octet);
                        *at = 0;
                }
                snprintf(ip, sizeof(ip), "%s", tip);
                snprintf(proto, sizeof(proto), "%s", t4 ? t3 : "TCP");
                snprintf(eps, sizeof(eps), "%s", t4 ? t4 : t3);
                if (node_port)
                        snprintf(portspec, sizeof(portspec),
                                 "[{name: p, port: 80, nodePort: %d, protocol: %s}]", node_port,
                                 proto);
                else
                        snprintf(portspec, sizeof(portspec), "[{name: p, port: 80, protocol: %s}]",
                                 proto);
                se_strbuf_printf(
                        &sb,
                        "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: %s%s}\n"
                        "spec: {clusterIP: %s, ports: %s%s%s}\n%s",
                        name, ns, ann, ip, portspec, type, aff ? ", sessionAffinity: ClientIP" : "",
                        status);
                if (strcmp(eps, "-") == 0)
                        continue;
                se_strbuf_printf(
                        &sb,
                        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                        "metadata: {name: %s-1, namespace: %s, labels: {kubernetes.io/service-name: %s}}\n"
                        "addressType: IPv4\nports: [{name: p, port: 8080, protocol: %s}]\nendpoints:\n",
                        name, ns, name, proto);
                for (char *es = NULL, *e = strtok_r(eps, ",", &es); e;
                     e = strtok_r(NULL, ",", &es)) {
                        size_t el = strlen(e);
                        bool remote = el && e[el - 1] == '!';
                        se_strbuf_printf(&sb, "- {addresses: [%.*s], nodeName: %s}\n",
                                         (int)(el - remote), e, remote ? "n2" : "n1");
                }
        }
        char *out = se_strbuf_detach(&sb, NULL);
        assert_non_null(out);
        return out;
}

static void options(struct se_proxy_options *o)
{
        se_proxy_options_init(o);
        o->node_name = "n1";
        assert_int_equal(se_parse_ip("192.168.0.2", &o->node_ips[0]), 0);
        o->n_node_ips = 1;
        assert_int_equal(se_parse_cidr("10.0.0.0/8", &o->cluster_cidrs[0]), 0);
        o->n_cluster_cidrs = 1;
}

/* One sync of spec with tracker (NULL: a full write); applied when ok. */
static char *sync_any(const char *spec, struct se_proxy_tracker *tr, bool nft)
{
        struct se_proxy_options o;
        struct se_store *s = se_store_new();
        struct se_diag d;
        char *yaml = cluster(spec);
        options(&o);
        assert_non_null(s);
        if (se_manifest_load_buffer(s, "test", yaml, strlen(yaml), NULL, NULL, &d) < 0)
                fail_msg("manifest: %s", d.text);
        free(yaml);
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        se_strbuf_init(&sb, 0);
        assert_int_equal(
                nft ? (tr ? se_proxy_nft_sync(t, &o, tr, &sb) : se_proxy_nft_write(t, &o, &sb)) :
                tr  ? se_proxy_iptables_sync(t, &o, tr, &sb) :
                      se_proxy_iptables_write(t, &o, &sb),
                0);
        se_proxy_table_free(t);
        se_store_free(s);
        char *out = strdup(sb.buf);
        if (tr) /* after a full sync it takes sb's text over */
                se_proxy_tracker_done(tr, true, &sb);
        se_strbuf_release(&sb);
        return out;
}

static char *sync_spec(const char *spec, struct se_proxy_tracker *tr)
{
        return sync_any(spec, tr, false);
}

static bool has_line(const char *text, const char *line)
{
        size_t n = strlen(line);
        for (const char *p = text; (p = strstr(p, line)); p++)
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
                        return true;
        return false;
}

/* The 1-based position of the rule in its chain in a full write. */
static size_t position(const char *full, const char *chain, const char *frag)
{
        char prefix[80];
        size_t pos = 0;
        snprintf(prefix, sizeof(prefix), "-A %s ", chain);
        for (const char *p = strstr(full, "*nat\n"); p && *p; p += strcspn(p, "\n") + 1) {
                if (strncmp(p, prefix, strlen(prefix)) != 0)
                        continue;
                pos++;
                const char *nl = p + strcspn(p, "\n");
                const char *f = strstr(p, frag);
                if (f && f < nl)
                        return pos;
        }
        return 0;
}

static char *many(unsigned n, unsigned changed_eps)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        for (unsigned i = 0; i < n; i++)
                se_strbuf_printf(&sb, "ns/s%05u 172.30.%u.%u 10.1.%u.1,10.1.%u.2%s\n", i, i / 250,
                                 i % 250 + 1, i % 250, i % 250,
                                 i == n / 2 && changed_eps ? ",10.1.99.9" : "");
        char *out = se_strbuf_detach(&sb, NULL);
        assert_non_null(out);
        return out;
}

/* one endpoint added to one of 1000 services: only that service's chains,
 * no top-level chain at all, under 4 KiB; nothing changed: no input */
static void test_partial__one_endpoint(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        char *a = many(1000, 0), *b = many(1000, 1);
        char *full = sync_spec(a, tr);
        char *plain = sync_spec(a, NULL);
        assert_string_equal(full, plain); /* full syncs stay kube-proxy's */
        char *same = sync_spec(a, tr);
        assert_string_equal(same, "");
        char *one = sync_spec(b, tr);
        assert_true(strlen(one) < 4096);
        assert_null(strstr(one, "KUBE-SERVICES"));
        assert_null(strstr(one, "KUBE-NODEPORTS"));
        assert_null(strstr(one, "*filter"));
        assert_non_null(strstr(one, "10.1.99.9:8080"));
        /* kube-proxy's partial sync of the same change rewrites KUBE-SERVICES */
        struct se_proxy_tracker *kp = se_proxy_tracker_new();
        free(sync_spec(a, kp));
        char *kpone = sync_spec(b, kp);
        assert_true(strlen(kpone) > 100 * strlen(one));
        assert_true(has_line(kpone, ":KUBE-SERVICES - [0:0]"));
        free(kpone);
        se_proxy_tracker_free(kp);
        free(one);
        free(same);
        free(plain);
        free(full);
        free(a);
        free(b);
        se_proxy_tracker_free(tr);
}

static const char base[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.2\n"
                           "c/api 172.30.0.30 10.1.2.1\n"
                           "e/dns 172.30.0.50 UDP 10.1.4.1\n";
static const char added[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.2\n"
                            "b/new 172.30.0.20 10.1.1.1\n"
                            "c/api 172.30.0.30 10.1.2.1\n"
                            "e/dns 172.30.0.50 UDP 10.1.4.1\n";

/* a service added: its jump inserted where a full sync puts it; removed:
 * its jump deleted by its text, before its chains go */
static void test_partial__service_add_remove(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        free(sync_spec(base, tr));
        char *add = sync_spec(added, tr);
        char *full = sync_spec(added, NULL);
        size_t pos = position(full, "KUBE-SERVICES", "b/new:p cluster IP");
        assert_int_equal(pos, 2);
        char want[400];
        const char *jump = strstr(full, "-A KUBE-SERVICES -m comment --comment \"b/new:p");
        assert_non_null(jump);
        snprintf(want, sizeof(want), "-I KUBE-SERVICES %zu%.*s", pos, (int)strcspn(jump + 16, "\n"),
                 jump + 16);
        if (!has_line(add, want))
                fail_msg("no `%s` in\n%s", want, add);
        assert_null(strstr(add, ":KUBE-SERVICES"));
        char *del = sync_spec(base, tr);
        snprintf(want, sizeof(want), "-D%.*s", (int)strcspn(jump + 2, "\n"), jump + 2);
        const char *d = strstr(del, want), *x = strstr(del, "-X KUBE-SVC-");
        assert_non_null(d);
        assert_non_null(x);
        assert_true(d < x);
        assert_null(strstr(del, ":KUBE-SERVICES"));
        free(del);
        free(full);
        free(add);
        se_proxy_tracker_free(tr);
}

static size_t count(const char *text, const char *frag)
{
        size_t n = 0;
        for (const char *p = text; (p = strstr(p, frag)); p++)
                n++;
        return n;
}

/* after a failed sync the full retry is seeded with the chains iptables has:
 * a chain known both from the last applied sync and from the seed is
 * deleted once (twice fails the whole restore) */
static void test_partial__seeded_retry_deletes_once(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        free(sync_spec(added, tr)); /* applied: b/new's chains are known */
        char h[17], name[40];
        assert_int_equal(se_proxy_chain_hash("b/new:p", "tcp", NULL, h), 0);
        snprintf(name, sizeof(name), "KUBE-SVC-%s", h);
        struct se_strv seen = SE_STRV_INIT;
        assert_int_equal(se_strv_push(&seen, name), 0);
        se_proxy_tracker_force_full(tr); /* as after a failed sync */
        assert_int_equal(se_proxy_tracker_seed(tr, &seen), 0);
        char *retry = sync_spec(base, tr);
        char x[60];
        snprintf(x, sizeof(x), "-X %s\n", name);
        assert_int_equal(count(retry, x), 1);
        free(retry);
        se_strv_release(&seen);
        se_proxy_tracker_free(tr);
}

/* nft with minimal syncs: an endpoint change leaves the maps alone; a
 * service added or removed is one element added or deleted */
static void test_partial__nft_elements(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        free(sync_any(base, tr, true));
        char *add = sync_any(added, tr, true);
        assert_null(strstr(add, "flush map"));
        assert_non_null(strstr(
                add, "add element ip svcenv service-ips { 172.30.0.20 . tcp . 80 : goto service-"));
        assert_null(strstr(add, "delete element"));
        char *del = sync_any(base, tr, true);
        assert_null(strstr(del, "flush map ip svcenv service-ips"));
        const char *d =
                strstr(del, "delete element ip svcenv service-ips { 172.30.0.20 . tcp . 80 }");
        const char *x = strstr(del, "delete chain ip svcenv service-");
        assert_non_null(d);
        assert_non_null(x);
        assert_true(d < x);
        /* its endpoint map goes in the same transaction, after its chain */
        const char *m = strstr(del, "delete map ip svcenv dnat-service-");
        assert_non_null(m);
        assert_true(x < m);
        assert_non_null(strstr(m, "b/new/tcp/p\n"));
        /* and its endpoint's hairpin element, one element edit each way */
        assert_non_null(strstr(
                add,
                "add element ip svcenv hairpin-connections { 10.1.1.1 . 10.1.1.1 . tcp . 8080 }"));
        assert_non_null(strstr(
                del,
                "delete element ip svcenv hairpin-connections { 10.1.1.1 . 10.1.1.1 . tcp . 8080 }"));
        assert_null(strstr(del, "flush set"));
        free(del);
        free(add);
        se_proxy_tracker_free(tr);
}

/* svcenv.io/scheduler on partial syncs: each in-kernel kind has maps of
 * its own name, so switching kinds declares the new map and deletes the old
 * one (a map cannot change its key description). */
static void test_partial__nft_scheduler_switch(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        free(sync_any("a/web 172.30.0.10 10.1.0.1,10.1.0.2\n", tr, true));
        char *rr = sync_any("a/web~rr 172.30.0.10 10.1.0.1,10.1.0.2\n", tr, true);
        assert_true(has_line(rr, "\t\tmeta l4proto tcp dnat ip addr . port to numgen inc mod 2 map "
                                 "@dnat-rr-service-VXO22ISD-a/web/tcp/p"));
        assert_true(has_line(rr, "delete map ip svcenv dnat-service-VXO22ISD-a/web/tcp/p"));
        char *sh = sync_any("a/web~sh 172.30.0.10 10.1.0.1,10.1.0.2\n", tr, true);
        assert_true(has_line(sh, "\t\tmeta l4proto tcp dnat ip addr . port to jhash ip saddr mod "
                                 "256 seed 0x5c4ed001 map @dnat-jh-service-VXO22ISD-a/web/tcp/p"));
        assert_true(has_line(sh, "delete map ip svcenv dnat-rr-service-VXO22ISD-a/web/tcp/p"));
        /* sh to mh: the same map, emptied and filled with Maglev's slots */
        char *mh = sync_any("a/web~mh 172.30.0.10 10.1.0.1,10.1.0.2\n", tr, true);
        assert_true(has_line(mh, "flush map ip svcenv dnat-jh-service-VXO22ISD-a/web/tcp/p"));
        assert_non_null(strstr(mh, ", 4092 : 10.1.0."));
        assert_null(strstr(mh, "delete map"));
        char *back = sync_any("a/web 172.30.0.10 10.1.0.1,10.1.0.2\n", tr, true);
        assert_true(has_line(back, "delete map ip svcenv dnat-jh-service-VXO22ISD-a/web/tcp/p"));
        assert_true(has_line(back, "\t\tmeta l4proto tcp dnat ip addr . port to numgen random mod "
                                   "2 map @dnat-service-VXO22ISD-a/web/tcp/p"));
        free(rr);
        free(sh);
        free(mh);
        free(back);
        se_proxy_tracker_free(tr);
}

/* nft endpoint maps on partial syncs: N -> M endpoints flushes the
 * service's DNAT map, declares its M elements and rewrites the `mod M`
 * rule; the same count with one endpoint replaced changes one element; with
 * affinity the map picks endpoint chains, and a replaced endpoint's chain is
 * deleted; other services are not in the input */
static void test_partial__nft_endpoint_maps(void **state)
{
        (void)state;
        static const char two[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.2\n"
                                  "c/api 172.30.0.30 10.1.2.1\n";
        static const char three[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.2,10.1.0.3\n"
                                    "c/api 172.30.0.30 10.1.2.1\n";
        static const char replaced[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.2,10.1.0.4\n"
                                       "c/api 172.30.0.30 10.1.2.1\n";
        static const char sticky[] = "a/web* 172.30.0.10 10.1.0.1,10.1.0.2,10.1.0.4\n"
                                     "c/api 172.30.0.30 10.1.2.1\n";
        static const char sticky_replaced[] = "a/web* 172.30.0.10 10.1.0.1,10.1.0.2,10.1.0.5\n"
                                              "c/api 172.30.0.30 10.1.2.1\n";
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        free(sync_any(two, tr, true));
        char *same = sync_any(two, tr, true); /* nothing: nft would read the ruleset */
        assert_string_equal(same, "");
        free(same);
        char *grow = sync_any(three, tr, true);
        const char *flush = strstr(grow, "flush map ip svcenv dnat-service-VXO22ISD-a/web/tcp/p\n");
        const char *decl = strstr(grow, "\tmap dnat-service-VXO22ISD-a/web/tcp/p {\n");
        assert_non_null(flush);
        assert_non_null(decl);
        assert_true(flush < decl);
        assert_true(has_line(
                grow,
                "\t\tmeta l4proto tcp dnat ip addr . port to numgen random mod 3 map @dnat-service-VXO22ISD-a/web/tcp/p"));
        assert_non_null(strstr(decl, "2 : 10.1.0.3 . 8080 }"));
        assert_null(strstr(grow, "c/api"));
        assert_null(strstr(grow, "delete "));
        char *swap = sync_any(replaced, tr, true);
        assert_true(has_line(swap, "flush map ip svcenv dnat-service-VXO22ISD-a/web/tcp/p"));
        assert_non_null(strstr(swap, "2 : 10.1.0.4 . 8080 }"));
        assert_null(strstr(swap, "c/api"));
        assert_null(strstr(swap, "chain endpoint-"));
        /* affinity on: endpoint chains and a verdict map of another name
         * (a map cannot change its type); the DNAT map goes */
        char *on = sync_any(sticky, tr, true);
        assert_true(has_line(on, "\t\tnumgen random mod 3 vmap @service-VXO22ISD-a/web/tcp/p"));
        assert_non_null(strstr(on, "\tchain endpoint-"));
        assert_true(has_line(on, "delete map ip svcenv dnat-service-VXO22ISD-a/web/tcp/p"));
        char *swap2 = sync_any(sticky_replaced, tr, true);
        assert_true(has_line(swap2, "flush map ip svcenv service-VXO22ISD-a/web/tcp/p"));
        assert_non_null(strstr(swap2, "__10.1.0.5/8080 }"));
        const char *gone = strstr(swap2, "\ndelete chain ip svcenv endpoint-");
        assert_non_null(gone);
        assert_non_null(strstr(gone, "a/web/tcp/p__10.1.0.4/8080\n"));
        free(swap2);
        free(on);
        free(swap);
        free(grow);
        se_proxy_tracker_free(tr);
}

/* The table of spec. */
static struct se_proxy_table *table_of(const char *spec, struct se_store **store)
{
        struct se_proxy_options o;
        struct se_diag d;
        struct se_proxy_table *t = NULL;
        char *yaml = cluster(spec);
        options(&o);
        *store = se_store_new();
        assert_non_null(*store);
        if (se_manifest_load_buffer(*store, "test", yaml, strlen(yaml), NULL, NULL, &d) < 0)
                fail_msg("manifest: %s", d.text);
        free(yaml);
        assert_int_equal(se_proxy_table_build(*store, &o, SE_IPV4, &t), 0);
        return t;
}

/* A carried sync from spec a to spec b (every port of both paired by
 * name: added, removed, changed or not), then b synced from the whole
 * table: the tracker knows what the carried sync did, so that finds
 * nothing to write, and a full sync afterwards writes what a fresh one
 * does. Returns the carried sync's input. */
static char *carried_then_table(const char *a, const char *b)
{
        struct se_proxy_options o;
        struct se_store *sa, *sb;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, true);
        options(&o);
        free(sync_spec(a, tr));
        struct se_proxy_table *ta = table_of(a, &sa), *tb = table_of(b, &sb);
        size_t most = (size_t)ta->n_ports + tb->n_ports + 1, n = 0;
        const struct se_proxy_svcport **now = calloc(most, sizeof(*now));
        const struct se_proxy_svcport **was = calloc(most, sizeof(*was));
        assert_non_null(now);
        assert_non_null(was);
        for (uint32_t i = 0, j = 0; i < ta->n_ports || j < tb->n_ports; n++) {
                int c = i == ta->n_ports ? 1 :
                        j == tb->n_ports ? -1 :
                                           strcmp(ta->ports[i].spn, tb->ports[j].spn);
                was[n] = c <= 0 ? &ta->ports[i++] : NULL;
                now[n] = c >= 0 ? &tb->ports[j++] : NULL;
        }
        struct se_strbuf text;
        se_strbuf_init(&text, 0);
        assert_int_equal(se_proxy_iptables_sync_changed(now, was, n, SE_IPV4, false, &o, tr, &text),
                         0);
        char *carried = strdup(text.buf ? text.buf : "");
        se_proxy_tracker_done(tr, true, &text);
        se_strbuf_release(&text);
        char *again = sync_spec(b, tr);
        if (again[0])
                fail_msg("after the carried sync\n%s\nthe table sync wrote\n%s", carried, again);
        free(again);
        se_proxy_tracker_force_full(tr);
        char *full = sync_spec(b, tr), *fresh = sync_spec(b, NULL);
        assert_string_equal(full, fresh);
        free(full);
        free(fresh);
        free(now);
        free(was);
        se_proxy_table_free(ta);
        se_proxy_table_free(tb);
        se_store_free(sa);
        se_store_free(sb);
        se_proxy_tracker_free(tr);
        return carried;
}

/* services of every kind added, changed and removed by a carried sync:
 * single-rule edits of the top-level chains at a full sync's positions,
 * and the tracker left as the table sync would have left it */
static void test_partial__carried_add_remove_then_table_sync(void **state)
{
        (void)state;
        static const char a[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.2\n"
                                "c/np@np 172.30.0.30 10.1.2.1\n"
                                "e/lb@lbl* 172.30.0.50 10.1.4.1,10.1.4.2!\n"
                                "g/gone@lb 172.30.0.70 10.1.6.1\n";
        static const char b[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.3\n"
                                "b/new@lb 172.30.0.20 10.1.1.1\n"
                                "c/np@np 172.30.0.30 -\n"
                                "e/lb@lbl* 172.30.0.50 10.1.4.2!\n"
                                "f/local@npl 172.30.0.60 10.1.5.1\n";
        char *in = carried_then_table(a, b);
        /* b/new's rules go between a/web's and c/np's */
        assert_non_null(strstr(in, "\n-I KUBE-SERVICES 2 -m comment --comment "
                                   "\"b/new:p cluster IP\""));
        assert_non_null(strstr(in, "-I KUBE-NODEPORTS 1 -m comment --comment b/new:p "));
        /* g/gone's firewall rule and its chains go */
        assert_non_null(strstr(in, "-D KUBE-PROXY-FIREWALL -m comment --comment \"g/gone:p "));
        assert_non_null(strstr(in, "\n-X KUBE-FW-"));
        /* c/np lost its endpoints: REJECT in filter */
        assert_non_null(strstr(in, "\"c/np:p has no endpoints\""));
        free(in);
        /* and back: everything added again, the new ones removed */
        free(carried_then_table(b, a));
        /* from nothing and to nothing */
        free(carried_then_table("", b));
        free(carried_then_table(a, ""));
}

/* ---- applied in network namespaces (root) ---- */

static int cmp_line_chain(const void *x, const void *y)
{
        /* by chain name only; qsort is not stable, so ties keep their
         * original index (stored after the NUL) */
        const char *a = *(const char *const *)x, *b = *(const char *const *)y;
        const char *ca = a[0] == ':' ? a + 1 : a + 3, *cb = b[0] == ':' ? b + 1 : b + 3;
        size_t la = strcspn(ca, " "), lb = strcspn(cb, " ");
        int c = strncmp(ca, cb, la < lb ? la : lb);
        if (c == 0 && la != lb)
                c = la < lb ? -1 : 1;
        if (c)
                return c;
        if ((a[0] == ':') != (b[0] == ':'))
                return a[0] == ':' ? -1 : 1;
        size_t ia, ib;
        memcpy(&ia, a + strlen(a) + 1, sizeof(ia));
        memcpy(&ib, b + strlen(b) + 1, sizeof(ib));
        return ia < ib ? -1 : ia > ib;
}

/* iptables-save of one table: chains by name, each chain's rules in kernel
 * order, no counters or comments. NULL when iptables-save is missing. */
static char *saved(const char *table)
{
        const char *argv[] = { "iptables-save", "-t", table, NULL };
        struct se_strbuf out, norm;
        char err[256];
        se_strbuf_init(&out, 0);
        if (se_proxy_run(argv, &out, err, sizeof(err)) < 0) {
                se_strbuf_release(&out);
                return NULL;
        }
        char **lines = NULL;
        size_t n = 0;
        for (const char *p = out.buf ? out.buf : ""; *p; p += strcspn(p, "\n") + 1) {
                size_t len = strcspn(p, "\n");
                if (p[0] != ':' && strncmp(p, "-A ", 3) != 0)
                        continue;
                if (p[0] == ':' && memchr(p, '[', len))
                        len = (size_t)((const char *)memchr(p, '[', len) - p);
                lines = realloc(lines, (n + 1) * sizeof(*lines));
                lines[n] = malloc(len + 1 + sizeof(size_t));
                memcpy(lines[n], p, len);
                lines[n][len] = 0;
                memcpy(lines[n] + len + 1, &n, sizeof(n));
                n++;
                if (!p[len])
                        break;
        }
        qsort(lines, n, sizeof(*lines), cmp_line_chain);
        se_strbuf_init(&norm, 0);
        for (size_t i = 0; i < n; i++) {
                se_strbuf_printf(&norm, "%s\n", lines[i]);
                free(lines[i]);
        }
        free(lines);
        se_strbuf_release(&out);
        char *s = se_strbuf_detach(&norm, NULL);
        return s ? s : strdup("");
}

static int cmp_str(const void *x, const void *y)
{
        return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* `nft list table ip svcenv` as a sorted list of its pieces (elements,
 * rules, declarations): order-free, as nft prints set elements in hash
 * order. NULL when nft is missing. */
static char *nft_saved(void)
{
        const char *argv[] = { "nft", "list", "table", "ip", "svcenv", NULL };
        struct se_strbuf out, norm;
        char err[256];
        se_strbuf_init(&out, 0);
        if (se_proxy_run(argv, &out, err, sizeof(err)) < 0) {
                se_strbuf_release(&out);
                return NULL;
        }
        struct se_strv parts = SE_STRV_INIT;
        char empty[1] = "";
        for (char *save = NULL, *t = strtok_r(out.buf ? out.buf : empty, ",\n{}", &save); t;
             t = strtok_r(NULL, ",\n{}", &save)) {
                while (*t == ' ' || *t == '\t')
                        t++;
                size_t n = strlen(t);
                while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
                        t[--n] = 0;
                if (n)
                        se_strv_push(&parts, t);
        }
        qsort(parts.v, parts.n, sizeof(*parts.v), cmp_str);
        se_strbuf_init(&norm, 0);
        se_strv_foreach(pp, &parts)
                se_strbuf_printf(&norm, "%s\n", *pp);
        se_strv_release(&parts);
        se_strbuf_release(&out);
        char *r = se_strbuf_detach(&norm, NULL);
        return r ? r : strdup("");
}

static bool use_nft, use_minimal = true;

static int apply(const char *text)
{
        char err[512];
        int r = se_proxy_apply(use_nft ? SE_PROXY_NFT : SE_PROXY_IPTABLES_RESTORE, text,
                               strlen(text), err, sizeof(err));
        if (r < 0)
                fprintf(stderr, "# apply: %s\n", err);
        return r;
}

static const char *const steps[] = {
        base,
        added, /* a service added */
        "a/web 172.30.0.10 10.1.0.2,10.1.0.3\n" /* endpoints changed */
        "b/new 172.30.0.20 10.1.1.1\n"
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.1\n",
        "a/web 172.30.0.10 10.1.0.2,10.1.0.3\n" /* api loses its endpoints: REJECT */
        "b/new 172.30.0.20 10.1.1.1\n"
        "c/api 172.30.0.30 -\n"
        "d/more 172.30.0.40 10.1.3.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.1\n",
        "b/new 172.30.0.20 10.1.1.1\n" /* web removed, api back */
        "c/api 172.30.0.30 10.1.2.9\n"
        "d/more 172.30.0.40 10.1.3.1\n",
        "a/web 172.30.0.10 10.1.0.2,10.1.0.3,10.1.0.4\n" /* web back: 2 -> 3 endpoints */
        "b/new 172.30.0.20 10.1.1.1\n"
        "c/api 172.30.0.30 10.1.2.9\n",
        "a/web 172.30.0.10 10.1.0.4\n" /* 3 -> 1, new gone */
        "c/api 172.30.0.30 10.1.2.8\n", /* 1 replaced by 1 */
        "a/web 172.30.0.10 10.1.0.4\n" /* another service on web's endpoint */
        "c/api 172.30.0.30 10.1.2.8\n"
        "f/share 172.30.0.60 10.1.0.4\n",
        "a/web* 172.30.0.10 10.1.0.4\n" /* share gone: web still hairpins; */
        "c/api 172.30.0.30 10.1.2.8\n", /* web gets affinity */
        "a/web* 172.30.0.10 10.1.0.4,10.1.0.5\n"
        "c/api* 172.30.0.30 10.1.2.8\n",
        "a/web 172.30.0.10 10.1.0.5\n" /* affinity off again */
        "c/api* 172.30.0.30 10.1.2.8\n",
        "a/web~lc 172.30.0.10 10.1.0.5\n" /* web routed to the userspace proxy */
        "c/api* 172.30.0.30 10.1.2.8\n",
        "a/web 172.30.0.10 10.1.0.5\n" /* and back to the kernel */
        "c/api* 172.30.0.30 10.1.2.8\n",
        "a/web~rr 172.30.0.10 10.1.0.5,10.1.0.6\n" /* in-kernel schedulers come, */
        "c/api~sh* 172.30.0.30 10.1.2.8,10.1.2.9\n", /* change and go */
        "a/web~mh 172.30.0.10 10.1.0.5,10.1.0.6\n"
        "c/api~sh,port 172.30.0.30 10.1.2.8,10.1.2.9\n",
        "a/web~mh* 172.30.0.10 10.1.0.6,10.1.0.7\n"
        "c/api~rr* 172.30.0.30 10.1.2.8,10.1.2.9\n",
        "a/web~dh* 172.30.0.10 10.1.0.6,10.1.0.7\n"
        "c/api 172.30.0.30 10.1.2.8,10.1.2.9\n",
        "", /* everything gone */
        base,
};

/* Runs child() in a forked process (it enters its own network namespaces)
 * and checks that it exited 0. Exit 2 (no namespaces here) and 3 (the rule
 * tool failed) skip only when the tool is not installed: with it, a failed
 * apply of our own text is a failure. */
static bool tool_installed(void)
{
        static const char *const dirs[] = { "/usr/sbin", "/sbin", "/usr/bin", "/bin" };
        const char *tool = use_nft ? "nft" : "iptables-restore";
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                char path[64];
                snprintf(path, sizeof(path), "%s/%s", dirs[i], tool);
                if (access(path, X_OK) == 0)
                        return true;
        }
        return false;
}

static void run_child(int (*child)(void))
{
        if (geteuid() != 0)
                skip();
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                exit(child()); /* exit, not _exit: valgrind checks the child too */
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        int code = WEXITSTATUS(status);
        if (code == 2 || (code == 3 && !tool_installed()))
                skip();
        assert_int_equal(code, 0);
}

/* the child: partial syncs applied in netns X; after each, a full sync from
 * scratch in a fresh netns Y must save the same */
static int applied_child(void)
{
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        int code = 0;
        se_proxy_tracker_set_minimal(tr, use_minimal);
        if (unshare(CLONE_NEWNET) < 0)
                return 2;
        int x = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && !code; i++) {
                char *partial = sync_any(steps[i], tr, use_nft);
                if (partial[0] && apply(partial) < 0)
                        code = 10 + (int)i;
                free(partial);
                char *xs[2] = { use_nft ? nft_saved() : saved("nat"),
                                use_nft ? strdup("") : saved("filter") };
                if (!xs[0])
                        code = 3;
                char *full = sync_any(steps[i], NULL, use_nft);
                if (!code && (unshare(CLONE_NEWNET) < 0 || apply(full) < 0))
                        code = 30 + (int)i;
                free(full);
                char *ys[2] = { code    ? NULL :
                                use_nft ? nft_saved() :
                                          saved("nat"),
                                code    ? NULL :
                                use_nft ? strdup("") :
                                          saved("filter") };
                for (int t = 0; t < 2 && !code; t++)
                        if (strcmp(xs[t], ys[t]) != 0) {
                                fprintf(stderr, "# step %zu, %s:\n# partial:\n%s# full:\n%s", i,
                                        t ? "filter" : "nat", xs[t], ys[t]);
                                code = 50 + (int)i;
                        }
                for (int t = 0; t < 2; t++) {
                        free(xs[t]);
                        free(ys[t]);
                }
                if (!code && setns(x, CLONE_NEWNET) < 0)
                        code = 4;
        }
        close(x);
        se_proxy_tracker_free(tr);
        return code;
}

static void applied(bool nft, bool minimal)
{
        use_nft = nft;
        use_minimal = minimal;
        run_child(applied_child);
}

static void test_partial__applied_equals_full(void **state)
{
        (void)state;
        applied(false, true);
}

/* the same with nft: element edits leave what a fresh full load makes */
static void test_partial__nft_applied_equals_full(void **state)
{
        (void)state;
        applied(true, true);
}

/* and with kube-proxy's partial syncs (global maps flushed and rewritten) */
static void test_partial__nft_applied_equals_full_plain(void **state)
{
        (void)state;
        applied(true, false);
}

/* `nft list set` of one set in our table, NULL on failure */
static char *nft_list_set(const char *name)
{
        const char *argv[] = { "nft", "list", "set", "ip", "svcenv", name, NULL };
        struct se_strbuf out;
        char err[256];
        se_strbuf_init(&out, 0);
        if (se_proxy_run(argv, &out, err, sizeof(err)) < 0) {
                fprintf(stderr, "# nft list set %s: %s\n", name, err);
                se_strbuf_release(&out);
                return NULL;
        }
        return se_strbuf_detach(&out, NULL);
}

static int nft_add_element(const char *set, const char *elem)
{
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "add element ip svcenv %s { %s }\n", set, elem);
        return apply(cmd);
}

static const char aff_a[] = "a/web* 172.30.0.10 10.1.0.1,10.1.0.2\n"
                            "b/new 172.30.0.20 10.1.1.1\n"
                            "c/api 172.30.0.30 10.1.2.1,10.1.2.2\n";
/* web lost 10.1.0.1, new went away, api's endpoints changed */
static const char aff_b[] = "a/web* 172.30.0.10 10.1.0.2,10.1.0.3\n"
                            "c/api 172.30.0.30 10.1.2.2,10.1.2.3,10.1.2.4\n";
#define AFF_KEPT "affinity-45LKISMY-a/web/tcp/p__10.1.0.2/8080"

/* the child: full syncs keep the table, so a client's affinity entry
 * survives them; a full sync after a restart (tracker seeded from `nft
 * list`) deletes what is stale and leaves what a fresh full load makes */
static int affinity_child(void)
{
        int code = 0;
        use_nft = true;
        if (unshare(CLONE_NEWNET) < 0)
                return 2;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        char *text = sync_any(aff_a, tr, true);
        if (!strstr(text, "\tset " AFF_KEPT " {\n"))
                code = 5;
        if (!code && apply(text) < 0)
                code = 3; /* no nft here */
        free(text);
        if (!code && nft_add_element(AFF_KEPT, "192.0.2.7") < 0)
                code = 6;
        /* a periodic full sync, then one after a restart (a new tracker
         * knowing only what nft lists) with services changed and gone */
        se_proxy_tracker_force_full(tr);
        text = code ? NULL : sync_any(aff_a, tr, true);
        if (text && (strstr(text, "delete table") || apply(text) < 0))
                code = 7;
        free(text);
        se_proxy_tracker_free(tr);
        tr = se_proxy_tracker_new();
        if (!code && se_proxy_nft_seed_existing(tr, SE_IPV4) < 0)
                code = 8;
        text = code ? NULL : sync_any(aff_b, tr, true);
        if (text && apply(text) < 0)
                code = 9;
        free(text);
        se_proxy_tracker_free(tr);
        char *set = code ? NULL : nft_list_set(AFF_KEPT);
        if (!code && (!set || !strstr(set, "192.0.2.7"))) {
                fprintf(stderr, "# affinity entry lost:\n%s", set ? set : "");
                code = 10;
        }
        free(set);
        /* the client's entry is the one expected difference */
        static const char drop[] = "delete element ip svcenv " AFF_KEPT " { 192.0.2.7 }\n";
        if (!code && apply(drop) < 0)
                code = 13;
        char *got = code ? NULL : nft_saved();
        char *full = code ? NULL : sync_any(aff_b, NULL, true);
        if (!code && (unshare(CLONE_NEWNET) < 0 || apply(full) < 0))
                code = 11;
        char *want = code ? NULL : nft_saved();
        if (!code && strcmp(got, want) != 0) {
                fprintf(stderr, "# after the seeded full sync:\n%s# fresh:\n%s", got, want);
                code = 12;
        }
        free(got);
        free(want);
        free(full);
        return code;
}

/* a table as svcenv wrote it before v1.36's layout: other base chain
 * names and priorities, endpoint chains, mark-for-masquerade */
static const char old_layout[] =
        "table ip svcenv {\n"
        "\tcomment \"rules for svcenv (kube-proxy v1.36 semantics)\"\n"
        "\tmap service-VXO22ISD-a/web/tcp/p {\n"
        "\t\ttypeof numgen random mod 1 : verdict\n"
        "\t\telements = { 0 : goto endpoint-AAAAAAAA-a/web/tcp/p__10.1.0.1/8080 }\n"
        "\t}\n"
        "\tchain filter-prerouting {\n"
        "\t\ttype filter hook prerouting priority dstnat - 10; policy accept;\n"
        "\t}\n"
        "\tchain filter-input {\n"
        "\t\ttype filter hook input priority -10; policy accept;\n"
        "\t}\n"
        "\tchain mark-for-masquerade {\n"
        "\t\tmeta mark set meta mark | 0x4000\n"
        "\t}\n"
        "\tchain endpoint-AAAAAAAA-a/web/tcp/p__10.1.0.1/8080 {\n"
        "\t\tip saddr 10.1.0.1 jump mark-for-masquerade\n"
        "\t\tmeta l4proto tcp dnat to 10.1.0.1:8080\n"
        "\t}\n"
        "\tchain service-VXO22ISD-a/web/tcp/p {\n"
        "\t\tnumgen random mod 1 vmap @service-VXO22ISD-a/web/tcp/p\n"
        "\t}\n"
        "}\n";

/* the child: svcenv restarted after an upgrade finds the old layout; its
 * first full sync (tracker seeded from the kernel) must replace it with
 * what a fresh full load makes, base chain priorities included */
static int upgrade_child(void)
{
        int code = 0;
        use_nft = true;
        if (unshare(CLONE_NEWNET) < 0)
                return 2;
        if (apply(old_layout) < 0)
                return 3; /* no nft here */
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        static const char spec[] = "a/web 172.30.0.10 10.1.0.1,10.1.0.2\n";
        char *text = NULL;
        if (se_proxy_nft_seed_existing(tr, SE_IPV4) < 0)
                code = 5;
        if (!code && (text = sync_any(spec, tr, true)) && apply(text) < 0)
                code = 6;
        free(text);
        se_proxy_tracker_free(tr);
        char *got = code ? NULL : nft_saved();
        char *full = code ? NULL : sync_any(spec, NULL, true);
        if (!code && (unshare(CLONE_NEWNET) < 0 || apply(full) < 0))
                code = 7;
        char *want = code ? NULL : nft_saved();
        if (!code && strcmp(got, want) != 0) {
                fprintf(stderr, "# after the upgrade:\n%s# fresh:\n%s", got, want);
                code = 8;
        }
        free(got);
        free(want);
        free(full);
        return code;
}

static void test_partial__nft_upgrade_from_old_layout(void **state)
{
        (void)state;
        run_child(upgrade_child);
}

static void test_partial__nft_full_sync_keeps_affinity(void **state)
{
        (void)state;
        use_nft = true;
        run_child(affinity_child);
}

static size_t count_text(const char *text, const char *frag)
{
        size_t n = 0;
        for (const char *p = text; (p = strstr(p, frag)); p++)
                n++;
        return n;
}

/* the child: what the seed and the daemon's canary read over netlink */
static int names_child(void)
{
        int code = 0;
        size_t rules = 9;
        struct se_strv names = SE_STRV_INIT;
        use_nft = true;
        if (unshare(CLONE_NEWNET) < 0)
                return 2;
        if (se_proxy_nft_names(SE_IPV4, &names) != 0 || names.n != 0 ||
            se_proxy_nft_chain_rules(SE_IPV4, "nat-prerouting", &rules) != 0 || rules != 0)
                return 20; /* no table yet: nothing, no error */
        static const char other[] = "table ip other {\n\tchain nat-prerouting {\n"
                                    "\t\tcounter\n\t}\n\tset s {\n\t\ttype ipv4_addr\n\t}\n}\n";
        char *text = sync_any(aff_a, NULL, true);
        if (apply(other) < 0 || apply(text) < 0)
                code = 3;
        /* every chain, map and set the script declares, nothing else */
        size_t want = count_text(text, "\n\tchain ") + count_text(text, "\n\tmap ") +
                      count_text(text, "\n\tset ");
        if (!code &&
            (se_proxy_nft_names(SE_IPV4, &names) != 0 || names.n != want ||
             !se_strv_contains(&names, "chain nat-prerouting") ||
             !se_strv_contains(&names, "map service-ips") ||
             !se_strv_contains(&names, "map service-VXO22ISD-a/web/tcp/p") ||
             !se_strv_contains(&names, "set " AFF_KEPT) || se_strv_contains(&names, "set s"))) {
                se_strv_foreach(n, &names)
                        fprintf(stderr, "# %s\n", *n);
                code = 21;
        }
        if (!code &&
            (se_proxy_nft_chain_rules(SE_IPV4, "nat-prerouting", &rules) != 0 || rules != 1))
                code = 22;
        /* what the canary must notice */
        if (!code &&
            (apply("flush table ip svcenv\n") < 0 ||
             se_proxy_nft_chain_rules(SE_IPV4, "nat-prerouting", &rules) != 0 || rules != 0))
                code = 23;
        se_strv_release(&names);
        if (!code && (apply("flush ruleset\n") < 0 || se_proxy_nft_names(SE_IPV4, &names) != 0 ||
                      names.n != 0))
                code = 24;
        se_strv_release(&names);
        free(text);
        return code;
}

static void test_partial__nft_names_over_netlink(void **state)
{
        (void)state;
        use_nft = true;
        run_child(names_child);
}

/* ---- the proxier, changes carried from the store callbacks ---- */

/* Puts the services of spec that differ from those of prev into the store
 * (replaced: delete, then add) and deletes those spec no longer has: the
 * store callbacks tell the proxier which services changed. */
static void store_step(struct se_store *s, const char *prev, const char *spec)
{
        char key[130], line[4400];
        for (int pass = 0; pass < 2; pass++) {
                const char *from = pass ? prev : spec, *other = pass ? spec : prev;
                for (const char *p = from; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) {
                        size_t len = strcspn(p, "\n"), kl = strcspn(p, " ");
                        assert_true(len < sizeof(line) && kl < sizeof(key));
                        memcpy(line, p, len);
                        line[len] = '\n';
                        line[len + 1] = 0;
                        memcpy(key, p, kl);
                        /* affinity or a scheduler: the same service */
                        kl = strcspn(p, " *~@");
                        key[kl] = 0;
                        /* the same line in the other spec: unchanged */
                        bool same = false, there = false;
                        for (const char *q = other; *q;
                             q += strcspn(q, "\n") + (q[strcspn(q, "\n")] != 0)) {
                                size_t ql = strcspn(q, "\n");
                                there |=
                                        strncmp(q, key, kl) == 0 && (q[kl] == ' ' || q[kl] == '*' ||
                                                                     q[kl] == '~' || q[kl] == '@');
                                same |= ql == len && strncmp(q, p, len) == 0;
                        }
                        char ns[64], name[64], slice[80];
                        assert_int_equal(sscanf(key, "%63[^/]/%63s", ns, name), 2);
                        snprintf(slice, sizeof(slice), "%s-1", name);
                        if (pass == 1 && !there) { /* gone */
                                assert_int_equal(se_store_delete(s, SE_KIND_SERVICE, ns, name), 0);
                                (void)se_store_delete(s, SE_KIND_ENDPOINT_SLICE, ns, slice);
                        }
                        if (pass == 1 || same)
                                continue;
                        (void)se_store_delete(s, SE_KIND_SERVICE, ns, name);
                        (void)se_store_delete(s, SE_KIND_ENDPOINT_SLICE, ns, slice);
                        char *yaml = cluster(line);
                        struct se_diag d;
                        if (se_manifest_load_buffer(s, "step", yaml, strlen(yaml), NULL, NULL, &d) <
                            0)
                                fail_msg("manifest: %s", d.text);
                        free(yaml);
                }
        }
}

/* The system, counting the carried syncs (nat chains only). */
static unsigned carried_applies;
static int count_apply(void *ctx, enum se_proxy_tool tool, const char *data, size_t n, char *err,
                       size_t errsize)
{
        (void)ctx;
        if (n > 5 && strncmp(data, "*nat\n", 5) == 0 && !memmem(data, n, "KUBE-SERVICES", 13))
                carried_applies++;
        return se_proxy_apply(tool, data, n, err, errsize);
}

static struct se_proxy_proxier *proxier_for(struct se_store *s, struct se_proxy_runner *run)
{
        struct se_proxy_options o;
        enum se_ip_family fam = SE_IPV4;
        struct se_proxy_proxier_config cfg = { .nft = use_nft,
                                               .minimal = true,
                                               .sync_period_ns = 3600000000000LL,
                                               .min_sync_period_ns = 0 };
        *run = *se_proxy_runner_system();
        run->apply = count_apply;
        options(&o);
        struct se_proxy_proxier *p = se_proxy_proxier_new(&cfg, run);
        assert_non_null(p);
        static const enum se_kind kinds[] = { SE_KIND_SERVICE, SE_KIND_ENDPOINT_SLICE };
        for (int k = 0; k < 2; k++)
                assert_int_equal(se_store_subscribe(s, kinds[k], se_proxy_proxier_on_change, p), 0);
        assert_int_equal(se_proxy_proxier_begin(p, &o, &fam, 1), 0);
        return p;
}

static const char *const carried_steps[] = {
        base,
        "a/web 172.30.0.10 10.1.0.2,10.1.0.3\n" /* endpoints changed: carried */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.1\n",
        "a/web 172.30.0.10 10.1.0.2,10.1.0.3,10.1.0.4\n" /* 2 -> 3, dns replaced */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n",
        "a/web* 172.30.0.10 10.1.0.4\n" /* affinity on, 3 -> 1 */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n",
        "a/web* 172.30.0.10 10.1.0.4,10.1.0.5\n" /* affinity kept, 1 -> 2 */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n",
        "a/web~lc* 172.30.0.10 10.1.0.4,10.1.0.5\n" /* web routed to the userspace proxy */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns~lc 172.30.0.50 UDP 10.1.4.2\n",
        "a/web~lc* 172.30.0.10 10.1.0.5\n" /* routed: its endpoints change */
        "c/api 172.30.0.30 10.1.2.2\n"
        "e/dns~lc 172.30.0.50 UDP 10.1.4.2\n",
        "a/web* 172.30.0.10 10.1.0.5\n" /* back to the kernel */
        "c/api 172.30.0.30 10.1.2.2\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n",
        "a/web* 172.30.0.10 10.1.0.4,10.1.0.5\n" /* a service shares web's endpoint */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "f/share 172.30.0.60 10.1.0.4\n",
        "a/web* 172.30.0.10 10.1.0.5\n" /* web drops it: share still hairpins */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "f/share 172.30.0.60 10.1.0.4\n",
        "a/web* 172.30.0.10 10.1.0.5\n" /* share moves: nobody has it */
        "c/api 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "f/share 172.30.0.60 10.1.0.6\n",
        "a/web~rr* 172.30.0.10 10.1.0.5,10.1.0.6\n" /* in-kernel schedulers, carried */
        "c/api~sh 172.30.0.30 10.1.2.1\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "f/share 172.30.0.60 10.1.0.6\n",
        "a/web~rr* 172.30.0.10 10.1.0.6\n" /* their endpoints change */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "f/share 172.30.0.60 10.1.0.6\n",
};

/* after carried_steps: services added and removed, each step carried */
static const char *const add_remove_steps[] = {
        "a/web~rr* 172.30.0.10 10.1.0.6\n" /* one added */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "f/share 172.30.0.60 10.1.0.6\n"
        "g/new 172.30.0.70 10.1.5.1\n",
        "a/web~rr* 172.30.0.10 10.1.0.6\n" /* one added without endpoints */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "f/share 172.30.0.60 10.1.0.6\n"
        "g/new 172.30.0.70 10.1.5.1\n"
        "h/none 172.30.0.80 -\n",
        "a/web~rr* 172.30.0.10 10.1.0.6\n" /* share removed, pin added: */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n" /* the hairpin stays */
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "g/new 172.30.0.70 10.1.5.1\n"
        "h/none 172.30.0.80 -\n"
        "i/pin* 172.30.0.90 10.1.0.6\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* removed, added and changed */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "e/dns 172.30.0.50 UDP 10.1.4.2\n"
        "h/none 172.30.0.80 -\n"
        "i/pin* 172.30.0.90 10.1.0.6\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* two removed (one with UDP flows) */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "i/pin* 172.30.0.90 10.1.0.6\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* the last holder of a hairpin removed */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n",
};

/* then services of every kind added, changed and removed, each step
 * carried: their KUBE-SERVICES, KUBE-NODEPORTS and filter rules edited in */
static const char *const typed_steps[] = {
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* a NodePort added */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n"
        "k/np@np 172.30.0.110 10.1.7.1\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* a LoadBalancer with source ranges */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n"
        "k/np@np 172.30.0.110 10.1.7.1\n"
        "l/lb@lb 172.30.0.120 10.1.8.1,10.1.8.2\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* eTP Local with affinity, one */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n" /* endpoint elsewhere; */
        "d/first@np 172.30.0.115 10.1.7.9\n" /* and one before the others */
        "j/udp 172.30.0.100 UDP 10.1.6.1\n"
        "k/np@np 172.30.0.110 10.1.7.1\n"
        "l/lb@lb 172.30.0.120 10.1.8.1,10.1.8.2\n"
        "m/loc@lbl* 172.30.0.130 10.1.9.1,10.1.9.2!\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* eTP Local, no local endpoint */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n" /* (DROP), NodePort removed */
        "d/first@np 172.30.0.115 10.1.7.9\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n"
        "l/lb@lb 172.30.0.120 10.1.8.1,10.1.8.2\n"
        "m/loc@lbl* 172.30.0.130 10.1.9.1,10.1.9.2!\n"
        "q/nolocal@npl 172.30.0.140 10.1.10.1!\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* LoadBalancer to ClusterIP, */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n" /* one added without endpoints */
        "d/first@np 172.30.0.115 10.1.7.9\n" /* (REJECT), Local to Cluster */
        "j/udp 172.30.0.100 UDP 10.1.6.1\n"
        "l/lb 172.30.0.120 10.1.8.1,10.1.8.2\n"
        "m/loc@lb* 172.30.0.130 10.1.9.1,10.1.9.2!\n"
        "q/nolocal@npl 172.30.0.140 10.1.10.1!\n"
        "o/none@lb 172.30.0.150 -\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* three removed, one added */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n"
        "l/lb 172.30.0.120 10.1.8.1,10.1.8.2\n"
        "p/aff@npl* 172.30.0.160 10.1.11.1,10.1.11.2\n",
        "a/web~rr* 172.30.0.10 10.1.0.7\n" /* the typed ones removed */
        "c/api~mh 172.30.0.30 10.1.2.1,10.1.2.2\n"
        "j/udp 172.30.0.100 UDP 10.1.6.1\n",
};

/* the child: the proxier in netns X, fed step by step through the store
 * (changes carried where they can be, else partial from the whole
 * table); after each step a fresh proxier's full sync of the same
 * cluster in a fresh netns Y must save the same */
static int carried_child(void)
{
        const char *const *all[4] = { carried_steps, add_remove_steps, typed_steps, steps };
        size_t n_all[4] = { sizeof(carried_steps) / sizeof(carried_steps[0]),
                            sizeof(add_remove_steps) / sizeof(add_remove_steps[0]),
                            sizeof(typed_steps) / sizeof(typed_steps[0]),
                            sizeof(steps) / sizeof(steps[0]) };
        struct se_proxy_runner run_x, run_y;
        int code = 0;
        if (unshare(CLONE_NEWNET) < 0)
                return 2;
        int x = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        struct se_store *sx = se_store_new();
        struct se_proxy_proxier *px = proxier_for(sx, &run_x);
        const char *prev = "";
        carried_applies = 0;
        uint64_t carried_syncs = 0;
        for (int list = 0; list < 4 && !code; list++)
                for (size_t i = 0; i < n_all[list] && !code; i++) {
                        const char *spec = all[list][i];
                        store_step(sx, prev, spec);
                        prev = spec;
                        struct se_proxy_proxier_stats st0, st1;
                        se_proxy_proxier_stats(px, &st0);
                        (void)se_proxy_proxier_step(px, sx);
                        se_proxy_proxier_stats(px, &st1);
                        if (st1.syncs_failed != st0.syncs_failed)
                                code = 10 + (int)i;
                        carried_syncs += st1.syncs_carried - st0.syncs_carried;
                        if ((list == 1 || list == 2) &&
                            st1.syncs_carried != st0.syncs_carried + 1) {
                                fprintf(stderr, "# list %d step %zu was not carried\n", list, i);
                                code = 70 + (int)i;
                        }
                        char *xs[2] = { use_nft ? nft_saved() : saved("nat"),
                                        use_nft ? strdup("") : saved("filter") };
                        if (!xs[0])
                                code = 3;
                        if (!code && unshare(CLONE_NEWNET) < 0)
                                code = 30 + (int)i;
                        struct se_store *sy = se_store_new();
                        struct se_proxy_proxier *py = code ? NULL : proxier_for(sy, &run_y);
                        store_step(sy, "", spec);
                        if (py) {
                                se_proxy_proxier_step(py, sy);
                                se_proxy_proxier_stats(py, &st1);
                                if (st1.syncs_full != 1)
                                        code = 40 + (int)i;
                        }
                        char *ys[2] = { code    ? NULL :
                                        use_nft ? nft_saved() :
                                                  saved("nat"),
                                        code    ? NULL :
                                        use_nft ? strdup("") :
                                                  saved("filter") };
                        for (int t = 0; t < 2 && !code; t++)
                                if (strcmp(xs[t], ys[t]) != 0) {
                                        fprintf(stderr,
                                                "# list %d step %zu, %s:\n# carried:\n%s# full:\n%s",
                                                list, i, t ? "filter" : "nat", xs[t], ys[t]);
                                        code = 50 + (int)i;
                                }
                        for (int t = 0; t < 2; t++) {
                                free(xs[t]);
                                free(ys[t]);
                        }
                        se_proxy_proxier_free(py);
                        se_store_free(sy);
                        if (!code && setns(x, CLONE_NEWNET) < 0)
                                code = 4;
                }
        /* the endpoint-only steps went the carried way, and for iptables
         * wrote only nat chains */
        if (!code && (carried_syncs < 3 || (!use_nft && carried_applies < 3))) {
                fprintf(stderr, "# only %u carried syncs (%u nat-only applies)\n",
                        (unsigned)carried_syncs, carried_applies);
                code = 60;
        }
        close(x);
        se_proxy_proxier_free(px);
        se_store_free(sx);
        return code;
}

static void test_partial__carried_applied_equals_full(void **state)
{
        (void)state;
        use_nft = false;
        run_child(carried_child);
}

/* the proxier with nftables, fed through the store the same way */
static void test_partial__nft_proxier_applied_equals_full(void **state)
{
        (void)state;
        use_nft = true;
        run_child(carried_child);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_partial__one_endpoint),
                cmocka_unit_test(test_partial__service_add_remove),
                cmocka_unit_test(test_partial__seeded_retry_deletes_once),
                cmocka_unit_test(test_partial__carried_add_remove_then_table_sync),
                cmocka_unit_test(test_partial__nft_elements),
                cmocka_unit_test(test_partial__nft_endpoint_maps),
                cmocka_unit_test(test_partial__nft_scheduler_switch),
                cmocka_unit_test(test_partial__applied_equals_full),
                cmocka_unit_test(test_partial__carried_applied_equals_full),
                cmocka_unit_test(test_partial__nft_proxier_applied_equals_full),
                cmocka_unit_test(test_partial__nft_applied_equals_full),
                cmocka_unit_test(test_partial__nft_applied_equals_full_plain),
                cmocka_unit_test(test_partial__nft_full_sync_keeps_affinity),
                cmocka_unit_test(test_partial__nft_upgrade_from_old_layout),
                cmocka_unit_test(test_partial__nft_names_over_netlink),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
