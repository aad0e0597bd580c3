/* agent_driver.h: what the agent driver's files share (agent_driver.c,
 * the main scenarios; agent_driver_pty.c, terminals and detach). */
#ifndef SLUICE_AGENT_DRIVER_H
#define SLUICE_AGENT_DRIVER_H

#include <stdbool.h>

struct sbx_agent_conn;

extern const char *workdir;
void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* agent_driver_pty.c */
void t_pty(struct sbx_agent_conn *c);
void t_detach(struct sbx_agent_conn *c);
/* what t_detach started, for main() to check after the host left */
extern int detached_pid, foreground_pid;

#endif
