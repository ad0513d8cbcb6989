/* cli_json.c: tileatom-cli's --json output, built with json-c: element values (non-finite
 * floats as "nan", "inf", "-inf"), shapes, tiles, and the printing of an object in one
 * compact format (CLI_JSON_FLAGS) and a newline. Large arrays (get) are streamed: the
 * enclosing object is printed with the array empty, less its closing "]}", then each value. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

json_object *cli_json_value(tileatom_dtype dtype, const void *p)
{
	cli_element v;
	if (tileatom_dtype_is_int(dtype)) {
		memcpy(&v, p, tileatom_dtype_size(dtype));
		return dtype == TILEATOM_INT32    ? json_object_new_int64(v.i32)
		       : dtype == TILEATOM_INT64  ? json_object_new_int64(v.i64)
		       : dtype == TILEATOM_UINT32 ? json_object_new_uint64((uint32_t)v.i32)
		                                  : json_object_new_uint64((uint64_t)v.i64);
	}
	/* Floats: the library's shortest text that reads back to the same value, kept by
	 * json-c as the number's serialisation; non-finite values have no JSON number. */
	char text[64];
	tileatom_value_format(dtype, p, text, sizeof(text));
	double d = tileatom_value_to_double(dtype, p);
	if (!isfinite(d))
		return json_object_new_string(text);
	return json_object_new_double_s(d, text);
}

json_object *cli_json_u64s(const uint64_t *v, int n)
{
	json_object *a = json_object_new_array();
	bool ok = a != NULL;
	for (int i = 0; ok && i < n; i++)
		ok = cli_json_add(a, NULL, json_object_new_uint64(v[i]));
	return cli_json_done(a, ok);
}

bool cli_json_add(json_object *obj, const char *key, json_object *value)
{
	int rc = !obj || !value ? -1
	         : key          ? json_object_object_add(obj, key, value)
	                        : json_object_array_add(obj, value);
	if (rc != 0)
		json_object_put(value);
	return rc == 0;
}

json_object *cli_json_tile(const tileatom_tile_info *info, bool with_elements, const char *place)
{
	json_object *o = json_object_new_object();
	bool ok =
	    cli_json_add(o, "name", json_object_new_string(info->name)) &&
	    cli_json_add(o, "dtype", json_object_new_string(tileatom_dtype_name(info->dtype))) &&
	    cli_json_add(o, "shape", cli_json_u64s((const uint64_t *)info->shape, info->rank)) &&
	    (!with_elements ||
	     cli_json_add(o, "elements", json_object_new_int64(cli_tile_count(info)))) &&
	    cli_json_add(o, "bytes", json_object_new_uint64(info->bytes)) &&
	    (!place || !place[0] || cli_json_add(o, "placement", json_object_new_string(place)));
	return cli_json_done(o, ok);
}

json_object *cli_json_done(json_object *obj, bool ok)
{
	if (ok)
		return obj;
	json_object_put(obj);
	return NULL;
}

int cli_json_print(const char *cmd, json_object *obj)
{
	const char *text = obj ? json_object_to_json_string_ext(obj, CLI_JSON_FLAGS) : NULL;
	int rc = CLI_EXIT_OK;
	if (!text) {
		cli_error("%s: out of memory building the JSON output", cmd);
		rc = CLI_EXIT_ERROR;
	} else if (printf("%s\n", text) < 0) {
		cli_error("%s: writing the output: %s", cmd, strerror(errno));
		rc = CLI_EXIT_ERROR;
	}
	json_object_put(obj);
	return rc;
}

bool cli_json_open_array(json_object *head, const char *key)
{
	bool ok = cli_json_add(head, key, json_object_new_array());
	const char *text = ok ? json_object_to_json_string_ext(head, CLI_JSON_FLAGS) : NULL;
	ok = text && printf("%.*s", (int)strlen(text) - 2, text) >= 0; /* all but the "]}" */
	json_object_put(head);
	return ok;
}

bool cli_json_array_item(json_object *value, bool first)
{
	const char *text = value ? json_object_to_json_string_ext(value, CLI_JSON_FLAGS) : NULL;
	bool ok = text && printf("%s%s", first ? "" : ",", text) >= 0;
	json_object_put(value);
	return ok;
}
