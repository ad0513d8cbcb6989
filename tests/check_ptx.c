/* check_ptx.c: checks the lowering rules (kernels/ta_lower.c) against the PTX of the built
 * kernels (nvcc -ptx of kernels/ta_cuda.cu, made by tests/cuda.mk). Needs nvcc at build
 * time, no GPU; exits 77 (skip) in a build without CUDA.
 *
 * The PTX is split into functions. The kernels of (dtype DT, kernel op KOP) are
 * ta::k_global<DT, KOP, MODE>, ta::k_shared<DT, KOP, MODE> and ta::k_cluster<DT, KOP, MODE>
 * (mangled _ZN2ta8k_globalILi<DT>ELi<KOP>ELi<MODE>E...) plus the out-of-line instruction
 * switch ta::apply_global_rt<DT, KOP> they call; space shared covers both private-window
 * kernels. Checks:
 *  1. every PTX instruction named by every legal variant of ta_lower_foreach appears in
 *     the functions of that variant's (DT, KOP, space);
 *  2. every global atom/red instruction in those functions is named by some variant of
 *     (DT, op) (nothing is executed that the table does not list);
 *  3. the samples of issue 4: add relaxed gpu without output = red.relaxed.gpu.global.add.u32
 *     (int32, uint32), add acquire without output = atom.acquire.gpu.global.add.u32,
 *     cas int32 = atom.*.cas.b32, int64 add = .u64;
 *  4. illegal forms appear nowhere: red.acquire, red.acq_rel, red with exch or cas,
 *     add.s64, exch/cas/and/or/xor on .s/.u types, 16-bit float add without .noftz,
 *     64-bit min/max/and/or/xor as red.shared::cluster, and float bulk reductions;
 *  5. the bulk reductions (cp.reduce.async.bulk, kernels ta::k_bulk<DT, KOP>, counted with
 *     the global-space functions): named exactly for the TA_BULK rows on 4- and 8-byte
 *     integers with sem relaxed, scope cta/cluster/gpu and no output, and for nothing
 *     else (sys, release, an output, sub, floats). */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ta_lower.h"

#ifdef TA_HAVE_CUDA

/* One function of the PTX file. */
typedef struct ptx_func {
	char name[160]; /* mangled name */
	size_t begin;   /* offset of its first line in the PTX text */
	size_t end;     /* offset just past its last line */
} ptx_func;

/* The PTX text and its functions. */
static char *g_ptx;
static size_t g_ptx_len;
static ptx_func *g_funcs;
static size_t g_nfuncs;
/* Failures found. */
static int g_failures;

/* Reports a failure (printf-style). */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("FAIL: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	g_failures++;
}

/* Reads the whole file at path into g_ptx; false when it cannot. */
static bool read_ptx(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	size_t cap = 1 << 20;
	g_ptx = malloc(cap);
	size_t n;
	while (g_ptx && (n = fread(g_ptx + g_ptx_len, 1, cap - g_ptx_len - 1, f)) > 0) {
		g_ptx_len += n;
		if (g_ptx_len + 1 == cap) {
			char *bigger = realloc(g_ptx, cap * 2);
			if (!bigger) {
				free(g_ptx);
				g_ptx = NULL;
				break;
			}
			g_ptx = bigger;
			cap *= 2;
		}
	}
	fclose(f);
	if (!g_ptx)
		return false;
	g_ptx[g_ptx_len] = '\0';
	return true;
}

/* Splits g_ptx into functions: a function starts at a line beginning with ".visible
 * .entry", ".entry", ".func", ".visible .func" or ".weak .func" and runs to the next. */
