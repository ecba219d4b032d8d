// The playground at / and the API docs at /docs, in a real browser (Debian's chromium driven by
// playwright-core) against the real bundle: a person asks, watches the answer stream in, continues
// the conversation, reopens it from the list, and approves and denies gated MCP tool calls; the
// docs page renders the gateway's own OpenAPI document with nothing fetched from elsewhere.
// Without chromium this file is skipped with a notice, except in CI (CI set), where it fails.
// PLAYGROUND_SCREENSHOTS=<folder> keeps a screenshot of each step.
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copySwaggerUi } from "../../config/copy-swagger-ui.ts";
import { startMcpServer, type McpFake } from "../fakes/mcp-server.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";
import { startGateway, type RunningGateway } from "./gateway.ts";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const IN_CI = Boolean(process.env.CI);
const SCREENSHOTS = process.env.PLAYGROUND_SCREENSHOTS;
const API_KEY = "playground-test-key";
const MCP_LABEL = `playground-${process.pid}`;

if (!HAVE_CHROMIUM && !IN_CI) {
  console.warn(
    `\n!!! test/system/playground.test.ts SKIPPED: no chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH).\n` +
      "!!! The playground and /docs are not tested in a browser on this machine. In CI (CI set) this is a failure.\n",
  );
}

let backend: ScriptedBackend;
let mcp: McpFake;
let gateway: RunningGateway;
let guarded: RunningGateway;
let browser: Browser;

/** Every request a page made to another origin, and every error its console reported (CSP violations among them). */
interface Watched {
  page: Page;
  foreign: string[];
  errors: string[];
}

async function open(url: string, path: string): Promise<Watched> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  const watched: Watched = { page, foreign: [], errors: [] };
  page.on("request", (request) => {
    if (!request.url().startsWith(url)) watched.foreign.push(request.url());
  });
  page.on("console", (message) => {
    if (message.type() === "error") watched.errors.push(message.text());
  });
  page.on("pageerror", (error) => watched.errors.push(String(error)));
  await page.goto(`${url}${path}`);
  return watched;
}

