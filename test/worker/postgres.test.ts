// The same gateway flows with `database.postgres`: records go to the test PostgreSQL (the server,
// else an embedded PGlite) through @neondatabase/serverless and the WebSocket relay, from inside workerd.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { inject } from "vitest";
import { loadRuntime } from "../../worker/runtime.ts";
import { dataObjectsStore } from "../../worker/storage/data-objects-store.ts";
import { openStore } from "../../worker/storage/open-store.ts";
import { storedTranscripts } from "./data-helpers.ts";
import { call, callJson, eventually, readSse, testConfig } from "./helpers.ts";

const config = testConfig({ database: { postgres: inject("postgres") } });

describe("with Postgres as the record store", () => {
  it("keeps conversations across turns, lists, updates and deletes them", async () => {
    const first = await callJson<{ conversation_id: string; response: string }>("/v1/query", { json: { query: "pg one" }, user: "pg-user", config });
    expect(first.status).toBe(200);
    const id = first.body.conversation_id;
    const second = await callJson<{ response: string }>("/v1/query", { json: { query: "pg two", conversation_id: id }, user: "pg-user", config });
    expect(second.body.response).toBe("[user_turns=2] You said: pg two");

    const stream = await call("/v1/streaming_query", { json: { query: "pg three", conversation_id: id }, user: "pg-user", config });
    const events = (await readSse(stream)).map((e) => (e.data as { event: string }).event);
    expect(events.at(-1)).toBe("end");

    await eventually(async () => {
      const list = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v1/conversations", { user: "pg-user", config });
      expect(list.body.conversations).toEqual([expect.objectContaining({ conversation_id: id, message_count: 3, topic_summary: "Topic: pg one" })]);
    });
    expect((await callJson(`/v1/conversations/${id}`, { user: "someone-else", config })).status).toBe(403);
    expect((await callJson(`/v2/conversations/${id}`, { method: "PUT", json: { topic_summary: "Postgres" }, user: "pg-user", config })).status).toBe(200);
    expect((await callJson<{ deleted: boolean }>(`/v1/conversations/${id}`, { method: "DELETE", user: "pg-user", config })).body.deleted).toBe(true);
    expect((await callJson("/v1/query", { json: { query: "gone?", conversation_id: id }, user: "pg-user", config })).status).toBe(404);
  });
});

describe("text with U+0000, which Postgres text cannot hold", () => {
  type Listed = { conversations: Array<Record<string, unknown>> };
  const TRANSCRIPTS = `/tmp/data/nul-${crypto.randomUUID()}`;
  const withTranscripts = testConfig({
    database: { postgres: inject("postgres") },
    user_data_collection: { transcripts_enabled: true, transcripts_storage: TRANSCRIPTS },
  });

  it("is stored with U+FFFD in its place: the conversation, later changes to it, and the rest of its deliveries arrive", async () => {
    const user = "pg-nul-text";
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "nul \u0000 here" }, user, config: withTranscripts });
    expect(first.status).toBe(200);
    const id = first.body.conversation_id;
    await eventually(async () => {
      const list = await callJson<Listed>("/v1/conversations", { user, config });
      expect(list.body.conversations).toEqual([expect.objectContaining({ conversation_id: id, topic_summary: "Topic: nul \ufffd here" })]);
    });
    // The transcript delivered after the record went to the index in Postgres too.
    const [key, ...more] = [...(await storedTranscripts(TRANSCRIPTS, user, id)).keys()];
    expect(more).toEqual([]);
    const loaded = await loadRuntime({ ...env, PARLEY_CONFIG: config });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    const store = openStore(env, loaded.runtime.config.database);
    try {
      expect(await dataObjectsStore(store.sql).get(key!)).toMatchObject({ kind: "transcript", sentAt: null });
    } finally {
      await store.close();
    }

    const renamed = await callJson<{ message: string }>(`/v1/conversations/${id}`, { method: "PUT", json: { topic_summary: "renamed \u0000" }, user, config });
    expect(renamed.status).toBe(200);
    expect((await callJson("/v1/query", { json: { query: "again", conversation_id: id }, user, config })).status).toBe(200);
    await eventually(async () => {
      const list = await callJson<Listed>("/v1/conversations", { user, config });
      expect(list.body.conversations).toEqual([expect.objectContaining({ conversation_id: id, topic_summary: "renamed \ufffd", message_count: 2 })]);
    });
  });

  it("in a user id: the user's own list finds their conversations", async () => {
    const user = `pg\u0000nul-${crypto.randomUUID()}`;
    const answer = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "whose?" }, user, config });
    expect(answer.status).toBe(200);
    await eventually(async () => {
      const list = await callJson<Listed>("/v1/conversations", { user, config });
      expect(list.status).toBe(200);
      expect(list.body.conversations).toEqual([expect.objectContaining({ conversation_id: answer.body.conversation_id })]);
    });
  });

  it("in a JSON column (a prompt's variables)", async () => {
    const created = await callJson<{ prompt_id: string; variables: string[] }>("/v1/prompts", { json: { prompt: "Hello", variables: ["a\u0000b"] }, config });
    expect(created.status).toBe(200);
    expect(created.body.variables).toEqual(["a\ufffdb"]);
    expect((await callJson<{ variables: string[] }>(`/v1/prompts/${created.body.prompt_id}`, { config })).body.variables).toEqual(["a\ufffdb"]);
  });
});

describe("when the record store fails", () => {
  it("still answers and keeps the turn, which the conversation's Durable Object holds", async () => {
    // The answer path never waits for the record store: its writes follow from the conversation's
    // outbox, retried until they succeed.
    const broken = testConfig({ database: { postgres: { ...inject("postgres"), namespace: "parley_no_such_schema" } } });
    const answer = await callJson<{ conversation_id: string; response: string }>("/v1/query", { json: { query: "kept" }, user: "pg-user", config: broken });
    expect(answer.status).toBe(200);
    const id = answer.body.conversation_id;
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "still kept", conversation_id: id }, user: "pg-user", config: broken });
    expect(next.body.response).toBe("[user_turns=2] You said: still kept");
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${id}`, { user: "pg-user", config: broken });
    expect(detail.body.chat_history).toHaveLength(2);
    // What needs the record store says so, naming the store the configuration chose.
    expect(await callJson("/v1/conversations", { user: "pg-user", config: broken })).toEqual({
      status: 500,
      body: { detail: { response: "Database query failed", cause: "Failed to query the database (database.postgres)" } },
    });
  });
});
