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
	const char *cmd = k->argv[0];
	cli_args *out = &k->a;
	memset(out, 0, sizeof(*out));
	bool only_pos = false;
	for (int i = 1; i < k->argc; i++) {
		const char *a = k->argv[i];
		if (only_pos || a[0] != '-' ||
		    (a[1] != '-' && strcmp(a, "-h") != 0 && strcmp(a, "-s") != 0)) {
			if (out->npos >= max_pos || out->npos >= CLI_MAX_POS) {
				cli_error("%s: unexpected argument '%s' (see '%s --help')", cmd, a,
				          cmd);
				return CLI_EXIT_USAGE;
			}
			out->pos[out->npos++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_pos = true;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(usage, stdout);
			return CLI_EXIT_OK;
		}
		/* a long option of the command's, or --socket (-s), which every command takes */
		const char *name = a[1] == '-' ? a + 2 : "socket";
		const char *eq = strchr(name, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		int o = 0;
		while (o < nopts &&
		       (strlen(opts[o].name) != nlen || strncmp(opts[o].name, name, nlen) != 0))
			o++;
		bool socket = o == nopts && nlen == 6 && strncmp(name, "socket", 6) == 0;
		if (o == nopts && !socket) {
			cli_error("%s: unknown option '%s' (see '%s --help')", cmd, a, cmd);
			return CLI_EXIT_USAGE;
		}
		bool flag = !socket && !opts[o].has_arg;
		if (flag && eq) {
			cli_error("%s: option --%s takes no value", cmd, opts[o].name);
			return CLI_EXIT_USAGE;
		}
		const char *val = flag ? "" : eq ? eq + 1 : i + 1 < k->argc ? k->argv[++i] : NULL;
		if (!val) { /* (a is the option as given: it has no '=') */
			cli_error("%s: %s%s needs a value", cmd, socket ? "" : "option ", a);
			return CLI_EXIT_USAGE;
		}
		if (socket)
			k->socket = val;
		else
			out->value[o] = val;
	}
	if (out->npos < min_pos) {
		cli_error("%s: missing arguments (see '%s --help')", cmd, cmd);
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
	opts.timeout_ms = k->timeout_ms;
	opts.auth_file = k->auth_file;
	if (tileatom_connect_opts(k->socket, &opts, &k->c, &k->err) != TILEATOM_OK) {
		cli_error("%s", k->err.message);
		if (!k->socket)
			explain_default_socket();
		return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}