async function screenshot(page: Page, name: string): Promise<void> {
  if (!SCREENSHOTS) return;
  await mkdir(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

async function toolCalls(): Promise<number> {
  return ((await (await fetch(`${mcp.base}/__stats/${MCP_LABEL}`)).json()) as { call: number }).call;
}

/** Types a question and sends it with Enter, as a person would. */
async function ask(page: Page, question: string): Promise<void> {
  await page.locator("#question").fill(question);
  await page.locator("#question").press("Enter");
}

const lastAnswer = (page: Page) => page.locator(".message.assistant").last();

/**
 * Runs in the page (as a function: the page's CSP forbids evaluating strings; this file is checked
 * without the DOM's types): the text of an answer still streaming, once it has some.
 */
function streamingText(): string | null {
  const page = globalThis as unknown as { document: { querySelector(selector: string): { textContent: string | null } | null } };
  return page.document.querySelector(".message.assistant.streaming .bubble")?.textContent || null;
}

/**
 * Waits until the last answer has finished (its stream ended) and returns its first line (the
 * scripted model repeats the question, and after it the knowledge context the gateway added).
 */
async function finishedAnswer(page: Page): Promise<string> {
  await page.locator(".message.assistant.streaming").waitFor({ state: "detached", timeout: 20_000 });
  return ((await lastAnswer(page).locator(".bubble").textContent()) ?? "").split("\n")[0]!;
}

const POLL = { timeout: 15_000, interval: 50 };

if (!HAVE_CHROMIUM && IN_CI) {
  it("has a chromium to test the playground and the API docs in", () => {
    throw new Error(`no chromium at ${CHROMIUM}: CI must run the browser tests (apt-get install chromium, or set CHROMIUM_PATH)`);
  });
}

describe.skipIf(!HAVE_CHROMIUM)("the playground and the API docs in a browser", { timeout: 60_000 }, () => {
  beforeAll(async () => {
    await copySwaggerUi();
    // A little time between tokens, so that the stream is seen arriving.
    [backend, mcp] = await Promise.all([startScriptedBackend({ tokenDelayMs: 15 }), startMcpServer()]);
    const config = {
      name: "Parley playground",
      deployment_environment: "system-test",
      inference_backend: { url: backend.url },
      mcp_servers: [{ name: "gated", url: `${mcp.base}/s/${MCP_LABEL}/mcp`, require_approval: "always" }],
      byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/x" }],
      rag: { inline: ["docs"], tool: [] },
      quota_handlers: { limiters: [{ type: "user_limiter", name: "daily", initial_quota: 50_000, quota_increase: 0, period: "1 day" }] },
    };
    const auth = {
      authentication: { module: "api-key-token", api_key_config: { api_key: API_KEY } },
    };
    [gateway, guarded] = await Promise.all([
      startGateway({ config }),
      startGateway({ config: { ...config, name: "Parley with a key", ...auth } }),
    ]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await Promise.all([gateway?.stop(), guarded?.stop(), backend?.close(), mcp?.close()]);
  });

  it("asks a question and streams the answer, with its documents and the quota left; the conversation is listed", async () => {
    const { page, foreign, errors } = await open(gateway.url, "/");
    await expect.poll(() => page.locator("h1").textContent(), POLL).toBe("Parley playground");
    expect(await page.locator(".brand-meta").textContent()).toContain("system-test");
    for (const link of ["docs", "openapi.json", "v1/info", "v1/models", "readiness"]) {
      expect(await page.locator(`nav a[href="${link}"]`).count(), link).toBe(1);
    }
    await screenshot(page, "1-empty");

    await ask(page, "What is the quota reset schedule?");
    // Seen while it streams: part of the answer, not all of it yet.
    const partial = await page.waitForFunction(streamingText);
    await finishedAnswer(page);
    const final = (await lastAnswer(page).locator(".bubble").textContent()) ?? "";
    expect(final).toMatch(/^\[user_turns=1\] You said: What is the quota reset schedule\?\nRelevant documents/);
    expect(final.startsWith(String(await partial.jsonValue()))).toBe(true);
    expect(String(await partial.jsonValue()).length).toBeLessThan(final.length);

    expect(await lastAnswer(page).locator(".doc-list li").count()).toBeGreaterThan(0);
    expect(await lastAnswer(page).locator(".meta").textContent()).toMatch(/\d+ tokens in, \d+ out/);
    expect(await page.locator('#quotas .chip[data-limiter="daily"]').textContent()).toMatch(/^daily: \d+ tokens$/);
    const id = (await page.locator("#conversation-id").textContent()) ?? "";
    expect(id).toMatch(/^[0-9a-f]{48}$/);
    await page.locator(`#conversations li[data-id="${id}"]`).waitFor();
    expect(await page.locator(`#conversations li[data-id="${id}"]`).getAttribute("class")).toContain("active");
    await screenshot(page, "2-answered");

    // Without streaming (/v1/query) the answer carries the knowledge chunks themselves.
    await page.locator("#stream").uncheck();
    await ask(page, "And when is the quota reset?");
    await lastAnswer(page).locator(".chunk").first().waitFor();
    expect(await lastAnswer(page).locator(".chunk summary").first().textContent()).toMatch(/^\d\.\d{3} docs · /);
    expect(await finishedAnswer(page)).toBe("[user_turns=2] You said: And when is the quota reset?");
    await screenshot(page, "2-whole");

    expect(foreign).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("continues the conversation, starts another, and reopens the first from the list", async () => {
    const { page, errors } = await open(gateway.url, "/");
    await ask(page, "first question");
    expect(await finishedAnswer(page)).toBe("[user_turns=1] You said: first question");
    const first = (await page.locator("#conversation-id").textContent()) ?? "";
    await ask(page, "second question");
    // The history reached the model: the second turn of the same conversation.
    expect(await finishedAnswer(page)).toBe("[user_turns=2] You said: second question");
    expect(await page.locator("#conversation-id").textContent()).toBe(first);

    await page.locator("#new-conversation").click();
    expect(await page.locator(".message").count()).toBe(0);
    await ask(page, "another topic");
    expect(await finishedAnswer(page)).toBe("[user_turns=1] You said: another topic");
    const second = (await page.locator("#conversation-id").textContent()) ?? "";
    expect(second).not.toBe(first);
    await page.locator(`#conversations li[data-id="${second}"]`).waitFor();

    await page.locator(`#conversations li[data-id="${first}"] button.open`).click();
    await expect.poll(() => page.locator(".message.user .bubble").allTextContents(), POLL).toEqual(["first question", "second question"]);
    expect((await page.locator(".message.assistant .bubble").allTextContents()).map((text) => text.split("\n")[0])).toEqual([
      "[user_turns=1] You said: first question",
      "[user_turns=2] You said: second question",
    ]);
    expect(await page.locator("#conversation-id").textContent()).toBe(first);
    // And it goes on from there.
    await ask(page, "third question");
    expect(await finishedAnswer(page)).toBe("[user_turns=3] You said: third question");
    await screenshot(page, "3-continued");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("shows a gated tool call, runs it once when approved, never when denied", async () => {
    const { page, errors } = await open(gateway.url, "/");
    const before = await toolCalls();
    await ask(page, 'Please echo #call-tool:echo:{"text":"approved-in-browser"}');
    await finishedAnswer(page);
    await lastAnswer(page).locator(".approval").waitFor();
    // By its id: the answer that follows the approval becomes the last message.
    const card = page.locator(`.approval[data-approval-id="${await lastAnswer(page).locator(".approval").getAttribute("data-approval-id")}"]`);
    expect(await card.locator(".tool-name").textContent()).toBe("echo");
    expect(await card.locator(".server").textContent()).toBe("on gated");
    expect(await card.locator("pre.args").textContent()).toContain("approved-in-browser");
    expect(await toolCalls()).toBe(before);
    await screenshot(page, "4-approval-pending");

    await card.locator("button.approve").click();
    await expect.poll(() => card.locator(".approval-status").textContent(), POLL).toBe("Approved");
    // The answer that followed the approval shows the call and its result.
    const ran = lastAnswer(page).locator('.tool[data-tool="echo"]');
    await ran.waitFor();
    expect(await ran.locator(".tool-result").textContent()).toContain("approved-in-browser");
    expect(await lastAnswer(page).locator(".bubble").textContent()).toContain("[tool outputs: approved-in-browser]");
    expect(await toolCalls()).toBe(before + 1);
    await screenshot(page, "5-approved");

    await ask(page, 'Now this one #call-tool:echo:{"text":"denied-in-browser"}');
    await finishedAnswer(page);
    await lastAnswer(page).locator(".approval").waitFor();
    const second = page.locator(`.approval[data-approval-id="${await lastAnswer(page).locator(".approval").getAttribute("data-approval-id")}"]`);
    await second.locator(".reason").fill("not today");
    await second.locator("button.deny").click();
    await expect.poll(() => second.locator(".approval-status").textContent(), POLL).toBe("Denied");
    expect(await toolCalls()).toBe(before + 1);
    // Reopened from the list, the answered approvals show as answered, with no buttons.
    const id = (await page.locator("#conversation-id").textContent()) ?? "";
    await page.locator(`#conversations li[data-id="${id}"] button.open`).click();
    await expect.poll(() => page.locator(".approval").count(), POLL).toBe(2);
    expect(await page.locator(".approval button").count()).toBe(0);
    await screenshot(page, "6-reopened");
    expect(errors).toEqual([]);
    await page.close();
  });

  it("stops an answer while it streams", async () => {
    const { page, errors } = await open(gateway.url, "/");
    await ask(page, "take your time #slow=400");
    await page.locator("#stop").waitFor({ state: "visible" });
    await page.waitForFunction(streamingText);
    await page.locator("#stop").click();
    await expect.poll(() => lastAnswer(page).locator(".note").textContent(), POLL).toBe("Stopped.");
    expect(await page.locator("#stop").isHidden()).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("sends the token field as a bearer token, and says when one is needed", async () => {
    // A proxy in front of the gateway would authenticate the page itself; here the test does.
    const page = await browser.newPage();
    await page.route(`${guarded.url}/`, (route) => route.continue({ headers: { ...route.request().headers(), authorization: `Bearer ${API_KEY}` } }));
    await page.goto(`${guarded.url}/`);
    expect(await page.locator("h1").textContent()).toBe("Parley with a key");
    await expect.poll(() => page.locator("#conversations-note").textContent(), POLL).toContain("401");
    await ask(page, "without a token");
    await expect.poll(() => lastAnswer(page).locator(".error").textContent(), POLL).toContain("needs a token");

    await page.locator("#token").fill(API_KEY);
    await page.locator("#token").dispatchEvent("change");
    await ask(page, "with a token");
    expect(await finishedAnswer(page)).toBe("[user_turns=1] You said: with a token");
    await screenshot(page, "7-token");
    await page.close();
  });

  it("renders the API docs from the gateway's own document and files only", async () => {
    const { page, foreign, errors } = await open(gateway.url, "/docs");
    await page.locator(".opblock").first().waitFor({ timeout: 20_000 });
    expect(await page.locator(".opblock").count()).toBeGreaterThan(40);
    expect(await page.locator(".opblock-summary-path", { hasText: "/v1/streaming_query" }).count()).toBeGreaterThan(0);
    await screenshot(page, "8-docs");
    expect(foreign).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();

    // The package's validator as it is meant to run, in Node, reading its own schema.
    const result = await new Validator().validate((await (await fetch(`${gateway.url}/openapi.json`)).json()) as Record<string, unknown>);
    expect(result.errors ?? null).toBeNull();
  });
});
