/* The HTTP(S) server: libwebsockets event loops calling one handler. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libwebsockets.h>

#include <svcenv/alloc.h>
#include <svcenv/parse.h>
#include <svcenv/strbuf.h>

#include "httpd_internal.h"

#define DEFAULT_MAX_BODY ((size_t)4 << 20)
#define CHUNK            (256 * 1024)
#define HEADROOM         1024 /* response headers */
#define TLS_RECORD       16384
#define KEEPALIVE_S      60

#define MAX_PENDING 64 /* accepted sockets waiting for their loop */

struct loop {
        struct se_httpd *h;
        struct lws_context *ctx;
        struct lws_vhost *vhost;
        pthread_t thread;
        bool running;
        /* sockets the acceptor handed over, adopted on the loop's thread
         * (libwebsockets is not thread-safe; lws_cancel_service is) */
        pthread_mutex_t lock;
        int pending[MAX_PENDING];
        unsigned n_pending;
        /* the response being written, allocated at the first one: not a
         * thread-local array, which every thread of the process (a DNS
         * server's forwarders too) would carry and zero at its start */
        unsigned char *out;
};

struct se_httpd {
        struct se_httpd_config cfg;
        bool tls;
        struct certs certs;
        struct loop loops[SE_HTTPD_MAX_THREADS];
        unsigned n_loops;
        int port;
        atomic_bool stop;
        /* several loops: our own listening socket and acceptor thread */
        int listen_fd;
        int wake[2]; /* pipe that stops the acceptor */
        pthread_t acceptor;
        bool acceptor_running;
        unsigned next; /* round robin */
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
        int status;
        const char *resp_ctype; /* static */
        bool headers_due; /* a response is set and its headers not sent */
        bool nosniff;
        bool close_after; /* hang up once the response is out */
        bool in_request; /* between its headers and the end of our answer */
};

static void pss_reset(struct pss *ps)
{
        if (ps->body_init)
                se_strbuf_release(&ps->body);
        free(ps->resp);
        memset(ps, 0, sizeof(*ps));
}

/* Sends the response: the headers and the first CHUNK of the body leave in one TLS write (one
 * lws_write, records coalesced by the cork), the rest in CHUNK pieces. */
static int on_writeable(struct lws *wsi, struct pss *ps);

static int respond(struct lws *wsi, struct pss *ps, int status, const char *ctype, char *body,
                   size_t len, bool nosniff)
{
        ps->nosniff = nosniff;
        free(ps->resp);
        ps->resp = body;
        ps->resp_len = body ? len : 0;
        ps->resp_off = 0;
        ps->status = status;
        ps->resp_ctype = ctype ? ctype : "text/plain";
        ps->headers_due = true;
        /* at once: waiting for POLLOUT costs a poll() per request; what the
         * socket does not take, lws keeps and sends when it is writeable */
        return on_writeable(wsi, ps);
}

static int respond_text(struct lws *wsi, struct pss *ps, int status, const char *text)
{
        char *b = se_strdup(text);
        return respond(wsi, ps, status, "text/plain; charset=utf-8", b, b ? strlen(b) : 0, true);
}

/* An error after which the connection cannot be trusted to frame the next
 * request (a body we did not read, a deadline passed): answer and hang up. */
static int respond_and_close(struct lws *wsi, struct pss *ps, int status, const char *text)
{
        ps->close_after = true;
        return respond_text(wsi, ps, status, text);
}

static unsigned request_timeout_s(const struct se_httpd *h)
{
        return h->cfg.timeout_s ? h->cfg.timeout_s : 10;
}

static int dispatch(struct lws *wsi, struct se_httpd *h, struct pss *ps)
{
        if (ps->too_big)
                return respond_and_close(wsi, ps, 413, "request body too large\n");
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
        return respond(wsi, ps, resp.status, resp.content_type, resp.body, resp.len, resp.nosniff);
}

