// Formatting shared by the views.

/** Q in [0, 1] → a colour from red (poor) through amber to green (good); blue when unknown. */
export function qColour(q) {
  if (q === null || q === undefined) return '#5b8def';
  const x = Math.max(0, Math.min(1, q));
  return `hsl(${Math.round(x * 120)}, 65%, 45%)`;
}

export function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export const ms = (x) => (x === null || x === undefined ? '–' : x < 1000 ? `${Math.round(x * 10) / 10} ms` : `${Math.round(x / 100) / 10} s`);

export const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

export const RU_STATES = { f: 'free', b: 'busy', r: 'reserved', d: 'down', u: 'free but unschedulable' };
