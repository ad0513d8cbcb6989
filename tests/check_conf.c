/* check_conf.c: the settings table daemon/ta_conf.def against what is generated from it
 * and what is written beside it: doc/tileatomd.8 (its OPTIONS entries and CONFIGURATION
 * key list) and doc/tileatomd.conf.example name exactly the table's keys, --help lists
 * every option, every default reads back to what ta_config_init sets, and a bad value's
 * message names the key and the range the row gives. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "persist.h"

/* The settings' keys (file spelling), in table order. */
static const char *const setting_keys[] = {
#define TA_CONF(key, ...) #key,
#include "ta_conf.def"
#undef TA_CONF
};
/* The command-line-only options (underscores), in table order. */
static const char *const cli_names[] = {
#define TA_CONF_CLI(name, ...) #name,
#include "ta_conf.def"
#undef TA_CONF_CLI
};
/* The settings' defaults as the table writes them. */
static const char *const setting_defaults[] = {
#define TA_CONF(key, sh, type, field, def, ...) def,
#include "ta_conf.def"
#undef TA_CONF
};
#define N_SETTINGS (sizeof(setting_keys) / sizeof(setting_keys[0]))
#define N_CLI      (sizeof(cli_names) / sizeof(cli_names[0]))
/* Longest name a document may give, and most names it may give. */
#define NAME_CAP  48
#define NAMES_CAP 128

/* Names read from a document. */
typedef struct name_list {
	char name[NAMES_CAP][NAME_CAP]; /* each with underscores for dashes */
	size_t n;                       /* names held */
} name_list;

/* Appends the name of len bytes at text (dashes become underscores). */
static void add_name(name_list *l, const char *text, size_t len)
{
	ck_assert_uint_lt(l->n, NAMES_CAP);
	ck_assert_uint_lt(len, NAME_CAP);
	for (size_t i = 0; i < len; i++)
		l->name[l->n][i] = text[i] == '-' ? '_' : text[i];
	l->name[l->n][len] = '\0';
	l->n++;
}

/* Asserts that l holds each of want[0..nwant) exactly once and nothing else. */
static void assert_same_names(const char *where, const name_list *l, const char *const *want,
                              size_t nwant, const char *const *want2, size_t nwant2)
{
	for (size_t w = 0; w < nwant + nwant2; w++) {
		const char *name = w < nwant ? want[w] : want2[w - nwant];
		size_t seen = 0;
		for (size_t i = 0; i < l->n; i++)
			seen += strcmp(l->name[i], name) == 0;
		ck_assert_msg(seen == 1, "%s names '%s' %zu times; ta_conf.def has it once", where,
		              name, seen);
	}
	for (size_t i = 0; i < l->n; i++) {
		bool known = false;
		for (size_t w = 0; w < nwant + nwant2; w++)
			known = known ||
			        strcmp(l->name[i], w < nwant ? want[w] : want2[w - nwant]) == 0;
		ck_assert_msg(known, "%s names '%s', which ta_conf.def lacks", where, l->name[i]);
	}
}

/* Reads a file of the source tree into a malloc'd string. */
static char *read_source(const char *path)
{
	FILE *f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	char *text = NULL;
	size_t cap = 0;
	ck_assert_int_ge(getdelim(&text, &cap, '\0', f), 1);
	fclose(f);
	return text;
}

START_TEST(test_man_page_names_the_keys)
{
	char *page = read_source(TA_SRCDIR "/doc/tileatomd.8");
	name_list options = {0}, keys = {0};
	const char *section = "";
	bool after_tp = false, in_key_list = false;
	for (char *line = strtok(page, "\n"); line; line = strtok(NULL, "\n")) {
		if (strncmp(line, ".SH ", 4) == 0)
			section = line + 4;
		/* an OPTIONS entry: .TP, then a line naming its option first (\-\-name) */
		const char *opt = strstr(line, "\\-\\-");
		if (after_tp && strcmp(section, "OPTIONS") == 0 && opt) {
			opt += 4;
			size_t len = 0;
			char name[NAME_CAP];
			while (len + 1 < NAME_CAP && (opt[0] >= 'a' && opt[0] <= 'z')) {
				name[len++] = *opt++;
				if (opt[0] == '\\' && opt[1] == '-') {
					name[len++] = '-';
					opt += 2;
				}
			}
			add_name(&options, name, len);
		}
		after_tp = strcmp(line, ".TP") == 0;
		/* the CONFIGURATION key list: the .BR lines after "Each key is" */
		if (strcmp(section, "CONFIGURATION") == 0 &&
		    strncmp(line, "Each key is", 11) == 0) {
			in_key_list = true;
			continue;
		}
		if (in_key_list && strncmp(line, ".BR ", 4) != 0)
			in_key_list = false;
		for (char *p = line + 4; in_key_list && *p;) {
			size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
			if (len)
				add_name(&keys, p, len);
			p += len;
			p += strcspn(p, "abcdefghijklmnopqrstuvwxyz_");
		}
	}
	assert_same_names("doc/tileatomd.8 OPTIONS", &options, setting_keys, N_SETTINGS, cli_names,
	                  N_CLI);
	assert_same_names("doc/tileatomd.8 CONFIGURATION", &keys, setting_keys, N_SETTINGS, NULL,
	                  0);
	free(page);
}
END_TEST

