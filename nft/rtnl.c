/* rtnl.c: the few rtnetlink requests sluice makes (see rtnl.h), through
 * libmnl (no `ip` subprocess): a veth pair split across two namespaces,
 * links up, an address, a default route. Each request waits for its ack. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rtnl.h"

int
fw_rtnl_parse_cidr(const char *s, void *addr16, unsigned *prefix)
{
	char buf[80], *slash, *end;
	unsigned long p;
	int fam;

	if (!s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (!slash || !slash[1])
		return -EINVAL;
	*slash = 0;
	errno = 0;
	p = strtoul(slash + 1, &end, 10);
	if (*end || errno || slash[1] == '-' || slash[1] == '+')
		return -EINVAL;
	memset(addr16, 0, 16);
	if (inet_pton(AF_INET, buf, addr16) == 1)
		fam = AF_INET;
	else if (inet_pton(AF_INET6, buf, addr16) == 1)
		fam = AF_INET6;
	else
		return -EINVAL;
	if (p > (fam == AF_INET ? 32u : 128u))
		return -EINVAL;
	*prefix = (unsigned)p;
	return fam;
}

int
fw_rtnl_open_in(int nsfd)
{
	int self, fd, e = 0;

	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return -errno;
	if (setns(nsfd, CLONE_NEWNET) < 0) {
		e = -errno;
		close(self);
		return e;
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		e = -errno;
	/* Coming back cannot fail for a namespace we were just in; if it
	 * did, this thread would be in the wrong place: abort loudly. */
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	close(self);
	if (e)
		return e;
	{
		struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			e = -errno;
			close(fd);
			return e;
		}
	}
	return fd;
}

/* Sends one request and waits for its ack: 0 or the kernel's -errno. */
static int
talk(int nl, struct nlmsghdr *nlh)
{
	static unsigned seq; /* shared by every thread: atomic */
	char buf[8192];
	ssize_t n;

	nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED) + (unsigned)time(NULL);
	if (send(nl, nlh, nlh->nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		n = recv(nl, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (void *)buf; mnl_nlmsg_ok(h, (int)n);
		     h = mnl_nlmsg_next(h, (int *)&n)) {
			if (h->nlmsg_seq != nlh->nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
				return e->error;
			}
		}
	}
}

static struct ifinfomsg *
link_msg(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifinfomsg *ifi;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	return ifi;
}

int
fw_rtnl_link_up(int nl, const char *ifname, uint32_t mtu)
{
	char buf[8192];
	struct ifinfomsg *ifi = link_msg(buf, RTM_NEWLINK, 0);
	struct nlmsghdr *nlh = (void *)buf;

	ifi->ifi_change = IFF_UP;
	ifi->ifi_flags = IFF_UP;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
	if (mtu)
		mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
	return talk(nl, nlh);
}

int
fw_rtnl_veth_add(int nl, const char *name, const char *peer, int peer_nsfd)
{
	char buf[8192];
	struct nlmsghdr *nlh = (void *)buf;
	struct nlattr *linkinfo, *data, *pinfo;
	struct ifinfomsg *pifi;

	link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	pinfo = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	pifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifi));
	pifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_nsfd);
	mnl_attr_nest_end(nlh, pinfo);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	return talk(nl, nlh);
}

int
fw_rtnl_kind_add(int nl, const char *name, const char *kind)
{
	char buf[8192];
	struct nlmsghdr *nlh = (void *)buf;
	struct nlattr *linkinfo;

	link_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, kind);
	mnl_attr_nest_end(nlh, linkinfo);
	return talk(nl, nlh);
}

int
fw_rtnl_link_del(int nl, const char *ifname)
{
	char buf[8192];
	struct nlmsghdr *nlh = (void *)buf;

	link_msg(buf, RTM_DELLINK, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
	return talk(nl, nlh);
}

/* The index of ifname in the namespace nl lives in, by RTM_GETLINK. */
int
fw_rtnl_ifindex(int nl, const char *ifname)
{
	char buf[8192];
	struct nlmsghdr *nlh = (void *)buf;
	ssize_t n;

	link_msg(buf, RTM_GETLINK, 0);
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = (unsigned)time(NULL) ^ 0x5a5a;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
	if (send(nl, nlh, nlh->nlmsg_len, 0) < 0)
		return -errno;
	for (;;) {
		char rb[16384];
		n = recv(nl, rb, sizeof(rb), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (void *)rb; mnl_nlmsg_ok(h, (int)n);
		     h = mnl_nlmsg_next(h, (int *)&n)) {
			if (h->nlmsg_seq != nlh->nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
				return e->error ? e->error : -ENODEV;
			}
			if (h->nlmsg_type == RTM_NEWLINK) {
				struct ifinfomsg *ifi = mnl_nlmsg_get_payload(h);
				return ifi->ifi_index;
			}
		}
	}
}

/* RTM_NEWADDR: `local` on ifname with prefix pfx, `address` its far end
 * (the same as local but for a point-to-point address). */
static int
addr_new(int nl, const char *ifname, int fam, unsigned pfx, const unsigned char *local,
	 const unsigned char *address)
{
	char buf[8192];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct ifaddrmsg *ifa;
	int idx;

	if ((idx = fw_rtnl_ifindex(nl, ifname)) < 0)
		return idx;
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = (uint8_t)fam;
	ifa->ifa_prefixlen = (uint8_t)pfx;
	ifa->ifa_index = (unsigned)idx;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	if (fam == AF_INET6)
		ifa->ifa_flags = IFA_F_NODAD;
	mnl_attr_put(nlh, IFA_LOCAL, fam == AF_INET ? 4 : 16, local);
	mnl_attr_put(nlh, IFA_ADDRESS, fam == AF_INET ? 4 : 16, address);
	return talk(nl, nlh);
}

int
fw_rtnl_addr_add(int nl, const char *ifname, const char *cidr)
{
	unsigned char a[16];
	unsigned pfx;
	int fam = fw_rtnl_parse_cidr(cidr, a, &pfx);

	return fam < 0 ? fam : addr_new(nl, ifname, fam, pfx, a, a);
}

int
fw_rtnl_addr_add_p2p(int nl, const char *ifname, const char *local, const char *peer)
{
	char tmp[80];
	unsigned char l[16], r[16];
	unsigned pfx;
	int fam, pfam;

	if (snprintf(tmp, sizeof(tmp), "%s/0", local) >= (int)sizeof(tmp))
		return -EINVAL;
	if ((fam = fw_rtnl_parse_cidr(tmp, l, &pfx)) < 0 || (pfam = fw_rtnl_parse_cidr(peer, r, &pfx)) < 0)
		return -EINVAL;
	if (fam != pfam)
		return -EINVAL;
	return addr_new(nl, ifname, fam, fam == AF_INET ? 32 : 128, l, r);
}

int
fw_rtnl_route_default(int nl, const char *ifname, const char *gw)
{
	char buf[8192], tmp[80];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct rtmsg *rtm;
	unsigned char a[16];
	unsigned pfx;
	int fam, idx;

	snprintf(tmp, sizeof(tmp), "%s/0", gw);
	if ((fam = fw_rtnl_parse_cidr(tmp, a, &pfx)) < 0)
		return fam;
	if ((idx = fw_rtnl_ifindex(nl, ifname)) < 0)
		return idx;
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
	rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = (uint8_t)fam;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put(nlh, RTA_GATEWAY, fam == AF_INET ? 4 : 16, a);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)idx);
	return talk(nl, nlh);
}
