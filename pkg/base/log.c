/* klog-compatible text lines or JSON lines (see log.h). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* JSON string escaping for the message (controls, quote, backslash). */
static size_t json_escape(char *out, size_t size, const char *in)
{
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *)in; *p && o + 7 < size; p++) {
                if (*p == '"' || *p == '\\') {
                        out[o++] = '\\';
                        out[o++] = (char)*p;
                } else if (*p < 0x20) {
                        o += (size_t)snprintf(out + o, size - o, "\\u%04x", *p);
                } else {
                        out[o++] = (char)*p;
                }
        }
        out[o] = '\0';
        return o;
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
        char out[4096];
        int n;
        if (json_format) {
                char esc[3000];
                json_escape(esc, sizeof(esc), msg);
                n = snprintf(out, sizeof(out),
                             "{\"ts\":%lld.%03ld,\"caller\":\"%s:%d\",\"msg\":\"%s\",\"v\":%d%s}\n",
                             (long long)ts.tv_sec, ts.tv_nsec / 1000000, base_name(file), line, esc,
                             v,
                             sev == SE_LOG_ERROR ? ",\"err\":true" :
                                                   (sev == SE_LOG_WARNING ? ",\"warn\":true" : ""));
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
