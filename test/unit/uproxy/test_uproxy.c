/* The userspace proxy's pure parts: the snapshot from a store, the
 * scheduler annotation, the retry timeouts, affinity's integer-second rule,
 * the endpoint choice (rr, tried set, penalty box, terminating endpoints,
 * affinity and its reset) and the redirect rules. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/hashmap.h>
#include <svcenv/proxy.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>
#include <svcenv/uproxy.h>

#include "../../../pkg/uproxy/uproxy_internal.h"
#include "store_yaml.h"

#define SEC 1000000000LL

static const char cluster[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns,\n"
        "  annotations: {svcenv.io/scheduler: ' sh , port '}}\n"
        "spec: {type: NodePort, clusterIP: 10.96.0.10, externalIPs: [192.0.2.7],\n"
        "  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080},\n"
        "          {name: dns, port: 53, protocol: UDP, targetPort: 8080},\n"
        "          {name: s, port: 99, protocol: SCTP, targetPort: 8080}]}\n"
        "---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: ns,\n"
        "  annotations: {svcenv.io/scheduler: 'lc,port'}}\n"
        "spec: {clusterIP: 10.96.0.11, sessionAffinity: ClientIP,\n"
        "  sessionAffinityConfig: {clientIP: {timeoutSeconds: 30}},\n"
        "  ports: [{name: http, port: 80, targetPort: 8080}]}\n"
        "---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}\n"
        "addressType: IPv4\n"
        "ports: [{name: http, port: 8080, protocol: TCP}, {name: dns, port: 8080, protocol: UDP},\n"
        "        {name: s, port: 8080, protocol: SCTP}]\n"
        "endpoints:\n"
        "- {addresses: [10.244.2.2], conditions: {ready: true}}\n"
        "- {addresses: [10.244.1.2], conditions: {ready: true}}\n"
        "- {addresses: [10.244.3.2], conditions: {ready: false, serving: true, terminating: "
        "true}}\n"
        "---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: bad-1, namespace: ns, labels: {kubernetes.io/service-name: bad}}\n"
        "addressType: IPv4\nports: [{name: http, port: 8080, protocol: TCP}]\n"
        "endpoints:\n- {addresses: [10.244.1.2], conditions: {ready: true}}\n";

struct fixture {
        struct se_store *store;
        struct se_proxy_table *t;
        struct se_uproxy_snapshot *s;
};

static void build(struct fixture *f)
{
        struct se_proxy_options opt;
        se_proxy_options_init(&opt);
        opt.node_name = "node-a";
        f->store = t_load(cluster);
        assert_int_equal(se_proxy_table_build(f->store, &opt, SE_IPV4, &f->t), 0);
        const struct se_proxy_table *ts[] = { f->t };
        assert_int_equal(se_uproxy_snapshot_build(ts, 1, f->store, NULL, &f->s), 0);
}

static void release(struct fixture *f)
{
        se_uproxy_snapshot_free(f->s);
        se_proxy_table_free(f->t);
        se_store_free(f->store);
}

static const struct se_uproxy_svc *find(const struct se_uproxy_snapshot *s, const char *ip,
                                        uint16_t port, int proto)
{
        uint8_t a[4];
        assert_int_equal(inet_pton(AF_INET, ip, a), 1);
        const struct se_uproxy_vip *v = se_uproxy_snapshot_find(s, AF_INET, a, port, proto);
        return v ? &s->svcs[v->svc] : NULL;
}

static void test_uproxy__snapshot(void **state)
{
        (void)state;
        struct fixture f;
        build(&f);
        /* web tcp, web udp, bad tcp: SCTP is not proxied */
        assert_int_equal(f.s->n_svcs, 3);
        const struct se_uproxy_svc *web = find(f.s, "10.96.0.10", 80, IPPROTO_TCP);
        assert_non_null(web);
        assert_string_equal(web->key, "ns/web:http/tcp");
        assert_string_equal(web->scheduler, "sh,port"); /* normalised */
        assert_int_equal(web->n_eps, 3);
        assert_string_equal(web->eps[0].str, "10.244.1.2:8080"); /* sorted */
        assert_true(web->eps[0].ready);
        assert_false(web->eps[2].ready);
        assert_true(web->eps[2].serving && web->eps[2].terminating);
        const struct sockaddr_in *a = (const struct sockaddr_in *)&web->eps[0].addr;
        assert_int_equal(ntohs(a->sin_port), 8080);
        /* externalIP and NodePort (any local address) find the same service */
        assert_ptr_equal(find(f.s, "192.0.2.7", 80, IPPROTO_TCP), web);
        assert_ptr_equal(find(f.s, "10.99.0.1", 30080, IPPROTO_TCP), web);
        assert_null(find(f.s, "10.99.0.1", 30081, IPPROTO_TCP));
        assert_null(find(f.s, "10.96.0.10", 81, IPPROTO_TCP));
        const struct se_uproxy_svc *dns = find(f.s, "10.96.0.10", 53, IPPROTO_UDP);
        assert_non_null(dns);
        assert_int_equal(dns->proto, IPPROTO_UDP);
        assert_null(find(f.s, "10.96.0.10", 53, IPPROTO_TCP));
        /* an invalid annotation: rr, counted */
        const struct se_uproxy_svc *bad = find(f.s, "10.96.0.11", 80, IPPROTO_TCP);
        assert_string_equal(bad->scheduler, "rr");
        assert_int_equal(f.s->n_bad_sched, 1);
        assert_true(bad->affinity);
        assert_int_equal(bad->affinity_timeout, 30);
        /* --scheduler: the default for services without (a valid) annotation */
        struct se_uproxy_snapshot *s2 = NULL;
        const struct se_proxy_table *ts[] = { f.t };
        assert_int_equal(se_uproxy_snapshot_build(ts, 1, f.store, "mh,port", &s2), 0);
        const struct se_uproxy_vip *v = se_uproxy_snapshot_find(
                s2, AF_INET, (const uint8_t[]){ 10, 96, 0, 11 }, 80, IPPROTO_TCP);
        assert_non_null(v);
        assert_string_equal(s2->svcs[v->svc].scheduler, "mh,port");
        v = se_uproxy_snapshot_find(s2, AF_INET, (const uint8_t[]){ 10, 96, 0, 10 }, 80,
                                    IPPROTO_TCP);
        assert_string_equal(s2->svcs[v->svc].scheduler, "sh,port"); /* its own */
        se_uproxy_snapshot_free(s2);
        release(&f);
}

