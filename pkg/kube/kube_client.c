/* HTTP transport to the API server on libcurl easy handles (see
 * kube_client.h): handle pool, rate limit, credentials, retries. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include <svcenv/alloc.h>
#include <svcenv/kube_client.h>
#include <svcenv/timeutil.h>

#include "kube_internal.h"

#define POOL_MAX          8
#define TOKEN_FILE_PERIOD (60ull * 1000000000ull) /* client-go re-reads every minute */
#define RETRY_AFTER_MAX_S 30
#define EXEC_EXPIRY_SLACK (10ll * 1000000000ll) /* refresh a little before expiry */

struct se_kube_client {
        struct se_kube_config *cfg; /* a copy the client owns */
        struct se_kube_client_opts opts;
        char *user_agent;
        char *base_url; /* server, with tls-server-name as its host when set */
        struct curl_slist *connect_to; /* tls-server-name:port -> real host:port */
        atomic_bool cancelled;
        /* monotonic ns of the last request to reach / miss the server */
        _Atomic uint64_t last_reached_ns, last_missed_ns;

        pthread_mutex_t lock; /* pool, bucket, credentials */
        CURL *pool[POOL_MAX];
        size_t n_pool;
        struct se_token_bucket bucket;

        /* credentials that change over time */
        char *token; /* current bearer token (static, file or exec) */
        uint64_t token_read_ns; /* when the token file was last read */
        char *cert_pem; /* exec client certificate */
        char *key_pem;
        int64_t cred_expiry_ns; /* exec credential expiry (wall clock); 0: none */
        bool have_exec_cred;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
        (void)curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_data(const char *p, size_t n)
{
        if (!p)
                return NULL;
        char *d = se_malloc(n + 1);
        if (d) {
                memcpy(d, p, n);
                d[n] = '\0';
        }
        return d;
}

static char **dup_strv(char **v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        char **d = se_calloc(n + 1, sizeof(*d));
        for (size_t i = 0; d && i < n; i++)
                if (!(d[i] = se_strdup(v[i]))) {
                        for (size_t j = 0; j < i; j++)
                                free(d[j]);
                        free(d);
                        return NULL;
                }
        return d;
}

/* Deep copy of a config. NULL on -ENOMEM. */
static struct se_kube_config *config_dup(const struct se_kube_config *s)
{
        struct se_kube_config *d = se_calloc(1, sizeof(*d));
        if (!d)
                return NULL;
        bool ok = true;
#define DUP(f) ok &= !s->f || (d->f = se_strdup(s->f)) != NULL
        DUP(server);
        DUP(tls_server_name);
        DUP(ca_file);
        DUP(cert_file);
        DUP(key_file);
        DUP(token);
        DUP(token_file);
        DUP(username);
        DUP(password);
        DUP(namespace);
        DUP(context);
        DUP(origin);
        DUP(user_path);
#undef DUP
        d->insecure = s->insecure;
#define DUPD(f, l) ok &= !s->f || (d->f = dup_data(s->f, s->l)) != NULL, d->l = s->l
        DUPD(ca_data, ca_len);
        DUPD(cert_data, cert_len);
        DUPD(key_data, key_len);
#undef DUPD
        if (ok && s->exec) {
                d->exec = se_calloc(1, sizeof(*d->exec));
                ok = d->exec && (d->exec->argv = dup_strv(s->exec->argv)) &&
                     (d->exec->env = dup_strv(s->exec->env)) &&
                     (d->exec->api_version = se_strdup(s->exec->api_version));
        }
        if (!ok)
                return se_kube_config_free(d);
        return d;
}

/* Reads cert/key files into memory once, so every handle gets the same
 * bytes and a typo is reported now against its field. */
static int load_file_field(struct se_kube_config *cfg, char **file, char **data, size_t *len,
                           const char *field, struct se_diag *diag)
{
        if (!*file || *data)
                return 0;
        int r = kube_read_file(*file, SE_KUBE_MAX_CRED_FILE, data, len);
        if (r < 0) {
                se_diag_set(diag, NULL, 0, 0, "%s: %s: cannot read %s: %s", cfg->origin, field,
                            *file, strerror(-r));
                return r == -ENOMEM ? r : -EIO;
        }
        return 0;
}

/* With tls-server-name the URL names that host (so TLS checks it and SNI
 * carries it) and CURLOPT_CONNECT_TO sends the connection to the real one. */
static int setup_server_name(struct se_kube_client *c, struct se_diag *diag)
{
        const struct se_kube_config *k = c->cfg;
        if (!k->tls_server_name) {
                c->base_url = se_strdup(k->server);
                return c->base_url ? 0 : -ENOMEM;
        }
        const char *scheme_end = strstr(k->server, "://");
        const char *host = scheme_end ? scheme_end + 3 : NULL;
        const char *host_end = host && *host == '[' ? strchr(host, ']') : host;
        if (host_end && *host == '[')
                host_end++;
        else if (host_end)
                host_end = host + strcspn(host, ":/");
        if (!host || !host_end || host_end == host) {
                se_diag_set(diag, NULL, 0, 0, "%s: server: cannot find the host in %s", k->origin,
                            k->server);
                return -EINVAL;
        }
        const char *port = *host_end == ':' ? host_end + 1 : NULL;
        size_t port_len = port ? strcspn(port, "/") : 0;
        const char *rest = port ? port + port_len : host_end;
        const char *dflt = strncmp(k->server, "https", 5) == 0 ? "443" : "80";
        char *map;
        if (se_asprintf(&c->base_url, "%.*s%s%s%.*s%s", (int)(host - k->server), k->server,
                        k->tls_server_name, port ? ":" : "", (int)port_len, port ? port : "",
                        rest) < 0) {
                c->base_url = NULL;
                return -ENOMEM;
        }
        if (se_asprintf(&map, "%s:%.*s:%.*s:%.*s", k->tls_server_name,
                        (int)(port ? port_len : strlen(dflt)), port ? port : dflt,
                        (int)(host_end - host), host, (int)(port ? port_len : strlen(dflt)),
                        port ? port : dflt) < 0)
                return -ENOMEM;
        c->connect_to = curl_slist_append(NULL, map);
        free(map);
        return c->connect_to ? 0 : -ENOMEM;
}

int se_kube_client_new(const struct se_kube_config *cfg, const struct se_kube_client_opts *opts,
                       struct se_kube_client **ret, struct se_diag *diag)
{
        pthread_once(&curl_once, curl_init_once);
        struct se_kube_client *c = se_calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        if (opts)
                c->opts = *opts;
        if (c->opts.qps == 0)
                c->opts.qps = 5;
        if (c->opts.burst == 0)
                c->opts.burst = 10;
        if (c->opts.timeout_ms <= 0)
                c->opts.timeout_ms = 60000;
        if (c->opts.connect_timeout_ms <= 0)
                c->opts.connect_timeout_ms = 10000;
        if (c->opts.max_body == 0)
                c->opts.max_body = SE_KUBE_MAX_BODY;
        if (c->opts.max_retries == 0)
                c->opts.max_retries = 3;
        c->user_agent = se_strdup(c->opts.user_agent ? c->opts.user_agent : SE_KUBE_USER_AGENT);
        c->opts.user_agent = NULL;
        pthread_mutex_init(&c->lock, NULL);
        se_token_bucket_init(&c->bucket, c->opts.qps, c->opts.burst, se_now_mono_ns());
        c->cfg = config_dup(cfg);
        if (!c->cfg || !c->user_agent) {
                se_kube_client_free(c);
                return -ENOMEM;
        }
        struct se_kube_config *k = c->cfg;
        int r = load_file_field(k, &k->ca_file, &k->ca_data, &k->ca_len, "certificate-authority",
                                diag);
        if (r == 0)
                r = load_file_field(k, &k->cert_file, &k->cert_data, &k->cert_len,
                                    "client-certificate", diag);
        if (r == 0)
                r = load_file_field(k, &k->key_file, &k->key_data, &k->key_len, "client-key", diag);
        if (r == 0 && k->token && !(c->token = se_strdup(k->token)))
                r = -ENOMEM;
        if (r == 0)
                r = setup_server_name(c, diag);
        if (r < 0) {
                se_kube_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

int se_kube_client_load(const struct se_kube_config_opts *config_opts,
                        const struct se_kube_client_opts *opts, struct se_kube_client **ret,
                        struct se_diag *diag)
{
        struct se_diag local;
        if (!diag)
                diag = &local;
        *diag = (struct se_diag){ 0 };
        struct se_kube_config *cfg = NULL;
        int r = se_kube_config_load(config_opts, &cfg, diag);
        if (r == 0)
                r = se_kube_client_new(cfg, opts, ret, diag);
        se_kube_config_free(cfg);
        /* out of memory is returned without words */
        if (r < 0 && !diag->text[0])
                se_diag_set(diag, NULL, 0, 0, "%s", strerror(-r));
        return r;
}

struct se_kube_client *se_kube_client_free(struct se_kube_client *c)
{
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_pool; i++)
                curl_easy_cleanup(c->pool[i]);
        pthread_mutex_destroy(&c->lock);
        se_kube_config_free(c->cfg);
        free(c->user_agent);
        free(c->base_url);
        curl_slist_free_all(c->connect_to);
        free(c->token);
        free(c->cert_pem);
        free(c->key_pem);
        free(c);
        return NULL;
}

const struct se_kube_config *se_kube_client_config(const struct se_kube_client *c)
{
        return c->cfg;
}

void se_kube_client_cancel(struct se_kube_client *c)
{
        atomic_store(&c->cancelled, true);
}

static CURL *take_handle(struct se_kube_client *c)
{
        pthread_mutex_lock(&c->lock);
        CURL *h = c->n_pool ? c->pool[--c->n_pool] : NULL;
        pthread_mutex_unlock(&c->lock);
        if (h)
                curl_easy_reset(h); /* keeps its connections and TLS sessions */
        else
                h = curl_easy_init();
        return h;
}

static void give_handle(struct se_kube_client *c, CURL *h)
{
        pthread_mutex_lock(&c->lock);
        if (c->n_pool < POOL_MAX) {
                c->pool[c->n_pool++] = h;
                h = NULL;
        }
        pthread_mutex_unlock(&c->lock);
        if (h)
                curl_easy_cleanup(h);
}

/* Waits for the rate limiter; -ECANCELED when cancelled meanwhile. */
static int throttle(struct se_kube_client *c, const atomic_bool *cancel)
{
        pthread_mutex_lock(&c->lock);
        uint64_t wait = se_token_bucket_reserve(&c->bucket, se_now_mono_ns());
        pthread_mutex_unlock(&c->lock);
        return kube_sleep(c, wait, cancel);
}

int kube_sleep(struct se_kube_client *c, uint64_t ns, const atomic_bool *cancel)
{
        while (ns > 0) {
                if (atomic_load(&c->cancelled) || (cancel && atomic_load(cancel)))
                        return -ECANCELED;
                uint64_t step = ns > 50000000u ? 50000000u : ns;
                struct timespec ts = { (time_t)(step / 1000000000u), (long)(step % 1000000000u) };
                nanosleep(&ts, NULL);
                ns -= step;
        }
        return atomic_load(&c->cancelled) || (cancel && atomic_load(cancel)) ? -ECANCELED : 0;
}

/* Makes sure the current credential is fresh: token file every minute,
 * exec plugin when missing or expiring. Called with the lock held. */
static int refresh_credentials(struct se_kube_client *c, bool force, struct se_diag *diag)
{
        struct se_kube_config *k = c->cfg;
        uint64_t now = se_now_mono_ns();
        if (k->token_file &&
            (force || !c->token_read_ns || now - c->token_read_ns >= TOKEN_FILE_PERIOD)) {
                char *tok;
                int r = kube_read_file(k->token_file, SE_KUBE_MAX_CRED_FILE, &tok, NULL);
                if (r < 0 && !c->token) {
                        se_diag_set(diag, NULL, 0, 0, "%s: tokenFile: cannot read %s: %s",
                                    k->origin, k->token_file, strerror(-r));
                        return r == -ENOMEM ? r : -EPERM;
                }
                if (r == 0) {
                        kube_token_trim(tok);
                        if (!kube_token_ok(tok)) {
                                se_diag_set(diag, NULL, 0, 0, "%s: tokenFile %s: the token %s",
                                            k->origin, k->token_file, KUBE_TOKEN_CTL_MSG);
                                free(tok);
                                return -EPERM;
                        }
                        free(c->token);
                        c->token = tok;
                }
                c->token_read_ns = now;
        }
        if (k->exec) {
                int64_t wall = se_now_real_ns();
                bool expired = c->cred_expiry_ns && wall + EXEC_EXPIRY_SLACK >= c->cred_expiry_ns;
                if (force || !c->have_exec_cred || expired) {
                        struct se_kube_exec_cred cred;
                        int r = se_kube_exec_run(k, &cred, diag);
                        if (r < 0)
                                return r;
                        free(c->token);
                        free(c->cert_pem);
                        free(c->key_pem);
                        c->token = TAKE_PTR(cred.token);
                        c->cert_pem = TAKE_PTR(cred.cert_pem);
                        c->key_pem = TAKE_PTR(cred.key_pem);
                        c->cred_expiry_ns = cred.expiry_ns;
                        c->have_exec_cred = true;
                }
        }
        return 0;
}

/* ---- one transfer ---- */

struct xfer {
        struct se_kube_client *c;
        const atomic_bool *cancel;
        CURL *h;
        struct se_strbuf body; /* whole body, or the error body of a stream */
        kube_chunk_fn chunk_fn; /* streaming: 2xx bodies go here */
        void *chunk_data;
        int chunk_err;
        long code;
};

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct xfer *x = userdata;
        size_t n = size * nmemb;
        if (!x->code)
                (void)curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->code);
        if (x->chunk_fn && x->code >= 200 && x->code < 300) {
                int r = x->chunk_fn(x->chunk_data, ptr, n);
                if (r < 0) {
                        x->chunk_err = r;
                        return 0;
                }
                return n;
        }
        if (se_strbuf_add(&x->body, ptr, n) < 0)
                return 0; /* over the cap: abort the transfer */
        return n;
}

