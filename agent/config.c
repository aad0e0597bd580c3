/* config.c: the "configure" op. See agent.h.
 *
 * Everything is checked first (agent_config_check, pure), then applied in
 * a fixed order: time, entropy, hostname, net, env, cwd, ca. The entropy
 * never reaches an error message and is wiped once used.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/random.h>

#include <jansson.h>

#include "agent.h"

#ifndef RNDRESEEDCRNG
#define RNDRESEEDCRNG _IO('R', 0x07)
#endif

/* 2000-01-01 and 2200-01-01 in ns: a value outside is a unit mistake
 * (seconds or ms sent as ns) or garbage, not a clock. */
#define TIME_NS_MIN (946684800LL * 1000000000LL)
#define TIME_NS_MAX (7258118400LL * 1000000000LL)
#define ENV_NAME_MAX 256
#define ENV_MAX 1024

/* ---- pure helpers ------------------------------------------------------ */

bool
agent_hostname_ok(const char *s, size_t len)
{
	if (s == NULL || len == 0 || len > AGENT_HOSTNAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '-'))
			return false;
	}
	return true;
}

bool
agent_ipv4_parse(const char *s, size_t len, uint32_t *out)
{
	uint32_t v = 0;
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		unsigned n = 0;
		size_t start = i;

		if (part > 0) {
			if (i >= len || s[i] != '.')
				return false;
			start = ++i;
		}
		while (i < len && s[i] >= '0' && s[i] <= '9' && i - start < 3)
			n = n * 10 + (unsigned)(s[i++] - '0');
		if (i == start || n > 255 || (s[start] == '0' && i - start > 1))
			return false;
		v = v << 8 | n;
	}
	if (i != len)
		return false;
	*out = v;
	return true;
}

static int
b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long
agent_b64_decode(const char *s, size_t len, uint8_t *out, size_t cap)
{
	size_t n = 0;

	if (len % 4 != 0)
		return -1;
	for (size_t i = 0; i < len; i += 4) {
		int v[4], pad = 0;
		uint32_t w;

		for (int k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			/* data after a '=' */
			if (pad || (v[k] = b64_val(s[i + k])) < 0)
				return -1;
		}
		w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
		    (uint32_t)v[2] << 6 | (uint32_t)v[3];
		/* the bits a padded group leaves unused must be 0 */
		if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
			return -1;
		if (n + 3 - (size_t)pad > cap)
			return -1;
		out[n++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[n++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[n++] = (uint8_t)w;
	}
	return (long)n;
}

static bool
env_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_'))
			return false;
	}
	return true;
}

/* ---- check ------------------------------------------------------------- */

void
agent_config_fini(struct agent_config *c)
{
	if (c == NULL)
		return;
	agent_env_free(c->env);
	free(c->cwd);
	free(c->ca);
	/* the entropy is a secret: gone once used or refused */
	explicit_bzero(c->entropy, sizeof(c->entropy));
	memset(c, 0, sizeof(*c));
}

#define BAD(f, ...)                                                           \
	do {                                                                  \
		*field = (f);                                                 \
		snprintf(err, errsz, "\"" f "\": " __VA_ARGS__);              \
		rc = -EINVAL;                                                 \
		goto out;                                                     \
	} while (0)

