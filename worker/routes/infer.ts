// POST /v1/infer (rlsapi v1, the command line assistant's endpoint; UPSTREAM "/v1/infer"): one
// question with what the terminal adds to it, answered without a conversation. One more adapter on
// the turn's planning and phases (turn/stateless.ts), not a second engine.
import { Hono, type Context } from "hono";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { inferEvent, type TelemetryOutcome } from "../data/splunk.ts";
import { ApiError, errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import { quotaCounters, type QuotaCounter } from "../quota/quotas.ts";
import { userMessage } from "../turn/attachments.ts";
import { planTurn } from "../turn/plan.ts";
import { renderTemplate } from "../turn/jinja.ts";
import { runStatelessTurn, type StatelessResult } from "../turn/stateless.ts";
import { serverTools } from "../turn/tools.ts";
import { readJson } from "../validation.ts";
import { planContext, sendTelemetry, turnBodyLimit } from "./streams.ts";

const TEXT_LIMIT = 65_536;
const SYSTEM_FIELD = /^[a-zA-Z0-9._ -]*$/;
const MACHINE_ID = /^[a-zA-Z0-9._-]*$/;

export const InferRequestSchema = z.strictObject({
  question: z
    .string()
    .min(1)
    .max(32_768)
    .refine((question) => question.trim() !== "", "Question cannot be empty or whitespace-only"),
  context: z
    .strictObject({
      stdin: z.string().max(TEXT_LIMIT).default(""),
      attachments: z.strictObject({ contents: z.string().max(TEXT_LIMIT).default(""), mimetype: z.string().default("") }).prefault({}),
      terminal: z.strictObject({ output: z.string().max(TEXT_LIMIT).default("") }).prefault({}),
      systeminfo: z
        .strictObject({
          os: z.string().regex(SYSTEM_FIELD).default(""),
          version: z.string().regex(SYSTEM_FIELD).default(""),
          arch: z.string().regex(SYSTEM_FIELD).default(""),
          // The machine id, under either name (the original accepts both).
          id: z.string().regex(MACHINE_ID).optional(),
          system_id: z.string().regex(MACHINE_ID).optional(),
        })
        .prefault({}),
      cla: z.strictObject({ nevra: z.string().regex(/^[a-zA-Z0-9._:+~-]*$/).default(""), version: z.string().regex(MACHINE_ID).default("") }).prefault({}),
    })
    .prefault({}),
  skip_rag: z.boolean().default(false),
  include_metadata: z.boolean().default(false),
});
type InferRequest = z.output<typeof InferRequestSchema>;

/** The original's default when no system prompt is configured. */
const INFER_DEFAULT_PROMPT = "You are a helpful assistant";
/** What an answer without text says. */
const EMPTY_ANSWER = "Unable to process this request";

export const infer = new Hono<AppEnv>();

infer.post("/v1/infer", guard(ACTIONS.infer), turnBodyLimit(), async (c) => {
  const rt = c.get("rt");
  const auth = c.get("auth");
  const body = await readJson(c, InferRequestSchema);
  const started = Date.now();
  const requestId = crypto.randomUUID();
  const question = body.question.trim();
  const report = (outcome: TelemetryOutcome, totalTokens = 0) =>
    sendTelemetry(c, (config) =>
      inferEvent(config, {
        outcome,
        question,
        inferenceTime: (Date.now() - started) / 1000,
        requestId,
        totalTokens,
        identity: { orgId: auth.rhIdentity?.orgId, systemId: auth.rhIdentity?.systemId },
        userAgent: c.req.header("User-Agent"),
        systemInfo: body.context.systeminfo,
      }),
    );

  let result: StatelessResult;
  try {
    // UPSTREAM: the original asks the model with its MCP tools only, no retrieval, and gives those
    // servers only the request headers they propagate (not the caller's token or MCP-HEADERS).
    const context = planContext(c, { probeMcpAuth: false, callerCredentials: false });
    const tools = await serverTools(context, null, { fileSearch: false });
    const plan = planTurn(context, {
      endpoint: "/v1/infer",
      // Nothing is kept: the request id stands where a conversation would (its transcript's path).
      conversationId: requestId,
      create: true,
      input: [userMessage(inferInput(question, body), [])],
      userText: question,
      model: {},
      systemPrompt: { text: systemPrompt(rt.systemPrompt ?? INFER_DEFAULT_PROMPT, body), fromClient: false },
      params: tools.params,
      mcpServers: tools.mcpServers,
      retrieval: null,
      generateTopicSummary: false,
      streaming: false,
      transcript: true,
    });
    result = await runStatelessTurn(c.env, c.executionCtx, rt, { ...plan, requestId }, quotaCountersOf(c), c.req.raw.signal);
  } catch (caught) {
    const error = inferError(caught);
    report({ kind: "error", error });
    throw error;
  }

  const { outcome, status } = result;
  const text = result.collected.text.trim() === "" ? EMPTY_ANSWER : result.collected.text;
  report(status === "blocked" ? { kind: "shield_blocked", refusal: text } : { kind: "completed", text }, outcome.tokens.input + outcome.tokens.output);
  const verbose = rt.config.rlsapi_v1.allow_verbose_infer && body.include_metadata;
  return c.json({
    data: {
      text,
      request_id: requestId,
      ...(verbose
        ? {
            tool_calls: outcome.turn.summary.tool_calls,
            tool_results: outcome.turn.summary.tool_results,
            rag_chunks: outcome.ragChunks,
            referenced_documents: outcome.referencedDocuments,
            input_tokens: outcome.tokens.input,
            output_tokens: outcome.tokens.output,
          }
        : {}),
    },
  });
});

/**
 * UPSTREAM words two failures otherwise on this endpoint: a backend's rate limit as a quota refusal
 * (429 "The quota has been exceeded" / "Rate limit exceeded, please try again later"; the query
 * endpoints name the model), and no language model to answer with as the service being unavailable
 * (503, which the command line client retries; the query endpoints answer SPEC's 404).
 */
function inferError(error: unknown): unknown {
  if (!(error instanceof ApiError)) return error;
  const modelQuota = errors.modelQuotaExceeded("");
  if (error.status === modelQuota.status && error.response === modelQuota.response) return errors.quotaExceeded("Rate limit exceeded, please try again later");
  const noModel = errors.noLanguageModel();
  if (error.status === noModel.status && error.cause === noModel.cause) return errors.noLanguageModelToInfer();
  return error;
}

/** The question with what the terminal sent, as the original joins them. */
function inferInput(question: string, body: InferRequest): string {
  const { stdin, attachments, terminal } = body.context;
  return [question, stdin, attachments.contents, terminal.output].filter((part) => part !== "").join("\n\n");
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/**
 * The configured prompt rendered as the Jinja2 template it is in the original, with `date`, `os`,
 * `version` and `arch`; undefined names render as nothing. A prompt that is not a valid template
 * is UPSTREAM's 500 (the configuration's load warned of it).
 */
export function systemPrompt(template: string, body: InferRequest, now = new Date()): string {
  const info = body.context.systeminfo;
  const values: Record<string, string> = {
    date: `${MONTHS[now.getUTCMonth()]} ${String(now.getUTCDate()).padStart(2, "0")}, ${now.getUTCFullYear()}`,
    os: info.os,
    version: info.version,
    arch: info.arch,
  };
  try {
    return renderTemplate(template, values);
  } catch (error) {
    throw errors.internal(`the system prompt is not a template that can be rendered: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Whose quota /v1/infer draws on (rlsapi_v1.quota_subject); none when it names none. */
function quotaCountersOf(c: Context<AppEnv>): QuotaCounter[] {
  const subject = c.get("rt").config.rlsapi_v1.quota_subject;
  if (subject === null) return [];
  const auth = c.get("auth");
  const identity = auth.rhIdentity;
  const id = subject === "org_id" ? identity?.orgId || auth.userId : subject === "system_id" ? identity?.systemId || auth.userId : auth.userId;
  return quotaCounters(c.get("rt").config, id);
}
