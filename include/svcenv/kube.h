/* kube.h — where the API server is and who we are: kubeconfig and in-cluster
 * configuration.
 *
 * Loading follows kubectl and client-go:
 *  - an explicit kubeconfig path loads that one file only;
 *  - otherwise $KUBECONFIG is a ':'-separated list merged in order: for every
 *    named cluster, user and context, and for current-context, the first file
 *    that sets it wins; files that do not exist are skipped;
 *  - otherwise $HOME/.kube/config;
 *  - otherwise, when KUBERNETES_SERVICE_HOST is set, the in-cluster config.
 * Relative paths in a file (certificate files, tokenFile, an exec command
 * containing '/') are resolved against that file's folder.
 *
 * Parsing does no I/O beyond reading the kubeconfig files themselves:
 * certificate and token files are only named here and read when a client is
 * made (se_kube_client_new) or a request needs them; exec plugins run when a
 * request needs a credential.
 *
 * Errors are one line naming the file and the field:
 * `kubeconfig FILE: users[0].user.exec: apiVersion is required`. */
#ifndef SVCENV_KUBE_H
#define SVCENV_KUBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <svcenv/diag.h>

/* Caps on what a kubeconfig may hold. */
#define SE_KUBE_MAX_CONFIG_FILE  ((size_t)4 << 20) /* one kubeconfig file */
#define SE_KUBE_MAX_CONFIG_FILES 64 /* entries of $KUBECONFIG */
#define SE_KUBE_MAX_CRED_FILE    ((size_t)1 << 20) /* token, cert, key, plugin output */

/* Where the in-cluster config lives in a pod. */
#define SE_KUBE_INCLUSTER_ROOT "/var/run/secrets/kubernetes.io/serviceaccount"

/* client.authentication.k8s.io exec credential plugin (users[].user.exec). */
struct se_kube_exec {
        char **argv; /* command then args; NULL-terminated */
        char **env; /* extra "NAME=VALUE" entries; NULL-terminated */
        char *api_version; /* e.g. client.authentication.k8s.io/v1 */
};

/* One resolved configuration: a server and the credentials to use on it.
 * Every string is owned by the config; NULL when not set. Data fields hold
 * decoded bytes (PEM) with their length. */
struct se_kube_config {
        char *server; /* https://host:port, no trailing '/' */
        char *tls_server_name;
        bool insecure; /* insecure-skip-tls-verify */
        char *ca_file;
        char *ca_data;
        size_t ca_len;
        char *cert_file;
        char *cert_data;
        size_t cert_len;
        char *key_file;
        char *key_data;
        size_t key_len;
        char *token; /* static bearer token */
        char *token_file; /* re-read about every minute; wins over token once read */
        char *username; /* basic auth */
        char *password;
        struct se_kube_exec *exec; /* NULL: no plugin */
        char *namespace; /* context's namespace (or the pod's); "default" when unset */
        char *context; /* name of the context used; NULL for in-cluster */
        char *origin; /* "kubeconfig FILE" or "in-cluster config": prefix of messages */
        char *user_path; /* "kubeconfig FILE: users[2].user": prefix of credential errors */
};

struct se_kube_config_opts {
        const char *kubeconfig; /* --kubeconfig: this file only; NULL: loading rules */
        const char *context; /* --context; NULL: current-context */
        const char *master; /* --master: overrides the server; NULL: keep */
        const char *incluster_root; /* NULL: SE_KUBE_INCLUSTER_ROOT (tests fake it) */
        const char *kubeconfig_env; /* NULL: getenv("KUBECONFIG") */
        const char *home; /* NULL: getenv("HOME") */
};

/* Loads the configuration by the rules above. Returns 0 and *ret (free with
 * se_kube_config_free), or a negative errno with diag filled: -ENOENT (no
 * configuration anywhere, a named file missing, context not found),
 * -EINVAL (malformed), -EIO, -ENOMEM. */
int se_kube_config_load(const struct se_kube_config_opts *opts, struct se_kube_config **ret,
                        struct se_diag *diag);

/* Parses several kubeconfig texts merged in order (names[i] names data[i] in
 * messages and is the base for relative paths) and resolves context (NULL:
 * current-context). No file is read. Same results as se_kube_config_load. */
int se_kube_config_parse(const char *const *names, const char *const *data, const size_t *lens,
                         size_t n, const char *context, struct se_kube_config **ret,
                         struct se_diag *diag);

/* The in-cluster config: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
 * (IPv6 hosts in brackets), root/ca.crt, root/token (must be readable now and
 * is re-read later), root/namespace (optional). root NULL: the default.
 * 0, -ENOENT (not in a cluster: variables unset or token missing; diag
 * filled), -ENOMEM. */
int se_kube_config_incluster(const char *root, struct se_kube_config **ret, struct se_diag *diag);

/* NULL-safe; returns NULL. */
struct se_kube_config *se_kube_config_free(struct se_kube_config *cfg);

/* A credential obtained from an exec plugin. */
struct se_kube_exec_cred {
        char *token; /* NULL when the plugin gave a client certificate */
        char *cert_pem;
        char *key_pem;
        int64_t expiry_ns; /* wall clock; 0: does not expire */
};

/* Runs the plugin of cfg (fork/exec with argv, never a shell; stdin
 * /dev/null, stderr inherited, stdout capped at SE_KUBE_MAX_CRED_FILE) with
 * KUBERNETES_EXEC_INFO set, and parses its ExecCredential. 0 with *ret
 * filled (release with se_kube_exec_cred_release), or -EINVAL/-EIO/-ENOENT
 * with diag `kubeconfig FILE: users[0].user.exec: ...`. */
int se_kube_exec_run(const struct se_kube_config *cfg, struct se_kube_exec_cred *ret,
                     struct se_diag *diag);
/* Parses an ExecCredential document (plugin stdout) expected in api_version.
 * Same results as se_kube_exec_run; messages without the prefix. */
int se_kube_exec_parse(const char *data, size_t len, const char *api_version,
                       struct se_kube_exec_cred *ret, struct se_diag *diag);
void se_kube_exec_cred_release(struct se_kube_exec_cred *c);

#endif
