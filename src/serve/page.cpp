// The page at GET /: one self-contained HTML document (no external scripts, styles or
// fonts, so it works on a machine without internet). It posts to /v1/completions with
// stream: true and appends each server-sent event's text as it arrives, reading the
// response body through fetch's ReadableStream (EventSource cannot POST). It names the
// model it talks to (GET /v1/models) and samples by default (temperature 0.8, top-p 0.9):
// a small model's greedy text soon repeats itself, which hides what it learned.
#include "serve/http_server.h"

namespace trident::serve {

namespace {

const char* kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>trident serve</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; }
  textarea { width: 100%; height: 7rem; font: 14px monospace; box-sizing: border-box; }
  #output { white-space: pre-wrap; font: 14px monospace; border: 1px solid #ccc; padding: .75rem;
            min-height: 6rem; background: #fafafa; }
  #output .completion { background: #dff0d8; }
  label { margin-right: 1rem; }
  input[type=number] { width: 5rem; }
  #status { color: #666; margin: .5rem 0; }
</style>
</head>
<body>
<h1>trident serve</h1>
<p>model: <span id="model">...</span></p>
<textarea id="prompt" placeholder="Type a prompt"></textarea>
<p>
  <label>max tokens <input id="max_tokens" type="number" value="64" min="0"></label>
  <label>temperature <input id="temperature" type="number" value="0.8" min="0" max="2" step="0.1"></label>
  <label>top-p <input id="top_p" type="number" value="0.9" min="0" max="1" step="0.05"></label>
  <label>API key <input id="api_key" type="password" placeholder="if the server wants one"></label>
  <button id="go">Generate</button>
</p>
<div id="status"></div>
<div id="output"><span id="prompt_text"></span><span id="completion" class="completion"></span></div>
<script>
const $ = (id) => document.getElementById(id);

// The headers of an API request: the key as a Bearer token when one is typed (--api-key).
function apiHeaders(extra) {
  const key = $("api_key").value.trim();
  return key ? Object.assign({Authorization: "Bearer " + key}, extra) : extra;
}

// Feeds the SSE lines of one chunk of the body to onData; returns the unfinished tail.
function parseEvents(buffer, onData) {
  const parts = buffer.split("\n\n");
  const tail = parts.pop();
  for (const part of parts)
    for (const line of part.split("\n"))
      if (line.startsWith("data: ")) onData(line.slice(6));
  return tail;
}

async function generate() {
  $("go").disabled = true;
  $("prompt_text").textContent = $("prompt").value;
  $("completion").textContent = "";
  $("status").textContent = "generating...";
  let events = 0;
  try {
    const response = await fetch("/v1/completions", {
      method: "POST",
      headers: apiHeaders({"Content-Type": "application/json"}),
      body: JSON.stringify({prompt: $("prompt").value, stream: true,
                            max_tokens: Number($("max_tokens").value),
                            temperature: Number($("temperature").value),
                            top_p: Number($("top_p").value)}),
    });
    if (!response.ok) {
      const body = await response.json();
      throw new Error(body.error ? body.error.message : response.statusText);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "", finish = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buffer = parseEvents(buffer + decoder.decode(value, {stream: true}), (data) => {
        if (data === "[DONE]") return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        events++;
        $("completion").textContent += chunk.choices[0].text;
        if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
      });
    }
    $("status").textContent = "done (" + events + " events, finish_reason " + finish + ")";
  } catch (e) {
    $("status").textContent = "error: " + e.message;
  } finally {
    $("go").disabled = false;
  }
}

async function showModel() {
  try {
    const models = await (await fetch("/v1/models", {headers: apiHeaders({})})).json();
    if (models.error) throw new Error(models.error.message);
    $("model").textContent = models.data.map((m) => m.id).join(", ");
  } catch (e) {
    $("model").textContent = "unknown (" + e.message + ")";
  }
}

$("go").addEventListener("click", generate);
$("api_key").addEventListener("change", showModel);
showModel();
</script>
</body>
</html>
)HTML";

}  // namespace

const std::string& index_page() {
  static const std::string page = kPage;
  return page;
}

}  // namespace trident::serve
