#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <svcenv/manifest.h>
#include <svcenv/store.h>

#include "store_yaml.h"

struct se_store *t_load(const char *yaml)
{
        struct se_store *s = se_store_new();
        struct se_diag d = { 0 };
        assert_non_null(s);
        int r = se_manifest_load_buffer(s, "test.yaml", yaml, strlen(yaml), NULL, NULL, &d);
        if (r < 0)
                fail_msg("load: %d: %s (line %u)", r, d.text, d.line);
        return s;
}
