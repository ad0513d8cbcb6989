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
	ta_placement p = {TA_PLACE_DEFAULT, 0, 0, NULL};
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
	case TA_PLACE_PARTS:
		ta_tile_where_format(p->parts, buf, n);
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

ta_status ta_tile_where_check(const ta_tile_where *w, int64_t rows, ta_error *err)
{
	if (w->nparts < 1 || w->nparts > TA_MAX_DEVICES)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "placement: %d parts (a tile has 1 to %d)", w->nparts,
		                    TA_MAX_DEVICES);
	int64_t row = 0;
	for (int i = 0; i < w->nparts; i++) {
		const ta_tile_part *pt = &w->part[i];
		if (pt->device < 0 || pt->device >= TA_MAX_DEVICES)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "placement: part %d is on device %d (ordinals are 0..%d)", i,
			    pt->device, TA_MAX_DEVICES - 1);
		if (pt->first != row || pt->end <= pt->first)
			return ta_error_set(
			    err, TA_INVALID_ARGUMENT,
			    "placement: part %d holds rows [%lld,%lld) where rows from "
			    "%lld on come next",
			    i, (long long)pt->first, (long long)pt->end, (long long)row);
		row = pt->end;
	}
	if (row != rows)
		return ta_error_set(
		    err, TA_INVALID_ARGUMENT,
		    "placement: the parts hold rows [0,%lld) of a tile of %lld rows",
		    (long long)row, (long long)rows);
	return TA_OK;
}

/* Reads a decimal integer of digits only at *s into *out, moving *s past it; false when
 * there is none or it overflows. */
static bool take_i64(const char **s, int64_t *out)
{
	const char *p = *s;
	if (*p < '0' || *p > '9')
		return false;
	int64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++)
		if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *p - '0', &v))
			return false;
	*out = v;
	*s = p;
	return true;
}

/* Moves *s past c; false when it does not start with it. */
static bool take_char(const char **s, char c)
{
	if (**s != c)
		return false;
	(*s)++;
	return true;
}

ta_status ta_tile_where_parse(const char *text, int64_t rows, ta_tile_where *out, ta_error *err)
{
	ta_tile_where w;
	w.nparts = 0;
	int device = 0;
	if (text && parse_int(text, 0, TA_MAX_DEVICES - 1, &device)) {
		w.nparts = 1;
		w.part[0] = (ta_tile_part){device, 0, rows};
	} else {
		const char *s = text ? text : "";
		do {
			int64_t d = 0, first = 0, end = 0;
			if (w.nparts == TA_MAX_DEVICES || !take_i64(&s, &d) ||
			    d >= TA_MAX_DEVICES || !take_char(&s, ':') || !take_char(&s, '[') ||
			    !take_i64(&s, &first) || !take_char(&s, ',') || !take_i64(&s, &end) ||
			    !take_char(&s, ')'))
				return ta_error_set(
				    err, TA_INVALID_ARGUMENT,
				    "placement '%.64s' is neither a device ordinal nor "
				    "parts DEVICE:[FIRST,END) separated by spaces",
				    text ? text : "");
			w.part[w.nparts++] = (ta_tile_part){(int)d, first, end};
		} while (take_char(&s, ' '));
		if (*s)
			return ta_error_set(err, TA_INVALID_ARGUMENT,
			                    "placement '%.64s': unexpected '%.16s' after the parts",
			                    text, s);
	}
	ta_error cerr = {0};
	if (ta_tile_where_check(&w, rows, &cerr) != TA_OK)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "placement '%.64s': %s", text,
		                    cerr.msg);
	*out = w;
	return TA_OK;
}
