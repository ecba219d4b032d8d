// The body of a Responses call as model-call.ts builds it: the same JSON the SDK would send for the
// parameters, whatever the input, with each item's text kept across calls.
import { describe, expect, it } from "vitest";
import { responsesBody } from "../../worker/backends/model-call.ts";
import type { ResponsesParams } from "../../worker/backends/chat-request.ts";

const base: ResponsesParams = { model: "scripted/parley-small", instructions: "Be brief.", store: false };

describe("responsesBody", () => {
  it("is the parameters' JSON with the stream flag, for items and for a text input", () => {
    const items = [
      { type: "message", role: "user", content: "first \u00e9 \ud83d\ude00" },
      { type: "message", role: "assistant", content: "answer with \"quotes\" and \\ back" },
      { type: "function_call_output", call_id: "c1", output: "{\"a\":1}" },
    ] as ResponsesParams["input"];
    for (const stream of [true, false]) {
      expect(JSON.parse(responsesBody({ ...base, input: items }, stream))).toEqual({ ...base, input: items, stream });
      expect(JSON.parse(responsesBody({ ...base, input: "just text" }, stream))).toEqual({ ...base, input: "just text", stream });
      expect(JSON.parse(responsesBody({ ...base, input: [] }, stream))).toEqual({ ...base, input: [], stream });
    }
  });

  it("sends a history again as it was, with the new items after it", () => {
    const history = [{ type: "message", role: "user", content: "one" }, { type: "message", role: "assistant", content: "two" }] as NonNullable<Exclude<ResponsesParams["input"], string>>;
    const first = responsesBody({ ...base, input: history }, false);
    const next = [...history, { type: "message", role: "user", content: "three" }] as typeof history;
    expect(JSON.parse(responsesBody({ ...base, input: next }, false)).input).toEqual(next);
    expect(responsesBody({ ...base, input: history }, false)).toBe(first);
  });
});
