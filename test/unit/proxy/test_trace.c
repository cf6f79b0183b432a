/* svcenv trace's walk (pkg/proxy/proxy_trace.c): for every kind of
 * destination and policy, the verdict, the masquerade decision and the
 * endpoints with their probabilities; and every chain a trace names is
 * one the writers really write (iptables-restore input, nft script), with
 * the iptables spread computed from the writer's own --probability rules. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include <svcenv/proxy.h>
#include <svcenv/proxy_trace.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

#include "../../../pkg/proxy/proxy_internal.h"
#include "store_yaml.h"

/* ---- fixtures ---- */

static const char node_yaml[] =
        "apiVersion: v1\nkind: Node\n"
        "metadata: {name: node-a, labels: {topology.kubernetes.io/zone: z1}}\n"
        "status: {addresses: [{type: InternalIP, address: 10.99.0.1},"
        " {type: InternalIP, address: \"fd00:99::1\"}]}\n";

/* "---" + an EndpointSlice of svc (port http 8080/PROTO) with endpoints
 * given as "ip@node[@flags]" (flags: t terminating not ready, n not ready,
 * z:ZONE hint) */
static void slice(struct se_strbuf *sb, const char *svc, const char *proto, const char *family,
                  const char *const *eps)
{
        se_strbuf_printf(sb,
                         "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                         "metadata: {name: %s-1, namespace: e2e, labels: "
                         "{kubernetes.io/service-name: %s}}\n"
                         "addressType: %s\nports: [{name: http, port: 8080, protocol: %s}]\n"
                         "endpoints:\n",
                         svc, svc, family, proto);
        for (; *eps; eps++) {
                char ip[64], node[32], flags[32] = "";
                int n = sscanf(*eps, "%63[^@]@%31[^@]@%31s", ip, node, flags);
                assert_true(n >= 2);
                const char *cond = "{ready: true}";
                if (strchr(flags, 't'))
                        cond = "{ready: false, serving: true, terminating: true}";
                else if (strchr(flags, 'n'))
                        cond = "{ready: false, serving: false}";
                se_strbuf_printf(sb, "- {addresses: [\"%s\"], nodeName: %s, conditions: %s", ip,
                                 node, cond);
                const char *z = strstr(flags, "z:");
                if (z)
                        se_strbuf_printf(sb, ", hints: {forZones: [{name: %s}]}", z + 2);
                se_strbuf_puts(sb, "}\n");
        }
}

static void options(struct se_proxy_options *o, bool nft)
{
        se_proxy_options_init(o);
        o->node_name = "node-a";
        o->zone = "z1";
        assert_int_equal(se_parse_ip("10.99.0.1", &o->node_ips[0]), 0);
        assert_int_equal(se_parse_ip("fd00:99::1", &o->node_ips[1]), 0);
        o->n_node_ips = 2;
        assert_int_equal(se_parse_cidr("10.244.0.0/16", &o->cluster_cidrs[0]), 0);
        assert_int_equal(se_parse_cidr("fd00:244::/48", &o->cluster_cidrs[1]), 0);
        o->n_cluster_cidrs = 2;
        if (nft)
                se_proxy_options_nft_defaults(o);
}

/* A cluster: node-a, one Service (spec text) named svc, its slice. */
static struct se_store *cluster_annotated(const char *svc, const char *scheduler, const char *spec,
                                          const char *proto, const char *const *eps);

static struct se_store *cluster(const char *svc, const char *spec, const char *proto,
                                const char *const *eps)
{
        return cluster_annotated(svc, NULL, spec, proto, eps);
}

/* the same, the Service annotated svcenv.io/scheduler: scheduler (NULL: none) */
static struct se_store *cluster_annotated(const char *svc, const char *scheduler, const char *spec,
                                          const char *proto, const char *const *eps)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, node_yaml);
        se_strbuf_printf(
                &sb,
                "---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: e2e%s%s%s}\n"
                "spec: %s\n",
                svc, scheduler ? ", annotations: {svcenv.io/scheduler: '" : "",
                scheduler ? scheduler : "", scheduler ? "'}" : "", spec);
        bool v6 = eps && eps[0] && strchr(eps[0], ':') && strchr(eps[0], ':') < strchr(eps[0], '@');
        if (eps && eps[0])
                slice(&sb, svc, proto, v6 ? "IPv6" : "IPv4", eps);
        assert_int_equal(se_strbuf_failed(&sb), 0);
        struct se_store *s = t_load(sb.buf);
        se_strbuf_release(&sb);
        return s;
}

struct result {
        struct se_proxy_trace tr;
        struct se_proxy_trace_query q;
        char *rules; /* the writer's text of the same table */
};

static void trace(const struct se_store *s, const struct se_proxy_options *o, bool nft,
                  const char *from, const char *to, struct result *res)
{
        struct se_diag d = { 0 };
        memset(res, 0, sizeof(*res));
        if (se_proxy_trace_parse_target(to, &res->q, &d) < 0)
                fail_msg("target %s: %s", to, d.text);
        assert_int_equal(se_parse_ip(from, &res->q.from), 0);
        se_proxy_trace_locality(&res->q, o);
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, o, res->q.to.family, &t), 0);
        assert_int_equal(se_proxy_trace_run(t, o,
                                            nft ? SE_PROXY_TRACE_NFTABLES : SE_PROXY_TRACE_IPTABLES,
                                            &res->q, &res->tr),
                         0);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(nft ? se_proxy_nft_write(t, o, &sb) : se_proxy_iptables_write(t, o, &sb),
                         0);
        res->rules = se_strbuf_detach(&sb, NULL);
        se_proxy_table_free(t);
}

static void done(struct result *res)
{
        se_proxy_trace_release(&res->tr);
        free(res->rules);
}

/* Whether the writer's text defines chain name (iptables: ":NAME - ";
 * nft: "chain NAME {"); the built-in hook chains of iptables are not. */
static bool defined(const char *rules, bool nft, const char *name)
{
        char pat[512];
        if (!nft && (strcmp(name, "PREROUTING") == 0 || strcmp(name, "OUTPUT") == 0))
                return true;
        snprintf(pat, sizeof(pat), nft ? "\tchain %s {\n" : "\n:%s - [0:0]\n", name);
        return strstr(rules, pat) != NULL;
}

/* The elements of the writer's map name (nft: "\tmap NAME {" ... "}"):
 * a copy, or NULL when the map is not written. */
static char *map_elements(const char *rules, const char *name)
{
        char head[512];
        snprintf(head, sizeof(head), "\tmap %s {\n", name);
        const char *m = strstr(rules, head);
        const char *el = m ? strstr(m, "elements = { ") : NULL;
        const char *end = el ? strchr(el, '}') : NULL;
        if (!end)
                return NULL;
        el += strlen("elements = { ");
        char *s = malloc((size_t)(end - el) + 1);
        assert_non_null(s);
        memcpy(s, el, (size_t)(end - el));
        s[end - el] = 0;
        return s;
}

