/* svcenv rules: the ruleset the proxy would program on one node. */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/proxy.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/strbuf.h>
#include <svcenv/strv.h>
#include <svcenv/uproxy.h>

#include "cli.h"

static const char usage[] =
        "Usage: svcenv rules -f CLUSTER --node NAME [--backend iptables|nftables]\n"
        "         [--cluster-cidr CIDR[,CIDR]] [--node-ip IP ...] [--masquerade-bit N]\n"
        "         [--masquerade-all] [--nodeport-addresses CIDRS|primary]\n"
        "         [--localhost-nodeports true|false] [--random-fully auto|on|off]\n"
        "         [--nfacct auto|on|off] [--proxy-name NAME] [--ip-family ipv4|ipv6] [--apply]\n"
        "       svcenv rules -f CLUSTER --node NAME --mode userspace [--backend ...]\n"
        "\n"
        "Prints the rules kube-proxy v1.36 would program on node NAME for the cluster's\n"
        "Services and endpoints: iptables-restore input for the filter and nat tables\n"
        "(the ip6tables-restore input follows, after a line `# ip6tables-restore`), or\n"
        "with --backend nftables an nft script for each family. Like kube-proxy, which\n"
        "is dual-stack wherever the host has IPv6, both families are written even for a\n"
        "node with IPv4 addresses only (--ip-family picks one; --apply asks this host).\n"
        "Endpoints come from the EndpointSlices, or for a selector Service without\n"
        "slices, from its pods. Node IPs come from the Node object and --node-ip.\n"
        "--cluster-cidr enables local-traffic detection (pods are not masqueraded).\n"
        "--nodeport-addresses: NodePorts on the node IPs in CIDRS; `primary` means the\n"
        "first node IP of each family (the nftables default); a family without a CIDR,\n"
        "or with 0.0.0.0/0 or ::/0, takes them on every local address (the iptables\n"
        "default).\n"
        "--random-fully auto means on (iptables >= 1.6.2); --nfacct auto means off\n"
        "(the counters must exist before rules name them).\n"
        "--apply feeds the rules to iptables-restore --noflush / ip6tables-restore /\n"
        "nft -f - instead of printing them, deleting our per-service chains that\n"
        "iptables-save shows but the rules no longer use, then ensures the jumps from\n"
        "the built-in chains (iptables -C / -I), as kube-proxy's full sync does. With\n"
        "nftables, --apply updates table svcenv in place: what the rules no longer\n"
        "use is deleted, ClientIP affinity entries stay.\n"
        "Service ports routed to svcenv's userspace proxy (annotations\n"
        "svcenv.io/scheduler with a scheduler these rules cannot express, or\n"
        "svcenv.io/retry: \"true\") have no rules above; the redirect rules that\n"
        "svcenv-proxy adds for them (to port 10262) follow, after a line\n"
        "`# svcenv userspace proxy`. --apply leaves them to svcenv-proxy.\n"
        "--mode userspace prints what `svcenv-proxy --mode userspace` would use:\n"
        "each service port with its scheduler (svcenv.io/scheduler, else rr) and\n"
        "its endpoints, as comments, then the redirect rules to the proxy's port\n"
        "(iptables-restore input, or with --backend nftables an nft script).\n";

struct rules_args {
        const char *node, *ip_family;
        bool apply, userspace;
};

static int parse_option(int c, const char *arg, struct se_proxy_flags *f, struct rules_args *a)
{
        struct se_diag d = { 0 };
        switch (c) {
        case 'N':
                a->node = arg;
                return 0;
        case 'F':
                a->ip_family = arg;
                return 0;
        case 'X':
                a->apply = true;
                return 0;
        case 'M': /* as svcenv-proxy's: iptables and nftables are --backend's */
                if (strcmp(arg, "userspace") == 0) {
                        a->userspace = true;
                        return 0;
                }
                if (strcmp(arg, "iptables") != 0 && strcmp(arg, "nftables") != 0)
                        return cli_usage_error(
                                "rules", "--mode wants iptables, nftables or userspace, not \"%s\"",
                                arg);
                c = SE_PROXY_FLAG_BACKEND;
                break;
        default:
                break;
        }
        int r = se_proxy_flag(f, c, arg, &d);
        if (r < 0)
                return r == -ENOMEM ? cli_fail(EXIT_SYSTEM, "out of memory") :
                                      cli_usage_error("rules", "%s", d.text);
        return r == 0 ? 0 : cli_usage_error("rules", "unknown option");
}

