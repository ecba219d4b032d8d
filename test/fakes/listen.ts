// Where the fakes listen: by default a free port on loopback, chosen by the system.
import { createServer, type Server } from "node:net";

/** Starts `server` on `host`:`port` (0: a free port) and returns the port (rejects if it cannot listen). */
export async function listenOn(server: Server, port = 0, host = "127.0.0.1"): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("the server has no TCP address");
  return address.port;
}

/** A port that was free a moment ago on 127.0.0.1: bound, then released, so a connection to it is refused. */
export async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listenOn(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
