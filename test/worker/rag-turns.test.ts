// Retrieval on the turn endpoints: inline context before the model call, file_search results from
// the model's own searches, and how both reach clients (rag_chunks, referenced_documents, and
// file_search_call items in the responses format).
import { describe, expect, it } from "vitest";
import { backendRequests, call, callJson, echoedRequest, openaiClient, readSse, testConfig, wireMode } from "./helpers.ts";

const inline = testConfig({
  byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }],
  portal: { portal_url: "https://portal.example.com", offline: true },
  rag: { inline: ["docs", "okp"], tool: [] },
});
const tool = testConfig({
  byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }],
  rag: { inline: [], tool: ["docs"] },
});

type Chunk = { source: string; score: number; content: string; attributes: { document_id: string; doc_url: string } };
type Query = { conversation_id: string; response: string; rag_chunks: Chunk[]; referenced_documents: Array<{ doc_url: string; doc_title: string; source: string }>; tool_calls: Array<{ name: string }> };
const ask = (json: Record<string, unknown>, config: string) => callJson<Query>("/v1/query", { json, user: "rhea", config });

describe("inline retrieval", () => {
  it("adds the context after the question for the model, and returns chunks and documents", async () => {
    const res = await ask({ query: "#echo-request quota reset schedule for the gateway" }, inline);
    expect(res.status).toBe(200);
    const content = echoedRequest(res.body.response).input.at(-1)!.content as string | Array<{ type: string; text?: string }>;
    // A Responses backend gets the context as a second text part; a Chat Completions one as the same message's text after a line break.
    const parts = typeof content === "string" ? content.split(/\n(?=Relevant documents)/).map((text) => ({ text })) : content;
    expect(parts[0]!.text).toBe("#echo-request quota reset schedule for the gateway");
    expect(parts.at(-1)!.text).toMatch(/^Relevant documents, most relevant first:/);
    expect(res.body.rag_chunks.length).toBeGreaterThan(0);
    expect(res.body.rag_chunks[0]!.source).toBe("docs");
    expect(res.body.rag_chunks[0]!.attributes.document_id).toBe("parley-quota-reset");
    const urls = res.body.referenced_documents.map((d) => `${d.doc_url}|${d.doc_title}`);
    expect(new Set(urls).size).toBe(urls.length);
    expect(res.body.referenced_documents[0]).toMatchObject({ doc_url: "https://docs.example.com/parley/quotas", source: "docs" });
  });

  it("keeps the context out of the stored history", async () => {
    const first = await ask({ query: "quota reset" }, inline);
    const second = await ask({ query: "#echo-request again", conversation_id: first.body.conversation_id }, inline);
    const sent = echoedRequest(second.body.response) as { input: Array<{ role: string; content: unknown }> };
    expect(JSON.stringify(sent.input[0])).not.toContain("Relevant documents");
  });

  it("still searches with no_tools, and vector_store_ids restricts the stores", async () => {
    expect((await ask({ query: "quota reset", no_tools: true }, inline)).body.rag_chunks.length).toBeGreaterThan(0);
    const portalOnly = await ask({ query: "install openshift on bare metal quota", vector_store_ids: ["okp"] }, inline);
    expect(new Set(portalOnly.body.rag_chunks.map((chunk) => chunk.source))).toEqual(new Set(["okp"]));
  });

  it("sends referenced documents in the streaming end event", async () => {
    const events = (await readSse(await call("/v1/streaming_query", { json: { query: "quota reset" }, user: "rhea", config: inline }))).map(
      (e) => e.data as { event: string; data: { referenced_documents?: unknown[] } },
    );
    expect(events.at(-1)!.event).toBe("end");
    expect(events.at(-1)!.data.referenced_documents!.length).toBeGreaterThan(0);
  });

  it("rejects malformed solr filters with 422 on query and responses", async () => {
    const solr = { mode: "hybrid", filters: { type: "gt", key: "version", value: "1" } };
    expect((await ask({ query: "x", solr }, inline)).status).toBe(422);
    expect((await callJson("/v1/responses", { json: { input: "x", solr }, user: "rhea", config: inline })).status).toBe(422);
  });

  it("puts the inline chunks in a file_search_call item of the responses output, JSON and stream", async () => {
    const json = await callJson<{ output: Array<{ type: string; results?: Array<{ vector_store_id: string }> }>; output_text: string }>("/v1/responses", {
      json: { input: "quota reset schedule" },
      user: "rhea",
      config: inline,
    });
    expect(json.body.output.map((item) => item.type)).toEqual(["file_search_call", "message"]);
    expect(json.body.output[0]!.results![0]!.vector_store_id).toBe("docs");

    const openai = openaiClient({ user: "rhea", config: inline });
    const added: Array<[number, string]> = [];
    const runner = openai.responses.stream({ input: "quota reset schedule" });
    runner.on("response.output_item.added", (event) => added.push([event.output_index, event.item.type]));
    const final = await runner.finalResponse();
    expect(added).toEqual([
      [0, "file_search_call"],
      [1, "message"],
    ]);
    expect(final.output_text).toMatch(/^\[user_turns=1\] You said: quota reset schedule\n\nRelevant documents/);
  });
});