/* As kube-proxy's full sync: chains of ours that exist (iptables-save) and
 * that this ruleset no longer writes are deleted in the same restore. */
static int iptables_with_cleanup(const struct se_proxy_table *t, const struct se_proxy_options *o,
                                 enum se_ip_family fam, struct se_strbuf *sb)
{
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        struct se_strbuf saved;
        struct se_strv chains = SE_STRV_INIT;
        char err[256];
        int r;
        if (!tr)
                return -ENOMEM;
        se_strbuf_init(&saved, 0);
        /* no nat table yet is fine: nothing to clean up */
        if (se_proxy_save_nat(fam, &saved, err, sizeof(err)) == 0 &&
            (r = se_proxy_parse_save_chains(saved.buf, saved.len, &chains)) == 0)
                r = se_proxy_tracker_seed(tr, &chains);
        else
                r = 0;
        if (r == 0)
                r = se_proxy_iptables_sync(t, o, tr, sb);
        se_strv_release(&chains);
        se_strbuf_release(&saved);
        se_proxy_tracker_free(tr);
        return r;
}

/* nft --apply: a full sync of the table as it is (its affinity sets keep
 * their entries; what this ruleset no longer writes is deleted). */
static int nft_in_place(const struct se_proxy_table *t, const struct se_proxy_options *o,
                        enum se_ip_family fam, struct se_strbuf *sb)
{
        struct se_proxy_tracker *tr = se_proxy_tracker_new();
        if (!tr)
                return -ENOMEM;
        int r = se_proxy_nft_seed_existing(tr, fam);
        if (r == 0)
                r = se_proxy_nft_sync(t, o, tr, sb);
        se_proxy_tracker_free(tr);
        return r;
}

/* The userspace proxy's redirect rules for the routed ports of one family
 * (nothing when none is routed), with the jumps svcenv-proxy adds to the
 * built-in chains as comments. */
static int routed_rules(const struct se_store *store, const struct se_proxy_options *o,
                        enum se_ip_family fam, bool nft)
{
        struct se_proxy_table *t = NULL;
        struct se_strbuf sb;
        int r = se_proxy_table_build(store, o, fam, &t);
        if (r < 0)
                return cli_fail(EXIT_SYSTEM, "cannot build the rules: %s", strerror(-r));
        if (!se_uproxy_any_routed(t, nft)) {
                se_proxy_table_free(t);
                return EXIT_OK;
        }
        struct se_uproxy_rules_opts ro = { .port = SE_UPROXY_DEFAULT_PORT,
                                           .mark = SE_UPROXY_DEFAULT_MARK,
                                           .want = se_uproxy_routed,
                                           .data = &nft,
                                           .node = o };
        se_strbuf_init(&sb, 0);
        se_strbuf_puts(&sb, nft ? "# svcenv userspace proxy (nft -f)\n" :
                                  "# svcenv userspace proxy (iptables-restore --noflush)\n");
        if (!nft) {
                const char *const *jumps[6];
                unsigned n = se_uproxy_jumps(jumps);
                if (se_uproxy_any_firewall(t, &ro)) /* its chain is written then */
                        n += se_uproxy_firewall_jumps(jumps + n);
                for (unsigned k = 0; k < n; k++) {
                        se_strbuf_printf(&sb, "# %s -t %s -I",
                                         fam == SE_IPV6 ? "ip6tables" : "iptables", jumps[k][0]);
                        for (size_t j = 1; jumps[k][j]; j++)
                                se_strbuf_printf(&sb, strchr(jumps[k][j], ' ') ? " \"%s\"" : " %s",
                                                 jumps[k][j]);
                        se_strbuf_puts(&sb, "\n");
                }
        }
        r = nft ? se_uproxy_rules_nft(t, &ro, &sb) : se_uproxy_rules_iptables(t, &ro, &sb);
        se_proxy_table_free(t);
        if (r == 0)
                fwrite(sb.buf, 1, sb.len, stdout);
        se_strbuf_release(&sb);
        return r < 0 ? cli_fail(EXIT_SYSTEM, "cannot write the rules: %s", strerror(-r)) : EXIT_OK;
}

/* The service ports the userspace proxy serves, one comment line each:
 * what it balances with, over which endpoints. */
