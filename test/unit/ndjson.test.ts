// The NDJSON parser a turn's events are read back with (worker/turn/turn-client.ts).
import { describe, expect, it } from "vitest";
import { ndjson } from "../../worker/domain/ndjson.ts";

async function parse(chunks: Uint8Array[]): Promise<unknown[]> {
  const values: unknown[] = [];
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  for await (const value of source.pipeThrough(ndjson<unknown>())) values.push(value);
  return values;
}

const bytes = (text: string) => new TextEncoder().encode(text);

describe("ndjson", () => {
  it("reads lines however the bytes are cut, a character split between chunks included", async () => {
    const values = [{ a: 1 }, { text: "é😀 line" }, { long: "x".repeat(5_000) }, [1, 2]];
    const whole = bytes(values.map((value) => JSON.stringify(value)).join("\n") + "\n");
    for (const size of [1, 3, 7, 4096, whole.length]) {
      const chunks: Uint8Array[] = [];
      for (let at = 0; at < whole.length; at += size) chunks.push(whole.subarray(at, at + size));
      expect(await parse(chunks)).toEqual(values);
    }
  });

  it("reads a last line without its newline, and skips empty lines", async () => {
    expect(await parse([bytes('{"a":1}\n\n{"b"'), bytes(":2}")])).toEqual([{ a: 1 }, { b: 2 }]);
  });
});
