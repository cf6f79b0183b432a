/* klog-compatible text lines or JSON lines (see log.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <svcenv/jsonstr.h>
#include <svcenv/log.h>

static atomic_int verbosity;
static atomic_bool json_format;
static atomic_int log_fd = 2;

void se_log_set_verbosity(int v)
{
        verbosity = v;
}

int se_log_verbosity(void)
{
        return verbosity;
}

void se_log_set_json(bool json)
{
        json_format = json;
}

void se_log_set_fd(int fd)
{
        log_fd = fd;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

void se_log_write(enum se_log_severity sev, int v, const char *file, int line, const char *fmt, ...)
{
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);

        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char out[6 * sizeof(msg) + 512]; /* the escaped message and the JSON around it */
        int n;
        if (json_format) {
                /* escaped as every JSON we write; a message cut in the middle
                 * of a UTF-8 sequence ends in U+FFFD */
                struct se_strbuf esc;
                se_strbuf_init(&esc, 6 * sizeof(msg) + 1); /* \u00XX for each */
                se_json_put_escaped(&esc, msg);
                n = snprintf(out, sizeof(out),
                             "{\"ts\":%lld.%03ld,\"caller\":\"%s:%d\",\"msg\":\"%s\",\"v\":%d%s}\n",
                             (long long)ts.tv_sec, ts.tv_nsec / 1000000, base_name(file), line,
                             se_strbuf_failed(&esc) ? "(message too long to escape)" : esc.buf, v,
                             sev == SE_LOG_ERROR ? ",\"err\":true" :
                                                   (sev == SE_LOG_WARNING ? ",\"warn\":true" : ""));
                se_strbuf_release(&esc);
        } else {
                static const char letters[] = { 'I', 'W', 'E' };
                n = snprintf(out, sizeof(out), "%c%02d%02d %02d:%02d:%02d.%06ld %7ld %s:%d] %s\n",
                             letters[sev], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                             tm.tm_sec, ts.tv_nsec / 1000, (long)syscall(SYS_gettid),
                             base_name(file), line, msg);
        }
        if (n < 0)
                return;
        if ((size_t)n >= sizeof(out)) {
                n = (int)sizeof(out) - 1;
                out[n - 1] = '\n';
        }
        ssize_t w = write(log_fd, out, (size_t)n);
        (void)w;
}
