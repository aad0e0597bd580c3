/* accept.c: failed accepts, their episodes and back-off (accept.h). */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "accept.h"
#include "log.h"

static uint64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The clock; a test that includes this file may replace it. */
static uint64_t (*accept_now)(void) = mono_ms;

static atomic_bool ep_open;           /* an episode is open */
static _Atomic uint64_t ep_last_fail; /* when the last accept failed (ms) */
static _Atomic uint64_t ep_count;

/* What the episode's line says, and how to end it. */
static void
log_episode(int err, const char *what)
{
	const char *cause, *fix;

	switch (err) {
	case EMFILE:
		cause = "out of file descriptors (the process's limit, EMFILE)";
		fix = "raise the daemon's limit (systemd LimitNOFILE=, ulimit -n) or lower "
		      "gateway.limits.max_connections";
		break;
	case ENFILE:
		cause = "the system's file table is full (ENFILE)";
		fix = "raise fs.file-max, or find what holds the descriptors";
		break;
	case ENOBUFS:
	case ENOMEM:
		cause = err == ENOBUFS ? "out of socket buffer memory (ENOBUFS)"
		                       : "out of kernel memory (ENOMEM)";
		fix = "free memory on the host";
		break;
	default:
		cause = strerror(err);
		fix = "this is unexpected: please report it";
		break;
	}
	gw_log_warnx("%s: cannot accept connections: %s; every listener pauses and retries "
	             "(back-off %u to %u ms) until this clears, logged once per episode; %s",
	             what, cause, GW_ACCEPT_BACKOFF_MIN, GW_ACCEPT_BACKOFF_MAX, fix);
}

enum gw_accept_next
gw_accept_failed(int err, const char *what)
{
	switch (err) {
	case EAGAIN:
#if EWOULDBLOCK != EAGAIN
	case EWOULDBLOCK:
#endif
		return GW_ACCEPT_DRAINED;
	/* One connection's failure: aborted before we took it, refused by a
	 * security module, or (Linux passes them on) a network error already
	 * pending on the new socket. The next one may be fine. */
	case EINTR:
	case ECONNABORTED:
	case EPERM:
	case EPROTO:
	case ENETDOWN:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case ENONET:
	case EHOSTUNREACH:
	case EOPNOTSUPP:
	case ENETUNREACH:
	case ETIMEDOUT:
		return GW_ACCEPT_NEXT;
	default:
		break;
	}
	atomic_store_explicit(&ep_last_fail, accept_now(), memory_order_relaxed);
	if (!atomic_exchange_explicit(&ep_open, true, memory_order_acq_rel)) {
		atomic_fetch_add_explicit(&ep_count, 1, memory_order_relaxed);
		log_episode(err, what);
	}
	return GW_ACCEPT_PAUSE;
}

void
gw_accept_ok(void)
{
	uint64_t last;

	if (!atomic_load_explicit(&ep_open, memory_order_relaxed))
		return;
	last = atomic_load_explicit(&ep_last_fail, memory_order_relaxed);
	if (accept_now() - last < GW_ACCEPT_QUIET_MS)
		return;
	atomic_store_explicit(&ep_open, false, memory_order_release);
}

bool
gw_accept_exhausted(void)
{
	return atomic_load_explicit(&ep_open, memory_order_relaxed);
}

uint64_t
gw_accept_episodes(void)
{
	return atomic_load_explicit(&ep_count, memory_order_relaxed);
}

uint32_t
gw_accept_backoff_next(struct gw_accept_backoff *b)
{
	if (b->ms < GW_ACCEPT_BACKOFF_MIN)
		b->ms = GW_ACCEPT_BACKOFF_MIN;
	else if (b->ms < GW_ACCEPT_BACKOFF_MAX / 2)
		b->ms *= 2;
	else
		b->ms = GW_ACCEPT_BACKOFF_MAX;
	return b->ms;
}

void
gw_accept_backoff_reset(struct gw_accept_backoff *b)
{
	b->ms = 0;
}