static void test_uproxy__scheduler_annotation(void **state)
{
        (void)state;
        char out[SE_UPROXY_MAX_SCHED];
        struct se_diag d;
        static const char *const good[] = {
                "rr", "lc",     "wlc", "sed",         "nq",
                "dh", "random", "p2c", "mh,fallback", "sh,port,fallback"
        };
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_int_equal(se_uproxy_parse_scheduler(good[i], out, &d), 0);
        assert_string_equal(out, "sh,port,fallback");
        static const char *const bad[] = { "",         "RR",
                                           "rr,",      ",rr",
                                           "lc,port",  "sh,weights",
                                           "sh,,port", "roundrobin",
                                           "rr rr",    "sh,port,fallback,port,fallback,port" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                d.text[0] = 0;
                assert_int_equal(se_uproxy_parse_scheduler(bad[i], out, &d), -EINVAL);
                assert_true(strstr(d.text, "scheduler") != NULL);
        }
}

static void test_uproxy__retry_timeouts(void **state)
{
        (void)state;
        /* kube-proxy v1.25's EndpointDialTimeouts */
        assert_int_equal(uproxy_attempt_timeout_ns(0), 250000000LL);
        assert_int_equal(uproxy_attempt_timeout_ns(1), 500000000LL);
        assert_int_equal(uproxy_attempt_timeout_ns(2), 1000000000LL);
        assert_int_equal(uproxy_attempt_timeout_ns(3), 2000000000LL);
        assert_int_equal(uproxy_attempt_timeout_ns(4), -1);
}

