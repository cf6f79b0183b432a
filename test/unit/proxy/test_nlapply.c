/* The netlink applier (se_proxy_nft_apply_netlink): what it refuses, with
 * the line, without root; and, as root in child network namespaces, that
 * the same script applied by `nft -f` in one namespace and over netlink in
 * another leaves the same `nft list ruleset` (set elements sorted, as nft
 * prints them in hash order): every construct, the demo and upstream
 * clusters, random clusters of several seeds, and partial syncs after
 * changes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <svcenv/log.h>
#include <svcenv/manifest.h>
#include <svcenv/proxy.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>

#include "../../../pkg/proxy/proxy_nlbatch.h"

static char *read_file(const char *path)
{
        FILE *f = fopen(path, "r");
        if (!f)
                fail_msg("cannot open %s", path);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                se_strbuf_add(&sb, buf, n);
        fclose(f);
        char *s = se_strbuf_detach(&sb, NULL);
        return s ? s : strdup("");
}

/* translation only (no kernel): 0 or the error, err filled */
static int translate(const char *script, char *err, size_t errsize)
{
        struct nlb b;
        proxy_nlb_init(&b);
        int r = proxy_nft_translate(script, strlen(script), &b, NULL, NULL, err, errsize);
        proxy_nlb_release(&b);
        return r;
}

static void refused(const char *script, const char *want)
{
        char err[256];
        assert_int_equal(translate(script, err, sizeof(err)), -EINVAL);
        if (!strstr(err, want))
                fail_msg("error \"%s\" lacks \"%s\"", err, want);
        assert_null(strchr(err, '\n'));
}

/* constructs we do not write: a one-line error naming the line, so the
 * caller can fall back to nft -f */
static void test_nlapply__unknown_constructs_name_the_line(void **state)
{
        (void)state;
        refused("table ip t {\n\tchain c {\n\t\tip daddr 1.2.3.4 log\n\t}\n}\n", "line 3: ");
        refused("add table ip t\nadd rule ip t c ip dscp 4 drop\n", "line 2: ");
        refused("add table ip t\nadd flowtable ip t f\n", "line 2: unsupported command");
        refused("table ip t {\n\tset s {\n\t\ttype ether_addr\n\t}\n}\n",
                "line 3: unknown set type");
        refused("table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 1.2.3.4/33 }\n\t}\n}\n",
                "line 4: ");
        refused("table ip t {\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 1.2.3.0/24 }\n\t}\n}\n",
                "line 4: a prefix is not allowed");
        refused("table ip t {\n\tchain c {\n\t\tip saddr 10.0.0.1/8 drop\n\t}\n}\n",
                "line 3: host bits set");
        refused("table ip t {\n\tchain c {\n\t\ttcp dport 70000 drop\n\t}\n}\n",
                "line 3: bad number");
        refused("add table ip t\nadd element ip t s { 1.2.3.4 }\n", "line 2: no set 's'");
        refused("table ip t {\n\tchain c {\n", "unterminated");
        refused("table ip t {\n\tmap m {\n\t\ttypeof ip daddr : verdict\n\t}\n}\n",
                "line 3: unknown set typeof");
        refused("table ip t {\n\tmap m {\n\t\ttypeof numgen random mod 1 : ip daddr\n\t}\n}\n",
                "line 3: typeof data of one field");
        refused("table ip t {\n\tmap m {\n\t\ttypeof numgen random mod 1 : ip dscp . tcp "
                "dport\n\t}\n}\n",
                "line 3: unknown typeof data 'ip dscp'");
        refused("table ip t {\n\tmap m {\n\t\ttypeof numgen random mod 1 : ip6 daddr . tcp "
                "dport\n\t}\n}\n",
                "line 2: map 'm': addresses of another family");
        refused("table ip t {\n\tchain c {\n\t\tdnat ip addr . port to 1.2.3.4\n\t}\n}\n",
                "line 3: 'addr . port' needs a map");
        refused("table ip t {\n\tchain c {\n\t\tdnat ip addr . port to numgen random mod 1 "
                "map { 0 : 1.2.3.4 }\n\t}\n}\n",
                "line 3: 'addr . port' with a map of addresses only");
        refused("table ip t {\n\tchain c {\n\t\tct status bogus counter\n\t}\n}\n",
                "line 3: unknown ct status 'bogus'");
        refused("bogus\n", "line 1: unknown command");
        refused("add table ip t extra\n", "line 1: unexpected 'extra'");
        char nul[] = "add table ip t\0\n";
        char err[128];
        struct nlb b;
        proxy_nlb_init(&b);
        assert_int_equal(
                proxy_nft_translate(nul, sizeof(nul) - 1, &b, NULL, NULL, err, sizeof(err)),
                -EINVAL);
        proxy_nlb_release(&b);
        /* and what we write translates */
        char *demo = read_file("test/golden/proxy/demo-node-a.nft");
        assert_int_equal(translate(demo, err, sizeof(err)), 0);
        free(demo);
}

