/* kube_client.h — HTTP to the API server and the REST verbs.
 *
 * A client holds a small pool of libcurl easy handles (connections are
 * reused), a client-side QPS/burst token bucket, and the credentials of a
 * config (bearer token, token file re-read every minute and after a 401,
 * exec plugin credentials cached until they expire, client certificates,
 * basic auth). It is thread-safe: any number of threads may issue requests.
 *
 * Errors: every fallible call returns 0 or a negative errno. API results map
 * through ONE table (se_kube_status_errno) keeping the server's message in
 * the diag: `GET /api/v1/pods: Forbidden (403): pods is forbidden: ...`.
 *
 *   reason / HTTP code                        errno
 *   NotFound 404                              -ENOENT
 *   AlreadyExists 409                         -EEXIST
 *   Conflict 409, Gone/Expired 410            -ESTALE  (re-read and retry)
 *   Forbidden 403                             -EACCES
 *   Unauthorized 401                          -EPERM
 *   Invalid 422, BadRequest 400               -EINVAL
 *   TooManyRequests 429, ServiceUnavailable   -EAGAIN
 *   Timeout 504 / ServerTimeout               -ETIMEDOUT
 *   RequestEntityTooLarge 413                 -E2BIG
 *   MethodNotAllowed 405, Unsupported 415     -EOPNOTSUPP
 *   other 5xx                                 -EIO
 *   transport failure (connect, TLS)          -ECONNREFUSED / -EHOSTUNREACH / -EIO
 *   response body over the cap                -EFBIG
 *   cancelled                                 -ECANCELED
 *
 * Retries: 429 and 503 are retried for every verb (the server did not act),
 * other 5xx and transport errors only for GET; `Retry-After` is honoured
 * (capped at 30 s), otherwise the delay starts at 200 ms and doubles. */
#ifndef SVCENV_KUBE_CLIENT_H
#define SVCENV_KUBE_CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include <svcenv/diag.h>
#include <svcenv/kube.h>
#include <svcenv/model.h>
#include <svcenv/strbuf.h>

#ifndef SVCENV_VERSION
# define SVCENV_VERSION "0.1.0"
#endif
#define SE_KUBE_USER_AGENT "svcenv/" SVCENV_VERSION

#define SE_KUBE_MAX_BODY ((size_t)64 << 20) /* default cap of one response body */

/* ---- status mapping ---- */

/* The negative errno for an HTTP status code and the Status `reason` (may be
 * NULL or ""; the reason wins when it is known). 0 for 2xx. */
int se_kube_status_errno(long code, const char *reason);

/* The API server's own message in a diag this client filled (what follows
 * "METHOD PATH: Reason (code): "), or the whole text when there is none. */
const char *se_kube_diag_message(const struct se_diag *diag);

/* ---- token bucket (client-side QPS limit; pure, not locked) ---- */

struct se_token_bucket {
        double qps; /* tokens added per second; <= 0: unlimited */
        double burst; /* capacity */
        double tokens; /* may go negative: reservations not yet due */
        uint64_t last_ns;
};

/* Starts full at time now_ns. */
void se_token_bucket_init(struct se_token_bucket *b, double qps, unsigned burst, uint64_t now_ns);
/* Takes one token at now_ns and returns how long the caller must wait before
 * using it (0 when one was available). */
uint64_t se_token_bucket_reserve(struct se_token_bucket *b, uint64_t now_ns);

/* ---- client ---- */

struct se_kube_client;

struct se_kube_client_opts {
        double qps; /* 0: 5 (client-go's default); < 0: unlimited */
        unsigned burst; /* 0: 10 */
        long timeout_ms; /* whole non-watch request; 0: 60 s */
        long connect_timeout_ms; /* 0: 10 s */
        size_t max_body; /* cap of one response body; 0: SE_KUBE_MAX_BODY */
        int max_retries; /* 0: 3; < 0: none */
        const char *user_agent; /* NULL: SE_KUBE_USER_AGENT */
};

/* Makes a client for cfg (copied: the caller may free cfg afterwards). opts
 * may be NULL. Reads CA/cert/key files now (errors name the field).
 * 0 or -ENOMEM/-EINVAL/-EIO with diag filled. */
int se_kube_client_new(const struct se_kube_config *cfg, const struct se_kube_client_opts *opts,
                       struct se_kube_client **ret, struct se_diag *diag);
/* What every binary does with --kubeconfig/--master: se_kube_config_load(
 * config_opts), then se_kube_client_new(opts). 0 and a new client in *ret, or
 * the first step's negative errno with diag's text never empty (strerror when
 * the step said nothing more), so the caller only prints it. */
int se_kube_client_load(const struct se_kube_config_opts *config_opts,
                        const struct se_kube_client_opts *opts, struct se_kube_client **ret,
                        struct se_diag *diag);
/* NULL-safe; returns NULL. No request may be running. */
struct se_kube_client *se_kube_client_free(struct se_kube_client *c);
/* Borrowed: the config the client uses (namespace, server). */
const struct se_kube_config *se_kube_client_config(const struct se_kube_client *c);
/* Makes every running and future request of c fail with -ECANCELED
 * (shutdown). Safe from any thread. */
void se_kube_client_cancel(struct se_kube_client *c);
/* Whether the last request of c to finish reached the API server: an
 * HTTP answer below 500 (429 and 4xx too: the server is there). A
 * connection that could not be made or broke before any answer, or a 5xx
 * (the API server up, its storage not), counts as unreachable; cancelled
 * requests and a watch ending after its answer do not count. False before
 * any request finished. For readiness checks; any thread. */
bool se_kube_client_reachable(const struct se_kube_client *c);

