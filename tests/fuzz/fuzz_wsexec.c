/* fuzz_wsexec.c: libFuzzer target for the exec stream's messages: the
 * first message and the control messages (api/wsexec_msg.c) and the
 * CLI's check of a 101 head (cli/ws_client.c). The first byte picks the
 * parser. Besides memory errors it checks the contracts: an accepted
 * message has its fields in range, a refusal says why. */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "ws_client.h"
#include "wsexec.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];

	if (size < 1)
		return 0;
	err[0] = 0;
	switch (data[0] % 3) {
	case 0: {
		struct gw_wsx_start s;

		if (gw_wsx_start_parse((const char *)data + 1, size - 1, &s, err, sizeof(err)) == 0) {
			CHECK(s.a.argv && s.a.argv[0] && s.a.argv[0][0]);
			CHECK(!(s.tty && s.detach));
			CHECK(s.rows <= 65535 && s.cols <= 65535);
			CHECK(s.tty || (s.rows == 0 && s.cols == 0));
			gw_wsx_start_fini(&s);
		} else {
			CHECK(err[0] != 0);
		}
		break;
	}
	case 1: {
		struct gw_wsx_ctl c;

		if (gw_wsx_ctl_parse((const char *)data + 1, size - 1, &c, err, sizeof(err)) == 0) {
			if (c.kind == GW_WSX_RESIZE)
				CHECK(c.rows >= 1 && c.rows <= 65535 && c.cols >= 1 && c.cols <= 65535);
			if (c.kind == GW_WSX_SIGNAL)
				CHECK(c.signal >= 1 && c.signal <= 64);
		} else {
			CHECK(err[0] != 0);
		}
		break;
	}
	default:
		if (cli_ws_check_head((const char *)data + 1, size - 1, "dGhlIHNhbXBsZSBub25jZQ==",
				      err, sizeof(err)) < 0)
			CHECK(err[0] != 0);
		else
			CHECK(size - 1 >= 12 && memcmp(data + 1, "HTTP/1.1 101", 12) == 0);
		break;
	}
	return 0;
}
