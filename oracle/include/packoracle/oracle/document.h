// Documents: what a packer is given.
#pragma once

#include <cstdint>
#include <string>
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
