// Errors of the oracle's API.
//
// Every refusal of bad input is an InputError whose message says what is wrong and where (which document,
// row, piece, policy key), so that a person fixes it without reading the oracle's source.
#pragma once

#include <stdexcept>
#include <string>

namespace packoracle {

class InputError : public std::invalid_argument {
 public:
  explicit InputError(const std::string& message) : std::invalid_argument(message) {}
};

}  // namespace packoracle
