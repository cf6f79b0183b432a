/* Exec credential plugins (client.authentication.k8s.io): run the command by
 * argv, read an ExecCredential from its stdout. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include <svcenv/alloc.h>
#include <svcenv/kube.h>
#include <svcenv/strbuf.h>
#include <svcenv/timeutil.h>

#include "kube_internal.h"

extern char **environ;

/* A plugin that has not answered in this time is killed. */
#define EXEC_TIMEOUT_MS 60000

void se_kube_exec_cred_release(struct se_kube_exec_cred *c)
{
        free(c->token);
        free(c->cert_pem);
        free(c->key_pem);
        *c = (struct se_kube_exec_cred){ 0 };
}

static int fail(struct se_diag *diag, const char *msg)
{
        se_diag_set(diag, NULL, 0, 0, "%s", msg);
        return -EINVAL;
}

int se_kube_exec_parse(const char *data, size_t len, const char *api_version,
                       struct se_kube_exec_cred *ret, struct se_diag *diag)
{
        json_error_t jerr;
        json_t *doc = json_loadb(data, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc) {
                se_diag_set(diag, NULL, 0, 0, "plugin output is not JSON: %s", jerr.text);
                return -EINVAL;
        }
        struct se_kube_exec_cred c = { 0 };
        int r = 0;
        const json_t *av = json_object_get(doc, "apiVersion");
        const json_t *kind = json_object_get(doc, "kind");
        const json_t *st = json_object_get(doc, "status");
        const json_t *tok = json_object_get(st, "token");
        const json_t *cert = json_object_get(st, "clientCertificateData");
        const json_t *key = json_object_get(st, "clientKeyData");
        const json_t *exp = json_object_get(st, "expirationTimestamp");
        if (!json_is_object(doc))
                r = fail(diag, "plugin output: expected an ExecCredential object");
        else if (!json_is_string(kind) || strcmp(json_string_value(kind), "ExecCredential"))
                r = fail(diag, "plugin output: kind: expected ExecCredential");
        else if (!json_is_string(av) || strcmp(json_string_value(av), api_version)) {
                se_diag_set(diag, NULL, 0, 0, "plugin output: apiVersion: expected %s, got %s",
                            api_version, json_is_string(av) ? json_string_value(av) : "none");
                r = -EINVAL;
        } else if (!json_is_object(st))
                r = fail(diag, "plugin output: status: required");
        else if ((tok && !json_is_string(tok)) || (cert && !json_is_string(cert)) ||
                 (key && !json_is_string(key)) || (exp && !json_is_string(exp)))
                r = fail(diag, "plugin output: status: token, clientCertificateData, "
                               "clientKeyData and expirationTimestamp must be strings");
        else if (!!cert != !!key)
                r = fail(diag, "plugin output: status: clientCertificateData and "
                               "clientKeyData must be given together");
        else if (!(tok && *json_string_value(tok)) && !cert)
                r = fail(diag, "plugin output: status: neither token nor client certificate");
        else if (tok && !kube_token_ok(json_string_value(tok)))
                r = fail(diag, "plugin output: status.token: " KUBE_TOKEN_CTL_MSG);
        else if (exp) {
                int tr = se_time_parse_rfc3339(json_string_value(exp), &c.expiry_ns);
                if (tr == -ERANGE)
                        c.expiry_ns = 0; /* beyond int64 nanoseconds: treat as never */
                else if (tr < 0)
                        r = fail(diag, "plugin output: status.expirationTimestamp: not an RFC "
                                       "3339 time");
        }
        if (r == 0 && tok && *json_string_value(tok) &&
            !(c.token = se_strdup(json_string_value(tok))))
                r = -ENOMEM;
        if (r == 0 && cert &&
            (!(c.cert_pem = se_strdup(json_string_value(cert))) ||
             !(c.key_pem = se_strdup(json_string_value(key)))))
                r = -ENOMEM;
        json_decref(doc);
        if (r < 0) {
                se_kube_exec_cred_release(&c);
                return r;
        }
        *ret = c;
        return 0;
}

