/* tac_api.c: the public calls of libtileatom-client. A synchronous call builds its request
 * (tac_codec.c), submits it, receives the response (tac_conn.c), checks it against the
 * request kind and copies results into the caller's structs; an atomic request over the
 * daemon's frame limit is staged in shared memory, else sent in parts (tac_split.c; the
 * pipelined ones too, collected as one merged response). The pipelined calls stop after the
 * submit, which leaves the request in the connection's output buffer (a repeat of the
 * previous small atomic request goes as its template's bytes, submit_cached);
 * tileatom_collect() does the rest in order. Responses are kept in client->last so that
 * collected pointers stay valid until the next call on the same client. */
#include "tac_internal.h"

#include "ta_types.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Returns an error from the enclosing function when the client handle is NULL, or else when
 * outputs_given (the check of the call's output pointers) is false. */
#define REQUIRE_CLIENT_OUT(c, outputs_given, err)                                                  \
	do {                                                                                       \
		if (!(c))                                                                          \
			return tac_err((err), TILEATOM_E_INVALID_ARGUMENT, "no client given");     \
		if (!(outputs_given))                                                              \
			return tac_err((err), TILEATOM_E_INVALID_ARGUMENT, "no output given");     \
	} while (0)
/* Returns an error from the enclosing function when the client handle is NULL. */
#define REQUIRE_CLIENT(c, err) REQUIRE_CLIENT_OUT(c, true, err)

/* Copies a string into a fixed buffer, truncating. */
static void copy_str(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

void tileatom_connect_options_init(tileatom_connect_options *opts)
{
	if (opts)
		*opts = (tileatom_connect_options){.timeout_ms = 0, .auth_file = NULL};
}

/* The Auth exchange after a Hello that said auth_required: proves the secret of auth_file
 * over the daemon's nonce and a fresh one of ours, then checks the daemon's proof. */
static int authenticate(tileatom_client *c, const char *address, const char *auth_file,
                        const Tileatom__HelloResponse *h, tileatom_error *err)
{
	if (!auth_file || !*auth_file)
		return tac_err(err, TILEATOM_E_PERMISSION_DENIED,
		               "tileatomd at %s requires authentication: give its secret file "
		               "(tileatom-cli --auth-file FILE, or TILEATOM_AUTH_FILE)",
		               address);
	if (h->auth_nonce.len != TA_AUTH_NONCE)
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "tileatomd at %s sent an auth nonce of %zu bytes, not %d", address,
		               h->auth_nonce.len, TA_AUTH_NONCE);
	const uint8_t *server_nonce = h->auth_nonce.data; /* (in c->last until the Auth) */
	ta_auth_secret *secret = malloc(sizeof(*secret));
	if (!secret)
		return tac_err(err, TILEATOM_E_RESOURCE_EXHAUSTED, "out of memory");
	char msg[512];
	int rc = TILEATOM_OK;
	uint8_t nonce[TA_AUTH_CLIENT_NONCE], proof[TA_AUTH_PROOF], expect[TA_AUTH_PROOF];
	if (ta_auth_load(auth_file, secret, msg, sizeof(msg)) != 0)
		rc = tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "%s", msg);
	else if (ta_auth_random(nonce, sizeof(nonce)) != 0 ||
	         ta_auth_proof(secret, TA_AUTH_CLIENT, server_nonce, nonce, sizeof(nonce), proof) !=
	             0 ||
	         ta_auth_proof(secret, TA_AUTH_SERVER, server_nonce, nonce, sizeof(nonce),
	                       expect) != 0)
		rc = tac_err(err, TILEATOM_E_INTERNAL, "cannot compute the authentication proof");
	ta_auth_wipe(secret);
	free(secret);
	tac_msg m; /* (sent only when the proofs were computed: rc) */
	tac_build_empty(&m, TILEATOM_REQ_AUTH);
	m.body.auth.client_nonce = (ProtobufCBinaryData){sizeof(nonce), nonce};
	m.body.auth.proof = (ProtobufCBinaryData){sizeof(proof), proof};
	rc = tac_roundtrip(c, &m, rc, err);
	if (rc != TILEATOM_OK)
		return rc;
	const Tileatom__AuthResponse *a = c->last->auth;
	if (a->server_proof.len != TA_AUTH_PROOF ||
	    !ta_auth_equal(a->server_proof.data, expect, TA_AUTH_PROOF))
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "tileatomd at %s accepted us but did not prove that it holds the "
		               "same secret",
		               address);
	return TILEATOM_OK;
}

int tileatom_connect(const char *address, int timeout_ms, tileatom_client **out,
                     tileatom_error *err)
{
	tileatom_connect_options opts;
	tileatom_connect_options_init(&opts);
	opts.timeout_ms = timeout_ms;
	return tileatom_connect_opts(address, &opts, out, err);
}

/* The busy poll a new connection starts with: $TILEATOM_BUSY_POLL_US (a decimal count of
 * microseconds, capped at TAC_BUSY_POLL_MAX), else 0 (anything else: 0, documented). */
static unsigned busy_poll_default(void)
{
	const char *v = getenv("TILEATOM_BUSY_POLL_US");
	char *end = NULL;
	unsigned long long n = v && *v >= '0' && *v <= '9' ? strtoull(v, &end, 10) : 0;
	if (!end || *end != '\0')
		return 0;
	return n < TAC_BUSY_POLL_MAX ? (unsigned)n : TAC_BUSY_POLL_MAX;
}

