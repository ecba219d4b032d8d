// One suite, both wire modes: the model call a turn makes (worker/backends/model-call.ts), against
// the scripted backend as a Responses backend and as a Chat Completions backend, read back by the
// turn's own collector. Both wires must give the turn the same events, text, status, usage and
// errors for the same scripted answer: everything downstream (presenters, A2A, MCP) then works
// unchanged on a chat backend.
import type { Response, ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { usageWasEstimated } from "../../worker/backends/chat-events.ts";
import type { ResponsesParams } from "../../worker/backends/chat-request.ts";
import { callModel } from "../../worker/backends/model-call.ts";
import type { CallRequestOptions } from "../../worker/backends/model-request.ts";
import { listProviderModels } from "../../worker/backends/provider-models.ts";
import { buildBackends, routeModel, type Backends } from "../../worker/backends/providers.ts";
import { parseConfig } from "../../worker/config/load.ts";
import type { Config } from "../../worker/config/schema.ts";
import { ApiError } from "../../worker/errors.ts";
import { fileSearchDocuments } from "../../worker/rag/retrieval.ts";
import { backendError } from "../../worker/turn/backend-errors.ts";
import { collect, type Collected } from "../../worker/turn/collect.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";

type Wire = "responses" | "chat";
const WIRES: Wire[] = ["responses", "chat"];

let backend: ScriptedBackend;
let chatOnly: ScriptedBackend;

beforeAll(async () => {
  backend = await startScriptedBackend();
  // A server with chat completions only, that refuses stream_options and never reports usage.
  chatOnly = await startScriptedBackend({ chatOnly: true, rejectStreamOptions: true, omitUsage: true });
});
afterAll(async () => {
  await Promise.all([backend.close(), chatOnly.close()]);
});
beforeEach(async () => {
  await fetch(backend.url.replace(/\/v1$/, "/__reset"), { method: "POST" });
});

function load(document: Record<string, unknown>): { config: Config; backends: Backends } {
  const parsed = parseConfig(JSON.stringify(document), {});
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  const built = buildBackends(parsed.config, {});
  if (!built.ok) throw new Error(JSON.stringify(built.problems));
  return { config: parsed.config, backends: built.backends };
}

/** The gateway's configuration for a wire mode: the chat one names the backend as a chat provider. */
function setup(wire: Wire, url = backend.url, extra: Record<string, unknown> = {}) {
  const providers = wire === "chat" ? [{ type: "scripted", extra: { url, wire: "chat", serves: ["moderations", "vector_stores", "files"], ...extra } }] : [];
  return load({ inference_backend: { url, max_retries: 0 }, inference: { providers } });
}

interface Outcome {
  events: ResponseStreamEvent[];
  collected: Collected;
}

async function ask(wire: Wire, params: Omit<ResponsesParams, "model">, streaming: boolean, setupOf = setup(wire), searches?: CallRequestOptions["searches"]): Promise<Outcome> {
  const { models } = await listProviderModels(setupOf.backends);
  const model = models.find((candidate) => candidate.identifier === "scripted/parley-small" || candidate.provider_resource_id === "parley-small")!;
  const route = routeModel(setupOf.backends, model);
  expect(route.wire).toBe(wire);
  const stream = await callModel(setupOf.backends, route, { ...params, model: model.identifier, store: false }, streaming, { signal: new AbortController().signal, searches });
  const events: ResponseStreamEvent[] = [];
  const collected = await collect(stream, new AbortController().signal, async (event) => void events.push(event));
  return { events, collected };
}

/** A failure before any event, as the turn reports it. */
async function failure(wire: Wire, input: string, streaming: boolean): Promise<ApiError> {
  try {
    await ask(wire, { input }, streaming);
  } catch (error) {
    return backendError(error, "scripted/parley-small");
  }
  throw new Error("expected the call to fail");
}

/**
 * The events without what legitimately differs between two answers (ids, times, sequence numbers)
 * or between the wires' chunking (a tool call's arguments may come in one piece or several).
 */
function shape(events: ResponseStreamEvent[]): unknown[] {
  const out: Array<Record<string, unknown>> = [];
  for (const event of events) {
    const e = event as unknown as Record<string, unknown>;
    const previous = out.at(-1);
    if (e.type === "response.function_call_arguments.delta" && previous?.type === e.type && previous.output_index === e.output_index) {
      previous.delta = String(previous.delta) + String(e.delta);
      continue;
    }
    const { sequence_number: _s, item_id: _i, response, item, ...rest } = e;
    const entry: Record<string, unknown> = { ...rest };
    if (item) entry.item = itemShape(item as Record<string, unknown>);
    if (response) {
      const r = response as Response;
      // cache_write_tokens: the openai package's type requires it; the scripted Responses wire leaves it out.
      const usage = r.usage ? { ...r.usage, input_tokens_details: { cached_tokens: r.usage.input_tokens_details.cached_tokens } } : null;
      entry.response = { status: r.status, output: r.output.map((o) => itemShape(o as unknown as Record<string, unknown>)), usage, error: r.error };
    }
    out.push(entry);
  }
  return out;
}

function itemShape(item: Record<string, unknown>): unknown {
  const { id: _id, call_id: callId, ...rest } = item;
  return { ...rest, ...(callId !== undefined ? { call_id: typeof callId === "string" && callId.startsWith("call_") ? "call_*" : callId } : {}) };
}

const SCENARIOS: Array<{ name: string; params: Omit<ResponsesParams, "model"> }> = [
  { name: "a plain question with instructions", params: { instructions: "be brief", input: "hello there" } },
  {
    name: "a conversation's history",
    params: {
      input: [
        { type: "message", role: "user", content: "first question" },
        { type: "message", id: "msg_prev", status: "completed", role: "assistant", content: [{ type: "output_text", text: "first answer", annotations: [] }] },
        { role: "user", content: [{ type: "input_text", text: "second" }, { type: "input_text", text: "question" }] },
      ],
    },
  },
  { name: "a tool call beside the answer", params: { input: "weather? #call-tool:get_weather", tools: [{ type: "function", name: "get_weather", parameters: { type: "object" }, strict: null }] } },
  {
    name: "a tool result handed back",
    params: {
      input: [
        { role: "user", content: "weather? #call-tool:get_weather" },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{}" },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
      ],
      tools: [{ type: "function", name: "get_weather", parameters: { type: "object" }, strict: null }],
    },
  },
  { name: "a topic summary", params: { instructions: "Write a topic summary of the question.", input: "how do I #rate-limit reset my quota" } },
  { name: "a slow answer", params: { input: "slowly #slow=5" } },
];

describe.each(WIRES)("the model call over %s", (wire) => {
  for (const streaming of [true, false]) {
    const mode = streaming ? "streamed" : "JSON";

    it.each(SCENARIOS)(`answers $name (${mode}) as the Responses wire does`, async ({ params }) => {
      const here = await ask(wire, params, streaming);
      const reference = await ask("responses", params, streaming);
      expect(here.collected.status).toBe("completed");
      expect(here.collected.error).toBeNull();
      expect(here.collected.text).toBe(reference.collected.text);
      expect(here.collected.deltas).toBe(reference.collected.deltas);
      expect(here.collected.usage).toEqual(reference.collected.usage);
      expect(usageWasEstimated(here.collected.response)).toBe(false);
      expect(shape(here.events)).toEqual(shape(reference.events));
    });

    it(`reports the backend's refusals before any output as the same errors (${mode})`, async () => {
      for (const [input, status] of [
        ["#context-too-long", 413],
        ["#rate-limit", 429],
      ] as const) {
        const error = await failure(wire, input, streaming);
        expect(error.status).toBe(status);
        expect(error).toEqual(await failure("responses", input, streaming));
      }
    });
  }

  it("fails mid-stream the same way: the deltas so far, then a failed turn", async () => {
    const here = await ask(wire, { input: "break #fail-midstream" }, true);
    const reference = await ask("responses", { input: "break #fail-midstream" }, true);
    expect(here.collected.status).toBe("failed");
    expect(here.collected.text).toBe("[user_turns=1] You ");
    expect(here.collected.error?.status).toBe(reference.collected.error?.status);
    expect(here.collected.error?.cause).toBe(reference.collected.error?.cause);
    expect((await failure(wire, "break #fail-midstream", false)).status).toBe(500);
  });

  it("reports a dropped connection the same way", async () => {
    const here = await ask(wire, { input: "cut #drop" }, true);
    const reference = await ask("responses", { input: "cut #drop" }, true);
    expect(here.collected.status).toBe("failed");
    expect(here.collected.text).toBe("[user_turns=1] You ");
    expect(here.collected.error?.status).toBe(reference.collected.error?.status);
  });

  it("ends an interrupted call quietly, without a terminal event (the turn reads it as interrupted)", async () => {
    const { backends } = setup(wire);
    const { models } = await listProviderModels(backends);
    const route = routeModel(backends, models[0]!);
    const abort = new AbortController();
    const stream = await callModel(backends, route, { model: models[0]!.identifier, input: "take your time #slow=100" }, true, { signal: abort.signal });
    const types: string[] = [];
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === "response.output_text.delta") abort.abort("interrupted");
    }
    expect(types.filter((type) => type === "response.output_text.delta")).toHaveLength(1);
    expect(types.some((type) => type === "response.completed" || type === "response.incomplete" || type === "response.failed")).toBe(false);
  });

  it("runs file_search and finds what the Responses backend finds, with the same rag chunks", async () => {
    const params = { input: "how does the quota reset? #file-search", tools: [{ type: "file_search" as const, vector_store_ids: ["vs_docs"], max_num_results: 3 }] };
    const here = await ask(wire, params, true);
    const reference = await ask("responses", params, true);
    const results = (outcome: Outcome) => outcome.collected.response!.output.filter((item) => item.type === "file_search_call").flatMap((item) => (item.type === "file_search_call" ? (item.results ?? []) : []));
    expect(results(here).length).toBeGreaterThan(0);
    expect(results(here)).toEqual(results(reference));
    expect(here.collected.text).toBe(reference.collected.text);
    const config = setup(wire).config;
    expect(fileSearchDocuments(config, here.collected.response!.output, ["vs_docs"])).toEqual(fileSearchDocuments(config, reference.collected.response!.output, ["vs_docs"]));
    expect(here.events.filter((event) => event.type.startsWith("response.file_search_call")).map((event) => event.type)).toEqual([
      "response.file_search_call.in_progress",
      "response.file_search_call.searching",
      "response.file_search_call.completed",
    ]);
  });
});

