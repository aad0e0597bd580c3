/* agent.h: sluice-agent's pieces. agent.c is the connection, its poll loop
 * and exec; fsops.c the file operations; env.c the command environment;
 * main.c the PID 1 duties. Single-threaded: everything runs on the loop. */
#ifndef SLUICE_AGENT_AGENT_H
#define SLUICE_AGENT_AGENT_H

#include "agent-t.h"

struct json_t;
struct ucred;

/* ---- env.c ------------------------------------------------------------ */

/* True for the names a command inherits from the agent's environment:
 * PATH, HOME, TERM, the proxy variables (both cases) and the CA
 * variables (agent_ca_env()'s names). */
bool agent_env_inherited(const char *name, size_t len);

/* The CA variables for a CA installed in dir (agent_ca_install()):
 * SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT, CURL_CA_BUNDLE,
 * GIT_SSL_CAINFO, CARGO_HTTP_CAINFO and AWS_CA_BUNDLE name the bundle
 * (these replace a runtime's own roots, so the bundle holds the system's
 * too), NODE_EXTRA_CA_CERTS the CA alone (Node adds it to its own).
 * Writes up to max "NAME=value" strings of AGENT_CA_ENV_LEN bytes into
 * out; returns how many (AGENT_CA_ENV_N for a dir that fits). Pure. */
#define AGENT_CA_ENV_N 8
#define AGENT_CA_ENV_LEN 128
size_t agent_ca_env(const char *dir, char out[][AGENT_CA_ENV_LEN], size_t max);

/* Builds a command's environment: the inherited variables of `agent_env`
 * ("NAME=value" strings, NULL-terminated), PATH and HOME defaulted when
 * absent, the CA variables of ca_dir (NULL: none), then `set[0..nset)`
 * ("NAME=value") on top, a later name replacing an earlier one. Returns
 * 0 with *out a new NULL-terminated array (free with agent_env_free), or
 * -EINVAL with a line in err for a bad name (empty, with '=' or NUL),
 * -ENOMEM. */
int agent_env_build(char *const *agent_env, const char *ca_dir,
		    const char *const *set, size_t nset, char ***out,
		    char *err, size_t errsz);
void agent_env_free(char **env);

/* Like agent_env_build, but the base is taken whole ("configure" set it,
 * already checked), not filtered to the inherited names. */
int agent_env_build_over(char *const *base, const char *ca_dir,
			 const char *const *set, size_t nset, char ***out,
			 char *err, size_t errsz);

/* ---- config.c --------------------------------------------------------- */

/* Checks a "configure" request (req borrowed) without doing anything: the
 * types, ranges and syntax of every field, unknown fields refused. Pure.
 * Returns 0 with *out filled (release it with agent_config_fini), or
 * -EINVAL with *field set to the bad field's name ("net.address"; static,
 * or borrowed from req for an unknown field) and a line in err naming it;
 * -ENOMEM. */
int agent_config_check(const struct json_t *req, struct agent_config *out,
		       const char **field, char *err, size_t errsz);
void agent_config_fini(struct agent_config *c);

/* Applies c in order: time, entropy, hostname, net, env, cwd (those two
 * into *d, which takes c's env and cwd), ca (agent_ca_install() under
 * agent_ca_root; *d records its directory). Stops at the first failure:
 * returns a negative errno with *step naming it ("time", "entropy",
 * "hostname", "net", "ca", ...) and a line in err; the steps before it
 * stay applied. */
int agent_config_apply(struct agent_config *c, struct agent_defaults *d,
		       const char **step, char *err, size_t errsz);
void agent_defaults_fini(struct agent_defaults *d);

/* In a VM the agent runs under a supervising PID 1 that starts it again
 * if it ends; what "configure" set (env, cwd) is kept in this file (on
 * the guest's tmpfs, 0600) so the next one starts with it. NULL: kept
 * in memory only (the ns backend). */
