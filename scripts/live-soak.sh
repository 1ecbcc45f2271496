#!/usr/bin/env bash
# live-soak.sh holds one WebSocket session (WS /v1/audio/speech/stream) on
# `omnistage serve` for a while (LIVE_SOAK_DURATION seconds, default 600),
# fed as an LLM would feed it: answers of five sentences, each written word
# by word over about 2 s, then input.done, one after another. It checks that
# no audio is lost (every sentence's bytes are those audio.done counts, every
# utterance's those session.done counts) and that each answer's audio is,
# byte for byte, that of its text posted whole to /v1/audio/speech; it
# samples the server's resident memory every 10 s and fails when it grew by
# 5 % or more from the end of the first sixth of the run to the end. Needs
# Debian's python3-websockets (scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${LIVE_SOAK_DURATION:-600}
# shellcheck source=scripts/serve-lib.sh
. scripts/serve-lib.sh
start_server live-soak

/usr/bin/python3 - "$addr" "$duration" "$server" <<'EOF'
import asyncio, json, sys, time, urllib.request
import websockets

addr, duration, pid = sys.argv[1], float(sys.argv[2]), sys.argv[3]
SENTENCES = [
    "The weather today is mild, with a light breeze from the west.",
    "Your train leaves from platform four at ten past nine.",
    "I found three restaurants nearby that are open late.",
    "The first one serves Italian food and has good reviews.",
    "Would you like me to book a table for two?",
    "The meeting moved to Thursday afternoon at three.",
    "Remember to bring the report and the budget figures.",
    "Traffic on the bridge is heavy, so leave a little early.",
    "The package should arrive before noon tomorrow.",
    "Let me know if there is anything else I can do.",
]

def rss_kb():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

def whole(text):
    body = json.dumps({"model": "tts", "input": text, "response_format": "pcm"}).encode()
    req = urllib.request.Request(f"http://{addr}/v1/audio/speech", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return resp.read()

async def main():
    start, samples, failures = time.monotonic(), [], []
    async def sample():
        while True:
            samples.append((time.monotonic() - start, rss_kb()))
            await asyncio.sleep(10)
    sampler = asyncio.create_task(sample())
    async with websockets.connect(f"ws://{addr}/v1/audio/speech/stream", max_size=None) as ws:
        await ws.send(json.dumps({"type": "session.config", "model": "tts", "response_format": "pcm", "stream_audio": True}))
        n = 0
        while time.monotonic() - start < duration:
            answer = [SENTENCES[(n * 5 + i) % len(SENTENCES)] for i in range(5)]
            text = "".join(w + " " for sentence in answer for w in sentence.split(" "))
            async def feed():
                for sentence in answer:
                    words = sentence.split(" ")
                    for w in words:
                        await ws.send(json.dumps({"type": "input.text", "text": w + " "}))
                        await asyncio.sleep(2 / len(words))
                await ws.send(json.dumps({"type": "input.done"}))
            feeder = asyncio.create_task(feed())
            audio, sentence_bytes = bytearray(), 0
            async for msg in ws:
                if isinstance(msg, bytes):
                    audio += msg
                    sentence_bytes += len(msg)
                    continue
                ev = json.loads(msg)
                if ev["type"] == "audio.done":
                    if ev["total_bytes"] != sentence_bytes or ev.get("error"):
                        failures.append(f"utterance {n} sentence {ev['sentence_index']}: audio.done says {ev['total_bytes']} bytes, {sentence_bytes} came")
                    sentence_bytes = 0
                elif ev["type"] == "error":
                    failures.append(f"utterance {n}: error {ev}")
                elif ev["type"] == "session.done":
                    if ev["total_bytes"] != len(audio):
                        failures.append(f"utterance {n}: session.done says {ev['total_bytes']} bytes, {len(audio)} came")
                    break
            await feeder
            if bytes(audio) != whole(text):
                failures.append(f"utterance {n}: its audio ({len(audio)} bytes) is not that of its text posted whole")
            n += 1
        await ws.send(json.dumps({"type": "session.close"}))
    sampler.cancel()
    samples.append((time.monotonic() - start, rss_kb()))
    ref = next(kb for t, kb in samples if t >= duration / 6)
    end = samples[-1][1]
    print(f"live-soak: {n} utterances in {samples[-1][0]:.0f} s; RSS {ref} kB at {duration/6:.0f} s, {end} kB at the end ({(end - ref) / ref:+.1%}); min {min(kb for _, kb in samples)} kB, max {max(kb for _, kb in samples)} kB")
    for f in failures:
        print("live-soak: FAIL:", f)
    if failures or end >= ref * 1.05:
        sys.exit(1)

asyncio.run(main())
EOF
