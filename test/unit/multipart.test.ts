import { describe, expect, it } from "vitest";
import { ApiError } from "../../worker/errors.ts";
import { MULTIPART_OVERHEAD_BYTES, streamFilePart } from "../../worker/multipart.ts";

const BOUNDARY = "----parley-test-boundary";
const encoder = new TextEncoder();

/** A request whose body arrives in `chunkSize`-byte pieces, with no Content-Length unless given. */
function multipartRequest(body: string | Uint8Array, options: { chunkSize?: number; contentLength?: number; contentType?: string } = {}): Request {
  const bytes = typeof body === "string" ? encoder.encode(body) : body;
  const chunkSize = options.chunkSize ?? 7;
  let offset = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + chunkSize));
      offset += chunkSize;
    },
  });
  const headers = new Headers({ "content-type": options.contentType ?? `multipart/form-data; boundary=${BOUNDARY}` });
  if (options.contentLength !== undefined) headers.set("content-length", String(options.contentLength));
  return new Request("http://parley.test/v1/files", { method: "POST", body: stream, headers, duplex: "half" } as RequestInit);
}

function form(parts: Array<{ name: string; filename?: string; type?: string; content: string }>, preamble = ""): string {
  const encoded = parts.map((part) => {
    const disposition = `form-data; name="${part.name}"${part.filename === undefined ? "" : `; filename="${part.filename}"`}`;
    const type = part.type ? `\r\nContent-Type: ${part.type}` : "";
    return `--${BOUNDARY}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n${part.content}\r\n`;
  });
  return `${preamble}${encoded.join("")}--${BOUNDARY}--\r\n`;
}