extern const char *agent_defaults_file;
/* 0 or -errno. Load: -ENOENT when there is no file; a malformed one is
 * -EINVAL and leaves d as it was. */
int agent_defaults_save(const struct agent_defaults *d, const char *path);
int agent_defaults_load(struct agent_defaults *d, const char *path);

/* The op: check, then apply, answer RESULT {} or ERROR. */
void agent_op_configure(struct agent *a, uint32_t id,
			const struct json_t *req);

/* Pure helpers, exported for init.c and the tests. */
/* 1..AGENT_HOSTNAME_MAX bytes of [A-Za-z0-9.-]. */
bool agent_hostname_ok(const char *s, size_t len);
/* A dotted quad, each part 0..255 without leading zeros. */
bool agent_ipv4_parse(const char *s, size_t len, uint32_t *out);
/* Strict RFC 4648 base64 (padding required, no whitespace) into
 * out[0..cap). Returns the byte count, or -1 on bad input or overflow. */
long agent_b64_decode(const char *s, size_t len, uint8_t *out, size_t cap);

/* ---- trust.c ---------------------------------------------------------- */

/* One or more PEM certificates and nothing else: "-----BEGIN
 * CERTIFICATE-----" lines, base64 lines of 1..76 characters, "-----END
 * CERTIFICATE-----" lines, '\n' line ends (the last optional), 1 to
 * AGENT_CA_MAX bytes. A key, a blank line, text around the blocks or a
 * CR is refused. Pure. */
bool agent_ca_pem_ok(const char *s, size_t len);
/* Does roots[0..rlen) hold ca (ignoring its final newline)? Pure. */
bool agent_ca_contains(const char *roots, size_t rlen, const char *ca,
		       size_t calen);
/* The bundle a runtime is pointed at: roots (may be empty), a newline if
 * they lack a final one, then ca unless roots hold it already, ending in
 * one newline. *out is NUL-terminated, *outlen not counting it. 0 or
 * -ENOMEM. Pure. */
int agent_ca_bundle(const char *roots, size_t rlen, const char *ca,
		    size_t calen, char **out, size_t *outlen);
/* Installs ca (checked by agent_ca_pem_ok) in the guest whose root is
 * `root` ("" in a guest; a directory in the tests): AGENT_CA_DIR, else
 * AGENT_CA_DIR_ALT, whichever is the sandbox's own, gets AGENT_CA_FILE
 * (the CA) and AGENT_CA_BUNDLE (the first system bundle found among
 * /etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/ca-bundle.crt,
 * /etc/ssl/cert.pem, then the CA), 0644; that system bundle gets the CA
 * appended (or /etc/ssl/certs/ca-certificates.crt is created when there
 * is none) and /usr/local/share/ca-certificates/sluice.crt and
 * /etc/pki/ca-trust/source/anchors/sluice.pem are written where their
 * directories exist. Every change is made only where agent_ca_private()
 * says the file system is the sandbox's own; the rest is skipped. Again
 * with the same CA changes nothing (the CA is never appended twice).
 * Returns 0 with the directory used (without root) in dir, or a negative
 * errno with a line in err. */
int agent_ca_install(const char *root, const char *ca, size_t calen,
		     char *dir, size_t dircap, char *err, size_t errsz);
/* True when path (a file: the directory it really is in) is the
 * sandbox's own: on the root's own overlay (the same device as "/"), or
 * on a tmpfs or ramfs. The default; the tests point it elsewhere. */
extern bool (*agent_ca_private)(const char *path);
/* The root agent_config_apply() installs under: "" (the tests set it). */
extern const char *agent_ca_root;

/* ---- agent.c ---------------------------------------------------------- */

/* Prepares a for the host stream `fd` (made non-blocking; a owns it).
 * agent_env is the agent's own environment, borrowed for as long as a
 * lives. SIGCHLD and SIGTERM must already be blocked (main does it).
 * a->listen_fd starts at -1 (the caller may set it; a borrows it). Returns 0 or a
 * negative errno with a line in err. */
