/* nflog.c: the refuse chain's samples, read over NFLOG (nfnetlink_log)
 * with libmnl. See nflog.h.
 *
 * A record's payload is the refused packet from its IPv4 header on, cut
 * at the rule's snaplen: bytes a guest chose. Every field is read only
 * after its length is checked; a record that does not hold what it claims
 * is skipped, never half-reported.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>

#include "nflog.h"
#include "nft-t.h"

#define COPY_RANGE  128          /* >= the rule's snaplen: the rule decides */
#define FLUSH_CS    20           /* a record waits at most 0.2 s in the kernel */
#define QTHRESH     64           /* or until this many are queued */
#define RX_SIZE     (64 * 1024)  /* one read; the kernel's batches are smaller */
#define RCVBUF      (256 * 1024) /* about a thousand records */
#define IP4_MIN_HDR 20

struct fw_log {
	struct mnl_socket *nl;
	int fd;
	char *rx;
	bool lost; /* ENOBUFS since the last fw_log_read() */
};

/* ---- parsing ------------------------------------------------------------ */

/* Fills r from an IPv4 packet's first bytes; false when they are no IPv4
 * header. */
static bool
parse_ip4(const uint8_t *p, size_t len, struct fw_refusal *r)
{
	size_t ihl;
	uint16_t frag;

	memset(r, 0, sizeof(*r));
	if (len < IP4_MIN_HDR || p[0] >> 4 != 4)
		return false;
	ihl = (size_t)(p[0] & 0x0f) * 4;
	if (ihl < IP4_MIN_HDR || ihl > len)
		return false;
	r->proto = p[9];
	memcpy(&r->src, p + 12, 4);
	memcpy(&r->dst, p + 16, 4);
	frag = (uint16_t)((p[6] << 8 | p[7]) & 0x1fff);
	if (frag != 0)
		return true; /* a later fragment: no transport header */
	p += ihl;
	len -= ihl;
	switch (r->proto) {
	case IPPROTO_TCP:
	case IPPROTO_UDP:
	case IPPROTO_UDPLITE:
	case IPPROTO_SCTP:
	case IPPROTO_DCCP: /* each starts with source port, destination port */
		if (len >= 4) {
			r->has_port = true;
			r->dport = (uint16_t)(p[2] << 8 | p[3]);
		}
		break;
	case IPPROTO_ICMP:
		if (len >= 2) {
			r->has_icmp = true;
			r->icmp_type = p[0];
			r->icmp_code = p[1];
		}
		break;
	default:
		break;
	}
	return true;
}

static int
payload_cb(const struct nlattr *a, void *data)
{
	const struct nlattr **payload = data;

	if (mnl_attr_get_type(a) == NFULA_PAYLOAD)
		*payload = a;
	return MNL_CB_OK;
}

int
fw_log_parse(const void *buf, size_t len, fw_log_cb cb, void *arg)
{
	const uint8_t *p = buf;
	size_t off = 0;
	int n = 0;

	/* Not mnl_nlmsg_ok(): it compares the length as an int, so a length
	 * past 2 GiB would pass. */
	while (len - off >= NLMSG_HDRLEN) {
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)(p + off);
		const struct nlattr *payload = NULL;
		struct fw_refusal r;

		if (nlh->nlmsg_len < NLMSG_HDRLEN || nlh->nlmsg_len > len - off)
			return -EPROTO;
		off += NLMSG_ALIGN(nlh->nlmsg_len) < len - off ? NLMSG_ALIGN(nlh->nlmsg_len)
		                                               : len - off;
		if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
			continue;
		if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(struct nfgenmsg))
			continue;
		if (mnl_attr_parse(nlh, sizeof(struct nfgenmsg), payload_cb, &payload) < 0)
			continue; /* an attribute overruns the message */
		/* libmnl lets attributes run to the message's aligned end, which
		 * a last message with no padding after it does not have: the
		 * payload must end within nlmsg_len. */
		if (payload && (const uint8_t *)payload + payload->nla_len >
		                   (const uint8_t *)nlh + nlh->nlmsg_len)
			continue;
		if (!payload || !parse_ip4(mnl_attr_get_payload(payload),
		                           mnl_attr_get_payload_len(payload), &r))
			continue;
		if (cb)
			cb(arg, &r);
		n++;
	}
	/* Whole messages only: a tail that is not one is a broken read. */
	return off == len ? n : -EPROTO;
}

