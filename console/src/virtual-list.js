// A virtual list: a scroll container that renders only the rows in view (plus a few each
// side) inside a body as tall as all the rows, each row absolutely positioned. Rows have one
// height, except those the caller measures (expanded rows: `heights`, index → px). It can
// fill the window's height, follow its end while the user is there, and say which range
// it shows (for loading more). The window math is in virtual-window.js.

import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { html } from "./html.js";
import { atEnd, buildOffsets, fixedWindow, variableWindow } from "./virtual-window.js";

/**
 * Props:
 *   count, rowHeight (px), heights (Map index → px, optional), overscan,
 *   renderRow(index, { top, height, measured }) → vnode (must use the given position style),
 *   header (vnode, sticky, rendered before the body) and headerHeight (px),
 *   attrs (of the scroll container: role, aria-*, data-testid, class), bodyAttrs, bodyTag,
 *   fill (px to leave below the list when filling the window; undefined: CSS decides),
 *   minHeight, follow (stick to the end while the user is at it), control (a ref that gets
 *   { scrollToEnd }), onRange(start, end, count), onAtEnd(bool), onFirstRows(), onMeasure(index, px).
 */
export function VirtualList(props) {
  const {
    count,
    rowHeight,
    heights,
    overscan = 6,
    renderRow,
    header = null,
    headerHeight = 0,
    attrs = {},
    bodyAttrs = {},
    bodyTag = "div",
    fill,
    minHeight = 240,
    follow = false,
    control,
    onRange,
    onAtEnd,
    onFirstRows,
    onMeasure,
  } = props;

  const ref = useRef(null);
  const bodyRef = useRef(null);
  const [scrollTop, setScrollTop] = useState(0);
  // Until measured, assume the window's height: the first render already fills the screen.
  const [viewport, setViewport] = useState(() => (typeof window === "undefined" ? 800 : window.innerHeight));
  const atEndRef = useRef(true);
  const firstRowsDone = useRef(false);
  const lastRange = useRef("");

  const variable = heights && heights.size > 0;
  const offsets = variable ? buildOffsets(count, rowHeight, heights) : null;
  const total = variable ? offsets[count] : count * rowHeight;
  const rowsTop = Math.max(0, scrollTop - headerHeight);
  const rowsViewport = Math.max(0, viewport - headerHeight);
  const { start, end } = variable
    ? variableWindow({ offsets, count, scrollTop: rowsTop, viewport: rowsViewport, overscan })
    : fixedWindow({ count, rowHeight, scrollTop: rowsTop, viewport: rowsViewport, overscan });

  // Fill the window's height below the list's top (CSSOM style: allowed by the CSP).
  useLayoutEffect(() => {
    if (fill === undefined) return undefined;
    const el = ref.current;
    const size = () => {
      const top = el.getBoundingClientRect().top + window.scrollY;
      el.style.height = `${Math.max(minHeight, Math.floor(window.innerHeight - top - fill))}px`;
    };
    size();
    window.addEventListener("resize", size);
    return () => window.removeEventListener("resize", size);
  }, [fill, minHeight]);

  // Track the viewport's height.
  useLayoutEffect(() => {
    const el = ref.current;
    setViewport(el.clientHeight || viewport);
    if (typeof ResizeObserver === "undefined") return undefined;
    const observer = new ResizeObserver(() => setViewport(el.clientHeight));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  // Follow the end: after rows were added, scroll to them if the user was at the end.
  useLayoutEffect(() => {
    const el = ref.current;
    if (follow && atEndRef.current && el.scrollHeight > el.clientHeight) {
      el.scrollTop = el.scrollHeight;
      if (el.scrollTop !== scrollTop) setScrollTop(el.scrollTop);
    }
  }, [total, follow]);

  // Measure rows rendered at their natural height.
  useLayoutEffect(() => {
    if (!onMeasure || !bodyRef.current) return;
    for (const row of bodyRef.current.querySelectorAll("[data-measure]")) {
      const index = Number(row.getAttribute("data-index"));
      const h = Math.ceil(row.getBoundingClientRect().height);
      if (h > 0 && heights?.get(index) !== h) onMeasure(index, h);
    }
  });

  // The first screenful of rows is in the DOM.
  useLayoutEffect(() => {
    if (!firstRowsDone.current && end > start && onFirstRows) {
      firstRowsDone.current = true;
      onFirstRows();
    }
  }, [start, end]);

  useEffect(() => {
    const key = `${start}:${end}:${count}`;
    if (onRange && key !== lastRange.current) {
      lastRange.current = key;
      onRange(start, end, count);
    }
  });

  if (control) {
    control.current = {
      scrollToEnd() {
        const el = ref.current;
        if (!el) return;
        atEndRef.current = true;
        el.scrollTop = el.scrollHeight;
        setScrollTop(el.scrollTop);
        onAtEnd?.(true);
      },
    };
  }

  const onScroll = (event) => {
    const el = event.currentTarget;
    setScrollTop(el.scrollTop);
    const now = atEnd(el);
    if (now !== atEndRef.current) {
      atEndRef.current = now;
      onAtEnd?.(now);
    }
  };

  const rows = [];
  for (let i = start; i < end; i += 1) {
    const top = variable ? offsets[i] : i * rowHeight;
    const measured = heights?.has(i) ?? false;
    rows.push(renderRow(i, { top, height: variable ? offsets[i + 1] - offsets[i] : rowHeight, measured }));
  }

  const Body = bodyTag;
  return html`
    <div ...${attrs} ref=${ref} onScroll=${onScroll}>
      ${header}
      <${Body} ...${bodyAttrs} class=${`vbody ${bodyAttrs.class ?? ""}`} ref=${bodyRef} style=${{ height: `${total}px` }}>
        ${rows}
      <//>
    </div>
  `;
}

/** The style a row gets for its place: absolute, at `top`, of fixed height unless measured. */
export function rowStyle({ top, height }, natural = false) {
  return natural ? { top: `${top}px` } : { top: `${top}px`, height: `${height}px` };
}
