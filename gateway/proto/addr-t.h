/* addr-t.h: destination address classes (types only).
 *
 * Every address the gateway is about to connect to (an IP literal a client
 * gave, or an answer from DNS) falls in exactly one class. Only
 * GW_ADDR_PUBLIC is reachable without an allow_private exemption. The names
 * appear in log lines: add, never rename.
 */
#ifndef SLUICE_GW_ADDR_T_H
#define SLUICE_GW_ADDR_T_H

#define GW_ADDR_CLASSES(X)                                                   \
	X(PUBLIC, "public")                                                  \
	X(LOOPBACK, "loopback")           /* 127/8, ::1 */                   \
	X(PRIVATE, "private")             /* RFC 1918, fec0::/10 */          \
	X(CGNAT, "cgnat")                 /* 100.64/10 */                    \
	X(LINK_LOCAL, "link-local")       /* 169.254/16, fe80::/10 */        \
	X(ULA, "ula")                     /* fc00::/7 */                     \
	X(MULTICAST, "multicast")         /* 224/4, ff00::/8 */              \
	X(BROADCAST, "broadcast")         /* 255.255.255.255 */              \
	X(UNSPECIFIED, "unspecified")     /* 0/8, :: */                      \
	X(DOCUMENTATION, "documentation") /* TEST-NET-1..3, 2001:db8::/32 */ \
	X(RESERVED, "reserved")           /* 240/4, 198.18/15, 100::/64 ... */ \
	X(METADATA, "metadata")           /* cloud instance metadata */

enum gw_addr_class {
#define GW_ADDR_CLASS_ENUM(id, name) GW_ADDR_##id,
	GW_ADDR_CLASSES(GW_ADDR_CLASS_ENUM)
#undef GW_ADDR_CLASS_ENUM
	GW_ADDR__COUNT
};

/* Room for the longest gw_addr_format() output, "[v6 with v4 tail]:65535"
 * and its NUL: 1 + 45 + 2 + 5 + 1. */
#define GW_ADDR_FMT_MAX 54

/* Most IPv4 addresses one IPv6 address can be read as embedding (the
 * local-use NAT64 prefix 64:ff9b:1::/48 allows four prefix lengths). */
#define GW_ADDR_EMBED_MAX 4

#endif
