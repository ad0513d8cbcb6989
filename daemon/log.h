/* log.h: tileatomd's logging. Lines go to stderr (never stdout), each prefixed with its
 * syslog/journald priority ("<3>" .. "<7>") so that journald files them at the right
 * level. Safe to call from any thread: each line is written with one write(2). */
#ifndef TA_DAEMON_LOG_H
#define TA_DAEMON_LOG_H

#include <stdbool.h>

/* Log levels, numerically equal to the syslog priorities journald understands. */
typedef enum ta_log_level {
	TA_LOG_ERR = 3,     /* the daemon cannot do what it was asked (startup failures) */
	TA_LOG_WARNING = 4, /* something is wrong but the daemon goes on */
	TA_LOG_NOTICE = 5,  /* normal but significant: start, listen, stop */
	TA_LOG_INFO = 6,    /* connections, backend choice details */
	TA_LOG_DEBUG = 7    /* per-request detail */
} ta_log_level;

/* Sets the most verbose level that is still written (default TA_LOG_NOTICE). */
void ta_log_set_level(ta_log_level level);
/* True when a message at level would be written (to skip costly formatting). */
bool ta_log_enabled(ta_log_level level);
/* Parses "err", "warning", "notice", "info", "debug" (also "error", "warn" and the digits
 * 3..7); returns -1 when unknown. */
int ta_log_level_parse(const char *name);

/* Writes one line "<N>message\n" to stderr when level is enabled. */
void ta_log(ta_log_level level, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif /* TA_DAEMON_LOG_H */
