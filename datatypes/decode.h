#pragma once
// Reads an MPI datatype through MPI_Type_get_envelope/get_contents (PMPI_*)
// and reduces it to a Layout. Handles every MPI-3 combiner; returns an error
// string for what it cannot describe exactly (the caller then passes through).
#include <mpi.h>

#include <memory>
#include <string>
#include <variant>

#include "datatypes/layout.h"

namespace veneer::datatypes {

struct DecodeError {
  std::string why;
};

std::variant<Layout, DecodeError> decode(MPI_Datatype type);

}  // namespace veneer::datatypes
