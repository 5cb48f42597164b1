#!/usr/bin/python3
"""`trident serve`'s POST /v1/chat/completions end to end, on a tiny random-weight GPT-2 with
the real GPT-2 tokenizer. The references are independent of the server: Jinja itself
(Debian's python3-jinja2, in HF's apply_chat_template environment) renders each conversation
from the same template file with the generation prompt, `trident generate` continues that
text, and the published GPT-2 BPE in Python counts its tokens.
Checked: greedy replies equal `generate --greedy` (several conversations: system prompt,
turns, text parts, Unicode; one at a time and 12 at once); a stream's deltas concatenate to
the whole reply, its role comes first, its finish_reason last and its usage counts the
tokens; stop strings, max_tokens ("length"), seeded sampling (equal to `generate --seed`,
reproducible); logprobs equal /v1/completions' on the rendered prompt; bad requests get
400/404 naming the field. A second server finds the model's own template in its
tokenizer_config.json (with bos_token and raise_exception, whose message a bad conversation
gets back as a 400); a server without one answers 400 chat_template_missing; a
--chat-template (or --chat-template-kwargs) that cannot be used exits 2 at start-up.
Usage: serve_chat_test.py TRIDENT SOURCE_DIR"""
import concurrent.futures
import http.client
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_template_test import hf_environment  # noqa: E402
from eval_test import Encoder  # noqa: E402
from parity import MPI_ENV, Checks  # noqa: E402
from serve_client import Server, write_model  # noqa: E402

CHECK = Checks()
REPLY = 24  # tokens of each greedy reply

CONVERSATIONS = [
    [{"role": "user", "content": "Hello there"}],
    [{"role": "system", "content": "You answer in one line."},
     {"role": "user", "content": "What is a transformer?"},
     {"role": "assistant", "content": "A model."},
     {"role": "user", "content": "Say more, über-briefly: ½ line."}],
    [{"role": "user", "content": [{"type": "text", "text": "first part"},
                                  {"type": "text", "text": "second part"}]}],
]

# A Llama 2-style template, as a model's tokenizer_config.json carries it: the BOS token from
# the config, [INST] turns, and raise_exception when the roles do not alternate.
LLAMA2_TEMPLATE = (
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% else %}{{ ' ' + message['content'] + eos_token }}{% endif %}"
    "{% endfor %}")


def as_template_reads(messages):
    """The messages as the server hands them to the template: text parts joined by "\n"."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = "\n".join(p["text"] for p in content)
        out.append({"role": m["role"], "content": content})
    return out


def render(template, messages, **special):
    return hf_environment().from_string(template).render(
        messages=as_template_reads(messages), add_generation_prompt=True, **special)


def generate(trident, model_args, prompts, extra):
    """`trident generate --json` on each prompt: [{text, tokens, prompt_tokens, ...}]."""
    cmd = [trident, "generate", "--threads", "1", "--json", "--tokens-to-generate", str(REPLY)]
    cmd += model_args + extra
    for p in prompts:
        cmd += ["--prompt", p]
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=120)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def stream(server, body):
    """The parsed data events of a streamed chat request, up to (not including) [DONE]."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(dict(body, stream=True)),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, (resp.status, resp.read())
    events, done = [], False
    for line in resp:
        line = line.decode("utf-8").rstrip("\n")
        if line == "data: [DONE]":
            done = True
            break
        if line.startswith("data: "):
            events.append(json.loads(line[6:]))
    conn.close()
    CHECK(done, "the stream ends with data: [DONE]")
    return events


def chat(server, body):
    return server.request("POST", "/v1/chat/completions", body)


