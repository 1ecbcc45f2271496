// The omnistage playground: a speech request to POST /v1/audio/speech as
// server-sent events (raw PCM deltas, word timestamps, stage timings),
// played with Web Audio while it streams, each input word highlighted as
// it is spoken. The model select lists the pipelines of GET /v1/models;
// the chosen one's route is drawn from GET /v1/pipeline?model=, its voices
// come from GET /v1/audio/voices?model=, and the speech request names it.
// The API key the user types stays in this closure. Counters for tests
// live in window.omnistagePlayground.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);

  const EXAMPLES = [
    ['Greeting', 'Hello from omnistage. The talker, the vocoder and the aligner each ran as a stage.'],
    ['Numbers', 'The 8:15 train to Paris costs $42.50, and it leaves from platform 9.'],
    ['Unicode', 'Café au lait ☕ and crème brûlée 🍮: each word is found in the text as typed.'],
    ['Story', 'Once upon a time, a small server learned to speak. It read every sentence aloud, one stage after another, and never lost its place.'],
  ];

  // LEAD is how far ahead of the audio clock the first chunk is
  // scheduled, in seconds: room for the next chunk to arrive.
  const LEAD = 0.08;
  // TICK is the period of the highlighting, in milliseconds.
  const TICK = 30;
  // MODELS_POLL is how often the models are read again while one is not
  // ready, in milliseconds, so that it becomes selectable once it is.
  const MODELS_POLL = 5000;

  const test = {
    ready: false,
    state: 'loading',
    model: '',
    requests: 0,
    samplesReceived: 0,
    samplesScheduled: 0,
    samplesPlayed: 0,
    sampleRate: 0,
    words: 0,
    highlighted: [],
    stagesDrawn: 0,
    pipelineDrawn: 0,
    requestId: '',
    wavBytes: 0,
    lastError: null,
  };
  window.omnistagePlayground = test;

  let apiKey = '';
  let models = []; // the pipelines of GET /v1/models, in the server's order
  let loaded = null; // {key, model}: what the pipeline and voices were loaded with
  let loads = 0; // counts the loads of a pipeline; only the last one shows
  let modelsPoll = 0; // the timer that reads the models again
  let wantWords = true; // the word timestamps box as the user last set it
  let pipeline = null;
  let audioCtx = null;
  let current = null; // the request being made or last made
  let playback = null;
  let wavURL = '';
  let imageMode = null; // image.js's mode, once it registers

  // status says what the page is doing, in the live region.
  function status(text, state) {
    $('status').textContent = text;
    if (state) test.state = state;
  }

  function clearError() {
    $('error').hidden = true;
    $('error').textContent = '';
    test.lastError = null;
  }

  // showError shows a readable message for an error answer (status, or 0
  // for an error event mid-stream or a network failure) and its
  // {message, code}.
  function showError(httpStatus, err, retryAfter) {
    const message = (err && err.message) || 'no details';
    const code = (err && err.code) || '';
    let text;
    if (httpStatus === 401) {
      text = `The server refused the API key (401): ${message}. Enter the server's API key in the API key field.`;
    } else if (httpStatus === 503) {
      text = `The server is busy or not ready (503${code ? ', ' + code : ''}): ${message}.` +
        (retryAfter ? ` Try again in ${retryAfter} s.` : ' Try again shortly.');
    } else if (httpStatus >= 400 && httpStatus < 500) {
      text = `The server could not take this request (${httpStatus}${code ? ', ' + code : ''}): ${message}`;
    } else if (httpStatus >= 500) {
      text = `The server failed (${httpStatus}${code ? ', ' + code : ''}): ${message}`;
    } else if (code === 'replica_lost') {
      text = `A stage replica was lost during the request: ${message}`;
    } else if (code) {
      text = `The request failed while streaming (${code}): ${message}`;
    } else {
      text = `Cannot reach the server: ${message}`;
    }
    $('error').textContent = text;
    $('error').hidden = false;
    test.lastError = { status: httpStatus, code, message: text };
    status('Failed.', 'error');
  }

  function headers(extra) {
    const h = Object.assign({}, extra);
    if (apiKey) h.Authorization = 'Bearer ' + apiKey;
    return h;
  }

  // ApiError is an error answer of the server.
  class ApiError extends Error {
    constructor(httpStatus, err, retryAfter) {
      super((err && err.message) || `HTTP ${httpStatus}`);
      this.status = httpStatus;
      this.err = err;
      this.retryAfter = retryAfter;
    }
  }

  // failure turns a non-2xx response into an ApiError.
  async function failure(resp) {
    let err = null;
    try {
      err = (await resp.json()).error;
    } catch {
      err = { message: resp.statusText || `HTTP ${resp.status}` };
    }
    return new ApiError(resp.status, err, resp.headers.get('Retry-After'));
  }

  async function getJSON(path) {
    const resp = await fetch(path, { headers: headers(), cache: 'no-store' });
    if (!resp.ok) throw await failure(resp);
    return resp.json();
  }

  function report(e) {
    if (e instanceof ApiError) showError(e.status, e.err, e.retryAfter);
    else showError(0, { message: e.message });
  }

  // unusable says why the page cannot send model m a request now, or
  // returns '': a speech request to a model that takes text, an image to
  // one that reads images (image mode).
  function unusable(m) {
    const outputs = m.outputs || [];
    if (m.input === 'image') {
      if (!outputs.includes('text') && !outputs.includes('regions')) return 'no text';
    } else if (m.input !== 'text') {
      return `takes ${m.input}`;
    } else if (!outputs.includes('audio')) {
      return 'no audio';
    }
    if (m.ready === false) return 'not ready';
    return '';
  }

  // loadModels fills the model select with the pipelines of GET /v1/models
  // (not the aliases), each that cannot take a request now disabled and
  // saying why. The choice stays if it still can; else the server's
  // default (the pipeline its aliases stand for), else the first that can.
  // While a pipeline is not ready, the models are read again now and then.
  async function loadModels() {
    clearTimeout(modelsPoll);
    const list = (await getJSON('/v1/models')).data || [];
    const alias = list.find((m) => m.alias_of);
    models = list.filter((m) => !m.alias_of);
    const def = alias ? alias.alias_of : (models.length ? models[0].id : '');
    const sel = $('model');
    const keep = sel.value;
    sel.replaceChildren(...models.map((m) => {
      const why = unusable(m);
      const notes = [m.id === def ? 'default' : '', why].filter(Boolean);
      const o = new Option(notes.length ? `${m.id} (${notes.join(', ')})` : m.id, m.id);
      o.disabled = why !== '';
      return o;
    }));
    const usable = models.filter((m) => !unusable(m)).map((m) => m.id);
    sel.value = [keep, def].find((id) => usable.includes(id)) || usable[0] || def;
    if (models.some((m) => m.ready === false)) modelsPoll = setTimeout(pollModels, MODELS_POLL);
  }

  // pollModels reads the models again, and loads the chosen one if the
  // choice had to change.
  async function pollModels() {
    try {
      await loadModels();
      if (loaded && loaded.model !== $('model').value) await loadPipeline();
    } catch {
      // The next load, on a key or a model change, reads them again.
    }
  }

  // loadPipeline reads the chosen model's pipeline and voices, draws the
  // one and lists the others, and offers word timestamps if the model has
  // an aligner. It returns false when a later load replaced it; seq is
  // the load's number, when it began earlier (load).
  async function loadPipeline(seq = ++loads) {
    const name = $('model').value;
    const key = apiKey;
    test.ready = false;
    status(`Loading the pipeline${name ? ' ' + name : ''}…`, 'loading');
    const q = name ? '?model=' + encodeURIComponent(name) : '';
    const reads = models.some((x) => x.id === name && x.input === 'image');
    let p, v;
    try {
      // A model that reads images has no voice to pick.
      [p, v] = await Promise.all([getJSON('/v1/pipeline' + q), reads ? { voices: [] } : getJSON('/v1/audio/voices' + q)]);
    } catch (e) {
      if (seq !== loads) return false;
      throw e;
    }
    if (seq !== loads) return false;
    pipeline = p;
    loaded = { key, model: name };
    const m = models.find((x) => x.id === name);
    drawPipeline(p);
    fillVoices(v.voices || []);
    offerWords(Boolean(m && m.word_timestamps));
    describeModel(m);
    if (imageMode) imageMode.show(m && m.input === 'image' ? m : null);
    $('text-mode').hidden = Boolean(imageMode && imageMode.active());
    clearError();
    test.model = p.name;
    test.ready = true;
    status(m && m.ready === false ? `Pipeline ${p.name} is not ready yet.` : `Ready: pipeline ${p.name}.`, 'ready');
    return true;
  }

  // offerWords enables the word timestamps box, as the user last set it,
  // for a model with an aligner, and clears and disables it otherwise.
  function offerWords(can) {
    const ts = $('timestamps');
    ts.disabled = !can;
    ts.checked = can && wantWords;
    $('timestamps-hint').textContent = can ? 'highlight each word as it is spoken'
      : 'this model has no aligner, so no words to highlight';
  }

  // describeModel says in the model select's hint what model m takes and
  // gives.
  function describeModel(m) {
    let text = 'The pipeline that speaks: its voices, its stages and whether it times words.';
    if (m && m.input === 'image') {
      text = `image → ${(m.outputs || []).join(' + ')}: its text regions${(m.outputs || []).includes('audio') ? ', read aloud' : ''}.`;
    } else if (m) {
      const voices = (m.voices || []).length;
      text = `${m.input} → ${(m.outputs || []).join(' + ')}; ${voices === 1 ? '1 voice' : voices + ' voices'}.`;
    }
    $('model-hint').textContent = text;
  }

  // load reads the models, then the chosen one's pipeline and voices, with
  // the current key. It returns false when a later load replaced it.
  async function load() {
    const seq = ++loads;
    test.ready = false;
    status('Loading the models…', 'loading');
    try {
      await loadModels();
    } catch (e) {
      if (seq !== loads) return false;
      throw e;
    }
    return seq === loads && loadPipeline(seq);
  }

  // tryLoad runs load, or another loader, and shows what went wrong.
  async function tryLoad(loader = load) {
    try {
      await loader();
    } catch (e) {
      report(e);
      if (e instanceof ApiError && e.status === 401) test.state = 'locked';
    }
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function stageBox(id, name, engine, placement, kinds, extra) {
    const li = el('li', 'stage' + (extra ? ' ' + extra : ''));
    li.append(el('span', 'id', String(id)), el('span', 'name', name));
    li.append(el('span', 'meta', engine), el('span', 'meta', kinds));
    li.append(el('span', 'tag', placement));
    return li;
  }

  // drawPipeline draws the route's stages in order, the aligner after the
  // tail, and the skipped stages greyed out.
  function drawPipeline(p) {
    $('pipeline-name').textContent = p.name;
    const ol = $('pipeline');
    const skipped = $('skipped');
    ol.replaceChildren();
    skipped.replaceChildren();
    const byId = new Map(p.stages.map((s) => [s.id, s]));
    for (const id of p.route) {
      const s = byId.get(id);
      const li = stageBox(s.id, s.name, s.engine, s.placement, `${s.input} → ${s.output}`);
      li.setAttribute('aria-label', `stage ${s.id}, ${s.name}: engine ${s.engine}, placement ${s.placement}, ${s.input} to ${s.output}`);
      ol.append(li);
    }
    if (p.aligner) {
      const a = p.aligner;
      const li = stageBox(a.id, a.name, a.engine, a.placement, 'audio → timestamps', 'aligner');
      li.setAttribute('aria-label', `aligner, stage ${a.id}, ${a.name}: engine ${a.engine}, placement ${a.placement}, after the tail`);
      ol.append(li);
    }
    const skip = p.stages.filter((s) => s.skipped);
    for (const s of skip) {
      const li = stageBox(s.id, s.name, s.engine, s.placement, `${s.input} → ${s.output}`, 'skipped');
      li.setAttribute('aria-label', `stage ${s.id}, ${s.name}: skipped by the route`);
      skipped.append(li);
    }
    $('skipped-box').hidden = skip.length === 0;
    test.pipelineDrawn = ol.children.length;
  }

  function fillVoices(voices) {
    const sel = $('voice');
    const keep = sel.value;
    sel.replaceChildren(new Option('Pipeline default', ''));
    const own = voices.filter((v) => !v.alias_of);
    const aliases = voices.filter((v) => v.alias_of);
    const group = (label, list) => {
      if (!list.length) return;
      const g = document.createElement('optgroup');
      g.label = label;
      for (const v of list) {
        const bits = [v.language, v.gender].filter(Boolean).join(', ');
        g.append(new Option(bits ? `${v.name || v.id} (${bits})` : (v.name || v.id), v.id));
      }
      sel.append(g);
    };
    group('Voices', own);
    group('Aliases', aliases);
    sel.value = keep;
    if (sel.value !== keep) sel.value = '';
  }

  // codeUnits maps code point offsets of text to UTF-16 offsets: the
  // server's char_start and char_end count code points, JS strings count
  // UTF-16 units, and the two differ after any character beyond the BMP.
  function codeUnits(text) {
    const units = [0];
    let at = 0;
    for (const cp of Array.from(text)) {
      at += cp.length;
      units.push(at);
    }
    return units;
  }

  // Request is one speech request: the text it spoke, its audio and words
  // as they came, and its times.
  class Request {
    constructor(text) {
      this.text = text;
      this.units = codeUnits(text);
      this.words = []; // {start, end (UTF-16), charStart (code points), text, startMs, endMs}
      this.chunks = []; // Int16Array
      this.samples = 0;
      this.rate = 0;
      this.id = '';
      this.sent = performance.now();
      this.firstAudio = 0;
      this.done = false;
      this.controller = new AbortController();
      this.odd = null; // a byte left over from a delta of odd length
    }

    addWords(words) { addWords(this, words); }

    // addAudio decodes one base64 delta of 16-bit little-endian PCM.
    addAudio(b64) {
      const bin = atob(b64);
      let bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      if (this.odd !== null) {
        const joined = new Uint8Array(bytes.length + 1);
        joined[0] = this.odd;
        joined.set(bytes, 1);
        bytes = joined;
        this.odd = null;
      }
      if (bytes.length % 2) {
        this.odd = bytes[bytes.length - 1];
        bytes = bytes.subarray(0, bytes.length - 1);
      }
      const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const pcm = new Int16Array(bytes.length / 2);
      for (let i = 0; i < pcm.length; i++) pcm[i] = view.getInt16(2 * i, true);
      this.chunks.push(pcm);
      this.samples += pcm.length;
      test.samplesReceived += pcm.length;
      return pcm;
    }
  }

  // Playback schedules PCM chunks back to back on the audio clock and
  // maps the clock back to a position in the audio, for the highlighting.
  class Playback {
    constructor(ctx, req) {
      this.ctx = ctx;
      this.req = req;
      this.sources = new Set();
      this.marks = []; // {at: clock time, ms: audio position, dur: s}
      this.next = 0;
      this.queuedMs = 0; // audio scheduled so far, in ms
      this.ended = false; // no more chunks will come
      this.stopped = false;
      this.spoken = 0; // words highlighted so far
      this.timer = setInterval(() => this.tick(), TICK);
      this.rendered = ''; // the words and text revision the transcript shows
      test.highlighted = [];
      test.samplesScheduled = 0;
      test.samplesPlayed = 0;
    }

    push(pcm) {
      if (this.stopped || pcm.length === 0) return;
      const buf = this.ctx.createBuffer(1, pcm.length, this.req.rate);
      const ch = buf.getChannelData(0);
      for (let i = 0; i < pcm.length; i++) ch[i] = pcm[i] / 32768;
      const src = this.ctx.createBufferSource();
      src.buffer = buf;
      src.connect(this.ctx.destination);
      const now = this.ctx.currentTime;
      // The first chunk, or one that came after the last ran out, starts
      // a little ahead of now; the others follow the previous one.
      if (this.marks.length === 0 || this.next < now + 0.005) this.next = now + LEAD;
      src.start(this.next);
      this.marks.push({ at: this.next, ms: this.queuedMs, dur: buf.duration });
      this.next += buf.duration;
      this.queuedMs += buf.duration * 1000;
      this.sources.add(src);
      test.samplesScheduled += pcm.length;
      src.onended = () => {
        this.sources.delete(src);
        if (this.stopped) return;
        test.samplesPlayed += pcm.length;
        this.maybeFinish();
      };
    }

    // position returns how much of the audio has been played, in ms.
    position() {
      const now = this.ctx.currentTime;
      let pos = 0;
      for (const m of this.marks) {
        if (m.at > now) break;
        pos = m.ms + Math.min(now - m.at, m.dur) * 1000;
      }
      return pos;
    }

    tick(final) {
      const words = this.req.words;
      // A request whose text grows as it streams (image mode's) counts its
      // text's revisions: the transcript is drawn again for each.
      const rendered = `${words.length}/${this.req.revision || 0}`;
      if (this.rendered !== rendered) {
        this.rendered = rendered;
        this.spans = renderTranscript(this.req);
        this.shown = -1;
        for (let i = 0; i < this.spoken; i++) mark(this.spans[i], 'spoken', true);
      }
      const pos = final ? Infinity : this.position();
      while (this.spoken < words.length && words[this.spoken].startMs <= pos) {
        test.highlighted.push(words[this.spoken].text);
        mark(this.spans[this.spoken], 'spoken', true);
        this.spoken++;
      }
      // The word just reached stays current until a little after its end.
      const cur = this.spoken - 1;
      const show = cur >= 0 && !final && pos < words[cur].endMs + 150 ? cur : -1;
      if (show !== this.shown) {
        if (this.shown >= 0) mark(this.spans[this.shown], 'current', false);
        if (show >= 0) mark(this.spans[show], 'current', true);
        this.shown = show;
        this.current(show >= 0 ? words[show] : null);
      }
    }

    // current tells the request, if it asks (onCurrent), which word is
    // being spoken now, or null.
    current(word) {
      if (this.req.onCurrent) this.req.onCurrent(word);
    }

    // maybeFinish ends the playback once the stream has ended and every
    // scheduled chunk has played.
    maybeFinish() {
      if (!this.ended || this.sources.size > 0 || this.stopped) return;
      this.close(true);
      if (this.req.done) status(doneText(this.req), 'done');
    }

    close(played) {
      clearInterval(this.timer);
      if (played) this.tick(true);
      this.stopped = true;
      $('stop').disabled = true;
      $('play').disabled = this.req.chunks.length === 0;
    }

    stop() {
      if (this.stopped) return;
      this.close(false);
      for (const s of this.sources) {
        try { s.stop(); } catch { /* not started */ }
      }
      this.sources.clear();
      if (this.shown >= 0) {
        mark(this.spans[this.shown], 'current', false);
        this.current(null);
      }
    }
  }

  // renderTranscript writes the request's text with a span per timed
  // word and returns the spans by word index (null for a word whose span
  // overlaps the one before).
  function renderTranscript(req) {
    const p = $('transcript');
    p.classList.remove('muted');
    const parts = [];
    const spans = [];
    let at = 0;
    for (const w of req.words) {
      if (w.start < at) {
        spans.push(null);
        continue;
      }
      if (w.start > at) parts.push(req.text.slice(at, w.start));
      const span = el('span', 'w', w.text);
      span.dataset.charStart = String(w.charStart);
      spans.push(span);
      parts.push(span);
      at = w.end;
    }
    if (at < req.text.length) parts.push(req.text.slice(at));
    p.replaceChildren(...parts);
    return spans;
  }

  function mark(span, cls, on) {
    if (span) span.classList.toggle(cls, on);
  }

  function ms(x) {
    if (!(x >= 0)) return '–';
    return x < 1000 ? `${Math.round(x)} ms` : `${(x / 1000).toFixed(2)} s`;
  }

  function doneText(req) {
    return `Done: ${ms(req.audioMs)} of audio in ${ms(req.total)}.`;
  }

  function showStats(req) {
    $('stat-id').textContent = req.id || '–';
    $('stat-ttfa').textContent = req.firstAudio ? ms(req.firstAudio - req.sent) : '–';
    $('stat-total').textContent = req.total ? ms(req.total) : '–';
    $('stat-audio').textContent = req.audioMs ? `${ms(req.audioMs)}, ${req.rate / 1000} kHz` : '–';
    $('stat-rtf').textContent = req.total && req.audioMs ? (req.total / req.audioMs).toFixed(3) : '–';
  }

  // drawTimings draws a bar per stage: waiting for a replica (admission to
  // bound), bound but waiting for input (to start), working (to first
  // output) and streaming (to end).
  function drawTimings(stages) {
    const box = $('timings');
    box.replaceChildren();
    const span = Math.max(1, ...stages.map((s) => s.end_ms));
    const pct = (x) => `${Math.max(0, Math.min(100, (x / span) * 100))}%`;
    for (const s of stages) {
      const row = el('div', 'trow');
      const first = s.first_output_ms >= 0 ? s.first_output_ms : s.end_ms;
      const label = el('span', 'tlabel');
      label.append(`${s.stage} ${s.name} `, el('small', '', s.replica));
      const track = el('div', 'track');
      const seg = (cls, from, to) => {
        const d = el('span', 'seg ' + cls);
        d.style.left = pct(from);
        d.style.width = pct(Math.max(0, to - from));
        track.append(d);
      };
      seg('queue', 0, s.bound_ms);
      seg('idle', s.bound_ms, s.start_ms);
      seg('work', s.start_ms, first);
      seg('stream', first, s.end_ms);
      const text = `bound ${ms(s.bound_ms)}, started ${ms(s.start_ms)}, first output ${s.first_output_ms >= 0 ? ms(s.first_output_ms) : 'none'}, done ${ms(s.end_ms)}`;
      row.setAttribute('role', 'img');
      row.setAttribute('aria-label', `stage ${s.stage} ${s.name} on ${s.replica}: ${text}`);
      row.append(label, track, el('span', 'tval', text));
      box.append(row);
    }
    const axis = el('div', 'axis');
    axis.append(el('span', '', '0'), el('span', '', ms(span)));
    const axisRow = el('div', 'trow');
    axisRow.setAttribute('aria-hidden', 'true');
    axisRow.append(el('span', ''), axis);
    box.append(axisRow);
    test.stagesDrawn = stages.length;
  }

  function setDownload(req) {
    const a = $('download');
    if (wavURL) URL.revokeObjectURL(wavURL);
    wavURL = '';
    a.removeAttribute('href');
    a.removeAttribute('download');
    a.setAttribute('aria-disabled', 'true');
    test.wavBytes = 0;
    if (!req || req.samples === 0) return;
    const blob = wavBlob(req.chunks, req.samples, req.rate);
    wavURL = URL.createObjectURL(blob);
    a.href = wavURL;
    a.download = `omnistage-${req.id || 'speech'}.wav`;
    a.setAttribute('aria-disabled', 'false');
    test.wavBytes = blob.size;
  }

  // wavBlob builds a WAV file (16-bit mono PCM) of the chunks.
  function wavBlob(chunks, samples, rate) {
    const buf = new ArrayBuffer(44 + 2 * samples);
    const v = new DataView(buf);
    const str = (at, s) => { for (let i = 0; i < s.length; i++) v.setUint8(at + i, s.charCodeAt(i)); };
    str(0, 'RIFF');
    v.setUint32(4, 36 + 2 * samples, true);
    str(8, 'WAVE');
    str(12, 'fmt ');
    v.setUint32(16, 16, true);
    v.setUint16(20, 1, true); // PCM
    v.setUint16(22, 1, true); // mono
    v.setUint32(24, rate, true);
    v.setUint32(28, 2 * rate, true);
    v.setUint16(32, 2, true);
    v.setUint16(34, 16, true);
    str(36, 'data');
    v.setUint32(40, 2 * samples, true);
    let at = 44;
    for (const c of chunks) {
      for (let i = 0; i < c.length; i++, at += 2) v.setInt16(at, c[i], true);
    }
    return new Blob([buf], { type: 'audio/wav' });
  }

  function audio() {
    if (!audioCtx) audioCtx = new AudioContext();
    if (audioCtx.state !== 'running') audioCtx.resume().catch(() => {});
    return audioCtx;
  }

  // stopAll stops the playback and cancels the request in flight.
  function stopAll() {
    if (playback) playback.stop();
    if (current && !current.done) current.controller.abort();
  }

  // speak sends the form as a speech request and plays it as it streams;
  // for a model that reads images, image mode sends its image instead.
  async function speak(ev) {
    ev.preventDefault();
    if (imageMode && imageMode.active()) {
      imageMode.submit();
      return;
    }
    stopAll();
    clearError();
    if (!loaded || loaded.key !== apiKey || loaded.model !== $('model').value) {
      try {
        if (!await load()) return; // a later load replaced it, and shows
      } catch (e) {
        report(e);
        return;
      }
    }
    const text = $('text').value;
    const body = { model: pipeline.name, input: text, response_format: 'pcm', stream_format: 'sse' };
    if ($('voice').value) body.voice = $('voice').value;
    const speed = $('speed').value;
    if (speed !== '') body.speed = Number(speed);
    const timestamps = $('timestamps').checked && !$('timestamps').disabled;
    const req = new Request(text);
    begin(req);
    try {
      const ctx = audio();
      const resp = await fetch('/v1/audio/speech', {
        method: 'POST',
        headers: headers({ 'Content-Type': 'application/json', 'X-Word-Timestamps': String(timestamps), 'X-Stage-Timings': 'true' }),
        body: JSON.stringify(body),
        signal: req.controller.signal,
        cache: 'no-store',
      });
      if (!resp.ok) throw await failure(resp);
      req.id = resp.headers.get('X-Request-Id') || '';
      req.rate = Number(resp.headers.get('X-Sample-Rate')) || 0;
      test.requestId = req.id;
      test.sampleRate = req.rate;
      if (!req.rate) throw new Error('the answer has no X-Sample-Rate header');
      playback = new Playback(ctx, req);
      status('Streaming…', 'streaming');
      showStats(req);
      await readEvents(resp, (e) => onEvent(req, e));
      if (!req.done && !req.failed) {
        throw new Error('the stream ended before speech.audio.done');
      }
    } catch (e) {
      failed(req, e);
    } finally {
      settle(req);
    }
  }

  // begin makes req the page's request: the counters and the download
  // start over, and Stop stops it.
  function begin(req) {
    current = req;
    test.requests++;
    test.samplesReceived = 0;
    test.stagesDrawn = 0;
    test.words = 0;
    test.requestId = '';
    setDownload(null);
    $('stop').disabled = false;
    $('play').disabled = true;
    status('Sending…', 'requesting');
  }

  // failed shows why req failed, unless a newer request replaced it.
  function failed(req, e) {
    if (current !== req) return;
    if (e.name === 'AbortError') {
      status('Stopped.', 'stopped');
    } else {
      report(e);
      if (playback && playback.req === req) playback.stop();
    }
    $('stop').disabled = true;
  }

  // settle ends req's stream: its playback plays what came and ends, and
  // its WAV and times show.
  function settle(req) {
    if (current !== req) return;
    if (playback && playback.req === req) {
      playback.ended = true;
      playback.maybeFinish();
    }
    setDownload(req);
    showStats(req);
  }

  // readEvents calls on with each server-sent event's data, parsed.
  async function readEvents(resp, on) {
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let cut;
      while ((cut = buf.search(/\r?\n\r?\n/)) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut).replace(/^\r?\n\r?\n/, '');
        const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
        if (data) on(JSON.parse(data));
      }
    }
  }

  function onEvent(req, e) {
    switch (e.type) {
      case 'speech.audio.delta': {
        const pcm = req.addAudio(e.audio);
        if (!req.firstAudio) {
          req.firstAudio = performance.now();
          showStats(req);
          status('Playing while it streams…', 'streaming');
        }
        if (playback && playback.req === req) playback.push(pcm);
        break;
      }
      case 'speech.word_timestamps':
        req.addWords(e.words || []);
        break;
      case 'speech.stages':
        drawTimings(e.stages || []);
        break;
      case 'speech.audio.done':
        req.done = true;
        req.total = performance.now() - req.sent;
        req.audioMs = e.usage ? e.usage.audio_duration_ms : (req.samples / req.rate) * 1000;
        showStats(req);
        status(`Streamed: ${ms(req.audioMs)} of audio in ${ms(req.total)}; playing…`, 'playing');
        break;
      case 'error':
        req.failed = true;
        showError(0, e.error || {});
        break;
    }
  }

  // replay plays the last request's audio again from the start.
  function replay() {
    const req = current;
    if (!req || req.chunks.length === 0) return;
    stopAll();
    playback = new Playback(audio(), req);
    for (const c of req.chunks) playback.push(c);
    playback.ended = true;
    $('stop').disabled = false;
    status('Playing again…', 'playing');
  }

  function setup() {
    const ex = $('examples');
    EXAMPLES.forEach(([label, text]) => {
      const b = el('button', '', label);
      b.type = 'button';
      b.setAttribute('aria-label', `Example: ${label}`);
      b.addEventListener('click', () => {
        $('text').value = text;
        $('text').focus();
      });
      ex.append(b);
    });
    $('text').value = EXAMPLES[0][1];
    $('form').addEventListener('submit', speak);
    $('text').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        $('form').requestSubmit();
      }
    });
    $('stop').addEventListener('click', () => {
      stopAll();
      status('Stopped.', 'stopped');
    });
    $('play').addEventListener('click', replay);
    $('download').addEventListener('click', (e) => {
      if ($('download').getAttribute('aria-disabled') === 'true') e.preventDefault();
    });
    $('model').addEventListener('change', () => {
      clearError();
      tryLoad(loadPipeline);
    });
    $('timestamps').addEventListener('change', () => {
      wantWords = $('timestamps').checked;
    });
    $('apikey').addEventListener('change', () => {
      apiKey = $('apikey').value.trim();
      tryLoad();
    });
    $('apikey').addEventListener('input', () => {
      apiKey = $('apikey').value.trim();
    });
    tryLoad();
  }

  setup();

  // addWords adds timestamps to req (a request or a live utterance: its
  // text, its code units' offsets and its words), keeping those whose span
  // lies in the text, in the text's order.
  function addWords(req, words) {
    const n = req.units.length - 1;
    for (const w of words) {
      if (!(w.char_start >= 0 && w.char_start < w.char_end && w.char_end <= n)) continue;
      const start = req.units[w.char_start];
      const end = req.units[w.char_end];
      req.words.push({ start, end, charStart: w.char_start, text: req.text.slice(start, end), startMs: w.start_ms, endMs: w.end_ms });
    }
    req.words.sort((a, b) => a.start - b.start);
    test.words = req.words.length;
  }

  // The page's parts that live mode (live.js) uses too.
  window.omnistageKit = {
    test, audio, status, clearError, showError, report, codeUnits, Playback, ms, addWords,
    Request, headers, failure, begin, failed, settle, showStats, drawTimings, el,
    apiKey: () => apiKey,
    pipeline: () => pipeline,
    // play makes a Playback of req the page's (Stop, Play again), and
    // returns it.
    play: (req) => {
      playback = new Playback(audio(), req);
      return playback;
    },
    // imageMode registers image mode ({active(), show(model or null),
    // submit()}): shown for a model that reads images, it sends the form.
    imageMode: (mode) => { imageMode = mode; },
    // model loads the chosen model if it is not loaded with the current
    // key, and returns its name, or '' when a later load replaced it.
    model: async () => {
      if (!loaded || loaded.key !== apiKey || loaded.model !== $('model').value) {
        if (!await load()) return '';
      }
      return pipeline.name;
    },
    stopSpeech: stopAll,
  };
})();
