/* test_nflog.c: the refuse chain's samples as nflog.c reads them. Bad
 * inputs first (records that do not hold what they claim, buffers cut at
 * every offset), then each protocol's record; the last test binds the
 * group in a network namespace of its own (root only).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../sl_test.h"

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>

#include "nflog.h"
#include "nft-t.h"

/* ---- building records ------------------------------------------------ */

#define BUF 8192

struct buf {
	uint8_t b[BUF];
	size_t len;
};

/* Appends one netlink message of type `type` to out; with payload (n
 * bytes) as its NFULA_PAYLOAD, or none when payload is NULL. */
static void
put_msg(struct buf *out, uint16_t type, const void *payload, size_t n)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(out->b + out->len);
	struct nfulnl_msg_packet_hdr ph = {.hw_protocol = htons(0x0800), .hook = 0};
	struct nfgenmsg *g;

	nlh->nlmsg_type = type;
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_INET;
	g->res_id = htons(FW_LOG_GROUP);
	mnl_attr_put(nlh, NFULA_PACKET_HDR, sizeof(ph), &ph);
	mnl_attr_put_u32(nlh, NFULA_IFINDEX_INDEV, htonl(5));
	if (payload)
		mnl_attr_put(nlh, NFULA_PAYLOAD, n, payload);
	out->len += NLMSG_ALIGN(nlh->nlmsg_len);
	assert_true(out->len < BUF - 512);
}

#define PACKET ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)

static void
put_rec(struct buf *out, const void *payload, size_t n)
{
	put_msg(out, PACKET, payload, n);
}

/* An IPv4 header (ihl words, protocol p, fragment offset frag) from
 * 10.88.1.7 to 1.2.3.4, then l4 (n bytes), into pkt; returns its length. */
static size_t
ip4(uint8_t *pkt, unsigned ihl, uint8_t p, uint16_t frag, const void *l4, size_t n)
{
	static const uint8_t src[4] = {10, 88, 1, 7}, dst[4] = {1, 2, 3, 4};

	memset(pkt, 0, ihl * 4);
	pkt[0] = (uint8_t)(0x40 | ihl);
	pkt[6] = (uint8_t)(frag >> 8);
	pkt[7] = (uint8_t)frag;
	pkt[8] = 64;
	pkt[9] = p;
	memcpy(pkt + 12, src, 4);
	memcpy(pkt + 16, dst, 4);
	if (n)
		memcpy(pkt + ihl * 4, l4, n);
	return ihl * 4 + n;
}

struct seen {
	struct fw_refusal r[16];
	size_t n;
};

static void
seen_cb(void *arg, const struct fw_refusal *r)
{
	struct seen *s = arg;

	assert_true(s->n < 16);
	s->r[s->n++] = *r;
}

static int
parse(const struct buf *b, size_t len, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	return fw_log_parse(b->b, len, seen_cb, s);
}

static const uint8_t tcp_syn[20] = {0xc3, 0x50, 0x15, 0x38, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02};

static void
is_from_to(const struct fw_refusal *r)
{
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];

	assert_string_equal(inet_ntop(AF_INET, &r->src, a, sizeof(a)), "10.88.1.7");
	assert_string_equal(inet_ntop(AF_INET, &r->dst, b, sizeof(b)), "1.2.3.4");
}

/* ---- bad inputs ------------------------------------------------------ */

/* Records that cannot name their addresses are skipped; the good one
 * after them is still read. */