def check_greedy(server, trident, model_args, template, encode):
    """Each conversation's greedy reply is generate's continuation of Jinja's render."""
    rendered = [render(template, c) for c in CONVERSATIONS]
    expected = generate(trident, model_args, rendered, ["--greedy"])
    for i, (conv, ref, text) in enumerate(zip(CONVERSATIONS, expected, rendered)):
        status, answer = chat(server, {"messages": conv, "max_tokens": REPLY, "temperature": 0})
        choice = answer["choices"][0]
        CHECK(status == 200 and answer["object"] == "chat.completion"
              and answer["id"].startswith("chatcmpl-") and choice["message"]["role"] == "assistant",
              f"conversation {i}: a chat.completion from the assistant")
        CHECK(choice["message"]["content"] == ref["text"] and choice["finish_reason"] == "length",
              f"conversation {i}: the greedy reply equals generate --greedy on Jinja's render "
              f"({len(ref['tokens'])} tokens, {choice['finish_reason']})")
        usage = answer["usage"]
        prompt_tokens = len(encode(text))
        CHECK(usage == {"prompt_tokens": prompt_tokens, "completion_tokens": REPLY,
                        "total_tokens": prompt_tokens + REPLY}
              and ref["prompt_tokens"] == encode(text),
              f"conversation {i}: usage counts {prompt_tokens} prompt tokens (Python GPT-2 BPE)")
    # Concurrent requests share the batch (and the template, rendered on several threads).
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda i: chat(server, {
            "messages": CONVERSATIONS[i % 3], "max_tokens": REPLY, "temperature": 0}), range(12)))
    CHECK(all(a[1]["choices"][0]["message"]["content"] == expected[i % 3]["text"]
              for i, a in enumerate(answers)),
          "12 concurrent requests: each reply equals its conversation's generate --greedy")
    return rendered, expected


def check_stream(server, conv, whole, prompt_tokens):
    events = stream(server, {"messages": conv, "max_tokens": REPLY, "temperature": 0,
                             "stream_options": {"include_usage": True}})
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    CHECK(all(e["object"] == "chat.completion.chunk" for e in events)
          and len({e["id"] for e in events}) == 1, "every chunk is a chat.completion.chunk, one id")
    CHECK(deltas[0] == {"role": "assistant", "content": ""}, "the first chunk gives the role")
    text = "".join(d.get("content", "") for d in deltas)
    CHECK(text == whole, f"the stream's deltas concatenate to the reply ({len(deltas)} chunks)")
    finishes = [e["choices"][0]["finish_reason"] for e in events if e["choices"]]
    CHECK(finishes[-1] == "length" and not any(finishes[:-1]),
          "only the last choice chunk carries the finish_reason")
    CHECK(events[-1]["choices"] == [] and events[-1]["usage"] == {
        "prompt_tokens": prompt_tokens, "completion_tokens": REPLY,
        "total_tokens": prompt_tokens + REPLY}
        and all(e["usage"] is None for e in events[:-1]),
        "include_usage: a last chunk with the counts, null before")
    plain = stream(server, {"messages": conv, "max_tokens": 3, "temperature": 0})
    CHECK(all("usage" not in e for e in plain), "without include_usage no chunk has usage")


