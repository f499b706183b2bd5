// make_dump: writes a large, clean packed-batch dump (DESIGN §5) for the audit throughput measurement
// (bench/audit/run.sh, bench/audit/shapes.sh) and the memory test (cli/test/verify_memory.py). Documents come
// from a fixed std::mt19937 seed; each optimizer step is one request packed by the kit's reference packer
// under a preset, so `packoracle verify` must find the dump clean.
//
//   make_dump OUT [PRESET [MIB [ROW_LENGTH [ROWS_PER_MICROBATCH [SEED]]]]] [--order O] [--documents D] [--ranks N]
//                 [--microbatches M] [--totals T]
//   defaults:      torchtune-packed  64   2048         8                     1    interleaved   mixed        1
//                  4                  full
//
// Layout of the file: the header (the preset's policy, fully resolved), then
//   --order interleaved:      per step the document records of that step's documents (delimiters included, as
//                             a producer adds them) followed by its micro-batch records (step field set);
//   --order documents-first:  every document record of the dump, then every micro-batch record (a dumper that
//                             writes the dataset first: verify then holds the whole dataset at once).
// Steps are written until the files hold at least MIB MiB together. Each step gets about M (--microbatches)
// micro-batches' worth of documents per rank; the packer decides the exact row count. Gradient accumulation
// over many micro-batches makes one large step: --microbatches 140 with L = 8192 and 8 rows is 9.2 M slots.
// --totals full: each micro-batch's producer totals as the reference packer reports them (loss_sum,
// denominator, loss); denominator: the denominator alone (a producer that logs only its count).
// --ranks N: dp_world_size N, one file per rank (OUT with `.jsonl` replaced by `.rankK.jsonl`), each holding
// its micro-batches and the document records they use.
//
// Documents (--documents): mixed: lengths 1 + floor(Lmax·u³) (u uniform: many short documents, a few close to
// a row); short: 1 + floor(min(Lmax, 64)·u) (rows of dozens of documents); long: Lmax/2 + floor(Lmax/2·u)
// (one or two a row). Token ids 1..50000 (never the pad id, ignore_index or a delimiter), half of the
// documents with an unsupervised prompt prefix (SFT masking), and a per-token loss uniform in [0, 8) nats for
// the producer totals.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "packoracle/interchange/packed_batch.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/invariants.h"

namespace {

enum class Order { kInterleaved, kDocumentsFirst };
enum class Lengths { kMixed, kShort, kLong };

struct Args {
  std::string out;
  Order order = Order::kInterleaved;
  Lengths lengths = Lengths::kMixed;
  std::int64_t ranks = 1;
  std::int64_t microbatches = 4;  // per rank and step
  bool denominator_only = false;
  std::string preset = "torchtune-packed";
  std::int64_t mib = 64;
  std::int64_t row_length = 2048;
  std::int64_t rows_per_microbatch = 8;
  std::uint32_t seed = 1;
};

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "make_dump: " << why << "\n"
            << "usage: make_dump OUT [PRESET [MIB [ROW_LENGTH [ROWS_PER_MICROBATCH [SEED]]]]]\n"
            << "                 [--order interleaved|documents-first] [--documents mixed|short|long] [--ranks N]\n"
            << "                 [--microbatches M] [--totals full|denominator]\n"
            << "       defaults: torchtune-packed 64 2048 8 1 --order interleaved --documents mixed --ranks 1\n"
            << "                 --microbatches 4 --totals full\n";
  std::exit(2);
}

std::int64_t Positive(const char* text, const char* what) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0) Usage(std::string(what) + " must be a positive integer, got '" + text + "'");
  return v;
}