static void test_uproxy__affinity_whole_seconds(void **state)
{
        (void)state;
        /* int(time.Since(lastUsed).Seconds()) < ttl */
        assert_true(uproxy_affinity_alive(0, 10 * SEC - 1, 10));
        assert_false(uproxy_affinity_alive(0, 10 * SEC, 10));
        assert_true(uproxy_affinity_alive(5 * SEC, 5 * SEC, 1));
        assert_false(uproxy_affinity_alive(0, SEC, 1));
}

/* A service state from the web service's endpoints (two ready, one
 * terminating) with its annotation's scheduler replaced by sched. */
static struct uproxy_svc *web_with(struct fixture *f, const char *sched)
{
        build(f);
        struct se_uproxy_svc web = *find(f->s, "10.96.0.10", 80, IPPROTO_TCP);
        snprintf(web.scheduler, sizeof(web.scheduler), "%s", sched);
        struct uproxy_svc *s = uproxy_svc_new("ns/web:http/tcp");
        assert_int_equal(uproxy_svc_set(s, &web), 0);
        return s;
}

/* rr: the mechanics below (tried, penalty, affinity) in a plain rotation */
static struct uproxy_svc *web_state(struct fixture *f)
{
        return web_with(f, "rr");
}

static const char *pick(struct uproxy_svc *s, const char *client, struct uproxy_tried *t,
                        bool reset, int64_t now)
{
        static char buf[64];
        struct sockaddr_in a = { .sin_family = AF_INET };
        inet_pton(AF_INET, client, &a.sin_addr);
        struct uproxy_ep *ep = uproxy_pick(s, (struct sockaddr *)&a, NULL, t, reset, now);
        if (!ep)
                return "none";
        snprintf(buf, sizeof(buf), "%s", ep->str);
        if (t && t->n < UPROXY_MAX_ATTEMPTS)
                t->ep[t->n++] = ep; /* the tried set holds the reference */
        else
                uproxy_ep_unref(ep);
        return buf;
}

static void free_tried(struct uproxy_tried *t)
{
        for (unsigned i = 0; i < t->n; i++)
                uproxy_ep_unref(t->ep[i]);
        t->n = 0;
}

static void test_uproxy__pick_rr_tried_penalty(void **state)
{
        (void)state;
        struct fixture f;
        struct uproxy_svc *s = web_state(&f);
        /* the terminating endpoint (10.244.3.2) takes no new connections */
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 0), "10.244.1.2:8080");
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 0), "10.244.2.2:8080");
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 0), "10.244.1.2:8080");
        /* one connection never tries an endpoint twice */
        struct uproxy_tried t = { .n = 0 };
        assert_string_equal(pick(s, "10.0.0.1", &t, false, 0), "10.244.2.2:8080");
        assert_string_equal(pick(s, "10.0.0.1", &t, true, 0), "10.244.1.2:8080");
        assert_string_equal(pick(s, "10.0.0.1", &t, true, 0), "none");
        /* a penalized endpoint is skipped while another is left ... */
        uproxy_penalize(s, t.ep[0], 0, 5 * SEC);
        free_tried(&t);
        for (int i = 0; i < 3; i++)
                assert_string_equal(pick(s, "10.0.0.1", NULL, false, SEC), "10.244.1.2:8080");
        /* ... tried when it is the only one left, and back after the penalty */
        assert_string_equal(pick(s, "10.0.0.1", &t, false, SEC), "10.244.1.2:8080");
        assert_string_equal(pick(s, "10.0.0.1", &t, true, SEC), "10.244.2.2:8080");
        free_tried(&t);
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 6 * SEC), "10.244.1.2:8080");
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 6 * SEC), "10.244.2.2:8080");
        uproxy_svc_unref(s);
        release(&f);
}

/* The annotation's scheduler (pkg/lb) decides, fed the live counts: lc
 * weighs an active connection 256 inactive ones; sh pins a client. */
