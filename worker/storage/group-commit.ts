// Group commit: statements that requests of one isolate send to the database while an earlier call
// is still running wait for it and then travel together, as one batch. Every caller still gets its
// own rows only after its statements have been committed, so nothing is answered before it is
// stored; what changes is that ten turns finishing together cost one database round-trip, not ten
// (D1 runs one call at a time per database, so under load its calls, not their SQL, were the limit).
//
// Each batch is sent by one of its own members, from that member's request: a Worker must not leave
// I/O running in a request that has already answered. A merged batch that fails is retried member
// by member, so a statement that fails only fails its own caller.

/** Sends statements as one atomic unit and returns each statement's rows, in order. */
export type SendBatch<S, R> = (statements: S[]) => Promise<R[]>;

interface Member<S, R> {
  statements: S[];
  settle: (outcome: { ok: true; results: R[] } | { ok: false; error: unknown }) => void;
}

export class GroupCommit<S, R> {
  /** The batch on the wire (it never rejects: sendGroup settles its members); null when none is. */
  private inFlight: Promise<void> | null = null;
  /** Callers waiting for the batch on the wire, to be sent together after it. */
  private waiting: Member<S, R>[] | null = null;

  constructor(private readonly send: SendBatch<S, R>) {}

  /** Runs `statements` atomically (with whatever else is waiting) and returns their own results. */
  async run(statements: S[]): Promise<R[]> {
    if (this.waiting) return this.join(this.waiting, statements);
    const group: Member<S, R>[] = [];
    const mine = this.join(group, statements);
    // Its outcome is read after the batch has been sent; until then it must not count as unhandled.
    mine.catch(() => undefined);
    if (this.inFlight) {
      // This caller leads the next batch: later callers join it until the current one settles.
      this.waiting = group;
      await this.inFlight;
      this.waiting = null;
    }
    const sent = this.sendGroup(group);
    this.inFlight = sent;
    await sent;
    if (this.inFlight === sent) this.inFlight = null;
    return mine;
  }

  private join(group: Member<S, R>[], statements: S[]): Promise<R[]> {
    return new Promise<R[]>((resolve, reject) => {
      group.push({ statements, settle: (outcome) => (outcome.ok ? resolve(outcome.results) : reject(outcome.error)) });
    });
  }

  /** Sends a group as one batch and hands every member its slice; never rejects. */
  private async sendGroup(group: Member<S, R>[]): Promise<void> {
    try {
      const results = await this.send(group.flatMap((member) => member.statements));
      let offset = 0;
      for (const member of group) {
        member.settle({ ok: true, results: results.slice(offset, offset + member.statements.length) });
        offset += member.statements.length;
      }
    } catch (error) {
      if (group.length === 1) {
        group[0]!.settle({ ok: false, error });
        return;
      }
      // The batch was rolled back as a whole; each member is tried again on its own.
      await Promise.all(
        group.map(async (member) => {
          try {
            member.settle({ ok: true, results: await this.send(member.statements) });
          } catch (memberError) {
            member.settle({ ok: false, error: memberError });
          }
        }),
      );
    }
  }
}