/* "ip:port" / "[ip]:port" as a DNAT map's value "ip . port" */
static void dnat_value(const char *endpoint, char *out, size_t size)
{
        const char *colon = strrchr(endpoint, ':');
        bool v6 = endpoint[0] == '[';
        assert_non_null(colon);
        snprintf(out, size, "%.*s . %s", (int)(colon - endpoint - (v6 ? 2 : 0)), endpoint + v6,
                 colon + 1);
}

/* The map of the path's nft DNAT step ("... map @dnat-NAME: ..."), or NULL. */
static const char *dnat_map(const struct result *r, char *out, size_t size)
{
        for (uint32_t i = 0; i < r->tr.n_steps; i++) {
                const char *m = strstr(r->tr.steps[i].rule, " map @dnat-");
                if (m && strncmp(r->tr.steps[i].chain, "service-", 8) != 0 &&
                    strncmp(r->tr.steps[i].chain, "local-", 6) != 0)
                        fail_msg("a DNAT map in chain %s", r->tr.steps[i].chain);
                if (!m)
                        continue;
                /* the rule, up to the trace's own words, is the writer's */
                const char *rule = r->tr.steps[i].rule, *words = strstr(rule, ": ");
                char line[600];
                snprintf(line, sizeof(line), "\t\t%.*s\n",
                         (int)(words ? words - rule : (ptrdiff_t)strlen(rule)), rule);
                if (!strstr(r->rules, line))
                        fail_msg("the rule \"%s\" is not in the rules:\n%s", line, r->rules);
                m += strlen(" map @");
                const char *end = strchr(m, ':');
                snprintf(out, size, "%.*s", (int)(end ? end - m : (ptrdiff_t)strlen(m)), m);
                return out;
        }
        return NULL;
}

/* Every chain of the path and of the endpoints exists in the rules; an
 * endpoint without a chain (nft without affinity) is its index's element
 * of the DNAT map the path names. */
static void chains_written(const struct result *r, bool nft)
{
        for (uint32_t i = 0; i < r->tr.n_steps; i++)
                if (!defined(r->rules, nft, r->tr.steps[i].chain))
                        fail_msg("step %u: chain %s is not in the rules:\n%s", i,
                                 r->tr.steps[i].chain, r->rules);
        char map[400];
        const char *dnat = nft ? dnat_map(r, map, sizeof(map)) : NULL;
        if (dnat && r->tr.affinity)
                fail_msg("affinity, yet a DNAT map %s: endpoint chains remember the client", dnat);
        for (uint32_t i = 0; i < r->tr.n_endpoints; i++) {
                const struct se_proxy_trace_endpoint *e = &r->tr.endpoints[i];
                if (e->chain) {
                        if (!defined(r->rules, nft, e->chain))
                                fail_msg("endpoint chain %s is not in the rules:\n%s", e->chain,
                                         r->rules);
                        if (nft && !r->tr.affinity)
                                fail_msg("endpoint chain %s without affinity", e->chain);
                        continue;
                }
                if (!dnat)
                        fail_msg("endpoint %s has no chain and the path no DNAT map", e->endpoint);
                char *el = map_elements(r->rules, dnat);
                if (!el)
                        fail_msg("map %s is not in the rules:\n%s", dnat, r->rules);
                char want[160], value[128];
                dnat_value(e->endpoint, value, sizeof(value));
                snprintf(want, sizeof(want), "%u : %s", i, value);
                size_t wl = strlen(want);
                const char *at = strstr(el, want);
                bool whole = at && (at == el || at[-1] == ' ') &&
                             (at[wl] == ',' || at[wl] == ' ' || at[wl] == 0);
                if (!whole)
                        fail_msg("endpoint %s: no element \"%s\" in map %s { %s}", e->endpoint,
                                 want, dnat, el);
                free(el);
        }
}

static bool has_step(const struct result *r, const char *chain, const char *frag)
{
        for (uint32_t i = 0; i < r->tr.n_steps; i++)
                if (strcmp(r->tr.steps[i].chain, chain) == 0 &&
                    (!frag || strstr(r->tr.steps[i].rule, frag)))
                        return true;
        return false;
}

static void want_step(const struct result *r, const char *chain, const char *frag)
{
        if (has_step(r, chain, frag))
                return;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_proxy_trace_text(&r->tr, &r->q, &sb);
        fail_msg("no step %s matching \"%s\" in:\n%s", chain, frag ? frag : "", sb.buf);
}

/* the chain of a step whose name starts with prefix */
static const char *chain_with(const struct result *r, const char *prefix)
{
        for (uint32_t i = 0; i < r->tr.n_steps; i++)
                if (strncmp(r->tr.steps[i].chain, prefix, strlen(prefix)) == 0 &&
                    !strstr(r->tr.steps[i].chain, "-check"))
                        return r->tr.steps[i].chain;
        fail_msg("no chain %s... in the path", prefix);
        return NULL;
}

static const struct se_proxy_trace_endpoint *endpoint(const struct result *r, const char *ep)
{
        for (uint32_t i = 0; i < r->tr.n_endpoints; i++)
                if (strcmp(r->tr.endpoints[i].endpoint, ep) == 0)
                        return &r->tr.endpoints[i];
        return NULL;
}

static void want_eps(const struct result *r, const char *const *eps, double p)
{
        uint32_t n = 0;
        for (; eps[n]; n++) {
                const struct se_proxy_trace_endpoint *e = endpoint(r, eps[n]);
                if (!e)
                        fail_msg("endpoint %s not in the trace", eps[n]);
                if (fabs(e->probability - p) > 1e-9)
                        fail_msg("endpoint %s: probability %.10f, want %.10f", eps[n],
                                 e->probability, p);
        }
        assert_int_equal(r->tr.n_endpoints, n);
}

/* The spread the writer's rules of chain give (iptables: each rule takes
 * its --probability of what the rules before it left). */
static double ipt_share(const char *rules, const char *chain, const char *sep)
{
        char head[128];
        double rest = 1.0;
        snprintf(head, sizeof(head), "-A %s ", chain);
        for (const char *p = rules; (p = strstr(p, head)); p++) {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t)(eol - p) : strlen(p);
                char line[1024];
                snprintf(line, sizeof(line), "%.*s", (int)len, p);
                const char *j = strstr(line, " -j KUBE-SEP-");
                if (!j || strstr(line, "--rcheck"))
                        continue;
                const char *pr = strstr(line, "--probability ");
                double cond = pr ? strtod(pr + 14, NULL) : 1.0;
                if (strcmp(j + 4, sep) == 0)
                        return rest * cond;
                rest -= rest * cond;
        }
        return 0.0;
}

