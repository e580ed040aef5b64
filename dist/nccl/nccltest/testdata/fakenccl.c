// A stand-in for libnccl.so.2 that package nccltest builds with the C compiler when one is
// there: it implements the entry points package nccl binds on nothing but host memory,
// records each call's arguments (and whether it came from the thread that made the
// communicator) for fake_last, and fails on request, so that the binding's calling
// convention, its one issuing thread and its error paths are checked without a GPU.
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct { int nranks, rank; } comm_t;
static comm_t the_comm;
static char last[512];
static pthread_t init_thread;
static int async_result;

static int same(void) { return pthread_equal(pthread_self(), init_thread) != 0; }

int ncclGetVersion(int *v) { *v = 22807; return 0; }

int ncclGetUniqueId(unsigned char *id) {
  for (int i = 0; i < 128; i++) id[i] = (unsigned char)(i * 3 + 1);
  return 0;
}

int ncclCommInitRankScalable(void **comm, int nranks, int rank, int nId, unsigned char *ids, void *config) {
  if (nId != 1 || config != NULL) return 4; // ncclInvalidArgument
  if (nranks == 7) sleep(3600);             // a rank that never comes
  init_thread = pthread_self();
  the_comm.nranks = nranks;
  the_comm.rank = rank;
  *comm = &the_comm;
  snprintf(last, sizeof last, "init nranks=%d rank=%d id0=%d id127=%d", nranks, rank, ids[0], ids[127]);
  return rank == 99 ? 6 : 0; // ncclRemoteError
}

#define P(x) ((unsigned long)(x))

int ncclAllReduce(const void *s, void *r, size_t count, int dt, int op, void *comm, void *stream) {
  snprintf(last, sizeof last, "allreduce send=%lx recv=%lx count=%zu dt=%d op=%d comm=%d stream=%lx thread=%d",
           P(s), P(r), count, dt, op, comm == &the_comm, P(stream), same());
  if (count == 17) sleep(3600); // a call that blocks (a peer that never connects)
  return count == 13 ? 5 : 0;   // ncclInvalidUsage
}

int ncclBroadcast(const void *s, void *r, size_t count, int dt, int root, void *comm, void *stream) {
  snprintf(last, sizeof last, "broadcast send=%lx recv=%lx count=%zu dt=%d root=%d comm=%d stream=%lx thread=%d",
           P(s), P(r), count, dt, root, comm == &the_comm, P(stream), same());
  return 0;
}

int ncclAllGather(const void *s, void *r, size_t count, int dt, void *comm, void *stream) {
  snprintf(last, sizeof last, "allgather send=%lx recv=%lx count=%zu dt=%d comm=%d stream=%lx thread=%d",
           P(s), P(r), count, dt, comm == &the_comm, P(stream), same());
  return 0;
}

int ncclReduceScatter(const void *s, void *r, size_t count, int dt, int op, void *comm, void *stream) {
  snprintf(last, sizeof last, "reducescatter send=%lx recv=%lx count=%zu dt=%d op=%d comm=%d stream=%lx thread=%d",
           P(s), P(r), count, dt, op, comm == &the_comm, P(stream), same());
  return 0;
}

int ncclGroupStart(void) { snprintf(last, sizeof last, "groupstart thread=%d", same()); return 0; }
int ncclGroupEnd(void) { snprintf(last, sizeof last, "groupend thread=%d", same()); return 0; }

int ncclCommGetAsyncError(void *comm, int *res) { *res = async_result; return comm == &the_comm ? 0 : 4; }
int ncclCommFinalize(void *comm) { snprintf(last, sizeof last, "finalize thread=%d", same()); return 0; }
int ncclCommDestroy(void *comm) { snprintf(last, sizeof last, "destroy thread=%d", same()); return 0; }
int ncclCommAbort(void *comm) { snprintf(last, sizeof last, "abort comm=%d", comm == &the_comm); return 0; }

const char *ncclGetErrorString(int r) {
  switch (r) {
  case 5: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case 6: return "remote process exited or there was a network error";
  }
  return "unknown";
}

const char *ncclGetLastError(void *comm) { return "the fake says no"; }

void fake_set_async(int r) { async_result = r; }
const char *fake_last(void) { return last; }