Args Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int k = 1; k < argc; ++k) {
    const std::string arg = argv[k];
    if (arg.rfind("--", 0) != 0) {
      positional.push_back(arg);
      continue;
    }
    if (k + 1 == argc) Usage(arg + " needs a value");
    const std::string value = argv[++k];
    if (arg == "--order" && value == "interleaved") a.order = Order::kInterleaved;
    else if (arg == "--order" && value == "documents-first") a.order = Order::kDocumentsFirst;
    else if (arg == "--documents" && value == "mixed") a.lengths = Lengths::kMixed;
    else if (arg == "--documents" && value == "short") a.lengths = Lengths::kShort;
    else if (arg == "--documents" && value == "long") a.lengths = Lengths::kLong;
    else if (arg == "--ranks") a.ranks = Positive(value.c_str(), "--ranks");
    else if (arg == "--microbatches") a.microbatches = Positive(value.c_str(), "--microbatches");
    else if (arg == "--totals" && value == "full") a.denominator_only = false;
    else if (arg == "--totals" && value == "denominator") a.denominator_only = true;
    else Usage("unknown option or value: " + arg + " " + value);
  }
  if (positional.empty() || positional.size() > 6) Usage("expected 1 to 6 positional arguments");
  a.out = positional[0];
  if (positional.size() > 1) a.preset = positional[1];
  if (positional.size() > 2) a.mib = Positive(positional[2].c_str(), "MIB");
  if (positional.size() > 3) a.row_length = Positive(positional[3].c_str(), "ROW_LENGTH");
  if (positional.size() > 4) a.rows_per_microbatch = Positive(positional[4].c_str(), "ROWS_PER_MICROBATCH");
  if (positional.size() > 5) a.seed = static_cast<std::uint32_t>(Positive(positional[5].c_str(), "SEED"));
  return a;
}

// Uniform in [0, 1) from raw mt19937 output: the same numbers with every standard library.
double Unit(std::mt19937& rng) { return static_cast<double>(rng()) / 4294967296.0; }

std::int64_t Length(Lengths lengths, std::int64_t max_len, std::mt19937& rng) {
  const double u = Unit(rng);
  switch (lengths) {
    case Lengths::kShort: return 1 + static_cast<std::int64_t>(static_cast<double>(std::min<std::int64_t>(max_len, 64)) * u);
    case Lengths::kLong: return std::max<std::int64_t>(1, max_len / 2 + static_cast<std::int64_t>(static_cast<double>(max_len / 2) * u));
    case Lengths::kMixed: break;
  }
  return 1 + static_cast<std::int64_t>(static_cast<double>(max_len) * u * u * u);
}

std::string RankPath(const std::string& out, std::int64_t rank, std::int64_t ranks) {
  if (ranks == 1) return out;
  const std::string stem = out.size() > 6 && out.ends_with(".jsonl") ? out.substr(0, out.size() - 6) : out;
  return stem + ".rank" + std::to_string(rank) + ".jsonl";
}

// One output file; under documents-first its micro-batch records wait in a side file, appended at the end.
struct RankFile {
  std::string path, side_path;
  std::vector<char> buffer = std::vector<char>(1 << 20), side_buffer = std::vector<char>(1 << 20);
  std::ofstream out, side;
  packoracle::PackedBatchWriter documents{out}, side_writer{side};
  bool documents_first;

  RankFile(std::string p, bool first) : path(std::move(p)), side_path(path + ".microbatches"), documents_first(first) {
    out.rdbuf()->pubsetbuf(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    out.open(path, std::ios::binary);
    if (!out) Usage("cannot open '" + path + "' for writing");
    if (documents_first) {
      side.rdbuf()->pubsetbuf(side_buffer.data(), static_cast<std::streamsize>(side_buffer.size()));
      side.open(side_path, std::ios::binary);
      if (!side) Usage("cannot open '" + side_path + "' for writing");
    }
  }
  packoracle::PackedBatchWriter& microbatches() { return documents_first ? side_writer : documents; }
  std::int64_t bytes() { return static_cast<std::int64_t>(out.tellp()) + (documents_first ? static_cast<std::int64_t>(side.tellp()) : 0); }
  void Finish() {
    if (documents_first) {
      side.close();
      std::ifstream in(side_path, std::ios::binary);
      out << in.rdbuf();
      std::remove(side_path.c_str());
    }
    out.flush();
    if (!out) {
      std::cerr << "make_dump: writing '" << path << "' failed\n";
      std::exit(1);
    }
  }
};

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

  std::vector<std::unique_ptr<RankFile>> files;
  for (std::int64_t k = 0; k < args.ranks; ++k)
    files.push_back(std::make_unique<RankFile>(RankPath(args.out, k, args.ranks), args.order == Order::kDocumentsFirst));

