// Talks to an OpenAI-compatible endpoint (agentrun serve) with the official openai
// client and prints what it understood as JSON: the models listed, the answer of a
// chat completion, the answer streamed with stream_options.include_usage, the usage
// the stream ended with, and how many tool calls reached the client (never any: the
// agent's own tool calls stay in the server).
//
//   node openai-check.mjs http://127.0.0.1:8080/v1 TOKEN MODEL [QUESTION]
import OpenAI from "openai";

const [baseURL, apiKey, model, question = "Where is my order?"] = process.argv.slice(2);
if (!baseURL || !apiKey || !model) {
  console.error("usage: node openai-check.mjs BASE_URL TOKEN MODEL [QUESTION]");
  process.exit(2);
}
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20_000 });
const messages = [{ role: "user", content: question }];

const models = [];
for await (const m of client.models.list()) models.push(m.id);

let toolCallsSeen = 0;
const completion = await client.chat.completions.create({ model, messages });
const message = completion.choices[0]?.message ?? {};
toolCallsSeen += message.tool_calls?.length ?? 0;

const stream = await client.chat.completions.create({
  model,
  messages,
  stream: true,
  stream_options: { include_usage: true },
});
let streamed = "";
let usage = null;
let finish = null;
for await (const chunk of stream) {
  for (const choice of chunk.choices ?? []) {
    streamed += choice.delta?.content ?? "";
    toolCallsSeen += choice.delta?.tool_calls?.length ?? 0;
    finish = choice.finish_reason ?? finish;
  }
  if (chunk.usage) usage = chunk.usage;
}

console.log(JSON.stringify({
  models,
  answer: message.content ?? null,
  finish: completion.choices[0]?.finish_reason ?? null,
  completionUsage: completion.usage ?? null,
  streamed,
  streamFinish: finish,
  usage,
  toolCallsSeen,
}));
