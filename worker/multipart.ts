// Reading one file out of a multipart/form-data request without holding it in memory. A Worker has
// 128 MB, and uploads may be 100 MiB, so `request.formData()` (which buffers everything) is no
// option: the file part is handed on as a stream, counted as it passes, and cut off at the limit.
import { ApiError, errors } from "./errors.ts";
import { readOut } from "./validation.ts";

export interface UploadedFile {
  filename: string;
  /** The part's Content-Type, application/octet-stream when it names none. */
  type: string;
  /** The part's bytes as they arrive. Errors once they exceed the limit or the body is malformed. */
  body: ReadableStream<Uint8Array>;
  /** Why `body` stopped early, once it has: whoever consumed it sees only a broken stream. */
  failure(): ApiError | null;
  /** Aborts when `body` stops early, so a request it feeds can be abandoned rather than left half sent. */
  signal: AbortSignal;
  /** Reads out what is left of the request body (see BodyBuffer.release): await it before answering an error. */
  release(): Promise<void>;
}

/** Room for the multipart framing and small fields besides the file. */
export const MULTIPART_OVERHEAD_BYTES = 64 * 1024;
const MAX_PART_HEADER_BYTES = 16 * 1024;

const encoder = new TextEncoder();
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
const CRLF = encoder.encode("\r\n");
const HEADERS_END = encoder.encode("\r\n\r\n");
const CLOSE = encoder.encode("--");

function indexOf(haystack: Uint8Array, needle: Uint8Array, from = 0): number {
  const first = needle[0]!;
  for (let at = haystack.indexOf(first, from); at !== -1 && at <= haystack.length - needle.length; at = haystack.indexOf(first, at + 1)) {
    let matched = 1;
    while (matched < needle.length && haystack[at + matched] === needle[matched]) matched += 1;
    if (matched === needle.length) return at;
  }
  return -1;
}

function startsWith(bytes: Uint8Array, prefix: Uint8Array): boolean {
  return bytes.length >= prefix.length && prefix.every((byte, index) => bytes[index] === byte);
}

/** The unread part of the body, refilled from the stream on demand. */
class BodyBuffer {
  bytes: Uint8Array;
  /** Bytes read from the body so far. */
  total = 0;
  private ended = false;

  constructor(
    private readonly reader: ReadableStreamDefaultReader<Uint8Array>,
    initial: Uint8Array,
  ) {
    this.bytes = initial;
  }

  /** Reads one more chunk; false at the end of the body. */
  async more(): Promise<boolean> {
    if (this.ended) return false;
    const { value, done } = await this.reader.read();
    if (done) {
      this.ended = true;
      return false;
    }
    this.total += value.byteLength;
    const joined = new Uint8Array(this.bytes.length + value.byteLength);
    joined.set(this.bytes);
    joined.set(value, this.bytes.length);
    this.bytes = joined;
    return true;
  }

  async ensure(count: number): Promise<boolean> {
    while (this.bytes.length < count) if (!(await this.more())) return false;
    return true;
  }

  take(count: number): Uint8Array {
    const taken = this.bytes.subarray(0, count);
    this.bytes = this.bytes.subarray(count);
    return taken;
  }

  /**
   * Done with the body, answered or not: reads what is left of it without keeping it, then lets it
   * go (validation.ts readOut). A body cut off while the client is still sending it closes the
   * connection under the client, which may then lose the answer (wrangler dev's proxy answered a
   * 5 MB part header with "Network connection lost" instead of the 422).
   */
  async release(): Promise<void> {
    this.bytes = new Uint8Array(0);
    if (this.ended) return;
    this.ended = true;
    await readOut(this.reader);
  }
}

function boundaryOf(contentType: string | null): string | null {
  if (!contentType || !/^multipart\/form-data\s*(;|$)/i.test(contentType)) return null;
  const match = /;\s*boundary=(?:"([^"]{1,70})"|([^;\s]{1,70}))/i.exec(contentType);
  return match ? (match[1] ?? match[2]!) : null;
}

