// Talks to agentrun serve's Responses API (POST /v1/responses) with the
// official clients, as an application would, and prints as JSON what they
// ended with. One argument, a JSON object:
//
//   baseURL, apiKey    the server's /v1 and a bearer token
//   mode               create | stream | helper | retrieve | agents
//   model, input       the agent's name and the request's input
//   previous, store    previous_response_id and store, when given
//   id                 the response to retrieve
//   key                an Idempotency-Key, sent with every attempt
//   maxRetries         the openai client's retries (0 unless given)
//
// create: responses.create; stream: responses.create with stream: true, every
// event in order; helper: the client's responses.stream helper and its final
// response; retrieve: responses.retrieve; agents: the OpenAI Agents SDK, its run()
// with an agentrun agent as its model — through OpenAIResponsesModel, through
// setDefaultOpenAIClient and the agent's name as the model, streamed, and a
// second turn with previousResponseId. A client error prints as
// {error: {status, code, type, param, message, shouldRetry}}.
//
//   node openai-responses.mjs '{"baseURL": …, "apiKey": …, "mode": "create", …}'
import OpenAI from "openai";

const spec = JSON.parse(process.argv[2] ?? "null");
if (!spec?.baseURL || !spec?.apiKey || !spec?.mode) {
  console.error("usage: node openai-responses.mjs '{\"baseURL\": …, \"apiKey\": …, \"mode\": …}'");
  process.exit(2);
}
const client = new OpenAI({ baseURL: spec.baseURL, apiKey: spec.apiKey, maxRetries: spec.maxRetries ?? 0, timeout: 30000 });
const options = spec.key ? { headers: { "Idempotency-Key": spec.key } } : {};
const params = () => {
  const p = { model: spec.model, input: spec.input };
  if (spec.previous) p.previous_response_id = spec.previous;
  if (spec.store !== undefined) p.store = spec.store;
  if (spec.metadata) p.metadata = spec.metadata;
  return p;
};

async function create() {
  const { data, response } = await client.responses.create(params(), options).withResponse();
  return { response: data, outputText: data.output_text, run: response.headers.get("x-agentrun-run") };
}

async function stream() {
  const events = [];
  let deltas = "";
  const s = await client.responses.create({ ...params(), stream: true }, options);
  for await (const event of s) {
    events.push(event);
    if (event.type === "response.output_text.delta") deltas += event.delta;
  }
  return { events, deltas };
}

async function helper() {
  let deltas = "";
  const s = client.responses.stream(params(), options);
  s.on("response.output_text.delta", (e) => { deltas += e.delta; });
  const final = await s.finalResponse();
  return { deltas, outputText: final.output_text, response: final };
}

async function retrieve() {
  const data = await client.responses.retrieve(spec.id);
  return { response: data, outputText: data.output_text };
}

async function agents() {
  const sdk = await import("@openai/agents");
  // Traces would go to OpenAI's platform with the key: this is agentrun's token.
  sdk.setTracingDisabled(true);
  const viaModel = new sdk.Agent({ name: "assistant", instructions: "Ignored: the agent's spec decides.",
    model: new sdk.OpenAIResponsesModel(client, spec.model) });
  const first = await sdk.run(viaModel, spec.input);

  sdk.setDefaultOpenAIClient(client);
  const byName = new sdk.Agent({ name: "assistant", model: spec.model });
  const named = await sdk.run(byName, spec.input);

  const streamed = await sdk.run(byName, spec.input, { stream: true });
  let text = "";
  for await (const chunk of streamed.toTextStream()) text += chunk;
  await streamed.completed;

  const second = await sdk.run(byName, spec.followUp ?? "thanks", { previousResponseId: named.lastResponseId });
  return {
    model: { finalOutput: first.finalOutput, lastResponseId: first.lastResponseId },
    named: { finalOutput: named.finalOutput, lastResponseId: named.lastResponseId },
    streamed: { finalOutput: streamed.finalOutput, text, lastResponseId: streamed.lastResponseId },
    second: { finalOutput: second.finalOutput, lastResponseId: second.lastResponseId },
  };
}

const modes = { create, stream, helper, retrieve, agents };
if (!modes[spec.mode]) {
  console.error(`unknown mode ${spec.mode}`);
  process.exit(2);
}
try {
  console.log(JSON.stringify(await modes[spec.mode]()));
} catch (err) {
  console.log(JSON.stringify({ error: {
    status: err.status ?? null,
    code: err.code ?? null,
    type: err.type ?? null,
    param: err.param ?? null,
    shouldRetry: err.headers?.get?.("x-should-retry") ?? null,
    message: String(err.message ?? err),
  } }));
}
