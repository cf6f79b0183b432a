/* svcenv dns: the answer svcenv-dns would give, printed as dig prints it;
 * --explain names the object behind each record; --zone prints the zone. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <svcenv/dns.h>
#include <svcenv/dns_serve.h>
#include <svcenv/endpoints.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>

#include "cli.h"

static const char usage[] =
        "Usage: svcenv dns -f CLUSTER [options] NAME [TYPE]\n"
        "       svcenv dns -f CLUSTER --zone [options]\n"
        "       svcenv dns --kubeconfig FILE [--context C] [options] NAME [TYPE]\n"
        "\n"
        "Prints the answer svcenv-dns gives to a query for NAME (TYPE: A by default;\n"
        "AAAA, SRV, PTR, TXT, SOA, NS, CNAME, ANY, TYPEnn), as dig prints it. A name\n"
        "outside the cluster zone is one the server forwards upstream: said so, exit 0.\n"
        "\n"
        "  --explain             name the object behind each record\n"
        "  --zone                print the whole cluster zone as an RFC 1035 master file\n"
        "                        (with --explain: each record's object too)\n"
        "  --domain DOMAIN       cluster domain (default cluster.local; svcenv-dns --zone)\n"
        "  --ttl S               record TTL (default 5)\n"
        "  --pods disabled|insecure|verified (default disabled)\n"
        "  --endpoint-pod-names  --reverse-fallthrough   as svcenv-dns\n"
        "  --tcp                 ask as over TCP (no truncation)\n"
        "  --bufsize N           EDNS0 UDP size offered (default 1232, dig's; 0: no EDNS0)\n"
        "  --from IP             the asking client's address\n";

struct explain_ctx {
        const struct se_store *st;
        const char *domain;
};

static void lower(char *s)
{
        for (; *s; s++)
                *s = (char)tolower((unsigned char)*s);
}

/* The Service (and where an address comes from) behind name with ip. */
static void explain_service(const struct explain_ctx *x, const char *name, const char *type,
                            const char *ip, struct se_strbuf *sb)
{
        char svcdom[300];
        snprintf(svcdom, sizeof(svcdom), ".svc.%s", x->domain);
        size_t nl = strlen(name), sl = strlen(svcdom);
        if (nl <= sl || strcmp(name + nl - sl, svcdom) != 0) {
                if (strncmp(name, "dns-version.", 12) == 0)
                        se_strbuf_puts(sb, "the schema version (specification 2.2)");
                else if (strstr(name, ".pod."))
                        se_strbuf_puts(sb, "a pod address written in the name (--pods)");
                else if (strcmp(name, x->domain) == 0)
                        se_strbuf_puts(sb, "the zone apex");
                return;
        }
        /* labels left of .svc.<zone>: [x.][y.]<svc>.<ns> or <ns> */
        char pre[300];
        snprintf(pre, sizeof(pre), "%.*s", (int)(nl - sl), name);
        char *labels[8];
        int n = 0;
        for (char *save = NULL, *t = strtok_r(pre, ".", &save); t && n < 8;
             t = strtok_r(NULL, ".", &save))
                labels[n++] = t;
        if (n == 1) {
                se_strbuf_printf(sb, "Namespace %s", labels[0]);
                return;
        }
        if (n < 2)
                return;
        const char *ns = labels[n - 1], *svc = labels[n - 2];
        const struct se_service *s = se_service_of(se_store_get(x->st, SE_KIND_SERVICE, ns, svc));
        if (!s)
                return;
        se_strbuf_printf(sb, "Service %s/%s", ns, svc);
        if (strcmp(type, "CNAME") == 0) {
                se_strbuf_puts(sb, " spec.externalName");
                return;
        }
        if (strcmp(type, "SRV") == 0 && n >= 3 && labels[0][0] == '_')
                se_strbuf_printf(sb, " port %s", labels[0] + 1);
        if (!ip)
                return;
        bool is_cluster_ip = s->cluster_ip && strcmp(s->cluster_ip, ip) == 0;
        for (uint32_t i = 0; i < s->cluster_ips.n; i++)
                is_cluster_ip |= strcmp(s->cluster_ips.v[i], ip) == 0;
        if (is_cluster_ip) {
                se_strbuf_puts(sb, " clusterIP");
                return;
        }
        /* an endpoint: the slice and the pod behind the address */
        struct se_kvlist sel = { &(struct se_kv){ SE_SLICE_SERVICE_NAME_LABEL, svc }, 1 };
        const struct se_object **slices;
        long m = se_store_select(x->st, SE_KIND_ENDPOINT_SLICE, ns, &sel, &slices);
        for (long i = 0; i < m; i++) {
                const struct se_endpoint_slice *es = se_endpoint_slice_of(slices[i]);
                if (!es)
                        continue;
                for (uint32_t e = 0; es->endpoints && e < es->n_endpoints; e++) {
                        const struct se_slice_endpoint *ep = &es->endpoints[e];
                        for (uint32_t a = 0; a < ep->addresses.n; a++) {
                                if (strcmp(ep->addresses.v[a], ip) != 0)
                                        continue;
                                se_strbuf_printf(sb, ", EndpointSlice %s/%s", ns,
                                                 slices[i]->meta.name);
                                const struct se_object_ref *ref = se_slice_endpoint_target_ref(ep);
                                if (ref && ref->name)
                                        se_strbuf_printf(
                                                sb, ", %s %s/%s", ref->kind ? ref->kind : "Pod",
                                                ref->namespace ? ref->namespace : ns, ref->name);
                                if (ep->hostname)
                                        se_strbuf_printf(sb, " (hostname %s)", ep->hostname);
                                free(slices);
                                return;
                        }
                }
        }
        free(slices);
}

