import { describe, expect, it } from "vitest";
import { ApiError } from "../../worker/errors.ts";
import { INCLUDE_VALUES, REASONING_EFFORTS, ResponsesRequestSchema, type ResponsesRequest } from "../../worker/turn/responses-request.ts";
import { parseWith } from "../../worker/validation.ts";

type Body = Record<string, unknown>;

/** Parses the way the route does (readJson → parseWith), so causes are the ones clients see. */
function accepted(body: Body): ResponsesRequest {
  return parseWith(ResponsesRequestSchema, body);
}

function rejected(body: unknown): ApiError {
  try {
    parseWith(ResponsesRequestSchema, body);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error(`expected the request to be rejected: ${JSON.stringify(body)}`);
}

/** A 422 whose cause contains every one of `words`. */
function expectRejected(body: Body, ...words: string[]): ApiError {
  const error = rejected(body);
  expect(error.status).toBe(422);
  for (const word of words) expect(error.cause).toContain(word);
  return error;
}

const withInput = (extra: Body): Body => ({ input: "Hello", ...extra });
const withTool = (tool: Body): Body => withInput({ tools: [tool] });
const withItem = (item: Body): Body => ({ input: [item] });

describe("the request object", () => {
  it("accepts the smallest request and applies the defaults", () => {
    expect(accepted({ input: "Hello" })).toEqual({
      input: "Hello",
      store: true,
      stream: false,
      tool_choice: "auto",
      generate_topic_summary: true,
    });
  });

  it("treats null as not given, defaults included", () => {
    const body = accepted(withInput({ store: null, stream: null, tool_choice: null, generate_topic_summary: null, tools: null, instructions: null }));
    expect(body).toMatchObject({ store: true, stream: false, tool_choice: "auto", generate_topic_summary: true, tools: null, instructions: null });
  });

  it("keeps explicit values of defaulted fields", () => {
    expect(accepted(withInput({ store: false, stream: true, generate_topic_summary: false }))).toMatchObject({
      store: false,
      stream: true,
      generate_topic_summary: false,
    });
  });

  it("rejects an unknown top-level field, naming it", () => {
    const error = expectRejected(withInput({ frobnicate: 1 }), "frobnicate");
    expect(error.response).toBe("Invalid attribute value");
  });

  it("reports a missing input as a missing attribute", () => {
    const error = expectRejected({ model: "openai/gpt-4o" }, "input");
    expect(error.response).toBe("Missing required attributes");
  });

  it("rejects a body that is not an object", () => {
    expect(rejected([1, 2]).response).toBe("Invalid request format");
  });

  it("rejects wrong types, naming the field", () => {
    expectRejected(withInput({ stream: "yes" }), "stream");
    expectRejected(withInput({ model: 42 }), "model");
  });
});

describe("input", () => {
  it("accepts a string, rejects an empty one", () => {
    expect(accepted({ input: "Hi" }).input).toBe("Hi");
    expectRejected({ input: "" }, "input", "must not be empty");
  });

  it("rejects an empty array and other shapes", () => {
    expectRejected({ input: [] }, "input", "at least one item");
    expectRejected({ input: 3 }, "input", "a non-empty string or an array of input items");
    expectRejected({ input: { role: "user", content: "x" } }, "input");
  });

  it("accepts messages with and without a type (the SDKs' easy messages)", () => {
    const body = accepted({
      input: [
        { role: "user", content: "plain" },
        { type: "message", role: "developer", content: "be brief" },
        { type: "message", role: "system", content: [{ type: "input_text", text: "sys" }] },
        {
          type: "message",
          id: "msg_1",
          status: "completed",
          role: "assistant",
          content: [
            { type: "output_text", text: "answer", annotations: [], logprobs: [] },
            { type: "refusal", refusal: "no" },
          ],
        },
      ],
    });
    expect(Array.isArray(body.input) && body.input).toHaveLength(4);
  });

  it("rejects an unknown role, naming the item", () => {
    expectRejected(withItem({ role: "robot", content: "x" }), "input", "0.role");
  });

  it("rejects an unknown item type, naming it", () => {
    expectRejected(withItem({ type: "reasoning", summary: [] }), "unknown input item type", '"reasoning"');
  });

  it("rejects an unknown content part type, naming it", () => {
    expectRejected(withItem({ role: "user", content: [{ type: "input_audio" }] }), "unknown content part type", '"input_audio"');
  });

  it("rejects an unknown item status", () => {
    expectRejected(withItem({ role: "assistant", content: "x", status: "weird" }), "status");
  });

  it("passes through extra fields the SDKs add to nested objects", () => {
    const body = accepted(withItem({ role: "assistant", content: [{ type: "output_text", text: "x", annotations: [], extra: 1 }] }));
    expect(body.input).toEqual([{ role: "assistant", content: [{ type: "output_text", text: "x", annotations: [], extra: 1 }] }]);
  });

  describe("content parts", () => {
    const part = (p: Body) => withItem({ role: "user", content: [p] });

    it("input_image: needs image_url or file_id, detail defaults to auto", () => {
      const body = accepted(part({ type: "input_image", image_url: "https://example.com/cat.png" }));
      expect(body.input).toEqual([{ role: "user", content: [{ type: "input_image", image_url: "https://example.com/cat.png", detail: "auto" }] }]);
      accepted(part({ type: "input_image", file_id: "file-1", detail: "high" }));
      expectRejected(part({ type: "input_image", detail: "low" }), "image_url or file_id");
      expectRejected(part({ type: "input_image", file_id: "file-1", detail: "ultra" }), "detail");
    });

    it("input_file: needs file_id, file_data or file_url", () => {
      accepted(part({ type: "input_file", file_id: "file-1" }));
      accepted(part({ type: "input_file", filename: "a.txt", file_data: "data:text/plain;base64,aGk=" }));
      accepted(part({ type: "input_file", file_url: "https://example.com/a.pdf" }));
      expectRejected(part({ type: "input_file", filename: "a.txt" }), "file_id, file_data or file_url");
    });

    it("input_text needs text; output_text needs text; refusal needs refusal", () => {
      expectRejected(part({ type: "input_text" }), "text");
      expectRejected(part({ type: "output_text" }), "text");
      expectRejected(part({ type: "refusal" }), "refusal");
    });
  });

  describe("tool items", () => {
    it("function_call needs call_id, name, arguments", () => {
      accepted(withItem({ type: "function_call", call_id: "c1", name: "f", arguments: "{}", id: "fc_1", status: "completed" }));
      expectRejected(withItem({ type: "function_call", name: "f", arguments: "{}" }), "call_id");
    });

    it("function_call_output needs call_id and output (text or parts)", () => {
      accepted(withItem({ type: "function_call_output", call_id: "c1", output: "42" }));
      accepted(withItem({ type: "function_call_output", call_id: "c1", output: [{ type: "input_text", text: "42" }] }));
      expectRejected(withItem({ type: "function_call_output", call_id: "c1" }), "output");
    });

    it("web_search_call needs an id", () => {
      accepted(withItem({ type: "web_search_call", id: "ws_1", status: "completed", action: { type: "search", query: "q" } }));
      expectRejected(withItem({ type: "web_search_call", status: "completed" }), "id");
    });

    it("file_search_call needs id, queries, status", () => {
      accepted(withItem({ type: "file_search_call", id: "fs_1", queries: ["q"], status: "completed", results: null }));
      accepted(withItem({ type: "file_search_call", id: "fs_1", queries: ["q"], status: "searching", results: [{ text: "t" }] }));
      expectRejected(withItem({ type: "file_search_call", id: "fs_1", status: "completed" }), "queries");
    });

    it("mcp_call needs id, server_label, name, arguments", () => {
      accepted(
        withItem({ type: "mcp_call", id: "mcp_1", server_label: "s", name: "t", arguments: "{}", output: "ok", error: null, status: "completed" }),
      );
      expectRejected(withItem({ type: "mcp_call", id: "mcp_1", name: "t", arguments: "{}" }), "server_label");
    });

    it("mcp_list_tools needs id, server_label, tools", () => {
      accepted(withItem({ type: "mcp_list_tools", id: "l1", server_label: "s", tools: [{ name: "t", input_schema: {} }] }));
      expectRejected(withItem({ type: "mcp_list_tools", id: "l1", server_label: "s" }), "tools");
    });

    it("mcp_approval_request needs id, server_label, name, arguments", () => {
      accepted(withItem({ type: "mcp_approval_request", id: "a1", server_label: "s", name: "t", arguments: "{}" }));
      expectRejected(withItem({ type: "mcp_approval_request", id: "a1", server_label: "s", name: "t" }), "arguments");
    });

    it("mcp_approval_response needs approval_request_id and a boolean approve", () => {
      accepted(withItem({ type: "mcp_approval_response", approval_request_id: "a1", approve: true, reason: "fine" }));
      expectRejected(withItem({ type: "mcp_approval_response", approval_request_id: "a1", approve: "yes" }), "approve");
      expect(rejected(withItem({ type: "mcp_approval_response", approve: true })).response).toBe("Missing required attributes");
    });
  });
});

describe("conversation context", () => {
  it("accepts conversation or previous_response_id alone", () => {
    expect(accepted(withInput({ conversation: "conv_" + "a".repeat(48) })).conversation).toBe("conv_" + "a".repeat(48));
    expect(accepted(withInput({ previous_response_id: "resp_1" })).previous_response_id).toBe("resp_1");
  });

  it("takes the conversation as the openai SDK's object form {id} too, and refuses one without an id", () => {
    expect(accepted(withInput({ conversation: { id: "conv_" + "a".repeat(48) } })).conversation).toBe("conv_" + "a".repeat(48));
    expectRejected(withInput({ conversation: { id: "" } }), "conversation: id: must not be empty");
    expect(rejected(withInput({ conversation: {} })).response).toBe("Missing required attributes");
    expectRejected(withInput({ conversation: 42 }), "conversation");
  });

  it("rejects both together, naming both fields", () => {
    const error = expectRejected(withInput({ conversation: "a".repeat(48), previous_response_id: "resp_1" }), "conversation", "previous_response_id");
    expect(error.response).toBe("Invalid attribute value");
  });

  it("allows one of them to be null", () => {
    accepted(withInput({ conversation: "a".repeat(48), previous_response_id: null }));
  });

  it("refuses a moderation's id as previous_response_id, as the original does", () => {
    expectRejected(withInput({ previous_response_id: "modr_foo" }), "previous_response_id", "You cannot provide context by moderation response.");
  });
});

describe("scalar fields", () => {
  it("model: a provider/model or a bare id, not empty", () => {
    expect(accepted(withInput({ model: "openai/gpt-4o-mini" })).model).toBe("openai/gpt-4o-mini");
    expect(accepted(withInput({ model: "gpt-4o-mini" })).model).toBe("gpt-4o-mini");
    expectRejected(withInput({ model: "" }), "model");
  });

  it("include: only the six allowed values", () => {
    expect(accepted(withInput({ include: [...INCLUDE_VALUES] })).include).toEqual([...INCLUDE_VALUES]);
    expectRejected(withInput({ include: ["reasoning.encrypted_content"] }), "include.0");
  });

  it("instructions: string or null", () => {
    expect(accepted(withInput({ instructions: "Be terse." })).instructions).toBe("Be terse.");
    expectRejected(withInput({ instructions: ["not", "a", "string"] }), "instructions");
  });

  it("integers that must be at least 1", () => {
    for (const field of ["max_infer_iters", "max_output_tokens", "max_tool_calls"]) {
      expect(accepted(withInput({ [field]: 1 }))).toMatchObject({ [field]: 1 });
      expectRejected(withInput({ [field]: 0 }), field);
      expectRejected(withInput({ [field]: 2.5 }), field);
    }
  });

  it("temperature: 0.0 to 2.0", () => {
    expect(accepted(withInput({ temperature: 0 })).temperature).toBe(0);
    expect(accepted(withInput({ temperature: 2 })).temperature).toBe(2);
    expect(accepted(withInput({ temperature: 0.7 })).temperature).toBe(0.7);
    expectRejected(withInput({ temperature: 2.01 }), "temperature");
    expectRejected(withInput({ temperature: -0.1 }), "temperature");
  });

  it("top_p: 0 to 1", () => {
    accepted(withInput({ top_p: 1 }));
    expectRejected(withInput({ top_p: 1.5 }), "top_p");
  });

  it("truncation: auto or disabled", () => {
    accepted(withInput({ truncation: "disabled" }));
    expectRejected(withInput({ truncation: "sometimes" }), "truncation");
  });

  it("metadata: string to string, at most 16 pairs", () => {
    const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, "v"]));
    expect(accepted(withInput({ metadata: sixteen })).metadata).toEqual(sixteen);
    expectRejected(withInput({ metadata: { ...sixteen, k16: "v" } }), "metadata", "16");
    expectRejected(withInput({ metadata: { k: 1 } }), "metadata.k");
  });

  it("parallel_tool_calls, safety_identifier, user, stream_options", () => {
    accepted(withInput({ parallel_tool_calls: false, safety_identifier: "hash", user: "u1", stream_options: { include_obfuscation: false } }));
    expectRejected(withInput({ parallel_tool_calls: "no" }), "parallel_tool_calls");
    expectRejected(withInput({ stream_options: { include_obfuscation: "no" } }), "stream_options.include_obfuscation");
  });

  it("reasoning: the effort levels and summary modes", () => {
    for (const effort of REASONING_EFFORTS) accepted(withInput({ reasoning: { effort } }));
    accepted(withInput({ reasoning: { effort: "low", summary: "concise" } }));
    accepted(withInput({ reasoning: { summary: null } }));
    expectRejected(withInput({ reasoning: { effort: "extreme" } }), "reasoning.effort");
    expectRejected(withInput({ reasoning: { summary: "long" } }), "reasoning.summary");
  });

  it("extensions: shield_ids, solr", () => {
    expect(accepted(withInput({ shield_ids: [] })).shield_ids).toEqual([]);
    expect(accepted(withInput({ shield_ids: null })).shield_ids).toBeNull();
    expect(accepted(withInput({ solr: { mode: "semantic" } })).solr).toEqual({ mode: "semantic" });
    expectRejected(withInput({ shield_ids: "llama-guard" }), "shield_ids");
    expectRejected(withInput({ solr: "fq" }), "solr");
  });
});

