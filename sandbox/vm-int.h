/* vm-int.h: the `vm` backend's internal pieces (qmp.c, vm.c); not for
 * callers. The pure parts are declared here for the unit tests. */
#ifndef SLUICE_SBX_VM_INT_H
#define SLUICE_SBX_VM_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox-int.h"

/* ---- QMP (qmp.c) ------------------------------------------------------
 * QEMU's monitor protocol: one JSON object per line. A client reads the
 * greeting, sends qmp_capabilities, then commands, each tagged with an
 * "id" that QEMU echoes in its reply; between a command and its return
 * QEMU may send events, which are skipped here, as are replies to other
 * ids. */

#define SBX_QMP_LINE_MAX 65536 /* a longer line is out of step */

enum sbx_qmp_kind {
	SBX_QMP_GREETING = 0, /* {"QMP": {...}} */
	SBX_QMP_RETURN,       /* {"return": ...} */
	SBX_QMP_ERROR,        /* {"error": {"class", "desc"}} */
	SBX_QMP_EVENT,        /* {"event": "NAME", ...} */
};

struct sbx_qmp_msg {
	enum sbx_qmp_kind kind;
	struct json_t *value; /* RETURN: the return value (a new reference);
	                         else NULL */
	char name[64];        /* EVENT: its name; ERROR: its class */
	char desc[256];       /* ERROR: its description */
	long long id;         /* RETURN, ERROR: the integer "id" echoed; -1 none */
};

/* Framing: is there a complete line in buf[0..len)? 1 with *linelen (the
 * bytes before '\n'), 0 when more is needed, -EMSGSIZE when len reached
 * cap with no newline. Pure. */
int sbx_qmp_frame(const char *buf, size_t len, size_t cap, size_t *linelen);

/* One line (no newline) into *out: 0, or -EPROTO with a reason in err
 * (not JSON, not an object, none of the known shapes). Pure; the caller
 * json_decref()s out->value. */
int sbx_qmp_parse(const char *line, size_t len, struct sbx_qmp_msg *out, char *err, size_t errsz);

/* One command as a line: {"execute":cmd,"id":id[,"arguments":args]}\n
 * (args borrowed, NULL or an object). malloc()ed, length in *len; NULL
 * when out of memory. Pure. */
char *sbx_qmp_line(const char *cmd, const struct json_t *args, long long id, size_t *len);

struct sbx_qmp;

/* Connects a non-blocking unix stream socket to path, retrying while it
 * does not exist yet, refuses, or its backlog is full, until deadline_ms
 * (CLOCK_MONOTONIC); never blocks past it. want_pid > 0: the listener must
 * be that process (SO_PEERCRED). The fd (O_NONBLOCK, CLOEXEC), or -errno
 * with err set. */
int sbx_vm_unix_connect(const char *path, int want_pid, int64_t deadline_ms, char *err,
                        size_t errsz);

/* Connects to the monitor socket at path (retrying while it does not
 * exist yet or refuses, until deadline_ms, CLOCK_MONOTONIC), reads the
 * greeting and negotiates. If want_pid > 0 the listener must be that
 * process (SO_PEERCRED). 0 with *out, or -errno with err set. */
int sbx_qmp_open(const char *path, int want_pid, int64_t deadline_ms, struct sbx_qmp **out,
                 char *err, size_t errsz);
/* Runs one command (args: NULL or an object, borrowed) and waits for its
 * return until deadline_ms, skipping events. *ret (may be NULL): a new
 * reference to the return value. 0; -EREMOTEIO (err: class: desc);
 * -ETIMEDOUT; -EPIPE; -EPROTO. */
int sbx_qmp_cmd(struct sbx_qmp *q, const char *cmd, const struct json_t *args, struct json_t **ret,
                int64_t deadline_ms, char *err, size_t errsz);
/* The same, the command's bytes carrying fd (borrowed; QEMU gets a copy)
 * as SCM_RIGHTS, as "getfd" wants. A timeout or a lost connection marks
 * q broken: the next command reconnects first. */
int sbx_qmp_cmd_fd(struct sbx_qmp *q, const char *cmd, const struct json_t *args, int fd,
                   struct json_t **ret, int64_t deadline_ms, char *err, size_t errsz);
void sbx_qmp_close(struct sbx_qmp *q);

/* ---- vm (vm.c) ------------------------------------------------------- */

/* What sbx_save() writes for a `vm` sandbox, checked. */
struct sbx_vm_saved {
	SBX_REC_HEAD;
	char snap[80]; /* the snapshot key, "" = cold boot */
};

struct json_t *sbx_vm_saved_to_json(const struct sbx_vm_saved *sv);
/* Checks j (as sbx_vm_saved_to_json() makes it) and fills *out: backend
 * "vm", the state directory and cgroups absolute, no "." or "..", ending
 * in the id, its sockets fitting a unix socket address. 0 or -EINVAL with
 * one line in err. Pure. */
int sbx_vm_saved_parse(const struct json_t *j, struct sbx_vm_saved *out, char *err, size_t errsz);

/* The kernel command line for a guest (pure): tsc_khz 0 leaves out the
 * TSC options. -ENAMETOOLONG when it does not fit. */
int sbx_vm_cmdline(char *out, size_t cap, const char *hostname, unsigned long tsc_khz);

/* "cpu MHz : 2445.404" lines of /proc/cpuinfo text: the first in kHz, or
 * 0. Pure. */
unsigned long sbx_vm_cpuinfo_khz(const char *cpuinfo);

/* A QEMU option value (a path) with every ',' doubled, as QEMU's option
 * parsers want, into out: 0, or -ENAMETOOLONG when it does not fit. Pure. */
int sbx_vm_opt_escape(char *out, size_t cap, const char *in);

/* How long to wait before retrying a snapshot that failed `fails` (>= 1)
 * times in a row: 30 s doubling to 10 min. Pure. */
int64_t sbx_vm_backoff_ms(unsigned fails);

#endif
