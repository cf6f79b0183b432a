/* Slim Endpoints (SE_DECODE_SLIM_ENDPOINTS) for the planner tests: every
 * plan against an existing object is made again against the object as the
 * controller caches it (encoded, decoded slim), and must be the same. */
#ifndef TEST_ENDPOINTS_SLIM_EP_H
#define TEST_ENDPOINTS_SLIM_EP_H

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <svcenv/decode.h>
#include <svcenv/encode.h>
#include <svcenv/endpoints.h>

static inline struct se_endpoints *fx_ep_decode(const json_t *j, unsigned flags)
{
        struct se_object *o = NULL;
        struct se_decode_error e;
        int r = se_decode_object_flags(j, SE_KIND_ENDPOINTS, NULL, flags, &o, &e);
        if (r != 0)
                fail_msg("decode Endpoints: %d %s: %s", r, e.path, e.message);
        struct se_endpoints *ep = (struct se_endpoints *)o;
        assert_int_equal(ep->slim, (flags & SE_DECODE_SLIM_ENDPOINTS) != 0);
        if (ep->slim) {
                assert_null(ep->subsets);
                assert_int_equal(ep->n_subsets, 0);
        }
        return ep;
}

/* ep as the controller's cache holds it (new reference). */
static inline struct se_endpoints *fx_ep_slim(const struct se_endpoints *ep)
{
        json_t *j = se_encode_object(&ep->obj);
        assert_non_null(j);
        struct se_endpoints *s = fx_ep_decode(j, SE_DECODE_SLIM_ENDPOINTS);
        json_decref(j);
        assert_int_equal(s->n_addresses, se_endpoints_n_addresses(ep));
        /* it goes nowhere near the encoder */
        assert_null(se_encode_object(&s->obj));
        return s;
}

static inline char *fx_ep_dump(const struct se_endpoints *ep)
{
        if (!ep)
                return strdup("(none)");
        json_t *j = se_encode_object(&ep->obj);
        assert_non_null(j);
        char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        json_decref(j);
        assert_non_null(s);
        return s;
}

static inline void fx_ep_assert_same_plan(const struct se_endpoints_plan *a,
                                          const struct se_endpoints_plan *b)
{
        assert_int_equal(a->action, b->action);
        char *x = fx_ep_dump(a->obj), *y = fx_ep_dump(b->obj);
        assert_string_equal(x, y);
        free(x);
        free(y);
}

/* se_endpoints_plan, checked against the slim form of existing. */
static inline int fx_ep_plan_both(const struct se_endpoints_input *in,
                                  const struct se_endpoints *existing,
                                  const struct se_endpoints_opts *opts,
                                  struct se_endpoints_plan *ret)
{
        int r = se_endpoints_plan(in, existing, opts, ret);
        if (r < 0 || !existing)
                return r;
        struct se_endpoints *slim = fx_ep_slim(existing);
        struct se_endpoints_plan p;
        assert_int_equal(se_endpoints_plan(in, slim, opts, &p), 0);
        fx_ep_assert_same_plan(ret, &p);
        se_endpoints_plan_release(&p);
        se_object_unref(&slim->obj);
        return r;
}

/* se_endpoints_equal, checked against the slim form of have. */
static inline bool fx_ep_equal_both(const struct se_endpoints *want,
                                    const struct se_endpoints *have, const struct se_service *svc,
                                    const struct se_endpoints_opts *opts)
{
        bool eq = se_endpoints_equal(want, have, svc, opts);
        struct se_endpoints *slim = fx_ep_slim(have);
        assert_int_equal(se_endpoints_equal(want, slim, svc, opts), eq);
        se_object_unref(&slim->obj);
        return eq;
}

#endif
