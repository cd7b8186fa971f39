;; identity on Sluice's batch ABI, by hand (the reference the SDKs are checked against):
;; every input record, re-framed (attributes 0, timestamp delta 0, offset delta = index), to
;; output topic 0. Input buffer at 64 KiB (grown on demand), output after the input.
(module
  (import "sluice_batch" "check_abi_version_1" (func $check))
  (memory (export "memory") 2)
  (global $input i32 (i32.const 65536))
  (global $cap (mut i32) (i32.const 0))
  (global $pos (mut i32) (i32.const 0))

  (func (export "_start") (call $check))

  (func (export "sluice_batch_input") (param $size i32) (result i32)
    ;; room for the input and, after it, an output twice its size (+ 64 KiB)
    (local $need i32)
    (local.set $need (i32.add (global.get $input) (i32.mul (local.get $size) (i32.const 3))))
    (local.set $need (i32.add (local.get $need) (i32.const 131072)))
    (if (i32.gt_u (local.get $need) (i32.mul (memory.size) (i32.const 65536)))
      (then (if (i32.eq (memory.grow (i32.sub (i32.shr_u (local.get $need) (i32.const 16)) (memory.size)))
                        (i32.const -1))
              (then (return (i32.const 0))))))
    (global.set $cap (local.get $size))
    (global.get $input))

  (func $varint (result i32)  ;; zig-zag varint at $pos (values that fit in i32)
    (local $raw i32) (local $shift i32) (local $b i32)
    (loop $next
      (local.set $b (i32.load8_u (global.get $pos)))
      (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
      (local.set $raw (i32.or (local.get $raw)
        (i32.shl (i32.and (local.get $b) (i32.const 0x7f)) (local.get $shift))))
      (local.set $shift (i32.add (local.get $shift) (i32.const 7)))
      (br_if $next (i32.and (local.get $b) (i32.const 0x80))))
    (i32.xor (i32.shr_u (local.get $raw) (i32.const 1))
             (i32.sub (i32.const 0) (i32.and (local.get $raw) (i32.const 1)))))

  (func $put (param $p i32) (param $v i32) (result i32)  ;; zig-zag varint of v >= 0
    (local $raw i32)
    (local.set $raw (i32.shl (local.get $v) (i32.const 1)))
    (block $done (loop $more
      (br_if $done (i32.lt_u (local.get $raw) (i32.const 0x80)))
      (i32.store8 (local.get $p) (i32.or (local.get $raw) (i32.const 0x80)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (local.set $raw (i32.shr_u (local.get $raw) (i32.const 7)))
      (br $more)))
    (i32.store8 (local.get $p) (local.get $raw))
    (i32.add (local.get $p) (i32.const 1)))

  (func $size (param $v i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $v) (i32.const 64)) (then (i32.const 1))
      (else (if (result i32) (i32.lt_u (local.get $v) (i32.const 8192)) (then (i32.const 2))
        (else (if (result i32) (i32.lt_u (local.get $v) (i32.const 1048576)) (then (i32.const 3))
          (else (i32.const 5))))))))

  (func (export "sluice_batch_process") (param $len i32) (result i32)
    (local $end i32) (local $out i32) (local $o i32) (local $n i32) (local $length i32)
    (local $rec_end i32) (local $payload i32) (local $body i32) (local $desc i32)
    (global.set $pos (i32.add (global.get $input) (i32.const 64)))
    (local.set $end (i32.add (global.get $pos) (i32.load offset=56 (global.get $input))))
    (local.set $out (i32.add (global.get $input) (i32.add (global.get $cap) (i32.const 64))))
    (local.set $o (local.get $out))
    (block $done (loop $record
      (br_if $done (i32.ge_u (global.get $pos) (local.get $end)))
      (local.set $length (call $varint))
      (local.set $rec_end (i32.add (global.get $pos) (local.get $length)))
      (global.set $pos (i32.add (global.get $pos) (i32.const 1)))  ;; attributes
      (drop (call $varint))  ;; timestamp delta
      (drop (call $varint))  ;; offset delta
      (local.set $payload (i32.sub (local.get $rec_end) (global.get $pos)))
      (local.set $body (i32.add (i32.add (i32.const 2) (call $size (local.get $n))) (local.get $payload)))
      (local.set $o (call $put (local.get $o) (local.get $body)))
      (i32.store16 (local.get $o) (i32.const 0))
      (local.set $o (call $put (i32.add (local.get $o) (i32.const 2)) (local.get $n)))
      (memory.copy (local.get $o) (global.get $pos) (local.get $payload))
      (local.set $o (i32.add (local.get $o) (local.get $payload)))
      (global.set $pos (local.get $rec_end))
      (local.set $n (i32.add (local.get $n) (i32.const 1)))
      (br $record)))
    ;; descriptor: 1 section (topic 0, n records, out, o - out), or none
    (local.set $desc (i32.const 1024))
    (i32.store (local.get $desc) (i32.ne (local.get $n) (i32.const 0)))
    (i32.store offset=4 (local.get $desc) (i32.const 0))
    (i32.store offset=8 (local.get $desc) (local.get $n))
    (i32.store offset=12 (local.get $desc) (local.get $out))
    (i32.store offset=16 (local.get $desc) (i32.sub (local.get $o) (local.get $out)))
    (local.get $desc))
)
