/* nft.c: the `inet sluice` table, built with libnftnl, committed with
 * libmnl. See nft.h.
 *
 * The table (this is the contract; `nft list table inet sluice` in the
 * fleet namespace prints it like this):
 *
 * table inet sluice {
 *   set hosts { type ifname . ipv4_addr }
 *       attached sandboxes, link . address: a sandbox may only speak from
 *       its own address on its own link (anti-spoofing)
 *   set doors { type ipv4_addr . ipv4_addr . inet_service }
 *       unlocked sandboxes: sandbox address . lane gateway . door port
 *   map tx { type ipv4_addr : counter }    what each sandbox sent
 *   map rx { type ipv4_addr : counter }    what it was sent
 *   counter tx-10.88.1.7, rx-10.88.1.7     two per attached sandbox
 *
 *   chain pre { type filter hook prerouting priority raw (-300); policy accept;
 *     iifname "slv*" meta nfproto != ipv4 drop          (no IPv6 from guests)
 *     iifname "slv*" iifname . ip saddr != @hosts drop  (spoofed or detached)
 *     iifname "slv*" counter name ip saddr map @tx      (before NAT: true sources)
 *   }
 *   chain nat_pre { type nat hook prerouting priority dstnat (-100); policy accept;
 *     per transparent lane, one rule per port it redirects:
 *     iifname "slv*" ip saddr 10.88.1.0/24 tcp dport 80 dnat ip to 10.88.1.1:3128
 *     iifname "slv*" ip saddr 10.88.1.0/24 tcp dport 443 dnat ip to 10.88.1.1:3129
 *     per lane with a name door, before those:
 *     iifname "slv*" ip saddr 10.88.1.0/24 ip daddr 198.18.0.0/15 tcp dnat ip to 10.88.1.1:3130
 *   }
 *   chain input { type filter hook input priority filter (0); policy drop;
 *     iif "lo" accept
 *     ip saddr . ip daddr . tcp dport @doors accept     (with the meta
 *                                 nfproto ipv4 / l4proto tcp dependencies)
 *     ip saddr . ip daddr . udp dport @doors accept     (the DNS door)
 *   }
 *   chain forward { type filter hook forward priority filter (0); policy drop; }
 *   chain output { type filter hook output priority filter (0); policy accept;
 *     oifname "slv*" counter name ip daddr map @rx
 *     oifname "slv*" ip daddr . ip saddr . tcp sport @doors accept
 *     oifname "slv*" ip daddr . ip saddr . udp sport @doors accept
 *     oifname "slv*" drop        (a lock cuts open connections both ways)
 *   }
 * }
 *
 * So a sandbox reaches the fleet namespace only on its lane's door ports
 * at its lane's gateway address, and only while unlocked; it reaches
 * nothing else (forward drops); a locked sandbox, or one in a lane without
 * ports, reaches nothing at all. Transparent lanes turn tcp/80 and tcp/443
 * to any address into connections to the gateway's doors, which the doors
 * element for that port then lets in.
 *
 * Every fw_build_* writes one batch: BEGIN, messages, END, each message with
 * NLM_F_ACK. Deletes are made idempotent without the kernel's newer
 * DESTROY messages: the batch first adds what it deletes (an existing
 * element or object is left alone by an add without NLM_F_EXCL), so the
 * delete always finds it. Set elements go in messages of at most
 * ELEMS_PER_MSG elements (netlink nests are limited to 64 KiB).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "nft.h"

#define MSG_ROOM      (64 * 1024) /* free bytes ensured before each message */
#define ELEMS_PER_MSG 256         /* < 100 bytes each: far below 64 KiB */
#define RX_SIZE       (32 * 1024) /* a netlink dump part fits (NLMSG_GOODSIZE..32K) */
#define CTR_NAME_MAX  24          /* "tx-255.255.255.255" */
#define LO_IFINDEX    1           /* loopback is 1 in every namespace */

/* nft's datatype numbers (src/datatype.h), for NFTA_SET_KEY_TYPE: they let
 * `nft list` print keys as addresses, names and ports. */
#define TYPE_IPADDR       7
#define TYPE_INET_SERVICE 13
#define TYPE_IFNAME       41
#define TYPE_BITS         6
#define CONCAT2(a, b)     (((a) << TYPE_BITS) | (b))
#define CONCAT3(a, b, c)  (CONCAT2(CONCAT2(a, b), c))

#define HOST_KEY_LEN (FW_IFNAMSIZ + 4) /* ifname . ipv4_addr */
#define DOOR_KEY_LEN 12                /* ipv4_addr . ipv4_addr . port+pad */

/* ---- the batch buffer ------------------------------------------------- */

struct fw_batch {
	char *buf;
	size_t len, cap;
	uint32_t seq; /* of the next message */
};

/* Where a batch started, to take it back on error. */
struct mark {
	size_t len;
	uint32_t seq;
};

struct fw_batch *
fw_batch_new(void)
{
	struct fw_batch *b = calloc(1, sizeof(*b));

	if (b)
		b->seq = 1;
	return b;
}

void
fw_batch_free(struct fw_batch *b)
{
	if (!b)
		return;
	free(b->buf);
	free(b);
}

void
fw_batch_reset(struct fw_batch *b)
{
	if (!b)
		return;
	b->len = 0;
	b->seq = 1;
}

const void *
fw_batch_data(const struct fw_batch *b, size_t *len)
{
	*len = b ? b->len : 0;
	return b ? b->buf : NULL;
}

/* Makes MSG_ROOM bytes free at the end of b. */
static int
reserve(struct fw_batch *b)
{
	size_t cap;
	char *p;

	if (b->cap - b->len >= MSG_ROOM)
		return 0;
	cap = b->cap ? b->cap * 2 : 2 * MSG_ROOM;
	while (cap - b->len < MSG_ROOM)
		cap *= 2;
	p = realloc(b->buf, cap);
	if (!p)
		return -ENOMEM;
	b->buf = p;
	b->cap = cap;
	return 0;
}

/* A message header of type NFT_MSG_* at the end of b (room reserved), or
 * NULL when out of memory. Finish it with msg_end(). */
static struct nlmsghdr *
msg_begin(struct fw_batch *b, uint16_t type, uint16_t flags)
{
	if (reserve(b) < 0)
		return NULL;
	return nftnl_nlmsg_build_hdr(b->buf + b->len, type, NFPROTO_INET, flags | NLM_F_ACK,
	                             b->seq++);
}

