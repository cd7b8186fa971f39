// jsonfilter (batch ABI): keeps the records whose value is a JSON object with a top-level
// field "level" equal to the string "error" (escapes decoded; the last of duplicate fields
// counts); drops every other record, invalid JSON included. Nesting deeper than 512 levels
// counts as invalid. (The same grammar as examples/c/jsonfilter.c.)
import { Record, onRecord, writeRecord } from "../../sdk/assemblyscript/sluice";
export { sluice_batch_input, sluice_batch_process, _start } from "../../sdk/assemblyscript/sluice";

let p: usize = 0;
let end: usize = 0;
let depth = 0;
let equal = false;

const LEVEL: StaticArray<u8> = [0x6c, 0x65, 0x76, 0x65, 0x6c]; // level
const ERROR: StaticArray<u8> = [0x65, 0x72, 0x72, 0x6f, 0x72]; // error
const NONE = new StaticArray<u8>(0);

function ws(): void {
  while (p < end) {
    const c = load<u8>(p);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    p++;
  }
}

function hex(c: u8): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

// a string at p; sets `equal` to whether its decoded text is `want` (when want has bytes)
function str(want: StaticArray<u8>): bool {
  if (p >= end || load<u8>(p) != 0x22) return false;
  p++;
  let i = 0;
  let same = true;
  while (true) {
    if (p >= end) return false;
    const c = load<u8>(p);
    p++;
    let decoded: i32 = c;
    if (c == 0x22) break;
    if (c < 0x20) return false;
    if (c == 0x5c) {
      if (p >= end) return false;
      const e = load<u8>(p);
      p++;
      if (e == 0x22 || e == 0x5c || e == 0x2f) decoded = e;
      else if (e == 0x62) decoded = 0x08;
      else if (e == 0x66) decoded = 0x0c;
      else if (e == 0x6e) decoded = 0x0a;
      else if (e == 0x72) decoded = 0x0d;
      else if (e == 0x74) decoded = 0x09;
      else if (e == 0x75) {
        if (end - p < 4) return false;
        let v = 0;
        for (let k = 0; k < 4; k++) {
          const h = hex(load<u8>(p + k));
          if (h < 0) return false;
          v = v * 16 + h;
        }
        p += 4;
        decoded = v < 0x80 ? v : 0x100;
      } else return false;
    }
    if (i < want.length) {
      if (<i32>unchecked(want[i]) != decoded) same = false;
      i++;
    } else {
      same = false;
    }
  }
  equal = same && i == want.length;
  return true;
}

function digits(): bool {
  if (p >= end) return false;
  const c = load<u8>(p);
  if (c < 0x30 || c > 0x39) return false;
  while (p < end && load<u8>(p) >= 0x30 && load<u8>(p) <= 0x39) p++;
  return true;
}

function num(): bool {
  if (p < end && load<u8>(p) == 0x2d) p++;
  if (p >= end) return false;
  const c = load<u8>(p);
  if (c == 0x30) p++;
  else if (!digits()) return false;
  if (p < end && load<u8>(p) == 0x2e) {
    p++;
    if (!digits()) return false;
  }
  if (p < end && (load<u8>(p) == 0x65 || load<u8>(p) == 0x45)) {
    p++;
    if (p < end && (load<u8>(p) == 0x2b || load<u8>(p) == 0x2d)) p++;
    if (!digits()) return false;
  }
  return true;
}

function lit(word: string): bool {
  for (let i = 0; i < word.length; i++) {
    if (p >= end || <i32>load<u8>(p) != word.charCodeAt(i)) return false;
    p++;
  }
  return true;
}

// an object; with top, returns whether it is valid and its last "level" is "error" in `level`
let level = false;

function obj(top: bool): bool {
  p++;
  if (++depth > 512) return false;
  ws();
  if (p < end && load<u8>(p) == 0x7d) {
    p++;
    depth--;
    return true;
  }
  while (true) {
    ws();
    if (!str(top ? LEVEL : NONE)) return false;
    const isLevel = top && equal;
    ws();
    if (p >= end || load<u8>(p) != 0x3a) return false;
    p++;
    ws();
    if (isLevel) {
      if (p < end && load<u8>(p) == 0x22) {
        if (!str(ERROR)) return false;
        level = equal;
      } else {
        if (!value()) return false;
        level = false;
      }
    } else if (!value()) return false;
    ws();
    if (p < end && load<u8>(p) == 0x2c) {
      p++;
      continue;
    }
    if (p < end && load<u8>(p) == 0x7d) {
      p++;
      depth--;
      return true;
    }
    return false;
  }
}

function arr(): bool {
  p++;
  if (++depth > 512) return false;
  ws();
  if (p < end && load<u8>(p) == 0x5d) {
    p++;
    depth--;
    return true;
  }
  while (true) {
    ws();
    if (!value()) return false;
    ws();
    if (p < end && load<u8>(p) == 0x2c) {
      p++;
      continue;
    }
    if (p < end && load<u8>(p) == 0x5d) {
      p++;
      depth--;
      return true;
    }
    return false;
  }
}

function value(): bool {
  if (p >= end) return false;
  const c = load<u8>(p);
  if (c == 0x7b) return obj(false);
  if (c == 0x5b) return arr();
  if (c == 0x22) return str(NONE);
  if (c == 0x74) return lit("true");
  if (c == 0x66) return lit("false");
  if (c == 0x6e) return lit("null");
  return num();
}

function keep(r: Record): bool {
  if (r.valueLen < 0) return false;
  p = r.valuePtr;
  end = p + <usize>r.valueLen;
  depth = 0;
  level = false;
  ws();
  if (p >= end || load<u8>(p) != 0x7b) return false;
  if (!obj(true)) return false;
  ws();
  return p == end && level;
}

onRecord((r: Record): void => {
  if (keep(r)) writeRecord(0, r);
});
