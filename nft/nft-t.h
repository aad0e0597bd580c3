/* nft-t.h: types of the `inet sluice` nftables table (see nft.h).
 *
 * The caller describes lanes and sandboxes with these plain structs; the
 * builders in nft.c read them and keep no pointer to them.
 */
#ifndef SLUICE_FW_NFT_T_H
#define SLUICE_FW_NFT_T_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FW_TABLE     "sluice" /* table inet sluice */
#define FW_IFPREFIX  "slv"    /* every sandbox link's name starts so */
#define FW_IFNAMSIZ  16       /* IFNAMSIZ, NUL included */
#define FW_MAX_PORTS 6        /* door ports per lane */

/* A lane: a network profile sandboxes are attached to. */
struct fw_lane {
	const char *name;             /* for the caller; not in the table */
	struct in_addr subnet;        /* network address, no host bits */
	uint8_t prefix;               /* 0..32 */
	struct in_addr gateway;       /* inside subnet: the doors' address */
	uint16_t ports[FW_MAX_PORTS]; /* door ports, reachable when unlocked */
	size_t nports;                /* 0 (the `none` lane) .. FW_MAX_PORTS */
	uint16_t http_port;           /* transparent: tcp/80 -> gateway:http_port; 0: none */
	uint16_t tls_port;            /* tcp/443 -> gateway:tls_port; 0: none */
	/* tcp to the synthetic range (any port) -> gateway:names_port, the
	 * name door (the DNS door's answers); 0: none */
	uint16_t names_port;
	struct in_addr synth;         /* the range's network address */
	uint8_t synth_prefix;
};

/* One sandbox's counters; tx is what the sandbox sent, rx what it was
 * sent (packets and bytes of the IPv4 layer). */
struct fw_counters {
	uint64_t tx_packets, tx_bytes;
	uint64_t rx_packets, rx_bytes;
};

/* A sandbox as the table sees it. */
struct fw_sbx {
	char ifname[FW_IFNAMSIZ];   /* its veth peer in the fleet ns, "slv..." */
	struct in_addr addr;        /* inside lane->subnet, not the gateway */
	const struct fw_lane *lane; /* borrowed for the call */
	bool unlocked;              /* reconcile: doors open */
	struct fw_counters start;   /* counters created with these values */
};

#endif
