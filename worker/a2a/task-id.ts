// Task ids carry their context: tasks/get, tasks/cancel and tasks/resubscribe name only the task,
// and its state lives in the DO of its context. `<uuid>.<base64url(contextId)>` finds that DO
// without an index to keep consistent, and the id stays opaque to clients as A2A wants.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function newTaskId(contextId: string): string {
  return `${crypto.randomUUID()}.${toBase64Url(contextId)}`;
}

/** The context a task id belongs to; null when the id is not one this service issued. */
export function contextOfTask(taskId: string): string | null {
  const dot = taskId.indexOf(".");
  if (dot === -1 || !UUID.test(taskId.slice(0, dot))) return null;
  try {
    const contextId = fromBase64Url(taskId.slice(dot + 1));
    return contextId.length > 0 ? contextId : null;
  } catch {
    return null;
  }
}

function toBase64Url(text: string): string {
  let binary = "";
  for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(encoded: string): string {
  if (!/^[A-Za-z0-9_-]*$/.test(encoded)) throw new Error("not base64url");
  const binary = atob(encoded.replace(/-/g, "+").replace(/_/g, "/"));
  return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}
