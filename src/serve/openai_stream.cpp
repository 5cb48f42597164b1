#include "serve/openai_stream.h"

#include <chrono>
#include <cstdio>
#include <random>

namespace trident::serve {

namespace {

// One call of the content provider: writes the events that arrived (waiting up to 1 s).
StreamStep write_events(Job& job, ChunkFormat& format, const ChunkWriter& put) {
  std::vector<SequenceEvent> events;
  ApiError error;
  bool more = job.next_events(std::chrono::milliseconds(1000), &events, &error);
  for (const SequenceEvent& e : events) {
    const std::string chunks = format.event(e);
    if (!chunks.empty() && !put(chunks)) return StreamStep::kFailed;
  }
  if (!error.ok())
    return put("data: " + error_json(error) + "\n\n") && put(kStreamDone) ? StreamStep::kDone
                                                                          : StreamStep::kFailed;
  if (!more) {
    const std::string last = format.end ? format.end() : "";
    if (!last.empty() && !put(last)) return StreamStep::kFailed;
    return put(kStreamDone) ? StreamStep::kDone : StreamStep::kFailed;
  }
  if (events.empty() && !put(": waiting\n\n")) return StreamStep::kFailed;
  return StreamStep::kMore;
}

}  // namespace

CompletionMeta new_meta(const Service& s, const char* id_prefix, bool logprobs) {
  static thread_local std::mt19937_64 ids{std::random_device{}()};
  char id[48];
  std::snprintf(id, sizeof id, "%s-%016llx", id_prefix, (unsigned long long)ids());
  CompletionMeta m;
  m.id = id;
  m.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  m.model = s.model_name;
  m.logprobs = logprobs;
  return m;
}

ApiError check_model(const Service& s, const std::string& asked) {
  if (asked.empty() || asked == s.model_name) return {};
  ApiError e;
  e.status = 404;
  e.param = "model";
  e.code = "model_not_found";
  e.message =
      "model '" + asked + "' is not served here (this server serves '" + s.model_name + "')";
  return e;
}

void stream_job(Service& s, std::shared_ptr<Job> job, ChunkFormat format, HttpResponse& res) {
  auto shared = std::make_shared<ChunkFormat>(std::move(format));
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  res.stream = [job, shared](const ChunkWriter& put) { return write_events(*job, *shared, put); };
  res.on_stream_end = [job, &s](bool completed) {
    if (completed) return;
    job->cancel();  // the client went away (or stopped reading)
    s.engine.notify();
  };
}

}  // namespace trident::serve
