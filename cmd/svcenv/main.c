/* svcenv: the CLI. Parses the global options and runs a subcommand. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <svcenv/log.h>
#include <svcenv/parse.h>

#include "cli.h"

#ifndef SVCENV_VERSION
# define SVCENV_VERSION "0.1.0"
#endif

struct subcommand {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
};

static const struct subcommand subcommands[] = {
        { "get", cmd_get, "list the objects of a cluster (manifests)" },
        { "env", cmd_env, "the environment the kubelet gives a container" },
        { "endpoints", cmd_endpoints, "Endpoints or EndpointSlices the controller writes" },
        { "rules", cmd_rules, "print the proxy rules (iptables/nftables) for a node" },
        { "admit", cmd_admit, "the AdmissionReview response the webhook sends" },
        { "dns", cmd_dns, "the answer the cluster DNS server gives to a query" },
        { "trace", cmd_trace, "the rules a packet meets and the endpoints it can reach" },
};

static void print_usage(FILE *f)
{
        fprintf(f, "Usage: svcenv [-v N] COMMAND [OPTIONS]\n\n"
                   "Kubernetes service plumbing: the environment, Endpoints and proxy rules a\n"
                   "cluster's Services produce, computed the way Kubernetes v1.36 does.\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < SE_ARRAY_SIZE(subcommands); i++)
                fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
        fprintf(f,
                "\nEvery command reads a cluster from manifests with -f FILE|DIR|- (repeatable).\n"
                "Exit status: 0 ok, 2 usage, 3 invalid input, 4 API or system error.\n"
                "Run 'svcenv COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
        int i = 1;
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        print_usage(stdout);
                        return EXIT_OK;
                }
                if (strcmp(a, "--version") == 0) {
                        printf("svcenv %s (Kubernetes v1.36 behaviour)\n", SVCENV_VERSION);
                        return EXIT_OK;
                }
                const char *level = NULL;
                if (strcmp(a, "-v") == 0 && i + 1 < argc)
                        level = argv[++i];
                else if (strncmp(a, "-v=", 3) == 0 || strncmp(a, "--v=", 4) == 0)
                        level = strchr(a, '=') + 1;
                int v; /* any level, as klog's -v (an int32) */
                if (!level || se_parse_int(level, INT32_MIN, INT32_MAX, &v) < 0) {
                        fprintf(stderr, "svcenv: unknown option \"%s\" (see 'svcenv --help')\n", a);
                        return EXIT_USAGE;
                }
                se_log_set_verbosity(v);
        }
        if (i >= argc) {
                print_usage(stderr);
                return EXIT_USAGE;
        }
        for (size_t k = 0; k < SE_ARRAY_SIZE(subcommands); k++)
                if (strcmp(argv[i], subcommands[k].name) == 0)
                        return subcommands[k].run(argc - i, argv + i);
        if (strcmp(argv[i], "version") == 0) {
                printf("svcenv %s (Kubernetes v1.36 behaviour)\n", SVCENV_VERSION);
                return EXIT_OK;
        }
        fprintf(stderr, "svcenv: unknown command \"%s\" (see 'svcenv --help')\n", argv[i]);
        return EXIT_USAGE;
}
