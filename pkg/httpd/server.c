/* The HTTP(S) server: libwebsockets event loops calling one handler. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <libwebsockets.h>

#include <svcenv/parse.h>
#include <svcenv/strbuf.h>

#include "httpd_internal.h"

#define DEFAULT_MAX_BODY ((size_t)4 << 20)
#define CHUNK            (256 * 1024)
#define KEEPALIVE_S      60

struct loop {
        struct se_httpd *h;
        struct lws_context *ctx;
        pthread_t thread;
        bool running;
};

struct se_httpd {
        struct se_httpd_config cfg;
        bool tls;
        struct certs certs;
        struct loop loops[SE_HTTPD_MAX_THREADS];
        unsigned n_loops;
        int port;
        atomic_bool stop;
};

/* Per connection; reset at the start of each request (keep-alive). */
struct pss {
        struct se_strbuf body;
        bool body_init;
        bool too_big;
        char method[8];
        char path[512];
        char query[512];
        char ctype[128];
        char *resp;
        size_t resp_len, resp_off;
};

static void pss_reset(struct pss *ps)
{
        if (ps->body_init)
                se_strbuf_release(&ps->body);
        free(ps->resp);
        memset(ps, 0, sizeof(*ps));
}

static int write_headers(struct lws *wsi, int status, const char *ctype, size_t len)
{
        unsigned char buf[LWS_PRE + 1024], *start = buf + LWS_PRE, *p = start,
                                           *end = buf + sizeof(buf) - 1;
        if (lws_add_http_common_headers(wsi, (unsigned)status, ctype, (lws_filepos_t)len, &p,
                                        end) ||
            lws_finalize_write_http_header(wsi, start, &p, end))
                return -1;
        return 0;
}

/* Sends the response: headers now, the body from the writeable callback. */
static int respond(struct lws *wsi, struct pss *ps, int status, const char *ctype, char *body,
                   size_t len)
{
        free(ps->resp);
        ps->resp = body;
        ps->resp_len = body ? len : 0;
        ps->resp_off = 0;
        if (write_headers(wsi, status, ctype ? ctype : "text/plain", ps->resp_len) < 0)
                return -1;
        if (ps->resp_len == 0)
                return lws_http_transaction_completed(wsi) ? -1 : 0;
        lws_callback_on_writable(wsi);
        return 0;
}

static int respond_text(struct lws *wsi, struct pss *ps, int status, const char *text)
{
        char *b = strdup(text);
        return respond(wsi, ps, status, "text/plain; charset=utf-8", b, b ? strlen(b) : 0);
}

static int dispatch(struct lws *wsi, struct se_httpd *h, struct pss *ps)
{
        if (ps->too_big)
                return respond_text(wsi, ps, 413, "request body too large\n");
        struct se_httpd_request req = {
                .method = ps->method,
                .path = ps->path,
                .query = ps->query,
                .content_type = ps->ctype,
                .body = ps->body_init ? ps->body.buf : "",
                .len = ps->body_init ? ps->body.len : 0,
        };
        struct se_httpd_response resp = { .status = 200 };
        h->cfg.handler(h->cfg.data, &req, &resp);
        return respond(wsi, ps, resp.status, resp.content_type, resp.body, resp.len);
}

static int on_http(struct lws *wsi, struct se_httpd *h, struct pss *ps, const char *uri)
{
        pss_reset(ps);
        snprintf(ps->path, sizeof(ps->path), "%s", uri ? uri : "/");
        if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI))
                snprintf(ps->method, sizeof(ps->method), "POST");
        else if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI))
                snprintf(ps->method, sizeof(ps->method), "GET");
        else
                snprintf(ps->method, sizeof(ps->method), "OTHER");
        if (lws_hdr_copy(wsi, ps->query, sizeof(ps->query), WSI_TOKEN_HTTP_URI_ARGS) < 0)
                ps->query[0] = '\0';
        if (lws_hdr_copy(wsi, ps->ctype, sizeof(ps->ctype), WSI_TOKEN_HTTP_CONTENT_TYPE) < 0)
                ps->ctype[0] = '\0';
        if (strcmp(ps->method, "POST") != 0)
                return dispatch(wsi, h, ps);

        char cl[32] = "";
        int64_t n = -1;
        if (lws_hdr_copy(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0)
                (void)se_parse_i64(cl, 0, INT64_MAX, &n);
        size_t max = h->cfg.max_body ? h->cfg.max_body : DEFAULT_MAX_BODY;
        if (n > (int64_t)max) {
                ps->too_big = true;
                return dispatch(wsi, h, ps);
        }
        se_strbuf_init(&ps->body, max);
        ps->body_init = true;
        if (n == 0)
                return dispatch(wsi, h, ps);
        return 0; /* the body follows */
}

