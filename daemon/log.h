/* log.h: tileatomd's logging. Lines go to stderr (never stdout), each prefixed with its
 * syslog/journald priority ("<3>" .. "<7>") so that journald files them at the right
 * level. Safe to call from any thread: each line is written with one write(2). */
#ifndef TA_DAEMON_LOG_H
#define TA_DAEMON_LOG_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Writes the n bytes at buf to fd whole (again after a short write); 0 or an errno.
 * ta_log's write, and the data directory's. */
int ta_write_all(int fd, const void *buf, size_t n);
/* Writes one line "<N>message\n" to stderr when level is enabled. */
void ta_log(ta_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One kind of message written at most once per interval; the ones held back in between are
 * counted and reported with the next one written (or by ta_log_limit_flush). */
typedef struct ta_log_limit {
	pthread_mutex_t lock; /* guards the fields below (messages come from any thread) */
	uint64_t interval_ms; /* least time between two lines */
	uint64_t last_ms;     /* monotonic time of the last line (0: none yet) */
	uint64_t held;        /* messages held back since the last line */
	const char *what;     /* what the messages are, for ta_log_limit_flush's line */
} ta_log_limit;

/* Initialiser of a ta_log_limit: at most one line per seconds, what describes the lines. */
#define TA_LOG_LIMIT_INIT(seconds, what_text)                                                      \
	{                                                                                          \
		PTHREAD_MUTEX_INITIALIZER, (uint64_t)(seconds)*1000u, 0, 0, (what_text)            \
	}

/* Like ta_log, but writes at most one line per interval of lim; a line written after some
 * were held back says how many ("... (and 41 more in the last 10 s)"). */
void ta_log_limited(ta_log_limit *lim, ta_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes "<what>: N more in the last S s" when messages were held back and the interval has
 * passed (called from a periodic timer, so that the last count is not lost). */
void ta_log_limit_flush(ta_log_limit *lim, ta_log_level level);

#endif /* TA_DAEMON_LOG_H */
