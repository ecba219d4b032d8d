// The internal-address rule for MCP server URLs that callers name (worker/mcp/address-guard.ts).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkServerUrl, internalHostReason, normalizeHost, serverUrlError } from "../../worker/mcp/address-guard.ts";

const refused = (url: string, allowed: string[] = []) => {
  const verdict = checkServerUrl(url, allowed);
  return verdict.ok ? null : verdict.reason;
};

describe("checkServerUrl", () => {
  it.each([
    "https://mcp.example.com/mcp",
    "http://mcp.example.com:8080/sse",
    "https://93.184.216.34/mcp",
    "https://[2606:4700:4700::1111]/mcp",
    "https://8.8.8.8/",
    "https://172.32.0.1/",
    "https://100.128.0.1/",
    "https://192.169.0.1/",
  ])("accepts the public address %s", (url) => {
    expect(refused(url)).toBeNull();
  });

  it.each([
    ["http://127.0.0.1:8080/mcp", "a loopback address"],
    ["http://127.9.9.9/", "a loopback address"],
    ["http://localhost/mcp", "an internal host name"],
    ["http://LOCALHOST./mcp", "an internal host name"],
    ["http://api.localhost/", "an internal host name"],
    ["http://0.0.0.0/", "an unspecified address"],
    ["http://10.1.2.3/", "a private address"],
    ["http://172.16.0.1/", "a private address"],
    ["http://172.31.255.255/", "a private address"],
    ["http://192.168.1.10/", "a private address"],
    ["http://100.64.0.1/", "a carrier-grade NAT address"],
    ["http://169.254.1.1/", "a link-local address"],
    ["http://169.254.169.254/latest/meta-data", "a cloud metadata address"],
    ["http://100.100.100.200/", "a cloud metadata address"],
    ["http://168.63.129.16/", "a cloud metadata address"],
    ["http://metadata.google.internal/computeMetadata/v1", "a cloud metadata host"],
    ["http://metadata/", "a cloud metadata host"],
    ["http://printer.local/", "an internal host name"],
    ["http://db.corp.internal/", "an internal host name"],
    ["http://mcp.default.svc/", "an internal host name"],
    ["http://mcp.default.svc.cluster.local/", "an internal host name"],
    ["http://router.home.arpa/", "an internal host name"],
    ["http://intranet-box/", "an internal host name"],
    ["http://127.0.0.1.nip.io/", "a name that resolves to an internal address"],
    ["http://app.localtest.me/", "a name that resolves to an internal address"],
    ["http://224.0.0.1/", "a multicast address"],
    ["http://255.255.255.255/", "a reserved address"],
  ])("refuses %s as %s", (url, reason) => {
    expect(refused(url)).toContain(reason);
  });

  it.each([
    // The URL parser turns every IPv4 spelling into the dotted form before the check sees it.
    ["http://2130706433/", "a loopback address"],
    ["http://0x7f.1/", "a loopback address"],
    ["http://127.1/", "a loopback address"],
    ["http://0177.0.0.1/", "a loopback address"],
    ["http://0xa9fea9fe/", "a cloud metadata address"],
  ])("sees through the IPv4 spelling %s", (url, reason) => {
    expect(refused(url)).toContain(reason);
  });

  it.each([
    ["http://[::1]/", "a loopback address"],
    ["http://[0:0:0:0:0:0:0:1]/", "a loopback address"],
    ["http://[::]/", "an unspecified address"],
    ["http://[::ffff:127.0.0.1]/", "a loopback address"],
    ["http://[::ffff:7f00:1]/", "a loopback address"],
    ["http://[::ffff:169.254.169.254]/", "a cloud metadata address"],
    ["http://[::ffff:10.0.0.1]/", "a private address"],
    ["http://[::127.0.0.1]/", "a loopback address"],
    ["http://[64:ff9b::192.168.0.1]/", "a private address"],
    ["http://[2002:7f00:1::]/", "a loopback address"],
    ["http://[fd00:ec2::254]/", "a cloud metadata address"],
    ["http://[fc00::1]/", "a private address"],
    ["http://[fd12:3456::1]/", "a private address"],
    ["http://[fe80::1]/", "a link-local address"],
    ["http://[fec0::1]/", "a private address"],
    ["http://[ff02::1]/", "a multicast address"],
  ])("refuses the IPv6 address %s as %s", (url, reason) => {
    expect(refused(url)).toContain(reason);
  });

  it("accepts IPv4-mapped forms of public addresses", () => {
    expect(refused("http://[::ffff:8.8.8.8]/")).toBeNull();
    expect(refused("http://[2002:808:808::]/")).toBeNull();
  });

  it("refuses URLs that are not http(s) or not URLs at all", () => {
    expect(refused("ftp://mcp.example.com/")).toBe("must be an http or https URL (scheme http:// or https://)");
    expect(refused("file:///etc/passwd")).toBe("must be an http or https URL (scheme http:// or https://)");
    expect(refused("not a url")).toBe("is not a valid URL");
  });

  it("lets the operator allow named hosts, in any spelling of the same address", () => {
    expect(refused("http://127.0.0.1:9000/mcp", ["127.0.0.1"])).toBeNull();
    expect(refused("http://2130706433/mcp", ["127.0.0.1"])).toBeNull();
    expect(refused("http://[::1]/mcp", ["::1"])).toBeNull();
    expect(refused("http://[::1]/mcp", ["[::1]"])).toBeNull();
    expect(refused("http://MCP.Internal./mcp", ["mcp.internal"])).toBeNull();
    // Allowing one internal host allows no other.
    expect(refused("http://127.0.0.2/mcp", ["127.0.0.1"])).toContain("a loopback address");
    expect(refused("http://localhost/mcp", ["127.0.0.1"])).toContain("an internal host name");
    expect(refused("http://other.internal/mcp", ["mcp.internal"])).toContain("an internal host name");
  });

  it("names the host in the reason", () => {
    expect(refused("http://0x7f.1/")).toBe("names a loopback address (127.0.0.1)");
  });

  it("refuses a zero-padded quad that is internal when its zeros are read as decimal", () => {
    // The URL parser reads 010.031.109.144 as octal (8.25.109.144, public); other software as 10.31.109.144.
    expect(refused("http://010.031.109.144/mcp")).toBe("names a private address (10.31.109.144, its leading zeros read as decimal)");
    expect(refused("HtTpS://user:pass@172.016.023.111:8080/mcp")).toBe("names a private address (172.16.23.111, its leading zeros read as decimal)");
    expect(refused("https://100.064.044.143:80")).toBe("names a carrier-grade NAT address (100.64.44.143, its leading zeros read as decimal)");
    // Public either way.
    expect(refused("http://061.184.216.034/mcp")).toBeNull();
  });
});