static void
msg_end(struct fw_batch *b, const struct nlmsghdr *nlh)
{
	b->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

static int
batch_open(struct fw_batch *b, struct mark *m)
{
	m->len = b->len;
	m->seq = b->seq;
	if (reserve(b) < 0)
		return -ENOMEM;
	msg_end(b, nftnl_batch_begin(b->buf + b->len, b->seq++));
	return 0;
}

static int
batch_close(struct fw_batch *b)
{
	if (reserve(b) < 0)
		return -ENOMEM;
	msg_end(b, nftnl_batch_end(b->buf + b->len, b->seq++));
	return 0;
}

typedef int (*body_fn)(struct fw_batch *b, const void *arg);

/* One batch around body(b, arg), or nothing at all on error. */
static int
build(struct fw_batch *b, body_fn body, const void *arg)
{
	struct mark m;
	int err;

	err = batch_open(b, &m);
	if (!err)
		err = body(b, arg);
	if (!err)
		err = batch_close(b);
	if (err) {
		b->len = m.len;
		b->seq = m.seq;
	}
	return err;
}

/* ---- checks ------------------------------------------------------------ */

static uint32_t
mask_of(uint8_t prefix)
{
	return prefix ? ~UINT32_C(0) << (32 - prefix) : 0;
}

static bool
in_lane(struct in_addr a, const struct fw_lane *l)
{
	uint32_t m = mask_of(l->prefix);

	return (ntohl(a.s_addr) & m) == ntohl(l->subnet.s_addr);
}

/* A host address of l: inside it, and not its network or broadcast
 * address where those exist (prefixes up to /30). */
static bool
host_of(struct in_addr a, const struct fw_lane *l)
{
	uint32_t m = mask_of(l->prefix), host = ntohl(a.s_addr) & ~m;

	if (!in_lane(a, l))
		return false;
	return l->prefix > 30 || (host != 0 && host != ~m);
}

static bool
has_port(const struct fw_lane *l, uint16_t port)
{
	for (size_t i = 0; i < l->nports; i++)
		if (l->ports[i] == port)
			return true;
	return false;
}

static int
lane_check(const struct fw_lane *l)
{
	if (!l || l->prefix > 32 || l->nports > FW_MAX_PORTS)
		return -EINVAL;
	if (ntohl(l->subnet.s_addr) & ~mask_of(l->prefix))
		return -EINVAL; /* host bits in the subnet */
	if (!host_of(l->gateway, l))
		return -EINVAL;
	for (size_t i = 0; i < l->nports; i++) {
		if (l->ports[i] == 0)
			return -EINVAL;
		for (size_t j = 0; j < i; j++)
			if (l->ports[j] == l->ports[i])
				return -EINVAL;
	}
	/* A redirect to a port that is no door would lead nowhere. */
	if (l->http_port && !has_port(l, l->http_port))
		return -EINVAL;
	if (l->tls_port && !has_port(l, l->tls_port))
		return -EINVAL;
	return 0;
}

static int
sbx_check(const struct fw_sbx *s)
{
	size_t n;
	int err;

	if (!s)
		return -EINVAL;
	err = lane_check(s->lane);
	if (err)
		return err;
	n = strnlen(s->ifname, sizeof(s->ifname));
	if (n == sizeof(s->ifname) || n <= strlen(FW_IFPREFIX) ||
	    strncmp(s->ifname, FW_IFPREFIX, strlen(FW_IFPREFIX)) != 0)
		return -EINVAL; /* the chains only look at "slv*" links */
	if (!host_of(s->addr, s->lane) || s->addr.s_addr == s->lane->gateway.s_addr)
		return -EINVAL;
	return 0;
}

static bool
lanes_overlap(const struct fw_lane *a, const struct fw_lane *b)
{
	uint32_t m = mask_of(a->prefix < b->prefix ? a->prefix : b->prefix);

	return (ntohl(a->subnet.s_addr) & m) == (ntohl(b->subnet.s_addr) & m);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool
same_lane(const struct fw_lane *a, const struct fw_lane *b)
{
	if (a->subnet.s_addr != b->subnet.s_addr || a->prefix != b->prefix ||
	    a->gateway.s_addr != b->gateway.s_addr || a->nports != b->nports ||
	    a->http_port != b->http_port || a->tls_port != b->tls_port)
		return false;
	return memcmp(a->ports, b->ports, a->nports * sizeof(a->ports[0])) == 0;
}

/* Is l one of lanes[0..n), or a copy of one? */
static bool
lane_known(const struct fw_lane *l, const struct fw_lane *lanes, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (l == &lanes[i] || same_lane(l, &lanes[i]))
			return true;
	return false;
}

static int
reconcile_check(const struct fw_lane *lanes, size_t nlanes, const struct fw_sbx *s, size_t ns)
{
	uint32_t *addrs;
	int err = 0;

	if ((nlanes && !lanes) || (ns && !s))
		return -EINVAL;
	for (size_t i = 0; i < nlanes; i++) {
		err = lane_check(&lanes[i]);
		if (err)
			return err;
		for (size_t j = 0; j < i; j++)
			if (lanes_overlap(&lanes[i], &lanes[j]))
				return -EINVAL;
	}
	for (size_t i = 0; i < ns; i++) {
		err = sbx_check(&s[i]);
		if (err)
			return err;
		if (!lane_known(s[i].lane, lanes, nlanes))
			return -EINVAL;
	}
	if (ns < 2)
		return 0;
	addrs = malloc(ns * sizeof(*addrs));
	if (!addrs)
		return -ENOMEM;
	for (size_t i = 0; i < ns; i++)
		addrs[i] = ntohl(s[i].addr.s_addr);
	qsort(addrs, ns, sizeof(*addrs), cmp_u32);
	for (size_t i = 1; i < ns && !err; i++)
		if (addrs[i] == addrs[i - 1])
			err = -EINVAL;
	free(addrs);
	return err;
}

/* ---- tables, chains, sets, objects -------------------------------------- */

static int
put_table(struct fw_batch *b, uint16_t type)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nlmsghdr *nlh;
	int err = -ENOMEM;

	if (!t)
		return -ENOMEM;
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	if (nftnl_table_set_str(t, NFTNL_TABLE_NAME, FW_TABLE) < 0)
		goto out;
	nlh = msg_begin(b, type, type == NFT_MSG_NEWTABLE ? NLM_F_CREATE : 0);
	if (!nlh)
		goto out;
	nftnl_table_nlmsg_build_payload(nlh, t);
	msg_end(b, nlh);
	err = 0;
out:
	nftnl_table_free(t);
	return err;
}

struct chain_def {
	const char *name;
	const char *type;
	uint32_t hook;
	int32_t prio;
	uint32_t policy;
};

static const struct chain_def chains[] = {
    {"pre", "filter", NF_INET_PRE_ROUTING, -300, NF_ACCEPT},
    {"nat_pre", "nat", NF_INET_PRE_ROUTING, -100, NF_ACCEPT},
    {"input", "filter", NF_INET_LOCAL_IN, 0, NF_DROP},
    {"forward", "filter", NF_INET_FORWARD, 0, NF_DROP},
    {"output", "filter", NF_INET_LOCAL_OUT, 0, NF_ACCEPT},
};

static int
put_chain(struct fw_batch *b, const struct chain_def *d)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nlmsghdr *nlh;
	int err = -ENOMEM;

	if (!c)
		return -ENOMEM;
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, d->hook);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, d->prio);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, d->policy);
	if (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, FW_TABLE) < 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, d->name) < 0 ||
	    nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, d->type) < 0)
		goto out;
	nlh = msg_begin(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
	if (!nlh)
		goto out;
	nftnl_chain_nlmsg_build_payload(nlh, c);
	msg_end(b, nlh);
	err = 0;
out:
	nftnl_chain_free(c);
	return err;
}

struct set_def {
	const char *name;
	uint32_t key_type, key_len;
	uint32_t flags; /* NFT_SET_OBJECT: a map to counters */
};

static const struct set_def sets[] = {
    {"hosts", CONCAT2(TYPE_IFNAME, TYPE_IPADDR), HOST_KEY_LEN, 0},
    {"doors", CONCAT3(TYPE_IPADDR, TYPE_IPADDR, TYPE_INET_SERVICE), DOOR_KEY_LEN, 0},
    {"tx", TYPE_IPADDR, 4, NFT_SET_OBJECT},
    {"rx", TYPE_IPADDR, 4, NFT_SET_OBJECT},
};