START_TEST(test_example_names_the_keys)
{
	/* a setting line: `key = value`, or commented out as `;key = value` */
	char *example = read_source(TA_SRCDIR "/doc/tileatomd.conf.example");
	name_list keys = {0};
	for (char *line = strtok(example, "\n"); line; line = strtok(NULL, "\n")) {
		const char *p = line + (line[0] == ';' || line[0] == '#');
		size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
		if (len && p[len + strspn(p + len, " ")] == '=')
			add_name(&keys, p, len);
	}
	assert_same_names("doc/tileatomd.conf.example", &keys, setting_keys, N_SETTINGS, NULL, 0);
	free(example);
}
END_TEST

START_TEST(test_help_lists_every_option)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(out);
	ta_config_usage(out, "tileatomd");
	ck_assert_int_eq(fclose(out), 0);
	for (size_t i = 0; i < N_SETTINGS + N_CLI; i++) {
		char want[NAME_CAP + 8] = "--";
		const char *name = i < N_SETTINGS ? setting_keys[i] : cli_names[i - N_SETTINGS];
		for (size_t k = 0; name[k]; k++)
			want[2 + k] = name[k] == '_' ? '-' : name[k];
		ck_assert_msg(strstr(text, want), "--help lacks %s", want);
	}
	ck_assert_ptr_nonnull(strstr(text, "\n  --max-frame BYTES      largest frame accepted or "
	                                   "sent (default 64M)\n"));
	ck_assert_ptr_nonnull(strstr(text, "\n  --max-tile-bytes BYTES  largest tile (default 1G; "
	                                   "0 = unlimited)\n"));
	ck_assert_ptr_nonnull(strstr(text,
	                             "\n  --allow-remote         allow a non-loopback --listen "
	                             "or --metrics address\n"));
	ck_assert_ptr_nonnull(
	    strstr(text, "\n  -h, --help             print this help and exit\n"));
	free(text);
}
END_TEST

START_TEST(test_defaults_read_back)
{
	/* Setting a key to the default its row writes changes nothing. */
	for (size_t i = 0; i < N_SETTINGS; i++) {
		if (!*setting_defaults[i])
			continue;
		ta_config def, cfg;
		ta_config_init(&def);
		ta_config_init(&cfg);
		ta_error err = {0};
		ck_assert_msg(ta_config_set(&cfg, setting_keys[i], setting_defaults[i], &err) ==
		                  TA_OK,
		              "%s", err.msg);
		ck_assert_msg(memcmp(&def, &cfg, sizeof(cfg)) == 0, "%s = %s is not the default",
		              setting_keys[i], setting_defaults[i]);
		ta_config_free(&cfg);
	}
	/* The defaults, stated. */
	ta_config cfg;
	ta_config_init(&cfg);
	ck_assert_uint_eq(cfg.max_frame, 64u << 20);
	ck_assert_uint_eq(cfg.max_tile_bytes, UINT64_C(1) << 30);
	ck_assert_uint_eq(cfg.max_total_bytes, UINT64_C(8) << 30);
	ck_assert_uint_eq(cfg.max_write_queue, 16u << 20);
	ck_assert_uint_eq(cfg.compact_size, 64u << 20);
	ck_assert_uint_eq(cfg.max_log_buffer, TA_PERSIST_DEFAULT_BUFFER_MAX);
	ck_assert_uint_eq(cfg.frame_timeout_ms, 30000);
	ck_assert_int_eq(cfg.max_connections, 256);
	ck_assert_int_eq(cfg.max_pending, 1024);
	ck_assert_int_eq(cfg.shutdown_timeout, 10);
	ck_assert_int_eq(cfg.workers, TA_CONFIG_WORKERS_AUTO);
	ck_assert_int_eq(cfg.loops, TA_CONFIG_LOOPS_AUTO);
	ck_assert_int_eq(cfg.batch_min, TA_CONFIG_BATCH_AUTO);
	ck_assert_int_eq(cfg.inline_max, TA_CONFIG_INLINE_AUTO);
	ck_assert_int_eq(cfg.fsync_mode, 1); /* everysec */
	ck_assert(!cfg.allow_remote && !cfg.foreground);
	ck_assert_ptr_null(cfg.socket_path);
	ck_assert_ptr_null(cfg.data_dir);
	ta_config_free(&cfg);
}
END_TEST

