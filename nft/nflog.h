/* nflog.h: what the `inet sluice` table refused, as its refuse chain
 * samples it to NFLOG group FW_LOG_GROUP (nft.c): one record per sampled
 * packet, with the addresses, protocol and destination port the guest
 * tried.
 *
 *   fw_log_parse()  pure: netlink bytes in, one callback per IPv4 packet
 *                   record out; no I/O, any thread.
 *   fw_log_open()   binds a NETLINK_NETFILTER socket to the group, asking
 *                   for headers only; fw_log_fd() is the fd to watch for
 *                   EPOLLIN, fw_log_read() drains it. A struct fw_log has
 *                   one user at a time.
 *
 * Records are samples, not a count: the chain rate-limits them per
 * sandbox, and the kernel drops what a full socket buffer cannot take
 * (fw_log_read() then says -ENOBUFS once). The refused counters
 * (fw_counters_get()) are the count.
 */
#ifndef SLUICE_FW_NFLOG_H
#define SLUICE_FW_NFLOG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One refused packet. */
struct fw_refusal {
	struct in_addr src, dst;
	uint8_t proto;  /* IPPROTO_* */
	bool has_port;  /* tcp, udp, udplite, sctp, dccp; not in a later fragment */
	uint16_t dport; /* host order, when has_port */
	bool has_icmp;  /* icmp, not in a later fragment */
	uint8_t icmp_type, icmp_code;
};

typedef void (*fw_log_cb)(void *arg, const struct fw_refusal *r);

/* Walks the netlink messages in buf[0..len) and calls cb for each NFLOG
 * packet record (NFULNL_MSG_PACKET) whose payload is an IPv4 header; every
 * other message (acks, NLMSG_DONE, other families) is skipped, and so is a
 * record too short or malformed to name its addresses. Returns how many
 * records cb was called for, or -EPROTO when buf is not a sequence of
 * whole netlink messages (the records before the bad one were reported). */
int fw_log_parse(const void *buf, size_t len, fw_log_cb cb, void *arg);

struct fw_log;

/* Takes fd, a NETLINK_NETFILTER socket made in the namespace whose table
 * to listen to (it is closed by fw_log_close(), and on failure here),
 * binds it to FW_LOG_GROUP and configures the group: the packet's first
 * bytes only, delivered within a fifth of a second. NULL with a line in
 * err when it cannot ("... Device or resource busy": another socket has
 * the group). */
struct fw_log *fw_log_open(int fd, char *err, size_t errsz);

/* Closes l and its socket; NULL is fine. */
void fw_log_close(struct fw_log *l);

int fw_log_fd(const struct fw_log *l);

/* Reads every message queued now (never blocks) and parses each with
 * fw_log_parse(). Returns the records reported, or -ENOBUFS when the
 * kernel dropped records since the last call (the ones still queued were
 * read and reported all the same), or another -errno of the socket. */
int fw_log_read(struct fw_log *l, fw_log_cb cb, void *arg);

#endif
