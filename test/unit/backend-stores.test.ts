// The backend's store list behind the tool strategy's fallback (worker/rag/backend-stores.ts): kept
// per configuration for its TTL, refreshed when the gateway changed the stores, and never a reason
// for a turn to fail. Against the scripted backend, which lists stores as OpenAI does.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { LIST_TIMEOUT_MS } from "../../worker/backends/provider-models.ts";
import { buildBackends, type Backends } from "../../worker/backends/providers.ts";
import { parseConfig } from "../../worker/config/load.ts";
import { forgetListedStores, listedStores, STORE_LIST_TTL_MS } from "../../worker/rag/backend-stores.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";

let backend: ScriptedBackend;

beforeAll(async () => {
  backend = await startScriptedBackend();
});
afterAll(() => backend.close());
afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

function backendsAt(url: string): Backends {
  const parsed = parseConfig(JSON.stringify({ inference_backend: { url, max_retries: 0 } }), {});
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  const built = buildBackends(parsed.config, {});
  if (!built.ok) throw new Error(JSON.stringify(built.problems));
  return built.backends;
}

const listings = () => backend.requests.filter((request) => request.method === "GET" && request.path === "/v1/vector_stores").length;

describe("the backend's store list", () => {
  it("is listed once per TTL, and again at once after the gateway changed the stores", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    const backends = backendsAt(backend.url);
    const before = listings();
    const first = await listedStores(backends);
    expect(first).toEqual(expect.arrayContaining(["vs_docs", "portal-rag"]));
    expect(await listedStores(backends)).toEqual(first);
    expect(listings() - before).toBe(1);

    vi.advanceTimersByTime(STORE_LIST_TTL_MS - 1);
    await listedStores(backends);
    expect(listings() - before).toBe(1);
    vi.advanceTimersByTime(1);
    await listedStores(backends);
    expect(listings() - before).toBe(2);

    forgetListedStores(backends);
    await listedStores(backends);
    expect(listings() - before).toBe(3);
  });

  it("is never a listing another turn has pending, and a listing begun before a change is not kept", async () => {
    const backends = backendsAt(backend.url);
    const before = listings();
    // Two turns that find no list at once each list: neither awaits the other's request.
    const [first, second] = await Promise.all([listedStores(backends), listedStores(backends)]);
    expect(second).toEqual(first);
    expect(listings() - before).toBe(2);

    forgetListedStores(backends);
    const pending = listedStores(backends);
    forgetListedStores(backends);
    expect(await pending).toEqual(first);
    await listedStores(backends);
    expect(listings() - before).toBe(4);
    await listedStores(backends);
    expect(listings() - before).toBe(4);
  });

  it("waits for a store API that does not answer only as long as a probe, then goes on without it", async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      const backends = backendsAt(`http://127.0.0.1:${(silent.address() as AddressInfo).port}/v1`);
      const started = Date.now();
      expect(await listedStores(backends)).toBeNull();
      expect(Date.now() - started).toBeGreaterThanOrEqual(LIST_TIMEOUT_MS - 100);
      expect(Date.now() - started).toBeLessThan(LIST_TIMEOUT_MS + 3_000);
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  }, 15_000);

  it("is null, logged, when the backend has no such list or is down, and not asked again within the TTL", async () => {
    const warned = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    for (const url of [`${backend.url}/no-such-api`, "http://127.0.0.1:9/v1"]) {
      const backends = backendsAt(url);
      expect(await listedStores(backends)).toBeNull();
      expect(await listedStores(backends)).toBeNull();
    }
    expect(warned).toHaveBeenCalledTimes(2);
    expect(String(warned.mock.calls[0]![0])).toContain("could not list the stores");
  });
});
