/* Fuzz target: a list response page read item by item. */
#include <jansson.h>

#include <svcenv/kube_client.h>

#include "fuzz.h"

static int on_item(void *data, const json_t *item)
{
        size_t *n = data;
        (*n)++;
        return json_is_object(item) || *n < 1000 ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_t *meta;
        struct se_diag d;
        size_t n = 0;
        if (se_kube_list_page_parse((const char *)data, size, &meta, on_item, &n, &d) == 0)
                json_decref(meta);
        return 0;
}
