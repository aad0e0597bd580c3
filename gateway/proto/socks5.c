/* socks5.c: strict SOCKS5 server-side parsing (RFC 1928, RFC 1929). See
 * socks5.h.
 *
 * The three messages are read by one byte-driven machine whose position
 * (step, field length, bytes of it read) lives in the parser, so input may
 * be split anywhere. Every fetch goes through the bounded reader (rd.h),
 * and the machine never reads a byte past the end of the message of its
 * phase.
 */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "rd.h"
#include "socks5.h"

/* ---- names and static messages -------------------------------------- */

static const char *const phase_names[] = {
#define GW_SOCKS5_PHASE_NAME(id, name) [GW_SOCKS5_PH_##id] = name,
	GW_SOCKS5_PHASES(GW_SOCKS5_PHASE_NAME)
#undef GW_SOCKS5_PHASE_NAME
};

const char *gw_socks5_phase_name(enum gw_socks5_phase ph)
{
	return (unsigned)ph < GW_SOCKS5_PH__COUNT ? phase_names[ph] : "?";
}

const char *gw_socks5_rep_name(uint8_t rep)
{
	static const char *const names[] = {
#define GW_SOCKS5_REP_NAME(id, val, name) [val] = name,
		GW_SOCKS5_REPS(GW_SOCKS5_REP_NAME)
#undef GW_SOCKS5_REP_NAME
	};

	return rep < GW_SOCKS5_REP__COUNT ? names[rep] : "?";
}

/* "wrong version N" for every byte value, as static strings: the decimal
 * spelling is built by the preprocessor (S5_N10(M, s, 1) gives 10..19). */
