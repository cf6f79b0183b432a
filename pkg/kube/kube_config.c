/* kubeconfig loading and merging (see kube.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include <svcenv/alloc.h>
#include <svcenv/hash.h>
#include <svcenv/kube.h>
#include <svcenv/macro.h>
#include <svcenv/strv.h>
#include <svcenv/yaml.h>

#include "kube_internal.h"

/* One named entry (cluster, user or context) and the file it came from. */
struct entry {
        const char *name;
        const json_t *body; /* the "cluster"/"user"/"context" object */
        size_t file; /* index into the file list */
        size_t index; /* position in that file's array */
};

struct merged {
        json_t **docs;
        const char *const *names;
        size_t n_files;
        struct entry *clusters, *users, *contexts;
        size_t n_clusters, n_users, n_contexts;
        const char *current_context;
        size_t current_file;
};

static void merged_release(struct merged *m)
{
        for (size_t i = 0; i < m->n_files; i++)
                json_decref(m->docs[i]);
        free(m->docs);
        free(m->clusters);
        free(m->users);
        free(m->contexts);
}

static const struct entry *find_entry(const struct entry *v, size_t n, const char *name)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v[i].name, name) == 0)
                        return &v[i];
        return NULL;
}

/* Adds the named entries of one array of one file; earlier files win. */
static int merge_array(struct merged *m, size_t file, const char *key, const char *inner,
                       struct entry **v, size_t *n, struct se_diag *diag)
{
        const json_t *arr = json_object_get(m->docs[file], key);
        if (!arr || json_is_null(arr))
                return 0;
        if (!json_is_array(arr)) {
                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s: expected a list", m->names[file],
                            key);
                return -EINVAL;
        }
        size_t i;
        const json_t *item;
        json_array_foreach(arr, i, item) {
                const json_t *name = json_object_get(item, "name");
                if (!json_is_object(item) || !json_is_string(name) || !*json_string_value(name)) {
                        se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s[%zu].name: required",
                                    m->names[file], key, i);
                        return -EINVAL;
                }
                const json_t *body = json_object_get(item, inner);
                if (body && !json_is_object(body) && !json_is_null(body)) {
                        se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s[%zu].%s: expected a map",
                                    m->names[file], key, i, inner);
                        return -EINVAL;
                }
                if (find_entry(*v, *n, json_string_value(name)))
                        continue;
                struct entry *nv = se_reallocarray(*v, *n + 1, sizeof(**v));
                if (!nv)
                        return -ENOMEM;
                *v = nv;
                nv[(*n)++] = (struct entry){ json_string_value(name), body, file, i };
        }
        return 0;
}

static int merge_files(struct merged *m, const char *const *names, const char *const *data,
                       const size_t *lens, size_t n, struct se_diag *diag)
{
        m->names = names;
        m->docs = se_calloc(n ? n : 1, sizeof(*m->docs));
        if (!m->docs)
                return -ENOMEM;
        m->n_files = n;
        for (size_t f = 0; f < n; f++) {
                struct se_diag d;
                int r = se_yaml_load(data[f], lens[f], &m->docs[f], &d);
                if (r < 0) {
                        if (r == -EINVAL)
                                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s:%u: %s", names[f],
                                            d.line, d.text);
                        return r;
                }
                if (!m->docs[f])
                        continue; /* empty file */
                if (!json_is_object(m->docs[f])) {
                        se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: expected a map", names[f]);
                        return -EINVAL;
                }
                int r1 = merge_array(m, f, "clusters", "cluster", &m->clusters, &m->n_clusters,
                                     diag);
                if (r1 == 0)
                        r1 = merge_array(m, f, "users", "user", &m->users, &m->n_users, diag);
                if (r1 == 0)
                        r1 = merge_array(m, f, "contexts", "context", &m->contexts, &m->n_contexts,
                                         diag);
                if (r1 < 0)
                        return r1;
                const json_t *cur = json_object_get(m->docs[f], "current-context");
                if (cur && !json_is_string(cur) && !json_is_null(cur)) {
                        se_diag_set(diag, NULL, 0, 0,
                                    "kubeconfig %s: current-context: expected a string", names[f]);
                        return -EINVAL;
                }
                if (!m->current_context && json_is_string(cur) && *json_string_value(cur)) {
                        m->current_context = json_string_value(cur);
                        m->current_file = f;
                }
        }
        return 0;
}

