// The playground's live mode: text typed in the live box (or fed word by
// word from the Text box, as an LLM streams its tokens) goes out as it is
// written over WS /v1/audio/speech/stream; each sentence is played as soon
// as its audio comes, and each word lit as it is spoken when the model
// times words. Done ends the utterance (input.done), Stop barges in
// (input.cancel): the audio stops at once, and the page says what of the
// text was heard. Counters for tests live in window.omnistagePlayground.live.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const kit = window.omnistageKit;
  const test = kit.test;
  test.live = {
    state: 'off', utterances: 0, sentences: [], firstAudioSent: -1, beforeDone: [],
    cancelled: null, audioAfterCancelled: 0, bytes: 0, errors: [],
  };

  let ws = null; // the session, open or opening
  let wsConfig = ''; // the session.config it was opened with, and the key
  let outbox = []; // events waiting for the session to open
  let sent = ''; // the live box's text sent so far
  let open = null; // the utterance taking text
  let next = 0; // the next utterance's index, as the server counts them
  const going = new Map(); // index → utterances not ended
  const ended = new Set(); // indexes ended by audio.cancelled
  let feeding = 0; // the feed's timer
  let connecting = null; // connect's promise, while it runs
  let speaking = null; // the utterance whose audio comes
  let chain = Promise.resolve(); // the page's events, in order

  // inOrder runs fn after the events before it, once a session is open or
  // opening.
  function inOrder(fn) {
    chain = chain.then(async () => {
      if (await session()) fn();
    });
  }

  // Utterance is one utterance: its text as sent, and its audio and words
  // as they come, in the shape Playback reads.
  class Utterance {
    constructor(index) {
      this.index = index;
      this.text = '';
      this.units = [0];
      this.words = [];
      this.chunks = [];
      this.samples = 0;
      this.rate = 0;
      this.sent = performance.now();
      this.done = false;
      this.inputDone = false;
      this.playback = null;
    }

    add(text) {
      this.text += text;
      this.units = kit.codeUnits(this.text);
    }

    addWords(words) { kit.addWords(this, words); }
  }

  function config(model) {
    const c = { type: 'session.config', model, response_format: 'pcm', stream_audio: true };
    if ($('voice').value) c.voice = $('voice').value;
    const speed = $('speed').value;
    if (speed !== '') c.speed = Number(speed);
    c.word_timestamps = $('timestamps').checked && !$('timestamps').disabled;
    return c;
  }

  // base64url is s's UTF-8 bytes in unpadded base64url: the API key as a
  // subprotocol.
  function base64url(s) {
    const bytes = new TextEncoder().encode(s);
    let bin = '';
    for (const b of bytes) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  // session returns once a session with the form's settings is open or
  // opening (false if it cannot be), one call at a time.
  function session() {
    if (!connecting) {
      connecting = connect().catch((e) => {
        kit.report(e);
        return false;
      }).finally(() => { connecting = null; });
    }
    return connecting;
  }

  // connect opens a session with the form's settings, unless the one open
  // has them; a session whose settings changed is closed between
  // utterances.
  async function connect() {
    const model = await kit.model();
    if (!model) return false;
    const cfg = JSON.stringify(config(model)) + '\n' + kit.apiKey();
    if (ws && (wsConfig === cfg || going.size > 0)) return true;
    if (ws) ws.close(1000);
    wsConfig = cfg;
    next = 0;
    const key = kit.apiKey();
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/v1/audio/speech/stream';
    const s = new WebSocket(url, key ? ['omnistage', 'base64url.bearer.omnistage.' + base64url(key)] : []);
    s.binaryType = 'arraybuffer';
    ws = s;
    s.onopen = () => {
      if (ws !== s) return;
      s.send(JSON.stringify(config(model)));
      for (const ev of outbox) s.send(JSON.stringify(ev));
      outbox = [];
      test.live.state = 'open';
    };
    s.onmessage = (e) => { if (ws === s) onMessage(e.data); };
    s.onclose = (e) => {
      if (ws !== s) return;
      ws = null;
      test.live.state = 'closed';
      if (going.size > 0 || e.code !== 1000) {
        if (!$('error').textContent) kit.showError(0, { message: `the live session closed (${e.code}${e.reason ? ': ' + e.reason : ''})` });
        stopPlayback();
        going.clear();
        open = null;
      }
    };
    return true;
  }

  function send(ev) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(ev));
    else outbox.push(ev);
  }

  // sendText sends a piece of the live box's text, beginning an utterance
  // if none takes text.
  function sendText(text) {
    if (!text) return;
    if (!open) {
      open = new Utterance(next++);
      going.set(open.index, open);
      test.samplesReceived = 0;
      kit.clearError();
      kit.status('Live: speaking as it is written…', 'live');
    }
    open.add(text);
    send({ type: 'input.text', text });
  }

  // typed takes the live box's new text; what was sent cannot change.
  function typed() {
    const box = $('live-text');
    if (!box.value.startsWith(sent)) {
      box.value = sent;
      return;
    }
    const piece = box.value.slice(sent.length);
    if (!piece) return;
    sent = box.value;
    inOrder(() => sendText(piece));
  }

  function done() {
    stopFeed();
    inOrder(() => {
      if (!open) return;
      open.inputDone = true;
      open = null;
      send({ type: 'input.done' });
    });
  }

  // stop barges in: the audio stops now, the utterances are cancelled.
  function stop() {
    stopFeed();
    stopPlayback();
    kit.status('Stopped: barging in…', 'stopped');
    if (!ws) return;
    if (going.size === 0) {
      next++; // the server answers a cancel of nothing with that index
    }
    open = null;
    send({ type: 'input.cancel' });
  }

  function stopPlayback() {
    for (const u of going.values()) {
      u.stopped = true;
      if (u.playback) u.playback.stop();
    }
  }

  // feed sends the Text box word by word, at the chosen rate, into the
  // live box, then ends the utterance.
  function feed() {
    stopFeed();
    const words = $('text').value.match(/\s*\S+/g) || [];
    const rate = Math.min(50, Math.max(1, Number($('feed-rate').value) || 8));
    let i = 0;
    const step = () => {
      if (i >= words.length) {
        feeding = 0;
        done();
        return;
      }
      const box = $('live-text');
      box.value = sent + words[i++];
      typed();
      feeding = setTimeout(step, 1000 / rate);
    };
    step();
  }

  function stopFeed() {
    clearTimeout(feeding);
    feeding = 0;
  }

  function onMessage(data) {
    if (typeof data !== 'string') return onAudio(data);
    const ev = JSON.parse(data);
    const u = going.get(ev.utterance_index);
    switch (ev.type) {
      case 'audio.start':
        if (!u) return;
        u.rate = ev.sample_rate;
        test.sampleRate = ev.sample_rate;
        test.live.sentences.push(ev.sentence_text);
        if (test.live.firstAudioSent < 0) test.live.firstAudioSent = [...sent].length;
        if (!u.playback && !u.heard) {
          u.heard = true;
          test.live.beforeDone.push(!u.inputDone);
        }
        if (!u.playback && !u.stopped) u.playback = new kit.Playback(kit.audio(), u);
        speaking = u;
        break;
      case 'word_timestamps':
        if (u) u.addWords(ev.words || []);
        break;
      case 'session.done':
        if (!u) return;
        going.delete(u.index);
        u.done = true;
        u.total = performance.now() - u.sent;
        u.audioMs = u.rate ? (u.samples / u.rate) * 1000 : 0;
        test.live.utterances++;
        if (u.playback) {
          u.playback.ended = true;
          u.playback.maybeFinish();
        } else {
          kit.status('Live: done.', 'done');
        }
        break;
      case 'audio.cancelled':
        going.delete(ev.utterance_index);
        ended.add(ev.utterance_index);
        if (u && u.playback) u.playback.stop();
        test.live.cancelled = ev;
        kit.status(`Stopped: ${ev.total_bytes} bytes of audio were sent; heard up to “${ev.heard_text}”.`, 'stopped');
        break;
      case 'error':
        test.live.errors.push(ev);
        kit.showError(0, ev);
        break;
    }
  }

  function onAudio(buf) {
    const u = speaking;
    if (!u || ended.has(u.index)) {
      test.live.audioAfterCancelled++;
      return;
    }
    test.live.bytes += buf.byteLength;
    const pcm = new Int16Array(buf, 0, buf.byteLength >> 1);
    u.chunks.push(pcm);
    u.samples += pcm.length;
    test.samplesReceived += pcm.length;
    if (u.playback && !u.stopped) u.playback.push(pcm);
  }

  function setup() {
    $('live').addEventListener('change', () => {
      const on = $('live').checked;
      $('live-box').hidden = !on;
      test.live.state = on ? 'ready' : 'off';
      if (on) {
        kit.stopSpeech();
        $('live-text').focus();
      } else if (ws) {
        stop();
        ws.close(1000);
      }
    });
    $('live-text').addEventListener('input', typed);
    $('live-text').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        done();
      }
    });
    $('feed').addEventListener('click', feed);
    $('live-done').addEventListener('click', done);
    $('live-stop').addEventListener('click', stop);
  }

  setup();
})();
