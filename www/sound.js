// The page's one sampled piano (audio.js): what playback, playing in with the keys and the
// live piano of a take all sound through. A service the panels share; it owns no part of the
// page.
import { Piano } from './audio.js';

export const piano = new Piano();
