/* test_nft.c: the `inet sluice` batch builders, decoded back with libmnl
 * and libnftnl: bad inputs first (each refused with -EINVAL, appending
 * nothing), then every operation's messages, their order, flags and
 * element key bytes, then reconcile's counts. The last test commits to a
 * real kernel in a fresh network namespace of its own and is skipped
 * unless root can unshare(CLONE_NEWNET).
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
#include <unistd.h>

#include <cmocka.h>

#include "../sl_test.h"

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "nft.h"

/* ---- fixtures ------------------------------------------------------- */

enum { L_NONE, L_TRANS, L_PLAIN, NLANES };

static struct fw_lane lanes[NLANES];

static struct in_addr
ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return a;
}

static void
lanes_init(void)
{
	memset(lanes, 0, sizeof(lanes));
	lanes[L_NONE] = (struct fw_lane){
	    .name = "none", .subnet = ip("10.88.3.0"), .prefix = 24, .gateway = ip("10.88.3.1")};
	lanes[L_TRANS] = (struct fw_lane){.name = "egress",
	                                  .subnet = ip("10.88.1.0"),
	                                  .prefix = 24,
	                                  .gateway = ip("10.88.1.1"),
	                                  .ports = {3128, 1080, 3129},
	                                  .nports = 3,
	                                  .http_port = 3128,
	                                  .tls_port = 3129};
	lanes[L_PLAIN] = (struct fw_lane){.name = "plain",
	                                  .subnet = ip("10.88.4.0"),
	                                  .prefix = 23,
	                                  .gateway = ip("10.88.4.1"),
	                                  .ports = {3128, 1080},
	                                  .nports = 2};
}

/* Sandbox number `host` of lane l. */
static struct fw_sbx
sbx(const struct fw_lane *l, uint32_t host, bool unlocked)
{
	struct fw_sbx s = {.lane = l, .unlocked = unlocked};

	s.addr.s_addr = htonl(ntohl(l->subnet.s_addr) + host);
	fw_ifname(s.addr, s.ifname);
	return s;
}

static int
setup(void **state)
{
	(void)state;
	lanes_init();
	return 0;
}

/* ---- decoding ------------------------------------------------------- */

#define BEGIN 0x100 /* not NFT_MSG_* values */
#define END   0x101

struct msg {
	int type; /* NFT_MSG_*, BEGIN or END */
	uint16_t flags;
	uint32_t seq;
	char name[32]; /* table, chain (rules), set, object name */
	size_t n;      /* elements, or expressions of a rule */
	const struct nlmsghdr *nlh;
};

struct dec {
	struct msg *m;
	size_t n;
	size_t batches;
};

/* One set element as sent. */
struct elem {
	uint8_t key[64];
	uint16_t klen;
	char objref[32];
};

static void
parse_elem(const struct nlattr *nest, struct elem *e)
{
	const struct nlattr *a, *v;

	memset(e, 0, sizeof(*e));
	mnl_attr_for_each_nested(a, nest)
	{
		switch (mnl_attr_get_type(a)) {
		case NFTA_SET_ELEM_KEY:
			mnl_attr_for_each_nested(v, a)
			{
				assert_int_equal(mnl_attr_get_type(v), NFTA_DATA_VALUE);
				e->klen = mnl_attr_get_payload_len(v);
				assert_true(e->klen <= sizeof(e->key));
				memcpy(e->key, mnl_attr_get_payload(v), e->klen);
			}
			break;
		case NFTA_SET_ELEM_OBJREF:
			assert_int_equal(mnl_attr_validate(a, MNL_TYPE_NUL_STRING), 0);
			snprintf(e->objref, sizeof(e->objref), "%s", mnl_attr_get_str(a));
			break;
		default:
			fail_msg("unexpected element attribute %u", mnl_attr_get_type(a));
		}
	}
}

/* The elements of an element message, walked with libmnl: libnftnl's own
 * parser wants every element nest typed NFTA_LIST_ELEM, while its builder
 * (like nft) numbers them 1, 2, 3 ... and the kernel reads any type. Fills
 * set with the set's name and out[0..max) with the elements; returns the
 * element count. */
static size_t
parse_elems(const struct nlmsghdr *nlh, char *set, size_t setsz, struct elem *out, size_t max)
{
	const struct nlattr *a, *e;
	size_t n = 0;

	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		switch (mnl_attr_get_type(a)) {
		case NFTA_SET_ELEM_LIST_SET:
			snprintf(set, setsz, "%s", mnl_attr_get_str(a));
			break;
		case NFTA_SET_ELEM_LIST_TABLE:
			assert_string_equal(mnl_attr_get_str(a), "sluice");
			break;
		case NFTA_SET_ELEM_LIST_ELEMENTS:
			mnl_attr_for_each_nested(e, a)
			{
				if (n < max)
					parse_elem(e, &out[n]);
				n++;
			}
			break;
		default:
			fail_msg("unexpected element list attribute %u", mnl_attr_get_type(a));
		}
	}
	return n;
}