describe("prompt", () => {
  it("accepts id, version and variables of every kind", () => {
    const body = accepted(
      withInput({
        prompt: {
          id: "pmpt_" + "a".repeat(48),
          version: "2",
          variables: {
            name: "Ada",
            topic: { type: "input_text", text: "engines" },
            picture: { type: "input_image", image_url: "https://example.com/a.png" },
            doc: { type: "input_file", file_id: "file-1" },
            unset: null,
          },
        },
      }),
    );
    expect(body.prompt?.variables?.picture).toEqual({ type: "input_image", image_url: "https://example.com/a.png", detail: "auto" });
  });

  it("needs an id", () => {
    expectRejected(withInput({ prompt: { version: "1" } }), "prompt.id");
  });

  it("rejects variables that are neither text nor a content part", () => {
    expectRejected(withInput({ prompt: { id: "p", variables: { n: 3 } } }), "prompt.variables.n");
    expectRejected(withInput({ prompt: { id: "p", variables: { n: { type: "output_text", text: "x" } } } }), "prompt.variables.n", "output_text");
  });
});

describe("text", () => {
  it("accepts the three format types", () => {
    accepted(withInput({ text: { format: { type: "text" } } }));
    accepted(withInput({ text: { format: { type: "json_object" }, verbosity: "low" } }));
    accepted(
      withInput({ text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true, description: "d" } } }),
    );
  });

  it("json_schema needs name and schema", () => {
    const error = expectRejected(withInput({ text: { format: { type: "json_schema" } } }), "text.format.name", "text.format.schema");
    expect(error.response).toBe("Missing required attributes");
  });

  it("rejects an unknown format type and a bad verbosity", () => {
    expectRejected(withInput({ text: { format: { type: "yaml" } } }), "unknown text format type", '"yaml"');
    expectRejected(withInput({ text: { verbosity: "chatty" } }), "text.verbosity");
  });
});

