/* svcenv get: list what the cluster holds, one object a line. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/encode.h>
#include <svcenv/strbuf.h>

#include "cli.h"

static const char usage[] =
        "Usage: svcenv get -f CLUSTER [KIND] [-n NS | -A] [-o table|name|json|yaml] [--no-headers]\n"
        "       svcenv get --kubeconfig FILE [--context C] [KIND] [-n NS | -A] [-o ...]\n"
        "\n"
        "Lists the objects svcenv models (Services, Pods, Nodes, Namespaces, Endpoints,\n"
        "EndpointSlices, ConfigMaps, Secrets), sorted by kind, namespace and name.\n"
        "KIND is a kind or resource name (service, svc, pods, endpointslices, ...).\n"
        "Without -n or -A every namespace is listed.\n"
        "Without -f the live cluster is read (--kubeconfig, $KUBECONFIG or in-cluster).\n";

/* kubectl's -o name: the kind in lower case (singular), with its group when
 * it has one: "service/web", "endpointslice.discovery.k8s.io/web". */
static void print_name(const struct se_object *o)
{
        char kind[64];
        const char *k = se_kind_name(o->kind), *av = se_kind_api_version(o->kind);
        size_t i = 0;
        for (; i < sizeof(kind) - 1 && k[i]; i++)
                kind[i] = (char)tolower((unsigned char)k[i]);
        kind[i] = '\0';
        const char *slash = strchr(av, '/');
        if (slash)
                printf("%s.%.*s/%s\n", kind, (int)(slash - av), av, o->meta.name);
        else
                printf("%s/%s\n", kind, o->meta.name);
}

static int print_objects(const struct se_object **objs, long n, const char *output, bool headers)
{
        if (strcmp(output, "json") == 0 || strcmp(output, "yaml") == 0)
                return cli_print_list(objs, (size_t)n, output);
        size_t wk = 4, wn = 9;
        for (long i = 0; i < n; i++) {
                size_t k = strlen(se_kind_name(objs[i]->kind));
                size_t ns = strlen(objs[i]->meta.namespace);
                wk = k > wk ? k : wk;
                wn = ns > wn ? ns : wn;
        }
        if (strcmp(output, "name") == 0) {
                for (long i = 0; i < n; i++)
                        print_name(objs[i]);
                return EXIT_OK;
        }
        if (headers)
                printf("%-*s  %-*s  %s\n", (int)wk, "KIND", (int)wn, "NAMESPACE", "NAME");
        for (long i = 0; i < n; i++)
                printf("%-*s  %-*s  %s\n", (int)wk, se_kind_name(objs[i]->kind), (int)wn,
                       *objs[i]->meta.namespace ? objs[i]->meta.namespace : "-",
                       objs[i]->meta.name);
        return EXIT_OK;
}

int cmd_get(int argc, char **argv)
{
        static const struct option opts[] = { CLI_SOURCE_LONG_OPTIONS,
                                              { "output", required_argument, NULL, 'o' },
                                              { "no-headers", no_argument, NULL, 'H' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0 } };
        struct cli_source src = { .files = SE_STRV_INIT, .exact_strings = true };
        const char *output = "table";
        bool headers = true;
        int c, r;
        optind = 1;
        while ((c = getopt_long(argc, argv, "f:n:Ao:h", opts, NULL)) != -1) {
                if ((r = cli_source_option(&src, c, optarg)) != 0) {
                        if (r < 0) {
                                cli_source_release(&src);
                                return cli_fail(EXIT_SYSTEM, "out of memory");
                        }
                        continue;
                }
                switch (c) {
                case 'o':
                        output = optarg;
                        break;
                case 'H':
                        headers = false;
                        break;
                case 'h':
                        return cli_help(&src, usage);
                default:
                        cli_source_release(&src);
                        return cli_usage_error("get", "unknown option");
                }
        }
        static const char *const outputs[] = { "table", "name", "json", "yaml" };
        bool known = false;
        for (size_t i = 0; i < SE_ARRAY_SIZE(outputs); i++)
                known |= strcmp(output, outputs[i]) == 0;
        int kind = -1;
        if (!known)
                r = cli_usage_error("get", "-o must be table, name, json or yaml, not \"%s\"",
                                    output);
        else if (optind < argc && (kind = se_kind_from_name(argv[optind])) < 0)
                r = cli_usage_error("get", "unknown kind \"%s\"", argv[optind]);
        else if (optind + 1 < argc)
                r = cli_usage_error("get", "unexpected argument \"%s\"", argv[optind + 1]);
        else
                r = EXIT_OK;
        if (r != EXIT_OK) {
                cli_source_release(&src);
                return r;
        }
        if (kind >= 0)
                src.kinds = 1u << kind; /* online: list only what is asked for */
        struct se_store *store;
        if ((r = cli_load(&src, &store)) != EXIT_OK) {
                cli_source_release(&src);
                return r;
        }
        const char *ns = src.all_ns ? NULL : src.ns;
        size_t total = 0;
        for (int k = 0; k < SE_KIND_COUNT; k++)
                if (kind < 0 || k == kind)
                        total += se_store_count(store, (enum se_kind)k, NULL);
        const struct se_object **all = se_calloc(total ? total : 1, sizeof(*all));
        long n = 0;
        for (int k = 0; all && k < SE_KIND_COUNT; k++) {
                if (kind >= 0 && k != kind)
                        continue;
                const struct se_object **objs;
                long m =
                        se_store_list(store, (enum se_kind)k,
                                      ns && se_kind_namespaced((enum se_kind)k) ? ns : NULL, &objs);
                for (long i = 0; i < m; i++)
                        all[n++] = objs[i];
                free(objs);
        }
        r = all ? print_objects(all, n, output, headers) : cli_fail(EXIT_SYSTEM, "out of memory");
        free(all);
        se_store_free(store);
        cli_source_release(&src);
        return r;
}
