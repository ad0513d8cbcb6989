/* log.c: leveled logging to stderr with journald priority prefixes (see log.h). A line is
 * formatted into a local buffer and written with a single write(2), so that lines from
 * worker threads never interleave. Over-long messages are cut and end in "...". */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
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
	const char *p = line;
	while (len > 0) {
		ssize_t w = write(STDERR_FILENO, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* nowhere to report a failing stderr */
		p += w;
		len -= (size_t)w;
	}
}
