/* log.h — klog-style logging for the top layer (cmd/ and daemon loops).
 *
 * Library code does not log. Text format is klog's
 * `I1130 08:00:00.000000 1234 file.c:42] message`; the JSON format writes one
 * object a line. Thread-safe (one write(2) per line). */
#ifndef SVCENV_LOG_H
#define SVCENV_LOG_H

#include <stdbool.h>

#include <svcenv/macro.h>

enum se_log_severity { SE_LOG_INFO, SE_LOG_WARNING, SE_LOG_ERROR };

/* -v N: info messages with a level above N are dropped. */
void se_log_set_verbosity(int v);
int se_log_verbosity(void);
/* Switches to JSON lines (true) or klog text (false). */
void se_log_set_json(bool json);
/* Sends log lines to fd (default 2). */
void se_log_set_fd(int fd);
void se_log_write(enum se_log_severity sev, int v, const char *file, int line, const char *fmt, ...)
        SE_PRINTF(5, 6);

#define se_log_info(v, ...)                                         \
 do {                                                               \
  if ((v) <= se_log_verbosity())                                    \
   se_log_write(SE_LOG_INFO, (v), __FILE__, __LINE__, __VA_ARGS__); \
 } while (0)
#define se_log_warn(...)  se_log_write(SE_LOG_WARNING, 0, __FILE__, __LINE__, __VA_ARGS__)
#define se_log_error(...) se_log_write(SE_LOG_ERROR, 0, __FILE__, __LINE__, __VA_ARGS__)

#endif