static void
parse_one(const struct nlmsghdr *nlh, struct msg *m)
{
	m->type = nlh->nlmsg_type & 0xff;
	assert_int_equal(nlh->nlmsg_type >> 8, NFNL_SUBSYS_NFTABLES);
	assert_true(nlh->nlmsg_flags & NLM_F_ACK);
	assert_true(nlh->nlmsg_flags & NLM_F_REQUEST);
	assert_false(nlh->nlmsg_flags & NLM_F_EXCL);
	assert_int_equal(((const struct nfgenmsg *)mnl_nlmsg_get_payload(nlh))->nfgen_family,
	                 NFPROTO_INET);
	switch (m->type) {
	case NFT_MSG_NEWTABLE:
	case NFT_MSG_DELTABLE: {
		struct nftnl_table *t = nftnl_table_alloc();

		assert_int_equal(nftnl_table_nlmsg_parse(nlh, t), 0);
		snprintf(m->name, sizeof(m->name), "%s", nftnl_table_get_str(t, NFTNL_TABLE_NAME));
		nftnl_table_free(t);
		break;
	}
	case NFT_MSG_NEWCHAIN: {
		struct nftnl_chain *c = nftnl_chain_alloc();

		assert_int_equal(nftnl_chain_nlmsg_parse(nlh, c), 0);
		snprintf(m->name, sizeof(m->name), "%s", nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));
		nftnl_chain_free(c);
		break;
	}
	case NFT_MSG_NEWSET: {
		struct nftnl_set *s = nftnl_set_alloc();

		assert_int_equal(nftnl_set_nlmsg_parse(nlh, s), 0);
		snprintf(m->name, sizeof(m->name), "%s", nftnl_set_get_str(s, NFTNL_SET_NAME));
		nftnl_set_free(s);
		break;
	}
	case NFT_MSG_NEWSETELEM:
	case NFT_MSG_DELSETELEM:
		m->n = parse_elems(nlh, m->name, sizeof(m->name), NULL, 0);
		break;
	case NFT_MSG_NEWRULE: {
		struct nftnl_rule *r = nftnl_rule_alloc();
		struct nftnl_expr_iter *it;

		assert_int_equal(nftnl_rule_nlmsg_parse(nlh, r), 0);
		snprintf(m->name, sizeof(m->name), "%s", nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
		it = nftnl_expr_iter_create(r);
		while (nftnl_expr_iter_next(it))
			m->n++;
		nftnl_expr_iter_destroy(it);
		nftnl_rule_free(r);
		break;
	}
	case NFT_MSG_NEWOBJ:
	case NFT_MSG_DELOBJ: {
		struct nftnl_obj *o = nftnl_obj_alloc();

		assert_int_equal(nftnl_obj_nlmsg_parse(nlh, o), 0);
		snprintf(m->name, sizeof(m->name), "%s", nftnl_obj_get_str(o, NFTNL_OBJ_NAME));
		assert_int_equal(nftnl_obj_get_u32(o, NFTNL_OBJ_TYPE), NFT_OBJECT_COUNTER);
		nftnl_obj_free(o);
		break;
	}
	default:
		fail_msg("unexpected message type %d", m->type);
	}
}

/* Decodes all of b; checks every batch is BEGIN .. END with nothing
 * outside, and sequence numbers increase by one. */
static void
decode(const struct fw_batch *b, struct dec *d)
{
	size_t len;
	const void *p = fw_batch_data(b, &len);
	const struct nlmsghdr *nlh = p;
	int left = (int)len;
	bool open = false;
	uint32_t seq = 0;

	memset(d, 0, sizeof(*d));
	d->m = calloc(len / 16 + 1, sizeof(*d->m));
	assert_non_null(d->m);
	for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
		struct msg *m = &d->m[d->n++];

		m->nlh = nlh;
		m->flags = nlh->nlmsg_flags;
		m->seq = nlh->nlmsg_seq;
		if (d->n > 1)
			assert_int_equal(m->seq, seq + 1);
		seq = m->seq;
		if (nlh->nlmsg_type == NFNL_MSG_BATCH_BEGIN) {
			assert_false(open);
			open = true;
			m->type = BEGIN;
			assert_int_equal(
			    ntohs(((const struct nfgenmsg *)mnl_nlmsg_get_payload(nlh))->res_id),
			    NFNL_SUBSYS_NFTABLES);
		} else if (nlh->nlmsg_type == NFNL_MSG_BATCH_END) {
			assert_true(open);
			open = false;
			m->type = END;
			d->batches++;
		} else {
			assert_true(open);
			parse_one(nlh, m);
		}
	}
	assert_int_equal(left, 0);
	assert_false(open);
}

static void
dec_free(struct dec *d)
{
	free(d->m);
}

struct want {
	int type;
	const char *name; /* NULL: any */
	size_t n;         /* elements; (size_t)-1: any */
};

#define ANY ((size_t)-1)

static void
expect(const struct dec *d, const struct want *w, size_t nw)
{
	assert_int_equal(d->n, nw);
	for (size_t i = 0; i < nw; i++) {
		if (d->m[i].type != w[i].type)
			fail_msg("message %zu: type %d, want %d", i, d->m[i].type, w[i].type);
		if (w[i].name)
			assert_string_equal(d->m[i].name, w[i].name);
		if (w[i].n != ANY)
			assert_int_equal(d->m[i].n, w[i].n);
	}
}

typedef void (*elem_check)(const struct elem *e, size_t i, void *arg);

/* Calls fn for every element of the element message m. */
static void
each_elem(const struct msg *m, elem_check fn, void *arg)
{
	struct elem v[8];
	char set[32];
	size_t n = parse_elems(m->nlh, set, sizeof(set), v, 8);

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++)
		fn(&v[i], i, arg);
}

static size_t
batch_len(const struct fw_batch *b)
{
	size_t len;

	fw_batch_data(b, &len);
	return len;
}

/* ---- bad inputs ----------------------------------------------------- */

typedef int (*sbx_op)(struct fw_batch *b, const struct fw_sbx *s);

static const sbx_op ops[] = {fw_build_attach, fw_build_unlock, fw_build_lock, fw_build_detach};

/* Every single-sandbox op refuses s with -EINVAL and appends nothing, to
 * an empty batch and to one already holding a batch. */
static void
refused(const struct fw_sbx *s)
{
	struct fw_batch *b = fw_batch_new();
	struct fw_sbx good = sbx(&lanes[L_TRANS], 7, false);

	assert_non_null(b);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		assert_int_equal(ops[i](b, s), -EINVAL);
		assert_int_equal(batch_len(b), 0);
	}
	assert_int_equal(fw_build_attach(b, &good), 0);
	size_t len = batch_len(b);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		assert_int_equal(ops[i](b, s), -EINVAL);
		assert_int_equal(batch_len(b), len);
	}
	fw_batch_free(b);
}

