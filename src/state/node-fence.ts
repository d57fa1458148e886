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
