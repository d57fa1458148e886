import { describe, expect, it } from 'vitest';
import { benchCommand } from '../../src/cli/bench.ts';
import { attributesFromFlags } from '../../src/cli/live.ts';
import { serverMatches } from '../../src/sampling/feasibility.ts';
import { TarcilError } from '../../src/util/errors.ts';

/** Names given on the command line that are also members of Object.prototype. */
describe('command-line names that are members of Object.prototype', () => {
  it("a node's --attr __proto__=… is refused; constructor and toString are ordinary attributes", () => {
    expect(() => attributesFromFlags(['zone=a', '__proto__=x'])).toThrow("--attr: key '__proto__' is not allowed");
    expect(() => attributesFromFlags(['zone a=x'])).toThrow(/--attr: .*attribute names must be 1-63 characters/);
    const attrs = attributesFromFlags(['zone=a', 'constructor=c']);
    expect(Object.entries(attrs)).toEqual([
      ['zone', 'a'],
      ['constructor', 'c'],
    ]);
    for (const k of ['toString', '__proto__', 'hasOwnProperty']) expect(attrs[k]).toBeUndefined();
    const server = { id: 'n', platform: 'p', rack: 'r', rus: 1, speed: 1, attributes: attrs };
    expect(serverMatches(server, { attributes: { constructor: 'c' } })).toBe(true);
    expect(serverMatches(server, { attributes: { toString: 'c' } })).toBe(false);
  });

  it('`tarcil bench constructor` is an unknown experiment', async () => {
    for (const name of ['constructor', 'toString', '__proto__']) {
      const e = await benchCommand(name, { quick: true, seed: 1, write: () => undefined, progress: () => undefined }).catch((err: unknown) => err);
      expect(e).toBeInstanceOf(TarcilError);
      expect((e as TarcilError).message).toMatch(new RegExp(`^experiment: unknown experiment '${name}'`));
    }
  });
});
