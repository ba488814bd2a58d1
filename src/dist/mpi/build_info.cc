// dist/build_info.h in a build with MPI (dist/no_mpi/ answers without it).
#include "dist/build_info.h"

#include <mpi.h>

namespace lj {

bool built_with_mpi() {
  return true;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string v(text, static_cast<size_t>(len));
  // The first line, up to its first comma: "Open MPI v4.1.4" (the rest is packaging detail).
  const size_t eol = v.find_first_of(",\r\n");
  if (eol != std::string::npos) v.resize(eol);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  return v;
}

}  // namespace lj
