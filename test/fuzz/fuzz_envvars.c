/* Fuzz target: a manifest (Services, ConfigMaps, Secrets, Pods) through the
 * whole environment computation for every container of every pod. */
#include <stdlib.h>

#include <svcenv/envvars.h>
#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s)
                return 0;
        if (se_manifest_load_buffer(s, "fuzz", (const char *)data, size, NULL, NULL, &d) == 0) {
                const struct se_object **pods;
                long n = se_store_list(s, SE_KIND_POD, NULL, &pods);
                struct se_envvars_input in = { .store = s };
                for (long i = 0; i < n; i++) {
                        const struct se_pod *p = se_pod_of(pods[i]);
                        for (uint32_t c = 0; c < p->n_containers; c++) {
                                struct se_env_list l = SE_ENV_LIST_INIT;
                                (void)se_envvars_build(&in, p, &p->containers[c], &l, &d);
                                se_env_list_release(&l);
                        }
                }
                free(pods);
        }
        se_store_free(s);
        return 0;
}
