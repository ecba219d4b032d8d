// One model call on the backend a route names, in its wire API: Responses-API parameters in,
// Responses events out, whichever wire the backend speaks. A JSON call yields the one terminal
// event that carries the whole Response. Time-outs, interrupts and error mapping stay with the
// caller (worker/turn/backend-call.ts), the same for both wires.
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { checkedEvent, checkedResponse, checkedStream } from "./answer-shapes.ts";
import { asFinalEvent, startChatCompletion } from "./chat-call.ts";
import type { ResponsesParams } from "./chat-request.ts";
import { vectorStoreSearcher } from "./file-search.ts";
import { postModel, streamModel, type CallRequestOptions } from "./model-request.ts";
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
  // POST /responses (what the SDK's responses.create sends), with the body already encoded.
  const body = responsesBody(sent, streaming);
  if (!streaming) return asFinalEvent(checkedResponse(await postModel<unknown>(client, "/responses", body, request)));
  return checkedStream(await streamModel<unknown>(client, "/responses", body, request), checkedEvent);
}

/**
 * Each input item's JSON text, kept as long as the item lives. A conversation's Durable Object
 * keeps its history's items, and every turn sends all of them again: serialized once each, a
 * turn's body costs the new items and one join, not the whole history's serialization.
 */
const itemJson = new WeakMap<object, string>();

/** The request body of a Responses call: the parameters as JSON, input items from their kept text. */
export function responsesBody(params: ResponsesParams, stream: boolean): string {
  const { input, ...rest } = params;
  if (!Array.isArray(input)) return JSON.stringify({ ...params, stream });
  const items = input.map((item: object) => {
    let text = itemJson.get(item);
    if (text === undefined) {
      text = JSON.stringify(item);
      itemJson.set(item, text);
    }
    return text;
  });
  // `rest` always holds the model, so its JSON ends in `}` after at least one member.
  return `${JSON.stringify({ ...rest, stream }).slice(0, -1)},"input":[${items.join(",")}]}`;
}
