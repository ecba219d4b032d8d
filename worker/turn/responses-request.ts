// The body of POST /v1/responses (SPEC "Responses request"). The request object itself is strict,
// so a misspelt field is a 422 rather than silently ignored; the items, parts and tools inside it
// are loose because the OpenAI SDKs add fields of their own (annotations, ids, newer options) that
// the backend understands and we pass through.
import * as z from "zod";
import { approvalListsConflict } from "../config/schema.ts";
import { properConversationId } from "./conversation-id.ts";

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------

/**
 * OpenAI's API takes null in any optional field as "not given", so clients written against it may
 * send null where we would expect the field to be left out.
 */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish();

/** An optional field whose absence (or null) means `value`. */
const withDefault = <T extends z.ZodType>(schema: T, value: z.output<T>) =>
  schema.nullish().transform((given): z.output<T> => given ?? value);

const isPlainObject = (value: unknown): boolean => typeof value === "object" && value !== null && !Array.isArray(value);

/** `[{path, message}]` as one line, paths relative to the union that reports them. */
function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues.map((issue) => (issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message)).join("; ");
}

/**
 * A value of one of two shapes, told apart by `isSecond(input)`. A plain z.union reports only
 * "Invalid input" when both fail, hiding why the array or object the client clearly meant was
 * wrong (a bad item deep inside); this reports the issues of the branch the input's shape selects.
 */
function either<A extends z.ZodType, B extends z.ZodType>(first: A, second: B, isSecond: (input: unknown) => boolean, expected: string) {
  // The third option lets only a missing value through the union, so that nonoptional() reports it
  // as a missing field (invalid_type, "Missing required attributes") rather than as a failed union.
  // Written as never().optional() rather than undefined() because JSON Schema can express it.
  const union = z.union([first, second, z.never().optional()], {
    error: (issue) => {
      if (issue.code !== "invalid_union") return undefined;
      const branch = issue.errors[isSecond(issue.input) ? 1 : 0] ?? [];
      const [only] = branch;
      const wrongShape = branch.length === 1 && only !== undefined && only.path.length === 0 && only.code === "invalid_type";
      return wrongShape || branch.length === 0 ? `Invalid input: expected ${expected}` : describeIssues(branch);
    },
  });
  return union.nonoptional();
}

/**
 * A discriminated union whose unknown `type` is named in the message together with the allowed
 * ones, instead of zod's generic "Invalid discriminator value".
 */
function byType<const Options extends readonly [z.core.$ZodTypeDiscriminable, ...z.core.$ZodTypeDiscriminable[]]>(
  what: string,
  options: Options,
) {
  return z.discriminatedUnion("type", options, {
    error: (issue) => {
      if (issue.code !== "invalid_union" || !isPlainObject(issue.input)) return undefined;
      const type = (issue.input as { type?: unknown }).type;
      const types: unknown[] = Array.isArray(issue.options) ? issue.options : [];
      const allowed = types.filter((known) => known !== undefined).join(", ");
      return type === undefined
        ? `${what} type is required; expected one of: ${allowed}`
        : `unknown ${what} type ${JSON.stringify(type)}; expected one of: ${allowed}`;
    },
  });
}

const nonEmpty = () => z.string().min(1, "must not be empty");

/** The statuses items carry across their types (message, tool calls, searches). */
const ItemStatusSchema = z.enum(["in_progress", "searching", "calling", "completed", "incomplete", "failed"]);

// ---------------------------------------------------------------------------------------------
// Content parts
// ---------------------------------------------------------------------------------------------

const InputTextSchema = z.looseObject({ type: z.literal("input_text"), text: z.string() });

const InputImageSchema = z
  .looseObject({
    type: z.literal("input_image"),
    image_url: optional(z.string().min(1)),
    file_id: optional(z.string().min(1)),
    detail: withDefault(z.enum(["low", "high", "auto"]), "auto"),
  })
  .refine((part) => Boolean(part.image_url || part.file_id), "an input_image needs image_url or file_id");

const InputFileSchema = z
  .looseObject({
    type: z.literal("input_file"),
    file_id: optional(z.string().min(1)),
    filename: optional(z.string()),
    file_data: optional(z.string().min(1)),
    file_url: optional(z.string().min(1)),
  })
  .refine((part) => Boolean(part.file_id || part.file_data || part.file_url), "an input_file needs file_id, file_data or file_url");

const OutputTextSchema = z.looseObject({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: optional(z.array(z.looseObject({}))),
  logprobs: optional(z.array(z.looseObject({}))),
});

const RefusalSchema = z.looseObject({ type: z.literal("refusal"), refusal: z.string() });