/* ---- field readers: each names the field in its message ---- */

struct where {
        const char *file;
        const char *path; /* "users[0].user" */
        const char *dir; /* folder of file, for relative paths; NULL: none */
};

static int bad(struct se_diag *diag, const struct where *w, const char *field, const char *msg)
{
        se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s.%s: %s", w->file, w->path, field, msg);
        return -EINVAL;
}

bool kube_token_ok(const char *token)
{
        for (const unsigned char *p = (const unsigned char *)token; *p; p++)
                if ((*p < ' ' && *p != '\t') || *p == 0x7f)
                        return false;
        return true;
}

void kube_token_trim(char *token)
{
        size_t l = strlen(token), skip = strspn(token, " \t\n\v\f\r");
        while (l > skip && strchr(" \t\n\v\f\r", token[l - 1]))
                l--;
        memmove(token, token + skip, l - skip);
        token[l - skip] = '\0';
}

/* A string field: *ret new copy or NULL when absent/empty. */
static int get_str(const json_t *body, const char *field, const struct where *w, char **ret,
                   struct se_diag *diag)
{
        *ret = NULL;
        const json_t *v = json_object_get(body, field);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v))
                return bad(diag, w, field, "expected a string");
        if (!*json_string_value(v))
                return 0;
        *ret = se_strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

/* A path field, made absolute against the kubeconfig's folder. */
static int get_path(const json_t *body, const char *field, const struct where *w, char **ret,
                    struct se_diag *diag)
{
        int r = get_str(body, field, w, ret, diag);
        if (r < 0 || !*ret || (*ret)[0] == '/' || !w->dir)
                return r;
        char *abs;
        if (se_asprintf(&abs, "%s/%s", w->dir, *ret) < 0)
                return -ENOMEM;
        free(*ret);
        *ret = abs;
        return 0;
}

/* A base64 *-data field, decoded. */
static int get_data(const json_t *body, const char *field, const struct where *w, char **ret,
                    size_t *ret_len, struct se_diag *diag)
{
        char *b64;
        int r = get_str(body, field, w, &b64, diag);
        *ret = NULL;
        *ret_len = 0;
        if (r < 0 || !b64)
                return r;
        size_t len = strlen(b64);
        char *out = se_malloc(len / 4 * 3 + 4);
        if (!out) {
                free(b64);
                return -ENOMEM;
        }
        r = se_base64_decode(b64, len, out, ret_len);
        free(b64);
        if (r < 0) {
                free(out);
                return bad(diag, w, field, "not valid base64");
        }
        *ret = out;
        return 0;
}

static int get_bool(const json_t *body, const char *field, const struct where *w, bool *ret,
                    struct se_diag *diag)
{
        const json_t *v = json_object_get(body, field);
        *ret = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_boolean(v))
                return bad(diag, w, field, "expected true or false");
        *ret = json_is_true(v);
        return 0;
}

