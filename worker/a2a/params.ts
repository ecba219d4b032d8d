// SPEC "A2A JSON-RPC" envelope rules for the params of each method. Anything that breaks them is a
// JSON-RPC -32602 (invalid params) naming the field, never an HTTP error.
import { A2AError } from "@a2a-js/sdk/server";
import * as z from "zod";
import { ApiError } from "../errors.ts";
import { validate, validationError } from "../validation.ts";

/** Longest contextId accepted: it is part of every task id of the context. */
const MAX_CONTEXT_ID = 256;

const nullish = <T extends z.ZodType>(schema: T) => schema.nullish().transform((value) => value ?? undefined);

/** The gateway's own message metadata (SPEC): which model answers and which stores are searched. */
const TurnMetadataSchema = z
  .looseObject({
    model: nullish(z.string().min(1)),
    provider: nullish(z.string().min(1)),
    vector_store_ids: nullish(z.array(z.string().min(1))),
  })
  .superRefine((metadata, ctx) => {
    // As on the query endpoints: a model is named by both halves or not at all.
    if (metadata.provider && !metadata.model) ctx.addIssue({ code: "custom", path: ["model"], message: "Model must be specified if provider is specified" });
    if (metadata.model && !metadata.provider) ctx.addIssue({ code: "custom", path: ["provider"], message: "Provider must be specified if model is specified" });
  });

/** A file part's file (A2A 0.3 FileWithBytes | FileWithUri): its content or where it is, not both. */
const FileSchema = z
  .looseObject({ bytes: nullish(z.string()), uri: nullish(z.string().min(1)), mimeType: nullish(z.string()), name: nullish(z.string()) })
  .refine((file) => (file.bytes === undefined) !== (file.uri === undefined), { message: "a file needs either bytes or a uri" });

/**
 * A2A 0.3's Part: TextPart | FilePart | DataPart, told apart by `kind` (SPEC allows `type` for it).
 * Parts other than text (files, data) are accepted and not sent to the model.
 */
const PartSchema = z.preprocess(
  (part) => (part && typeof part === "object" && !("kind" in part) && "type" in part ? { ...part, kind: part.type } : part),
  z.discriminatedUnion(
    "kind",
    [
      z.looseObject({ kind: z.literal("text"), text: z.string() }),
      z.looseObject({ kind: z.literal("file"), file: FileSchema }),
      z.looseObject({ kind: z.literal("data"), data: z.record(z.string(), z.unknown()) }),
    ],
    { error: "a part's kind is text, file or data" },
  ),
);

const MessageSchema = z.looseObject({
  kind: nullish(z.literal("message")),
  messageId: z.string().min(1),
  role: z.literal("user"),
  parts: z.array(PartSchema).min(1, "a message needs at least one part"),
  contextId: nullish(z.string().min(1).max(MAX_CONTEXT_ID)),
  taskId: nullish(z.string().min(1)),
  metadata: nullish(TurnMetadataSchema),
});

const SendParamsSchema = z.strictObject({
  message: MessageSchema,
  configuration: nullish(
    z.looseObject({
      blocking: nullish(z.boolean()),
      historyLength: nullish(z.number().int().min(0)),
    }),
  ),
  metadata: nullish(TurnMetadataSchema),
});

export interface SendRequest {
  message: z.output<typeof MessageSchema>;
  /** The user's text: the message's text parts, one per line; empty when it has none. */
  text: string;
  model?: string;
  provider?: string;
  vectorStoreIds?: string[];
  blocking: boolean;
  historyLength?: number;
}

/** message/send and message/stream params. */
export function parseSendParams(params: unknown): SendRequest {
  if (params && typeof params === "object" && "contextId" in params) {
    throw A2AError.invalidParams("Invalid params: contextId belongs inside params.message, not at the params level");
  }
  const { message, configuration, metadata } = parse(SendParamsSchema, params);
  // Message metadata is where SPEC puts these; params metadata is read too, the message's wins.
  const turn = { ...metadata, ...stripUndefined(message.metadata ?? {}) };
  return {
    message,
    text: message.parts
      .flatMap((part) => (part.kind === "text" ? [part.text] : []))
      .filter((text) => text.trim().length > 0)
      .join("\n"),
    model: turn.model,
    provider: turn.provider,
    vectorStoreIds: turn.vector_store_ids,
    blocking: configuration?.blocking ?? true,
    historyLength: configuration?.historyLength,
  };
}

const TaskQuerySchema = z.looseObject({ id: z.string().min(1), historyLength: nullish(z.number().int().min(0)) });
const TaskIdSchema = z.looseObject({ id: z.string().min(1) });

/** tasks/get params. */
export function parseTaskQuery(params: unknown): { id: string; historyLength?: number } {
  return parse(TaskQuerySchema, params);
}

/** tasks/cancel and tasks/resubscribe params. */
export function parseTaskId(params: unknown): { id: string } {
  return parse(TaskIdSchema, params);
}

/** Validates like the REST endpoints (same words for missing and invalid fields), as -32602. */
function parse<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  let problem: ApiError;
  try {
    const result = validate(schema, value);
    if (result.success) return result.data;
    problem = validationError(result.error);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    problem = error;
  }
  throw A2AError.invalidParams(`Invalid params: ${problem.response}: ${problem.cause}`);
}

function stripUndefined<T extends Record<string, unknown>>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
