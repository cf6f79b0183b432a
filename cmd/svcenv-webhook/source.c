/* Service sources: manifests now; the API server through pkg/kube. */
#include <errno.h>

#include <svcenv/log.h>
#include <svcenv/manifest.h>

#include "source.h"

int source_start(struct source *s)
{
        s->store = se_store_new();
        if (!s->store)
                return -ENOMEM;
        if (s->files.n == 0) {
                /* API mode: a Service informer (pkg/kube) fills s->store and sets
                 * s->synced after its first list. Not linked into this build. */
                se_log_error("reading Services from the API server (--kubeconfig/--master or "
                             "in-cluster) is not available in this build; use -f CLUSTER");
                return -ENOTSUP;
        }
        struct se_diag d = { 0 };
        int r = se_manifest_load(s->store, (const char *const *)s->files.v, s->files.n, NULL,
                                 NULL, &d);
        if (r < 0) {
                char buf[1024];
                se_diag_format(&d, buf, sizeof(buf));
                se_log_error("%s", buf);
                return r;
        }
        atomic_store(&s->synced, true);
        se_log_info(1, "loaded %zu services from manifests",
                    se_store_count(s->store, SE_KIND_SERVICE, NULL));
        return 0;
}

void source_stop(struct source *s)
{
        s->store = se_store_free(s->store);
}