static int on_writeable(struct lws *wsi, struct pss *ps)
{
        if (!ps->resp)
                return 0;
        static _Thread_local unsigned char buf[LWS_PRE + CHUNK];
        size_t n = ps->resp_len - ps->resp_off;
        if (n > CHUNK)
                n = CHUNK;
        memcpy(buf + LWS_PRE, ps->resp + ps->resp_off, n);
        bool last = ps->resp_off + n == ps->resp_len;
        /* TLS writes one 16 KiB record per write(): cork the socket so a
         * response leaves in full segments and wakes the reader once */
        int fd = lws_get_socket_fd(wsi), on = 1, off = 0;
        if (fd >= 0)
                setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
        int w = lws_write(wsi, buf + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP);
        if (fd >= 0)
                setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
        if (w != (int)n)
                return -1;
        ps->resp_off += n;
        if (!last) {
                lws_callback_on_writable(wsi);
                return 0;
        }
        free(ps->resp);
        ps->resp = NULL;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
        struct pss *ps = user;
        struct se_httpd *h = lws_context_user(lws_get_context(wsi));
        switch (reason) {
        case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS: {
                SSL_CTX *ctx = user;
                if (!h->tls)
                        return 0;
                pthread_mutex_lock(&h->certs.lock);
                int ok = SSL_CTX_use_certificate(ctx, h->certs.cert) == 1 &&
                         SSL_CTX_use_PrivateKey(ctx, h->certs.key) == 1;
                pthread_mutex_unlock(&h->certs.lock);
                return ok && certs_setup_ctx(&h->certs, ctx) == 0 ? 0 : 1;
        }
        case LWS_CALLBACK_HTTP:
                return on_http(wsi, h, ps, in);
        case LWS_CALLBACK_HTTP_BODY:
                if (!ps->too_big) {
                        se_strbuf_add(&ps->body, in, len);
                        ps->too_big = se_strbuf_failed(&ps->body) == -E2BIG;
                        if (se_strbuf_failed(&ps->body) && !ps->too_big)
                                return -1;
                }
                return 0;
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
                return dispatch(wsi, h, ps);
        case LWS_CALLBACK_HTTP_WRITEABLE:
                return on_writeable(wsi, ps);
        case LWS_CALLBACK_CLOSED_HTTP:
        case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
                if (ps)
                        pss_reset(ps);
                return 0;
        default:
                return lws_callback_http_dummy(wsi, reason, user, in, len);
        }
}

static const struct lws_protocols protocols[] = {
        { "http", callback, sizeof(struct pss), 0, 0, NULL, 0 },
        { NULL, NULL, 0, 0, 0, NULL, 0 },
};

static void *run(void *arg)
{
        struct loop *l = arg;
        while (!atomic_load(&l->h->stop))
                if (lws_service(l->ctx, 0) < 0)
                        break;
        return NULL;
}