int tileatom_connect_opts(const char *address, const tileatom_connect_options *opts,
                          tileatom_client **out, tileatom_error *err)
{
	tileatom_connect_options defaults;
	if (!opts) {
		tileatom_connect_options_init(&defaults);
		opts = &defaults;
	}
	const char *auth_file = opts->auth_file ? opts->auth_file : getenv("TILEATOM_AUTH_FILE");
	if (!out)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no output handle given");
	*out = NULL;
	char defpath[PATH_MAX];
	if (!address) {
		if (tileatom_default_socket(defpath, sizeof(defpath)) != 0)
			return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
			               "the default socket path is too long");
		address = defpath;
	}
	tileatom_client *c = NULL;
	int rc = tac_conn_open(address, opts->timeout_ms, &c, err);
	if (rc != TILEATOM_OK)
		return rc;
	c->cuptr_min = tac_cuptr_default_min();
	c->busy_poll_us = busy_poll_default();
	c->io_timeout_ms = opts->timeout_ms;
	tac_msg m;
	tac_build_empty(&m, TILEATOM_REQ_HELLO);
	m.body.hello.protocol_version = TILEATOM_PROTOCOL_VERSION;
	m.body.hello.client_name = "libtileatom-client/" TILEATOM_CLIENT_VERSION;
	rc = tac_roundtrip(c, &m, TILEATOM_OK, err);
	if (rc == TILEATOM_OK) {
		const Tileatom__HelloResponse *h = c->last->hello;
		if (h->protocol_version != TILEATOM_PROTOCOL_VERSION) {
			rc = tac_err(err, TILEATOM_E_PROTOCOL,
			             "tileatomd at %s speaks protocol version %u, this library %d",
			             address, h->protocol_version, TILEATOM_PROTOCOL_VERSION);
		} else {
			copy_str(c->server_version, sizeof(c->server_version), h->server_version);
			copy_str(c->server_backend, sizeof(c->server_backend), h->backend);
			c->max_frame = h->max_frame ? h->max_frame : TAC_DEFAULT_MAX_FRAME;
			if (h->auth_required)
				rc = authenticate(c, address, auth_file, h, err);
		}
	}
	if (rc != TILEATOM_OK) {
		tileatom_close(c); /* (nothing is buffered to flush) */
		return rc;
	}
	c->io_timeout_ms = 0;
	*out = c;
	return TILEATOM_OK;
}

void tileatom_close(tileatom_client *client)
{
	/* Submitted requests still buffered are written first (best effort), as they would
	 * have been by their submit before coalescing: the daemon runs them. */
	if (client) {
		if (!client->broken)
			(void)tac_conn_flush(client, NULL);
		free(client->cuptr); /* its buffers are in the list tac_shm_client_free frees */
		tac_shm_client_free(client);
		tac_split_client_free(client);
	}
	tac_client_free(client);
}

void tileatom_set_busy_poll(tileatom_client *client, unsigned usec)
{
	if (client)
		client->busy_poll_us = usec < TAC_BUSY_POLL_MAX ? usec : TAC_BUSY_POLL_MAX;
}

void tileatom_set_timeout(tileatom_client *client, int timeout_ms)
{
	if (client)
		client->io_timeout_ms = timeout_ms;
}

void tileatom_set_max_response(tileatom_client *client, uint32_t max_bytes)
{
	if (client && max_bytes > 0)
		client->reader.max_payload = max_bytes;
}

const char *tileatom_server_version(const tileatom_client *client)
{
	return client ? client->server_version : "";
}

const char *tileatom_server_backend(const tileatom_client *client)
{
	return client ? client->server_backend : "";
}

uint32_t tileatom_server_max_frame(const tileatom_client *client)
{
	return client ? client->max_frame : 0;
}

const char *tileatom_address(const tileatom_client *client)
{
	return client ? client->address : "";
}

size_t tileatom_pending(const tileatom_client *client)
{
	return client ? tac_pending_requests(client) : 0;
}

int tileatom_fd(const tileatom_client *client)
{
	return client ? client->fd : -1;
}

int tileatom_poll(tileatom_client *client, size_t *ready, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	if (!ready)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no ready count given");
	/* a broken connection answers every pending request (with its error) at once; else a
	 * split request counts once all its parts are in */
	int rc = tac_conn_poll(client, err);
	*ready = rc == TILEATOM_OK ? tac_split_ready(client) : tac_pending_requests(client);
	return rc;
}

int tileatom_ping(tileatom_client *client, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	return tac_roundtrip(client, &m, tac_build_empty(&m, TILEATOM_REQ_PING), err);
}

int tileatom_stats(tileatom_client *client, tileatom_stats_info *out, tileatom_error *err)
{
	return tileatom_stats_kinds(client, out, NULL, NULL, err);
}

/* Copies the per-kind part of a Stats response into a malloc'd array. */
static int copy_kinds(const Tileatom__StatsResponse *s, tileatom_kind_stats **kinds, size_t *nkinds,
                      tileatom_error *err)
{
	*kinds = NULL;
	*nkinds = 0;
	if (s->n_kinds == 0)
		return TILEATOM_OK;
	if (s->n_latency_bounds_ns + 1 > TILEATOM_LATENCY_BUCKETS_MAX)
		return tac_err(err, TILEATOM_E_INTERNAL,
		               "the daemon sent %zu latency buckets, more than the %d this "
		               "library holds",
		               s->n_latency_bounds_ns + 1, TILEATOM_LATENCY_BUCKETS_MAX);
	tileatom_kind_stats *k = calloc(s->n_kinds, sizeof(*k));
	if (!k)
		return tac_err(err, TILEATOM_E_RESOURCE_EXHAUSTED, "out of memory");
	for (size_t i = 0; i < s->n_kinds; i++) {
		const Tileatom__KindStats *w = s->kinds[i];
		copy_str(k[i].kind, sizeof(k[i].kind), w->kind);
		k[i].requests = w->requests;
		k[i].errors = w->errors;
		k[i].elements = w->elements;
		k[i].bytes_in = w->bytes_in;
		k[i].bytes_out = w->bytes_out;
		k[i].latency_ns = w->latency_ns;
		k[i].nbuckets = (int)s->n_latency_bounds_ns + 1;
		for (int b = 0; b < k[i].nbuckets; b++) {
			k[i].le_ns[b] = (size_t)b < s->n_latency_bounds_ns ? s->latency_bounds_ns[b]
			                                                   : UINT64_MAX;
			k[i].bucket[b] =
			    (size_t)b < w->n_latency_buckets ? w->latency_buckets[b] : 0;
		}
	}
	*kinds = k;
	*nkinds = s->n_kinds;
	return TILEATOM_OK;
}

