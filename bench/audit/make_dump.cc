// make_dump: writes a large, clean packed-batch dump (DESIGN §5) for the audit throughput measurement
// (bench/audit/run.sh). Documents come from a fixed std::mt19937 seed; each optimizer step is one request
// packed by the kit's reference packer under a preset, so `packoracle verify` must find the dump clean.
//
//   make_dump OUT [PRESET [MIB [ROW_LENGTH [ROWS_PER_MICROBATCH [SEED]]]]]
//   defaults:      torchtune-packed  64   2048         8                     1
//
// Layout of the file: the header (the preset's policy, fully resolved), then per step the document records
// of that step's documents (delimiters included, as a producer adds them) followed by its micro-batch records
// (step field set). Steps are written until the file holds at least MIB MiB. Each step gets about
// kMicrobatchesPerStep micro-batches' worth of documents; the packer decides the exact row count.
//
// Documents: lengths 1 + floor(Lmax·u³) (u uniform: many short documents, a few close to a row), token ids
// 1..50000 (never the pad id, ignore_index or a delimiter), half of them with an unsupervised prompt prefix
// (SFT masking), and a per-token loss uniform in [0, 8) nats for the producer totals.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"

namespace {

constexpr std::int64_t kMicrobatchesPerStep = 4;

struct Args {
  std::string out;
  std::string preset = "torchtune-packed";
  std::int64_t mib = 64;
  std::int64_t row_length = 2048;
  std::int64_t rows_per_microbatch = 8;
  std::uint32_t seed = 1;
};

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "make_dump: " << why << "\n"
            << "usage: make_dump OUT [PRESET [MIB [ROW_LENGTH [ROWS_PER_MICROBATCH [SEED]]]]]\n"
            << "       defaults: torchtune-packed 64 2048 8 1\n";
  std::exit(2);
}

std::int64_t Positive(const char* text, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0) Usage(std::string(what) + " must be a positive integer, got '" + text + "'");
  return v;
}

Args Parse(int argc, char** argv) {
  if (argc < 2 || argc > 7) Usage("expected 1 to 6 arguments");
  Args a;
  a.out = argv[1];
  if (argc > 2) a.preset = argv[2];
  if (argc > 3) a.mib = Positive(argv[3], "MIB");
  if (argc > 4) a.row_length = Positive(argv[4], "ROW_LENGTH");
  if (argc > 5) a.rows_per_microbatch = Positive(argv[5], "ROWS_PER_MICROBATCH");
  if (argc > 6) a.seed = static_cast<std::uint32_t>(Positive(argv[6], "SEED"));
  return a;
}

