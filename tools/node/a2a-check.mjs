// Talks to an agent of agentrun serve over A2A with the official JavaScript
// client (@a2a-js/sdk), as a user of it would, and prints as JSON what it saw,
// for serve/a2a_test.go to check. The card is fetched without credentials (it is
// public); every call carries the bearer token through the SDK's authenticating
// fetch.
//
//   node a2a-check.mjs SCENARIO CARD_URL TOKEN QUESTION [QUESTION2]
//
// Scenarios:
//   conversation  send QUESTION, get the task, send QUESTION2 in its context
//   stream        stream QUESTION and list its events
//   cancel        stream QUESTION and cancel its task once it works
//   approval      send QUESTION (a run that waits for approval), then stream
//                 "approve" to the task
//   v03           send and stream QUESTION over the card's A2A 0.3 interface
import { randomUUID } from "node:crypto";
import { Role, TaskState } from "@a2a-js/sdk";
import {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} from "@a2a-js/sdk/client";

const [scenario, cardURL, token, question, question2] = process.argv.slice(2);
if (!scenario || !cardURL || !token || !question) {
  console.error("usage: node a2a-check.mjs SCENARIO CARD_URL TOKEN QUESTION [QUESTION2]");
  process.exit(2);
}

const authFetch = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: `Bearer ${token}` }),
  shouldRetryWithHeaders: async () => undefined,
});
const resolver = new DefaultAgentCardResolver({ fetchImpl: fetch, legacyCompat: { enabled: true } });
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch, legacyCompat: { enabled: true } })],
  cardResolver: resolver,
}));

const text = (value) => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "" });
const data = (value) => ({ content: { $case: "data", value }, metadata: undefined, filename: "", mediaType: "" });
const message = (parts, ids = {}) => ({
  message: { messageId: randomUUID(), role: Role.ROLE_USER, parts, contextId: "", taskId: "", ...ids },
});

const stateName = (s) => (TaskState[s] ?? String(s)).replace(/^TASK_STATE_/, "").toLowerCase().replace(/_/g, "-");
const partsText = (parts = []) => parts.filter((p) => p.content?.$case === "text").map((p) => p.content.value).join("");
const partsData = (parts = []) => parts.filter((p) => p.content?.$case === "data").map((p) => p.content.value);

// task is what the checks read of a task.
function task(t) {
  return {
    id: t.id,
    contextId: t.contextId,
    state: stateName(t.status?.state),
    statusText: partsText(t.status?.message?.parts),
    statusData: partsData(t.status?.message?.parts),
    artifacts: (t.artifacts ?? []).map((a) => ({ id: a.artifactId, text: partsText(a.parts), data: partsData(a.parts) })),
    runId: t.metadata?.agentrun_run_id ?? null,
    stop: t.metadata?.agentrun_stop ?? null,
    history: (t.history ?? []).length,
  };
}

// event is what the checks read of a stream's event.
function event(e) {
  const { $case, value } = e.payload ?? {};
  switch ($case) {
    case "task":
      return { kind: "task", ...task(value) };
    case "statusUpdate":
      return {
        kind: "status", taskId: value.taskId, state: stateName(value.status?.state),
        text: partsText(value.status?.message?.parts), progress: value.metadata?.agentrun_progress ?? null,
      };
    case "artifactUpdate":
      return {
        kind: "artifact", taskId: value.taskId, id: value.artifact?.artifactId, text: partsText(value.artifact?.parts),
        append: value.append, lastChunk: value.lastChunk,
      };
    case "message":
      return { kind: "message", text: partsText(value.parts) };
  }
  return { kind: String($case) };
}

async function collect(stream, each = async () => {}) {
  const events = [];
  for await (const e of stream) {
    const ev = event(e);
    events.push(ev);
    await each(ev);
  }
  return events;
}

const failure = (err) => ({ error: String(err?.message ?? err), code: err?.code ?? null });

async function run() {
  const card = await resolver.resolve(cardURL, "");
  const seen = {
    card: {
      name: card.name,
      description: card.description,
      streaming: card.capabilities?.streaming ?? false,
      skills: (card.skills ?? []).map((s) => ({ id: s.id, name: s.name, description: s.description })),
      interfaces: (card.supportedInterfaces ?? []).map((i) => ({ url: i.url, binding: i.protocolBinding, version: i.protocolVersion })),
      securitySchemes: Object.keys(card.securitySchemes ?? {}),
      inputModes: card.defaultInputModes,
      outputModes: card.defaultOutputModes,
    },
  };
  const client = await factory.createFromAgentCard(card);
  switch (scenario) {
    case "conversation": {
      const first = await client.sendMessage(message([text(question)]));
      seen.first = task(first);
      seen.got = task(await client.getTask({ id: first.id, tenant: "" }));
      const second = await client.sendMessage(message([text(question2)], { contextId: first.contextId }));
      seen.second = task(second);
      break;
    }
    case "stream":
      seen.events = await collect(client.sendMessageStream(message([text(question)])));
      break;
    case "cancel": {
      let canceled = null;
      seen.events = await collect(client.sendMessageStream(message([text(question)])), async (ev) => {
        if (ev.kind === "status" && ev.state === "working" && !canceled) {
          canceled = task(await client.cancelTask({ id: ev.taskId, tenant: "", metadata: undefined }));
        }
      });
      seen.canceled = canceled;
      seen.got = canceled ? task(await client.getTask({ id: canceled.id, tenant: "" })) : null;
      break;
    }
    case "approval": {
      const paused = await client.sendMessage(message([text(question)]));
      seen.paused = task(paused);
      seen.events = await collect(client.sendMessageStream(
        message([text("approve")], { taskId: paused.id, contextId: paused.contextId })));
      seen.got = task(await client.getTask({ id: paused.id, tenant: "" }));
      try {
        await client.sendMessage(message([text("approve")], { taskId: paused.id, contextId: paused.contextId }));
        seen.again = "accepted";
      } catch (err) {
        seen.again = failure(err);
      }
      break;
    }
    case "v03": {
      const legacy = { ...card, supportedInterfaces: card.supportedInterfaces.filter((i) => i.protocolVersion === "0.3") };
      const old = await factory.createFromAgentCard(legacy);
      seen.protocol = old.protocolVersion;
      seen.sent = task(await old.sendMessage(message([text(question)])));
      seen.events = await collect(old.sendMessageStream(message([text(question)])));
      seen.got = task(await old.getTask({ id: seen.sent.id, tenant: "" }));
      break;
    }
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
  return seen;
}

try {
  console.log(JSON.stringify(await run()));
} catch (err) {
  console.log(JSON.stringify(failure(err)));
}