int tileatom_stats_kinds(tileatom_client *client, tileatom_stats_info *out,
                         tileatom_kind_stats **kinds, size_t *nkinds, tileatom_error *err)
{
	REQUIRE_CLIENT_OUT(client, out && (kinds != NULL) == (nkinds != NULL), err);
	tac_msg m;
	int rc = tac_roundtrip(client, &m, tac_build_empty(&m, TILEATOM_REQ_STATS), err);
	if (rc != TILEATOM_OK)
		return rc;
	const Tileatom__StatsResponse *s = client->last->stats;
	*out = (tileatom_stats_info){.device_memory = s->device_memory,
	                             .tiles = s->tiles,
	                             .tile_bytes = s->tile_bytes,
	                             .requests = s->requests,
	                             .errors = s->errors,
	                             .connections = s->connections,
	                             .elements = s->elements};
	copy_str(out->backend, sizeof(out->backend), s->backend);
	copy_str(out->device, sizeof(out->device), s->device);
	copy_str(out->compute_capability, sizeof(out->compute_capability), s->compute_capability);
	if (kinds)
		return copy_kinds(s, kinds, nkinds, err);
	return TILEATOM_OK;
}

int tileatom_stats_devices(tileatom_client *client, tileatom_device_stats **devices, size_t *count,
                           tileatom_error *err)
{
	REQUIRE_CLIENT_OUT(client, devices && count, err);
	*devices = NULL;
	*count = 0;
	tac_msg m;
	int rc = tac_roundtrip(client, &m, tac_build_empty(&m, TILEATOM_REQ_STATS), err);
	if (rc != TILEATOM_OK)
		return rc;
	const Tileatom__StatsResponse *s = client->last->stats;
	if (s->n_devices == 0)
		return TILEATOM_OK;
	tileatom_device_stats *d = calloc(s->n_devices, sizeof(*d));
	if (!d)
		return tac_err(err, TILEATOM_E_RESOURCE_EXHAUSTED, "out of memory");
	for (size_t i = 0; i < s->n_devices; i++) {
		const Tileatom__DeviceStats *w = s->devices[i];
		d[i].device = w->device;
		d[i].memory_used = w->memory_used;
		d[i].memory_total = w->memory_total;
		d[i].tiles = w->tiles;
		d[i].tile_bytes = w->tile_bytes;
		d[i].requests = w->requests;
		d[i].failed = w->failed;
		copy_str(d[i].failure, sizeof d[i].failure, w->failure);
	}
	*devices = d;
	*count = s->n_devices;
	return TILEATOM_OK;
}

int tileatom_snapshot(tileatom_client *client, tileatom_snapshot_info *out, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	int rc = tac_roundtrip(client, &m, tac_build_empty(&m, TILEATOM_REQ_SNAPSHOT), err);
	if (rc != TILEATOM_OK)
		return rc;
	const Tileatom__SnapshotResponse *s = client->last->snapshot;
	if (out)
		*out = (tileatom_snapshot_info){s->tiles, s->bytes, s->seq, s->log_removed};
	return TILEATOM_OK;
}

int tileatom_create(tileatom_client *client, const char *name, tileatom_dtype dtype, int rank,
                    const int64_t *shape, const void *fill, tileatom_tile_info *info,
                    tileatom_error *err)
{
	return tileatom_create_ex(client, name, dtype, rank, shape, fill, 0, info, err);
}

int tileatom_create_ex(tileatom_client *client, const char *name, tileatom_dtype dtype, int rank,
                       const int64_t *shape, const void *fill, unsigned flags,
                       tileatom_tile_info *info, tileatom_error *err)
{
	return tileatom_create_placed(client, name, dtype, rank, shape, fill, flags, NULL, info,
	                              err);
}

int tileatom_create_placed(tileatom_client *client, const char *name, tileatom_dtype dtype,
                           int rank, const int64_t *shape, const void *fill, unsigned flags,
                           const char *placement, tileatom_tile_info *info, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	if (flags & ~(unsigned)TILEATOM_CREATE_PRIVATE)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "create %s: unknown flags 0x%x",
		               name ? name : "", flags & ~(unsigned)TILEATOM_CREATE_PRIVATE);
	tac_msg m;
	int rc = tac_build_create(&m, name, dtype, rank, shape, fill, err);
	m.body.create.private_tile = (flags & TILEATOM_CREATE_PRIVATE) != 0;
	if (placement && *placement)
		m.body.create.placement = (char *)placement;
	rc = tac_roundtrip(client, &m, rc, err);
	if (rc == TILEATOM_OK && info)
		rc = tac_tile_info_from_wire(info, client->last->tile, err);
	return rc;
}

int tileatom_destroy(tileatom_client *client, const char *name, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	return tac_roundtrip(client, &m, tac_build_named(&m, TILEATOM_REQ_DESTROY, name, err), err);
}

/* Appends the tiles of the client's last list response to *arr (*n entries, *cap
 * allocated) and, when places is not NULL, their placements to *places (as many entries). */
