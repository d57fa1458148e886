/**
 * A small strict CSV reader for trace files (RFC 4180: comma-separated, a header row, fields
 * optionally in double quotes with "" for a quote inside). Every problem found is a
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

/** Splits text into records of fields, with the line each record starts on. */
function records(text: string, file: string, problems: RowProblem[]): { line: number; fields: string[] }[] {
  const out: { line: number; fields: string[] }[] = [];
  let line = 1;
  let start = 1;
  let fields: string[] = [];
  let field = '';
  let quoted = false;
  let wasQuoted = false;
  const endField = (): void => {
    fields.push(field);
    field = '';
    wasQuoted = false;
  };
  const endRecord = (): void => {
    endField();
    if (!(fields.length === 1 && fields[0] === '')) out.push({ line: start, fields });
    fields = [];
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else {
        if (c === '\n') line++;
        field += c;
      }
      continue;
    }
    if (c === '"') {
      if (field !== '' || wasQuoted) problems.push({ file, line, column: `field ${fields.length + 1}`, rule: 'a quote may only open a field' });
      quoted = true;
      wasQuoted = true;
    } else if (c === ',') endField();
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      endRecord();
      line++;
      start = line;
    } else {
      if (wasQuoted) problems.push({ file, line, column: `field ${fields.length + 1}`, rule: 'nothing may follow a closing quote but a comma or the end of the line' });
      field += c;
    }
  }
  if (quoted) problems.push({ file, line: start, column: `field ${fields.length + 1}`, rule: 'a quoted field is not closed' });
  else if (field !== '' || fields.length > 0) endRecord();
  return out;
}

/**
 * Reads `text` as CSV with a header row. `required` columns must all be in the header, and a
 * header name outside `required` and `optional` is refused; every data row must have as many
 * fields as the header.
 */
export function readCsv(text: string, file: string, required: readonly string[], optional: readonly string[], problems: RowProblem[]): CsvTable {
  const recs = records(text.startsWith('\uFEFF') ? text.slice(1) : text, file, problems);
  if (recs.length === 0) {
    problems.push({ file, line: 1, column: 'header', rule: `must be a header row naming ${required.join(', ')}` });
    return { header: [], rows: [] };
  }
  const header = recs[0]!.fields.map((h) => h.trim());
  const known = new Set([...required, ...optional]);
  const seen = new Set<string>();
  for (const h of header) {
    if (!known.has(h)) problems.push({ file, line: 1, column: h === '' ? '(empty)' : h, rule: `is not a column of this format (columns: ${[...required, ...optional].join(', ')})` });
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
