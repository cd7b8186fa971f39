// Sluice batch-ABI SDK for AssemblyScript (transforms/ABI.md). In your entry file:
//
//   import { Record, onRecord, writeRecord } from "<path>/sluice";
//   export { sluice_batch_input, sluice_batch_process, _start } from "<path>/sluice";
//   onRecord((r: Record): void => { writeRecord(0, r); });
//
// and build with (the abort handler replaces env.abort, which the host does not provide):
//
//   npx asc my.ts -O3 --runtime stub --use abort=<path>/sluice/abort -o my.wasm
//
// The host hands the guest a whole batch per call; the SDK walks its records (Kafka's record
// format, uncompressed) and calls your function for each, with one Record reused for all
// (no allocation per record: the stub runtime never frees). Bytes are addressed by pointer
// and length (load<u8>(r.valuePtr + i)); a length of -1 is null.

@external("sluice_batch", "check_abi_version_1")
declare function abiCheck(): void;
@external("sluice_batch", "fail")
declare function abiFail(ptr: usize, len: i32): void;
@external("sluice_batch", "log")
declare function abiLog(stream: i32, ptr: usize, len: i32): void;

const MAX_TOPICS: i32 = 8;

export class Record {
  offset: i64 = 0;
  timestamp: i64 = 0;
  attributes: u8 = 0;
  keyPtr: usize = 0;
  keyLen: i32 = -1;
  valuePtr: usize = 0;
  valueLen: i32 = -1;
  headerCount: i32 = 0;
  /** headerCount x (key, value), Kafka encoding: see nextHeader */
  headersPtr: usize = 0;
  /** key, value and headers as stored */
  payloadPtr: usize = 0;
  payloadLen: i32 = 0;
}

/** The batch being processed (the input header, ABI.md). */
export class BatchInfo {
  baseOffset: i64 = 0;
  recordCount: i32 = 0;
  partitionLeaderEpoch: i32 = 0;
  attributes: i16 = 0;
  lastOffsetDelta: i32 = 0;
  baseTimestamp: i64 = 0;
  maxTimestamp: i64 = 0;
  producerId: i64 = 0;
  producerEpoch: i16 = 0;
  baseSequence: i32 = 0;
  outputTopicCount: i32 = 0;
}

export const batch = new BatchInfo();
const record = new Record();
let handler: (r: Record) => void = (r: Record): void => {};

/** Registers the function called for every input record. */
export function onRecord(fn: (r: Record) => void): void {
  handler = fn;
}

/** Stops the batch with this text as the guest's error (does not return). */
export function fail(message: string): void {
  const buf = String.UTF8.encode(message);
  abiFail(changetype<usize>(buf), buf.byteLength);
  unreachable();
}

/** A log line (stderr). */
export function log(message: string): void {
  const buf = String.UTF8.encode(message);
  abiLog(2, changetype<usize>(buf), buf.byteLength);
}

export function abort(message: string | null, file: string | null, line: u32, column: u32): void {
  let text = message !== null ? message : "abort";
  if (file !== null) text += " at " + file + ":" + line.toString() + ":" + column.toString();
  fail(text);
}

// ------------------------------------------------------------------ varints

let pos: usize = 0;

function varint(end: usize): i64 {
  let raw: u64 = 0;
  let shift: u64 = 0;
  while (true) {
    if (pos >= end || shift > 63) fail("malformed varint in the input");
    const b = load<u8>(pos);
    pos++;
    raw |= (<u64>(b & 0x7f)) << shift;
    if (!(b & 0x80)) break;
    shift += 7;
  }
  return <i64>(raw >> 1) ^ -(<i64>(raw & 1));
}

function varintSize(v: i64): i32 {
  let raw = (<u64>v << 1) ^ <u64>(v >> 63);
  let n = 1;
  while (raw >= 0x80) {
    raw >>= 7;
    n++;
  }
  return n;
}

function putVarint(p: usize, v: i64): usize {
  let raw = (<u64>v << 1) ^ <u64>(v >> 63);
  while (raw >= 0x80) {
    store<u8>(p, <u8>(raw | 0x80));
    p++;
    raw >>= 7;
  }
  store<u8>(p, <u8>raw);
  return p + 1;
}