static void test_uproxy__scheduler_decides(void **state)
{
        (void)state;
        struct fixture f;
        struct uproxy_svc *s = web_with(&f, "lc");
        atomic_store(&s->eps[0]->active, 2);
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 0), "10.244.2.2:8080");
        atomic_store(&s->eps[1]->active, 1);
        atomic_store(&s->eps[1]->inactive, 300); /* 556 > 512 */
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 0), "10.244.1.2:8080");
        uproxy_svc_unref(s);
        release(&f);
        s = web_with(&f, "sh,fallback");
        for (int c = 1; c <= 20; c++) { /* each client, twice: the same endpoint */
                char ip[32], first[64];
                snprintf(ip, sizeof(ip), "10.0.%d.%d", c, c * 7);
                snprintf(first, sizeof(first), "%s", pick(s, ip, NULL, false, 0));
                assert_string_not_equal(first, "none");
                assert_string_not_equal(first, "10.244.3.2:8080"); /* terminating */
                assert_string_equal(pick(s, ip, NULL, false, 0), first);
        }
        uproxy_svc_unref(s);
        release(&f);
}

/* The decision counters: the scheduler's picks per endpoint, labelled by
 * it and restarted with a new one; a retry sh cannot place counts as round
 * robin's. */
static void test_uproxy__decision_metrics(void **state)
{
        (void)state;
        struct fixture f, g;
        struct uproxy_svc *lc = web_with(&f, "lc");
        struct uproxy_svc *sh = web_with(&g, "sh");
        snprintf(sh->spn, sizeof(sh->spn), "ns/pinned:http");
        assert_string_equal(pick(lc, "10.0.0.1", NULL, false, 0), "10.244.1.2:8080");
        atomic_store(&lc->eps[0]->active, 1);
        assert_string_equal(pick(lc, "10.0.0.1", NULL, false, 0), "10.244.2.2:8080");
        assert_string_equal(pick(lc, "10.0.0.2", NULL, false, 0), "10.244.2.2:8080");
        struct uproxy_tried t = { .n = 0 };
        char first[64];
        snprintf(first, sizeof(first), "%s", pick(sh, "10.0.0.1", &t, false, 0));
        const char *other =
                strcmp(first, "10.244.1.2:8080") == 0 ? "10.244.2.2:8080" : "10.244.1.2:8080";
        assert_string_equal(pick(sh, "10.0.0.1", &t, true, 0), other);
        free_tried(&t);

        struct se_hashmap m = SE_HASHMAP_INIT;
        assert_int_equal(se_hashmap_put(&m, "lc", lc, NULL), 0);
        assert_int_equal(se_hashmap_put(&m, "sh", sh, NULL), 0);
        struct se_strbuf b;
        se_strbuf_init(&b, 0);
        uproxy_decision_metrics(&m, &b);
        char want[512];
        const char *picks = "svcenv_proxy_scheduler_picks_total{service=";
        const char *lines[] = {
                "\"ns/web:http\",protocol=\"TCP\",endpoint=\"10.244.1.2:8080\","
                "scheduler=\"lc\"} 1\n",
                "\"ns/web:http\",protocol=\"TCP\",endpoint=\"10.244.2.2:8080\","
                "scheduler=\"lc\"} 2\n",
                "\"ns/web:http\",protocol=\"TCP\",endpoint=\"10.244.3.2:8080\","
                "scheduler=\"lc\"} 0\n",
        };
        for (size_t i = 0; i < 3; i++) {
                snprintf(want, sizeof(want), "%s%s", picks, lines[i]);
                assert_non_null(strstr(b.buf, want));
        }
        snprintf(want, sizeof(want),
                 "svcenv_proxy_scheduler_picks_total{service=\"ns/pinned:http\",protocol=\"TCP\","
                 "endpoint=\"%s\",scheduler=\"sh\"} 1\n",
                 first);
        assert_non_null(strstr(b.buf, want));
        snprintf(want, sizeof(want),
                 "svcenv_proxy_scheduler_fallback_total{service=\"ns/pinned:http\","
                 "protocol=\"TCP\",endpoint=\"%s\",scheduler=\"sh\"} 1\n",
                 other);
        assert_non_null(strstr(b.buf, want));
        assert_non_null(strstr(b.buf, "# TYPE svcenv_proxy_scheduler_fallback_total counter\n"));
        se_strbuf_release(&b);

        /* another scheduler: its counts start at 0 */
        struct se_uproxy_svc web = *find(f.s, "10.96.0.10", 80, IPPROTO_TCP);
        snprintf(web.scheduler, sizeof(web.scheduler), "rr");
        assert_int_equal(uproxy_svc_set(lc, &web), 0);
        se_strbuf_init(&b, 0);
        uproxy_decision_metrics(&m, &b);
        assert_null(strstr(b.buf, "scheduler=\"lc\""));
        assert_non_null(strstr(b.buf, "endpoint=\"10.244.2.2:8080\",scheduler=\"rr\"} 0\n"));
        se_strbuf_release(&b);
        se_hashmap_release(&m);
        uproxy_svc_unref(lc);
        uproxy_svc_unref(sh);
        release(&f);
        release(&g);
}