/* `nft list ruleset` with the items of every "{ a, b }" list sorted */
static char *listing(void)
{
        const char *argv[] = { "nft", "list", "ruleset", NULL };
        struct se_strbuf out, norm;
        char err[256];
        se_strbuf_init(&out, 0);
        if (se_proxy_run(argv, &out, err, sizeof(err)) < 0) {
                fprintf(stderr, "# nft list ruleset: %s\n", err);
                se_strbuf_release(&out);
                return NULL;
        }
        se_strbuf_init(&norm, 0);
        const char *p = out.buf ? out.buf : "";
        while (*p) {
                const char *open = strstr(p, "{ ");
                if (!open) {
                        se_strbuf_puts(&norm, p);
                        break;
                }
                const char *close = strchr(open, '}');
                if (!close)
                        close = p + strlen(p);
                se_strbuf_add(&norm, p, (size_t)(open - p) + 2);
                struct se_strv items = SE_STRV_INIT;
                char *body = strndup(open + 2, (size_t)(close - open - 2));
                for (char *save = NULL, *t = strtok_r(body, ",\n", &save); t;
                     t = strtok_r(NULL, ",\n", &save)) {
                        while (*t == ' ' || *t == '\t')
                                t++;
                        size_t n = strlen(t);
                        while (n && (t[n - 1] == ' ' || t[n - 1] == '\t'))
                                t[--n] = 0;
                        if (n)
                                se_strv_push(&items, t);
                }
                free(body);
                se_strv_sort(&items);
                for (size_t i = 0; i < items.n; i++)
                        se_strbuf_printf(&norm, "%s%s", i ? ", " : "", items.v[i]);
                se_strv_release(&items);
                se_strbuf_puts(&norm, " ");
                p = close;
        }
        se_strbuf_release(&out);
        char *s = se_strbuf_detach(&norm, NULL);
        return s ? s : strdup("");
}

/* netns X gets scripts over netlink, Y by nft -f */
struct pair {
        int x, y;
};

static int pair_open(struct pair *p)
{
        p->x = p->y = -1;
        if (unshare(CLONE_NEWNET) < 0)
                return 2;
        p->x = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        if (unshare(CLONE_NEWNET) < 0)
                return 2;
        p->y = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
        return p->x < 0 || p->y < 0 ? 2 : 0;
}

/* applies text both ways and compares; 0 or a failure code (what says
 * which step) */
static int both(const struct pair *p, const char *text, const char *what)
{
        char err[512];
        if (setns(p->y, CLONE_NEWNET) < 0)
                return 4;
        int ry = se_proxy_nft_apply(SE_PROXY_NFT_TOOL, text, strlen(text), NULL, 0, err,
                                    sizeof(err));
        if (ry == -ENOENT)
                return 3; /* no nft here */
        if (ry < 0) {
                fprintf(stderr, "# %s: nft -f: %s\n", what, err);
                return 5;
        }
        char *want = listing();
        if (setns(p->x, CLONE_NEWNET) < 0) {
                free(want);
                return 4;
        }
        int rx = se_proxy_nft_apply_netlink(text, strlen(text), err, sizeof(err));
        if (rx < 0) {
                fprintf(stderr, "# %s: netlink: %s\n", what, err);
                free(want);
                return 6;
        }
        char *got = listing();
        int code = 0;
        if (!want || !got) {
                code = 7;
        } else if (strcmp(want, got) != 0) {
                fprintf(stderr, "# %s: listings differ\n# nft -f:\n%s\n# netlink:\n%s\n", what,
                        want, got);
                code = 8;
        }
        free(want);
        free(got);
        return code;
}

