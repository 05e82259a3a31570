/* A PMI-1 client of the "simple PMI" wire, as a program bootstrapped by PMI (NVSHMEM's default
 * bootstrap among them) speaks it, for launcher/tests/pmi.rs:
 *   pmi_client            init, get_maxes, kvsname, universe size, put a value, barrier, get every
 *                         PE's value and check it, barrier, finalize; prints "rank R of N: ok"
 *   pmi_client abort P C  the same up to the first barrier, then PE P calls abort with exit code C
 *                         (the others wait in a second barrier that never completes)
 *   pmi_client exit P C   the same, but PE P exits with status C without finalize
 *   pmi_client close P    the same, but PE P closes PMI_FD without finalize and keeps running
 *   pmi_client flood P L  after the first barrier, PE P puts keys flood-0, flood-1, ... with values of L
 *                         bytes until a put is refused (then prints "put N refused: <answer>" and goes
 *                         on as without arguments), or exits 3 after 50000 accepted puts
 * Written for this test from the protocol's description; no PMI library code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd = -1, rank = -1, size = -1;

static void die(const char *what, const char *line) {
  fprintf(stderr, "pmi_client rank %d: %s%s%s\n", rank, what, line ? ": " : "", line ? line : "");
  exit(2);
}

/* Sends `req` (a line ending in \n) and reads one answer line into `buf` (without the \n). */
static void ask(const char *req, char *buf, size_t cap) {
  size_t n = strlen(req), off = 0;
  while (off < n) {
    ssize_t w = write(fd, req + off, n - off);
    if (w <= 0) die("write to PMI_FD failed", req);
    off += (size_t)w;
  }
  size_t got = 0;
  for (;;) {
    char c;
    ssize_t r = read(fd, &c, 1);
    if (r != 1) die("PMI_FD closed while waiting for the answer to", req);
    if (c == '\n') break;
    if (got + 1 >= cap) die("answer too long for", req);
    buf[got++] = c;
  }
  buf[got] = 0;
}

/* The value of `key=` in the answer line `line` (copied into `out`), or NULL. */
static const char *val(const char *line, const char *key, char *out, size_t cap) {
  size_t k = strlen(key);
  for (const char *p = line; (p = strstr(p, key)); p++) {
    if ((p == line || p[-1] == ' ') && p[k] == '=') {
      size_t i = 0;
      for (p += k + 1; *p && *p != ' ' && i + 1 < cap; p++) out[i++] = *p;
      out[i] = 0;
      return out;
    }
  }
  return NULL;
}

static void expect(const char *line, const char *cmd) {
  char v[64];
  if (!val(line, "cmd", v, sizeof v) || strcmp(v, cmd) != 0) die("unexpected answer", line);
  if (val(line, "rc", v, sizeof v) && strcmp(v, "0") != 0) die("error answer", line);
}

int main(int argc, char **argv) {
  const char *f = getenv("PMI_FD"), *r = getenv("PMI_RANK"), *s = getenv("PMI_SIZE");
  if (!f || !r || !s) die("PMI_FD, PMI_RANK or PMI_SIZE not set (run under rshmrun --pmi)", NULL);
  fd = atoi(f), rank = atoi(r), size = atoi(s);
  char line[1024], req[1024], v[600], kvs[128];
  ask("cmd=init pmi_version=1 pmi_subversion=1\n", line, sizeof line);
  expect(line, "response_to_init");
  ask("cmd=get_maxes\n", line, sizeof line);
  expect(line, "maxes");
  if (!val(line, "vallen_max", v, sizeof v) || atoi(v) < 256) die("vallen_max below 256", line);
  ask("cmd=get_universe_size\n", line, sizeof line);
  expect(line, "universe_size");
  if (atoi(val(line, "size", v, sizeof v) ? v : "0") != size) die("universe size is not PMI_SIZE", line);
  ask("cmd=get_my_kvsname\n", line, sizeof line);
  expect(line, "my_kvsname");
  if (!val(line, "kvsname", kvs, sizeof kvs)) die("no kvsname", line);
  /* A value of 200 characters that depends on the rank. */
  char mine[201];
  for (int i = 0; i < 200; i++) mine[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(rank * 7 + i) % 36];
  mine[200] = 0;
  snprintf(req, sizeof req, "cmd=put kvsname=%s key=pe-%d value=%s\n", kvs, rank, mine);
  ask(req, line, sizeof line);
  expect(line, "put_result");
  ask("cmd=barrier_in\n", line, sizeof line);
  expect(line, "barrier_out");
  for (int p = 0; p < size; p++) {
    snprintf(req, sizeof req, "cmd=get kvsname=%s key=pe-%d\n", kvs, p);
    ask(req, line, sizeof line);
    expect(line, "get_result");
    char want[201];
    for (int i = 0; i < 200; i++) want[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(p * 7 + i) % 36];
    want[200] = 0;
    if (!val(line, "value", v, sizeof v) || strcmp(v, want) != 0) die("wrong value", line);
  }
  if (argc == 4 && strcmp(argv[1], "exit") == 0 && rank == atoi(argv[2])) {
    printf("rank %d exits with %d without finalize\n", rank, atoi(argv[3]));
    fflush(stdout);
    exit(atoi(argv[3]));
  }
  if (argc == 3 && strcmp(argv[1], "close") == 0 && rank == atoi(argv[2])) {
    close(fd);
    printf("rank %d closed PMI_FD\n", rank);
    fflush(stdout);
    pause(); /* the launcher ends this process */
    die("still running after closing PMI_FD", NULL);
  }
  if (argc == 4 && strcmp(argv[1], "flood") == 0 && rank == atoi(argv[2])) {
    int len = atoi(argv[3]);
    if (len < 1 || len > 500) die("flood: L must be 1 to 500", NULL);
    char value[501];
    memset(value, 'v', (size_t)len);
    value[len] = 0;
    int i;
    for (i = 0; i < 50000; i++) {
      snprintf(req, sizeof req, "cmd=put kvsname=%s key=flood-%d value=%s\n", kvs, i, value);
      ask(req, line, sizeof line);
      if (!val(line, "rc", v, sizeof v)) die("put answer without rc", line);
      if (strcmp(v, "0") != 0) {
        printf("put %d refused: %s\n", i, line);
        break;
      }
    }
    if (i == 50000) {
      printf("no put refused after %d keys of %d bytes\n", i, len);
      exit(3);
    }
  }
  if (argc == 4 && strcmp(argv[1], "abort") == 0 && rank == atoi(argv[2])) {
    snprintf(req, sizeof req, "cmd=abort exitcode=%d\n", atoi(argv[3]));
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) die("write of abort failed", NULL);
    pause(); /* the launcher ends this process */
    die("still running after abort", NULL);
  }
  ask("cmd=barrier_in\n", line, sizeof line);
  expect(line, "barrier_out");
  ask("cmd=finalize\n", line, sizeof line);
  expect(line, "finalize_ack");
  printf("rank %d of %d: ok\n", rank, size);
  return 0;
}
