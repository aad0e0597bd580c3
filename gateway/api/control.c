/* control.c: the fleet control socket (see control.h).
 *
 * Requests are answered in order, synchronously on the main loop: each is
 * a registry change plus one nftables batch, well under a millisecond.
 * A reply the socket does not take at once (a long list) is finished on
 * EPOLLOUT, and no further request of that connection is read until it
 * is. */
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "accept.h"
#include "conf.h"
#include "control.h"
#include "fleet.h"
#include "log.h"
#include "loop.h"
#include "manager.h"
#include "policy.h"
#include "snap.h"

#define CTL_LINE_MAX 4096

struct ctl_conn {
	struct gw_control *ctl;
	struct ctl_conn *prev, *next;
	int fd;
	struct gw_io io;
	struct gw_defer free_d;
	size_t len;
	char buf[CTL_LINE_MAX + 1];
	char *out;                      /* a reply not yet written whole */
	size_t olen, ooff;
};

struct gw_control {
	struct gw_loop *loop;
	struct gw_fleet *fleet;
	struct pool_mgr *mgr;           /* NULL: no pools, every sandbox by hand */
	char path[108];
	int fd;
	struct gw_io io;
	struct ctl_conn *conns;
	/* Out of descriptors: the listener is out of epoll until the timer,
	 * or a connection closing, resumes it (accept.h). */
	bool paused;
	struct gw_timer resume;
	struct gw_accept_backoff backoff;
};

static void
accept_resume(struct gw_control *ctl)
{
	if (!ctl->paused)
		return;
	gw_timer_cancel(ctl->loop, &ctl->resume);
	ctl->paused = false;
	if (gw_io_mod(ctl->loop, &ctl->io, EPOLLIN) < 0 &&
	    gw_timer_arm(ctl->loop, &ctl->resume, gw_accept_backoff_next(&ctl->backoff)) == 0)
		ctl->paused = true;     /* epoll out of memory: later */
}

static void
on_resume(struct gw_loop *l, struct gw_timer *t)
{
	(void)l;
	accept_resume(t->arg);
}

static void
conn_free_cb(void *arg)
{
	struct ctl_conn *c = arg;

	free(c->out);
	free(c);
}