describe("serverUrlError", () => {
  it("is a 422 naming the field and how to allow the host", () => {
    const error = serverUrlError("tools[0].server_url", "http://localhost:1/mcp", []);
    expect(error?.status).toBe(422);
    expect(error?.body).toEqual({
      detail: {
        response: "Invalid attribute value",
        cause:
          "tools[0].server_url: names an internal host name (localhost); an operator can allow the host in mcp_security.allowed_internal_hosts",
      },
    });
    expect(serverUrlError("url", "https://mcp.example.com/", [])).toBeUndefined();
    expect(serverUrlError("url", "gopher://x/", [])?.cause).toBe("url: must be an http or https URL (scheme http:// or https://)");
  });
});

describe("helpers", () => {
  it("normalizeHost", () => {
    expect(normalizeHost("[::FFFF:127.0.0.1]")).toBe("::ffff:7f00:1");
    expect(normalizeHost("Example.COM.")).toBe("example.com");
    expect(normalizeHost("127.1")).toBe("127.0.0.1");
  });

  it("internalHostReason is null for public names", () => {
    expect(internalHostReason("mcp.example.com")).toBeNull();
    expect(internalHostReason("internal.example.com")).toBeNull();
  });
});

describe("every spelling of an address gets the same verdict", () => {
  it("dotted, integer and IPv4-mapped IPv6 forms agree", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (address) => {
        const octets = [address >>> 24, (address >>> 16) & 255, (address >>> 8) & 255, address & 255];
        const dotted = refused(`http://${octets.join(".")}/`);
        const hex = (n: number) => n.toString(16);
        expect(refused(`http://${address}/`)).toBe(dotted);
        const mapped = refused(`http://[::ffff:${hex(address >>> 16)}:${hex(address & 0xffff)}]/`);
        expect(mapped === null).toBe(dotted === null);
      }),
    );
  });
});