static int on_progress(void *userdata, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
        (void)dt, (void)dn, (void)ut, (void)un;
        const struct xfer *x = userdata;
        return atomic_load(&x->c->cancelled) || (x->cancel && atomic_load(x->cancel));
}

static int curl_errno(CURLcode cc)
{
        switch (cc) {
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
                return -EHOSTUNREACH;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        default:
                return -EIO;
        }
}

/* Fills diag from an error body: a Status gives reason and message. */
static int status_error(const char *method, const char *path, long code, const char *body,
                        size_t len, struct se_diag *diag)
{
        json_t *st = json_loadb(body, len, 0, NULL);
        const char *reason = json_string_value(json_object_get(st, "reason"));
        const char *msg = json_string_value(json_object_get(st, "message"));
        int err = se_kube_status_errno(code, reason);
        char q[160];
        snprintf(q, sizeof(q), "%s", path);
        q[strcspn(q, "?")] = '\0';
        if (msg && *msg)
                se_diag_set(diag, NULL, 0, 0, "%s %s: %s (%ld): %s", method, q,
                            reason && *reason ? reason : "error", code, msg);
        else
                se_diag_set(diag, NULL, 0, 0, "%s %s: HTTP %ld: %.200s", method, q, code,
                            len ? body : "no body");
        json_decref(st);
        return err;
}

