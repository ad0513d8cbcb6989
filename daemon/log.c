/* log.c: leveled logging to stderr with journald priority prefixes (see log.h). A line is
 * formatted into a local buffer and written at once (ta_write_all, the daemon's write of
 * bytes whole, which the data directory's files use too), so that lines from worker threads
 * never interleave. Over-long messages are cut and end in "...". */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* Most verbose level written; read by every thread. */
static atomic_int log_level = TA_LOG_NOTICE;

void ta_log_set_level(ta_log_level level)
{
	atomic_store(&log_level, (int)level);
}

bool ta_log_enabled(ta_log_level level)
{
	return (int)level <= atomic_load(&log_level);
}

int ta_log_level_parse(const char *name)
{
	static const struct {
		const char *name;   /* accepted spelling */
		ta_log_level level; /* its level */
	} names[] = {
	    {"err", TA_LOG_ERR},         {"error", TA_LOG_ERR},    {"3", TA_LOG_ERR},
	    {"warning", TA_LOG_WARNING}, {"warn", TA_LOG_WARNING}, {"4", TA_LOG_WARNING},
	    {"notice", TA_LOG_NOTICE},   {"5", TA_LOG_NOTICE},     {"info", TA_LOG_INFO},
	    {"6", TA_LOG_INFO},          {"debug", TA_LOG_DEBUG},  {"7", TA_LOG_DEBUG},
	};
	if (!name)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i].name) == 0)
			return (int)names[i].level;
	return -1;
}

int ta_write_all(int fd, const void *buf, size_t n)
{
	for (const char *p = buf; n > 0;) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

void ta_log(ta_log_level level, const char *fmt, ...)
{
	if (!ta_log_enabled(level))
		return;
	char line[1024];
	int head = snprintf(line, sizeof(line), "<%d>", (int)level);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line + head, sizeof(line) - (size_t)head - 1, fmt, ap);
	va_end(ap);
	size_t len;
	if (n < 0) {
		len = (size_t)head;
	} else if ((size_t)n >= sizeof(line) - (size_t)head - 1) {
		len = sizeof(line) - 1;
		memcpy(line + len - 3, "...", 3);
	} else {
		len = (size_t)head + (size_t)n;
	}
	line[len++] = '\n';
	(void)ta_write_all(STDERR_FILENO, line, len); /* nowhere to report a failing stderr */
}

/* Whether a line of lim is due now (flush: only to tell of messages held back); if so takes
 * how many were held back (*held) and the seconds since the last line (*since), else (not
 * flush) counts this message held back. */
static bool limit_due(ta_log_limit *lim, bool flush, uint64_t *held, uint64_t *since)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now =
	    (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1u; /* not 0 */
	pthread_mutex_lock(&lim->lock);
	bool due =
	    (!lim->last_ms || now - lim->last_ms >= lim->interval_ms) && (!flush || lim->held);
	*held = lim->held;
	*since = lim->last_ms ? (now - lim->last_ms) / 1000u : 0;
	if (due) {
		lim->held = 0;
		lim->last_ms = now;
	} else if (!flush) {
		lim->held++;
	}
	pthread_mutex_unlock(&lim->lock);
	return due;
}

void ta_log_limited(ta_log_limit *lim, ta_log_level level, const char *fmt, ...)
{
	uint64_t held, since;
	if (!ta_log_enabled(level) || !limit_due(lim, false, &held, &since))
		return;
	char text[900];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (held)
		ta_log(level, "%s (and %llu more in the last %llu s)", text,
		       (unsigned long long)held, (unsigned long long)since);
	else
		ta_log(level, "%s", text);
}

void ta_log_limit_flush(ta_log_limit *lim, ta_log_level level)
{
	uint64_t held, since;
	if (limit_due(lim, true, &held, &since))
		ta_log(level, "%s: %llu more in the last %llu s", lim->what,
		       (unsigned long long)held, (unsigned long long)since);
}
