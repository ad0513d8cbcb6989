/* cli_common.c: what every tileatom-cli subcommand uses: the error printers, the subcommand
 * option parser, the number-list parser, a tile's element count and the connection to the
 * daemon (with the explanation of which socket was tried when it fails). cli_main.c and
 * cli_hist.c build on it; it calls nothing of theirs. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tileatom-cli: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int cli_lib_error(const cli_call *k)
{
	cli_error("%s: %s", k->argv[0], k->err.message);
	return CLI_EXIT_ERROR;
}

int64_t cli_tile_count(const tileatom_tile_info *info)
{
	int64_t n = 1;
	for (int a = 0; a < info->rank; a++)
		n *= info->shape[a];
	return n;
}

int cli_parse_counts(const char *text, int max, int64_t *out)
{
	int n = 0;
	for (const char *p = text;;) {
		char *end = NULL;
		errno = 0;
		long long v = n < max && *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : -1;
		if (v < 0 || errno || (*end != ',' && *end != '\0'))
			return 0;
		out[n++] = (int64_t)v;
		if (*end == '\0')
			return n;
		p = end + 1;
	}
}

int cli_parse(cli_call *k, const cli_option *opts, int nopts, int min_pos, int max_pos,
              const char *usage, bool connect)
{
	int argc = k->argc;
	char **argv = k->argv;
	cli_args *out = &k->a;
	memset(out, 0, sizeof(*out));
	bool only_pos = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!only_pos && strcmp(a, "--") == 0) {
			only_pos = true;
			continue;
		}
		if (!only_pos && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			fputs(usage, stdout);
			return CLI_EXIT_OK;
		}
		if (!only_pos && (strcmp(a, "-s") == 0 || strcmp(a, "--socket") == 0 ||
		                  strncmp(a, "--socket=", 9) == 0)) {
			if (a[1] == '-' && a[8] == '=') {
				k->g->socket = a + 9;
			} else if (i + 1 < argc) {
				k->g->socket = argv[++i];
			} else {
				cli_error("%s: %s needs a value", argv[0], a);
				return CLI_EXIT_USAGE;
			}
			continue;
		}
		if (!only_pos && a[0] == '-' && a[1] == '-') {
			const char *name = a + 2;
			const char *eq = strchr(name, '=');
			size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
			int o = 0;
			while (o < nopts && (strlen(opts[o].name) != nlen ||
			                     strncmp(opts[o].name, name, nlen) != 0))
				o++;
			if (o == nopts) {
				cli_error("%s: unknown option '%s' (see '%s --help')", argv[0], a,
				          argv[0]);
				return CLI_EXIT_USAGE;
			}
			if (!opts[o].has_arg) {
				if (eq) {
					cli_error("%s: option --%s takes no value", argv[0],
					          opts[o].name);
					return CLI_EXIT_USAGE;
				}
				out->value[o] = "";
			} else if (eq) {
				out->value[o] = eq + 1;
			} else if (i + 1 < argc) {
				out->value[o] = argv[++i];
			} else {
				cli_error("%s: option --%s needs a value", argv[0], opts[o].name);
				return CLI_EXIT_USAGE;
			}
			continue;
		}
		if (out->npos >= max_pos || out->npos >= CLI_MAX_POS) {
			cli_error("%s: unexpected argument '%s' (see '%s --help')", argv[0], a,
			          argv[0]);
			return CLI_EXIT_USAGE;
		}
		out->pos[out->npos++] = a;
	}
	if (out->npos < min_pos) {
		cli_error("%s: missing arguments (see '%s --help')", argv[0], argv[0]);
		return CLI_EXIT_USAGE;
	}
	return connect ? (cli_connect(k) == CLI_EXIT_OK ? -1 : CLI_EXIT_ERROR) : -1;
}

/* Explains, after a failed connect without -s, which default socket was tried and why. */
static void explain_default_socket(void)
{
	char path[4096];
	if (tileatom_default_socket(path, sizeof(path)) != 0)
		return;
	const char *env = getenv("TILEATOM_SOCKET");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (env && *env) {
		cli_error("(the socket came from $TILEATOM_SOCKET; give -s SOCKET for another)");
	} else if (strncmp(path, "/run/", 5) == 0 && (!xdg || !*xdg)) {
		cli_error("(%s is the system daemon's socket, tried because XDG_RUNTIME_DIR is not "
		          "set, so there is no per-user socket to try; give -s SOCKET, set "
		          "TILEATOM_SOCKET, or join the daemon's socket group)",
		          path);
	} else if (strncmp(path, "/run/", 5) == 0) {
		cli_error("(%s is the system daemon's socket, tried because no per-user daemon "
		          "listens at %s/tileatom/tileatomd.sock; give -s SOCKET or set "
		          "TILEATOM_SOCKET)",
		          path, xdg);
	} else {
		cli_error("(%s is the per-user daemon's socket under $XDG_RUNTIME_DIR; start "
		          "tileatomd, or give -s SOCKET or set TILEATOM_SOCKET)",
		          path);
	}
}

int cli_connect(cli_call *k)
{
	tileatom_connect_options opts;
	tileatom_connect_options_init(&opts);
	opts.timeout_ms = k->g->timeout_ms;
	opts.auth_file = k->g->auth_file;
	if (tileatom_connect_opts(k->g->socket, &opts, &k->c, &k->err) != TILEATOM_OK) {
		cli_error("%s", k->err.message);
		if (!k->g->socket)
			explain_default_socket();
		return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}
