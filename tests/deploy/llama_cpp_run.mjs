// Runs GGUF files in llama.cpp (node-llama-cpp's prebuilt CPU binary: nothing is built or
// downloaded) for the GGUF tests, all in one process:
//   node llama_cpp_run.mjs NODE_MODULES JOBS.json
// JOBS.json: a list of {"model": "x.gguf",
//                       "vocab": n,                                 the model's vocabulary
//                       "greedy": {"prompt": [ids], "n": 32},       greedy continuation
//                       "logprobs": [ids], "rows": k,              next-token argmax after
//                       "logprobs_file": "x.f32",                   each prefix; log-probs
//                                                                   after the first k
//                       "tokenize": ["text", ...]}                  llama.cpp's ids of texts
// (every field but model optional). Prints a JSON list, one {"greedy": [ids], "top1": [ids],
// "tokenize": [[ids]...]} a job; each job's log-probabilities (the full vocabulary after
// each of the first k prefixes: float32, k x vocab) go to its logprobs_file.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [modules, jobsPath] = process.argv.slice(2);
const { getLlama, LlamaLogLevel } = await import(
  pathToFileURL(path.join(modules, "node-llama-cpp", "dist", "index.js")).href);

// CPU only, the prebuilt binary only: build "never" fails rather than compiling llama.cpp.
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });

async function withSequence(model, use) {
  // An F32 key/value cache (llama.cpp keeps F16 by default) and no flash attention (its CPU
  // kernel rounds through F16: log-prob errors of 1e-2 instead of 1e-5): the weights' type
  // alone sets the error. One thread: ggml's threads spin at every barrier, and on shared
  // cores a descheduled one made each token take 400 ms instead of 10.
  const context = await model.createContext({ contextSize: 256, batchSize: 256, threads: 1,
    flashAttention: false,
    experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
  try {
    return await use(context.getSequence());
  } finally {
    await context.dispose();
  }
}

// Greedy: temperature 0 is llama.cpp's greedy sampler; each new token is fed back.
async function greedy(model, { prompt, n }) {
  return withSequence(model, async (sequence) => {
    let input = prompt.slice();
    const tokens = [];
    for (let i = 0; i < n; ++i) {
      const items = input.map((t, j) => (j < input.length - 1 ? t
        : [t, { generateNext: { token: true, options: { temperature: 0 } } }]));
      const result = await sequence.controlledEvaluate(items);
      tokens.push(result[items.length - 1].next.token);
      input = [tokens[tokens.length - 1]];
    }
    return tokens;
  });
}

// After every prefix of ids: the argmax (llama.cpp's greedy sampler), and for the first
// `rows` prefixes the whole next-token distribution (temperature 1, nothing cut) as logs.
async function logprobs(model, ids, rows, vocab, file) {
  return withSequence(model, async (sequence) => {
    const full = { temperature: 1, topK: 0, topP: 1, minP: 0 };
    const result = await sequence.controlledEvaluate(ids.map((t, i) => [t, { generateNext:
      i < rows ? { probabilities: true, options: full } : { token: true, options: { temperature: 0 } } }]));
    const table = new Float32Array(rows * vocab).fill(-Infinity);
    const top1 = result.map((r, row) => {
      if (row >= rows) return r.next.token;
      for (const [token, p] of r.next.probabilities) table[row * vocab + token] = Math.log(p);
      return r.next.probabilities.keys().next().value;  // the map runs from the most likely
    });
    fs.writeFileSync(file, Buffer.from(table.buffer));
    return top1;
  });
}

const answers = [];
for (const job of JSON.parse(fs.readFileSync(jobsPath, "utf8"))) {
  const model = await llama.loadModel({ modelPath: job.model, gpuLayers: 0 });
  const answer = {};
  if (job.greedy) answer.greedy = await greedy(model, job.greedy);
  if (job.logprobs)
    answer.top1 = await logprobs(model, job.logprobs, job.rows, job.vocab, job.logprobs_file);
  if (job.tokenize) answer.tokenize = job.tokenize.map((t) => model.tokenize(t, false));
  answers.push(answer);
  await model.dispose();
}
console.log(JSON.stringify(answers));
await llama.dispose();
