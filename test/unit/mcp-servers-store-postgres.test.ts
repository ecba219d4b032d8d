// The registered-MCP-servers repository against the test Postgres (the server, else an embedded
// PGlite), reached as a Worker reaches it: the Neon driver over a WebSocket, through the local
// WebSocket-to-TCP relay. Nothing is skipped.
import { openStore } from "../../worker/storage/open-store.ts";
import { postgresSchemaPerFile } from "./postgres-schema.ts";
import { describeMcpServersStoreContract } from "../mcp-servers-store-contract.ts";

// openStore takes the Worker env; with postgres settings the D1 binding is never touched.
const NO_D1 = {} as { DB: D1Database };

const schema = postgresSchemaPerFile();
const postgres = schema.settings;

describeMcpServersStoreContract("registered MCP servers in Postgres", async () => openStore(NO_D1, { postgres: await postgres() }));
