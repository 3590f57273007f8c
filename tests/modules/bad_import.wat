;; Attacks the import policy: imports `env.host_secret`, a function the host does not (and
;; must never) provide, and calls it from `_start`. The sandbox must refuse the module when it
;; loads or instantiates it, with a message that names the import, and must never crash or
;; run `_start`.
(module
  (import "env" "host_secret" (func $host_secret (result i32)))

  (memory (export "memory") 1)

  (func (export "_start")
    (drop (call $host_secret))))
