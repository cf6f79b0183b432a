/* The proxy core against upstream's proxier tests: chain names,
 * probabilities, TestOverallIPTablesRules (golden, after upstream's sort
 * normalisation) and the scenarios of pkg/proxy/iptables/proxier_test.go. */
#include <errno.h>
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

#include <svcenv/lb.h>
#include <svcenv/manifest.h>
#include <svcenv/proxy.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>

#include "cpu_budget.h"
#include "store_yaml.h"

/* ---- sortIPTablesRules (proxier_test.go), to compare with upstream data ---- */

struct nchain {
        char *name;
        struct se_strv rules;
};
struct ntable {
        char *name;
        struct nchain *chains;
        size_t n;
};

static struct nchain *get_chain(struct ntable *t, const char *name, size_t len)
{
        for (size_t i = 0; i < t->n; i++)
                if (strlen(t->chains[i].name) == len && strncmp(t->chains[i].name, name, len) == 0)
                        return &t->chains[i];
        t->chains = realloc(t->chains, (t->n + 1) * sizeof(*t->chains));
        assert_non_null(t->chains);
        struct nchain *c = &t->chains[t->n++];
        c->name = strndup(name, len);
        c->rules = (struct se_strv)SE_STRV_INIT;
        return c;
}

/* the service name of a rule: its comment up to the first space or colon */
static void svc_key(const char *rule, char *out, size_t size)
{
        const char *c = strstr(rule, "--comment ");
        out[0] = 0;
        if (!c)
                return;
        c += 10;
        if (*c == '"')
                c++;
        size_t n = strcspn(c, " :\"");
        snprintf(out, size, "%.*s", (int)n, c);
}

static int chain_rank(const char *n)
{
        if (strcmp(n, "KUBE-NODEPORTS") == 0)
                return 0;
        if (strcmp(n, "KUBE-SERVICES") == 0)
                return 1;
        return strncmp(n, "KUBE-", 5) == 0 ? 2 : 3;
}

static int cmp_chain(const void *x, const void *y)
{
        const struct nchain *a = x, *b = y;
        int ra = chain_rank(a->name), rb = chain_rank(b->name);
        return ra != rb ? ra - rb : strcmp(a->name, b->name);
}

/* stable insertion sort by service name, "must be the last rule" last */
static void sort_rules(struct se_strv *sv)
{
        for (size_t i = 1; i < sv->n; i++) {
                char *cur = sv->v[i];
                char kc[256], kp[256];
                size_t j = i;
                svc_key(cur, kc, sizeof(kc));
                bool cur_last = strstr(cur, "must be the last rule") != NULL;
                while (j > 0) {
                        char *prev = sv->v[j - 1];
                        svc_key(prev, kp, sizeof(kp));
                        bool prev_last = strstr(prev, "must be the last rule") != NULL;
                        bool less = !cur_last && (prev_last || strcmp(kc, kp) < 0);
                        if (!less)
                                break;
                        sv->v[j] = prev;
                        j--;
                }
                sv->v[j] = cur;
        }
}

static char *normalise(const char *text)
{
        struct ntable tables[4] = { 0 };
        size_t nt = 0;
        struct ntable *cur = NULL;
        const char *p = text;
        while (*p) {
                size_t len = strcspn(p, "\n");
                if (p[0] == '*') {
                        assert_true(nt < 4);
                        cur = &tables[nt++];
                        cur->name = strndup(p + 1, len - 1);
                } else if (p[0] == ':') {
                        assert_non_null(cur);
                        get_chain(cur, p + 1, strcspn(p + 1, " \n"));
                } else if (strncmp(p, "-X ", 3) == 0 || strncmp(p, "-A ", 3) == 0) {
                        assert_non_null(cur);
                        struct nchain *c = get_chain(cur, p + 3, strcspn(p + 3, " \n"));
                        assert_int_equal(se_strv_push_consume(&c->rules, strndup(p, len)), 0);
                }
                p += len + (p[len] == '\n');
        }
        for (size_t i = 1; i < nt; i++) /* two tables at most: put them by name */
                if (strcmp(tables[i - 1].name, tables[i].name) > 0) {
                        struct ntable tmp = tables[i - 1];
                        tables[i - 1] = tables[i];
                        tables[i] = tmp;
                }
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        for (size_t i = 0; i < nt; i++) {
                struct ntable *t = &tables[i];
                qsort(t->chains, t->n, sizeof(*t->chains), cmp_chain);
                se_strbuf_printf(&sb, "*%s\n", t->name);
                for (size_t k = 0; k < t->n; k++)
                        se_strbuf_printf(&sb, ":%s - [0:0]\n", t->chains[k].name);
                for (size_t k = 0; k < t->n; k++) {
                        struct nchain *c = &t->chains[k];
                        if (chain_rank(c->name) < 2)
                                sort_rules(&c->rules);
                        se_strv_foreach(r, &c->rules)
                                se_strbuf_printf(&sb, "%s\n", *r);
                        free(c->name);
                        se_strv_release(&c->rules);
                }
                se_strbuf_puts(&sb, "COMMIT\n");
                free(t->chains);
                free(t->name);
        }
        char *out = se_strbuf_detach(&sb, NULL);
        assert_non_null(out);
        return out;
}

/* ---- helpers ---- */

static void base_options(struct se_proxy_options *o)
{
        se_proxy_options_init(o);
        o->node_name = "test-node";
        assert_int_equal(se_parse_ip("192.168.0.2", &o->node_ips[0]), 0);
        o->n_node_ips = 1;
        assert_int_equal(se_parse_cidr("10.0.0.0/8", &o->cluster_cidrs[0]), 0);
        o->n_cluster_cidrs = 1;
        o->masquerade_mark = "0x4000";
        o->nfacct = true;
}

/* The table of s for fam, as one backend writes it. New string. */
static char *table_text(const struct se_store *s, const struct se_proxy_options *o,
                        enum se_ip_family fam,
                        int (*write)(const struct se_proxy_table *, const struct se_proxy_options *,
                                     struct se_strbuf *))
{
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        assert_int_equal(se_proxy_table_build(s, o, fam, &t), 0);
        se_strbuf_init(&sb, 0);
        assert_int_equal(write(t, o, &sb), 0);
        se_proxy_table_free(t);
        char *out = se_strbuf_detach(&sb, NULL);
        assert_non_null(out);
        return out;
}

static char *rules(const struct se_store *s, const struct se_proxy_options *o,
                   enum se_ip_family fam)
{
        return table_text(s, o, fam, se_proxy_iptables_write);
}

static char *rules_yaml(const char *yaml, const struct se_proxy_options *o)
{
        struct se_store *s = t_load(yaml);
        char *out = rules(s, o, SE_IPV4);
        se_store_free(s);
        return out;
}

static char *read_file(const char *path)
{
        FILE *f = fopen(path, "r");
        if (!f)
                fail_msg("cannot open %s (run from the repository root)", path);
        struct se_strbuf sb;
        char buf[4096];
        size_t n;
        se_strbuf_init(&sb, 0);
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                se_strbuf_add(&sb, buf, n);
        fclose(f);
        char *out = se_strbuf_detach(&sb, NULL);
        assert_non_null(out);
        return out;
}

static void has_line(const char *text, const char *line)
{
        const char *p = text;
        size_t n = strlen(line);
        while ((p = strstr(p, line))) {
                if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == 0))
                        return;
                p += n;
        }
        fail_msg("missing line: %s\n--- in:\n%s", line, text);
}

static void no_text(const char *text, const char *frag)
{
        if (strstr(text, frag))
                fail_msg("unexpected: %s\n--- in:\n%s", frag, text);
}

static size_t count(const char *text, const char *frag)
{
        size_t n = 0;
        for (const char *p = text; (p = strstr(p, frag)); p += strlen(frag))
                n++;
        return n;
}

/* ---- tests ---- */

static void test_proxy__chain_names(void **state)
{
        (void)state;
        char h[17];
        assert_int_equal(se_proxy_chain_hash("ns1/svc1:p80", "tcp", NULL, h), 0);
        assert_string_equal(h, "XPGD46QRK7WJZT7O");
        assert_int_equal(se_proxy_chain_hash("ns1/svc1:p80", "tcp", "10.180.0.1:80", h), 0);
        assert_string_equal(h, "SXIVWICOYRO3J4NJ");
        assert_int_equal(se_proxy_chain_hash("kube-system/kube-dns:dns", "udp", NULL, h), 0);
        assert_string_equal(h, "TCOU7JCQXEZGVUNU");
        /* input longer than the stack buffer (here 4 x a 143-byte spn) */
        char spn[4 * 143 + 1] = "";
        for (int i = 0; i < 4; i++) {
                char part[144];
                memset(part, 0, sizeof(part));
                memcpy(part, "ns-", 3);
                memset(part + 3, 'a', 60);
                part[63] = '/';
                memset(part + 64, 's', 63);
                part[127] = ':';
                memset(part + 128, 'p', 15);
                strcat(spn, part);
        }
        assert_int_equal(se_proxy_chain_hash(spn, "tcp", "[fd00::1234:5678:9abc:def0]:65535", h),
                         0);
        assert_string_equal(h, "6HQPM4IPC4CNFWSA");
}

/* TestComputeProbability */
static void test_proxy__probability(void **state)
{
        (void)state;
        char p[16], prev[16] = "2";
        se_proxy_probability(1, p);
        assert_string_equal(p, "1.0000000000");
        se_proxy_probability(2, p);
        assert_string_equal(p, "0.5000000000");
        se_proxy_probability(10, p);
        assert_string_equal(p, "0.1000000000");
        se_proxy_probability(100000, p);
        assert_string_equal(p, "0.0000100000");
        se_proxy_probability(100001, p);
        assert_string_equal(p, "0.0000099999");
        for (unsigned n = 1; n <= 100000; n++) {
                se_proxy_probability(n, p);
                if (strcmp(p, prev) >= 0)
                        fail_msg("probability of %u (%s) not below %s", n, p, prev);
                memcpy(prev, p, sizeof(p));
        }
}

/* TestOverallIPTablesRules: the expected text is upstream's, verbatim. */
static void test_proxy__overall_golden(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        char *yaml = read_file("test/golden/proxy/overall.yaml");
        char *want = read_file("test/golden/proxy/overall.iptables");
        char *got = rules_yaml(yaml, &o);
        char *norm = normalise(got);
        if (strcmp(norm, want) != 0)
                fail_msg("overall rules differ from upstream\n--- got (normalised):\n%s", norm);
        /* the nat rule count upstream's metric reports */
        assert_int_equal(count(strstr(got, "*nat"), "\n-A "), count(strstr(want, "*nat"), "\n-A "));
        free(norm);
        free(got);
        free(want);
        free(yaml);
}

