// Responses-API requests as Chat Completions requests (worker/backends/chat-request.ts).
import { describe, expect, it } from "vitest";
import { decodeTextDataUrl, toChatRequest, type ResponsesParams } from "../../worker/backends/chat-request.ts";
import { ApiError } from "../../worker/errors.ts";

const base: ResponsesParams = { model: "m" };
const translate = (params: Partial<ResponsesParams>) => toChatRequest({ ...base, ...params } as ResponsesParams, "ollama");
const refusal = (params: Partial<ResponsesParams>): ApiError => {
  try {
    translate(params);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error("expected a refusal");
};
const dataUrl = (type: string, text: string) => `data:${type};base64,${Buffer.from(text).toString("base64")}`;

describe("input", () => {
  it("puts instructions first as the system message and a string input as the user's", () => {
    expect(translate({ instructions: "Be terse.", input: "hi" }).params.messages).toEqual([
      { role: "system", content: "Be terse." },
      { role: "user", content: "hi" },
    ]);
    expect(translate({ input: "hi" }).params.messages).toEqual([{ role: "user", content: "hi" }]);
  });

  it("joins text parts, inlines text attachments by name, and keeps history in order", () => {
    const { params, question } = translate({
      instructions: "sys",
      input: [
        { type: "message", role: "user", content: "first" },
        { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text: "answer one", annotations: [] }] },
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "second" },
            { type: "input_text", text: "Attached log (log-1.txt)" },
            { type: "input_file", filename: "log-1.txt", file_data: dataUrl("text/plain", "line 1\nline 2") },
            { type: "input_file", filename: "pod.yaml", file_data: dataUrl("application/yaml", "kind: Pod") },
          ],
        },
      ],
    });
    expect(params.messages).toEqual([
      { role: "system", content: "sys" },
      { role: "user", content: "first" },
      { role: "assistant", content: "answer one" },
      { role: "user", content: "second\nAttached log (log-1.txt)\nFile log-1.txt:\nline 1\nline 2\nFile pod.yaml:\nkind: Pod" },
    ]);
    // A file search looks for the question, not the attachments.
    expect(question).toBe("second\nAttached log (log-1.txt)");
  });

  it("gathers system and developer messages into the one leading system message", () => {
    const { params } = translate({
      instructions: "base",
      input: [
        { role: "user", content: "q1" },
        { role: "developer", content: "dev note" },
        { role: "system", content: [{ type: "input_text", text: "sys note" }] },
        { role: "user", content: "q2" },
      ],
    });
    expect(params.messages).toEqual([
      { role: "system", content: "base\n\ndev note\n\nsys note" },
      { role: "user", content: "q1\n\nq2" },
    ]);
  });

  it("pairs function calls with their outputs in one assistant message, text included", () => {
    const { params } = translate({
      input: [
        { role: "user", content: "weather?" },
        { type: "function_call", call_id: "call_a", name: "weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call", call_id: "call_b", name: "time", arguments: "{}" },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking.", annotations: [] }] } as never,
        { type: "function_call_output", call_id: "call_a", output: "sunny" },
        { type: "function_call_output", call_id: "call_b", output: [{ type: "input_text", text: "noon" }] },
      ],
    });
    expect(params.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } },
          { id: "call_b", type: "function", function: { name: "time", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: "call_a", content: "sunny" },
      { role: "tool", tool_call_id: "call_b", content: "noon" },
    ]);
  });

  it("drops calls never answered and passes orphan results on as text, which chat servers would refuse", () => {
    const { params } = translate({
      input: [
        { role: "user", content: "q1 #call-tool:x" },
        { type: "function_call", call_id: "call_x", name: "x", arguments: "{}" },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "answer", annotations: [] }] } as never,
        { role: "user", content: "q2" },
        { type: "function_call_output", call_id: "call_gone", output: "late" },
      ],
    });
    expect(params.messages).toEqual([
      { role: "user", content: "q1 #call-tool:x" },
      { role: "assistant", content: "answer" },
      // The orphan result follows q2: one user message, as chat templates want roles to alternate.
      { role: "user", content: "q2\n\nResult of tool call call_gone:\nlate" },
    ]);
  });

  it("sends a question left unanswered and the next one as one user message (strict templates refuse two in a row)", () => {
    const { params } = translate({
      input: [
        { role: "user", content: "interrupted before any text" },
        { role: "user", content: "q2" },
        { role: "assistant", content: "a2" } as never,
        { role: "user", content: "q3" },
        { role: "user", content: [{ type: "input_text", text: "what is this?" }, { type: "input_image", image_url: "https://x/cat.png", detail: "low" }] },
      ],
    });
    expect(params.messages).toEqual([
      { role: "user", content: "interrupted before any text\n\nq2" },
      { role: "assistant", content: "a2" },
      {
        role: "user",
        content: [
          { type: "text", text: "q3" },
          { type: "text", text: "\n\n" },
          { type: "text", text: "what is this?" },
          { type: "image_url", image_url: { url: "https://x/cat.png", detail: "low" } },
        ],
      },
    ]);
  });

  it("leaves out items chat has no form for, and sends images as image parts", () => {
    const { params } = translate({
      input: [
        { type: "file_search_call", id: "fs_1", status: "completed", queries: ["q"], results: [] },
        { type: "reasoning", id: "rs_1", summary: [] },
        { type: "mcp_call", id: "mcp_1", server_label: "s", name: "n", arguments: "{}" } as never,
        { role: "user", content: [{ type: "input_text", text: "what is this?" }, { type: "input_image", image_url: "https://x/cat.png", detail: "low" }] },
      ],
    });
    expect(params.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image_url", image_url: { url: "https://x/cat.png", detail: "low" } }] },
    ]);
  });

  it("refuses, naming the provider, files it cannot carry", () => {
    const file = (part: Record<string, unknown>) => refusal({ input: [{ role: "user", content: [{ type: "input_file", ...part }] }] as never });
    expect(file({ filename: "a.pdf", file_data: "data:application/pdf;base64,JVBERi0=" }).cause).toMatch(/a\.pdf .*not a text attachment.*provider "ollama".*Chat Completions/);
    expect(file({ file_id: "file-1" }).status).toBe(422);
    expect(file({ file_url: "https://x/a.txt" }).status).toBe(422);
    expect(refusal({ input: [{ role: "user", content: [{ type: "input_image", file_id: "file-2", detail: "auto" }] }] as never }).status).toBe(422);
  });

  it("decodes text data URLs only", () => {
    expect(decodeTextDataUrl(dataUrl("text/plain", "héllo"))).toBe("héllo");
    expect(decodeTextDataUrl("data:application/json,%7B%7D")).toBe("{}");
    expect(decodeTextDataUrl(dataUrl("application/octet-stream", "x"))).toBeNull();
    expect(decodeTextDataUrl("data:text/plain;base64,//79")).toBeNull();
    expect(decodeTextDataUrl("https://example.com")).toBeNull();
  });
});

