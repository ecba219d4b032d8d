// The *_other_conversations actions through the Worker: without them a user reaches only their own
// conversations; each one grants exactly its operation on other users' conversations (list, read
// and continue, update, delete), never more.
import { describe, expect, inject, it } from "vitest";
import { callJson, eventually, testConfig } from "./helpers.ts";

const tokens = inject("tokens");
const OWN = ["query", "streaming_query", "responses", "list_conversations", "get_conversation", "update_conversation", "delete_conversation"];

/** jwk-token: alice (tokens.good) is a reader; root (tokens.admin) gets the actions `others` lists. */
const config = (others: string[]) =>
  testConfig({
    authentication: {
      module: "jwk-token",
      jwk_config: {
        url: inject("jwksUrl"),
        jwt_configuration: {
          user_id_claim: "user_id",
          username_claim: "username",
          role_rules: [{ jsonpath: "$.realm_access.roles[*]", operator: "contains", value: "admin", roles: ["auditor"] }],
        },
      },
    },
    authorization: {
      access_rules: [
        { role: "*", actions: OWN },
        ...(others.length > 0 ? [{ role: "auditor", actions: others }] : []),
      ],
    },
  });

async function alicesConversation(conf: string): Promise<string> {
  const asked = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "alice's question" }, config: conf, token: tokens.good });
  expect(asked.status).toBe(200);
  return asked.body.conversation_id;
}

const listed = async (conf: string) =>
  (await callJson<{ conversations: Array<{ conversation_id: string }> }>("/v1/conversations", { config: conf, token: tokens.admin })).body.conversations.map(
    (c) => c.conversation_id,
  );

describe("other users' conversations", () => {
  it("are out of reach without the actions: not listed, 403 to read, continue, update and delete", async () => {
    const conf = config([]);
    const id = await alicesConversation(conf);
    await eventually(async () => expect(await listed(conf)).not.toContain(id));
    expect((await callJson(`/v1/conversations/${id}`, { config: conf, token: tokens.admin })).status).toBe(403);
    expect((await callJson("/v1/query", { json: { query: "mine now?", conversation_id: id }, config: conf, token: tokens.admin })).status).toBe(403);
    expect((await callJson(`/v1/conversations/${id}`, { method: "PUT", json: { topic_summary: "taken" }, config: conf, token: tokens.admin })).status).toBe(403);
    expect((await callJson(`/v1/conversations/${id}`, { method: "DELETE", config: conf, token: tokens.admin })).status).toBe(403);
    expect((await callJson(`/v1/conversations/${id}`, { config: conf, token: tokens.good })).status).toBe(200);
  });

  it("each action grants its operation only", async () => {
    const listing = config(["list_other_conversations"]);
    const id = await alicesConversation(listing);
    await eventually(async () => expect(await listed(listing)).toContain(id));
    expect((await callJson(`/v1/conversations/${id}`, { config: listing, token: tokens.admin })).status).toBe(403);

    const reading = config(["read_other_conversations"]);
    expect((await callJson(`/v1/conversations/${id}`, { config: reading, token: tokens.admin })).status).toBe(200);
    // Reading another user's conversation also lets one continue it (the original system's rule).
    expect((await callJson("/v1/query", { json: { query: "root continues", conversation_id: id }, config: reading, token: tokens.admin })).status).toBe(200);
    expect((await callJson(`/v1/conversations/${id}`, { method: "PUT", json: { topic_summary: "renamed" }, config: reading, token: tokens.admin })).status).toBe(403);

    const updating = config(["query_other_conversations"]);
    expect((await callJson(`/v1/conversations/${id}`, { method: "PUT", json: { topic_summary: "renamed" }, config: updating, token: tokens.admin })).status).toBe(200);
    expect((await callJson(`/v1/conversations/${id}`, { method: "DELETE", config: updating, token: tokens.admin })).status).toBe(403);

    const deleting = config(["delete_other_conversations"]);
    const deleted = await callJson<{ deleted: boolean }>(`/v1/conversations/${id}`, { method: "DELETE", config: deleting, token: tokens.admin });
    expect(deleted).toMatchObject({ status: 200, body: { deleted: true } });
    expect((await callJson(`/v1/conversations/${id}`, { config: deleting, token: tokens.good })).status).toBe(404);
  });
});
