;; A guest of Redpanda's ABI, by hand, that reports what the host hands it (the reference
;; test of the ABI's details). Per batch it writes, to the default output topic:
;;   1. a "header" record: key "H", value = the ten fields read_batch_header wrote (56 bytes,
;;      the layout of its out-pointers below) + its return value (i32, little-endian);
;;   2. per input record: key "R", value = attributes (u8, 7 bytes of padding), timestamp,
;;      offset and the WASI realtime clock read right after read_next_record (i64 each),
;;      read_next_record's return value (i32), then the payload bytes it read;
;;   3. a "codes" record: key "C", value = four i32: read_next_record into a 0-byte buffer
;;      (first record), write_record of a malformed payload, write_record_with_options with
;;      an unknown option key, and with the option "output topic = second" (the header
;;      record again: it lands in topic "second" when that is an output topic; -3 if not).
;; On the first batch it also writes key "E": value = argv (NUL-terminated strings), then
;; environ ("K=V" NUL-terminated).
(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (import "redpanda_transform" "read_batch_header"
    (func $read_batch_header (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "read_next_record"
    (func $read_next_record (param i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "write_record" (func $write_record (param i32 i32) (result i32)))
  (import "redpanda_transform" "write_record_with_options"
    (func $write_with_options (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $env_sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get" (func $env_get (param i32 i32) (result i32)))
  (memory (export "memory") 4)
  ;; 0..56 header fields; 56 read_batch_header's result; 64 attributes; 72 timestamp;
  ;; 80 offset; 88 clock; 96 read_next_record's result; 100..116 the four codes
  (data (i32.const 200) "\01\0csecond")  ;; option 1 (output topic), zig-zag length 6
  (data (i32.const 220) "\02")           ;; an unknown option key
  (data (i32.const 230) "\03")           ;; key length -2: malformed
  (data (i32.const 240) "HRCE")
  (global $first (mut i32) (i32.const 1))

  (func $put (param $p i32) (param $v i32) (result i32)  ;; zig-zag varint (v >= -1)
    (local $raw i32)
    (local.set $raw (i32.xor (i32.shl (local.get $v) (i32.const 1))
                             (i32.shr_s (local.get $v) (i32.const 31))))
    (block $done (loop $more
      (br_if $done (i32.lt_u (local.get $raw) (i32.const 0x80)))
      (i32.store8 (local.get $p) (i32.or (local.get $raw) (i32.const 0x80)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (local.set $raw (i32.shr_u (local.get $raw) (i32.const 7)))
      (br $more)))
    (i32.store8 (local.get $p) (local.get $raw))
    (i32.add (local.get $p) (i32.const 1)))

  ;; builds the payload (key, value, no headers) at 131072; returns its length
  (func $payload (param $kp i32) (param $kl i32) (param $vp i32) (param $vl i32) (param $extra_p i32)
                 (param $extra_l i32) (result i32)
    (local $p i32)
    (local.set $p (call $put (i32.const 131072) (local.get $kl)))
    (memory.copy (local.get $p) (local.get $kp) (local.get $kl))
    (local.set $p (i32.add (local.get $p) (local.get $kl)))
    (local.set $p (call $put (local.get $p) (i32.add (local.get $vl) (local.get $extra_l))))
    (memory.copy (local.get $p) (local.get $vp) (local.get $vl))
    (local.set $p (i32.add (local.get $p) (local.get $vl)))
    (memory.copy (local.get $p) (local.get $extra_p) (local.get $extra_l))
    (local.set $p (i32.add (local.get $p) (local.get $extra_l)))
    (i32.store8 (local.get $p) (i32.const 0))
    (i32.sub (i32.add (local.get $p) (i32.const 1)) (i32.const 131072)))

  (func $emit (param $kp i32) (param $kl i32) (param $vp i32) (param $vl i32) (param $xp i32) (param $xl i32)
    (drop (call $write_record (i32.const 131072)
      (call $payload (local.get $kp) (local.get $kl) (local.get $vp) (local.get $vl)
                     (local.get $xp) (local.get $xl)))))

  (func $environment
    (local $args_len i32) (local $env_len i32)
    (drop (call $args_sizes (i32.const 1000) (i32.const 1004)))
    (drop (call $args_get (i32.const 2048) (i32.const 4096)))
    (drop (call $env_sizes (i32.const 1008) (i32.const 1012)))
    (drop (call $env_get (i32.const 3072) (i32.add (i32.const 4096) (i32.load (i32.const 1004)))))
    (call $emit (i32.const 243) (i32.const 1) (i32.const 4096) (i32.load (i32.const 1004))
                (i32.add (i32.const 4096) (i32.load (i32.const 1004))) (i32.load (i32.const 1012))))

  (func (export "_start")
    (local $max i32) (local $i i32) (local $n i32) (local $header_len i32)
    (call $check)
    (loop $batches
      (local.set $max (call $read_batch_header (i32.const 0) (i32.const 8) (i32.const 12)
        (i32.const 16) (i32.const 20) (i32.const 24) (i32.const 32) (i32.const 40)
        (i32.const 48) (i32.const 52)))
      (i32.store (i32.const 56) (local.get $max))
      (call $emit (i32.const 240) (i32.const 1) (i32.const 0) (i32.const 60) (i32.const 0) (i32.const 0))
      ;; keep the header record's payload for the options tests
      (local.set $header_len (call $payload (i32.const 240) (i32.const 1) (i32.const 0)
                                            (i32.const 60) (i32.const 0) (i32.const 0)))
      (memory.copy (i32.const 98304) (i32.const 131072) (local.get $header_len))
      (local.set $i (i32.const 0))
      (block $done (loop $records
        (br_if $done (i32.ge_s (local.get $i) (i32.load (i32.const 8))))
        (if (i32.eqz (local.get $i))
          (then (i32.store (i32.const 100)
                  (call $read_next_record (i32.const 64) (i32.const 72) (i32.const 80)
                                          (i32.const 65536) (i32.const 0)))))
        (local.set $n (call $read_next_record (i32.const 64) (i32.const 72) (i32.const 80)
                                              (i32.const 65536) (local.get $max)))
        (i32.store (i32.const 96) (local.get $n))
        (drop (call $clock (i32.const 0) (i64.const 0) (i32.const 88)))
        (call $emit (i32.const 241) (i32.const 1) (i32.const 64) (i32.const 36)
                    (i32.const 65536) (local.get $n))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $records)))
      (i32.store (i32.const 104) (call $write_record (i32.const 230) (i32.const 1)))
      (i32.store (i32.const 108)
        (call $write_with_options (i32.const 98304) (local.get $header_len) (i32.const 220) (i32.const 1)))
      (i32.store (i32.const 112)
        (call $write_with_options (i32.const 98304) (local.get $header_len) (i32.const 200) (i32.const 8)))
      (call $emit (i32.const 242) (i32.const 1) (i32.const 100) (i32.const 16) (i32.const 0) (i32.const 0))
      (if (global.get $first) (then (global.set $first (i32.const 0)) (call $environment)))
      (br $batches)))
)
