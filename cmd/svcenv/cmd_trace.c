/* svcenv trace: the rules a packet meets on one node and the endpoints it
 * can reach. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/proxy.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/proxy_trace.h>
#include <svcenv/strbuf.h>

#include "cli.h"

static const char usage[] =
        "Usage: svcenv trace -f CLUSTER --node NAME --from IP[:PORT] --to IP:PORT[/PROTO]\n"
        "         [--mode iptables|nftables] [-o text|json] [--cluster-cidr CIDR[,CIDR]]\n"
        "         [--node-ip IP ...] [--masquerade-all] [--nodeport-addresses CIDRS|primary]\n"
        "         [--localhost-nodeports true|false] [--proxy-name NAME] [--affinity-state]\n"
        "       svcenv trace --kubeconfig FILE [--context C] --node NAME ...  (a live cluster)\n"
        "\n"
        "Walks the rules the proxy would program on node NAME (as `svcenv rules`, same\n"
        "options) for one packet from IP to IP:PORT (PROTO tcp, udp or sctp; default\n"
        "tcp; IPv6 as [IP]:PORT) and prints the chains it meets, named as the mode's\n"
        "rules name them, the verdict (DNAT, REJECT, DROP, PASS when no rule of ours\n"
        "takes it, or REDIRECT to svcenv's userspace proxy for a Service routed there by\n"
        "its annotation), whether it is masqueraded and why, and every endpoint it can reach\n"
        "with the probability of a new connection. ClientIP affinity is reported with\n"
        "its timeout; with --affinity-state, run on the node itself, the kernel's\n"
        "affinity entries say which endpoint already holds this client (iptables:\n"
        "/proc/net/xt_recent, whose entries' age is not checked; nftables: the\n"
        "endpoint's affinity set of table svcenv, read with `nft list set`).\n"
        "A --from that is one of the node's IPs or loopback is traffic of the node\n"
        "itself. The table is the family of --to; --from must be of the same family.\n"
        "With nftables and svcenv.io/scheduler rr the endpoints are taken in turn; sh,\n"
        "dh and mh name the one endpoint the kernel's jhash sends the packet to (sh and\n"
        "mh with the port flag need the source port: --from IP:PORT).\n";

struct trace_args {
        const char *node, *from, *to, *mode, *output;
        bool affinity_state;
};

static int parse(int argc, char **argv, struct cli_source *src, struct se_proxy_flags *f,
                 struct trace_args *a, bool *help)
{
        static const struct option opts[] = { CLI_SOURCE_LONG_OPTIONS,
                                              { "node", required_argument, NULL, 'N' },
                                              { "from", required_argument, NULL, 'F' },
                                              { "to", required_argument, NULL, 'T' },
                                              { "mode", required_argument, NULL, 'b' },
                                              { "output", required_argument, NULL, 'o' },
                                              SE_PROXY_LONG_OPTIONS,
                                              { "affinity-state", no_argument, NULL, 'S' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0 } };
        int c, r;
        optind = 1;
        while ((c = getopt_long(argc, argv, "f:o:h", opts, NULL)) != -1) {
                switch (c) {
                case 'h':
                        *help = true;
                        return EXIT_OK;
                case '?':
                        return EXIT_USAGE;
                case 'N':
                        a->node = optarg;
                        continue;
                case 'F':
                        a->from = optarg;
                        continue;
                case 'T':
                        a->to = optarg;
                        continue;
                case 'o':
                        a->output = optarg;
                        continue;
                case 'b': /* --mode: --backend under this command's own name */
                        if (strcmp(optarg, "iptables") != 0 && strcmp(optarg, "nftables") != 0)
                                return cli_usage_error(
                                        "trace", "--mode wants iptables or nftables, not \"%s\"",
                                        optarg);
                        c = SE_PROXY_FLAG_BACKEND;
                        break;
                case 'S':
                        a->affinity_state = true;
                        continue;
                default:
                        break;
                }
                if ((r = cli_source_option(src, c, optarg)) != 0) {
                        if (r < 0)
                                return cli_fail(EXIT_SYSTEM, "out of memory");
                        continue;
                }
                struct se_diag d = { 0 };
                r = se_proxy_flag(f, c, optarg, &d);
                if (r == -ENOMEM)
                        return cli_fail(EXIT_SYSTEM, "out of memory");
                if (r < 0)
                        return cli_usage_error("trace", "%s", d.text);
                if (r > 0)
                        return cli_usage_error("trace", "unknown option");
        }
        a->mode = f->nft ? "nftables" : "iptables";
        if (optind < argc)
                return cli_usage_error("trace", "unexpected argument \"%s\"", argv[optind]);
        if (!a->node)
                return cli_usage_error("trace", "--node NAME is required");
        if (!a->from || !a->to)
                return cli_usage_error("trace",
                                       "--from IP[:PORT] and --to IP:PORT[/PROTO] are required");
        if (strcmp(a->output, "text") != 0 && strcmp(a->output, "json") != 0)
                return cli_usage_error("trace", "-o wants text or json, not \"%s\"", a->output);
        return EXIT_OK;
}

