/**
 * The node's side of its lease and the front-ends' wait for it, stated once. A node that loses
 * contact with the store keeps its tasks until its deadline: the send time of its last confirmed
 * keepalive + the lease TTL + its disconnect grace. Its monitor enforces the deadline when it can
 * (`NodeConnection`), and each task's supervisor enforces it on its own clock when the monitor
 * cannot (frozen, dead): the monitor writes the deadline to a local file, the supervisor reads it
 * and kills the task once it has passed, however long the monitor has been silent. A front-end
 * places a node's tasks elsewhere only once the node's lease expired in the store (never before
 * that send time + TTL) and the grace plus {@link fenceMarginMs} has passed since.
 */

/** How often a monitor writes its node's deadline for the supervisors (it moves with each keepalive). */
export const DEADLINE_WRITE_MS = 500;

/** How often a task's supervisor reads its node's deadline. */
export const SUPERVISOR_CHECK_MS = 200;

/** From the supervisor's SIGTERM at the deadline to its SIGKILL of the task's process group. */
export const SUPERVISOR_TERM_MS = 500;

/**
 * A task that succeeds while its monitor cannot report it (frozen, dead) must not run again: its
 * supervisor (process executor, etcd store) tells the monitor at once, then waits up to
 * SUPERVISOR_REPORT_WAIT_MS for the RU record to change (reading it every
 * SUPERVISOR_REPORT_POLL_MS), and past that, or once the node's deadline has come, writes the
 * success itself, fenced on the RU record's revision (supervisor.js). Why that write comes before
 * any placement elsewhere: a task that succeeds at S ran while its supervisor let it, so S is
 * before the node's deadline D or at most one check interval (SUPERVISOR_CHECK_MS) after it; the
 * write is sent at max(S, min(S + SUPERVISOR_REPORT_WAIT_MS, D)) + one read of the RU record, so
 * no later than D + SUPERVISOR_CHECK_MS + that read; a front-end records the task lost (the write
 * that lets it be placed again) no earlier than D + {@link fenceMarginMs}, at least
 * FENCE_MARGIN_FIXED_MS = 2 s past D on the front-end's clock (the margin's rate part covers the
 * clocks). The success is thus sent at least 1.8 s − one read before a front-end may act, and
 * lands first unless etcd takes longer than that to answer; then the fence refuses whichever write
 * comes second (the owner's "lost" compares
 * the task record, which the success rewrites; the success compares the RU record, which "lost"
 * deletes): a success that loses that race is still reported late (outcomes.ts), and stays a
 * success if the new copy has not started.
 */
export const SUPERVISOR_REPORT_WAIT_MS = 500;
export const SUPERVISOR_REPORT_POLL_MS = 100;

/**
 * The fixed part of the front-ends' margin past a node's grace: the supervisor's check interval,
 * its SIGTERM-to-SIGKILL window, the exit of the processes, and etcd's and the node's clocks
 * measuring the lease TTL at slightly different rates.
 */
export const FENCE_MARGIN_FIXED_MS = 2000;

/**
 * The part of the margin that grows with the grace: clocks of different machines may run at
 * different rates (NTP slews by at most 0.05%; a VM's clock may drift more), so a grace measured
 * on the node may last a little longer than the same grace measured on a front-end. 1% of it.
 */
export const FENCE_MARGIN_RATE = 0.01;

/** What a front-end adds to a node's grace before it places the node's tasks elsewhere. */
export function fenceMarginMs(graceMs: number): number {
  return FENCE_MARGIN_FIXED_MS + Math.ceil(Math.max(0, graceMs) * FENCE_MARGIN_RATE);
}

/**
 * The node's deadline, on the clock `lastConfirmedAt` was read from: past it, no task of the node
 * may run. The monitor kills its tasks then (when it can), and the tasks' supervisors do too.
 */
export function nodeDeadline(lastConfirmedAt: number, ttlSeconds: number, graceMs: number): number {
  return lastConfirmedAt + ttlSeconds * 1000 + graceMs;
}

/**
 * When a front-end may place elsewhere the tasks of a node whose lease it found expired at
 * `expiredAt` (its own clock), with the node's grace. The lease cannot have expired before the
 * node's last confirmed keepalive was sent + TTL, so this is past the node's deadline by the margin.
 */
export function replaceAfter(expiredAt: number, graceMs: number): number {
  return expiredAt + graceMs + fenceMarginMs(graceMs);
}