/* The address of a reverse name ("4.3.2.1.in-addr.arpa", 32 nibbles of
 * ip6.arpa) into ip; false when it is not one. */
static bool reverse_ip(const char *name, char *ip, size_t n)
{
        size_t l = strlen(name);
        if (l > 13 && strcmp(name + l - 13, ".in-addr.arpa") == 0) {
                unsigned a, b, c, d;
                char tail;
                if (sscanf(name, "%u.%u.%u.%u.in-addr.arp%c", &d, &c, &b, &a, &tail) != 5 ||
                    a > 255 || b > 255 || c > 255 || d > 255)
                        return false;
                snprintf(ip, n, "%u.%u.%u.%u", a, b, c, d);
                return true;
        }
        if (l == 64 + 8 && strcmp(name + 64, "ip6.arpa") == 0) {
                uint8_t addr[16] = { 0 };
                for (int i = 0; i < 32; i++) {
                        char ch = name[2 * i];
                        int v = isdigit((unsigned char)ch) ? ch - '0' :
                                (ch >= 'a' && ch <= 'f')   ? ch - 'a' + 10 :
                                                             -1;
                        if (v < 0 || name[2 * i + 1] != '.')
                                return false;
                        int nib = 31 - i;
                        addr[nib / 2] |= (uint8_t)(nib % 2 ? v : v << 4);
                }
                return inet_ntop(AF_INET6, addr, ip, (socklen_t)n) != NULL;
        }
        return false;
}

/* Appends "\t; <object>" to every record line of text. */
static void explain(const struct explain_ctx *x, const char *text, struct se_strbuf *out)
{
        const char *p = text;
        while (*p) {
                const char *nl = strchr(p, '\n');
                size_t l = nl ? (size_t)(nl - p) : strlen(p);
                se_strbuf_add(out, p, l);
                if (l && *p != ';' && l < 1024) {
                        char line[1024];
                        memcpy(line, p, l);
                        line[l] = '\0';
                        char *f[5] = { 0 };
                        int k = 0;
                        for (char *save = NULL, *t = strtok_r(line, "\t", &save); t && k < 5;
                             t = strtok_r(NULL, "\t", &save))
                                f[k++] = t;
                        if (k == 5) {
                                char *owner = f[0], *type = f[3], *rdata = f[4];
                                lower(owner);
                                owner[strlen(owner) - 1] = '\0'; /* final dot */
                                struct se_strbuf why;
                                se_strbuf_init(&why, 0);
                                if (strcmp(type, "PTR") == 0) {
                                        char ip[64];
                                        lower(rdata);
                                        rdata[strlen(rdata) - 1] = '\0';
                                        if (reverse_ip(owner, ip, sizeof(ip)))
                                                explain_service(x, rdata, "A", ip, &why);
                                } else if (strcmp(type, "SOA") == 0 || strcmp(type, "NS") == 0) {
                                        se_strbuf_puts(&why, "the zone apex");
                                } else {
                                        bool addr =
                                                strcmp(type, "A") == 0 || strcmp(type, "AAAA") == 0;
                                        explain_service(x, owner, type, addr ? rdata : NULL, &why);
                                }
                                if (why.len)
                                        se_strbuf_printf(out, "\t; %.*s", (int)why.len, why.buf);
                                se_strbuf_release(&why);
                        }
                }
                se_strbuf_putc(out, '\n');
                if (!nl)
                        break;
                p = nl + 1;
        }
}

