// Where feedback and transcripts live in R2 (the DATA binding), in SPEC's path layout:
//   <feedback_storage>/<uuid>.json
//   <transcripts_storage>/<sha256 of the user id>/<conversation id>/<unique id>.json
// and what they are called inside an exported tarball: feedback/<uuid>.json and
// transcripts/<user>/<conversation>/<unique id>.json, whatever the storage prefixes are, which is
// the layout the original system's exporter produced from its data directory.
import type { DataObjectKind } from "../storage/data-objects-store.ts";

// One path segment the gateway made up (a hash, a normalized id, a request id): nothing that could
// climb out of the prefix or be read as a separator.
const COMPONENT = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/**
 * A storage setting as an R2 key prefix. Settings written for the original system are file system
 * paths ("/tmp/data/feedback"); R2 keys have no root, so leading slashes and "." go, ".." steps
 * back within the prefix and never above it.
 */
export function storagePrefix(setting: string): string {
  const parts: string[] = [];
  for (const part of setting.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return parts.join("/");
}

function component(value: string, what: string): string {
  if (!COMPONENT.test(value) || value.includes("..")) throw new Error(`${what} is not usable in an object key: ${JSON.stringify(value)}`);
  return value;
}

function join(prefix: string, ...parts: string[]): string {
  const base = storagePrefix(prefix);
  return base ? `${base}/${parts.join("/")}` : parts.join("/");
}

export function feedbackKey(storage: string, id: string): string {
  return join(storage, `${component(id, "feedback id")}.json`);
}

export function transcriptKey(storage: string, userHash: string, conversationId: string, uniqueId: string): string {
  return join(
    storage,
    component(userHash, "user hash"),
    component(conversationId, "conversation id"),
    `${component(uniqueId, "transcript id")}.json`,
  );
}

/** How many trailing key segments SPEC's layout gives each kind below its storage prefix. */
const SEGMENTS: Record<DataObjectKind, number> = { feedback: 1, transcript: 3 };
const FOLDERS: Record<DataObjectKind, string> = { feedback: "feedback", transcript: "transcripts" };

/**
 * The name of an object inside an exported tarball. Taken from the key's own trailing segments, so
 * objects written under an earlier storage prefix are named the same way as new ones.
 */
export function archiveEntryName(kind: DataObjectKind, key: string): string {
  return `${FOLDERS[kind]}/${key.split("/").slice(-SEGMENTS[kind]).join("/")}`;
}
