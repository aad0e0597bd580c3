/* replay.c: runs a libFuzzer target over files and directories of inputs
 * with a plain compiler, so that ./build.sh test replays every seed corpus
 * (and every crash ever saved into one) under the sanitizers. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long len;

	if (!f) {
		perror(path);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc(len > 0 ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "%s: cannot read\n", path);
		fclose(f);
		free(buf);
		return 1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
}

int
main(int argc, char **argv)
{
	int failed = 0, n = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			perror(argv[i]);
			return 1;
		}
		if (S_ISDIR(st.st_mode)) {
			struct dirent **ents;
			int k = scandir(argv[i], &ents, NULL, alphasort);

			for (int j = 0; j < k; j++) {
				char p[4096];

				if (ents[j]->d_name[0] != '.') {
					snprintf(p, sizeof(p), "%s/%s", argv[i], ents[j]->d_name);
					failed |= run_file(p);
					n++;
				}
				free(ents[j]);
			}
			free(ents);
		} else {
			failed |= run_file(argv[i]);
			n++;
		}
	}
	printf("replayed %d inputs\n", n);
	if (n == 0) {
		fprintf(stderr, "no inputs: an empty corpus tests nothing\n");
		return 1;
	}
	return failed;
}
