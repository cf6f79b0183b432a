/* Where the webhook's Services come from: the seam between the daemon and
 * its feeders. `-f` manifests load once and are synced at once; the API
 * source (a Service informer from pkg/kube feeding the same store, synced
 * after its first list) plugs in here with the same three calls. */
#ifndef SVCENV_WEBHOOK_SOURCE_H
#define SVCENV_WEBHOOK_SOURCE_H

#include <stdatomic.h>
#include <stdbool.h>

#include <svcenv/store.h>
#include <svcenv/strv.h>

struct source {
        struct se_strv files; /* -f */
        const char *kubeconfig;
        const char *master;
        struct se_store *store;
        atomic_bool synced;
};

/* Fills the store (manifests) or starts the informers. 0, or a negative
 * errno after logging why. */
int source_start(struct source *s);
void source_stop(struct source *s);

#endif