static void split_functions(void)
{
	size_t cap = 0;
	for (size_t pos = 0; pos < g_ptx_len;) {
		char *line = g_ptx + pos;
		char *nl = strchr(line, '\n');
		size_t next = nl ? (size_t)(nl - g_ptx) + 1 : g_ptx_len;
		bool starts = !strncmp(line, ".visible .entry", 15) ||
		              !strncmp(line, ".entry", 6) || !strncmp(line, ".func", 5) ||
		              !strncmp(line, ".visible .func", 14) ||
		              !strncmp(line, ".weak .func", 11);
		if (starts) {
			char *z = strstr(line, "_Z");
			if (z && z < g_ptx + next) {
				if (g_nfuncs)
					g_funcs[g_nfuncs - 1].end = pos;
				if (g_nfuncs == cap) {
					cap = cap ? cap * 2 : 256;
					g_funcs = realloc(g_funcs, cap * sizeof *g_funcs);
					if (!g_funcs) {
						fprintf(stderr, "out of memory\n");
						exit(99);
					}
				}
				ptx_func *fn = &g_funcs[g_nfuncs++];
				size_t k = 0;
				while (k + 1 < sizeof fn->name &&
				       (isalnum((unsigned char)z[k]) || z[k] == '_'))
					fn->name[k] = z[k], k++;
				fn->name[k] = '\0';
				fn->begin = pos;
				fn->end = g_ptx_len;
			}
		}
		pos = next;
	}
}

/* True when the mangled name belongs to (dt, kop, space): a kernel of that space or the
 * out-of-line switch of (dt, kop). */
static bool func_of(const ptx_func *fn, int dt, int kop, ta_space space)
{
	static const char *const shared_kernels[] = {"_ZN2ta8k_shared", "_ZN2ta9k_cluster"};
	static const char *const global_kernels[] = {"_ZN2ta8k_global", "_ZN2ta6k_bulk"};
	const char *const *want = space == TA_SPACE_SHARED ? shared_kernels : global_kernels;
	size_t nwant = 2;
	char args[32];
	snprintf(args, sizeof args, "ILi%dELi%dE", dt, kop);
	for (size_t i = 0; i < nwant; i++)
		if (!strncmp(fn->name, want[i], strlen(want[i])) &&
		    !strncmp(fn->name + strlen(want[i]), args, strlen(args)))
			return true;
	const char *rt = "_ZN2ta15apply_global_rt";
	return !strncmp(fn->name, rt, strlen(rt)) &&
	       !strncmp(fn->name + strlen(rt), args, strlen(args));
}

/* The kernel op of a table op (SUB runs the ADD kernels). */
static int kernel_op(ta_op op)
{
	return op == TA_OP_SUB ? TA_OP_ADD : (int)op;
}

/* True when instruction token tok (followed by a blank) occurs in [begin, end). */
static bool occurs_in(const char *tok, size_t begin, size_t end)
{
	size_t n = strlen(tok);
	const char *p = g_ptx + begin;
	while ((p = strstr(p, tok)) != NULL && (size_t)(p - g_ptx) + n <= end) {
		char before = p > g_ptx ? p[-1] : ' ';
		char after = p[n];
		if ((before == ' ' || before == '\t') && (after == ' ' || after == '\t'))
			return true;
		p += n;
	}
	return false;
}

/* True when tok occurs in some function of (dt, kop, space). */
static bool occurs_for(const char *tok, int dt, int kop, ta_space space)
{
	for (size_t i = 0; i < g_nfuncs; i++)
		if (func_of(&g_funcs[i], dt, kop, space) &&
		    occurs_in(tok, g_funcs[i].begin, g_funcs[i].end))
			return true;
	return false;
}

/* Calls fn(token, ctx) for every PTX instruction token (atom., red., ld., st. or
 * cp.reduce.async.bulk. followed by qualifiers) in text. */
static void each_token(const char *text, void (*fn)(const char *tok, void *ctx), void *ctx)
{
	for (const char *p = text; *p; p++) {
		bool start =
		    (p == text || !isalnum((unsigned char)p[-1])) &&
		    (!strncmp(p, "atom.", 5) || !strncmp(p, "red.", 4) || !strncmp(p, "ld.", 3) ||
		     !strncmp(p, "st.", 3) || !strncmp(p, "cp.reduce.async.bulk.", 21));
		if (!start)
			continue;
		char tok[128];
		size_t k = 0;
		while (k + 1 < sizeof tok &&
		       (isalnum((unsigned char)p[k]) || p[k] == '.' || p[k] == '_' || p[k] == ':'))
			tok[k] = p[k], k++;
		tok[k] = '\0';
		fn(tok, ctx);
		p += k - 1;
	}
}

/* Context of check_variant's token callback. */
typedef struct variant_ctx {
	const ta_variant *v; /* the variant */
	const char *instr;   /* its description */
} variant_ctx;

/* Counts of check 1. */
static size_t g_variants, g_tokens;