describe("file_search for a Chat Completions backend", () => {
  it("searches once per turn: the tool loop's later model calls reuse the search, unshown, its passages still given", async () => {
    const searches: NonNullable<CallRequestOptions["searches"]> = new Map();
    const question = `how does the quota reset? ${crypto.randomUUID()}`;
    const params = { input: question, tools: [{ type: "file_search" as const, vector_store_ids: ["vs_docs"], max_num_results: 3 }] };
    const items = (outcome: Outcome) => outcome.collected.response!.output.map((item) => item.type);
    const first = await ask("chat", params, false, undefined, searches);
    const again = await ask("chat", params, true, undefined, searches);
    expect(items(first)).toEqual(["file_search_call", "message"]);
    expect(items(again)).toEqual(["message"]);
    const searched = backend.requests.filter((request) => request.path.endsWith("/search") && (request.body as { query?: string } | null)?.query === question);
    expect(searched).toHaveLength(1);
    const systems = backend.requests
      .filter((request) => request.path === "/v1/chat/completions" && JSON.stringify(request.body).includes(question))
      .map((request) => (request.body as { messages: Array<{ role: string; content: string }> }).messages[0]!);
    expect(systems).toHaveLength(2);
    for (const system of systems) expect(system).toMatchObject({ role: "system", content: expect.stringContaining("Passages found by file search") });
  });
});

