/* main.c: sluiced's entry point: options, the configuration, the event loop
 * and its signals. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <pthread.h>
#include <getopt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access.h"
#include "certs.h"
#include "api.h"
#include "apiv1.h"
#include "claims.h"
#include "conf.h"
#include "control.h"
#include "fleet.h"
#include "intercept.h"
#include "log.h"
#include "loop.h"
#include "manager.h"
#include "metrics.h"
#include "snap.h"
#include "worker.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0"
#endif

#define EXIT_CONFIG 2

struct gw_daemon {
	struct gw_loop *loop;
	struct conf *conf;              /* the running configuration */
	const char *conf_path;          /* NULL: the compiled-in default */
	unsigned reloads;
	struct gw_worker *workers;
	unsigned nworkers;
	struct gw_fleet *fleet;         /* the fleet namespace and its lanes */
	struct gw_control *control;     /* daemon.control_socket */
	struct gw_claims *claims;       /* pools, claims, leases */
	struct gw_apiv1 *apiv1;
	struct gw_api *api;             /* api.listen, api.socket */
	const char *agent_path;         /* --agent */
	struct certs_signer *signer;    /* the CA's own process (certs/) */
	struct certs_cache *leaves;     /* minted leaves, shared by the workers */
};

/* The configuration the API authenticates against. */
static pthread_mutex_t conf_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gw_daemon *the_daemon;

static struct conf *
api_conf(void *arg)
{
	struct gw_daemon *dm = the_daemon;
	struct conf *c;

	(void)arg;
	pthread_mutex_lock(&conf_mu);
	c = conf_ref(dm->conf);
	pthread_mutex_unlock(&conf_mu);
	return c;
}

static bool
listen_is_loopback(const struct conf_hostport *hp)
{
	if (!hp->is_ip)
		return strcmp(hp->host, "localhost") == 0;
	if (hp->addr.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)&hp->addr;

		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (hp->addr.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)&hp->addr;

		return IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
	}
	return false;
}

/* One daemon per data_dir, taken before anything is touched (the fleet
 * namespace, the sandboxes): two would rebuild each other's nftables
 * table, interleave the journal and adopt each other's sandboxes. The
 * fd stays open (and locked) for the daemon's life. -1 with a line in
 * err. */