/** Reads (key, value) of the next header at r.headersPtr + `at`; returns the next `at`. */
export class Header {
  keyPtr: usize = 0;
  keyLen: i32 = -1;
  valuePtr: usize = 0;
  valueLen: i32 = -1;
}

export function nextHeader(at: usize, h: Header): usize {
  pos = at;
  const end: usize = <usize>-1;
  let n = <i32>varint(end);
  h.keyPtr = pos;
  h.keyLen = n;
  if (n > 0) pos += n;
  n = <i32>varint(end);
  h.valuePtr = pos;
  h.valueLen = n;
  if (n > 0) pos += n;
  return pos;
}

// ------------------------------------------------------------------ output

let out: usize = 0;
let outLen: i32 = 0;
let outCap: i32 = 0;
let index: usize = 0; // (topic, start, len) per record, 12 bytes each
let indexLen: i32 = 0;
let indexCap: i32 = 0;
let gathered: usize = 0;
let gatheredCap: i32 = 0;
const topicCount = new StaticArray<i32>(MAX_TOPICS);
const descriptor = new StaticArray<u32>(1 + 4 * MAX_TOPICS);

function realloc(ptr: usize, size: i32): usize {
  return ptr == 0 ? heap.alloc(<usize>size) : heap.realloc(ptr, <usize>size);
}

function reserveOut(n: i32): void {
  if (outLen + n <= outCap) return;
  let cap = outCap > 0 ? outCap * 2 : 65536;
  while (cap < outLen + n) cap *= 2;
  out = realloc(out, cap);
  outCap = cap;
}

function beginRecord(topic: i32, payload: i32): usize {
  if (topic < 0 || topic >= MAX_TOPICS) fail("write: topic index out of range");
  const delta = unchecked(topicCount[topic]);
  unchecked((topicCount[topic] = delta + 1));
  const body = 2 + varintSize(delta) + payload;
  const total = varintSize(body) + body;
  reserveOut(total);
  const start = outLen;
  let p = putVarint(out + start, body);
  store<u8>(p, 0); // attributes
  store<u8>(p + 1, 0); // timestamp delta
  p = putVarint(p + 2, delta);
  outLen = start + total;
  if (indexLen + 12 > indexCap) {
    const cap = indexCap > 0 ? indexCap * 2 : 12 * 1024;
    index = realloc(index, cap);
    indexCap = cap;
  }
  store<u32>(index + indexLen, topic);
  store<u32>(index + indexLen + 4, start);
  store<u32>(index + indexLen + 8, total);
  indexLen += 12;
  return p;
}

function bytesSize(len: i32): i32 {
  return len < 0 ? 1 : varintSize(len) + len;
}

function putBytes(p: usize, ptr: usize, len: i32): usize {
  p = putVarint(p, len < 0 ? -1 : len);
  if (len > 0) {
    memory.copy(p, ptr, len);
    p += len;
  }
  return p;
}

/** The input record, unchanged, to output topic `topic` (0 = the first). */
export function writeRecord(topic: i32, r: Record): void {
  const p = beginRecord(topic, r.payloadLen);
  memory.copy(p, r.payloadPtr, r.payloadLen);
}

/** The input record with a new value of `valueLen` bytes (-1: null) to `topic`; returns
 *  where to write the value. */
export function writeWithValue(topic: i32, r: Record, valueLen: i32): usize {
  const headersLen = <i32>(r.payloadPtr + r.payloadLen - r.headersPtr);
  const payload = bytesSize(r.keyLen) + bytesSize(valueLen) + varintSize(r.headerCount) + headersLen;
  let p = beginRecord(topic, payload);
  p = putBytes(p, r.keyPtr, r.keyLen);
  p = putVarint(p, valueLen < 0 ? -1 : valueLen);
  const v = p;
  if (valueLen > 0) p += valueLen;
  p = putVarint(p, r.headerCount);
  memory.copy(p, r.headersPtr, headersLen);
  return v;
}