#define S5_N10(M, s, p)                                                      \
	M(s, p##0) M(s, p##1) M(s, p##2) M(s, p##3) M(s, p##4)               \
	M(s, p##5) M(s, p##6) M(s, p##7) M(s, p##8) M(s, p##9)
#define S5_N256(M, s)                                                        \
	S5_N10(M, s, ) S5_N10(M, s, 1) S5_N10(M, s, 2) S5_N10(M, s, 3)       \
	S5_N10(M, s, 4) S5_N10(M, s, 5) S5_N10(M, s, 6) S5_N10(M, s, 7)      \
	S5_N10(M, s, 8) S5_N10(M, s, 9) S5_N10(M, s, 10) S5_N10(M, s, 11)    \
	S5_N10(M, s, 12) S5_N10(M, s, 13) S5_N10(M, s, 14)                   \
	S5_N10(M, s, 15) S5_N10(M, s, 16) S5_N10(M, s, 17)                   \
	S5_N10(M, s, 18) S5_N10(M, s, 19) S5_N10(M, s, 20)                   \
	S5_N10(M, s, 21) S5_N10(M, s, 22) S5_N10(M, s, 23)                   \
	S5_N10(M, s, 24)                                                     \
	M(s, 250) M(s, 251) M(s, 252) M(s, 253) M(s, 254) M(s, 255)
#define S5_MSG(s, n) s " " #n,

static const char *const wrong_version[256] = {
	S5_N256(S5_MSG, "wrong version")
};
static const char *const wrong_auth_version[256] = {
	S5_N256(S5_MSG, "wrong auth version")
};

/* ---- phases and errors ---------------------------------------------- */

/* The one place the phase changes. Leaves do not log, so there is no trace
 * here; a door logs gw_socks5_phase_name() itself if it wants to. */
static void set_phase(struct gw_socks5_parser *p, enum gw_socks5_phase ph)
{
	p->phase = ph;
}

static enum gw_socks5_result fail(struct gw_socks5_parser *p,
				  enum gw_reason reason, const char *msg,
				  bool has_rep, uint8_t rep, uint8_t byte)
{
	p->err.reason = reason;
	p->err.msg = msg;
	p->err.has_rep = has_rep;
	p->err.rep = rep;
	p->err.byte = byte;
	set_phase(p, GW_SOCKS5_PH_ERROR);
	return GW_SOCKS5_ERROR;
}

/* Malformed input in the phase being read: greetings get no reply, auth
 * gets STATUS 0x01, requests get REP 0x01 (RFC 1928 has nothing better). */
static enum gw_socks5_result malformed(struct gw_socks5_parser *p,
				       const char *msg, uint8_t byte)
{
	bool has_rep = p->phase != GW_SOCKS5_PH_GREETING;

	return fail(p, GW_R_BAD_REQUEST, msg, has_rep,
		    GW_SOCKS5_REP_GENERAL_FAILURE, byte);
}

static void begin(struct gw_socks5_parser *p, enum gw_socks5_phase ph)
{
	set_phase(p, ph);
	p->step = GW_SOCKS5_ST_VER;
	p->need = 0;
	p->fill = 0;
}

void gw_socks5_parser_init(struct gw_socks5_parser *p)
{
	explicit_bzero(p, sizeof(*p));
	begin(p, GW_SOCKS5_PH_GREETING);
}

void gw_socks5_parser_wipe(struct gw_socks5_parser *p)
{
	explicit_bzero(p, sizeof(*p));
	(void)fail(p, GW_R_INTERNAL, "parser wiped", false, 0, 0);
}

void gw_socks5_forget_password(struct gw_socks5_parser *p)
{
	explicit_bzero(p->auth.pass, sizeof(p->auth.pass));
	p->auth.pass_len = 0;
}

/* ---- the machine ---------------------------------------------------- */

/* Starts a field of n bytes (n >= 1) read at step st. */
static void field(struct gw_socks5_parser *p, enum gw_socks5_step st,
		  size_t n)
{
	p->step = st;
	p->need = n;
	p->fill = 0;
}

/* Reads what has arrived of a binary field into dst[p->fill..p->need). */
static void bytes(struct gw_socks5_parser *p, struct gw_rd *r, uint8_t *dst)
{
	struct gw_rd_span s = gw_rd_take(r, p->need - p->fill);

	memcpy(dst + p->fill, s.p, s.len);
	p->fill += s.len;
}

/* Reads into a text field (user, password, domain): no NUL allowed; the
 * reader stops on a NUL, so *consumed names it. */
static enum gw_socks5_result text(struct gw_socks5_parser *p,
				  struct gw_rd *r, char *dst, size_t *dlen,
				  const char *nul_msg)
{
	struct gw_rd_span s = gw_rd_until(r, 0, p->need - p->fill);

	memcpy(dst + p->fill, s.p, s.len);
	p->fill += s.len;
	if (p->fill < p->need && gw_rd_peek(r) == 0)
		return malformed(p, nul_msg, 0);
	if (p->fill < p->need)
		return GW_SOCKS5_AGAIN;
	dst[p->need] = '\0';
	*dlen = p->need;
	return GW_SOCKS5_DONE;
}

static enum gw_socks5_result step_greeting(struct gw_socks5_parser *p,
					   struct gw_rd *r)
{
	struct gw_socks5_greeting *g = &p->greeting;
	int c;

	if (gw_rd_empty(r))
		return GW_SOCKS5_AGAIN;
	switch (p->step) {
	case GW_SOCKS5_ST_VER:
		c = gw_rd_peek(r);
		if (c != GW_SOCKS5_VERSION)
			return malformed(p, wrong_version[c], (uint8_t)c);
		(void)gw_rd_getc(r);
		p->step = GW_SOCKS5_ST_NMETHODS;
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_NMETHODS:
		c = gw_rd_getc(r);
		/* No methods is a whole greeting that offers nothing: the
		 * answer is "no acceptable method" (0xff), not a silent close
		 * the client cannot tell from a network failure. */
		if (c == 0) {
			g->nmethods = 0;
			return GW_SOCKS5_DONE;
		}
		field(p, GW_SOCKS5_ST_METHODS, (size_t)c);
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_METHODS:
		bytes(p, r, g->methods);
		if (p->fill < p->need)
			return GW_SOCKS5_AGAIN;
		g->nmethods = p->need;
		return GW_SOCKS5_DONE;
	default:
		return fail(p, GW_R_INTERNAL, "bad greeting step", false, 0, 0);
	}
}

static enum gw_socks5_result step_auth(struct gw_socks5_parser *p,
				       struct gw_rd *r)
{
	struct gw_socks5_auth *a = &p->auth;
	enum gw_socks5_result rc;
	int c;

	if (gw_rd_empty(r))
		return GW_SOCKS5_AGAIN;
	switch (p->step) {
	case GW_SOCKS5_ST_VER:
		c = gw_rd_peek(r);
		if (c != GW_SOCKS5_AUTH_VERSION)
			return malformed(p, wrong_auth_version[c], (uint8_t)c);
		(void)gw_rd_getc(r);
		p->step = GW_SOCKS5_ST_ULEN;
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_ULEN:
		c = gw_rd_peek(r);
		if (c == 0)
			return malformed(p, "username length 0", 0);
		(void)gw_rd_getc(r);
		field(p, GW_SOCKS5_ST_UNAME, (size_t)c);
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_UNAME:
		rc = text(p, r, a->user, &a->user_len, "NUL in username");
		if (rc == GW_SOCKS5_DONE) {
			p->step = GW_SOCKS5_ST_PLEN;
			rc = GW_SOCKS5_AGAIN;
		}
		return rc;
	case GW_SOCKS5_ST_PLEN:
		c = gw_rd_peek(r);
		if (c == 0)
			return malformed(p, "password length 0", 0);
		(void)gw_rd_getc(r);
		field(p, GW_SOCKS5_ST_PASSWD, (size_t)c);
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_PASSWD:
		return text(p, r, a->pass, &a->pass_len, "NUL in password");
	default:
		return fail(p, GW_R_INTERNAL, "bad auth step", false, 0, 0);
	}
}

static enum gw_socks5_result step_request(struct gw_socks5_parser *p,
					  struct gw_rd *r)
{
	struct gw_socks5_request *q = &p->req;
	enum gw_socks5_result rc;
	int c;

	if (gw_rd_empty(r))
		return GW_SOCKS5_AGAIN;
	switch (p->step) {
	case GW_SOCKS5_ST_VER:
		c = gw_rd_peek(r);
		if (c != GW_SOCKS5_VERSION)
			return malformed(p, wrong_version[c], (uint8_t)c);
		(void)gw_rd_getc(r);
		p->step = GW_SOCKS5_ST_CMD;
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_CMD:
		/* Only CONNECT is served. Anything else is refused here, at
		 * its CMD byte, whatever follows: an address type we do not
		 * know (0x08), a bad reserved byte or port (0x01), UDP
		 * ASSOCIATE's all-zero address: the client asked for
		 * something we do not do, and 0x07 is what tells it so. */
		c = gw_rd_peek(r);
		q->cmd = (uint8_t)c; /* the access line names it, refused too */
		if (c != GW_SOCKS5_CMD_CONNECT)
			return fail(p, GW_R_UNSUPPORTED,
				    c == GW_SOCKS5_CMD_BIND ? "BIND is not supported: only CONNECT"
				    : c == GW_SOCKS5_CMD_UDP_ASSOCIATE
					? "UDP ASSOCIATE is not supported: only CONNECT"
					: "unknown command: only CONNECT",
				    true, GW_SOCKS5_REP_CMD_UNSUPPORTED, (uint8_t)c);
		(void)gw_rd_getc(r);
		p->step = GW_SOCKS5_ST_RSV;
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_RSV:
		c = gw_rd_peek(r);
		if (c != 0)
			return malformed(p, "reserved byte not zero",
					 (uint8_t)c);
		(void)gw_rd_getc(r);
		p->step = GW_SOCKS5_ST_ATYP;
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_ATYP:
		c = gw_rd_peek(r);
		if (c == GW_SOCKS5_ATYP_IPV4)
			field(p, GW_SOCKS5_ST_ADDR, 4);
		else if (c == GW_SOCKS5_ATYP_IPV6)
			field(p, GW_SOCKS5_ST_ADDR, 16);
		else if (c == GW_SOCKS5_ATYP_DOMAIN)
			p->step = GW_SOCKS5_ST_DLEN;
		else
			return fail(p, GW_R_UNSUPPORTED,
				    "address type not supported", true,
				    GW_SOCKS5_REP_ATYP_UNSUPPORTED, (uint8_t)c);
		(void)gw_rd_getc(r);
		q->atyp = (uint8_t)c;
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_DLEN:
		c = gw_rd_peek(r);
		if (c == 0)
			return malformed(p, "domain length 0", 0);
		(void)gw_rd_getc(r);
		field(p, GW_SOCKS5_ST_ADDR, (size_t)c);
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_ADDR:
		if (q->atyp == GW_SOCKS5_ATYP_DOMAIN) {
			rc = text(p, r, q->host, &q->host_len, "NUL in domain");
			if (rc != GW_SOCKS5_DONE)
				return rc;
		} else {
			bytes(p, r, q->addr);
			if (p->fill < p->need)
				return GW_SOCKS5_AGAIN;
		}
		field(p, GW_SOCKS5_ST_PORT, 2);
		return GW_SOCKS5_AGAIN;
	case GW_SOCKS5_ST_PORT:
		/* byte by byte: port 0 is refused at its second byte, the
		 * first one that shows it */
		c = gw_rd_peek(r);
		if (p->fill == 1 && p->portb[0] == 0 && c == 0)
			return malformed(p, "port 0", 0);
		(void)gw_rd_getc(r);
		p->portb[p->fill++] = (uint8_t)c;
		if (p->fill < 2)
			return GW_SOCKS5_AGAIN;
		q->port = (uint16_t)(p->portb[0] << 8 | p->portb[1]);
		return GW_SOCKS5_DONE;
	default:
		return fail(p, GW_R_INTERNAL, "bad request step", false, 0, 0);
	}
}

/* Runs the machine of phase ph over in[0..len). Every step either takes at
 * least one byte, fails on the byte it looked at, or ends the message. */
static enum gw_socks5_result run(struct gw_socks5_parser *p,
				 enum gw_socks5_phase ph, const uint8_t *in,
				 size_t len, size_t *consumed)
{
	struct gw_rd r;
	enum gw_socks5_result rc = GW_SOCKS5_AGAIN;

	gw_rd_init(&r, in, len);
	while (rc == GW_SOCKS5_AGAIN && !gw_rd_empty(&r)) {
		if (ph == GW_SOCKS5_PH_GREETING)
			rc = step_greeting(p, &r);
		else if (ph == GW_SOCKS5_PH_AUTH)
			rc = step_auth(p, &r);
		else
			rc = step_request(p, &r);
	}
	*consumed = gw_rd_pos(&r);
	return rc;
}

/* The common prologue: sticky errors, and phases out of order. `from` are
 * the phases a message may start in, `ph` the phase of reading it. */
static bool usable(struct gw_socks5_parser *p, enum gw_socks5_phase ph,
		   enum gw_socks5_phase from1, enum gw_socks5_phase from2,
		   enum gw_socks5_result *rc)
{
	if (p->phase == GW_SOCKS5_PH_ERROR) {
		*rc = GW_SOCKS5_ERROR;
		return false;
	}
	if (p->phase == from1 || p->phase == from2) {
		begin(p, ph);
		if (ph == GW_SOCKS5_PH_REQUEST)
			gw_socks5_forget_password(p);
	}
	if (p->phase != ph) {
		*rc = fail(p, GW_R_INTERNAL, "parser used out of order", false,
			   0, 0);
		return false;
	}
	return true;
}

enum gw_socks5_result gw_socks5_parse_greeting(
	struct gw_socks5_parser *p, const uint8_t *in, size_t len,
	size_t *consumed, const struct gw_socks5_greeting **out)
{
	enum gw_socks5_result rc;

	*consumed = 0;
	*out = NULL;
	/* GREETING is also the initial phase: nothing to begin */
	if (!usable(p, GW_SOCKS5_PH_GREETING, GW_SOCKS5_PH__COUNT,
		    GW_SOCKS5_PH__COUNT, &rc))
		return rc;
	rc = run(p, GW_SOCKS5_PH_GREETING, in, len, consumed);
	if (rc == GW_SOCKS5_DONE) {
		set_phase(p, GW_SOCKS5_PH_METHOD);
		*out = &p->greeting;
	}
	return rc;
}

enum gw_socks5_result gw_socks5_parse_auth(struct gw_socks5_parser *p,
					   const uint8_t *in, size_t len,
					   size_t *consumed,
					   const struct gw_socks5_auth **out)
{
	enum gw_socks5_result rc;

	*consumed = 0;
	*out = NULL;
	if (!usable(p, GW_SOCKS5_PH_AUTH, GW_SOCKS5_PH_METHOD,
		    GW_SOCKS5_PH__COUNT, &rc))
		return rc;
	rc = run(p, GW_SOCKS5_PH_AUTH, in, len, consumed);
	if (rc == GW_SOCKS5_DONE) {
		set_phase(p, GW_SOCKS5_PH_AUTHED);
		*out = &p->auth;
	}
	return rc;
}

enum gw_socks5_result gw_socks5_parse_request(
	struct gw_socks5_parser *p, const uint8_t *in, size_t len,
	size_t *consumed, const struct gw_socks5_request **out)
{
	enum gw_socks5_result rc;

	*consumed = 0;
	*out = NULL;
	if (!usable(p, GW_SOCKS5_PH_REQUEST, GW_SOCKS5_PH_METHOD,
		    GW_SOCKS5_PH_AUTHED, &rc))
		return rc;
	rc = run(p, GW_SOCKS5_PH_REQUEST, in, len, consumed);
	if (rc == GW_SOCKS5_DONE) {
		set_phase(p, GW_SOCKS5_PH_DONE);
		*out = &p->req;
	}
	return rc;
}

/* ---- decisions ------------------------------------------------------ */

bool gw_socks5_offers(const struct gw_socks5_greeting *g, uint8_t method)
{
	for (size_t i = 0; i < g->nmethods && i < GW_SOCKS5_MAX_FIELD; i++)
		if (g->methods[i] == method)
			return true;
	return false;
}

uint8_t gw_socks5_choose_method(const struct gw_socks5_greeting *offered,
				bool can_noauth, bool can_userpass)
{
	for (size_t i = 0;
	     i < offered->nmethods && i < GW_SOCKS5_MAX_FIELD; i++) {
		uint8_t m = offered->methods[i];

		if ((m == GW_SOCKS5_METHOD_NOAUTH && can_noauth) ||
		    (m == GW_SOCKS5_METHOD_USERPASS && can_userpass))
			return m;
	}
	return GW_SOCKS5_METHOD_NONE;
}

uint8_t gw_socks5_rep_for(enum gw_reason r)
{
	switch (r) {
	case GW_R_NONE:
		return GW_SOCKS5_REP_SUCCEEDED;
	case GW_R_NOT_ALLOWED:
	case GW_R_DENIED:
	case GW_R_PRIVATE_ADDRESS:
	case GW_R_SNI_ADDRESS_MISMATCH:
	case GW_R_BAD_HOST:
	case GW_R_NON_ASCII_HOST:
	case GW_R_USERINFO:
	case GW_R_BAD_PORT:
	case GW_R_UNKNOWN_CLIENT:
	case GW_R_AUTH_REQUIRED:
	case GW_R_AUTH_FAILED:
		return GW_SOCKS5_REP_NOT_ALLOWED;
	case GW_R_DNS_NXDOMAIN:
	case GW_R_DNS_FAILED:
		return GW_SOCKS5_REP_HOST_UNREACHABLE;
	case GW_R_CONNECT_FAILED:
		return GW_SOCKS5_REP_CONN_REFUSED;
	case GW_R_CONNECT_TIMEOUT:
	case GW_R_DNS_TIMEOUT:
		/* no timeout code in RFC 1928: TTL expired by convention */
		return GW_SOCKS5_REP_TTL_EXPIRED;
	case GW_R_UNSUPPORTED:
		return GW_SOCKS5_REP_CMD_UNSUPPORTED;
	default:
		return GW_SOCKS5_REP_GENERAL_FAILURE;
	}
}

uint8_t gw_socks5_rep_for_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case ECONNREFUSED:
		return GW_SOCKS5_REP_CONN_REFUSED;
	case ENETUNREACH:
	case ENETDOWN:
		return GW_SOCKS5_REP_NET_UNREACHABLE;
	case EHOSTUNREACH:
	case EHOSTDOWN:
		return GW_SOCKS5_REP_HOST_UNREACHABLE;
	case ETIMEDOUT:
		return GW_SOCKS5_REP_TTL_EXPIRED;
	default:
		return GW_SOCKS5_REP_GENERAL_FAILURE;
	}
}

