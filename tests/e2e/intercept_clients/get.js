// get.js PROXY URL: node's own https.request through an http.request
// CONNECT tunnel (node's fetch does not honour proxies), the way a guest
// library with proxy support does it. Trusts what node trusts: its roots
// and NODE_EXTRA_CA_CERTS. Prints "status=N body=FIRST-LINE", or
// "error=CODE" and exits 1.
'use strict';
const http = require('http');
const https = require('https');
const tls = require('tls');

const [proxy, target] = process.argv.slice(2);
const p = new URL(proxy);
const u = new URL(target);
const port = Number(u.port || 443);
const fail = (what) => { console.log(`error=${what}`); process.exit(1); };

const req = http.request({
	host: p.hostname, port: Number(p.port), method: 'CONNECT',
	path: `${u.hostname}:${port}`, headers: { Host: `${u.hostname}:${port}` },
});
req.on('connect', (res, socket) => {
	if (res.statusCode !== 200) fail(`connect-${res.statusCode}`);
	const r = https.request({
		host: u.hostname, port, path: u.pathname + u.search, method: 'GET',
		headers: { Connection: 'close' },
		createConnection: () => tls.connect({ socket, servername: u.hostname }),
	}, (resp) => {
		let body = '';
		resp.setEncoding('utf8');
		resp.on('data', (d) => { body += d; });
		resp.on('end', () => {
			console.log(`status=${resp.statusCode} body=${body.split('\n')[0]}`);
			process.exit(0);
		});
	});
	r.on('error', (e) => fail(e.code || e.message));
	r.end();
});
req.on('error', (e) => fail(e.code || e.message));
req.setTimeout(10000, () => fail('timeout'));
req.end();