static void
test_bad_records(void **state)
{
	uint8_t pkt[128];
	struct buf b = {.len = 0};
	struct seen s;
	size_t n;

	(void)state;
	assert_int_equal(fw_log_parse(NULL, 0, seen_cb, &s), 0);
	put_rec(&b, NULL, 0); /* no payload */
	put_rec(&b, pkt, 0);  /* an empty one */
	n = ip4(pkt, 5, 6, 0, tcp_syn, 20);
	put_rec(&b, pkt, 19); /* shorter than an IPv4 header */
	pkt[0] = 0x65;        /* IPv6's version */
	put_rec(&b, pkt, n);
	pkt[0] = 0x44; /* ihl 4: 16 bytes */
	put_rec(&b, pkt, n);
	n = ip4(pkt, 15, 6, 0, NULL, 0); /* ihl 15: 60 bytes, but only 40 sent */
	put_rec(&b, pkt, 40);
	n = ip4(pkt, 5, 6, 0, tcp_syn, 20);
	put_msg(&b, (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG, pkt, n); /* not a record */
	put_msg(&b, NLMSG_DONE, pkt, n);
	put_msg(&b, (NFNL_SUBSYS_QUEUE << 8) | 0, pkt, n); /* another subsystem */
	put_rec(&b, pkt, n);                               /* the good one */
	assert_int_equal(parse(&b, b.len, &s), 1);
	assert_int_equal(s.n, 1);
	is_from_to(&s.r[0]);
	assert_int_equal(s.r[0].dport, 5432);
}

/* An attribute whose length runs past its message: the record is skipped,
 * nothing is read beyond the message. */
static void
test_bad_attr(void **state)
{
	uint8_t pkt[64];
	struct buf b = {.len = 0};
	struct nlattr *a;
	struct seen s;
	size_t n = ip4(pkt, 5, 6, 0, tcp_syn, 20);

	(void)state;
	put_rec(&b, pkt, n);
	/* the payload attribute is the last: claim more than the message has */
	a = (struct nlattr *)(b.b + b.len - NLMSG_ALIGN(NLA_HDRLEN + n));
	assert_int_equal(a->nla_type & NLA_TYPE_MASK, NFULA_PAYLOAD);
	a->nla_len = (uint16_t)(a->nla_len + 64);
	put_rec(&b, pkt, n);
	assert_int_equal(parse(&b, b.len, &s), 1);
}

/* The last message, its length not a multiple of 4 and no padding after
 * it in what was read, with a payload attribute that claims the padding
 * too: libmnl would let it run to the aligned end, past the bytes read.
 * The record is skipped (the fuzzer found the overread). */
static void
test_attr_in_missing_padding(void **state)
{
	static const uint8_t echo[2] = {8, 0};
	uint8_t pkt[64];
	struct buf b = {.len = 0};
	struct nlmsghdr *nlh = (struct nlmsghdr *)b.b;
	struct nlattr *a;
	struct seen s;
	size_t n = ip4(pkt, 5, IPPROTO_ICMP, 0, echo, sizeof(echo)); /* 22 bytes */

	(void)state;
	put_rec(&b, pkt, n);
	a = (struct nlattr *)(b.b + b.len - NLMSG_ALIGN(NLA_HDRLEN + n));
	assert_int_equal(a->nla_type & NLA_TYPE_MASK, NFULA_PAYLOAD);
	/* the message ends where the payload's bytes do, as a kernel's may */
	nlh->nlmsg_len -= (uint32_t)(NLMSG_ALIGN(a->nla_len) - a->nla_len);
	assert_true(nlh->nlmsg_len % 4 != 0);
	assert_int_equal(parse(&b, nlh->nlmsg_len, &s), 1); /* so far: one ICMP record */
	/* the attribute claims the padding the read does not have */
	a->nla_len = (uint16_t)NLMSG_ALIGN(a->nla_len);
	/* what was read ends at nlmsg_len: no padding */
	assert_int_equal(parse(&b, nlh->nlmsg_len, &s), 0);
	assert_int_equal(s.n, 0);
}

/* Two records cut at every offset: whole messages only, never a record
 * from a cut one, and -EPROTO for a cut that is not between messages. */
static void
test_every_split(void **state)
{
	static const uint8_t udp[8] = {0x9c, 0x40, 0, 53, 0, 8, 0, 0};
	uint8_t pkt[64];
	struct buf b = {.len = 0};
	size_t first;
	struct seen s;

	(void)state;
	put_rec(&b, pkt, ip4(pkt, 5, 6, 0, tcp_syn, 20));
	first = b.len;
	put_rec(&b, pkt, ip4(pkt, 5, 17, 0, udp, 8));
	for (size_t cut = 0; cut <= b.len; cut++) {
		int want = cut == 0 ? 0 : cut == first ? 1 : cut == b.len ? 2 : -EPROTO;
		int got = parse(&b, cut, &s);

		if (got != want)
			fail_msg("cut at %zu: %d, want %d", cut, got, want);
		assert_int_equal(s.n, cut < first ? 0 : cut < b.len ? 1 : 2);
	}
	assert_int_equal(s.r[0].dport, 5432);
	assert_int_equal(s.r[1].dport, 53);
}

/* ---- what each record says ------------------------------------------- */

static void
test_protocols(void **state)
{
	static const uint8_t udp[8] = {0x9c, 0x40, 0, 53, 0, 8, 0, 0};
	static const uint8_t icmp[8] = {8, 0, 0, 0, 0x5e, 0x5e, 0, 1};
	static const uint8_t sctp[12] = {0x13, 0x88, 0x0b, 0xb8};
	struct {
		uint8_t proto;
		unsigned ihl;
		uint16_t frag;
		const uint8_t *l4;
		size_t n;
		bool has_port;
		uint16_t dport;
		bool has_icmp;
	} c[] = {
	    {6, 5, 0, tcp_syn, 20, true, 5432, false},
	    {6, 5, 0, tcp_syn, 3, false, 0, false},         /* the ports cut off */
	    {6, 7, 0, tcp_syn, 20, true, 5432, false},      /* after 8 bytes of options */
	    {6, 5, 0x2000, tcp_syn, 20, true, 5432, false}, /* more fragments, offset 0 */
	    {6, 5, 0x0010, tcp_syn, 20, false, 0, false},   /* a later fragment */
	    {17, 5, 0, udp, 8, true, 53, false},
	    {136, 5, 0, udp, 8, true, 53, false}, /* UDP-Lite */
	    {132, 5, 0, sctp, 12, true, 3000, false},
	    {1, 5, 0, icmp, 8, false, 0, true},
	    {1, 5, 0, icmp, 1, false, 0, false},
	    {47, 5, 0, udp, 8, false, 0, false}, /* GRE: no ports read */
	};
	uint8_t pkt[128];

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct buf b = {.len = 0};
		struct seen s;

		put_rec(&b, pkt, ip4(pkt, c[i].ihl, c[i].proto, c[i].frag, c[i].l4, c[i].n));
		assert_int_equal(parse(&b, b.len, &s), 1);
		is_from_to(&s.r[0]);
		assert_int_equal(s.r[0].proto, c[i].proto);
		if (s.r[0].has_port != c[i].has_port || s.r[0].dport != c[i].dport)
			fail_msg("case %zu: has_port %d dport %u", i, s.r[0].has_port,
			         s.r[0].dport);
		assert_int_equal(s.r[0].has_icmp, c[i].has_icmp);
		if (c[i].has_icmp) {
			assert_int_equal(s.r[0].icmp_type, 8);
			assert_int_equal(s.r[0].icmp_code, 0);
		}
	}
}

