// drizzle-kit for D1: `npm run db:generate` writes SQL into migrations/d1, the folder wrangler.toml
// names as migrations_dir, so `wrangler d1 migrations apply DB` (db:migrate:local) applies it.
import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "sqlite",
  schema: "./worker/storage/schema-d1.ts",
  out: "./migrations/d1",
});
