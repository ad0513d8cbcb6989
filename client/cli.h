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
	const char *value[CLI_MAX_OPTS]; /* per option: its value, "" for a given flag, NULL
	                                    when absent */
} cli_args;

/* Global settings from the command line. */
typedef struct cli_global {
	const char *socket;    /* -s/--socket; NULL: the library's default */
	int timeout_ms;        /* connect timeout */
	const char *auth_file; /* --auth-file; NULL: $TILEATOM_AUTH_FILE (the library's) */
} cli_global;

/* One run of a subcommand. */
typedef struct cli_call {
	int argc;           /* its arguments, argv[0] being its name */
	char **argv;        /* (argc of them) */
	cli_global *g;      /* the global settings (-s after the name updates them) */
	cli_args a;         /* the parsed line */
	tileatom_client *c; /* the connection once made; main closes it */
	tileatom_error err; /* the library's last error */
} cli_call;

/* ---- cli_common.c ---- */

/* Prints "tileatom-cli: MESSAGE" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses the subcommand line of k against opts into k->a, then connects when connect is
 * set. Returns -1 when the command goes on, or an exit status: CLI_EXIT_OK after printing
 * usage for --help, CLI_EXIT_USAGE after a message for a bad line, CLI_EXIT_ERROR when
 * the daemon does not answer. Between min_pos and max_pos positionals are required. Long
 * options only (plus -h and -s/--socket, which updates k->g); an argument that starts with
 * '-' but not "--" (e.g. "-5", "-inf", "-") is positional. */
int cli_parse(cli_call *k, const cli_option *opts, int nopts, int min_pos, int max_pos,
              const char *usage, bool connect);

/* Connects k to the daemon; returns CLI_EXIT_OK or CLI_EXIT_ERROR after a message. */
int cli_connect(cli_call *k);

/* Prints k->err's message after the command's name; returns CLI_EXIT_ERROR. */
int cli_lib_error(const cli_call *k);

/* Parses "N0[,N1...]", at most max non-negative decimal numbers (the whole text), into
 * out; returns how many, or 0 when malformed. */
int cli_parse_counts(const char *text, int max, int64_t *out);

/* Elements of a tile. */
int64_t cli_tile_count(const tileatom_tile_info *info);

/* ---- --json output (cli_json.c) ---- */

/* The one serialisation of every --json output: compact, "/" not escaped. */
#define CLI_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* One element value of dtype at p: a JSON number, or "nan" / "inf" / "-inf" strings for
 * non-finite floats. NULL when memory is short. */
json_object *cli_json_value(tileatom_dtype dtype, const void *p);
/* A JSON array of n unsigned numbers (a shape is passed as its uint64_t twin); NULL when
 * memory is short. */
json_object *cli_json_u64s(const uint64_t *v, int n);
/* {"name","dtype","shape",["elements",]"bytes"[,"placement"]} of a tile (placement when
 * place is neither NULL nor empty); NULL when memory is short. */
json_object *cli_json_tile(const tileatom_tile_info *info, bool with_elements, const char *place);
/* Adds key: value to the object obj, or value to the array obj for key NULL (taking
 * value); false (value freed) when obj or value is NULL or the add fails. */
bool cli_json_add(json_object *obj, const char *key, json_object *value);
/* obj when ok (every add succeeded), else NULL after freeing obj. */
json_object *cli_json_done(json_object *obj, bool ok);
/* Prints obj and a newline and frees it; CLI_EXIT_OK, or CLI_EXIT_ERROR after a message
 * naming cmd (obj NULL: out of memory). */
int cli_json_print(const char *cmd, json_object *obj);
/* Streams a large array: prints head (an object, freed) with "key":[ last, left open;
 * false when memory is short or stdout fails. */
bool cli_json_open_array(json_object *head, const char *key);
/* Prints one array element (freed) after a comma unless first; false on failure. */
bool cli_json_array_item(json_object *value, bool first);

/* The hist subcommand (cli_hist.c). */
int cli_cmd_hist(cli_call *k);

#endif /* TILEATOM_CLI_H */
