#include "codegen/cache_files.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace lj::codegen {

std::string hex64(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

ScratchDir::ScratchDir(const std::string& parent) {
  std::string tmpl = parent + "/tmp.XXXXXX";
  if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  std::error_code e;
  std::filesystem::remove_all(path_, e);
}

bool install_file(const std::string& built, const std::string& staged,
                  const std::string& final_path) {
  return link(built.c_str(), staged.c_str()) == 0 &&
         std::rename(staged.c_str(), final_path.c_str()) == 0;
}

}  // namespace lj::codegen