static void userspace_summary(const struct se_uproxy_snapshot *snap, bool nft, bool fw,
                              struct se_strbuf *sb)
{
        se_strbuf_printf(sb, "# svcenv-proxy --mode userspace: %u service port(s) to port %u\n",
                         snap->n_svcs, SE_UPROXY_DEFAULT_PORT);
        for (uint32_t i = 0; i < snap->n_svcs; i++) {
                const struct se_uproxy_svc *sv = &snap->svcs[i];
                size_t n = strlen(sv->key);
                bool v6 = n > 3 && strcmp(sv->key + n - 3, "/v6") == 0;
                se_strbuf_printf(sb, "# %s %s%s scheduler=%s%s endpoints:", sv->spn,
                                 sv->proto == IPPROTO_UDP ? "UDP" : "TCP", v6 ? " IPv6" : "",
                                 sv->scheduler, sv->affinity ? " affinity=ClientIP" : "");
                for (uint32_t k = 0; k < sv->n_eps; k++)
                        se_strbuf_printf(sb, " %s%s", sv->eps[k].str,
                                         sv->eps[k].ready       ? "" :
                                         sv->eps[k].terminating ? "(terminating)" :
                                                                  "(not ready)");
                se_strbuf_puts(sb, sv->n_eps ? "\n" : " none\n");
        }
        if (nft)
                return; /* the nft tables hook themselves in */
        const char *const *jumps[6];
        unsigned nj = se_uproxy_jumps(jumps);
        if (fw) /* loadBalancerSourceRanges: the filter chain is written */
                nj += se_uproxy_firewall_jumps(jumps + nj);
        for (unsigned i = 0; i < nj; i++) {
                se_strbuf_printf(sb, "# jump: iptables -t %s -I", jumps[i][0]);
                for (size_t j = 1; jumps[i][j]; j++) /* quoted as a shell would want */
                        se_strbuf_printf(sb, strchr(jumps[i][j], ' ') ? " \"%s\"" : " %s",
                                         jumps[i][j]);
                se_strbuf_puts(sb, "\n");
        }
}

/* --mode userspace: the summary, then the redirect rules of each family. */
static int emit_userspace(const struct se_store *store, const struct se_proxy_options *o, bool nft,
                          const enum se_ip_family *fams, unsigned nf)
{
        struct se_proxy_table *t[2] = { NULL, NULL };
        struct se_uproxy_snapshot *snap = NULL;
        struct se_strbuf sb;
        struct se_uproxy_rules_opts ro = { .port = SE_UPROXY_DEFAULT_PORT,
                                           .mark = SE_UPROXY_DEFAULT_MARK,
                                           .node = o };
        int r = 0;
        se_strbuf_init(&sb, 0);
        for (unsigned i = 0; r == 0 && i < nf; i++)
                r = se_proxy_table_build(store, o, fams[i], &t[i]);
        if (r == 0)
                r = se_uproxy_snapshot_build((const struct se_proxy_table *const *)t, nf, store,
                                             NULL, &snap);
        bool fw = false;
        for (unsigned i = 0; r == 0 && i < nf; i++)
                fw |= se_uproxy_any_firewall(t[i], &ro);
        if (r == 0)
                userspace_summary(snap, nft, fw, &sb);
        for (unsigned i = 0; r == 0 && i < nf; i++) {
                if (i > 0 && !nft)
                        se_strbuf_puts(&sb, "# ip6tables-restore\n");
                r = nft ? se_uproxy_rules_nft(t[i], &ro, &sb) :
                          se_uproxy_rules_iptables(t[i], &ro, &sb);
        }
        se_uproxy_snapshot_free(snap);
        for (unsigned i = 0; i < 2; i++)
                se_proxy_table_free(t[i]);
        if (r == 0 && se_strbuf_failed(&sb))
                r = -ENOMEM;
        if (r == 0)
                fwrite(sb.buf, 1, sb.len, stdout);
        se_strbuf_release(&sb);
        if (r < 0)
                return cli_fail(EXIT_SYSTEM, "cannot write the rules: %s", strerror(-r));
        return fflush(stdout) == 0 ? EXIT_OK : cli_fail(EXIT_SYSTEM, "cannot write output");
}