/* Asserts that setting key to value fails with exactly message want. */
static void expect_bad(const char *key, const char *value, const char *want)
{
	ta_config cfg;
	ta_config_init(&cfg);
	ta_error err = {0};
	ck_assert_int_eq(ta_config_set(&cfg, key, value, &err), TA_INVALID_ARGUMENT);
	ck_assert_str_eq(err.msg, want);
	ta_config_free(&cfg);
}

START_TEST(test_messages_from_the_rows)
{
	expect_bad("max_frame", "100", "max_frame: '100' is not a size (1K..1G)");
	expect_bad("max_frame", "2G", "max_frame: '2G' is not a size (1K..1G)");
	expect_bad("max_write_queue", "0", "max_write_queue: '0' is not a size (1..1G)");
	expect_bad("max_tiles", "x", "max_tiles: 'x' is not a count (0 = unlimited)");
	expect_bad("max_tile_bytes", "-1",
	           "max_tile_bytes: '-1' is not a size (e.g. 1G; 0 = unlimited)");
	expect_bad("max_log_buffer", "1Q",
	           "max_log_buffer: '1Q' is not a size (e.g. 64M; 0 = unbounded)");
	expect_bad("workers", "257", "workers: '257' is not auto or a thread count (1..256)");
	expect_bad("inline_max", "-2", "inline_max: '-2' is not auto or a count (-1..1073741824)");
	expect_bad("cpu_threads", "x",
	           "cpu_threads: 'x' is not a thread count (0..1024, 0 = one per core)");
	expect_bad("shutdown_timeout", "86401",
	           "shutdown_timeout: '86401' is not a number of "
	           "seconds (0..86400, 0 = wait forever)");
	expect_bad("device", "1024", "device: '1024' is not a device ordinal (0..1023)");
	expect_bad("idle_timeout", "366d",
	           "idle_timeout: '366d' is not a duration (e.g. 30, 30s, 500ms, 5m; 0 = never)");
	expect_bad("idle_timeout", "8761h", /* over 365 days */
	           "idle_timeout: '8761h' is not a duration (e.g. 30, 30s, 500ms, 5m; 0 = never)");
	expect_bad("foreground", "maybe", "foreground: 'maybe' is not a boolean (true/false)");
	expect_bad("metrics", "9100", "metrics: '9100' is not HOST:PORT");
	expect_bad("log_level", "loud",
	           "log_level: 'loud' is not err, warning, notice, info or debug");
	expect_bad("socket", "", "socket: empty path");
	expect_bad("config", "/x", "unknown setting 'config'");
	expect_bad("help", "1", "unknown setting 'help'");
	expect_bad("max-frame-", "1M", "unknown setting 'max-frame-'");

	/* Accepted forms: dashes for underscores, synonyms of log.c, an empty string unsets. */
	ta_config cfg;
	ta_config_init(&cfg);
	ta_error err = {0};
	ck_assert_int_eq(ta_config_set(&cfg, "log-level", "warn", &err), TA_OK);
	ck_assert_int_eq(cfg.log_level, 4);
	ck_assert_int_eq(ta_config_set(&cfg, "inline_max", "-1", &err), TA_OK);
	ck_assert_int_eq(cfg.inline_max, -1);
	ck_assert_int_eq(ta_config_set(&cfg, "idle_timeout", "8760h", &err), TA_OK);
	ck_assert_uint_eq(cfg.idle_timeout_ms, UINT64_C(86400000) * 365);
	ck_assert_int_eq(ta_config_set(&cfg, "data_dir", "/d", &err), TA_OK);
	ck_assert_str_eq(cfg.data_dir, "/d");
	ck_assert_int_eq(ta_config_set(&cfg, "data_dir", "", &err), TA_OK);
	ck_assert_ptr_null(cfg.data_dir);
	ck_assert_int_eq(ta_config_set(&cfg, "max_frame", "1G", &err), TA_OK);
	ck_assert_uint_eq(cfg.max_frame, 1u << 30);
	ta_config_free(&cfg);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("conf");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, test_man_page_names_the_keys);
	tcase_add_test(tc, test_example_names_the_keys);
	tcase_add_test(tc, test_help_lists_every_option);
	tcase_add_test(tc, test_defaults_read_back);
	tcase_add_test(tc, test_messages_from_the_rows);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