/* An nftnl_set naming set `name` of the table, for element messages. */
static struct nftnl_set *
set_ref(const char *name)
{
	struct nftnl_set *s = nftnl_set_alloc();

	if (!s)
		return NULL;
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	if (nftnl_set_set_str(s, NFTNL_SET_TABLE, FW_TABLE) < 0 ||
	    nftnl_set_set_str(s, NFTNL_SET_NAME, name) < 0) {
		nftnl_set_free(s);
		return NULL;
	}
	return s;
}

static int
put_set(struct fw_batch *b, const struct set_def *d, uint32_t id)
{
	struct nftnl_set *s = set_ref(d->name);
	struct nlmsghdr *nlh;

	if (!s)
		return -ENOMEM;
	nftnl_set_set_u32(s, NFTNL_SET_ID, id);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, d->key_type);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, d->key_len);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, d->flags);
	if (d->flags & NFT_SET_OBJECT)
		nftnl_set_set_u32(s, NFTNL_SET_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nlh = msg_begin(b, NFT_MSG_NEWSET, NLM_F_CREATE);
	if (nlh) {
		nftnl_set_nlmsg_build_payload(nlh, s);
		msg_end(b, nlh);
	}
	nftnl_set_free(s);
	return nlh ? 0 : -ENOMEM;
}

/* "tx-10.88.1.7" */
static void
ctr_name(const char *side, struct in_addr a, char out[CTR_NAME_MAX])
{
	char ip[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	snprintf(out, CTR_NAME_MAX, "%s-%s", side, ip);
}

/* NEWOBJ (starting at pkts/bytes if created) or DELOBJ of a counter. */
static int
put_counter(struct fw_batch *b, uint16_t type, const char *side, struct in_addr a, uint64_t pkts,
            uint64_t bytes)
{
	struct nftnl_obj *o = nftnl_obj_alloc();
	char name[CTR_NAME_MAX];
	struct nlmsghdr *nlh;
	int err = -ENOMEM;

	if (!o)
		return -ENOMEM;
	ctr_name(side, a, name);
	nftnl_obj_set_u32(o, NFTNL_OBJ_FAMILY, NFPROTO_INET);
	nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
	nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, FW_TABLE);
	nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
	if (type == NFT_MSG_NEWOBJ) {
		nftnl_obj_set_u64(o, NFTNL_OBJ_CTR_PKTS, pkts);
		nftnl_obj_set_u64(o, NFTNL_OBJ_CTR_BYTES, bytes);
	}
	/* nftnl_obj_set_str() cannot report a failed strdup(): look. */
	if (!nftnl_obj_is_set(o, NFTNL_OBJ_TABLE) || !nftnl_obj_is_set(o, NFTNL_OBJ_NAME))
		goto out;
	nlh = msg_begin(b, type, type == NFT_MSG_NEWOBJ ? NLM_F_CREATE : 0);
	if (!nlh)
		goto out;
	nftnl_obj_nlmsg_build_payload(nlh, o);
	msg_end(b, nlh);
	err = 0;
out:
	nftnl_obj_free(o);
	return err;
}

/* ---- set elements ------------------------------------------------------ */

/* Elements for one set, one message type, flushed every ELEMS_PER_MSG. */
struct elems {
	struct fw_batch *b;
	const char *set;
	uint16_t type;       /* NFT_MSG_NEWSETELEM or NFT_MSG_DELSETELEM */
	struct nftnl_set *s; /* pending elements, or NULL */
	size_t n;
};

static struct elems
elems_make(struct fw_batch *b, const char *set, uint16_t type)
{
	struct elems e = {.b = b, .set = set, .type = type};

	return e;
}

static int
elems_flush(struct elems *e)
{
	struct nlmsghdr *nlh;

	if (!e->s)
		return 0;
	nlh = msg_begin(e->b, e->type, e->type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
	if (nlh) {
		nftnl_set_elems_nlmsg_build_payload(nlh, e->s);
		msg_end(e->b, nlh);
	}
	nftnl_set_free(e->s);
	e->s = NULL;
	e->n = 0;
	return nlh ? 0 : -ENOMEM;
}

/* Flushes e when err is 0, else drops what is pending; returns the error. */
static int
elems_end(struct elems *e, int err)
{
	if (!err)
		return elems_flush(e);
	if (e->s)
		nftnl_set_free(e->s);
	e->s = NULL;
	return err;
}

static int
elems_add(struct elems *e, const void *key, uint32_t klen, const char *objref)
{
	struct nftnl_set_elem *el;

	if (!e->s) {
		e->s = set_ref(e->set);
		if (!e->s)
			return -ENOMEM;
	}
	el = nftnl_set_elem_alloc();
	if (!el)
		return -ENOMEM;
	if (nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, key, klen) < 0 ||
	    (objref && nftnl_set_elem_set_str(el, NFTNL_SET_ELEM_OBJREF, objref) < 0)) {
		nftnl_set_elem_free(el);
		return -ENOMEM;
	}
	nftnl_set_elem_add(e->s, el);
	if (++e->n == ELEMS_PER_MSG)
		return elems_flush(e);
	return 0;
}

/* hosts: ifname (16 bytes, NUL-padded) . address */
static int
add_host(struct elems *e, const struct fw_sbx *s)
{
	uint8_t key[HOST_KEY_LEN] = {0};

	memcpy(key, s->ifname, strnlen(s->ifname, FW_IFNAMSIZ));
	memcpy(key + FW_IFNAMSIZ, &s->addr, 4);
	return elems_add(e, key, sizeof(key), NULL);
}

/* doors: address . gateway . port (2 bytes big-endian, 2 of padding),
 * one per lane port. */
static int
add_doors(struct elems *e, const struct fw_sbx *s)
{
	int err = 0;

	for (size_t i = 0; i < s->lane->nports && !err; i++) {
		uint8_t key[DOOR_KEY_LEN] = {0};
		uint16_t port = htons(s->lane->ports[i]);

		memcpy(key, &s->addr, 4);
		memcpy(key + 4, &s->lane->gateway, 4);
		memcpy(key + 8, &port, 2);
		err = elems_add(e, key, sizeof(key), NULL);
	}
	return err;
}

/* tx or rx: address : "tx-<address>" */
static int
add_ctr_elem(struct elems *e, const struct fw_sbx *s)
{
	char name[CTR_NAME_MAX];

	ctr_name(e->set, s->addr, name);
	return elems_add(e, &s->addr, 4, name);
}

typedef int (*elem_fn)(struct elems *e, const struct fw_sbx *s);

/* One element message series: fn(s[i]) for every i (ns >= 1). */
static int
put_elems(struct fw_batch *b, const char *set, uint16_t type, elem_fn fn, const struct fw_sbx *s,
          size_t ns)
{
	struct elems e = elems_make(b, set, type);
	int err = 0;

	for (size_t i = 0; i < ns && !err; i++)
		err = fn(&e, &s[i]);
	return elems_end(&e, err);
}

/* ---- rules ------------------------------------------------------------- */

/* A new expression `name` appended to r (which then owns it). */
static struct nftnl_expr *
expr(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *x = nftnl_expr_alloc(name);

	if (x)
		nftnl_rule_add_expr(r, x);
	return x;
}

