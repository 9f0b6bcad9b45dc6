// Asks an OpenAI-compatible endpoint (agentrun serve) one question with the
// official openai client and its own retries (maxRetries 2), and prints as JSON
// what the client ended with: the answer and the run (X-Agentrun-Run), or the
// error's status and code. With a KEY, every attempt carries it as the
// Idempotency-Key header: the client passes a request's headers to each retry.
//
//   node openai-retry.mjs BASE_URL TOKEN MODEL QUESTION TIMEOUT_MS [KEY]
import OpenAI from "openai";

const [baseURL, apiKey, model, question, timeout, key] = process.argv.slice(2);
if (!baseURL || !apiKey || !model || !question || !timeout) {
  console.error("usage: node openai-retry.mjs BASE_URL TOKEN MODEL QUESTION TIMEOUT_MS [KEY]");
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 2, timeout: Number(timeout) });
const options = key ? { headers: { "Idempotency-Key": key } } : {};
try {
  const { data, response } = await client.chat.completions
    .create({ model, messages: [{ role: "user", content: question }] }, options)
    .withResponse();
  console.log(JSON.stringify({
    answer: data.choices[0]?.message?.content ?? null,
    id: data.id,
    run: response.headers.get("x-agentrun-run"),
  }));
} catch (err) {
  console.log(JSON.stringify({
    status: err.status ?? null,
    code: err.code ?? null,
    type: err.type ?? null,
    shouldRetry: err.headers?.get?.("x-should-retry") ?? null,
    error: String(err.message ?? err),
  }));
}
