/**
 * The floor: the least any gateway in this runtime has to do for each benchmarked endpoint. It
 * makes one backend call per request and hands the backend's answer back untouched (streams are
 * piped through, never parsed). No auth, no validation, no storage, no history: the gap between
 * this Worker and Parley is what Parley itself costs.
 *
 * It is written against web-standard types only, so it type-checks with tsconfig.node.json like
 * the rest of bench/; wrangler bundles it for workerd (bench/floor.wrangler.toml).
 *
 * Endpoint mapping (the backend speaks only the Responses API):
 *   POST /v1/responses        the body as received, to the backend's /v1/responses (JSON or SSE)
 *   POST /v1/query            {query} -> {model, input: query}: the backend's JSON answer
 *   POST /v1/streaming_query  {query} -> {model, input: query, stream: true}: the backend's SSE
 *   GET  /liveness            answers without a backend call (start-up probe)
 */

interface FloorEnv {
  /** Base URL of the backend including /v1, e.g. http://127.0.0.1:8321/v1 */
  BACKEND_URL: string;
  MODEL?: string;
}

const DEFAULT_MODEL = "scripted/parley-small";

async function forward(env: FloorEnv, body: string): Promise<Response> {
  const answer = await fetch(`${env.BACKEND_URL}/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
  });
  return new Response(answer.body, {
    status: answer.status,
    headers: { "content-type": answer.headers.get("content-type") ?? "application/json" },
  });
}

async function question(request: Request): Promise<string> {
  const body = (await request.json()) as { query?: unknown };
  return typeof body.query === "string" ? body.query : "";
}

export default {
  async fetch(request: Request, env: FloorEnv): Promise<Response> {
    const { pathname } = new URL(request.url);
    const model = env.MODEL ?? DEFAULT_MODEL;
    if (request.method === "GET" && pathname === "/liveness") return Response.json({ alive: true });
    if (request.method === "POST") {
      switch (pathname) {
        case "/v1/responses":
          return forward(env, await request.text());
        case "/v1/query":
          return forward(env, JSON.stringify({ model, input: await question(request) }));
        case "/v1/streaming_query":
          return forward(env, JSON.stringify({ model, input: await question(request), stream: true }));
      }
    }
    return Response.json({ detail: { response: "Not found", cause: `${request.method} ${pathname}` } }, { status: 404 });
  },
};
