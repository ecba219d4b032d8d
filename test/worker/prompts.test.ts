import { describe, expect, it } from "vitest";
import { call, callJson, testConfig } from "./helpers.ts";

interface PromptResource {
  prompt_id: string;
  version: number;
  is_default: boolean;
  prompt: string;
  variables: string[];
}

interface ErrorBody {
  detail: { response: string; cause: string };
}

const config = testConfig();

async function create(prompt: string, variables?: string[]): Promise<PromptResource> {
  const { status, body } = await callJson<PromptResource>("/v1/prompts", { config, json: variables ? { prompt, variables } : { prompt } });
  expect(status).toBe(200);
  return body;
}

async function update(id: string, json: Record<string, unknown>) {
  return callJson<PromptResource & ErrorBody>(`/v1/prompts/${id}`, { config, method: "PUT", json });
}

const UNKNOWN_ID = "pmpt_" + "0".repeat(48);

describe("POST /v1/prompts", () => {
  it("creates version 1 as the default, with a pmpt_ id", async () => {
    const created = await create("Summarize {{topic}} for {{audience}}.", ["topic", "audience"]);
    expect(created.prompt_id).toMatch(/^pmpt_[0-9a-f]{48}$/);
    expect(created).toMatchObject({ version: 1, is_default: true, prompt: "Summarize {{topic}} for {{audience}}.", variables: ["topic", "audience"] });
  });

  it("accepts the trailing-slash path and omitted variables", async () => {
    const { status, body } = await callJson<PromptResource>("/v1/prompts/", { config, json: { prompt: "No placeholders." } });
    expect(status).toBe(200);
    expect(body.variables).toEqual([]);
  });

  it("gives each prompt its own id", async () => {
    const [a, b] = await Promise.all([create("a"), create("b")]);
    expect(a.prompt_id).not.toBe(b.prompt_id);
  });

  it("rejects a placeholder not listed in variables", async () => {
    const { status, body } = await callJson<ErrorBody>("/v1/prompts", { config, json: { prompt: "Hi {{name}} of {{city}}", variables: ["name"] } });
    expect(status).toBe(422);
    expect(body.detail.cause).toContain("city");
  });

  it("rejects a missing or empty prompt and unknown fields", async () => {
    const missing = await callJson<ErrorBody>("/v1/prompts", { config, json: { variables: [] } });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual({ response: "Missing required attributes", cause: "prompt" });
    expect((await callJson("/v1/prompts", { config, json: { prompt: "" } })).status).toBe(422);
    const unknown = await callJson<ErrorBody>("/v1/prompts", { config, json: { prompt: "x", title: "t" } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail.cause).toContain("title");
  });

  it("refuses a request body over 1 MiB with 413 before storing anything, whether its length is announced or not", async () => {
    // Hosted D1 holds at most 2,000,000 bytes in a row; a larger prompt failed the write with a 500.
    const marker = `too-long-${crypto.randomUUID()} `;
    const tooLarge = JSON.stringify({ prompt: marker + "a".repeat(1024 * 1024) });
    const bytes = new TextEncoder().encode(tooLarge);
    const announced = await callJson<ErrorBody>("/v1/prompts", { config, method: "POST", body: tooLarge, headers: { "Content-Type": "application/json" } });
    const streamed = await callJson<ErrorBody>("/v1/prompts", {
      config,
      method: "POST",
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < bytes.length; offset += 64 * 1024) controller.enqueue(bytes.slice(offset, offset + 64 * 1024));
          controller.close();
        },
      }),
      headers: { "Content-Type": "application/json" },
    });
    for (const { status, body } of [announced, streamed]) {
      expect(status).toBe(413);
      expect(body.detail).toEqual({ response: "Prompt is too long", cause: "The request exceeds the maximum size of 1048576 bytes." });
    }
    const listed = await callJson<{ data: PromptResource[] }>("/v1/prompts", { config });
    expect(listed.body.data.filter((prompt) => prompt.prompt.startsWith(marker))).toEqual([]);

    // Just under the limit is taken, and so is an update of that size.
    const fits = { prompt: "" };
    fits.prompt = "b".repeat(1024 * 1024 - JSON.stringify(fits).length);
    const created = await create(fits.prompt);
    expect(created.prompt).toHaveLength(fits.prompt.length);
    const replaced = await update(created.prompt_id, { prompt: "c".repeat(1024 * 1024), version: 1 });
    expect(replaced.status).toBe(413);
    expect(replaced.body.detail.response).toBe("Prompt is too long");
  });

  it("rejects a body that is not JSON", async () => {
    const { status, body } = await callJson<ErrorBody>("/v1/prompts", { config, method: "POST", body: "{nope", headers: { "Content-Type": "application/json" } });
    expect(status).toBe(422);
    expect(body.detail.response).toBe("Invalid request format");
  });
});