static void
test_null_args(void **state)
{
	struct fw_sbx s = sbx(&lanes[L_TRANS], 7, false);
	struct fw_batch *b = fw_batch_new();
	size_t len = 1;

	(void)state;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		assert_int_equal(ops[i](NULL, &s), -EINVAL);
	assert_int_equal(fw_build_remove(NULL), -EINVAL);
	assert_int_equal(fw_build_reconcile(NULL, lanes, NLANES, &s, 1), -EINVAL);
	assert_int_equal(fw_build_reconcile(b, NULL, 1, NULL, 0), -EINVAL);
	assert_int_equal(fw_build_reconcile(b, lanes, NLANES, NULL, 1), -EINVAL);
	assert_int_equal(batch_len(b), 0);
	refused(NULL);
	s.lane = NULL;
	refused(&s);
	assert_null(fw_batch_data(NULL, &len));
	assert_int_equal(len, 0);
	fw_batch_free(NULL);
	fw_batch_free(b);
	fw_close(NULL);
	assert_int_equal(fw_commit(NULL, NULL, NULL, 0), -EINVAL);
	assert_int_equal(fw_table_exists(NULL), -EINVAL);
}

/* One lane field broken at a time. */
static void
test_bad_lane(void **state)
{
	struct fw_lane l;
	struct fw_sbx s;

	(void)state;
#define BAD_LANE(stmt)                                                                             \
	do {                                                                                       \
		l = lanes[L_TRANS];                                                                \
		stmt;                                                                              \
		s = sbx(&lanes[L_TRANS], 7, false);                                                \
		s.lane = &l;                                                                       \
		refused(&s);                                                                       \
	} while (0)
	BAD_LANE(l.prefix = 33);
	BAD_LANE(l.prefix = 255);
	BAD_LANE(l.subnet = ip("10.88.1.5"));    /* host bits */
	BAD_LANE(l.gateway = ip("10.88.2.1"));   /* outside */
	BAD_LANE(l.gateway = ip("10.88.1.0"));   /* network address */
	BAD_LANE(l.gateway = ip("10.88.1.255")); /* broadcast */
	BAD_LANE(l.nports = 5);
	BAD_LANE(l.nports = (size_t)-1);
	BAD_LANE(l.ports[1] = 0);
	BAD_LANE(l.ports[1] = 3128);  /* twice */
	BAD_LANE(l.http_port = 8080); /* no such door */
	BAD_LANE(l.tls_port = 8443);
	BAD_LANE((l.nports = 0, l.http_port = 3128, l.tls_port = 0));
#undef BAD_LANE
}

static void
test_bad_sbx(void **state)
{
	struct fw_sbx s;

	(void)state;
#define BAD_SBX(stmt)                                                                              \
	do {                                                                                       \
		s = sbx(&lanes[L_TRANS], 7, false);                                                \
		stmt;                                                                              \
		refused(&s);                                                                       \
	} while (0)
	BAD_SBX(s.addr = ip("10.88.2.7")); /* outside its lane */
	BAD_SBX(s.addr = ip("10.88.1.1")); /* the gateway */
	BAD_SBX(s.addr = ip("10.88.1.0"));
	BAD_SBX(s.addr = ip("10.88.1.255"));
	BAD_SBX(strcpy(s.ifname, "eth0")); /* not slv* */
	BAD_SBX(strcpy(s.ifname, "slv"));  /* nothing after slv */
	BAD_SBX(s.ifname[0] = '\0');
	BAD_SBX(memset(s.ifname, 'a', sizeof(s.ifname)));  /* no NUL */
	BAD_SBX(memcpy(s.ifname, "slv0123456789abc", 16)); /* no NUL */
#undef BAD_SBX
}

static void
test_bad_reconcile(void **state)
{
	struct fw_batch *b = fw_batch_new();
	struct fw_lane copy = lanes[L_TRANS], two[2];
	struct fw_sbx s[2];

	(void)state;
	assert_int_equal(fw_build_remove(b), 0);
	size_t len = batch_len(b);

	/* a sandbox whose lane is not in the list: another door, another
	 * gateway, or no such lane */
	copy.ports[2] = 8443;
	copy.tls_port = 8443;
	s[0] = sbx(&copy, 7, false);
	assert_int_equal(fw_build_reconcile(b, lanes, NLANES, s, 1), -EINVAL);
	copy = lanes[L_TRANS];
	copy.gateway = ip("10.88.1.2");
	assert_int_equal(fw_build_reconcile(b, lanes, NLANES, s, 1), -EINVAL);
	s[0] = sbx(&lanes[L_TRANS], 7, false);
	assert_int_equal(fw_build_reconcile(b, &lanes[L_PLAIN], 1, s, 1), -EINVAL);
	/* no lanes at all */
	s[0] = sbx(&lanes[L_TRANS], 7, false);
	assert_int_equal(fw_build_reconcile(b, NULL, 0, s, 1), -EINVAL);
	/* the same address twice */
	s[1] = sbx(&lanes[L_TRANS], 7, true);
	assert_int_equal(fw_build_reconcile(b, lanes, NLANES, s, 2), -EINVAL);
	/* a bad sandbox among good ones */
	s[1] = sbx(&lanes[L_TRANS], 8, true);
	strcpy(s[1].ifname, "veth8");
	assert_int_equal(fw_build_reconcile(b, lanes, NLANES, s, 2), -EINVAL);
	/* overlapping lanes: 10.88.0.0/23 holds 10.88.1.0/24 */
	two[0] = lanes[L_PLAIN];
	two[0].subnet = ip("10.88.0.0");
	two[0].gateway = ip("10.88.0.1");
	two[1] = lanes[L_TRANS];
	assert_int_equal(fw_build_reconcile(b, two, 2, NULL, 0), -EINVAL);
	/* a bad lane, even with no sandbox in it */
	two[0] = lanes[L_NONE];
	two[1].prefix = 40;
	assert_int_equal(fw_build_reconcile(b, two, 2, NULL, 0), -EINVAL);
	assert_int_equal(batch_len(b), len);

	/* an equal copy of a lane is that lane */
	copy = lanes[L_TRANS];
	s[0] = sbx(&copy, 7, false);
	assert_int_equal(fw_build_reconcile(b, lanes, NLANES, s, 1), 0);
	assert_true(batch_len(b) > len);
	fw_batch_free(b);
}

