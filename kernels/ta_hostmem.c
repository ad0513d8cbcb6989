/* ta_hostmem.c: the host memory check before a tile allocation (see ta_hostmem.h): reads
 * MemAvailable and the cgroup v1 and v2 limits of the process's cgroup and its ancestors,
 * and keeps the budget that spares most creates the reading. */
#include "ta_hostmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes ROOT + path into buf (ROOT: TILEATOM_HOSTMEM_ROOT, or nothing). False when it
 * does not fit. */
static bool host_path(char *buf, size_t size, const char *fmt, const char *a, const char *b)
{
	const char *root = getenv(TA_HOSTMEM_ROOT_ENV);
	int n = snprintf(buf, size, "%s", root ? root : "");
	if (n < 0 || (size_t)n >= size)
		return false;
	int m = snprintf(buf + n, size - (size_t)n, fmt, a, b);
	return m >= 0 && (size_t)m < size - (size_t)n;
}

/* Reads the first unsigned number of a file; false when absent, unreadable or not a
 * number (cgroup v2 writes "max" for no limit). */
static bool read_number(const char *path, uint64_t *out)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	unsigned long long v;
	bool ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	if (ok)
		*out = (uint64_t)v;
	return ok;
}

/* Lowers *best to room (of total, from the source what names: "MemAvailable", or the
 * cgroup cg's limit of version v1 or 2) when it is smaller, or *best is still empty. */
static void consider(ta_hostmem_reading *best, bool *known, uint64_t room, uint64_t total,
                     const char *what, const char *cg, bool v1)
{
	if (*known && room >= best->room)
		return;
	best->room = room;
	best->total = total;
	if (cg) /* a path too long for what is cut: the message stays readable */
		snprintf(best->what, sizeof(best->what), "cgroup v%d %.100s %s", v1 ? 1 : 2,
		         cg[0] ? cg : "/", what);
	else
		snprintf(best->what, sizeof(best->what), "%s", what);
	*known = true;
}

/* Reads MemAvailable and MemTotal. */
static void read_meminfo(ta_hostmem_reading *best, bool *known)
{
	char path[512];
	if (!host_path(path, sizeof(path), "/proc/meminfo%s%s", "", ""))
		return;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[256];
	uint64_t avail = 0, total = 0;
	bool have_avail = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long kb;
		if (sscanf(line, "MemAvailable: %llu", &kb) == 1) {
			avail = (uint64_t)kb * 1024u;
			have_avail = true;
		} else if (sscanf(line, "MemTotal: %llu", &kb) == 1) {
			total = (uint64_t)kb * 1024u;
		}
	}
	fclose(f);
	if (have_avail)
		consider(best, known, avail, total ? total : avail, "MemAvailable", NULL, false);
}

/* Reads the limit of one cgroup directory (cg: its path in the hierarchy, "" for the
 * root) of the v2 (v1 false) or v1 hierarchy mounted at mount. */
static void read_cgroup_dir(ta_hostmem_reading *best, bool *known, const char *mount,
                            const char *cg, bool v1)
{
	char path[600];
	uint64_t limit, usage;
	if (!host_path(path, sizeof(path), v1 ? "%s%s/memory.limit_in_bytes" : "%s%s/memory.max",
	               mount, cg) ||
	    !read_number(path, &limit))
		return;
	if (v1 && limit >= TA_HOSTMEM_V1_UNLIMITED)
		return;
	if (!host_path(path, sizeof(path),
	               v1 ? "%s%s/memory.usage_in_bytes" : "%s%s/memory.current", mount, cg) ||
	    !read_number(path, &usage))
		usage = 0;
	consider(best, known, limit > usage ? limit - usage : 0, limit,
	         v1 ? "memory.limit_in_bytes" : "memory.max", cg, v1);
}

/* Reads the limits of cgroup cg and of each of its ancestors. */
static void read_cgroup_chain(ta_hostmem_reading *best, bool *known, const char *mount,
                              const char *cg, bool v1)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", strcmp(cg, "/") == 0 ? "" : cg);
	for (;;) {
		read_cgroup_dir(best, known, mount, dir, v1);
		char *slash = strrchr(dir, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
}

/* True when the comma-separated list ctrls names controller. */
static bool has_controller(const char *ctrls, const char *controller)
{
	size_t n = strlen(controller);
	for (const char *p = ctrls; *p;) {
		size_t len = strcspn(p, ",");
		if (len == n && strncmp(p, controller, n) == 0)
			return true;
		p += len;
		if (*p == ',')
			p++;
	}
	return false;
}

/* Reads the process's cgroups (/proc/self/cgroup) and their limits. */
static void read_cgroups(ta_hostmem_reading *best, bool *known)
{
	char path[512];
	if (!host_path(path, sizeof(path), "/proc/self/cgroup%s%s", "", ""))
		return;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[1024];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *ctrls = strchr(line, ':');
		char *cg = ctrls ? strchr(ctrls + 1, ':') : NULL;
		if (!cg)
			continue;
		*ctrls++ = '\0';
		*cg++ = '\0';
		if (strcmp(line, "0") == 0 && ctrls[0] == '\0') { /* the v2 hierarchy */
			read_cgroup_chain(best, known, "/sys/fs/cgroup", cg, false);
			read_cgroup_chain(best, known, "/sys/fs/cgroup/unified", cg, false);
		} else if (has_controller(ctrls, "memory")) {
			read_cgroup_chain(best, known, "/sys/fs/cgroup/memory", cg, true);
		}
	}
	fclose(f);
}

bool ta_hostmem_read(ta_hostmem_reading *out)
{
	bool known = false;
	memset(out, 0, sizeof(*out));
	read_meminfo(out, &known);
	read_cgroups(out, &known);
	return known;
}

uint64_t ta_hostmem_margin(uint64_t total)
{
	uint64_t share = total / TA_HOSTMEM_MARGIN_DIV;
	return share > TA_HOSTMEM_MARGIN_MIN ? share : TA_HOSTMEM_MARGIN_MIN;
}

int ta_hostmem_init(ta_hostmem *hm)
{
	hm->budget = 0;
	return pthread_mutex_init(&hm->lock, NULL);
}

void ta_hostmem_destroy(ta_hostmem *hm)
{
	pthread_mutex_destroy(&hm->lock);
}

ta_status ta_hostmem_reserve(ta_hostmem *hm, uint64_t bytes, ta_error *err)
{
	pthread_mutex_lock(&hm->lock);
	if (bytes <= hm->budget) {
		hm->budget -= bytes;
		pthread_mutex_unlock(&hm->lock);
		return TA_OK;
	}
	ta_hostmem_reading r;
	if (!ta_hostmem_read(&r)) { /* nothing to check against */
		hm->budget = 0;
		pthread_mutex_unlock(&hm->lock);
		return TA_OK;
	}
	uint64_t margin = ta_hostmem_margin(r.total);
	uint64_t usable = r.room > margin ? r.room - margin : 0;
	if (bytes > usable) {
		hm->budget = 0;
		pthread_mutex_unlock(&hm->lock);
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "%" PRIu64 " bytes of tile memory do not fit: %" PRIu64
		                    " bytes are available (%s), less a margin of %" PRIu64
		                    " bytes (1/%u of %" PRIu64 ", at least %" PRIu64 ")",
		                    bytes, r.room, r.what, margin, TA_HOSTMEM_MARGIN_DIV, r.total,
		                    TA_HOSTMEM_MARGIN_MIN);
	}
	hm->budget = (usable - bytes) / 2;
	pthread_mutex_unlock(&hm->lock);
	return TA_OK;
}