def check_stop_and_length(server, conv, whole):
    # A stop string from the middle of the greedy reply: the text ends before it.
    stop = whole[len(whole) // 2:len(whole) // 2 + 3]
    cut = whole[:whole.find(stop)]
    status, answer = chat(server, {"messages": conv, "max_tokens": REPLY, "temperature": 0,
                                   "stop": [stop, "never-said"]})
    choice = answer["choices"][0]
    CHECK(status == 200 and choice["message"]["content"] == cut
          and choice["finish_reason"] == "stop", f"stop {stop!r}: the reply ends before it")
    events = stream(server, {"messages": conv, "max_tokens": REPLY, "temperature": 0,
                             "stop": stop})
    streamed = "".join(e["choices"][0]["delta"].get("content", "") for e in events)
    CHECK(streamed == cut and events[-1]["choices"][0]["finish_reason"] == "stop",
          "stop: streamed the same, finish_reason stop")
    status, answer = chat(server, {"messages": conv, "max_completion_tokens": 5,
                                   "temperature": 0})
    CHECK(answer["choices"][0]["finish_reason"] == "length"
          and answer["usage"]["completion_tokens"] == 5 and whole.startswith(
              answer["choices"][0]["message"]["content"]),
          "max_completion_tokens 5: finish_reason length after 5 tokens, a prefix of the reply")


def check_seeds(server, trident, model_args, conv, rendered):
    body = {"messages": conv, "max_tokens": REPLY, "temperature": 1.0, "seed": 7}
    first = chat(server, body)[1]["choices"][0]["message"]["content"]
    again = chat(server, body)[1]["choices"][0]["message"]["content"]
    other = chat(server, dict(body, seed=8))[1]["choices"][0]["message"]["content"]
    ref = generate(trident, model_args, [rendered], ["--seed", "7", "--temperature", "1"])[0]
    CHECK(first == again and first != other, "seed 7 twice: the same reply; seed 8 another")
    CHECK(first == ref["text"], "seed 7 samples what generate --seed 7 --temperature 1 samples")


def check_logprobs(server, conv, rendered):
    """Chat's logprobs on a conversation equal /v1/completions' on its rendered prompt."""
    _, c = chat(server, {"messages": conv, "max_tokens": 8, "temperature": 0,
                         "logprobs": True, "top_logprobs": 3})
    _, p = server.request("POST", "/v1/completions", {"prompt": rendered, "max_tokens": 8,
                                                      "temperature": 0, "logprobs": 3})
    content = c["choices"][0]["logprobs"]["content"]
    legacy = p["choices"][0]["logprobs"]
    CHECK([e["token"] for e in content] == legacy["tokens"]
          and [e["logprob"] for e in content] == legacy["token_logprobs"],
          f"chat logprobs equal /v1/completions' ({len(content)} tokens)")
    CHECK(all({t["token"]: t["logprob"] for t in e["top_logprobs"]} == top
              for e, top in zip(content, legacy["top_logprobs"])),
          "chat top_logprobs equal /v1/completions' (3 per token)")
    CHECK(all(e["top_logprobs"][0]["logprob"] == e["logprob"] and len(e["top_logprobs"]) == 3
              and bytes(e["bytes"]).decode("utf-8", "replace") == e["token"] for e in content)
          and all(-30 < e["logprob"] <= 0 and math.isfinite(e["logprob"]) for e in content),
          "greedy: each token is its step's likeliest; bytes spell the token")
    events = stream(server, {"messages": conv, "max_tokens": 8, "temperature": 0,
                             "logprobs": True, "top_logprobs": 3})
    streamed = [lp for e in events if e["choices"] and e["choices"][0]["logprobs"]
                for lp in e["choices"][0]["logprobs"]["content"]]
    CHECK(streamed == content, "streamed logprobs equal the whole answer's")


def check_bad_requests(server):
    ok = [{"role": "user", "content": "Hi"}]
    cases = [
        ({}, 400, "messages"),
        ({"messages": []}, 400, "messages"),
        ({"messages": [{"role": "user"}]}, 400, "messages[0].content"),
        ({"messages": [{"content": "Hi"}]}, 400, "messages[0].role"),
        ({"messages": [{"role": "wizard", "content": "Hi"}]}, 400, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 7}]}, 400, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400,
         "messages[0].content[0].type"),
        ({"messages": ok, "n": 2}, 400, "n"),
        ({"messages": ok, "temperature": 5}, 400, "temperature"),
        ({"messages": ok, "top_logprobs": 2}, 400, "top_logprobs"),
        ({"messages": ok, "max_tokens": 10000}, 400, "max_tokens"),
        ({"messages": ok, "model": "gpt-4o"}, 404, "model"),
    ]
    for body, status, param in cases:
        got, answer = chat(server, body)
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        CHECK(got == status and error.get("param") == param and error.get("message"),
              f"{json.dumps(body)[:70]} -> {got} naming {error.get('param')!r}: "
              f"{error.get('message', '')[:60]}")
    got, answer = server.request("POST", "/v1/chat/completions", raw="{not json")
    CHECK(got == 400 and "not valid JSON" in answer["error"]["message"], "a broken body: 400")


