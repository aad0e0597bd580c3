/* dial-t.h: reaching an upstream for a door (types only). */
#ifndef SLUICE_GW_DIAL_T_H
#define SLUICE_GW_DIAL_T_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "addr-t.h"
#include "dns-t.h"
#include "loop-t.h"
#include "policy-t.h"
#include "reason-t.h"

struct gw_dial;
struct gw_worker;

/* The outcome of a dial. On success fd >= 0 is a connected, non-blocking
 * socket now owned by the callee, and why is GW_R_NONE. On failure fd is
 * -1, why says why, err is the errno behind it (0 if none) and detail is a
 * one-line explanation for the client, valid during the call. */
typedef void (*gw_dial_cb)(struct gw_dial *d, int fd, enum gw_reason why, int err,
			   const char *detail, void *arg);

enum gw_dial_state {
	GW_DIAL_IDLE = 0,
	GW_DIAL_RESOLVING,
	GW_DIAL_CONNECTING,
};

/* Embedded in a connection; one dial at a time. */
struct gw_dial {
	enum gw_dial_state state;
	struct gw_worker *w;
	const struct gw_policy *policy;
	char host[GW_HOST_MAX];
	uint16_t port;
	uint32_t connect_timeout_ms;
	uint32_t dns_budget_ms;         /* timeout × attempts */
	struct gw_dns_query *q;
	struct gw_dns_result addrs;
	size_t next;
	int fd;
	struct gw_io io;
	struct gw_timer timer;
	struct gw_defer kick;
	char upstream[GW_ADDR_FMT_MAX]; /* the address tried last */
	bool pinned;                    /* connect to `pin` only, if the name has it */
	struct sockaddr_storage pin;
	gw_dial_cb cb;
	void *arg;
};

#endif
