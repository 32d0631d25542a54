// The attention map on the page (attention.js's AttentionMap on its canvas): what a generation
// streams its rows into, what a comparison keeps per side, and what the attention panel draws.
// A service the panels share.
import { $ } from './page.js';
import { AttentionMap } from './attention.js';

export const attention = new AttentionMap($('attention'));
