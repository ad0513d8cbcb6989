/* conf.c: tileatomd's settings (conf.h), generated from the table ta_conf.def: the
 * defaults, the checks of a value and their messages, INI loading (libinih), command-line
 * parsing (getopt_long) and --help. A bad value is an error naming the key and what it
 * accepts, never silently ignored. */
#include "conf.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"
#include "persist.h"

/* How a value is written (ta_conf.def describes each); T_CLI: a command-line-only row. */
// clang-format off
typedef enum conf_type {
	T_BOOL, T_INT, T_AUTO, T_SIZE, T_SIZE32, T_DURATION, T_STRING, T_PATH, T_HOSTPORT,
	T_BACKEND, T_LOG_LEVEL, T_FSYNC, T_CLI
} conf_type;
// clang-format on

/* One row of ta_conf.def (the columns are explained there). */
typedef struct conf_row {
	const char *key;  /* the file's spelling, underscores */
	char shortopt;    /* one-letter option, or 0 */
	conf_type type;   /* how the value is written */
	const char *def;  /* default as written in the file; NULL for command-line rows */
	int64_t lo;       /* smallest accepted number */
	uint64_t hi;      /* largest accepted number */
	const char *what; /* the kind of value named in messages */
	const char *note; /* what a special value means, or "" */
	const char *arg;  /* the value's name in --help; NULL: the option takes no value */
	const char *help; /* --help's description */
} conf_row;

/* Row numbers: the settings first, then the command-line-only options. */
enum conf_row_id {
#define TA_CONF(key, ...) ROW_##key,
#include "ta_conf.def"
#undef TA_CONF
	N_SETTINGS,
	ROW_BEFORE_CLI = N_SETTINGS - 1,
#define TA_CONF_CLI(name, ...) ROW_##name,
#include "ta_conf.def"
#undef TA_CONF_CLI
	N_ROWS
};

