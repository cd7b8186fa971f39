# ruff: noqa: E501 - the WAT source below keeps its own layout
"""The host's own WebAssembly modules (the "shim" and its trampolines), in WAT.

Every guest is linked against the shim rather than against Python functions for the calls
it makes per record: a call from Wasm into Python costs microseconds, a call from Wasm into
Wasm nanoseconds. The shim imports the guest's exported memory and reads and writes it
directly; Python crosses into Wasm once per batch.

The guest is instantiated first (its imports must exist before the shim, which needs the
guest's memory, can be): it imports small trampolines that ``call_indirect`` through a
table the host fills with the shim's functions once the shim exists. (Importing a
host-created memory into the guest instead would need no trampolines, but wasmtime then
compiles a Go module ten times slower: 13 s instead of 1.3 s, measured.)

What the shim implements:

* Redpanda's ABI (``redpanda_transform``): ``read_batch_header`` (finishes the previous
  batch, then calls the host's blocking ``next_batch``), ``read_next_record``,
  ``write_record``, ``write_record_with_options``, the ABI check functions; and
  ``redpanda_schema_registry`` (every call answers -1, "not enabled").
* Sluice's batch ABI (``sluice_batch``): ``fail`` (notes the text, then traps) and ``run``
  (exported to the host: calls the guest's ``sluice_batch_process`` and validates the
  output it describes).
* WASI preview1 ``clock_time_get`` / ``clock_res_get`` (wall clock = the current record's
  timestamp, monotonic clock = +1 ms per read, as Redpanda), ``sched_yield`` and
  ``proc_exit`` (notes the code, then traps). The other WASI functions are Python
  (``transforms.wasi``): they run once per process start or per log line.

Memories of the shim: 0 the guest's (imported), 1 ``ctl`` (control block, batch header,
topic table, input records), 2 ``out`` (output records of Redpanda-ABI guests), 3 the
index of those output records (topic, start, length per record). All integers in ``ctl``
are little-endian. Layout of ``ctl`` (offsets are the constants below)::

    0    i32 records_left       4   i32 in_pos         8   i32 in_end
    12   i32 max_payload        16  i32 out_pos        20  i32 out_limit (bytes)
    24   i32 failure (Failure)  28  i32 state (0 idle, 1 batch, 2 done)
    32   i64 base_offset        40  i64 base_timestamp 48  i64 max_timestamp
    56   i32 log_append_time    60  i32 topic_count    64  i64 wall clock (ms)
    72   i64 monotonic (ns)     80  i32 idx_pos        84  i32 failure detail (exit code,
    88   i32 a write was refused as malformed (-2)          topic index)
    96   i32[8] records per output topic
    128  (i32 ptr, i32 len, i32 count)[8] the output sections the host reads
    256  the ten batch-header fields, as read_batch_header hands them out:
         i64 base_offset, i32 record_count, i32 leader_epoch, i32 attributes (i16),
         i32 last_offset_delta, i64 base_ts, i64 max_ts, i64 producer_id,
         i32 producer_epoch (i16), i32 base_sequence          (56 bytes)
    512  (i32 ptr, i32 len)[8] output topic names (ptr into ctl)
    1024 topic name bytes (8 x 256)
    3072 guest text noted by fail / an unknown topic name (up to 1 KiB)
    4096 input records: the Kafka v2 records section of the batch, uncompressed
"""

from __future__ import annotations

from enum import IntEnum

MEMORY_MODULE = "sluice_host"
"""The shim's imports: the guest's memory and the host's ``next_batch``."""


class Ctl(IntEnum):
    """Byte offsets in the shim's ``ctl`` memory."""

    RECORDS_LEFT = 0
    IN_POS = 4
    IN_END = 8
    MAX_PAYLOAD = 12
    OUT_POS = 16
    OUT_LIMIT = 20
    FAILURE = 24
    STATE = 28
    BASE_OFFSET = 32
    BASE_TIMESTAMP = 40
    MAX_TIMESTAMP = 48
    LOG_APPEND_TIME = 56
    TOPIC_COUNT = 60
    WALL_MS = 64
    MONO_NS = 72
    IDX_POS = 80
    FAILURE_DETAIL = 84
    INVALID_WRITE = 88
    COUNTS = 96
    SECTIONS = 128
    HEADER = 256
    TOPIC_TABLE = 512
    TOPIC_NAMES = 1024
    TEXT = 3072
    INPUT = 4096


TEXT_MAX = 1024
TOPIC_NAME_MAX = 256


