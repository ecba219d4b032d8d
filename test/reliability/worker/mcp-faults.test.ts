// The MCP server misbehaving under every endpoint that runs tools (RELIABILITY.md "Dependency
// faults"): a tools/call, or every request of the server, down, answering 5xx or 429, cutting the
// connection, answering garbage or malformed SSE, stalling after its headers, slower than its
// time-out. The turn must be answered within the server's time-outs, with the failed call handed to
// the model as a failed result (or the server left out), and the conversation must go on. Runs in
// both wire projects: the tool loop differs between them. Fake: test/fakes/mcp-server.ts (/fault/...).
import { describe, expect, inject, it } from "vitest";
import { testConfig, wireMode } from "../../worker/helpers.ts";
import { figure, inBatches, scaled } from "./suite.ts";
import { TURN_ENDPOINTS, type TurnEndpoint } from "./turns.ts";

const REPEATS = scaled(1, 3);
const mcp = inject("mcp");
const MCP_TIMEOUT_S = 2;
/** A tool list and a tool call, each bounded by the server's time-out, plus the test machine's margin. */
const MCP_BOUND_MS = 2 * MCP_TIMEOUT_S * 1000 + 6_000;

describe("the MCP server", () => {
  const KINDS = ["down", "500", "503", "429", "cut", "garbage", "bad-sse", "stall", "slow"] as const;
  const serverUrl = (scope: "call" | "all" | "none", kind: string, label: string) =>
    kind === "down" ? mcp.downUrl : scope === "none" ? `${mcp.base}/s/${label}/mcp` : `${mcp.base}/${scope === "call" ? "fault" : "fault-all"}/${kind}/${label}/mcp`;
  const configFor = (url: string) => testConfig({ mcp_servers: [{ name: "faulty", url, timeout: MCP_TIMEOUT_S }] });
  const CALL = '#call-tool:echo:{"text":"tool-ok"}';

  async function mcpCase(endpoint: TurnEndpoint, scope: "call" | "all" | "none", kind: string): Promise<string[]> {
    const tag = crypto.randomUUID().slice(0, 8);
    const user = `mcp-faults-${tag}`;
    const config = configFor(serverUrl(scope, kind, `rel-${tag}`));
    const problems: string[] = [];
    // A tool call is asked for only where the tool is listed; with the whole server faulty the turn goes on without it.
    const question = scope === "all" ? `plain ${tag}` : `tool ${tag} ${CALL}`;
    const turn = await endpoint.ask(question, { conversation: null, config, user });
    if (turn.ms > MCP_BOUND_MS) problems.push(`took ${turn.ms} ms`);
    problems.push(...turn.malformed);
    const prefix = `[user_turns=1] You said: ${question}`;
    if (turn.answer === null) {
      problems.push(`failed: ${JSON.stringify(turn.error)}`);
    } else if (scope === "all") {
      if (turn.answer !== prefix) problems.push(`answered ${turn.answer.slice(0, 200)}`);
    } else {
      const outputs = /\[tool outputs: ([\s\S]*)\]$/.exec(turn.answer)?.[1];
      if (!turn.answer.startsWith(prefix) || outputs === undefined) problems.push(`answered ${turn.answer.slice(0, 200)} (no tool output handed back)`);
      else if (scope === "none" && outputs !== "tool-ok") problems.push(`the working server's call gave ${outputs}`);
      else if (scope === "call" && outputs.includes("tool-ok")) problems.push(`the faulty call gave ${outputs}`);
    }
    if (endpoint.conversational && turn.conversation) {
      const next = await endpoint.ask(`next ${tag}`, { conversation: turn.conversation, config, user });
      if (next.answer !== `[user_turns=2] You said: next ${tag}`) problems.push(`the next question was answered ${JSON.stringify(next.answer ?? next.error)}`);
    }
    return problems.map((problem) => `${endpoint.name} / MCP ${scope === "none" ? "working" : `${kind} on ${scope === "call" ? "tools/call" : "every request"}`}: ${problem}`);
  }

  it(`every endpoint that runs tools, with a tool call or the whole server misbehaving (${wireMode()} wire)`, { timeout: 600_000 }, async () => {
    const cases = Array.from({ length: REPEATS }, () =>
      TURN_ENDPOINTS.flatMap((endpoint) => [
        { endpoint, scope: "none" as const, kind: "none" },
        // A server that is down cannot list the tool either: it belongs with the whole-server faults.
        ...KINDS.filter((kind) => kind !== "down").map((kind) => ({ endpoint, scope: "call" as const, kind })),
        ...KINDS.map((kind) => ({ endpoint, scope: "all" as const, kind })),
      ]),
    ).flat();
    const results = await inBatches(cases, 10, ({ endpoint, scope, kind }) => mcpCase(endpoint, scope, kind));
    figure(`MCP server faults (${wireMode()} wire)`, cases.length, results.filter((problems) => problems.length > 0).length, `${TURN_ENDPOINTS.length} endpoints x (${KINDS.length - 1} tools/call faults + ${KINDS.length} whole-server faults + 1 working) x ${REPEATS}`);
    expect(results.flat()).toEqual([]);
  });
});