static int on_http(struct lws *wsi, struct se_httpd *h, struct pss *ps, const char *uri)
{
        pss_reset(ps);
        /* the whole request, body and answer included, gets timeout_s: lws
         * only bounds the gap between two reads, which a client sending a
         * byte now and then never reaches */
        lws_set_timer_usecs(wsi, (lws_usec_t)request_timeout_s(h) * LWS_US_PER_SEC);
        ps->in_request = true;
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

        /* lws 4.1 does not decode a chunked request body: it would wait for
         * a body it never delivers. Clients of a webhook send a length. */
        if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0)
                return respond_and_close(wsi, ps, 411, "a Content-Length is required\n");
        char cl[32] = "";
        int64_t n = 0; /* neither length nor chunks: no body (RFC 9112 6.3) */
        if (lws_hdr_copy(wsi, cl, sizeof(cl), WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0 &&
            se_parse_i64(cl, 0, INT64_MAX, &n) < 0)
                return respond_and_close(wsi, ps, 400, "invalid Content-Length\n");
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
        if (!ps->headers_due && !ps->resp)
                return 0;
        struct loop *l = lws_context_user(lws_get_context(wsi));
        if (!l->out && !(l->out = se_malloc(LWS_PRE + HEADROOM + CHUNK)))
                return -1;
        unsigned char *buf = l->out;
        unsigned char *start = buf + LWS_PRE, *p = start;
        if (ps->headers_due) {
                unsigned char *end = buf + LWS_PRE + HEADROOM - 1;
                if (lws_add_http_common_headers(wsi, (unsigned)ps->status, ps->resp_ctype,
                                                (lws_filepos_t)ps->resp_len, &p, end) ||
                    (ps->nosniff && lws_add_http_header_by_name(
                                            wsi, (const unsigned char *)"x-content-type-options:",
                                            (const unsigned char *)"nosniff", 7, &p, end)) ||
                    (ps->close_after &&
                     lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION,
                                                  (const unsigned char *)"close", 5, &p, end)) ||
                    lws_finalize_http_header(wsi, &p, end))
                        return -1;
                ps->headers_due = false;
        }
        size_t n = ps->resp_len - ps->resp_off;
        if (n > CHUNK)
                n = CHUNK;
        if (n)
                memcpy(p, ps->resp + ps->resp_off, n);
        p += n;
        bool last = ps->resp_off + n == ps->resp_len;
        size_t total = (size_t)(p - start);
        /* TLS writes one 16 KiB record per write(): cork the socket so a
         * response leaves in full segments and wakes the reader once */
        int fd = total > TLS_RECORD ? lws_get_socket_fd(wsi) : -1, on = 1, off = 0;
        if (fd >= 0)
                setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
        int w = lws_write(wsi, start, total, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP);
        if (fd >= 0)
                setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
        if (w != (int)total)
                return -1;
        ps->resp_off += n;
        if (!last) {
                lws_callback_on_writable(wsi);
                return 0;
        }
        free(ps->resp);
        ps->resp = NULL;
        if (ps->close_after)
                return -1;
        /* Debian's lws 4.1 fires a timer "cancelled" with -1 at once: move
         * it instead to the keep-alive idle deadline */
        ps->in_request = false;
        lws_set_timer_usecs(wsi, (lws_usec_t)KEEPALIVE_S * LWS_US_PER_SEC);
        return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* On the loop's thread: takes the sockets the acceptor queued. */