static int
e_meta(struct nftnl_rule *r, uint32_t key, uint32_t dreg)
{
	struct nftnl_expr *x = expr(r, "meta");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(x, NFTNL_EXPR_META_DREG, dreg);
	return 0;
}

static int
e_cmp(struct nftnl_rule *r, uint32_t sreg, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *x = expr(r, "cmp");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_CMP_SREG, sreg);
	nftnl_expr_set_u32(x, NFTNL_EXPR_CMP_OP, op);
	return nftnl_expr_set(x, NFTNL_EXPR_CMP_DATA, data, len) < 0 ? -ENOMEM : 0;
}

static int
e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg)
{
	struct nftnl_expr *x = expr(r, "payload");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(x, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	return 0;
}

/* reg = (reg & mask) ^ 0, 4 bytes */
static int
e_mask(struct nftnl_rule *r, uint32_t reg, uint32_t mask_be)
{
	struct nftnl_expr *x = expr(r, "bitwise");
	uint32_t zero = 0;

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_SREG, reg);
	nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_DREG, reg);
	nftnl_expr_set_u32(x, NFTNL_EXPR_BITWISE_LEN, 4);
	if (nftnl_expr_set(x, NFTNL_EXPR_BITWISE_MASK, &mask_be, 4) < 0 ||
	    nftnl_expr_set(x, NFTNL_EXPR_BITWISE_XOR, &zero, 4) < 0)
		return -ENOMEM;
	return 0;
}

static int
e_lookup(struct nftnl_rule *r, uint32_t sreg, const char *set, uint32_t flags)
{
	struct nftnl_expr *x = expr(r, "lookup");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_LOOKUP_SREG, sreg);
	nftnl_expr_set_u32(x, NFTNL_EXPR_LOOKUP_FLAGS, flags);
	return nftnl_expr_set_str(x, NFTNL_EXPR_LOOKUP_SET, set) < 0 ? -ENOMEM : 0;
}

/* counter name <sreg> map @set */
static int
e_objref(struct nftnl_rule *r, uint32_t sreg, const char *set)
{
	struct nftnl_expr *x = expr(r, "objref");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_OBJREF_SET_SREG, sreg);
	return nftnl_expr_set_str(x, NFTNL_EXPR_OBJREF_SET_NAME, set) < 0 ? -ENOMEM : 0;
}

static int
e_imm(struct nftnl_rule *r, uint32_t dreg, const void *data, uint32_t len)
{
	struct nftnl_expr *x = expr(r, "immediate");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, dreg);
	return nftnl_expr_set(x, NFTNL_EXPR_IMM_DATA, data, len) < 0 ? -ENOMEM : 0;
}

static int
e_verdict(struct nftnl_rule *r, uint32_t verdict)
{
	struct nftnl_expr *x = expr(r, "immediate");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(x, NFTNL_EXPR_IMM_VERDICT, verdict);
	return 0;
}

/* dnat ip to <addr reg>:<port reg> */
static int
e_dnat(struct nftnl_rule *r, uint32_t reg_addr, uint32_t reg_port)
{
	struct nftnl_expr *x = expr(r, "nat");

	if (!x)
		return -ENOMEM;
	nftnl_expr_set_u32(x, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
	nftnl_expr_set_u32(x, NFTNL_EXPR_NAT_FAMILY, NFPROTO_IPV4);
	nftnl_expr_set_u32(x, NFTNL_EXPR_NAT_REG_ADDR_MIN, reg_addr);
	nftnl_expr_set_u32(x, NFTNL_EXPR_NAT_REG_PROTO_MIN, reg_port);
	nftnl_expr_set_u32(x, NFTNL_EXPR_NAT_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
	return 0;
}

#define R0       NFT_REG32_00
#define IP_SADDR 12 /* offsets in the IPv4 header */
#define IP_DADDR 16
#define TH_SPORT 0 /* in the TCP header */
#define TH_DPORT 2

/* iifname/oifname "slv*": the first three bytes of the name. */
static int
m_slv(struct nftnl_rule *r, uint32_t key)
{
	int err = e_meta(r, key, R0);

	return err ? err : e_cmp(r, R0, NFT_CMP_EQ, FW_IFPREFIX, strlen(FW_IFPREFIX));
}

/* meta nfproto ==/!= ipv4 */
static int
m_nfproto(struct nftnl_rule *r, uint32_t op)
{
	uint8_t v = NFPROTO_IPV4;
	int err = e_meta(r, NFT_META_NFPROTO, R0);

	return err ? err : e_cmp(r, R0, op, &v, 1);
}

static int
m_l4(struct nftnl_rule *r, uint8_t proto)
{
	int err = e_meta(r, NFT_META_L4PROTO, R0);

	return err ? err : e_cmp(r, R0, NFT_CMP_EQ, &proto, 1);
}

static int
m_tcp(struct nftnl_rule *r)
{
	return m_l4(r, IPPROTO_TCP);
}

/* The protocols a door listens on: TCP, and UDP for the DNS door (a
 * datagram to another door's port finds no socket and is refused by the
 * stack). */
static const uint8_t door_tcp = IPPROTO_TCP, door_udp = IPPROTO_UDP;

/* ip saddr <lane subnet> (nothing for /0) */
static int
m_saddr_in(struct nftnl_rule *r, const struct fw_lane *l)
{
	int err;

	if (l->prefix == 0)
		return 0;
	err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_SADDR, 4, R0);
	if (!err && l->prefix < 32)
		err = e_mask(r, R0, htonl(mask_of(l->prefix)));
	return err ? err : e_cmp(r, R0, NFT_CMP_EQ, &l->subnet, 4);
}

/* Rule fillers: each appends one rule's expressions to r. */

static int
r_pre_ipv4_only(struct nftnl_rule *r, const void *arg)
{
	int err = m_slv(r, NFT_META_IIFNAME);

	(void)arg;
	if (!err)
		err = m_nfproto(r, NFT_CMP_NEQ);
	return err ? err : e_verdict(r, NF_DROP);
}

static int
r_pre_spoof(struct nftnl_rule *r, const void *arg)
{
	int err = m_slv(r, NFT_META_IIFNAME);

	(void)arg;
	if (!err)
		err = m_nfproto(r, NFT_CMP_EQ);
	if (!err) /* iifname . ip saddr: 16 bytes, then 4 */
		err = e_meta(r, NFT_META_IIFNAME, R0);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_SADDR, 4, R0 + FW_IFNAMSIZ / 4);
	if (!err)
		err = e_lookup(r, R0, "hosts", NFT_LOOKUP_F_INV);
	return err ? err : e_verdict(r, NF_DROP);
}

/* iifname "slv*" counter name ip saddr map @tx, and the output twin. */
static int
r_count(struct nftnl_rule *r, const void *arg)
{
	bool tx = arg != NULL;
	int err = m_slv(r, tx ? NFT_META_IIFNAME : NFT_META_OIFNAME);

	if (!err)
		err = m_nfproto(r, NFT_CMP_EQ);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, tx ? IP_SADDR : IP_DADDR, 4, R0);
	return err ? err : e_objref(r, R0, tx ? "tx" : "rx");
}

static int
r_input_lo(struct nftnl_rule *r, const void *arg)
{
	uint32_t lo = LO_IFINDEX;
	int err = e_meta(r, NFT_META_IIF, R0);

	(void)arg;
	if (!err)
		err = e_cmp(r, R0, NFT_CMP_EQ, &lo, 4);
	return err ? err : e_verdict(r, NF_ACCEPT);
}