static int
lock_data_dir(const char *dir, char *err, size_t errsz)
{
	char path[4200], buf[4096];
	size_t n = strlen(dir);
	int fd;

	if (n == 0 || n >= sizeof(buf) - 8) {
		snprintf(err, errsz, "daemon.data_dir %s: too long", dir);
		return -1;
	}
	memcpy(buf, dir, n + 1);
	for (char *q = buf + 1; *q; q++) {
		if (*q != '/')
			continue;
		*q = 0;
		(void)mkdir(buf, 0755);
		*q = '/';
	}
	if (mkdir(buf, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errsz, "daemon.data_dir %s: cannot create it: %s", dir,
			 strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errsz, "daemon.data_dir %s: the lock file: %s", dir, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		snprintf(err, errsz, "daemon.data_dir %s: %s", dir,
			 errno == EWOULDBLOCK ? "another sluiced uses it" : strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: sluiced [--config FILE] [--check] [--agent PATH] [FILE]\n"
		"\n"
		"  -c, --config FILE  the configuration (default: the compiled-in conf/sluice.yaml)\n"
		"  -a, --agent PATH   sluice-agent (default: found beside sluiced)\n"
		"  -n, --check        validate the configuration, print every error, exit 0 or 2\n"
		"  -V, --version      print the version and exit\n"
		"  -h, --help         this text\n"
		"\n"
		"Signals: SIGTERM or SIGINT stop cleanly; SIGHUP re-reads the configuration\n"
		"and keeps the running one if the new one has errors.\n");
}

/* Loads the configuration from path (or the compiled-in default); on error
 * prints every diagnostic line through `emit` and returns NULL. */
static struct conf *
load(const char *path, void (*emit)(const char *line))
{
	struct conf_diag d;
	struct conf *c;

	conf_diag_init(&d);
	if (path)
		c = conf_load_file(path, &d);
	else
		c = conf_load_mem("<default>", conf_default_yaml, conf_default_yaml_len, &d);
	for (size_t i = 0; i < d.n; i++)
		emit(d.lines[i]);
	if (d.dropped) {
		char more[64];

		snprintf(more, sizeof(more), "... and %zu more errors", d.dropped);
		emit(more);
	}
	conf_diag_fini(&d);
	return c;
}

static void
emit_stderr(const char *line)
{
	fprintf(stderr, "%s\n", line);
}

static void
emit_log(const char *line)
{
	gw_log_errx("%s", line);
}

static void
apply_log(const struct conf *c)
{
	gw_log_setup(c->daemon.log_level, c->daemon.log_format, STDERR_FILENO);
}

/* Hosts with credentials are intercepted whether or not intercept: lists
 * them (credentials only go on traffic sluice encrypts itself): said once
 * per load, never with a value. */
static void
log_credentials(const struct conf *c)
{
	for (size_t i = 0; i < c->npolicies; i++) {
		const struct conf_policy *po = &c->policies[i];

		for (size_t k = 0; k < po->ncredentials; k++) {
			const struct conf_credential *cr = &po->credentials[k];
			char port[8] = "";

			if (cr->host.port)
				snprintf(port, sizeof(port), ":%u", cr->host.port);
			gw_log_info("policy %s: credential %s (%s) for %s%s%s: the host is intercepted%s",
				    po->name, cr->name, conf_cred_kind_name(cr->kind),
				    cr->host.wildcard ? "*." : "", cr->host.host, port,
				    cr->cleartext ? "; also sent over cleartext http:// (unsafe)" : "");
		}
	}
}

/* Makes c the configuration new connections see. 0, or -1 (logged). */
static int
apply(struct conf *c)
{
	struct gw_snap *s;
	char err[256];
	int rc;

	s = gw_snap_new(c, err, sizeof(err));
	if (!s) {
		gw_log_errx("%s", err);
		return -1;
	}
	rc = gw_access_setup(c->gateway.access_log);
	if (rc < 0) {
		errno = -rc;
		gw_log_err("cannot open the access log %s", c->gateway.access_log);
		gw_snap_unref(s);
		return -1;
	}
	gw_snap_publish(s);
	apply_log(c);
	log_credentials(c);
	return 0;
}

static bool
lanes_same(const struct conf *a, const struct conf *b)
{
	if (a->nlanes != b->nlanes)
		return false;
	for (size_t i = 0; i < a->nlanes; i++) {
		const struct conf_lane *x = &a->lanes[i], *y = &b->lanes[i];

		if (strcmp(x->name, y->name) != 0 || x->subnet.prefix != y->subnet.prefix ||
		    memcmp(x->subnet.addr, y->subnet.addr, 4) != 0 ||
		    x->door_forward != y->door_forward || x->door_socks != y->door_socks ||
		    x->door_intercept != y->door_intercept || x->door_dns != y->door_dns ||
		    x->door_names != y->door_names ||
		    x->transparent != y->transparent)
			return false;
	}
	return true;
}

/* What a reload cannot change without a restart, said once. */
static void
warn_restart_only(const struct conf *old, const struct conf *c)
{
	const struct conf_hostport *a = &old->gateway.listen_forward, *b = &c->gateway.listen_forward;

	if (a->set != b->set || a->port != b->port ||
	    (a->set && memcmp(&a->addr, &b->addr, a->addrlen) != 0))
		gw_log_warnx("gateway.listen.forward changes on restart only");
	a = &old->gateway.listen_socks;
	b = &c->gateway.listen_socks;
	if (a->set != b->set || a->port != b->port ||
	    (a->set && memcmp(&a->addr, &b->addr, a->addrlen) != 0))
		gw_log_warnx("gateway.listen.socks changes on restart only");
	if (!lanes_same(old, c))
		gw_log_warnx("lanes change on restart only");
	if (strcmp(old->daemon.fleet_netns, c->daemon.fleet_netns) != 0)
		gw_log_warnx("daemon.fleet_netns changes on restart only");
	if ((old->daemon.control_socket == NULL) != (c->daemon.control_socket == NULL) ||
	    (c->daemon.control_socket &&
	     strcmp(old->daemon.control_socket, c->daemon.control_socket) != 0))
		gw_log_warnx("daemon.control_socket changes on restart only");
	if (old->gateway.workers != c->gateway.workers)
		gw_log_warnx("gateway.workers changes on restart only");
	if (old->gateway.ndns_servers != c->gateway.ndns_servers ||
	    old->gateway.dns_timeout_ms != c->gateway.dns_timeout_ms ||
	    old->gateway.dns_attempts != c->gateway.dns_attempts)
		gw_log_warnx("gateway.dns changes on restart only");
}

static void
reload(struct gw_daemon *dm)
{
	const char *name = dm->conf_path ? dm->conf_path : "<default>";
	struct conf *c;

	gw_log_info("SIGHUP: reloading the configuration from %s", name);
	c = load(dm->conf_path, emit_log);
	if (!c || apply(c) < 0) {
		conf_unref(c);
		gw_log_errx("configuration reload failed: keeping the running configuration");
		return;
	}
	/* Connections in flight keep the snapshot they started with; live
	 * claims keep the layer they pinned. A reload changes what new
	 * connections and claims see. */
	warn_restart_only(dm->conf, c);
	pthread_mutex_lock(&conf_mu);
	conf_unref(dm->conf);
	dm->conf = c;
	pthread_mutex_unlock(&conf_mu);
	/* The file's pools replace the set (a PUT /v1/pools included). */
	if (dm->claims)
		pool_mgr_set_conf(gw_claims_mgr(dm->claims), c);
	dm->reloads++;
	gw_log_info("configuration reloaded (reload %u)", dm->reloads);
}

static void
on_signal(struct gw_loop *l, int signo, void *arg)
{
	struct gw_daemon *dm = arg;

	switch (signo) {
	case SIGHUP:
		reload(dm);
		break;
	case SIGTERM:
	case SIGINT:
		gw_log_info("%s: shutting down", signo == SIGTERM ? "SIGTERM" : "SIGINT");
		gw_loop_stop(l);
		break;
	default:
		break;
	}
}

/* The leaf cache's counters for /metrics (certs/ has them, core/ shows
 * them). Any thread: certs_cache_stats() takes the cache's lock. */
static void
leaves_stats(void *arg, struct gw_metrics_leaves *out)
{
	struct certs_cache_stats st;

	certs_cache_stats(arg, &st);
	*out = (struct gw_metrics_leaves){
		.hits = st.hits,
		.misses = st.misses,
		.evictions = st.evictions,
		.mints = st.mints,
		.mint_failures = st.mint_failures,
		.entries = st.entries,
	};
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'n' },
		{ "agent", required_argument, NULL, 'a' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	struct gw_daemon dm = { 0 };
	struct conf *fleet_conf = NULL;
	bool check = false;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "c:nVha:", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			dm.conf_path = optarg;
			break;
		case 'n':
			check = true;
			break;
		case 'a':
			dm.agent_path = optarg;
			break;
		case 'V':
			printf("sluiced %s\n", SLUICE_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc) {
		if (dm.conf_path || optind + 1 < argc) {
			usage(stderr);
			return EXIT_CONFIG;
		}
		dm.conf_path = argv[optind];
	}
	/* Credential values, tokens and the configuration's secrets live in
	 * this process: no core dump, no ptrace by the unprivileged. (Commands
	 * it starts get their own dumpable flag back at exec.) */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		gw_log_warn("prctl(PR_SET_DUMPABLE, 0)");

	dm.conf = load(dm.conf_path, emit_stderr);
	if (!dm.conf)
		return EXIT_CONFIG;
	if (check) {
		printf("%s: the configuration is valid\n", dm.conf_path ? dm.conf_path : "<default>");
		conf_unref(dm.conf);
		return 0;
	}
	apply_log(dm.conf);

	/* Writes to a closed peer are errors to handle, not a reason to die;
	 * so is a write past a file-size limit (ulimit -f, LimitFSIZE): EFBIG,
	 * a failed write like ENOSPC. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN);
	dm.loop = gw_loop_new();
	if (!dm.loop) {
		gw_log_err("cannot create the event loop");
		conf_unref(dm.conf);
		return 1;
	}
	rc = gw_loop_signals(dm.loop, sigs, sizeof(sigs) / sizeof(sigs[0]), on_signal, &dm);
	if (rc < 0) {
		errno = -rc;
		gw_log_err("cannot watch signals");
		goto out;
	}
	if (apply(dm.conf) < 0) {
		rc = -EINVAL;
		goto out;
	}
	{
		char err[512];

		if (lock_data_dir(dm.conf->daemon.data_dir, err, sizeof(err)) < 0) {
			gw_log_errx("%s", err);
			rc = -EINVAL;
			goto out;
		}
		/* The CA's signer before any thread exists (it forks): it
		 * alone opens the CA key, creating the CA on first start. */
		{
			struct certs_signer_opts so = {
				.ca_cert = dm.conf->certs.ca_cert,
				.ca_key = dm.conf->certs.ca_key,
				.leaf_validity_days = dm.conf->certs.leaf_validity_days,
			};

			if (certs_signer_start(&so, &dm.signer, err, sizeof(err)) < 0) {
				gw_log_errx("certs: %s", err);
				rc = -EINVAL;
				goto out;
			}
			gw_log_info("certs: CA %s, signer pid %d", dm.conf->certs.ca_cert,
				    (int)certs_signer_pid(dm.signer));
			dm.leaves = certs_cache_new(dm.conf->certs.cache_size,
						    certs_signer_mint_cb, dm.signer, NULL);
			if (!dm.leaves ||
			    gw_intercept_setup(dm.leaves, certs_signer_leaf_key(dm.signer),
					       certs_signer_ca(dm.signer),
					       dm.conf->certs.upstream_ca, err, sizeof(err)) < 0) {
				gw_log_errx("certs: %s", dm.leaves ? err : "out of memory");
				rc = -EINVAL;
				goto out;
			}
			gw_metrics_leaves_source(leaves_stats, dm.leaves);
		}
		/* The fleet first: the lane doors listen inside it. The
		 * fleet keeps the configuration it started with (lanes
		 * change on restart only). */
		dm.fleet = gw_fleet_open(dm.conf, err, sizeof(err));
		if (!dm.fleet) {
			gw_log_errx("%s", err);
			rc = -EINVAL;
			goto out;
		}
		dm.nworkers = dm.conf->gateway.workers ? dm.conf->gateway.workers : gw_workers_auto();
		dm.workers = gw_workers_start(dm.conf, dm.fleet, dm.nworkers, err, sizeof(err));
		if (!dm.workers) {
			gw_log_errx("%s", err);
			rc = -EINVAL;
			goto out;
		}
		/* Every sandbox trusts the CA (the signer, stopped after the
		 * claims, owns the text). */
		dm.claims = gw_claims_start(dm.conf, dm.fleet, dm.agent_path,
					    certs_signer_ca_pem(dm.signer), err, sizeof(err));
		if (!dm.claims || !(dm.apiv1 = gw_apiv1_new(dm.claims))) {
			gw_log_errx("%s", dm.claims ? "out of memory" : err);
			rc = -EINVAL;
			goto out;
		}
		gw_apiv1_set_ca_pem(dm.apiv1, certs_signer_ca_pem(dm.signer));
		if (dm.conf->api.listen.set || dm.conf->api.socket) {
			the_daemon = &dm;
			dm.api = gw_api_start(dm.conf, gw_apiv1_routes, api_conf, dm.apiv1, err,
					      sizeof(err));
			if (!dm.api) {
				gw_log_errx("%s", err);
				rc = -EINVAL;
				goto out;
			}
			if (dm.conf->api.listen.set && !listen_is_loopback(&dm.conf->api.listen))
				gw_log_warnx("api.listen %s:%u is not a loopback address: bearer "
					     "tokens cross the network in clear text",
					     dm.conf->api.listen.host, dm.conf->api.listen.port);
		}
		if (dm.conf->daemon.control_socket) {
			dm.control = gw_control_open(dm.loop, dm.conf->daemon.control_socket,
						     dm.fleet, gw_claims_mgr(dm.claims), err,
						     sizeof(err));
			if (!dm.control) {
				gw_log_errx("%s", err);
				rc = -EINVAL;
				goto out;
			}
		}
	}
	fleet_conf = conf_ref(dm.conf);
	if (dm.conf->gateway.listen_forward.set)
		gw_log_info("forward door on %s:%u", dm.conf->gateway.listen_forward.host,
			    dm.conf->gateway.listen_forward.port);
	if (dm.conf->gateway.listen_socks.set)
		gw_log_info("socks door on %s:%u", dm.conf->gateway.listen_socks.host,
			    dm.conf->gateway.listen_socks.port);
	gw_log_info("sluiced %s started (pid %d, configuration %s, %u workers)", SLUICE_VERSION,
		    (int)getpid(), dm.conf_path ? dm.conf_path : "<default>", dm.nworkers);
	rc = gw_loop_run(dm.loop);
	if (rc < 0) {
		errno = -rc;
		gw_log_err("event loop failed");
	} else {
		gw_log_info("stopped");
	}
out:
	/* The API and the control socket first (no request still holds a
	 * sandbox or the pool manager), then the sandboxes, then the doors. */
	gw_api_stop(dm.api);
	gw_apiv1_free(dm.apiv1);
	gw_control_close(dm.control);
	/* Sandboxes outlive the daemon (the next start re-adopts them),
	 * unless the operator asked for a teardown on a clean exit. */
	gw_claims_stop(dm.claims, rc >= 0 && dm.conf->daemon.fleet_teardown);
	gw_workers_stop(dm.workers, dm.nworkers);
	/* Sandboxes outlive the daemon: their links and rules stay unless
	 * the operator asked for a teardown on a clean exit. */
	gw_fleet_close(dm.fleet, rc >= 0 && dm.conf->daemon.fleet_teardown);
	gw_intercept_teardown();
	gw_metrics_leaves_source(NULL, NULL);
	certs_cache_free(dm.leaves);
	if (dm.signer && certs_signer_stop(dm.signer) < 0)
		gw_log_warnx("certs: the signer did not end cleanly");
	conf_unref(fleet_conf);
	gw_snap_publish(NULL);
	gw_loop_free(dm.loop);
	conf_unref(dm.conf);
	return rc < 0 ? 1 : 0;
}