int cmd_dns(int argc, char **argv)
{
        enum {
                O_EXPLAIN = 256,
                O_ZONE,
                O_DOMAIN,
                O_TTL,
                O_PODS,
                O_EPNAMES,
                O_REVFALL,
                O_TCP,
                O_BUFSIZE,
                O_FROM
        };
        static const struct option opts[] = {
                CLI_SOURCE_LONG_OPTIONS,
                { "explain", no_argument, NULL, O_EXPLAIN },
                { "zone", no_argument, NULL, O_ZONE },
                { "domain", required_argument, NULL, O_DOMAIN },
                { "ttl", required_argument, NULL, O_TTL },
                { "pods", required_argument, NULL, O_PODS },
                { "endpoint-pod-names", no_argument, NULL, O_EPNAMES },
                { "reverse-fallthrough", no_argument, NULL, O_REVFALL },
                { "tcp", no_argument, NULL, O_TCP },
                { "bufsize", required_argument, NULL, O_BUFSIZE },
                { "from", required_argument, NULL, O_FROM },
                { "help", no_argument, NULL, 'h' },
                { 0 }
        };
        struct cli_source src = { .files = SE_STRV_INIT };
        struct se_dns_options zo = { .ttl = 5 };
        struct se_dns_client client = { .transport = SE_DNS_UDP };
        bool want_explain = false, want_zone = false;
        int bufsize = 1232, v, c, r = EXIT_OK;
        optind = 1;
        while (r == EXIT_OK && (c = getopt_long(argc, argv, "f:n:Ah", opts, NULL)) != -1) {
                int took = cli_source_option(&src, c, optarg);
                if (took < 0)
                        r = cli_fail(EXIT_SYSTEM, "out of memory");
                if (took)
                        continue;
                switch (c) {
                case O_EXPLAIN:
                        want_explain = true;
                        break;
                case O_ZONE:
                        want_zone = true;
                        break;
                case O_DOMAIN:
                        zo.zone = optarg;
                        break;
                case O_TTL:
                        if (se_parse_int(optarg, 0, 3600, &v) < 0)
                                r = cli_usage_error("dns", "--ttl must be 0..3600, not \"%s\"",
                                                    optarg);
                        zo.ttl = (uint32_t)v;
                        break;
                case O_PODS:
                        if (strcmp(optarg, "disabled") == 0)
                                zo.pods = SE_DNS_PODS_DISABLED;
                        else if (strcmp(optarg, "insecure") == 0)
                                zo.pods = SE_DNS_PODS_INSECURE;
                        else if (strcmp(optarg, "verified") == 0)
                                zo.pods = SE_DNS_PODS_VERIFIED;
                        else
                                r = cli_usage_error("dns",
                                                    "--pods must be disabled, insecure or "
                                                    "verified, not \"%s\"",
                                                    optarg);
                        break;
                case O_EPNAMES:
                        zo.endpoint_pod_names = true;
                        break;
                case O_REVFALL:
                        zo.reverse_fallthrough = true;
                        break;
                case O_TCP:
                        client.transport = SE_DNS_TCP;
                        break;
                case O_BUFSIZE:
                        if (se_parse_int(optarg, 0, 65535, &bufsize) < 0)
                                r = cli_usage_error("dns", "--bufsize must be 0..65535, not \"%s\"",
                                                    optarg);
                        break;
                case O_FROM: {
                        struct se_ip ip;
                        if (se_parse_ip(optarg, &ip) < 0) {
                                r = cli_usage_error(
                                        "dns", "--from must be an IP address, not \"%s\"", optarg);
                                break;
                        }
                        client.family = ip.family == SE_IPV4 ? AF_INET : AF_INET6;
                        memcpy(client.addr, ip.addr, 16);
                        break;
                }
                case 'h':
                        return cli_help(&src, usage);
                default:
                        r = cli_usage_error("dns", "unknown option");
                        break;
                }
        }
        const char *name = NULL, *type = "A";
        if (r == EXIT_OK) {
                int left = argc - optind;
                if (!want_zone && left < 1)
                        r = cli_usage_error("dns", "a NAME to look up is required");
                else if (left > (want_zone ? 0 : 2))
                        r = cli_usage_error("dns", "unexpected argument \"%s\"",
                                            argv[optind + (want_zone ? 0 : 2)]);
                else if (!want_zone) {
                        name = argv[optind];
                        if (left == 2)
                                type = argv[optind + 1];
                }
        }
        uint8_t query[600];
        int qlen = 0;
        if (r == EXIT_OK && name) {
                struct se_diag diag = { 0 };
                if ((qlen = se_dns_query_make(name, type, 0, (uint16_t)bufsize, query,
                                              sizeof(query), &diag)) < 0)
                        r = cli_usage_error("dns", "%s", diag.text);
        }
        if (r != EXIT_OK) {
                cli_source_release(&src);
                return r;
        }
        src.kinds = 1u << SE_KIND_SERVICE | 1u << SE_KIND_ENDPOINT_SLICE | 1u << SE_KIND_NAMESPACE |
                    (zo.pods == SE_DNS_PODS_VERIFIED ? 1u << SE_KIND_POD : 0);
        struct se_store *store;
        if ((r = cli_load(&src, &store)) != EXIT_OK) {
                cli_source_release(&src);
                return r;
        }
        struct se_dns_zone *zone = NULL;
        struct se_diag diag = { 0 };
        int b = se_dns_zone_build(store, &zo, &zone, &diag);
        if (b < 0) {
                r = b == -EINVAL ? cli_usage_error("dns", "%s", diag.text) :
                                   cli_fail(EXIT_SYSTEM, "out of memory");
        } else if (want_zone) {
                char *text = NULL;
                /* --explain: each record followed by the object behind it */
                if ((want_explain ? se_dns_zone_explain(zone, &text) :
                                    se_dns_zone_master(zone, &text)) < 0)
                        r = cli_fail(EXIT_SYSTEM, "out of memory");
                else
                        fputs(text, stdout);
                free(text);
        } else {
                static uint8_t out[SE_DNS_MAX_MSG];
                size_t olen = 0;
                enum se_dns_verdict verdict =
                        se_dns_answer(zone, &client, query, (size_t)qlen, out, sizeof(out), &olen);
                if (verdict == SE_DNS_FORWARD) {
                        printf(";; %s is outside the cluster zone: svcenv-dns forwards it "
                               "upstream\n",
                               name);
                } else if (verdict == SE_DNS_DROP) {
                        r = cli_fail(EXIT_SYSTEM, "the server would not answer this query");
                } else {
                        struct se_strbuf text, explained;
                        se_strbuf_init(&text, 0);
                        se_strbuf_init(&explained, 0);
                        se_dns_msg_text(out, olen, false, &text);
                        if (want_explain && text.buf) {
                                struct explain_ctx x = { store,
                                                         zo.zone ? zo.zone : "cluster.local" };
                                se_store_rdlock(store);
                                explain(&x, text.buf, &explained);
                                se_store_unlock(store);
                                fwrite(explained.buf, 1, explained.len, stdout);
                        } else {
                                fwrite(text.buf, 1, text.len, stdout);
                        }
                        se_strbuf_release(&text);
                        se_strbuf_release(&explained);
                }
        }
        se_dns_zone_unref(zone);
        se_store_free(store);
        cli_source_release(&src);
        return r;
}