static const char no_ep_svc[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
        "spec:\n  type: LoadBalancer\n  clusterIP: 172.30.0.41\n  externalIPs: [192.168.99.11]\n"
        "  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 3001}]\n"
        "status: {loadBalancer: {ingress: [{ip: 1.2.3.4}]}}\n";

/* TestNoEndpointsReject: every destination rejected in filter, nothing in nat */
static void test_proxy__no_endpoints_reject(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(no_ep_svc, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 has no endpoints\" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j REJECT");
        has_line(
                got,
                "-A KUBE-EXTERNAL-SERVICES -m comment --comment \"ns1/svc1:p80 has no endpoints\" -m tcp -p tcp -d 192.168.99.11 --dport 80 -j REJECT");
        has_line(
                got,
                "-A KUBE-EXTERNAL-SERVICES -m comment --comment \"ns1/svc1:p80 has no endpoints\" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j REJECT");
        has_line(
                got,
                "-A KUBE-EXTERNAL-SERVICES -m comment --comment \"ns1/svc1:p80 has no endpoints\" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3001 -j REJECT");
        no_text(strstr(got, "*nat"), "svc1");
        free(got);
}

static const char three_eps[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
        "spec:\n  clusterIP: 172.30.0.41\n  ports: [{name: p80, port: 80, protocol: TCP}]\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: svc1-a, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.180.0.3]}, {addresses: [10.180.0.1]},"
        " {addresses: [10.180.0.2]}]\nports: [{name: p80, port: 80, protocol: TCP}]\n";

/* reference note 2.2: probabilities 1/(n-i), endpoints in ip:port order */
static void test_proxy__cluster_ip_three_endpoints(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(three_eps, &o);
        has_line(
                got,
                "-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 -> 10.180.0.1:80\" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-SXIVWICOYRO3J4NJ");
        has_line(
                got,
                "-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 -> 10.180.0.2:80\" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-LXVODXWDISEETFEF");
        has_line(
                got,
                "-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 -> 10.180.0.3:80\" -j KUBE-SEP-ICDUIKC33SFI6ZPR");
        has_line(
                got,
                "-A KUBE-SEP-ICDUIKC33SFI6ZPR -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80");
        assert_true(strstr(got, "10.180.0.1:80\" -m statistic") <
                    strstr(got, "10.180.0.2:80\" -m statistic"));
        free(got);
}

/* An IPv4 table keeps the endpoints whose first address parses as IPv4
 * (an IPv4-mapped IPv6 text counts, as Go reads it) and drops the others:
 * leading zeros, octets over 255, short or long quads, IPv6. The manifest
 * loader refuses such addresses, so they are put into the stored slice. */
static void test_proxy__endpoint_address_family(void **state)
{
        (void)state;
        static const char *const addrs[] = { "10.180.0.1",   "010.180.0.2",       "10.180.0.256",
                                             "10.180.0",     "::ffff:10.180.0.5", "fd00::1",
                                             "10.180.0.1.7", "255.0.99.250",      "10.180.0.01",
                                             "1.2.3.4x",     "1.2.3.4 ",          "1..2.3" };
        struct se_strbuf y;
        se_strbuf_init(&y, 0);
        se_strbuf_puts(&y, three_eps);
        se_strbuf_puts(&y, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                           "metadata: {name: svc1-b, namespace: ns1, labels: "
                           "{kubernetes.io/service-name: svc1}}\naddressType: IPv4\nendpoints: [");
        for (size_t i = 0; i < SE_ARRAY_SIZE(addrs); i++)
                se_strbuf_printf(&y, "%s{addresses: [10.181.0.%zu]}", i ? ", " : "", i + 1);
        se_strbuf_puts(&y, "]\nports: [{name: p80, port: 80, protocol: TCP}]\n");
        assert_int_equal(se_strbuf_failed(&y), 0);
        struct se_proxy_options o;
        base_options(&o);
        struct se_store *s = t_load(y.buf);
        se_strbuf_release(&y);
        const struct se_object *obj = se_store_get(s, SE_KIND_ENDPOINT_SLICE, "ns1", "svc1-b");
        struct se_endpoint_slice *es =
                SE_UNCONST(struct se_endpoint_slice, (const struct se_endpoint_slice *)obj);
        assert_non_null(es);
        assert_int_equal(es->n_endpoints, SE_ARRAY_SIZE(addrs));
        for (size_t i = 0; i < SE_ARRAY_SIZE(addrs); i++)
                es->endpoints[i].addresses.v[0] = addrs[i];
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        assert_int_equal(t->n_ports, 1);
        const struct se_proxy_svcport *sp = &t->ports[0];
        static const char *const want[] = { "10.180.0.1:80", "10.180.0.2:80", "10.180.0.3:80",
                                            "255.0.99.250:80", "[::ffff:10.180.0.5]:80" };
        assert_int_equal(sp->n_eps, SE_ARRAY_SIZE(want));
        for (size_t i = 0; i < SE_ARRAY_SIZE(want); i++)
                assert_string_equal(sp->eps[i].str, want[i]);
        se_proxy_table_free(t);
        se_store_free(s);
}

/* masquerade-all marks every cluster-IP packet; no detector marks none */
static void test_proxy__masquerade_modes(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        o.masquerade_all = true;
        char *got = rules_yaml(three_eps, &o);
        has_line(
                got,
                "-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 cluster IP\" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-MARK-MASQ");
        free(got);
        base_options(&o);
        o.n_cluster_cidrs = 0;
        o.masquerade_bit = 15;
        o.masquerade_mark = NULL;
        o.random_fully = true;
        got = rules_yaml(three_eps, &o);
        no_text(got, "cluster IP\" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s");
        no_text(got, "KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 cluster IP\"");
        has_line(got, "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00008000");
        has_line(
                got,
                "-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully");
        free(got);
}

static char *many_endpoints(unsigned n)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(
                &sb,
                "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
                "spec:\n  clusterIP: 172.30.0.41\n  ports: [{name: p80, port: 80, protocol: TCP}]\n");
        for (unsigned i = 0; i < n; i++) {
                if (i % 500 == 0) /* a slice holds at most 1000 endpoints */
                        se_strbuf_printf(
                                &sb,
                                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                                "metadata: {name: s%u, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
                                "addressType: IPv4\nports: [{name: p80, port: 80, protocol: TCP}]\nendpoints:\n",
                                i);
                se_strbuf_printf(&sb, "- {addresses: [10.0.%u.%u]}\n", i / 256, i % 256);
        }
        char *out = se_strbuf_detach(&sb, NULL);
        assert_non_null(out);
        return out;
}

/* TestSyncProxyRulesLargeClusterMode: above 1000 endpoints the endpoint
 * comments go; the service comments stay */
static void test_proxy__large_cluster_mode(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        char *yaml = many_endpoints(1000);
        char *got = rules_yaml(yaml, &o);
        assert_int_equal(count(got, "-m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT"),
                         1000);
        free(got);
        free(yaml);
        yaml = many_endpoints(1001);
        got = rules_yaml(yaml, &o);
        has_line(got,
                 "-A KUBE-SEP-DKGQUZGBKLTPAR56 -m tcp -p tcp -j DNAT --to-destination 10.0.0.0:80");
        no_text(got, "--comment ns1/svc1:p80 -");
        no_text(got, "-> 10.0.");
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O");
        assert_int_equal(count(got, "-j DNAT"), 1001);
        free(got);
        free(yaml);
}

static const char itp_local[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc3, namespace: ns3}\n"
        "spec:\n  clusterIP: 172.30.0.43\n  internalTrafficPolicy: Local\n"
        "  ports: [{name: p80, port: 80, protocol: TCP}]\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: s, namespace: ns3, labels: {kubernetes.io/service-name: svc3}}\n"
        "addressType: IPv4\nports: [{name: p80, port: 80, protocol: TCP}]\n"
        "endpoints: [{addresses: [10.180.0.3], nodeName: test-node}, {addresses: [10.180.2.1], nodeName: other}]\n";

/* internalTrafficPolicy Local: cluster IP goes to KUBE-SVL with local endpoints only */
static void test_proxy__internal_policy_local(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(itp_local, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns3/svc3:p80 cluster IP\" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-SVL-X27LE4BHSL4DOUIK");
        has_line(
                got,
                "-A KUBE-SVL-X27LE4BHSL4DOUIK -m comment --comment \"ns3/svc3:p80 cluster IP\" -m tcp -p tcp -d 172.30.0.43 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ");
        has_line(
                got,
                "-A KUBE-SVL-X27LE4BHSL4DOUIK -m comment --comment \"ns3/svc3:p80 -> 10.180.0.3:80\" -j KUBE-SEP-OYPFS5VJICHGATKP");
        no_text(got, "KUBE-SVC-X27LE4BHSL4DOUIK");
        no_text(got, "10.180.2.1");
        free(got);
        /* on another node: no local endpoint, DROP in filter */
        o.node_name = "elsewhere";
        got = rules_yaml(itp_local, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns3/svc3:p80 has no local endpoints\" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j DROP");
        no_text(strstr(got, "*nat"), "ns3/svc3");
        free(got);
}

static const char etp_local[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc2, namespace: ns2}\n"
        "spec:\n  type: LoadBalancer\n  clusterIP: 172.30.0.42\n  externalIPs: [192.168.99.22]\n"
        "  externalTrafficPolicy: Local\n  healthCheckNodePort: 30000\n"
        "  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 3001}]\n"
        "status: {loadBalancer: {ingress: [{ip: 1.2.3.4}, {ip: 9.9.9.9, ipMode: Proxy}]}}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: s, namespace: ns2, labels: {kubernetes.io/service-name: svc2}}\n"
        "addressType: IPv4\nports: [{name: p80, port: 80, protocol: TCP}]\n"
        "endpoints: [{addresses: [10.180.0.2], nodeName: test-node}, {addresses: [10.180.2.1], nodeName: other}]\n";

/* reference note 2.8: eTP Local with one local endpoint */
static void test_proxy__external_policy_local(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(etp_local, &o);
        has_line(
                got,
                "-A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment \"pod traffic for ns2/svc2:p80 external destinations\" -s 10.0.0.0/8 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT");
        has_line(got, "-A KUBE-EXT-GNZBNJ2PO5MGZ6GT -j KUBE-SVL-GNZBNJ2PO5MGZ6GT");
        has_line(
                got,
                "-A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment \"ns2/svc2:p80 -> 10.180.0.2:80\" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-RS4RBKLTHTF2IUXJ");
        has_line(
                got,
                "-A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment \"ns2/svc2:p80 -> 10.180.2.1:80\" -j KUBE-SEP-CL5TTP32JTFBIVMN");
        has_line(
                got,
                "-A KUBE-SVL-GNZBNJ2PO5MGZ6GT -m comment --comment \"ns2/svc2:p80 -> 10.180.0.2:80\" -j KUBE-SEP-RS4RBKLTHTF2IUXJ");
        has_line(
                got,
                "-A KUBE-NODEPORTS -m comment --comment \"ns2/svc2:p80 health check node port\" -m tcp -p tcp --dport 30000 -j ACCEPT");
        no_text(got, "9.9.9.9"); /* ipMode Proxy is not ours */
        no_text(got, "has no local endpoints");
        free(got);
}

/* TestTerminatingEndpoints*: serving+terminating endpoints are used only
 * when no endpoint is ready */
static void test_proxy__terminating_fallback(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
                "spec:\n  clusterIP: 172.30.0.41\n  ports: [{name: p80, port: 80, protocol: TCP}]\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: s, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
                "addressType: IPv4\nports: [{name: p80, port: 80, protocol: TCP}]\nendpoints:\n"
                "- {addresses: [10.0.1.1], conditions: {ready: false, serving: true, terminating: true}}\n"
                "- {addresses: [10.0.1.2], conditions: {ready: false, serving: false, terminating: true}}\n"
                "- {addresses: [10.0.1.3], conditions: {ready: false, serving: false, terminating: false}}\n";
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(yaml, &o);
        has_line(
                got,
                "-A KUBE-SEP-SNQ3ZNILQDEJNDQO -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.0.1.1:80");
        assert_int_equal(count(got, "-j DNAT"), 1);
        free(got);
        /* with one ready endpoint the terminating one is left out */
        char *y2 = strdup(yaml);
        char *at = strstr(y2, "{ready: false, serving: false, terminating: false}");
        memcpy(at, "{ready: true,  serving: true,  terminating: false}", 50);
        got = rules_yaml(y2, &o);
        has_line(
                got,
                "-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 -> 10.0.1.3:80\" -j KUBE-SEP-G7XP5NU2Z2343ZYM");
        assert_int_equal(count(got, "-j DNAT"), 1);
        free(got);
        free(y2);
}

/* headless, ExternalName and foreign proxy names get nothing */
static void test_proxy__skipped_services(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: headless, namespace: ns}\n"
                "spec: {clusterIP: None, ports: [{port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: ns}\n"
                "spec: {type: ExternalName, externalName: example.com}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: other, namespace: ns, labels: "
                "{service.kubernetes.io/service-proxy-name: other-proxy}}\n"
                "spec: {clusterIP: 172.30.0.9, ports: [{port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: mine, namespace: ns, labels: "
                "{service.kubernetes.io/service-proxy-name: svcenv}}\n"
                "spec: {clusterIP: 172.30.0.10, ports: [{port: 80}]}\n";
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(yaml, &o);
        no_text(got, "ns/");
        free(got);
        o.proxy_name = "svcenv";
        got = rules_yaml(yaml, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns/mine has no endpoints\" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j REJECT");
        no_text(got, "ns/other");
        no_text(got, "ns/headless");
        free(got);
}

