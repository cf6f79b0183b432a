/* decode.h — Kubernetes JSON (a jansson tree) to typed objects.
 *
 * The decoder reads only the fields svcenv uses, ignores unknown fields, and
 * checks types and values: a wrong type or an invalid value is an error that
 * names the field path (`spec.ports[0].port: ...`). It never keeps the JSON
 * tree: the caller may free it right after. The same decoder serves manifest
 * files (see manifest.h) and API responses. */
#ifndef SVCENV_DECODE_H
#define SVCENV_DECODE_H

#include <jansson.h>

#include <svcenv/model.h>

/* Limits on what one object may hold; larger input is refused. */
#define SE_MAX_NAME_LEN    253
#define SE_MAX_STRING_LEN  (1u << 20) /* any single string value */
#define SE_MAX_ARRAY_ITEMS 100000u /* any single array or map */

struct se_decode_error {
        char path[256]; /* field path, e.g. "spec.ports[0].targetPort"; "" for the object */
        char message[256]; /* what is wrong */
};

/* Decodes one API object. `json` must be an object with apiVersion and kind.
 * Objects without a namespace get default_ns (NULL: "default") when the kind
 * is namespaced.
 * Returns 0 and *ret (new reference) on success; 1 and *ret = NULL when the
 * kind is one svcenv does not model (the object is skipped); -EINVAL with
 * *err filled when the object is malformed; -ENOMEM. */
int se_decode_object(const json_t *json, const char *default_ns, struct se_object **ret,
                     struct se_decode_error *err);

/* Decodes an object whose kind is already known (API list items carry no
 * kind). Same results as se_decode_object, never 1. */
int se_decode_object_as(const json_t *json, enum se_kind kind, const char *default_ns,
                        struct se_object **ret, struct se_decode_error *err);

/* Decode flags. */
enum {
        /* Pods only (other kinds ignore it): keep just what the Endpoints and
         * EndpointSlice controllers read, for a cache of many pods:
         * metadata name, namespace, uid, resourceVersion, deletionTimestamp
         * and labels; spec nodeName, hostname, subdomain; the containers
         * that declare ports and the init containers with restartPolicy
         * Always that do (name, restartPolicy and each port's name,
         * containerPort, protocol); status phase, podIP(s) and the Ready
         * condition. generation is checked but not kept (so meta.more and
         * the pod's `more` are NULL). Everything else is NULL/0 and is not
         * checked: generateName, creationTimestamp, annotations, ownerReferences,
         * serviceAccountName, hostNetwork, enableServiceLinks, images, env,
         * envFrom, resources, hostPort/hostIP, hostIP(s), other conditions.
         * Such a pod is for se_endpoints_* only, never for envvars or
         * encoding. */
        SE_DECODE_SLIM_POD = 1u << 0,
        /* Endpoints for the controller's cache: the subsets are checked as
         * without the flag (the same errors) and then replaced by their
         * digest and address count (se_endpoints.slim; see model.h); the
         * metadata is kept whole. Such an Endpoints is for
         * se_endpoints_equal/_plan only, never for encoding. -EIO is
         * possible too (libcrypto). */
        SE_DECODE_SLIM_ENDPOINTS = 1u << 1,
        /* EndpointSlices for the controller's cache: the endpoints are
         * checked as usual, then replaced by per-endpoint digests and the
         * hints of those that have some (se_endpoint_slice.slim, digests,
         * hints; see model.h). Such a slice is for se_slices_plan only:
         * the encoder refuses it. */
        SE_DECODE_SLIM_SLICES = 1u << 2,
        /* Any kind: short strings that recur across objects point into one
         * process-wide pool instead of the object's arena: metadata
         * namespace, label keys and values, a Service's selector, a pod's
         * nodeName and (slim pods) its container and port names, a slice
         * endpoint's nodeName and zone. A string
         * enters the pool the second time it is decoded; strings over 64
         * bytes never do. The pool is never freed and is capped (65,536
         * strings, 4 MiB of text, 1 MiB of table); once full, strings are
         * copied into each object as without the flag. Decoded values are
         * the same either way, and the pool is thread-safe. For long-lived
         * caches of many similar objects (the controller); a process that
         * decodes untrusted one-off input (admission) gains nothing. */
        SE_DECODE_INTERN = 1u << 3,
        /* Any kind: a string value with NUL bytes (JSON's \u0000, which the
         * API server accepts in annotation, env and data values) decodes
         * with each NUL as the two bytes C0 80, an overlong form no valid
         * UTF-8 text holds, instead of failing with "string contains a NUL
         * byte". The value then compares unequal to every NUL-free string and
         * is one byte longer per NUL. For deciding about objects, not for
         * printing them: the admission webhook's pod, and every informer
         * (one such object must not fail a whole list). The JSON must be
         * loaded with JSON_ALLOW_NUL. */
        SE_DECODE_NUL_AS_C080 = 1u << 4,
        /* EndpointSlices for a DNS server's cache: only what cluster DNS
         * reads is kept and checked: the metadata as for a slim pod
         * (no generateName, creationTimestamp, annotations or
         * ownerReferences; generation checked, not kept) but without the
         * uid (unread, unchecked), addressType, the
         * ports, and of each endpoint its addresses, hostname and
         * conditions: their `more` is NULL (no targetRef, nodeName, zone
         * or hints; not checked). Such a slice is for the DNS
         * zone only, never for encoding or the controllers. */
        SE_DECODE_DNS_SLICES = 1u << 5,
        /* Services for a DNS server's cache: the metadata as for
         * SE_DECODE_DNS_SLICES without labels, and no selector (unread and
         * unchecked); the rest of the spec and status as without the flag
         * (and checked as without it). Such a Service is for the DNS zone
         * only, never for encoding, the proxies or the controllers. */
        SE_DECODE_DNS_SERVICES = 1u << 6,
        /* EndpointSlices for a service proxy's cache: the endpoints'
         * targetRef and hostname, and the metadata's uid, generateName,
         * creationTimestamp and ownerReferences are neither kept nor
         * checked (generation is checked, not kept); labels, annotations
         * (the trigger time), addressType, ports and the rest of each
         * endpoint are as without the flag. Such a slice is for the
         * proxies only, never for encoding, DNS or the controllers. */
        SE_DECODE_PROXY_SLICES = 1u << 7,
};

/* se_decode_object_as with flags (SE_DECODE_*; 0 is se_decode_object_as). */
int se_decode_object_flags(const json_t *json, enum se_kind kind, const char *default_ns,
                           unsigned flags, struct se_object **ret, struct se_decode_error *err);

/* se_decode_object with flags: the kind from the object (1 for a kind svcenv
 * does not model). */
int se_decode_object_flagged(const json_t *json, const char *default_ns, unsigned flags,
                             struct se_object **ret, struct se_decode_error *err);

#endif
