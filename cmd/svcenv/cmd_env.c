/* svcenv env: the environment the kubelet would give a container. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/alloc.h>
#include <svcenv/envvars.h>
#include <svcenv/jsonstr.h>
#include <svcenv/manifest.h>
#include <svcenv/strbuf.h>

#include "cli.h"

static const char usage[] =
        "Usage: svcenv env -f CLUSTER (-n NS | --pod NAME [-n NS] | --pod-file POD)\n"
        "                  [--container C] [-o env|json|shell] [--explain]\n"
        "\n"
        "Prints the environment the kubelet (Kubernetes v1.36) gives a container: the\n"
        "container's env and envFrom (valueFrom resolved, $(VAR) expanded), then the\n"
        "service variables it did not set. With -n NS alone: the service variables a\n"
        "pod in NS gets (enableServiceLinks true).\n"
        "\n"
        "  --pod NAME       a pod of the cluster (namespace from -n, default \"default\")\n"
        "  --pod-file POD   a pod manifest (YAML/JSON) not in the cluster\n"
        "  --container C    one container (also init containers); without it every\n"
        "                   container is printed under a '# container NAME' header\n"
        "  -o env           NAME=VALUE lines (default)\n"
        "  -o shell         export NAME='VALUE' lines, quoted for sh\n"
        "  -o json          [{\"name\",\"value\",\"source\"}] (+\"container\" with several)\n"
        "  --explain        say where each variable came from and what it won over\n"
        "\n"
        "Order: container variables in declaration order, then service variables by\n"
        "service name, each service's in generation order. When two services make the\n"
        "same name, the service whose name sorts first (the shorter one) wins.\n"
        "\n"
        "Size guard: a warning on stderr when a container's environment passes 5000\n"
        "variables or 1 MiB (NAME=VALUE, NUL and an 8-byte pointer each); exit 1 when\n"
        "it passes the exec limits (2 MiB in total with the usual 8 MiB stack, or one\n"
        "variable over 128 KiB), where the container would fail with E2BIG.\n";

enum output { OUT_ENV, OUT_SHELL, OUT_JSON };

struct opts {
        const char *pod;
        const char *pod_file;
        const char *container;
        enum output output;
        bool explain;
        bool json_first; /* no JSON element written yet */
};

/* s as a JSON string, escaped as every JSON svcenv writes (jsonstr.h) */
static void json_string(FILE *f, const char *s)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        se_json_put_string(&sb, s);
        if (se_strbuf_failed(&sb)) {
                fputs("svcenv: out of memory\n", stderr);
                exit(4);
        }
        fwrite(sb.buf, 1, sb.len, f);
        se_strbuf_release(&sb);
}

static void shell_quote(FILE *f, const char *s)
{
        fputc('\'', f);
        for (; *s; s++) {
                if (*s == '\'')
                        fputs("'\\''", f);
                else
                        fputc(*s, f);
        }
        fputc('\'', f);
}

static bool shell_name(const char *s)
{
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
                return false;
        for (; *s; s++)
                if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
                      (*s >= '0' && *s <= '9') || *s == '_'))
                        return false;
        return true;
}

static void explain_comment(const struct se_env_entry *e, struct se_strbuf *sb)
{
        se_strbuf_reset(sb);
        se_env_entry_describe(e, sb);
        printf("# %s: %s\n", e->name, sb->buf);
        for (const struct se_env_loser *l = e->lost; l; l = l->next) {
                se_strbuf_reset(sb);
                se_env_loser_describe(l, sb);
                printf("#   wins over %s = ", sb->buf);
                json_string(stdout, l->value);
                putchar('\n');
        }
}

static void print_list(struct opts *o, const char *container, const struct se_env_list *l)
{
        struct se_strbuf sb;
        se_strbuf_init(&sb, 0);
        for (size_t i = 0; i < l->n; i++) {
                const struct se_env_entry *e = &l->items[i];
                if (o->output == OUT_JSON) {
                        printf("%s\n  {", o->json_first ? "" : ",");
                        o->json_first = false;
                        if (container) {
                                fputs("\"container\": ", stdout);
                                json_string(stdout, container);
                                fputs(", ", stdout);
                        }
                        fputs("\"name\": ", stdout);
                        json_string(stdout, e->name);
                        fputs(", \"value\": ", stdout);
                        json_string(stdout, e->value);
                        se_strbuf_reset(&sb);
                        se_env_entry_describe(e, &sb);
                        fputs(", \"source\": ", stdout);
                        json_string(stdout, sb.buf);
                        if (o->explain && e->lost) {
                                fputs(", \"overrides\": [", stdout);
                                for (const struct se_env_loser *x = e->lost; x; x = x->next) {
                                        se_strbuf_reset(&sb);
                                        se_env_loser_describe(x, &sb);
                                        fputs("{\"value\": ", stdout);
                                        json_string(stdout, x->value);
                                        fputs(", \"source\": ", stdout);
                                        json_string(stdout, sb.buf);
                                        fputs(x->next ? "}, " : "}", stdout);
                                }
                                fputc(']', stdout);
                        }
                        fputc('}', stdout);
                        continue;
                }
                if (o->explain)
                        explain_comment(e, &sb);
                if (o->output == OUT_ENV) {
                        printf("%s=%s\n", e->name, e->value);
                } else if (shell_name(e->name)) {
                        printf("export %s=", e->name);
                        shell_quote(stdout, e->value);
                        putchar('\n');
                } else {
                        /* names are printable ASCII without '=': safe in a comment */
                        printf("# not a shell variable name, skipped: %s\n", e->name);
                }
        }
        se_strbuf_release(&sb);
}