/* The table, in row order. */
static const conf_row rows[N_ROWS] = {
#define TA_CONF(key, sh, type, field, def, lo, hi, what, note, arg, help)                          \
	{#key, sh, T_##type, def, lo, hi, what, note, arg, help},
#define TA_CONF_CLI(name, sh, arg, help) {#name, sh, T_CLI, NULL, 0, 0, "", "", arg, help},
#include "ta_conf.def"
#undef TA_CONF
#undef TA_CONF_CLI
};

/* A parsed value (which member: by the row's type). */
typedef union conf_value {
	bool b;     /* T_BOOL */
	int64_t i;  /* T_INT, T_AUTO and the name types */
	uint64_t u; /* T_SIZE, T_SIZE32, T_DURATION */
	char *s;    /* the string types: malloc'd, NULL when empty */
} conf_value;

/* How each type's value goes into its field (STORE_##type). */
#define STORE_BOOL(f, v)    ((f) = (v).b)
#define STORE_INT(f, v)     ((f) = (int)(v).i)
#define STORE_AUTO          STORE_INT
#define STORE_LOG_LEVEL     STORE_INT
#define STORE_FSYNC         STORE_INT
#define STORE_BACKEND(f, v) ((f) = (ta_backend_choice)(v).i)
#define STORE_SIZE(f, v)    ((f) = (v).u)
#define STORE_SIZE32(f, v)  ((f) = (uint32_t)(v).u)
#define STORE_DURATION      STORE_SIZE
#define STORE_STRING(f, v)  (free(f), (f) = (v).s)
#define STORE_PATH          STORE_STRING
#define STORE_HOSTPORT      STORE_STRING

/* Stores a parsed value of setting row into cfg (freeing a string it replaces). */
static void store(ta_config *cfg, int row, conf_value v)
{
	switch (row) {
#define TA_CONF(key, sh, type, field, ...)                                                         \
	case ROW_##key:                                                                            \
		STORE_##type(cfg->field, v);                                                       \
		break;
#include "ta_conf.def"
#undef TA_CONF
	default:
		break;
	}
}

/* A spelling and the number it stands for: a unit (its multiplier) or a name (its value). */
typedef struct conf_name {
	const char *name; /* as written ("" for a number without unit) */
	uint64_t value;   /* bytes or milliseconds per unit, or the name's value */
} conf_name;

/* Looks text up in names (ended by a NULL name), compared by same. Returns 0 with the value
 * in *out, or -1. */
static int lookup(const char *text, const conf_name *names, int (*same)(const char *, const char *),
                  uint64_t *out)
{
	for (; names->name; names++)
		if (same(text, names->name) == 0) {
			*out = names->value;
			return 0;
		}
	return -1;
}

/* Parses digits followed by one of units (spelled as same() compares), into *out.
 * Returns 0, or -1 on a malformed or overflowing value. */
static int parse_with_unit(const char *text, const conf_name *units,
                           int (*same)(const char *, const char *), uint64_t *out)
{
	/* A digit first: strtoull would also take leading blanks and a sign, and turn
	 * " -1" into 2^64 - 1. */
	if (!text || *text < '0' || *text > '9')
		return -1;
	errno = 0;
	char *end = NULL;
	unsigned long long v = strtoull(text, &end, 10);
	uint64_t mult = 1;
	if (errno != 0 || lookup(end, units, same, &mult) != 0 || v > UINT64_MAX / mult)
		return -1;
	*out = (uint64_t)v * mult;
	return 0;
}

int ta_config_parse_size(const char *text, uint64_t *out)
{
	// clang-format off
	static const conf_name units[] = {
	    {"", 1}, {"K", 1ull << 10}, {"KiB", 1ull << 10}, {"KB", 1ull << 10},
	    {"M", 1ull << 20}, {"MiB", 1ull << 20}, {"MB", 1ull << 20},
	    {"G", 1ull << 30}, {"GiB", 1ull << 30}, {"GB", 1ull << 30},
	    {"T", 1ull << 40}, {"TiB", 1ull << 40}, {"TB", 1ull << 40}, {NULL, 0}};
	// clang-format on
	return parse_with_unit(text, units, strcasecmp, out);
}

/* Parses a decimal integer in [lo, hi]; returns 0 or -1. */
static int parse_int(const char *text, int64_t lo, int64_t hi, int64_t *out)
{
	if (!text || !*text)
		return -1;
	errno = 0;
	char *end = NULL;
	long long v = strtoll(text, &end, 10);
	if (errno != 0 || end == text || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* Writes a byte count with the largest suffix that divides it ("1K", "1G", "100"). */
static void format_size(char *buf, size_t cap, uint64_t v)
{
	static const char suffix[] = "TGMK";
	for (int i = 0; i < 4; i++) {
		unsigned shift = (unsigned)(40 - 10 * i);
		if (v && v % (UINT64_C(1) << shift) == 0) {
			snprintf(buf, cap, "%llu%c", (unsigned long long)(v >> shift), suffix[i]);
			return;
		}
	}
	snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* Sets err to row r's message for the bad value text: the key, the value and what the
 * row accepts (ta_conf.def gives the forms). Returns TA_INVALID_ARGUMENT. */
static ta_status bad_value(const conf_row *r, const char *text, ta_error *err)
{
	char range[160] = "";
	const char *sep = *r->note ? ", " : "";
	switch (r->type) {
	case T_BOOL:
		snprintf(range, sizeof(range), " (true/false)");
		break;
	case T_INT:
	case T_AUTO:
		snprintf(range, sizeof(range), " (%lld..%llu%s%s)", (long long)r->lo,
		         (unsigned long long)r->hi, sep, r->note);
		break;
	case T_SIZE:
	case T_SIZE32:
		if (r->hi != UINT64_MAX) {
			char lo[32], hi[32];
			format_size(lo, sizeof(lo), (uint64_t)r->lo);
			format_size(hi, sizeof(hi), r->hi);
			snprintf(range, sizeof(range), " (%s..%s%s%s)", lo, hi, sep, r->note);
		} else if (strcmp(r->def, "0") != 0) {
			snprintf(range, sizeof(range), " (e.g. %s%s%s)", r->def,
			         *r->note ? "; " : "", r->note);
		} else if (*r->note) {
			snprintf(range, sizeof(range), " (%s)", r->note);
		}
		break;
	case T_DURATION:
		snprintf(range, sizeof(range), " (e.g. 30, 30s, 500ms, 5m%s%s)",
		         *r->note ? "; " : "", r->note);
		break;
	default:
		break;
	}
	return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: '%s' is not %s%s%s", r->key, text,
	                    r->type == T_AUTO ? "auto or " : "", r->what, range);
}

/* Parses text as a value of row r into *v (a string: a malloc'd copy, NULL for empty).
 * Returns TA_OK, TA_INVALID_ARGUMENT with r's message, or TA_RESOURCE_EXHAUSTED. */
static ta_status parse_value(const conf_row *r, const char *text, conf_value *v, ta_error *err)
{
	// clang-format off
	static const conf_name durations[] = {
	    {"", 1000}, {"s", 1000}, {"ms", 1}, {"m", 60000}, {"min", 60000}, {"h", 3600000},
	    {NULL, 0}};
	static const conf_name bools[] = {
	    {"true", 1}, {"yes", 1}, {"on", 1}, {"1", 1},
	    {"false", 0}, {"no", 0}, {"off", 0}, {"0", 0}, {NULL, 0}};
	static const conf_name backends[] = {
	    {"auto", TA_BACKEND_AUTO}, {"cpu", TA_BACKEND_CPU}, {"cuda", TA_BACKEND_CUDA},
	    {NULL, 0}};
	// clang-format on
	int bad = 0;
	uint64_t u = 0;
	ta_fsync_mode mode = TA_FSYNC_NO;
	switch (r->type) {
	case T_BOOL:
		bad = lookup(text, bools, strcasecmp, &u);
		v->b = u != 0;
		break;
	case T_AUTO:
		if (strcmp(text, "auto") == 0) {
			v->i = r->lo - 1;
			break;
		}
		/* fall through */
	case T_INT:
		bad = parse_int(text, r->lo, (int64_t)r->hi, &v->i);
		break;
	case T_SIZE:
	case T_SIZE32:
		bad = ta_config_parse_size(text, &v->u) || v->u < (uint64_t)r->lo || v->u > r->hi;
		break;
	case T_DURATION:
		bad = parse_with_unit(text, durations, strcmp, &v->u) || v->u < (uint64_t)r->lo ||
		      v->u > r->hi;
		break;
	case T_PATH:
	case T_HOSTPORT:
	case T_STRING:
		if (r->type == T_PATH && !*text)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "%s: empty path", r->key);
		bad = r->type == T_HOSTPORT && *text && !strrchr(text, ':');
		v->s = NULL;
		if (!bad && *text && !(v->s = strdup(text)))
			return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
		break;
	case T_BACKEND:
		bad = lookup(text, backends, strcmp, &u);
		v->i = (int64_t)u;
		break;
	case T_LOG_LEVEL:
		v->i = ta_log_level_parse(text);
		bad = v->i < 0;
		break;
	case T_FSYNC:
		bad = ta_fsync_mode_parse(text, &mode);
		v->i = (int64_t)mode;
		break;
	case T_CLI:
		return ta_error_set(err, TA_INTERNAL, "%s is not a setting", r->key);
	}
	return bad ? bad_value(r, text, err) : TA_OK;
}

/* Whether key names row r: the same, with '-' accepted for '_'. */
static bool key_is(const conf_row *r, const char *key)
{
	const char *k = r->key;
	for (; *k && *key; k++, key++)
		if (*k != *key && !(*k == '_' && *key == '-'))
			return false;
	return !*k && !*key;
}

ta_status ta_config_set(ta_config *cfg, const char *key, const char *value, ta_error *err)
{
	for (int i = 0; i < N_SETTINGS; i++) {
		if (!key_is(&rows[i], key))
			continue;
		conf_value v;
		ta_status st = parse_value(&rows[i], value ? value : "", &v, err);
		if (st == TA_OK)
			store(cfg, i, v);
		return st;
	}
	return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown setting '%s'", key);
}

void ta_config_init(ta_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (int i = 0; i < N_SETTINGS; i++) {
		conf_value v;
		ta_error err = {0};
		if (!*rows[i].def) /* unset: NULL */
			continue;
		if (parse_value(&rows[i], rows[i].def, &v, &err) != TA_OK) {
			/* a wrong row of ta_conf.def: every test run would stop here */
			fprintf(stderr, "ta_conf.def: bad default: %s\n", err.msg);
			abort();
		}
		store(cfg, i, v);
	}
}

void ta_config_free(ta_config *cfg)
{
	for (int i = 0; i < N_SETTINGS; i++)
		if (rows[i].type == T_STRING || rows[i].type == T_PATH ||
		    rows[i].type == T_HOSTPORT)
			store(cfg, i, (conf_value){.s = NULL});
	free(cfg->config_file);
	ta_config_init(cfg);
}

/* State of one ini_parse run. */
typedef struct ini_ctx {
	ta_config *cfg; /* the configuration being filled */
	ta_error err;   /* first error seen (code TA_OK: none) */
} ini_ctx;

/* inih callback: one key = value line. Returns 1 to accept, 0 on error. */
static int conf_ini_line(void *user, const char *section, const char *name, const char *value)
{
	ini_ctx *ctx = user;
	ta_error e = {0};
	if (section[0] && strcmp(section, "tileatomd") != 0) {
		ta_error_set(&e, TA_INVALID_ARGUMENT,
		             "unknown section [%s] (settings go at the top or under [tileatomd])",
		             section);
	} else if (strcmp(name, "config") == 0) {
		ta_error_set(&e, TA_INVALID_ARGUMENT, "a configuration file cannot load another");
	} else {
		ta_config_set(ctx->cfg, name, value, &e);
	}
	if (e.code == TA_OK)
		return 1;
	if (ctx->err.code == TA_OK)
		ctx->err = e;
	return 0;
}

ta_status ta_config_load_file(ta_config *cfg, const char *path, ta_error *err)
{
	ini_ctx ctx = {.cfg = cfg};
	int rc = ini_parse(path, conf_ini_line, &ctx);
	if (rc == -1)
		return ta_error_set(err, TA_NOT_FOUND, "cannot open configuration file %s: %s",
		                    path, strerror(errno));
	if (rc == -2)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED,
		                    "out of memory reading configuration file %s", path);
	if (rc > 0)
		return ta_error_set(err, TA_INVALID_ARGUMENT, "%s:%d: %s", path, rc,
		                    ctx.err.code != TA_OK
		                        ? ctx.err.msg
		                        : "syntax error (expected key = value or [section])");
	char *copy = strdup(path);
	if (!copy)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	free(cfg->config_file);
	cfg->config_file = copy;
	return TA_OK;
}

/* The longest option name, with room for its terminator. */
#define OPT_NAME_CAP 32
/* getopt code of row r when it has no one-letter form. */
#define OPT_CODE(r) (256 + (r))

/* Writes row r's option name (dashes for underscores) into name. */
static void option_name(int r, char name[OPT_NAME_CAP])
{
	size_t i = 0;
	for (; rows[r].key[i] && i + 1 < OPT_NAME_CAP; i++)
		name[i] = rows[r].key[i] == '_' ? '-' : rows[r].key[i];
	name[i] = '\0';
}

/* The row of getopt code c, or -1. */
static int row_of_code(int c)
{
	if (c >= OPT_CODE(0) && c < OPT_CODE(N_ROWS))
		return c - OPT_CODE(0);
	for (int r = 0; r < N_ROWS; r++)
		if (c && rows[r].shortopt == c)
			return r;
	return -1;
}

ta_status ta_config_parse_args(ta_config *cfg, int argc, char **argv, ta_config_action *action,
                               ta_error *err)
{
	/* The getopt table and short options, from the rows. */
	char names[N_ROWS][OPT_NAME_CAP];
	struct option opts[N_ROWS + 1] = {{0}}; /* ended by a zero entry */
	char shorts[2 * N_ROWS + 2] = ":";      /* and zeros */
	size_t ns = 1;
	for (int r = 0; r < N_ROWS; r++) {
		option_name(r, names[r]);
		opts[r] = (struct option){names[r], rows[r].arg ? required_argument : no_argument,
		                          NULL, rows[r].shortopt ? rows[r].shortopt : OPT_CODE(r)};
		if (rows[r].shortopt) {
			shorts[ns++] = rows[r].shortopt;
			if (rows[r].arg)
				shorts[ns++] = ':';
		}
	}

	/* Two passes over argv: the first checks every option and finds the action and
	 * --config; the second, after the file is loaded, applies the settings on top. */
	const char *config_path = NULL;
	*action = TA_ACTION_RUN;
	opterr = 0;
	for (int pass = 0; pass < 2; pass++) {
		optind = 0; /* full re-initialisation (glibc), so that parsing can be repeated */
		int c;
		while ((c = getopt_long(argc, argv, shorts, opts, NULL)) != -1) {
			if (c == '?' && optopt && optopt < OPT_CODE(0))
				return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown option -%c",
				                    optopt);
			if (c == '?')
				return ta_error_set(err, TA_INVALID_ARGUMENT, "unknown option %s",
				                    optind > 0 && optind <= argc ? argv[optind - 1]
				                                                 : "?");
			int r = row_of_code(c == ':' ? optopt : c);
			if (r < 0)
				return ta_error_set(err, TA_INTERNAL, "option code %d has no row",
				                    c);
			if (c == ':')
				return ta_error_set(err, TA_INVALID_ARGUMENT,
				                    "option --%s needs a value", names[r]);
			if (pass == 1 && r < N_SETTINGS) {
				ta_error e = {0};
				ta_status st = ta_config_set(cfg, rows[r].key,
				                             rows[r].arg ? optarg : "true", &e);
				if (st == TA_OK)
					continue;
				/* the message starts with the setting's key: name the option as
				 * typed */
				for (char *k = e.msg; *k && *k != ':'; k++)
					if (*k == '_')
						*k = '-';
				return ta_error_set(err, st, "--%s", e.msg);
			}
			if (r == ROW_help)
				*action = TA_ACTION_HELP;
			else if (r == ROW_version && *action == TA_ACTION_RUN)
				*action = TA_ACTION_VERSION;
			else if (r == ROW_list_kernels && *action == TA_ACTION_RUN)
				*action = TA_ACTION_LIST_KERNELS;
			else if (r == ROW_config)
				config_path = optarg;
		}
		if (pass == 1)
			break;
		if (optind < argc)
			return ta_error_set(err, TA_INVALID_ARGUMENT, "unexpected argument '%s'",
			                    argv[optind]);
		if (*action != TA_ACTION_RUN)
			return TA_OK;
		ta_status st = config_path ? ta_config_load_file(cfg, config_path, err) : TA_OK;
		if (st != TA_OK)
			return st;
	}
	return TA_OK;
}

