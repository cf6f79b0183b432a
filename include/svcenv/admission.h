/* admission.h — the mutating admission webhook's decision, as a pure function.
 *
 * In: the body of an AdmissionReview (admission.k8s.io/v1 or v1beta1, the two
 * are field-identical) and the services to read. Out: the HTTP status and
 * the AdmissionReview to answer with, in the apiVersion that was sent, the
 * request's uid echoed.
 *
 * What is mutated: only `pods` CREATE without subresource. Every container
 * and init container (ephemeral containers never arrive on CREATE) gets the
 * service variables se_envvars_pod_services() computes for the pod, inserted
 * *before* the container's own env entries so that its $(VAR) references
 * resolve as they do under the kubelet:
 *  - a container without `env` gets one `add .../env` with the whole array;
 *  - a container with `env` gets one `add .../env/K` per variable, K = 0, 1,
 *    ... so they land in order in front of the existing entries;
 *  - names the container already defines in `env` are skipped (the pod wins;
 *    a different value is reported in `warnings`), and so are keys of an
 *    envFrom source found in the input; an envFrom source not in the input
 *    is reported in `warnings` (its keys cannot be known, and an injected
 *    env entry would win over them where the kubelet's would not).
 * Idempotent: a second pass (reinvocationPolicy: IfNeeded) finds every name
 * defined and adds nothing; the check is per container and per variable, so
 * a container another webhook added meanwhile is still served.
 *
 * Pod controls (annotations on the pod):
 *  - `svcenv.io/inject: "false"`  nothing is injected;
 *  - `svcenv.io/services: "a,b"`  only those services of the pod's namespace
 *    (`kubernetes` also names the master service default/kubernetes);
 *  - `spec.enableServiceLinks: false` is honoured as the kubelet does: only
 *    the master service's variables;
 *  - mirror pods (`kubernetes.io/config.mirror`) are never mutated.
 * A pod that got variables is marked `svcenv.io/injected: "true"`.
 *
 * Size guard: a container whose added variables would pass max_env_bytes
 * (counted as the kubelet's exec does: NAME=VALUE, NUL, 8-byte pointer; the
 * container's own literal values counted too) gets nothing and a warning,
 * instead of a pod that fails to start with E2BIG.
 *
 * Errors: a body that is not an AdmissionReview gets HTTP 400 and a plain
 * message; a failure while computing (a pod that does not decode, -ENOMEM)
 * is answered per failure_deny: allowed unchanged with a warning, or denied
 * with status 500. dryRun requests are handled like any other (no side
 * effects exist). The function returns a negative errno only when not even
 * a response could be built (-ENOMEM); the caller then answers 500.
 *
 * Threading: pure; with a store in the input, hold its read lock. */
#ifndef SVCENV_ADMISSION_H
#define SVCENV_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>

#include <svcenv/envvars.h>

#define SE_ADMISSION_MAX_BODY          ((size_t)4 << 20) /* over it: 400 (413 from httpd) */
#define SE_ADMISSION_DEFAULT_ENV_BYTES SE_ENVVARS_WARN_TOTAL /* 1 MiB */
#define SE_ADMISSION_MAX_WARNINGS      16

#define SE_ADMISSION_ANN_INJECT   "svcenv.io/inject"
#define SE_ADMISSION_ANN_SERVICES "svcenv.io/services"
#define SE_ADMISSION_ANN_INJECTED "svcenv.io/injected"

struct se_admission_options {
        size_t max_env_bytes; /* 0: SE_ADMISSION_DEFAULT_ENV_BYTES */
        bool failure_deny; /* --failure-mode deny */
};

enum se_admission_outcome {
        SE_ADMIT_PATCHED = 0, /* allowed with a patch */
        SE_ADMIT_UNCHANGED, /* allowed, nothing to add (or not a pod CREATE) */
        SE_ADMIT_SKIPPED, /* allowed, the pod opted out or is a mirror pod */
        SE_ADMIT_GUARDED, /* allowed, a container passed the size guard */
        SE_ADMIT_ERROR, /* internal failure answered per failure mode */
        SE_ADMIT_INVALID, /* malformed review: HTTP 400 */
        SE_ADMIT_OUTCOME_COUNT
};

struct se_admission_result {
        int http_status; /* 200 or 400 */
        char *body; /* owned; JSON (200) or a one-line message (400) */
        size_t len;
        enum se_admission_outcome outcome;
        size_t patch_bytes; /* JSON patch before base64; 0 without patch */
        size_t n_vars; /* variables added over all containers */
};

/* Name of an outcome for metrics labels ("patched", "unchanged", ...). */
const char *se_admission_outcome_name(enum se_admission_outcome o);

/* Decides on one review. res is filled (release it with
 * se_admission_result_release) whenever 0 is returned. Returns 0 or -ENOMEM. */
int se_admission_review(const struct se_envvars_input *in, const struct se_admission_options *opt,
                        const char *body, size_t len, struct se_admission_result *res);
void se_admission_result_release(struct se_admission_result *res);

/* se_admission_review() against a store, under its read lock: the one entry
 * point the webhook daemon and `svcenv admit` share. */
int se_admission_review_store(const struct se_store *store, const struct se_admission_options *opt,
                              const char *body, size_t len, struct se_admission_result *res);

/* Appends s escaped as one RFC 6901 JSON-pointer token (`~` → `~0`, then
 * `/` → `~1`). Returns the strbuf's sticky error. */
int se_json_pointer_escape(struct se_strbuf *sb, const char *s);

#endif