/* ---- a real kernel ---------------------------------------------------- */

static int
nl_socket(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	assert_true(fd >= 0);
	return fd;
}

static void
test_kernel(void **state)
{
	struct fw_log *l, *busy;
	char err[256] = "";

	(void)state;
	if (geteuid() != 0)
		sl_skip("kernel: binding an NFLOG group needs root");
	assert_int_equal(unshare(CLONE_NEWNET), 0);
	l = fw_log_open(nl_socket(), err, sizeof(err));
	if (!l)
		fail_msg("fw_log_open: %s", err);
	assert_true(fw_log_fd(l) >= 0);
	assert_int_equal(fw_log_read(l, NULL, NULL), 0); /* nothing queued: no wait */
	/* the group has one reader */
	busy = fw_log_open(nl_socket(), err, sizeof(err));
	assert_null(busy);
	if (!strstr(err, "binding the group"))
		fail_msg("error \"%s\"", err);
	/* closing frees it */
	fw_log_close(l);
	l = fw_log_open(nl_socket(), err, sizeof(err));
	if (!l)
		fail_msg("fw_log_open after a close: %s", err);
	fw_log_close(l);
	fw_log_close(NULL);
	assert_int_equal(fw_log_fd(NULL), -1);
	assert_int_equal(fw_log_read(NULL, NULL, NULL), -EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_records), cmocka_unit_test(test_bad_attr),
	    cmocka_unit_test(test_attr_in_missing_padding),
	    cmocka_unit_test(test_every_split), cmocka_unit_test(test_protocols),
	    cmocka_unit_test(test_kernel), /* last: it unshares */
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