/* svcenv.io/scheduler: parsed into the table; iptables keeps only kube-proxy's
 * random in the kernel, nftables also rr, sh, dh and mh; an invalid value is
 * flagged and balanced as if absent. */
static void test_proxy__scheduler_annotation(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns, annotations: "
                "{svcenv.io/scheduler: 'sh,port'}}\n"
                "spec: {clusterIP: 172.30.0.1, ports: [{port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: ns, annotations: "
                "{svcenv.io/scheduler: lc}}\n"
                "spec: {clusterIP: 172.30.0.2, ports: [{port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: c, namespace: ns, annotations: "
                "{svcenv.io/scheduler: nope}}\n"
                "spec: {clusterIP: 172.30.0.3, ports: [{port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: d, namespace: ns}\n"
                "spec: {clusterIP: 172.30.0.4, ports: [{port: 80}]}\n";
        struct se_proxy_options o;
        base_options(&o);
        struct se_store *s = t_load(yaml);
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        assert_int_equal(t->n_ports, 4);
        const struct se_proxy_svcport *a = &t->ports[0], *b = &t->ports[1], *c = &t->ports[2],
                                      *d = &t->ports[3];
        assert_true(a->sched_set && a->sched == SE_LB_SH && a->sched_flags == SE_LB_PORT);
        assert_true(b->sched_set && b->sched == SE_LB_LC && !b->sched_bad);
        assert_true(!c->sched_set && c->sched_bad);
        assert_true(!d->sched_set && !d->sched_bad);
        assert_false(se_proxy_in_kernel(a, false));
        assert_true(se_proxy_in_kernel(a, true));
        assert_false(se_proxy_in_kernel(b, false));
        assert_false(se_proxy_in_kernel(b, true));
        assert_true(se_proxy_in_kernel(c, false) && se_proxy_in_kernel(c, true));
        assert_true(se_proxy_in_kernel(d, false) && se_proxy_in_kernel(d, true));
        se_proxy_table_free(t);
        se_store_free(s);
}

/* svcenv.io/retry: "true" sends a port to the userspace proxy in both
 * backends; "false" keeps it in the kernel; anything else is flagged and
 * treated as absent. */
static void test_proxy__retry_annotation(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns, annotations: "
                "{svcenv.io/retry: 'true'}}\n"
                "spec: {clusterIP: 172.30.0.1, ports: [{port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: ns, annotations: "
                "{svcenv.io/retry: 'false', svcenv.io/scheduler: sh}}\n"
                "spec: {clusterIP: 172.30.0.2, ports: [{port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: c, namespace: ns, annotations: "
                "{svcenv.io/retry: maybe}}\n"
                "spec: {clusterIP: 172.30.0.3, ports: [{port: 80}]}\n";
        struct se_proxy_options o;
        base_options(&o);
        struct se_store *s = t_load(yaml);
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        assert_int_equal(t->n_ports, 3);
        const struct se_proxy_svcport *a = &t->ports[0], *b = &t->ports[1], *c = &t->ports[2];
        assert_true(a->retry && !a->retry_bad);
        assert_false(se_proxy_in_kernel(a, false) || se_proxy_in_kernel(a, true));
        assert_true(!b->retry && !b->retry_bad);
        assert_false(se_proxy_in_kernel(b, false));
        assert_true(se_proxy_in_kernel(b, true));
        assert_true(!c->retry && c->retry_bad);
        assert_true(se_proxy_in_kernel(c, false) && se_proxy_in_kernel(c, true));
        se_proxy_table_free(t);
        se_store_free(s);
}

/* Ports routed to the userspace proxy are left out of the kernel rules
 * entirely (no chains, no map entries, no REJECT for having no endpoints);
 * the other ports of the cluster are written as without them. */
static void test_proxy__routed_ports_left_out(void **state)
{
        (void)state;
        static const char kept[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: keep, namespace: ns}\n"
                "spec: {type: NodePort, clusterIP: 172.30.0.1, ports: [{name: p, port: 80, "
                "nodePort: 30001}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: keep-1, namespace: ns, labels: {kubernetes.io/service-name: keep}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.1]}]\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: hash, namespace: ns, annotations: "
                "{svcenv.io/scheduler: sh}}\n"
                "spec: {clusterIP: 172.30.0.4, ports: [{name: p, port: 80}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: hash-1, namespace: ns, labels: {kubernetes.io/service-name: hash}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.4]}]\n";
        static const char routed[] =
                "\n---\napiVersion: v1\nkind: Service\nmetadata: {name: lc, namespace: ns, "
                "annotations: {svcenv.io/scheduler: lc}}\n"
                "spec: {type: NodePort, clusterIP: 172.30.0.2, ports: [{name: p, port: 80, "
                "nodePort: 30002}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: lc-1, namespace: ns, labels: {kubernetes.io/service-name: lc}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.2]}]\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: none, namespace: ns, "
                "annotations: {svcenv.io/retry: 'true'}}\n"
                "spec: {clusterIP: 172.30.0.3, ports: [{name: p, port: 53, protocol: UDP}]}\n";
        struct se_proxy_options o;
        base_options(&o);
        char both[4096];
        snprintf(both, sizeof(both), "%s%s", kept, routed);
        for (int nft = 0; nft < 2; nft++) {
                struct se_store *sk = t_load(kept), *sb = t_load(both);
                char *want = nft ? table_text(sk, &o, SE_IPV4, se_proxy_nft_write) :
                                   rules(sk, &o, SE_IPV4);
                char *got = nft ? table_text(sb, &o, SE_IPV4, se_proxy_nft_write) :
                                  rules(sb, &o, SE_IPV4);
                /* sh stays in the kernel with nftables only */
                if (!nft) {
                        no_text(got, "ns/hash");
                        no_text(got, "10.1.0.4");
                } else {
                        assert_non_null(strstr(got, "10.1.0.4"));
                }
                assert_non_null(strstr(got, "ns/keep"));
                assert_non_null(strstr(got, "10.1.0.1"));
                if (nft) /* the same text as a cluster without the routed services */
                        assert_string_equal(got, want);
                no_text(got, "ns/lc");
                no_text(got, "ns/none");
                no_text(got, "172.30.0.2");
                no_text(got, "172.30.0.3");
                no_text(got, "30002");
                no_text(got, "10.1.0.2");
                free(want);
                free(got);
                se_store_free(sk);
                se_store_free(sb);
        }
}

/* kube-proxy v1.36 filters EndpointSlices labelled service.kubernetes.io/headless
 * (any value) and not Services: a ClusterIP Service carrying the label is
 * proxied, its labelled slice is unseen (so it has no endpoints), its
 * unlabelled slice is used. Both backends. */
static void test_proxy__headless_label(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: lab, namespace: ns, labels: "
                "{service.kubernetes.io/headless: ''}}\n"
                "spec: {clusterIP: 172.30.0.11, ports: [{name: p, port: 80}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: lab-1, namespace: ns, labels: {kubernetes.io/service-name: lab}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.1]}]\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: lab-2, namespace: ns, labels: {kubernetes.io/service-name: lab, "
                "service.kubernetes.io/headless: 'true'}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.2]}]\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: unseen, namespace: ns}\n"
                "spec: {clusterIP: 172.30.0.12, ports: [{name: p, port: 80}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: unseen-1, namespace: ns, labels: {kubernetes.io/service-name: "
                "unseen, service.kubernetes.io/headless: ''}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.3]}]\n";
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(yaml, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns/lab:p cluster IP\" -m tcp -p tcp -d 172.30.0.11 --dport 80 -j KUBE-SVC-6BXOQYKGRCOIG52S");
        assert_int_equal(count(got, "-j DNAT"), 1);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns/unseen:p has no endpoints\" -m tcp -p tcp -d 172.30.0.12 --dport 80 -j REJECT");
        no_text(got, "10.1.0.2");
        no_text(got, "10.1.0.3");
        free(got);
        struct se_store *s = t_load(yaml);
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_proxy_nft_write(t, &o, &sb), 0);
        has_line(sb.buf, "\t\telements = { 0 : 10.1.0.1 . 8080 }");
        no_text(sb.buf, "10.1.0.2");
        no_text(sb.buf, "10.1.0.3");
        assert_non_null(strstr(sb.buf, "172.30.0.12 . tcp . 80 : goto reject-chain"));
        se_strbuf_release(&sb);
        se_proxy_table_free(t);
        se_store_free(s);
}

static char *nft_text(const struct se_store *s, const struct se_proxy_options *o,
                      enum se_ip_family fam)
{
        return table_text(s, o, fam, se_proxy_nft_write);
}

/* --nodeport-addresses per family, as kube-proxy's NodePortAddresses: a
 * family without a CIDR of its own, or with a zero CIDR, takes NodePorts on
 * every local address; `primary` is the family's first node IP (none, or
 * loopback: every local address); nftables defaults to `primary`. */
static void test_proxy__nodeport_addresses_per_family(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: np, namespace: ns}\n"
                "spec:\n  type: NodePort\n  clusterIPs: [172.30.0.5, 'fd00:30::5']\n"
                "  clusterIP: 172.30.0.5\n  ipFamilies: [IPv4, IPv6]\n"
                "  ports: [{name: p, port: 80, nodePort: 30080}]\n";
        static const char all4[] =
                "\t\tfib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports";
        static const char all6[] =
                "\t\tfib daddr type local ip6 daddr != ::1 meta l4proto . th dport vmap @service-nodeports";
        static const char set4[] =
                "\t\tip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports";
        static const char set6[] =
                "\t\tip6 daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports";
        static const char ipt_all6[] =
                "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL ! -d ::1/128 -j KUBE-NODEPORTS";
        static const char ipt_all4[] =
                "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS";
        struct se_store *s = t_load(yaml);
        struct se_proxy_options o;
        base_options(&o);
        assert_int_equal(se_parse_ip("fd00::2", &o.node_ips[1]), 0);
        o.n_node_ips = 2;
        /* an IPv4 CIDR only: IPv6 NodePorts stay on every local address */
        assert_int_equal(se_parse_cidr("192.168.0.0/16", &o.nodeport_cidrs[0]), 0);
        o.n_nodeport_cidrs = 1;
        char *v4 = nft_text(s, &o, SE_IPV4), *v6 = nft_text(s, &o, SE_IPV6);
        has_line(v4, set4);
        has_line(v4, "\t\telements = { 192.168.0.2 }");
        has_line(v6, all6);
        no_text(v6, "nodeport-ips");
        free(v4);
        free(v6);
        v6 = rules(s, &o, SE_IPV6);
        has_line(v6, ipt_all6);
        free(v6);
        /* a zero CIDR: every local address */
        assert_int_equal(se_parse_cidr("0.0.0.0/0", &o.nodeport_cidrs[1]), 0);
        o.n_nodeport_cidrs = 2;
        v4 = nft_text(s, &o, SE_IPV4);
        has_line(v4, all4);
        no_text(v4, "nodeport-ips");
        free(v4);
        v4 = rules(s, &o, SE_IPV4);
        has_line(v4, ipt_all4);
        free(v4);
        /* nftables' default: the primary IPs; a family without one: all */
        o.n_nodeport_cidrs = 0;
        se_proxy_options_nft_defaults(&o);
        assert_true(o.nodeport_primary);
        v4 = nft_text(s, &o, SE_IPV4);
        v6 = nft_text(s, &o, SE_IPV6);
        has_line(v4, set4);
        has_line(v6, set6);
        has_line(v6, "\t\telements = { fd00::2 }");
        free(v4);
        free(v6);
        o.n_node_ips = 1;
        v6 = nft_text(s, &o, SE_IPV6);
        has_line(v6, all6);
        free(v6);
        assert_int_equal(se_parse_ip("127.0.0.1", &o.node_ips[0]), 0);
        v4 = nft_text(s, &o, SE_IPV4);
        has_line(v4, all4);
        free(v4);
        /* an explicit list stays as given */
        o.nodeport_primary = false;
        o.n_nodeport_cidrs = 1;
        se_proxy_options_nft_defaults(&o);
        assert_false(o.nodeport_primary);
        se_store_free(s);
}