/* The architecture of the PTX (.target sm_NN), 0 when not found. */
static int g_target;

/* Reads the .target line of the PTX into g_target. */
static void read_target(void)
{
	const char *t = strstr(g_ptx, "\n.target sm_");
	g_target = t ? atoi(t + strlen("\n.target sm_")) : 0;
}

/* Check 1 for one token of a variant's description. */
static void check_token(const char *tok, void *ctx)
{
	variant_ctx *c = ctx;
	/* the packed float adds of the REGION loop (.v4.f32, .v8.f16, .v8.bf16) and the bulk
	 * reductions are built from sm_90 on */
	if (g_target < 90 &&
	    (strstr(tok, ".v4.") || strstr(tok, ".v8.") || !strncmp(tok, "cp.reduce.", 10)))
		return;
	g_tokens++;
	if (!occurs_for(tok, c->v->dtype, kernel_op(c->v->op), c->v->space))
		fail("%s %s %s %s %s %s: %s not found in its kernels (%s)", ta_op_name(c->v->op),
		     ta_dtype_name(c->v->dtype), ta_sem_name(c->v->sem), ta_scope_name(c->v->scope),
		     ta_space_name(c->v->space), c->v->want_old ? "old" : "-", tok, c->instr);
}

/* ta_lower_foreach callback: check 1. */
static void check_variant(const ta_variant *v, const char *instr, void *unused)
{
	(void)unused;
	variant_ctx c = {v, instr};
	g_variants++;
	each_token(instr, check_token, &c);
}

/* All instruction tokens named by the table for one (dtype, kernel op), as one string of
 * " tok " entries. */
typedef struct named_set {
	int dt;     /* dtype */
	int kop;    /* kernel op */
	char *text; /* " tok1 tok2 ... " */
	size_t len; /* used bytes */
	size_t cap; /* allocated bytes */
} named_set;

/* Adds a token to a named_set when not already in it. */
static void named_add(const char *tok, void *ctx)
{
	named_set *s = ctx;
	char key[140];
	snprintf(key, sizeof key, " %s ", tok);
	if (s->text && strstr(s->text, key))
		return;
	size_t n = strlen(key);
	if (s->len + n + 1 > s->cap) {
		s->cap = (s->cap + n + 1) * 2;
		s->text = realloc(s->text, s->cap);
		if (!s->text) {
			fprintf(stderr, "out of memory\n");
			exit(99);
		}
	}
	memcpy(s->text + s->len, key, n + 1);
	s->len += n - 1; /* keep the trailing blank as the next entry's leading one */
}

/* ta_lower_foreach callback: collects the tokens of variants of s's (dtype, kernel op). */
static void collect_named(const ta_variant *v, const char *instr, void *ctx)
{
	named_set *s = ctx;
	if ((int)v->dtype == s->dt && kernel_op(v->op) == s->kop)
		each_token(instr, named_add, s);
}

/* Check 2 for one (dtype, kernel op): every global atom/red token in its functions is
 * named by the table. */
static void check_unnamed(int dt, int kop)
{
	named_set s = {dt, kop, NULL, 0, 0};
	ta_lower_foreach(collect_named, &s);
	if (!s.text)
		return;
	for (size_t i = 0; i < g_nfuncs; i++) {
		const ptx_func *fn = &g_funcs[i];
		if (!func_of(fn, dt, kop, TA_SPACE_GLOBAL) &&
		    !func_of(fn, dt, kop, TA_SPACE_SHARED))
			continue;
		for (size_t pos = fn->begin; pos < fn->end;) {
			const char *line = g_ptx + pos;
			const char *nl = memchr(line, '\n', fn->end - pos);
			size_t llen = nl ? (size_t)(nl - line) : fn->end - pos;
			const char *t = line;
			while (t < line + llen && (*t == ' ' || *t == '\t'))
				t++;
			/* tile atomics always carry a sem; the compiler's own atomics on the
			 * element counters (atom.global.add.u64) are not tile accesses */
			bool has_sem = false;
			static const char *const sems[] = {
			    "red.relaxed.",  "red.release.",  "atom.relaxed.", "atom.acquire.",
			    "atom.release.", "atom.acq_rel.", "red.acquire.",  "red.acq_rel."};
			for (size_t q = 0; q < sizeof sems / sizeof sems[0]; q++)
				has_sem |= !strncmp(t, sems[q], strlen(sems[q]));
			/* a bulk reduction is a tile atomic too (.relaxed.gpu by definition) */
			has_sem |= !strncmp(t, "cp.reduce.async.bulk.global.", 28);
			if (has_sem && memmem(t, (size_t)(line + llen - t), ".global.", 8)) {
				char tok[140];
				size_t k = 0;
				while (k + 1 < sizeof tok && t + k < line + llen && t[k] != ' ' &&
				       t[k] != '\t')
					tok[k] = t[k], k++;
				tok[k] = '\0';
				char key[150];
				snprintf(key, sizeof key, " %s ", tok);
				if (!strstr(s.text, key))
					fail("%s (dtype %s, kernel op %s): executes %s, which no "
					     "variant of the "
					     "table names",
					     fn->name, ta_dtype_name((ta_dtype)dt),
					     ta_op_name((ta_op)kop), tok);
			}
			pos += llen + 1;
		}
	}
	free(s.text);
}

