// Search hits as chunks and referenced documents (worker/rag/documents.ts): portal URLs.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../worker/config/load.ts";
import type { Config } from "../../worker/config/schema.ts";
import { retrievedFromHit } from "../../worker/rag/documents.ts";

function configWith(portalUrl: string): Config {
  const parsed = parseConfig(`inference_backend:\n  url: http://127.0.0.1:8321/v1\nrag:\n  inline: [okp]\nportal:\n  portal_url: "${portalUrl}"\n  offline: true\n`, {});
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.config;
}

const portalHit = (parentId: string) => ({ fileId: "f", filename: "page", score: 1, text: "chunk", attributes: { parent_id: parentId } });

describe("offline portal document URLs", () => {
  it("resolve the chunk's parent id against the portal URL as a link is (the original's urljoin)", () => {
    const url = (base: string, parent: string) => retrievedFromHit(configWith(base), "portal-rag", portalHit(parent)).document.doc_url;
    // An absolute path replaces the base's path (the original's rhokp_url is its Solr address).
    expect(url("http://localhost:8081/solr", "/documentation/en-us/openshift/install")).toBe("http://localhost:8081/documentation/en-us/openshift/install");
    // A relative one joins the base's folder.
    expect(url("https://mirror.example.internal/docs/", "openshift/4.18/installing")).toBe("https://mirror.example.internal/docs/openshift/4.18/installing");
    // A whole URL stands as it is.
    expect(url("https://mirror.example.internal/docs/", "https://access.example.com/a")).toBe("https://access.example.com/a");
  });
});
