;; Attacks the table limit: grows a funcref table by one element at a time until `table.grow`
;; fails (returns -1), then writes {"ok":{"elements":N}} to stdout through WASI `fd_write`, N
;; being the table size it reached. A grow that traps ends the call as LIMIT_EXCEEDED (what
;; airlock must produce); a grow that merely fails leaves a result whose N must not exceed the
;; profile's table limit. Growing without any limit would run until the deadline.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))

  (memory (export "memory") 1)
  (table $table 1 funcref)

  ;; Layout of the first page:
  ;;   0..8    one iovec (pointer, length) for fd_write;  8..12 its count of bytes written
  ;;   80..83  the suffix, right after the digits, which are written backwards from 80
  ;;   128..   the prefix, copied in front of the digits when the result is written
  (data (i32.const 80) "}}\n")
  (data (i32.const 128) "{\"ok\":{\"elements\":")
  (global $prefix_len i32 (i32.const 18))

  ;; Writes $n in decimal so that its last digit is at 79, just before the suffix; returns the
  ;; first digit's offset. An i32 has at most 10 digits, so they start at 70 or later.
  (func $digits (param $n i32) (result i32)
    (local $at i32)
    (local.set $at (i32.const 80))
    (loop $next
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i32.store8 (local.get $at)
        (i32.add (i32.const 48) (i32.rem_u (local.get $n) (i32.const 10))))
      (local.set $n (i32.div_u (local.get $n) (i32.const 10)))
      (br_if $next (local.get $n)))
    (local.get $at))

  ;; Writes bytes [$at, $end) to stdout. WASI may write less than asked per call (wasmtime
  ;; takes one buffer at a time, an output pipe may take part of one), so it loops; on an
  ;; error, or a write that makes no progress, it stops: the missing result is the report.
  (func $write_all (param $at i32) (param $end i32)
    (block $done
      (loop $more
        (br_if $done (i32.ge_u (local.get $at) (local.get $end)))
        (i32.store (i32.const 0) (local.get $at))
        (i32.store (i32.const 4) (i32.sub (local.get $end) (local.get $at)))
        (br_if $done (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
        (br_if $done (i32.eqz (i32.load (i32.const 8))))
        (local.set $at (i32.add (local.get $at) (i32.load (i32.const 8))))
        (br $more))))

  ;; Writes the result document: the prefix copied in just before the digits of $n, so that
  ;; prefix, digits and suffix are one contiguous run of bytes.
  (func $report (param $n i32)
    (local $start i32)
    (local.set $start (i32.sub (call $digits (local.get $n)) (global.get $prefix_len)))
    (memory.copy (local.get $start) (i32.const 128) (global.get $prefix_len))
    (call $write_all (local.get $start) (i32.const 83)))

  (func (export "_start")
    (block $refused
      (loop $more
        (br_if $refused
          (i32.eq (table.grow $table (ref.null func) (i32.const 1)) (i32.const -1)))
        (br $more)))
    (call $report (table.size $table))))