static int append_page(tileatom_client *client, tileatom_tile_info **arr,
                       char (**places)[TILEATOM_PLACEMENT_MAX], size_t *n, size_t *cap,
                       tileatom_error *err)
{
	const Tileatom__ListTilesResponse *l = client->last->list;
	if (l->n_tiles > *cap - *n) {
		size_t want = *cap ? *cap : 64;
		while (want - *n < l->n_tiles)
			want *= 2;
		tileatom_tile_info *grown = realloc(*arr, want * sizeof(*grown));
		if (grown)
			*arr = grown;
		char(*pgrown)[TILEATOM_PLACEMENT_MAX] =
		    grown && places ? realloc(*places, want * sizeof(*pgrown)) : NULL;
		if (pgrown)
			*places = pgrown;
		if (!grown || (places && !pgrown))
			return tac_err(err, TILEATOM_E_NOMEM, "out of memory listing %zu tiles",
			               *n + l->n_tiles);
		*cap = want;
	}
	for (size_t i = 0; i < l->n_tiles; i++, (*n)++) {
		int rc = tac_tile_info_from_wire(&(*arr)[*n], l->tiles[i], err);
		if (rc != TILEATOM_OK)
			return rc;
		if (places)
			copy_str((*places)[*n], sizeof((*places)[*n]), l->tiles[i]->placement);
	}
	return TILEATOM_OK;
}

/* Lists tiles into *tiles (and their placements into *places when places is not NULL): one
 * page from cursor (at most limit tiles, 0: the daemon's choice) with its next cursor in
 * next_cursor when one_page is set, else every page. */
static int list_tiles(tileatom_client *client, bool one_page, const char *cursor, uint32_t limit,
                      tileatom_tile_info **tiles, char (**places)[TILEATOM_PLACEMENT_MAX],
                      size_t *count, char *next_cursor, tileatom_error *err)
{
	REQUIRE_CLIENT_OUT(client, tiles && count && (!one_page || next_cursor), err);
	*tiles = NULL;
	*count = 0;
	if (places)
		*places = NULL;
	tileatom_tile_info *arr = NULL;
	char(*where)[TILEATOM_PLACEMENT_MAX] = NULL;
	size_t n = 0, cap = 0;
	char sent[TILEATOM_LIST_CURSOR_MAX] = "";
	do {
		tac_msg m;
		tac_build_empty(&m, TILEATOM_REQ_LIST);
		m.body.list.paged = true;
		m.body.list.cursor = (char *)(cursor ? cursor : "");
		m.body.list.limit = limit;
		int rc = tac_roundtrip(client, &m, TILEATOM_OK, err);
		if (one_page)
			next_cursor[0] = '\0'; /* cursor may be this same buffer: sent by now */
		/* the next cursor, in client->last until the next call */
		const char *next = rc == TILEATOM_OK ? client->last->list->next_cursor : NULL;
		size_t len = next ? strlen(next) : 0;
		if (len >= TILEATOM_LIST_CURSOR_MAX)
			rc = tac_err(err, TILEATOM_E_PROTOCOL,
			             "the daemon's list cursor has %zu bytes, over %d", len,
			             TILEATOM_LIST_CURSOR_MAX - 1);
		if (rc == TILEATOM_OK)
			rc = append_page(client, &arr, places ? &where : NULL, &n, &cap, err);
		if (rc == TILEATOM_OK && !one_page && len && strcmp(next, cursor) == 0)
			rc = tac_err(err, TILEATOM_E_PROTOCOL,
			             "the daemon gave list cursor '%s' twice", next);
		if (rc != TILEATOM_OK) {
			free(arr);
			free(where);
			return rc;
		}
		memcpy(sent, len ? next : "", len + 1);
		cursor = sent;
	} while (!one_page && cursor[0]);
	*tiles = arr;
	if (places)
		*places = where;
	*count = n;
	if (one_page)
		memcpy(next_cursor, sent, strlen(sent) + 1);
	return TILEATOM_OK;
}

int tileatom_list_page(tileatom_client *client, const char *cursor, uint32_t limit,
                       tileatom_tile_info **tiles, char (**places)[TILEATOM_PLACEMENT_MAX],
                       size_t *count, char *next_cursor, tileatom_error *err)
{
	return list_tiles(client, true, cursor, limit, tiles, places, count, next_cursor, err);
}

int tileatom_list(tileatom_client *client, tileatom_tile_info **tiles, size_t *count,
                  tileatom_error *err)
{
	return list_tiles(client, false, "", 0, tiles, NULL, count, NULL, err);
}

int tileatom_tile_placement(tileatom_client *client, const char *name, char *buf, size_t n,
                            tileatom_error *err)
{
	REQUIRE_CLIENT_OUT(client, buf && n > 0, err);
	buf[0] = '\0';
	tac_msg m;
	int rc =
	    tac_roundtrip(client, &m, tac_build_named(&m, TILEATOM_REQ_DESCRIBE, name, err), err);
	if (rc == TILEATOM_OK && client->last->tile && client->last->tile->placement)
		snprintf(buf, n, "%s", client->last->tile->placement);
	return rc;
}

int tileatom_list_placements(tileatom_client *client, tileatom_tile_info **tiles,
                             char (**places)[TILEATOM_PLACEMENT_MAX], size_t *count,
                             tileatom_error *err)
{
	if (!places)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no output given");
	return list_tiles(client, false, "", 0, tiles, places, count, NULL, err);
}

int tileatom_describe(tileatom_client *client, const char *name, tileatom_tile_info *info,
                      tileatom_error *err)
{
	REQUIRE_CLIENT_OUT(client, info, err);
	tac_msg m;
	int rc =
	    tac_roundtrip(client, &m, tac_build_named(&m, TILEATOM_REQ_DESCRIBE, name, err), err);
	if (rc == TILEATOM_OK)
		rc = tac_tile_info_from_wire(info, client->last->tile, err);
	return rc;
}

int tileatom_read(tileatom_client *client, const char *tile, const tileatom_region *region,
                  void *buf, size_t buf_size, size_t *out_bytes, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	if (out_bytes)
		*out_bytes = 0;
	tac_msg m;
	int rc = tac_build_read(&m, tile, region, err);
	if (rc == TILEATOM_OK)
		rc = tac_cuptr_refuse(client, buf, buf_size, "the read buffer", err);
	rc = tac_roundtrip(client, &m, rc, err);
	if (rc != TILEATOM_OK)
		return rc;
	const Tileatom__Array *d = client->last->data;
	if (out_bytes)
		*out_bytes = d->data.len;
	if (d->data.len > buf_size || (!buf && d->data.len > 0))
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "read %s: the buffer has %zu bytes, the data needs %zu", tile,
		               buf ? buf_size : 0, d->data.len);
	if (d->data.len)
		memcpy(buf, d->data.data, d->data.len);
	return TILEATOM_OK;
}

