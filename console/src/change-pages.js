// A run's file changes arrive a page at a time (ListChanges: `offset`, `limit`, `next_offset`,
// `total_changes`), and a step's set may go on from one page to the next. Pure (no DOM), so
// the tests run it under node.

import { num } from "./format.js";

/** File changes the run page reads (and draws) at a time: enough to read, few enough to draw
 * at once; a person asks for the next page. */
export const CHANGES_PAGE = 1000;

/** The most a page may hold (the daemon's bound). */
export const MAX_CHANGES_PAGE = 10000;

/** The most changes an event's change list draws; the rest is counted, and read on the run
 * page's Changes card a page at a time. */
export const MAX_LISTED = 200;

/** Appends page `next` to what has been read, `read` (null before the first page). */
export function mergeChangePages(read, next) {
  if (!read) return next;
  const steps = read.steps.map((s) => ({ ...s }));
  for (const step of next.steps) {
    const last = steps[steps.length - 1];
    if (last && last.step === step.step && last.changeSet && step.changeSet) {
      // The same step, continued: its changes joined, its set's other fields as they were.
      last.changeSet = { ...last.changeSet, changes: [...last.changeSet.changes, ...step.changeSet.changes] };
    } else {
      steps.push(step);
    }
  }
  return { ...next, workspace: read.workspace || next.workspace, steps };
}

/** How many file changes the steps read so far hold. */
export function changesRead(read) {
  return (read?.steps ?? []).reduce((n, s) => n + (s.changeSet?.changes?.length ?? 0), 0);
}

/** How many changes a set stands for, and how many of them it carries: a set in an event or
 * a result carries only its first changes (a bounded summary). */
export function setCounts(changeSet) {
  const carried = changeSet?.changes?.length ?? 0;
  return { carried, total: Math.max(num(changeSet?.totalChanges), carried) };
}
