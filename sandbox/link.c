/* link.c: a sandbox's network namespace from outside (ns, rpc): lo up,
 * the veth eth0 with its peer end in the peer namespace, addresses and
 * the default route, through nft/'s rtnetlink library. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rtnl.h"
#include "sandbox-int.h"

int
sbx_link_setup(int childns, const struct sbx_net *n, int *nl_peer, struct sbx_link *peer,
               char *err, size_t errsz)
{
	int peerns = -1, nl = -1, rc;
	const char *step = "";

	rc = nl = fw_rtnl_open_in(childns);
	step = "netlink in the sandbox";
	if (rc < 0)
		goto out;
	step = "lo up";
	if ((rc = fw_rtnl_link_up(nl, "lo", 0)) < 0)
		goto out;
	if (n->kind != SBX_NET_LINK)
		goto out;
	if ((rc = peerns = sbx_open_peer_ns(n, err, errsz)) < 0) {
		close(nl);
		return rc;
	}
	step = "netlink in the peer namespace";
	if ((rc = *nl_peer = fw_rtnl_open_in(peerns)) < 0)
		goto out;
	step = "create veth";
	if ((rc = fw_rtnl_veth_add(nl, "eth0", n->peer_ifname, peerns)) < 0)
		goto out;
	sbx_pathf(peer->ifname, sizeof(peer->ifname), "%s", n->peer_ifname);
	{
		/* What sbx_save() records to find this very link again. */
		struct stat st;
		int ix = fw_rtnl_ifindex(*nl_peer, n->peer_ifname);
		peer->ifindex = ix > 0 ? ix : 0;
		if (fstat(peerns, &st) == 0)
			peer->netns_ino = (unsigned long long)st.st_ino;
		if (n->peer_netns_fd < 0)
			sbx_pathf(peer->netns, sizeof(peer->netns), "%s", n->peer_netns);
	}
	step = "peer up";
	if ((rc = fw_rtnl_link_up(*nl_peer, n->peer_ifname, n->mtu)) < 0)
		goto out;
	step = "peer address";
	if (n->peer_address &&
	    (rc = fw_rtnl_addr_add_p2p(*nl_peer, n->peer_ifname, n->peer_address, n->address)) < 0)
		goto out;
	step = "eth0 up";
	if ((rc = fw_rtnl_link_up(nl, "eth0", n->mtu)) < 0)
		goto out;
	step = "address";
	if (n->address && (rc = fw_rtnl_addr_add(nl, "eth0", n->address)) < 0)
		goto out;
	step = "default route";
	if (n->gateway && (rc = fw_rtnl_route_default(nl, "eth0", n->gateway)) < 0)
		goto out;
out:
	if (rc < 0)
		rc = sbx_fail(err, errsz, rc, "start: network: %s: %s", step, strerror(-rc));
	else
		rc = 0;
	if (nl >= 0)
		close(nl);
	if (peerns >= 0)
		close(peerns);
	return rc;
}
