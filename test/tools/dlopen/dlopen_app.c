// SPDX-License-Identifier: BSD-3-Clause
/* Loads plugin_host (by path) and lets it load its plugin (by bare name,
 * through its RUNPATH); then loads a missing library by bare name. Exit 0 when
 * both behave as without Veneer. Run with libveneer preloaded. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* host = dlopen(argv[1], RTLD_NOW);
  if (!host) {
    fprintf(stderr, "dlopen_app: %s\n", dlerror());
    return 1;
  }
  int (*load_plugin)(void) = (int (*)(void))dlsym(host, "load_plugin");
  if (!load_plugin || load_plugin() != 42) {
    fprintf(stderr, "dlopen_app: the plugin was not found through its host's RUNPATH\n");
    return 1;
  }
  if (dlopen("libveneer_test_does_not_exist.so", RTLD_NOW)) return 1; /* still not found */
  if (!dlsym(RTLD_DEFAULT, "MPI_Send")) {
    fprintf(stderr, "dlopen_app: libveneer is not loaded (run it preloaded)\n");
    return 1;
  }
  printf("dlopen_app: ok\n");
  return 0;
}