/* A NULL-terminated copy of a list of strings. */
static int get_strs(const json_t *body, const char *field, const struct where *w,
                    struct se_strv *out, struct se_diag *diag)
{
        const json_t *v = json_object_get(body, field);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v))
                return bad(diag, w, field, "expected a list of strings");
        size_t i;
        const json_t *s;
        json_array_foreach(v, i, s) {
                if (!json_is_string(s))
                        return bad(diag, w, field, "expected a list of strings");
                if (se_strv_push(out, json_string_value(s)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static void exec_free(struct se_kube_exec *e)
{
        if (!e)
                return;
        for (char **p = e->argv; p && *p; p++)
                free(*p);
        for (char **p = e->env; p && *p; p++)
                free(*p);
        free(e->argv);
        free(e->env);
        free(e->api_version);
        free(e);
}

static int parse_exec(const json_t *ex, const struct where *uw, struct se_kube_exec **ret,
                      struct se_diag *diag)
{
        char path[300];
        snprintf(path, sizeof(path), "%s.exec", uw->path);
        struct where w = { uw->file, path, uw->dir };
        if (!json_is_object(ex))
                return bad(diag, uw, "exec", "expected a map");
        struct se_kube_exec *e = se_calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        struct se_strv argv = SE_STRV_INIT, env = SE_STRV_INIT;
        char *cmd = NULL;
        int r = get_str(ex, "command", &w, &cmd, diag);
        if (r == 0 && !cmd) {
                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s: command is required", w.file,
                            path);
                r = -EINVAL;
        }
        if (r == 0)
                r = get_str(ex, "apiVersion", &w, &e->api_version, diag);
        if (r == 0 && !e->api_version) {
                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s: apiVersion is required", w.file,
                            path);
                r = -EINVAL;
        }
        if (r == 0 && strcmp(e->api_version, "client.authentication.k8s.io/v1") != 0 &&
            strcmp(e->api_version, "client.authentication.k8s.io/v1beta1") != 0)
                r = bad(diag, &w, "apiVersion",
                        "must be client.authentication.k8s.io/v1 or v1beta1");
        /* a command with a '/' is relative to the kubeconfig; a bare name
         * is looked up in PATH (as kubectl does) */
        if (r == 0 && cmd[0] != '/' && strchr(cmd, '/') && uw->dir) {
                char *abs;
                if (se_asprintf(&abs, "%s/%s", uw->dir, cmd) < 0)
                        r = -ENOMEM;
                else {
                        free(cmd);
                        cmd = abs;
                }
        }
        if (r == 0)
                r = se_strv_push_consume(&argv, TAKE_PTR(cmd)) < 0 ? -ENOMEM : 0;
        if (r == 0)
                r = get_strs(ex, "args", &w, &argv, diag);
        const json_t *envs = json_object_get(ex, "env");
        if (r == 0 && envs && !json_is_null(envs)) {
                if (!json_is_array(envs))
                        r = bad(diag, &w, "env", "expected a list");
                size_t i;
                const json_t *it;
                json_array_foreach(envs, i, it) {
                        if (r < 0)
                                break;
                        const json_t *n = json_object_get(it, "name");
                        const json_t *v = json_object_get(it, "value");
                        char f[32];
                        snprintf(f, sizeof(f), "env[%zu]", i);
                        if (!json_is_string(n) || !*json_string_value(n) ||
                            strchr(json_string_value(n), '='))
                                r = bad(diag, &w, f, "name is required and may not hold '='");
                        else if (v && !json_is_string(v) && !json_is_null(v))
                                r = bad(diag, &w, f, "value: expected a string");
                        else {
                                char *kv;
                                if (se_asprintf(&kv, "%s=%s", json_string_value(n),
                                                json_is_string(v) ? json_string_value(v) : "") < 0)
                                        r = -ENOMEM;
                                else if (se_strv_push_consume(&env, kv) < 0)
                                        r = -ENOMEM;
                        }
                }
        }
        free(cmd);
        if (r == 0 && (!argv.v || (!env.v && se_strv_push(&env, "") < 0)))
                r = -ENOMEM;
        if (r < 0) {
                se_strv_release(&argv);
                se_strv_release(&env);
                exec_free(e);
                return r;
        }
        if (env.n == 1 && env.v[0][0] == '\0') {
                free(env.v[0]);
                env.v[0] = NULL;
                env.n = 0;
        }
        e->argv = argv.v;
        e->env = env.v;
        *ret = e;
        return 0;
}

struct se_kube_config *se_kube_config_free(struct se_kube_config *c)
{
        if (!c)
                return NULL;
        free(c->server);
        free(c->tls_server_name);
        free(c->ca_file);
        free(c->ca_data);
        free(c->cert_file);
        free(c->cert_data);
        free(c->key_file);
        free(c->key_data);
        free(c->token);
        free(c->token_file);
        free(c->username);
        free(c->password);
        exec_free(c->exec);
        free(c->namespace);
        free(c->context);
        free(c->origin);
        free(c->user_path);
        free(c);
        return NULL;
}

static char *dir_of(const char *file)
{
        const char *slash = strrchr(file, '/');
        if (!slash)
                return se_strdup(".");
        return se_strndup(file, slash == file ? 1 : (size_t)(slash - file));
}

static int both_set(struct se_diag *diag, const struct where *w, const char *a, const char *b)
{
        se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s: both %s and %s are set; use one", w->file,
                    w->path, a, b);
        return -EINVAL;
}