int tileatom_read_alloc(tileatom_client *client, const char *tile, const tileatom_region *region,
                        void **data, size_t *nbytes, tileatom_error *err)
{
	REQUIRE_CLIENT_OUT(client, data && nbytes, err);
	*data = NULL;
	*nbytes = 0;
	tac_msg m;
	int rc = tac_roundtrip(client, &m, tac_build_read(&m, tile, region, err), err);
	if (rc != TILEATOM_OK)
		return rc;
	const Tileatom__Array *d = client->last->data;
	void *p = malloc(d->data.len ? d->data.len : 1);
	if (!p)
		return tac_err(err, TILEATOM_E_NOMEM, "out of memory for %zu bytes", d->data.len);
	if (d->data.len)
		memcpy(p, d->data.data, d->data.len);
	*data = p;
	*nbytes = d->data.len;
	return TILEATOM_OK;
}

int tileatom_write(tileatom_client *client, const char *tile, const tileatom_region *region,
                   const tileatom_array *values, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	return tac_roundtrip(client, &m, tac_build_write(&m, tile, region, values, err), err);
}

/* Copies the OpResponse of client->last into res and, when want, the old / loaded values
 * into out (out_size bytes); what names them in messages. */
static int op_result(tileatom_client *c, bool want, void *out, size_t out_size, const char *what,
                     tileatom_op_result *res, tileatom_error *err)
{
	tileatom_op_result local;
	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	const Tileatom__OpResponse *op = c->last->op;
	res->skipped = op->skipped;
	res->applied = op->applied;
	if (!op->old && want)
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "tileatomd returned no %s values although they were asked for",
		               what);
	if (!op->old)
		return TILEATOM_OK;
	res->old_rank = (int)op->old->n_shape;
	size_t len = op->old->data.len, elems = 1;
	for (size_t i = 0; i < op->old->n_shape; i++) {
		res->old_shape[i] = op->old->shape[i];
		elems *= (size_t)op->old->shape[i];
	}
	if (!want)
		return TILEATOM_OK;
	if (len == 0 && !c->old_from && op->old->n_shape > 0 && elems > 0)
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "tileatomd returned no bytes of %s values for %zu elements", what,
		               elems);
	/* none sent: the daemon wrote them into a shared buffer, at out already or copied */
	bool shared = c->old_from && len == 0;
	if (shared)
		len = tileatom_dtype_size((tileatom_dtype)op->old->dtype) * elems;
	res->old_bytes = len;
	if (len > out_size && shared)
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "tileatomd wrote %zu bytes of %s values into a %zu-byte buffer", len,
		               what, out_size);
	if (len > out_size)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "the op was applied, but the output buffer has %zu bytes and the "
		               "%s values need %zu",
		               out_size, what, len);
	/* values the daemon wrote at out itself stay untouched: out may be device memory */
	if (len && !(shared && c->old_from == out))
		memmove(out, shared ? c->old_from : op->old->data.data, len);
	return TILEATOM_OK;
}

/* Checks the old-values buffer of synchronous RMW options before anything is sent. */
static int check_old_out(const tileatom_op_options *opts, tileatom_error *err)
{
	if (opts && opts->want_old && !opts->old_out)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT,
		               "want_old is set but old_out is NULL");
	return TILEATOM_OK;
}

/* Sends a synchronous atomic request m (rq: the call's arguments) and copies its result
 * into res: over the daemon's frame limit it goes by shared memory when staging makes it
 * fit (and its old values fit one response), else in parts (tac_split). */
static int rmw_send(tileatom_client *c, tac_msg *m, tac_split_req *rq, tileatom_op_result *res,
                    tileatom_error *err)
{
	rq->returns_old = m->options.want_old; /* want_old, or an op that always returns */
	bool want = rq->opts && rq->opts->want_old;
	if (want) {
		m->old_out = rq->opts->old_out;
		m->old_out_size = rq->opts->old_out_size;
	}
	int rc = tac_cuptr_prepare(c, m, err);
	if (rc != TILEATOM_OK)
		return rc;
	if (tac_frame_too_large(c, m)) {
		if (!tac_split_old_fit(c, rq)) /* the response would not fit either */
			return tac_split(c, rq, res, err);
		(void)tac_shm_stage(c, m, false);
		tac_shm_rewrite(c, m);
		if (tac_frame_too_large(c, m))
			return tac_split(c, rq, res, err);
	}
	rc = tac_roundtrip(c, m, TILEATOM_OK, err);
	if (rc != TILEATOM_OK)
		return rc;
	return op_result(c, want, m->old_out, m->old_out_size, "old", res, err);
}

/* The description of an atomic call (tac_split_req: n_index 1 for scatter, 0 and NULL
 * indices for element-wise). */
static tac_split_req rmw_req(tileatom_request_kind kind, const char *tile, tileatom_op op,
                             const tileatom_region *region, int dim, int n_index,
                             const tileatom_array *indices, bool flat, const tileatom_array *values,
                             const tileatom_array *compare, const tileatom_op_options *opts)
{
	return (tac_split_req){kind,    tile, op,     region,  dim,  n_index,
	                       indices, flat, values, compare, opts, false};
}

/* The body of the synchronous atomic calls: checks and builds rq, then sends it (rmw_send). */
static int rmw_call(tileatom_client *c, tac_split_req *rq, tileatom_op_result *res,
                    tileatom_error *err)
{
	REQUIRE_CLIENT(c, err);
	tac_msg m;
	int rc = check_old_out(rq->opts, err);
	if (rc == TILEATOM_OK)
		rc = tac_build_atomic(&m, rq, err);
	if (rc != TILEATOM_OK)
		return rc;
	return rmw_send(c, &m, rq, res, err);
}

