// models.mjs drives an omnistage server of several pipelines with the
// official OpenAI Node SDK, unchanged: node models.mjs BASE_URL OUT_DIR
// MODEL... It prints the ids client.models.list() gives as one JSON line
// {"models": [...]}, then, for each MODEL, writes the WAV that
// audio.speech.create returned to OUT_DIR/MODEL.wav and prints
// {"model", "file", "contentType"}; the Go test reads the files.
import fs from "node:fs";
import path from "node:path";
import OpenAI from "openai";

const [baseURL, outDir, ...models] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "unused" });

const ids = [];
for await (const m of client.models.list()) {
  ids.push(m.id);
}
console.log(JSON.stringify({ models: ids }));

for (const model of models) {
  const resp = await client.audio.speech.create({ model, input: "Each pipeline speaks in its own way.", response_format: "wav" });
  const file = path.join(outDir, `${model}.wav`);
  fs.writeFileSync(file, Buffer.from(await resp.arrayBuffer()));
  console.log(JSON.stringify({ model, file, contentType: resp.headers.get("content-type") }));
}