/** A record of key and value (pointer, length; -1 = null), no headers, to `topic`. */
export function write(topic: i32, keyPtr: usize, keyLen: i32, valuePtr: usize, valueLen: i32): void {
  let p = beginRecord(topic, bytesSize(keyLen) + bytesSize(valueLen) + 1);
  p = putBytes(p, keyPtr, keyLen);
  p = putBytes(p, valuePtr, valueLen);
  store<u8>(p, 0);
}

// ------------------------------------------------------------------ the exports

let input: usize = 0;
let inputCap: i32 = 0;

export function sluice_batch_input(size: i32): usize {
  if (size > inputCap) {
    input = realloc(input, size);
    inputCap = size;
  }
  return input;
}

function finish(): usize {
  let used = 0;
  for (let t = 0; t < MAX_TOPICS; t++) if (unchecked(topicCount[t]) != 0) used++;
  let base = out;
  if (used > 1) {
    if (gatheredCap < outLen) {
      gathered = realloc(gathered, outLen);
      gatheredCap = outLen;
    }
    base = gathered;
  }
  let n = 0;
  let at = 0;
  for (let t = 0; t < MAX_TOPICS; t++) {
    const count = unchecked(topicCount[t]);
    if (count == 0) continue;
    const start = at;
    if (used > 1) {
      for (let i = 0; i < indexLen; i += 12) {
        if (load<u32>(index + i) != <u32>t) continue;
        const len = load<u32>(index + i + 8);
        memory.copy(gathered + at, out + load<u32>(index + i + 4), len);
        at += len;
      }
    } else {
      at = outLen;
    }
    unchecked((descriptor[1 + 4 * n] = t));
    unchecked((descriptor[2 + 4 * n] = count));
    unchecked((descriptor[3 + 4 * n] = <u32>(base + start)));
    unchecked((descriptor[4 + 4 * n] = at - start));
    n++;
  }
  unchecked((descriptor[0] = n));
  return changetype<usize>(descriptor);
}

export function sluice_batch_process(len: i32): usize {
  if (input == 0 || len > inputCap || len < 64) fail("bad batch buffer");
  outLen = 0;
  indexLen = 0;
  for (let t = 0; t < MAX_TOPICS; t++) unchecked((topicCount[t] = 0));
  batch.baseOffset = load<i64>(input);
  batch.recordCount = load<i32>(input, 8);
  batch.partitionLeaderEpoch = load<i32>(input, 12);
  batch.attributes = load<i16>(input, 16);
  batch.lastOffsetDelta = load<i32>(input, 20);
  batch.baseTimestamp = load<i64>(input, 24);
  batch.maxTimestamp = load<i64>(input, 32);
  batch.producerId = load<i64>(input, 40);
  batch.producerEpoch = load<i16>(input, 48);
  batch.baseSequence = load<i32>(input, 52);
  const recordsLen = load<i32>(input, 56);
  batch.outputTopicCount = load<i32>(input, 60);
  if (recordsLen < 0 || 64 + recordsLen > len) fail("bad batch length");
  const logAppendTime = (batch.attributes & 0x08) != 0;
  pos = input + 64;
  const end = pos + <usize>recordsLen;
  const r = record;
  while (pos < end) {
    const length = varint(end);
    if (length < 0 || <usize>length > end - pos) fail("a record runs past its batch");
    const recEnd = pos + <usize>length;
    r.attributes = load<u8>(pos);
    pos++;
    const tsDelta = varint(recEnd);
    const offsetDelta = varint(recEnd);
    r.timestamp = logAppendTime ? batch.maxTimestamp : batch.baseTimestamp + tsDelta;
    r.offset = batch.baseOffset + offsetDelta;
    r.payloadPtr = pos;
    r.payloadLen = <i32>(recEnd - pos);
    let n = <i32>varint(recEnd);
    r.keyPtr = pos;
    r.keyLen = n;
    if (n > 0) pos += n;
    n = <i32>varint(recEnd);
    r.valuePtr = pos;
    r.valueLen = n;
    if (n > 0) pos += n;
    r.headerCount = <i32>varint(recEnd);
    r.headersPtr = pos;
    handler(r);
    pos = recEnd;
  }
  return finish();
}

export function _start(): void {
  abiCheck();
}
