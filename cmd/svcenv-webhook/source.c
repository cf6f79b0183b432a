/* Service sources: manifests, or the API server through a pkg/kube informer. */
#include <errno.h>
#include <string.h>

#include <svcenv/log.h>
#include <svcenv/manifest.h>

#include "source.h"

static int load_files(struct source *s)
{
        struct se_diag d = { 0 };
        int r = se_manifest_load(s->store, (const char *const *)s->files.v, s->files.n, NULL, NULL,
                                 &d);
        if (r < 0) {
                char buf[1024];
                se_diag_format(&d, buf, sizeof(buf));
                se_log_error("%s", buf);
                return r;
        }
        atomic_store(&s->file_synced, true);
        se_log_info(1, "loaded %zu services from manifests",
                    se_store_count(s->store, SE_KIND_SERVICE, NULL));
        return 0;
}

static void on_error(void *data, int err, const char *message)
{
        (void)data;
        (void)err;
        se_log_warn("service informer: %s", message);
}

static int start_informer(struct source *s)
{
        struct se_kube_config_opts o = { .kubeconfig = s->kubeconfig, .master = s->master };
        struct se_kube_client_opts co = { .qps = 20, .burst = 40 };
        struct se_diag d;
        int r = se_kube_client_load(&o, &co, &s->client, &d);
        if (r < 0) {
                char buf[1024];
                se_diag_format(&d, buf, sizeof(buf));
                se_log_error("%s", buf);
                return r;
        }
        s->informer = se_kube_informer_new(s->client, SE_KIND_SERVICE, s->store, NULL, on_error, s);
        if (!s->informer)
                return -ENOMEM;
        r = se_kube_informer_start(s->informer);
        if (r < 0)
                se_log_error("service informer: %s", strerror(-r));
        else
                se_log_info(1, "watching Services on the API server");
        return r;
}

int source_start(struct source *s)
{
        s->store = se_store_new();
        if (!s->store)
                return -ENOMEM;
        return s->files.n ? load_files(s) : start_informer(s);
}

bool source_synced(const struct source *s)
{
        return s->informer ? se_kube_informer_has_synced(s->informer) :
                             atomic_load(&s->file_synced);
}

void source_stop(struct source *s)
{
        s->informer = se_kube_informer_free(s->informer);
        s->client = se_kube_client_free(s->client);
        s->store = se_store_free(s->store);
}
