/* Shared pieces of the svcenv CLI: exit codes, the cluster source options
 * every subcommand takes, and one-line error reporting. */
#ifndef SVCENV_CLI_H
#define SVCENV_CLI_H

#include <stdbool.h>

#include <svcenv/diag.h>
#include <svcenv/macro.h>
#include <svcenv/store.h>
#include <svcenv/strv.h>

enum cli_exit {
        EXIT_OK = 0,
        EXIT_USAGE = 2,
        EXIT_INVALID = 3,
        EXIT_SYSTEM = 4,
};

/* Where the cluster comes from: manifests (-f), or the live API server
 * (--kubeconfig/--context, $KUBECONFIG, in-cluster) when no -f is given. */
struct cli_source {
        struct se_strv files;
        const char *ns; /* -n */
        bool all_ns; /* -A */
        const char *kubeconfig; /* --kubeconfig */
        const char *context; /* --context */
        unsigned kinds; /* online: bit (1u << kind) per kind to list; 0: every kind */
        /* online: a string with a NUL byte (the API server takes \u0000 in
         * data and annotations) fails the load, for commands that print the
         * objects (get); the others decode it as the informers do
         * (SE_DECODE_NUL_AS_C080), so one such ConfigMap does not stop
         * them */
        bool exact_strings;
};

/* Options shared by the subcommands, for getopt_long tables. */
#define CLI_SOURCE_LONG_OPTIONS                                                               \
 { "filename", required_argument, NULL, 'f' }, { "namespace", required_argument, NULL, 'n' }, \
         { "all-namespaces", no_argument, NULL, 'A' },                                        \
         { "kubeconfig", required_argument, NULL, 'K' },                                      \
 {                                                                                            \
  "context", required_argument, NULL, 'C'                                                     \
 }

/* Handles -f/-n/-A/--kubeconfig/--context; returns 1 when it took the option, 0 when not, or a
 * negative errno. */
int cli_source_option(struct cli_source *src, int opt, const char *arg);
void cli_source_release(struct cli_source *src);
/* --help: usage on stdout, src released; returns EXIT_OK for the
 * subcommand to return. */
int cli_help(struct cli_source *src, const char *usage);
/* The namespace for namespaced defaults ("default" when -n is absent). */
const char *cli_source_namespace(const struct cli_source *src);

/* Loads the cluster into a new store (from the API server: every modelled
 * kind, paginated, only namespace -n unless -A or no -n); on failure prints the error and
 * returns the exit code (and *ret = NULL). */
int cli_load(const struct cli_source *src, struct se_store **ret);
/* For the commands that render a node's proxy rules (rules, trace): finishes
 * f for node (--nfacct auto means off), loads the cluster and takes the
 * Node's IPs and zone (the zone borrowed from *ret). EXIT_OK, or the exit
 * code after a one-line error (EXIT_INVALID: unknown Node and no --node-ip). */
struct se_proxy_flags;
int cli_proxy_load(const struct cli_source *src, struct se_proxy_flags *f, const char *node,
                   struct se_store **ret);

/* "svcenv: message" on stderr, one line. Returns code. */
int cli_fail(int code, const char *fmt, ...) SE_PRINTF(2, 3);
/* A usage error for sub ("svcenv SUB: message; see 'svcenv SUB --help'"). */
int cli_usage_error(const char *sub, const char *fmt, ...) SE_PRINTF(2, 3);

/* Prints objects as a `v1 List` in JSON (output "json") or YAML; returns
 * the exit code. */
int cli_print_list(const struct se_object *const *objs, size_t n, const char *output);

/* Subcommands: argc/argv start at the subcommand's name. */
int cmd_get(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_endpoints(int argc, char **argv);
int cmd_rules(int argc, char **argv);
int cmd_admit(int argc, char **argv);
int cmd_dns(int argc, char **argv);
int cmd_trace(int argc, char **argv);

#endif