static void pair_close(struct pair *p)
{
        if (p->x >= 0)
                close(p->x);
        if (p->y >= 0)
                close(p->y);
}

static void run_child(int (*child)(void *), void *arg)
{
        if (geteuid() != 0)
                skip();
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                exit(child(arg));
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        int code = WEXITSTATUS(status);
        if (code == 2 || code == 3)
                skip();
        assert_int_equal(code, 0);
}

static int files_child(void *arg)
{
        const char *const *files = arg;
        struct pair p;
        int code = pair_open(&p);
        for (size_t i = 0; files[i] && !code; i++) {
                char *text = read_file(files[i]);
                code = both(&p, text, files[i]);
                free(text);
                /* the same again on top: adds to what exists */
                if (!code && strstr(files[i], "constructs")) {
                        text = read_file(files[i]);
                        code = both(&p, text, files[i]);
                        free(text);
                }
        }
        pair_close(&p);
        return code;
}

/* every construct the writers use, IPv4 and IPv6, then the golden tables */
static void test_nlapply__constructs_equal_nft(void **state)
{
        (void)state;
        static const char *files[] = {
                "test/unit/proxy/nft/constructs.nft",  "test/unit/proxy/nft/constructs6.nft",
                "test/golden/proxy/demo-node-a.nft",   "test/golden/proxy/overall.nft",
                "test/golden/proxy/ksched.nft",        "test/golden/proxy/ksched6.nft",
                "test/unit/proxy/nft/one-element.nft", NULL
        };
        run_child(files_child, files);
}

/* ---- random clusters ---- */

static uint64_t rng;

static unsigned rnd(unsigned n)
{
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        return (unsigned)((rng >> 33) % n);
}

