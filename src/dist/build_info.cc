#include "dist/build_info.h"

#ifdef LJ_MPI
#include <mpi.h>
#endif

namespace lj {

bool built_with_mpi() {
#ifdef LJ_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_library_version() {
#ifdef LJ_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string v(text, static_cast<size_t>(len));
  // The first line, up to its first comma: "Open MPI v4.1.4" (the rest is packaging detail).
  const size_t eol = v.find_first_of(",\r\n");
  if (eol != std::string::npos) v.resize(eol);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  return v;
#else
  return "";
#endif
}

}  // namespace lj