/* ---- replies -------------------------------------------------------- */

void gw_socks5_method_reply(uint8_t out[2], uint8_t method)
{
	out[0] = GW_SOCKS5_VERSION;
	out[1] = method;
}

void gw_socks5_auth_reply(uint8_t out[2], bool ok)
{
	out[0] = GW_SOCKS5_AUTH_VERSION;
	out[1] = ok ? 0x00 : 0x01;
}

int gw_socks5_reply(uint8_t *out, size_t outsz, uint8_t rep,
		    const struct sockaddr *bound)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 sin6;
	const uint8_t *addr;
	size_t alen;
	uint16_t port;  /* network byte order */
	uint8_t atyp;

	if (bound == NULL || bound->sa_family == AF_INET) {
		memset(&sin, 0, sizeof(sin));
		if (bound != NULL)
			memcpy(&sin, bound, sizeof(sin));
		atyp = GW_SOCKS5_ATYP_IPV4;
		addr = (const uint8_t *)&sin.sin_addr;
		alen = 4;
		port = sin.sin_port;
	} else if (bound->sa_family == AF_INET6) {
		memcpy(&sin6, bound, sizeof(sin6));
		atyp = GW_SOCKS5_ATYP_IPV6;
		addr = sin6.sin6_addr.s6_addr;
		alen = 16;
		port = sin6.sin6_port;
	} else {
		return -EAFNOSUPPORT;
	}
	if (outsz < 4 + alen + 2)
		return -ENOSPC;
	out[0] = GW_SOCKS5_VERSION;
	out[1] = rep;
	out[2] = 0;
	out[3] = atyp;
	memcpy(out + 4, addr, alen);
	memcpy(out + 4 + alen, &port, 2);
	return (int)(4 + alen + 2);
}