static int query(const struct trace_args *a, struct se_proxy_trace_query *q)
{
        struct se_diag d = { 0 };
        if (se_proxy_trace_parse_target(a->to, q, &d) < 0)
                return cli_usage_error("trace", "--to: %s", d.text);
        if (se_proxy_trace_parse_source(a->from, q, &d) < 0)
                return cli_usage_error("trace", "--from: %s", d.text);
        if (q->from.family != q->to.family)
                return cli_usage_error("trace", "--from %s and --to %s are of different families",
                                       a->from, a->to);
        return EXIT_OK;
}

static int run(const struct se_store *store, const struct se_proxy_options *o,
               const struct trace_args *a, struct se_proxy_trace_query *q)
{
        struct se_proxy_table *t = NULL;
        struct se_proxy_trace tr;
        struct se_strbuf sb;
        bool nft = strcmp(a->mode, "nftables") == 0;
        int r = se_proxy_table_build(store, o, q->to.family, &t);
        if (r < 0)
                return cli_fail(EXIT_SYSTEM, "cannot build the rules: %s", strerror(-r));
        se_proxy_trace_locality(q, o);
        r = se_proxy_trace_run(t, o, nft ? SE_PROXY_TRACE_NFTABLES : SE_PROXY_TRACE_IPTABLES, q,
                               &tr);
        se_proxy_table_free(t);
        if (r < 0)
                return cli_fail(EXIT_SYSTEM, "cannot trace: %s", strerror(-r));
        if (a->affinity_state && (r = se_proxy_trace_read_affinity(&tr, q)) < 0) {
                se_proxy_trace_release(&tr);
                return cli_fail(EXIT_SYSTEM, "cannot read the %s affinity state on this host: %s",
                                a->mode, strerror(-r));
        }
        se_strbuf_init(&sb, 0);
        r = strcmp(a->output, "json") == 0 ? se_proxy_trace_json(&tr, q, &sb) :
                                             se_proxy_trace_text(&tr, q, &sb);
        se_proxy_trace_release(&tr);
        if (r == 0)
                fwrite(sb.buf, 1, sb.len, stdout);
        se_strbuf_release(&sb);
        if (r < 0)
                return cli_fail(EXIT_SYSTEM, "cannot print the trace: %s", strerror(-r));
        return fflush(stdout) == 0 ? EXIT_OK : cli_fail(EXIT_SYSTEM, "cannot write output");
}

int cmd_trace(int argc, char **argv)
{
        struct cli_source src = { .files = SE_STRV_INIT };
        struct se_proxy_flags f;
        struct trace_args a = { .mode = "iptables", .output = "text" };
        struct se_proxy_trace_query q = { .protocol = SE_PROTO_TCP };
        struct se_store *store = NULL;
        bool help = false;
        se_proxy_flags_init(&f);
        int rc = parse(argc, argv, &src, &f, &a, &help);
        if (rc == EXIT_OK && help) {
                fputs(usage, stdout);
                goto out;
        }
        if (rc != EXIT_OK || (rc = query(&a, &q)) != EXIT_OK)
                goto out;
        if ((rc = cli_proxy_load(&src, &f, a.node, &store)) != EXIT_OK)
                goto out;
        rc = run(store, &f.opt, &a, &q);
out:
        se_store_free(store);
        cli_source_release(&src);
        return rc;
}
