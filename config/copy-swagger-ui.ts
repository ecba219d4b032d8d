// Puts the Swagger UI files GET /docs loads (swagger-ui-dist's standalone bundle and stylesheet,
// with its license) into config/public/swagger-ui/, where the Worker serves them as static assets
// through the CONFIG_FILES binding: nothing is fetched from the internet, and 1.9 MB of vendored
// code stays out of git (the folder is ignored) and out of the Worker's script. Run before
// `wrangler dev`, `wrangler deploy` and the tests:
//   node config/copy-swagger-ui.ts
// Idempotent: a file already up to date is not rewritten (wrangler dev would reload for nothing).
// wrangler.toml's [build] runs it before `wrangler dev` and `wrangler deploy`; test/global-setup.ts
// before the Worker tests (the Vitest plugin does not run [build]).
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const CONFIG_DIR = dirname(fileURLToPath(import.meta.url));
export const SWAGGER_UI_DIR = join(CONFIG_DIR, "public", "swagger-ui");

/** Source name in swagger-ui-dist → name served under /static/swagger-ui/. */
const FILES: Record<string, string> = {
  "swagger-ui-bundle.js": "swagger-ui-bundle.js",
  "swagger-ui.css": "swagger-ui.css",
  // Apache-2.0: the license and notice travel with the code.
  LICENSE: "LICENSE.txt",
  NOTICE: "NOTICE.txt",
};

/** The source-map comment points at a .map file that is not copied; browsers would ask for it in vain. */
const SOURCE_MAP_COMMENT = /\n?\/[/*]# sourceMappingURL=[^\n]*\s*$/;

export async function copySwaggerUi(): Promise<string[]> {
  const source = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  await mkdir(SWAGGER_UI_DIR, { recursive: true });
  const written: string[] = [];
  for (const [from, to] of Object.entries(FILES)) {
    const text = (await readFile(join(source, from), "utf8")).replace(SOURCE_MAP_COMMENT, "\n");
    const target = join(SWAGGER_UI_DIR, to);
    const current = await readFile(target, "utf8").catch(() => null);
    if (current === text) continue;
    // Whole or not at all: test projects run their setups side by side, and Miniflare may be reading.
    const partial = `${target}.${process.pid}.tmp`;
    await writeFile(partial, text);
    await rename(partial, target);
    written.push(to);
  }
  return written;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const written = await copySwaggerUi();
  console.log(written.length > 0 ? `swagger-ui: wrote ${written.join(", ")} to ${SWAGGER_UI_DIR}` : "swagger-ui: up to date");
}