int gw_socks5_request_sockaddr(const struct gw_socks5_request *req,
			       struct sockaddr_storage *ss, socklen_t *sslen)
{
	memset(ss, 0, sizeof(*ss));
	if (req->atyp == GW_SOCKS5_ATYP_IPV4) {
		struct sockaddr_in sin;

		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		sin.sin_port = htons(req->port);
		memcpy(&sin.sin_addr, req->addr, 4);
		memcpy(ss, &sin, sizeof(sin));
		*sslen = sizeof(sin);
		return 0;
	}
	if (req->atyp == GW_SOCKS5_ATYP_IPV6) {
		struct sockaddr_in6 sin6;

		memset(&sin6, 0, sizeof(sin6));
		sin6.sin6_family = AF_INET6;
		sin6.sin6_port = htons(req->port);
		memcpy(&sin6.sin6_addr, req->addr, 16);
		memcpy(ss, &sin6, sizeof(sin6));
		*sslen = sizeof(sin6);
		return 0;
	}
	return -EINVAL;
}

const char *
gw_socks5_cmd_name(uint8_t cmd)
{
	switch (cmd) {
	case GW_SOCKS5_CMD_CONNECT:
		return "CONNECT";
	case GW_SOCKS5_CMD_BIND:
		return "BIND";
	case GW_SOCKS5_CMD_UDP_ASSOCIATE:
		return "UDP-ASSOCIATE";
	default:
		return "-";
	}
}
