/* Where the webhook's Services come from: `-f` manifests (loaded once,
 * synced at once) or the API server (a Service informer from pkg/kube
 * feeding the same store, synced after its first list). The admission code
 * reads the store the same way in both cases. */
#ifndef SVCENV_WEBHOOK_SOURCE_H
#define SVCENV_WEBHOOK_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>

#include <svcenv/kube.h>
#include <svcenv/kube_client.h>
#include <svcenv/kube_watch.h>
#include <svcenv/store.h>
#include <svcenv/strv.h>

struct source {
        struct se_strv files; /* -f */
        const char *kubeconfig;
        const char *master;
        struct se_store *store;
        atomic_bool file_synced;
        struct se_kube_client *client;
        struct se_kube_informer *informer;
};

/* Fills the store (manifests) or starts the informer. 0, or a negative
 * errno after logging why. */
int source_start(struct source *s);
/* True once the Services are in the store. */
bool source_synced(const struct source *s);
void source_stop(struct source *s);

#endif