ta_status ta_config_finish(ta_config *cfg, ta_error *err)
{
	if (cfg->max_input_total && cfg->max_input_total < cfg->max_frame)
		return ta_error_set(err, TA_INVALID_ARGUMENT,
		                    "max_input_total (%llu bytes) must hold at least one frame of "
		                    "max_frame (%u bytes)",
		                    (unsigned long long)cfg->max_input_total, cfg->max_frame);
	if (cfg->socket_path)
		return TA_OK;
	const char *base = geteuid() == 0 ? "/run" : getenv("XDG_RUNTIME_DIR");
	if (!base || base[0] != '/')
		return ta_error_set(err, TA_UNAVAILABLE,
		                    "no socket path: XDG_RUNTIME_DIR is not set, so there is no "
		                    "per-user default ($XDG_RUNTIME_DIR/tileatom/tileatomd.sock), "
		                    "and /run/tileatom/tileatomd.sock is root's; give --socket "
		                    "PATH (or socket = PATH in the configuration file)");
	size_t len = strlen(base) + sizeof("/tileatom/tileatomd.sock");
	cfg->socket_path = malloc(len);
	if (!cfg->socket_path)
		return ta_error_set(err, TA_RESOURCE_EXHAUSTED, "out of memory");
	snprintf(cfg->socket_path, len, "%s/tileatom/tileatomd.sock", base);
	return TA_OK;
}

