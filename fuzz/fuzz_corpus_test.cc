// Replays every file of a fuzz target's corpus (seeds and the reproducers of fixed findings) through its
// LLVMFuzzerTestOneInput, in the ordinary build: a finding that comes back aborts this test.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

#ifndef PACKORACLE_FUZZ_CORPUS_DIR
#error "PACKORACLE_FUZZ_CORPUS_DIR must name the corpus directory"
#endif

namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryInputRunsCleanThroughTheEntryPoint) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(PACKORACLE_FUZZ_CORPUS_DIR)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  ASSERT_GE(files.size(), 5u) << "the corpus " << PACKORACLE_FUZZ_CORPUS_DIR << " is (nearly) empty";
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
  }
}

TEST(FuzzCorpus, EmptyAndTinyInputsRunClean) {
  for (const std::string bytes : {"", "\n", "{", "null", "{}", "[]"}) {
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()), 0);
  }
}

}  // namespace