/* Size guard: past the exec limits the input gives an environment no
 * container can start with: EXIT_INVALID (the variables are still printed,
 * to see what is too big). Else EXIT_OK, with a warning near them. */
static int size_guard(const char *what, const struct se_env_list *l)
{
        size_t count, bytes, longest;
        se_env_list_size(l, &count, &bytes, &longest);
        if (bytes > SE_ENVVARS_EXEC_TOTAL || longest > SE_ENVVARS_EXEC_STRING) {
                fprintf(stderr,
                        "svcenv: %s: %zu variables, %zu bytes (longest %zu): over the exec limits (2 MiB in total, 128 KiB each), the container would fail with \"argument list too long\" (E2BIG)\n",
                        what, count, bytes, longest);
                return EXIT_INVALID;
        }
        if (count > SE_ENVVARS_WARN_COUNT || bytes > SE_ENVVARS_WARN_TOTAL)
                fprintf(stderr,
                        "svcenv: warning: %s: %zu variables, %zu bytes: approaching the exec limit of 2 MiB (E2BIG); consider enableServiceLinks: false\n",
                        what, count, bytes);
        return EXIT_OK;
}

static int container_error(int r, const struct se_pod *pod, const char *c, const struct se_diag *d)
{
        /* -ENODATA (a value only the node knows) is input that cannot be
         * answered from manifests: invalid input too */
        int code = r == -ENOMEM ? EXIT_SYSTEM : EXIT_INVALID;
        return cli_fail(code, "pod %s/%s container %s: %s", pod->obj.meta.namespace,
                        pod->obj.meta.name, c, r == -ENOMEM ? "out of memory" : d->text);
}

struct computed {
        const char *name;
        bool init;
        struct se_env_list env;
};

/* Computes every selected container first, so that an error prints nothing
 * but the error. */
static int run_pod(struct opts *o, const struct se_envvars_input *in, const struct se_pod *pod)
{
        const struct se_container *all[2] = { pod->init_containers, pod->containers };
        uint32_t counts[2] = { pod->n_init_containers, pod->n_containers };
        size_t total = (size_t)counts[0] + counts[1], n = 0;
        struct computed *cs = se_calloc(total ? total : 1, sizeof(*cs));
        int rc = cs ? EXIT_OK : cli_fail(EXIT_SYSTEM, "out of memory");
        for (int k = 0; rc == EXIT_OK && k < 2; k++) {
                for (uint32_t i = 0; rc == EXIT_OK && i < counts[k]; i++) {
                        const struct se_container *c = &all[k][i];
                        const char *name = c->name ? c->name : "";
                        if (o->container && strcmp(o->container, name) != 0)
                                continue;
                        struct computed *x = &cs[n++];
                        struct se_diag d = { 0 };
                        x->name = name;
                        x->init = k == 0;
                        int r = se_envvars_build(in, pod, c, &x->env, &d);
                        if (r < 0)
                                rc = container_error(r, pod, name, &d);
                }
        }
        if (rc == EXIT_OK && o->container && n == 0)
                rc = cli_fail(EXIT_INVALID, "container \"%s\" not found in pod %s/%s", o->container,
                              pod->obj.meta.namespace, pod->obj.meta.name);
        if (rc == EXIT_OK) {
                bool header = !o->container && total > 1;
                if (o->output == OUT_JSON)
                        putchar('[');
                for (size_t i = 0; i < n; i++) {
                        if (header && o->output != OUT_JSON)
                                printf("%s# container %s%s\n", i ? "\n" : "", cs[i].name,
                                       cs[i].init ? " (init)" : "");
                        print_list(o, header ? cs[i].name : NULL, &cs[i].env);
                }
                if (o->output == OUT_JSON)
                        puts(o->json_first ? "]" : "\n]");
                for (size_t i = 0; i < n; i++) {
                        char what[300];
                        snprintf(what, sizeof(what), "pod %s/%s container %s",
                                 pod->obj.meta.namespace, pod->obj.meta.name, cs[i].name);
                        if (size_guard(what, &cs[i].env) != EXIT_OK)
                                rc = EXIT_INVALID;
                }
        }
        for (size_t i = 0; cs && i < n; i++)
                se_env_list_release(&cs[i].env);
        free(cs);
        return rc;
}