/* ---- names ---------------------------------------------------------- */

static void
test_ifname(void **state)
{
	char n[FW_IFNAMSIZ];

	(void)state;
	fw_ifname(ip("10.88.1.7"), n);
	assert_string_equal(n, "slv0a580107");
	fw_ifname(ip("255.255.255.255"), n);
	assert_string_equal(n, "slvffffffff");
	fw_ifname(ip("0.0.0.0"), n);
	assert_string_equal(n, "slv00000000");
	fw_ifname(ip("192.168.171.205"), n);
	assert_string_equal(n, "slvc0a8abcd");
}

/* ---- each operation ------------------------------------------------- */

static void
test_remove(void **state)
{
	static const struct want w[] = {
	    {BEGIN, NULL, ANY},
	    {NFT_MSG_NEWTABLE, "sluice", 0},
	    {NFT_MSG_DELTABLE, "sluice", 0},
	    {END, NULL, ANY},
	};
	struct fw_batch *b = fw_batch_new();
	struct dec d;

	(void)state;
	assert_int_equal(fw_build_remove(b), 0);
	decode(b, &d);
	expect(&d, w, 4);
	assert_int_equal(d.batches, 1);
	assert_true(d.m[1].flags & NLM_F_CREATE);
	dec_free(&d);
	fw_batch_free(b);
}

static void
check_host_key(const struct elem *e, size_t i, void *arg)
{
	static const uint8_t want[20] = {'s', 'l', 'v', '0', 'a', '5', '8', '0', '1', '0',
	                                 '7', 0,   0,   0,   0,   0,   10,  88,  1,   7};
	(void)arg;
	assert_int_equal(i, 0);
	assert_int_equal(e->klen, 20);
	assert_memory_equal(e->key, want, 20);
	assert_string_equal(e->objref, "");
}

static void
check_ctr_elem(const struct elem *e, size_t i, void *arg)
{
	static const uint8_t want[4] = {10, 88, 1, 7};

	assert_int_equal(i, 0);
	assert_int_equal(e->klen, 4);
	assert_memory_equal(e->key, want, 4);
	assert_string_equal(e->objref, arg);
}

static void
check_counter(const struct msg *m, uint64_t pkts, uint64_t bytes)
{
	struct nftnl_obj *o = nftnl_obj_alloc();

	assert_int_equal(nftnl_obj_nlmsg_parse(m->nlh, o), 0);
	assert_int_equal(nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS), pkts);
	assert_int_equal(nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES), bytes);
	assert_string_equal(nftnl_obj_get_str(o, NFTNL_OBJ_TABLE), "sluice");
	nftnl_obj_free(o);
}

static void
test_attach(void **state)
{
	static const struct want w[] = {
	    {BEGIN, NULL, ANY},
	    {NFT_MSG_NEWSETELEM, "hosts", 1},
	    {NFT_MSG_NEWOBJ, "tx-10.88.1.7", ANY},
	    {NFT_MSG_NEWOBJ, "rx-10.88.1.7", ANY},
	    {NFT_MSG_NEWSETELEM, "tx", 1},
	    {NFT_MSG_NEWSETELEM, "rx", 1},
	    {END, NULL, ANY},
	};
	struct fw_sbx s = sbx(&lanes[L_TRANS], 7, true);
	struct fw_batch *b = fw_batch_new();
	struct dec d;

	(void)state;
	s.start = (struct fw_counters){1, 2, 3, 4};
	assert_int_equal(fw_build_attach(b, &s), 0);
	decode(b, &d);
	expect(&d, w, 7); /* s.unlocked is not read: no doors */
	each_elem(&d.m[1], check_host_key, NULL);
	check_counter(&d.m[2], 1, 2);
	check_counter(&d.m[3], 3, 4);
	each_elem(&d.m[4], check_ctr_elem, "tx-10.88.1.7");
	each_elem(&d.m[5], check_ctr_elem, "rx-10.88.1.7");
	for (size_t i = 1; i < 6; i++)
		assert_true(d.m[i].flags & NLM_F_CREATE);
	dec_free(&d);
	fw_batch_free(b);
}

struct door_want {
	const uint16_t *ports;
	size_t n;
};

static void
check_door(const struct elem *e, size_t i, void *arg)
{
	const struct door_want *w = arg;
	uint8_t want[12] = {10, 88, 1, 7, 10, 88, 1, 1};

	assert_true(i < w->n);
	want[8] = (uint8_t)(w->ports[i] >> 8);
	want[9] = (uint8_t)w->ports[i];
	assert_int_equal(e->klen, 12);
	assert_memory_equal(e->key, want, 12); /* two bytes of zero padding */
	assert_string_equal(e->objref, "");
}

static void
test_unlock_lock(void **state)
{
	static const uint16_t ports[] = {3128, 1080, 3129};
	static const struct want wu[] = {
	    {BEGIN, NULL, ANY},
	    {NFT_MSG_NEWSETELEM, "doors", 3},
	    {END, NULL, ANY},
	};
	static const struct want wl[] = {
	    {BEGIN, NULL, ANY},
	    {NFT_MSG_NEWSETELEM, "doors", 3},
	    {NFT_MSG_DELSETELEM, "doors", 3},
	    {END, NULL, ANY},
	};
	struct door_want dw = {ports, 3};
	struct fw_sbx s = sbx(&lanes[L_TRANS], 7, false);
	struct fw_batch *b = fw_batch_new();
	struct dec d;

	(void)state;
	assert_int_equal(fw_build_unlock(b, &s), 0);
	decode(b, &d);
	expect(&d, wu, 3);
	each_elem(&d.m[1], check_door, &dw);
	dec_free(&d);

	fw_batch_reset(b);
	assert_int_equal(fw_build_lock(b, &s), 0);
	decode(b, &d);
	expect(&d, wl, 4);
	each_elem(&d.m[1], check_door, &dw);
	each_elem(&d.m[2], check_door, &dw);
	assert_false(d.m[2].flags & NLM_F_CREATE);
	dec_free(&d);
	fw_batch_free(b);
}