/* sh without fallback whose hashed endpoint is in the penalty box: the
 * box only orders the choice, so the connection still goes there (and a
 * failure is retried round robin) instead of failing unattempted. */
static void test_uproxy__hash_penalized_still_tried(void **state)
{
        (void)state;
        struct fixture f;
        struct uproxy_svc *s = web_with(&f, "sh");
        char first[64];
        snprintf(first, sizeof(first), "%s", pick(s, "10.0.0.1", NULL, false, 0));
        assert_string_not_equal(first, "none");
        struct uproxy_tried t = { .n = 0 };
        assert_string_equal(pick(s, "10.0.0.1", &t, false, 0), first);
        uproxy_penalize(s, t.ep[0], 0, 5 * SEC);
        free_tried(&t);
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, SEC), first);
        uproxy_svc_unref(s);
        release(&f);
}

static void test_uproxy__terminating_fallback(void **state)
{
        (void)state;
        struct fixture f;
        build(&f);
        struct se_uproxy_svc web = *find(f.s, "10.96.0.10", 80, IPPROTO_TCP);
        struct se_uproxy_ep eps[3];
        snprintf(web.scheduler, sizeof(web.scheduler), "rr");
        memcpy(eps, web.eps, sizeof(eps));
        eps[0].ready = eps[1].ready = false; /* not ready, not serving */
        eps[0].serving = eps[1].serving = false;
        web.eps = eps;
        struct uproxy_svc *s = uproxy_svc_new(web.key);
        assert_int_equal(uproxy_svc_set(s, &web), 0);
        /* nothing ready: kube-proxy falls back to serving-terminating ones */
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 0), "10.244.3.2:8080");
        eps[2].serving = false;
        assert_int_equal(uproxy_svc_set(s, &web), 0);
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 0), "none");
        uproxy_svc_unref(s);
        release(&f);
}

static void test_uproxy__affinity(void **state)
{
        (void)state;
        struct fixture f;
        struct uproxy_svc *s = web_state(&f);
        s->affinity = true;
        s->affinity_timeout = 10;
        const char *first = pick(s, "10.0.0.1", NULL, false, 0);
        assert_string_equal(first, "10.244.1.2:8080");
        assert_string_equal(pick(s, "10.0.0.2", NULL, false, 0), "10.244.2.2:8080");
        for (int i = 1; i < 10; i++) /* refreshed on every use */
                assert_string_equal(pick(s, "10.0.0.1", NULL, false, i * 9 * SEC / 10),
                                    "10.244.1.2:8080");
        /* a failed attempt resets the affinity: rr moves on and the entry follows */
        struct uproxy_tried t = { .n = 0 };
        assert_string_equal(pick(s, "10.0.0.1", &t, false, 9 * SEC), "10.244.1.2:8080");
        assert_string_equal(pick(s, "10.0.0.1", &t, true, 9 * SEC), "10.244.2.2:8080");
        free_tried(&t);
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 9 * SEC), "10.244.2.2:8080");
        /* expired after whole seconds >= ttl: rr again */
        assert_string_equal(pick(s, "10.0.0.1", NULL, false, 19 * SEC), "10.244.1.2:8080");
        /* the endpoint leaves: its entries go (removeStaleAffinity) */
        struct se_uproxy_svc web = *find(f.s, "10.96.0.10", 80, IPPROTO_TCP);
        web.affinity = true;
        web.affinity_timeout = 10;
        snprintf(web.scheduler, sizeof(web.scheduler), "rr");
        web.eps++; /* without 10.244.1.2 */
        web.n_eps--;
        struct uproxy_ep *gone = s->eps[0];
        uproxy_ep_ref(gone);
        assert_int_equal(s->aff.n, 2);
        assert_int_equal(uproxy_svc_set(s, &web), 0);
        assert_true(atomic_load(&gone->removed));
        uproxy_ep_unref(gone);
        assert_int_equal(s->aff.n, 1); /* 10.0.0.2's entry (10.244.2.2) stays */
        assert_string_equal(pick(s, "10.0.0.2", NULL, false, 20 * SEC), "10.244.2.2:8080");
        uproxy_affinity_expire(s, 40 * SEC);
        assert_int_equal(s->aff.n, 0);
        uproxy_svc_unref(s);
        release(&f);
}