static int
r_input_doors(struct nftnl_rule *r, const void *arg)
{
	int err = m_nfproto(r, NFT_CMP_EQ);

	if (!err)
		err = m_l4(r, *(const uint8_t *)arg);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_SADDR, 4, R0);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_DADDR, 4, R0 + 1);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, TH_DPORT, 2, R0 + 2);
	if (!err)
		err = e_lookup(r, R0, "doors", 0);
	return err ? err : e_verdict(r, NF_ACCEPT);
}

/* oifname "slv*" ip daddr . ip saddr . tcp sport @doors accept (and the
 * udp twin): only a door's answers to an unlocked sandbox leave for its
 * link. */
static int
r_output_doors(struct nftnl_rule *r, const void *arg)
{
	int err = m_slv(r, NFT_META_OIFNAME);

	if (!err)
		err = m_nfproto(r, NFT_CMP_EQ);
	if (!err)
		err = m_l4(r, *(const uint8_t *)arg);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_DADDR, 4, R0);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_SADDR, 4, R0 + 1);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, TH_SPORT, 2, R0 + 2);
	if (!err)
		err = e_lookup(r, R0, "doors", 0);
	return err ? err : e_verdict(r, NF_ACCEPT);
}

/* oifname "slv*" drop */
static int
r_output_drop(struct nftnl_rule *r, const void *arg)
{
	int err = m_slv(r, NFT_META_OIFNAME);

	(void)arg;
	return err ? err : e_verdict(r, NF_DROP);
}

struct redirect {
	const struct fw_lane *lane;
	uint16_t dport, to_port;
};

static int
r_redirect(struct nftnl_rule *r, const void *arg)
{
	const struct redirect *d = arg;
	uint16_t dport = htons(d->dport), to = htons(d->to_port);
	int err = m_slv(r, NFT_META_IIFNAME);

	if (!err)
		err = m_nfproto(r, NFT_CMP_EQ);
	if (!err)
		err = m_saddr_in(r, d->lane);
	if (!err)
		err = m_tcp(r);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, TH_DPORT, 2, R0);
	if (!err)
		err = e_cmp(r, R0, NFT_CMP_EQ, &dport, 2);
	if (!err)
		err = e_imm(r, R0, &d->lane->gateway, 4);
	if (!err)
		err = e_imm(r, R0 + 1, &to, 2);
	return err ? err : e_dnat(r, R0, R0 + 1);
}

/* iifname "slv*" ip saddr <lane> ip daddr <synthetic range> tcp dnat ip to
 * gateway:names_port: every port of a name the DNS door gave. */
static int
r_redirect_names(struct nftnl_rule *r, const void *arg)
{
	const struct fw_lane *l = arg;
	uint16_t to = htons(l->names_port);
	int err = m_slv(r, NFT_META_IIFNAME);

	if (!err)
		err = m_nfproto(r, NFT_CMP_EQ);
	if (!err)
		err = m_saddr_in(r, l);
	if (!err)
		err = e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_DADDR, 4, R0);
	if (!err && l->synth_prefix < 32)
		err = e_mask(r, R0, htonl(mask_of(l->synth_prefix)));
	if (!err)
		err = e_cmp(r, R0, NFT_CMP_EQ, &l->synth, 4);
	if (!err)
		err = m_tcp(r);
	if (!err)
		err = e_imm(r, R0, &l->gateway, 4);
	if (!err)
		err = e_imm(r, R0 + 1, &to, 2);
	return err ? err : e_dnat(r, R0, R0 + 1);
}

typedef int (*rule_fn)(struct nftnl_rule *r, const void *arg);

static int
put_rule(struct fw_batch *b, const char *chain, rule_fn fill, const void *arg)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nlmsghdr *nlh;
	int err = -ENOMEM;

	if (!r)
		return -ENOMEM;
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	if (nftnl_rule_set_str(r, NFTNL_RULE_TABLE, FW_TABLE) < 0 ||
	    nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) < 0)
		goto out;
	err = fill(r, arg);
	if (err)
		goto out;
	err = -ENOMEM;
	nlh = msg_begin(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
	if (!nlh)
		goto out;
	nftnl_rule_nlmsg_build_payload(nlh, r);
	msg_end(b, nlh);
	err = 0;
out:
	nftnl_rule_free(r);
	return err;
}

static int
put_lane_rules(struct fw_batch *b, const struct fw_lane *l)
{
	struct redirect http = {l, 80, l->http_port}, tls = {l, 443, l->tls_port};
	int err = 0;

	/* First: a synthetic address's 80 and 443 go to the name door too,
	 * which knows the name they stand for. */
	if (l->names_port)
		err = put_rule(b, "nat_pre", r_redirect_names, l);
	if (!err && l->http_port)
		err = put_rule(b, "nat_pre", r_redirect, &http);
	if (!err && l->tls_port)
		err = put_rule(b, "nat_pre", r_redirect, &tls);
	return err;
}

/* ---- the operations ---------------------------------------------------- */

static int
body_attach(struct fw_batch *b, const void *arg)
{
	const struct fw_sbx *s = arg;
	int err = put_elems(b, "hosts", NFT_MSG_NEWSETELEM, add_host, s, 1);

	if (!err)
		err = put_counter(b, NFT_MSG_NEWOBJ, "tx", s->addr, s->start.tx_packets,
		                  s->start.tx_bytes);
	if (!err)
		err = put_counter(b, NFT_MSG_NEWOBJ, "rx", s->addr, s->start.rx_packets,
		                  s->start.rx_bytes);
	if (!err)
		err = put_elems(b, "tx", NFT_MSG_NEWSETELEM, add_ctr_elem, s, 1);
	if (!err)
		err = put_elems(b, "rx", NFT_MSG_NEWSETELEM, add_ctr_elem, s, 1);
	return err;
}

static int
body_unlock(struct fw_batch *b, const void *arg)
{
	const struct fw_sbx *s = arg;

	if (s->lane->nports == 0)
		return 0;
	return put_elems(b, "doors", NFT_MSG_NEWSETELEM, add_doors, s, 1);
}

static int
body_lock(struct fw_batch *b, const void *arg)
{
	const struct fw_sbx *s = arg;
	int err;

	if (s->lane->nports == 0)
		return 0;
	err = put_elems(b, "doors", NFT_MSG_NEWSETELEM, add_doors, s, 1);
	return err ? err : put_elems(b, "doors", NFT_MSG_DELSETELEM, add_doors, s, 1);
}

static int
body_detach(struct fw_batch *b, const void *arg)
{
	static const char *const sides[] = {"tx", "rx"};
	const struct fw_sbx *s = arg;
	int err = body_lock(b, s);

	for (size_t i = 0; i < 2 && !err; i++)
		err = put_counter(b, NFT_MSG_NEWOBJ, sides[i], s->addr, 0, 0);
	for (size_t i = 0; i < 2 && !err; i++)
		err = put_elems(b, sides[i], NFT_MSG_NEWSETELEM, add_ctr_elem, s, 1);
	/* The map elements go first: they hold references to the counters. */
	for (size_t i = 0; i < 2 && !err; i++)
		err = put_elems(b, sides[i], NFT_MSG_DELSETELEM, add_ctr_elem, s, 1);
	for (size_t i = 0; i < 2 && !err; i++)
		err = put_counter(b, NFT_MSG_DELOBJ, sides[i], s->addr, 0, 0);
	if (!err)
		err = put_elems(b, "hosts", NFT_MSG_NEWSETELEM, add_host, s, 1);
	if (!err)
		err = put_elems(b, "hosts", NFT_MSG_DELSETELEM, add_host, s, 1);
	return err;
}

