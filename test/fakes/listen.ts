// Where the fakes listen: by default a free port on loopback, chosen by the system.
import { readFileSync } from "node:fs";
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

/**
 * A port that was free a moment ago on 127.0.0.1: bound, then released. For a server about to
 * start on it; not for an address that must stay refused, since the system may hand the same port
 * to the next server that listens on port 0 (see closedPort).
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  const port = await listenOn(server);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A port on 127.0.0.1 that nothing listens on, for the whole run: below the system's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range), which a listen on port 0 never picks, so no fake or
 * Worker started later can take it (freePort's port was taken by a later fake in a long run, and a
 * "down" backend answered). Checked free now by binding it.
 */
export async function closedPort(): Promise<number> {
  const ephemeralStart = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  const lowest = 20000;
  const span = Math.max(1, Math.min(ephemeralStart, 32768) - lowest);
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = lowest + Math.floor(Math.random() * span);
    const server = createServer();
    const bound = await listenOn(server, port).then(
      () => true,
      () => false,
    );
    if (!bound) continue;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return port;
  }
  throw new Error("no closed port found below the ephemeral range");
}