describe("tool retrieval", () => {
  it("turns the model's file_search results into chunks, documents and a tool call", async () => {
    const res = await ask({ query: "#file-search quota reset schedule" }, tool);
    expect(res.body.tool_calls.map((c) => c.name)).toEqual(["file_search"]);
    expect(res.body.rag_chunks.length).toBeGreaterThan(0);
    expect(res.body.rag_chunks.every((chunk) => chunk.source === "docs")).toBe(true);
    expect(res.body.referenced_documents[0]).toMatchObject({ doc_url: "https://docs.example.com/parley/quotas" });
  });

  it("names the stores of the model's search results by the service's ids, in every answer form (SPEC responses rule 7)", async () => {
    type Output = { output: Array<{ type: string; results?: Array<{ vector_store_id: string }> }> };
    const storesOf = (output: Output["output"]) => output.filter((item) => item.type === "file_search_call").flatMap((item) => item.results!.map((r) => r.vector_store_id));
    const json = await callJson<Output>("/v1/responses", { json: { input: "#file-search quota reset schedule" }, user: "rhea", config: tool });
    expect(new Set(storesOf(json.body.output))).toEqual(new Set(["docs"]));
    const streamed = await openaiClient({ user: "rhea", config: tool }).responses.stream({ input: "#file-search quota reset schedule" }).finalResponse();
    expect(new Set(storesOf(streamed.output as Output["output"]))).toEqual(new Set(["docs"]));
    const query = await callJson<{ tool_results: Array<{ content: string }> }>("/v1/query", { json: { query: "#file-search quota reset schedule" }, user: "rhea", config: tool });
    expect(query.body.tool_results[0]!.content).toContain('"vector_store_id":"docs"');
    expect(query.body.tool_results[0]!.content).not.toContain("vs_docs");
  });

  it("refuses a store the client names that neither the configuration nor the backend has, before the model is asked", async () => {
    const notFound = { detail: { response: "Vector store not found", cause: "Vector store with ID nope does not exist" } };
    for (const json of [{ query: "quota" }, { query: "#file-search quota" }, { query: "quota", no_tools: true }]) {
      const answer = await callJson("/v1/query", { json: { ...json, vector_store_ids: ["docs", "nope"] }, user: "rhea", config: tool });
      expect([answer.status, answer.body]).toEqual([404, notFound]);
    }
    const responses = await callJson("/v1/responses", { json: { input: "#file-search quota", tools: [{ type: "file_search", vector_store_ids: ["nope"] }] }, user: "rhea", config: tool });
    expect([responses.status, responses.body]).toEqual([404, notFound]);
    // An id that cannot name a store on the backend at all is not found either (the SDK refuses it in a path).
    for (const id of ["..", "%2e", "."]) {
      const odd = await callJson("/v1/query", { json: { query: "quota", vector_store_ids: [id] }, user: "rhea", config: tool });
      expect([odd.status, odd.body]).toEqual([404, { detail: { response: "Vector store not found", cause: `Vector store with ID ${id} does not exist` } }]);
    }
    // Each unknown id costs the backend one lookup, and only so many may be named.
    const many = Array.from({ length: 33 }, (_, index) => `unknown-${index}`);
    const tooMany = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { json: { query: "quota", vector_store_ids: [...many, ...many] }, user: "rhea", config: tool });
    expect([tooMany.status, tooMany.body.detail.cause]).toEqual([422, "vector stores: at most 32 that the configuration does not name, got 33"]);
    // The configured ids (either form), and a store made on the backend, are taken.
    const made = await callJson<{ id: string }>("/v1/vector-stores", { json: { name: "made by a client" }, user: "rhea", config: tool });
    expect((await callJson("/v1/query", { json: { query: "#file-search quota", vector_store_ids: ["docs", "vs_docs", made.body.id] }, user: "rhea", config: tool })).status).toBe(200);
  });

  it("searches the portal under chunk_filter_query, in a tool of its own; not at all when that filter cannot be expressed", async () => {
    const portal = (chunk_filter_query: string) =>
      testConfig({
        byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }],
        portal: { portal_url: "https://portal.example.com", chunk_filter_query },
        rag: { inline: [], tool: ["docs", "okp"] },
      });
    const product = { type: "eq", key: "product", value: "openshift" };
    /** The file_search tools the model was offered (Responses wire), or the searches Parley made for it (Chat Completions). */
    const searched = async (config: string, json: Record<string, unknown>, path = "/v1/query") => {
      const marker = `portal-${crypto.randomUUID()}`;
      const body = path === "/v1/query" ? { query: `#echo-request ${marker}`, ...json } : { input: `#echo-request ${marker}`, ...json };
      const answer = await callJson<{ response?: string; output_text?: string }>(path, { json: body, user: "rhea", config });
      expect(answer.status).toBe(200);
      if (wireMode() !== "chat") {
        const tools = (echoedRequest(answer.body.response ?? answer.body.output_text ?? "").tools ?? []) as Array<{ vector_store_ids: string[]; filters?: unknown }>;
        return tools.map((tool) => ({ stores: tool.vector_store_ids, filters: tool.filters ?? null }));
      }
      const searches = await backendRequests<{ query?: string; filters?: unknown }>("/search", (search) => String(search.query).includes(marker));
      return searches.map((search) => ({ stores: [search.path.split("/").at(-2)!], filters: search.body.filters ?? null }));
    };
    const filtered = await searched(portal("product:openshift"), {});
    if (wireMode() !== "chat") {
      expect(filtered).toEqual([
        { stores: ["vs_docs"], filters: null },
        { stores: ["portal-rag"], filters: product },
      ]);
      // A client's own file_search over the portal: its filter ANDed with the operator's.
      const own = { type: "eq", key: "version", value: "4.18" };
      const client = await searched(portal("product:openshift"), { tools: [{ type: "file_search", vector_store_ids: ["okp"], filters: own }] }, "/v1/responses");
      expect(client).toEqual([{ stores: ["portal-rag"], filters: { type: "and", filters: [own, product] } }]);
      // Wildcards: valid Solr that no vector store filter expresses; the portal is left out.
      expect(await searched(portal("product:*openshift*"), {})).toEqual([{ stores: ["vs_docs"], filters: null }]);
    } else {
      // Parley runs the searches itself for a Chat Completions backend, one per store.
      const byStore = (searches: Array<{ stores: string[]; filters: unknown }>) => Object.fromEntries(searches.map((search) => [search.stores[0], search.filters]));
      expect(byStore(filtered)).toEqual({ vs_docs: null, "portal-rag": product });
      expect(byStore(await searched(portal("product:*openshift*"), {}))).toEqual({ vs_docs: null });
    }
  });

  it("is not offered on /v1/infer, which asks the model with MCP tools only (UPSTREAM)", async () => {
    const { body } = await callJson<{ data: { text: string } }>("/v1/infer", { json: { question: "#echo-request quota reset" }, user: "rhea", config: tool });
    expect(echoedRequest(body.data.text).tools ?? []).toEqual([]);
  });
});

