// Reading and resetting what feedback and transcripts leave behind (R2 objects in the DATA binding,
// rows of data_objects), for the Worker tests of feedback, transcripts and the exporter, and for
// endpoint tests that check a turn wrote its transcript.
import { env } from "cloudflare:workers";
import { userIdHash } from "../../worker/data/transcripts.ts";

/** Empties the DATA bucket and the data_objects index, and forgets the exporter's state and lease. */
export async function clearData(): Promise<void> {
  await env.DB.batch([
    env.DB.prepare("DELETE FROM data_objects"),
    env.DB.prepare("DELETE FROM leases"),
    env.DB.prepare("DELETE FROM settings WHERE key IN ('data_export.state', 'feedback.enabled')"),
  ]);
  let listed = await env.DATA.list();
  while (listed.objects.length > 0) {
    await env.DATA.delete(listed.objects.map((o) => o.key));
    listed = await env.DATA.list();
  }
}

/**
 * The transcripts stored for a user (under `storage`, as configured in transcripts_storage), by
 * key, parsed; optionally only those of one conversation.
 */
export async function storedTranscripts(storage: string, userId: string, conversationId?: string): Promise<Map<string, Record<string, unknown>>> {
  const base = storage.split("/").filter((part) => part !== "" && part !== ".").join("/");
  const prefix = `${base ? `${base}/` : ""}${await userIdHash(userId)}/${conversationId ? `${conversationId}/` : ""}`;
  const found = new Map<string, Record<string, unknown>>();
  for (const object of (await env.DATA.list({ prefix })).objects) {
    found.set(object.key, (await (await env.DATA.get(object.key))!.json()) as Record<string, unknown>);
  }
  return found;
}
