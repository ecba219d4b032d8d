// MCP tools in the bundle a deployment runs (Miniflare, real separate requests, code generation
// forbidden as on Cloudflare): listing a server whose tools declare output schemas works (the SDK's
// default validator would need eval), and many requests at once, sharing the per-isolate tool-list
// cache, all finish (none waits on another request's MCP session).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMcpServer, type McpFake } from "../fakes/mcp-server.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";
import { startGateway, type RunningGateway } from "./gateway.ts";

const HANG_MS = 20_000;
const CONCURRENT = 12;

let backend: ScriptedBackend;
let mcp: McpFake;
let gateway: RunningGateway;

beforeAll(async () => {
  [backend, mcp] = await Promise.all([startScriptedBackend(), startMcpServer()]);
  gateway = await startGateway({
    config: {
      name: "Parley MCP system test",
      inference_backend: { url: backend.url },
      mcp_servers: [
        { name: "stateless", url: `${mcp.base}/s/system/mcp` },
        { name: "sessions", url: `${mcp.base}/stateful/system/mcp` },
        { name: "down", url: mcp.downUrl },
      ],
    },
  });
}, 120_000);

afterAll(async () => {
  await Promise.all([gateway?.stop(), backend?.close(), mcp?.close()]);
});

async function tools(): Promise<{ status: number; names: string[] }> {
  const response = await fetch(`${gateway.url}/v1/tools`, { signal: AbortSignal.timeout(HANG_MS) });
  const body = (await response.json()) as { tools: Array<{ identifier: string; toolgroup_id: string }> };
  return { status: response.status, names: body.tools.map((tool) => `${tool.toolgroup_id}/${tool.identifier}`).sort() };
}

describe("MCP tools in the deployed bundle", () => {
  it("many requests at once, on a cold tool-list cache, all answer with the reachable servers' tools", async () => {
    const answers = await Promise.all(Array.from({ length: CONCURRENT }, () => tools()));
    for (const { status, names } of answers) {
      expect(status).toBe(200);
      // Listing compiles the declared output schemas; the SDK's default validator would need eval here.
      expect(names).toContain("stateless/measure");
      expect(names).toContain("sessions/measure");
      expect(names.filter((name) => name.startsWith("down/"))).toEqual([]);
    }
  });

  it("later requests are answered from the cache as well", async () => {
    const { status, names } = await tools();
    expect(status).toBe(200);
    expect(names).toContain("sessions/echo");
  });
});
