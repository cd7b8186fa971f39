;; Batch-ABI guest whose behaviour is chosen by the first byte of the first record's value
;; (the reference tests of failures):
;;   "t" trap (unreachable)           "l" loop forever
;;   "m" grow memory until refused, then trap
;;   "f" sluice_batch.fail("guest says no")
;;   "u" describe output for topic index 5      "z" return 0 without fail
;;   "g" a malformed output section             "p" log two lines, output nothing
;; anything else: no output.
(module
  (import "sluice_batch" "check_abi_version_1" (func $check))
  (import "sluice_batch" "fail" (func $fail (param i32 i32)))
  (import "sluice_batch" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 256) "guest says no")
  (data (i32.const 288) "first line\nsecond line\n")
  (data (i32.const 320) "\ff\ff\ff")  ;; a malformed record
  (global $spin (mut i32) (i32.const 0))
  (func (export "_start") (call $check))
  (func (export "sluice_batch_input") (param i32) (result i32) (i32.const 65536))
  (func (export "sluice_batch_process") (param $len i32) (result i32)
    (local $p i32) (local $c i32)
    ;; first record: length varint, attributes, ts delta, offset delta (1-byte varints in these
    ;; tests), key length (-1 = 0x01), value length, value
    (local.set $p (i32.add (i32.const 65536) (i32.const 64)))
    (local.set $p (i32.add (local.get $p) (i32.const 4)))  ;; length, attrs, ts, offset
    (if (i32.eq (i32.load8_u (local.get $p)) (i32.const 1))
      (then (local.set $p (i32.add (local.get $p) (i32.const 1))))
      (else (local.set $p (i32.add (i32.add (local.get $p) (i32.const 1))
                                   (i32.shr_u (i32.load8_u (local.get $p)) (i32.const 1))))))
    (local.set $c (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
    (if (i32.eq (local.get $c) (i32.const 0x74)) (then (unreachable)))
    (if (i32.eq (local.get $c) (i32.const 0x6c))
      (then (loop $forever (global.set $spin (i32.add (global.get $spin) (i32.const 1))) (br $forever))))
    (if (i32.eq (local.get $c) (i32.const 0x6d))
      (then (loop $grow (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
            (unreachable)))
    (if (i32.eq (local.get $c) (i32.const 0x66))
      (then (call $fail (i32.const 256) (i32.const 13)) (unreachable)))
    (if (i32.eq (local.get $c) (i32.const 0x7a)) (then (return (i32.const 0))))
    (if (i32.eq (local.get $c) (i32.const 0x70))
      (then (call $log (i32.const 1) (i32.const 288) (i32.const 11))
            (call $log (i32.const 2) (i32.const 299) (i32.const 12))))
    (i32.store (i32.const 1024) (i32.const 0))
    (if (i32.eq (local.get $c) (i32.const 0x75))
      (then (i32.store (i32.const 1024) (i32.const 1))
            (i32.store (i32.const 1028) (i32.const 5)) (i32.store (i32.const 1032) (i32.const 0))
            (i32.store (i32.const 1036) (i32.const 320)) (i32.store (i32.const 1040) (i32.const 0))))
    (if (i32.eq (local.get $c) (i32.const 0x67))
      (then (i32.store (i32.const 1024) (i32.const 1))
            (i32.store (i32.const 1028) (i32.const 0)) (i32.store (i32.const 1032) (i32.const 1))
            (i32.store (i32.const 1036) (i32.const 320)) (i32.store (i32.const 1040) (i32.const 3))))
    (i32.const 1024))
)
