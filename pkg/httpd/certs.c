/* Serving certificate and key, re-read from disk when the files change. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "httpd_internal.h"

#define MAX_CHAIN 16

static bool same_file(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static void ssl_error(struct se_diag *diag, const char *what, const char *file)
{
        char buf[256] = "";
        unsigned long e = ERR_get_error();
        if (e)
                ERR_error_string_n(e, buf, sizeof(buf));
        ERR_clear_error();
        se_diag_set(diag, file, 0, 0, "%s%s%s", what, *buf ? ": " : "", buf);
}

/* Reads the pair; on success replaces the current one (lock held). */
static int load_pair(struct certs *c, const struct stat *cst, const struct stat *kst,
                     struct se_diag *diag)
{
        BIO *bio = BIO_new_file(c->cert_file, "r");
        if (!bio) {
                ssl_error(diag, "cannot open certificate", c->cert_file);
                return -ENOENT;
        }
        X509 *cert = PEM_read_bio_X509_AUX(bio, NULL, NULL, NULL);
        STACK_OF(X509) *chain = sk_X509_new_null();
        X509 *extra;
        while (cert && chain && sk_X509_num(chain) < MAX_CHAIN &&
               (extra = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
                if (!sk_X509_push(chain, extra))
                        X509_free(extra);
        ERR_clear_error(); /* the end of the file reads as an error */
        BIO_free(bio);
        EVP_PKEY *key = NULL;
        if (cert && (bio = BIO_new_file(c->key_file, "r"))) {
                key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
                BIO_free(bio);
        }
        int r = 0;
        if (!cert) {
                ssl_error(diag, "no PEM certificate", c->cert_file);
                r = -EINVAL;
        } else if (!key) {
                ssl_error(diag, "no PEM private key", c->key_file);
                r = -EINVAL;
        } else if (!chain) {
                r = -ENOMEM;
        } else if (X509_check_private_key(cert, key) != 1) {
                ssl_error(diag, "private key does not match the certificate", c->key_file);
                r = -EINVAL;
        }
        if (r < 0) {
                X509_free(cert);
                EVP_PKEY_free(key);
                sk_X509_pop_free(chain, X509_free);
                return r;
        }
        X509_free(c->cert);
        EVP_PKEY_free(c->key);
        sk_X509_pop_free(c->chain, X509_free);
        c->cert = cert;
        c->key = key;
        c->chain = chain;
        c->cert_st = *cst;
        c->key_st = *kst;
        return 0;
}

static int64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Lock held. */
static int check_locked(struct certs *c, bool force, struct se_diag *diag)
{
        int64_t now = now_ms();
        if (!force && c->cert && now - c->checked_ms < 1000)
                return 0;
        c->checked_ms = now;
        struct stat cst, kst;
        if (stat(c->cert_file, &cst) < 0 || stat(c->key_file, &kst) < 0) {
                se_diag_set(diag, c->cert_file, 0, 0, "%s", strerror(errno));
                if (c->cert)
                        atomic_fetch_add(&c->errors, 1);
                return -errno;
        }
        if (c->cert && same_file(&cst, &c->cert_st) && same_file(&kst, &c->key_st))
                return 0;
        bool initial = !c->cert;
        int r = load_pair(c, &cst, &kst, diag);
        if (!initial)
                atomic_fetch_add(r == 0 ? &c->reloads : &c->errors, 1);
        return r;
}

int httpd_certs_init(struct certs *c, const char *cert_file, const char *key_file,
                     struct se_diag *diag)
{
        memset(c, 0, sizeof(*c));
        pthread_mutex_init(&c->lock, NULL);
        c->cert_file = cert_file;
        c->key_file = key_file;
        return check_locked(c, true, diag);
}

void httpd_certs_release(struct certs *c)
{
        X509_free(c->cert);
        EVP_PKEY_free(c->key);
        sk_X509_pop_free(c->chain, X509_free);
        c->cert = NULL;
        c->key = NULL;
        c->chain = NULL;
        pthread_mutex_destroy(&c->lock);
}

int httpd_certs_check(struct certs *c, bool force, struct se_diag *diag)
{
        pthread_mutex_lock(&c->lock);
        int r = check_locked(c, force, diag);
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* OpenSSL's certificate callback: runs for every handshake, before the
 * server picks its certificate. */
static int cert_cb(SSL *ssl, void *arg)
{
        struct certs *c = arg;
        pthread_mutex_lock(&c->lock);
        check_locked(c, false, NULL);
        int ok = c->cert && SSL_use_cert_and_key(ssl, c->cert, c->key, c->chain, 1) == 1;
        pthread_mutex_unlock(&c->lock);
        return ok ? 1 : 0;
}

int httpd_certs_setup_ctx(struct certs *c, SSL_CTX *ctx)
{
        if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
            SSL_CTX_set_cipher_list(ctx, HTTPD_TLS12_CIPHERS) != 1)
                return -EINVAL;
        SSL_CTX_set_cert_cb(ctx, cert_cb, c);
        return 0;
}