/* Check 3: a sample lowering equals expect (exact) and its tokens are in the PTX. */
static void sample(ta_op op, ta_dtype dt, ta_sem sem, bool want_old, const char *expect)
{
	ta_variant v = {op, dt, sem, TA_SCOPE_GPU, TA_SPACE_GLOBAL, want_old};
	char instr[TA_LOWER_INSTR_MAX];
	ta_error err;
	if (ta_lower_instr(&v, instr, sizeof instr, &err) != TA_OK) {
		fail("sample %s %s %s: %s", ta_op_name(op), ta_dtype_name(dt), ta_sem_name(sem),
		     err.msg);
		return;
	}
	variant_ctx c = {&v, instr};
	int before = g_failures;
	if (strncmp(instr, expect, strlen(expect)) != 0)
		fail("sample %s %s %s %s: lowered to %s, expected %s", ta_op_name(op),
		     ta_dtype_name(dt), ta_sem_name(sem), want_old ? "old" : "-", instr, expect);
	else
		each_token(expect, check_token, &c);
	if (g_failures == before)
		printf("ok: %s %s %s %s -> %s\n", ta_op_name(op), ta_dtype_name(dt),
		       ta_sem_name(sem), want_old ? "old" : "-", instr);
}

/* Context of check 4's token scan. */
typedef struct forbid_rule {
	const char *prefix; /* token starts with */
	const char *infix;  /* token contains (NULL: anything) */
	const char *suffix; /* token ends with (NULL: anything) */
	size_t hits;        /* tokens that matched */
	char example[128];  /* one of them */
} forbid_rule;

/* The forbidden forms of check 4. */
static forbid_rule g_rules[] = {
    {"red.acquire", NULL, NULL, 0, ""},
    {"red.acq_rel", NULL, NULL, 0, ""},
    {"red.", ".exch.", NULL, 0, ""},
    {"red.", ".cas.", NULL, 0, ""},
    {"atom.", ".add.s64", NULL, 0, ""},
    {"red.", ".add.s64", NULL, 0, ""},
    {"atom.", ".cas.s", NULL, 0, ""},
    {"atom.", ".cas.u", NULL, 0, ""},
    {"atom.", ".cas.f", NULL, 0, ""},
    {"atom.", ".exch.s", NULL, 0, ""},
    {"atom.", ".exch.u", NULL, 0, ""},
    {"atom.", ".exch.f", NULL, 0, ""},
    {"atom.", ".and.s", NULL, 0, ""},
    {"atom.", ".and.u", NULL, 0, ""},
    {"red.", ".and.s", NULL, 0, ""},
    {"red.", ".and.u", NULL, 0, ""},
    {"atom.", ".or.s", NULL, 0, ""},
    {"atom.", ".or.u", NULL, 0, ""},
    {"red.", ".or.s", NULL, 0, ""},
    {"red.", ".or.u", NULL, 0, ""},
    {"atom.", ".xor.s", NULL, 0, ""},
    {"atom.", ".xor.u", NULL, 0, ""},
    {"red.", ".xor.s", NULL, 0, ""},
    {"red.", ".xor.u", NULL, 0, ""},
    {"atom.", ".add.f16", NULL, 0, ""},
    {"red.", ".add.f16", NULL, 0, ""},
    {"atom.", ".add.bf16", NULL, 0, ""},
    {"red.", ".add.bf16", NULL, 0, ""},
    {"atom.", ".min.f", NULL, 0, ""},
    {"atom.", ".max.f", NULL, 0, ""},
    {"red.", ".min.f", NULL, 0, ""},
    {"red.", ".max.f", NULL, 0, ""},
    /* 64-bit min/max/and/or/xor on a cluster window lose updates (kernels: a CAS loop) */
    {"red.shared::cluster.", ".min.", "64", 0, ""},
    {"red.shared::cluster.", ".max.", "64", 0, ""},
    {"red.shared::cluster.", ".and.", "64", 0, ""},
    {"red.shared::cluster.", ".or.", "64", 0, ""},
    {"red.shared::cluster.", ".xor.", "64", 0, ""},
    {"atom.shared::cluster.", ".min.", "64", 0, ""},
    {"atom.shared::cluster.", ".max.", "64", 0, ""},
    {"atom.shared::cluster.", ".and.", "64", 0, ""},
    {"atom.shared::cluster.", ".or.", "64", 0, ""},
    {"atom.shared::cluster.", ".xor.", "64", 0, ""},
    /* float bulk reductions differ from the float rules (float32 keeps subnormals) */
    {"cp.reduce.async.bulk.", ".add.f", NULL, 0, ""},
    {"cp.reduce.async.bulk.", ".add.noftz.", NULL, 0, ""},
};

