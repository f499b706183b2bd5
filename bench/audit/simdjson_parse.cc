// simdjson_parse: the parse ceiling a fast verifier could build on (not what verify does today): the file
// read line by line (std::getline, each line copied into a padded_string) and every value of every record
// visited with simdjson's On-Demand API (objects, arrays, every integer and number decoded, strings
// unescaped), nothing checked. Prints bytes, lines, seconds and MiB/s.
//
//   simdjson_parse FILE
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <simdjson.h>

namespace {

struct Totals {
  std::int64_t ints = 0, numbers = 0, strings = 0;
  std::int64_t checksum = 0;
};

simdjson::error_code Visit(simdjson::ondemand::value value, Totals& t) {
  simdjson::ondemand::json_type type;
  if (auto e = value.type().get(type)) return e;
  switch (type) {
    case simdjson::ondemand::json_type::object: {
      simdjson::ondemand::object object;
      if (auto e = value.get_object().get(object)) return e;
      for (auto field : object) {
        simdjson::ondemand::value v;
        if (auto e = field.value().get(v)) return e;
        if (auto e = Visit(v, t)) return e;
      }
      return simdjson::SUCCESS;
    }
    case simdjson::ondemand::json_type::array: {
      simdjson::ondemand::array array;
      if (auto e = value.get_array().get(array)) return e;
      for (auto element : array) {
        simdjson::ondemand::value v;
        if (auto e = element.get(v)) return e;
        if (auto e = Visit(v, t)) return e;
      }
      return simdjson::SUCCESS;
    }
    case simdjson::ondemand::json_type::number: {
      simdjson::ondemand::number_type kind;
      if (auto e = value.get_number_type().get(kind)) return e;
      if (kind == simdjson::ondemand::number_type::signed_integer) {
        std::int64_t v;
        if (auto e = value.get_int64().get(v)) return e;
        t.checksum += v;
        ++t.ints;
      } else {
        double v;
        if (auto e = value.get_double().get(v)) return e;
        t.checksum += static_cast<std::int64_t>(v);
        ++t.numbers;
      }
      return simdjson::SUCCESS;
    }
    case simdjson::ondemand::json_type::string: {
      std::string_view s;
      if (auto e = value.get_string().get(s)) return e;
      t.checksum += static_cast<std::int64_t>(s.size());
      ++t.strings;
      return simdjson::SUCCESS;
    }
    case simdjson::ondemand::json_type::boolean: {
      bool b;
      return value.get_bool().get(b);
    }
    case simdjson::ondemand::json_type::null:
      return simdjson::SUCCESS;
  }
  return simdjson::SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: simdjson_parse FILE\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "simdjson_parse: cannot open " << argv[1] << "\n";
    return 2;
  }
  simdjson::ondemand::parser parser;
  Totals totals;
  std::int64_t bytes = 0, lines = 0;
  std::string text;
  while (std::getline(in, text)) {
    bytes += static_cast<std::int64_t>(text.size()) + 1;
    ++lines;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    simdjson::padded_string padded(text);
    simdjson::ondemand::document doc;
    simdjson::ondemand::value root;
    simdjson::error_code error = parser.iterate(padded).get(doc);
    if (!error) error = doc.get_value().get(root);
    if (!error) error = Visit(root, totals);
    if (error) {
      std::cerr << "simdjson_parse: " << argv[1] << ":" << lines << ": " << simdjson::error_message(error) << "\n";
      return 2;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("simdjson_parse: %lld bytes, %lld lines, %lld integers, %lld numbers, %lld strings (checksum %lld), "
              "%.3f s, %.1f MiB/s\n",
              static_cast<long long>(bytes), static_cast<long long>(lines), static_cast<long long>(totals.ints),
              static_cast<long long>(totals.numbers), static_cast<long long>(totals.strings),
              static_cast<long long>(totals.checksum), seconds, static_cast<double>(bytes) / (1 << 20) / seconds);
  return 0;
}
