#pragma once
// What the two OpenAI handlers (completions, chat completions) share: an answer's id and
// time, the check of the model a request names, and the streaming of a job's token events
// as server-sent events, each API formatting its own chunks.
#include <functional>
#include <memory>
#include <string>

#include "serve/responses.h"
#include "serve/service.h"

namespace trident::serve {

// The id ("<prefix>-" and 16 random hex digits), the time and the served model's name.
CompletionMeta new_meta(const Service& s, const char* id_prefix, bool logprobs);

// 404 model_not_found when a request names a model this server does not serve; "" is any.
ApiError check_model(const Service& s, const std::string& asked);

// How one API writes a stream: the events ("data: ...\n\n", any number, maybe none) for one
// token event, and what comes after the last one, before `data: [DONE]` (maybe nothing).
struct ChunkFormat {
  std::function<std::string(const SequenceEvent&)> event;
  std::function<std::string()> end;
};

// Makes `res` a stream of the job's events: written as they arrive, a comment line each
// second none does (so a client that went away is noticed while the job waits for a slot),
// an error event if the job fails, then `data: [DONE]`. A client that goes away cancels
// the job in the engine.
void stream_job(Service& s, std::shared_ptr<Job> job, ChunkFormat format, HttpResponse& res);

}  // namespace trident::serve
