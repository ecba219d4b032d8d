// The answer text a turn records and the query endpoints give, against OpenAI's output_text join.
import { describe, expect, it } from "vitest";
import { answerText, responseText } from "../../worker/turn/backend-call.ts";

type Output = Parameters<typeof answerText>[0]["output"];
const message = (...content: Array<{ type: "output_text"; text: string } | { type: "refusal"; refusal: string }>) =>
  ({ type: "message", id: "msg", role: "assistant", status: "completed", content: content.map((part) => (part.type === "output_text" ? { ...part, annotations: [] } : part)) }) as Output[number];
const text = (value: string) => ({ type: "output_text" as const, text: value });

describe("answerText", () => {
  it("trims each part and joins parts and messages with a space, where output_text runs them together", () => {
    const output: Output = [
      message(text("Let me look.\n")),
      { type: "function_call", id: "fc", call_id: "call", name: "lookup", arguments: "{}", status: "completed" } as Output[number],
      message(text("  It is 5."), text("")),
    ];
    expect(answerText({ output })).toBe("Let me look. It is 5.");
    expect(responseText({ output })).toBe("Let me look.\n  It is 5.");
  });

  it("keeps a refusal, and gives nothing for an answer without text", () => {
    expect(answerText({ output: [message({ type: "refusal", refusal: " I cannot help with that. " })] })).toBe("I cannot help with that.");
    expect(answerText({ output: [message(text("   "))] })).toBe("");
    expect(answerText({ output: [] })).toBe("");
  });
});
