/* doors_harness.h: driving the doors (gateway/doors/) in a unit test.
 *
 * A real event loop and a worker with the two test hooks set: `dial`
 * reaches no network (it records host:port and, through gw_defer(), hands
 * the door one end of a loopback TCP pair, keeping the other as the test's
 * "origin"; or fails with a chosen reason), and `stack` pushes a fake
 * transport layer on a side that reads at most K bytes per recv, takes at
 * most M bytes per sendv, and returns an injected error at the Nth call of
 * one operation or once B bytes have gone through it.
 *
 * The test's two ends (the client application and the origin) are peers
 * on the same loop, each with a script: step i is sent once the peer has
 * received `after` bytes. dh_run() runs the loop until a condition holds;
 * a stall (the condition not met within DH_DEADLINE_MS, a safety net, not
 * a measure) is a failure. */
#ifndef SL_DOORS_HARNESS_H
#define SL_DOORS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conn.h"
#include "loop.h"
#include "reason-t.h"
#include "worker-t.h"
#include "xprt.h"

#define DH_DEADLINE_MS 10000
#define DH_STEPS 8
#define DH_ORIGINS 4

enum dh_op {
	DH_RECV = 0,
	DH_SENDV,
	DH_SHUTDOWN,
	DH_OPS
};

/* What the fake layer on one side does, and what it saw. */
struct dh_side {
	bool layer;             /* push a fake layer on this side */
	size_t k;               /* at most k bytes per recv (0: no limit) */
	size_t k_from;          /* ... once k_from bytes were read; the first
				 * read returns at most k_from bytes */
	size_t m;               /* at most m bytes per sendv (0: no limit) */
	enum dh_op op;          /* the operation that fails */
	unsigned at_call;       /* at its at_call-th call (1-based; 0: never) */
	uint64_t at_byte;       /* or once at_byte bytes went through it */
	bool by_byte;           /* at_byte is set */
	int err;                /* the error returned (-ECONNRESET, ...) */
	/* seen */
	unsigned calls[DH_OPS];
	uint64_t bytes[2];      /* through recv, through sendv */
	bool fired;
	unsigned pushed;
	unsigned closed;
};

struct dh_step {
	size_t after;           /* send once this many bytes were received */
	const char *p;
	size_t n;
	bool shut;              /* then shutdown(SHUT_WR) */
	bool rst;               /* then close with a reset (SO_LINGER 0) */
};

/* One of the test's ends. */
struct dh_peer {
	int fd;
	struct gw_io io;
	struct dh_step steps[DH_STEPS];
	size_t nsteps;
	size_t next;            /* the step being sent */
	size_t pos;             /* bytes of it sent */
	char *rx;
	size_t rxlen, rxcap;
	bool eof;
	int rerr;               /* errno of a failed recv */
	bool shut_on_eof;       /* answer EOF with our own (default true) */
	bool shut;              /* we sent ours */
	bool done;              /* closed by us */
};

struct dh {
	struct gw_worker w;     /* first: the hooks find the harness from it */
	struct dh_side cli, up;
	struct dh_peer client;
	struct dh_peer origin;  /* the origin of the latest dial */
	int old_origins[DH_ORIGINS];
	size_t nold;
	struct dh_step origin_steps[DH_STEPS]; /* each new origin's script */
	size_t norigin_steps;
	/* the fake dial */
	unsigned dials;
	char dialled[300];      /* "host:port" of the latest */
	enum gw_reason dial_fail;       /* GW_R_NONE: succeed */
	int dial_err;
	/* the loop */
	struct gw_timer tick, deadline, start;
	bool (*until)(struct dh *h);
	bool stalled;
	uint64_t deadline_ms;   /* 0: DH_DEADLINE_MS */
	size_t want_client;     /* dh_client_has() */
	size_t want_origin;     /* dh_origin_has() */
	bool dial_hold;         /* the fake dial never completes */
	void (*accept)(struct gw_worker *w, int fd, int lane);
	int lane;
	int lane_fd;            /* the server end, until accepted */
	bool accepted;
	uint64_t live0;         /* gw_conns_live() before the case */
	long log0;              /* the access log's size before the case */
};

/* Once per program: publishes a snapshot of yaml and sends access lines
 * to a temporary file. */
void dh_global_setup(const char *yaml);
void dh_global_teardown(void);
/* dh_global_teardown() as a cmocka group teardown. */
int dh_group_teardown(void **state);

/* A fresh harness (zeroed, with a loop and the hooks set). */
void dh_init(struct dh *h);
/* Ends what is left: live connections (their teardown), peers, the loop. */
void dh_fini(struct dh *h);

/* Adds a step to a peer's script (or to every future origin's). */
void dh_client_send(struct dh *h, size_t after, const char *p, size_t n);
void dh_origin_send(struct dh *h, size_t after, const char *p, size_t n);
/* Marks the last step added to be followed by a half-close / a reset. */
void dh_client_shut(struct dh *h);
void dh_origin_shut(struct dh *h);
void dh_origin_rst(struct dh *h);

/* Opens a loopback pair and has `accept` take its server end from inside
 * the loop (as a listener would) when dh_run() next runs. */
void dh_connect(struct dh *h, void (*accept)(struct gw_worker *w, int fd, int lane), int lane);

/* Runs the loop until until(h) holds: true, or false after a stall. */
bool dh_try_run(struct dh *h, bool (*until)(struct dh *h));
/* Runs the loop until until(h) holds, or fails (a stall) naming `what`. */
void dh_run_(struct dh *h, bool (*until)(struct dh *h), const char *what, const char *file,
	     int line);
#define dh_run(h, until) dh_run_((h), (until), #until, __FILE__, __LINE__)

/* Conditions. */
bool dh_ended(struct dh *h);            /* every connection of the case ended, and the
                                           client read to its EOF */
bool dh_client_eof(struct dh *h);
bool dh_client_has(struct dh *h);       /* want_client bytes arrived */
bool dh_origin_has(struct dh *h);       /* want_origin bytes arrived */

/* The client half-closes now (its script is done). */
void dh_client_close(struct dh *h);

/* The access lines written since dh_init(): up to max, each NUL-ended in
 * lines[i] (512 bytes each). Returns how many there are. */
size_t dh_lines(struct dh *h, char (*lines)[512], size_t max);
/* The value of field `key` in an access line ("" if absent). */
const char *dh_field(const char *line, const char *key, char *buf, size_t bufsz);

/* Sets a side's fault: at the n-th call of op, or after `byte` bytes. */
void dh_fail_call(struct dh_side *s, enum dh_op op, unsigned n, int err);
void dh_fail_byte(struct dh_side *s, enum dh_op op, uint64_t byte, int err);

/* Layers on both sides: split reads of k and short writes of m. The
 * upstream's first read takes up to `whole` bytes in one piece; 0: split
 * from the first byte. */
void dh_layers(struct dh *h, size_t k, size_t m, size_t whole);

/* Assertions (cmocka) the cases share. */
/* The connection's lines so far: exactly `want` of them (printed). */
size_t dh_expect_lines(struct dh *h, char (*lines)[512], size_t want);
/* Field `key` of an access line is `want`. */
void dh_expect_field(const char *line, const char *key, const char *want);
/* Every layer pushed was closed once, and the case left no connection. */
void dh_expect_clean(struct dh *h);
/* got[0..gotlen) is exactly want[0..wantlen). */
void dh_expect_bytes(const char *what, const char *got, size_t gotlen, const char *want,
		     size_t wantlen);

/* A connected loopback TCP pair, both ends non-blocking. */
void dh_tcp_pair(int *a, int *b);

#endif