static int read_cluster(const struct merged *m, const struct entry *e, struct se_kube_config *c,
                        struct se_diag *diag)
{
        char path[64];
        snprintf(path, sizeof(path), "clusters[%zu].cluster", e->index);
        _cleanup_free_ char *dir = dir_of(m->names[e->file]);
        struct where w = { m->names[e->file], path, dir };
        if (!dir)
                return -ENOMEM;
        const json_t *b = e->body;
        int r = get_str(b, "server", &w, &c->server, diag);
        if (r == 0 && !c->server) {
                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s.server: required", w.file, path);
                return -EINVAL;
        }
        if (r == 0 && strncmp(c->server, "https://", 8) != 0 &&
            strncmp(c->server, "http://", 7) != 0)
                return bad(diag, &w, "server", "must be an http:// or https:// URL");
        if (r == 0) {
                size_t l = strlen(c->server);
                while (l > 8 && c->server[l - 1] == '/')
                        c->server[--l] = '\0';
        }
        if (r == 0)
                r = get_str(b, "tls-server-name", &w, &c->tls_server_name, diag);
        if (r == 0)
                r = get_bool(b, "insecure-skip-tls-verify", &w, &c->insecure, diag);
        if (r == 0)
                r = get_path(b, "certificate-authority", &w, &c->ca_file, diag);
        if (r == 0)
                r = get_data(b, "certificate-authority-data", &w, &c->ca_data, &c->ca_len, diag);
        if (r == 0 && c->ca_file && c->ca_data)
                return both_set(diag, &w, "certificate-authority", "certificate-authority-data");
        if (r == 0 && c->insecure && (c->ca_file || c->ca_data))
                return bad(diag, &w, "insecure-skip-tls-verify",
                           "may not be set together with a certificate authority");
        return r;
}

static int read_user(const struct merged *m, const struct entry *e, struct se_kube_config *c,
                     struct se_diag *diag)
{
        char path[64];
        snprintf(path, sizeof(path), "users[%zu].user", e->index);
        _cleanup_free_ char *dir = dir_of(m->names[e->file]);
        struct where w = { m->names[e->file], path, dir };
        if (!dir)
                return -ENOMEM;
        if (se_asprintf(&c->user_path, "kubeconfig %s: %s", w.file, path) < 0) {
                c->user_path = NULL;
                return -ENOMEM;
        }
        const json_t *b = e->body;
        if (!b)
                return 0;
        int r = get_str(b, "token", &w, &c->token, diag);
        if (r == 0 && c->token && !kube_token_ok(c->token))
                r = bad(diag, &w, "token", KUBE_TOKEN_CTL_MSG);
        if (r == 0)
                r = get_path(b, "tokenFile", &w, &c->token_file, diag);
        if (r == 0)
                r = get_path(b, "client-certificate", &w, &c->cert_file, diag);
        if (r == 0)
                r = get_data(b, "client-certificate-data", &w, &c->cert_data, &c->cert_len, diag);
        if (r == 0)
                r = get_path(b, "client-key", &w, &c->key_file, diag);
        if (r == 0)
                r = get_data(b, "client-key-data", &w, &c->key_data, &c->key_len, diag);
        if (r == 0)
                r = get_str(b, "username", &w, &c->username, diag);
        if (r == 0)
                r = get_str(b, "password", &w, &c->password, diag);
        if (r < 0)
                return r;
        if (c->cert_file && c->cert_data)
                return both_set(diag, &w, "client-certificate", "client-certificate-data");
        if (c->key_file && c->key_data)
                return both_set(diag, &w, "client-key", "client-key-data");
        if ((c->cert_file || c->cert_data) != (c->key_file || c->key_data))
                return bad(diag, &w,
                           c->cert_file || c->cert_data ? "client-key" : "client-certificate",
                           "a client certificate needs both a certificate and a key");
        if ((c->token || c->token_file) && (c->username || c->password))
                return bad(diag, &w, "username",
                           "more than one authentication method (token and basic auth)");
        const json_t *ap = json_object_get(b, "auth-provider");
        if (ap && !json_is_null(ap))
                return bad(diag, &w, "auth-provider",
                           "auth-provider plugins are not supported; use exec");
        const json_t *ex = json_object_get(b, "exec");
        if (ex && !json_is_null(ex))
                return parse_exec(ex, &w, &c->exec, diag);
        return 0;
}