static int
body_remove(struct fw_batch *b, const void *arg)
{
	int err = put_table(b, NFT_MSG_NEWTABLE);

	(void)arg;
	return err ? err : put_table(b, NFT_MSG_DELTABLE);
}

struct world {
	const struct fw_lane *lanes;
	size_t nlanes;
	const struct fw_sbx *s;
	size_t ns;
};

static int
put_skeleton(struct fw_batch *b, const struct world *w)
{
	int err = 0;

	for (size_t i = 0; i < sizeof(chains) / sizeof(chains[0]) && !err; i++)
		err = put_chain(b, &chains[i]);
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]) && !err; i++)
		err = put_set(b, &sets[i], (uint32_t)i + 1);
	if (!err)
		err = put_rule(b, "pre", r_pre_ipv4_only, NULL);
	if (!err)
		err = put_rule(b, "pre", r_pre_spoof, NULL);
	if (!err)
		err = put_rule(b, "pre", r_count, "tx");
	for (size_t i = 0; i < w->nlanes && !err; i++)
		err = put_lane_rules(b, &w->lanes[i]);
	if (!err)
		err = put_rule(b, "input", r_input_lo, NULL);
	if (!err)
		err = put_rule(b, "input", r_input_doors, &door_tcp);
	if (!err)
		err = put_rule(b, "input", r_input_doors, &door_udp);
	if (!err)
		err = put_rule(b, "output", r_count, NULL);
	if (!err)
		err = put_rule(b, "output", r_output_doors, &door_tcp);
	if (!err)
		err = put_rule(b, "output", r_output_doors, &door_udp);
	if (!err)
		err = put_rule(b, "output", r_output_drop, NULL);
	return err;
}

static int
add_doors_if_unlocked(struct elems *e, const struct fw_sbx *s)
{
	return s->unlocked ? add_doors(e, s) : 0;
}

static int
body_reconcile(struct fw_batch *b, const void *arg)
{
	const struct world *w = arg;
	int err = put_table(b, NFT_MSG_NEWTABLE);

	if (!err)
		err = put_table(b, NFT_MSG_DELTABLE);
	if (!err)
		err = put_table(b, NFT_MSG_NEWTABLE);
	if (!err)
		err = put_skeleton(b, w);
	for (size_t i = 0; i < w->ns && !err; i++) {
		const struct fw_sbx *s = &w->s[i];

		err = put_counter(b, NFT_MSG_NEWOBJ, "tx", s->addr, s->start.tx_packets,
		                  s->start.tx_bytes);
		if (!err)
			err = put_counter(b, NFT_MSG_NEWOBJ, "rx", s->addr, s->start.rx_packets,
			                  s->start.rx_bytes);
	}
	if (!w->ns)
		return err;
	if (!err)
		err = put_elems(b, "hosts", NFT_MSG_NEWSETELEM, add_host, w->s, w->ns);
	if (!err)
		err = put_elems(b, "tx", NFT_MSG_NEWSETELEM, add_ctr_elem, w->s, w->ns);
	if (!err)
		err = put_elems(b, "rx", NFT_MSG_NEWSETELEM, add_ctr_elem, w->s, w->ns);
	if (!err)
		err = put_elems(b, "doors", NFT_MSG_NEWSETELEM, add_doors_if_unlocked, w->s, w->ns);
	return err;
}

int
fw_build_reconcile(struct fw_batch *b, const struct fw_lane *lanes, size_t nlanes,
                   const struct fw_sbx *s, size_t ns)
{
	struct world w = {lanes, nlanes, s, ns};
	int err;

	if (!b)
		return -EINVAL;
	err = reconcile_check(lanes, nlanes, s, ns);
	return err ? err : build(b, body_reconcile, &w);
}

static int
build_sbx(struct fw_batch *b, const struct fw_sbx *s, body_fn body)
{
	int err;

	if (!b)
		return -EINVAL;
	err = sbx_check(s);
	return err ? err : build(b, body, s);
}

int
fw_build_attach(struct fw_batch *b, const struct fw_sbx *s)
{
	return build_sbx(b, s, body_attach);
}

int
fw_build_unlock(struct fw_batch *b, const struct fw_sbx *s)
{
	return build_sbx(b, s, body_unlock);
}

int
fw_build_lock(struct fw_batch *b, const struct fw_sbx *s)
{
	return build_sbx(b, s, body_lock);
}

int
fw_build_detach(struct fw_batch *b, const struct fw_sbx *s)
{
	return build_sbx(b, s, body_detach);
}

int
fw_build_remove(struct fw_batch *b)
{
	return b ? build(b, body_remove, NULL) : -EINVAL;
}

void
fw_ifname(struct in_addr a, char out[FW_IFNAMSIZ])
{
	snprintf(out, FW_IFNAMSIZ, FW_IFPREFIX "%08x", (unsigned)ntohl(a.s_addr));
}

/* ---- netlink ----------------------------------------------------------- */

struct fw_ctx {
	struct mnl_socket *nl;
	uint32_t portid;
	uint32_t seq;       /* of the next request (batches number their own) */
	int sndbuf, rcvbuf; /* the largest sizes asked for so far */
	char *rx;           /* RX_SIZE bytes */
};

/* "<what>: <strerror(e)><tail>" into err, if the caller gave one. */
static void
set_err(char *err, size_t errsz, const char *what, int e, const char *tail)
{
	if (err && errsz)
		snprintf(err, errsz, "%s: %s%s", what, strerror(e), tail);
}

struct fw_ctx *
fw_open(char *err, size_t errsz)
{
	struct fw_ctx *c = calloc(1, sizeof(*c));
	int on = 1;

	if (!c || !(c->rx = malloc(RX_SIZE))) {
		set_err(err, errsz, "nft", ENOMEM, "");
		goto fail;
	}
	c->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!c->nl) {
		set_err(err, errsz, "netlink socket", errno, "");
		goto fail;
	}
	if (mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		set_err(err, errsz, "netlink bind", errno, "");
		goto fail;
	}
	/* Errors carry the kernel's text; acks do not echo our messages. */
	mnl_socket_setsockopt(c->nl, NETLINK_EXT_ACK, &on, sizeof(on));
	mnl_socket_setsockopt(c->nl, NETLINK_CAP_ACK, &on, sizeof(on));
	c->portid = mnl_socket_get_portid(c->nl);
	c->seq = (uint32_t)time(NULL);
	return c;
fail:
	fw_close(c);
	return NULL;
}

void
fw_close(struct fw_ctx *c)
{
	if (!c)
		return;
	if (c->nl)
		mnl_socket_close(c->nl);
	free(c->rx);
	free(c);
}

/* Grows a socket buffer to at least want bytes: past the sysctl limits
 * when we may (CAP_NET_ADMIN), to them otherwise. */
static void
grow_buf(struct fw_ctx *c, int opt_force, int opt, int *have, size_t want)
{
	int v = want > (size_t)(1 << 30) ? 1 << 30 : (int)want;
	int fd = mnl_socket_get_fd(c->nl);

	if (v <= *have)
		return;
	if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof(v)) < 0)
		setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
	*have = v;
}

