/* sbx_netlink.h: the few rtnetlink requests sluice makes, through libmnl
 * (no `ip` subprocess). Used by the ns backend for sandbox links and by
 * the gateway for the fleet namespace's own links. Each request waits for
 * its ack; every call returns 0 (or an fd) or the kernel's -errno. */
#ifndef SLUICE_SBX_NETLINK_H
#define SLUICE_SBX_NETLINK_H

#include <stdint.h>

/* A NETLINK_ROUTE socket created inside the network namespace nsfd (the
 * calling thread enters it and comes back). fd or -errno. */
int sbx_nl_open_in(int nsfd);
int sbx_nl_link_up(int nl, const char *ifname, uint32_t mtu);
/* Creates veth `name` here and its peer `peer` inside peer_nsfd, both
 * down (a peer created up fails with ENOTCONN). */
int sbx_nl_veth_add(int nl, const char *name, const char *peer, int peer_nsfd);
int sbx_nl_link_del(int nl, const char *ifname);
/* The index of ifname in nl's namespace, or -ENODEV. */
int sbx_nl_ifindex(int nl, const char *ifname);
/* "10.88.1.7/24" or "fd00::7/64" on ifname. */
int sbx_nl_addr_add(int nl, const char *ifname, const char *cidr);
int sbx_nl_route_default(int nl, const char *ifname, const char *gw);
/* A point-to-point address: `local` on ifname, with `peer` (the guest's
 * address/prefix; only its address is used) as the far end (/32 or
 * /128), which routes the peer's address to ifname. */
int sbx_nl_addr_add_p2p(int nl, const char *ifname, const char *local, const char *peer);
/* Creates a link of a kind that needs no attributes ("dummy", "bridge"),
 * down. -EOPNOTSUPP when the kernel has no such kind. */
int sbx_nl_kind_add(int nl, const char *name, const char *kind);

#endif