/* environ plus the plugin's env and KUBERNETES_EXEC_INFO; new array of
 * borrowed and owned strings (owned ones listed in *own). */
static char **build_env(const struct se_kube_exec *e, char **info)
{
        size_t n = 0, m = 0;
        for (char **p = environ; p && *p; p++)
                n++;
        for (char **p = e->env; p && *p; p++)
                m++;
        char **env = se_calloc(n + m + 2, sizeof(*env));
        if (!env)
                return NULL;
        size_t k = 0;
        for (char **p = environ; p && *p; p++) {
                bool overridden = strncmp(*p, "KUBERNETES_EXEC_INFO=", 21) == 0;
                for (char **q = e->env; q && *q && !overridden; q++) {
                        size_t l = strcspn(*q, "=") + 1;
                        overridden = strncmp(*p, *q, l) == 0;
                }
                if (!overridden)
                        env[k++] = *p;
        }
        for (char **p = e->env; p && *p; p++)
                env[k++] = *p;
        if (se_asprintf(info,
                        "KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\","
                        "\"spec\":{\"interactive\":false}}",
                        e->api_version) < 0) {
                free(env);
                return NULL;
        }
        env[k++] = *info;
        env[k] = NULL;
        return env;
}

/* Reads the child's stdout until EOF, the cap or the deadline. */
static int read_output(int fd, struct se_strbuf *out)
{
        uint64_t deadline = se_now_mono_ns() + (uint64_t)EXEC_TIMEOUT_MS * 1000000u;
        for (;;) {
                uint64_t now = se_now_mono_ns();
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd p = { fd, POLLIN, 0 };
                int k = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        continue;
                char buf[8192];
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                if (se_strbuf_add(out, buf, (size_t)n) < 0)
                        return se_strbuf_failed(out);
        }
}

int se_kube_exec_run(const struct se_kube_config *cfg, struct se_kube_exec_cred *ret,
                     struct se_diag *diag)
{
        const struct se_kube_exec *e = cfg->exec;
        const char *where = cfg->user_path ? cfg->user_path : "exec";
        if (!e)
                return -EINVAL;
        char *info = NULL;
        char **env = build_env(e, &info);
        if (!env)
                return -ENOMEM;
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0) {
                int r = -errno;
                free(env);
                free(info);
                return r;
        }
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        pid_t pid;
        int r = posix_spawnp(&pid, e->argv[0], &fa, NULL, e->argv, env);
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[1]);
        free(env);
        free(info);
        if (r != 0) {
                close(pfd[0]);
                se_diag_set(diag, NULL, 0, 0, "%s.exec: cannot run %s: %s", where, e->argv[0],
                            strerror(r));
                return -ENOENT;
        }
        struct se_strbuf out;
        se_strbuf_init(&out, SE_KUBE_MAX_CRED_FILE);
        int rr = read_output(pfd[0], &out);
        close(pfd[0]);
        if (rr < 0)
                kill(pid, SIGKILL);
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (rr < 0) {
                se_diag_set(diag, NULL, 0, 0, "%s.exec: %s: %s", where, e->argv[0],
                            rr == -ETIMEDOUT ? "plugin timed out" :
                            rr == -E2BIG     ? "plugin output too large" :
                                               strerror(-rr));
                se_strbuf_release(&out);
                return -EIO;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                if (WIFEXITED(status))
                        se_diag_set(diag, NULL, 0, 0, "%s.exec: %s exited with status %d", where,
                                    e->argv[0], WEXITSTATUS(status));
                else
                        se_diag_set(diag, NULL, 0, 0, "%s.exec: %s killed by signal %d", where,
                                    e->argv[0], WTERMSIG(status));
                se_strbuf_release(&out);
                return -EIO;
        }
        struct se_diag d;
        r = se_kube_exec_parse(out.buf, out.len, e->api_version, ret, &d);
        se_strbuf_release(&out);
        if (r == -EINVAL)
                se_diag_set(diag, NULL, 0, 0, "%s.exec: %s", where, d.text);
        return r;
}
