# pki_lib.sh: a test CA and leaves it signs, for the e2e scripts whose
# origins speak TLS (sourced after lib.sh). pki_ca makes $PKI (under
# $E2E_TMP) with ca.pem/ca.key; leaf NAME SAN makes NAME.pem/NAME.key,
# signed by it, with the SAN given ("DNS:a.test,DNS:b.test"), serverAuth,
# CA:FALSE, two days. openssl's chatter goes to $PKI/openssl.log.

PKI=$E2E_TMP/pki
ossl() { openssl "$@" 2>>"$PKI/openssl.log"; }

pki_ca() {
	mkdir -p "$PKI"
	ossl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
		-subj "/CN=e2e origin CA" -keyout "$PKI/ca.key" -out "$PKI/ca.pem" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign
}

leaf() {
	local n=$1 san=$2
	ossl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$n" \
		-keyout "$PKI/$n.key" -out "$PKI/$n.csr"
	printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$san" \
		>"$PKI/$n.ext"
	ossl x509 -req -in "$PKI/$n.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" \
		-CAcreateserial -days 2 -extfile "$PKI/$n.ext" -out "$PKI/$n.pem"
}
