// Documents: what a packer is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace packoracle {

using Token = std::int64_t;

// One source document (an example, a conversation). `supervised[k]` is 1 when token k may be a target
// (SFT masking: prompt tokens are 0); it is indexed by the target token, whatever the label alignment.
// An empty `supervised` means every token is supervised.
struct Document {
  std::string uid;
  std::vector<Token> tokens;
  std::vector<int> supervised;
};

// A Document viewed where its owner holds it (check_batch's token arrays, read in place): the same fields as
// pointers and counts, valid while the owner keeps them unchanged. `supervised` null: every token supervised
// (else it has supervised_size flags, which must be `size`).
struct DocumentRef {
  std::string_view uid;
  const Token* tokens = nullptr;
  std::size_t size = 0;
  const int* supervised = nullptr;
  std::size_t supervised_size = 0;

  static DocumentRef Of(const Document& d) {
    return {d.uid, d.tokens.data(), d.tokens.size(), d.supervised.empty() ? nullptr : d.supervised.data(),
            d.supervised.size()};
  }
  Document Copy() const {
    return {std::string(uid), std::vector<Token>(tokens, tokens + size),
            supervised ? std::vector<int>(supervised, supervised + supervised_size) : std::vector<int>{}};
  }
};

// A document as the packer really places it: the policy's delimiters added (`[bos] + tokens + [eos]`),
// `supervised` filled in for every token (delimiters are supervised: the model learns to emit them).
struct EffectiveDocument {
  std::string uid;
  std::vector<Token> tokens;
  std::vector<int> supervised;
  std::int64_t size() const { return static_cast<std::int64_t>(tokens.size()); }
};

// Documents with uids "d0", "d1", ... and every token supervised: the form the golden fixtures use.
std::vector<Document> MakeDocuments(const std::vector<std::vector<Token>>& token_lists);

}  // namespace packoracle