/* nftables' cluster-ips-check (kube-proxy v1.36): every service port's
 * ClusterIP in set cluster-ips, rejected after DNAT (a port the service does
 * not have); the ServiceCIDR objects' ranges of the family dropped
 * (unallocated ClusterIPs), jumped to from filter-forward and filter-output */
static void test_proxy__cluster_ips_check(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\n"
                "spec: {cidrs: [172.30.0.0/16, 'fd00:30::/112']}\n---\n"
                "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: extra}\n"
                "spec: {cidrs: [10.97.0.0/16]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\n"
                "spec: {clusterIP: 172.30.0.5, ports: [{name: p, port: 80}, {name: q, port: 81}]}\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: a-1, namespace: ns, labels: {kubernetes.io/service-name: a}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.1]}]\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: ns}\n"
                "spec: {clusterIP: 172.30.0.6, ports: [{port: 53, protocol: UDP}]}\n";
        struct se_store *s = t_load(yaml);
        struct se_proxy_options o;
        base_options(&o);
        char *v4 = nft_text(s, &o, SE_IPV4), *v6 = nft_text(s, &o, SE_IPV6);
        const char *set = strstr(v4, "\tset cluster-ips {\n\t\ttype ipv4_addr\n\t\telements = {\n"
                                     "\t\t\t172.30.0.5,\n\t\t\t172.30.0.6\n\t\t}\n\t}\n");
        if (!set)
                fail_msg("no set cluster-ips with both ClusterIPs once each:\n%s", v4);
        const char *chain = strstr(v4, "\tchain cluster-ips-check {\n"
                                       "\t\tip daddr @cluster-ips reject\n"
                                       "\t\tip daddr { 10.97.0.0/16, 172.30.0.0/16 } drop\n\t}\n");
        if (!chain)
                fail_msg("no chain cluster-ips-check:\n%s", v4);
        const char *fwd = strstr(v4, "\tchain filter-forward {");
        const char *out = strstr(v4, "\tchain filter-output {");
        assert_non_null(fwd);
        assert_non_null(out);
        assert_non_null(strstr(
                fwd, "\t\tct state new jump cluster-ips-check\n\t}\n\tchain filter-output {"));
        assert_non_null(strstr(out, "\t\tct state new jump cluster-ips-check\n\t}\n"));
        has_line(v6, "\t\tip6 daddr { fd00:30::/112 } drop");
        has_line(v6, "\t\tip6 daddr @cluster-ips reject");
        no_text(v6, "elements = {\n\t\t\t172");
        free(v4);
        free(v6);
        se_store_free(s);
        /* no ServiceCIDR objects: the reject rule alone */
        s = t_load(strstr(yaml, "apiVersion: v1\nkind: Service"));
        v4 = nft_text(s, &o, SE_IPV4);
        assert_non_null(
                strstr(v4, "\tchain cluster-ips-check {\n\t\tip daddr @cluster-ips reject\n\t}\n"));
        free(v4);
        se_store_free(s);
        /* a range that is not a CIDR is invalid input */
        s = se_store_new();
        struct se_diag d;
        static const char bad[] = "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\n"
                                  "metadata: {name: bad}\nspec: {cidrs: [10.0.0.1]}\n";
        assert_true(se_manifest_load_buffer(s, "bad.yaml", bad, strlen(bad), NULL, NULL, &d) < 0);
        if (!strstr(d.text, "spec.cidrs[0]") || !strstr(d.text, "must be a valid CIDR"))
                fail_msg("diagnostic: %s", d.text);
        se_store_free(s);
}

/* kube-proxy is dual-stack wherever the host has IPv6: on a node with IPv4
 * addresses only it still writes its IPv6 base chains (no service has an
 * IPv6 ClusterIP there), in both backends */
static void test_proxy__ipv6_base_rules_on_ipv4_node(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        enum se_ip_family fams[2];
        assert_int_equal(se_proxy_families_on(&o, false, fams), 1);
        assert_int_equal(fams[0], SE_IPV4);
        assert_int_equal(se_proxy_families_on(&o, true, fams), 2);
        assert_int_equal(fams[0], SE_IPV4);
        assert_int_equal(fams[1], SE_IPV6);
        struct se_store *s =
                t_load("apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\n"
                       "spec: {clusterIP: 172.30.0.5, ports: [{port: 80}]}\n");
        char *v6 = rules(s, &o, SE_IPV6);
        has_line(v6, ":KUBE-FORWARD - [0:0]");
        has_line(v6, ":KUBE-PROXY-FIREWALL - [0:0]");
        has_line(v6, "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000");
        has_line(
                v6,
                "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL ! -d ::1/128 -j KUBE-NODEPORTS");
        no_text(v6, "172.30.0.5");
        free(v6);
        v6 = nft_text(s, &o, SE_IPV6);
        has_line(v6, "table ip6 svcenv {");
        has_line(v6, "\t\ttype nat hook prerouting priority dstnat; policy accept;");
        has_line(v6, "\t\tip6 daddr . meta l4proto . th dport vmap @service-ips");
        no_text(v6, "172.30.0.5");
        free(v6);
        se_store_free(s);
}

/* IPv6: ip6tables-restore input, no localhost NodePorts, brackets in endpoints */
static void test_proxy__ipv6_and_dual_stack(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
                "spec:\n  type: NodePort\n  clusterIP: 172.30.0.41\n  clusterIPs: [172.30.0.41, 'fd00:30::41']\n"
                "  ipFamilies: [IPv4, IPv6]\n  ipFamilyPolicy: RequireDualStack\n"
                "  externalIPs: [192.168.99.11, 'fd00:99::11']\n"
                "  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 3001}]\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: s4, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
                "addressType: IPv4\nports: [{name: p80, port: 80, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.180.0.1]}]\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: s6, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
                "addressType: IPv6\nports: [{name: p80, port: 80, protocol: TCP}]\n"
                "endpoints: [{addresses: ['fd00:180::1']}]\n";
        struct se_proxy_options o;
        base_options(&o);
        assert_int_equal(se_parse_ip("fd00::2", &o.node_ips[1]), 0);
        o.n_node_ips = 2;
        assert_int_equal(se_parse_cidr("fd00:180::/64", &o.cluster_cidrs[1]), 0);
        o.n_cluster_cidrs = 2;
        enum se_ip_family fams[2];
        assert_int_equal(se_proxy_families(&o, fams), 2);
        struct se_store *s = t_load(yaml);
        char *v4 = rules(s, &o, SE_IPV4);
        char *v6 = rules(s, &o, SE_IPV6);
        has_line(
                v6,
                "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" -m tcp -p tcp -d fd00:30::41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O");
        has_line(
                v6,
                "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 external IP\" -m tcp -p tcp -d fd00:99::11 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O");
        has_line(
                v6,
                "-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 cluster IP\" -m tcp -p tcp -d fd00:30::41 --dport 80 ! -s fd00:180::/64 -j KUBE-MARK-MASQ");
        has_line(
                v6,
                "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL ! -d ::1/128 -j KUBE-NODEPORTS");
        no_text(v6, "KUBE-FIREWALL");
        no_text(v6, "127.0.0.0/8");
        no_text(v6, "10.180.0.1");
        has_line(
                v4,
                "-A KUBE-NODEPORTS -m comment --comment ns1/svc1:p80 -m tcp -p tcp -d 127.0.0.0/8 --dport 3001 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-EXT-XPGD46QRK7WJZT7O");
        no_text(v4, "fd00");
        char h[17];
        assert_int_equal(se_proxy_chain_hash("ns1/svc1:p80", "tcp", "[fd00:180::1]:80", h), 0);
        char line[200];
        snprintf(
                line, sizeof(line),
                "-A KUBE-SEP-%s -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination [fd00:180::1]:80",
                h);
        has_line(v6, line);
        free(v4);
        free(v6);
        se_store_free(s);
}

/* ClientIP affinity on UDP; localhost NodePorts off; --nodeport-addresses */
static void test_proxy__udp_affinity_nodeport_addresses(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: dns, namespace: kube-system}\n"
                "spec:\n  type: NodePort\n  clusterIP: 10.96.0.10\n  sessionAffinity: ClientIP\n"
                "  sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}\n"
                "  ports: [{name: dns, port: 53, protocol: UDP, nodePort: 30053}]\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: s, namespace: kube-system, labels: {kubernetes.io/service-name: dns}}\n"
                "addressType: IPv4\nports: [{name: dns, port: 53, protocol: UDP}]\n"
                "endpoints: [{addresses: [10.244.0.5]}, {addresses: [10.244.0.6]}]\n";
        struct se_proxy_options o;
        base_options(&o);
        o.localhost_nodeports = false;
        char *got = rules_yaml(yaml, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"kube-system/dns:dns cluster IP\" -m udp -p udp -d 10.96.0.10 --dport 53 -j KUBE-SVC-2KKYJRIGYGQNRODB");
        assert_int_equal(count(got, "--rcheck --seconds 60 --reap"), 2);
        assert_int_equal(count(got, " --set -m udp -p udp -j DNAT"), 2);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS");
        no_text(got, "KUBE-FIREWALL");
        no_text(got, "localhost_nps");
        free(got);
        base_options(&o);
        assert_int_equal(se_proxy_parse_cidr_list("192.168.0.0/16", o.nodeport_cidrs,
                                                  SE_PROXY_MAX_CIDRS, &o.nodeport_primary, NULL),
                         1);
        o.n_nodeport_cidrs = 1;
        got = rules_yaml(yaml, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\" -d 192.168.0.2 -j KUBE-NODEPORTS");
        no_text(got, "--dst-type LOCAL -j KUBE-NODEPORTS");
        free(got);
}

/* a selector Service without slices: endpoints computed as the
 * EndpointSlice controller would (pkg/endpoints), named target port from the
 * container */
static void test_proxy__pods_without_slices(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"
                "spec: {clusterIP: 10.96.1.1, selector: {app: web}, ports: [{name: http, port: 80, targetPort: http}]}\n---\n"
                "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: ns, labels: {app: web}}\n"
                "spec: {nodeName: test-node, containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]}\n"
                "status: {phase: Running, podIP: 10.244.0.7, conditions: [{type: Ready, status: 'True'}]}\n---\n"
                "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: ns, labels: {app: web}}\n"
                "spec: {containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]}\n"
                "status: {phase: Running, podIP: 10.244.0.8, conditions: [{type: Ready, status: 'False'}]}\n---\n"
                "apiVersion: v1\nkind: Pod\nmetadata: {name: c, namespace: ns, labels: {app: web}}\n"
                "spec: {containers: [{name: c, image: i}]}\n"
                "status: {phase: Succeeded, podIP: 10.244.0.9}\n";
        /* with Nodes known, the controller leaves out a ready pod whose node
         * does not exist (the missing-node rule) */
        static const char nodes[] =
                "---\napiVersion: v1\nkind: Node\nmetadata: {name: test-node}\n---\n"
                "apiVersion: v1\nkind: Pod\nmetadata: {name: d, namespace: ns, labels: {app: web}}\n"
                "spec: {nodeName: gone, containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]}\n"
                "status: {phase: Running, podIP: 10.244.0.10, conditions: [{type: Ready, status: 'True'}]}\n";
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(yaml, &o);
        has_line(
                got,
                "-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment \"ns/web:http -> 10.244.0.7:8080\" -j KUBE-SEP-DG4TFWC6RAOLHAJZ");
        assert_int_equal(count(got, "-j DNAT"), 1);
        free(got);
        char both[4096];
        snprintf(both, sizeof(both), "%s%s", yaml, nodes);
        got = rules_yaml(both, &o);
        assert_int_equal(count(got, "-j DNAT"), 1);
        no_text(got, "10.244.0.10");
        free(got);
}