static int make_context(struct se_httpd *h, struct loop *l, int port, struct se_diag *diag)
{
        struct lws_context_creation_info info;
        memset(&info, 0, sizeof(info));
        info.port = port;
        info.iface = h->cfg.address;
        info.protocols = protocols;
        info.user = h;
        info.timeout_secs = h->cfg.timeout_s ? h->cfg.timeout_s : 10;
        info.keepalive_timeout = KEEPALIVE_S;
        info.alpn = "http/1.1";
        info.options = LWS_SERVER_OPTION_ALLOW_LISTEN_SHARE |
                       LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND | LWS_SERVER_OPTION_DISABLE_IPV6;
        if (!h->cfg.address || strchr(h->cfg.address, ':'))
                info.options &= ~(uint64_t)LWS_SERVER_OPTION_DISABLE_IPV6;
        if (h->tls)
                info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT |
                                LWS_SERVER_OPTION_CREATE_VHOST_SSL_CTX;
        l->h = h;
        l->ctx = lws_create_context(&info);
        if (!l->ctx) {
                se_diag_set(diag, NULL, 0, 0, "cannot listen on %s:%d",
                            h->cfg.address ? h->cfg.address : "*", port);
                return -EADDRINUSE;
        }
        return 0;
}

static void log_emit(int level, const char *line)
{
        (void)level;
        fputs(line, stderr);
}

int se_httpd_start(const struct se_httpd_config *cfg, struct se_httpd **ret, struct se_diag *diag)
{
        *ret = NULL;
        if (!cfg->handler || (!cfg->cert_file) != (!cfg->key_file)) {
                se_diag_set(diag, NULL, 0, 0,
                            "need a handler, and both or neither of cert "
                            "and key");
                return -EINVAL;
        }
        struct se_httpd *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->cfg = *cfg;
        h->tls = cfg->cert_file != NULL;
        lws_set_log_level(LLL_ERR, log_emit);
        if (h->tls) {
                int r = certs_init(&h->certs, cfg->cert_file, cfg->key_file, diag);
                if (r < 0) {
                        certs_release(&h->certs);
                        free(h);
                        return r;
                }
        }
        unsigned n = cfg->threads ? cfg->threads : 1;
        if (n > 1) {
                /* Debian's libwebsockets 4.1 has one service thread per context
                 * and does not set SO_REUSEPORT, so loops cannot share a port. */
                se_diag_set(diag, NULL, 0, 0,
                            "one event loop only with this libwebsockets "
                            "build; run more replicas instead");
                free(h);
                return -ENOTSUP;
        }
        int port = cfg->port;
        for (unsigned i = 0; i < n; i++) {
                int r = make_context(h, &h->loops[i], port, diag);
                if (r < 0) {
                        se_httpd_stop(h);
                        return r;
                }
                h->n_loops++;
                if (i == 0) {
                        struct lws_vhost *vh = lws_get_vhost_by_name(h->loops[0].ctx, "default");
                        h->port = vh ? lws_get_vhost_listen_port(vh) : port;
                        port = h->port;
                }
        }
        for (unsigned i = 0; i < h->n_loops; i++) {
                if (pthread_create(&h->loops[i].thread, NULL, run, &h->loops[i]) != 0) {
                        se_httpd_stop(h);
                        se_diag_set(diag, NULL, 0, 0, "cannot start a thread");
                        return -EAGAIN;
                }
                h->loops[i].running = true;
        }
        *ret = h;
        return 0;
}

int se_httpd_port(const struct se_httpd *h)
{
        return h->port;
}

int se_httpd_reload_certs(struct se_httpd *h, struct se_diag *diag)
{
        return h->tls ? certs_check(&h->certs, true, diag) : 0;
}

void se_httpd_stats(const struct se_httpd *h, struct se_httpd_stats *ret)
{
        memset(ret, 0, sizeof(*ret));
        if (h->tls) {
                ret->cert_reloads = atomic_load(&h->certs.reloads);
                ret->cert_reload_errors = atomic_load(&h->certs.errors);
        }
}

struct se_httpd *se_httpd_stop(struct se_httpd *h)
{
        if (!h)
                return NULL;
        atomic_store(&h->stop, true);
        for (unsigned i = 0; i < h->n_loops; i++)
                lws_cancel_service(h->loops[i].ctx);
        for (unsigned i = 0; i < h->n_loops; i++)
                if (h->loops[i].running)
                        pthread_join(h->loops[i].thread, NULL);
        for (unsigned i = 0; i < h->n_loops; i++)
                lws_context_destroy(h->loops[i].ctx);
        if (h->tls)
                certs_release(&h->certs);
        free(h);
        return NULL;
}