// Uniform in [0, 1) from raw mt19937 output: the same numbers with every standard library.
double Unit(std::mt19937& rng) { return static_cast<double>(rng()) / 4294967296.0; }

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  packoracle::Policy policy;
  try {
    policy = packoracle::FindPreset(args.preset).policy;
  } catch (const packoracle::InputError& e) {
    Usage(e.what());
  }
  if (policy.stream_stride != packoracle::StreamStride::kNone || policy.boundary_source == packoracle::BoundarySource::kNone) {
    // Stream windows and one-document-per-row presets pack differently; this generator targets packing presets.
    std::cerr << "make_dump: note: preset " << args.preset << " does not pack documents side by side\n";
  }

  std::ofstream out(args.out, std::ios::binary);
  if (!out) Usage("cannot open '" + args.out + "' for writing");
  std::vector<char> buffer(1 << 20);
  out.rdbuf()->pubsetbuf(buffer.data(), static_cast<std::streamsize>(buffer.size()));
  packoracle::PackedBatchWriter writer(out);

  packoracle::HeaderRecord header;
  header.producer = {{"system", "packoracle"}, {"component", "bench/audit/make_dump"}, {"version", "1"},
                     {"seed", args.seed}};
  header.pad_id = policy.pad_id;
  header.bos_id = policy.bos_id;
  header.eos_id = policy.eos_id;
  header.dp_world_size = 1;
  header.grad_accum_steps = kMicrobatchesPerStep;
  header.policy = policy;
  writer.Header(header);

  const std::int64_t delimiters = (policy.bos_id ? 1 : 0) + (policy.eos_id ? 1 : 0);
  const std::int64_t max_len = args.row_length - delimiters;  // no document needs more than one row
  if (max_len < 1) Usage("ROW_LENGTH leaves no room for a document after the preset's delimiters");
  const std::int64_t tokens_per_step =
      std::max<std::int64_t>(1, kMicrobatchesPerStep * args.rows_per_microbatch * args.row_length * 9 / 10);
  const std::int64_t target_bytes = args.mib << 20;

  std::mt19937 rng(args.seed);
  const packoracle::Candidate reference = packoracle::ReferenceCandidate();
  std::int64_t step = 0, documents = 0, rows = 0, microbatches = 0;
  while (static_cast<std::int64_t>(out.tellp()) < target_bytes) {
    packoracle::PackRequest request;
    request.id = step;
    request.row_length = args.row_length;
    request.micro_batch_rows = args.rows_per_microbatch;
    request.dp_world_size = 1;
    request.policy = policy;
    std::int64_t total = 0;
    while (total < tokens_per_step) {
      const double u = Unit(rng);
      const auto len = 1 + static_cast<std::int64_t>(static_cast<double>(max_len) * u * u * u);
      packoracle::Document doc;
      doc.uid = "s" + std::to_string(step) + "d" + std::to_string(request.documents.size());
      for (std::int64_t k = 0; k < len; ++k) {
        auto token = static_cast<packoracle::Token>(1 + rng() % 50000);
        while (token == policy.pad_id || token == policy.ignore_index || (policy.eos_id && token == *policy.eos_id) ||
               (policy.bos_id && token == *policy.bos_id))
          token = token % 50000 + 1;
        doc.tokens.push_back(token);
      }
      doc.supervised.assign(static_cast<std::size_t>(len), 1);
      if (rng() % 2 == 0) {  // a prompt prefix that is never a target
        const auto prompt = static_cast<std::int64_t>(static_cast<double>(len) * 0.5 * Unit(rng));
        for (std::int64_t k = 0; k < prompt; ++k) doc.supervised[static_cast<std::size_t>(k)] = 0;
      }
      std::vector<double> losses(static_cast<std::size_t>(len + delimiters));
      for (double& l : losses) l = 8.0 * Unit(rng);
      request.target_losses[doc.uid] = std::move(losses);
      total += len + delimiters;
      request.documents.push_back(std::move(doc));
    }

    packoracle::PackResult packed = reference.packer->Pack(request);
    if (packed.refusal || packed.fault) {
      std::cerr << "make_dump: the reference packer refused step " << step << ": "
                << (packed.refusal ? *packed.refusal : *packed.fault) << "\n";
      return 1;
    }
    for (const auto& eff : packoracle::Effective(request.documents, policy)) {
      writer.Document(packoracle::Document{eff.uid, eff.tokens, eff.supervised});
    }
    for (auto& mb : packed.microbatches) {
      mb.step = step;
      rows += static_cast<std::int64_t>(mb.rows.size());
      writer.Microbatch(mb);
    }
    documents += static_cast<std::int64_t>(request.documents.size());
    microbatches += static_cast<std::int64_t>(packed.microbatches.size());
    ++step;
  }
  out.flush();
  if (!out) {
    std::cerr << "make_dump: writing '" << args.out << "' failed\n";
    return 1;
  }
  std::printf("make_dump: %s: %.1f MiB, preset %s, L=%lld, %lld rows/micro-batch: %lld steps, %lld micro-batches, "
              "%lld rows, %lld documents\n",
              args.out.c_str(), static_cast<double>(out.tellp()) / (1 << 20), args.preset.c_str(),
              static_cast<long long>(args.row_length), static_cast<long long>(args.rows_per_microbatch),
              static_cast<long long>(step), static_cast<long long>(microbatches), static_cast<long long>(rows),
              static_cast<long long>(documents));
  return 0;
}
