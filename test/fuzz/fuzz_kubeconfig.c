/* Fuzz target: kubeconfig text through the parser and resolver (no file is
 * read and no plugin runs while parsing). */
#include <svcenv/kube.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *names[] = { "/fuzz/config" };
        const char *texts[] = { (const char *)data };
        struct se_kube_config *c = NULL;
        struct se_diag d;
        if (se_kube_config_parse(names, texts, &size, 1, NULL, &c, &d) == 0)
                se_kube_config_free(c);
        return 0;
}
