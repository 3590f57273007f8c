// A tiny observable value and the hook that renders from it: the state shared between pages
// (the signed-in token, the approvals inbox) lives in stores, page-local state in hooks.

import { useEffect, useReducer } from "preact/hooks";

export function createStore(initial) {
  let value = initial;
  const listeners = new Set();
  return {
    get: () => value,
    set(next) {
      value = typeof next === "function" ? next(value) : next;
      for (const listener of [...listeners]) listener(value);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** Re-renders the calling component whenever `store` changes; returns its value. */
export function useStore(store) {
  const [, rerender] = useReducer((n) => n + 1, 0);
  const rendered = store.get();
  useEffect(() => {
    const unsubscribe = store.subscribe(() => rerender(null));
    // Effects run after the paint: a change made since this render had no listener yet.
    if (store.get() !== rendered) rerender(null);
    return unsubscribe;
  }, [store]);
  return rendered;
}
