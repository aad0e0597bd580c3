# shellcheck shell=bash disable=SC2034 # sourced: sets variables for the tests
# net.sh: the network the end-to-end tests of the doors share. Source it
# after lib.sh; it makes three namespaces and starts the origin's servers:
#
#   cl (10.200.0.2) ── gw (10.200.0.1 | 10.99.0.1 fd99::1, sluiced) ── inet
#   inet: 10.99.0.10 and fd99::10 nginx, 10.99.0.53 dnsmasq,
#         10.99.0.20 python servers (forward/servers.py),
#         10.99.1.5 "internal" (outside allow_private)
#
# It sets gw, inet, cl (the namespaces), G, I, C (run in one), HERE, PY,
# FLEET, CI_PW, AUDIT_PW, WWW (nginx's root: index.html, empty, 1k, big
# (100 MiB), text, repo.git), BIG_SHA, K1_SHA and NGLOG (nginx's access log).
# Names dnsmasq answers (zone test): origin.test, blocked.origin.test,
# icpt.origin.test, other.test, ssh.test (10.99.0.10; backend.sh starts an
# sshd there); v6.test (fd99::10 only); internal.test
# (10.99.1.5); meta.test (169.254.169.254); loop.test (127.0.0.1);
# mixed.test (10.99.0.10 and 10.99.1.5); slowbox.test (10.99.0.20);
# slow.test (never answered); anything else NXDOMAIN. Port 81 of
# 10.99.0.10 drops SYNs; nginx also serves 8081 (a port that is neither
# 80 nor 443).
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY ALL_PROXY all_proxy no_proxy NO_PROXY
CI_PW=$(printf 'ci-%05d%05d-secret' "$RANDOM" "$RANDOM")
AUDIT_PW=$(printf 'audit-%05d%05d-secret' "$RANDOM" "$RANDOM")
export CI_PW AUDIT_PW
FLEET="sl-fleet-$$"
netns_owned "$FLEET"   # in case the daemon makes its fleet namespace

netns_new gw gw
netns_new inet inet
netns_new cl cl

# Run in a namespace (never to start a server with &: $! would be a subshell).
G() { ip netns exec "$gw" "$@"; }
I() { ip netns exec "$inet" "$@"; }
C() { ip netns exec "$cl" "$@"; }

# --- the network ---------------------------------------------------------
ip -n "$gw" link add vgi type veth peer name vin netns "$inet"
ip -n "$gw" addr add 10.99.0.1/24 dev vgi
ip -n "$gw" link set vgi up
ip -n "$gw" route add 10.99.0.0/16 via 10.99.0.10
for a in 10.99.0.10/24 10.99.0.53/24 10.99.0.20/24 10.99.1.5/24; do
	ip -n "$inet" addr add "$a" dev vin
done
ip -n "$inet" link set vin up
# IPv6 on the same link (nodad: usable at once).
ip -n "$gw" addr add fd99::1/64 dev vgi nodad
ip -n "$inet" addr add fd99::10/64 dev vin nodad
ip -n "$gw" link add vgc type veth peer name vcl netns "$cl"
ip -n "$gw" addr add 10.200.0.1/24 dev vgc
ip -n "$gw" link set vgc up
ip -n "$cl" addr add 10.200.0.2/24 dev vcl
ip -n "$cl" link set vcl up
# Port 81 of the origin drops SYNs: the connect-timeout case.
I nft -f - <<'NFT'
table inet sl_e2e {
	chain input {
		type filter hook input priority 0; policy accept;
		ip daddr 10.99.0.10 tcp dport 81 drop
	}
}
NFT

