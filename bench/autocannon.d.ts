// The part of autocannon's programmatic API the benchmark uses. autocannon ships no types and
// @types/autocannon describes version 7; these few lines are checked against 9.0.0's lib/run.js.
declare module "autocannon" {
  import type { EventEmitter } from "node:events";

  namespace autocannon {
    interface Client {
      setBody(body: string): void;
    }
    interface Options {
      url: string;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      connections?: number;
      /** Total requests; when set, `duration` is ignored. */
      amount?: number;
      duration?: number;
      pipelining?: number;
      /** Seconds before a request counts as timed out. */
      timeout?: number;
      /** Milliseconds between autocannon's own samples; it notices the end only at a sample. */
      sampleInt?: number;
      setupClient?: (client: Client) => void;
    }
    interface Result {
      errors: number;
      timeouts: number;
      non2xx: number;
      duration: number;
    }
    interface Instance extends EventEmitter {
      stop(): void;
      on(event: "response", listener: (client: Client, statusCode: number, bytes: number, responseTimeMs: number) => void): this;
      on(event: "reqError", listener: (error: Error) => void): this;
      on(event: string, listener: (...args: unknown[]) => void): this;
    }
  }

  function autocannon(options: autocannon.Options, callback: (error: Error | null, result: autocannon.Result) => void): autocannon.Instance;
  export = autocannon;
}
