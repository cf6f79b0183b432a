/* timeutil.h — clocks and Kubernetes' RFC 3339 timestamps. */
#ifndef SVCENV_TIMEUTIL_H
#define SVCENV_TIMEUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Monotonic clock in nanoseconds. */
uint64_t se_now_mono_ns(void);
/* Wall clock in nanoseconds since the epoch. */
int64_t se_now_real_ns(void);
/* Formats t (ns since epoch) as RFC 3339 in UTC with the given number of
 * fractional digits (0 = metav1.Time's `2006-01-02T15:04:05Z`, 9 = RFC3339Nano
 * with trailing zeros trimmed as Go does). buf >= 40 bytes. */
void se_time_format_rfc3339(int64_t t_ns, int frac_digits, char *buf, size_t size);
/* Parses RFC 3339 (`Z` or ±hh:mm offset, optional fraction). 0, -EINVAL, or
 * -ERANGE outside the years 1678..2262 (int64 nanoseconds). */
int se_time_parse_rfc3339(const char *s, int64_t *ret_ns);

#endif