describe("GET /v1/prompts", () => {
  it("lists the default version of each prompt, with and without the trailing slash", async () => {
    const created = await create("Listed {{x}}", ["x"]);
    for (const path of ["/v1/prompts", "/v1/prompts/"]) {
      const { status, body } = await callJson<{ data: PromptResource[] }>(path, { config });
      expect(status).toBe(200);
      expect(body.data).toContainEqual(created);
    }
  });
});

describe("GET /v1/prompts/{prompt_id}", () => {
  it("returns the prompt", async () => {
    const created = await create("Hello {{name}}", ["name"]);
    const { status, body } = await callJson<PromptResource>(`/v1/prompts/${created.prompt_id}`, { config });
    expect(status).toBe(200);
    expect(body).toEqual(created);
  });

  it("returns a given version", async () => {
    const created = await create("v1");
    await update(created.prompt_id, { prompt: "v2", version: 1 });
    const v1 = await callJson<PromptResource>(`/v1/prompts/${created.prompt_id}?version=1`, { config });
    const v2 = await callJson<PromptResource>(`/v1/prompts/${created.prompt_id}?version=2`, { config });
    expect(v1.body).toMatchObject({ version: 1, prompt: "v1" });
    expect(v2.body).toMatchObject({ version: 2, prompt: "v2", is_default: true });
  });

  it("404s an unknown prompt, and an unknown version naming it", async () => {
    const unknown = await callJson<ErrorBody>(`/v1/prompts/${UNKNOWN_ID}`, { config });
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toEqual({ response: "Prompt not found", cause: `Prompt with ID ${UNKNOWN_ID} does not exist` });

    const created = await create("only one version");
    const version = await callJson<ErrorBody>(`/v1/prompts/${created.prompt_id}?version=7`, { config });
    expect(version.status).toBe(404);
    expect(version.body.detail).toEqual({ response: "Prompt not found", cause: `Prompt with ID ${created.prompt_id} (version 7) does not exist` });
  });

  it("400s a malformed prompt id", async () => {
    for (const id of ["pmpt_123", "prompt-1", "pmpt_" + "A".repeat(48), "pmpt_" + "a".repeat(49)]) {
      const { status, body } = await callJson<ErrorBody>(`/v1/prompts/${id}`, { config });
      expect(status).toBe(400);
      expect(body.detail).toEqual({ response: "Invalid prompt ID format", cause: `prompt id ${id} has invalid format` });
    }
  });

  it("422s a bad version query", async () => {
    const created = await create("x");
    for (const version of ["0", "-1", "two", "1.5", ""]) {
      const { status, body } = await callJson<ErrorBody>(`/v1/prompts/${created.prompt_id}?version=${version}`, { config });
      expect(status).toBe(422);
      expect(body.detail.cause).toContain("version");
    }
  });
});

describe("PUT /v1/prompts/{prompt_id}", () => {
  it("adds the next version, the new default unless set_as_default is false", async () => {
    const created = await create("Hi {{name}}", ["name"]);
    const id = created.prompt_id;

    const v2 = await update(id, { prompt: "Hello {{name}}", version: 1, set_as_default: false });
    expect(v2.status).toBe(200);
    expect(v2.body).toEqual({ prompt_id: id, version: 2, is_default: false, prompt: "Hello {{name}}", variables: ["name"] });
    expect((await callJson<PromptResource>(`/v1/prompts/${id}`, { config })).body).toMatchObject({ version: 1, is_default: true });

    const v3 = await update(id, { prompt: "Greetings {{name}} from {{place}}", version: 2, variables: ["name", "place"] });
    expect(v3.status).toBe(200);
    expect(v3.body).toEqual({ prompt_id: id, version: 3, is_default: true, prompt: "Greetings {{name}} from {{place}}", variables: ["name", "place"] });

    const current = await callJson<PromptResource>(`/v1/prompts/${id}`, { config });
    expect(current.body).toMatchObject({ version: 3, is_default: true });
    const old = await callJson<PromptResource>(`/v1/prompts/${id}?version=1`, { config });
    expect(old.body).toMatchObject({ version: 1, is_default: false });
    const listed = await callJson<{ data: PromptResource[] }>("/v1/prompts", { config });
    expect(listed.body.data.filter((p) => p.prompt_id === id)).toEqual([v3.body]);
  });

  it("400s a version that is not the latest, naming the latest", async () => {
    const created = await create("a");
    await update(created.prompt_id, { prompt: "b", version: 1 });
    await update(created.prompt_id, { prompt: "c", version: 2 });
    for (const version of [1, 2, 9]) {
      const { status, body } = await update(created.prompt_id, { prompt: "d", version });
      expect(status).toBe(400);
      expect(body.detail.response).toBe("Prompt version conflict");
      expect(body.detail.cause).toContain("latest version is 3");
    }
  });

  it("404s an unknown prompt and 400s a malformed id", async () => {
    const unknown = await update(UNKNOWN_ID, { prompt: "x", version: 1 });
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toEqual({ response: "Prompt not found", cause: `Prompt with ID ${UNKNOWN_ID} does not exist` });
    expect((await update("pmpt_bad", { prompt: "x", version: 1 })).status).toBe(400);
  });

  it("422s a bad body and a template that does not fit the variables", async () => {
    const created = await create("Hi {{name}}", ["name"]);
    const missingVersion = await update(created.prompt_id, { prompt: "x" });
    expect(missingVersion.status).toBe(422);
    expect(missingVersion.body.detail).toEqual({ response: "Missing required attributes", cause: "version" });
    expect((await update(created.prompt_id, { prompt: "x", version: 0 })).status).toBe(422);
    expect((await update(created.prompt_id, { prompt: "x", version: 1, set_as_default: "yes" })).status).toBe(422);

    // Inherited variables: {{city}} is not among them.
    const inherited = await update(created.prompt_id, { prompt: "Hi {{name}} in {{city}}", version: 1 });
    expect(inherited.status).toBe(422);
    expect(inherited.body.detail.cause).toContain("city");
    const given = await update(created.prompt_id, { prompt: "Hi {{who}}", version: 1, variables: ["name"] });
    expect(given.status).toBe(422);
    expect(given.body.detail.cause).toContain("who");
  });
});

