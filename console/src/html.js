// Preact + htm: the tagged template every view is written in (no JSX build step).

import { h } from "preact";
import htm from "htm";

export const html = htm.bind(h);
