// The behaviour every Store must have, written once and run against each backend:
// test/unit/storage-postgres.test.ts (real Postgres through the WebSocket relay) and
// test/worker/storage-d1.test.ts (D1 inside workerd).
// Tests share one database per run, so each uses its own ids; the few global queries (prompt list,
// token usage list, due quota subjects) are filtered to the test's own ids or use value ranges no
// other test touches.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { sql } from "drizzle-orm";
import { StoreConflictError, type ConversationRecord, type Store } from "../worker/storage/store.ts";

const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const unique = (prefix: string) => `${prefix}_${crypto.randomUUID().replaceAll("-", "")}`;

export function describeStoreContract(name: string, makeStore: () => Store | Promise<Store>): void {
  describe(name, () => {
    // A store per test, as the gateway opens one per request; closing it is part of the contract.
    let store: Store;
    beforeEach(async () => {
      store = await makeStore();
    });
    afterEach(async () => {
      await store.close();
    });

    const snapshot = (fields: Pick<ConversationRecord, "id" | "userId"> & Partial<ConversationRecord>): ConversationRecord => ({
      lastUsedModel: "model-a",
      lastUsedProvider: "provider-a",
      createdAt: "2025-01-01T00:00:00.000Z",
      lastMessageAt: "2025-01-01T00:00:00.000Z",
      messageCount: 1,
      topicSummary: null,
      lastResponseId: null,
      ...fields,
    });
    /** A response of an earlier release, indexed in the record store. */
    const legacyResponse = (responseId: string, conversationId: string) =>
      store.sql.query(sql`INSERT INTO responses (response_id, conversation_id, user_id, created_at) VALUES (${responseId}, ${conversationId}, ${"u1"}, ${"2025-06-01T12:30:00.000Z"})`);

    describe("conversations", () => {
      it("get returns null for an unknown id", async () => {
        expect(await store.conversations.get(unique("none"))).toBeNull();
      });

      it("a snapshot creates the record; timestamps come back as ISO 8601 UTC", async () => {
        const id = unique("conv");
        await store.conversations.upsertSnapshot(
          snapshot({ id, userId: "u1", createdAt: "2025-03-01T12:00:00+02:00", lastMessageAt: "2025-03-01T12:00:00+02:00", lastResponseId: "resp_1", topicSummary: "first" }),
        );
        expect(await store.conversations.get(id)).toEqual({
          id,
          userId: "u1",
          lastUsedModel: "model-a",
          lastUsedProvider: "provider-a",
          createdAt: "2025-03-01T10:00:00.000Z",
          lastMessageAt: "2025-03-01T10:00:00.000Z",
          messageCount: 1,
          topicSummary: "first",
          lastResponseId: "resp_1",
        });
      });

      it("a later snapshot replaces the record whole; an older one, or a repeat, changes nothing", async () => {
        const id = unique("conv");
        await store.conversations.upsertSnapshot(snapshot({ id, userId: "u1", lastResponseId: "resp_1" }));
        const second = snapshot({ id, userId: "u1", messageCount: 2, lastUsedModel: "model-b", lastMessageAt: "2025-01-02T00:00:00.000Z", topicSummary: "T" });
        await store.conversations.upsertSnapshot(second);
        await store.conversations.upsertSnapshot(second);
        expect(await store.conversations.get(id)).toEqual(second);
        await store.conversations.upsertSnapshot(snapshot({ id, userId: "u1", messageCount: 1, lastUsedModel: "stale" }));
        expect(await store.conversations.get(id)).toEqual(second);
      });

      it("a snapshot for another user's conversation is refused and changes nothing", async () => {
        const id = unique("conv");
        const original = snapshot({ id, userId: "owner" });
        await store.conversations.upsertSnapshot(original);
        await expect(store.conversations.upsertSnapshot(snapshot({ id, userId: "intruder", messageCount: 5 }))).rejects.toBeInstanceOf(StoreConflictError);
        expect(await store.conversations.get(id)).toEqual(original);
      });

      it("list returns one user's conversations (or everyone's), newest message first", async () => {
        const user = unique("user");
        const [a, b, c] = [unique("a"), unique("b"), unique("c")];
        const other = unique("other");
        await store.conversations.upsertSnapshot(snapshot({ id: a, userId: user, lastMessageAt: "2025-01-05T00:00:00Z", messageCount: 2 }));
        await store.conversations.upsertSnapshot(snapshot({ id: b, userId: user, lastMessageAt: "2025-01-03T00:00:00Z" }));
        await store.conversations.upsertSnapshot(snapshot({ id: c, userId: user, lastMessageAt: "2025-01-02T00:00:00Z" }));
        await store.conversations.upsertSnapshot(snapshot({ id: other, userId: unique("user"), lastMessageAt: "2025-01-04T00:00:00Z" }));
        const listed = await store.conversations.list(user);
        expect(listed.map((r) => r.id)).toEqual([a, b, c]);
        expect(listed[0]).toMatchObject({ messageCount: 2, lastMessageAt: "2025-01-05T00:00:00.000Z" });
        expect(await store.conversations.list(unique("nobody"))).toEqual([]);
        const everyone = (await store.conversations.list(null)).map((r) => r.id);
        for (const id of [a, b, c, other]) expect(everyone).toContain(id);
      });

      it("concurrent snapshots of one conversation leave the newest", async () => {
        const id = unique("conv");
        await Promise.all(Array.from({ length: 50 }, (_, i) => store.conversations.upsertSnapshot(snapshot({ id, userId: "u1", messageCount: i + 1 }))));
        expect((await store.conversations.get(id))?.messageCount).toBe(50);
      });

      it("delete removes the conversation with its responses and stream requests", async () => {
        const [id, other] = [unique("conv"), unique("conv")];
        await store.conversations.upsertSnapshot(snapshot({ id, userId: "u1" }));
        await store.conversations.upsertSnapshot(snapshot({ id: other, userId: "u1" }));
        const [r1, r2, r3] = [unique("resp"), unique("resp"), unique("resp")];
        await legacyResponse(r1, id);
        await legacyResponse(r2, id);
        await legacyResponse(r3, other);
        const [s1, s2] = [unique("req"), unique("req")];
        await store.streamRequests.register({ requestId: s1, conversationId: id, userId: "u1" });
        await store.streamRequests.register({ requestId: s2, conversationId: other, userId: "u1" });

        expect(await store.conversations.delete(id)).toBe(true);
        expect(await store.conversations.get(id)).toBeNull();
        expect(await store.responses.get(r1)).toBeNull();
        expect(await store.responses.get(r2)).toBeNull();
        expect(await store.streamRequests.get(s1)).toBeNull();
        expect(await store.conversations.get(other)).not.toBeNull();
        expect(await store.responses.get(r3)).not.toBeNull();
        expect(await store.streamRequests.get(s2)).not.toBeNull();
        expect(await store.conversations.delete(id)).toBe(false);
      });
    });

    describe("responses", () => {
      it("finds the conversation of a response of an earlier release", async () => {
        const responseId = unique("resp");
        const conversationId = unique("conv");
        await legacyResponse(responseId, conversationId);
        expect(await store.responses.get(responseId)).toEqual({ responseId, conversationId, userId: "u1", createdAt: "2025-06-01T12:30:00.000Z" });
        expect(await store.responses.get(unique("none"))).toBeNull();
      });
    });

    describe("streamRequests", () => {
      it("registers, finds and removes a running stream; a request id is never re-pointed", async () => {
        const requestId = unique("req");
        const conversationId = unique("conv");
        await store.streamRequests.register({ requestId, conversationId, userId: "u1" });
        await store.streamRequests.register({ requestId, conversationId: unique("conv"), userId: "u2" });
        expect(await store.streamRequests.get(requestId)).toEqual({ requestId, conversationId, userId: "u1" });
        await store.streamRequests.remove(requestId);
        expect(await store.streamRequests.get(requestId)).toBeNull();
        await store.streamRequests.remove(requestId);
      });
    });

    describe("prompts", () => {
      it("create makes version 1 the default; get without a version returns the default", async () => {
        const promptId = unique("prompt");
        const created = await store.prompts.create({ promptId, prompt: "Hello {name}", variables: ["name"] });
        expect(created).toMatchObject({ promptId, version: 1, prompt: "Hello {name}", variables: ["name"], isDefault: true });
        expect(created.createdAt).toMatch(ISO_UTC);
        expect(await store.prompts.get(promptId)).toEqual(created);
        expect(await store.prompts.get(promptId, 1)).toEqual(created);
        expect(await store.prompts.get(promptId, 2)).toBeNull();
        expect(await store.prompts.get(unique("none"))).toBeNull();
        await expect(store.prompts.create({ promptId, prompt: "again", variables: [] })).rejects.toBeInstanceOf(
          StoreConflictError,
        );
      });

      it("update adds latest+1; the default moves only with setAsDefault", async () => {
        const promptId = unique("prompt");
        await store.prompts.create({ promptId, prompt: "v1", variables: ["a", "b"] });
        const v2 = await store.prompts.update({ promptId, version: 1, prompt: "v2" });
        expect(v2).toMatchObject({ promptId, version: 2, prompt: "v2", variables: ["a", "b"], isDefault: false });
        expect((await store.prompts.get(promptId))?.version).toBe(1);

        const v3 = await store.prompts.update({ promptId, version: 2, prompt: "v3", variables: [], setAsDefault: true });
        expect(v3).toMatchObject({ version: 3, variables: [], isDefault: true });
        expect(await store.prompts.get(promptId)).toEqual(v3);
        expect(await store.prompts.get(promptId, 1)).toMatchObject({ prompt: "v1", isDefault: false });
        expect(await store.prompts.get(promptId, 2)).toMatchObject({ prompt: "v2", isDefault: false });

        const v4 = await store.prompts.update({ promptId, version: 3, prompt: "v4", setAsDefault: false });
        expect(v4).toMatchObject({ version: 4, isDefault: false });
        expect((await store.prompts.get(promptId))?.version).toBe(3);
      });

      it("update from a version that is not the latest is a conflict; an unknown prompt is not_found", async () => {
        const promptId = unique("prompt");
        await store.prompts.create({ promptId, prompt: "v1", variables: [] });
        await store.prompts.update({ promptId, version: 1, prompt: "v2" });
        expect(await store.prompts.update({ promptId, version: 1, prompt: "stale" })).toBe("version_conflict");
        expect(await store.prompts.update({ promptId, version: 7, prompt: "ahead" })).toBe("version_conflict");
        expect(await store.prompts.update({ promptId: unique("none"), version: 1, prompt: "x" })).toBe("not_found");
        expect(await store.prompts.get(promptId, 3)).toBeNull();
      });

      it("of concurrent updates from the same version exactly one wins", async () => {
        const promptId = unique("prompt");
        await store.prompts.create({ promptId, prompt: "v1", variables: [] });
        const results = await Promise.all(
          Array.from({ length: 5 }, (_, i) => store.prompts.update({ promptId, version: 1, prompt: `v2-${i}` })),
        );
        expect(results.filter((r) => typeof r === "object")).toHaveLength(1);
        expect(results.filter((r) => r === "version_conflict")).toHaveLength(4);
      });

      it("list returns the default version of each prompt", async () => {
        const [a, b] = [unique("prompt_a"), unique("prompt_b")];
        await store.prompts.create({ promptId: a, prompt: "a1", variables: [] });
        await store.prompts.create({ promptId: b, prompt: "b1", variables: [] });
        await store.prompts.update({ promptId: a, version: 1, prompt: "a2", setAsDefault: true });
        await store.prompts.update({ promptId: b, version: 1, prompt: "b2" });
        const mine = (await store.prompts.list()).filter((p) => p.promptId === a || p.promptId === b);
        expect(mine.map((p) => [p.promptId, p.version, p.prompt, p.isDefault])).toEqual([
          [a, 2, "a2", true],
          [b, 1, "b1", true],
        ]);
      });

      it("delete removes every version", async () => {
        const promptId = unique("prompt");
        await store.prompts.create({ promptId, prompt: "v1", variables: [] });
        await store.prompts.update({ promptId, version: 1, prompt: "v2", setAsDefault: true });
        expect(await store.prompts.delete(promptId)).toBe(true);
        expect(await store.prompts.get(promptId)).toBeNull();
        expect(await store.prompts.get(promptId, 1)).toBeNull();
        expect((await store.prompts.list()).some((p) => p.promptId === promptId)).toBe(false);
        expect(await store.prompts.delete(promptId)).toBe(false);
      });
    });

    describe("quotaSubjects", () => {
      // Only "due lists ..." uses reset times below 1000, so its limit check sees nothing else.
      it("register inserts once and never moves an existing reset time", async () => {
        const limiter = unique("limiter");
        await store.quotaSubjects.register({ limiter, subject: "s", nextResetAt: 2_000 });
        await store.quotaSubjects.register({ limiter, subject: "s", nextResetAt: 1_500 });
        const due = (await store.quotaSubjects.due(3_000, 1_000)).filter((q) => q.limiter === limiter);
        expect(due).toEqual([{ limiter, subject: "s", nextResetAt: 2_000 }]);
      });

      it("due lists subjects at or before now, soonest first, up to the limit", async () => {
        const limiter = unique("limiter");
        for (const [subject, nextResetAt] of [["a", 30], ["b", 10], ["c", 20], ["d", 40]] as const) {
          await store.quotaSubjects.register({ limiter, subject, nextResetAt });
        }
        const due = (await store.quotaSubjects.due(30, 1_000)).filter((q) => q.limiter === limiter);
        expect(due.map((q) => [q.subject, q.nextResetAt])).toEqual([["b", 10], ["c", 20], ["a", 30]]);
        expect((await store.quotaSubjects.due(30, 2)).map((q) => q.subject)).toEqual(["b", "c"]);
      });

      it("advance moves the reset time only from the expected value", async () => {
        const limiter = unique("limiter");
        await store.quotaSubjects.register({ limiter, subject: "s", nextResetAt: 1_000 });
        expect(await store.quotaSubjects.advance({ limiter, subject: "s", from: 999, to: 2_000 })).toBe(false);
        expect(await store.quotaSubjects.advance({ limiter, subject: "s", from: 1_000, to: 2_000 })).toBe(true);
        expect(await store.quotaSubjects.advance({ limiter, subject: "s", from: 1_000, to: 3_000 })).toBe(false);
        expect(await store.quotaSubjects.advance({ limiter: unique("none"), subject: "s", from: 1_000, to: 2_000 })).toBe(false);
        const mine = async (now: number) => (await store.quotaSubjects.due(now, 1_000)).filter((q) => q.limiter === limiter);
        expect(await mine(1_999)).toEqual([]);
        expect(await mine(2_000)).toEqual([{ limiter, subject: "s", nextResetAt: 2_000 }]);
      });

      it("of 10 concurrent advances from the same value exactly one wins", async () => {
        const limiter = unique("limiter");
        await store.quotaSubjects.register({ limiter, subject: "s", nextResetAt: 1_700_000_000 });
        const won = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            store.quotaSubjects.advance({ limiter, subject: "s", from: 1_700_000_000, to: 1_700_003_600 + i }),
          ),
        );
        expect(won.filter(Boolean)).toHaveLength(1);
        const [stored] = (await store.quotaSubjects.due(1_800_000_000, 1_000)).filter((q) => q.limiter === limiter);
        expect(stored?.nextResetAt).toBe(1_700_003_600 + won.indexOf(true));
      });
    });

    describe("tokenUsage", () => {
      const add = (turnKey: string, u: { userId: string; model: string; inputTokens: number; outputTokens: number }) =>
        store.tokenUsage.addOnce({ turnKey, provider: "p", ...u });

      it("adds each turn's tokens once, per user, provider and model", async () => {
        const userId = unique("user");
        const first = unique("turn");
        await add(first, { userId, model: "m1", inputTokens: 10, outputTokens: 1 });
        await add(first, { userId, model: "m1", inputTokens: 10, outputTokens: 1 });
        await add(unique("turn"), { userId, model: "m1", inputTokens: 5, outputTokens: 2 });
        await add(unique("turn"), { userId, model: "m0", inputTokens: 3, outputTokens: 4 });
        const listed = await store.tokenUsage.list(userId);
        expect(listed.map(({ updatedAt: _, ...rest }) => rest)).toEqual([
          { userId, provider: "p", model: "m0", inputTokens: 3, outputTokens: 4 },
          { userId, provider: "p", model: "m1", inputTokens: 15, outputTokens: 3 },
        ]);
        for (const row of listed) expect(row.updatedAt).toMatch(ISO_UTC);
        expect(await store.tokenUsage.list(unique("nobody"))).toEqual([]);
      });

      it("20 concurrent turns sum exactly, beyond 32 bits, and repeats of them add nothing", async () => {
        const userId = unique("user");
        const big = 2 ** 31;
        const keys = Array.from({ length: 20 }, () => unique("turn"));
        const all = () => Promise.all(keys.map((key, i) => add(key, { userId, model: "m", inputTokens: i + 1, outputTokens: big })));
        await all();
        await all();
        const [row] = await store.tokenUsage.list(userId);
        expect(row).toMatchObject({ inputTokens: 210, outputTokens: 20 * big });
      });

      it("list without a user returns every user's usage", async () => {
        const [u1, u2] = [unique("user"), unique("user")];
        await add(unique("turn"), { userId: u1, model: "m", inputTokens: 1, outputTokens: 1 });
        await add(unique("turn"), { userId: u2, model: "m", inputTokens: 2, outputTokens: 2 });
        const users = (await store.tokenUsage.list()).map((r) => r.userId);
        expect(users).toContain(u1);
        expect(users).toContain(u2);
      });

      it("forgets old turn keys when pruned", async () => {
        const userId = unique("user");
        const key = unique("turn");
        await add(key, { userId, model: "m", inputTokens: 1, outputTokens: 1 });
        await store.tokenUsage.pruneApplied(new Date(Date.now() + 60_000).toISOString());
        await add(key, { userId, model: "m", inputTokens: 1, outputTokens: 1 });
        expect((await store.tokenUsage.list(userId))[0]).toMatchObject({ inputTokens: 2 });
      });
    });

    describe("settings", () => {
      it("get is null until set; set overwrites", async () => {
        const key = unique("key");
        expect(await store.settings.get(key)).toBeNull();
        await store.settings.set(key, "one");
        expect(await store.settings.get(key)).toBe("one");
        await store.settings.set(key, "two");
        expect(await store.settings.get(key)).toBe("two");
      });

      it("clear removes a setting only while it holds the value the caller read", async () => {
        const key = unique("key");
        expect(await store.settings.clear(key, "one")).toBe(false);
        await store.settings.set(key, "one");
        // Another writer got there first: its value stays.
        await store.settings.set(key, "two");
        expect(await store.settings.clear(key, "one")).toBe(false);
        expect(await store.settings.get(key)).toBe("two");
        expect(await store.settings.clear(key, "two")).toBe(true);
        expect(await store.settings.get(key)).toBeNull();
      });
    });
  });
}