/* a random cluster of services with every feature the writer handles */
static char *random_cluster(unsigned n_svc)
{
        static const char *const protos[] = { "TCP", "UDP", "SCTP" };
        /* kube-proxy's random, then the in-kernel schedulers (svcenv.io/scheduler) */
        static const char *const scheds[] = { "",
                                              "",
                                              "",
                                              ", annotations: {svcenv.io/scheduler: rr}",
                                              ", annotations: {svcenv.io/scheduler: sh}",
                                              ", annotations: {svcenv.io/scheduler: 'sh,port'}",
                                              ", annotations: {svcenv.io/scheduler: dh}",
                                              ", annotations: {svcenv.io/scheduler: mh}",
                                              "",
                                              "",
                                              "",
                                              "",
                                              "",
                                              "",
                                              "",
                                              "" };
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        for (unsigned i = 0; i < n_svc; i++) {
                const char *proto = protos[rnd(3)];
                unsigned kind = rnd(4); /* ClusterIP, NodePort, LoadBalancer, with externalIPs */
                se_strbuf_printf(&sb,
                                 "---\napiVersion: v1\nkind: Service\n"
                                 "metadata: {name: s%u, namespace: ns%u%s}\nspec:\n"
                                 "  type: %s\n  clusterIP: 172.30.%u.%u\n",
                                 i, i % 3, scheds[rnd(SE_ARRAY_SIZE(scheds))],
                                 kind == 1 ? "NodePort" :
                                 kind == 2 ? "LoadBalancer" :
                                             "ClusterIP",
                                 i / 200, i % 200 + 1);
                if (kind == 3)
                        se_strbuf_printf(&sb, "  externalIPs: [192.168.99.%u]\n", i % 250 + 1);
                if (kind >= 1 && kind <= 2 && rnd(2))
                        se_strbuf_puts(&sb, "  externalTrafficPolicy: Local\n");
                if (rnd(4) == 0)
                        se_strbuf_puts(&sb, "  internalTrafficPolicy: Local\n");
                if (rnd(3) == 0)
                        se_strbuf_printf(
                                &sb,
                                "  sessionAffinity: ClientIP\n"
                                "  sessionAffinityConfig: {clientIP: {timeoutSeconds: %u}}\n",
                                60 + rnd(10000));
                if (kind == 2 && rnd(2))
                        se_strbuf_puts(&sb, "  loadBalancerSourceRanges: [203.0.113.0/24, "
                                            "198.51.100.0/25, 10.0.0.0/8]\n");
                if (kind == 1 || kind == 2)
                        se_strbuf_printf(&sb,
                                         "  ports: [{name: p, port: 80, protocol: %s, "
                                         "nodePort: %u}]\n",
                                         proto, 30000 + i);
                else
                        se_strbuf_printf(&sb, "  ports: [{name: p, port: %u, protocol: %s}]\n",
                                         80 + rnd(3), proto);
                if (kind == 2)
                        se_strbuf_printf(&sb,
                                         "status: {loadBalancer: {ingress: [{ip: 5.6.%u.%u}]}}\n",
                                         i / 200, i % 200 + 1);
                unsigned eps = rnd(5);
                if (!eps)
                        continue;
                se_strbuf_printf(&sb,
                                 "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                                 "metadata: {name: s%u-1, namespace: ns%u, labels: "
                                 "{kubernetes.io/service-name: s%u}}\n"
                                 "addressType: IPv4\nports: [{name: p, port: %u, protocol: %s}]\n"
                                 "endpoints:\n",
                                 i, i % 3, i, 8000 + rnd(3), proto);
                for (unsigned e = 0; e < eps; e++)
                        se_strbuf_printf(&sb, "- {addresses: [10.%u.%u.%u], nodeName: %s%s}\n",
                                         1 + rnd(2), i % 250, e + 1, rnd(2) ? "n1" : "n2",
                                         rnd(6) == 0 ? ", conditions: {ready: false}" : "");
        }
        char *s = se_strbuf_detach(&sb, NULL);
        return s ? s : strdup("");
}

/* the nft script of yaml: full (tr NULL) or the tracker's sync */
static char *script(const char *yaml, struct se_proxy_tracker *tr)
{
        struct se_proxy_options o;
        se_proxy_options_init(&o);
        se_proxy_options_nft_defaults(&o);
        o.node_name = "n1";
        se_parse_ip("192.168.0.2", &o.node_ips[0]);
        o.n_node_ips = 1;
        se_parse_cidr("10.0.0.0/8", &o.cluster_cidrs[0]);
        o.n_cluster_cidrs = 1;
        o.random_fully = rnd(2);
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s || se_manifest_load_buffer(s, "test", yaml, strlen(yaml), NULL, NULL, &d) < 0) {
                fprintf(stderr, "# manifest: %s\n", s ? d.text : "no store");
                se_store_free(s);
                return NULL;
        }
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        int r = se_proxy_table_build(s, &o, SE_IPV4, &t);
        if (r == 0)
                r = tr ? se_proxy_nft_sync(t, &o, tr, &sb) : se_proxy_nft_write(t, &o, &sb);
        se_proxy_table_free(t);
        se_store_free(s);
        char *out = r == 0 ? strdup(sb.buf ? sb.buf : "") : NULL;
        if (tr)
                se_proxy_tracker_done(tr, r == 0, &sb);
        se_strbuf_release(&sb);
        return out;
}

static int random_child(void *arg)
{
        unsigned seed = *(const unsigned *)arg;
        struct pair p;
        int code = pair_open(&p);
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        se_proxy_tracker_set_minimal(tr, seed % 2);
        char what[64];
        /* a full sync, then partial ones: services come, change and go */
        for (unsigned step = 0; step < 6 && !code; step++) {
                rng = seed * 7919ull + (step < 3 ? 0 : step); /* steps 1, 2: same cluster */
                char *yaml = random_cluster(step == 5 ? 3 : 40 + (step >= 3 ? step * 5 : 0));
                unsigned save = (unsigned)rng;
                char *text = script(yaml, tr);
                rng = save;
                snprintf(what, sizeof(what), "seed %u step %u", seed, step);
                if (!text)
                        code = 9;
                else if (text[0])
                        code = both(&p, text, what);
                free(text);
                free(yaml);
        }
        se_proxy_tracker_free(tr);
        pair_close(&p);
        return code;
}

static void test_nlapply__random_clusters_equal_nft(void **state)
{
        (void)state;
        for (unsigned seed = 1; seed <= 4; seed++)
                run_child(random_child, &seed);
}

