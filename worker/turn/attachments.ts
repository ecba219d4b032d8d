// Query attachments become `input_file` parts of the user's message (SPEC's mapping of query
// fields to responses fields). A YAML attachment with `kind` and `metadata.name` is a named
// resource: its file is named after it and the model is told what it is.
import { parse } from "yaml";
import * as z from "zod";
import type { Item } from "../domain/conversation.ts";

export const ATTACHMENT_TYPES = ["alert", "api object", "configuration", "error message", "event", "log", "stack trace"] as const;
export const ATTACHMENT_CONTENT_TYPES = ["text/plain", "application/json", "application/yaml", "application/xml"] as const;

export const AttachmentSchema = z.strictObject({
  attachment_type: z.enum(ATTACHMENT_TYPES),
  content_type: z.enum(ATTACHMENT_CONTENT_TYPES),
  content: z.string(),
});
export type Attachment = z.output<typeof AttachmentSchema>;

const EXTENSIONS: Record<Attachment["content_type"], string> = {
  "text/plain": "txt",
  "application/json": "json",
  "application/yaml": "yaml",
  "application/xml": "xml",
};

/** The user's message: the question followed by one text note and one file part per attachment. */
export function userMessage(question: string, attachments: Attachment[]): Item {
  const content: Item[] = [{ type: "input_text", text: question }];
  attachments.forEach((attachment, index) => {
    const resource = namedResource(attachment);
    const base = resource ? `${resource.kind}-${resource.name}` : `${attachment.attachment_type.replace(/\s+/g, "-")}-${index + 1}`;
    const filename = `${base}.${EXTENSIONS[attachment.content_type]}`;
    const note = resource
      ? `Attached ${attachment.attachment_type}: ${resource.kind} "${resource.name}" (${filename})`
      : `Attached ${attachment.attachment_type} (${filename})`;
    content.push({ type: "input_text", text: note });
    content.push({ type: "input_file", filename, file_data: `data:${attachment.content_type};base64,${base64(attachment.content)}` });
  });
  return { type: "message", role: "user", content };
}

function namedResource(attachment: Attachment): { kind: string; name: string } | null {
  if (attachment.content_type !== "application/yaml") return null;
  try {
    const doc = parse(attachment.content) as { kind?: unknown; metadata?: { name?: unknown } } | null;
    if (typeof doc?.kind === "string" && typeof doc.metadata?.name === "string") return { kind: doc.kind, name: doc.metadata.name };
  } catch {
    // Not parseable YAML: still sent, as an unnamed attachment.
  }
  return null;
}

function base64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}