static void test_proxy__parse_cidr_list(void **state)
{
        (void)state;
        struct se_cidr c[3];
        bool primary = false;
        struct se_diag d;
        assert_int_equal(se_proxy_parse_cidr_list("10.0.0.0/8, fd00::/64", c, 3, NULL, &d), 2);
        assert_int_equal(c[1].ip.family, SE_IPV6);
        assert_int_equal(se_proxy_parse_cidr_list("primary", c, 3, &primary, &d), 0);
        assert_true(primary);
        assert_int_equal(se_proxy_parse_cidr_list("primary", c, 3, NULL, &d), -EINVAL);
        assert_int_equal(se_proxy_parse_cidr_list("10.0.0.0/8,,", c, 3, NULL, &d), -EINVAL);
        assert_int_equal(se_proxy_parse_cidr_list("10.0.0.1", c, 3, NULL, &d), -EINVAL);
        assert_int_equal(
                se_proxy_parse_cidr_list("1.0.0.0/8,2.0.0.0/8,3.0.0.0/8,4.0.0.0/8", c, 3, NULL, &d),
                -E2BIG);
}

/* the applier reports a missing tool and a failing one with its message */
static void test_proxy__apply_errors(void **state)
{
        (void)state;
        char err[512];
        /* nft -c only checks; a syntax error must come back as one line */
        int r = se_proxy_apply(SE_PROXY_NFT, "this is not nft\n", 16, err, sizeof(err));
        if (r == -ENOENT)
                skip();
        assert_int_equal(r, -EPROTO);
        assert_non_null(strstr(err, "nft failed"));
        assert_null(strchr(err, '\n'));
}

static char *nft_rules(const char *yaml, const struct se_proxy_options *o, enum se_ip_family fam)
{
        struct se_store *s = t_load(yaml);
        char *out = nft_text(s, o, fam);
        se_store_free(s);
        return out;
}

/* How often needle occurs in text. */
static unsigned occurrences(const char *text, const char *needle)
{
        unsigned n = 0;
        for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

/* The in-kernel schedulers (svcenv.io/scheduler): rr as numgen inc, sh/dh/mh
 * as a seeded jhash into IPVS's 256 buckets filled round robin, in both
 * families, with and without affinity; an unannotated
 * Service keeps numgen random. The whole scripts are golden. */
static void test_proxy__nftables_ksched(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        o.masquerade_mark = NULL;
        assert_int_equal(se_parse_ip("fd00::2", &o.node_ips[1]), 0);
        o.n_node_ips = 2;
        char *yaml = read_file("test/golden/proxy/ksched.yaml");
        static const char *const golden[] = { "test/golden/proxy/ksched.nft",
                                              "test/golden/proxy/ksched6.nft" };
        for (int v6 = 0; v6 < 2; v6++) {
                char *got = nft_rules(yaml, &o, v6 ? SE_IPV6 : SE_IPV4);
                if (getenv("UPDATE_GOLDEN")) {
                        FILE *f = fopen(golden[v6], "w");
                        assert_non_null(f);
                        fputs(got, f);
                        fclose(f);
                }
                char *want = read_file(golden[v6]);
                if (strcmp(got, want) != 0)
                        fail_msg("nft script differs from %s", golden[v6]);
                free(want);
                const char *ip = v6 ? "ip6" : "ip";
                char line[160];
                /* rr: the dnat map and, with affinity, the endpoint-chain vmap */
                snprintf(line, sizeof(line),
                         "dnat %s addr . port to numgen inc mod 3 map @dnat-rr-service-", ip);
                assert_int_equal(occurrences(got, line), 1);
                assert_int_equal(occurrences(got, "\t\tnumgen inc mod 3 vmap @rr-service-"), 1);
                assert_int_equal(occurrences(got, "\t\ttypeof numgen inc mod 1 : "), 2);
                /* sh, sh,port, dh, mh, mh with affinity */
                const char *keys[] = { "saddr mod 256", "saddr . tcp sport mod 256",
                                       "daddr mod 256" };
                for (size_t k = 0; k < 3; k++) {
                        snprintf(line, sizeof(line),
                                 "addr . port to jhash %s %s seed 0x5c4ed001 map @dnat-jh-service-",
                                 ip, keys[k]);
                        assert_int_equal(occurrences(got, line), 1);
                }
                /* the unannotated Service as kube-proxy writes it */
                snprintf(line, sizeof(line),
                         "dnat %s addr . port to numgen random mod 3 map @dnat-service-", ip);
                assert_int_equal(occurrences(got, line), 1);
                /* sh's buckets: round robin over the endpoints in list order */
                snprintf(line, sizeof(line),
                         v6 ? "0 : fd00:180:2::1 . 8080, 1 : fd00:180:2::2 . 8080, 2 : "
                              "fd00:180:2::3 . 8080, 3 : fd00:180:2::1 . 8080" :
                              "0 : 10.180.2.1 . 8080, 1 : 10.180.2.2 . 8080, 2 : 10.180.2.3 . "
                              "8080, 3 : 10.180.2.1 . 8080");
                assert_int_equal(occurrences(got, line), 1);
                snprintf(line, sizeof(line),
                         v6 ? "255 : fd00:180:2::1 . 8080 }" : "255 : 10.180.2.1 . 8080 }");
                assert_int_equal(occurrences(got, line), 1);
                free(got);
        }
        free(yaml);
}

/* mh: a jhash into Maglev's 4093 slots, filled exactly as pkg/lb (IPVS)
 * fills them for the same endpoints; with affinity a vmap of endpoint chains. */
static void test_proxy__nftables_ksched_mh(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: mh, namespace: ks, annotations: "
                "{svcenv.io/scheduler: 'mh'}}\n"
                "spec: {clusterIP: 172.30.1.6, ports: [{name: p80, port: 80}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: mh-v4, namespace: ks, labels: {kubernetes.io/service-name: mh}}\n"
                "addressType: IPv4\nendpoints: [{addresses: [10.180.6.1]}, {addresses: "
                "[10.180.6.2]}, {addresses: [10.180.6.3]}]\n"
                "ports: [{name: p80, port: 8080, protocol: TCP}]\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: mha, namespace: ks, annotations: "
                "{svcenv.io/scheduler: 'mh,port'}}\n"
                "spec: {clusterIP: 172.30.1.7, sessionAffinity: ClientIP, ports: [{name: p80, "
                "port: 80}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: mha-v4, namespace: ks, labels: {kubernetes.io/service-name: "
                "mha}}\n"
                "addressType: IPv4\nendpoints: [{addresses: [10.180.6.1]}, {addresses: "
                "[10.180.6.2]}]\n"
                "ports: [{name: p80, port: 8080, protocol: TCP}]\n";
        struct se_proxy_options o;
        base_options(&o);
        char *got = nft_rules(yaml, &o, SE_IPV4);
        has_line(got, "\t\tjhash ip saddr . tcp sport mod 4093 seed 0x5c4ed001 vmap "
                      "@jh-service-IM55RKAE-ks/mha/tcp/p80");
        assert_int_equal(occurrences(got, "meta l4proto tcp dnat ip addr . port to jhash ip saddr "
                                          "mod 4093 seed 0x5c4ed001 map @dnat-jh-service-"),
                         1);
        /* the map's elements are pkg/lb's table, bucket by bucket */
        struct se_lb_dest d[3] = { { .addr = { 10, 180, 6, 1 }, .addr_len = 4, .port = 8080 },
                                   { .addr = { 10, 180, 6, 2 }, .addr_len = 4, .port = 8080 },
                                   { .addr = { 10, 180, 6, 3 }, .addr_len = 4, .port = 8080 } };
        for (int i = 0; i < 3; i++)
                d[i].weight = 1;
        struct se_lb *lb = se_lb_new(SE_LB_MH, 0, 0);
        assert_non_null(lb);
        assert_int_equal(se_lb_update(lb, d, 3), 0);
        size_t m = 0;
        const int32_t *b = se_lb_buckets(lb, &m);
        assert_int_equal(m, 4093);
        struct se_strbuf want;
        se_strbuf_init(&want, 0);
        for (size_t i = 0; i < m; i++)
                se_strbuf_printf(&want, "%s%zu : 10.180.6.%d . 8080", i ? ", " : "{ ", i, b[i] + 1);
        se_strbuf_lit(&want, " }");
        assert_non_null(strstr(got, want.buf));
        se_strbuf_release(&want);
        se_lb_free(lb);
        /* the affinity vmap's 4093 slots each go to an endpoint chain */
        assert_int_equal(occurrences(got, " : goto endpoint-"), 4093);
        free(got);
}

/* mh with more endpoints than Maglev's 4093 slots: IPVS would refuse the
 * service; the rules balance it as kube-proxy does instead of failing the
 * whole sync. */
static void test_proxy__nftables_ksched_mh_too_many(void **state)
{
        (void)state;
        struct se_strbuf y;
        se_strbuf_init(&y, 0);
        se_strbuf_puts(&y, "apiVersion: v1\nkind: Service\nmetadata: {name: big, namespace: ks, "
                           "annotations: {svcenv.io/scheduler: mh}}\n"
                           "spec: {clusterIP: 172.30.1.9, ports: [{name: p80, port: 80}]}\n");
        for (int sl = 0; sl < 5; sl++) {
                se_strbuf_printf(&y,
                                 "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                                 "metadata: {name: big-%d, namespace: ks, labels: "
                                 "{kubernetes.io/service-name: big}}\naddressType: IPv4\n"
                                 "ports: [{name: p80, port: 8080, protocol: TCP}]\nendpoints:\n",
                                 sl);
                for (int e = 0; e < 819; e++)
                        se_strbuf_printf(&y, "- {addresses: [10.%d.%d.%d]}\n", 100 + sl, e / 250,
                                         e % 250 + 1);
        }
        assert_int_equal(se_strbuf_failed(&y), 0);
        struct se_proxy_options o;
        base_options(&o);
        char *got = nft_rules(y.buf, &o, SE_IPV4);
        assert_int_equal(occurrences(got, "dnat ip addr . port to numgen random mod 4095 map "
                                          "@dnat-service-"),
                         1);
        assert_null(strstr(got, "jhash"));
        free(got);
        se_strbuf_release(&y);
}

/* nftables: the same semantics as the iptables backend, in kube-proxy's
 * nftables shape (chain names HASH8-ns/name/proto/port) */
static void test_proxy__nftables_overall(void **state)
{
        (void)state;
        struct se_proxy_options o;
        base_options(&o);
        o.masquerade_mark = NULL;
        char *yaml = read_file("test/golden/proxy/overall.yaml");
        char *got = nft_rules(yaml, &o, SE_IPV4);
        /* the whole script, checked by hand (UPDATE_GOLDEN=1 rewrites it) */
        static const char golden[] = "test/golden/proxy/overall.nft";
        if (getenv("UPDATE_GOLDEN")) {
                FILE *f = fopen(golden, "w");
                assert_non_null(f);
                fputs(got, f);
                fclose(f);
        }
        char *want = read_file(golden);
        if (strcmp(got, want) != 0)
                fail_msg("nft script differs from %s", golden);
        free(want);
        has_line(got, "add table ip svcenv");
        has_line(got, "delete table ip svcenv");
        has_line(got, "\t\t\t172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80,");
        /* svc2: eTP Local without local endpoints: external IPs, LB and NodePort dropped */
        has_line(got, "\t\t\t192.168.99.22 . tcp . 80 : drop,");
        has_line(got, "\t\t\ttcp . 3001 : drop");
        /* svc6 has no endpoints at all: rejected */
        has_line(got, "\t\t\t172.30.0.46 . tcp . 80 : goto reject-chain");
        /* svc5: source ranges and affinity */
        has_line(got, "\t\tip saddr != @firewall-HVFWP5L3-ns5/svc5/tcp/p80 drop");
        has_line(got, "\tset firewall-HVFWP5L3-ns5/svc5/tcp/p80 {");
        has_line(got, "\t\telements = { 203.0.113.0/25 }");
        has_line(got, "\t\ttimeout 10800s");
        /* v1.36: one DNAT per service chain, to a random endpoint of its
         * own named map; no endpoint chains without affinity */
        has_line(
                got,
                "\t\tmeta l4proto tcp dnat ip addr . port to numgen random mod 2 map @dnat-service-LAUZTJTB-ns4/svc4/tcp/p80");
        has_line(got, "\tmap dnat-service-LAUZTJTB-ns4/svc4/tcp/p80 {");
        has_line(got, "\t\ttypeof numgen random mod 1 : ip daddr . tcp dport");
        has_line(got, "\t\telements = { 0 : 10.180.0.4 . 80, 1 : 10.180.0.5 . 80 }");
        no_text(got, "endpoint-UNZV3OEC");
        no_text(got, "mark-for-masquerade"); /* inlined since PR #135800 */
        /* affinity (svc5): endpoint chains remember the client */
        has_line(
                got,
                "\t\tip saddr @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 goto endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80");
        has_line(got, "\t\tnumgen random mod 1 vmap @service-HVFWP5L3-ns5/svc5/tcp/p80");
        has_line(got, "\t\tupdate @affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80 { ip saddr }");
        has_line(got, "\t\tmeta l4proto tcp dnat to 10.180.0.3:80");
        no_text(got, "vmap {"); /* no anonymous map: each costs a commit-list walk */
        no_text(got, "map {");
        no_text(got, "saddr != {");
        /* masquerading: ClusterIP traffic from outside the pod CIDR is
         * marked once in `services`, external traffic in its chain, and an
         * endpoint on this node reaching itself is matched by
         * hairpin-connections (svc4's 10.180.0.5 is the only local one) */
        has_line(
                got,
                "\t\tip daddr @cluster-ips ip saddr != 10.0.0.0/8 meta mark set meta mark | 0x4000");
        has_line(got, "\t\tmeta mark set meta mark | 0x4000");
        has_line(got, "\t\tfib saddr type local meta mark set meta mark | 0x4000");
        has_line(got, "\t\tmeta mark & 0x4000 != 0 meta mark set meta mark ^ 0x4000 masquerade");
        has_line(
                got,
                "\t\tct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade");
        has_line(got, "\t\ttype ipv4_addr . ipv4_addr . inet_proto . inet_service");
        has_line(got, "\t\t\t10.180.0.5 . 10.180.0.5 . tcp . 80");
        no_text(got, "10.180.0.4 . 10.180.0.4");
        /* v1.36's base chains */
        has_line(got, "\tchain filter-prerouting-pre-dnat {");
        has_line(got, "\t\ttype filter hook forward priority 0; policy accept;");
        no_text(got, "chain filter-prerouting {");
        has_line(
                got,
                "\t\tfib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports");
        free(got);
        free(yaml);
}

/* hairpin-connections (kube-proxy v1.36): one element per local endpoint
 * and protocol, written once however many services share it; remote
 * endpoints cannot hairpin on this node */
static void test_proxy__nft_hairpin_local_once(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\n"
                "spec: {clusterIP: 172.30.0.1, ports: [{name: p, port: 80}]}\n---\n"
                "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: ns}\n"
                "spec: {clusterIP: 172.30.0.2, ports: [{name: p, port: 81}, {name: u, port: 53, "
                "protocol: UDP}]}\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: a-1, namespace: ns, labels: {kubernetes.io/service-name: a}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.1.0.1], nodeName: test-node}, {addresses: "
                "[10.1.0.2], nodeName: other}]\n---\n"
                "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: b-1, namespace: ns, labels: {kubernetes.io/service-name: b}}\n"
                "addressType: IPv4\nports: [{name: p, port: 8080, protocol: TCP}, {name: u, port: "
                "8080, protocol: UDP}]\n"
                "endpoints: [{addresses: [10.1.0.1], nodeName: test-node}, {addresses: "
                "[10.1.0.3], nodeName: test-node}]\n";
        struct se_proxy_options o;
        base_options(&o);
        char *got = nft_rules(yaml, &o, SE_IPV4);
        assert_int_equal(count(got, "10.1.0.1 . 10.1.0.1 . tcp . 8080"), 1);
        assert_int_equal(count(got, "10.1.0.1 . 10.1.0.1 . udp . 8080"), 1);
        assert_int_equal(count(got, "10.1.0.3 . 10.1.0.3 . tcp . 8080"), 1);
        no_text(got, "10.1.0.2 . 10.1.0.2");
        has_line(got, "\t\t\t10.1.0.3 . 10.1.0.3 . udp . 8080");
        free(got);
}

/* nft names have at most 255 characters: like kube-proxy's
 * hashAndTruncate, a base over 240 keeps its hash and ends in "..." */
static void test_proxy__nft_long_names(void **state)
{
        (void)state;
        char ns[231];
        memset(ns, 'n', sizeof(ns) - 1);
        ns[sizeof(ns) - 1] = 0;
        struct se_proxy_endpoint ep = { .ip = "10.180.0.1",
                                        .port = 80,
                                        .str = "10.180.0.1:80",
                                        .ready = true,
                                        .serving = true };
        struct se_proxy_svcport sp = { .ns = ns,
                                       .name = "svc",
                                       .port_name = "p80",
                                       .spn = "x/svc:p80",
                                       .protocol = SE_PROTO_TCP,
                                       .proto = "tcp",
                                       .cluster_ip = "172.30.0.41",
                                       .port = 80,
                                       .eps = &ep,
                                       .n_eps = 1 };
        struct se_proxy_table t = { .family = SE_IPV4, .ports = &sp, .n_ports = 1 };
        struct se_proxy_options o;
        struct se_strbuf sb;
        base_options(&o);
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_proxy_nft_write(&t, &o, &sb), 0);
        size_t longest = 0, cut = 0;
        for (const char *p = sb.buf; (p = strstr(p, "-nnnn")); p++) {
                const char *b = p, *e = p;
                while (b > sb.buf && b[-1] != ' ' && b[-1] != '@')
                        b--;
                while (*e && *e != ' ' && *e != '\n')
                        e++;
                if ((size_t)(e - b) > longest)
                        longest = (size_t)(e - b);
                cut += e - b > 3 && strncmp(e - 3, "...", 3) == 0;
                p = e - 1;
        }
        assert_true(longest > 240);
        assert_true(longest <= 255);
        assert_true(cut > 0);
        /* "HASH8-" + 230 n + "/svc/tcp/p80" is 251 long: cut to 237 + "..." */
        char want[400];
        snprintf(
                want, sizeof(want),
                "\t\tmeta l4proto tcp dnat ip addr . port to numgen random mod 1 map @dnat-service-LHPYX3MT-%.228s...",
                ns);
        has_line(sb.buf, want);
        snprintf(want, sizeof(want), "\tmap dnat-service-LHPYX3MT-%.228s... {", ns);
        has_line(sb.buf, want);
        se_strbuf_release(&sb);
}

static const char two_svcs[] =
        "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
        "spec:\n  clusterIP: 172.30.0.41\n  ports: [{name: p80, port: 80, protocol: TCP}]\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: svc1-a, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.180.0.1]}, {addresses: [10.180.0.2]}]\n"
        "ports: [{name: p80, port: 80, protocol: TCP}]\n"
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc2, namespace: ns2}\n"
        "spec:\n  clusterIP: 172.30.0.42\n  ports: [{name: p80, port: 80, protocol: TCP}]\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: svc2-a, namespace: ns2, labels: {kubernetes.io/service-name: svc2}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.180.0.3]}]\n"
        "ports: [{name: p80, port: 80, protocol: TCP}]\n";