struct req {
        const char *method;
        const char *path;
        const char *content_type;
        const char *body;
        size_t body_len;
        const atomic_bool *cancel;
        long timeout_ms; /* 0: client default; < 0: none (watch) */
        kube_chunk_fn chunk_fn;
        void *chunk_data;
};

/* Sets up h for one attempt. Credentials are copied under the lock. */
static int setup(struct se_kube_client *c, CURL *h, const struct req *rq, struct xfer *x,
                 struct curl_slist **hdrs, struct se_diag *diag)
{
        const struct se_kube_config *k = c->cfg;
        char *url;
        if (se_asprintf(&url, "%s%s", c->base_url, rq->path) < 0)
                return -ENOMEM;
        if (c->connect_to)
                curl_easy_setopt(h, CURLOPT_CONNECT_TO, c->connect_to);
        curl_easy_setopt(h, CURLOPT_URL, url);
        free(url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_USERAGENT, c->user_agent);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->opts.connect_timeout_ms);
        long tmo = rq->timeout_ms ? rq->timeout_ms : c->opts.timeout_ms;
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, tmo > 0 ? tmo : 0L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
        curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 15L);
        curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
        if (rq->body) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
        }
        if (k->insecure) {
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
        } else if (k->ca_data) {
                struct curl_blob b = { k->ca_data, k->ca_len, CURL_BLOB_COPY };
                curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
        }
        struct curl_slist *l = NULL;
        char hdr[256];
        snprintf(hdr, sizeof(hdr), "Content-Type: %s",
                 rq->content_type ? rq->content_type : "application/json");
        l = curl_slist_append(l, "Accept: application/json");
        if (l && rq->body)
                l = curl_slist_append(l, hdr);
        pthread_mutex_lock(&c->lock);
        int r = refresh_credentials(c, false, diag);
        if (r == 0 && c->token) {
                char *auth;
                if (se_asprintf(&auth, "Authorization: Bearer %s", c->token) < 0)
                        r = -ENOMEM;
                else {
                        l = l ? curl_slist_append(l, auth) : NULL;
                        free(auth);
                }
        }
        if (r == 0) {
                const char *cert = c->cert_pem ? c->cert_pem : k->cert_data;
                const char *key = c->cert_pem ? c->key_pem : k->key_data;
                size_t cl = c->cert_pem ? strlen(c->cert_pem) : k->cert_len;
                size_t kl = c->cert_pem ? strlen(c->key_pem) : k->key_len;
                if (cert && key) {
                        struct curl_blob cb = { SE_UNCONST(char, cert), cl, CURL_BLOB_COPY };
                        struct curl_blob kb = { SE_UNCONST(char, key), kl, CURL_BLOB_COPY };
                        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &cb);
                        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
                        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &kb);
                        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
                }
        }
        pthread_mutex_unlock(&c->lock);
        if (r == 0 && k->username) {
                curl_easy_setopt(h, CURLOPT_USERNAME, k->username);
                curl_easy_setopt(h, CURLOPT_PASSWORD, k->password ? k->password : "");
        }
        if (r == 0 && !l)
                r = -ENOMEM;
        if (l)
                curl_easy_setopt(h, CURLOPT_HTTPHEADER, l);
        *hdrs = l;
        return r;
}