describe("a chat-only server", () => {
  const chat = (extra: Record<string, unknown> = {}) => setup("chat", chatOnly.url, { serves: undefined, stream_usage: false, ...extra });

  it("answers through Chat Completions, with usage estimated and marked when the server reports none", async () => {
    for (const streaming of [true, false]) {
      const { collected } = await ask("chat", { instructions: "be brief", input: "hello there" }, streaming, chat());
      expect(collected.status).toBe("completed");
      expect(collected.text).toBe("[user_turns=1] You said: hello there");
      expect(usageWasEstimated(collected.response)).toBe(true);
      expect(collected.usage!.input).toBeGreaterThan(0);
      expect(collected.usage!.output).toBeGreaterThan(0);
    }
  });

  it("needs stream_usage false when the server refuses stream_options", async () => {
    const error = await ask("chat", { input: "hi" }, true, chat({ stream_usage: true })).catch((failed: unknown) => backendError(failed));
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).status).toBe(500);
    expect((error as ApiError).cause).toContain("stream_options");
  });

  it("refuses file_search when no provider serves vector stores", async () => {
    const error = await ask("chat", { input: "q", tools: [{ type: "file_search", vector_store_ids: ["vs_docs"] }] }, true, chat()).catch((failed: unknown) => failed);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 422, cause: expect.stringContaining("no configured provider serves vector stores") });
  });
});
