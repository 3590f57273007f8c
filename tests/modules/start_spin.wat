;; Attacks the deadline during instantiation: the module's start function loops forever, so
;; the guest runs before `_start` is ever called (while the host instantiates it). The sandbox
;; must end the call as TIMEOUT at its deadline, or CANCELLED, exactly as for a spin in
;; `_start`, and instantiation must never be exempt from either.
(module
  (memory (export "memory") 1)

  (func $spin
    (loop $forever
      (br $forever)))

  (start $spin)

  (func (export "_start")))
