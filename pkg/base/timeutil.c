/* Clocks and RFC 3339 (see timeutil.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <svcenv/timeutil.h>

uint64_t se_now_mono_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t se_now_real_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

void se_time_format_rfc3339(int64_t t_ns, int frac_digits, char *buf, size_t size)
{
        time_t sec = (time_t)(t_ns / 1000000000ll);
        long nsec = (long)(t_ns % 1000000000ll);
        if (nsec < 0) {
                nsec += 1000000000l;
                sec--;
        }
        struct tm tm;
        gmtime_r(&sec, &tm);
        char frac[16] = "";
        if (frac_digits > 0 && nsec) {
                char digits[10];
                snprintf(digits, sizeof(digits), "%09ld", nsec);
                int n = frac_digits > 9 ? 9 : frac_digits;
                digits[n] = '\0';
                /* Go trims trailing zeros in RFC3339Nano */
                while (n > 0 && digits[n - 1] == '0')
                        digits[--n] = '\0';
                if (n)
                        snprintf(frac, sizeof(frac), ".%s", digits);
        }
        snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d%sZ", tm.tm_year + 1900, tm.tm_mon + 1,
                 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

int se_time_parse_rfc3339(const char *s, int64_t *ret_ns)
{
        int y, mo, d, h, mi, se, consumed = 0;
        if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &consumed) != 6 ||
            consumed != 19)
                return -EINVAL;
        if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
                return -EINVAL;
        const char *p = s + 19;
        long nsec = 0;
        if (*p == '.') {
                p++;
                int digits = 0;
                long scale = 100000000l;
                while (*p >= '0' && *p <= '9') {
                        if (digits < 9)
                                nsec += (*p - '0') * scale;
                        scale /= 10;
                        digits++;
                        p++;
                }
                if (!digits)
                        return -EINVAL;
        }
        long offset = 0;
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int oh, om, n = 0;
                if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5)
                        return -EINVAL;
                offset = (oh * 3600l + om * 60l) * (*p == '-' ? -1 : 1);
                p += 6;
        } else {
                return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        struct tm tm = { .tm_year = y - 1900,
                         .tm_mon = mo - 1,
                         .tm_mday = d,
                         .tm_hour = h,
                         .tm_min = mi,
                         .tm_sec = se };
        time_t t = timegm(&tm);
        int64_t secs = (int64_t)t - offset;
        /* nanoseconds in int64 reach only the years 1678..2262 */
        if (secs > INT64_MAX / 1000000000ll - 1 || secs < INT64_MIN / 1000000000ll + 1)
                return -ERANGE;
        *ret_ns = secs * 1000000000ll + nsec;
        return 0;
}