static const char *const msg_names[NFT_MSG_MAX] = {
    [NFT_MSG_NEWTABLE] = "NEWTABLE",     [NFT_MSG_DELTABLE] = "DELTABLE",
    [NFT_MSG_NEWCHAIN] = "NEWCHAIN",     [NFT_MSG_DELCHAIN] = "DELCHAIN",
    [NFT_MSG_NEWRULE] = "NEWRULE",       [NFT_MSG_DELRULE] = "DELRULE",
    [NFT_MSG_NEWSET] = "NEWSET",         [NFT_MSG_DELSET] = "DELSET",
    [NFT_MSG_NEWSETELEM] = "NEWSETELEM", [NFT_MSG_DELSETELEM] = "DELSETELEM",
    [NFT_MSG_NEWOBJ] = "NEWOBJ",         [NFT_MSG_DELOBJ] = "DELOBJ",
};

/* The attribute that names what a message is about: table, chain, set,
 * object, or the chain of a rule. */
static uint16_t
name_attr(uint16_t type)
{
	switch (type) {
	case NFT_MSG_NEWTABLE:
	case NFT_MSG_DELTABLE:
		return NFTA_TABLE_NAME;
	case NFT_MSG_NEWCHAIN:
	case NFT_MSG_DELCHAIN:
		return NFTA_CHAIN_NAME;
	case NFT_MSG_NEWRULE:
	case NFT_MSG_DELRULE:
		return NFTA_RULE_CHAIN;
	case NFT_MSG_NEWSET:
	case NFT_MSG_DELSET:
		return NFTA_SET_NAME;
	case NFT_MSG_NEWSETELEM:
	case NFT_MSG_DELSETELEM:
		return NFTA_SET_ELEM_LIST_SET;
	case NFT_MSG_NEWOBJ:
	case NFT_MSG_DELOBJ:
		return NFTA_OBJ_NAME;
	default:
		return 0;
	}
}

struct find_attr {
	uint16_t type;
	const char *str;
};

static int
find_attr_cb(const struct nlattr *a, void *data)
{
	struct find_attr *f = data;

	if (mnl_attr_get_type(a) == f->type && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
		f->str = mnl_attr_get_str(a);
	return MNL_CB_OK;
}

/* "NEWSETELEM doors" for a batch message. */
static void
describe(const struct nlmsghdr *nlh, char *out, size_t outsz)
{
	uint16_t type = nlh->nlmsg_type & 0xff;
	struct find_attr f = {name_attr(type), NULL};
	const char *tn = NULL;

	if (nlh->nlmsg_type == NFNL_MSG_BATCH_BEGIN)
		tn = "BEGIN";
	else if (nlh->nlmsg_type == NFNL_MSG_BATCH_END)
		tn = "END";
	else if (type < NFT_MSG_MAX)
		tn = msg_names[type];
	if (f.type)
		mnl_attr_parse(nlh, sizeof(struct nfgenmsg), find_attr_cb, &f);
	snprintf(out, outsz, "%s%s%s", tn ? tn : "message", f.str ? " " : "", f.str ? f.str : "");
}

struct ack_state {
	uint32_t seq_lo, seq_hi; /* the batch's messages */
	size_t acks;
	int error; /* first failure, -errno */
	uint32_t err_seq;
	char ext[128]; /* the kernel's text for it */
};

static int
ext_cb(const struct nlattr *a, void *data)
{
	struct ack_state *st = data;

	if (mnl_attr_get_type(a) == NLMSGERR_ATTR_MSG &&
	    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
		snprintf(st->ext, sizeof(st->ext), "%s", mnl_attr_get_str(a));
	return MNL_CB_OK;
}

static void
take_ack(struct ack_state *st, const struct nlmsghdr *nlh)
{
	const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
	size_t off = sizeof(*e);

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*e))
		return;
	if (nlh->nlmsg_seq < st->seq_lo || nlh->nlmsg_seq > st->seq_hi)
		return; /* a stray from an earlier exchange */
	st->acks++;
	if (!e->error || st->error)
		return;
	st->error = e->error;
	st->err_seq = nlh->nlmsg_seq;
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED))
		off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
	if (off < nlh->nlmsg_len - NLMSG_HDRLEN)
		mnl_attr_parse(nlh, (unsigned)off, ext_cb, st);
}

/* Reads every queued message (the kernel answers a batch before sendmsg()
 * returns). 0, or -errno of the socket (-ENOBUFS: answers were lost). */
static int
drain(struct fw_ctx *c, struct ack_state *st)
{
	int fd = mnl_socket_get_fd(c->nl);

	for (;;) {
		ssize_t n = recv(fd, c->rx, RX_SIZE, MSG_DONTWAIT);
		const struct nlmsghdr *nlh = (const struct nlmsghdr *)c->rx;
		int len = (int)n;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		for (; mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len))
			if (st && nlh->nlmsg_type == NLMSG_ERROR)
				take_ack(st, nlh);
	}
}

/* The batch [p, p + *len) starting at p: its length and its message count
 * between BEGIN and END. */
static int
batch_span(const char *p, size_t avail, size_t *len, size_t *inner)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)p;
	int left = avail > INT32_MAX ? INT32_MAX : (int)avail;

	*inner = 0;
	if (!mnl_nlmsg_ok(nlh, left) || nlh->nlmsg_type != NFNL_MSG_BATCH_BEGIN)
		return -EINVAL;
	for (nlh = mnl_nlmsg_next(nlh, &left); mnl_nlmsg_ok(nlh, left);
	     nlh = mnl_nlmsg_next(nlh, &left)) {
		if (nlh->nlmsg_type == NFNL_MSG_BATCH_END) {
			*len = (size_t)((const char *)nlh - p) + NLMSG_ALIGN(nlh->nlmsg_len);
			return 0;
		}
		(*inner)++;
	}
	return -EINVAL;
}

/* The message of b with sequence number seq, its position in the batch. */
static const struct nlmsghdr *
find_seq(const char *p, size_t len, uint32_t seq, size_t *idx)
{
	const struct nlmsghdr *nlh = (const struct nlmsghdr *)p;
	int left = (int)len;

	for (*idx = 0; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left), (*idx)++)
		if (nlh->nlmsg_seq == seq)
			return nlh;
	return NULL;
}

static void
commit_err(const struct ack_state *st, const char *p, size_t len, size_t nbatch, char *err,
           size_t errsz)
{
	const struct nlmsghdr *nlh;
	char what[64] = "message";
	size_t idx = 0;
	int e = -st->error;

	if (!err || !errsz)
		return;
	nlh = find_seq(p, len, st->err_seq, &idx);
	if (nlh)
		describe(nlh, what, sizeof(what));
	snprintf(err, errsz, "%s (message %zu of batch %zu): %s%s%s%s", what, idx, nbatch,
	         strerror(e), st->ext[0] ? " (" : "", st->ext, st->ext[0] ? ")" : "");
	if (e == EPERM && strlen(err) + 1 < errsz)
		snprintf(err + strlen(err), errsz - strlen(err),
		         "; sluiced needs CAP_NET_ADMIN in the fleet namespace");
}