describe("DELETE /v1/prompts/{prompt_id}", () => {
  it("deletes every version, then answers not found, always 200", async () => {
    const created = await create("doomed");
    await update(created.prompt_id, { prompt: "doomed 2", version: 1 });
    const path = `/v1/prompts/${created.prompt_id}`;

    const first = await callJson(path, { config, method: "DELETE" });
    expect(first).toEqual({
      status: 200,
      body: { prompt_id: created.prompt_id, deleted: true, response: "Prompt deleted successfully", success: true },
    });
    expect((await callJson(path, { config })).status).toBe(404);
    expect((await callJson(`${path}?version=2`, { config })).status).toBe(404);

    const again = await callJson(path, { config, method: "DELETE" });
    expect(again).toEqual({ status: 200, body: { prompt_id: created.prompt_id, deleted: false, response: "Prompt not found", success: false } });
  });

  it("answers 200 not found for a malformed id", async () => {
    const { status, body } = await callJson("/v1/prompts/not-a-prompt", { config, method: "DELETE" });
    expect(status).toBe(200);
    expect(body).toMatchObject({ prompt_id: "not-a-prompt", deleted: false, success: false });
  });
});

describe("authorization", () => {
  const readOnly = testConfig({ authorization: { access_rules: [{ role: "*", actions: ["read_prompts"] }] } });
  const nothing = testConfig({ authorization: { access_rules: [{ role: "*", actions: ["query"] }] } });

  it("read_prompts lets a user list and read but not create, update or delete", async () => {
    const created = await create("shared");
    expect((await call("/v1/prompts", { config: readOnly, user: "reader" })).status).toBe(200);
    expect((await call(`/v1/prompts/${created.prompt_id}`, { config: readOnly, user: "reader" })).status).toBe(200);

    const forbidden = {
      response: "User does not have permission to perform this action",
      cause: expect.stringContaining("manage_prompts"),
    };
    const post = await callJson<ErrorBody>("/v1/prompts", { config: readOnly, user: "reader", json: { prompt: "mine" } });
    expect(post.status).toBe(403);
    expect(post.body.detail).toEqual(forbidden);
    const put = await callJson<ErrorBody>(`/v1/prompts/${created.prompt_id}`, { config: readOnly, user: "reader", method: "PUT", json: { prompt: "x", version: 1 } });
    expect(put.status).toBe(403);
    expect(put.body.detail).toEqual(forbidden);
    const del = await callJson<ErrorBody>(`/v1/prompts/${created.prompt_id}`, { config: readOnly, user: "reader", method: "DELETE" });
    expect(del.status).toBe(403);
    expect(del.body.detail).toEqual(forbidden);
    expect((await callJson<PromptResource>(`/v1/prompts/${created.prompt_id}`, { config })).body.version).toBe(1);
  });

  it("without read_prompts a user cannot read", async () => {
    const { status, body } = await callJson<ErrorBody>("/v1/prompts", { config: nothing, user: "nobody" });
    expect(status).toBe(403);
    expect(body.detail).toEqual({ response: "User does not have permission to perform this action", cause: expect.stringContaining("read_prompts") });
  });
});
