// The behaviour of the exported-data index (data_objects) and of leases, written once and run
// against each backend: test/unit/data-store-postgres.test.ts (real Postgres through the WebSocket
// relay) and test/worker/data-store-d1.test.ts (D1 inside workerd). The contract owns the tables of
// the database it is given: they are emptied before each test, since "oldest unsent" is a question
// about the whole table.
import { sql } from "drizzle-orm";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { dataObjectsStore, type DataObjectsStore } from "../worker/storage/data-objects-store.ts";
import { leasesStore, type LeasesStore } from "../worker/storage/leases-store.ts";
import type { SqlRunner } from "../worker/storage/sql-runner.ts";

const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

export function describeDataStoreContract(name: string, makeRunner: () => SqlRunner | Promise<SqlRunner>): void {
  describe(name, () => {
    let db: SqlRunner;
    let objects: DataObjectsStore;
    let leases: LeasesStore;
    beforeEach(async () => {
      db = await makeRunner();
      await db.query(sql`DELETE FROM data_objects`);
      await db.query(sql`DELETE FROM leases`);
      objects = dataObjectsStore(db);
      leases = leasesStore(db);
    });
    afterEach(async () => {
      await db.close();
    });

    const at = (minute: number) => new Date(Date.UTC(2025, 0, 1, 0, minute)).toISOString();

    describe("data_objects", () => {
      it("indexes an object once; a repeated record changes nothing", async () => {
        expect(await objects.record({ key: "fb/a.json", kind: "feedback", bytes: 10, createdAt: "2025-01-01T02:00:00+02:00" })).toBe(true);
        expect(await objects.record({ key: "fb/a.json", kind: "transcript", bytes: 99, createdAt: at(30) })).toBe(false);
        expect(await objects.get("fb/a.json")).toEqual({
          key: "fb/a.json",
          kind: "feedback",
          bytes: 10,
          createdAt: "2025-01-01T00:00:00.000Z",
          sentAt: null,
          archive: null,
        });
        expect(await objects.get("fb/none.json")).toBeNull();
      });

      it("lists unsent objects in no batch oldest first, then by key, up to the limit", async () => {
        await objects.record({ key: "t/c.json", kind: "transcript", bytes: 1, createdAt: at(2) });
        await objects.record({ key: "t/b.json", kind: "transcript", bytes: 1, createdAt: at(1) });
        await objects.record({ key: "t/a.json", kind: "transcript", bytes: 1, createdAt: at(2) });
        await objects.record({ key: "f/z.json", kind: "feedback", bytes: 1, createdAt: at(0) });
        expect((await objects.unbatched(10)).map((o) => o.key)).toEqual(["f/z.json", "t/b.json", "t/a.json", "t/c.json"]);
        expect((await objects.unbatched(2)).map((o) => o.key)).toEqual(["f/z.json", "t/b.json"]);
        const first = (await objects.unbatched(1))[0]!;
        expect(first.createdAt).toMatch(ISO_UTC);
      });

      it("marks sent only unsent objects, once, with the archive name", async () => {
        await objects.record({ key: "k1", kind: "feedback", bytes: 1, createdAt: at(0) });
        await objects.record({ key: "k2", kind: "feedback", bytes: 1, createdAt: at(1) });
        await objects.record({ key: "k3", kind: "feedback", bytes: 1, createdAt: at(2) });
        expect(await objects.markSent(["k1", "k2", "unknown"], "parley-1.tar.gz", "2025-02-01T00:00:00.000Z")).toBe(2);
        expect(await objects.markSent(["k1", "k2"], "parley-2.tar.gz", "2025-03-01T00:00:00.000Z")).toBe(0);
        expect(await objects.markSent([], "parley-3.tar.gz", at(0))).toBe(0);
        expect(await objects.get("k1")).toMatchObject({ sentAt: "2025-02-01T00:00:00.000Z", archive: "parley-1.tar.gz" });
        expect((await objects.unbatched(10)).map((o) => o.key)).toEqual(["k3"]);
      });

      it("records a batch before its upload: its objects leave the unbatched list and come back as that batch until sent", async () => {
        for (const [key, minute] of [["b1", 1], ["b2", 2], ["b3", 3], ["n1", 0]] as const) {
          await objects.record({ key, kind: "transcript", bytes: 1, createdAt: at(minute) });
        }
        expect(await objects.recordedBatch()).toEqual([]);
        expect(await objects.recordBatch(["b2", "b1", "unknown"], "parley-b.tar.gz")).toBe(2);
        expect(await objects.recordBatch(["b3"], "parley-c.tar.gz")).toBe(1);
        expect((await objects.unbatched(10)).map((o) => o.key)).toEqual(["n1"]);
        // The oldest recorded batch first, whole, oldest object first.
        expect((await objects.recordedBatch()).map((o) => [o.key, o.archive, o.sentAt])).toEqual([
          ["b1", "parley-b.tar.gz", null],
          ["b2", "parley-b.tar.gz", null],
        ]);
        expect(await objects.markSent(["b1", "b2"], "parley-b.tar.gz", at(10))).toBe(2);
        expect((await objects.recordedBatch()).map((o) => o.key)).toEqual(["b3"]);
        // A sent object is never recorded into another batch.
        expect(await objects.recordBatch(["b1", "b3"], "parley-d.tar.gz")).toBe(1);
        expect(await objects.get("b1")).toMatchObject({ archive: "parley-b.tar.gz" });
        await objects.markSent(["b3"], "parley-d.tar.gz", at(11));
        expect(await objects.recordedBatch()).toEqual([]);
      });

      it("handles key lists longer than one statement may bind (D1 allows 100 parameters)", async () => {
        const keys = Array.from({ length: 230 }, (_, i) => `bulk/${String(i).padStart(3, "0")}.json`);
        for (const key of keys) await objects.record({ key, kind: "transcript", bytes: 5, createdAt: at(0) });
        expect(await objects.recordBatch(keys.slice(0, 200), "parley-bulk.tar.gz")).toBe(200);
        expect(await objects.recordedBatch()).toHaveLength(200);
        expect(await objects.markSent(keys.slice(0, 200), "parley-bulk.tar.gz", at(5))).toBe(200);
        expect((await objects.unbatched(500)).map((o) => o.key)).toEqual(keys.slice(200));
        expect(await objects.remove(keys)).toBe(230);
        expect(await objects.unbatched(500)).toEqual([]);
      });

      it("finds objects sent before a time, oldest sent first, and removes rows", async () => {
        for (const key of ["s1", "s2", "s3", "u1"]) await objects.record({ key, kind: "feedback", bytes: 1, createdAt: at(0) });
        await objects.markSent(["s2"], "a2", at(10));
        await objects.markSent(["s1"], "a1", at(20));
        await objects.markSent(["s3"], "a3", at(40));
        expect((await objects.sentBefore(at(30), 10)).map((o) => [o.key, o.archive])).toEqual([
          ["s2", "a2"],
          ["s1", "a1"],
        ]);
        expect((await objects.sentBefore(at(30), 1)).map((o) => o.key)).toEqual(["s2"]);
        expect(await objects.remove(["s2", "s1", "gone"])).toBe(2);
        expect(await objects.get("s1")).toBeNull();
        expect((await objects.unbatched(10)).map((o) => o.key)).toEqual(["u1"]);
      });
    });

    describe("leases", () => {
      it("is taken when free, refused while another holder's is unexpired, taken over once it expired", async () => {
        expect(await leases.acquire("job", "a", at(10), at(0))).toBe(true);
        expect(await leases.get("job")).toEqual({ name: "job", holder: "a", expiresAt: at(10) });
        expect(await leases.acquire("job", "b", at(12), at(5))).toBe(false);
        // The holder may take it again (extending it).
        expect(await leases.acquire("job", "a", at(15), at(5))).toBe(true);
        expect(await leases.acquire("job", "b", at(20), at(14))).toBe(false);
        expect(await leases.acquire("job", "b", at(30), at(15))).toBe(true);
        expect(await leases.get("job")).toEqual({ name: "job", holder: "b", expiresAt: at(30) });
        // Leases are independent by name.
        expect(await leases.acquire("other", "a", at(30), at(15))).toBe(true);
      });

      it("renews only for its holder; a holder that lost it is told so", async () => {
        await leases.acquire("job", "a", at(10), at(0));
        expect(await leases.renew("job", "a", at(20))).toBe(true);
        expect(await leases.get("job")).toMatchObject({ expiresAt: at(20) });
        await leases.acquire("job", "b", at(40), at(25));
        expect(await leases.renew("job", "a", at(50))).toBe(false);
        expect(await leases.get("job")).toEqual({ name: "job", holder: "b", expiresAt: at(40) });
        expect(await leases.renew("nothing", "a", at(50))).toBe(false);
      });

      it("is released only by its holder, and is then free", async () => {
        await leases.acquire("job", "a", at(10), at(0));
        expect(await leases.release("job", "b")).toBe(false);
        expect(await leases.release("job", "a")).toBe(true);
        expect(await leases.release("job", "a")).toBe(false);
        expect(await leases.get("job")).toBeNull();
        expect(await leases.acquire("job", "b", at(10), at(1))).toBe(true);
      });

      it("of several holders racing for a free lease, exactly one wins", async () => {
        const runners = await Promise.all(Array.from({ length: 4 }, () => makeRunner()));
        try {
          const won = await Promise.all(runners.map((runner, i) => leasesStore(runner).acquire("race", `h${i}`, at(10), at(0))));
          expect(won.filter(Boolean)).toHaveLength(1);
          expect((await leases.get("race"))?.holder).toBe(`h${won.indexOf(true)}`);
        } finally {
          await Promise.all(runners.map((runner) => runner.close()));
        }
      });
    });
  });
}