int agent_init(struct agent *a, int fd, char *const *agent_env, char *err,
	       size_t errsz);

/* Serves the connection until the host closes it, it fails, or a SIGTERM
 * that agent_term_ok() accepts arrives (a->term is then set); on return
 * every child has been killed. With a->listen_fd >= 0 it also accepts on
 * that socket meanwhile: a guest peer is refused at once, a host peer is
 * kept in a->next_fd (a newer one replacing it) for the caller to serve
 * next. Returns 0 on a clean close or SIGTERM, else a negative errno. */
int agent_run(struct agent *a);
void agent_fini(struct agent *a);

/* Queues one frame, a JSON frame (j borrowed), an ERROR frame. They never
 * fail short of out-of-memory, which ends the agent. */
void agent_send(struct agent *a, uint8_t type, uint32_t stream,
		const void *p, size_t len);
void agent_send_json(struct agent *a, uint8_t type, uint32_t stream,
		     const struct json_t *j);
void agent_send_error(struct agent *a, uint32_t stream, const char *code,
		      int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* A free stream slot for id, or NULL (the caller answers the error). */
struct agent_stream *agent_stream_new(struct agent *a, uint32_t id,
				      enum agent_stream_kind kind);
/* Closes the stream's fds, removes a write's temporary file, frees it. */
void agent_stream_free(struct agent *a, struct agent_stream *s);

/* ---- pty.c ----------------------------------------------------------- */

#define AGENT_PTY_DIM_MAX 65535
/* Reads "rows" and "cols" of j (an exec request or a RESIZE payload):
 * integers 1..AGENT_PTY_DIM_MAX; when absent and !required, *rows and
 * *cols are left as they are. 0, or -EINVAL with a line in err. Pure. */
int agent_winsize_get(const struct json_t *j, bool required, unsigned *rows, unsigned *cols,
		      char *err, size_t errsz);
/* An exec request's "pty", "detach", "rows" and "cols": booleans, not
 * both, a size only with a pty (agent_winsize_get; *rows and *cols keep
 * their defaults when absent). 0, or -EINVAL with a line in err. Pure. */
int agent_exec_mode(const struct json_t *req, bool *pty, bool *detach, unsigned *rows,
		    unsigned *cols, char *err, size_t errsz);
/* A detached exec has started (s->pid): answers STARTED and RESULT
 * {"pid", "detached": true} and frees s without killing the command. */
void agent_exec_detached(struct agent *a, struct agent_stream *s);
/* A new pty of that size: the master (close-on-exec) and the slave's
 * path. 0 or -errno. */
int agent_pty_open(unsigned rows, unsigned cols, int *master, char *slave, size_t cap);
/* In the child, after setsid(): the slave becomes the controlling
 * terminal and fds 0, 1 and 2. 0 or -errno. */
int agent_pty_attach(const char *slave);
/* Where a KILL frame's signal goes: a pty exec's foreground process
 * group (as ^C would), else the command's own. */
pid_t agent_pty_target(const struct agent_stream *s);
/* A RESIZE frame on stream s. */
void agent_op_resize(struct agent *a, struct agent_stream *s, const struct agent_frame *f);

/* ---- init.c ---------------------------------------------------------- */

/* Parses a kernel command line (the bytes of /proc/cmdline, at most a few
 * KiB, read whole) for sluice.root=, sluice.port= and sluice.hostname=,
 * split into words as the kernel does (spaces outside double quotes).
 * Other words are ignored; a repeated key's last value wins. Pure.
 * Returns 0 with *out filled (port defaults to AGENT_PORT_DEFAULT), or
 * -EINVAL with a line in err for the first bad sluice.* word (no '=',
 * empty, too long, quoted, bad characters, root not an absolute path):
 * *out still holds every good value and the default for the bad one. */
int agent_cmdline_parse(const char *buf, size_t len, struct agent_cmdline *out,
			char *err, size_t errsz);

/* Finds the virtio-serial port called name: the entry E of sysdir
 * ("/sys/class/virtio-ports") whose E/name holds it. Writes "/dev/E" to
 * path. Returns 0, -ENOENT (not there yet) or -ENAMETOOLONG. */
int agent_vport_find(const char *sysdir, const char *name, char *path,
		     size_t cap);

/* The duties of a VM's init, run once when the agent is PID 1 without
 * arguments: mounts, kernel modules, the overlay root and switch-root,
 * hostname, lo up (see docs/sandboxes.md). Failures are logged to stderr
 * (the console) and skipped. Then waits (forever if need be) for the
 * virtio port named on the command line and writes its path to port. */
void agent_vm_init(char *port, size_t cap);

/* ---- listen.c --------------------------------------------------------- */

/* The peer check of --listen: true only for a peer the kernel reports
 * with pid 0, that is, one outside the agent's pid namespace (the host).
 * Pure. */
bool agent_peer_is_host(const struct ucred *uc);

/* Whether a SIGTERM from sender_pid (signalfd's ssi_pid) ends the agent:
 * always outside a sandbox; as PID 1 of a pid namespace (is_ns_init) only
 * when the sender is outside it (pid 0), so a guest cannot end its own
 * sandbox's agent. Pure. */
bool agent_term_ok(uint32_t sender_pid, bool is_ns_init);

/* Creates the listening unix socket at path: parent directories made
 * (0700), a stale socket there replaced, the socket mode 0600, non-
 * blocking and close-on-exec. Returns the fd, or a negative errno with a
 * line in err. */
int agent_listen(const char *path, char *err, size_t errsz);

/* Accepts one pending connection on lfd. Returns its fd (non-blocking,
 * close-on-exec) when the peer is the host; -EPERM after closing a peer
 * that is not; -EAGAIN when none waits; another negative errno. *peer
 * (may be NULL) gets the peer's credentials when they could be read. */
int agent_accept_host(int lfd, struct ucred *peer);

/* ---- fsops.c ---------------------------------------------------------- */

/* Each answers the request on stream `id` itself (RESULT or ERROR), or
 * opens a stream that the loop drives (read, write). req is borrowed. */
void agent_op_read(struct agent *a, uint32_t id, const struct json_t *req);
void agent_op_write(struct agent *a, uint32_t id, const struct json_t *req);
void agent_op_list(struct agent *a, uint32_t id, const struct json_t *req);
void agent_op_stat(struct agent *a, uint32_t id, const struct json_t *req);
void agent_op_mkdir(struct agent *a, uint32_t id, const struct json_t *req);
void agent_op_remove(struct agent *a, uint32_t id, const struct json_t *req);

/* A write stream got IN bytes (len 0: the end). */
void agent_write_in(struct agent *a, struct agent_stream *s,
		    const uint8_t *p, size_t len);
/* A read stream may send: reads one chunk within its window. Returns true
 * when the stream ended (RESULT or ERROR sent, stream freed). */
bool agent_read_pump(struct agent *a, struct agent_stream *s);

/* ---- fstree.c --------------------------------------------------------- */

/* tar_read, tar_write (proto.h): as the ops above. */
void agent_op_tar_read(struct agent *a, uint32_t id, const struct json_t *req);
void agent_op_tar_write(struct agent *a, uint32_t id, const struct json_t *req);
/* A tar_read stream may send (s->tarw): one chunk within its window.
 * True when the stream ended (RESULT or ERROR sent, stream freed). */
bool agent_tar_read_pump(struct agent *a, struct agent_stream *s);
/* A tar_write stream (s->tarx) got IN bytes (len 0: the end). */
void agent_tar_write_in(struct agent *a, struct agent_stream *s, const uint8_t *p,
			size_t len);
/* Frees a stream's tar walk or extraction (agent_stream_free()). */
void agent_tar_stream_fini(struct agent_stream *s);

#endif
