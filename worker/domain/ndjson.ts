// Newline-delimited JSON (UTF-8): how a turn's events, and an A2A task's, travel between the Worker
// and the Durable Objects.

/** Parses newline-delimited JSON (UTF-8) into values. */
export function ndjson<T>(): TransformStream<Uint8Array, T> {
  const parse = ndjsonParser<T>();
  const enqueue = (values: T[], controller: TransformStreamDefaultController<T>) => {
    for (const value of values) controller.enqueue(value);
  };
  return new TransformStream<Uint8Array, T>({
    transform: (chunk, controller) => enqueue(parse(chunk), controller),
    flush: (controller) => enqueue(parse(null), controller),
  });
}

/**
 * The values each chunk of newline-delimited JSON completes; `null` ends the input. A chunk that
 * ends no line is only kept, so a long line arriving in many pieces is split once, not per piece.
 */
export function ndjsonParser<T>(): (chunk: Uint8Array | null) => T[] {
  const decoder = new TextDecoder();
  let buffer = "";
  return (chunk) => {
    const text = chunk ? decoder.decode(chunk, { stream: true }) : decoder.decode();
    if (chunk && !text.includes("\n")) {
      buffer += text;
      return [];
    }
    const lines = (buffer + text).split("\n");
    buffer = chunk ? lines.pop()! : "";
    return lines.filter((line) => line !== "").map((line) => JSON.parse(line) as T);
  };
}
