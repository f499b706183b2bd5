// libFuzzer target: the packed-batch JSON Lines reader (DESIGN §5), as `packoracle verify` runs it on a dump.
//
// The input is a whole file. Every input must end in one of two ways: records read to the end, or an
// InputError whose message names the file (bad input is a clear error, never a crash, an exception of
// another type, a hang or undefined behaviour). Every micro-batch read must survive a round trip through
// the writer: written out and read back, it is the same micro-batch.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/interchange/request_json.h"
#include "packoracle/oracle/error.h"

namespace {

constexpr const char* kName = "fuzz.jsonl";

[[noreturn]] void Bug(const std::string& what) {
  // A finding: libFuzzer reports the abort with the input that caused it.
  std::fprintf(stderr, "packed_batch_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  packoracle::PackedBatchReader reader(in, kName);
  try {
    while (auto record = reader.Next()) {
      const auto* m = std::get_if<packoracle::MicrobatchRecord>(&*record);
      if (m == nullptr) continue;
      const std::string text = packoracle::MicrobatchToJson(m->microbatch).dump();
      packoracle::CandidateMicrobatch again;
      try {
        again = packoracle::MicrobatchFromJson(nlohmann::json::parse(text), "round trip");
      } catch (const std::exception& e) {
        Bug(std::string("a micro-batch the reader accepted does not read back once written: ") + e.what() +
            "\n  written: " + text.substr(0, 400));
      }
      if (!(again == m->microbatch)) Bug("a micro-batch changed in a write/read round trip: " + text.substr(0, 400));
    }
  } catch (const packoracle::InputError& e) {
    if (std::string(e.what()).rfind(kName, 0) != 0) Bug(std::string("an input error that does not name the file: ") + e.what());
  }
  return 0;
}