static int emit(const struct se_store *store, const struct se_proxy_options *o, bool nft,
                const struct rules_args *a)
{
        enum se_ip_family fams[2];
        /* kube-proxy is dual-stack wherever the host has IPv6: printed rules
         * assume it has, applied ones ask this host */
        unsigned nf = se_proxy_families_on(o, a->apply ? se_proxy_host_ipv6(nft) : true, fams);
        if (a->ip_family) {
                fams[0] = strcmp(a->ip_family, "ipv6") == 0 ? SE_IPV6 : SE_IPV4;
                nf = 1;
        }
        if (a->userspace)
                return emit_userspace(store, o, nft, fams, nf);
        for (unsigned i = 0; i < nf; i++) {
                struct se_proxy_table *t = NULL;
                struct se_strbuf sb;
                int r = se_proxy_table_build(store, o, fams[i], &t);
                if (r < 0)
                        return cli_fail(EXIT_SYSTEM, "cannot build the rules: %s", strerror(-r));
                se_strbuf_init(&sb, 0);
                if (nft && a->apply)
                        r = nft_in_place(t, o, fams[i], &sb);
                else if (nft)
                        r = se_proxy_nft_write(t, o, &sb);
                else if (a->apply)
                        r = iptables_with_cleanup(t, o, fams[i], &sb);
                else
                        r = se_proxy_iptables_write(t, o, &sb);
                se_proxy_table_free(t);
                if (r < 0) {
                        se_strbuf_release(&sb);
                        return cli_fail(EXIT_SYSTEM, "cannot write the rules: %s", strerror(-r));
                }
                if (a->apply) {
                        char err[1024];
                        enum se_proxy_tool tool = nft                ? SE_PROXY_NFT :
                                                  fams[i] == SE_IPV6 ? SE_PROXY_IP6TABLES_RESTORE :
                                                                       SE_PROXY_IPTABLES_RESTORE;
                        r = se_proxy_apply(tool, sb.buf, sb.len, err, sizeof(err));
                        se_strbuf_release(&sb);
                        if (r == 0 && !nft)
                                r = se_proxy_ensure_jumps(fams[i], err, sizeof(err));
                        if (r < 0)
                                return cli_fail(EXIT_SYSTEM, "%s", err[0] ? err : strerror(-r));
                        continue;
                }
                if (i > 0 && !nft)
                        fputs("# ip6tables-restore\n", stdout);
                fwrite(sb.buf, 1, sb.len, stdout);
                se_strbuf_release(&sb);
                if ((r = routed_rules(store, o, fams[i], nft)) != EXIT_OK)
                        return r;
        }
        return fflush(stdout) == 0 ? EXIT_OK : cli_fail(EXIT_SYSTEM, "cannot write output");
}

int cmd_rules(int argc, char **argv)
{
        static const struct option opts[] = {
                CLI_SOURCE_LONG_OPTIONS,
                { "node", required_argument, NULL, 'N' },
                SE_PROXY_LONG_OPTIONS,
                { "ip-family", required_argument, NULL, 'F' },
                { "apply", no_argument, NULL, 'X' },
                { "mode", required_argument, NULL, 'M' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        struct cli_source src = { .files = SE_STRV_INIT };
        struct se_proxy_flags f;
        struct rules_args a = { NULL, NULL, false, false };
        struct se_store *store = NULL;
        int c, r, rc = EXIT_OK;
        se_proxy_flags_init(&f);
        optind = 1;
        while ((c = getopt_long(argc, argv, "f:h", opts, NULL)) != -1) {
                if (c == 'h') {
                        fputs(usage, stdout);
                        goto out;
                }
                if (c == '?') {
                        rc = EXIT_USAGE;
                        goto out;
                }
                if ((r = cli_source_option(&src, c, optarg)) != 0) {
                        if (r < 0) {
                                rc = cli_fail(EXIT_SYSTEM, "out of memory");
                                goto out;
                        }
                        continue;
                }
                if ((rc = parse_option(c, optarg, &f, &a)) != EXIT_OK)
                        goto out;
        }
        if (optind < argc) {
                rc = cli_usage_error("rules", "unexpected argument \"%s\"", argv[optind]);
                goto out;
        }
        if (!a.node) {
                rc = cli_usage_error("rules", "--node NAME is required");
                goto out;
        }
        if (a.ip_family && strcmp(a.ip_family, "ipv4") != 0 && strcmp(a.ip_family, "ipv6") != 0) {
                rc = cli_usage_error("rules", "--ip-family wants ipv4 or ipv6");
                goto out;
        }
        if (a.userspace && a.apply) {
                rc = cli_usage_error("rules", "--apply is for the iptables and nftables modes "
                                              "(svcenv-proxy --mode userspace applies its own)");
                goto out;
        }
        if ((rc = cli_proxy_load(&src, &f, a.node, &store)) != EXIT_OK)
                goto out;
        rc = emit(store, &f.opt, f.nft, &a);
out:
        se_store_free(store);
        cli_source_release(&src);
        return rc;
}
