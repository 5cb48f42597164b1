// The page at GET /: one self-contained HTML document (no external scripts, styles or
// fonts, so it works on a machine without internet). Two modes: a prompt whose completion
// streams in (POST /v1/completions), and a chat (POST /v1/chat/completions): a system
// prompt, the conversation as bubbles, the reply streaming into the last one; the whole
// conversation is sent with each message, as OpenAI's API wants. Both read the server-sent
// events through fetch's ReadableStream (EventSource cannot POST). It names the model it
// talks to (GET /v1/models) and samples by default (temperature 0.8, top-p 0.9): a small
// model's greedy text soon repeats itself, which hides what it learned.
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
  #system { width: 100%; box-sizing: border-box; font: 14px monospace; }
  #chat_input { height: 4rem; }
  #messages { border: 1px solid #ccc; padding: .75rem; min-height: 6rem; background: #fafafa;
              display: flex; flex-direction: column; gap: .5rem; }
  .bubble { white-space: pre-wrap; font: 14px monospace; padding: .4rem .6rem; border-radius: .5rem;
            max-width: 80%; }
  .bubble.user { align-self: flex-end; background: #d9e8fb; }
  .bubble.assistant { align-self: flex-start; background: #dff0d8; }
  [hidden] { display: none !important; }
</style>
</head>
<body>
<h1>trident serve</h1>
<p>model: <span id="model">...</span></p>
<p>
  <label><input type="radio" name="mode" id="mode_completion" checked> Completion</label>
  <label><input type="radio" name="mode" id="mode_chat"> Chat</label>
</p>
<div id="completion_mode">
  <textarea id="prompt" placeholder="Type a prompt"></textarea>
</div>
<div id="chat_mode" hidden>
  <p><label>system prompt <input id="system" placeholder="optional, e.g. You are a helpful assistant."></label></p>
  <div id="messages"></div>
  <p><textarea id="chat_input" placeholder="Type a message"></textarea></p>
</div>
<p>
  <label>max tokens <input id="max_tokens" type="number" value="64" min="0"></label>
  <label>temperature <input id="temperature" type="number" value="0.8" min="0" max="2" step="0.1"></label>
  <label>top-p <input id="top_p" type="number" value="0.9" min="0" max="1" step="0.05"></label>
  <label>API key <input id="api_key" type="password" placeholder="if the server wants one"></label>
  <button id="go">Generate</button>
  <button id="send" hidden>Send</button>
  <button id="clear" hidden>New chat</button>
</p>
<div id="status"></div>
<div id="output"><span id="prompt_text"></span><span id="completion" class="completion"></span></div>
<script>
const $ = (id) => document.getElementById(id);
const conversation = [];  // the chat's user and assistant messages so far

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

function sampling() {
  return {stream: true, max_tokens: Number($("max_tokens").value),
          temperature: Number($("temperature").value), top_p: Number($("top_p").value)};
}

// POSTs a streamed request and hands each chunk's first choice to onChoice; returns
// [events, finish_reason]. A chunk without choices (usage) is skipped.
async function streamChoices(url, body, onChoice) {
  const response = await fetch(url, {
    method: "POST",
    headers: apiHeaders({"Content-Type": "application/json"}),
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    const answer = await response.json();
    throw new Error(answer.error ? answer.error.message : response.statusText);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "", finish = "", events = 0;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer = parseEvents(buffer + decoder.decode(value, {stream: true}), (data) => {
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (!chunk.choices.length) return;
      events++;
      onChoice(chunk.choices[0]);
      if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    });
  }
  return [events, finish];
}

// Runs one request with the buttons disabled and its outcome in the status line.
async function run(work) {
  for (const id of ["go", "send", "clear"]) $(id).disabled = true;
  $("status").textContent = "generating...";
  try {
    const [events, finish] = await work();
    $("status").textContent = "done (" + events + " events, finish_reason " + finish + ")";
  } catch (e) {
    $("status").textContent = "error: " + e.message;
  } finally {
    for (const id of ["go", "send", "clear"]) $(id).disabled = false;
  }
}

function generate() {
  $("prompt_text").textContent = $("prompt").value;
  $("completion").textContent = "";
  return run(() => streamChoices("/v1/completions",
                                 Object.assign({prompt: $("prompt").value}, sampling()),
                                 (choice) => { $("completion").textContent += choice.text; }));
}

function bubble(role, text) {
  const b = document.createElement("div");
  b.className = "bubble " + role;
  b.textContent = text;
  $("messages").appendChild(b);
  return b;
}

// Sends the typed message with the conversation so far; the reply streams into a new bubble
// and joins the conversation once it has all arrived.
function send() {
  const text = $("chat_input").value;
  if (!text || $("send").disabled) return;
  $("chat_input").value = "";
  conversation.push({role: "user", content: text});
  bubble("user", text);
  const reply = bubble("assistant", "");
  const system = $("system").value.trim();
  const messages = (system ? [{role: "system", content: system}] : []).concat(conversation);
  return run(async () => {
    try {
      const result = await streamChoices(
          "/v1/chat/completions", Object.assign({messages: messages}, sampling()),
          (choice) => { reply.textContent += choice.delta.content || ""; });
      conversation.push({role: "assistant", content: reply.textContent});
      return result;
    } catch (e) {  // the message was not answered: take it back
      conversation.pop();
      reply.remove();
      throw e;
    }
  });
}

function showMode() {
  const chat = $("mode_chat").checked;
  $("completion_mode").hidden = $("output").hidden = $("go").hidden = chat;
  $("chat_mode").hidden = $("send").hidden = $("clear").hidden = !chat;
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
$("send").addEventListener("click", send);
$("clear").addEventListener("click", () => {
  conversation.length = 0;
  $("messages").textContent = "";
  $("status").textContent = "";
});
$("chat_input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
});
$("mode_completion").addEventListener("change", showMode);
$("mode_chat").addEventListener("change", showMode);
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