/** Content-Disposition parameters (name, filename; RFC 5987 filename* preferred when present). */
function dispositionParameters(header: string): Map<string, string> {
  const parameters = new Map<string, string>();
  for (const match of header.matchAll(/;\s*([^=;\s]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)/g)) {
    const raw = match[2]!.trim();
    parameters.set(match[1]!.toLowerCase(), raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, "$1") : raw);
  }
  const extended = /^[^']*'[^']*'(.*)$/.exec(parameters.get("filename*") ?? "");
  if (extended) {
    try {
      parameters.set("filename", decodeURIComponent(extended[1]!));
    } catch {
      // a malformed filename* leaves the plain filename in place
    }
  }
  return parameters;
}

/**
 * Finds the part named `field` in a multipart/form-data request and returns it as a stream of at
 * most `maxBytes`. Content-Length is checked first, so an announced oversize body is refused before
 * a byte is read; the stream counts anyway, because Content-Length may be absent or wrong.
 * Throws ApiError 422 for a body that is not multipart or has no such file part, 413 when the
 * body announces more than the limit allows.
 */
export async function streamFilePart(request: Request, field: string, maxBytes: number): Promise<UploadedFile> {
  const boundary = boundaryOf(request.headers.get("content-type"));
  if (boundary === null) throw errors.invalidFormat(`expected a multipart/form-data body with a '${field}' file`);
  const declared = Number(request.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(declared) && declared > maxBytes + MULTIPART_OVERHEAD_BYTES) throw errors.fileTooLarge(maxBytes);
  if (!request.body) throw errors.missingAttributes(field);

  // Every delimiter is CRLF--boundary; a CRLF put in front lets the first one match like the rest.
  const delimiter = encoder.encode(`\r\n--${boundary}`);
  const body = new BodyBuffer(request.body.getReader(), CRLF.slice());
  /** `error`, once the rest of the body has been read (see release). */
  const refusal = async (error: ApiError) => {
    await body.release();
    return error;
  };
  const malformed = (what: string) => refusal(errors.invalidFormat(`malformed multipart body: ${what}`));

  /** Discards everything up to and including the next delimiter. */
  const skipPastDelimiter = async () => {
    for (;;) {
      // Whatever precedes the file counts against the room left beside it: a form of many or large
      // fields, however small its file.
      if (body.total > MULTIPART_OVERHEAD_BYTES) {
        throw await malformed(`the fields before the '${field}' part take more than ${MULTIPART_OVERHEAD_BYTES} bytes (too many or too large fields)`);
      }
      const at = indexOf(body.bytes, delimiter);
      if (at >= 0) {
        body.take(at + delimiter.length);
        return;
      }
      body.take(Math.max(0, body.bytes.length - (delimiter.length - 1)));
      if (!(await body.more())) throw await malformed("it ended before its closing boundary");
    }
  };

  await skipPastDelimiter();
  for (;;) {
    if (!(await body.ensure(2))) throw await malformed("it ended after a boundary");
    if (startsWith(body.bytes, CLOSE)) throw await refusal(errors.missingAttributes(field));
    if (!startsWith(body.bytes, CRLF)) throw await malformed("a boundary is not followed by a line break");
    body.take(2);

    let headerEnd = indexOf(body.bytes, HEADERS_END);
    while (headerEnd < 0) {
      if (body.bytes.length > MAX_PART_HEADER_BYTES) throw await malformed("part headers are too long");
      if (!(await body.more())) throw await malformed("it ended inside part headers");
      headerEnd = indexOf(body.bytes, HEADERS_END);
    }
    const headers = new Map<string, string>();
    let text: string;
    try {
      text = utf8.decode(body.take(headerEnd));
    } catch {
      throw await malformed("a part's headers (its file name) are not valid UTF-8");
    }
    for (const line of text.split("\r\n")) {
      const colon = line.indexOf(":");
      if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
    }
    body.take(HEADERS_END.length);
    const disposition = dispositionParameters(headers.get("content-disposition") ?? "");
    if (disposition.get("name") === field) {
      const filename = disposition.get("filename");
      if (filename === undefined) throw await refusal(errors.invalidValue(`${field}: expected a file, got a plain form field`));
      return filePart(body, delimiter, maxBytes, filename, headers.get("content-type") || "application/octet-stream");
    }
    await skipPastDelimiter();
  }
}

function filePart(body: BodyBuffer, delimiter: Uint8Array, maxBytes: number, filename: string, type: string): UploadedFile {
  let failure: ApiError | null = null;
  let bytes = 0;
  const aborted = new AbortController();
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const fail = async (error: ApiError) => {
        failure = error;
        // Read out before the request it feeds fails, which answers the client.
        await body.release();
        aborted.abort(error);
        controller.error(error);
      };
      const emit = async (chunk: Uint8Array): Promise<boolean> => {
        bytes += chunk.byteLength;
        if (bytes > maxBytes) {
          await fail(errors.fileTooLarge(maxBytes));
          return false;
        }
        if (chunk.byteLength > 0) controller.enqueue(chunk);
        return true;
      };
      try {
        // One chunk per pull, so the consumer's pace sets how fast the body is read.
        for (;;) {
          const at = indexOf(body.bytes, delimiter);
          if (at >= 0) {
            if (await emit(body.take(at))) {
              // The rest of the body (the closing boundary, fields after the file) is not needed.
              await body.release();
              controller.close();
            }
            return;
          }
          const safe = body.bytes.length - (delimiter.length - 1);
          if (safe > 0) {
            await emit(body.take(safe));
            return;
          }
          if (!(await body.more())) {
            await fail(errors.invalidFormat("malformed multipart body: it ended inside the file"));
            return;
          }
        }
      } catch (error) {
        await fail(error instanceof ApiError ? error : errors.invalidFormat("the request body could not be read"));
      }
    },
    cancel() {
      return body.release();
    },
  });
  return { filename, type, body: stream, failure: () => failure, signal: aborted.signal, release: () => body.release() };
}