/* what the kernel refuses comes back as -EPROTO with the script's line,
 * and nothing of the batch is applied */
/* The daemon's side of a fallback (text applied through the system
 * runner): one warning line saying why, and the proxier's metric counting
 * it. 0 or a code. */
static int fallback_told(const char *text, size_t n)
{
        int fds[2];
        char err[256], logged[4096] = "", line[160];
        if (pipe(fds) < 0)
                return 30;
        fcntl(fds[0], F_SETFL, O_NONBLOCK);
        unsigned long before = se_proxy_nft_netlink_fallbacks();
        se_log_set_fd(fds[1]);
        int r = se_proxy_runner_system()->apply(NULL, SE_PROXY_NFT, text, n, err, sizeof(err));
        se_log_set_fd(2);
        ssize_t got = read(fds[0], logged, sizeof(logged) - 1);
        logged[got > 0 ? got : 0] = 0;
        close(fds[0]);
        close(fds[1]);
        int code = 0;
        /* one klog warning naming the line netlink could not do */
        if (r != 0 || se_proxy_nft_netlink_fallbacks() != before + 1 || logged[0] != 'W' ||
            !strstr(logged, "over netlink failed (line 3: ") || !strstr(logged, "nft -f") ||
            strchr(logged, '\n') != logged + strlen(logged) - 1) {
                fprintf(stderr, "# r %d, logged: %s\n", r, logged);
                code = 31;
        }
        struct se_proxy_proxier_config cfg = { .nft = true, .sync_period_ns = 1000000000LL };
        struct se_proxy_proxier *px = se_proxy_proxier_new(&cfg, se_proxy_runner_system());
        struct se_strbuf m;
        se_strbuf_init(&m, 0);
        if (px)
                se_proxy_proxier_metrics(px, &m);
        snprintf(line, sizeof(line), "\nsvcenv_proxy_nft_netlink_fallbacks_total %lu\n",
                 before + 1);
        if (!code && (!m.buf || !strstr(m.buf, line) ||
                      !strstr(m.buf, "# TYPE svcenv_proxy_nft_netlink_fallbacks_total counter\n")))
                code = 32;
        se_strbuf_release(&m);
        se_proxy_proxier_free(px);
        return code;
}

static int refused_child(void *arg)
{
        (void)arg;
        struct pair p;
        int code = pair_open(&p);
        char err[256];
        if (code || setns(p.x, CLONE_NEWNET) < 0)
                return code ? code : 4;
        static const char bad[] = "add table ip t\nadd chain ip t c\n"
                                  "add rule ip t c jump missing\n";
        if (se_proxy_nft_apply_netlink(bad, sizeof(bad) - 1, err, sizeof(err)) != -EPROTO ||
            strncmp(err, "line 3: ", 8) != 0) {
                fprintf(stderr, "# refused: %s\n", err);
                code = 10;
        }
        char *after = listing();
        if (!after || strstr(after, "table ip t"))
                code = 11; /* atomic: the table did not stay */
        free(after);
        /* and the fallback runs nft -f, which refuses as well */
        char why[256];
        unsigned long before = se_proxy_nft_netlink_fallbacks();
        if (!code && (se_proxy_nft_apply(SE_PROXY_NFT_NETLINK, bad, sizeof(bad) - 1, why,
                                         sizeof(why), err, sizeof(err)) != -EPROTO ||
                      se_proxy_nft_netlink_fallbacks() != before + 1 || !why[0]))
                code = 12;
        static const char odd[] = "add table ip t\nadd chain ip t c\nadd rule ip t c meta "
                                  "iifname \"lo\" counter\n";
        if (!code && (se_proxy_nft_apply(SE_PROXY_NFT_NETLINK, odd, sizeof(odd) - 1, why,
                                         sizeof(why), err, sizeof(err)) != 0 ||
                      strncmp(why, "line 3: ", 8) != 0))
                code = 13; /* unknown to us, fine for nft: applied by nft -f */
        /* se_proxy_apply goes the same way by default, nft -f alone when told */
        before = se_proxy_nft_netlink_fallbacks();
        char last[256];
        if (!code && (se_proxy_apply(SE_PROXY_NFT, odd, sizeof(odd) - 1, err, sizeof(err)) != 0 ||
                      se_proxy_nft_netlink_fallbacks() != before + 1))
                code = 14;
        se_proxy_nft_last_fallback(last, sizeof(last));
        if (!code && strncmp(last, "line 3: ", 8) != 0)
                code = 15;
        se_proxy_nft_set_how(SE_PROXY_NFT_TOOL);
        if (!code && (se_proxy_apply(SE_PROXY_NFT, odd, sizeof(odd) - 1, err, sizeof(err)) != 0 ||
                      se_proxy_nft_netlink_fallbacks() != before + 1))
                code = 16;
        se_proxy_nft_set_how(SE_PROXY_NFT_NETLINK);
        if (!code)
                code = fallback_told(odd, sizeof(odd) - 1);
        pair_close(&p);
        return code;
}