/* nft: chain picks among the elements of its own map, equally: with
 * affinity the map @chain of endpoint chains, else the DNAT map
 * @dnat-chain of addresses */
static double nft_share(const char *rules, const char *chain,
                        const struct se_proxy_trace_endpoint *e)
{
        char name[512], want[400];
        if (e->chain) {
                snprintf(name, sizeof(name), "%s", chain);
                snprintf(want, sizeof(want), ": goto %s", e->chain);
        } else {
                char value[128];
                snprintf(name, sizeof(name), "dnat-%s", chain);
                dnat_value(e->endpoint, value, sizeof(value));
                snprintf(want, sizeof(want), ": %s", value);
        }
        char *el = map_elements(rules, name);
        if (!el)
                return 0.0;
        unsigned n = 0;
        bool in = false;
        size_t wl = strlen(want);
        for (const char *p = el; (p = strstr(p, ": ")); p++) {
                n++;
                if (strncmp(p, want, wl) == 0 && (p[wl] == ',' || p[wl] == ' ' || p[wl] == 0))
                        in = true;
        }
        free(el);
        return in && n ? 1.0 / n : 0.0;
}

/* The probabilities agree with what the kernel will do with the rules. */
static void spread_from_rules(const struct result *r, bool nft, const char *chain)
{
        double sum = 0;
        for (uint32_t i = 0; i < r->tr.n_endpoints; i++) {
                const struct se_proxy_trace_endpoint *e = &r->tr.endpoints[i];
                double want =
                        nft ? nft_share(r->rules, chain, e) : ipt_share(r->rules, chain, e->chain);
                if (fabs(want - e->probability) > 1e-9)
                        fail_msg("%s via %s: trace says %.10f, the rules give %.10f", e->endpoint,
                                 chain, e->probability, want);
                sum += e->probability;
        }
        if (r->tr.n_endpoints && fabs(sum - 1.0) > 1e-9)
                fail_msg("probabilities sum to %.12f", sum);
}

static const char *const three[] = { "10.244.1.2@node-a", "10.244.2.2@node-b", "10.244.3.2@node-b",
                                     NULL };
static const char *const three_eps[] = { "10.244.1.2:8080", "10.244.2.2:8080", "10.244.3.2:8080",
                                         NULL };

/* ---- tests ---- */

static void test_trace__cluster_ip(void **state)
{
        (void)state;
        struct se_store *s = cluster(
                "web", "{clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080}]}",
                "TCP", three);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                options(&o, nft);
                struct result r;
                trace(s, &o, nft, "10.99.0.2", "10.96.0.10:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_CLUSTER_IP);
                assert_string_equal(r.tr.service, "e2e/web:http");
                want_eps(&r, three_eps, 1.0 / 3);
                chains_written(&r, nft);
                const char *svc = chain_with(&r, nft ? "service-" : "KUBE-SVC-");
                spread_from_rules(&r, nft, svc);
                want_step(&r, nft ? "services" : "KUBE-SERVICES", svc);
                assert_true(r.tr.masquerade); /* not from a pod */
                assert_non_null(strstr(r.tr.masquerade_reason, "10.244.0.0/16"));
                assert_true(endpoint(&r, "10.244.1.2:8080")->local);
                assert_false(endpoint(&r, "10.244.2.2:8080")->local);
                assert_false(r.tr.affinity);
                if (nft) { /* the mark is set at the top of services */
                        const char *mark = "ip daddr @cluster-ips ip saddr != 10.244.0.0/16 "
                                           "meta mark set meta mark | 0x4000";
                        want_step(&r, "services", mark);
                        assert_non_null(strstr(r.rules, mark));
                        assert_null(strstr(r.rules, "mark-for-masquerade"));
                }
                done(&r);

                /* from a pod: no masquerade; from the endpoint itself: hairpin
                 * (nft: only this node's endpoints are in @hairpin-connections) */
                trace(s, &o, nft, "10.244.3.2", "10.96.0.10:80", &r);
                assert_false(r.tr.masquerade);
                assert_true(endpoint(&r, "10.244.3.2:8080")->masquerade == !nft);
                assert_false(endpoint(&r, "10.244.1.2:8080")->masquerade);
                if (nft)
                        assert_false(has_step(&r, "services", "meta mark set"));
                done(&r);
                trace(s, &o, nft, "10.244.1.2", "10.96.0.10:80", &r);
                assert_true(endpoint(&r, "10.244.1.2:8080")->masquerade);
                if (nft) {
                        assert_non_null(
                                strstr(r.rules, "\t\t\t10.244.1.2 . 10.244.1.2 . tcp . 8080"));
                        assert_null(strstr(r.rules, "10.244.3.2 . 10.244.3.2"));
                }
                done(&r);

                /* the node itself goes through OUTPUT */
                trace(s, &o, nft, "10.99.0.1", "10.96.0.10:80", &r);
                assert_true(r.q.from_local);
                want_step(&r, nft ? "nat-output" : "OUTPUT", NULL);
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__masquerade_modes(void **state)
{
        (void)state;
        struct se_store *s = cluster(
                "web", "{clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080}]}",
                "TCP", three);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                o.masquerade_all = true;
                trace(s, &o, nft, "10.244.1.9", "10.96.0.10:80", &r);
                assert_true(r.tr.masquerade);
                assert_non_null(strstr(r.tr.masquerade_reason, "masquerade-all"));
                if (nft) { /* every packet to @cluster-ips, at the top of services */
                        const char *mark = "ip daddr @cluster-ips meta mark set meta mark | 0x4000";
                        want_step(&r, "services", mark);
                        assert_non_null(strstr(r.rules, mark));
                        assert_string_equal(r.tr.steps[1].chain, "services");
                        assert_non_null(strstr(r.tr.steps[1].rule, mark));
                }
                chains_written(&r, nft);
                done(&r);
                options(&o, nft);
                o.n_cluster_cidrs = 0;
                trace(s, &o, nft, "192.0.2.7", "10.96.0.10:80", &r);
                assert_false(r.tr.masquerade);
                assert_non_null(strstr(r.tr.masquerade_reason, "--cluster-cidr"));
                if (nft) {
                        assert_false(has_step(&r, "services", "meta mark set"));
                        assert_null(strstr(r.rules, "@cluster-ips meta mark set"));
                        assert_null(strstr(r.rules, "@cluster-ips ip saddr"));
                }
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__no_endpoints(void **state)
{
        (void)state;
        static const char *const none[] = { NULL };
        struct se_store *s = cluster("empty",
                                     "{type: NodePort, clusterIP: 10.96.0.12, externalIPs: "
                                     "[192.0.2.50], ports: [{name: http, port: 80, nodePort: "
                                     "30090}]}",
                                     "TCP", none);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.99.0.2", "10.96.0.12:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REJECT);
                assert_int_equal(r.tr.n_endpoints, 0);
                assert_non_null(strstr(r.tr.reason, "has no endpoints"));
                chains_written(&r, nft);
                if (nft)
                        want_step(&r, "reject-chain", "reject");
                else
                        want_step(&r, "KUBE-SERVICES", "-j REJECT");
                done(&r);
                trace(s, &o, nft, "10.99.0.2", "192.0.2.50:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REJECT);
                if (!nft)
                        want_step(&r, "KUBE-EXTERNAL-SERVICES", "-d 192.0.2.50");
                done(&r);
                trace(s, &o, nft, "10.99.0.2", "10.99.0.1:30090", &r);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_NODE_PORT);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REJECT);
                want_step(&r, nft ? "nodeport-endpoints-check" : "KUBE-EXTERNAL-SERVICES",
                          nft ? "30090" : "--dst-type LOCAL");
                done(&r);
        }
        se_store_free(s);
}

