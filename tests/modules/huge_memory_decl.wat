;; Attacks the memory limit before any code runs: declares a minimum linear memory of 60000
;; pages (60000 * 64 KiB, about 3.7 GiB), which instantiation alone would have to provide.
;; The sandbox must refuse it (LIMIT_EXCEEDED: the memory limit) without reserving that
;; memory, and must never run `_start`.
(module
  (memory (export "memory") 60000)

  (func (export "_start")))
