// check.mjs drives omnistage with LiveKit's ElevenLabs plugin
// (@livekit/agents-plugin-elevenlabs, pinned in package.json), unchanged
// but for its base URL. With MODE stream it streams TEXT as an LLM would
// (a word every DELAY ms) over the streaming-input WebSocket; with MODE
// sentences it pushes TEXT a sentence at a time, each followed by a flush
// (as an agent flushes a segment of its LLM's answer), DELAY ms apart;
// with MODE synthesize it asks for TEXT whole (POST
// /v1/text-to-speech/VOICE/stream).
// It prints one JSON line: the audio's bytes in base64, the plugin's
// timed transcript, and when (ms from the start) the last text was pushed
// and the first audio came.
//
//   node check.mjs MODE BASE_URL VOICE ENCODING DELAY_MS TEXT
//
// The server's API key, if any, comes in $ELEVEN_API_KEY, as the plugin
// takes it.
import { initializeLogger, tts as ttsAPI } from '@livekit/agents';
import { TTS } from '@livekit/agents-plugin-elevenlabs';

const [mode, base, voiceId, encoding, delay, text] = process.argv.slice(2);
initializeLogger({ pretty: false, level: 'warn' });
const tts = new TTS({ apiKey: process.env.ELEVEN_API_KEY || 'none', baseURL: `${base}/v1`, voiceId, encoding, model: 'eleven_turbo_v2_5' });
const t0 = performance.now();
let lastText = 0;
const stream = mode === 'synthesize' ? tts.synthesize(text) : tts.stream();
const feed = mode === 'synthesize' ? Promise.resolve() : (async () => {
  const pieces = mode === 'sentences' ? text.match(/[^.!?]+[.!?]+\s*/g) : text.split(' ').map((w, i) => (i === 0 ? w : ' ' + w));
  for (const piece of pieces) {
    stream.pushText(piece);
    if (mode === 'sentences') stream.flush();
    lastText = performance.now() - t0;
    await new Promise((r) => setTimeout(r, Number(delay)));
  }
  stream.endInput();
})();
const chunks = [];
const words = [];
let firstAudio = -1;
for await (const ev of stream) {
  if (ev === ttsAPI.SynthesizeStream.END_OF_STREAM) break;
  if (!ev.frame) continue;
  if (firstAudio < 0) firstAudio = performance.now() - t0;
  const f = ev.frame;
  chunks.push(Buffer.from(f.data.buffer, f.data.byteOffset, f.data.byteLength));
  for (const w of ev.timedTranscripts ?? []) words.push({ text: w.text, start: w.startTime, end: w.endTime });
  if (ev.final) break;
}
await feed;
await tts.close();
// The plugin's logger keeps the process alive: exit once the line is out.
process.stdout.write(JSON.stringify({ audio: Buffer.concat(chunks).toString('base64'), words, lastTextMs: lastText, firstAudioMs: firstAudio }) + '\n', () => process.exit(0));
