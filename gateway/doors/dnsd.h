/* dnsd.h: the DNS door, one per egress lane (lanes[].doors.dns, UDP and
 * TCP on the lane's gateway address), answering each sandbox from its own
 * layer and never asking upstream. See dnsd.c for what is answered how. */
#ifndef SLUICE_GW_DNSD_H
#define SLUICE_GW_DNSD_H

struct gw_loop;
struct gw_worker_dns;

/* A worker's DNS door state (its TCP connections). NULL when out of
 * memory. */
struct gw_worker_dns *gw_dnsd_new(struct gw_loop *l);
/* Closes every TCP connection and frees o. NULL is fine. */
void gw_dnsd_free(struct gw_worker_dns *o);

/* The lane's UDP socket fd is readable: answers a bounded batch of
 * queries. */
void gw_dnsd_udp_ready(struct gw_loop *l, int fd, int lane);
/* A TCP connection accepted on the lane's DNS port (fd is the caller's
 * no more). */
void gw_dnsd_tcp_accept(struct gw_worker_dns *o, int fd, int lane);

#endif