static void test_nlapply__kernel_refusal_names_the_line(void **state)
{
        (void)state;
        run_child(refused_child, NULL);
}

/* ---- sets new to the kernel: their elements by the batch's id ---- */

/* a table of n maps of one element each, and a chain using each */
static char *many_maps(unsigned n)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, "table ip t {\n");
        for (unsigned i = 0; i < n; i++)
                se_strbuf_printf(&sb,
                                 "\tmap m%03u {\n\t\ttype ipv4_addr : ipv4_addr\n"
                                 "\t\telements = { 10.0.%u.1 : 10.1.%u.1 }\n\t}\n",
                                 i, i % 256, i % 256);
        for (unsigned i = 0; i < n; i++)
                se_strbuf_printf(&sb, "\tchain c%03u {\n\t\tdnat to ip daddr map @m%03u\n\t}\n", i,
                                 i);
        se_strbuf_puts(&sb, "}\n");
        char *s = se_strbuf_detach(&sb, NULL);
        return s ? s : strdup("");
}

struct kernel_says {
        int fail; /* 0, or what every question gets */
        unsigned asked;
};

/* the fake kernel has map m070 alone */
static int fake_exists(void *ctx, uint8_t family, const char *table, const char *set)
{
        struct kernel_says *k = ctx;
        k->asked++;
        if (k->fail)
                return k->fail;
        return family == NFPROTO_IPV4 && strcmp(table, "t") == 0 && strcmp(set, "m070") == 0;
}

/* For each NEWSETELEM message of b in order: whether it names its set
 * ('n') or gives the id alone ('i'). */
static void elem_refs(const struct nlb *b, char *out, size_t size)
{
        size_t k = 0;
        for (size_t off = 0; off + NLMSG_HDRLEN <= b->len;) {
                const struct nlmsghdr *nh = (const void *)(b->buf + off);
                if ((nh->nlmsg_type & 0xff) == NFT_MSG_NEWSETELEM && k + 1 < size) {
                        bool named = false, id = false;
                        size_t a = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
                        while (a + NLA_HDRLEN <= nh->nlmsg_len) {
                                const struct nlattr *at = (const void *)((const char *)nh + a);
                                named |= (at->nla_type & NLA_TYPE_MASK) == NFTA_SET_ELEM_LIST_SET;
                                id |= (at->nla_type & NLA_TYPE_MASK) == NFTA_SET_ELEM_LIST_SET_ID;
                                a += NLA_ALIGN(at->nla_len);
                        }
                        out[k++] = named ? 'n' : id ? 'i' : '?';
                }
                off += NLMSG_ALIGN(nh->nlmsg_len);
        }
        out[k] = 0;
}

/* A script declaring many sets asks the kernel which are new (from the
 * 64th on: the answer costs a read of the table's sets); the elements of
 * new ones give the batch's set id alone, so the kernel finds the set
 * among the batch's new sets instead of walking the table's by name.
 * Sets the kernel has, and one declared twice, keep their name. */