/** What a client may put in its own messages and prompt variables. */
export const InputContentPartSchema = byType("content part", [InputTextSchema, InputImageSchema, InputFileSchema]);
export type InputContentPart = z.output<typeof InputContentPartSchema>;

/** Every part a message may hold, including the assistant's earlier output sent back as input. */
export const ContentPartSchema = byType("content part", [InputTextSchema, InputImageSchema, InputFileSchema, OutputTextSchema, RefusalSchema]);
export type ContentPart = z.output<typeof ContentPartSchema>;

// ---------------------------------------------------------------------------------------------
// Input items
// ---------------------------------------------------------------------------------------------

const MessageItemSchema = z.looseObject({
  // Optional: the SDKs send "easy" messages as bare {role, content}.
  type: z.literal("message").optional(),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: either(z.string(), z.array(ContentPartSchema), Array.isArray, "a string or an array of content parts"),
  id: optional(z.string()),
  status: optional(ItemStatusSchema),
});

const WebSearchCallSchema = z.looseObject({
  type: z.literal("web_search_call"),
  id: z.string(),
  status: optional(ItemStatusSchema),
  action: optional(z.looseObject({})),
});

const FileSearchCallSchema = z.looseObject({
  type: z.literal("file_search_call"),
  id: z.string(),
  queries: z.array(z.string()),
  status: ItemStatusSchema,
  results: optional(z.array(z.looseObject({}))),
});

const FunctionCallSchema = z.looseObject({
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  id: optional(z.string()),
  status: optional(ItemStatusSchema),
});

const FunctionCallOutputSchema = z.looseObject({
  type: z.literal("function_call_output"),
  call_id: z.string(),
  output: either(z.string(), z.array(InputContentPartSchema), Array.isArray, "a string or an array of content parts"),
  id: optional(z.string()),
  status: optional(ItemStatusSchema),
});

const McpCallSchema = z.looseObject({
  type: z.literal("mcp_call"),
  id: z.string(),
  server_label: z.string(),
  name: z.string(),
  arguments: z.string(),
  output: optional(z.string()),
  error: optional(z.string()),
  status: optional(ItemStatusSchema),
});

const McpListToolsSchema = z.looseObject({
  type: z.literal("mcp_list_tools"),
  id: z.string(),
  server_label: z.string(),
  tools: z.array(z.looseObject({ name: z.string() })),
});

const McpApprovalRequestSchema = z.looseObject({
  type: z.literal("mcp_approval_request"),
  id: z.string(),
  server_label: z.string(),
  name: z.string(),
  arguments: z.string(),
});

const McpApprovalResponseSchema = z.looseObject({
  type: z.literal("mcp_approval_response"),
  approval_request_id: z.string(),
  approve: z.boolean(),
  id: optional(z.string()),
  reason: optional(z.string()),
});

export const InputItemSchema = byType("input item", [
  MessageItemSchema,
  WebSearchCallSchema,
  FileSearchCallSchema,
  FunctionCallSchema,
  FunctionCallOutputSchema,
  McpCallSchema,
  McpListToolsSchema,
  McpApprovalRequestSchema,
  McpApprovalResponseSchema,
]);
export type InputItem = z.output<typeof InputItemSchema>;

// ---------------------------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------------------------

export const WEB_SEARCH_TOOL_TYPES = ["web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11"] as const;

const FileSearchToolSchema = z.looseObject({
  type: z.literal("file_search"),
  vector_store_ids: z.array(nonEmpty()).min(1, "must list at least one vector store"),
  max_num_results: withDefault(z.int().min(1).max(50), 10),
  filters: optional(z.looseObject({})),
  ranking_options: optional(
    z.looseObject({
      ranker: optional(z.string()),
      score_threshold: optional(z.number().min(0).max(1)),
    }),
  ),
});

const WebSearchToolSchema = z.looseObject({
  type: z.enum(WEB_SEARCH_TOOL_TYPES),
  search_context_size: optional(z.enum(["low", "medium", "high"])),
  user_location: optional(z.looseObject({})),
  filters: optional(z.looseObject({})),
});

/** OpenAI's rule for a function's name, which backends enforce with a 400 of their own. */
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

const FunctionToolSchema = z.looseObject({
  type: z.literal("function"),
  name: z.string().regex(FUNCTION_NAME, "must be 1 to 64 letters, digits, underscores or dashes"),
  description: optional(z.string()),
  parameters: optional(z.record(z.string(), z.unknown())),
  strict: optional(z.boolean()),
});

const HTTP_PROTOCOLS = /^https?$/;