static void test_uproxy__rules(void **state)
{
        (void)state;
        struct fixture f;
        build(&f);
        struct se_uproxy_rules_opts o = { .port = 10262, .mark = SE_UPROXY_DEFAULT_MARK };
        struct se_strbuf b;
        se_strbuf_init(&b, 0);
        assert_int_equal(se_uproxy_rules_iptables(f.t, &o, &b), 0);
        static const char *const want[] = {
                "*nat\n:SVCENV-USERSPACE - [0:0]\n:SVCENV-USERSPACE-NODEPORTS - [0:0]\n",
                "-A SVCENV-USERSPACE -m comment --comment \"ns/web:http\" -d 10.96.0.10/32 -p "
                "tcp -m tcp --dport 80 -j REDIRECT --to-ports 10262\n",
                "-A SVCENV-USERSPACE -m comment --comment \"ns/web:http\" -d 192.0.2.7/32 -p "
                "tcp -m tcp --dport 80 -j REDIRECT --to-ports 10262\n",
                "-A SVCENV-USERSPACE-NODEPORTS -m comment --comment \"ns/web:http nodePort\" -p "
                "tcp -m tcp --dport 30080 -j REDIRECT --to-ports 10262\n",
                "-A SVCENV-USERSPACE -m addrtype --dst-type LOCAL -j SVCENV-USERSPACE-NODEPORTS\n"
                "COMMIT\n*mangle\n:SVCENV-USERSPACE-TPROXY - [0:0]\n",
                "-A SVCENV-USERSPACE-TPROXY -m comment --comment \"ns/web:dns\" -d 10.96.0.10/32 "
                "-p udp -m udp --dport 53 -j TPROXY --on-port 10262 --on-ip 0.0.0.0 "
                "--tproxy-mark 0x800000/0x800000\n",
        };
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                if (!strstr(b.buf, want[i]))
                        fail_msg("missing:\n%s\nin:\n%s", want[i], b.buf);
        assert_null(strstr(b.buf, "dport 99")); /* SCTP */
        se_strbuf_reset(&b);
        assert_int_equal(se_uproxy_rules_nft(f.t, &o, &b), 0);
        static const char *const nft[] = {
                "add table ip svcenv-userspace\ndelete table ip svcenv-userspace\n",
                "\t\tip daddr 10.96.0.10 tcp dport 80 redirect to :10262 comment \"ns/web:http\"\n",
                "\t\tfib daddr type local tcp dport 30080 redirect to :10262 comment "
                "\"ns/web:http nodePort\"\n",
                "type filter hook prerouting priority mangle; policy accept;\n\t\tip daddr "
                "10.96.0.10 udp dport 53 tproxy to :10262 meta mark set 0x800000 accept",
        };
        for (size_t i = 0; i < sizeof(nft) / sizeof(nft[0]); i++)
                if (!strstr(b.buf, nft[i]))
                        fail_msg("missing:\n%s\nin:\n%s", nft[i], b.buf);
        /* want(): only the chosen service ports */
        se_strbuf_reset(&b);
        o.want = NULL;
        se_strbuf_release(&b);
        release(&f);
}

static bool only_bad(const struct se_proxy_svcport *sp, void *data)
{
        (void)data;
        return strcmp(sp->name, "bad") == 0;
}