  packoracle::HeaderRecord header;
  header.producer = {{"system", "packoracle"}, {"component", "bench/audit/make_dump"}, {"version", "1"},
                     {"seed", args.seed}};
  header.pad_id = policy.pad_id;
  header.bos_id = policy.bos_id;
  header.eos_id = policy.eos_id;
  header.dp_world_size = args.ranks;
  header.grad_accum_steps = args.microbatches;
  header.policy = policy;
  for (auto& f : files) f->documents.Header(header);

  const std::int64_t delimiters = (policy.bos_id ? 1 : 0) + (policy.eos_id ? 1 : 0);
  const std::int64_t max_len = args.row_length - delimiters;  // no document needs more than one row
  if (max_len < 1) Usage("ROW_LENGTH leaves no room for a document after the preset's delimiters");
  const std::int64_t tokens_per_step = std::max<std::int64_t>(
      1, args.ranks * args.microbatches * args.rows_per_microbatch * args.row_length * 9 / 10);
  const std::int64_t target_bytes = args.mib << 20;

  std::mt19937 rng(args.seed);
  const packoracle::Candidate reference = packoracle::ReferenceCandidate();
  std::int64_t step = 0, documents = 0, document_tokens = 0, rows = 0, microbatches = 0;
  auto written = [&] {
    std::int64_t bytes = 0;
    for (auto& f : files) bytes += f->bytes();
    return bytes;
  };
  while (written() < target_bytes) {
    packoracle::PackRequest request;
    request.id = step;
    request.row_length = args.row_length;
    request.micro_batch_rows = args.rows_per_microbatch;
    request.dp_world_size = args.ranks;
    request.policy = policy;
    std::int64_t total = 0;
    while (total < tokens_per_step) {
      const std::int64_t len = Length(args.lengths, max_len, rng);
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
    // Each rank's file gets the document records its micro-batches use (a document split across ranks goes
    // to each of them), before those micro-batches.
    std::map<std::string, std::set<std::int64_t>> ranks_of;
    for (const auto& mb : packed.microbatches)
      for (const auto& row : mb.rows)
        for (const auto& span : row.doc_spans) ranks_of[span.doc_uid].insert(mb.rank);
    for (const auto& eff : packoracle::Effective(request.documents, policy)) {
      const packoracle::Document doc{eff.uid, eff.tokens, eff.supervised};
      auto& ranks = ranks_of[eff.uid];
      if (ranks.empty()) ranks.insert(0);  // in no row (a policy that drops it): still a record, on rank 0
      for (std::int64_t rank : ranks) files[static_cast<std::size_t>(rank)]->documents.Document(doc);
      document_tokens += static_cast<std::int64_t>(eff.tokens.size());
    }
    for (auto& mb : packed.microbatches) {
      mb.step = step;
      if (args.denominator_only && mb.producer) {
        mb.producer->loss_sum.reset();
        mb.producer->loss.reset();
      }
      rows += static_cast<std::int64_t>(mb.rows.size());
      files[static_cast<std::size_t>(mb.rank)]->microbatches().Microbatch(mb);
    }
    documents += static_cast<std::int64_t>(request.documents.size());
    microbatches += static_cast<std::int64_t>(packed.microbatches.size());
    ++step;
  }
  for (auto& f : files) f->Finish();
  std::printf("make_dump: %s%s: %.1f MiB, preset %s, L=%lld, %lld rows/micro-batch, %s, %s documents: %lld steps, "
              "%lld micro-batches, %lld rows, %lld documents, %lld document tokens\n",
              files.front()->path.c_str(), args.ranks > 1 ? " ..." : "", static_cast<double>(written()) / (1 << 20),
              args.preset.c_str(), static_cast<long long>(args.row_length),
              static_cast<long long>(args.rows_per_microbatch),
              args.order == Order::kDocumentsFirst ? "documents first" : "interleaved",
              args.lengths == Lengths::kShort ? "short" : args.lengths == Lengths::kLong ? "long" : "mixed",
              static_cast<long long>(step), static_cast<long long>(microbatches), static_cast<long long>(rows),
              static_cast<long long>(documents), static_cast<long long>(document_tokens));
  return 0;
}