int tileatom_elementwise(tileatom_client *client, const char *tile, tileatom_op op,
                         const tileatom_region *region, const tileatom_array *values,
                         const tileatom_array *compare, const tileatom_op_options *opts,
                         tileatom_op_result *res, tileatom_error *err)
{
	tac_split_req rq = rmw_req(TILEATOM_REQ_ELEMENTWISE, tile, op, region, 0, 0, NULL, false,
	                           values, compare, opts);
	return rmw_call(client, &rq, res, err);
}

int tileatom_scatter(tileatom_client *client, const char *tile, tileatom_op op,
                     const tileatom_region *region, int dim, const tileatom_array *indices,
                     const tileatom_array *values, const tileatom_op_options *opts,
                     tileatom_op_result *res, tileatom_error *err)
{
	tac_split_req rq = rmw_req(TILEATOM_REQ_SCATTER, tile, op, region, dim, 1, indices, false,
	                           values, NULL, opts);
	return rmw_call(client, &rq, res, err);
}

int tileatom_indexed(tileatom_client *client, const char *tile, tileatom_op op,
                     const tileatom_region *region, int n_index, const tileatom_array *indices,
                     bool flat, const tileatom_array *values, const tileatom_array *compare,
                     const tileatom_op_options *opts, tileatom_op_result *res, tileatom_error *err)
{
	tac_split_req rq = rmw_req(TILEATOM_REQ_INDEXED, tile, op, region, 0, n_index, indices,
	                           flat, values, compare, opts);
	return rmw_call(client, &rq, res, err);
}

int tileatom_atomic_at(tileatom_client *client, const char *tile, tileatom_op op,
                       int64_t flat_index, tileatom_dtype dtype, const void *value,
                       const void *compare, const tileatom_op_options *opts, void *old_out,
                       tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	tileatom_array value_arr, compare_arr;
	int rc = tac_build_atomic_at(&m, tile, op, flat_index, dtype, value, compare, opts,
	                             &value_arr, &compare_arr, err);
	rc = tac_roundtrip(client, &m, rc, err);
	if (rc != TILEATOM_OK)
		return rc;
	uint64_t old_bits[2] = {0, 0};
	tileatom_op_result res;
	rc = op_result(client, true, old_bits, sizeof(old_bits), "old", &res, err);
	if (rc != TILEATOM_OK)
		return rc;
	if (res.skipped > 0)
		return tac_err(err, TILEATOM_E_OUT_OF_RANGE, "%s: index %lld is outside tile '%s'",
		               tileatom_op_name(op), (long long)flat_index, tile);
	if (res.old_bytes != tileatom_dtype_size(dtype))
		return tac_err(err, TILEATOM_E_PROTOCOL,
		               "%s: %zu bytes of old value returned for one %s element",
		               tileatom_op_name(op), res.old_bytes, tileatom_dtype_name(dtype));
	if (old_out)
		memcpy(old_out, old_bits, res.old_bytes);
	return TILEATOM_OK;
}

/* Shared body of the synchronous memory ops; out / out_size receive loaded values. */
static int memory_call(tileatom_client *c, tileatom_request_kind kind, const char *tile,
                       const tileatom_region *window, const tileatom_addr *addr,
                       const tileatom_array *operand, const tileatom_op_options *opts, void *out,
                       size_t out_size, tileatom_op_result *res, tileatom_error *err)
{
	REQUIRE_CLIENT(c, err);
	bool loads = kind == TILEATOM_REQ_GATHER || kind == TILEATOM_REQ_ATOMIC_LOAD;
	if (loads && !out)
		return tac_err(err, TILEATOM_E_INVALID_ARGUMENT, "no output buffer given");
	tac_msg m;
	int rc = check_old_out(loads ? NULL : opts, err);
	if (rc == TILEATOM_OK)
		rc = tac_build_memory(&m, kind, tile, window, addr, operand, opts, err);
	if (rc == TILEATOM_OK && loads)
		rc = tac_cuptr_refuse(c, out, out_size, "the output buffer", err);
	rc = tac_roundtrip(c, &m, rc, err);
	if (rc != TILEATOM_OK)
		return rc;
	if (loads)
		return op_result(c, true, out, out_size, "loaded", res, err);
	bool want = opts && opts->want_old;
	return op_result(c, want, want ? opts->old_out : NULL, want ? opts->old_out_size : 0, "old",
	                 res, err);
}

int tileatom_gather(tileatom_client *client, const char *tile, const tileatom_region *window,
                    const tileatom_addr *addr, const tileatom_array *padding,
                    const tileatom_op_options *opts, void *out, size_t out_size,
                    tileatom_op_result *res, tileatom_error *err)
{
	return memory_call(client, TILEATOM_REQ_GATHER, tile, window, addr, padding, opts, out,
	                   out_size, res, err);
}

int tileatom_scatter_store(tileatom_client *client, const char *tile, const tileatom_region *window,
                           const tileatom_addr *addr, const tileatom_array *values,
                           const tileatom_op_options *opts, tileatom_op_result *res,
                           tileatom_error *err)
{
	return memory_call(client, TILEATOM_REQ_SCATTER_STORE, tile, window, addr, values, opts,
	                   NULL, 0, res, err);
}

int tileatom_atomic_load(tileatom_client *client, const char *tile, const tileatom_region *window,
                         const tileatom_addr *addr, const tileatom_op_options *opts, void *out,
                         size_t out_size, tileatom_op_result *res, tileatom_error *err)
{
	return memory_call(client, TILEATOM_REQ_ATOMIC_LOAD, tile, window, addr, NULL, opts, out,
	                   out_size, res, err);
}

