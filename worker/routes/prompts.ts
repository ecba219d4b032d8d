// Stored prompt templates (SPEC "Endpoints" /v1/prompts, REFERENCE "Small resources"). An update
// never edits a version: it adds the next one, which becomes the default (what a reference without
// a version uses) unless the update says set_as_default: false.
import { Hono, type Context } from "hono";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import type { PromptRecord, Store } from "../storage/store.ts";
import { checkTemplate } from "../turn/prompt-template.ts";
import { randomHex } from "../turn/conversation-id.ts";
import { parseWith, readJson, requestBodyLimit } from "../validation.ts";

export const prompts = new Hono<AppEnv>();

const PROMPT_ID = /^pmpt_[0-9a-f]{48}$/;

function newPromptId(): string {
  return `pmpt_${randomHex(24)}`;
}

const VariablesSchema = z.array(z.string().min(1, "must not be empty")).nullish();

export const CreateSchema = z.strictObject({
  prompt: z.string().min(1, "must not be empty"),
  variables: VariablesSchema,
});

export const UpdateSchema = z.strictObject({
  prompt: z.string().min(1, "must not be empty"),
  /** The latest version, the one this update replaces: a stale one is a conflict, not an overwrite. */
  version: z.int().min(1),
  set_as_default: z.boolean().nullish(),
  /** Omitted or null: the variables of the version being replaced. */
  variables: VariablesSchema,
});

// Not strict: other query parameters (the noop module's user_id) ride along.
export const VersionQuerySchema = z.object({
  version: z
    .string()
    .regex(/^[1-9][0-9]*$/, "must be a positive integer")
    .transform(Number)
    .pipe(z.int("must be a positive integer"))
    .optional(),
});

/**
 * The largest request body that creates or updates a prompt (1 MiB, README "Limits"). A prompt's
 * version is one row, which hosted D1 caps at 2,000,000 bytes (string or row): its text and
 * variables, decoded and stored, take no more bytes than the JSON that carried them, so every
 * store holds what this lets through. Larger is 413 before anything is written.
 */
export const MAX_PROMPT_REQUEST_BYTES = 1024 * 1024;

const promptBodyLimit = () => requestBodyLimit(MAX_PROMPT_REQUEST_BYTES);

function promptResource(record: PromptRecord) {
  return {
    prompt_id: record.promptId,
    version: record.version,
    is_default: record.isDefault,
    prompt: record.prompt,
    variables: record.variables,
  };
}

/** The path id, checked for format (400). */
function pathPromptId(c: Context<AppEnv>): string {
  const id = c.req.param("prompt_id") ?? "";
  if (!PROMPT_ID.test(id)) throw errors.invalidPromptId(id);
  return id;
}

/**
 * The highest version of a prompt, for the conflict message. The store finds the default; versions
 * added with set_as_default: false sit above it.
 */
async function latestVersion(store: Store, promptId: string): Promise<number | null> {
  const current = await store.prompts.get(promptId);
  if (!current) return null;
  let latest = current.version;
  while (await store.prompts.get(promptId, latest + 1)) latest += 1;
  return latest;
}

for (const path of ["/v1/prompts", "/v1/prompts/"]) {
  prompts.get(path, guard(ACTIONS.readPrompts), async (c) => {
    const records = await c.get("store").prompts.list();
    return c.json({ data: records.map(promptResource) });
  });

  prompts.post(path, guard(ACTIONS.managePrompts), promptBodyLimit(), async (c) => {
    const body = await readJson(c, CreateSchema);
    const variables = body.variables ?? [];
    checkTemplate(body.prompt, variables);
    const record = await c.get("store").prompts.create({ promptId: newPromptId(), prompt: body.prompt, variables });
    return c.json(promptResource(record));
  });
}

prompts.get("/v1/prompts/:prompt_id", guard(ACTIONS.readPrompts), async (c) => {
  const id = pathPromptId(c);
  const { version } = parseWith(VersionQuerySchema, { version: c.req.query("version") });
  const record = await c.get("store").prompts.get(id, version);
  if (!record) throw errors.promptNotFound(id, version);
  return c.json(promptResource(record));
});

prompts.put("/v1/prompts/:prompt_id", guard(ACTIONS.managePrompts), promptBodyLimit(), async (c) => {
  const id = pathPromptId(c);
  const body = await readJson(c, UpdateSchema);
  const store = c.get("store");
  if (body.variables) {
    checkTemplate(body.prompt, body.variables);
  } else {
    // The new version inherits the replaced version's variables, so the template must fit them.
    const replaced = await store.prompts.get(id, body.version);
    if (replaced) checkTemplate(body.prompt, replaced.variables);
  }
  const result = await store.prompts.update({
    promptId: id,
    version: body.version,
    prompt: body.prompt,
    variables: body.variables ?? undefined,
    setAsDefault: body.set_as_default !== false,
  });
  if (result === "not_found") throw errors.promptNotFound(id);
  if (result === "version_conflict") throw errors.promptVersionConflict(id, body.version, await latestVersion(store, id));
  return c.json(promptResource(result));
});

// SPEC Errors rule 1: always 200; a prompt that is not there (or a malformed id, which cannot name
// one) is success false.
prompts.delete("/v1/prompts/:prompt_id", guard(ACTIONS.managePrompts), async (c) => {
  const id = c.req.param("prompt_id");
  const deleted = PROMPT_ID.test(id) && (await c.get("store").prompts.delete(id));
  return c.json({
    prompt_id: id,
    deleted,
    response: deleted ? "Prompt deleted successfully" : "Prompt not found",
    success: deleted,
  });
});
