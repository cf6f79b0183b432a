/* The slim form of an EndpointSlice for the planner tests: the slice
 * encoded to API JSON and decoded with SE_DECODE_SLIM_SLICES, as the
 * controller's cache holds it. Include after cmocka.h. */
#ifndef TEST_ENDPOINTS_SLIM_SLICES_H
#define TEST_ENDPOINTS_SLIM_SLICES_H

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/model.h>

static inline struct se_endpoint_slice *slim_slice_of(const struct se_endpoint_slice *full)
{
        json_t *j = se_encode_object(&full->obj);
        assert_non_null(j);
        struct se_object *o = NULL;
        struct se_decode_error e;
        int r = se_decode_object_flags(j, SE_KIND_ENDPOINT_SLICE, NULL, SE_DECODE_SLIM_SLICES, &o,
                                       &e);
        json_decref(j);
        if (r != 0)
                fail_msg("slim decode: %d %s: %s", r, e.path, e.message);
        struct se_endpoint_slice *s = (struct se_endpoint_slice *)o;
        assert_true(s->slim);
        assert_null(s->endpoints);
        assert_int_equal(s->n_endpoints, full->n_endpoints);
        return s;
}

/* Fails unless a and b encode to the same JSON text (field order too). */
static inline void assert_same_json(const struct se_object *a, const struct se_object *b)
{
        json_t *ja = se_encode_object(a), *jb = se_encode_object(b);
        assert_non_null(ja);
        assert_non_null(jb);
        char *da = json_dumps(ja, JSON_COMPACT), *db = json_dumps(jb, JSON_COMPACT);
        assert_non_null(da);
        assert_non_null(db);
        if (strcmp(da, db) != 0)
                fail_msg("objects differ:\n full: %s\n slim: %s", da, db);
        free(da);
        free(db);
        json_decref(ja);
        json_decref(jb);
}

#endif
