// A model call through Chat Completions with the contract of a Responses call (worker/turn/
// backend-call.ts): Responses-API parameters in, the Responses events a Responses backend would
// send out. Resolves once the backend has accepted the call (failures before any output are plain
// errors, the SDK's own, mapped by the caller as for a Responses backend); the events follow.
// Errors the backend reports inside the stream are the SDK's APIError, thrown mid-iteration, as
// they are for a Responses stream.
import type OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import type { Response, ResponseOutputItem, ResponseStreamEvent } from "openai/resources/responses/responses";
import { errors } from "../errors.ts";
import { checkedChunk, checkedCompletion, checkedStream } from "./answer-shapes.ts";
import { ChatEventTranslator, estimateTokens } from "./chat-events.ts";
import { toChatRequest, type ResponsesParams } from "./chat-request.ts";
import { fileSearchCall, fileSearchContext, type FileSearcher, type FileSearchResult } from "./file-search.ts";
import { postModel, streamModel, type CallRequestOptions } from "./model-request.ts";

export interface ChatCallOptions {
  /** The provider's id, named in refusals. */
  provider: string;
  /** Ask for a usage chunk on streamed calls (stream_options.include_usage). */
  includeUsage: boolean;
  /** Serves file_search tools (vectorStoreSearcher); null: a request with one is refused (422). */
  fileSearch: FileSearcher | null;
}

export async function startChatCompletion(
  client: OpenAI,
  params: ResponsesParams,
  streaming: boolean,
  request: CallRequestOptions,
  options: ChatCallOptions,
): Promise<AsyncIterable<ResponseStreamEvent>> {
  const chat = toChatRequest(params, options.provider);
  const leading: ResponseOutputItem[] = [];
  let messages = chat.params.messages;
  if (chat.fileSearch.length > 0) {
    if (!options.fileSearch) {
      throw errors.invalidValue(`file_search cannot be served for provider "${options.provider}", which speaks Chat Completions: no configured provider serves vector stores`);
    }
    const results: FileSearchResult[] = [];
    for (const tool of chat.fileSearch) {
      // A search this turn already made (the tool loop's earlier call) informs the model again, unshown.
      const key = JSON.stringify([tool, chat.question]);
      let found = request.searches?.get(key);
      if (!found) {
        found = await options.fileSearch(tool, chat.question, request.signal);
        request.searches?.set(key, found);
        leading.push(fileSearchCall(chat.question, found));
      }
      results.push(...found);
    }
    messages = withSystemContext(messages, fileSearchContext(results));
  }
  const body = { ...chat.params, messages };
  const translator = new ChatEventTranslator(params, estimateTokens(JSON.stringify(body.messages) + JSON.stringify(body.tools ?? [])));
  if (!streaming) {
    const completion = checkedCompletion(await postModel<unknown>(client, "/chat/completions", JSON.stringify({ ...body, stream: false }), request));
    return asFinalEvent(translator.completion(completion, leading));
  }
  const streamed = { ...body, stream: true, ...(options.includeUsage ? { stream_options: { include_usage: true } } : {}) };
  const stream = await streamModel<unknown>(client, "/chat/completions", JSON.stringify(streamed), request);
  return (async function* events() {
    yield* translator.start(leading);
    for await (const chunk of checkedStream(stream, checkedChunk)) yield* translator.chunk(chunk);
    // An aborted call ends quietly in the SDK: it must not read as a finished answer.
    if (request.signal.aborted) return;
    yield* translator.end();
  })();
}

/** Search passages join the one leading system message (chat templates take a system message only first). */
function withSystemContext(messages: ChatCompletionMessageParam[], context: string | null): ChatCompletionMessageParam[] {
  if (context === null) return messages;
  const [first, ...rest] = messages;
  if (first?.role === "system" && typeof first.content === "string") return [{ role: "system", content: `${first.content}\n\n${context}` }, ...rest];
  return [{ role: "system", content: context }, ...messages];
}

/** A whole response as the one terminal event that carries it, so that one reader serves JSON calls and streams. */
export async function* asFinalEvent(response: Response): AsyncIterable<ResponseStreamEvent> {
  const type = response.status === "incomplete" ? "response.incomplete" : response.status === "failed" ? "response.failed" : "response.completed";
  yield { type, response, sequence_number: 0 } as ResponseStreamEvent;
}