class ShimFailure(IntEnum):
    """What the shim noted in ``ctl[FAILURE]`` before a trap or a refused write."""

    NONE = 0
    OUTPUT_TOO_LARGE = 1
    UNKNOWN_TOPIC = 2
    INVALID_OUTPUT = 3
    GUEST_FAIL = 4
    EXIT = 5
    NO_OUTPUT = 6
    BAD_INPUT = 7


WAT = r"""
(module
  (import "sluice_host" "memory" (memory $guest 0))
  (import "sluice_host" "next_batch" (func $next_batch (result i32)))
  (memory $ctl (export "ctl") 1)
  (memory $out (export "out") 1)
  (memory $idx 1)
  (table $fns (export "fns") 2 funcref)
  (type $process_t (func (param i32) (result i32)))
  (global $pos (mut i32) (i32.const 0))
  (global $bad (mut i32) (i32.const 0))

  ;; ---------------------------------------------------------------- varints
  ;; zig-zag varints; the cursor after the value is left in $pos, a malformed or
  ;; out-of-bounds value sets $bad
  (func $varint_guest (param $p i32) (param $end i32) (result i64)
    (local $raw i64) (local $shift i64) (local $b i32)
    (loop $next
      (if (i32.ge_u (local.get $p) (local.get $end))
        (then (global.set $bad (i32.const 1)) (global.set $pos (local.get $end))
              (return (i64.const 0))))
      (local.set $b (i32.load8_u $guest (local.get $p)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (local.set $raw (i64.or (local.get $raw)
        (i64.shl (i64.extend_i32_u (i32.and (local.get $b) (i32.const 0x7f))) (local.get $shift))))
      (local.set $shift (i64.add (local.get $shift) (i64.const 7)))
      (if (i32.and (local.get $b) (i32.const 0x80))
        (then
          (if (i64.ge_u (local.get $shift) (i64.const 70))
            (then (global.set $bad (i32.const 1)) (global.set $pos (local.get $p))
                  (return (i64.const 0))))
          (br $next))))
    (global.set $pos (local.get $p))
    (i64.xor (i64.shr_u (local.get $raw) (i64.const 1))
             (i64.sub (i64.const 0) (i64.and (local.get $raw) (i64.const 1)))))

  (func $varint_ctl (param $p i32) (param $end i32) (result i64)
    (local $raw i64) (local $shift i64) (local $b i32)
    (loop $next
      (if (i32.ge_u (local.get $p) (local.get $end))
        (then (global.set $bad (i32.const 1)) (global.set $pos (local.get $end))
              (return (i64.const 0))))
      (local.set $b (i32.load8_u $ctl (local.get $p)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (local.set $raw (i64.or (local.get $raw)
        (i64.shl (i64.extend_i32_u (i32.and (local.get $b) (i32.const 0x7f))) (local.get $shift))))
      (local.set $shift (i64.add (local.get $shift) (i64.const 7)))
      (if (i32.and (local.get $b) (i32.const 0x80))
        (then
          (if (i64.ge_u (local.get $shift) (i64.const 70))
            (then (global.set $bad (i32.const 1)) (global.set $pos (local.get $p))
                  (return (i64.const 0))))
          (br $next))))
    (global.set $pos (local.get $p))
    (i64.xor (i64.shr_u (local.get $raw) (i64.const 1))
             (i64.sub (i64.const 0) (i64.and (local.get $raw) (i64.const 1)))))

  ;; bytes of the zig-zag varint of a non-negative value
  (func $varint_size (param $v i32) (result i32)
    (local $raw i32) (local $n i32)
    (local.set $raw (i32.shl (local.get $v) (i32.const 1)))
    (local.set $n (i32.const 1))
    (block $done (loop $more
      (br_if $done (i32.lt_u (local.get $raw) (i32.const 0x80)))
      (local.set $raw (i32.shr_u (local.get $raw) (i32.const 7)))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $more)))
    (local.get $n))

  ;; writes the zig-zag varint of a non-negative value into $out; returns the next position
  (func $put_varint_out (param $p i32) (param $v i32) (result i32)
    (local $raw i32)
    (local.set $raw (i32.shl (local.get $v) (i32.const 1)))
    (block $done (loop $more
      (br_if $done (i32.lt_u (local.get $raw) (i32.const 0x80)))
      (i32.store8 $out (local.get $p) (i32.or (local.get $raw) (i32.const 0x80)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (local.set $raw (i32.shr_u (local.get $raw) (i32.const 7)))
      (br $more)))
    (i32.store8 $out (local.get $p) (local.get $raw))
    (i32.add (local.get $p) (i32.const 1)))

  ;; one key/value pair (length -1 = null) in guest memory; sets $bad when malformed
  (func $kv_guest (param $p i32) (param $end i32) (result i32)
    (local $n i64)
    (local.set $n (call $varint_guest (local.get $p) (local.get $end)))
    (local.set $p (global.get $pos))
    (if (i64.lt_s (local.get $n) (i64.const -1)) (then (global.set $bad (i32.const 1))))
    (if (i64.gt_s (local.get $n) (i64.const 0))
      (then
        (if (i64.gt_u (local.get $n) (i64.extend_i32_u (i32.sub (local.get $end) (local.get $p))))
          (then (global.set $bad (i32.const 1)) (return (local.get $end))))
        (local.set $p (i32.add (local.get $p) (i32.wrap_i64 (local.get $n))))))
    (local.set $n (call $varint_guest (local.get $p) (local.get $end)))
    (local.set $p (global.get $pos))
    (if (i64.lt_s (local.get $n) (i64.const -1)) (then (global.set $bad (i32.const 1))))
    (if (i64.gt_s (local.get $n) (i64.const 0))
      (then
        (if (i64.gt_u (local.get $n) (i64.extend_i32_u (i32.sub (local.get $end) (local.get $p))))
          (then (global.set $bad (i32.const 1)) (return (local.get $end))))
        (local.set $p (i32.add (local.get $p) (i32.wrap_i64 (local.get $n))))))
    (local.get $p))

  ;; a record payload (key, value, headers) that must fill [p, end) exactly
  (func $payload_ok (param $p i32) (param $end i32) (result i32)
    (local $count i64)
    (global.set $bad (i32.const 0))
    (local.set $p (call $kv_guest (local.get $p) (local.get $end)))
    (local.set $count (call $varint_guest (local.get $p) (local.get $end)))
    (local.set $p (global.get $pos))
    (if (i64.lt_s (local.get $count) (i64.const 0)) (then (global.set $bad (i32.const 1))))
    (block $done (loop $header
      (br_if $done (global.get $bad))
      (br_if $done (i64.le_s (local.get $count) (i64.const 0)))
      (local.set $p (call $kv_guest (local.get $p) (local.get $end)))
      (local.set $count (i64.sub (local.get $count) (i64.const 1)))
      (br $header)))
    (i32.and (i32.eqz (global.get $bad)) (i32.eq (local.get $p) (local.get $end))))

  (func $ensure_out (param $need i32) (result i32)
    (local $pages i32)
    (if (i32.le_u (local.get $need) (i32.mul (memory.size $out) (i32.const 65536)))
      (then (return (i32.const 1))))
    (local.set $pages (i32.sub
      (i32.shr_u (i32.add (local.get $need) (i32.const 65535)) (i32.const 16))
      (memory.size $out)))
    (i32.ne (memory.grow $out (local.get $pages)) (i32.const -1)))

  (func $ensure_idx (param $need i32) (result i32)
    (if (i32.le_u (local.get $need) (i32.mul (memory.size $idx) (i32.const 65536)))
      (then (return (i32.const 1))))
    (i32.ne (memory.grow $idx (i32.add (memory.size $idx) (i32.const 1))) (i32.const -1)))

  ;; notes why the guest is being stopped (the first reason wins), then traps
  (func $fail (param $code i32)
    (if (i32.eqz (i32.load $ctl (i32.const 24)))
      (then (i32.store $ctl (i32.const 24) (local.get $code))))
    (unreachable))

  ;; ---------------------------------------------------------------- Redpanda ABI
  (func (export "check_abi_version_1"))
  (func (export "check_abi_version_2"))
  (func (export "sr_check_abi_version_0"))
  (func (export "sr_schema_len") (param i32 i32) (result i32) (i32.const -1))
  (func (export "sr_schema") (param i32 i32 i32) (result i32) (i32.const -1))
  (func (export "sr_subject_len") (param i32 i32 i32 i32) (result i32) (i32.const -1))
  (func (export "sr_subject") (param i32 i32 i32 i32 i32) (result i32) (i32.const -1))
  (func (export "sr_create") (param i32 i32 i32 i32 i32) (result i32) (i32.const -1))

  ;; the previous batch is done: lay out the output sections the host reads
  (func $finish
    (local $t i32) (local $used i32) (local $one i32) (local $dst i32) (local $i i32)
    (local $entry i32) (local $start i32) (local $section i32)
    (local.set $t (i32.const 0))
    (loop $count_used
      (i32.store $ctl (i32.add (i32.const 128) (i32.mul (local.get $t) (i32.const 12))) (i32.const 0))
      (i32.store $ctl (i32.add (i32.const 132) (i32.mul (local.get $t) (i32.const 12))) (i32.const 0))
      (i32.store $ctl (i32.add (i32.const 136) (i32.mul (local.get $t) (i32.const 12)))
        (i32.load $ctl (i32.add (i32.const 96) (i32.shl (local.get $t) (i32.const 2)))))
      (if (i32.load $ctl (i32.add (i32.const 96) (i32.shl (local.get $t) (i32.const 2))))
        (then (local.set $used (i32.add (local.get $used) (i32.const 1)))
              (local.set $one (local.get $t))))
      (local.set $t (i32.add (local.get $t) (i32.const 1)))
      (br_if $count_used (i32.lt_u (local.get $t) (i32.const 8))))
    (if (i32.eqz (local.get $used)) (then (return)))
    (if (i32.eq (local.get $used) (i32.const 1))
      (then
        (i32.store $ctl (i32.add (i32.const 128) (i32.mul (local.get $one) (i32.const 12))) (i32.const 0))
        (i32.store $ctl (i32.add (i32.const 132) (i32.mul (local.get $one) (i32.const 12)))
          (i32.load $ctl (i32.const 16)))
        (return)))
    ;; several topics: copy each topic's records after the written ones, in order
    (local.set $dst (i32.load $ctl (i32.const 16)))
    (if (i32.eqz (call $ensure_out (i32.shl (local.get $dst) (i32.const 1))))
      (then (call $fail (i32.const 1))))
    (local.set $t (i32.const 0))
    (loop $topics
      (local.set $section (i32.add (i32.const 128) (i32.mul (local.get $t) (i32.const 12))))
      (i32.store $ctl (local.get $section) (local.get $dst))
      (local.set $start (local.get $dst))
      (local.set $i (i32.const 0))
      (block $end (loop $entries
        (br_if $end (i32.ge_u (local.get $i) (i32.load $ctl (i32.const 80))))
        (local.set $entry (local.get $i))
        (if (i32.eq (i32.load $idx (local.get $entry)) (local.get $t))
          (then
            (memory.copy $out $out (local.get $dst)
              (i32.load $idx (i32.add (local.get $entry) (i32.const 4)))
              (i32.load $idx (i32.add (local.get $entry) (i32.const 8))))
            (local.set $dst (i32.add (local.get $dst)
              (i32.load $idx (i32.add (local.get $entry) (i32.const 8)))))))
        (local.set $i (i32.add (local.get $i) (i32.const 12)))
        (br $entries)))
      (i32.store $ctl (i32.add (local.get $section) (i32.const 4))
        (i32.sub (local.get $dst) (local.get $start)))
      (local.set $t (i32.add (local.get $t) (i32.const 1)))
      (br_if $topics (i32.lt_u (local.get $t) (i32.const 8)))))

  ;; walks the input records once: their count and the largest payload
  (func $prepare (result i32)
    (local $p i32) (local $end i32) (local $len i32) (local $start i32) (local $payload i32)
    (local $max i32) (local $n i32)
    (local.set $p (i32.load $ctl (i32.const 4)))
    (local.set $end (i32.load $ctl (i32.const 8)))
    (global.set $bad (i32.const 0))
    (block $done (loop $record
      (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
      (local.set $len (i32.wrap_i64 (call $varint_ctl (local.get $p) (local.get $end))))
      (local.set $start (global.get $pos))
      (drop (call $varint_ctl (i32.add (local.get $start) (i32.const 1)) (local.get $end)))
      (drop (call $varint_ctl (global.get $pos) (local.get $end)))
      (local.set $payload (i32.sub (local.get $len) (i32.sub (global.get $pos) (local.get $start))))
      (if (i32.or (global.get $bad) (i32.lt_s (local.get $payload) (i32.const 0)))
        (then (call $fail (i32.const 7))))
      (if (i32.gt_u (local.get $payload) (local.get $max)) (then (local.set $max (local.get $payload))))
      (local.set $p (i32.add (local.get $start) (local.get $len)))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $record)))
    (if (i32.ne (local.get $p) (local.get $end)) (then (call $fail (i32.const 7))))
    (i32.store $ctl (i32.const 0) (local.get $n))
    (local.get $max))

  (func (export "read_batch_header")
    (param $base_offset i32) (param $record_count i32) (param $leader_epoch i32)
    (param $attributes i32) (param $last_offset_delta i32) (param $base_timestamp i32)
    (param $max_timestamp i32) (param $producer_id i32) (param $producer_epoch i32)
    (param $base_sequence i32) (result i32)
    (local $max i32)
    (if (i32.eq (i32.load $ctl (i32.const 28)) (i32.const 1))
      (then (call $finish) (i32.store $ctl (i32.const 28) (i32.const 2))))
    (if (i32.eqz (call $next_batch)) (then (unreachable)))
    (i32.store $ctl (i32.const 16) (i32.const 0))
    (i32.store $ctl (i32.const 80) (i32.const 0))
    (i32.store $ctl (i32.const 24) (i32.const 0))
    (i64.store $ctl (i32.const 84) (i64.const 0))
    (memory.fill $ctl (i32.const 96) (i32.const 0) (i32.const 32))
    (local.set $max (call $prepare))
    (i64.store $guest (local.get $base_offset) (i64.load $ctl (i32.const 256)))
    (i32.store $guest (local.get $record_count) (i32.load $ctl (i32.const 264)))
    (i32.store $guest (local.get $leader_epoch) (i32.load $ctl (i32.const 268)))
    (i32.store16 $guest (local.get $attributes) (i32.load $ctl (i32.const 272)))
    (i32.store $guest (local.get $last_offset_delta) (i32.load $ctl (i32.const 276)))
    (i64.store $guest (local.get $base_timestamp) (i64.load $ctl (i32.const 280)))
    (i64.store $guest (local.get $max_timestamp) (i64.load $ctl (i32.const 288)))
    (i64.store $guest (local.get $producer_id) (i64.load $ctl (i32.const 296)))
    (i32.store16 $guest (local.get $producer_epoch) (i32.load $ctl (i32.const 304)))
    (i32.store $guest (local.get $base_sequence) (i32.load $ctl (i32.const 308)))
    (i64.store $ctl (i32.const 64)
      (if (result i64) (i32.load $ctl (i32.const 56))
        (then (i64.load $ctl (i32.const 48))) (else (i64.load $ctl (i32.const 40)))))
    (i32.store $ctl (i32.const 12) (local.get $max))
    (i32.store $ctl (i32.const 28) (i32.const 1))
    (local.get $max))

  (func (export "read_next_record")
    (param $attrs i32) (param $timestamp i32) (param $offset i32) (param $buf i32) (param $len i32)
    (result i32)
    (local $p i32) (local $end i32) (local $length i32) (local $start i32) (local $a i32)
    (local $ts_delta i64) (local $off_delta i64) (local $payload i32) (local $ts i64)
    (if (i32.ne (i32.load $ctl (i32.const 28)) (i32.const 1)) (then (return (i32.const -1))))
    (if (i32.eqz (i32.load $ctl (i32.const 0))) (then (return (i32.const -1))))
    (local.set $p (i32.load $ctl (i32.const 4)))
    (local.set $end (i32.load $ctl (i32.const 8)))
    (local.set $length (i32.wrap_i64 (call $varint_ctl (local.get $p) (local.get $end))))
    (local.set $start (global.get $pos))
    (local.set $a (i32.load8_u $ctl (local.get $start)))
    (local.set $ts_delta (call $varint_ctl (i32.add (local.get $start) (i32.const 1)) (local.get $end)))
    (local.set $off_delta (call $varint_ctl (global.get $pos) (local.get $end)))
    (local.set $payload (i32.sub (local.get $length) (i32.sub (global.get $pos) (local.get $start))))
    (if (i32.lt_u (local.get $len) (local.get $payload)) (then (return (i32.const -2))))
    (memory.copy $guest $ctl (local.get $buf) (global.get $pos) (local.get $payload))
    (local.set $ts
      (if (result i64) (i32.load $ctl (i32.const 56))
        (then (i64.load $ctl (i32.const 48)))
        (else (i64.add (i64.load $ctl (i32.const 40)) (local.get $ts_delta)))))
    (i32.store8 $guest (local.get $attrs) (local.get $a))
    (i64.store $guest (local.get $timestamp) (local.get $ts))
    (i64.store $guest (local.get $offset) (i64.add (i64.load $ctl (i32.const 32)) (local.get $off_delta)))
    (i64.store $ctl (i32.const 64) (local.get $ts))
    (i32.store $ctl (i32.const 4) (i32.add (local.get $start) (local.get $length)))
    (i32.store $ctl (i32.const 0) (i32.sub (i32.load $ctl (i32.const 0)) (i32.const 1)))
    (local.get $payload))

  ;; appends one record (Kafka framing: length, attributes 0, timestamp delta 0, offset
  ;; delta = its index among the batch's records for that topic, payload) to $out
  (func $emit (param $buf i32) (param $len i32) (param $topic i32) (result i32)
    (local $count_at i32) (local $delta i32) (local $body i32) (local $total i32) (local $p i32)
    (local $idx_pos i32)
    (local.set $count_at (i32.add (i32.const 96) (i32.shl (local.get $topic) (i32.const 2))))
    (local.set $delta (i32.load $ctl (local.get $count_at)))
    (local.set $body (i32.add (i32.add (i32.const 2) (call $varint_size (local.get $delta))) (local.get $len)))
    (local.set $total (i32.add (call $varint_size (local.get $body)) (local.get $body)))
    (local.set $p (i32.load $ctl (i32.const 16)))
    (if (i64.gt_u (i64.add (i64.extend_i32_u (local.get $p)) (i64.extend_i32_u (local.get $total)))
                  (i64.extend_i32_u (i32.load $ctl (i32.const 20))))
      (then (call $fail (i32.const 1))))
    (if (i32.eqz (call $ensure_out (i32.add (local.get $p) (local.get $total))))
      (then (call $fail (i32.const 1))))
    (local.set $idx_pos (i32.load $ctl (i32.const 80)))
    (if (i32.eqz (call $ensure_idx (i32.add (local.get $idx_pos) (i32.const 12))))
      (then (call $fail (i32.const 1))))
    (i32.store $idx (local.get $idx_pos) (local.get $topic))
    (i32.store $idx (i32.add (local.get $idx_pos) (i32.const 4)) (local.get $p))
    (i32.store $idx (i32.add (local.get $idx_pos) (i32.const 8)) (local.get $total))
    (i32.store $ctl (i32.const 80) (i32.add (local.get $idx_pos) (i32.const 12)))
    (local.set $p (call $put_varint_out (local.get $p) (local.get $body)))
    (i32.store16 $out (local.get $p) (i32.const 0))
    (local.set $p (call $put_varint_out (i32.add (local.get $p) (i32.const 2)) (local.get $delta)))
    (memory.copy $out $guest (local.get $p) (local.get $buf) (local.get $len))
    (i32.store $ctl (i32.const 16) (i32.add (local.get $p) (local.get $len)))
    (i32.store $ctl (local.get $count_at) (i32.add (local.get $delta) (i32.const 1)))
    (local.get $len))

  (func $check_write (param $buf i32) (param $len i32) (result i32)
    (if (i32.ne (i32.load $ctl (i32.const 28)) (i32.const 1)) (then (return (i32.const -1))))
    (if (i32.lt_s (local.get $len) (i32.const 0)) (then (return (i32.const -2))))
    (if (i32.eqz (call $payload_ok (local.get $buf) (i32.add (local.get $buf) (local.get $len))))
      (then
        (i32.store $ctl (i32.const 88) (i32.const 1))
        (return (i32.const -2))))
    (i32.const 0))

  (func (export "write_record") (param $buf i32) (param $len i32) (result i32)
    (local $rc i32)
    (local.set $rc (call $check_write (local.get $buf) (local.get $len)))
    (if (local.get $rc) (then (return (local.get $rc))))
    (call $emit (local.get $buf) (local.get $len) (i32.const 0)))

  (func (export "write_record_with_options")
    (param $buf i32) (param $len i32) (param $opts i32) (param $opts_len i32) (result i32)
    (local $rc i32) (local $end i32) (local $n i64) (local $name i32) (local $t i32)
    (local $entry i32) (local $name_len i32)
    (local.set $rc (call $check_write (local.get $buf) (local.get $len)))
    (if (local.get $rc) (then (return (local.get $rc))))
    (if (i32.le_s (local.get $opts_len) (i32.const 0))
      (then (return (call $emit (local.get $buf) (local.get $len) (i32.const 0)))))
    (local.set $end (i32.add (local.get $opts) (local.get $opts_len)))
    (if (i32.ne (i32.load8_u $guest (local.get $opts)) (i32.const 1))
      (then (i32.store $ctl (i32.const 88) (i32.const 1)) (return (i32.const -2))))
    (global.set $bad (i32.const 0))
    (local.set $n (call $varint_guest (i32.add (local.get $opts) (i32.const 1)) (local.get $end)))
    (local.set $name (global.get $pos))
    (if (i32.or (global.get $bad)
          (i32.or (i64.lt_s (local.get $n) (i64.const 0))
                  (i64.ne (local.get $n) (i64.extend_i32_u (i32.sub (local.get $end) (local.get $name))))))
      (then (i32.store $ctl (i32.const 88) (i32.const 1)) (return (i32.const -2))))
    (local.set $name_len (i32.wrap_i64 (local.get $n)))
    (local.set $t (i32.const 0))
    (block $found (loop $topics
      (if (i32.ge_u (local.get $t) (i32.load $ctl (i32.const 60)))
        (then
          ;; unknown topic: note its name (up to 1 KiB) and refuse the write as Redpanda (-3)
          (i32.store $ctl (i32.const 24) (i32.const 2))
          (if (i32.gt_u (local.get $name_len) (i32.const 1020)) (then (local.set $name_len (i32.const 1020))))
          (i32.store $ctl (i32.const 3072) (local.get $name_len))
          (memory.copy $ctl $guest (i32.const 3076) (local.get $name) (local.get $name_len))
          (return (i32.const -3))))
      (local.set $entry (i32.add (i32.const 512) (i32.shl (local.get $t) (i32.const 3))))
      (if (i32.eq (i32.load $ctl (i32.add (local.get $entry) (i32.const 4))) (local.get $name_len))
        (then (br_if $found (call $same_name (local.get $name)
                                (i32.load $ctl (local.get $entry)) (local.get $name_len)))))
      (local.set $t (i32.add (local.get $t) (i32.const 1)))
      (br $topics)))
    (call $emit (local.get $buf) (local.get $len) (local.get $t)))

  (func $same_name (param $guest_p i32) (param $ctl_p i32) (param $n i32) (result i32)
    (local $i i32)
    (block $diff (loop $byte
      (if (i32.ge_u (local.get $i) (local.get $n)) (then (return (i32.const 1))))
      (br_if $diff (i32.ne (i32.load8_u $guest (i32.add (local.get $guest_p) (local.get $i)))
                           (i32.load8_u $ctl (i32.add (local.get $ctl_p) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $byte)))
    (i32.const 0))

  ;; ---------------------------------------------------------------- WASI (the hot part)
  (func (export "clock_time_get") (param $id i32) (param $precision i64) (param $out i32) (result i32)
    (if (i32.eqz (local.get $id))
      (then (i64.store $guest (local.get $out)
              (i64.mul (i64.load $ctl (i32.const 64)) (i64.const 1000000)))
            (return (i32.const 0))))
    (if (i32.le_u (local.get $id) (i32.const 3))
      (then (i64.store $guest (local.get $out) (i64.load $ctl (i32.const 72)))
            (i64.store $ctl (i32.const 72) (i64.add (i64.load $ctl (i32.const 72)) (i64.const 1000000)))
            (return (i32.const 0))))
    (i32.const 28))

  (func (export "clock_res_get") (param $id i32) (param $out i32) (result i32)
    (if (i32.le_u (local.get $id) (i32.const 3))
      (then (i64.store $guest (local.get $out) (i64.const 1000000)) (return (i32.const 0))))
    (i32.const 28))

  (func (export "sched_yield") (result i32) (i32.const 0))

  (func (export "proc_exit") (param $code i32)
    (i32.store $ctl (i32.const 84) (local.get $code))
    (call $fail (i32.const 5)))

  ;; ---------------------------------------------------------------- Sluice batch ABI
  (func (export "batch_check_abi_version_1"))

  (func (export "batch_fail") (param $ptr i32) (param $len i32)
    (local $n i32)
    (local.set $n (local.get $len))
    (if (i32.gt_u (local.get $n) (i32.const 1020)) (then (local.set $n (i32.const 1020))))
    (if (i32.lt_s (local.get $n) (i32.const 0)) (then (local.set $n (i32.const 0))))
    (i32.store $ctl (i32.const 3072) (local.get $n))
    (memory.copy $ctl $guest (i32.const 3076) (local.get $ptr) (local.get $n))
    (call $fail (i32.const 4)))

  ;; one section of batch-ABI output: `count` records in [p, end), Kafka framing,
  ;; attributes 0, timestamp delta 0, offset deltas 0..count-1
  (func $section_ok (param $p i32) (param $end i32) (param $count i32) (result i32)
    (local $j i32) (local $length i64) (local $start i32) (local $rec_end i32) (local $hc i64)
    (global.set $bad (i32.const 0))
    (block $done (loop $record
      (br_if $done (i32.ge_u (local.get $j) (local.get $count)))
      (local.set $length (call $varint_guest (local.get $p) (local.get $end)))
      (local.set $start (global.get $pos))
      (if (i32.or (global.get $bad)
            (i64.gt_u (local.get $length) (i64.extend_i32_u (i32.sub (local.get $end) (local.get $start)))))
        (then (return (i32.const 0))))
      (local.set $rec_end (i32.add (local.get $start) (i32.wrap_i64 (local.get $length))))
      (if (i32.ge_u (local.get $start) (local.get $rec_end)) (then (return (i32.const 0))))
      (if (i32.load8_u $guest (local.get $start)) (then (return (i32.const 0))))
      (if (i64.ne (call $varint_guest (i32.add (local.get $start) (i32.const 1)) (local.get $rec_end))
                  (i64.const 0))
        (then (return (i32.const 0))))
      (if (i64.ne (call $varint_guest (global.get $pos) (local.get $rec_end)) (i64.extend_i32_u (local.get $j)))
        (then (return (i32.const 0))))
      (if (i32.eqz (call $payload_ok (global.get $pos) (local.get $rec_end))) (then (return (i32.const 0))))
      (local.set $p (local.get $rec_end))
      (local.set $j (i32.add (local.get $j) (i32.const 1)))
      (br $record)))
    (i32.and (i32.eqz (global.get $bad)) (i32.eq (local.get $p) (local.get $end))))

  ;; the host's one call per batch: runs the guest's sluice_batch_process and validates
  ;; the sections it describes; returns 0 (sections in ctl) or a ShimFailure code
  (func (export "run") (param $input_len i32) (result i32)
    (local $desc i32) (local $n i32) (local $i i32) (local $e i32) (local $topic i32)
    (local $count i32) (local $ptr i32) (local $len i32) (local $total i64) (local $section i32)
    (local $mem i64)
    (i32.store $ctl (i32.const 24) (i32.const 0))
    (i64.store $ctl (i32.const 84) (i64.const 0))
    (memory.fill $ctl (i32.const 128) (i32.const 0) (i32.const 96))
    (local.set $desc (call_indirect $fns (type $process_t) (local.get $input_len) (i32.const 1)))
    (if (i32.eqz (local.get $desc)) (then (return (i32.const 6))))
    (local.set $mem (i64.mul (i64.extend_i32_u (memory.size $guest)) (i64.const 65536)))
    (if (i64.gt_u (i64.add (i64.extend_i32_u (local.get $desc)) (i64.const 132)) (local.get $mem))
      (then (return (i32.const 3))))
    (local.set $n (i32.load $guest (local.get $desc)))
    (if (i32.gt_u (local.get $n) (i32.const 8)) (then (return (i32.const 3))))
    (block $done (loop $sections
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $e (i32.add (i32.add (local.get $desc) (i32.const 4)) (i32.shl (local.get $i) (i32.const 4))))
      (local.set $topic (i32.load $guest (local.get $e)))
      (local.set $count (i32.load $guest (i32.add (local.get $e) (i32.const 4))))
      (local.set $ptr (i32.load $guest (i32.add (local.get $e) (i32.const 8))))
      (local.set $len (i32.load $guest (i32.add (local.get $e) (i32.const 12))))
      (if (i32.ge_u (local.get $topic) (i32.load $ctl (i32.const 60)))
        (then (i32.store $ctl (i32.const 84) (local.get $topic)) (return (i32.const 2))))
      (local.set $section (i32.add (i32.const 128) (i32.mul (local.get $topic) (i32.const 12))))
      (if (i32.load $ctl (i32.add (local.get $section) (i32.const 8))) (then (return (i32.const 3))))
      (local.set $total (i64.add (local.get $total) (i64.extend_i32_u (local.get $len))))
      (if (i64.gt_u (local.get $total) (i64.extend_i32_u (i32.load $ctl (i32.const 20))))
        (then (return (i32.const 1))))
      (if (i64.gt_u (i64.add (i64.extend_i32_u (local.get $ptr)) (i64.extend_i32_u (local.get $len)))
                    (local.get $mem))
        (then (return (i32.const 3))))
      (if (i32.eqz (call $section_ok (local.get $ptr) (i32.add (local.get $ptr) (local.get $len))
                                     (local.get $count)))
        (then (return (i32.const 3))))
      (if (local.get $count)
        (then
          (i32.store $ctl (local.get $section) (local.get $ptr))
          (i32.store $ctl (i32.add (local.get $section) (i32.const 4)) (local.get $len))
          (i32.store $ctl (i32.add (local.get $section) (i32.const 8)) (local.get $count))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $sections)))
    (i32.const 0))
)
"""


def trampolines(entries: list[tuple[str, tuple[str, ...], tuple[str, ...]]]) -> str:
    """WAT of a module that exports, per entry (export name, params, results), a function
    forwarding its arguments to the function in slot i of its table ``t``."""
    lines = [f'(module (table $t (export "t") {len(entries)} funcref)']
    for i, (name, params, results) in enumerate(entries):
        sig = "".join(f" (param {p})" for p in params) + "".join(f" (result {r})" for r in results)
        args = "".join(f" (local.get {k})" for k in range(len(params)))
        lines.append(
            f"  (type $s{i} (func{sig}))\n"
            f'  (func (export "{name}") (type $s{i})'
            f" (call_indirect $t (type $s{i}){args} (i32.const {i})))"
        )
    lines.append(")")
    return "\n".join(lines)