static int
send_batch(struct fw_ctx *c, const char *p, size_t len, size_t inner, size_t nbatch, char *err,
           size_t errsz)
{
	const struct nlmsghdr *first = (const struct nlmsghdr *)p;
	struct ack_state st = {.seq_lo = first->nlmsg_seq, .seq_hi = first->nlmsg_seq + inner + 1};
	int ret;

	/* One ack skb costs about 1 KiB of receive buffer. */
	grow_buf(c, SO_SNDBUFFORCE, SO_SNDBUF, &c->sndbuf, len + 4096);
	grow_buf(c, SO_RCVBUFFORCE, SO_RCVBUF, &c->rcvbuf, inner * 1024 + 65536);
	drain(c, NULL);
	if (mnl_socket_sendto(c->nl, p, len) < 0) {
		ret = -errno;
		set_err(err, errsz, "sending the batch", -ret, "");
		return ret;
	}
	ret = drain(c, &st);
	if (ret < 0) {
		set_err(err, errsz, "reading the batch's answers", -ret,
		        " (whether it was committed is unknown)");
		return ret;
	}
	if (st.error) {
		commit_err(&st, p, len, nbatch, err, errsz);
		return st.error;
	}
	if (st.acks < inner) {
		if (err && errsz)
			snprintf(err, errsz, "batch %zu: %zu of %zu answers", nbatch, st.acks,
			         inner);
		return -EPROTO;
	}
	return 0;
}

int
fw_commit(struct fw_ctx *c, const struct fw_batch *b, char *err, size_t errsz)
{
	size_t off = 0, nbatch = 0;

	if (!c || !b)
		return -EINVAL;
	while (off < b->len) {
		size_t len = 0, inner;
		int ret = batch_span(b->buf + off, b->len - off, &len, &inner);

		if (ret < 0) {
			if (err && errsz)
				snprintf(err, errsz, "batch %zu: malformed", nbatch + 1);
			return ret;
		}
		ret = send_batch(c, b->buf + off, len, inner, ++nbatch, err, errsz);
		if (ret < 0)
			return ret;
		off += len;
	}
	return 0;
}

/* ---- requests ---------------------------------------------------------- */

static struct nlmsghdr *
req_begin(struct fw_ctx *c, char *buf, uint16_t type, uint16_t flags)
{
	return nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, flags, c->seq++);
}

/* Sends nlh and runs cb over the answers until the ack or the dump's end.
 * 0 or -errno (the kernel's, for a refused request). */
static int
request(struct fw_ctx *c, const struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	int ret;

	drain(c, NULL);
	if (mnl_socket_sendto(c->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	do {
		ssize_t n = mnl_socket_recvfrom(c->nl, c->rx, RX_SIZE);

		if (n < 0)
			return -errno;
		errno = 0;
		ret = mnl_cb_run(c->rx, (size_t)n, nlh->nlmsg_seq, c->portid, cb, data);
	} while (ret > 0);
	return ret < 0 ? (errno ? -errno : -EPROTO) : 0;
}

int
fw_table_exists(struct fw_ctx *c)
{
	char buf[256];
	struct nlmsghdr *nlh;
	int ret;

	if (!c)
		return -EINVAL;
	nlh = req_begin(c, buf, NFT_MSG_GETTABLE, NLM_F_ACK);
	mnl_attr_put_strz(nlh, NFTA_TABLE_NAME, FW_TABLE);
	ret = request(c, nlh, NULL, NULL);
	if (ret == -ENOENT)
		return 0;
	return ret < 0 ? ret : 1;
}

/* A counter as read: which sandbox, which side. */
struct ctr {
	uint32_t addr;        /* host order, for sorting */
	struct fw_counters n; /* one side filled */
};

struct ctr_list {
	struct ctr *v;
	size_t n, cap;
};

/* "tx-10.88.1.7" -> side 't', address; false for any other name. */
static bool
parse_ctr_name(const char *name, char *side, struct in_addr *a)
{
	if (strncmp(name, "tx-", 3) != 0 && strncmp(name, "rx-", 3) != 0)
		return false;
	*side = name[0];
	return inet_pton(AF_INET, name + 3, a) == 1;
}

static int
ctr_push(struct ctr_list *l, const struct ctr *x)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct ctr *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *x;
	return 0;
}

static int
obj_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftnl_obj *o = nftnl_obj_alloc();
	struct ctr x = {0};
	struct in_addr a;
	const char *name;
	char side;
	int ret = MNL_CB_OK;

	if (!o) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_obj_nlmsg_parse(nlh, o) < 0) {
		errno = EPROTO;
		ret = MNL_CB_ERROR;
		goto out;
	}
	name = nftnl_obj_get_str(o, NFTNL_OBJ_NAME);
	if (nftnl_obj_get_u32(o, NFTNL_OBJ_TYPE) != NFT_OBJECT_COUNTER || !name ||
	    !parse_ctr_name(name, &side, &a))
		goto out;
	x.addr = ntohl(a.s_addr);
	if (side == 't') {
		x.n.tx_packets = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
		x.n.tx_bytes = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES);
	} else {
		x.n.rx_packets = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
		x.n.rx_bytes = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES);
	}
	if (ctr_push(data, &x) < 0) {
		errno = ENOMEM;
		ret = MNL_CB_ERROR;
	}
out:
	nftnl_obj_free(o);
	return ret;
}

/* GETOBJ of one counter, or of all of them when name is NULL. */
static int
get_counters(struct fw_ctx *c, const char *name, struct ctr_list *l)
{
	char buf[256];
	struct nlmsghdr *nlh;

	nlh = req_begin(c, buf, NFT_MSG_GETOBJ, name ? NLM_F_ACK : NLM_F_DUMP);
	mnl_attr_put_strz(nlh, NFTA_OBJ_TABLE, FW_TABLE);
	if (name)
		mnl_attr_put_strz(nlh, NFTA_OBJ_NAME, name);
	mnl_attr_put_u32(nlh, NFTA_OBJ_TYPE, htonl(NFT_OBJECT_COUNTER));
	return request(c, nlh, obj_cb, l);
}

static void
ctr_add(struct fw_counters *to, const struct fw_counters *x)
{
	to->tx_packets += x->tx_packets;
	to->tx_bytes += x->tx_bytes;
	to->rx_packets += x->rx_packets;
	to->rx_bytes += x->rx_bytes;
}

int
fw_counters_get(struct fw_ctx *c, struct in_addr a, struct fw_counters *out)
{
	struct ctr_list l = {0};
	char name[CTR_NAME_MAX];
	int ret;

	if (!c || !out)
		return -EINVAL;
	ctr_name("tx", a, name);
	ret = get_counters(c, name, &l);
	if (!ret) {
		ctr_name("rx", a, name);
		ret = get_counters(c, name, &l);
	}
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < l.n && !ret; i++)
		ctr_add(out, &l.v[i].n);
	free(l.v);
	return ret;
}

static int
cmp_ctr(const void *a, const void *b)
{
	const struct ctr *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int
fw_counters_dump(struct fw_ctx *c, fw_counters_cb cb, void *arg)
{
	struct ctr_list l = {0};
	int ret;

	if (!c || !cb)
		return -EINVAL;
	ret = get_counters(c, NULL, &l);
	if (ret == -ENOENT)
		ret = 0; /* no table: nothing attached */
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), cmp_ctr);
	for (size_t i = 0; i < l.n && !ret;) {
		struct fw_counters sum = {0};
		struct in_addr a = {htonl(l.v[i].addr)};
		size_t j = i;

		for (; j < l.n && l.v[j].addr == l.v[i].addr; j++)
			ctr_add(&sum, &l.v[j].n);
		ret = cb(arg, a, &sum);
		if (ret > 0)
			ret = 0;
		i = j;
	}
	free(l.v);
	return ret;
}
