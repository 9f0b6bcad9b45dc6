// A remote A2A agent for agentrun's A2A client tests, served by the official JS
// SDK's server (DefaultRequestHandler, the express JSON-RPC and agent card
// handlers). It prints its base URL as the first line of stdout and serves until
// killed.
//
//   node a2a-peer.mjs TOKEN
//
// Three agents answer below the base URL, each with its card at
// <agent>/.well-known/agent-card.json and JSON-RPC at <agent>/jsonrpc:
//   stream     streams (capabilities.streaming)
//   plain      does not stream: a client sends and polls
//   elsewhere  its card names an endpoint on another host (localhost for 127.0.0.1)
// Every JSON-RPC request must carry "Authorization: Bearer TOKEN" (else 401). The
// task text picks what the agent does:
//   fail: …     the task fails, its status message says why
//   reject: …   the task is rejected
//   input: …    the agent asks a question (input-required)
//   slow: …     the task works until canceled
//   big:N       the answer is N bytes of "x"
//   message: …  the agent answers with a message, no task
//   anything else: completed, its artifact "Done: <task> [context <contextId>]"
//                  streamed in two chunks
// GET /peer/log tells what happened: the tasks canceled, the context of each
// task, and how many requests were refused for their token.
import express from "express";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const token = process.argv[2];
if (!token) {
  console.error("usage: node a2a-peer.mjs TOKEN");
  process.exit(2);
}

const WORKING = 2, COMPLETED = 3, FAILED = 4, CANCELED = 5, INPUT_REQUIRED = 6, REJECTED = 7;
const AGENT = 2;
const log = { canceled: [], contexts: {}, refused: 0 };
const cancelers = new Map(); // task id → what ends its slow work

const text = (value) => ({ content: { $case: "text", value }, mediaType: "text/plain", filename: "", metadata: {} });
const agentMessage = (ctx, value) => ({
  role: AGENT, messageId: crypto.randomUUID(), taskId: ctx.taskId, contextId: ctx.contextId,
  parts: [text(value)], metadata: {}, extensions: [], referenceTaskIds: [],
});
const status = (ctx, state, message) => AgentEvent.statusUpdate({
  taskId: ctx.taskId, contextId: ctx.contextId, metadata: {},
  status: { state, message: message === undefined ? undefined : agentMessage(ctx, message), timestamp: new Date().toISOString() },
});
const artifact = (ctx, value, append, lastChunk) => AgentEvent.artifactUpdate({
  taskId: ctx.taskId, contextId: ctx.contextId, append, lastChunk, metadata: {},
  artifact: { artifactId: "answer", name: "answer", description: "", parts: [text(value)], metadata: {}, extensions: [] },
});

const executor = {
  async execute(ctx, bus) {
    const parts = ctx.userMessage.parts ?? [];
    const task = parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
    if (task.startsWith("message:")) {
      bus.publish(AgentEvent.message(agentMessage({ taskId: "", contextId: ctx.contextId }, "A message: " + task.slice(8).trim())));
      bus.finished();
      return;
    }
    log.contexts[ctx.taskId] = ctx.contextId;
    bus.publish(AgentEvent.task({
      id: ctx.taskId, contextId: ctx.contextId, status: { state: WORKING, message: undefined, timestamp: new Date().toISOString() },
      artifacts: [], history: [ctx.userMessage], metadata: {},
    }));
    if (task.startsWith("fail:")) {
      bus.publish(status(ctx, FAILED, "the refund service is down"));
    } else if (task.startsWith("reject:")) {
      bus.publish(status(ctx, REJECTED, "I only handle refunds"));
    } else if (task.startsWith("input:")) {
      bus.publish(status(ctx, INPUT_REQUIRED, "Which order do you mean?"));
    } else if (task.startsWith("slow:")) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, 120_000);
        cancelers.set(ctx.taskId, () => { clearTimeout(timer); resolve(); });
      });
      cancelers.delete(ctx.taskId);
      bus.publish(status(ctx, CANCELED, "canceled"));
    } else if (task.startsWith("big:")) {
      bus.publish(artifact(ctx, "x".repeat(Number(task.slice(4))), false, true));
      bus.publish(status(ctx, COMPLETED));
    } else {
      bus.publish(artifact(ctx, "Done: ", false, false));
      bus.publish(artifact(ctx, `${task} [context ${ctx.contextId}]`, true, true));
      bus.publish(status(ctx, COMPLETED));
    }
    bus.finished();
  },
  async cancelTask(taskId, bus) {
    log.canceled.push(taskId);
    const end = cancelers.get(taskId);
    if (end) {
      end(); // execute publishes the canceled status and finishes the bus
      return;
    }
    bus.publish(AgentEvent.statusUpdate({
      taskId, contextId: log.contexts[taskId] ?? "", metadata: {},
      status: { state: CANCELED, message: undefined, timestamp: new Date().toISOString() },
    }));
    bus.finished();
  },
};

const requireToken = (req, res, next) => {
  if (req.header("authorization") !== `Bearer ${token}`) {
    log.refused++;
    res.status(401).json({ error: "unauthorized" });
    return;
  }
  next();
};

const app = express();
app.get("/peer/log", (_req, res) => res.json(log));
const server = app.listen(0, "127.0.0.1", () => {
  const { port } = server.address();
  const base = `http://127.0.0.1:${port}`;
  for (const [name, streaming, host] of [["stream", true, "127.0.0.1"], ["plain", false, "127.0.0.1"], ["elsewhere", true, "localhost"]]) {
    const card = {
      name: `peer-${name}`,
      description: "A test agent of the official A2A JS SDK.",
      version: "1.0.0",
      supportedInterfaces: [{ url: `http://${host}:${port}/${name}/jsonrpc`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" }],
      capabilities: { streaming, pushNotifications: false, extensions: [] },
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer", description: "", bearerFormat: "" } } },
      securityRequirements: [{ schemes: { bearer: { list: [] } } }],
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      skills: [{ id: "refunds", name: "Refunds", description: "Refunds orders.", tags: ["refunds"], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
      signatures: [],
    };
    const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
    app.use(`/${name}/.well-known/agent-card.json`, agentCardHandler({ agentCardProvider: handler }));
    app.use(`/${name}/jsonrpc`, requireToken, jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  }
  console.log(base);
});
