# SPDX-License-Identifier: BSD-3-Clause
# veneer-bench-coll: Veneer's collective algorithms against the library's,
# linked with the algorithms library directly (see coll.cpp).
add_executable(veneer-bench-coll ${CMAKE_CURRENT_LIST_DIR}/coll.cpp)
target_include_directories(veneer-bench-coll PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(veneer-bench-coll PRIVATE veneer_algorithms veneer_topology MPI::MPI_C)
target_compile_options(veneer-bench-coll PRIVATE -Wall -Wextra)
target_compile_definitions(veneer-bench-coll PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)

if(VENEER_TESTS)
  # The quick run checks every algorithm's result before timing it.
  add_test(NAME bench.coll.quick
    COMMAND ${CMAKE_BINARY_DIR}/test/run_mpi.sh 2 $<TARGET_FILE:veneer-bench-coll> --quick --max 32k)
  set_tests_properties(bench.coll.quick PROPERTIES TIMEOUT 120 LABELS bench PROCESSORS 2
    ENVIRONMENT "VENEER_TEST_TIMEOUT=110")
endif()