const ToolNamesSchema = z.looseObject({ tool_names: optional(z.array(z.string())) });

const McpToolSchema = z.looseObject({
  type: z.literal("mcp"),
  server_label: nonEmpty(),
  server_url: z.url({ protocol: HTTP_PROTOCOLS, error: "expected an http or https URL" }),
  headers: optional(z.record(z.string(), z.string())),
  require_approval: optional(
    either(
      z.enum(["always", "never"]),
      z.looseObject({ always: optional(ToolNamesSchema), never: optional(ToolNamesSchema) }).superRefine((policy, ctx) => {
        const conflict = approvalListsConflict({ always: policy.always?.tool_names ?? [], never: policy.never?.tool_names ?? [] });
        if (conflict) ctx.addIssue({ code: "custom", message: conflict });
      }),
      isPlainObject,
      `"always", "never" or {always, never} tool name filters`,
    ),
  ),
  allowed_tools: optional(either(z.array(z.string()), ToolNamesSchema, isPlainObject, "a list of tool names or {tool_names}")),
  authorization: optional(z.string()),
  server_description: optional(z.string()),
});

export const ToolSchema = byType("tool", [FileSearchToolSchema, WebSearchToolSchema, FunctionToolSchema, McpToolSchema]);
export type Tool = z.output<typeof ToolSchema>;

// ---------------------------------------------------------------------------------------------
// tool_choice
// ---------------------------------------------------------------------------------------------

export const TOOL_CHOICE_MODES = ["auto", "required", "none"] as const;

const ToolChoiceObjectSchema = byType("tool_choice", [
  z.looseObject({
    type: z.literal("allowed_tools"),
    mode: z.enum(["auto", "required"]),
    // A filter matches a tool when all its attributes match; an MCP filter without a name covers
    // every tool of its server (SPEC "tool_choice"). One without a type covers no tool (as in the
    // original, a filter of unknown attributes is no error: it allows nothing).
    tools: z.array(z.looseObject({ type: optional(nonEmpty()), server_label: optional(z.string()), name: optional(z.string()) })),
  }),
  z.looseObject({ type: z.literal("file_search") }),
  z.looseObject({ type: z.enum(WEB_SEARCH_TOOL_TYPES) }),
  z.looseObject({ type: z.literal("function"), name: nonEmpty() }),
  z.looseObject({ type: z.literal("mcp"), server_label: nonEmpty(), name: optional(z.string()) }),
  z.looseObject({ type: z.literal("custom"), name: nonEmpty() }),
]);

export const ToolChoiceSchema = either(
  z.enum(TOOL_CHOICE_MODES),
  ToolChoiceObjectSchema,
  isPlainObject,
  `"auto", "required", "none" or a tool_choice object`,
);
export type ToolChoice = z.output<typeof ToolChoiceSchema>;

// ---------------------------------------------------------------------------------------------
// Other request objects
// ---------------------------------------------------------------------------------------------

export const INCLUDE_VALUES = [
  "web_search_call.action.sources",
  "code_interpreter_call.outputs",
  "computer_call_output.output.image_url",
  "file_search_call.results",
  "message.input_image.image_url",
  "message.output_text.logprobs",
] as const;

/** OpenAI's bounds on metadata: pairs, and the length of each key and value. */
const METADATA_MAX_PAIRS = 16;
const METADATA_MAX_KEY = 64;
const METADATA_MAX_VALUE = 512;

/** A stored prompt to render as the user's text (see prompt-template.ts). */
export const PromptReferenceSchema = z.looseObject({
  id: nonEmpty(),
  variables: optional(
    z.record(
      z.string(),
      either(z.string(), InputContentPartSchema, isPlainObject, "a string or an input_text, input_image or input_file part").nullable(),
    ),
  ),
  version: optional(z.string()),
});
export type PromptReference = z.output<typeof PromptReferenceSchema>;

export const TextFormatSchema = byType("text format", [
  z.looseObject({ type: z.literal("text") }),
  z.looseObject({ type: z.literal("json_object") }),
  z.looseObject({
    type: z.literal("json_schema"),
    name: nonEmpty(),
    schema: z.record(z.string(), z.unknown()),
    description: optional(z.string()),
    strict: optional(z.boolean()),
  }),
]);
export type TextFormat = z.output<typeof TextFormatSchema>;

export const REASONING_EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"] as const;

// ---------------------------------------------------------------------------------------------
// The request
// ---------------------------------------------------------------------------------------------

