/* Fuzz target: manifest text (YAML or JSON) through the loader and decoder. */
#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct se_store *s = se_store_new();
        struct se_diag d;
        if (!s)
                return 0;
        (void)se_manifest_load_buffer(s, "fuzz", (const char *)data, size, NULL, NULL, &d);
        se_store_free(s);
        return 0;
}
