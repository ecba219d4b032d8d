// MCP servers registered through POST /v1/mcp-servers, kept in the record store so that every
// instance sees them and they survive a restart (the original system held them in process memory).
// Follows sql-store.ts's rules: SQL that SQLite and Postgres both run, writes that RETURN a row.
import { sql } from "drizzle-orm";
import { isoField, jsonValue, numberField, stringListField, textField, toIso } from "./rows.ts";
import type { mcpServers } from "./schema-d1.ts";
import type { Row, SqlRunner } from "./sql-runner.ts";

/** One registered server, as drizzle's table declares it. */
export type RegisteredMcpServer = typeof mcpServers.$inferSelect;

export interface McpServersStore {
  /** Oldest registration first. */
  list(): Promise<RegisteredMcpServer[]>;
  get(name: string): Promise<RegisteredMcpServer | null>;
  /** The stored record, or null when the name is taken (one statement, so two racing registrations cannot both win). */
  create(server: Omit<RegisteredMcpServer, "createdAt"> & { createdAt?: string }): Promise<RegisteredMcpServer | null>;
  /** False when there was no such server. */
  delete(name: string): Promise<boolean>;
}

export function mcpServersStore(db: SqlRunner): McpServersStore {
  return {
    list: async () => (await db.query(sql`SELECT * FROM mcp_servers ORDER BY created_at, name`)).map(decode),

    get: async (name) => {
      const [row] = await db.query(sql`SELECT * FROM mcp_servers WHERE name = ${name}`);
      return row ? decode(row) : null;
    },

    create: async (server) => {
      const createdAt = toIso(server.createdAt ?? new Date());
      const [row] = await db.query(sql`
        INSERT INTO mcp_servers (name, url, provider_id, authorization_headers, headers, timeout, created_by, created_at)
        VALUES (${server.name}, ${server.url}, ${server.providerId}, ${jsonValue(server.authorizationHeaders)},
          ${jsonValue(server.headers)}, ${server.timeout}, ${server.createdBy}, ${createdAt})
        ON CONFLICT (name) DO NOTHING
        RETURNING *`);
      return row ? decode(row) : null;
    },

    delete: async (name) => (await db.query(sql`DELETE FROM mcp_servers WHERE name = ${name} RETURNING name`)).length > 0,
  };
}

function decode(row: Row): RegisteredMcpServer {
  return {
    name: textField(row, "name"),
    url: textField(row, "url"),
    providerId: textField(row, "provider_id"),
    authorizationHeaders: stringRecordField(row, "authorization_headers"),
    headers: stringListField(row, "headers"),
    timeout: row.timeout == null ? null : numberField(row, "timeout"),
    createdBy: textField(row, "created_by"),
    createdAt: isoField(row, "created_at"),
  };
}

// D1 returns JSON columns as text, Postgres jsonb already parsed.
function stringRecordField(row: Row, column: string): Record<string, string> {
  const raw = row[column];
  const value: unknown = typeof raw === "string" ? JSON.parse(raw) : raw;
  if (value === null || typeof value !== "object" || Array.isArray(value) || !Object.values(value).every((v) => typeof v === "string")) {
    throw new TypeError(`column ${column} is not an object of strings`);
  }
  return value as Record<string, string>;
}