async function rejection(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  if (!(error instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(error)}`);
  return error;
}

/** An upload whose body comes from `stream`, as a client sending it in pieces. */
function streamedUpload(stream: ReadableStream<Uint8Array>): Request {
  return new Request("http://parley.test/v1/files", {
    method: "POST",
    body: stream,
    headers: { "content-type": `multipart/form-data; boundary=${BOUNDARY}` },
    duplex: "half",
  } as RequestInit);
}

describe("streamFilePart", () => {
  it("streams the file part, skipping other fields, across chunk boundaries", async () => {
    const content = `line one\r\n--${BOUNDARY.slice(0, 10)} not a boundary\r\n` + "x".repeat(100);
    const request = multipartRequest(
      form([
        { name: "purpose", content: "assistants" },
        { name: "file", filename: "notes.txt", type: "text/plain", content },
        { name: "after", content: "ignored" },
      ]),
    );
    const file = await streamFilePart(request, "file", 1000);
    expect(file).toMatchObject({ filename: "notes.txt", type: "text/plain" });
    expect(await new Response(file.body).text()).toBe(content);
    expect(file.failure()).toBeNull();
  });

  it("accepts a preamble, a default type and an RFC 5987 filename", async () => {
    const body =
      `preamble\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="x"; filename*=UTF-8''r%C3%A9sum%C3%A9.md\r\n\r\n` +
      `data\r\n--${BOUNDARY}--`;
    const file = await streamFilePart(multipartRequest(body, { chunkSize: 3 }), "file", 100);
    expect(file).toMatchObject({ filename: "résumé.md", type: "application/octet-stream" });
    expect(await new Response(file.body).text()).toBe("data");
  });

  it("allows a file of exactly the limit and errors the stream one byte past it", async () => {
    const exact = await streamFilePart(multipartRequest(form([{ name: "file", filename: "a", content: "y".repeat(50) }])), "file", 50);
    expect(await new Response(exact.body).text()).toHaveLength(50);

    const over = await streamFilePart(multipartRequest(form([{ name: "file", filename: "a", content: "y".repeat(51) }])), "file", 50);
    await expect(new Response(over.body).text()).rejects.toBeInstanceOf(ApiError);
    expect(over.failure()).toMatchObject({ status: 413, response: "File too large" });
  });

  it("refuses an announced oversize body before reading it", async () => {
    const error = await rejection(streamFilePart(multipartRequest("", { contentLength: 50 + MULTIPART_OVERHEAD_BYTES + 1 }), "file", 50));
    expect(error).toMatchObject({ status: 413, response: "File too large" });
  });

  it("refuses oversize fields before the file as a malformed form, not a large file", async () => {
    const body = form([{ name: "junk", content: "z".repeat(MULTIPART_OVERHEAD_BYTES + 10) }, { name: "file", filename: "a", content: "x" }]);
    const error = await rejection(streamFilePart(multipartRequest(body, { chunkSize: 4096 }), "file", 50));
    expect(error).toMatchObject({
      status: 422,
      response: "Invalid request format",
      cause: `malformed multipart body: the fields before the 'file' part take more than ${MULTIPART_OVERHEAD_BYTES} bytes (too many or too large fields)`,
    });
  });

  it("refuses 10,000 small fields before a 3-byte file with 422, not 413 File too large", async () => {
    const fields = Array.from({ length: 10_000 }, (_, index) => ({ name: `f${index}`, content: "v" }));
    const body = form([...fields, { name: "file", filename: "a.txt", content: "abc" }]);
    const error = await rejection(streamFilePart(multipartRequest(body, { chunkSize: 64 * 1024 }), "file", 100 * 1024 * 1024));
    expect(error).toMatchObject({ status: 422, response: "Invalid request format" });
    expect(error.cause).toContain("too many or too large fields");
  });

  it("reads a refused body to its end rather than cutting it, so the client sees the answer", async () => {
    // A connection closed while the client is still sending loses the answer (wrangler dev's proxy
    // reported "Network connection lost" for a 5 MB part header).
    const cases: Array<[string, string]> = [
      ["part headers are too long", `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\nX-Pad: ${"a".repeat(5_000_000)}\r\n\r\nabc\r\n--${BOUNDARY}--\r\n`],
      ["too many or too large fields", form([{ name: "junk", content: "z".repeat(3_000_000) }, { name: "file", filename: "a", content: "x" }])],
      ["a boundary is not followed by a line break", `--${BOUNDARY}XX${"q".repeat(1_000_000)}`],
    ];
    for (const [cause, text] of cases) {
      const bytes = encoder.encode(text);
      let offset = 0;
      let cancelled = false;
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (offset >= bytes.length) return controller.close();
          controller.enqueue(bytes.slice(offset, offset + 64 * 1024));
          offset += 64 * 1024;
        },
        cancel() {
          cancelled = true;
        },
      });
      const error = await rejection(streamFilePart(streamedUpload(stream), "file", 100 * 1024 * 1024));
      expect(error.status, cause).toBe(422);
      expect(error.cause, cause).toContain(cause);
      expect({ cancelled, read: offset >= bytes.length }, cause).toEqual({ cancelled: false, read: true });
    }
  });

  it("stops reading a refused body after 64 MiB more of it", async () => {
    let sent = 0;
    let cancelled = false;
    const block = new Uint8Array(1024 * 1024).fill(97);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\nX-Pad: `));
      },
      pull(controller) {
        controller.enqueue(block);
        sent += 1;
      },
      cancel() {
        cancelled = true;
      },
    });
    const error = await rejection(streamFilePart(streamedUpload(stream), "file", 4 * 1024 * 1024));
    expect(error.cause).toContain("part headers are too long");
    expect(cancelled).toBe(true);
    // Read out as a refused turn body is (validation.ts readOut): 64 MiB more at most.
    expect(sent).toBeGreaterThan(64);
    expect(sent).toBeLessThan(64 + 8);
  });

  it("answers 422 for bodies without the file", async () => {
    const missing = await rejection(streamFilePart(multipartRequest(form([{ name: "other", filename: "a", content: "x" }])), "file", 50));
    expect(missing).toMatchObject({ status: 422, response: "Missing required attributes", cause: "file" });

    const plain = await rejection(streamFilePart(multipartRequest(form([{ name: "file", content: "just text" }])), "file", 50));
    expect(plain).toMatchObject({ status: 422, response: "Invalid attribute value" });

    const notMultipart = await rejection(streamFilePart(multipartRequest("{}", { contentType: "application/json" }), "file", 50));
    expect(notMultipart).toMatchObject({ status: 422, response: "Invalid request format" });

    const truncated = await rejection(streamFilePart(multipartRequest(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="x"\r\n\r\nabc`), "file", 50));
    expect(truncated).toMatchObject({ status: 422, response: "Invalid request format" });
  });

  it("errors the stream when the body ends inside the file", async () => {
    const file = await streamFilePart(multipartRequest(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nabc`), "file", 50);
    await expect(new Response(file.body).text()).rejects.toBeInstanceOf(ApiError);
    expect(file.failure()).toMatchObject({ status: 422 });
  });
});