/* The output of the last sync_yaml / nft_sync_yaml: se_proxy_tracker_done
 * takes it over after a full sync. */
static struct se_strbuf last_out;

/* A copy of the text in last_out. */
static char *copy_out(void)
{
        char *copy = strdup(last_out.buf);
        assert_non_null(copy);
        return copy;
}

static bool tracker_done(struct se_proxy_tracker *tr, bool ok)
{
        bool partial = se_proxy_tracker_done(tr, ok, &last_out);
        se_strbuf_release(&last_out);
        return partial;
}

static char *sync_yaml(const char *yaml, struct se_proxy_tracker *tr)
{
        struct se_proxy_options o;
        base_options(&o);
        o.nfacct = false; /* the counters do not exist where these are applied */
        struct se_store *s = t_load(yaml);
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        se_strbuf_release(&last_out); /* the sync's output, for tracker_done */
        assert_int_equal(se_proxy_iptables_sync(t, &o, tr, &last_out), 0);
        se_proxy_table_free(t);
        se_store_free(s);
        return copy_out();
}

/* the three syncs of the tracker tests: full, unchanged, svc1 loses an
 * endpoint while svc2 goes away */
static void three_syncs(struct se_proxy_tracker *tr, char *out[3])
{
        char *changed = strdup(two_svcs);
        /* svc1 keeps 10.180.0.2 only; svc2 disappears */
        char *at = strstr(changed, "[{addresses: [10.180.0.1]}, ");
        memmove(at + 1, at + 28, strlen(at + 28) + 1);
        *strstr(changed, "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc2") = 0;
        out[0] = sync_yaml(two_svcs, tr);
        assert_false(tracker_done(tr, true));
        out[1] = sync_yaml(two_svcs, tr);
        assert_true(tracker_done(tr, true));
        out[2] = sync_yaml(changed, tr);
        free(changed);
}

/* Deletions over several partial syncs (the tracker keeps its counts of
 * who defines each name between them): a chain written again is not
 * deleted, one gone again is deleted again. */
static void test_proxy__partial_deletes_again(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        char *changed = strdup(two_svcs), h[17], svc2[40];
        /* svc1 keeps 10.180.0.2 only; svc2 disappears */
        char *at = strstr(changed, "[{addresses: [10.180.0.1]}, ");
        memmove(at + 1, at + 28, strlen(at + 28) + 1);
        *strstr(changed, "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc2") = 0;
        assert_int_equal(se_proxy_chain_hash("ns2/svc2:p80", "tcp", NULL, h), 0);
        snprintf(svc2, sizeof(svc2), "-X KUBE-SVC-%s", h);
        free(sync_yaml(two_svcs, tr));
        assert_false(tracker_done(tr, true));
        for (int round = 0; round < 2; round++) {
                char *gone = sync_yaml(changed, tr);
                has_line(gone, "-X KUBE-SEP-SXIVWICOYRO3J4NJ");
                has_line(gone, svc2);
                assert_true(tracker_done(tr, true));
                char *same = sync_yaml(changed, tr);
                no_text(same, "-X ");
                assert_true(tracker_done(tr, true));
                char *back = sync_yaml(two_svcs, tr);
                has_line(back, ":KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]");
                no_text(back, "-X ");
                assert_true(tracker_done(tr, true));
                free(gone);
                free(same);
                free(back);
        }
        free(changed);
        se_proxy_tracker_free(tr);
}

/* TestSyncProxyRulesRepeated: partial syncs write only what changed */
static void test_proxy__partial_sync(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        char *out[3];
        three_syncs(tr, out);
        /* full: every chain */
        has_line(out[0], ":KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]");
        has_line(out[0], ":KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]");
        /* nothing changed: top-level chains only */
        no_text(out[1], ":KUBE-SVC-");
        no_text(out[1], ":KUBE-SEP-");
        has_line(
                out[1],
                "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 cluster IP\" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O");
        has_line(out[1], "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000");
        /* svc1 rewritten, its old endpoint and all of svc2 deleted */
        has_line(out[2], ":KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]");
        has_line(
                out[2],
                "-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 -> 10.180.0.2:80\" -j KUBE-SEP-LXVODXWDISEETFEF");
        has_line(out[2], ":KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]");
        has_line(out[2], "-X KUBE-SEP-SXIVWICOYRO3J4NJ");
        char h[17], line[80];
        assert_int_equal(se_proxy_chain_hash("ns2/svc2:p80", "tcp", NULL, h), 0);
        snprintf(line, sizeof(line), "-X KUBE-SVC-%s", h);
        has_line(out[2], line);
        no_text(out[2], "ns2/svc2");
        /* a failed apply makes the next sync full again */
        assert_true(tracker_done(tr, false));
        char *again = sync_yaml(two_svcs, tr);
        has_line(again, ":KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]");
        assert_false(tracker_done(tr, true));
        free(again);
        /* a full sync keeps its segments in its output: without the output
         * handed back the tracker knows nothing, the next sync is full */
        se_proxy_tracker_force_full(tr);
        free(sync_yaml(two_svcs, tr));
        assert_false(se_proxy_tracker_done(tr, true, NULL));
        again = sync_yaml(two_svcs, tr);
        has_line(again, ":KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]");
        assert_false(tracker_done(tr, true));
        free(again);
        /* handed back: nothing changed, nothing rewritten */
        again = sync_yaml(two_svcs, tr);
        no_text(again, ":KUBE-SEP-");
        assert_true(tracker_done(tr, true));
        free(again);
        for (int i = 0; i < 3; i++)
                free(out[i]);
        se_proxy_tracker_free(tr);
}

