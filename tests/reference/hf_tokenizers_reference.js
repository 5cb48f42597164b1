// The reference for --tokenizer-type HuggingFaceTokenizer: HF's own `tokenizers` library (its
// Rust core through the Node binding, npm `tokenizers`). Usage:
//   node hf_tokenizers_reference.js NODE_MODULES encode TOKENIZER_JSON DOCS.jsonl
//     prints, per line {"text": ...}, the JSON list of encode(text, add_special_tokens=false)
//   node hf_tokenizers_reference.js NODE_MODULES offsets TOKENIZER_JSON DOCS.jsonl
//     the same ids with each token's [start, end) character offsets: [[ids], [[s, e]...]]
//   node hf_tokenizers_reference.js NODE_MODULES decode TOKENIZER_JSON IDS.jsonl
//     prints, per line of ids, decode(ids, skip_special_tokens=false) as a JSON string
const fs = require('fs');
const path = require('path');
const [modules, mode, tokenizerJson, input] = process.argv.slice(2);
const { Tokenizer } = require(path.join(path.resolve(modules), 'tokenizers'));

async function main() {
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const lines = fs.readFileSync(input, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = [];
  for (const line of lines) {
    if (mode === 'encode') {
      const encoding = await tokenizer.encode(JSON.parse(line).text, null, {
        addSpecialTokens: false,
      });
      out.push(JSON.stringify(encoding.getIds()));
    } else if (mode === 'offsets') {
      const encoding = await tokenizer.encode(JSON.parse(line).text, null, {
        addSpecialTokens: false,
      });
      out.push(JSON.stringify([encoding.getIds(), encoding.getOffsets()]));
    } else if (mode === 'decode') {
      out.push(JSON.stringify(await tokenizer.decode(JSON.parse(line), false)));
    } else {
      throw new Error('mode must be encode or decode');
    }
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}

main().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