/* --help: the column where descriptions start, and the line width. */
#define HELP_COL   25
#define HELP_WIDTH 80

/* Writes head, then text from column HELP_COL, wrapped at HELP_WIDTH. */
static void print_wrapped(FILE *out, const char *head, const char *text)
{
	int col = fprintf(out, "%s", head);
	int pad = col < HELP_COL - 1 ? HELP_COL - col : 2;
	fprintf(out, "%*s", pad, "");
	col += pad;
	bool line_start = true;
	while (*text) {
		int len = (int)strcspn(text, " ");
		if (!line_start && col + 1 + len >= HELP_WIDTH) {
			fprintf(out, "\n%*s", HELP_COL, "");
			col = HELP_COL;
			line_start = true;
		}
		col += fprintf(out, "%s%.*s", line_start ? "" : " ", len, text);
		line_start = false;
		text += len;
		text += strspn(text, " ");
	}
	fputc('\n', out);
}

void ta_config_usage(FILE *out, const char *argv0)
{
	fprintf(out,
	        "Usage: %s [OPTION]...\n"
	        "tileatomd: a daemon holding named typed tiles in GPU (or CPU) memory and\n"
	        "applying atomic operations to them on behalf of its clients.\n\n",
	        argv0);
	for (int r = 0; r < N_ROWS; r++) {
		const conf_row *row = &rows[r];
		char name[OPT_NAME_CAP], head[64], text[512];
		option_name(r, name);
		char shortopt[8] = "";
		if (row->shortopt)
			snprintf(shortopt, sizeof(shortopt), "-%c, ", row->shortopt);
		snprintf(head, sizeof(head), "  %s--%s%s%s", shortopt, name, row->arg ? " " : "",
		         row->arg ? row->arg : "");
		/* "(default DEF; NOTE)" after the description, for a setting with a value */
		bool def = row->def && *row->def && row->arg;
		bool note = *row->note;
		snprintf(text, sizeof(text), "%s%s%s%s%s%s%s", row->help, def || note ? " (" : "",
		         def ? "default " : "", def ? row->def : "", def && note ? "; " : "",
		         row->note, def || note ? ")" : "");
		print_wrapped(out, head, text);
	}
	fprintf(out, "\nSizes take K, M, G or T suffixes (powers of 1024). Logs go to stderr with\n"
	             "journald priority prefixes. See tileatomd(8).\n");
}