static int resolve(const struct merged *m, const char *context, struct se_kube_config **ret,
                   struct se_diag *diag)
{
        const char *first = m->n_files ? m->names[0] : "(none)";
        const char *ctx_name = context && *context ? context : m->current_context;
        if (!ctx_name) {
                se_diag_set(diag, NULL, 0, 0,
                            "kubeconfig %s: current-context is not set; use --context", first);
                return -ENOENT;
        }
        const struct entry *ctx = find_entry(m->contexts, m->n_contexts, ctx_name);
        if (!ctx) {
                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: context \"%s\" does not exist",
                            context && *context ? first : m->names[m->current_file], ctx_name);
                return -ENOENT;
        }
        char path[64];
        snprintf(path, sizeof(path), "contexts[%zu].context", ctx->index);
        struct where w = { m->names[ctx->file], path, NULL };
        _cleanup_free_ char *cluster = NULL, *user = NULL;
        struct se_kube_config *c = se_calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        int r = get_str(ctx->body, "cluster", &w, &cluster, diag);
        if (r == 0)
                r = get_str(ctx->body, "user", &w, &user, diag);
        if (r == 0)
                r = get_str(ctx->body, "namespace", &w, &c->namespace, diag);
        if (r == 0 && !cluster) {
                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s.cluster: required", w.file, path);
                r = -EINVAL;
        }
        const struct entry *ce = r == 0 ? find_entry(m->clusters, m->n_clusters, cluster) : NULL;
        if (r == 0 && !ce) {
                se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: %s.cluster: cluster \"%s\" not found",
                            w.file, path, cluster);
                r = -EINVAL;
        }
        if (r == 0)
                r = read_cluster(m, ce, c, diag);
        if (r == 0 && user) {
                const struct entry *ue = find_entry(m->users, m->n_users, user);
                if (!ue) {
                        se_diag_set(diag, NULL, 0, 0,
                                    "kubeconfig %s: %s.user: user \"%s\" not found", w.file, path,
                                    user);
                        r = -EINVAL;
                } else
                        r = read_user(m, ue, c, diag);
        }
        if (r == 0 && !c->namespace && !(c->namespace = se_strdup("default")))
                r = -ENOMEM;
        if (r == 0 && !(c->context = se_strdup(ctx_name)))
                r = -ENOMEM;
        if (r == 0 && se_asprintf(&c->origin, "kubeconfig %s", m->names[ce->file]) < 0) {
                c->origin = NULL;
                r = -ENOMEM;
        }
        if (r < 0) {
                se_kube_config_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

int se_kube_config_parse(const char *const *names, const char *const *data, const size_t *lens,
                         size_t n, const char *context, struct se_kube_config **ret,
                         struct se_diag *diag)
{
        struct merged m = { 0 };
        int r = merge_files(&m, names, data, lens, n, diag);
        if (r == 0)
                r = resolve(&m, context, ret, diag);
        merged_release(&m);
        return r;
}

int kube_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
                int e = S_ISDIR(st.st_mode) ? -EISDIR : -errno;
                close(fd);
                return e;
        }
        size_t cap = 4096, len = 0;
        char *buf = se_malloc(cap + 1);
        int r = buf ? 0 : -ENOMEM;
        while (r == 0) {
                if (len == cap) {
                        if (cap >= max) {
                                r = -EFBIG;
                                break;
                        }
                        cap = cap * 2 > max ? max : cap * 2;
                        char *nb = se_reallocarray(buf, cap + 1, 1);
                        if (!nb) {
                                r = -ENOMEM;
                                break;
                        }
                        buf = nb;
                }
                ssize_t k = read(fd, buf + len, cap - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        r = -errno;
                else if (k == 0)
                        break;
                else
                        len += (size_t)k;
        }
        close(fd);
        if (r < 0) {
                free(buf);
                return r;
        }
        buf[len] = '\0';
        *ret = buf;
        if (ret_len)
                *ret_len = len;
        return 0;
}

