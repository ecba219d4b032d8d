// The group commit that D1 calls go through: who travels together, who gets which rows, and what a
// failing statement does to the others in its batch.
import { describe, expect, it } from "vitest";
import { GroupCommit } from "../../worker/storage/group-commit.ts";

/** A fake database: statements are strings, a statement's result is its text upper-cased. */
function fakeDatabase(failing: (statement: string) => boolean = () => false) {
  const batches: string[][] = [];
  const pending: (() => void)[] = [];
  let hold = false;
  const send = async (statements: string[]) => {
    batches.push(statements);
    if (hold) await new Promise<void>((resolve) => pending.push(resolve));
    if (statements.some(failing)) throw new Error(`failed: ${statements.join(",")}`);
    return statements.map((statement) => statement.toUpperCase());
  };
  return {
    send,
    batches,
    holdBatches: () => void (hold = true),
    /** Lets the held batches finish; later ones are held too when `keepHolding`. */
    releaseBatches: (keepHolding = false) => {
      hold = keepHolding;
      for (const release of pending.splice(0)) release();
    },
  };
}

describe("group commit", () => {
  it("sends a lone call at once, as its own batch", async () => {
    const db = fakeDatabase();
    const commit = new GroupCommit(db.send);
    expect(await commit.run(["a", "b"])).toEqual(["A", "B"]);
    expect(await commit.run(["c"])).toEqual(["C"]);
    expect(db.batches).toEqual([["a", "b"], ["c"]]);
  });

  it("sends the calls made while a batch is on the wire together, each getting its own rows", async () => {
    const db = fakeDatabase();
    const commit = new GroupCommit(db.send);
    db.holdBatches();
    const first = commit.run(["first"]);
    const waiting = [commit.run(["x1", "x2"]), commit.run(["y"]), commit.run(["z1", "z2", "z3"])];
    await Promise.resolve();
    expect(db.batches).toEqual([["first"]]);
    db.releaseBatches();
    expect(await first).toEqual(["FIRST"]);
    expect(await Promise.all(waiting)).toEqual([["X1", "X2"], ["Y"], ["Z1", "Z2", "Z3"]]);
    expect(db.batches).toEqual([["first"], ["x1", "x2", "y", "z1", "z2", "z3"]]);
  });

  it("answers no caller before its own statements have been sent and committed", async () => {
    const db = fakeDatabase();
    const commit = new GroupCommit(db.send);
    db.holdBatches();
    const first = commit.run(["first"]);
    let secondDone = false;
    const second = commit.run(["second"]).then(() => (secondDone = true));
    db.releaseBatches(true);
    await first;
    await new Promise((resolve) => setTimeout(resolve, 5));
    // The second batch is on the wire and held: its caller is still waiting.
    expect(db.batches.at(-1)).toEqual(["second"]);
    expect(secondDone).toBe(false);
    db.releaseBatches();
    await second;
    expect(secondDone).toBe(true);
  });

  it("fails only the caller whose statement fails, after retrying the merged batch member by member", async () => {
    const db = fakeDatabase((statement) => statement === "bad");
    const commit = new GroupCommit(db.send);
    db.holdBatches();
    const first = commit.run(["first"]);
    const good = commit.run(["good"]);
    const bad = commit.run(["bad"]);
    const alsoGood = commit.run(["fine", "too"]);
    db.releaseBatches();
    await first;
    await expect(bad).rejects.toThrow("failed: bad");
    expect(await good).toEqual(["GOOD"]);
    expect(await alsoGood).toEqual(["FINE", "TOO"]);
    expect(db.batches).toEqual([["first"], ["good", "bad", "fine", "too"], ["good"], ["bad"], ["fine", "too"]]);
  });

  it("keeps working after a lone call fails", async () => {
    const db = fakeDatabase((statement) => statement === "bad");
    const commit = new GroupCommit(db.send);
    await expect(commit.run(["bad"])).rejects.toThrow("failed: bad");
    expect(await commit.run(["ok"])).toEqual(["OK"]);
  });

  it("lets callers that arrive while a group waits join it, and later ones form the next group", async () => {
    const db = fakeDatabase();
    const commit = new GroupCommit(db.send);
    db.holdBatches();
    const calls = [commit.run(["1"]), commit.run(["2"]), commit.run(["3"])];
    await Promise.resolve();
    db.releaseBatches(true);
    await calls[0];
    // The group of 2 and 3 is now on the wire (held); 4 and 5 wait for it, together.
    await new Promise((resolve) => setTimeout(resolve, 5));
    calls.push(commit.run(["4"]), commit.run(["5"]));
    db.releaseBatches();
    expect(await Promise.all(calls)).toEqual([["1"], ["2"], ["3"], ["4"], ["5"]].map(([s]) => [s!.toUpperCase()]));
    expect(db.batches).toEqual([["1"], ["2", "3"], ["4", "5"]]);
  });
});