static void test_uproxy__rules_want(void **state)
{
        (void)state;
        struct fixture f;
        build(&f);
        struct se_uproxy_rules_opts o = { .port = 1, .mark = 1, .want = only_bad };
        struct se_strbuf b;
        se_strbuf_init(&b, 0);
        assert_int_equal(se_uproxy_rules_iptables(f.t, &o, &b), 0);
        assert_non_null(strstr(b.buf, "10.96.0.11/32"));
        assert_null(strstr(b.buf, "10.96.0.10/32"));
        se_strbuf_release(&b);
        release(&f);
}

static const char lb_cluster[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: lb, namespace: ns,\n"
        "  annotations: {svcenv.io/retry: 'true'}}\n"
        "spec: {type: LoadBalancer, clusterIP: 10.96.0.12,\n"
        "  loadBalancerSourceRanges: [10.99.0.0/24, 203.0.113.0/24],\n"
        "  ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30081},\n"
        "          {name: dns, port: 53, protocol: UDP, targetPort: 8080, nodePort: 30082}]}\n"
        "status: {loadBalancer: {ingress: [{ip: 192.0.2.50}]}}\n"
        "---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: lb-1, namespace: ns, labels: {kubernetes.io/service-name: lb}}\n"
        "addressType: IPv4\n"
        "ports: [{name: http, port: 8080, protocol: TCP}, {name: dns, port: 8080, protocol: UDP}]\n"
        "endpoints:\n- {addresses: [10.244.1.2], conditions: {ready: true}}\n";

/* the rules text for lb_cluster with the node's primary IP node_ip */
static void lb_rules(const char *node_ip, bool nft, struct se_strbuf *b)
{
        struct se_proxy_options opt;
        se_proxy_options_init(&opt);
        opt.node_name = "node-a";
        assert_int_equal(se_parse_ip(node_ip, &opt.node_ips[0]), 0);
        opt.n_node_ips = 1;
        struct se_store *store = t_load(lb_cluster);
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(store, &opt, SE_IPV4, &t), 0);
        struct se_uproxy_rules_opts o = { .port = 10262,
                                          .mark = SE_UPROXY_DEFAULT_MARK,
                                          .node = &opt };
        assert_true(se_uproxy_any_firewall(t, &o));
        assert_int_equal(nft ? se_uproxy_rules_nft(t, &o, b) : se_uproxy_rules_iptables(t, &o, b),
                         0);
        se_proxy_table_free(t);
        se_store_free(store);
}

static void want_all(const char *buf, const char *const *want, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!strstr(buf, want[i]))
                        fail_msg("missing:\n%s\nin:\n%s", want[i], buf);
}

/* loadBalancerSourceRanges: the LB IP is redirected only from the ranges
 * (and from the LB IP itself when a range holds the node IP); the rest is
 * dropped, as kube-proxy's firewall. The ClusterIP and NodePorts are not
 * filtered (kube-proxy's are not either). */