static int
check_net(const json_t *net, struct agent_config *c, const char **field,
	  char *err, size_t errsz)
{
	const char *k;
	json_t *v;
	int rc = 0;

	if (!json_is_object(net))
		BAD("net", "want an object");
	json_object_foreach((json_t *)(uintptr_t)net, k, v) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);

		if (strcmp(k, AGENT_F_IFNAME) == 0) {
			if (s == NULL || n == 0 || n >= sizeof(c->ifname) ||
			    strlen(s) != n || strchr(s, '/') ||
			    strchr(s, ' ') || !strcmp(s, ".") ||
			    !strcmp(s, ".."))
				BAD("net.ifname", "want an interface name of "
				    "1..15 bytes without '/' or spaces");
			memcpy(c->ifname, s, n + 1);
		} else if (strcmp(k, AGENT_F_ADDRESS) == 0) {
			const char *slash = s ? memchr(s, '/', n) : NULL;
			size_t al = slash ? (size_t)(slash - s) : 0;
			size_t pl = slash ? n - al - 1 : 0;
			int p = 0;

			if (s == NULL || slash == NULL || pl == 0 || pl > 2 ||
			    !agent_ipv4_parse(s, al, &c->address))
				BAD("net.address", "want A.B.C.D/P (IPv4 with "
				    "a prefix length)");
			for (size_t i = 0; i < pl; i++) {
				char d = slash[1 + i];

				if (d < '0' || d > '9' || (i == 0 && d == '0' && pl > 1))
					BAD("net.address", "prefix length: want "
					    "1..32");
				p = p * 10 + (d - '0');
			}
			if (p < 1 || p > 32)
				BAD("net.address", "prefix length: want 1..32");
			c->prefix = p;
			c->has_address = true;
		} else if (strcmp(k, AGENT_F_GATEWAY) == 0) {
			if (s == NULL || !agent_ipv4_parse(s, n, &c->gateway))
				BAD("net.gateway", "want an IPv4 address "
				    "A.B.C.D");
			c->has_gateway = true;
		} else if (strcmp(k, AGENT_F_MTU) == 0) {
			if (!json_is_integer(v) ||
			    json_integer_value(v) < AGENT_MTU_MIN ||
			    json_integer_value(v) > AGENT_MTU_MAX)
				BAD("net.mtu", "want an integer %d..%d",
				    AGENT_MTU_MIN, AGENT_MTU_MAX);
			c->mtu = (int)json_integer_value(v);
		} else {
			*field = "net";
			snprintf(err, errsz, "\"net\": unknown field \"%s\"",
				 k);
			rc = -EINVAL;
			goto out;
		}
	}
	if (c->has_address && c->has_gateway) {
		uint32_t mask = c->prefix == 32 ? 0xffffffffu
						: ~(0xffffffffu >> c->prefix);

		if ((c->address & mask) != (c->gateway & mask) ||
		    c->address == c->gateway)
			BAD("net.gateway", "not another address in "
			    "net.address's subnet");
	}
	c->has_net = true;
out:
	return rc;
}

static int
check_env(const json_t *env, struct agent_config *c, const char **field,
	  char *err, size_t errsz)
{
	const char *k;
	json_t *v;
	size_t i = 0;
	int rc = 0;

	if (!json_is_object(env))
		BAD("env", "want an object of strings");
	if (json_object_size(env) > ENV_MAX)
		BAD("env", "more than %d variables", ENV_MAX);
	c->env = calloc(json_object_size(env) + 1, sizeof(*c->env));
	if (c->env == NULL)
		return -ENOMEM;
	json_object_foreach((json_t *)(uintptr_t)env, k, v) {
		const char *s = json_string_value(v);

		if (!env_name_ok(k)) {
			*field = "env";
			snprintf(err, errsz, "\"env\": bad name \"%.64s\": "
				 "want [A-Za-z_][A-Za-z0-9_]*, at most %d "
				 "bytes", k, ENV_NAME_MAX);
			rc = -EINVAL;
			goto out;
		}
		if (s == NULL || strlen(s) != json_string_length(v)) {
			*field = "env";
			snprintf(err, errsz, "\"env\": \"%s\" must be a string "
				 "without NUL", k);
			rc = -EINVAL;
			goto out;
		}
		if (asprintf(&c->env[i], "%s=%s", k, s) < 0) {
			c->env[i] = NULL;
			return -ENOMEM;
		}
		i++;
	}
	c->has_env = true;
out:
	return rc;
}