/* Check 5 for one variant: the bulk form (op, dtype, sem, scope, output) lowers to
 * (expect: the cp.reduce token or NULL for none), and the token is in the PTX. */
static void bulk_sample(ta_op op, ta_dtype dt, ta_sem sem, ta_scope scope, bool want_old,
                        const char *expect)
{
	ta_variant v = {op, dt, sem, scope, TA_SPACE_GLOBAL, want_old};
	char instr[TA_LOWER_INSTR_MAX];
	ta_error err;
	if (ta_lower_instr(&v, instr, sizeof instr, &err) != TA_OK) {
		fail("bulk sample %s %s: %s", ta_op_name(op), ta_dtype_name(dt), err.msg);
		return;
	}
	const char *got = strstr(instr, "|region-bulk:");
	const char *tok = got ? got + strlen("|region-bulk:") : NULL;
	if (!expect != !tok || (expect && strcmp(tok, expect) != 0)) {
		fail("bulk sample %s %s %s %s %s: lowered to %s, expected %s", ta_op_name(op),
		     ta_dtype_name(dt), ta_sem_name(sem), ta_scope_name(scope),
		     want_old ? "old" : "-", instr, expect ? expect : "no bulk form");
		return;
	}
	if (expect && g_target >= 90 && !occurs_for(expect, dt, kernel_op(op), TA_SPACE_GLOBAL)) {
		fail("bulk sample %s %s: %s not in its kernels", ta_op_name(op), ta_dtype_name(dt),
		     expect);
		return;
	}
	printf("ok: bulk %s %s %s %s %s -> %s\n", ta_op_name(op), ta_dtype_name(dt),
	       ta_sem_name(sem), ta_scope_name(scope), want_old ? "old" : "-",
	       expect ? expect : "none");
}

/* Token callback of check 4. */
static void forbid_scan(const char *tok, void *unused)
{
	(void)unused;
	for (size_t i = 0; i < sizeof g_rules / sizeof g_rules[0]; i++) {
		forbid_rule *r = &g_rules[i];
		if (strncmp(tok, r->prefix, strlen(r->prefix)) != 0)
			continue;
		if (r->infix && !strstr(tok, r->infix))
			continue;
		if (r->suffix) {
			size_t n = strlen(tok), m = strlen(r->suffix);
			if (n < m || strcmp(tok + n - m, r->suffix) != 0)
				continue;
		}
		if (r->hits++ == 0)
			snprintf(r->example, sizeof r->example, "%s", tok);
	}
}