def model_own_template(trident, source, tmp, hf, gpt2_files, encode):
    """The model's tokenizer_config.json carries the template; bos/eos come from it too."""
    own = os.path.join(tmp, "own")
    os.makedirs(own)
    for name in ("config.json", "model.safetensors"):
        os.symlink(os.path.join(hf, name), os.path.join(own, name))
    shutil.copy(gpt2_files[1], os.path.join(own, "vocab.json"))
    shutil.copy(gpt2_files[3], os.path.join(own, "merges.txt"))
    special = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    with open(os.path.join(own, "tokenizer_config.json"), "w") as f:
        json.dump(dict(special, chat_template=LLAMA2_TEMPLATE), f)
    server = Server(trident, ["--load-hf", own, "--threads", "1"])
    try:
        conv = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Tell me a story"}]
        text = render(LLAMA2_TEMPLATE, conv, **special)
        ref = generate(trident, ["--load-hf", own], [text], ["--greedy"])[0]
        status, answer = chat(server, {"messages": conv, "max_tokens": REPLY, "temperature": 0})
        CHECK(status == 200 and answer["choices"][0]["message"]["content"] == ref["text"]
              and answer["usage"]["prompt_tokens"] == len(encode(text)),
              "the model's own template (tokenizer_config.json, bos_token) found and rendered")
        status, answer = chat(server, {"messages": conv[:2] + conv[1:]})
        error = answer.get("error", {})
        CHECK(status == 400 and error.get("code") == "chat_template_error"
              and "roles must alternate" in error.get("message", ""),
              f"raise_exception in the template: 400 with its message: {error.get('message')!r}")
    finally:
        server.stop()


def no_template(trident, source, tmp, hf, gpt2_files):
    server = Server(trident, ["--load-hf", hf, "--threads", "1"] + gpt2_files)
    try:
        status, answer = chat(server, {"messages": [{"role": "user", "content": "Hi"}]})
        error = answer.get("error", {})
        CHECK(status == 400 and error.get("code") == "chat_template_missing"
              and "--chat-template" in error.get("message", ""),
              f"no template: 400 chat_template_missing: {error.get('message', '')[:70]}")
        status, answer = server.request("POST", "/v1/completions", {"prompt": "a", "max_tokens": 2})
        CHECK(status == 200, "no template: /v1/completions still served")
    finally:
        server.stop()
    bad = os.path.join(tmp, "bad.jinja")
    with open(bad, "w") as f:
        f.write("{% for m in messages %}{{ m.content }")
    template = os.path.join(source, "configs/chatml.jinja")
    for flags, why in ((["--chat-template", bad], "does not parse"),
                       (["--chat-template", os.path.join(tmp, "absent.jinja")], "absent"),
                       (["--chat-template", template, "--chat-template-kwargs", "[1]"],
                        "kwargs not an object")):
        out = subprocess.run([trident, "serve", "--load-hf", hf, "--port", "0"] + flags
                             + gpt2_files, capture_output=True, text=True, env=MPI_ENV,
                             timeout=60)
        CHECK(out.returncode == 2 and flags[-2] in out.stderr,
              f"{flags[-2]} {why}: exit 2 at start-up: {out.stderr.strip()[-90:]!r}")


def main():
    trident, source = sys.argv[1], sys.argv[2]
    vocab, merges = (os.path.join(source, "data/gpt2", f) for f in ("encoder.json", "vocab.bpe"))
    gpt2_files = ["--vocab-file", vocab, "--merge-file", merges]
    encode = Encoder(vocab, merges)
    template_path = os.path.join(source, "configs/chatml.jinja")
    template = open(template_path, encoding="utf-8").read()
    with tempfile.TemporaryDirectory() as tmp:
        hf = os.path.join(tmp, "hf")
        write_model(hf)
        model_args = ["--load-hf", hf] + gpt2_files
        server = Server(trident, model_args + ["--threads", "1", "--chat-template", template_path])
        try:
            rendered, expected = check_greedy(server, trident, model_args, template, encode)
            conv, text, whole = CONVERSATIONS[1], rendered[1], expected[1]["text"]
            check_stream(server, conv, whole, len(encode(text)))
            check_stop_and_length(server, conv, whole)
            check_seeds(server, trident, model_args, conv, text)
            check_logprobs(server, conv, text)
            check_bad_requests(server)
        finally:
            CHECK(server.stop() == 0, "the server exits 0 on SIGTERM")
        model_own_template(trident, source, tmp, hf, gpt2_files, encode)
        no_template(trident, source, tmp, hf, gpt2_files)
    return CHECK.summary()


if __name__ == "__main__":
    sys.exit(main())
