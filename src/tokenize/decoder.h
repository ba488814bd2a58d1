// Decoders of tokenizer.json (ids -> text, for round-trip checks and samples): ByteLevel,
// Metaspace, Replace, ByteFallback, Fuse, Strip and Sequence, each HF's decode_chain: a list of
// token strings in, a list out; the final text is their concatenation.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace lj::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual Status decode_chain(std::vector<std::string>* tokens) const = 0;
};

// null -> nullptr (tokens are joined with spaces, as HF does without a decoder).
StatusOr<std::unique_ptr<Decoder>> parse_decoder(const nlohmann::json& j, int depth = 0);

}  // namespace lj::tok