/* A Service routed to the userspace proxy by its annotation: the redirect
 * is the one rule it meets, the reason names the proxy's port and the
 * scheduler; sh stays in the kernel with nftables only. */
static struct se_store *annotated(const char *ann)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, node_yaml);
        se_strbuf_printf(&sb,
                         "---\napiVersion: v1\nkind: Service\nmetadata: {name: r, namespace: e2e, "
                         "annotations: {%s}}\nspec: {type: NodePort, clusterIP: 10.96.0.14, "
                         "ports: [{name: http, port: 80, nodePort: 30014}, {name: dns, port: 53, "
                         "protocol: UDP}]}\n",
                         ann);
        slice(&sb, "r", "TCP", "IPv4", three);
        assert_int_equal(se_strbuf_failed(&sb), 0);
        struct se_store *s = t_load(sb.buf);
        se_strbuf_release(&sb);
        return s;
}

static void test_trace__routed(void **state)
{
        (void)state;
        struct se_store *lc = annotated("svcenv.io/scheduler: lc");
        struct se_store *sh = annotated("svcenv.io/scheduler: 'sh,port'");
        struct se_store *retry = annotated("svcenv.io/retry: 'true'");
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(lc, &o, nft, "10.99.0.2", "10.96.0.14:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_CLUSTER_IP);
                assert_int_equal(r.tr.n_endpoints, 0);
                assert_string_equal(r.tr.reason, "redirected to svcenv's userspace proxy (port "
                                                 "10262), scheduler lc");
                want_step(&r, nft ? "services" : "SVCENV-USERSPACE",
                          nft ? "ip daddr 10.96.0.14 tcp dport 80 redirect to :10262" :
                                "-d 10.96.0.14/32 -p tcp -m tcp --dport 80 -j REDIRECT "
                                "--to-ports 10262");
                assert_null(strstr(r.rules, "e2e/r:http"));
                done(&r);
                trace(lc, &o, nft, "10.99.0.2", "10.99.0.1:30014", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_NODE_PORT);
                want_step(&r, nft ? "services" : "SVCENV-USERSPACE-NODEPORTS", "dport 30014");
                done(&r);
                trace(lc, &o, nft, "10.99.0.2", "10.96.0.14:53/udp", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                want_step(&r, nft ? "divert" : "SVCENV-USERSPACE-TPROXY", "10262");
                done(&r);
                trace(retry, &o, nft, "10.99.0.2", "10.96.0.14:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                assert_non_null(strstr(r.tr.reason, "with retries"));
                done(&r);
                trace(sh, &o, nft, "10.99.0.2", "10.96.0.14:80", &r);
                if (nft) {
                        assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                } else {
                        assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                        assert_non_null(strstr(r.tr.reason, "scheduler sh,port"));
                }
                done(&r);
        }
        se_store_free(lc);
        se_store_free(sh);
        se_store_free(retry);
}

static void test_trace__node_port(void **state)
{
        (void)state;
        struct se_store *s = cluster("web",
                                     "{type: NodePort, clusterIP: 10.96.0.10, ports: [{name: "
                                     "http, port: 80, targetPort: 8080, nodePort: 30080}]}",
                                     "TCP", three);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.99.0.2", "10.99.0.1:30080", &r);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_NODE_PORT);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                assert_true(r.tr.masquerade); /* external, policy Cluster */
                want_eps(&r, three_eps, 1.0 / 3);
                chains_written(&r, nft);
                want_step(&r, nft ? "services" : "KUBE-NODEPORTS", "30080");
                spread_from_rules(&r, nft, chain_with(&r, nft ? "service-" : "KUBE-SVC-"));
                assert_non_null(strstr(r.tr.node_port_ips, "10.99.0.1"));
                /* nft's default: NodePorts on the primary IPs only */
                want_step(&r, nft ? "services" : "KUBE-SERVICES",
                          nft ? "ip daddr @nodeport-ips" : "--dst-type LOCAL -j KUBE-NODEPORTS");
                done(&r);
                /* localhost: iptables takes NodePorts there, nftables not */
                trace(s, &o, nft, "127.0.0.1", "127.0.0.1:30080", &r);
                assert_int_equal(r.tr.verdict, nft ? SE_PROXY_TRACE_PASS : SE_PROXY_TRACE_DNAT);
                done(&r);
                /* --nodeport-addresses: the selected node IPs only */
                struct se_proxy_options sel = o;
                assert_int_equal(se_parse_cidr("10.99.0.0/24", &sel.nodeport_cidrs[0]), 0);
                sel.n_nodeport_cidrs = 1;
                sel.nodeport_primary = false;
                trace(s, &sel, nft, "10.99.0.2", "10.99.0.1:30080", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                want_step(&r, nft ? "services" : "KUBE-SERVICES",
                          nft ? "ip daddr @nodeport-ips" : "-d 10.99.0.1 -j KUBE-NODEPORTS");
                assert_string_equal(r.tr.node_port_ips, "10.99.0.1");
                done(&r);
                trace(s, &sel, nft, "127.0.0.1", "127.0.0.1:30080", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_PASS);
                done(&r);
                /* another address is no node address */
                trace(s, &o, nft, "10.99.0.2", "10.99.0.7:30080", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_PASS);
                assert_null(r.tr.service);
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__external_ip(void **state)
{
        (void)state;
        struct se_store *s = cluster("web",
                                     "{clusterIP: 10.96.0.10, externalIPs: [192.0.2.50], ports: "
                                     "[{name: http, port: 80, targetPort: 8080}]}",
                                     "TCP", three);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.244.1.2", "192.0.2.50:80", &r);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_EXTERNAL_IP);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                assert_true(r.tr.masquerade); /* even from a pod: eTP Cluster */
                want_step(&r, chain_with(&r, nft ? "external-" : "KUBE-EXT-"),
                          nft ? "meta mark set meta mark | 0x4000" : "KUBE-MARK-MASQ");
                chains_written(&r, nft);
                done(&r);
        }
        se_store_free(s);
}

static const char lb_spec[] =
        "{type: LoadBalancer, clusterIP: 10.96.0.20, loadBalancerSourceRanges: [203.0.113.0/25],"
        " ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30085}]}\n"
        "status: {loadBalancer: {ingress: [{ip: 198.51.100.7}]}}";

static void test_trace__load_balancer_firewall(void **state)
{
        (void)state;
        struct se_store *s = cluster("lb", lb_spec, "TCP", three);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "203.0.113.9", "198.51.100.7:80", &r);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_LOAD_BALANCER);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                chains_written(&r, nft);
                want_step(&r, chain_with(&r, nft ? "firewall-" : "KUBE-FW-"), NULL);
                done(&r);
                trace(s, &o, nft, "203.0.113.200", "198.51.100.7:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DROP);
                assert_int_equal(r.tr.n_endpoints, 0);
                assert_non_null(strstr(r.tr.reason, "loadBalancerSourceRanges"));
                if (!nft)
                        want_step(&r, "KUBE-PROXY-FIREWALL", "-j DROP");
                else
                        want_step(&r, chain_with(&r, "firewall-"), "drop");
                chains_written(&r, nft);
                done(&r);
                /* the NodePort is not subject to the source ranges */
                trace(s, &o, nft, "203.0.113.200", "10.99.0.1:30085", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                done(&r);
        }
        se_store_free(s);
}

/* A routed LoadBalancer port keeps loadBalancerSourceRanges: its redirect
 * takes the ranges' sources only, the others are dropped (as the rules of
 * se_uproxy_rules_* do); a range holding the node IP lets the LB IP in. */
static void test_trace__routed_load_balancer_firewall(void **state)
{
        (void)state;
        struct se_store *s = cluster_annotated("lb", "lc", lb_spec, "TCP", three);
        struct se_store *node = cluster_annotated(
                "lb", "lc",
                "{type: LoadBalancer, clusterIP: 10.96.0.20, loadBalancerSourceRanges: "
                "[10.99.0.0/24], ports: [{name: http, port: 80, targetPort: 8080}]}\n"
                "status: {loadBalancer: {ingress: [{ip: 198.51.100.7}]}}",
                "TCP", three);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "203.0.113.9", "198.51.100.7:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                if (nft)
                        want_step(&r, "firewall-check",
                                  "saddr != @firewall-0 drop: the source "
                                  "is in the set");
                else
                        want_step(&r, "SVCENV-USERSPACE",
                                  "-s 203.0.113.0/25 -d 198.51.100.7/32 -p tcp");
                done(&r);
                trace(s, &o, nft, "203.0.113.200", "198.51.100.7:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DROP);
                assert_string_equal(r.tr.reason, "the source 203.0.113.200 is not in "
                                                 "loadBalancerSourceRanges of e2e/lb:http");
                if (nft)
                        want_step(&r, "firewall-check", "the source is not in the set");
                else
                        want_step(&r, "SVCENV-USERSPACE-FIREWALL",
                                  "-d 198.51.100.7/32 -p tcp -m tcp --dport 80 -j DROP");
                done(&r);
                /* the ClusterIP is not subject to the ranges */
                trace(s, &o, nft, "203.0.113.200", "10.96.0.20:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                done(&r);
                /* the node IP is in a range: the LB IP as source passes */
                trace(node, &o, nft, "198.51.100.7", "198.51.100.7:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_REDIRECT);
                done(&r);
                trace(node, &o, nft, "10.98.0.2", "198.51.100.7:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DROP);
                done(&r);
        }
        se_store_free(s);
        se_store_free(node);
}

static const char *const one_local[] = { "10.244.1.2@node-a", "10.244.2.2@node-b", NULL };

static void test_trace__external_policy_local(void **state)
{
        (void)state;
        struct se_store *s = cluster("local",
                                     "{type: NodePort, clusterIP: 10.96.0.14, "
                                     "externalTrafficPolicy: Local, ports: [{name: http, port: 80, "
                                     "targetPort: 8080, nodePort: 30081}]}",
                                     "TCP", one_local);
        static const char *const local_ep[] = { "10.244.1.2:8080", NULL };
        static const char *const both[] = { "10.244.1.2:8080", "10.244.2.2:8080", NULL };
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                /* an outside client: local endpoints only, source kept */
                trace(s, &o, nft, "10.99.0.2", "10.99.0.1:30081", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                assert_false(r.tr.masquerade);
                want_eps(&r, local_ep, 1.0);
                chains_written(&r, nft);
                spread_from_rules(&r, nft, chain_with(&r, nft ? "local-" : "KUBE-SVL-"));
                done(&r);
                /* a pod: short-circuit to every endpoint, not SNATed */
                trace(s, &o, nft, "10.244.9.9", "10.99.0.1:30081", &r);
                assert_false(r.tr.masquerade);
                want_eps(&r, both, 0.5);
                chains_written(&r, nft);
                done(&r);
                /* the node itself: masqueraded, every endpoint */
                trace(s, &o, nft, "10.99.0.1", "10.99.0.1:30081", &r);
                assert_true(r.tr.masquerade);
                want_eps(&r, both, 0.5);
                done(&r);
                /* the ClusterIP is not affected by eTP */
                trace(s, &o, nft, "10.99.0.2", "10.96.0.14:80", &r);
                want_eps(&r, both, 0.5);
                done(&r);
        }
        se_store_free(s);

        static const char *const remote[] = { "10.244.3.2@node-b", NULL };
        s = cluster("remote",
                    "{type: NodePort, clusterIP: 10.96.0.15, externalTrafficPolicy: Local, "
                    "ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30082}]}",
                    "TCP", remote);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.99.0.2", "10.99.0.1:30082", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DROP);
                assert_non_null(strstr(r.tr.reason, "no local endpoints"));
                assert_int_equal(r.tr.n_endpoints, 0);
                chains_written(&r, nft);
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__internal_policy_local(void **state)
{
        (void)state;
        struct se_store *s = cluster("itp",
                                     "{clusterIP: 10.96.0.16, internalTrafficPolicy: Local, "
                                     "ports: [{name: http, port: 80, targetPort: 8080}]}",
                                     "TCP", one_local);
        static const char *const local_ep[] = { "10.244.1.2:8080", NULL };
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.244.5.5", "10.96.0.16:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                want_eps(&r, local_ep, 1.0);
                chains_written(&r, nft);
                want_step(&r, nft ? "services" : "KUBE-SERVICES",
                          nft ? "goto local-" : "KUBE-SVL-");
                done(&r);
        }
        se_store_free(s);
        static const char *const remote[] = { "10.244.3.2@node-b", NULL };
        s = cluster("itp",
                    "{clusterIP: 10.96.0.16, internalTrafficPolicy: Local, "
                    "ports: [{name: http, port: 80, targetPort: 8080}]}",
                    "TCP", remote);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.244.5.5", "10.96.0.16:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DROP);
                if (!nft)
                        want_step(&r, "KUBE-SERVICES", "has no local endpoints");
                else
                        want_step(&r, "service-endpoints-check", ": drop");
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__affinity(void **state)
{
        (void)state;
        struct se_store *s = cluster("sticky",
                                     "{clusterIP: 10.96.0.11, sessionAffinity: ClientIP, "
                                     "sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}, "
                                     "ports: [{name: http, port: 80, targetPort: 8080}]}",
                                     "TCP", three);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.99.0.2", "10.96.0.11:80", &r);
                assert_true(r.tr.affinity);
                assert_int_equal(r.tr.affinity_timeout, 600);
                want_step(&r, chain_with(&r, nft ? "service-" : "KUBE-SVC-"),
                          nft ? "@affinity-" : "--rcheck --seconds 600");
                want_eps(&r, three_eps, 1.0 / 3);
                chains_written(&r, nft);
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__topology_and_terminating(void **state)
{
        (void)state;
        static const char *const hinted[] = { "10.244.1.2@node-a@z:z1", "10.244.2.2@node-b@z:z1",
                                              "10.244.3.2@node-b@z:z2", NULL };
        static const char *const in_zone[] = { "10.244.1.2:8080", "10.244.2.2:8080", NULL };
        struct se_store *s = cluster(
                "web", "{clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080}]}",
                "TCP", hinted);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.99.0.2", "10.96.0.10:80", &r);
                want_eps(&r, in_zone, 0.5);
                spread_from_rules(&r, nft, chain_with(&r, nft ? "service-" : "KUBE-SVC-"));
                assert_true(r.tr.n_notes > 0);
                bool noted = false;
                for (uint32_t i = 0; i < r.tr.n_notes; i++)
                        noted |= strstr(r.tr.notes[i], "topology hints") != NULL;
                assert_true(noted);
                done(&r);
        }
        se_store_free(s);

        static const char *const term[] = { "10.244.1.2@node-a@t", "10.244.2.2@node-b@n", NULL };
        static const char *const serving[] = { "10.244.1.2:8080", NULL };
        s = cluster("web",
                    "{clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080}]}",
                    "TCP", term);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.99.0.2", "10.96.0.10:80", &r);
                want_eps(&r, serving, 1.0);
                assert_true(r.tr.endpoints[0].terminating);
                assert_false(r.tr.endpoints[0].ready);
                assert_non_null(strstr(r.tr.notes[0], "terminating"));
                chains_written(&r, nft);
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__not_a_service(void **state)
{
        (void)state;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\n"
                            "metadata: {name: kubernetes}\nspec: {cidrs: [10.96.0.0/16]}\n---\n");
        se_strbuf_printf(&sb,
                         "%s---\napiVersion: v1\nkind: Service\n"
                         "metadata: {name: web, namespace: e2e}\n"
                         "spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80}]}\n",
                         node_yaml);
        slice(&sb, "web", "TCP", "IPv4", three);
        struct se_store *s = t_load(sb.buf);
        se_strbuf_release(&sb);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                /* an unused port of a ClusterIP: nft rejects, iptables lets it go */
                trace(s, &o, nft, "10.99.0.2", "10.96.0.10:81", &r);
                assert_int_equal(r.tr.verdict, nft ? SE_PROXY_TRACE_REJECT : SE_PROXY_TRACE_PASS);
                if (nft)
                        want_step(&r, "cluster-ips-check", "@cluster-ips reject");
                chains_written(&r, nft);
                done(&r);
                /* UDP to a TCP port is another service port */
                trace(s, &o, nft, "10.99.0.2", "10.96.0.10:80/udp", &r);
                assert_int_not_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                done(&r);
                /* unallocated in the service CIDR: nft drops */
                trace(s, &o, nft, "10.99.0.2", "10.96.0.99:80", &r);
                assert_int_equal(r.tr.verdict, nft ? SE_PROXY_TRACE_DROP : SE_PROXY_TRACE_PASS);
                done(&r);
                trace(s, &o, nft, "10.99.0.2", "192.0.2.1:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_PASS);
                assert_int_equal(r.tr.dest, SE_PROXY_TRACE_DEST_NONE);
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__ipv6(void **state)
{
        (void)state;
        static const char *const v6[] = { "fd00:244:1::2@node-a", "fd00:244:2::2@node-b", NULL };
        static const char *const v6_eps[] = { "[fd00:244:1::2]:8080", "[fd00:244:2::2]:8080",
                                              NULL };
        struct se_store *s = cluster("web6",
                                     "{clusterIP: \"fd00:96::10\", clusterIPs: [\"fd00:96::10\"], "
                                     "ipFamilies: [IPv6], ports: [{name: http, port: 80, "
                                     "targetPort: 8080}]}",
                                     "TCP", v6);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "fd00:99::2", "[fd00:96::10]:80", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                want_eps(&r, v6_eps, 0.5);
                chains_written(&r, nft);
                spread_from_rules(&r, nft, chain_with(&r, nft ? "service-" : "KUBE-SVC-"));
                if (nft)
                        assert_string_equal(r.tr.steps[0].table, "ip6 svcenv");
                done(&r);
                /* mixed families are refused */
                struct se_proxy_table *t = NULL;
                struct se_proxy_trace tr;
                struct se_proxy_trace_query q = { .port = 80 };
                assert_int_equal(se_parse_ip("10.99.0.2", &q.from), 0);
                assert_int_equal(se_parse_ip("fd00:96::10", &q.to), 0);
                assert_int_equal(se_proxy_table_build(s, &o, SE_IPV6, &t), 0);
                assert_int_equal(se_proxy_trace_run(t, &o, SE_PROXY_TRACE_IPTABLES, &q, &tr),
                                 -EINVAL);
                se_proxy_table_free(t);
        }
        se_store_free(s);
}

static void test_trace__udp(void **state)
{
        (void)state;
        struct se_store *s = cluster("dns",
                                     "{clusterIP: 10.96.0.13, ports: [{name: http, port: 53, "
                                     "protocol: UDP, targetPort: 8080}]}",
                                     "UDP", one_local);
        for (int nft = 0; nft < 2; nft++) {
                struct se_proxy_options o;
                struct result r;
                options(&o, nft);
                trace(s, &o, nft, "10.244.1.5", "10.96.0.13:53/UDP", &r);
                assert_int_equal(r.tr.verdict, SE_PROXY_TRACE_DNAT);
                assert_string_equal(r.tr.protocol, "udp");
                assert_int_equal(r.tr.n_endpoints, 2);
                chains_written(&r, nft);
                done(&r);
                /* tcp: no such service port (nft rejects it for the ClusterIP) */
                trace(s, &o, nft, "10.244.1.5", "10.96.0.13:53", &r);
                assert_int_equal(r.tr.verdict, nft ? SE_PROXY_TRACE_REJECT : SE_PROXY_TRACE_PASS);
                done(&r);
        }
        se_store_free(s);
}

static void test_trace__parse_target(void **state)
{
        (void)state;
        struct se_proxy_trace_query q;
        struct se_diag d = { 0 };
        assert_int_equal(se_proxy_trace_parse_target("10.0.0.1:80", &q, &d), 0);
        assert_int_equal(q.port, 80);
        assert_int_equal(q.protocol, SE_PROTO_TCP);
        assert_int_equal(se_proxy_trace_parse_target("[fd00::1]:53/udp", &q, &d), 0);
        assert_int_equal(q.to.family, SE_IPV6);
        assert_int_equal(q.protocol, SE_PROTO_UDP);
        assert_int_equal(se_proxy_trace_parse_target("10.0.0.1:9/SCTP", &q, &d), 0);
        assert_int_equal(q.protocol, SE_PROTO_SCTP);
        static const char *const bad[] = { "",           "10.0.0.1",       "10.0.0.1:",
                                           "10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:80/icmp",
                                           "fd00::1:80", "[fd00::1]80",    "10.0.0.300:80",
                                           "host:80",    "[fd00::1:80",    "10.0.0.1:8x" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                d.text[0] = 0;
                if (se_proxy_trace_parse_target(bad[i], &q, &d) != -EINVAL)
                        fail_msg("\"%s\" was accepted", bad[i]);
                assert_true(d.text[0] != 0);
                assert_null(strchr(d.text, '\n'));
        }
}

/* include/linux/jhash.h's jhash is lookup3's hashlittle on little-endian
 * machines: its published vectors (lookup3.c's driver5) */
static void test_trace__jhash_vectors(void **state)
{
        (void)state;
        static const char four[] = "Four score and seven years ago";
        assert_int_equal(proxy_jhash("", 0, 0), 0xdeadbeefu);
        assert_int_equal(proxy_jhash(four, 30, 0), 0x17770551u);
        assert_int_equal(proxy_jhash(four, 30, 1), 0xcd628161u);
}

/* A trace of a source with a port ("IP:PORT") to target. */
static void trace_from(const struct se_store *s, const struct se_proxy_options *o, const char *from,
                       const char *to, struct result *res)
{
        struct se_diag d = { 0 };
        struct se_proxy_trace_query q = { 0 };
        assert_int_equal(se_proxy_trace_parse_source(from, &q, &d), 0);
        char ip[64];
        se_ip_format(&q.from, ip, sizeof(ip));
        trace(s, o, true, ip, to, res);
        se_proxy_trace_release(&res->tr);
        res->q.from_port = q.from_port;
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, o, res->q.to.family, &t), 0);
        assert_int_equal(se_proxy_trace_run(t, o, SE_PROXY_TRACE_NFTABLES, &res->q, &res->tr), 0);
        se_proxy_table_free(t);
}

/* The one endpoint a hashing trace names: probability 1, the others 0, and
 * the writer's bucket map holds it at the trace's bucket. */
static void want_hashed(const struct result *r, const char *ep, unsigned bucket, unsigned m)
{
        assert_int_equal(r->tr.verdict, SE_PROXY_TRACE_DNAT);
        for (uint32_t i = 0; i < r->tr.n_endpoints; i++) {
                const struct se_proxy_trace_endpoint *e = &r->tr.endpoints[i];
                assert_true(e->probability == (strcmp(e->endpoint, ep) == 0 ? 1.0 : 0.0));
                assert_int_equal(e->of_buckets, m);
        }
        char want[96], map[400];
        snprintf(want, sizeof(want), "to %s (", ep);
        assert_non_null(strstr(r->tr.reason, want));
        snprintf(want, sizeof(want), "bucket %u of %u", bucket, m);
        assert_non_null(strstr(r->tr.reason, want));
        /* the writer's map: "BUCKET : ip . port" */
        const char *svc = chain_with(r, "service-");
        snprintf(map, sizeof(map), "dnat-jh-%s", svc);
        char *el = map_elements(r->rules, map);
        assert_non_null(el);
        char val[96], item[128];
        dnat_value(ep, val, sizeof(val));
        snprintf(item, sizeof(item), "%s%u : %s,", bucket ? ", " : "", bucket, val);
        if (!strstr(el, item) && !(bucket == m - 1 && strstr(el, item + 2)))
                fail_msg("bucket %u of %s is not %s", bucket, map, val);
        free(el);
}

/* nftables' in-kernel schedulers: rr takes the endpoints in turn (each 1/N);
 * sh, dh and mh name THE endpoint of the kernel's jhash (buckets worked out
 * by an independent script of jhash + reciprocal_scale, seed 0x5c4ed001):
 * sh 10.0.0.7 -> 225 (225 % 3: the first), 10.0.0.9 -> 215 (the third);
 * sh,port 10.0.0.7:1234 -> 228, :1235 -> 221; dh 10.96.0.20 -> 248 for
 * every source; mh 10.0.0.7 -> slot 3601; sh fd00::7 -> 205 (the second). */
static void test_trace__kernel_schedulers(void **state)
{
        (void)state;
        static const char spec[] = "{clusterIP: 10.96.0.20, ports: [{name: http, port: 80, "
                                   "targetPort: 8080}]}";
        struct se_proxy_options o;
        options(&o, true);
        struct result r;

        struct se_store *s = cluster_annotated("web", "rr", spec, "TCP", three);
        trace(s, &o, true, "10.0.0.7", "10.96.0.20:80", &r);
        want_eps(&r, three_eps, 1.0 / 3);
        assert_non_null(strstr(r.tr.reason, "round robin"));
        want_step(&r, chain_with(&r, "service-"),
                  "dnat ip addr . port to numgen inc mod 3 map "
                  "@dnat-rr-service-");
        chains_written(&r, true);
        done(&r);
        se_store_free(s);

        s = cluster_annotated("web", "sh", spec, "TCP", three);
        trace(s, &o, true, "10.0.0.7", "10.96.0.20:80", &r);
        want_hashed(&r, "10.244.1.2:8080", 225, 256);
        want_step(&r, chain_with(&r, "service-"), "jhash ip saddr mod 256 seed 0x5c4ed001 map");
        done(&r);
        trace(s, &o, true, "10.0.0.9", "10.96.0.20:80", &r);
        want_hashed(&r, "10.244.3.2:8080", 215, 256);
        done(&r);
        se_store_free(s);

        s = cluster_annotated("web", "sh,port", spec, "TCP", three);
        trace_from(s, &o, "10.0.0.7:1234", "10.96.0.20:80", &r);
        want_hashed(&r, "10.244.1.2:8080", 228, 256);
        done(&r);
        trace_from(s, &o, "10.0.0.7:1235", "10.96.0.20:80", &r);
        want_hashed(&r, "10.244.3.2:8080", 221, 256);
        done(&r);
        /* without the port: each endpoint's share of the buckets (86/85/85) */
        trace(s, &o, true, "10.0.0.7", "10.96.0.20:80", &r);
        assert_true(fabs(endpoint(&r, "10.244.1.2:8080")->probability - 86.0 / 256) < 1e-9);
        assert_true(fabs(endpoint(&r, "10.244.2.2:8080")->probability - 85.0 / 256) < 1e-9);
        assert_int_equal(endpoint(&r, "10.244.3.2:8080")->buckets, 85);
        assert_non_null(strstr(r.tr.reason, "one of 3 endpoints"));
        done(&r);
        se_store_free(s);

        s = cluster_annotated("web", "dh", spec, "TCP", three);
        const char *sources[] = { "10.0.0.7", "10.0.0.9", "10.244.1.2" };
        for (size_t i = 0; i < 3; i++) {
                trace(s, &o, true, sources[i], "10.96.0.20:80", &r);
                want_hashed(&r, "10.244.3.2:8080", 248, 256);
                done(&r);
        }
        se_store_free(s);

        s = cluster_annotated("web", "mh", spec, "TCP", three);
        trace(s, &o, true, "10.0.0.7", "10.96.0.20:80", &r);
        const char *chosen = NULL;
        for (uint32_t i = 0; i < r.tr.n_endpoints; i++)
                if (r.tr.endpoints[i].probability == 1.0)
                        chosen = r.tr.endpoints[i].endpoint;
        assert_non_null(chosen);
        want_hashed(&r, chosen, 3601, 4093);
        done(&r);
        se_store_free(s);

        /* IPv6: the 16-byte source address is the key */
        static const char *const three6[] = { "fd00:244:1::2@node-a", "fd00:244:2::2@node-b",
                                              "fd00:244:3::2@node-b", NULL };
        s = cluster_annotated("web", "sh",
                              "{clusterIP: \"fd00:96::20\", ipFamilies: [IPv6], ports: [{name: "
                              "http, port: 80, targetPort: 8080}]}",
                              "TCP", three6);
        trace(s, &o, true, "fd00::7", "[fd00:96::20]:80", &r);
        want_hashed(&r, "[fd00:244:2::2]:8080", 205, 256);
        want_step(&r, chain_with(&r, "service-"), "jhash ip6 saddr mod 256 seed 0x5c4ed001 map");
        done(&r);
        se_store_free(s);
}

/* --from IP or IP:PORT */
static void test_trace__parse_source(void **state)
{
        (void)state;
        struct se_proxy_trace_query q = { 0 };
        struct se_diag d = { 0 };
        assert_int_equal(se_proxy_trace_parse_source("10.0.0.7", &q, &d), 0);
        assert_int_equal(q.from_port, 0);
        assert_int_equal(se_proxy_trace_parse_source("10.0.0.7:1234", &q, &d), 0);
        assert_int_equal(q.from_port, 1234);
        assert_int_equal(q.from.family, SE_IPV4);
        assert_int_equal(se_proxy_trace_parse_source("fd00::7", &q, &d), 0);
        assert_int_equal(q.from_port, 0);
        assert_int_equal(q.from.family, SE_IPV6);
        assert_int_equal(se_proxy_trace_parse_source("[fd00::7]:99", &q, &d), 0);
        assert_int_equal(q.from_port, 99);
        assert_int_equal(se_proxy_trace_parse_source("10.0.0.7:0", &q, &d), -EINVAL);
        assert_int_equal(se_proxy_trace_parse_source("10.0.0.7:80/tcp", &q, &d), -EINVAL);
        assert_non_null(strstr(d.text, "10.0.0.7:80/tcp"));
        assert_int_equal(se_proxy_trace_parse_source("10.0.0", &q, &d), -EINVAL);
}

static void test_trace__output(void **state)
{
        (void)state;
        struct se_store *s = cluster(
                "web", "{clusterIP: 10.96.0.10, ports: [{name: http, port: 80, targetPort: 8080}]}",
                "TCP", three);
        struct se_proxy_options o;
        struct result r;
        options(&o, false);
        trace(s, &o, false, "10.99.0.2", "10.96.0.10:80", &r);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_proxy_trace_json(&r.tr, &r.q, &sb), 0);
        json_error_t err;
        json_t *j = json_loads(sb.buf, 0, &err);
        if (!j)
                fail_msg("not JSON (%s): %s", err.text, sb.buf);
        assert_string_equal(json_string_value(json_object_get(j, "verdict")), "DNAT");
        assert_string_equal(json_string_value(json_object_get(j, "service")), "e2e/web:http");
        json_t *eps = json_object_get(j, "endpoints");
        assert_int_equal(json_array_size(eps), 3);
        double sum = 0;
        for (size_t i = 0; i < 3; i++)
                sum += json_real_value(json_object_get(json_array_get(eps, i), "probability"));
        assert_true(fabs(sum - 1.0) < 1e-6);
        assert_true(json_array_size(json_object_get(j, "path")) >= 3);
        json_decref(j);
        se_strbuf_truncate(&sb, 0);
        assert_int_equal(se_proxy_trace_text(&r.tr, &r.q, &sb), 0);
        assert_non_null(strstr(sb.buf, "verdict:    DNAT to one of 3 endpoints"));
        assert_non_null(strstr(sb.buf, r.tr.endpoints[2].chain));
        assert_non_null(strstr(sb.buf, " 33.333%"));
        se_strbuf_release(&sb);
        done(&r);
        se_store_free(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_trace__cluster_ip),
                cmocka_unit_test(test_trace__masquerade_modes),
                cmocka_unit_test(test_trace__no_endpoints),
                cmocka_unit_test(test_trace__routed),
                cmocka_unit_test(test_trace__node_port),
                cmocka_unit_test(test_trace__external_ip),
                cmocka_unit_test(test_trace__load_balancer_firewall),
                cmocka_unit_test(test_trace__routed_load_balancer_firewall),
                cmocka_unit_test(test_trace__external_policy_local),
                cmocka_unit_test(test_trace__internal_policy_local),
                cmocka_unit_test(test_trace__affinity),
                cmocka_unit_test(test_trace__topology_and_terminating),
                cmocka_unit_test(test_trace__not_a_service),
                cmocka_unit_test(test_trace__ipv6),
                cmocka_unit_test(test_trace__udp),
                cmocka_unit_test(test_trace__parse_target),
                cmocka_unit_test(test_trace__jhash_vectors),
                cmocka_unit_test(test_trace__kernel_schedulers),
                cmocka_unit_test(test_trace__parse_source),
                cmocka_unit_test(test_trace__output),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
