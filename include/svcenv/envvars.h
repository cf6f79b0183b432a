/* envvars.h — the environment the kubelet (v1.36) gives a container.
 *
 * Pure: data in, data out; no I/O, no logging. Three layers, usable apart:
 *
 *  1. se_envvars_services(): the service variables a pod in a namespace gets
 *     ({SVC}_SERVICE_HOST, {SVC}_SERVICE_PORT[_NAME], {SVC}_PORT[_N_PROTO...]).
 *  2. se_envvars_container(): the container's own variables (envFrom, then
 *     env with valueFrom resolved and $(VAR) expanded against the earlier
 *     container variables, then the service variables).
 *  3. se_envvars_build(): both merged the way the kubelet merges them: the
 *     container's variables, then every service variable whose name the
 *     container did not set.
 *
 * Which services: `default/kubernetes` always; the pod namespace's services
 * when enableServiceLinks is true (unset means true, the API default); a
 * same-namespace Service named `kubernetes` replaces the master one when
 * links are on; services whose clusterIP is "", absent or "None" give
 * nothing. Only spec.clusterIP (the primary family) is used.
 *
 * Order (upstream's is random; ours is fixed):
 *  - service variables: services sorted by name, each service's variables in
 *    generation order (HOST, PORT, PORT_<name>..., then per port the link
 *    family); a name produced twice appears once;
 *  - cross-service collisions (service `x` makes X_SERVICE_PORT=80, service
 *    `x-service` makes X_SERVICE_PORT=tcp://...): the first service in name
 *    order wins. A colliding name always comes from a service whose name is
 *    a prefix of the other's, so this is "the shorter name wins", which keeps
 *    `kubernetes`'s KUBERNETES_SERVICE_PORT against `kubernetes-service`.
 *    The losers are kept in the entry's `lost` list;
 *  - container variables: in the order of their first definition (envFrom
 *    sources in order, each ConfigMap/Secret by key, then env in
 *    declaration order); a name defined again keeps its first position and
 *    takes the last value, as the kubelet's map does.
 *
 * fieldRef status.hostIP(s) come from the pod's Node (store input) the way
 * the kubelet reads its own node, else from the pod's status; status.podIP(s)
 * keep one address per family, the host's family first.
 *
 * $(VAR) expansion follows third_party/forked/golang/expansion exactly:
 * `$$` is `$`; `$(NAME)` up to the first `)` is looked up in the container
 * variables set so far, then in the service variables; a name not found,
 * and a `$(` without `)`, are kept literally; values found are not expanded
 * again; `$` followed by anything else is copied; the character after `$` is
 * read as UTF-8 and an invalid byte there becomes U+FFFD.
 *
 * Threading: with a store in the input, hold se_store_rdlock() around the
 * call; the functions keep no state between calls.
 *
 * Ownership: a struct se_env_list owns every string it holds (its arena).
 * Inputs are borrowed and must stay unchanged during the call; the result
 * does not point into them. Errors: functions return 0 or a negative errno
 * and, where they take one, fill `diag` (NULL-safe) with the message the
 * kubelet would give, e.g. `couldn't find key x in ConfigMap ns/name`. */
#ifndef SVCENV_ENVVARS_H
#define SVCENV_ENVVARS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/arena.h>
#include <svcenv/diag.h>
#include <svcenv/model.h>
#include <svcenv/store.h>
#include <svcenv/strbuf.h>

/* Caps on what pod specs control. */
#define SE_ENVVARS_MAX_VALUE ((size_t)16 << 20) /* one expanded value */
#define SE_ENVVARS_MAX_TOTAL ((size_t)64 << 20) /* a container's own values */

/* Linux exec limits the size guard measures against (see se_env_list_size):
 * every NAME=VALUE string counts its bytes plus NUL plus one 8-byte pointer;
 * the total of argv and envp may not pass a quarter of the stack limit
 * (2 MiB with the usual 8 MiB stack), and one string may not pass
 * MAX_ARG_STRLEN (128 KiB). Past either, exec fails with E2BIG ("argument
 * list too long"). The guard warns at half the total. */
#define SE_ENVVARS_EXEC_TOTAL  ((size_t)2 << 20)
#define SE_ENVVARS_EXEC_STRING ((size_t)128 << 10)
#define SE_ENVVARS_WARN_TOTAL  ((size_t)1 << 20)
#define SE_ENVVARS_WARN_COUNT  5000

/* Where a variable came from. */
enum se_env_origin {
        SE_ENV_FROM_SERVICE = 0, /* object = "ns/name" of the Service, port = index or -1 */
        SE_ENV_FROM_VALUE, /* env[].value (expanded); index = env index */
        SE_ENV_FROM_FIELD, /* env[].valueFrom.fieldRef; key = fieldPath */
        SE_ENV_FROM_RESOURCE, /* resourceFieldRef; key = resource, object = container */
        SE_ENV_FROM_CONFIGMAP_KEY, /* configMapKeyRef; object = "ns/name", key */
        SE_ENV_FROM_SECRET_KEY, /* secretKeyRef; object = "ns/name", key */
        SE_ENV_FROM_ENVFROM_CONFIGMAP, /* envFrom configMapRef; object, key (before prefix) */
        SE_ENV_FROM_ENVFROM_SECRET, /* envFrom secretRef; object, key (before prefix) */
};

