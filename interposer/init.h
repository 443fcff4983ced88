// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Veneer's start and stop around the library's MPI_Init and MPI_Finalize, for
// bindings that initialise MPI without calling Veneer's C MPI_Init (Open MPI's
// Fortran bindings call PMPI_Init).
namespace veneer {
// Starts Veneer and reads the machine profile (collective over MPI_COMM_WORLD);
// does nothing when MPI_Init already did.
void after_init();
// Drains, reports and releases what Veneer holds (collective over
// MPI_COMM_WORLD when the report is on); runs once.
void before_finalize();
}  // namespace veneer