/* A lane without ports: still one batch each, with nothing in it. */
static void
test_unlock_none(void **state)
{
	static const struct want w[] = {{BEGIN, NULL, ANY}, {END, NULL, ANY}};
	struct fw_sbx s = sbx(&lanes[L_NONE], 9, false);
	struct fw_batch *b = fw_batch_new();
	struct dec d;

	(void)state;
	assert_int_equal(fw_build_unlock(b, &s), 0);
	decode(b, &d);
	expect(&d, w, 2);
	dec_free(&d);
	fw_batch_reset(b);
	assert_int_equal(fw_build_lock(b, &s), 0);
	decode(b, &d);
	expect(&d, w, 2);
	dec_free(&d);
	fw_batch_free(b);
}

static void
test_detach(void **state)
{
	static const struct want w[] = {
	    {BEGIN, NULL, ANY},
	    {NFT_MSG_NEWSETELEM, "doors", 3},
	    {NFT_MSG_DELSETELEM, "doors", 3},
	    {NFT_MSG_NEWOBJ, "tx-10.88.1.7", ANY},
	    {NFT_MSG_NEWOBJ, "rx-10.88.1.7", ANY},
	    {NFT_MSG_NEWSETELEM, "tx", 1},
	    {NFT_MSG_NEWSETELEM, "rx", 1},
	    {NFT_MSG_DELSETELEM, "tx", 1},
	    {NFT_MSG_DELSETELEM, "rx", 1},
	    {NFT_MSG_DELOBJ, "tx-10.88.1.7", ANY},
	    {NFT_MSG_DELOBJ, "rx-10.88.1.7", ANY},
	    {NFT_MSG_NEWSETELEM, "hosts", 1},
	    {NFT_MSG_DELSETELEM, "hosts", 1},
	    {END, NULL, ANY},
	};
	struct fw_sbx s = sbx(&lanes[L_TRANS], 7, true);
	struct fw_batch *b = fw_batch_new();
	struct dec d;

	(void)state;
	assert_int_equal(fw_build_detach(b, &s), 0);
	decode(b, &d);
	expect(&d, w, sizeof(w) / sizeof(w[0]));
	each_elem(&d.m[8], check_ctr_elem, "rx-10.88.1.7");
	each_elem(&d.m[12], check_host_key, NULL);
	dec_free(&d);
	fw_batch_free(b);
}

/* Several batches in one buffer: each BEGIN .. END, numbered on. */
static void
test_batches_append(void **state)
{
	struct fw_sbx s = sbx(&lanes[L_TRANS], 7, false);
	struct fw_batch *b = fw_batch_new();
	struct dec d;

	(void)state;
	assert_int_equal(fw_build_attach(b, &s), 0);
	assert_int_equal(fw_build_unlock(b, &s), 0);
	assert_int_equal(fw_build_remove(b), 0);
	decode(b, &d);
	assert_int_equal(d.batches, 3);
	assert_int_equal(d.n, 7 + 3 + 4);
	dec_free(&d);
	fw_batch_free(b);
}

/* ---- reconcile ------------------------------------------------------ */

static void
check_set(const struct msg *m, uint32_t key_type, uint32_t key_len, uint32_t flags)
{
	struct nftnl_set *s = nftnl_set_alloc();

	assert_int_equal(nftnl_set_nlmsg_parse(m->nlh, s), 0);
	assert_int_equal(nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE), key_type);
	assert_int_equal(nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN), key_len);
	assert_int_equal(nftnl_set_get_u32(s, NFTNL_SET_FLAGS), flags);
	if (flags & NFT_SET_OBJECT)
		assert_int_equal(nftnl_set_get_u32(s, NFTNL_SET_OBJ_TYPE), NFT_OBJECT_COUNTER);
	nftnl_set_free(s);
}

static void
check_chain(const struct msg *m, const char *type, uint32_t hook, int32_t prio, uint32_t policy)
{
	struct nftnl_chain *c = nftnl_chain_alloc();

	assert_int_equal(nftnl_chain_nlmsg_parse(m->nlh, c), 0);
	assert_string_equal(nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE), type);
	assert_int_equal(nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM), hook);
	assert_int_equal(nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO), prio);
	assert_int_equal(nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY), policy);
	nftnl_chain_free(c);
}

struct expr_list {
	char names[24][16];
	struct nftnl_expr *x[24];
	size_t n;
};

static int
expr_cb(struct nftnl_expr *x, void *data)
{
	struct expr_list *l = data;

	assert_true(l->n < 24);
	snprintf(l->names[l->n], 16, "%s", nftnl_expr_get_str(x, NFTNL_EXPR_NAME));
	l->x[l->n++] = x;
	return 0;
}

/* The expressions of rule message m, by name, space-separated. */
static void
check_rule(const struct msg *m, const char *names, void (*more)(struct expr_list *))
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct expr_list l = {.n = 0};
	char got[256] = "";

	assert_int_equal(nftnl_rule_nlmsg_parse(m->nlh, r), 0);
	nftnl_expr_foreach(r, expr_cb, &l);
	for (size_t i = 0; i < l.n; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s", i ? " " : "",
		         l.names[i]);
	assert_string_equal(got, names);
	if (more)
		more(&l);
	nftnl_rule_free(r);
}