static void
conn_close(struct ctl_conn *c)
{
	struct gw_control *ctl = c->ctl;

	if (c->fd < 0)
		return;
	gw_io_del(ctl->loop, &c->io);
	close(c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		ctl->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	gw_defer(ctl->loop, &c->free_d, conn_free_cb, c);
	accept_resume(ctl);
}

static json_t *
fail(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static json_t *
fail(const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", code, "message", msg);
}

static const char *
errno_code(int rc)
{
	switch (rc) {
	case -ENOENT:
		return "not_found";
	case -EEXIST:
		return "conflict";
	case -ENOSPC:
		return "no_address";
	case -EINVAL:
		return "bad_request";
	case -EPERM:
		return "pool_managed";
	default:
		return "internal";
	}
}

static json_t *
info_json(const struct gw_fleet_info *i, const struct conf *c)
{
	char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
	char env[GW_FLEET_ENV_MAX][GW_FLEET_ENV_LEN];
	json_t *o, *e = json_array();
	size_t n = 0;

	inet_ntop(AF_INET, &i->addr, a, sizeof(a));
	inet_ntop(AF_INET, &i->gateway, g, sizeof(g));
	if (i->lane >= 0 && (size_t)i->lane < c->nlanes)
		n = gw_fleet_env(&c->lanes[i->lane], i->gateway, env, GW_FLEET_ENV_MAX);
	for (size_t k = 0; k < n; k++)
		json_array_append_new(e, json_string(env[k]));
	o = json_pack("{s:b, s:s, s:s, s:b, s:b, s:o, s:I, s:I, s:I, s:I, s:I}", "ok", 1, "id",
		      i->id, "lane", i->lane_name, "linked", i->linked, "unlocked", i->unlocked, "env",
		      e, "tx_packets", (json_int_t)i->tx_packets, "tx_bytes",
		      (json_int_t)i->tx_bytes, "rx_packets", (json_int_t)i->rx_packets, "rx_bytes",
		      (json_int_t)i->rx_bytes, "refused_packets", (json_int_t)i->refused_packets);
	if (!o)
		return NULL;
	if (i->linked) {
		json_object_set_new(o, "address", json_string(a));
		json_object_set_new(o, "prefix", json_integer(i->prefix));
		json_object_set_new(o, "gateway", json_string(g));
		json_object_set_new(o, "ifname", json_string(i->ifname));
		json_object_set_new(o, "netns", json_string(c->daemon.fleet_netns));
	}
	if (i->unlocked) {
		json_object_set_new(o, "policy", json_string(i->policy));
		json_object_set_new(o, "layer_version", json_string(i->version));
	}
	return o;
}

/* The layer a sandbox is unlocked with (gw_policy_layer(): the policy,
 * narrowed by the tenant's egress list when the tenant has one). */
static struct gw_policy *
make_layer(const struct conf *c, const char *policy, const char *tenant, json_t **err)
{
	const struct conf_tenant *t = NULL;
	struct gw_policy *l;
	char e[256];

	if (tenant) {
		for (size_t i = 0; i < c->ntenants && !t; i++)
			if (strcmp(c->tenants[i].name, tenant) == 0)
				t = &c->tenants[i];
		if (!t) {
			*err = fail("not_found", "no tenant named '%s'", tenant);
			return NULL;
		}
	}
	l = gw_policy_layer(c, policy, t, NULL, e, sizeof(e));
	if (!l) {
		bool missing = errno == ENOENT;

		*err = fail(missing ? "not_found" : "internal", "%s", e);
	}
	return l;
}

/* One change to the fleet by hand, run through pool_mgr_by_hand(). */
struct hand_op {
	struct gw_fleet *fleet;
	const char *op, *id;
	int lane;                       /* attach */
	struct gw_policy *layer;        /* unlock */
	struct gw_fleet_info *info;     /* attach */
};

static int
hand_run(void *arg, char *err, size_t errsz)
{
	struct hand_op *h = arg;

	if (strcmp(h->op, "attach") == 0)
		return gw_fleet_attach(h->fleet, h->id, h->lane, h->info, err, errsz);
	if (strcmp(h->op, "unlock") == 0)
		return gw_fleet_unlock(h->fleet, h->id, h->layer, err, errsz);
	if (strcmp(h->op, "lock") == 0)
		return gw_fleet_lock(h->fleet, h->id, err, errsz);
	return gw_fleet_detach(h->fleet, h->id, err, errsz);
}

/* A sandbox a pool manages is the pool manager's to change (claims,
 * releases): by hand, only the others. */
static int
by_hand(struct gw_control *ctl, struct hand_op *h, char *err, size_t errsz)
{
	h->fleet = ctl->fleet;
	if (!ctl->mgr)
		return hand_run(h, err, errsz);
	return pool_mgr_by_hand(ctl->mgr, h->id, hand_run, h, err, errsz);
}

struct list_ctx {
	json_t *arr;
	const struct conf *c;
};

static void
list_one(void *arg, const struct gw_fleet_info *i)
{
	struct list_ctx *x = arg;
	json_t *o = info_json(i, x->c);

	if (o) {
		json_object_del(o, "ok");
		json_array_append_new(x->arr, o);
	}
}

static json_t *
handle(struct gw_control *ctl, const struct conf *c, json_t *req)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	const char *id = json_string_value(json_object_get(req, "id"));
	struct gw_fleet_info info;
	struct hand_op h = { .op = op, .id = id, .info = &info };
	char err[512];
	int rc;

	if (!op)
		return fail("bad_request", "a request is an object with a string \"op\"");
	if (strcmp(op, "list") == 0) {
		struct list_ctx x = { json_array(), gw_fleet_conf(ctl->fleet) };

		gw_fleet_each(ctl->fleet, list_one, &x);
		return json_pack("{s:b, s:o}", "ok", 1, "sandboxes", x.arr);
	}
	if (!id)
		return fail("bad_request", "\"%s\" needs a string \"id\"", op);
	if (strcmp(op, "attach") == 0) {
		const char *lane = json_string_value(json_object_get(req, "lane"));
		int li = gw_fleet_lane(ctl->fleet, lane);

		if (li < 0)
			return fail("not_found", "no lane named '%s'", lane ? lane : "");
		h.lane = li;
		rc = by_hand(ctl, &h, err, sizeof(err));
	} else if (strcmp(op, "unlock") == 0) {
		const char *policy = json_string_value(json_object_get(req, "policy"));
		const char *tenant = json_string_value(json_object_get(req, "tenant"));
		struct gw_policy *layer;
		json_t *e = NULL;

		if (!policy)
			return fail("bad_request", "\"unlock\" needs a string \"policy\"");
		if (!(layer = make_layer(c, policy, tenant, &e)))
			return e;
		h.layer = layer;
		rc = by_hand(ctl, &h, err, sizeof(err));
		gw_policy_unref(layer);
	} else if (strcmp(op, "lock") == 0) {
		rc = by_hand(ctl, &h, err, sizeof(err));
	} else if (strcmp(op, "detach") == 0) {
		rc = by_hand(ctl, &h, err, sizeof(err));
		if (rc == 0)
			return json_pack("{s:b, s:s}", "ok", 1, "id", id);
	} else if (strcmp(op, "get") == 0) {
		rc = gw_fleet_get(ctl->fleet, id, &info);
		if (rc < 0)
			snprintf(err, sizeof(err), "%s: not attached", id);
	} else {
		return fail("bad_request", "unknown op \"%s\"", op);
	}
	if (rc < 0) {
		gw_log_warnx("control: %s", err);
		return fail(errno_code(rc), "%s", err);
	}
	if (strcmp(op, "get") != 0) {
		gw_log_info("control: %s %s", op, id);
		if (gw_fleet_get(ctl->fleet, id, &info) < 0)
			return fail("internal", "%s vanished", id);
	}
	return info_json(&info, gw_fleet_conf(ctl->fleet));
}

/* Writes what is pending: 0 when all of it is out, 1 when the socket is
 * full (the connection then waits for EPOLLOUT), -1 when it is closed. */
static int
flush(struct ctl_conn *c)
{
	while (c->ooff < c->olen) {
		ssize_t n = send(c->fd, c->out + c->ooff, c->olen - c->ooff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			gw_io_mod(c->ctl->loop, &c->io, EPOLLOUT);
			return 1;
		}
		if (n <= 0) {
			conn_close(c);
			return -1;
		}
		c->ooff += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->olen = c->ooff = 0;
	gw_io_mod(c->ctl->loop, &c->io, EPOLLIN);
	return 0;
}

static void
reply(struct ctl_conn *c, json_t *r)
{
	char *s = r ? json_dumps(r, JSON_COMPACT) : NULL;

	json_decref(r);
	if (!s) {
		conn_close(c);
		return;
	}
	c->olen = strlen(s) + 1;
	s[c->olen - 1] = '\n';  /* json_dumps leaves room for the NUL we replace */
	c->out = s;
	c->ooff = 0;
	flush(c);
}

static void
on_line(struct ctl_conn *c, char *line)
{
	struct gw_snap *s = gw_snap_current();
	json_error_t je;
	json_t *req = json_loads(line, JSON_REJECT_DUPLICATES, &je), *r;

	if (!s)
		r = fail("internal", "no configuration");
	else if (!req || !json_is_object(req))
		r = fail("bad_request", "not a JSON object: %s", req ? "wrong type" : je.text);
	else
		r = handle(c->ctl, s->conf, req);
	json_decref(req);
	gw_snap_unref(s);
	reply(c, r);
}

/* Answers every whole line buffered, as long as replies go out at once. */
static void
process(struct ctl_conn *c)
{
	char *nl;

	while (c->fd >= 0 && !c->out && (nl = memchr(c->buf, '\n', c->len))) {
		size_t used = (size_t)(nl - c->buf) + 1;

		*nl = 0;
		if (nl > c->buf)
			on_line(c, c->buf);
		if (c->fd < 0)
			return;
		memmove(c->buf, c->buf + used, c->len - used);
		c->len -= used;
		c->buf[c->len] = 0;
	}
}

static void
on_conn(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct ctl_conn *c = io->arg;
	ssize_t n;

	(void)l;
	if (c->out) {
		if (flush(c) != 0)
			return;
		process(c);
		return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	n = recv(c->fd, c->buf + c->len, CTL_LINE_MAX - c->len, MSG_DONTWAIT);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		conn_close(c);
		return;
	}
	c->len += (size_t)n;
	c->buf[c->len] = 0;
	process(c);
	if (c->fd >= 0 && !c->out && c->len >= CTL_LINE_MAX) {
		reply(c, fail("bad_request", "line longer than %d bytes", CTL_LINE_MAX));
		conn_close(c);
	}
}

static void
on_accept(struct gw_loop *l, struct gw_io *io, uint32_t events)
{
	struct gw_control *ctl = io->arg;

	(void)events;
	for (int i = 0; i < 16; i++) {
		int fd = accept4(ctl->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ctl_conn *c;

		if (fd < 0) {
			enum gw_accept_next next = gw_accept_failed(errno, "control socket");

			if (next == GW_ACCEPT_NEXT)
				continue;
			/* Out of descriptors the listener stays readable: out
			 * of epoll it cannot spin the main loop. */
			if (next == GW_ACCEPT_PAUSE &&
			    gw_timer_arm(l, &ctl->resume, gw_accept_backoff_next(&ctl->backoff)) == 0 &&
			    gw_io_mod(l, &ctl->io, 0) == 0)
				ctl->paused = true;
			return;
		}
		gw_accept_ok();
		gw_accept_backoff_reset(&ctl->backoff);
		if (!(c = calloc(1, sizeof(*c)))) {
			close(fd);
			continue;
		}
		c->ctl = ctl;
		c->fd = fd;
		if (gw_io_add(l, &c->io, fd, EPOLLIN, on_conn, c) < 0) {
			close(fd);
			free(c);
			continue;
		}
		c->next = ctl->conns;
		if (c->next)
			c->next->prev = c;
		ctl->conns = c;
	}
}

/* The socket's directory (one level, like /run/sluice), 0755. */
static int
mkdir_parent(const char *path)
{
	char d[108];
	char *slash;

	snprintf(d, sizeof(d), "%s", path);
	slash = strrchr(d, '/');
	if (!slash || slash == d)
		return 0;
	*slash = 0;
	if (mkdir(d, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

struct gw_control *
gw_control_open(struct gw_loop *l, const char *path, struct gw_fleet *f, struct pool_mgr *mgr,
		char *err, size_t errsz)
{
	struct gw_control *ctl = calloc(1, sizeof(*ctl));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;
	int rc;

	if (!ctl || strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errsz, "control socket %s: %s", path, ctl ? "path too long" : "out of memory");
		free(ctl);
		return NULL;
	}
	ctl->loop = l;
	gw_timer_init(&ctl->resume, on_resume, ctl);
	ctl->fleet = f;
	ctl->mgr = mgr;
	snprintf(ctl->path, sizeof(ctl->path), "%s", path);
	memcpy(sa.sun_path, path, strlen(path));
	ctl->fd = -1;
	if (mkdir_parent(path) < 0)
		goto fail;
	/* A file left by a daemon that died: nobody answers on it. */
	if ((rc = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
		int live = connect(rc, (struct sockaddr *)&sa, sizeof(sa)) == 0;

		close(rc);
		if (live) {
			errno = EADDRINUSE;
			goto fail;
		}
	}
	unlink(path);
	ctl->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ctl->fd < 0)
		goto fail;
	old = umask(0177);
	rc = bind(ctl->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(ctl->fd, 64) < 0 ||
	    gw_io_add(l, &ctl->io, ctl->fd, EPOLLIN, on_accept, ctl) < 0)
		goto fail;
	return ctl;
fail:
	snprintf(err, errsz, "control socket %s: %s", path, strerror(errno));
	if (ctl->fd >= 0)
		close(ctl->fd);
	free(ctl);
	return NULL;
}

void
gw_control_close(struct gw_control *ctl)
{
	if (!ctl)
		return;
	while (ctl->conns) {
		struct ctl_conn *c = ctl->conns;

		gw_io_del(ctl->loop, &c->io);
		close(c->fd);
		ctl->conns = c->next;
		free(c->out);
		free(c);
	}
	gw_timer_cancel(ctl->loop, &ctl->resume);
	gw_io_del(ctl->loop, &ctl->io);
	close(ctl->fd);
	unlink(ctl->path);
	free(ctl);
}
