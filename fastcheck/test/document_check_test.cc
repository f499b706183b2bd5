// ValidateDocumentFast and EffectiveFast (document_check.h) against the oracle's ValidateDocument and Effective,
// element by element: the same refusal with the same message, or the same document, on generated documents
// whose tokens hit the policy's ids (ignore_index, EOD, BOS, negative and not) and whose flags stray from 0 and 1.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <optional>
#include <string>
#include <vector>

#include "packoracle/fastcheck/document_check.h"
#include "packoracle/oracle.h"
#include "packoracle/oracle/error.h"

namespace packoracle::fastcheck {
namespace {

std::optional<std::string> ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

TEST(DocumentCheck, RefusesWhatValidateDocumentRefusesAndAcceptsTheRest) {
  const bool ok = rc::check("the fast check and the oracle's agree", [] {
    Policy policy = FindPreset(*rc::gen::element<std::string>("reference", "megatron-gpt", "llmc", "hf-flatten")).policy;
    policy.ignore_index = *rc::gen::element<Token>(-100, -1, 3);
    if (policy.eos_id) policy.eos_id = *rc::gen::element<Token>(0, 2, -5);
    if (policy.bos_id) policy.bos_id = *rc::gen::element<Token>(0, 1, -5);
    const auto tokens = *rc::gen::container<std::vector<Token>>(rc::gen::element<Token>(-100, -5, -1, 0, 1, 2, 3, 4, 7));
    std::vector<int> supervised;
    if (*rc::gen::arbitrary<bool>()) {
      supervised = *rc::gen::container<std::vector<int>>(tokens.size(), rc::gen::element(0, 1, 1, 1, 2));
      if (*rc::gen::weightedElement<bool>({{1, true}, {15, false}})) supervised.push_back(1);  // a wrong length
    }
    const Document document{"d", tokens, supervised};
    const DocumentRef ref = DocumentRef::Of(document);
    const auto delimiters = *rc::gen::element(Delimiters::kAdd, Delimiters::kIncluded);
    // What a reader's scan finds (the binding's), or nothing known.
    const bool scanned = *rc::gen::arbitrary<bool>();
    const bool non_negative = scanned && std::none_of(tokens.begin(), tokens.end(), [](Token t) { return t < 0; });
    const auto oracle = ErrorOf([&] { ValidateDocument(ref, policy, delimiters); });
    RC_ASSERT(ErrorOf([&] { ValidateDocumentFast(ref, policy, delimiters, non_negative); }) == oracle);
    std::optional<EffectiveDocument> fast, slow;
    RC_ASSERT(ErrorOf([&] { fast = EffectiveFast(ref, policy, delimiters, non_negative); }) ==
              ErrorOf([&] { slow = Effective(ref, policy, delimiters); }));
    if (fast) RC_ASSERT(fast->tokens == slow->tokens && fast->supervised == slow->supervised && fast->uid == slow->uid);
  });
  EXPECT_TRUE(ok);
}

// The flag spares the scan for a negative id only: an ignore_index or a delimiter >= 0 is still found in a
// document its reader found no negative token in.
TEST(DocumentCheck, ADocumentWithoutNegativeTokensIsStillScannedForTheIdsAtOrAboveZero) {
  const std::vector<Token> tokens = {5, 7, 6};
  const DocumentRef ref{"x", tokens.data(), tokens.size(), nullptr, 0};
  Policy policy;
  EXPECT_FALSE(MayRefuse(ref, policy, true));
  EXPECT_NO_THROW(ValidateDocumentFast(ref, policy, Delimiters::kAdd, true));
  policy.ignore_index = 7;
  EXPECT_EQ(ErrorOf([&] { ValidateDocumentFast(ref, policy, Delimiters::kAdd, true); }),
            ErrorOf([&] { ValidateDocument(ref, policy); }));
  Policy eod = FindPreset("megatron-gpt").policy;
  eod.eos_id = 7;
  const auto error = ErrorOf([&] { ValidateDocumentFast(ref, eod, Delimiters::kAdd, true); });
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("token 1 is the EOD id 7"), std::string::npos) << *error;
}

TEST(DocumentCheck, DocumentsWithOneUidTwiceAreRefusedAsEffectiveRefusesThem) {
  const std::vector<Document> documents = {{"a", {1, 2}, {}}, {"b", {3}, {}}, {"a", {4}, {}}};
  const auto error = ErrorOf([&] { EffectiveFast(documents, Policy{}); });
  EXPECT_EQ(error, ErrorOf([&] { Effective(documents, Policy{}); }));
  EXPECT_TRUE(error);
}

}  // namespace
}  // namespace packoracle::fastcheck
