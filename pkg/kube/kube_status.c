/* The one table from API results to errno (see kube_client.h), and the
 * client-side token bucket. */
#include <errno.h>
#include <string.h>

#include <svcenv/kube_client.h>

static const struct {
        const char *reason;
        int err;
} reasons[] = {
        { "NotFound", -ENOENT },
        { "AlreadyExists", -EEXIST },
        { "Conflict", -ESTALE },
        { "Gone", -ESTALE },
        { "Expired", -ESTALE },
        { "Forbidden", -EACCES },
        { "Unauthorized", -EPERM },
        { "Invalid", -EINVAL },
        { "BadRequest", -EINVAL },
        { "TooManyRequests", -EAGAIN },
        { "ServiceUnavailable", -EAGAIN },
        { "Timeout", -ETIMEDOUT },
        { "ServerTimeout", -ETIMEDOUT },
        { "RequestEntityTooLarge", -E2BIG },
        { "MethodNotAllowed", -EOPNOTSUPP },
        { "UnsupportedMediaType", -EOPNOTSUPP },
        { "NotAcceptable", -EOPNOTSUPP },
        { "InternalError", -EIO },
};

static const struct {
        long code;
        int err;
} codes[] = {
        { 400, -EINVAL },     { 401, -EPERM },      { 403, -EACCES }, { 404, -ENOENT },
        { 405, -EOPNOTSUPP }, { 406, -EOPNOTSUPP }, { 409, -ESTALE }, { 410, -ESTALE },
        { 413, -E2BIG },      { 415, -EOPNOTSUPP }, { 422, -EINVAL }, { 429, -EAGAIN },
        { 503, -EAGAIN },     { 504, -ETIMEDOUT },
};

int se_kube_status_errno(long code, const char *reason)
{
        if (code >= 200 && code < 300)
                return 0;
        for (size_t i = 0; reason && *reason && i < SE_ARRAY_SIZE(reasons); i++)
                if (strcmp(reason, reasons[i].reason) == 0)
                        return reasons[i].err;
        for (size_t i = 0; i < SE_ARRAY_SIZE(codes); i++)
                if (codes[i].code == code)
                        return codes[i].err;
        return code >= 500 ? -EIO : -EINVAL;
}

void se_token_bucket_init(struct se_token_bucket *b, double qps, unsigned burst, uint64_t now_ns)
{
        b->qps = qps;
        b->burst = burst ? burst : 1;
        b->tokens = b->burst;
        b->last_ns = now_ns;
}

uint64_t se_token_bucket_reserve(struct se_token_bucket *b, uint64_t now_ns)
{
        if (b->qps <= 0)
                return 0;
        if (now_ns > b->last_ns) {
                b->tokens += (double)(now_ns - b->last_ns) / 1e9 * b->qps;
                if (b->tokens > b->burst)
                        b->tokens = b->burst;
                b->last_ns = now_ns;
        }
        b->tokens -= 1;
        if (b->tokens >= 0)
                return 0;
        return (uint64_t)(-b->tokens / b->qps * 1e9);
}

const char *se_kube_diag_message(const struct se_diag *diag)
{
        const char *t = diag->text;
        for (const char *p = strstr(t, " ("); p; p = strstr(p + 1, " (")) {
                const char *q = p + 2;
                if (*q < '0' || *q > '9')
                        continue;
                while (*q >= '0' && *q <= '9')
                        q++;
                if (strncmp(q, "): ", 3) == 0)
                        return q + 3;
        }
        return t;
}
