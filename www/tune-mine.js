// "Your models" in the Fine-tune panel: the models fine-tuned here or imported, kept in
// IndexedDB (store.js) and in this tab; listing, using, exporting (.pfmodel), importing and
// deleting them. A change to the list goes through the page store (the model menus follow).
import { listUserModels, deleteUserModel, saveUserModel } from './store.js';
import { importName, modelSummary } from './tune-text.js';
import { $, status, showError, notice, download } from './page.js';
import { call } from './worker-client.js';
import { run } from './commands.js';
import { addModel, removeModel, store } from './page-store.js';
import { tune, weightsOf } from './tune-state.js';

export async function restoreMine() {
  for (const { entry } of await listUserModels()) {
    if (!store.manifest.some((m) => m.name === entry.name)) addModel({ ...entry, user: true });
  }
  await showMine();
}

export async function showMine() {
  const mine = store.manifest.filter((m) => m.user);
  status.tune.models = mine.map((m) => m.name);
  const list = $('my-models');
  if (!mine.length) {
    const li = document.createElement('li');
    li.className = 'hint';
    li.textContent = 'None yet.';
    list.replaceChildren(li);
  } else {
    list.replaceChildren(
      ...mine.map((m) => {
        const li = document.createElement('li');
        const name = document.createElement('strong');
        name.textContent = m.name;
        const about = document.createElement('span');
        about.className = 'about';
        about.textContent = modelSummary(m);
        const button = (text, act, label) => {
          const b = document.createElement('button');
          b.textContent = text;
          b.setAttribute('aria-label', `${label} ${m.name}`);
          b.addEventListener('click', act);
          return b;
        };
        li.append(
          name,
          about,
          button('Use', () => run('use-model', m), 'Generate with'),
          button('Export', () => exportModel(m), 'Export'),
          button('Delete', () => remove(m), 'Delete'),
        );
        return li;
      }),
    );
  }
}


async function exportModel(entry) {
  try {
    const weights = await weightsOf(entry);
    if (!weights) throw new Error('its weights are no longer stored in this browser');
    const clean = { ...entry };
    delete clean.user;
    const copy = new Uint8Array(weights);
    const file = await call('packModel', { entry: clean, weights: copy.buffer }, { transfer: [copy.buffer] });
    download(new Blob([file], { type: 'application/octet-stream' }), `${entry.name}.pfmodel`);
  } catch (e) {
    showError(`${entry.name} could not be exported: ${e.message}`);
  }
}

export async function importModel(file) {
  try {
    if (file.size > 256 * 1024 * 1024) throw new Error('it is larger than 256 MB');
    const bytes = await file.arrayBuffer();
    const { entry, weights } = await call('unpackModel', { bytes }, { transfer: [bytes] });
    const name = importName(entry.name, (n) => store.manifest.some((m) => m.name === n));
    const renamed = { ...entry, name, file: `${name}.bpk`, default: false };
    tune.kept.set(name, weights);
    let where = 'and kept in this browser';
    try {
      await saveUserModel(renamed, weights);
    } catch (e) {
      where = `but not kept after this tab closes (${e.message})`;
    }
    addModel({ ...renamed, user: true });
    await showMine();
    notice(`Imported ${file.name} as ${name} (${renamed.task.toLowerCase()}), checked ${where}.`);
  } catch (e) {
    showError(`${file.name} could not be imported: ${e.message}`);
  }
}

async function remove(entry) {
  if (!confirm(`Delete ${entry.name}? This cannot be undone (export it first to keep a copy).`)) return;
  await deleteUserModel(entry.name);
  tune.kept.delete(entry.name);
  await call('unloadModel', { name: entry.name }).catch(() => {});
  removeModel(entry.name);
  await showMine();
}

