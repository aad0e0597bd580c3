# bench/common.bash: what the door benchmarks share. Source it after
# setting BENCH_NAME and BENCH_TOOLS; it checks the tools, makes $TMP and a
# namespace $NS with loopback up (removed with everything in $PIDS by an
# EXIT trap; a script may define bench_cleanup_extra for more), and offers
# bench_origin, an nginx with one worker on $ORIGIN serving /1k and /big.
# Not a benchmark itself: ./build.sh bench runs bench/*.sh only.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SLUICED=${SLUICED:-$ROOT/build/gateway/sluiced}
# SLUICED_BASE: a second sluiced (another build, say main before a change)
# measured in the same run, in a column "base" beside "sluice".
SLUICED_BASE=${SLUICED_BASE:-}
SECS=${BENCH_SECONDS:-10}
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY

for tool in $BENCH_TOOLS; do
	command -v "$tool" >/dev/null ||
		{ echo "bench/$BENCH_NAME.sh: $tool is missing (./build.sh bench installs it)" >&2; exit 1; }
done
[ -x "$SLUICED" ] || { echo "bench/$BENCH_NAME.sh: no $SLUICED (./build.sh build)" >&2; exit 1; }
[ -z "$SLUICED_BASE" ] || [ -x "$SLUICED_BASE" ] ||
	{ echo "bench/$BENCH_NAME.sh: SLUICED_BASE=$SLUICED_BASE is not executable" >&2; exit 1; }

TMP=$(mktemp -d "/tmp/sl-bench-$BENCH_NAME.XXXXXX")
NS=sl-bench-$BENCH_NAME-$$
PIDS=()
cleanup() {
	local rc=$? pid
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	done
	if declare -F bench_cleanup_extra >/dev/null; then bench_cleanup_extra || true; fi
	ip netns del "$NS" 2>/dev/null || true
	ip netns del "$NS-fleet" 2>/dev/null || true
	ip netns del "$NS-fleetb" 2>/dev/null || true
	rm -rf "$TMP"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS"
ip -n "$NS" link set lo up
# Many short connections: a wide port range, inside this namespace only.
ip netns exec "$NS" sysctl -qw net.ipv4.ip_local_port_range="1024 65000"
N() { ip netns exec "$NS" "$@"; }

ORIGIN=127.0.0.1:8080

# The origin: nginx, one worker, keep-alive, sendfile; /1k and 1 GiB /big.
# bench_origin [TLSADDR CERT KEY [DIRECTIVES]]: with arguments, the same site
# over TLS on TLSADDR too (host:port, that certificate and key; DIRECTIVES,
# more of that server block, e.g. a location).
bench_origin() {
	local tls=
	[ $# = 0 ] || tls="server { listen $1 ssl reuseport backlog=4096; ssl_certificate $2; ssl_certificate_key $3; root $TMP/www; ${4:-} }"
	mkdir -p "$TMP/www" "$TMP/nginx-tmp"
	head -c 1024 /dev/urandom > "$TMP/www/1k"
	head -c 1G /dev/zero > "$TMP/www/big"
	cat > "$TMP/nginx.conf" <<NGINX
user root;
worker_processes 1;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $TMP/nginx-tmp/body;
	proxy_temp_path $TMP/nginx-tmp/proxy;
	fastcgi_temp_path $TMP/nginx-tmp/fastcgi;
	uwsgi_temp_path $TMP/nginx-tmp/uwsgi;
	scgi_temp_path $TMP/nginx-tmp/scgi;
	default_type application/octet-stream;
	sendfile on;
	keepalive_timeout 60s;
	keepalive_requests 1000000;
	server {
		listen $ORIGIN reuseport backlog=4096;
		root $TMP/www;
	}
	$tls
}
NGINX
	ip netns exec "$NS" nginx -e "$TMP/nginx-error.log" -c "$TMP/nginx.conf" -g 'daemon off;' &
	PIDS+=($!)
}

# sluiced_start NAME BIN FORWARD SOCKS FLEETNS: a sluiced in $NS with the
# benchmark's one client and policy, its doors on FORWARD and SOCKS
# (host:port, or off); its log is $TMP/NAME.log.
sluiced_start() {
	local name=$1 bin=$2 fwd=$3 socks=$4 fleet=$5
	cat > "$TMP/$name.yaml" <<YAML
daemon:
  data_dir: $TMP/$name-data
  fleet_netns: $fleet
  control_socket: off
  log: { level: warn, format: text }
api: { listen: off, socket: off }
gateway:
  workers: auto
  listen: { forward: $fwd, socks: $socks }
  clients:
    - { name: bench, match: { source: 127.0.0.0/8 }, policy: bench }
  dns: { servers: [127.0.0.1], timeout_ms: 500, attempts: 1 }
  limits: { max_connections: 100000 }
  access_log: off
lanes: []
pools: []
tenants: []
policies:
  - name: bench
    allow: ["$ORIGIN"]
    allow_private: [127.0.0.0/8]
YAML
	ip netns exec "$NS" "$bin" --config "$TMP/$name.yaml" 2>"$TMP/$name.log" &
	PIDS+=($!)
}

# The columns of the table: sluice, and base when there is one.
SLUICES="sluice"
[ -z "$SLUICED_BASE" ] || SLUICES="sluice base"