describe("tool_choice", () => {
  it("accepts the three modes", () => {
    for (const mode of ["auto", "required", "none"]) expect(accepted(withInput({ tool_choice: mode })).tool_choice).toBe(mode);
  });

  it("accepts every object form", () => {
    const forms: Body[] = [
      { type: "allowed_tools", mode: "auto", tools: [{ type: "mcp", server_label: "docs" }, { type: "function", name: "f" }] },
      { type: "allowed_tools", mode: "required", tools: [] },
      { type: "file_search" },
      { type: "web_search" },
      { type: "web_search_preview" },
      { type: "web_search_preview_2025_03_11" },
      { type: "function", name: "get_weather" },
      { type: "mcp", server_label: "docs" },
      { type: "mcp", server_label: "docs", name: "search" },
      { type: "custom", name: "grammar" },
    ];
    // A function is chosen from the request's own tools.
    const tools = [{ type: "function" as const, name: "get_weather" }];
    for (const form of forms) expect(accepted(withInput({ tool_choice: form, tools })).tool_choice).toEqual(form);
  });

  it("rejects an unknown mode and an unknown object type", () => {
    expectRejected(withInput({ tool_choice: "sometimes" }), "tool_choice");
    expectRejected(withInput({ tool_choice: { type: "telepathy" } }), "tool_choice", '"telepathy"');
  });

  it("rejects object forms missing their required fields", () => {
    expectRejected(withInput({ tool_choice: { type: "function" } }), "tool_choice", "name");
    expectRejected(withInput({ tool_choice: { type: "mcp" } }), "tool_choice", "server_label");
    expectRejected(withInput({ tool_choice: { type: "custom" } }), "tool_choice", "name");
    expectRejected(withInput({ tool_choice: { type: "allowed_tools", mode: "any", tools: [] } }), "tool_choice", "mode");
    // A field that is only missing is named as such, inside the union as anywhere else; one that is wrong is not.
    expect(rejected(withInput({ tool_choice: { type: "function" } }))).toMatchObject({ response: "Missing required attributes", cause: "tool_choice.name" });
    expect(rejected(withInput({ tool_choice: { type: "mcp" } }))).toMatchObject({ response: "Missing required attributes", cause: "tool_choice.server_label" });
    expect(rejected(withInput({ tool_choice: { type: "function", name: 3 } })).response).toBe("Invalid attribute value");
  });

  it("accepts allowed_tools filters without a type (they allow no tool)", () => {
    const form = { type: "allowed_tools", mode: "required", tools: [{ "non-existing": "tool" }, { name: "f" }] };
    expect(accepted(withInput({ tool_choice: form })).tool_choice).toEqual(form);
  });
});