static bool retriable(const struct req *rq, int err, long code)
{
        if (code == 429 || code == 503)
                return true;
        bool idempotent = strcmp(rq->method, "GET") == 0;
        if (!idempotent || rq->chunk_fn)
                return false;
        if (code >= 500)
                return code != 501;
        return code == 0 && err != -ECANCELED && err != -EFBIG && err != -ENOMEM;
}

/* What one attempt says about the server being reachable (see
 * se_kube_client_reachable); counted only when our side did not end it. */
static void note_contact(struct se_kube_client *c, CURLcode cc, long code, bool ours_ok)
{
        if (!ours_ok || cc == CURLE_ABORTED_BY_CALLBACK)
                return;
        bool reached = code > 0 && code < 500;
        if (cc != CURLE_OK && code > 0 && code < 500)
                return; /* a watch that got its answer, then ended: says nothing new */
        atomic_store(reached ? &c->last_reached_ns : &c->last_missed_ns, se_now_mono_ns());
}

bool se_kube_client_reachable(const struct se_kube_client *c)
{
        uint64_t reached = atomic_load(&c->last_reached_ns);
        return reached && reached >= atomic_load(&c->last_missed_ns);
}

static int do_request(struct se_kube_client *c, const struct req *rq, struct se_strbuf *ret_body,
                      long *ret_code, struct se_diag *diag)
{
        uint64_t delay = 200000000u;
        bool reauthed = false;
        int attempts = c->opts.max_retries < 0 ? 1 : c->opts.max_retries + 1;
        if (ret_code)
                *ret_code = 0;
        for (int attempt = 0;; attempt++) {
                int r = throttle(c, rq->cancel);
                if (r < 0) {
                        se_diag_set(diag, NULL, 0, 0, "%s %s: cancelled", rq->method, rq->path);
                        return r;
                }
                CURL *h = take_handle(c);
                if (!h)
                        return -ENOMEM;
                struct xfer x = { .c = c,
                                  .cancel = rq->cancel,
                                  .h = h,
                                  .chunk_fn = rq->chunk_fn,
                                  .chunk_data = rq->chunk_data };
                se_strbuf_init(&x.body, c->opts.max_body);
                struct curl_slist *hdrs = NULL;
                r = setup(c, h, rq, &x, &hdrs, diag);
                CURLcode cc = CURLE_OK;
                char errbuf[CURL_ERROR_SIZE] = "";
                if (r == 0) {
                        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
                        cc = curl_easy_perform(h);
                        (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &x.code);
                }
                curl_off_t retry_after = 0;
                (void)curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &retry_after);
                curl_slist_free_all(hdrs);
                curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
                give_handle(c, h);
                if (r < 0) {
                        se_strbuf_release(&x.body);
                        return r;
                }
                if (ret_code)
                        *ret_code = x.code;
                note_contact(c, cc, x.code, r == 0 && !x.chunk_err && !se_strbuf_failed(&x.body));
                if (cc != CURLE_OK) {
                        if (x.chunk_err)
                                r = x.chunk_err;
                        else if (cc == CURLE_ABORTED_BY_CALLBACK)
                                r = -ECANCELED;
                        else if (cc == CURLE_WRITE_ERROR && se_strbuf_failed(&x.body))
                                r = se_strbuf_failed(&x.body) == -E2BIG ? -EFBIG : -ENOMEM;
                        else
                                r = curl_errno(cc);
                        if (r == -ECANCELED)
                                se_diag_set(diag, NULL, 0, 0, "%s %s: cancelled", rq->method,
                                            rq->path);
                        else if (r == -EFBIG)
                                se_diag_set(diag, NULL, 0, 0,
                                            "%s %s: response larger than %zu bytes", rq->method,
                                            rq->path, c->opts.max_body);
                        else if (!x.chunk_err)
                                se_diag_set(diag, NULL, 0, 0, "%s %s%s: %s", rq->method,
                                            c->cfg->server, rq->path,
                                            errbuf[0] ? errbuf : curl_easy_strerror(cc));
                        x.code = 0;
                } else if (x.code >= 200 && x.code < 300) {
                        if (ret_body) {
                                se_strbuf_release(ret_body);
                                *ret_body = x.body;
                        } else
                                se_strbuf_release(&x.body);
                        return 0;
                } else {
                        r = status_error(rq->method, rq->path, x.code, x.body.buf, x.body.len,
                                         diag);
                }
                se_strbuf_release(&x.body);
                if (x.code == 401 && !reauthed && (c->cfg->token_file || c->cfg->exec)) {
                        /* a rotated token or an expired plugin credential */
                        reauthed = true;
                        pthread_mutex_lock(&c->lock);
                        int rr = refresh_credentials(c, true, diag);
                        pthread_mutex_unlock(&c->lock);
                        if (rr < 0)
                                return rr;
                        continue;
                }
                if (attempt + 1 >= attempts || !retriable(rq, r, x.code))
                        return r;
                uint64_t wait = delay;
                if (retry_after > 0)
                        wait = (uint64_t)(retry_after > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S :
                                                                            retry_after) *
                               1000000000u;
                delay *= 2;
                if (kube_sleep(c, wait, rq->cancel) < 0)
                        return -ECANCELED;
        }
}

int se_kube_request(struct se_kube_client *c, const char *method, const char *path,
                    const char *content_type, const char *body, size_t body_len,
                    const atomic_bool *cancel, struct se_strbuf *ret_body, long *ret_code,
                    struct se_diag *diag)
{
        struct req rq = { method, path, content_type, body, body_len, cancel, 0, NULL, NULL };
        return do_request(c, &rq, ret_body, ret_code, diag);
}

int kube_stream(struct se_kube_client *c, const char *path, const atomic_bool *cancel,
                long timeout_ms, kube_chunk_fn fn, void *data, long *ret_code, struct se_diag *diag)
{
        struct req rq = { "GET", path, NULL, NULL, 0, cancel, timeout_ms, fn, data };
        return do_request(c, &rq, NULL, ret_code, diag);
}