bool ta_config_async(const ta_config *cfg, const char *backend_name, bool has_async,
                     bool persistent)
{
	if (!has_async || persistent || cfg->async_apply == 0)
		return false;
	return cfg->async_apply == 1 || strcmp(backend_name, "cpu") != 0;
}

int ta_config_loops(const ta_config *cfg, const char *backend_name, long cpus, bool async,
                    int devices)
{
	if (cfg->loops != TA_CONFIG_LOOPS_AUTO)
		return cfg->loops;
	if (cpus < TA_SERVER_LOOPS_MIN_CPUS || (strcmp(backend_name, "cpu") != 0 && !async))
		return 1;
	long most = (long)TA_SERVER_LOOPS_MAX * (devices > 1 ? devices : 1);
	long limit =
	    strcmp(backend_name, "cpu") == 0 ? TA_CONFIG_LOOPS_LIMIT : TA_SERVER_LOOPS_GPU_MAX;
	if (most > limit)
		most = limit;
	return (int)(cpus / 2 < most ? cpus / 2 : most);
}

int ta_config_async_poll(const ta_config *cfg, long cpus, unsigned loops, int devices)
{
	if (cfg->async_poll_us != TA_CONFIG_ASYNC_POLL_AUTO)
		return cfg->async_poll_us;
	long busy = (long)loops + 2L * (devices > 1 ? devices : 1);
	return busy * 2 <= cpus ? TA_SERVER_ASYNC_POLL_US : 0;
}

int ta_config_workers(const ta_config *cfg, const char *backend_name)
{
	if (cfg->workers != TA_CONFIG_WORKERS_AUTO)
		return cfg->workers;
	return strcmp(backend_name, "cuda") == 0 ? TA_SERVER_WORKERS_CUDA : TA_SERVER_WORKERS_CPU;
}
