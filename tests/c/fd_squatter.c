/* A hostile local user against rshmem's fd-passing sockets, for tests/tests/fd_squat.rs (run there as
 * uid 65534 beside real jobs). It watches /proc/net/unix, where every abstract socket name of the host
 * shows, and for every name of rshmem's that it sees, binds every name it can predict from it before
 * the job's other PEs do: a name of the form @rshmem-<job id>-<pe> gives away the names of the job's
 * other PEs (the same job id, PE numbers 0 to 15). Names it cannot predict it can only see.
 *
 *   fd_squatter SECONDS   watches until its standard input ends (or SECONDS passed), then prints one
 *                         line and exits 0: "squatter: saw N names, bound M predicted names"
 *
 * Written for this test; no rshmem code. */
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_NAMES 4096
#define GUESSES 16

static char *seen[MAX_NAMES];
static int n_seen, n_bound;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int was_seen(const char *name) {
  for (int i = 0; i < n_seen; i++)
    if (strcmp(seen[i], name) == 0) return 1;
  return 0;
}

/* Binds and listens on the abstract name `name` (without its leading NUL); keeps the socket open for
 * the life of the process. Returns 1 when this process now holds the name. */
static int squat(const char *name) {
  struct sockaddr_un a;
  size_t len = strlen(name);
  if (len + 1 > sizeof a.sun_path) return 0;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path + 1, name, len);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return 0;
  socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
  if (bind(s, (struct sockaddr *)&a, alen) != 0 || listen(s, 16) != 0) {
    close(s);
    return 0;
  }
  return 1;
}

/* A name of the old, predictable form: "rshmem-" 32 hex digits "-" a PE number. Then `prefix` gets
 * "rshmem-<hex>-". */
static int predictable(const char *name, char *prefix, size_t cap) {
  const char *p = name + strlen("rshmem-");
  for (int i = 0; i < 32; i++)
    if (!strchr("0123456789abcdef", p[i])) return 0;
  if (p[32] != '-' || !p[33]) return 0;
  for (const char *d = p + 33; *d; d++)
    if (*d < '0' || *d > '9') return 0;
  size_t n = (size_t)(p + 33 - name);
  if (n + 1 > cap) return 0;
  memcpy(prefix, name, n);
  prefix[n] = 0;
  return 1;
}

/* One pass over /proc/net/unix: every new rshmem name is noted, and the names it predicts are bound. */
static void scan(void) {
  FILE *f = fopen("/proc/net/unix", "r");
  if (!f) {
    perror("squatter: /proc/net/unix");
    exit(1);
  }
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *at = strstr(line, " @rshmem-");
    if (!at) continue;
    char *name = at + 2;
    name[strcspn(name, " \n")] = 0;
    if (was_seen(name) || n_seen >= MAX_NAMES) continue;
    seen[n_seen++] = strdup(name);
    char prefix[128], guess[160];
    if (!predictable(name, prefix, sizeof prefix)) continue;
    for (int pe = 0; pe < GUESSES; pe++) {
      snprintf(guess, sizeof guess, "%s%d", prefix, pe);
      if (!was_seen(guess) && squat(guess)) n_bound++;
    }
  }
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc != 2 || atof(argv[1]) <= 0) {
    fprintf(stderr, "usage: fd_squatter SECONDS\n");
    return 2;
  }
  double until = now() + atof(argv[1]);
  printf("squatter: watching as uid %d\n", (int)getuid());
  fflush(stdout);
  while (now() < until) {
    scan();
    struct pollfd in = {.fd = 0, .events = POLLIN};
    if (poll(&in, 1, 0) > 0) {
      char b[64];
      if (read(0, b, sizeof b) <= 0) break; /* the test closed our input: done */
    }
    usleep(200);
  }
  printf("squatter: saw %d names, bound %d predicted names\n", n_seen, n_bound);
  return 0;
}
