// The A2A envelope rules, task ids and the agent card, as plain functions.
import { A2AError } from "@a2a-js/sdk/server";
import { describe, expect, it, vi } from "vitest";
import { agentCard, agentUrl } from "../../worker/a2a/card.ts";
import { toA2AError } from "../../worker/a2a/errors.ts";
import { parseSendParams, parseTaskQuery } from "../../worker/a2a/params.ts";
import { contextOfTask, newTaskId } from "../../worker/a2a/task-id.ts";
import { ConfigSchema, type Config } from "../../worker/config/schema.ts";
import { ApiError, errors } from "../../worker/errors.ts";
import type { Runtime } from "../../worker/runtime.ts";

const message = { kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "hello" }] };

function invalid(run: () => unknown): A2AError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(A2AError);
    return error as A2AError;
  }
  throw new Error("expected an A2AError");
}

describe("parseSendParams", () => {
  it("reads text parts (kind or type), metadata and configuration", () => {
    const request = parseSendParams({
      message: { ...message, parts: [{ kind: "text", text: "one" }, { kind: "data", data: {} }, { type: "text", text: "two" }], contextId: "ctx", metadata: { model: "m", provider: "p" } },
      configuration: { blocking: false, historyLength: 2, acceptedOutputModes: ["text/plain"] },
      metadata: { vector_store_ids: ["docs"] },
    });
    expect(request).toMatchObject({ text: "one\ntwo", model: "m", provider: "p", vectorStoreIds: ["docs"], blocking: false, historyLength: 2 });
    expect(request.message.contextId).toBe("ctx");
    expect(parseSendParams({ message: { ...message, parts: [{ kind: "file", file: { uri: "x" } }] } }).text).toBe("");
    expect(parseSendParams({ message, configuration: null }).blocking).toBe(true);
  });

  it("rejects a contextId at params level and broken messages with -32602 naming the field", () => {
    expect(invalid(() => parseSendParams({ message, contextId: "ctx" })).message).toContain("contextId belongs inside params.message");
    const cases: Array<[unknown, string]> = [
      [{}, "message"],
      [{ message: { ...message, role: "agent" } }, "message.role"],
      [{ message: { ...message, messageId: undefined } }, "message.messageId"],
      [{ message: { ...message, parts: [{ kind: "text" }] } }, "message.parts.0.text"],
      [{ message: { ...message, parts: [{ text: "x" }] } }, "message.parts.0.kind"],
      [{ message: { ...message, metadata: { provider: "p" } } }, "Model must be specified if provider is specified"],
      [{ message, stray: 1 }, "unknown field(s): stray"],
      [{ message: { ...message, contextId: "x".repeat(257) } }, "message.contextId"],
    ];
    for (const [params, problem] of cases) {
      const error = invalid(() => parseSendParams(params));
      expect(error.code).toBe(-32602);
      expect(error.message).toContain(problem);
    }
    expect(invalid(() => parseTaskQuery({ id: "t", historyLength: -1 })).message).toContain("historyLength");
  });
});

describe("task ids", () => {
  it("carry their context, whatever its characters", () => {
    for (const contextId of ["ctx-1", "a.b/c+d=", "ünïcode ✓", "x".repeat(256)]) {
      const id = newTaskId(contextId);
      expect(id).toMatch(/^[0-9a-f-]{36}\.[A-Za-z0-9_-]+$/);
      expect(contextOfTask(id)).toBe(contextId);
    }
    for (const foreign of ["", "task-1", "not-a-uuid.Y3R4", `${crypto.randomUUID()}.`, `${crypto.randomUUID()}.!!`, `${crypto.randomUUID()}.gA`]) {
      expect(contextOfTask(foreign)).toBeNull();
    }
  });
});

describe("toA2AError", () => {
  it("keeps the gateway's words in data and hides unexpected errors", () => {
    expect(toA2AError(errors.modelNotFound("x"))).toMatchObject({ code: -32602, data: { status_code: 404, response: "Model not found" } });
    expect(toA2AError(errors.quotaExceeded("User u has no available tokens"))).toMatchObject({ code: -32603, data: { status_code: 429 } });
    const log = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const hidden = toA2AError(new Error("secret internals"));
    expect(log).toHaveBeenCalledOnce();
    log.mockRestore();
    expect(hidden.code).toBe(-32603);
    expect(hidden.message).not.toContain("secret");
    const own = A2AError.taskNotFound("t");
    expect(toA2AError(own)).toBe(own);
  });
});

describe("agent card", () => {
  const config = (extra: Record<string, unknown> = {}): Config => ConfigSchema.parse({ inference_backend: { url: "http://127.0.0.1:8321/v1" }, ...extra });
  // The card as loading leaves it: the inline one (validated with the configuration), else none.
  const runtime = (cfg: Config): Pick<Runtime, "config" | "agentCard"> => ({ config: cfg, agentCard: cfg.customization.agent_card_config ?? null });

  const LOCAL = "http://127.0.0.1:8080/.well-known/agent-card.json";

  it("derives its url from service.base_url, else the card's url, else the local address it was reached at", () => {
    expect(agentUrl(config({ service: { base_url: "https://gw.example.com/" } }), LOCAL, "https://other.example.com/a2a")).toBe("https://gw.example.com/a2a");
    expect(agentUrl(config(), LOCAL, "https://other.example.com/a2a")).toBe("https://other.example.com/a2a");
    expect(agentUrl(config(), LOCAL)).toBe("http://127.0.0.1:8080/a2a");
    // `npm run dev -- --port 18600` serves on 18600: the card says so.
    expect(agentUrl(config(), "http://127.0.0.1:18600/.well-known/agent-card.json")).toBe("http://127.0.0.1:18600/a2a");
    expect(agentUrl(config(), "http://localhost:18600/a2a")).toBe("http://localhost:18600/a2a");
    // Reached at a public name without base_url: SPEC's local address on service.port.
    expect(agentUrl(config({ service: { port: 9090 } }), "https://gw.example.com/a2a")).toBe("http://127.0.0.1:9090/a2a");
  });

  it("fills the gateway's defaults", () => {
    const inline = config({ customization: { agent_card_config: { description: "inline", capabilities: { streaming: false, pushNotifications: true } } } });
    const card = agentCard(runtime(inline), LOCAL);
    expect(card).toMatchObject({
      name: "Parley",
      description: "inline",
      protocolVersion: "0.3.0",
      preferredTransport: "JSONRPC",
      capabilities: { streaming: true, pushNotifications: false },
      skills: [],
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
    });
  });

  it("is a 404 when not configured", () => {
    const missing = (() => {
      try {
        agentCard(runtime(config()), LOCAL);
      } catch (error) {
        return error;
      }
    })() as ApiError;
    expect(missing).toBeInstanceOf(ApiError);
    expect(missing.status).toBe(404);
  });
});
