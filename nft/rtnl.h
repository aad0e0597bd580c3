/* rtnl.h: the few rtnetlink requests sluice makes, through libmnl (no `ip`
 * subprocess): veth pairs across namespaces, links, addresses, routes.
 * Used by sandbox/ for sandbox links and by gateway/fleet/ for the fleet
 * namespace's own links. Uses nothing of ours. Each request waits for its
 * ack; every call returns 0 (or an fd) or the kernel's -errno. Any thread;
 * a socket is used by one thread at a time. */
#ifndef SLUICE_FW_RTNL_H
#define SLUICE_FW_RTNL_H

#include <stdint.h>

/* A NETLINK_ROUTE socket created inside the network namespace nsfd (the
 * calling thread enters it and comes back). fd or -errno. */
int fw_rtnl_open_in(int nsfd);
/* Parses "ADDR/PREFIX" (v4 or v6) into addr16 (16 bytes, zero-padded)
 * and *prefix: AF_INET, AF_INET6 or -EINVAL. Pure. */
int fw_rtnl_parse_cidr(const char *s, void *addr16, unsigned *prefix);
int fw_rtnl_link_up(int nl, const char *ifname, uint32_t mtu);
/* Creates veth `name` here and its peer `peer` inside peer_nsfd, both
 * down (a peer created up fails with ENOTCONN). */
int fw_rtnl_veth_add(int nl, const char *name, const char *peer, int peer_nsfd);
int fw_rtnl_link_del(int nl, const char *ifname);
/* The index of ifname in nl's namespace, or -ENODEV. */
int fw_rtnl_ifindex(int nl, const char *ifname);
/* "10.88.1.7/24" or "fd00::7/64" on ifname. */
int fw_rtnl_addr_add(int nl, const char *ifname, const char *cidr);
int fw_rtnl_route_default(int nl, const char *ifname, const char *gw);
/* A point-to-point address: `local` on ifname, with `peer` (the guest's
 * address/prefix; only its address is used) as the far end (/32 or
 * /128), which routes the peer's address to ifname. */
int fw_rtnl_addr_add_p2p(int nl, const char *ifname, const char *local, const char *peer);
/* Creates a link of a kind that needs no attributes ("dummy", "bridge"),
 * down. -EOPNOTSUPP when the kernel has no such kind. */
int fw_rtnl_kind_add(int nl, const char *name, const char *kind);

#endif
