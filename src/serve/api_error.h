#pragma once
// The error a request gets back: an HTTP status and an OpenAI-style JSON body
// {"error": {"message", "type", "param", "code"}}. Both APIs answer errors this way (Megatron's
// own server answers a bare string; a JSON object is what clients can parse reliably).
#include <string>

namespace trident::serve {

struct ApiError {
  int status = 0;       // 0: no error
  std::string message;  // names the field and the rule broken
  std::string param;    // the offending field ("prompts[3]"), or empty
  std::string type = "invalid_request_error";
  std::string code;  // a short machine-readable reason, or empty

  bool ok() const { return status == 0; }
};

ApiError bad_request(std::string param, std::string message);

// The JSON body of an error (never throws).
std::string error_json(const ApiError& e);

}  // namespace trident::serve
