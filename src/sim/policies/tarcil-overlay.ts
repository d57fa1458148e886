/**
 * What one simulated tarcil agent knows beyond the shared view that lags the truth: the RUs it has
 * just picked (its commits in flight) and the RUs it saw taken in a conflict. The agents of the
 * simulator share one RuIndex, as if each followed the store through the same watch; a live
 * agent also applies its own picks to its view at once (`RuIndex.claim` in
 * src/agent/commit.ts), so that its next decisions neither pick those RUs nor score their
 * neighbours as if they were empty. `during()` does the same for one agent's decision: its own
 * in-flight picks are claimed in the shared view with their occupants, and let go after it.
 * Without it an agent's decisions within a commit's round trip all saw the same emptiest servers
 * empty and piled onto them, the more so the larger the sample R.
 */
import type { RuIndex, Occupant } from '../../sampling/ru-index.ts';
import type { World } from '../world.ts';

export class AgentOverlay {
  /** RU → until when it is excluded from this agent's decisions. */
  private readonly until = new Map<number, number>();
  /** Passed to decide() as `exclude`. */
  readonly exclude = new Set<number>();
  /** This agent's own in-flight picks, with the occupant its commit writes. */
  private readonly own = new Map<number, Occupant>();
  private readonly claimed: { server: string; index: number }[] = [];

  constructor(
    private readonly world: World,
    private readonly state: RuIndex,
  ) {}

  /** Excludes `ru` until `until`; `occupant`: the agent's own pick, claimed during its decisions meanwhile. */
  add(ru: number, until: number, occupant?: Occupant): void {
    this.until.set(ru, until);
    this.exclude.add(ru);
    if (occupant) this.own.set(ru, occupant);
    else this.own.delete(ru);
  }

  /** Forgets what the shared view shows by now. */
  prune(now: number): void {
    for (const [ru, until] of this.until) {
      if (until > now) continue;
      this.until.delete(ru);
      this.exclude.delete(ru);
      this.own.delete(ru);
    }
  }

  /** Runs one decision of this agent with its own in-flight picks claimed in the shared view. */
  during<T>(fn: () => T): T {
    const st = this.state;
    const claimed = this.claimed;
    if (this.own.size > 0) {
      st.batch(() => {
        for (const [ru, occ] of this.own) {
          // Only an RU the view still shows free: once the watch shows the commit, it is there already.
          if (!st.available.has(ru)) continue;
          const s = this.world.server(ru);
          const ref = { server: s.spec.id, index: ru - s.base };
          if (st.claim(ref, occ, this)) claimed.push(ref);
        }
      });
    }
    if (claimed.length === 0) return fn();
    try {
      return fn();
    } finally {
      st.batch(() => {
        for (const ref of claimed) st.unclaim(ref, this);
      });
      claimed.length = 0;
    }
  }
}