/* A variable that lost a name collision (for --explain). */
struct se_env_loser {
        const char *value;
        enum se_env_origin origin;
        const char *object;
        const char *key;
        int32_t port;
        struct se_env_loser *next;
};

struct se_env_entry {
        const char *name;
        const char *value;
        enum se_env_origin origin;
        const char *object; /* see enum se_env_origin; NULL when none */
        const char *key; /* see enum se_env_origin; NULL when none */
        int32_t port; /* service port index, -1 for _SERVICE_HOST; else -1 */
        uint32_t index; /* env/envFrom index in the container; 0 for services */
        struct se_env_loser *lost; /* what this entry won over, newest first */
};

struct se_env_list {
        struct se_env_entry *items;
        size_t n;
        size_t alloc;
        struct se_arena arena; /* every string and loser of the list */
        struct se_arena adopted; /* strings taken over from another list */
};

#define SE_ENV_LIST_INIT                   \
 {                                         \
  NULL, 0, 0, SE_ARENA_INIT, SE_ARENA_INIT \
 }

/* Where services, ConfigMaps and Secrets are looked up. With a store, only
 * the pod's namespace and `default` are read (cost follows the namespace,
 * not the cluster). Without one, the arrays are scanned. */
struct se_envvars_input {
        const struct se_store *store; /* may be NULL */
        const struct se_service *const *services;
        size_t n_services;
        const struct se_configmap *const *configmaps;
        size_t n_configmaps;
        const struct se_secret *const *secrets;
        size_t n_secrets;
};

void se_env_list_init(struct se_env_list *l);
/* Frees everything; the list is empty and usable again. */
void se_env_list_release(struct se_env_list *l);
/* Borrowed entry of that name, or NULL. Linear; for tests and callers with
 * short lists. */
const struct se_env_entry *se_env_list_find(const struct se_env_list *l, const char *name);

/* Size of the list as an exec environment: *ret_count variables,
 * *ret_bytes = sum of strlen(NAME=VALUE) + 1 + 8 (pointer), *ret_longest =
 * the longest NAME=VALUE + 1. Any pointer may be NULL. */
void se_env_list_size(const struct se_env_list *l, size_t *ret_count, size_t *ret_bytes,
                      size_t *ret_longest);

/* Appends a one-line description of where e came from to sb ("service
 * shop/cart port 0 (http)", "configMap shop/cfg key currency", ...). The
 * strbuf's sticky error is returned. */
int se_env_entry_describe(const struct se_env_entry *e, struct se_strbuf *sb);
/* Same for a loser. */
int se_env_loser_describe(const struct se_env_loser *l, struct se_strbuf *sb);

/* The variables of one service, in generation order, appended to out (no
 * deduplication). Nothing for a service without a usable clusterIP or
 * without ports. 0 or -ENOMEM. */
int se_envvars_from_service(const struct se_service *svc, struct se_env_list *out);

/* Service variables for a pod in namespace ns (order and collisions: see
 * above). out must be empty (initialised); on failure it is released.
 * 0 or -ENOMEM. */
int se_envvars_services(const struct se_envvars_input *in, const char *ns, bool service_links,
                        struct se_env_list *out);

/* se_envvars_services() for the pod's namespace and its enableServiceLinks
 * (unset means true): the service variables the pod's containers get. */
int se_envvars_pod_services(const struct se_envvars_input *in, const struct se_pod *pod,
                            struct se_env_list *out);

/* The container's own variables after envFrom, valueFrom and expansion,
 * looked up against svc (the pod's service variables, may be NULL). The
 * container must belong to pod (containers, initContainers). out must be
 * empty; on failure it is released and diag says why:
 *   -ENOENT  a required ConfigMap/Secret or key is missing
 *            (`configmaps "x" not found`, `couldn't find key k in Secret ns/x`);
 *   -EINVAL  an unsupported fieldRef/resourceFieldRef (the kubelet's words);
 *   -ENODATA a resourceFieldRef limit that is not set (the kubelet would use
 *            the node's allocatable, which svcenv does not know);
 *   -E2BIG   an expanded value over SE_ENVVARS_MAX_VALUE, or all of the
 *            container's values over SE_ENVVARS_MAX_TOTAL (expansion can
 *            repeat a value, so a small spec could otherwise ask for GiBs);
 *   -ENOMEM. */
int se_envvars_container(const struct se_envvars_input *in, const struct se_pod *pod,
                         const struct se_container *c, const struct se_env_list *svc,
                         struct se_env_list *out, struct se_diag *diag);

/* The full environment: se_envvars_container() followed by the service
 * variables (se_envvars_services() for the pod) that it did not set; a
 * container variable that shadows a service variable lists it in `lost`.
 * out must be empty (initialised); on failure it is released. Same errors
 * as se_envvars_container(). */
int se_envvars_build(const struct se_envvars_input *in, const struct se_pod *pod,
                     const struct se_container *c, struct se_env_list *out, struct se_diag *diag);

/* Looks a name up for expansion: the value, or NULL when undefined. */
typedef const char *(*se_envvars_lookup_fn)(void *data, const char *name, size_t len);

/* Expands $(VAR) references in input[0..len) into out (appended). lookup is
 * called for each reference. Returns the strbuf's sticky error (0, -ENOMEM,
 * -E2BIG when out passes its max). */
int se_envvars_expand(const char *input, size_t len, se_envvars_lookup_fn lookup, void *data,
                      struct se_strbuf *out);

#endif