/* iifname . ip saddr != @hosts: 16 bytes of name, then the address */
static void
more_spoof(struct expr_list *l)
{
	uint32_t len;
	const char *slv = nftnl_expr_get(l->x[1], NFTNL_EXPR_CMP_DATA, &len);

	assert_int_equal(len, 3);
	assert_memory_equal(slv, "slv", 3);
	assert_int_equal(nftnl_expr_get_u32(l->x[4], NFTNL_EXPR_META_DREG), NFT_REG32_00);
	assert_int_equal(nftnl_expr_get_u32(l->x[5], NFTNL_EXPR_PAYLOAD_DREG), NFT_REG32_04);
	assert_int_equal(nftnl_expr_get_u32(l->x[6], NFTNL_EXPR_LOOKUP_SREG), NFT_REG32_00);
	assert_int_equal(nftnl_expr_get_u32(l->x[6], NFTNL_EXPR_LOOKUP_FLAGS), NFT_LOOKUP_F_INV);
	assert_string_equal(nftnl_expr_get_str(l->x[6], NFTNL_EXPR_LOOKUP_SET), "hosts");
	assert_int_equal(nftnl_expr_get_u32(l->x[7], NFTNL_EXPR_IMM_VERDICT), NF_DROP);
}

/* ip saddr 10.88.1.0/24 tcp dport 80 dnat ip to 10.88.1.1:3128 */
static void
more_http(struct expr_list *l)
{
	static const uint8_t mask[4] = {255, 255, 255, 0}, net[4] = {10, 88, 1, 0},
	                     gw[4] = {10, 88, 1, 1}, dport[2] = {0, 80},
	                     to[2] = {3128 >> 8, 3128 & 0xff};
	uint32_t len;

	assert_memory_equal(nftnl_expr_get(l->x[5], NFTNL_EXPR_BITWISE_MASK, &len), mask, 4);
	assert_memory_equal(nftnl_expr_get(l->x[6], NFTNL_EXPR_CMP_DATA, &len), net, 4);
	assert_memory_equal(nftnl_expr_get(l->x[10], NFTNL_EXPR_CMP_DATA, &len), dport, 2);
	assert_int_equal(len, 2);
	assert_memory_equal(nftnl_expr_get(l->x[11], NFTNL_EXPR_IMM_DATA, &len), gw, 4);
	assert_memory_equal(nftnl_expr_get(l->x[12], NFTNL_EXPR_IMM_DATA, &len), to, 2);
	assert_int_equal(nftnl_expr_get_u32(l->x[13], NFTNL_EXPR_NAT_TYPE), NFT_NAT_DNAT);
	assert_int_equal(nftnl_expr_get_u32(l->x[13], NFTNL_EXPR_NAT_FAMILY), NFPROTO_IPV4);
}

static void
more_doors(struct expr_list *l)
{
	assert_int_equal(nftnl_expr_get_u32(l->x[4], NFTNL_EXPR_PAYLOAD_DREG), NFT_REG32_00);
	assert_int_equal(nftnl_expr_get_u32(l->x[5], NFTNL_EXPR_PAYLOAD_DREG), NFT_REG32_01);
	assert_int_equal(nftnl_expr_get_u32(l->x[6], NFTNL_EXPR_PAYLOAD_DREG), NFT_REG32_02);
	assert_int_equal(nftnl_expr_get_u32(l->x[6], NFTNL_EXPR_PAYLOAD_LEN), 2);
	assert_string_equal(nftnl_expr_get_str(l->x[7], NFTNL_EXPR_LOOKUP_SET), "doors");
}

/* The doors rules: TCP, then UDP (the DNS door): the l4proto compared. */
static void
more_doors_tcp(struct expr_list *l)
{
	uint32_t len;
	const uint8_t *v = nftnl_expr_get(l->x[3], NFTNL_EXPR_CMP_DATA, &len);

	more_doors(l);
	assert_int_equal(len, 1);
	assert_int_equal(v[0], IPPROTO_TCP);
}

static void
more_doors_udp(struct expr_list *l)
{
	uint32_t len;
	const uint8_t *v = nftnl_expr_get(l->x[3], NFTNL_EXPR_CMP_DATA, &len);

	more_doors(l);
	assert_int_equal(len, 1);
	assert_int_equal(v[0], IPPROTO_UDP);
}

#define N_SBX 700 /* more than one element message per set */

