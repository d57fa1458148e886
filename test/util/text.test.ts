import { describe, expect, it } from 'vitest';
import { clip, wellFormed } from '../../src/util/text.ts';

describe('text a message quotes', () => {
  it('wellFormed replaces lone surrogates, and only them', () => {
    expect(wellFormed('a\uD83Db')).toBe('a\uFFFDb');
    expect(wellFormed('a\uDE42')).toBe('a\uFFFD');
    expect(wellFormed('\uDE42\uD83D')).toBe('\uFFFD\uFFFD');
    expect(wellFormed('ok 🙂 é 名')).toBe('ok 🙂 é 名');
    expect(() => encodeURI(wellFormed('🙂'.slice(0, 1)))).not.toThrow();
  });

  it('clip cuts at most max code units, never inside a surrogate pair', () => {
    expect(clip('abc', 10)).toBe('abc');
    expect(clip('abcdef', 3)).toBe('abc');
    expect(clip('x🙂🙂', 2)).toBe('x');
    expect(clip('x🙂🙂', 3)).toBe('x🙂');
    expect(clip('🙂', 1)).toBe('');
    for (let max = 0; max < 12; max++) {
      const s = clip('x🙂é🙂🙂', max);
      expect(s.length).toBeLessThanOrEqual(max);
      expect(() => encodeURI(s)).not.toThrow();
    }
  });
});