/* ---- the socket ---------------------------------------------------------- */

static void
set_err(char *err, size_t errsz, const char *what, int e)
{
	if (err && errsz)
		snprintf(err, errsz, "nflog group %d: %s: %s", FW_LOG_GROUP, what, strerror(e));
}

/* Binds the group and sets its mode, in one request; 0 or -errno (the
 * kernel's). */
static int
bind_group(struct fw_log *l)
{
	char buf[512]; /* one config message */
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
	struct nfulnl_msg_config_mode mode = {.copy_range = htonl(COPY_RANGE),
	                                      .copy_mode = NFULNL_COPY_PACKET};
	struct nfgenmsg *g;
	uint32_t seq = 1, portid = mnl_socket_get_portid(l->nl);
	int ret;

	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_UNSPEC;
	g->version = NFNETLINK_V0;
	g->res_id = htons(FW_LOG_GROUP);
	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
	mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
	mnl_attr_put_u32(nlh, NFULA_CFG_TIMEOUT, htonl(FLUSH_CS));
	mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(QTHRESH));
	if (mnl_socket_sendto(l->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	/* Records (sequence 0) may come before the ack: mnl_cb_run() passes
	 * them by and stops at the ack or the error. */
	do {
		ssize_t n = mnl_socket_recvfrom(l->nl, l->rx, RX_SIZE);

		if (n < 0)
			return -errno;
		errno = 0;
		ret = mnl_cb_run(l->rx, (size_t)n, seq, portid, NULL, NULL);
	} while (ret > 0);
	return ret < 0 ? (errno ? -errno : -EPROTO) : 0;
}

struct fw_log *
fw_log_open(int fd, char *err, size_t errsz)
{
	struct fw_log *l = calloc(1, sizeof(*l));
	int v = RCVBUF, ret;

	if (!l || !(l->rx = malloc(RX_SIZE))) {
		set_err(err, errsz, "open", ENOMEM);
		goto fail;
	}
	l->fd = fd;
	l->nl = mnl_socket_fdopen(fd);
	if (!l->nl) {
		set_err(err, errsz, "open", errno);
		goto fail;
	}
	if (mnl_socket_bind(l->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		set_err(err, errsz, "bind", errno);
		goto fail;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	ret = bind_group(l);
	if (ret < 0) {
		set_err(err, errsz, "binding the group", -ret);
		goto fail;
	}
	return l;
fail:
	if (l && l->nl)
		fd = -1; /* closed with l->nl */
	fw_log_close(l);
	if (fd >= 0)
		close(fd);
	return NULL;
}

void
fw_log_close(struct fw_log *l)
{
	if (!l)
		return;
	/* Closing the socket unbinds the group (the kernel frees it). */
	if (l->nl)
		mnl_socket_close(l->nl);
	free(l->rx);
	free(l);
}

int
fw_log_fd(const struct fw_log *l)
{
	return l ? l->fd : -1;
}

int
fw_log_read(struct fw_log *l, fw_log_cb cb, void *arg)
{
	int n = 0;

	if (!l)
		return -EINVAL;
	for (;;) {
		ssize_t got = recv(l->fd, l->rx, RX_SIZE, MSG_DONTWAIT);
		int k;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == ENOBUFS) {
			l->lost = true; /* the socket goes on; what is queued is still good */
			continue;
		}
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (got < 0)
			return -errno;
		k = fw_log_parse(l->rx, (size_t)got, cb, arg);
		if (k > 0)
			n += k;
	}
	if (l->lost) {
		l->lost = false;
		return -ENOBUFS;
	}
	return n;
}