/* One raw request. path starts with '/' and holds the query. body may be
 * NULL. On success (2xx) returns 0 and the body in *ret_body (may be NULL
 * to drop it). Otherwise the mapped errno with diag holding the server's
 * message. ret_code (may be NULL) receives the HTTP code (0: none). cancel
 * (may be NULL) aborts the request when it becomes true. */
int se_kube_request(struct se_kube_client *c, const char *method, const char *path,
                    const char *content_type, const char *body, size_t body_len,
                    const atomic_bool *cancel, struct se_strbuf *ret_body, long *ret_code,
                    struct se_diag *diag);

/* ---- resources ---- */

/* Where a resource lives: "/api/v1" + "services", namespaced or not. */
struct se_kube_resource {
        const char *prefix; /* "/api/v1", "/apis/discovery.k8s.io/v1" */
        const char *plural;
        bool namespaced;
        const char *kind; /* "Service": for bodies the client builds */
        const char *api_version; /* "v1", "coordination.k8s.io/v1" */
};

/* The resource of a modelled kind (static). */
const struct se_kube_resource *se_kube_resource_of(enum se_kind kind);
extern const struct se_kube_resource se_kube_leases;

/* Writes the path of res in ns (NULL or "": all namespaces / cluster scope),
 * with "/name" when name is given, into buf. 0 or -E2BIG/-EINVAL. */
int se_kube_path(const struct se_kube_resource *res, const char *ns, const char *name, char *buf,
                 size_t size);

/* GET one object as JSON (*ret new reference). */
int se_kube_get_json(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                     const char *name, json_t **ret, struct se_diag *diag);
/* GET one modelled object, decoded (*ret new reference). */
int se_kube_get(struct se_kube_client *c, enum se_kind kind, const char *ns, const char *name,
                struct se_object **ret, struct se_diag *diag);

struct se_kube_list_opts {
        const char *label_selector;
        const char *field_selector;
        unsigned limit; /* page size; 0: 500 */
        const char *resource_version; /* NULL: most recent; "0": any (watch cache) */
        unsigned decode_flags; /* se_kube_list: SE_DECODE_* (decode.h) */
};

/* Called for each decoded item; consumes obj. Return < 0 to stop the list
 * with that error. */
typedef int (*se_kube_item_fn)(void *data, struct se_object *obj);
/* Called for each raw item (borrowed; valid during the call). */
typedef int (*se_kube_json_item_fn)(void *data, const json_t *item);

/* Lists a resource page by page (limit/continue): only one page's JSON tree
 * is held at a time. Calls fn for every item. ret_rv (may be NULL) receives
 * the list's resourceVersion (for a watch to start from). A continue token
 * that expired gives -ESTALE. */
#define SE_KUBE_RV_MAX 64
int se_kube_list_json(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                      const struct se_kube_list_opts *opts, se_kube_json_item_fn fn, void *data,
                      char ret_rv[SE_KUBE_RV_MAX], struct se_diag *diag);
/* Parses one page of a list response (`{"metadata": {...}, "items": [...]}`)
 * without building the whole tree: fn gets each item in turn (borrowed;
 * freed when fn returns), *ret_meta (new reference; {} when absent) the
 * list's metadata. Items before a syntax error may already have been handed
 * to fn. 0, fn's error, -EIO with diag (not a JSON list), -ENOMEM. */
int se_kube_list_page_parse(const char *buf, size_t len, json_t **ret_meta, se_kube_json_item_fn fn,
                            void *data, struct se_diag *diag);
/* The same, each item decoded into the model (se_decode_object_flags with
 * opts->decode_flags). Items the
 * decoder rejects fail the list with -EINVAL naming the object and field. */
int se_kube_list(struct se_kube_client *c, enum se_kind kind, const char *ns,
                 const struct se_kube_list_opts *opts, se_kube_item_fn fn, void *data,
                 char ret_rv[SE_KUBE_RV_MAX], struct se_diag *diag);

/* POST body (a full object) to the collection; *ret (may be NULL) the
 * created object. -EEXIST when it exists. */
int se_kube_create(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                   const json_t *body, json_t **ret, struct se_diag *diag);
/* PUT body to the object named in body.metadata.name. body should carry the
 * resourceVersion read earlier: a changed object gives -ESTALE (409). */
int se_kube_update(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                   const json_t *body, json_t **ret, struct se_diag *diag);

enum se_kube_patch_type {
        SE_KUBE_PATCH_MERGE, /* application/merge-patch+json (RFC 7386) */
        SE_KUBE_PATCH_JSON, /* application/json-patch+json (RFC 6902) */
        SE_KUBE_PATCH_APPLY, /* server-side apply, needs field_manager */
};

struct se_kube_patch_opts {
        enum se_kube_patch_type type;
        const char *field_manager; /* required for APPLY */
        bool force; /* APPLY: take fields owned by other managers */
        const char *subresource; /* e.g. "status"; NULL: the object */
};

/* PATCH the named object; *ret (may be NULL) the result. Apply conflicts
 * give -ESTALE with the conflicting managers in the message. */
int se_kube_patch(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                  const char *name, const struct se_kube_patch_opts *opts, const json_t *patch,
                  json_t **ret, struct se_diag *diag);

struct se_kube_delete_opts {
        const char *uid; /* precondition: only this uid */
        const char *resource_version; /* precondition: only this version */
        const char *propagation; /* Foreground, Background, Orphan; NULL: default */
};

/* DELETE the named object. opts may be NULL. A failed precondition gives
 * -ESTALE; a missing object -ENOENT. */
int se_kube_delete(struct se_kube_client *c, const struct se_kube_resource *res, const char *ns,
                   const char *name, const struct se_kube_delete_opts *opts, struct se_diag *diag);

#endif
