// check.mjs drives an omnistage server with the official OpenAI Node SDK,
// unchanged: node check.mjs BASE_URL OUT_DIR. For each case it writes the
// audio the SDK returned to OUT_DIR/NAME.FORMAT and prints one JSON line
// {"name", "file", "contentType"}; the Go test decodes the files.
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";

const [baseURL, outDir] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "unused" });

const cases = [
  { name: "default", args: { model: "tts-1", voice: "alloy", input: "Hello from the OpenAI SDK." }, ext: "mp3" },
  { name: "voice-object", args: { model: "tts-1", voice: { id: "onyx" }, input: "A voice given as an object." }, ext: "mp3" },
  ...["mp3", "opus", "aac", "flac", "wav", "pcm"].map((f) => ({
    name: "format-" + f,
    args: { model: "gpt-4o-mini-tts", voice: "nova", input: "Every format.", response_format: f },
    ext: f,
  })),
];

for (const c of cases) {
  const resp = await client.audio.speech.create(c.args);
  const file = path.join(outDir, `${c.name}.${c.ext}`);
  fs.writeFileSync(file, Buffer.from(await resp.arrayBuffer()));
  console.log(JSON.stringify({ name: c.name, file, contentType: resp.headers.get("content-type") }));
}
