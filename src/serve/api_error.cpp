#include "serve/api_error.h"

#include <nlohmann/json.hpp>

namespace trident::serve {

ApiError bad_request(std::string param, std::string message) {
  ApiError e;
  e.status = 400;
  e.param = std::move(param);
  e.message = std::move(message);
  return e;
}

std::string error_json(const ApiError& e) {
  nlohmann::ordered_json body = {
      {"message", e.message},
      {"type", e.type},
      {"param", e.param.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.param)},
      {"code", e.code.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.code)}};
  // Messages may quote client bytes; replace what is not UTF-8 instead of throwing.
  return nlohmann::ordered_json{{"error", body}}.dump(-1, ' ', false,
                                                      nlohmann::json::error_handler_t::replace);
}

}  // namespace trident::serve
