/* agent-t.h: types of sluice-agent, the guest side of the agent protocol.
 * One connection, one poll loop, no threads. */
#ifndef SLUICE_AGENT_AGENT_T_H
#define SLUICE_AGENT_AGENT_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

struct agent_tarfs_walk;
struct agent_tarfs_x;

#define AGENT_MAX_STREAMS 64            /* open streams per connection */
#define AGENT_RBUF 65536                /* bytes read from the host at once */
#define AGENT_OUT_HIGH (512u * 1024)    /* stop producing data above this */
#define AGENT_OUT_HARD (4u * 1024 * 1024) /* stop reading requests above */
#define AGENT_DRAIN_MS 250              /* pipe grace after a child exits */
#define AGENT_LISTEN_PAUSE_MS 100       /* accept out of descriptors: look again */
#define AGENT_STDIN_BUF (256u * 1024)   /* stdin credit granted at once */
#define AGENT_PTY_ROWS 24               /* a pty's size when none is asked */
#define AGENT_PTY_COLS 80

enum agent_stream_kind {
	AGENT_SK_FREE = 0,
	AGENT_SK_EXEC,
	AGENT_SK_READ,
	AGENT_SK_WRITE,
};

/* One open stream. Exec: a child in its own process group with three
 * pipes; read: a file sent as OUT frames; write: a temporary file renamed
 * into place when the host sends an empty IN frame. */
struct agent_stream {
	enum agent_stream_kind kind;
	uint32_t id;
	uint64_t window;        /* OUT/ERR bytes the host still accepts */
	uint64_t in_credit;     /* IN bytes the host may still send */
	uint64_t total;         /* bytes moved so far */

	/* exec */
	pid_t pid;
	int fd_out, fd_err, fd_in;
	uint8_t *inbuf;         /* stdin waiting for the pipe */
	size_t in_len;
	bool in_eof;            /* the host sent its empty IN frame */
	bool exited;
	int status;             /* from waitpid */
	bool timed_out;
	bool pty;               /* fd_out is a pty's master, fd_in a dup */
	int64_t deadline;       /* kill at this time (ms), 0 = none */
	int64_t drain_deadline; /* close pipes at this time after exit */

	/* read and write */
	int file_fd;
	struct agent_tarfs_walk *tarw;  /* tar_read: the tree being sent */
	struct agent_tarfs_x *tarx;     /* tar_write: the extraction */
	char *path;             /* write: final name */
	char *tmp_path;         /* write: temporary name */
	unsigned mode;
};

/* What a "configure" request asked for, validated (agent_config_check):
 * each part only where its has_ flag is set. Owns env, cwd and ca. */
struct agent_config {
	bool has_time, has_entropy, has_hostname, has_net, has_env, has_cwd;
	bool has_ca;
	int64_t time_ns;
	uint8_t entropy[AGENT_ENTROPY_MAX];
	size_t entropy_len;
	char hostname[AGENT_HOSTNAME_MAX + 1];
	/* net: ifname "" = the first non-loopback link */
	char ifname[16];
	bool has_address, has_gateway;
	uint32_t address, gateway;      /* host byte order */
	int prefix;                     /* 0..32 with has_address */
	int mtu;                        /* 0: leave it */
	char **env;                     /* "NAME=value", NULL-terminated */
	char *cwd;
	char *ca;                       /* PEM, agent_ca_pem_ok() */
	size_t ca_len;
};

/* The defaults of later execs that "configure" sets. They outlive one
 * host connection: main owns one set for the whole process. */
struct agent_defaults {
	char **env;     /* NULL: derived from the agent's own environment */
	char *cwd;      /* NULL: "/" */
	char *ca_dir;   /* where "configure" put the CA and its bundle; NULL:
			   none, no CA variables */
};

/* The kernel command line's sluice.* parameters (agent_cmdline_parse). */
#define AGENT_CMDLINE_ROOT_MAX 255
#define AGENT_CMDLINE_PORT_MAX 63
#define AGENT_PORT_DEFAULT "sluice.agent"
struct agent_cmdline {
	char root[AGENT_CMDLINE_ROOT_MAX + 1];  /* sluice.root=, "" = none */
	char port[AGENT_CMDLINE_PORT_MAX + 1];  /* sluice.port= */
	char hostname[AGENT_HOSTNAME_MAX + 1];  /* sluice.hostname=, "" */
};

struct agent {
	int fd;                 /* the host stream, non-blocking */
	int sigfd;              /* SIGCHLD, SIGTERM */
	int listen_fd;          /* --listen socket (borrowed), or -1 */
	int next_fd;            /* a host waiting to be served next, or -1 */
	int64_t listen_resume_ms; /* listen_fd unwatched until then: accept
				     ran out of descriptors or memory */
	bool eof;               /* the host closed its side */
	bool term;              /* SIGTERM from the host: exit */
	bool dead;              /* fatal framing or I/O error */
	struct agent_dec dec;
	uint8_t *dec_buf;
	uint8_t *rbuf;

	uint8_t *out;           /* frames waiting for the host */
	size_t out_off, out_len, out_cap;

	struct agent_stream streams[AGENT_MAX_STREAMS];
	char *const *base_env;        /* the variables commands inherit */
	struct agent_defaults *defaults; /* borrowed; own_defaults unless the
					    caller points it elsewhere */
	struct agent_defaults own_defaults;
	int64_t started_ms;

	uint64_t frames_bad, frames_unknown_stream, reaped, refused;
};

#endif
