import { parse } from 'csv-parse/sync';

/**
 * A strict CSV reader for trace files (RFC 4180 by csv-parse: comma-separated, a header row,
 * fields optionally in double quotes with "" for a quote inside). Every problem found is a
 * `RowProblem` naming the file, the line and the column; the caller decides what to do with them.
 */

/** One problem of one cell (or of a whole row, `column` then names what is missing or extra). */
export interface RowProblem {
  file: string;
  line: number;
  column: string;
  rule: string;
}

/** A data row: its line in the file (1 = the header) and its cells by header name. */
export interface CsvRow {
  line: number;
  cells: Record<string, string>;
}

export interface CsvTable {
  header: string[];
  rows: CsvRow[];
}

/**
 * Splits text into records of fields, with the line each record starts on (csv-parse; a quoted
 * field may hold line breaks). A file that does not parse as CSV is one problem, at the line
 * where the parser stopped.
 */
function records(text: string, file: string, problems: RowProblem[]): { line: number; fields: string[] }[] | undefined {
  try {
    const parsed = parse(text, { bom: true, info: true, raw: true, relax_column_count: true, skip_empty_lines: true }) as unknown as {
      record: string[];
      raw: string;
      info: { lines: number };
    }[];
    // info.lines is the line a record ends on; the record starts as many lines before as its
    // own text (without the empty lines before it and its line break) holds.
    return parsed.map((r) => ({
      line:
        r.info.lines -
        (r.raw
          .replace(/^[\r\n]+/, '')
          .replace(/\r?\n$/, '')
          .match(/\n/g)?.length ?? 0),
      fields: r.record,
    }));
  } catch (e) {
    const err = e as { message?: string; lines?: number; code?: string };
    const rule = (err.message ?? String(e)).replace(/^[A-Za-z ]+: /, '');
    problems.push({ file, line: err.lines ?? 1, column: '(row)', rule: `does not parse as CSV: ${rule}` });
    return undefined;
  }
}

/**
 * Reads `text` as CSV with a header row. `required` columns must all be in the header, and a
 * header name outside `required` and `optional` is refused; every data row must have as many
 * fields as the header.
 */
export function readCsv(text: string, file: string, required: readonly string[], optional: readonly string[], problems: RowProblem[]): CsvTable {
  const recs = records(text, file, problems);
  if (!recs) return { header: [], rows: [] };
  if (recs.length === 0) {
    problems.push({ file, line: 1, column: 'header', rule: `must be a header row naming ${required.join(', ')}` });
    return { header: [], rows: [] };
  }
  const header = recs[0]!.fields.map((h) => h.trim());
  const known = new Set([...required, ...optional]);
  const seen = new Set<string>();
  for (const h of header) {
    if (!known.has(h))
      problems.push({
        file,
        line: 1,
        column: h === '' ? '(empty)' : h,
        rule: `is not a column of this format (columns: ${[...required, ...optional].join(', ')})`,
      });
    else if (seen.has(h)) problems.push({ file, line: 1, column: h, rule: 'is named twice' });
    seen.add(h);
  }
  for (const r of required) if (!seen.has(r)) problems.push({ file, line: 1, column: r, rule: 'is a required column missing from the header' });
  const rows: CsvRow[] = [];
  for (const rec of recs.slice(1)) {
    if (rec.fields.length !== header.length) {
      problems.push({ file, line: rec.line, column: '(row)', rule: `must have ${header.length} fields like the header, has ${rec.fields.length}` });
      continue;
    }
    const cells: Record<string, string> = Object.create(null) as Record<string, string>;
    header.forEach((h, i) => (cells[h] = (rec.fields[i] ?? '').trim()));
    rows.push({ line: rec.line, cells });
  }
  return { header, rows };
}