# --- the origin's files ----------------------------------------------------
WWW=$E2E_TMP/www
mkdir -p "$WWW/upload" "$E2E_TMP/nginx-tmp"
echo "hello from origin" > "$WWW/index.html"
: > "$WWW/empty"
head -c 1024 /dev/urandom > "$WWW/1k"
head -c 100M /dev/urandom > "$WWW/big"
seq 1 40000 > "$WWW/text"
BIG_SHA=$(sha256sum < "$WWW/big" | cut -d' ' -f1)
K1_SHA=$(sha256sum < "$WWW/1k" | cut -d' ' -f1)
(
	export HOME=$E2E_TMP GIT_CONFIG_NOSYSTEM=1
	git -c init.defaultBranch=main init -q "$E2E_TMP/src"
	echo "cloned through sluice" > "$E2E_TMP/src/README"
	git -C "$E2E_TMP/src" add README
	git -C "$E2E_TMP/src" -c user.name=e2e -c user.email=e2e@example.invalid commit -qm init
	git clone -q --bare "$E2E_TMP/src" "$WWW/repo.git"
	git -C "$WWW/repo.git" update-server-info
)

# --- nginx, dnsmasq and the python servers, all in inet --------------------
NGLOG=$E2E_TMP/nginx-access.log
cat > "$E2E_TMP/nginx.conf" <<NGINX
user root;
worker_processes 1;
pid $E2E_TMP/nginx.pid;
error_log $E2E_TMP/nginx-error.log;
events { worker_connections 512; }
http {
	log_format t '\$connection \$connection_requests "\$request" \$status '
		'via="\$http_via" pc="\$http_proxy_connection" ka="\$http_keep_alive" '
		'te="\$http_te" xfoo="\$http_x_foo" pa="\$http_proxy_authorization" '
		'peer=\$remote_addr:\$remote_port';
	access_log $NGLOG t;
	client_body_temp_path $E2E_TMP/nginx-tmp/body;
	proxy_temp_path $E2E_TMP/nginx-tmp/proxy;
	fastcgi_temp_path $E2E_TMP/nginx-tmp/fastcgi;
	uwsgi_temp_path $E2E_TMP/nginx-tmp/uwsgi;
	scgi_temp_path $E2E_TMP/nginx-tmp/scgi;
	types { text/html html; text/plain txt; }
	default_type application/octet-stream;
	sendfile on;
	keepalive_timeout 30s;
	keepalive_requests 1000;
	server {
		listen 80;
		listen 81;
		listen 8081;
		listen [fd99::10]:80;
		server_name _;
		root $WWW;
		client_max_body_size 200m;
		location /upload/ {
			dav_methods PUT;
			create_full_put_path on;
		}
		# Chunked: gzip has no length up front. gzip_proxied, because
		# the request carries the proxy's Via.
		location = /text {
			default_type text/plain;
			gzip on;
			gzip_types text/plain;
			gzip_min_length 0;
			gzip_proxied any;
		}
	}
}
NGINX
ip netns exec "$inet" nginx -e "$E2E_TMP/nginx-error.log" -c "$E2E_TMP/nginx.conf" -g 'daemon off;' &
track $!

ip netns exec "$inet" dnsmasq --conf-file=/dev/null --no-resolv --no-hosts --no-daemon --user=root \
	--listen-address=10.99.0.53 --bind-interfaces --local=/test/ --log-queries \
	--host-record=origin.test,10.99.0.10 \
	--host-record=blocked.origin.test,10.99.0.10 \
	--host-record=icpt.origin.test,10.99.0.10 \
	--host-record=other.test,10.99.0.10 \
	--host-record=ssh.test,10.99.0.10 \
	--host-record=internal.test,10.99.1.5 \
	--host-record=meta.test,169.254.169.254 \
	--host-record=loop.test,127.0.0.1 \
	--host-record=mixed.test,10.99.0.10 --host-record=mixed.test,10.99.1.5 \
	--host-record=slowbox.test,10.99.0.20 \
	--host-record=v6.test,fd99::10 \
	--server=/slow.test/10.99.0.20#5353 2>"$E2E_TMP/dnsmasq.log" &
track $!

ip netns exec "$inet" "$PY" "$HERE/forward/servers.py" 10.99.0.20 "$E2E_TMP/servers.ready" 2>"$E2E_TMP/servers.log" &
track $!

wait_for "$E2E_TMP/dnsmasq.log" "started, version" || { fail "dnsmasq starts"; finish; }
wait_for "$E2E_TMP/servers.ready" ready || { fail "the python servers start"; finish; }
for _ in $(seq 100); do
	I curl -s -o /dev/null --max-time 1 http://10.99.0.10/ && break
	sleep 0.05
done
