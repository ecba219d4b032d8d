// drizzle-kit for Postgres. `npm run db:generate` writes migrations/postgres; `npm run
// db:migrate:postgres` applies them with the standard libpq variables PGHOST, PGPORT, PGUSER,
// PGPASSWORD, PGDATABASE (PGSSLMODE is honoured by the pg driver) plus PARLEY_PG_NAMESPACE, the
// `database.postgres.namespace` of the gateway's configuration.
import { defineConfig } from "drizzle-kit";

const env = process.env;
const namespace = env.PARLEY_PG_NAMESPACE ?? "public";
if (!/^[A-Za-z_][A-Za-z0-9_$-]{0,62}$/.test(namespace)) {
  throw new Error(`PARLEY_PG_NAMESPACE is not a plain schema name: ${namespace}`);
}

// The migrations name no schema, so search_path decides where the tables go, exactly as the gateway
// picks its namespace at run time. A URL is the only form of dbCredentials that carries `options`.
const url = new URL("postgres://localhost");
url.hostname = env.PGHOST ?? "127.0.0.1";
url.port = env.PGPORT ?? "5432";
url.username = encodeURIComponent(env.PGUSER ?? "postgres");
url.password = encodeURIComponent(env.PGPASSWORD ?? "");
url.pathname = `/${encodeURIComponent(env.PGDATABASE ?? "postgres")}`;
url.searchParams.set("options", `-c search_path="${namespace}"`);

export default defineConfig({
  dialect: "postgresql",
  schema: "./worker/storage/schema-postgres.ts",
  out: "./migrations/postgres",
  dbCredentials: { url: url.toString() },
  // The journal lives inside the namespace (drizzle-kit creates the schema if needed), so several
  // namespaces in one database each track their own migrations.
  migrations: { schema: namespace },
});