static void test_uproxy__rules_source_ranges(void **state)
{
        (void)state;
        struct se_strbuf b;
        se_strbuf_init(&b, 0);
        lb_rules("10.99.0.1", false, &b);
        static const char *const ipt[] = {
                "-A SVCENV-USERSPACE -m comment --comment \"ns/lb:http\" -d 10.96.0.12/32 -p tcp "
                "-m tcp --dport 80 -j REDIRECT",
                "-A SVCENV-USERSPACE -m comment --comment \"ns/lb:http\" -s 10.99.0.0/24 -d "
                "192.0.2.50/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 10262\n",
                "-A SVCENV-USERSPACE -m comment --comment \"ns/lb:http\" -s 203.0.113.0/24 -d "
                "192.0.2.50/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 10262\n",
                "-A SVCENV-USERSPACE -m comment --comment \"ns/lb:http\" -s 192.0.2.50/32 -d "
                "192.0.2.50/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 10262\n",
                "-A SVCENV-USERSPACE-TPROXY -m comment --comment \"ns/lb:dns\" -s 10.99.0.0/24 -d "
                "192.0.2.50/32 -p udp -m udp --dport 53 -j TPROXY",
                "COMMIT\n*filter\n:SVCENV-USERSPACE-FIREWALL - [0:0]\n"
                "-A SVCENV-USERSPACE-FIREWALL -m comment --comment \"ns/lb:dns traffic not "
                "accepted by its loadBalancerSourceRanges\" -d 192.0.2.50/32 -p udp -m udp --dport "
                "53 -m mark ! --mark 0x800000/0x800000 -j DROP\n"
                "-A SVCENV-USERSPACE-FIREWALL -m comment --comment \"ns/lb:http traffic not "
                "accepted by its loadBalancerSourceRanges\" -d 192.0.2.50/32 -p tcp -m tcp --dport "
                "80 -j DROP\nCOMMIT\n",
        };
        want_all(b.buf, ipt, SE_ARRAY_SIZE(ipt));
        /* no unfiltered redirect of the LB IP */
        assert_null(strstr(b.buf, "\"ns/lb:http\" -d 192.0.2.50/32"));
        se_strbuf_reset(&b);
        lb_rules("10.98.0.1", false, &b); /* node outside the ranges: no LB IP source */
        assert_null(strstr(b.buf, "-s 192.0.2.50/32"));
        assert_non_null(strstr(b.buf, "-s 203.0.113.0/24 -d 192.0.2.50/32"));
        se_strbuf_reset(&b);
        lb_rules("10.99.0.1", true, &b);
        static const char *const nft[] = {
                "\tset firewall-0 {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\tauto-merge\n"
                "\t\tcomment \"ns/lb:dns\"\n\t\telements = { 10.99.0.0/24, 203.0.113.0/24, "
                "192.0.2.50 }\n\t}\n",
                "\tchain filter-prerouting-pre-dnat {\n\t\ttype filter hook prerouting priority "
                "-110; policy accept;\n\t\tct state new jump firewall-check\n\t}\n",
                "\tchain filter-output-pre-dnat {\n\t\ttype filter hook output priority -110; "
                "policy accept;\n\t\tct state new jump firewall-check\n\t}\n",
                "\t\tip daddr 192.0.2.50 udp dport 53 ip saddr != @firewall-0 drop comment "
                "\"ns/lb:dns\"\n",
                "\t\tip daddr 192.0.2.50 tcp dport 80 ip saddr != @firewall-1 drop comment "
                "\"ns/lb:http\"\n",
                "\t\tip daddr 192.0.2.50 tcp dport 80 redirect to :10262 comment \"ns/lb:http\"\n",
        };
        want_all(b.buf, nft, SE_ARRAY_SIZE(nft));
        se_strbuf_release(&b);
        /* without ranges nothing of the firewall is written (the other tests' text) */
        struct fixture f;
        build(&f);
        struct se_uproxy_rules_opts o = { .port = 1, .mark = 1 };
        se_strbuf_init(&b, 0);
        assert_false(se_uproxy_any_firewall(f.t, &o));
        assert_int_equal(se_uproxy_rules_iptables(f.t, &o, &b), 0);
        assert_null(strstr(b.buf, "*filter"));
        se_strbuf_reset(&b);
        assert_int_equal(se_uproxy_rules_nft(f.t, &o, &b), 0);
        assert_null(strstr(b.buf, "firewall"));
        se_strbuf_release(&b);
        release(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_uproxy__snapshot),
                cmocka_unit_test(test_uproxy__scheduler_annotation),
                cmocka_unit_test(test_uproxy__retry_timeouts),
                cmocka_unit_test(test_uproxy__affinity_whole_seconds),
                cmocka_unit_test(test_uproxy__pick_rr_tried_penalty),
                cmocka_unit_test(test_uproxy__scheduler_decides),
                cmocka_unit_test(test_uproxy__decision_metrics),
                cmocka_unit_test(test_uproxy__hash_penalized_still_tried),
                cmocka_unit_test(test_uproxy__terminating_fallback),
                cmocka_unit_test(test_uproxy__affinity),
                cmocka_unit_test(test_uproxy__rules),
                cmocka_unit_test(test_uproxy__rules_want),
                cmocka_unit_test(test_uproxy__rules_source_ranges),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
