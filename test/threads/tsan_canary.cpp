// SPDX-License-Identifier: BSD-3-Clause
// A race on purpose, for TSan builds only: one thread frees types whose
// attribute delete callback (called from inside the MPI library, as Veneer's
// type cache callback is) bumps a plain counter, while another thread reads
// it outside MPI. The TSan step must report it: if the suppressions or
// TSAN_OPTIONS ever hid races in code the library calls back, this fails.
#include <mpi.h>

#include <cstdio>
#include <thread>

namespace {
int g_freed = 0;  // no lock, no atomic: racy on purpose

int on_free(MPI_Datatype, int, void*, void*) {
  ++g_freed;
  return MPI_SUCCESS;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::printf("tsan_canary: no MPI_THREAD_MULTIPLE\n");
    MPI_Finalize();
    return 0;
  }
  int keyval = MPI_KEYVAL_INVALID;
  MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, on_free, &keyval, nullptr);
  std::thread freeing([keyval] {
    for (int i = 0; i < 400; ++i) {
      MPI_Datatype t;
      MPI_Type_vector(4, 1, 2, MPI_INT, &t);
      MPI_Type_commit(&t);
      MPI_Type_set_attr(t, keyval, nullptr);
      MPI_Type_free(&t);
    }
  });
  long seen = 0;
  for (int i = 0; i < 4000; ++i) {
    seen += g_freed;
    std::this_thread::yield();
  }
  freeing.join();
  MPI_Type_free_keyval(&keyval);
  std::printf("tsan_canary: %d callbacks, %ld seen\n", g_freed, seen);
  MPI_Finalize();
  return 0;
}