static void test_nlapply__new_sets_elements_by_id(void **state)
{
        (void)state;
        char *text = many_maps(100);
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, text);
        se_strbuf_puts(&sb, "table ip t {\n\tmap m099 {\n\t\ttype ipv4_addr : ipv4_addr\n"
                            "\t\telements = { 10.0.99.2 : 10.1.99.2 }\n\t}\n}\n");
        char want[128], got[128], err[256];
        for (unsigned i = 0; i < 101; i++)
                want[i] = i < 63 || i == 70 || i == 100 ? 'n' : 'i';
        want[101] = 0;
        struct kernel_says says = { 0 };
        struct nfp_kernel k = { .exists = fake_exists, .ctx = &says };
        struct nlb b;
        proxy_nlb_init(&b);
        assert_int_equal(proxy_nft_translate_for(sb.buf, sb.len, &b, &k, err, sizeof(err)), 0);
        elem_refs(&b, got, sizeof(got));
        assert_string_equal(got, want);
        assert_int_equal(says.asked, 37); /* m063 .. m099, once each */
        proxy_nlb_release(&b);
        /* a kernel that cannot tell: asked once, names throughout */
        says = (struct kernel_says){ .fail = -EIO };
        proxy_nlb_init(&b);
        assert_int_equal(proxy_nft_translate_for(sb.buf, sb.len, &b, &k, err, sizeof(err)), 0);
        elem_refs(&b, got, sizeof(got));
        memset(want, 'n', 101);
        assert_string_equal(got, want);
        assert_int_equal(says.asked, 1);
        proxy_nlb_release(&b);
        se_strbuf_release(&sb);
        free(text);
        /* answers at hand: asked from the first set */
        text = many_maps(3);
        says = (struct kernel_says){ 0 };
        k.exists_cheap = true;
        proxy_nlb_init(&b);
        assert_int_equal(proxy_nft_translate_for(text, strlen(text), &b, &k, err, sizeof(err)), 0);
        elem_refs(&b, got, sizeof(got));
        assert_string_equal(got, "iii");
        assert_int_equal(says.asked, 3);
        proxy_nlb_release(&b);
        free(text);
}

static int many_maps_child(void *arg)
{
        (void)arg;
        struct pair p;
        int code = pair_open(&p);
        char *text = many_maps(200);
        /* new maps (elements by id), then the same on top (by name) */
        if (!code)
                code = both(&p, text, "200 new maps");
        if (!code)
                code = both(&p, text, "200 maps again");
        free(text);
        /* one map more: the names read above are kept, it goes by id */
        static const char one[] = "table ip t {\n\tmap m900 {\n\t\ttype ipv4_addr : "
                                  "ipv4_addr\n\t\telements = { 10.9.0.1 : 10.9.0.2 }\n\t}\n}\n";
        if (!code)
                code = both(&p, one, "one map more");
        /* another adds m901 behind our back: our names are stale, the
         * batch bound to their generation is refused and sent again */
        static const char other[] = "add map ip t m901 { type ipv4_addr : ipv4_addr; }\n";
        static const char more[] = "table ip t {\n\tmap m901 {\n\t\ttype ipv4_addr : "
                                   "ipv4_addr\n\t\telements = { 10.9.1.1 : 10.9.1.2 }\n\t}\n}\n";
        char err[256];
        for (int i = 0; i < 2 && !code; i++)
                if (setns(i ? p.y : p.x, CLONE_NEWNET) < 0 ||
                    se_proxy_nft_apply(SE_PROXY_NFT_TOOL, other, sizeof(other) - 1, NULL, 0, err,
                                       sizeof(err)) < 0)
                        code = 20;
        unsigned long fallbacks = se_proxy_nft_netlink_fallbacks();
        if (!code)
                code = both(&p, more, "a map made behind our back");
        if (!code && se_proxy_nft_netlink_fallbacks() != fallbacks)
                code = 21;
        pair_close(&p);
        return code;
}

/* the kernel's answer, applied: the same listing as nft -f, new or not,
 * and when the kernel changed behind the applier's back */
static void test_nlapply__many_maps_equal_nft(void **state)
{
        (void)state;
        run_child(many_maps_child, NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_nlapply__unknown_constructs_name_the_line),
                cmocka_unit_test(test_nlapply__constructs_equal_nft),
                cmocka_unit_test(test_nlapply__random_clusters_equal_nft),
                cmocka_unit_test(test_nlapply__kernel_refusal_names_the_line),
                cmocka_unit_test(test_nlapply__new_sets_elements_by_id),
                cmocka_unit_test(test_nlapply__many_maps_equal_nft),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