static void adopt_pending(struct loop *l)
{
        int fds[MAX_PENDING];
        pthread_mutex_lock(&l->lock);
        unsigned n = l->n_pending;
        memcpy(fds, l->pending, n * sizeof(*fds));
        l->n_pending = 0;
        pthread_mutex_unlock(&l->lock);
        for (unsigned i = 0; i < n; i++)
                (void)lws_adopt_socket_vhost(l->vhost, fds[i]); /* closes fd on failure */
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
        struct pss *ps = user;
        struct loop *l = lws_context_user(lws_get_context(wsi));
        struct se_httpd *h = l->h;
        switch (reason) {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
                adopt_pending(l);
                return 0;
        case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS: {
                SSL_CTX *ctx = user;
                if (!h->tls)
                        return 0;
                pthread_mutex_lock(&h->certs.lock);
                int ok = SSL_CTX_use_certificate(ctx, h->certs.cert) == 1 &&
                         SSL_CTX_use_PrivateKey(ctx, h->certs.key) == 1;
                pthread_mutex_unlock(&h->certs.lock);
                return ok && httpd_certs_setup_ctx(&h->certs, ctx) == 0 ? 0 : 1;
        }
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
                /* no WebSocket or h2c here: an upgraded connection would
                 * leave HTTP's deadlines behind */
                return -1;
        case LWS_CALLBACK_TIMER:
                /* the request's deadline: still reading it, say so; already
                 * answering (a client that does not read) or idle between
                 * requests, just hang up */
                if (ps && ps->in_request && !ps->headers_due && !ps->resp)
                        return respond_and_close(wsi, ps, 408, "request timeout\n");
                return -1;
        case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
                /* a new connection: its first request must come within
                 * timeout_s too (lws alone keeps a silent one for minutes) */
                lws_set_timer_usecs(wsi, (lws_usec_t)request_timeout_s(h) * LWS_US_PER_SEC);
                return 0;
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
        /* tx_packet_size: lws otherwise hands OpenSSL 4 KiB per event-loop
         * turn (pt_serv_buf_size), 15 writes and polls for a 60 KB answer */
        { "http", callback, sizeof(struct pss), 0, 0, NULL, HEADROOM + CHUNK },
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
        info.user = l;
        info.timeout_secs = request_timeout_s(h);
        info.keepalive_timeout = KEEPALIVE_S;
        info.alpn = "http/1.1";
        info.ssl_cipher_list = HTTPD_TLS12_CIPHERS; /* httpd_certs_setup_ctx sets it again */
        info.options = LWS_SERVER_OPTION_ALLOW_LISTEN_SHARE |
                       LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND | LWS_SERVER_OPTION_DISABLE_IPV6;
        if (!h->cfg.address || strchr(h->cfg.address, ':'))
                info.options &= ~(uint64_t)LWS_SERVER_OPTION_DISABLE_IPV6;
        if (h->tls)
                info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT |
                                LWS_SERVER_OPTION_CREATE_VHOST_SSL_CTX;
        l->h = h;
        pthread_mutex_init(&l->lock, NULL);
        l->ctx = lws_create_context(&info);
        if (!l->ctx) {
                se_diag_set(diag, NULL, 0, 0, "cannot listen on %s:%d",
                            h->cfg.address ? h->cfg.address : "*", port);
                return -EADDRINUSE;
        }
        l->vhost = lws_get_vhost_by_name(l->ctx, "default");
        return 0;
}

/* Our listening socket (several loops): the address as lws would bind it,
 * IPv6 dual-stack for all interfaces. */
static int listen_socket(struct se_httpd *h, struct se_diag *diag)
{
        const char *addr = h->cfg.address;
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        socklen_t len;
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        if (addr && inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
                a4->sin_family = AF_INET;
                a4->sin_port = htons((uint16_t)h->cfg.port);
                len = sizeof(*a4);
        } else if (!addr || inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons((uint16_t)h->cfg.port);
                if (!addr)
                        a6->sin6_addr = in6addr_any;
                len = sizeof(*a6);
        } else {
                se_diag_set(diag, NULL, 0, 0, "cannot listen on %s: not an IP address", addr);
                return -EINVAL;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 && !addr) { /* no IPv6 here */
                memset(&ss, 0, sizeof(ss));
                a4->sin_family = AF_INET;
                a4->sin_port = htons((uint16_t)h->cfg.port);
                len = sizeof(*a4);
                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        }
        int on = 1, off = 0;
        if (fd >= 0) {
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
                if (ss.ss_family == AF_INET6)
                        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        }
        if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0 ||
            getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
                int err = errno;
                if (fd >= 0)
                        close(fd);
                se_diag_set(diag, NULL, 0, 0, "cannot listen on %s:%d: %s", addr ? addr : "*",
                            h->cfg.port, strerror(err));
                return -err;
        }
        h->listen_fd = fd;
        h->port = ntohs(ss.ss_family == AF_INET6 ? a6->sin6_port : a4->sin_port);
        return 0;
}

