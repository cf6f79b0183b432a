/* encode.h — typed objects back to Kubernetes JSON.
 *
 * Field order and omission follow the API server's JSON (omitempty fields are
 * left out), so output can be diffed against what kubectl shows. */
#ifndef SVCENV_ENCODE_H
#define SVCENV_ENCODE_H

#include <jansson.h>

#include <svcenv/model.h>

/* New JSON object for obj (new reference), NULL on -ENOMEM or for a slim
 * Endpoints or EndpointSlice (SE_DECODE_SLIM_ENDPOINTS / _SLICES: their
 * subsets or endpoints are gone). Every kind is supported; fields svcenv
 * does not model are not reproduced. */
json_t *se_encode_object(const struct se_object *obj);
/* {"apiVersion":"v1","kind":"List","metadata":{},"items":[...]}; new reference. */
json_t *se_encode_list(const struct se_object *const *objs, size_t n);
/* Writes json as YAML (block style, keys in the object's order) to buf.
 * 0 or -ENOMEM. */
struct se_strbuf;
int se_encode_yaml(const json_t *json, struct se_strbuf *out);

#endif
