// The playground's image mode: for a model that reads images (input
// "image" in GET /v1/models), the form takes an image, picked or dropped
// on the page, instead of text, and sends it to POST /v1/generate as a
// multipart form, streamed as NDJSON. The page shows the image with each
// text region's box drawn over it as the regions are read, lists their
// texts, and shows the recognized text; for a model that speaks (its
// outputs include audio), it plays the audio as it streams and lights the
// word being spoken and its region's box, from the word timestamps and the
// audio clock. The answer's notes (text that was not spoken) are listed.
// Counters for tests live in window.omnistagePlayground.image.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const kit = window.omnistageKit;
  const test = kit.test;
  const SVG = 'http://www.w3.org/2000/svg';
  test.image = { active: false, requests: 0, file: '', regions: 0, text: '', notes: [], litRegions: [] };

  let model = null; // the model that reads images, while one is chosen
  let file = null; // the image chosen
  let shown = 0; // counts the images shown; only the last one's load counts
  const boxes = new Map(); // region index → {poly, item, region} of the request shown
  let lit = null; // the region index lit, or null

  // ImageRequest is one image request: its recognized text, which grows as
  // the regions are read, its regions, and its audio and words, in the
  // shape Playback reads.
  class ImageRequest extends kit.Request {
    constructor() {
      super('');
      this.revision = 0; // the text's; Playback draws the transcript again for each
      this.regions = [];
      this.notes = [];
      this.onCurrent = (w) => light(this, w);
    }

    addText(text) {
      if (!text) return;
      this.text += text;
      this.units = kit.codeUnits(this.text);
      this.revision++;
    }
  }

  let req = null; // the request being made or last made

  // show switches image mode on for model m (a model that reads images),
  // or off (null).
  function show(m) {
    const was = model;
    model = m;
    test.image.active = m !== null;
    $('image-mode').hidden = !m;
    $('image-panel').hidden = !m;
    const speaks = Boolean(m && (m.outputs || []).includes('audio'));
    $('speak').textContent = !m ? 'Speak' : speaks ? 'Read aloud' : 'Read';
    $('speak-h').textContent = m ? 'Read an image' : 'Speak';
    $('transcript-h').textContent = m ? 'Recognized text' : 'Spoken text';
    $('skip').textContent = m ? 'Skip to the image' : 'Skip to the text';
    $('skip').setAttribute('href', m ? '#image-file' : '#text');
    if (m && $('live').checked) {
      // Live mode speaks typed text: it ends with text mode.
      $('live').checked = false;
      $('live').dispatchEvent(new Event('change'));
    }
    if ((m && m.id) !== (was && was.id)) {
      // Another model: the last one's answer goes (its image stays).
      if (req) kit.stopSpeech();
      req = null;
      clearResults();
      const t = $('transcript');
      t.classList.add('muted');
      t.textContent = m ? 'The image’s text appears here as it is read' + (speaks ? ', each word lit as it is spoken.' : '.')
        : 'Each word lights up here as it is spoken.';
    }
  }

  // clearResults removes the regions and notes of the request shown.
  function clearResults() {
    boxes.clear();
    lit = null;
    $('regions-svg').replaceChildren();
    $('regions-list').replaceChildren();
    $('notes').replaceChildren();
    $('notes-box').hidden = true;
    test.image.regions = 0;
    test.image.text = '';
    test.image.notes = [];
    test.image.litRegions = [];
  }

  // choose takes the image picked or dropped, shows it, and sends it.
  function choose(f) {
    if (!f || !model) return;
    file = f;
    test.image.file = f.name;
    showImage(f);
    send();
  }

  // showImage shows the file f; its box drawing waits for its size. A file
  // that is not an image shows nothing (the server says what is wrong).
  function showImage(f) {
    const seq = ++shown;
    const img = $('image-view');
    img.alt = `The image ${f.name}`;
    img.removeAttribute('src');
    $('shot').hidden = true;
    const reader = new FileReader();
    // A data: URL, as the page's Content-Security-Policy allows no blob:.
    reader.onload = () => {
      if (seq === shown) img.src = reader.result;
    };
    reader.readAsDataURL(f);
  }

  function imageLoaded() {
    const img = $('image-view');
    $('regions-svg').setAttribute('viewBox', `0 0 ${img.naturalWidth} ${img.naturalHeight}`);
    $('regions-svg').setAttribute('preserveAspectRatio', 'none');
    $('shot').hidden = false;
    $('image-empty').hidden = true;
  }

  function imageFailed() {
    $('shot').hidden = true;
    $('image-empty').hidden = false;
  }

  // send sends the chosen image to the chosen model, streamed, and shows
  // and plays the answer as it comes.
  async function send() {
    if (!file) {
      kit.status('Pick an image, or drop one on the page.', test.state);
      $('image-file').focus();
      return;
    }
    kit.stopSpeech();
    kit.clearError();
    const speaks = (model.outputs || []).includes('audio');
    // Audio starts from the user's gesture: before any wait.
    if (speaks) kit.audio();
    let name;
    try {
      name = await kit.model();
    } catch (e) {
      kit.report(e);
      return;
    }
    if (!name || !model) return; // a later load replaced it, or text mode
    const r = new ImageRequest();
    req = r;
    clearResults();
    renderText(r);
    test.image.requests++;
    kit.begin(r);
    const form = new FormData();
    form.append('model', name);
    form.append('output_modalities', ['text', 'regions', 'audio', 'timestamps'].filter((k) => (model.outputs || []).includes(k)).join(','));
    form.append('stream', 'ndjson');
    form.append('file', file, file.name || 'image');
    try {
      const resp = await fetch('/v1/generate', {
        method: 'POST', headers: kit.headers(), body: form, signal: r.controller.signal, cache: 'no-store',
      });
      if (!resp.ok) throw await kit.failure(resp);
      r.id = resp.headers.get('X-Request-Id') || '';
      test.requestId = r.id;
      kit.status('Reading…', 'streaming');
      kit.showStats(r);
      await readLines(resp, (e) => onEvent(r, e));
      if (!r.done && !r.failed) throw new Error('the stream ended before its done event');
    } catch (e) {
      kit.failed(r, e);
    } finally {
      kit.settle(r);
      if (req === r && !r.playback) {
        // Nothing plays: the request is over.
        $('stop').disabled = true;
        if (r.done) kit.status(doneText(r), 'done');
      }
      if (req === r && !r.text) {
        $('transcript').textContent = r.done ? 'No text was found in the image.' : 'Nothing was read.';
      }
    }
  }

  function doneText(r) {
    const n = r.regions.filter((x) => x.text).length;
    const lines = n === 1 ? '1 line' : `${n} lines`;
    const spoken = (model && (model.outputs || []).includes('audio')) ? '; nothing was spoken (see the notes)' : '';
    return `Done: read ${lines} in ${kit.ms(r.total)}${spoken}.`;
  }

  // readLines calls on with each line of an NDJSON answer, parsed.
  async function readLines(resp, on) {
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) on(JSON.parse(line));
      }
    }
    if (buf.trim()) on(JSON.parse(buf));
  }

  function onEvent(r, e) {
    if (req !== r) return;
    if (!r.id && e.request_id) {
      r.id = e.request_id;
      test.requestId = r.id;
    }
    switch (e.type) {
      case 'output':
        if (e.regions) addRegions(r, e.regions);
        // Without the text output, the text is the regions' texts, each
        // followed by a newline, as the server counts offsets in it.
        if (typeof e.text === 'string' || e.regions) {
          r.addText(typeof e.text === 'string' ? e.text : e.regions.filter((g) => g.text).map((g) => g.text + '\n').join(''));
          renderText(r);
        }
        if (e.audio) addAudio(r, e.audio);
        if (e.timestamps) r.addWords(e.timestamps);
        break;
      case 'done':
        r.done = true;
        r.total = performance.now() - r.sent;
        r.audioMs = r.rate ? (r.samples / r.rate) * 1000 : 0;
        if (e.stages) kit.drawTimings(e.stages);
        showNotes(e.notes || []);
        kit.showStats(r);
        if (r.playback) kit.status(`Read: ${kit.ms(r.audioMs)} of audio in ${kit.ms(r.total)}; playing…`, 'playing');
        break;
      case 'error':
        r.failed = true;
        kit.showError(0, e.error || {});
        break;
    }
  }

  // addAudio plays a chunk of 16-bit PCM as it comes.
  function addAudio(r, a) {
    if (!a.data) return;
    if (!r.rate) {
      r.rate = a.sample_rate;
      test.sampleRate = r.rate;
    }
    const pcm = r.addAudio(a.data);
    if (!r.playback) {
      r.firstAudio = performance.now();
      r.playback = kit.play(r);
      kit.showStats(r);
      kit.status('Playing while it reads…', 'streaming');
    }
    r.playback.push(pcm);
  }

  // renderText shows the recognized text, until a playback draws it with
  // its words.
  function renderText(r) {
    test.image.text = r.text;
    if (r.playback) return;
    const t = $('transcript');
    t.classList.toggle('muted', r.text === '');
    t.textContent = r.text || 'Reading…';
  }

  // addRegions draws each region's box over the image, with its text as
  // its title, and lists its text.
  function addRegions(r, regions) {
    const svg = $('regions-svg');
    const list = $('regions-list');
    for (const g of regions) {
      r.regions.push(g);
      const poly = document.createElementNS(SVG, 'polygon');
      poly.setAttribute('class', 'region');
      poly.setAttribute('points', g.box.map(([x, y]) => `${x},${y}`).join(' '));
      poly.dataset.index = String(g.index);
      const title = document.createElementNS(SVG, 'title');
      title.textContent = g.text || '(not read)';
      poly.append(title);
      svg.append(poly);
      const item = kit.el('li', '', g.text || '(not read)');
      item.dataset.index = String(g.index);
      if (typeof g.score === 'number') item.append(' ', kit.el('small', 'muted', `score ${g.score.toFixed(2)}`));
      item.addEventListener('mouseenter', () => poly.classList.add('hover'));
      item.addEventListener('mouseleave', () => poly.classList.remove('hover'));
      list.append(item);
      boxes.set(g.index, { poly, item, region: g });
    }
    test.image.regions = svg.childElementCount;
  }

  // light lights the box and list entry of the region of word w (null:
  // none), the word being spoken.
  function light(r, w) {
    if (req !== r) return;
    let index = null;
    if (w) {
      const g = r.regions.find((x) => x.char_start <= w.charStart && w.charStart < x.char_end);
      if (g) index = g.index;
    }
    if (index === lit) return;
    const off = boxes.get(lit);
    if (off) {
      off.poly.classList.remove('lit');
      off.item.classList.remove('lit');
    }
    const on = boxes.get(index);
    if (on) {
      on.poly.classList.add('lit');
      on.item.classList.add('lit');
      const seen = test.image.litRegions;
      if (seen[seen.length - 1] !== index) seen.push(index);
    }
    lit = index;
  }

  function showNotes(notes) {
    const p = kit.pipeline();
    const name = (id) => {
      const s = p && p.stages.find((x) => x.id === id);
      return s ? s.name : `stage ${id}`;
    };
    $('notes').replaceChildren(...notes.map((n) => kit.el('li', '', `${name(n.stage)}: ${n.message}`)));
    $('notes-box').hidden = notes.length === 0;
    test.image.notes = notes.map((n) => n.message);
  }

  function hasFiles(e) {
    return e.dataTransfer && Array.from(e.dataTransfer.types || []).includes('Files');
  }

  function setup() {
    kit.imageMode({ active: () => model !== null, show, submit: send });
    $('image-file').addEventListener('change', () => {
      choose($('image-file').files[0]);
    });
    $('image-view').addEventListener('load', imageLoaded);
    $('image-view').addEventListener('error', imageFailed);
    // Drop anywhere on the page, in image mode.
    document.addEventListener('dragover', (e) => {
      if (!model || !hasFiles(e)) return;
      e.preventDefault();
      e.dataTransfer.dropEffect = 'copy';
      document.body.classList.add('dragging');
    });
    document.addEventListener('dragleave', (e) => {
      if (e.relatedTarget === null) document.body.classList.remove('dragging');
    });
    document.addEventListener('drop', (e) => {
      document.body.classList.remove('dragging');
      if (!model || !hasFiles(e)) return;
      e.preventDefault();
      const files = e.dataTransfer.files;
      if (files.length === 0) return;
      $('image-file').files = files; // the picker names the file dropped
      choose(files[0]);
    });
  }

  setup();
})();