/* Accepts connections and deals them to the loops in turn. */
static void *accept_run(void *arg)
{
        struct se_httpd *h = arg;
        struct pollfd pfd[2] = { { .fd = h->listen_fd, .events = POLLIN },
                                 { .fd = h->wake[0], .events = POLLIN } };
        while (!atomic_load(&h->stop)) {
                if (poll(pfd, 2, -1) < 0 || pfd[1].revents)
                        continue;
                int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM)
                                poll(NULL, 0, 100); /* do not spin */
                        continue;
                }
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                struct loop *l = &h->loops[h->next++ % h->n_loops];
                pthread_mutex_lock(&l->lock);
                bool queued = l->n_pending < MAX_PENDING;
                if (queued)
                        l->pending[l->n_pending++] = fd;
                pthread_mutex_unlock(&l->lock);
                if (queued)
                        lws_cancel_service(l->ctx);
                else
                        close(fd); /* the loop is stuck: shed */
        }
        return NULL;
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
        struct se_httpd *h = se_calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->cfg = *cfg;
        h->tls = cfg->cert_file != NULL;
        lws_set_log_level(LLL_ERR, log_emit);
        if (h->tls) {
                int r = httpd_certs_init(&h->certs, cfg->cert_file, cfg->key_file, diag);
                if (r < 0) {
                        httpd_certs_release(&h->certs);
                        free(h);
                        return r;
                }
        }
        unsigned n = cfg->threads ? cfg->threads : 1;
        h->listen_fd = h->wake[0] = h->wake[1] = -1;
        if (n > SE_HTTPD_MAX_THREADS) {
                se_diag_set(diag, NULL, 0, 0, "at most %d threads", SE_HTTPD_MAX_THREADS);
                if (h->tls)
                        httpd_certs_release(&h->certs);
                free(h);
                return -EINVAL;
        }
        /* One loop: lws listens. Several: Debian's libwebsockets 4.1 has one
         * service thread per context and no SO_REUSEPORT, so we listen and
         * accept, and hand each connection to one context's thread. */
        if (n > 1) {
                int r = listen_socket(h, diag);
                if (r == 0 && pipe2(h->wake, O_CLOEXEC) < 0)
                        r = -errno;
                if (r < 0) {
                        se_httpd_stop(h);
                        return r;
                }
        }
        int port = n > 1 ? CONTEXT_PORT_NO_LISTEN_SERVER : cfg->port;
        for (unsigned i = 0; i < n; i++) {
                int r = make_context(h, &h->loops[i], port, diag);
                if (r < 0) {
                        se_httpd_stop(h);
                        return r;
                }
                h->n_loops++;
                if (n == 1) {
                        struct lws_vhost *vh = h->loops[0].vhost;
                        h->port = vh ? lws_get_vhost_listen_port(vh) : port;
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
        if (n > 1) {
                if (pthread_create(&h->acceptor, NULL, accept_run, h) != 0) {
                        se_httpd_stop(h);
                        se_diag_set(diag, NULL, 0, 0, "cannot start a thread");
                        return -EAGAIN;
                }
                h->acceptor_running = true;
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
        return h->tls ? httpd_certs_check(&h->certs, true, diag) : 0;
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
        if (h->acceptor_running) {
                (void)!write(h->wake[1], "x", 1);
                pthread_join(h->acceptor, NULL);
        }
        for (unsigned i = 0; i < h->n_loops; i++)
                lws_cancel_service(h->loops[i].ctx);
        for (unsigned i = 0; i < h->n_loops; i++)
                if (h->loops[i].running)
                        pthread_join(h->loops[i].thread, NULL);
        for (unsigned i = 0; i < h->n_loops; i++) {
                lws_context_destroy(h->loops[i].ctx);
                for (unsigned k = 0; k < h->loops[i].n_pending; k++)
                        close(h->loops[i].pending[k]);
                pthread_mutex_destroy(&h->loops[i].lock);
                free(h->loops[i].out);
        }
        if (h->listen_fd >= 0)
                close(h->listen_fd);
        for (int i = 0; i < 2; i++)
                if (h->wake[i] >= 0)
                        close(h->wake[i]);
        if (h->tls)
                httpd_certs_release(&h->certs);
        free(h);
        return NULL;
}