/* Checks that the files a config names can be read now, so that a typo is
 * reported against its field rather than as a TLS error later. */
static int check_file(const char *path, const struct se_kube_config *c, const char *field,
                      struct se_diag *diag)
{
        if (!path || access(path, R_OK) == 0)
                return 0;
        int e = errno;
        se_diag_set(diag, NULL, 0, 0, "%s: %s: cannot read %s: %s", c->origin, field, path,
                    strerror(e));
        return -e;
}

static int check_files(const struct se_kube_config *c, struct se_diag *diag)
{
        int r = check_file(c->ca_file, c, "certificate-authority", diag);
        if (r == 0)
                r = check_file(c->cert_file, c, "client-certificate", diag);
        if (r == 0)
                r = check_file(c->key_file, c, "client-key", diag);
        if (r == 0)
                r = check_file(c->token_file, c, "tokenFile", diag);
        return r;
}

static int load_files(const struct se_strv *files, const char *context, bool must_exist,
                      struct se_kube_config **ret, struct se_diag *diag)
{
        const char **names = se_calloc(files->n + 1, sizeof(*names));
        const char **data = se_calloc(files->n + 1, sizeof(*data));
        size_t *lens = se_calloc(files->n + 1, sizeof(*lens));
        size_t n = 0;
        int r = names && data && lens ? 0 : -ENOMEM;
        for (size_t i = 0; r == 0 && i < files->n; i++) {
                char *buf;
                r = kube_read_file(files->v[i], SE_KUBE_MAX_CONFIG_FILE, &buf, &lens[n]);
                if (r == -ENOENT && !must_exist) {
                        r = 0;
                        continue;
                }
                if (r < 0) {
                        se_diag_set(diag, NULL, 0, 0, "kubeconfig %s: cannot read: %s", files->v[i],
                                    r == -EFBIG ? "file too large" : strerror(-r));
                        r = r == -ENOMEM ? r : r == -ENOENT ? -ENOENT : -EIO;
                        break;
                }
                names[n] = files->v[i];
                data[n++] = buf;
        }
        if (r == 0 && n == 0) {
                se_diag_set(diag, NULL, 0, 0, "no kubeconfig found (KUBECONFIG files missing)");
                r = -ENOENT;
        }
        if (r == 0)
                r = se_kube_config_parse(names, data, lens, n, context, ret, diag);
        for (size_t i = 0; data && i < n; i++)
                free(SE_UNCONST(char, data[i]));
        free(names);
        free(data);
        free(lens);
        return r;
}

