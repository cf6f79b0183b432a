/* Shared CLI helpers (see cli.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/kube.h>
#include <svcenv/kube_client.h>
#include <svcenv/manifest.h>
#include <svcenv/proxy_proxier.h>
#include <svcenv/strbuf.h>

#include "cli.h"

int cli_source_option(struct cli_source *src, int opt, const char *arg)
{
        switch (opt) {
        case 'f':
                return se_strv_push(&src->files, arg) < 0 ? -ENOMEM : 1;
        case 'n':
                src->ns = arg;
                return 1;
        case 'A':
                src->all_ns = true;
                return 1;
        case 'K':
                src->kubeconfig = arg;
                return 1;
        case 'C':
                src->context = arg;
                return 1;
        default:
                return 0;
        }
}

void cli_source_release(struct cli_source *src)
{
        se_strv_release(&src->files);
}

int cli_help(struct cli_source *src, const char *usage)
{
        fputs(usage, stdout);
        cli_source_release(src);
        return EXIT_OK;
}

const char *cli_source_namespace(const struct cli_source *src)
{
        return src->ns ? src->ns : "default";
}

int cli_fail(int code, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "svcenv: %s\n", msg);
        return code;
}

int cli_usage_error(const char *sub, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "svcenv %s: %s (see 'svcenv %s --help')\n", sub, msg, sub);
        return EXIT_USAGE;
}

static int put_item(void *data, struct se_object *obj)
{
        return se_store_put(data, obj);
}

/* Lists every modelled kind from the API server into a new store. */
static int load_online(const struct cli_source *src, struct se_store **ret)
{
        struct se_kube_config_opts o = { .kubeconfig = src->kubeconfig, .context = src->context };
        struct se_kube_client_opts co = { .qps = 50, .burst = 100 };
        struct se_kube_client *client = NULL;
        struct se_diag diag;
        int r = se_kube_client_load(&o, &co, &client, &diag);
        if (r < 0) {
                return cli_fail(r == -ENOENT && !src->kubeconfig ? EXIT_USAGE :
                                r == -EINVAL                     ? EXIT_INVALID :
                                                                   EXIT_SYSTEM,
                                "%s", diag.text);
        }
        struct se_store *store = se_store_new();
        const char *ns = src->all_ns ? NULL : src->ns;
        for (int k = 0; store && r == 0 && k < SE_KIND_COUNT; k++) {
                if (src->kinds && !(src->kinds & (1u << k)))
                        continue;
                bool namespaced = se_kind_namespaced((enum se_kind)k);
                struct se_kube_list_opts lo = { .decode_flags = src->exact_strings ?
                                                                        0 :
                                                                        SE_DECODE_NUL_AS_C080 };
                r = se_kube_list(client, (enum se_kind)k, namespaced ? ns : NULL, &lo, put_item,
                                 store, NULL, &diag);
        }
        se_kube_client_free(client);
        if (!store)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        if (r < 0) {
                se_store_free(store);
                return cli_fail(r == -EINVAL ? EXIT_INVALID : EXIT_SYSTEM, "%s", diag.text);
        }
        *ret = store;
        return EXIT_OK;
}

int cli_load(const struct cli_source *src, struct se_store **ret)
{
        *ret = NULL;
        if (src->files.n == 0 && (src->kubeconfig || src->context || getenv("KUBECONFIG")))
                return load_online(src, ret);
        if (src->files.n == 0)
                return cli_fail(EXIT_USAGE,
                                "no cluster given: use -f FILE|DIR|- or --kubeconfig FILE");
        struct se_store *store = se_store_new();
        if (!store)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        struct se_diag diag;
        int r = se_manifest_load(store, (const char *const *)src->files.v, src->files.n, NULL, NULL,
                                 &diag);
        if (r < 0) {
                char msg[1200];
                se_diag_format(&diag, msg, sizeof(msg));
                se_store_free(store);
                return cli_fail(r == -EINVAL || r == -EEXIST ? EXIT_INVALID : EXIT_SYSTEM, "%s",
                                msg);
        }
        *ret = store;
        return EXIT_OK;
}

int cli_proxy_load(const struct cli_source *src, struct se_proxy_flags *f, const char *node,
                   struct se_store **ret)
{
        /* --nfacct auto: off (the counters must exist before rules name them) */
        f->opt.nfacct = f->nfacct == 1;
        f->opt.node_name = node;
        se_proxy_flags_finish(f);
        int rc = cli_load(src, ret);
        if (rc != EXIT_OK)
                return rc;
        const char *zone = NULL;
        if (se_proxy_node_facts(*ret, node, &f->opt, &zone) < 0 && !f->opt.n_node_ips)
                return cli_fail(EXIT_INVALID, "node \"%s\" is not in the cluster (give --node-ip)",
                                node);
        f->opt.zone = zone;
        return EXIT_OK;
}

int cli_print_list(const struct se_object *const *objs, size_t n, const char *output)
{
        json_t *list = se_encode_list(objs, n);
        if (!list)
                return cli_fail(EXIT_SYSTEM, "out of memory");
        int r;
        if (strcmp(output, "json") == 0) {
                r = json_dumpf(list, stdout, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
                putchar('\n');
        } else {
                struct se_strbuf sb;
                se_strbuf_init(&sb, 0);
                r = se_encode_yaml(list, &sb);
                fwrite(sb.buf, 1, sb.len, stdout);
                se_strbuf_release(&sb);
        }
        json_decref(list);
        return r < 0 ? cli_fail(EXIT_SYSTEM, "cannot write output") : EXIT_OK;
}
