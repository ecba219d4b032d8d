// The same gateway flows with `database.postgres`: records go to the real PostgreSQL server
// through @neondatabase/serverless and the WebSocket relay, from inside workerd.
import { describe, expect, it } from "vitest";
import { inject } from "vitest";
import { call, callJson, readSse, testConfig } from "./helpers.ts";

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

    const list = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v1/conversations", { user: "pg-user", config });
    expect(list.body.conversations).toEqual([expect.objectContaining({ conversation_id: id, message_count: 3, topic_summary: "Topic: pg one" })]);
    expect((await callJson(`/v1/conversations/${id}`, { user: "someone-else", config })).status).toBe(403);
    expect((await callJson(`/v2/conversations/${id}`, { method: "PUT", json: { topic_summary: "Postgres" }, user: "pg-user", config })).status).toBe(200);
    expect((await callJson<{ deleted: boolean }>(`/v1/conversations/${id}`, { method: "DELETE", user: "pg-user", config })).body.deleted).toBe(true);
    expect((await callJson("/v1/query", { json: { query: "gone?", conversation_id: id }, user: "pg-user", config })).status).toBe(404);
  });
});

describe("when the record store fails", () => {
  it("does not report an answer it could not save as a success", async () => {
    const broken = testConfig({ database: { postgres: { ...inject("postgres"), namespace: "parley_no_such_schema" } } });
    const json = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { json: { query: "unsaved" }, user: "pg-user", config: broken });
    expect(json).toEqual({ status: 500, body: { detail: { response: "Internal server error", cause: "the answer could not be saved" } } });
    const events = (await readSse(await call("/v1/streaming_query", { json: { query: "unsaved" }, user: "pg-user", config: broken }))).map(
      (e) => e.data as { event: string },
    );
    expect(events.at(-1)).toMatchObject({ event: "error", data: { status_code: 500, cause: "the answer could not be saved" } });
    expect(events.map((e) => e.event)).not.toContain("end");
    const stream = (await readSse(await call("/v1/responses", { json: { input: "unsaved", stream: true }, user: "pg-user", config: broken }))).map((e) => e.data);
    expect(stream.map((e) => (e as { type?: string }).type ?? e)).not.toContain("response.completed");
    expect(stream.at(-2)).toMatchObject({ type: "error", code: "500" });
    expect(stream.at(-1)).toBe("[DONE]");
  });
});