/* The same syncs applied by the real iptables-restore, in a network
 * namespace of a child process (root only): partial restores and chain
 * deletion are valid input, and the deleted chain is gone. */
static void test_proxy__partial_sync_applied(void **state)
{
        (void)state;
        if (geteuid() != 0)
                skip();
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        char *out[3];
        three_syncs(tr, out);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char err[512];
                int code = 0;
                if (unshare(CLONE_NEWNET) < 0)
                        code = 2;
                for (int i = 0; i < 3 && !code; i++)
                        if (se_proxy_apply(SE_PROXY_IPTABLES_RESTORE, out[i], strlen(out[i]), err,
                                           sizeof(err)) < 0) {
                                fprintf(stderr, "# sync %d: %s\n", i, err);
                                code = 10 + i;
                        }
                static const char probe[] =
                        "*nat\n-A KUBE-SEP-SXIVWICOYRO3J4NJ -j RETURN\nCOMMIT\n";
                if (!code) {
                        int r = se_proxy_apply(SE_PROXY_IPTABLES_RESTORE, probe, sizeof(probe) - 1,
                                               err, sizeof(err));
                        code = r == -ENOENT ? 3 : r == -EPROTO ? 0 : 20;
                }
                for (int i = 0; i < 3; i++)
                        free(out[i]);
                se_proxy_tracker_free(tr);
                exit(code); /* exit, not _exit: valgrind checks the child too */
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        for (int i = 0; i < 3; i++)
                free(out[i]);
        se_proxy_tracker_free(tr);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 2)
                skip(); /* no iptables-restore, or no namespaces here */
        assert_int_equal(WEXITSTATUS(status), 0);
}

static const char rep_svc1[] =
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
        "spec: {clusterIP: 172.30.0.41, ports: [{name: p80, port: 80, protocol: TCP}]}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: svc1-1, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.0.1.1]}]\n"
        "ports: [{name: p80, port: 80, protocol: TCP}]\n";
static const char rep_svc2[] =
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc2, namespace: ns2}\n"
        "spec: {clusterIP: 172.30.0.42, ports: [{name: p8080, port: 8080, protocol: TCP}]}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: svc2-1, namespace: ns2, labels: {kubernetes.io/service-name: svc2}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.0.2.1]}]\n"
        "ports: [{name: p8080, port: 8080, protocol: TCP}]\n";
static const char rep_svc3[] =
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc3, namespace: ns3}\n"
        "spec: {clusterIP: 172.30.0.43, ports: [{name: p80, port: 80, protocol: TCP}]}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: svc3-1, namespace: ns3, labels: {kubernetes.io/service-name: svc3}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.0.3.1]}]\n"
        "ports: [{name: p80, port: 80, protocol: TCP}]\n";
static const char rep_svc4[] =
        "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc4, namespace: ns4}\n"
        "spec: {clusterIP: 172.30.0.44, ports: [{name: p80, port: 80, protocol: TCP}]}\n";
static const char rep_eps4[] =
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: svc4-1, namespace: ns4, labels: {kubernetes.io/service-name: svc4}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.0.4.1]}]\n"
        "ports: [{name: p80, port: 80, protocol: TCP}]\n";

static char *rep_sync(struct se_proxy_tracker *tr, const char *const *parts)
{
        struct se_strbuf y;
        se_strbuf_init(&y, 0);
        for (; *parts; parts++)
                se_strbuf_puts(&y, *parts);
        struct se_proxy_options o;
        base_options(&o);
        o.nfacct = false; /* this upstream test's fake had no nfacct counters */
        struct se_store *s = t_load(y.buf);
        se_strbuf_release(&y);
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_proxy_iptables_sync(t, &o, tr, &sb), 0);
        se_proxy_table_free(t);
        se_store_free(s);
        char *raw = strdup(sb.buf);
        assert_non_null(raw);
        se_proxy_tracker_done(tr, true, &sb);
        se_strbuf_release(&sb);
        char *norm = normalise(raw);
        free(raw);
        return norm;
}

static void rep_check(struct se_proxy_tracker *tr, const char *const *parts, int step)
{
        char path[80];
        snprintf(path, sizeof(path), "test/golden/proxy/repeated/step%d.iptables", step);
        char *want = read_file(path);
        char *got = rep_sync(tr, parts);
        if (strcmp(got, want) != 0)
                fail_msg("TestSyncProxyRulesRepeated step %d differs\n--- got:\n%s", step, got);
        free(got);
        free(want);
}

/* TestSyncProxyRulesRepeated (upstream's expected texts, verbatim): add a
 * service, delete one, add one without then with endpoints, change one */
static void test_proxy__sync_repeated_golden(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        const char *s1[] = { rep_svc1, rep_svc2, NULL };
        const char *s2[] = { rep_svc1, rep_svc2, rep_svc3, NULL };
        const char *s3[] = { rep_svc1, rep_svc3, NULL };
        const char *s4[] = { rep_svc1, rep_svc3, rep_svc4, NULL };
        const char *s5[] = { rep_svc1, rep_svc3, rep_svc4, rep_eps4, NULL };
        rep_check(tr, s1, 1);
        rep_check(tr, s2, 2);
        rep_check(tr, s3, 3);
        rep_check(tr, s4, 4);
        rep_check(tr, s5, 5);
        /* svc3's endpoint moves: its SVC and SEP chains are rewritten, the
         * old SEP chain deleted */
        char *svc3b = strdup(rep_svc3);
        memcpy(strstr(svc3b, "10.0.3.1"), "10.0.3.2", 8);
        const char *s6[] = { rep_svc1, svc3b, rep_svc4, rep_eps4, NULL };
        char *got = rep_sync(tr, s6);
        has_line(got, ":KUBE-SEP-DKCFIS26GWF2WLWC - [0:0]");
        has_line(got, ":KUBE-SVC-X27LE4BHSL4DOUIK - [0:0]");
        has_line(got, "-X KUBE-SEP-BSWRHOQ77KEXZLNL");
        has_line(
                got,
                "-A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment \"ns3/svc3:p80 -> 10.0.3.2:80\" -j KUBE-SEP-DKCFIS26GWF2WLWC");
        no_text(got, "KUBE-SVC-4SW47YFZTEDKD3PK - [0:0]");
        no_text(got, "KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]");
        free(got);
        free(svc3b);
        se_proxy_tracker_free(tr);
}

/* topology hints (TestTopologyAwareHints): with every ready endpoint hinted,
 * only the endpoints for this node's zone are used; a missing hint or no
 * endpoint for the zone falls back to all */
static void test_proxy__topology_hints(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
                "spec: {clusterIP: 172.30.0.41, ports: [{name: p80, port: 80, protocol: TCP}]}\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: s, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
                "addressType: IPv4\nports: [{name: p80, port: 80, protocol: TCP}]\nendpoints:\n"
                "- {addresses: [10.1.2.3], zone: zone-a, hints: {forZones: [{name: zone-a}]}}\n"
                "- {addresses: [10.1.2.4], zone: zone-b, hints: {forZones: [{name: zone-b}]}}\n"
                "- {addresses: [10.1.2.5], zone: zone-c, hints: {forZones: [{name: zone-a}]}}\n";
        struct se_proxy_options o;
        base_options(&o);
        o.zone = "zone-a";
        char *got = rules_yaml(yaml, &o);
        assert_int_equal(count(got, "-j DNAT"), 2);
        no_text(got, "10.1.2.4");
        free(got);
        o.zone = "zone-x"; /* no endpoint for this zone: all of them */
        got = rules_yaml(yaml, &o);
        assert_int_equal(count(got, "-j DNAT"), 3);
        free(got);
}

/* loadBalancerSourceRanges that contain the node IP also accept the VIP as
 * source (TestLoadBalancer "allowFromNode"); other families' ranges are
 * ignored; without ranges the LB rule jumps straight to KUBE-EXT */
static void test_proxy__source_ranges_node_ip(void **state)
{
        (void)state;
        static const char yaml[] =
                "apiVersion: v1\nkind: Service\nmetadata: {name: svc1, namespace: ns1}\n"
                "spec:\n  type: LoadBalancer\n  clusterIP: 172.30.0.41\n"
                "  loadBalancerSourceRanges: [192.168.0.0/24, 'fd00::/64']\n"
                "  ports: [{name: p80, port: 80, protocol: TCP, nodePort: 3001}]\n"
                "status: {loadBalancer: {ingress: [{ip: 1.2.3.4}]}}\n"
                "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                "metadata: {name: s, namespace: ns1, labels: {kubernetes.io/service-name: svc1}}\n"
                "addressType: IPv4\nports: [{name: p80, port: 80, protocol: TCP}]\n"
                "endpoints: [{addresses: [10.180.0.1]}]\n";
        struct se_proxy_options o;
        base_options(&o);
        char *got = rules_yaml(yaml, &o);
        has_line(
                got,
                "-A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 loadbalancer IP\" -s 192.168.0.0/24 -j KUBE-EXT-XPGD46QRK7WJZT7O");
        has_line(
                got,
                "-A KUBE-FW-XPGD46QRK7WJZT7O -m comment --comment \"ns1/svc1:p80 loadbalancer IP\" -s 1.2.3.4 -j KUBE-EXT-XPGD46QRK7WJZT7O");
        no_text(got, "fd00");
        free(got);
        struct se_store *st = t_load(yaml);
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        assert_int_equal(se_proxy_table_build(st, &o, SE_IPV4, &t), 0);
        se_strbuf_init(&sb, 0);
        assert_int_equal(se_proxy_nft_write(t, &o, &sb), 0);
        has_line(sb.buf, "\t\telements = { 192.168.0.0/24, 1.2.3.4 }");
        has_line(sb.buf, "\t\tip saddr != @firewall-ULMVA6XW-ns1/svc1/tcp/p80 drop");
        se_strbuf_release(&sb);
        se_proxy_table_free(t);
        se_store_free(st);
        char *open_lb = strdup(yaml);
        char *at = strstr(open_lb, "  loadBalancerSourceRanges");
        memmove(at, strchr(at, '\n') + 1, strlen(strchr(at, '\n') + 1) + 1);
        got = rules_yaml(open_lb, &o);
        has_line(
                got,
                "-A KUBE-SERVICES -m comment --comment \"ns1/svc1:p80 loadbalancer IP\" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-EXT-XPGD46QRK7WJZT7O");
        no_text(got, "KUBE-FW-");
        free(got);
        free(open_lb);
}

static char *nft_sync_yaml(const char *yaml, struct se_proxy_tracker *tr)
{
        struct se_proxy_options o;
        base_options(&o);
        struct se_store *s = t_load(yaml);
        struct se_proxy_table *t = NULL;
        assert_int_equal(se_proxy_table_build(s, &o, SE_IPV4, &t), 0);
        se_strbuf_release(&last_out); /* the sync's output, for tracker_done */
        assert_int_equal(se_proxy_nft_sync(t, &o, tr, &last_out), 0);
        se_proxy_table_free(t);
        se_store_free(s);
        return copy_out();
}

/* nftables partial syncs: full, unchanged, svc1 changed + svc2 gone; then
 * applied by the real nft in a child's network namespace (root only) */
