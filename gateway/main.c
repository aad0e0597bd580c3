/* main.c: sluiced's entry point: options, the configuration, the event loop
 * and its signals. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "loop.h"

#ifndef SLUICE_VERSION
#define SLUICE_VERSION "0"
#endif

#define EXIT_CONFIG 2

struct gw_daemon {
	struct gw_loop *loop;
	struct conf *conf;              /* the running configuration */
	const char *conf_path;          /* NULL: the compiled-in default */
	unsigned reloads;
};

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: sluiced [--config FILE] [--check] [FILE]\n"
		"\n"
		"  -c, --config FILE  the configuration (default: the compiled-in conf/sluice.yaml)\n"
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

static void
reload(struct gw_daemon *dm)
{
	const char *name = dm->conf_path ? dm->conf_path : "<default>";
	struct conf *c;

	gw_log_info("SIGHUP: reloading the configuration from %s", name);
	c = load(dm->conf_path, emit_log);
	if (!c) {
		gw_log_errx("configuration reload failed: keeping the running configuration");
		return;
	}
	/* Live claims keep the layer they pinned; what a reload changes is
	 * what new connections and claims see. */
	conf_unref(dm->conf);
	dm->conf = c;
	dm->reloads++;
	apply_log(c);
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

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'n' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	struct gw_daemon dm = { 0 };
	bool check = false;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "c:nVh", opts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			dm.conf_path = optarg;
			break;
		case 'n':
			check = true;
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

	dm.conf = load(dm.conf_path, emit_stderr);
	if (!dm.conf)
		return EXIT_CONFIG;
	if (check) {
		printf("%s: the configuration is valid\n", dm.conf_path ? dm.conf_path : "<default>");
		conf_unref(dm.conf);
		return 0;
	}
	apply_log(dm.conf);

	/* Writes to a closed peer are errors to handle, not a reason to die. */
	signal(SIGPIPE, SIG_IGN);
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
	gw_log_info("sluiced %s started (pid %d, configuration %s)", SLUICE_VERSION,
		    (int)getpid(), dm.conf_path ? dm.conf_path : "<default>");
	rc = gw_loop_run(dm.loop);
	if (rc < 0) {
		errno = -rc;
		gw_log_err("event loop failed");
	} else {
		gw_log_info("stopped");
	}
out:
	gw_loop_free(dm.loop);
	conf_unref(dm.conf);
	return rc < 0 ? 1 : 0;
}
