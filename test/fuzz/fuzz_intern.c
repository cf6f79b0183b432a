/* Fuzz target: SE_DECODE_INTERN. The input as one JSON object decodes as
 * every kind with and without the flag (twice with it, so that its strings
 * reach the process-wide pool) to the same verdict, the same error and,
 * for full objects, the same encoded JSON. The forms that keep (and check)
 * less (DNS, proxy) accept whatever a full decode accepts. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>

#include "fuzz.h"

static char *dump(const struct se_object *o)
{
        json_t *j = se_encode_object(o);
        char *s = j ? json_dumps(j, JSON_SORT_KEYS) : NULL;
        json_decref(j);
        return s;
}

static void check(const json_t *j, enum se_kind kind, unsigned flags)
{
        struct se_object *plain = NULL, *shared = NULL;
        struct se_decode_error ep, es;
        int rp = se_decode_object_flags(j, kind, NULL, flags, &plain, &ep);
        for (int i = 0; i < 2; i++) {
                se_object_unref(shared);
                int rs = se_decode_object_flags(j, kind, NULL, flags | SE_DECODE_INTERN, &shared,
                                                &es);
                if (rs != rp || (rs < 0 && (strcmp(ep.path, es.path) != 0 ||
                                            strcmp(ep.message, es.message) != 0)))
                        abort();
        }
        if (rp == 0 && flags == 0) {
                char *a = dump(plain), *b = dump(shared);
                if ((a == NULL) != (b == NULL) || (a && strcmp(a, b) != 0))
                        abort();
                free(a);
                free(b);
        }
        se_object_unref(plain);
        se_object_unref(shared);
}

static void check_lean(const json_t *j, enum se_kind kind, unsigned flags)
{
        check(j, kind, flags);
        struct se_object *full = NULL, *lean = NULL;
        int rf = se_decode_object_flags(j, kind, NULL, 0, &full, NULL);
        int rl = se_decode_object_flags(j, kind, NULL, flags, &lean, NULL);
        if (rf == 0 && rl != 0)
                abort();
        se_object_unref(full);
        se_object_unref(lean);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_error_t err;
        json_t *j = json_loadb((const char *)data, size, 0, &err);
        if (!j)
                return 0;
        for (int k = 0; k < SE_KIND_COUNT; k++)
                check(j, k, 0);
        check(j, SE_KIND_POD, SE_DECODE_SLIM_POD);
        check_lean(j, SE_KIND_SERVICE, SE_DECODE_DNS_SERVICES);
        check_lean(j, SE_KIND_ENDPOINT_SLICE, SE_DECODE_DNS_SLICES);
        check_lean(j, SE_KIND_ENDPOINT_SLICE, SE_DECODE_PROXY_SLICES);
        json_decref(j);
        return 0;
}
