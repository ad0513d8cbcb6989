/* held.c: metrics holding: in a pipelined run the OK answers of kept requests count into
 * the scratch and are published together at the run's end (see dispatch.h). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif

#include "reqctx.h"

/* Publishes the metrics and request totals scratch holds (nothing when none). */
void held_flush(ta_service *svc, ta_dispatch_scratch *scratch)
{
	if (scratch->held.requests == 0)
		return;
	ta_service_totals *totals = ta_service_my_totals(svc);
	atomic_fetch_add_explicit(&totals->requests, scratch->held.requests, memory_order_relaxed);
	atomic_fetch_add_explicit(&totals->elements, scratch->held.elements, memory_order_relaxed);
	ta_metrics_add_held(&svc->metrics, &scratch->held);
}

/* Counts one OK answer of kind (its elements and bytes) into scratch's held counts, after
 * publishing those of another kind. */
void held_add(ta_service *svc, ta_dispatch_scratch *scratch, ta_req_kind kind, uint64_t elements,
              uint64_t bytes_in, uint64_t bytes_out)
{
	ta_metrics_held *h = &scratch->held;
	if (h->requests && h->kind != kind)
		held_flush(svc, scratch);
	h->kind = kind;
	h->requests++;
	h->elements += elements;
	h->bytes_in += bytes_in;
	h->bytes_out += bytes_out;
}

void ta_dispatch_begin_run(ta_service *svc, ta_dispatch_scratch *scratch)
{
	scratch->hold_metrics = !svc->time_requests;
	if (svc->persist)
		scratch->in_run = true;
}

uint64_t ta_dispatch_end_run(ta_service *svc, ta_dispatch_scratch *scratch)
{
	held_flush(svc, scratch);
	scratch->hold_metrics = false;
	if (!scratch->in_run)
		return 0;
	scratch->in_run = false;
	return ta_persist_run_end(svc->persist, &scratch->run);
}
