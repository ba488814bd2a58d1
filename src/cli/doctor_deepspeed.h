// The doctor's DeepSpeed rule: the seed image's usage notes ask that
// zero_optimization.stage3_prefetch_bucket_size be left empty or "auto".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/doctor_check.h"

namespace lj::cli {

// zero_optimization.stage3_prefetch_bucket_size in a DeepSpeed JSON text (`src` names it in
// messages): ok when absent, null, "" or "auto"; warn quoting the value when it is a number;
// fail when the JSON is malformed, zero_optimization is not an object, or the value is any other
// string or type.
CheckLine stage3_prefetch_advice(std::string_view json_text, const std::string& src);

// The file read by the parser benchmark and train use (io/deepspeed_config.h): its error as a
// fail line, each of its warnings (unknown keys, doubtful values) as a warn line, else one ok.
std::vector<CheckLine> deepspeed_parse_lines(const std::string& json_text, const std::string& src);

// Both for a file: the prefetch advice, then the parser's lines; a file that cannot be read is
// one fail line.
std::vector<CheckLine> deepspeed_file_advice(const std::string& path);

}  // namespace lj::cli
