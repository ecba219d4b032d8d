// One model call on the backend a route names, in its wire API: Responses-API parameters in,
// Responses events out, whichever wire the backend speaks. A JSON call yields the one terminal
// event that carries the whole Response. Time-outs, interrupts and error mapping stay with the
// caller (worker/turn/backend-call.ts), the same for both wires.
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { asFinalEvent, startChatCompletion, type CallRequestOptions } from "./chat-call.ts";
import type { ResponsesParams } from "./chat-request.ts";
import { vectorStoreSearcher } from "./file-search.ts";
import type { Backends, ModelRoute } from "./providers.ts";

export async function callModel(
  backends: Backends,
  route: ModelRoute,
  params: ResponsesParams,
  streaming: boolean,
  request: CallRequestOptions,
): Promise<AsyncIterable<ResponseStreamEvent>> {
  const sent = { ...params, model: route.model };
  const client = route.backend.client;
  if (route.wire === "chat") {
    const stores = backends.apis.vector_stores;
    return startChatCompletion(client, sent, streaming, request, {
      provider: route.backend.id,
      includeUsage: route.includeUsage,
      fileSearch: stores ? vectorStoreSearcher(stores) : null,
    });
  }
  if (!streaming) {
    return asFinalEvent(await client.responses.create({ ...sent, stream: false }, request));
  }
  return client.responses.create({ ...sent, stream: true }, request);
}