describe("tools", () => {
  it("file_search: vector_store_ids required, max_num_results 1..50 defaulting to 10", () => {
    const body = accepted(withTool({ type: "file_search", vector_store_ids: ["docs"] }));
    expect(body.tools).toEqual([{ type: "file_search", vector_store_ids: ["docs"], max_num_results: 10 }]);
    accepted(withTool({ type: "file_search", vector_store_ids: ["docs"], max_num_results: 1 }));
    accepted(withTool({ type: "file_search", vector_store_ids: ["docs"], max_num_results: 50 }));
    expectRejected(withTool({ type: "file_search", vector_store_ids: ["docs"], max_num_results: 0 }), "tools.0.max_num_results");
    expectRejected(withTool({ type: "file_search", vector_store_ids: ["docs"], max_num_results: 51 }), "tools.0.max_num_results");
    expect(rejected(withTool({ type: "file_search" })).response).toBe("Missing required attributes");
    expectRejected(withTool({ type: "file_search", vector_store_ids: [] }), "tools.0.vector_store_ids");
  });

  it("file_search: filters and ranking_options", () => {
    accepted(
      withTool({
        type: "file_search",
        vector_store_ids: ["docs"],
        filters: { type: "eq", key: "product", value: "x" },
        ranking_options: { ranker: "auto", score_threshold: 0.5 },
      }),
    );
    expectRejected(
      withTool({ type: "file_search", vector_store_ids: ["docs"], ranking_options: { score_threshold: 1.5 } }),
      "tools.0.ranking_options.score_threshold",
    );
  });

  it("web_search and its variants", () => {
    for (const type of ["web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"]) {
      accepted(withTool({ type, search_context_size: "medium", user_location: { type: "approximate", country: "GB" } }));
    }
    expectRejected(withTool({ type: "web_search", search_context_size: "huge" }), "tools.0.search_context_size");
  });

  it("function: name required", () => {
    accepted(withTool({ type: "function", name: "f", description: "d", parameters: { type: "object", properties: {} }, strict: true }));
    accepted(withTool({ type: "function", name: "f", parameters: null, strict: null }));
    expectRejected(withTool({ type: "function", description: "no name" }), "tools.0.name");
    expectRejected(withTool({ type: "function", name: "f", parameters: "schema" }), "tools.0.parameters");
  });

  it("mcp: server_label and an http(s) server_url required", () => {
    accepted(
      withTool({
        type: "mcp",
        server_label: "docs",
        server_url: "http://localhost:3000/mcp",
        headers: { "X-Token": "t" },
        require_approval: "never",
        allowed_tools: ["search"],
        authorization: "token",
        server_description: "Docs",
      }),
    );
    accepted(
      withTool({
        type: "mcp",
        server_label: "docs",
        server_url: "https://mcp.example.com",
        require_approval: { always: { tool_names: ["delete"] }, never: { tool_names: ["read"] } },
        allowed_tools: { tool_names: ["read"] },
      }),
    );
    expectRejected(withTool({ type: "mcp", server_url: "https://mcp.example.com" }), "tools.0.server_label");
    expectRejected(withTool({ type: "mcp", server_label: "docs" }), "tools.0.server_url");
    expectRejected(withTool({ type: "mcp", server_label: "docs", server_url: "ftp://mcp.example.com" }), "tools.0.server_url", "http");
    expectRejected(withTool({ type: "mcp", server_label: "docs", server_url: "not a url" }), "tools.0.server_url");
    expectRejected(withTool({ type: "mcp", server_label: "d", server_url: "https://m.example.com", require_approval: "sometimes" }), "require_approval");
    expectRejected(withTool({ type: "mcp", server_label: "d", server_url: "https://m.example.com", allowed_tools: "search" }), "allowed_tools");
    expectRejected(withTool({ type: "mcp", server_label: "d", server_url: "https://m.example.com", headers: { a: 1 } }), "tools.0.headers.a");
  });

  it("rejects an unknown or missing tool type, naming it", () => {
    expectRejected(withTool({ type: "code_interpreter" }), "tools.0.type", '"code_interpreter"');
    expectRejected(withTool({ name: "f" }), "tools.0.type");
  });

  it("null and [] stay distinct (all configured tools vs none)", () => {
    expect(accepted(withInput({ tools: null })).tools).toBeNull();
    expect(accepted(withInput({ tools: [] })).tools).toEqual([]);
    expect(accepted(withInput({})).tools).toBeUndefined();
  });
});
