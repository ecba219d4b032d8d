// A model call's HTTP exchange (worker/backends/model-request.ts): the request the SDK prepares,
// sent with one fetch, and the answer read by the SDK's own stream parser and error classes. Checked
// against the SDK's own calls to the same scripted backend: the same headers and body arrive, the
// same events come back, and failures are the SDK's error classes.
import OpenAI, { APIConnectionError, APIError, APIConnectionTimeoutError, APIUserAbortError, InternalServerError, RateLimitError } from "openai";
import type { Response as BackendResponse, ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postModel, streamModel } from "../../worker/backends/model-request.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";

let backend: ScriptedBackend;
let client: OpenAI;

beforeAll(async () => {
  backend = await startScriptedBackend();
  client = new OpenAI({ baseURL: backend.url, apiKey: "sk-test-key", timeout: 30_000, maxRetries: 0 });
});
afterAll(() => backend.close());

const MODEL = "scripted/parley-small";
const open = () => ({ signal: new AbortController().signal });
const body = (input: string, stream: boolean) => JSON.stringify({ model: MODEL, input, stream });
const failureOf = (promise: Promise<unknown>) => promise.then(() => null, (error: unknown) => error);

/** The last request the backend received, without what differs between any two requests. */
function lastRequest() {
  const request = backend.requests.at(-1)!;
  const { "content-length": _length, host: _host, connection: _connection, ...headers } = request.headers;
  return { path: request.path, body: request.body, headers };
}

describe("the request", () => {
  it("carries what the SDK's own call sends: its headers (the API key among them) and the body", async () => {
    await client.responses.create({ model: MODEL, input: "hello", stream: false });
    const sdk = lastRequest();
    await postModel<BackendResponse>(client, "/responses", body("hello", false), open());
    const ours = lastRequest();
    expect(ours.headers.authorization).toBe("Bearer sk-test-key");
    expect(ours.headers["x-stainless-lang"]).toBeDefined();
    expect(ours).toEqual(sdk);
    // Built once per client and path, the headers stay the same on later calls.
    await postModel<BackendResponse>(client, "/responses", body("hello", false), open());
    expect(lastRequest()).toEqual(sdk);
  });

  it("tells `sent` once it is on its way, before the backend has answered", async () => {
    const heard: string[] = [];
    const answered = postModel<BackendResponse>(client, "/responses", body("hi #late=300", false), { ...open(), sent: () => heard.push("sent") }).then(() => heard.push("answered"));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).toEqual(["sent"]);
    await answered;
    expect(heard).toEqual(["sent", "answered"]);

    // A call that never reached a backend was still handed to fetch.
    const down = new OpenAI({ baseURL: "http://127.0.0.1:9/v1", apiKey: "k", maxRetries: 0 });
    let downSent = 0;
    await failureOf(streamModel(down, "/responses", body("hi", true), { ...open(), sent: () => downSent++ }));
    expect(downSent).toBe(1);
  });
});

describe("the answer", () => {
  it("is the SDK's: the same JSON document, the same stream events", async () => {
    const sdkJson = await client.responses.create({ model: MODEL, input: "hello", stream: false });
    const ours = await postModel<BackendResponse>(client, "/responses", body("hello", false), open());
    const texts = (response: BackendResponse) => response.output.map((item) => (item.type === "message" ? item.content : item.type));
    expect(texts(ours)).toEqual(texts(sdkJson));

    const sdkEvents: ResponseStreamEvent[] = [];
    for await (const event of await client.responses.create({ model: MODEL, input: "hello", stream: true })) sdkEvents.push(event);
    const events: ResponseStreamEvent[] = [];
    for await (const event of await streamModel<ResponseStreamEvent>(client, "/responses", body("hello", true), open())) events.push(event);
    expect(events.map((event) => event.type)).toEqual(sdkEvents.map((event) => event.type));
    const deltas = (all: ResponseStreamEvent[]) => all.flatMap((event) => (event.type === "response.output_text.delta" ? [event.delta] : []));
    expect(deltas(events)).toEqual(deltas(sdkEvents));
  });

  it("fails with the SDK's error classes: status errors with the backend's error object, an error event mid-stream", async () => {
    const unavailable = await failureOf(postModel(client, "/responses", body("hi #status=503", false), open()));
    expect(unavailable).toBeInstanceOf(InternalServerError);
    expect(unavailable).toMatchObject({ status: 503, error: { message: "scripted status 503" } });
    expect(await failureOf(streamModel(client, "/responses", body("hi #rate-limit", true), open()))).toBeInstanceOf(RateLimitError);

    const stream = await streamModel<ResponseStreamEvent>(client, "/responses", body("hi #fail-midstream", true), open());
    const midstream = await failureOf((async () => { for await (const _event of stream); })());
    expect(midstream).toBeInstanceOf(APIError);
    expect(midstream).toMatchObject({ error: { message: "scripted failure" } });
  });

  it("reports a backend that is down, a time-out and an abort as the SDK does", async () => {
    const down = new OpenAI({ baseURL: "http://127.0.0.1:9/v1", apiKey: "k", maxRetries: 0 });
    expect(await failureOf(postModel(down, "/responses", body("hi", false), open()))).toBeInstanceOf(APIConnectionError);

    const late = await failureOf(postModel(client, "/responses", body("hi #late=5000", false), { signal: AbortSignal.timeout(100) }));
    expect(late).toBeInstanceOf(APIConnectionTimeoutError);
    const slowBody = await failureOf(postModel(client, "/responses", body("hi #stall-headers=5000", false), { signal: AbortSignal.timeout(100) }));
    expect(slowBody).toBeInstanceOf(APIConnectionTimeoutError);

    const stop = new AbortController();
    const aborted = failureOf(streamModel(client, "/responses", body("hi #late=5000", true), stop));
    setTimeout(() => stop.abort(), 50);
    expect(await aborted).toBeInstanceOf(APIUserAbortError);
  });

  it("stops the backend's stream when its reader stops early", async () => {
    const stream = await streamModel<ResponseStreamEvent>(client, "/responses", body("hi #slow=50", true), open());
    for await (const event of stream) if (event.type === "response.output_text.delta") break;
    expect(stream.controller.signal.aborted).toBe(true);
  });
});
