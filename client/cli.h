/* cli.h: shared declarations of tileatom-cli (cli_common.c: errors, the subcommand option
 * parser, connecting; cli_json.c: --json output; cli_main.c: global options and every
 * subcommand but hist; cli_hist.c: hist). The CLI has no protocol code: it only calls
 * libtileatom-client. */
#ifndef TILEATOM_CLI_H
#define TILEATOM_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "tileatom.h"

/* Exit statuses. */
enum {
	CLI_EXIT_OK = 0,        /* success (cas: the swap happened) */
	CLI_EXIT_ERROR = 1,     /* the operation failed (message on stderr) */
	CLI_EXIT_USAGE = 2,     /* bad command line */
	CLI_EXIT_CAS_FAILED = 3 /* cas: the element did not hold the expected value */
};

/* Most positional arguments any subcommand takes. */
#define CLI_MAX_POS 8
/* Most options any subcommand takes. */
#define CLI_MAX_OPTS 12

/* One long option of a subcommand. */
typedef struct cli_option {
	const char *name; /* without the leading "--" */
	bool has_arg;     /* takes a value ("--name V" or "--name=V") */
} cli_option;

/* A parsed subcommand line. */
typedef struct cli_args {
	const char *pos[CLI_MAX_POS];    /* positional arguments, in order */
	int npos;                        /* how many */
	const char *value[CLI_MAX_OPTS]; /* per option: its value ("": a flag; NULL: absent) */
} cli_args;

/* One run of a subcommand. */
typedef struct cli_call {
	const char *socket;    /* -s/--socket (before or after the name); NULL: the library's */
	int timeout_ms;        /* -t/--timeout: the connect timeout */
	const char *auth_file; /* --auth-file; NULL: $TILEATOM_AUTH_FILE (the library's) */
	int argc;              /* its arguments, argv[0] being its name */
	char **argv;           /* (argc of them) */
	cli_args a;            /* the parsed line */
	tileatom_client *c;    /* the connection once made; main closes it */
	tileatom_error err;    /* the library's last error */
} cli_call;

/* ---- cli_common.c ---- */

/* Prints "tileatom-cli: MESSAGE" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses the subcommand line of k (min_pos to max_pos positionals, long options only, plus
 * -h and -s/--socket; "-5", "-inf" and "-" are positional) into k->a, then connects when
 * connect is set. -1: go on; else the exit status after usage (--help) or a message. */
int cli_parse(cli_call *k, const cli_option *opts, int nopts, int min_pos, int max_pos,
              const char *usage, bool connect);

/* Connects k to the daemon; returns CLI_EXIT_OK or CLI_EXIT_ERROR after a message. */
int cli_connect(cli_call *k);

/* Prints k->err's message after the command's name; returns CLI_EXIT_ERROR. */
int cli_lib_error(const cli_call *k);

/* Parses "N0[,N1...]", up to max non-negative numbers, into out; how many (0: malformed). */
int cli_parse_counts(const char *text, int max, int64_t *out);

/* Elements of a tile. */
int64_t cli_tile_count(const tileatom_tile_info *info);

/* One element's bytes, read without aliasing (unsigned ones as their signed twin's bits). */
typedef union cli_element {
	int32_t i32; /* INT32, UINT32 */
	int64_t i64; /* INT64, UINT64 */
	float f32;   /* FLOAT32 */
	double f64;  /* FLOAT64 */
} cli_element;

/* ---- --json output (cli_json.c) ---- */

/* The one serialisation of every --json output: compact, "/" not escaped. */
#define CLI_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* One element of dtype at p: a number, or "nan", "inf", "-inf" (NULL: out of memory). */
json_object *cli_json_value(tileatom_dtype dtype, const void *p);
/* A JSON array of n unsigned numbers (NULL: out of memory). */
json_object *cli_json_u64s(const uint64_t *v, int n);
/* {"name","dtype","shape",["elements",]"bytes"[,"placement"]} of a tile (placement when
 * place is not empty; NULL: out of memory). */
json_object *cli_json_tile(const tileatom_tile_info *info, bool with_elements, const char *place);
/* Adds key: value to object obj (key NULL: value to array obj), taking value; false (value
 * freed) when either is NULL or the add fails. */
bool cli_json_add(json_object *obj, const char *key, json_object *value);
/* obj when ok (every add succeeded), else NULL after freeing obj. */
json_object *cli_json_done(json_object *obj, bool ok);
/* Prints obj (NULL: out of memory) and a newline, frees it; the exit status (cmd: messages). */
int cli_json_print(const char *cmd, json_object *obj);
/* Prints object head (freed) with "key":[ last, left open; false on failure. */
bool cli_json_open_array(json_object *head, const char *key);
/* Prints one array element (freed) after a comma unless first; false on failure. */
bool cli_json_array_item(json_object *value, bool first);

/* The hist subcommand (cli_hist.c). */
int cli_cmd_hist(cli_call *k);

#endif /* TILEATOM_CLI_H */
