/* ta_place.c: parsing and formatting of placements and of where a tile lives (ta_place.h). */
#include "ta_place.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses a decimal integer in lo..hi filling all of text; false otherwise. */
static bool parse_int(const char *text, long lo, long hi, int *out)
{
	if (!*text || *text == '+' || *text == '-' || *text == ' ')
		return false;
	char *end = NULL;
	errno = 0;
	long v = strtol(text, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = (int)v;
	return true;
}

ta_status ta_placement_parse(const char *text, ta_placement *out, ta_error *err)
{
	ta_placement p = {TA_PLACE_DEFAULT, 0, 0};
	if (!text || !*text || strcmp(text, "default") == 0) {
		*out = p;
		return TA_OK;
	}
	if (strcmp(text, "auto") == 0) {
		p.kind = TA_PLACE_AUTO;
	} else if (strcmp(text, "shard") == 0) {
		p.kind = TA_PLACE_SHARD;
	} else if (strncmp(text, "shard:", 6) == 0) {
		p.kind = TA_PLACE_SHARD;
		if (!parse_int(text + 6, 1, TA_MAX_DEVICES, &p.shards))
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "placement '%.64s': the device count after shard: must "
			                    "be 1..%d",
			                    text, TA_MAX_DEVICES);
	} else if (parse_int(text, 0, TA_MAX_DEVICES - 1, &p.device)) {
		p.kind = TA_PLACE_DEVICE;
	} else {
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "placement '%.64s' is not auto, shard, shard:N or a device "
		                    "ordinal 0..%d",
		                    text, TA_MAX_DEVICES - 1);
	}
	*out = p;
	return TA_OK;
}

char *ta_placement_format(const ta_placement *p, char *buf, size_t n)
{
	if (!n)
		return buf;
	switch (p->kind) {
	case TA_PLACE_DEVICE:
		snprintf(buf, n, "%d", p->device);
		break;
	case TA_PLACE_AUTO:
		snprintf(buf, n, "auto");
		break;
	case TA_PLACE_SHARD:
		if (p->shards > 0)
			snprintf(buf, n, "shard:%d", p->shards);
		else
			snprintf(buf, n, "shard");
		break;
	default:
		snprintf(buf, n, "default");
		break;
	}
	return buf;
}

char *ta_tile_where_format(const ta_tile_where *w, char *buf, size_t n)
{
	if (!n)
		return buf;
	buf[0] = '\0';
	if (w->nparts == 1) {
		snprintf(buf, n, "%d", w->part[0].device);
		return buf;
	}
	size_t used = 0;
	for (int i = 0; i < w->nparts && used < n; i++) {
		int k = snprintf(buf + used, n - used, "%s%d:[%lld,%lld)", i ? " " : "",
		                 w->part[i].device, (long long)w->part[i].first,
		                 (long long)w->part[i].end);
		if (k < 0)
			break;
		used += (size_t)k;
	}
	return buf;
}
