// The exported-data index and leases (test/data-store-contract.ts) against the test Postgres (the
// server, else an embedded PGlite), reached as a Worker reaches it: the Neon driver over a
// WebSocket, through the local relay. The suite has a schema of its own; nothing is skipped.
import { postgresRunner } from "../../worker/storage/postgres-runner.ts";
import { postgresSchemaPerFile } from "./postgres-schema.ts";
import { describeDataStoreContract } from "../data-store-contract.ts";

const schema = postgresSchemaPerFile();
const postgres = schema.settings;

describeDataStoreContract("data_objects and leases on Postgres", async () => postgresRunner(await postgres()));