export const ResponsesRequestSchema = z
  .strictObject({
    input: either(
      z.string().min(1, "must not be empty"),
      z.array(InputItemSchema).min(1, "must hold at least one item"),
      Array.isArray,
      "a non-empty string or an array of input items",
    ),
    model: optional(nonEmpty()),
    // The official clients also take the object form {id} (the openai SDK's ResponseCreateParams).
    conversation: optional(
      either(nonEmpty(), z.looseObject({ id: nonEmpty() }).transform((conversation) => conversation.id), isPlainObject, "a conversation id, or an object with its id"),
    ),
    previous_response_id: optional(nonEmpty()),
    include: optional(z.array(z.enum(INCLUDE_VALUES))),
    instructions: optional(z.string()),
    max_infer_iters: optional(z.int().min(1)),
    // Accepted for compatibility; the route clears them and logs a warning (SPEC "Limits").
    max_output_tokens: optional(z.int().min(1)),
    reasoning: optional(
      z.looseObject({
        effort: optional(z.enum(REASONING_EFFORTS)),
        summary: optional(z.enum(["auto", "concise", "detailed"])),
      }),
    ),
    max_tool_calls: optional(z.int().min(1)),
    metadata: optional(
      z
        .record(z.string().max(METADATA_MAX_KEY, `keys must be at most ${METADATA_MAX_KEY} characters`), z.string().max(METADATA_MAX_VALUE, `values must be at most ${METADATA_MAX_VALUE} characters`))
        .refine((pairs) => Object.keys(pairs).length <= METADATA_MAX_PAIRS, {
          message: `must hold at most ${METADATA_MAX_PAIRS} pairs`,
        }),
    ),
    parallel_tool_calls: optional(z.boolean()),
    prompt: optional(PromptReferenceSchema),
    safety_identifier: optional(z.string()),
    store: withDefault(z.boolean(), true),
    stream: withDefault(z.boolean(), false),
    // The official openai clients send these; they are forwarded as given.
    stream_options: optional(z.looseObject({ include_obfuscation: optional(z.boolean()) })),
    temperature: optional(z.number().min(0).max(2)),
    top_p: optional(z.number().min(0).max(1)),
    truncation: optional(z.enum(["auto", "disabled"])),
    user: optional(z.string()),
    text: optional(
      z.looseObject({
        format: optional(TextFormatSchema),
        verbosity: optional(z.enum(["low", "medium", "high"])),
      }),
    ),
    tool_choice: withDefault(ToolChoiceSchema, "auto"),
    // Omitted or null: every tool the service configures (SPEC "tools"), so null stays distinct from [].
    tools: optional(z.array(ToolSchema)),
    // Extensions.
    generate_topic_summary: withDefault(z.boolean(), true),
    // Omitted or null: every configured shield; []: none.
    shield_ids: optional(z.array(z.string())),
    // Checked by the RAG layer, which knows the configured sources.
    solr: optional(z.record(z.string(), z.unknown())),
  })
  .superRefine((body, ctx) => {
    // As the original checks it (UPSTREAM's suid check): a form no conversation id has is the client's mistake, not a 404.
    if (body.conversation && properConversationId(body.conversation) === null) {
      ctx.addIssue({ code: "custom", path: ["conversation"], message: `Improper conversation ID '${body.conversation}'` });
    }
    if (body.conversation && body.previous_response_id) {
      ctx.addIssue({
        code: "custom",
        path: ["conversation"],
        message: "`conversation` and `previous_response_id` are mutually exclusive; send at most one of them",
      });
    }
    // A moderation's id (the original's blocked answers): no context to continue from (SPEC "Conversation continuity").
    if (body.previous_response_id?.startsWith("modr")) {
      ctx.addIssue({ code: "custom", path: ["previous_response_id"], message: "You cannot provide context by moderation response." });
    }
    // The client's own functions: what a backend would refuse with a 400 is the client's mistake, a 422 here.
    const functions = new Set<string>();
    body.tools?.forEach((tool, index) => {
      if (tool.type !== "function") return;
      if (functions.has(tool.name)) ctx.addIssue({ code: "custom", path: ["tools", index, "name"], message: `duplicate function name '${tool.name}'` });
      functions.add(tool.name);
    });
    const choice = body.tool_choice;
    if (typeof choice === "object" && choice.type === "function" && !functions.has(choice.name)) {
      ctx.addIssue({ code: "custom", path: ["tool_choice", "name"], message: `no function named '${choice.name}' is among the request's tools` });
    }
  });

/** The request as parsed: defaults applied (store, stream, tool_choice, generate_topic_summary, ...). */
export type ResponsesRequest = z.output<typeof ResponsesRequestSchema>;
/** The request as a client writes it. */
export type ResponsesRequestBody = z.input<typeof ResponsesRequestSchema>;