int main(void)
{
	const char *path = getenv("TA_PTX_FILE") ? getenv("TA_PTX_FILE") : TA_PTX_FILE;
	if (!read_ptx(path)) {
		printf("FAIL: cannot read the kernels' PTX at %s\n", path);
		return 1;
	}
	split_functions();
	read_target();
	printf("PTX target sm_%d%s\n", g_target,
	       g_target < 90 ? ": the packed float adds (sm_90) are not checked" : "");
	printf("PTX %s: %zu bytes, %zu functions\n", path, g_ptx_len, g_nfuncs);

	/* every kernel of the table is in the PTX */
	size_t kernels = 0;
	for (size_t i = 0; i < g_nfuncs; i++)
		if (!strncmp(g_funcs[i].name, "_ZN2ta8k_global", 15) ||
		    !strncmp(g_funcs[i].name, "_ZN2ta6k_bulk", 13) ||
		    !strncmp(g_funcs[i].name, "_ZN2ta8k_shared", 15) ||
		    !strncmp(g_funcs[i].name, "_ZN2ta9k_cluster", 16))
			kernels++;
	/* legal (dtype, kernel op) pairs x 4 loops (general, region, flat32, flat64), global
	 * and shared, + 2 counting loops (count32, count64) shared for integer dtypes; x 3
	 * (not region) for the cluster kernels */
	size_t expect = 0;
	for (int dt = TA_DTYPE_NONE + 1; dt < TA_DTYPE_COUNT; dt++)
		for (int op = TA_OP_NONE + 1; op < TA_OP_COUNT; op++) {
			if (op == TA_OP_SUB || !ta_dtype_is_tile((ta_dtype)dt) ||
			    !ta_op_accepts_dtype((ta_op)op, (ta_dtype)dt))
				continue;
			expect += 4 +
			          (ta_op_shared_ok((ta_op)op)
			               ? 4 + 3 + (ta_dtype_is_int((ta_dtype)dt) ? 2 : 0)
			               : 0) +
			          ta_op_bulk_ok((ta_op)op, (ta_dtype)dt);
		}
	if (kernels != expect)
		fail("%zu kernels in the PTX, the table calls for %zu", kernels, expect);
	else
		printf("ok: %zu kernels, as the table calls for\n", kernels);

	/* 1 */
	ta_lower_foreach(check_variant, NULL);
	printf("checked %zu variants, %zu instruction tokens\n", g_variants, g_tokens);
	/* 2 */
	for (int dt = TA_DTYPE_NONE + 1; dt < TA_DTYPE_COUNT; dt++)
		for (int op = TA_OP_NONE + 1; op < TA_OP_COUNT; op++)
			if (op != TA_OP_SUB)
				check_unnamed(dt, op);
	/* 3 */
	sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_RELAXED, false, "red.relaxed.gpu.global.add.u32");
	sample(TA_OP_ADD, TA_DTYPE_U32, TA_SEM_RELAXED, false, "red.relaxed.gpu.global.add.u32");
	sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_ACQUIRE, false, "atom.acquire.gpu.global.add.u32");
	sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_ACQ_REL, false, "atom.acq_rel.gpu.global.add.u32");
	sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_RELEASE, false, "red.release.gpu.global.add.u32");
	sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_RELAXED, true, "atom.relaxed.gpu.global.add.u32");
	sample(TA_OP_CAS, TA_DTYPE_I32, TA_SEM_RELAXED, true, "atom.relaxed.gpu.global.cas.b32");
	sample(TA_OP_CAS, TA_DTYPE_I32, TA_SEM_ACQUIRE, false, "atom.acquire.gpu.global.cas.b32");
	sample(TA_OP_ADD, TA_DTYPE_I64, TA_SEM_RELAXED, false, "red.relaxed.gpu.global.add.u64");
	sample(TA_OP_ADD, TA_DTYPE_I64, TA_SEM_RELAXED, true, "atom.relaxed.gpu.global.add.u64");
	sample(TA_OP_MIN, TA_DTYPE_I64, TA_SEM_RELAXED, false, "red.relaxed.gpu.global.min.s64");
	sample(TA_OP_MAX, TA_DTYPE_U64, TA_SEM_RELAXED, true, "atom.relaxed.gpu.global.max.u64");
	sample(TA_OP_EXCH, TA_DTYPE_F32, TA_SEM_RELAXED, false, "atom.relaxed.gpu.global.exch.b32");
	sample(TA_OP_XOR, TA_DTYPE_I32, TA_SEM_RELAXED, false, "red.relaxed.gpu.global.xor.b32");
	sample(TA_OP_ADD, TA_DTYPE_F16, TA_SEM_RELAXED, false,
	       "red.relaxed.gpu.global.add.noftz.f16");
	sample(TA_OP_ADD, TA_DTYPE_BF16, TA_SEM_RELAXED, true,
	       "atom.relaxed.gpu.global.add.noftz.bf16");
	sample(TA_OP_MAX, TA_DTYPE_F32, TA_SEM_RELAXED, false,
	       "cas-loop(atom.relaxed.gpu.global.cas.b32)");
	sample(TA_OP_LOAD, TA_DTYPE_F64, TA_SEM_ACQUIRE, true, "ld.acquire.gpu.global.b64");
	sample(TA_OP_STORE, TA_DTYPE_F16, TA_SEM_RELEASE, false, "st.release.gpu.global.b16");
	/* 4 */
	each_token(g_ptx, forbid_scan, NULL);
	for (size_t i = 0; i < sizeof g_rules / sizeof g_rules[0]; i++) {
		forbid_rule *r = &g_rules[i];
		if (r->hits)
			fail("forbidden form %s*%s found %zu times, e.g. %s", r->prefix,
			     r->infix ? r->infix : "", r->hits, r->example);
	}
	/* 5 */
	const char *bk = "cp.reduce.async.bulk.global.shared::cta.bulk_group.";
	char want[128];
	static const struct {
		ta_op op;
		ta_dtype dt;
		const char *form;
	} bulk_yes[] = {{TA_OP_ADD, TA_DTYPE_I32, "add.u32"}, {TA_OP_ADD, TA_DTYPE_U64, "add.u64"},
	                {TA_OP_MIN, TA_DTYPE_I32, "min.s32"}, {TA_OP_MIN, TA_DTYPE_U32, "min.u32"},
	                {TA_OP_MAX, TA_DTYPE_I64, "max.s64"}, {TA_OP_MAX, TA_DTYPE_U64, "max.u64"},
	                {TA_OP_AND, TA_DTYPE_I32, "and.b32"}, {TA_OP_OR, TA_DTYPE_U64, "or.b64"},
	                {TA_OP_XOR, TA_DTYPE_I64, "xor.b64"}};
	for (size_t i = 0; i < sizeof bulk_yes / sizeof bulk_yes[0]; i++) {
		snprintf(want, sizeof want, "%s%s", bk, bulk_yes[i].form);
		bulk_sample(bulk_yes[i].op, bulk_yes[i].dt, TA_SEM_RELAXED, TA_SCOPE_GPU, false,
		            want);
		bulk_sample(bulk_yes[i].op, bulk_yes[i].dt, TA_SEM_RELAXED, TA_SCOPE_CTA, false,
		            want);
	}
	bulk_sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_RELAXED, TA_SCOPE_SYS, false, NULL);
	bulk_sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_RELEASE, TA_SCOPE_GPU, false, NULL);
	bulk_sample(TA_OP_ADD, TA_DTYPE_I32, TA_SEM_RELAXED, TA_SCOPE_GPU, true, NULL);
	bulk_sample(TA_OP_SUB, TA_DTYPE_I32, TA_SEM_RELAXED, TA_SCOPE_GPU, false, NULL);
	bulk_sample(TA_OP_ADD, TA_DTYPE_F32, TA_SEM_RELAXED, TA_SCOPE_GPU, false, NULL);
	bulk_sample(TA_OP_ADD, TA_DTYPE_BF16, TA_SEM_RELAXED, TA_SCOPE_GPU, false, NULL);
	bulk_sample(TA_OP_EXCH, TA_DTYPE_I32, TA_SEM_RELAXED, TA_SCOPE_GPU, false, NULL);
	/* the noftz forms are there (so the scan above really saw the 16-bit adds) */
	if (!strstr(g_ptx, ".add.noftz.f16") || !strstr(g_ptx, ".add.noftz.bf16"))
		fail("no .add.noftz.f16 / .add.noftz.bf16 in the PTX");
	printf("%s: %d failure(s)\n", g_failures ? "FAIL" : "PASS", g_failures);
	free(g_ptx);
	free(g_funcs);
	return g_failures ? 1 : 0;
}
#else
int main(void)
{
	printf("SKIP: check_ptx: this build has no CUDA backend (configure --with-cuda)\n");
	return 77;
}
#endif