describe("tool retrieval with neither list configured (REFERENCE: every store of the backend)", () => {
  const bare = testConfig();

  /** The stores the model was offered for a question: sent in the tool (Responses), or searched by Parley (Chat Completions). */
  const offeredStores = async (config: string): Promise<string[]> => {
    const question = `#echo-request which stores ${crypto.randomUUID()}`;
    const res = await ask({ query: question }, config);
    expect(res.status).toBe(200);
    if (wireMode() !== "chat") {
      const tools = (echoedRequest(res.body.response).tools ?? []) as Array<{ type: string; vector_store_ids?: string[] }>;
      return tools.flatMap((offered) => offered.vector_store_ids ?? []);
    }
    return (await backendRequests<{ query: string }>("/search", (body) => body.query === question)).map((search) => search.path.split("/").at(-2)!);
  };

  it("offers the model every store the backend has, and searches them when it asks", async () => {
    const res = await ask({ query: "#file-search quota reset schedule" }, bare);
    expect(res.body.tool_calls.map((c) => c.name)).toEqual(["file_search"]);
    // The backend's ids: no configured store names them otherwise.
    expect(new Set(res.body.rag_chunks.map((chunk) => chunk.source))).toContain("vs_docs");
    expect(await offeredStores(bare)).toEqual(expect.arrayContaining(["vs_docs", "portal-rag"]));
  });

  it("offers a store created through the gateway at once, and no longer once it is deleted there", async () => {
    const made = await callJson<{ id: string }>("/v1/vector-stores", { json: { name: "offered at once" }, user: "rhea", config: bare });
    expect(made.status).toBe(200);
    expect(await offeredStores(bare)).toContain(made.body.id);
    expect((await callJson(`/v1/vector-stores/${made.body.id}`, { method: "DELETE", user: "rhea", config: bare })).status).toBe(200);
    expect(await offeredStores(bare)).not.toContain(made.body.id);
  });

  it("offers none when only inline stores are configured", async () => {
    const inlineOnly = testConfig({ byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }], rag: { inline: ["docs"] } });
    const res = await ask({ query: "#file-search quota reset schedule" }, inlineOnly);
    expect(res.body.tool_calls).toEqual([]);
    expect(new Set(res.body.rag_chunks.map((chunk) => chunk.source))).toEqual(new Set(["docs"]));
  });
});

describe("both strategies", () => {
  const both = testConfig({
    byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }],
    portal: { portal_url: "https://portal.example.com", offline: false },
    rag: { inline: ["okp"], tool: ["docs"] },
  });

  it("searches the inline stores and offers the tool stores in one turn", async () => {
    const res = await ask({ query: "#file-search #echo-request quota reset for openshift install" }, both);
    const sent = echoedRequest(res.body.response);
    // A Chat Completions backend has no file_search tool: Parley searches the tool stores itself, with the same results.
    expect(sent.tools).toEqual(wireMode() === "chat" ? undefined : [expect.objectContaining({ type: "file_search", vector_store_ids: ["vs_docs"] })]);
    expect(new Set(res.body.rag_chunks.map((chunk) => chunk.source))).toEqual(new Set(["okp", "docs"]));
    // offline: false — portal documents keep the chunk's reference URL.
    expect(res.body.referenced_documents.find((d) => d.source === "okp")!.doc_url).toBe("https://portal.example.com/openshift/4.18/installing/bare-metal");
  });
});
