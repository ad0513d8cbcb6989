/* service.c: the state every request may use (ta_service: request totals per shard) and
 * a connection's session (see dispatch.h). */
#include "dispatch.h"
#include "codec.h"

#include <string.h>

void ta_service_init(ta_service *svc, ta_backend *backend, ta_registry *registry,
                     uint32_t max_frame)
{
	memset(svc, 0, sizeof(*svc)); /* the counters too: all-zero lock-free atomics are 0 */
	svc->backend = backend;
	svc->registry = registry;
	svc->max_frame = max_frame;
	if (backend)
		ta_backend_info_get(backend, &svc->info);
	svc->auth_log = (ta_log_limit)TA_LOG_LIMIT_INIT(10, "authentication failures");
	ta_codec_init(); /* checks the schema once, at start */
}

void ta_service_read_totals(const ta_service *svc, uint64_t *requests, uint64_t *errors,
                            uint64_t *elements)
{
	*requests = *errors = *elements = 0;
	for (int i = 0; i < TA_METRICS_SHARDS; i++) {
		*requests += atomic_load_explicit(&svc->totals[i].requests, memory_order_relaxed);
		*errors += atomic_load_explicit(&svc->totals[i].errors, memory_order_relaxed);
		*elements += atomic_load_explicit(&svc->totals[i].elements, memory_order_relaxed);
	}
}

bool ta_service_device_stats(ta_service *svc, int d, ta_device_stats *out)
{
	if (!ta_backend_device_stats(svc->backend, d, out))
		return false;
	if (!svc->backend->vt->device_stats) { /* one device: everything is there */
		uint32_t tiles = 0;
		uint64_t errors = 0, elements = 0;
		ta_registry_stats(svc->registry, &tiles, &out->tile_bytes);
		out->tiles = tiles;
		ta_service_read_totals(svc, &out->requests, &errors, &elements);
		if (out->memory_total == 0)
			out->memory_used = out->tile_bytes;
	}
	return true;
}

void ta_service_reset_totals(ta_service *svc)
{
	for (int i = 0; i < TA_METRICS_SHARDS; i++) {
		atomic_store(&svc->totals[i].requests, 0);
		atomic_store(&svc->totals[i].errors, 0);
		atomic_store(&svc->totals[i].elements, 0);
	}
}

ta_status ta_session_init(ta_session *s, const ta_service *svc, bool tcp, ta_owner identity,
                          uint64_t serial, ta_error *err)
{
	memset(s, 0, sizeof(*s));
	s->identity = identity;
	s->serial = serial;
	s->auth_needed = tcp && svc->auth;
	if (s->auth_needed && ta_auth_random(s->nonce, sizeof(s->nonce)) != 0)
		return ta_error_set(err, TA_INTERNAL, "no random bytes for an auth nonce");
	return TA_OK;
}