static void
test_reconcile(void **state)
{
	struct fw_sbx *s = calloc(N_SBX, sizeof(*s));
	struct fw_batch *b = fw_batch_new();
	size_t want_doors = 0, nobj = 0, i, rules[4] = {0};
	size_t elems[4] = {0}; /* hosts, tx, rx, doors */
	static const char *const setn[] = {"hosts", "tx", "rx", "doors"};
	static const char *const chainn[] = {"pre", "nat_pre", "input", "output"};
	struct dec d;

	(void)state;
	for (i = 0; i < N_SBX; i++) {
		const struct fw_lane *l = &lanes[i % NLANES];

		s[i] = sbx(l, 2 + (uint32_t)(i / NLANES), i % 2 == 0);
		s[i].start.tx_packets = i;
		if (s[i].unlocked)
			want_doors += l->nports;
	}
	assert_int_equal(fw_build_reconcile(b, lanes, NLANES, s, N_SBX), 0);
	decode(b, &d);
	assert_int_equal(d.batches, 1);
	assert_int_equal(d.m[0].type, BEGIN);
	assert_int_equal(d.m[1].type, NFT_MSG_NEWTABLE);
	assert_int_equal(d.m[2].type, NFT_MSG_DELTABLE);
	assert_int_equal(d.m[3].type, NFT_MSG_NEWTABLE);
	assert_string_equal(d.m[3].name, "sluice");
	assert_string_equal(d.m[4].name, "pre");
	check_chain(&d.m[4], "filter", NF_INET_PRE_ROUTING, -300, NF_ACCEPT);
	assert_string_equal(d.m[5].name, "nat_pre");
	check_chain(&d.m[5], "nat", NF_INET_PRE_ROUTING, -100, NF_ACCEPT);
	assert_string_equal(d.m[6].name, "input");
	check_chain(&d.m[6], "filter", NF_INET_LOCAL_IN, 0, NF_DROP);
	assert_string_equal(d.m[7].name, "forward");
	check_chain(&d.m[7], "filter", NF_INET_FORWARD, 0, NF_DROP);
	assert_string_equal(d.m[8].name, "output");
	check_chain(&d.m[8], "filter", NF_INET_LOCAL_OUT, 0, NF_ACCEPT);
	assert_string_equal(d.m[9].name, "hosts");
	check_set(&d.m[9], (41 << 6) | 7, 20, 0);
	assert_string_equal(d.m[10].name, "doors");
	check_set(&d.m[10], (((7 << 6) | 7) << 6) | 13, 12, 0);
	assert_string_equal(d.m[11].name, "tx");
	check_set(&d.m[11], 7, 4, NFT_SET_OBJECT);
	assert_string_equal(d.m[12].name, "rx");
	check_set(&d.m[12], 7, 4, NFT_SET_OBJECT);
	check_rule(&d.m[13], "meta cmp meta cmp immediate", NULL);
	check_rule(&d.m[14], "meta cmp meta cmp meta payload lookup immediate", more_spoof);
	check_rule(&d.m[15], "meta cmp meta cmp payload objref", NULL);
	check_rule(&d.m[16],
	           "meta cmp meta cmp payload bitwise cmp meta cmp payload cmp immediate "
	           "immediate nat",
	           more_http);
	check_rule(&d.m[19], "meta cmp meta cmp payload payload payload lookup immediate",
	           more_doors_tcp);
	for (i = 13; i < d.n; i++) {
		const struct msg *m = &d.m[i];

		if (m->type == NFT_MSG_NEWRULE) {
			assert_int_equal(nobj, 0); /* rules come before objects */
			for (size_t k = 0; k < 4; k++)
				rules[k] += strcmp(m->name, chainn[k]) == 0;
		} else if (m->type == NFT_MSG_NEWOBJ) {
			if (nobj < 2)
				check_counter(m, 0, 0);
			if (nobj == 2)
				check_counter(m, 1, 0);
			nobj++;
		} else if (m->type == NFT_MSG_NEWSETELEM) {
			assert_true(m->n >= 1 && m->n <= 256);
			assert_int_equal(nobj, 2 * N_SBX); /* after every counter */
			for (size_t k = 0; k < 4; k++)
				if (strcmp(m->name, setn[k]) == 0)
					elems[k] += m->n;
		} else {
			assert_int_equal(i, d.n - 1);
			assert_int_equal(m->type, END);
		}
	}
	assert_int_equal(rules[0], 3);
	assert_int_equal(rules[1], 2); /* one transparent lane, two ports */
	assert_int_equal(rules[2], 3); /* lo, the doors over TCP, over UDP (DNS) */
	assert_int_equal(rules[3], 4); /* count, the doors' answers (TCP, UDP), drop */
	check_rule(&d.m[20], "meta cmp meta cmp payload payload payload lookup immediate",
	           more_doors_udp);
	check_rule(&d.m[22], "meta cmp meta cmp meta cmp payload payload payload lookup immediate",
	           NULL);
	check_rule(&d.m[23], "meta cmp meta cmp meta cmp payload payload payload lookup immediate",
	           NULL);
	check_rule(&d.m[24], "meta cmp immediate", NULL);
	assert_int_equal(nobj, 2 * N_SBX);
	assert_int_equal(elems[0], N_SBX);
	assert_int_equal(elems[1], N_SBX);
	assert_int_equal(elems[2], N_SBX);
	assert_int_equal(elems[3], want_doors);
	dec_free(&d);
	fw_batch_free(b);
	free(s);
}

/* Nothing at all: the table, its chains, sets and fixed rules. */
static void
test_reconcile_empty(void **state)
{
	struct fw_batch *b = fw_batch_new();
	size_t rules = 0;
	struct dec d;

	(void)state;
	assert_int_equal(fw_build_reconcile(b, NULL, 0, NULL, 0), 0);
	decode(b, &d);
	assert_int_equal(d.n, 1 + 3 + 5 + 4 + 10 + 1);
	for (size_t i = 0; i < d.n; i++)
		rules += d.m[i].type == NFT_MSG_NEWRULE;
	assert_int_equal(rules, 10);
	dec_free(&d);
	fw_batch_free(b);
}

/* ---- a real kernel, in a namespace of our own ------------------------ */

/* The number of elements of set `name` (GETSETELEM dump), or -errno. */
static int
count_elems(const char *name)
{
	struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
	static char buf[32768];
	struct nftnl_set *s = nftnl_set_alloc();
	struct nlmsghdr *nlh;
	int n = 0, ret;

	assert_non_null(nl);
	assert_int_equal(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	nftnl_set_set_str(s, NFTNL_SET_TABLE, "sluice");
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP, 1);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	assert_true(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) > 0);
	for (;;) {
		ssize_t len = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		const struct nlmsghdr *m = (const struct nlmsghdr *)buf;
		int left = (int)len;

		assert_true(len > 0);
		for (; mnl_nlmsg_ok(m, left); m = mnl_nlmsg_next(m, &left)) {
			if (m->nlmsg_type == NLMSG_DONE)
				goto out;
			if (m->nlmsg_type == NLMSG_ERROR) {
				ret = ((const struct nlmsgerr *)mnl_nlmsg_get_payload(m))->error;
				if (ret) {
					n = ret;
					goto out;
				}
				continue;
			}
			char set[32];

			n += (int)parse_elems(m, set, sizeof(set), NULL, 0);
		}
	}
out:
	mnl_socket_close(nl);
	return n;
}

static void
run(struct fw_ctx *c, struct fw_batch *b, int want, const char *err_has)
{
	char err[256] = "";
	int ret = fw_commit(c, b, err, sizeof(err));

	if (ret != want)
		fail_msg("commit: %d, want %d: %s", ret, want, err);
	if (err_has && !strstr(err, err_has))
		fail_msg("error \"%s\" lacks \"%s\"", err, err_has);
	fw_batch_reset(b);
}

struct seen {
	size_t n;
	struct fw_counters sum;
};