int
agent_config_check(const json_t *req, struct agent_config *c,
		   const char **field, char *err, size_t errsz)
{
	const char *k;
	json_t *v;
	int rc = 0;

	memset(c, 0, sizeof(*c));
	*field = NULL;
	if (!json_is_object(req))
		BAD("op", "the request is not an object");
	json_object_foreach((json_t *)(uintptr_t)req, k, v) {
		const char *s = json_string_value(v);
		size_t n = json_string_length(v);

		if (strcmp(k, AGENT_F_OP) == 0) {
			continue;
		} else if (strcmp(k, AGENT_F_TIME_NS) == 0) {
			if (!json_is_integer(v) ||
			    json_integer_value(v) < TIME_NS_MIN ||
			    json_integer_value(v) > TIME_NS_MAX)
				BAD("time_ns", "want an integer, nanoseconds "
				    "since 1970 between the years 2000 and "
				    "2200");
			c->time_ns = (int64_t)json_integer_value(v);
			c->has_time = true;
		} else if (strcmp(k, AGENT_F_ENTROPY) == 0) {
			long got;

			if (s == NULL)
				BAD("entropy", "want a base64 string");
			/* bound before decoding: 512 bytes are 684 chars */
			got = n > 4 * ((AGENT_ENTROPY_MAX + 2) / 3)
				      ? -1
				      : agent_b64_decode(s, n, c->entropy,
							 sizeof(c->entropy));
			if (got < AGENT_ENTROPY_MIN)
				BAD("entropy", "want base64 (RFC 4648, padded) "
				    "of %d..%d bytes", AGENT_ENTROPY_MIN,
				    AGENT_ENTROPY_MAX);
			c->entropy_len = (size_t)got;
			c->has_entropy = true;
		} else if (strcmp(k, AGENT_F_HOSTNAME) == 0) {
			if (s == NULL || strlen(s) != n ||
			    !agent_hostname_ok(s, n))
				BAD("hostname", "want 1..%d characters of "
				    "[A-Za-z0-9.-]", AGENT_HOSTNAME_MAX);
			memcpy(c->hostname, s, n + 1);
			c->has_hostname = true;
		} else if (strcmp(k, AGENT_F_NET) == 0) {
			if ((rc = check_net(v, c, field, err, errsz)) < 0)
				goto out;
		} else if (strcmp(k, AGENT_F_ENV) == 0) {
			if ((rc = check_env(v, c, field, err, errsz)) < 0)
				goto out;
		} else if (strcmp(k, AGENT_F_CWD) == 0) {
			if (s == NULL || s[0] != '/' || strlen(s) != n ||
			    n >= PATH_MAX)
				BAD("cwd", "want an absolute path");
			if ((c->cwd = strdup(s)) == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			c->has_cwd = true;
		} else if (strcmp(k, AGENT_F_CA) == 0) {
			/* certificates only: what reaches the trust store is
			 * checked here, never passed through as it came */
			if (s == NULL || strlen(s) != n ||
			    !agent_ca_pem_ok(s, n))
				BAD("ca", "want 1..%u bytes of PEM "
				    "certificates (BEGIN/END CERTIFICATE "
				    "lines around base64, nothing else)",
				    AGENT_CA_MAX);
			if ((c->ca = strdup(s)) == NULL) {
				rc = -ENOMEM;
				goto out;
			}
			c->ca_len = n;
			c->has_ca = true;
		} else {
			*field = k;
			snprintf(err, errsz, "unknown field \"%.64s\"", k);
			rc = -EINVAL;
			goto out;
		}
	}
out:
	if (rc == -ENOMEM)
		snprintf(err, errsz, "out of memory");
	if (rc < 0)
		agent_config_fini(c);
	return rc;
}

/* ---- apply ------------------------------------------------------------- */

#define FAIL(st, ...)                                                         \
	do {                                                                  \
		rc = -errno;                                                  \
		*step = (st);                                                 \
		snprintf(err, errsz, st ": " __VA_ARGS__);                    \
		goto out;                                                     \
	} while (0)

static int
apply_entropy(const struct agent_config *c, const char **step, char *err,
	      size_t errsz)
{
	/* struct rand_pool_info ends in a flexible array: room for it and
	 * the bytes in one aligned buffer */
	union {
		struct rand_pool_info info;
		uint8_t raw[sizeof(struct rand_pool_info) + AGENT_ENTROPY_MAX];
	} r;
	int fd, rc = 0;

	fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		FAIL("entropy", "open /dev/urandom: %s", strerror(errno));
	memset(&r, 0, sizeof(r));
	r.info.entropy_count = (int)(c->entropy_len * 8);
	r.info.buf_size = (int)c->entropy_len;
	memcpy(r.raw + sizeof(struct rand_pool_info), c->entropy, c->entropy_len);
	if (ioctl(fd, RNDADDENTROPY, &r) < 0)
		FAIL("entropy", "RNDADDENTROPY: %s", strerror(errno));
	/* kernels before 5.x lack it; the credited entropy still counts */
	if (ioctl(fd, RNDRESEEDCRNG) < 0 && errno != ENOTTY &&
	    errno != EINVAL)
		FAIL("entropy", "RNDRESEEDCRNG: %s", strerror(errno));
out:
	explicit_bzero(&r, sizeof(r));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The first link that is not loopback, in index order. */
static int
first_link(char *name, size_t cap)
{
	struct if_nameindex *ifs = if_nameindex(), *i;
	int rc = -ENODEV;

	if (ifs == NULL)
		return -errno;
	for (i = ifs; i->if_index != 0; i++) {
		struct ifreq ifr;
		int s;

		if (strlen(i->if_name) >= cap || strcmp(i->if_name, "lo") == 0)
			continue;
		/* loopback by flag, not by name */
		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", i->if_name);
		s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 &&
		    (ifr.ifr_flags & IFF_LOOPBACK)) {
			close(s);
			continue;
		}
		if (s >= 0)
			close(s);
		snprintf(name, cap, "%s", i->if_name);
		rc = 0;
		break;
	}
	if_freenameindex(ifs);
	return rc;
}

static void
sin_put(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(addr) };

	memcpy(sa, &sin, sizeof(sin));
}