static int run_namespace(struct opts *o, const struct se_envvars_input *in, const char *ns)
{
        struct se_env_list l = SE_ENV_LIST_INIT;
        int r = se_envvars_services(in, ns, true, &l);
        if (r < 0)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        if (o->output == OUT_JSON)
                putchar('[');
        print_list(o, NULL, &l);
        if (o->output == OUT_JSON)
                puts(o->json_first ? "]" : "\n]");
        char what[300];
        snprintf(what, sizeof(what), "namespace %s", ns);
        r = size_guard(what, &l);
        se_env_list_release(&l);
        return r;
}

/* Loads the one Pod of --pod-file into its own store. */
static int load_pod_file(const char *path, const char *ns, struct se_store **ret_store,
                         const struct se_pod **ret_pod)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        int r = se_manifest_load(s, &path, 1, ns, NULL, &d);
        if (r < 0) {
                char msg[1200];
                se_diag_format(&d, msg, sizeof(msg));
                se_store_free(s);
                return cli_fail(r == -EINVAL || r == -EEXIST ? EXIT_INVALID : EXIT_SYSTEM, "%s",
                                msg);
        }
        const struct se_object **objs;
        long n = se_store_list(s, SE_KIND_POD, NULL, &objs);
        if (n != 1) {
                free(objs);
                se_store_free(s);
                return cli_fail(EXIT_INVALID, "%s: expected one Pod, found %ld", path,
                                n < 0 ? 0 : n);
        }
        *ret_pod = se_pod_of(objs[0]);
        free(objs);
        *ret_store = s;
        return EXIT_OK;
}

static int parse(int argc, char **argv, struct cli_source *src, struct opts *o)
{
        static const struct option opts[] = { CLI_SOURCE_LONG_OPTIONS,
                                              { "pod", required_argument, NULL, 'p' },
                                              { "pod-file", required_argument, NULL, 'P' },
                                              { "container", required_argument, NULL, 'c' },
                                              { "output", required_argument, NULL, 'o' },
                                              { "explain", no_argument, NULL, 'x' },
                                              { "help", no_argument, NULL, 'h' },
                                              { 0 } };
        const char *output = "env";
        int c, r;
        optind = 1;
        while ((c = getopt_long(argc, argv, "f:n:Ao:c:h", opts, NULL)) != -1) {
                if ((r = cli_source_option(src, c, optarg)) != 0) {
                        if (r < 0)
                                return cli_fail(EXIT_SYSTEM, "out of memory");
                        continue;
                }
                switch (c) {
                case 'p':
                        o->pod = optarg;
                        break;
                case 'P':
                        o->pod_file = optarg;
                        break;
                case 'c':
                        o->container = optarg;
                        break;
                case 'o':
                        output = optarg;
                        break;
                case 'x':
                        o->explain = true;
                        break;
                case 'h':
                        fputs(usage, stdout);
                        return -1;
                default:
                        return cli_usage_error("env", "unknown option");
                }
        }
        if (strcmp(output, "env") == 0)
                o->output = OUT_ENV;
        else if (strcmp(output, "shell") == 0)
                o->output = OUT_SHELL;
        else if (strcmp(output, "json") == 0)
                o->output = OUT_JSON;
        else
                return cli_usage_error("env", "-o must be env, json or shell, not \"%s\"", output);
        if (optind < argc)
                return cli_usage_error("env", "unexpected argument \"%s\"", argv[optind]);
        if (src->all_ns)
                return cli_usage_error("env",
                                       "-A is not supported: the environment is per namespace");
        if (o->pod && o->pod_file)
                return cli_usage_error("env", "--pod and --pod-file exclude each other");
        if (!o->pod && !o->pod_file && !src->ns)
                return cli_usage_error("env", "give -n NS, --pod NAME or --pod-file POD");
        if (o->container && !o->pod && !o->pod_file)
                return cli_usage_error("env", "--container needs --pod or --pod-file");
        return EXIT_OK;
}

int cmd_env(int argc, char **argv)
{
        struct cli_source src = { .files = SE_STRV_INIT };
        struct opts o = { .json_first = true };
        int r = parse(argc, argv, &src, &o);
        if (r != EXIT_OK) {
                cli_source_release(&src);
                return r < 0 ? EXIT_OK : r;
        }
        struct se_store *store = NULL, *pod_store = NULL;
        const struct se_pod *pod = NULL;
        if ((r = cli_load(&src, &store)) != EXIT_OK)
                goto out;
        struct se_envvars_input in = { .store = store };
        const char *ns = cli_source_namespace(&src);
        if (o.pod_file) {
                if ((r = load_pod_file(o.pod_file, src.ns, &pod_store, &pod)) != EXIT_OK)
                        goto out;
                r = run_pod(&o, &in, pod);
        } else if (o.pod) {
                pod = se_pod_of(se_store_get(store, SE_KIND_POD, ns, o.pod));
                if (!pod)
                        r = cli_fail(EXIT_INVALID, "pods \"%s\" not found in namespace \"%s\"",
                                     o.pod, ns);
                else
                        r = run_pod(&o, &in, pod);
        } else {
                r = run_namespace(&o, &in, ns);
        }
out:
        se_store_free(pod_store);
        se_store_free(store);
        cli_source_release(&src);
        return r;
}
