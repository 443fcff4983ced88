// SPDX-License-Identifier: BSD-3-Clause
/* A library that loads its plugin by bare name: found only through this
 * library's own RUNPATH ($ORIGIN/plugins), which dlopen applies because this
 * library is the caller. Veneer's dlopen (interposer/loader.cpp) must keep it
 * so. */
#include <dlfcn.h>
#include <stdio.h>

int load_plugin(void) {
  void* plugin = dlopen("libveneer_test_plugin.so", RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    fprintf(stderr, "plugin_host: %s\n", dlerror());
    return -1;
  }
  int (*answer)(void) = (int (*)(void))dlsym(plugin, "plugin_answer");
  int value = answer ? answer() : -2;
  dlclose(plugin);
  return value;
}