static int
seen_cb(void *arg, struct in_addr a, const struct fw_counters *n)
{
	struct seen *s = arg;

	(void)a;
	s->n++;
	s->sum.tx_packets += n->tx_packets;
	s->sum.rx_bytes += n->rx_bytes;
	return 0;
}

static int
stop_cb(void *arg, struct in_addr a, const struct fw_counters *n)
{
	(void)arg;
	(void)a;
	(void)n;
	return -ECANCELED;
}

static void
test_kernel(void **state)
{
	struct fw_sbx s[3], x = sbx(&lanes[L_TRANS], 50, false);
	struct fw_counters n;
	struct fw_batch *b;
	struct fw_ctx *c;
	struct seen seen = {0};
	char err[256];

	(void)state;
	if (geteuid() != 0)
		sl_skip("kernel: committing to a real kernel needs root");
	/* as root, a namespace of our own must be had: no skip */
	assert_int_equal(unshare(CLONE_NEWNET), 0);
	b = fw_batch_new();
	c = fw_open(err, sizeof(err));
	assert_non_null(c);

	/* no table yet */
	assert_int_equal(fw_table_exists(c), 0);
	assert_int_equal(fw_counters_get(c, x.addr, &n), -ENOENT);
	assert_int_equal(fw_counters_dump(c, seen_cb, &seen), 0);
	assert_int_equal(seen.n, 0);
	assert_int_equal(fw_build_attach(b, &x), 0);
	run(c, b, -ENOENT, "NEWSETELEM hosts (message 1 of batch 1)");

	/* reconcile, twice: with and without a table before */
	s[0] = sbx(&lanes[L_TRANS], 7, true);
	s[0].start = (struct fw_counters){10, 1000, 20, 2000};
	s[1] = sbx(&lanes[L_PLAIN], 7, true);
	s[2] = sbx(&lanes[L_NONE], 7, true);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(fw_build_reconcile(b, lanes, NLANES, s, 3), 0);
		run(c, b, 0, NULL);
	}
	assert_int_equal(fw_table_exists(c), 1);
	assert_int_equal(count_elems("hosts"), 3);
	assert_int_equal(count_elems("doors"), 3 + 2);
	assert_int_equal(fw_counters_get(c, s[0].addr, &n), 0);
	assert_int_equal(n.tx_packets, 10);
	assert_int_equal(n.tx_bytes, 1000);
	assert_int_equal(n.rx_packets, 20);
	assert_int_equal(n.rx_bytes, 2000);
	assert_int_equal(fw_counters_dump(c, seen_cb, &seen), 0);
	assert_int_equal(seen.n, 3);
	assert_int_equal(seen.sum.tx_packets, 10);
	assert_int_equal(seen.sum.rx_bytes, 2000);
	assert_int_equal(fw_counters_dump(c, stop_cb, NULL), -ECANCELED);

	/* every operation twice; detach of the never attached too */
	x.start.tx_packets = 4;
	for (int k = 0; k < 2; k++) {
		assert_int_equal(fw_build_attach(b, &x), 0);
		run(c, b, 0, NULL);
		assert_int_equal(count_elems("hosts"), 4);
		assert_int_equal(fw_counters_get(c, x.addr, &n), 0);
		assert_int_equal(n.tx_packets, 4);
	}
	for (int k = 0; k < 2; k++) {
		assert_int_equal(fw_build_unlock(b, &x), 0);
		run(c, b, 0, NULL);
		assert_int_equal(count_elems("doors"), 5 + 3);
	}
	for (int k = 0; k < 2; k++) {
		assert_int_equal(fw_build_lock(b, &x), 0);
		run(c, b, 0, NULL);
		assert_int_equal(count_elems("doors"), 5);
	}
	assert_int_equal(fw_build_unlock(b, &x), 0);
	run(c, b, 0, NULL);
	/* a lane without doors: an empty batch, nothing to answer */
	assert_int_equal(fw_build_unlock(b, &s[2]), 0);
	run(c, b, 0, NULL);
	for (int k = 0; k < 3; k++) {
		struct fw_sbx never = sbx(&lanes[L_PLAIN], 100, false);

		assert_int_equal(fw_build_detach(b, k < 2 ? &x : &never), 0);
		run(c, b, 0, NULL);
		assert_int_equal(count_elems("hosts"), 3);
		assert_int_equal(count_elems("doors"), 5);
		assert_int_equal(fw_counters_get(c, x.addr, &n), -ENOENT);
	}

	/* a failing batch after a good one: the first stays, the error names
	 * the second */
	assert_int_equal(fw_build_remove(b), 0);
	assert_int_equal(fw_build_unlock(b, &s[0]), 0);
	run(c, b, -ENOENT, "NEWSETELEM doors (message 1 of batch 2)");
	assert_int_equal(fw_table_exists(c), 0);

	/* remove twice, on no table */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(fw_build_remove(b), 0);
		run(c, b, 0, NULL);
		assert_int_equal(fw_table_exists(c), 0);
	}
	fw_close(c);
	fw_batch_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_null_args, setup),
	    cmocka_unit_test_setup(test_bad_lane, setup),
	    cmocka_unit_test_setup(test_bad_sbx, setup),
	    cmocka_unit_test_setup(test_bad_reconcile, setup),
	    cmocka_unit_test_setup(test_ifname, setup),
	    cmocka_unit_test_setup(test_remove, setup),
	    cmocka_unit_test_setup(test_attach, setup),
	    cmocka_unit_test_setup(test_unlock_lock, setup),
	    cmocka_unit_test_setup(test_unlock_none, setup),
	    cmocka_unit_test_setup(test_detach, setup),
	    cmocka_unit_test_setup(test_batches_append, setup),
	    cmocka_unit_test_setup(test_reconcile, setup),
	    cmocka_unit_test_setup(test_reconcile_empty, setup),
	    cmocka_unit_test_setup(test_kernel, setup), /* last: it unshares */
	};

	return sl_main_exit(cmocka_run_group_tests(tests, NULL, NULL));
}