int tileatom_atomic_store(tileatom_client *client, const char *tile, const tileatom_region *window,
                          const tileatom_addr *addr, const tileatom_array *values,
                          const tileatom_op_options *opts, tileatom_op_result *res,
                          tileatom_error *err)
{
	return memory_call(client, TILEATOM_REQ_ATOMIC_STORE, tile, window, addr, values, opts,
	                   NULL, 0, res, err);
}

/* ---- pipelined calls ------------------------------------------------------------------ */

/* Submits a built message into the output buffer (rc: the builder's result). An atomic
 * request (rq: the call's description, NULL for other kinds) over the daemon's frame limit
 * is staged in the library's shared buffer when that is free, makes it fit and its old
 * values fit one response (tac_shm_stage, as the synchronous calls), else queued
 * in parts (tac_split_submit). */
static int submit(tileatom_client *c, tac_msg *m, int rc, tac_split_req *rq, uint64_t *id,
                  tileatom_error *err)
{
	if (id)
		*id = 0;
	if (rc == TILEATOM_OK)
		rc = tac_cuptr_prepare(c, m, err);
	if (rc != TILEATOM_OK)
		return rc;
	tac_shm_rewrite(c, m);
	if (!rq || !tac_frame_too_large(c, m))
		return tac_conn_submit(c, m, false, -1, id, err);
	rq->returns_old = m->options.want_old; /* want_old, or an op that always returns */
	if (tac_split_old_fit(c, rq) && tac_shm_stage(c, m, true)) {
		tac_shm_rewrite(c, m);
		if (!tac_frame_too_large(c, m)) {
			uint64_t staged = 0;
			rc = tac_conn_submit(c, m, false, -1, &staged, err);
			c->staged_id = staged;
			if (id)
				*id = staged;
			return rc;
		}
	}
	return tac_split_submit(c, rq, id, err);
}

int tileatom_submit_ping(tileatom_client *client, uint64_t *id, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	return submit(client, &m, tac_build_empty(&m, TILEATOM_REQ_PING), NULL, id, err);
}

int tileatom_submit_read(tileatom_client *client, const char *tile, const tileatom_region *region,
                         uint64_t *id, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	return submit(client, &m, tac_build_read(&m, tile, region, err), NULL, id, err);
}

int tileatom_submit_write(tileatom_client *client, const char *tile, const tileatom_region *region,
                          const tileatom_array *values, uint64_t *id, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_msg m;
	return submit(client, &m, tac_build_write(&m, tile, region, values, err), NULL, id, err);
}

/* The general path of the pipelined atomic submits: builds rq's request and submits it (out
 * of line, so that the template path's callers keep a small frame). */
static __attribute__((noinline)) int submit_rmw(tileatom_client *c, tac_split_req *rq, uint64_t *id,
                                                tileatom_error *err)
{
	tac_msg m;
	return submit(c, &m, tac_build_atomic(&m, rq, err), rq, id, err);
}

/* The template path of the pipelined atomic submits: a call with the key of the
 * connection's template (tac_tpl_match: the previous small request over a whole tile, with
 * the same tile, op, options, dtypes and shapes), on a connection where nothing would
 * rewrite it (no shared or staging buffer, no device-pointer lookup due), is written as the
 * template's bytes with its id and data (what building and writing it would give). *taken
 * false: the caller builds it and the writer writes it. */
static inline __attribute__((always_inline)) int
submit_cached(tileatom_client *c, tileatom_request_kind kind, const char *tile, tileatom_op op,
              const tileatom_region *region, int n_index, const tileatom_array *indices, bool flat,
              const tileatom_array *values, const tileatom_array *compare,
              const tileatom_op_options *opts, bool *taken, uint64_t *id, tileatom_error *err)
{
	*taken = false;
	if (c->nbufs > 0 || c->staging || (c->cuptr && tac_cuptr_count(c) > 0) ||
	    !tac_tpl_match(&c->tpl, kind, tile, op, region, n_index, indices, flat, values, compare,
	                   opts) ||
	    (c->cuptr_min > 0 && c->tpl.most >= c->cuptr_min))
		return TILEATOM_OK;
	if (id)
		*id = 0;
	c->old_from = NULL; /* as tac_shm_rewrite */
	return tac_conn_submit_template(c, indices, values, compare, taken, id, err);
}

int tileatom_submit_elementwise(tileatom_client *client, const char *tile, tileatom_op op,
                                const tileatom_region *region, const tileatom_array *values,
                                const tileatom_array *compare, const tileatom_op_options *opts,
                                uint64_t *id, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	bool taken;
	int rc = submit_cached(client, TILEATOM_REQ_ELEMENTWISE, tile, op, region, 0, NULL, false,
	                       values, compare, opts, &taken, id, err);
	if (taken)
		return rc;
	tac_split_req rq = rmw_req(TILEATOM_REQ_ELEMENTWISE, tile, op, region, 0, 0, NULL, false,
	                           values, compare, opts);
	return submit_rmw(client, &rq, id, err);
}

int tileatom_submit_scatter(tileatom_client *client, const char *tile, tileatom_op op,
                            const tileatom_region *region, int dim, const tileatom_array *indices,
                            const tileatom_array *values, const tileatom_op_options *opts,
                            uint64_t *id, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tac_split_req rq = rmw_req(TILEATOM_REQ_SCATTER, tile, op, region, dim, 1, indices, false,
	                           values, NULL, opts);
	return submit_rmw(client, &rq, id, err);
}

int tileatom_submit_indexed(tileatom_client *client, const char *tile, tileatom_op op,
                            const tileatom_region *region, int n_index,
                            const tileatom_array *indices, bool flat, const tileatom_array *values,
                            const tileatom_array *compare, const tileatom_op_options *opts,
                            uint64_t *id, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	bool taken;
	int rc = submit_cached(client, TILEATOM_REQ_INDEXED, tile, op, region, n_index, indices,
	                       flat, values, compare, opts, &taken, id, err);
	if (taken)
		return rc;
	tac_split_req rq = rmw_req(TILEATOM_REQ_INDEXED, tile, op, region, 0, n_index, indices,
	                           flat, values, compare, opts);
	return submit_rmw(client, &rq, id, err);
}