describe("tools and options", () => {
  const fn = { type: "function" as const, name: "lookup", description: "Looks up", parameters: { type: "object", properties: {} }, strict: null };
  const search = { type: "file_search" as const, vector_store_ids: ["vs_docs"], max_num_results: 3 };

  it("sends function tools in chat's shape and keeps file_search for the caller", () => {
    const { params, fileSearch } = translate({ input: "q", tools: [fn, { ...fn, name: "strict_one", strict: true, description: null, parameters: null }, search], parallel_tool_calls: false });
    expect(params.tools).toEqual([
      { type: "function", function: { name: "lookup", description: "Looks up", parameters: { type: "object", properties: {} } } },
      { type: "function", function: { name: "strict_one", strict: true } },
    ]);
    expect(params.tool_choice).toBeUndefined();
    expect(params.parallel_tool_calls).toBe(false);
    expect(fileSearch).toEqual([search]);
  });

  it("sends no tools, tool_choice or parallel_tool_calls when there is no function (servers refuse them alone)", () => {
    const { params } = translate({ input: "q", tools: [search], tool_choice: "required", parallel_tool_calls: true });
    expect(params).not.toHaveProperty("tools");
    expect(params).not.toHaveProperty("tool_choice");
    expect(params).not.toHaveProperty("parallel_tool_calls");
  });

  it("translates tool_choice; none and a named function also rule out the file search", () => {
    const choose = (tool_choice: ResponsesParams["tool_choice"]) => translate({ input: "q", tools: [fn, search], tool_choice });
    expect(choose("none")).toMatchObject({ params: { tool_choice: "none" }, fileSearch: [] });
    expect(choose("required")).toMatchObject({ params: { tool_choice: "required" }, fileSearch: [search] });
    expect(choose({ type: "function", name: "lookup" })).toMatchObject({ params: { tool_choice: { type: "function", function: { name: "lookup" } } }, fileSearch: [] });
    expect(choose({ type: "file_search" })).toMatchObject({ params: { tool_choice: "none" }, fileSearch: [search] });
  });

  it("narrows the tools to allowed_tools", () => {
    const two = [fn, { ...fn, name: "other" }, search];
    const only = translate({ input: "q", tools: two, tool_choice: { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "other" }] } });
    expect(only.params.tools?.map((tool) => (tool.type === "function" ? tool.function.name : ""))).toEqual(["other"]);
    expect(only.params.tool_choice).toBe("required");
    expect(only.fileSearch).toEqual([]);
    const searchOnly = translate({ input: "q", tools: two, tool_choice: { type: "allowed_tools", mode: "auto", tools: [{ type: "file_search" }] } });
    expect(searchOnly.params).not.toHaveProperty("tools");
    expect(searchOnly.fileSearch).toEqual([search]);
  });

  it("refuses tools chat backends cannot run, naming the provider", () => {
    expect(refusal({ input: "q", tools: [{ type: "web_search_preview" }] }).cause).toBe('The web_search_preview tool cannot be sent to provider "ollama", which speaks Chat Completions');
    expect(refusal({ input: "q", tools: [{ type: "mcp", server_label: "k8s", server_url: "https://mcp.example.com" }] }).cause).toContain('MCP tool of server "k8s"');
    expect(refusal({ input: "q", tools: [fn], tool_choice: { type: "mcp", server_label: "k8s" } }).status).toBe(422);
  });

  it("carries sampling, length and output format settings", () => {
    const { params } = translate({
      input: "q",
      temperature: 0.2,
      top_p: 0.9,
      max_output_tokens: 100,
      reasoning: { effort: "low" },
      text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true } },
      metadata: { a: "b" },
      store: true,
    });
    expect(params).toEqual({
      model: "m",
      messages: [{ role: "user", content: "q" }],
      temperature: 0.2,
      top_p: 0.9,
      max_tokens: 100,
      reasoning_effort: "low",
      response_format: { type: "json_schema", json_schema: { name: "answer", schema: { type: "object" }, strict: true } },
    });
    expect(translate({ input: "q", text: { format: { type: "json_object" } } }).params.response_format).toEqual({ type: "json_object" });
    expect(translate({ input: "q", text: { format: { type: "text" } } }).params).not.toHaveProperty("response_format");
  });
});
