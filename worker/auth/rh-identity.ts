// The identity header (`authentication.module: rh-identity`, settings in `rh_identity_config`): a
// gateway in front of the service authenticates the caller and sends `x-rh-identity`, the base64 of
// a JSON identity document, a User, a System or a ServiceAccount. The header's texts are the
// original system's, inside SPEC's envelope; every malformed header is a 400, never a 500.
import * as z from "zod";
import { RhIdentityConfigSchema } from "../config/schema.ts";
import { ApiError, errors } from "../errors.ts";
import type { AuthContext, AuthenticationConfig, Authenticator, RhIdentityData } from "./types.ts";

export const IDENTITY_HEADER = "x-rh-identity";

const MAX_FIELD_LENGTH = 256;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** A string the identity uses as an id or name: present, not blank, short, printable. */
const field = () =>
  z
    .string({ error: "must be a string" })
    .refine((value) => value.trim() !== "", "must not be blank")
    .refine((value) => value.length <= MAX_FIELD_LENGTH, `must be at most ${MAX_FIELD_LENGTH} characters`)
    .refine((value) => !CONTROL.test(value), "must not contain control characters");

/** org_id and account_number are checked only when they carry something. */
const optionalField = () => z.preprocess((value) => (value === "" || value === null ? undefined : value), field().optional());

// The document's shape. Objects are open: real headers carry many more fields (email, internal, ...).
const IdentityDocument = z.object({
  identity: z
    .object({
      type: z.enum(["User", "System", "ServiceAccount"], { error: "must be User, System or ServiceAccount" }),
      org_id: optionalField(),
      account_number: optionalField(),
      user: z.object({ user_id: field(), username: field() }).optional(),
      system: z.object({ cn: field() }).optional(),
      service_account: z.object({ client_id: field(), username: field() }).optional(),
    })
    .superRefine((identity, ctx) => {
      const required = { User: "user", System: "system", ServiceAccount: "service_account" } as const;
      const part = required[identity.type];
      if (identity[part] === undefined) ctx.addIssue({ code: "custom", message: `required for type ${identity.type}`, path: [part] });
      if (identity.type === "System" && !identity.org_id) {
        ctx.addIssue({ code: "custom", message: "required for type System", path: ["org_id"] });
      }
    }),
  entitlements: z.record(z.string(), z.object({ is_entitled: z.unknown() }).loose()).optional(),
});

type Identity = z.output<typeof IdentityDocument>["identity"];

const invalid = (response: string, cause: string) => new ApiError(400, response, cause);

// Strict base64 (standard alphabet, padding required), as the original system decodes it.
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function decode(header: string): string {
  const fail = (cause: string) => invalid(`Invalid base64 encoding in ${IDENTITY_HEADER} header`, cause);
  if (!BASE64.test(header)) throw fail("the header is not valid base64");
  const bytes = Uint8Array.from(atob(header), (char) => char.charCodeAt(0));
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    throw fail("the decoded header is not valid UTF-8");
  }
}

function parseIdentity(text: string): z.output<typeof IdentityDocument> {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw invalid(`Invalid JSON in ${IDENTITY_HEADER} header`, "the decoded header is not a JSON document");
  }
  const parsed = IdentityDocument.safeParse(document);
  if (!parsed.success) {
    // Paths and rules only: the header's values are not echoed.
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(document)"}: ${issue.message}`);
    throw invalid("Invalid identity data", problems.join("; "));
  }
  return parsed.data;
}

/** The user id and name each identity type carries (the original system's choice for System). */
function names(identity: Identity): { userId: string; username: string } {
  switch (identity.type) {
    case "User":
      return { userId: identity.user!.user_id, username: identity.user!.username };
    case "ServiceAccount":
      return { userId: identity.service_account!.client_id, username: identity.service_account!.username };
    case "System":
      return { userId: identity.system!.cn, username: identity.account_number || identity.system!.cn };
  }
}

export function rhIdentityAuthenticator(settings: AuthenticationConfig): Authenticator {
  const config = settings.rh_identity_config ?? RhIdentityConfigSchema.parse({});
  return async function rhIdentity(request): Promise<AuthContext> {
    const header = request.headers.get(IDENTITY_HEADER)?.trim() ?? "";
    if (header === "") throw errors.unauthorized(`Missing ${IDENTITY_HEADER} header`);
    // Header values are byte strings, so the length is the size in bytes of the base64 form.
    if (header.length > config.max_header_size) {
      throw invalid(
        `${IDENTITY_HEADER} header exceeds maximum allowed size`,
        `the header has ${header.length} bytes; the limit is ${config.max_header_size}`,
      );
    }
    const { identity, entitlements = {} } = parseIdentity(decode(header));
    const missing = config.required_entitlements.filter((service) => entitlements[service]?.is_entitled !== true);
    if (missing.length > 0) throw new ApiError(403, "Insufficient entitlements", `Missing required entitlements: ${missing.join(", ")}`);
    const { userId, username } = names(identity);
    const rhIdentity: RhIdentityData = {
      type: identity.type,
      orgId: identity.org_id ?? "",
      systemId: userId,
      accountNumber: identity.account_number ?? "",
    };
    return { userId, username, roles: [], skipUserIdCheck: false, token: null, rhIdentity };
  };
}
