// SPDX-License-Identifier: BSD-3-Clause
/* A stand-in for the CUDA driver (soname libcuda.so.1): every pointer is host memory. */
int cuPointerGetAttributes(unsigned count, int* attributes, void** data, unsigned long long ptr) {
  (void)count, (void)attributes, (void)data, (void)ptr;
  return 1; /* CUDA_ERROR_INVALID_VALUE: read as host memory */
}
