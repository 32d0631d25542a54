// The Fine-tune panel's files: reading the MIDI files a person adds, asking the Worker what it
// understood of each (bars to train and held out, melody, accompaniment, chords and phrases),
// the table that shows it, and the melody track to fix when the guess was wrong.
// The panel's state is tune-state.js's; a change to the list is told as 'tune-files' (tune.js:
// the buttons).
import { HOLDOUT, MAX_FILES, chordsSummary, usedText } from './tune-text.js';
import { $, showError, MAX_FILE_BYTES } from './page.js';
import { call } from './worker-client.js';
import { emit } from './events.js';
import { task, tune } from './tune-state.js';

export async function addFiles(list) {
  const files = [...list];
  const room = MAX_FILES - tune.files.length;
  if (files.length > room) {
    showError(`Fine-tuning reads at most ${MAX_FILES} files; ${files.length - room} were left out.`);
  }
  const problems = [];
  for (const file of files.slice(0, Math.max(0, room))) {
    if (!/\.(mid|midi|kar|smf)$/i.test(file.name) && !/midi/.test(file.type)) {
      problems.push(`${file.name} is not a MIDI file`);
      continue;
    }
    if (file.size > MAX_FILE_BYTES) {
      problems.push(`${file.name} is larger than 8 MB`);
      continue;
    }
    try {
      const bytes = await file.arrayBuffer();
      const piece = await call('readMidi', { bytes, name: file.name }, { transfer: [bytes] });
      addPiece(piece);
    } catch (e) {
      problems.push(e.message);
    }
  }
  if (problems.length) showError(`Some files were not added: ${problems.join('; ')}.`);
  await inspect();
}

export function addPiece(piece) {
  // The same name twice: the newer file replaces the older.
  tune.files = tune.files.filter((f) => f.name !== piece.name);
  tune.files.push({ name: piece.name, piece: structuredClone(piece), report: null });
}

export async function inspect() {
  if (!tune.files.length) {
    showFiles();
    return;
  }
  try {
    const reports = await call('tuneInspect', {
      pieces: tune.files.map((f) => f.piece),
      task: task(),
      holdout: HOLDOUT,
    });
    reports.forEach((r, i) => (tune.files[i].report = r));
  } catch (e) {
    showError(`The files could not be read for fine-tuning: ${e.message}`);
  }
  showFiles();
}

// The melody-track choice: the chosen track becomes the melody; the former melody becomes
// accompaniment (piano).
function setMelody(file, index) {
  for (const [i, t] of file.piece.tracks.entries()) {
    if (i === index) t.role = 'melody';
    else if (t.role === 'melody') t.role = 'piano';
  }
  inspect();
}

export function showFiles() {
  const table = $('tune-table');
  const body = table.tBodies[0];
  table.hidden = !tune.files.length;
  body.replaceChildren(
    ...tune.files.map((file, fi) => {
      const r = file.report;
      const row = document.createElement('tr');
      const cell = (text, cls) => {
        const td = document.createElement('td');
        td.textContent = text;
        if (cls) td.className = cls;
        return td;
      };
      const melody = document.createElement('select');
      melody.setAttribute('aria-label', `Melody track of ${file.name}`);
      melody.append(new Option('none', '-1'));
      file.piece.tracks.forEach((t, i) => {
        if (t.role === 'other' && t.channel === 9) return; // drums
        melody.append(new Option(`${t.name || `track ${i + 1}`} (${t.notes.length} notes)`, String(i)));
      });
      melody.value = String(file.piece.tracks.findIndex((t) => t.role === 'melody'));
      melody.disabled = Boolean(tune.run);
      melody.addEventListener('change', () => setMelody(file, Number(melody.value)));
      const melodyCell = document.createElement('td');
      melodyCell.append(melody);
      const usedBy = usedText(r, file.piece);
      const used = cell(usedBy.text, usedBy.className);
      const remove = document.createElement('button');
      remove.textContent = 'Remove';
      remove.setAttribute('aria-label', `Remove ${file.name}`);
      remove.disabled = Boolean(tune.run);
      remove.addEventListener('click', () => {
        tune.files.splice(fi, 1);
        inspect();
      });
      const removeCell = document.createElement('td');
      removeCell.append(remove);
      row.append(
        cell(file.name),
        melodyCell,
        cell(String(r && !r.problem ? r.trainBars + r.heldOutBars : file.piece.promptBars)),
        cell(chordsSummary(file.piece)),
        used,
        removeCell,
      );
      return row;
    }),
  );
  emit('tune-files');
}