static void test_proxy__nft_partial_sync(void **state)
{
        (void)state;
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        char *changed = strdup(two_svcs);
        char *at = strstr(changed, "[{addresses: [10.180.0.1]}, ");
        memmove(at + 1, at + 28, strlen(at + 28) + 1);
        *strstr(changed, "---\napiVersion: v1\nkind: Service\nmetadata: {name: svc2") = 0;
        char *out[3];
        out[0] = nft_sync_yaml(two_svcs, tr);
        tracker_done(tr, true);
        out[1] = nft_sync_yaml(two_svcs, tr);
        tracker_done(tr, true);
        out[2] = nft_sync_yaml(changed, tr);
        tracker_done(tr, true);
        free(changed);
        /* a full sync with a tracker keeps the table (affinity sets) */
        has_line(out[0], "flush table ip svcenv");
        no_text(out[0], "delete table");
        no_text(out[1], "flush table");
        no_text(out[1], "chain service-");
        has_line(out[1], "\t\t\t172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80,");
        has_line(out[2], "flush chain ip svcenv service-ULMVA6XW-ns1/svc1/tcp/p80");
        has_line(out[2], "flush map ip svcenv service-ips");
        /* svc1's endpoint map emptied and declared again with one element */
        has_line(out[2], "flush map ip svcenv dnat-service-ULMVA6XW-ns1/svc1/tcp/p80");
        has_line(out[2], "\t\telements = { 0 : 10.180.0.2 . 80 }");
        has_line(
                out[2],
                "\t\tmeta l4proto tcp dnat ip addr . port to numgen random mod 1 map @dnat-service-ULMVA6XW-ns1/svc1/tcp/p80");
        /* svc2's map deleted after the chain whose rule uses it */
        const char *dm =
                strstr(out[2], "\ndelete map ip svcenv dnat-service-42NFTM6N-ns2/svc2/tcp/p80");
        const char *dc =
                strstr(out[2], "\ndelete chain ip svcenv service-42NFTM6N-ns2/svc2/tcp/p80");
        assert_non_null(dm);
        assert_non_null(dc);
        assert_true(dc < dm);
        no_text(out[2], "chain endpoint-"); /* no affinity: no endpoint chains */
        /* hairpin-connections refilled: no endpoint is on this node */
        has_line(out[2], "flush set ip svcenv hairpin-connections");
        no_text(out[2], "10.180.0.2 . 10.180.0.2");
        no_text(out[2], "172.30.0.42");
        char svc2[64];
        snprintf(svc2, sizeof(svc2), "delete chain ip svcenv service-");
        assert_int_equal(count(out[2], svc2), 1);
        if (geteuid() != 0) {
                for (int i = 0; i < 3; i++)
                        free(out[i]);
                se_proxy_tracker_free(tr);
                skip();
        }
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char err[512];
                int code = 0;
                if (unshare(CLONE_NEWNET) < 0)
                        code = 2;
                for (int i = 0; i < 3 && !code; i++)
                        if (se_proxy_apply(SE_PROXY_NFT, out[i], strlen(out[i]), err, sizeof(err)) <
                            0) {
                                fprintf(stderr, "# nft sync %d: %s\n", i, err);
                                code = 10 + i;
                        }
                static const char probe[] =
                        "add rule ip svcenv service-42NFTM6N-ns2/svc2/tcp/p80 counter\n";
                if (!code) {
                        int r = se_proxy_apply(SE_PROXY_NFT, probe, sizeof(probe) - 1, err,
                                               sizeof(err));
                        code = r == -ENOENT ? 3 : r == -EPROTO ? 0 : 20;
                }
                for (int i = 0; i < 3; i++)
                        free(out[i]);
                se_proxy_tracker_free(tr);
                exit(code);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        for (int i = 0; i < 3; i++)
                free(out[i]);
        se_proxy_tracker_free(tr);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 2)
                skip();
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* iptables-save output: our service chains of the nat table, nothing else;
 * seeded into a tracker, the next sync deletes those it does not write */
static void test_proxy__save_chains_cleanup(void **state)
{
        (void)state;
        char *save = read_file("test/fuzz/corpus/save_chains/overall.save");
        struct se_strv chains = SE_STRV_INIT;
        assert_int_equal(se_proxy_parse_save_chains(save, strlen(save), &chains), 0);
        /* overall: 5 SVC, 6 SEP, 4 EXT, 1 FW (KUBE-SERVICES etc. are not per service) */
        assert_int_equal(chains.n, 16);
        assert_true(se_strv_contains(&chains, "KUBE-FW-NUKIZ6OKUXPJNT4C"));
        assert_false(se_strv_contains(&chains, "KUBE-SERVICES"));
        assert_false(se_strv_contains(&chains, "KUBE-MARK-MASQ"));
        static const char odd[] = "*filter\n:KUBE-SVC-AAAA - [0:0]\nCOMMIT\n*nat\n:KUBE-SVC-"
                                  "\n:KUBE-SEP-BBBB ACCEPT [1:2]\n:FOO-SVC-X - [0:0]\n:KUBE-SEP-"
                                  "0123456789012345678901234 - [0:0]\nCOMMIT";
        struct se_strv o2 = SE_STRV_INIT;
        assert_int_equal(se_proxy_parse_save_chains(odd, sizeof(odd) - 1, &o2), 0);
        assert_int_equal(o2.n, 1);
        assert_string_equal(o2.v[0], "KUBE-SEP-BBBB");
        se_strv_release(&o2);
        /* a full sync of svc1 alone deletes every other service's chains */
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        assert_int_equal(se_proxy_tracker_seed(tr, &chains), 0);
        char *out = sync_yaml(three_eps, tr);
        has_line(out, "-X KUBE-FW-NUKIZ6OKUXPJNT4C");
        has_line(out, ":KUBE-FW-NUKIZ6OKUXPJNT4C - [0:0]");
        has_line(out, ":KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]"); /* written again, kept */
        no_text(out, "-X KUBE-SEP-SXIVWICOYRO3J4NJ");
        no_text(out, "-X KUBE-SVC-XPGD46QRK7WJZT7O");
        assert_int_equal(count(out, "\n-X "), 14); /* 16 minus SVC-XPGD... and SEP-SXIV... */
        free(out);
        se_proxy_tracker_free(tr); /* without done: the output stays the caller's */
        se_strbuf_release(&last_out);
        se_strv_release(&chains);
        free(save);
}

/* Services with 20,000 ports (the API server caps neither Services nor
 * slices below that): "big" selects three pods and has no slices (its
 * endpoints are computed), "sl" has one slice listing its ports in reverse.
 * In the child: 0, or the number of the check that failed. */
static int many_ports_table(void)
{
        enum { N = 20000 };
        struct se_strbuf y;
        se_strbuf_init(&y, 0);
        se_strbuf_puts(&y, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[");
        for (int k = 0; k < 2; k++) {
                se_strbuf_printf(&y,
                                 "%s{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{"
                                 "\"name\":\"%s\",\"namespace\":\"ns\"},\"spec\":{\"clusterIP\":"
                                 "\"10.96.0.%d\",%s\"ports\":[",
                                 k ? "," : "", k ? "sl" : "big", 10 + k,
                                 k ? "" : "\"selector\":{\"app\":\"x\"},");
                for (int i = 0; i < N; i++)
                        se_strbuf_printf(&y, "%s{\"name\":\"p%d\",\"port\":%d}", i ? "," : "", i,
                                         i + 1);
                se_strbuf_puts(&y, "]}}");
        }
        for (int k = 0; k < 3; k++)
                se_strbuf_printf(&y,
                                 ",{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
                                 "\"p%d\",\"namespace\":\"ns\",\"labels\":{\"app\":\"x\"}},"
                                 "\"spec\":{\"nodeName\":\"test-node\",\"containers\":[{\"name\":"
                                 "\"c\"}]},\"status\":{\"phase\":\"Running\",\"podIP\":"
                                 "\"10.1.0.%d\",\"conditions\":[{\"type\":\"Ready\",\"status\":"
                                 "\"True\"}]}}",
                                 k, k + 1);
        se_strbuf_puts(&y, ",{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                           "\"test-node\"}}");
        se_strbuf_puts(&y, ",{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\","
                           "\"metadata\":{\"name\":\"sl-1\",\"namespace\":\"ns\",\"labels\":{"
                           "\"kubernetes.io/service-name\":\"sl\"}},\"addressType\":\"IPv4\","
                           "\"endpoints\":[{\"addresses\":[\"10.2.0.1\"]},{\"addresses\":["
                           "\"10.2.0.2\"]}],\"ports\":[");
        for (int i = N - 1; i >= 0; i--)
                se_strbuf_printf(&y, "{\"name\":\"p%d\",\"port\":%d}%s", i, 30000 + i,
                                 i ? "," : "");
        se_strbuf_puts(&y, "]}]}");
        if (se_strbuf_failed(&y))
                return 9;
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s || se_manifest_load_buffer(s, "big.json", y.buf, y.len, NULL, NULL, &d) < 0)
                return 1;
        se_strbuf_release(&y);
        struct se_proxy_options o;
        base_options(&o);
        struct se_proxy_table *t = NULL;
        if (se_proxy_table_build(s, &o, SE_IPV4, &t) != 0)
                return 2;
        if (t->n_ports != 2 * N)
                return 3;
        unsigned big_eps = 0, sl_ok = 0;
        for (uint32_t i = 0; i < t->n_ports; i++) {
                const struct se_proxy_svcport *sp = &t->ports[i];
                if (strcmp(sp->name, "big") == 0) {
                        big_eps += sp->n_eps;
                } else if (sp->n_eps == 2) {
                        char want[32]; /* p<k> listens on 30000 + k */
                        snprintf(want, sizeof(want), "10.2.0.1:%d",
                                 30000 + atoi(sp->port_name + 1));
                        sl_ok += strcmp(sp->eps[0].str, want) == 0;
                }
        }
        if (big_eps != 3 * N)
                return 4;
        if (sl_ok != N)
                return 5;
        se_proxy_table_free(t);
        se_store_free(s);
        return 0;
}

/* Linear in the ports: the endpoints of a service without slices are planned
 * once per service, not per port, and each port finds its slice port through
 * a map. Budget: CPU seconds for the child, far above the linear build's need
 * (about 0.5 s here); before, the 20,000-port service alone ran for minutes.
 * None under valgrind (VALGRIND=1). */
static void test_proxy__many_ports_linear(void **state)
{
        (void)state;
        t_run_with_cpu_budget(many_ports_table, 20);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_proxy__chain_names),
                cmocka_unit_test(test_proxy__probability),
                cmocka_unit_test(test_proxy__overall_golden),
                cmocka_unit_test(test_proxy__no_endpoints_reject),
                cmocka_unit_test(test_proxy__cluster_ip_three_endpoints),
                cmocka_unit_test(test_proxy__endpoint_address_family),
                cmocka_unit_test(test_proxy__masquerade_modes),
                cmocka_unit_test(test_proxy__large_cluster_mode),
                cmocka_unit_test(test_proxy__internal_policy_local),
                cmocka_unit_test(test_proxy__external_policy_local),
                cmocka_unit_test(test_proxy__terminating_fallback),
                cmocka_unit_test(test_proxy__skipped_services),
                cmocka_unit_test(test_proxy__scheduler_annotation),
                cmocka_unit_test(test_proxy__retry_annotation),
                cmocka_unit_test(test_proxy__routed_ports_left_out),
                cmocka_unit_test(test_proxy__nftables_ksched),
                cmocka_unit_test(test_proxy__nftables_ksched_mh),
                cmocka_unit_test(test_proxy__nftables_ksched_mh_too_many),
                cmocka_unit_test(test_proxy__headless_label),
                cmocka_unit_test(test_proxy__nodeport_addresses_per_family),
                cmocka_unit_test(test_proxy__cluster_ips_check),
                cmocka_unit_test(test_proxy__ipv6_base_rules_on_ipv4_node),
                cmocka_unit_test(test_proxy__ipv6_and_dual_stack),
                cmocka_unit_test(test_proxy__udp_affinity_nodeport_addresses),
                cmocka_unit_test(test_proxy__pods_without_slices),
                cmocka_unit_test(test_proxy__parse_cidr_list),
                cmocka_unit_test(test_proxy__apply_errors),
                cmocka_unit_test(test_proxy__nftables_overall),
                cmocka_unit_test(test_proxy__nft_hairpin_local_once),
                cmocka_unit_test(test_proxy__nft_long_names),
                cmocka_unit_test(test_proxy__topology_hints),
                cmocka_unit_test(test_proxy__source_ranges_node_ip),
                cmocka_unit_test(test_proxy__partial_sync),
                cmocka_unit_test(test_proxy__partial_deletes_again),
                cmocka_unit_test(test_proxy__sync_repeated_golden),
                cmocka_unit_test(test_proxy__partial_sync_applied),
                cmocka_unit_test(test_proxy__nft_partial_sync),
                cmocka_unit_test(test_proxy__save_chains_cleanup),
                cmocka_unit_test(test_proxy__many_ports_linear),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