static int
apply_net(const struct agent_config *c, const char **step, char *err,
	  size_t errsz)
{
	char ifname[IFNAMSIZ];
	struct ifreq ifr;
	int s = -1, rc = 0;

	if (c->ifname[0]) {
		snprintf(ifname, sizeof(ifname), "%s", c->ifname);
	} else if ((rc = first_link(ifname, sizeof(ifname))) < 0) {
		errno = -rc;
		FAIL("net", "no network link besides loopback: %s",
		     strerror(errno));
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		FAIL("net", "socket: %s", strerror(errno));
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (c->mtu) {
		ifr.ifr_mtu = c->mtu;
		if (ioctl(s, SIOCSIFMTU, &ifr) < 0)
			FAIL("net", "SIOCSIFMTU %s %d: %s", ifname, c->mtu,
			     strerror(errno));
	}
	if (c->has_address) {
		uint32_t mask = ~(0xffffffffu >> c->prefix);

		if (c->prefix == 32)
			mask = 0xffffffffu;
		sin_put(&ifr.ifr_addr, c->address);
		if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
			FAIL("net", "SIOCSIFADDR %s: %s", ifname,
			     strerror(errno));
		sin_put(&ifr.ifr_netmask, mask);
		if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
			FAIL("net", "SIOCSIFNETMASK %s: %s", ifname,
			     strerror(errno));
	}
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		FAIL("net", "SIOCGIFFLAGS %s: %s", ifname, strerror(errno));
	if (!(ifr.ifr_flags & IFF_UP)) {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			FAIL("net", "SIOCSIFFLAGS %s up: %s", ifname,
			     strerror(errno));
	}
	if (c->has_gateway) {
		struct rtentry rt;

		/* replace: drop any default route first (a reconfigure) */
		for (int i = 0; i < 16; i++) {
			memset(&rt, 0, sizeof(rt));
			sin_put(&rt.rt_dst, 0);
			sin_put(&rt.rt_genmask, 0);
			if (ioctl(s, SIOCDELRT, &rt) < 0)
				break;
		}
		memset(&rt, 0, sizeof(rt));
		sin_put(&rt.rt_dst, 0);
		sin_put(&rt.rt_genmask, 0);
		sin_put(&rt.rt_gateway, c->gateway);
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		rt.rt_dev = ifname;
		if (ioctl(s, SIOCADDRT, &rt) < 0)
			FAIL("net", "SIOCADDRT default via %u.%u.%u.%u dev %s: "
			     "%s", c->gateway >> 24, c->gateway >> 16 & 255,
			     c->gateway >> 8 & 255, c->gateway & 255, ifname,
			     strerror(errno));
	}
out:
	if (s >= 0)
		close(s);
	return rc;
}

void
agent_defaults_fini(struct agent_defaults *d)
{
	if (d == NULL)
		return;
	agent_env_free(d->env);
	free(d->cwd);
	free(d->ca_dir);
	d->env = NULL;
	d->cwd = NULL;
	d->ca_dir = NULL;
}

const char *agent_ca_root = "";

int
agent_config_apply(struct agent_config *c, struct agent_defaults *d,
		   const char **step, char *err, size_t errsz)
{
	int rc = 0;

	*step = NULL;
	if (c->has_time) {
		struct timespec ts = { .tv_sec = c->time_ns / 1000000000,
				       .tv_nsec = c->time_ns % 1000000000 };

		if (clock_settime(CLOCK_REALTIME, &ts) < 0)
			FAIL("time", "clock_settime: %s", strerror(errno));
	}
	if (c->has_entropy &&
	    (rc = apply_entropy(c, step, err, errsz)) < 0)
		goto out;
	if (c->has_hostname &&
	    sethostname(c->hostname, strlen(c->hostname)) < 0)
		FAIL("hostname", "sethostname: %s", strerror(errno));
	if (c->has_net && (rc = apply_net(c, step, err, errsz)) < 0)
		goto out;
	if (c->has_env) {
		agent_env_free(d->env);
		d->env = c->env;
		c->env = NULL;
	}
	if (c->has_cwd) {
		free(d->cwd);
		d->cwd = c->cwd;
		c->cwd = NULL;
	}
	if (c->has_ca) {
		char dir[PATH_MAX], *dup;

		rc = agent_ca_install(agent_ca_root, c->ca, c->ca_len, dir,
				      sizeof(dir), err, errsz);
		if (rc < 0) {
			char e2[256];

			snprintf(e2, sizeof(e2), "%s", err);
			*step = "ca";
			snprintf(err, errsz, "ca: %s", e2);
			goto out;
		}
		if ((dup = strdup(dir)) == NULL) {
			rc = -ENOMEM;
			*step = "ca";
			snprintf(err, errsz, "ca: out of memory");
			goto out;
		}
		free(d->ca_dir);
		d->ca_dir = dup;
	}
out:
	explicit_bzero(c->entropy, sizeof(c->entropy));
	return rc;
}

/* ---- kept across a restart of the agent (VM mode) ----------------------- */

const char *agent_defaults_file;

int
agent_defaults_save(const struct agent_defaults *d, const char *path)
{
	char tmp[PATH_MAX];
	json_t *j = json_object(), *env = json_array();
	int rc = -ENOMEM, fd;

	if (j == NULL || env == NULL)
		goto out;
	for (size_t i = 0; d->env && d->env[i]; i++)
		if (json_array_append_new(env, json_string(d->env[i])) < 0)
			goto out;
	if (json_object_set(j, "env", d->env ? env : json_null()) < 0 ||
	    json_object_set_new(j, "cwd", d->cwd ? json_string(d->cwd) : json_null()) < 0 ||
	    json_object_set_new(j, "ca_dir",
				d->ca_dir ? json_string(d->ca_dir) : json_null()) < 0)
		goto out;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = json_dumpfd(j, fd, JSON_COMPACT) < 0 ? -EIO : 0;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
out:
	json_decref(env);
	json_decref(j);
	return rc;
}

int
agent_defaults_load(struct agent_defaults *d, const char *path)
{
	json_error_t je;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *env, *cwd, *cad, *v;
	struct agent_defaults n = { 0 };
	size_t i;
	int rc = -EINVAL;

	if (j == NULL)
		return access(path, F_OK) < 0 ? -errno : -EINVAL;
	env = json_object_get(j, "env");
	cwd = json_object_get(j, "cwd");
	cad = json_object_get(j, "ca_dir");
	if (!json_is_object(j) || (env && !json_is_null(env) && !json_is_array(env)) ||
	    (cwd && !json_is_null(cwd) && !json_is_string(cwd)) ||
	    (cad && !json_is_null(cad) &&
	     (!json_is_string(cad) || json_string_value(cad)[0] != '/')) ||
	    json_array_size(env) > ENV_MAX)
		goto out;
	if (json_is_array(env)) {
		if ((n.env = calloc(json_array_size(env) + 1, sizeof(*n.env))) == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		json_array_foreach(env, i, v) {
			if (!json_is_string(v) || strchr(json_string_value(v), '=') == NULL)
				goto out;
			if ((n.env[i] = strdup(json_string_value(v))) == NULL) {
				rc = -ENOMEM;
				goto out;
			}
		}
	}
	if (json_is_string(cwd) && (n.cwd = strdup(json_string_value(cwd))) == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if (json_is_string(cad) && (n.ca_dir = strdup(json_string_value(cad))) == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	agent_defaults_fini(d);
	*d = n;
	n = (struct agent_defaults){ 0 };
	rc = 0;
out:
	agent_defaults_fini(&n);
	json_decref(j);
	return rc;
}

/* ---- the op ------------------------------------------------------------ */

static void
send_error(struct agent *a, uint32_t id, const char *code, int e,
	   const char *key, const char *val, const char *msg)
{
	json_t *j = json_pack("{s:s, s:s, s:s}", AGENT_F_CODE, code,
			      AGENT_F_MESSAGE, msg, key, val ? val : "");

	if (j == NULL) {
		agent_send_error(a, id, code, e, "%s", msg);
		return;
	}
	if (e)
		json_object_set_new(j, AGENT_F_ERRNO, json_integer(e));
	agent_send_json(a, AGENT_FT_ERROR, id, j);
	json_decref(j);
}

void
agent_op_configure(struct agent *a, uint32_t id, const json_t *req)
{
	struct agent_config c;
	const char *what;
	char err[256], msg[300];
	int rc;

	rc = agent_config_check(req, &c, &what, err, sizeof(err));
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "configure: %s", err);
		if (rc == -EINVAL)
			send_error(a, id, AGENT_E_INVALID, 0, AGENT_F_FIELD,
				   what, msg);
		else
			agent_send_error(a, id, AGENT_E_IO, -rc, "%s", msg);
		return;
	}
	rc = agent_config_apply(&c, a->defaults, &what, err, sizeof(err));
	if (rc == 0 && (c.has_env || c.has_cwd || c.has_ca) && agent_defaults_file) {
		int e = agent_defaults_save(a->defaults, agent_defaults_file);

		if (e < 0)
			fprintf(stderr, "sluice-agent: %s: %s\n", agent_defaults_file,
				strerror(-e));
	}
	agent_config_fini(&c);
	if (rc < 0) {
		snprintf(msg, sizeof(msg), "configure: %s", err);
		send_error(a, id, agent_err_code(-rc), -rc, AGENT_F_STEP, what,
			   msg);
		return;
	}
	{
		json_t *j = json_object();

		agent_send_json(a, AGENT_FT_RESULT, id, j);
		json_decref(j);
	}
}