int tileatom_submit_atomic_at(tileatom_client *client, const char *tile, tileatom_op op,
                              int64_t flat_index, tileatom_dtype dtype, const void *value,
                              const void *compare, const tileatom_op_options *opts, uint64_t *id,
                              tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	tileatom_array value_arr, compare_arr;
	if (value) { /* the request tac_build_atomic_at builds, from the template */
		tileatom_op_options o = tac_atomic_at_options(opts);
		int64_t idx = flat_index;
		/* built in place, not by tileatom_scalar: an exported function's result copied
		 * out of its return slot stalls on store forwarding (this is the hot path of
		 * single-element submits) */
		tileatom_array index = {.dtype = TILEATOM_INT64, .rank = 0, .data = &idx};
		value_arr = (tileatom_array){.dtype = dtype, .rank = 0, .data = value};
		compare_arr = (tileatom_array){.dtype = dtype, .rank = 0, .data = compare};
		bool cas = ta_op_operands((ta_op)op) == TA_OPERANDS_VALUES_COMPARE;
		bool taken;
		int rc =
		    submit_cached(client, TILEATOM_REQ_INDEXED, tile, op, NULL, 1, &index, true,
		                  &value_arr, cas ? &compare_arr : NULL, &o, &taken, id, err);
		if (taken)
			return rc;
	}
	tac_msg m;
	int rc = tac_build_atomic_at(&m, tile, op, flat_index, dtype, value, compare, opts,
	                             &value_arr, &compare_arr, err);
	return submit(client, &m, rc, NULL, id, err);
}

/* The body of the pipelined memory ops (kind: GATHER, SCATTER_STORE, ATOMIC_LOAD or
 * ATOMIC_STORE; operand as tac_build_memory takes it). */
static int submit_memory(tileatom_client *c, tileatom_request_kind kind, const char *tile,
                         const tileatom_region *window, const tileatom_addr *addr,
                         const tileatom_array *operand, const tileatom_op_options *opts,
                         uint64_t *id, tileatom_error *err)
{
	REQUIRE_CLIENT(c, err);
	tac_msg m;
	int rc = tac_build_memory(&m, kind, tile, window, addr, operand, opts, err);
	return submit(c, &m, rc, NULL, id, err);
}

int tileatom_submit_gather(tileatom_client *client, const char *tile, const tileatom_region *window,
                           const tileatom_addr *addr, const tileatom_array *padding,
                           const tileatom_op_options *opts, uint64_t *id, tileatom_error *err)
{
	return submit_memory(client, TILEATOM_REQ_GATHER, tile, window, addr, padding, opts, id,
	                     err);
}

int tileatom_submit_scatter_store(tileatom_client *client, const char *tile,
                                  const tileatom_region *window, const tileatom_addr *addr,
                                  const tileatom_array *values, const tileatom_op_options *opts,
                                  uint64_t *id, tileatom_error *err)
{
	return submit_memory(client, TILEATOM_REQ_SCATTER_STORE, tile, window, addr, values, opts,
	                     id, err);
}

int tileatom_submit_atomic_load(tileatom_client *client, const char *tile,
                                const tileatom_region *window, const tileatom_addr *addr,
                                const tileatom_op_options *opts, uint64_t *id, tileatom_error *err)
{
	return submit_memory(client, TILEATOM_REQ_ATOMIC_LOAD, tile, window, addr, NULL, opts, id,
	                     err);
}

int tileatom_submit_atomic_store(tileatom_client *client, const char *tile,
                                 const tileatom_region *window, const tileatom_addr *addr,
                                 const tileatom_array *values, const tileatom_op_options *opts,
                                 uint64_t *id, tileatom_error *err)
{
	return submit_memory(client, TILEATOM_REQ_ATOMIC_STORE, tile, window, addr, values, opts,
	                     id, err);
}

int tileatom_flush(tileatom_client *client, tileatom_error *err)
{
	REQUIRE_CLIENT(client, err);
	return tac_conn_flush(client, err);
}

/* Points out->dtype/rank/shape/data at a wire array held by client->last. */
static void response_data(tileatom_response *out, const Tileatom__Array *a)
{
	out->dtype = (tileatom_dtype)a->dtype;
	out->rank = (int)a->n_shape;
	for (size_t i = 0; i < a->n_shape && i < TILEATOM_MAX_RANK; i++)
		out->shape[i] = a->shape[i];
	out->data = a->data.data;
	out->data_bytes = a->data.len;
}

int tileatom_collect(tileatom_client *client, tileatom_response *out, tileatom_error *err)
{
	REQUIRE_CLIENT_OUT(client, out, err);
	*out = (tileatom_response){0};
	/* the parts of a split submit: one merged response (no call when none is queued) */
	if (client->splits && !client->broken && client->pending_count > 0 &&
	    client->pending[client->pending_head].part)
		return tac_split_collect(client, out, err);
	tileatom_request_kind kind;
	int rc = tac_conn_receive(client, &kind, err);
	if (rc != TILEATOM_OK) {
		out->status = rc;
		return rc;
	}
	const Tileatom__Response *r = client->last;
	if (client->staged_id && client->staged_id == r->id) /* the staging buffer is free */
		client->staged_id = 0;
	out->id = r->id;
	out->kind = kind;
	rc = tac_check_response(r, kind, err);
	out->status = rc;
	if (rc != TILEATOM_OK)
		return rc;
	if (r->body_case == TILEATOM__RESPONSE__BODY_OP) {
		out->skipped = r->op->skipped;
		out->applied = r->op->applied;
		if (r->op->old)
			response_data(out, r->op->old);
	} else if (r->body_case == TILEATOM__RESPONSE__BODY_DATA) {
		response_data(out, r->data);
	}
	return TILEATOM_OK;
}