int se_kube_config_load(const struct se_kube_config_opts *opts, struct se_kube_config **ret,
                        struct se_diag *diag)
{
        static const struct se_kube_config_opts none = { 0 };
        if (!opts)
                opts = &none;
        _cleanup_strv_ struct se_strv files = SE_STRV_INIT;
        bool must_exist = true;
        int r = 0;
        if (opts->kubeconfig) {
                r = se_strv_push(&files, opts->kubeconfig);
        } else {
                const char *env =
                        opts->kubeconfig_env ? opts->kubeconfig_env : getenv("KUBECONFIG");
                const char *home = opts->home ? opts->home : getenv("HOME");
                if (env && *env) {
                        r = se_strv_split(&files, env, ':', true);
                        must_exist = false;
                        if (r >= 0 && files.n > SE_KUBE_MAX_CONFIG_FILES) {
                                se_diag_set(diag, NULL, 0, 0, "KUBECONFIG: more than %d files",
                                            SE_KUBE_MAX_CONFIG_FILES);
                                return -EINVAL;
                        }
                } else if (home && *home) {
                        char *p;
                        if (se_asprintf(&p, "%s/.kube/config", home) < 0)
                                return -ENOMEM;
                        if (access(p, F_OK) == 0)
                                r = se_strv_push_consume(&files, p);
                        else
                                free(p);
                }
        }
        if (r < 0)
                return -ENOMEM;
        struct se_kube_config *c = NULL;
        if (files.n == 0) {
                r = se_kube_config_incluster(opts->incluster_root, &c, diag);
                if (r == -ENOENT)
                        se_diag_set(diag, NULL, 0, 0,
                                    "no kubeconfig (use --kubeconfig or set KUBECONFIG) and not "
                                    "running in a cluster");
        } else {
                r = load_files(&files, opts->context, must_exist, &c, diag);
                if (r == 0)
                        r = check_files(c, diag);
        }
        if (r == 0 && opts->master && *opts->master) {
                free(c->server);
                c->server = se_strdup(opts->master);
                if (!c->server)
                        r = -ENOMEM;
        }
        if (r < 0) {
                se_kube_config_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

int se_kube_config_incluster(const char *root, struct se_kube_config **ret, struct se_diag *diag)
{
        if (!root)
                root = SE_KUBE_INCLUSTER_ROOT;
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !*host || !port || !*port) {
                se_diag_set(diag, NULL, 0, 0,
                            "in-cluster config: KUBERNETES_SERVICE_HOST and "
                            "KUBERNETES_SERVICE_PORT must be set");
                return -ENOENT;
        }
        struct se_kube_config *c = se_calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        bool v6 = strchr(host, ':') != NULL;
        int r = se_asprintf(&c->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
                            port) < 0;
        r |= se_asprintf(&c->token_file, "%s/token", root) < 0;
        r |= se_asprintf(&c->ca_file, "%s/ca.crt", root) < 0;
        r |= !(c->origin = se_strdup("in-cluster config"));
        r |= !(c->user_path = se_strdup("in-cluster config"));
        if (r) {
                se_kube_config_free(c);
                return -ENOMEM;
        }
        char *tok = NULL, *ns = NULL;
        r = kube_read_file(c->token_file, SE_KUBE_MAX_CRED_FILE, &tok, NULL);
        if (r < 0) {
                se_diag_set(diag, NULL, 0, 0, "in-cluster config: cannot read %s: %s",
                            c->token_file, strerror(-r));
                se_kube_config_free(c);
                return r == -ENOMEM ? r : -ENOENT;
        }
        free(tok);
        char *nspath;
        if (se_asprintf(&nspath, "%s/namespace", root) < 0) {
                se_kube_config_free(c);
                return -ENOMEM;
        }
        if (kube_read_file(nspath, 256, &ns, NULL) == 0) {
                size_t l = strlen(ns);
                while (l && (ns[l - 1] == '\n' || ns[l - 1] == ' ' || ns[l - 1] == '\r'))
                        ns[--l] = '\0';
                if (l)
                        c->namespace = ns;
                else
                        free(ns);
        }
        free(nspath);
        if (!c->namespace && !(c->namespace = se_strdup("default"))) {
                se_kube_config_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}
