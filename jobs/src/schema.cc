// `packoracle schema` (schema.h).
#include "packoracle/jobs/schema.h"

#include <variant>

#include <nlohmann/json.hpp>

#include "packoracle/interchange/policy_json.h"
#include "packoracle/oracle.h"
#include "packoracle/properties/candidate.h"
#include "packoracle/properties/row_fields.h"
#include "packoracle/properties/row_members.h"

namespace packoracle::jobs {
namespace {

using OJson = nlohmann::ordered_json;

OJson ValueJson(const PolicyValue& value) {
  return std::visit([](const auto& v) -> OJson { return OJson(v); }, value);
}

OJson PolicyKeysJson() {
  OJson keys = OJson::array();
  for (const auto& domain : PolicyKeyDomains()) {
    OJson values = OJson::array();
    for (const auto& v : domain.values) values.push_back(ValueJson(v));
    keys.push_back({{"key", domain.key}, {"values", values}, {"open", domain.open}, {"takes", domain.takes},
                    {"after_version_one", domain.after_version_one}, {"default", ValueJson(domain.default_value)}});
  }
  return keys;
}

OJson RowFieldsJson() {
  OJson fields = OJson::array();
  for (const auto& field : kRowFields) {
    OJson aliases = OJson::array();
    for (const auto alias : field.aliases)
      if (!alias.empty()) aliases.push_back(alias);
    fields.push_back({{"name", field.name}, {"shape", ToString(field.shape)}, {"value", ToString(field.value)},
                      {"required", field.required}, {"aliases", aliases}});
  }
  return fields;
}

// A span's fields (kSpanFields): the uid, then integers.
OJson SpanFieldsJson() {
  OJson fields = OJson::array();
  for (const auto& field : kSpanFields)
    fields.push_back({{"name", field.name}, {"value", field.number ? "integer" : "string"}});
  return fields;
}

// A `producer` object's fields (kProducerTotalsFields): each total a number, and the denominator's scope.
OJson ProducerFieldsJson() {
  OJson fields = OJson::array();
  for (const auto& field : kProducerTotalsFields)
    fields.push_back({{"name", field.name}, {"value", field.number ? "number" : "scope"}});
  return fields;
}

}  // namespace

std::string RenderSchemaJson() {
  OJson presets = OJson::object();
  for (const auto& preset : Presets()) presets[preset.name] = PolicyToJson(preset.policy);
  OJson key_side = OJson::object();
  for (const auto& field : kKeySideFields) key_side[std::string(field.name)] = field.query;
  OJson derived = OJson::array();
  for (const auto name : kDerivedFields) derived.push_back(name);
  OJson scopes = OJson::array();
  for (const auto scope : kDenominatorScopes) scopes.push_back(ToString(scope));
  const OJson out = {{"generated_by", "packoracle schema (jobs/src/schema.cc); do not edit"},
                     {"policy_keys", PolicyKeysJson()},
                     {"presets", presets},
                     {"row_fields", RowFieldsJson()},
                     {"span_fields", SpanFieldsJson()},
                     {"key_side_fields", key_side},
                     {"derived_fields", derived},
                     {"denominator_scopes", scopes},
                     {"producer_fields", ProducerFieldsJson()}};
  return out.dump(1) + "\n";
}

}  // namespace packoracle::jobs
