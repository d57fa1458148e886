/**
 * The keys that appear more than once in one object of a JSON text. JSON.parse keeps the last of
 * them silently, so a log line such as `{"server":"s0","server":"s0"}` parses; this scanner walks
 * the text itself and reports every repeated key, with its object's path.
 */
export function duplicateKeys(text: string): string[] {
  let i = 0;
  const dups: string[] = [];
  const ws = (): void => {
    while (i < text.length && /\s/.test(text[i]!)) i++;
  };
  const str = (): string => {
    const start = i;
    i++; // opening quote
    while (text[i] !== '"') {
      if (i >= text.length) throw new Error(`unterminated string at ${start}`);
      i += text[i] === '\\' ? 2 : 1;
    }
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (path: string): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const seen = new Set<string>();
      ws();
      if (text[i] === '}') return void i++;
      for (;;) {
        ws();
        const k = str();
        if (seen.has(k)) dups.push(`${path}.${k}`);
        seen.add(k);
        ws();
        if (text[i++] !== ':') throw new Error(`expected ':' at ${i - 1}`);
        value(`${path}.${k}`);
        ws();
        const d = text[i++];
        if (d === '}') return;
        if (d !== ',') throw new Error(`expected ',' or '}' at ${i - 1}`);
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') return void i++;
      for (let n = 0; ; n++) {
        value(`${path}[${n}]`);
        ws();
        const d = text[i++];
        if (d === ']') return;
        if (d !== ',') throw new Error(`expected ',' or ']' at ${i - 1}`);
      }
    }
    if (c === '"') return void str();
    const m = /^(-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 40));
    if (!m) throw new Error(`unexpected ${c} at ${i}`);
    i += m[0].length;
  };
  value('$');
  return dups;
}
